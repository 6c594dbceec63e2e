package wire_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// A command goes out as an OP_MSG, compressed when allowed; the reply comes
// back, possibly compressed, and is checked.
func Example() {
	cmd, _ := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	req, _ := wire.AppendMsg(nil, wire.NextRequestID(), 0, &wire.Msg{Body: cmd})
	if wire.Compressible("ping") {
		req, _ = wire.AppendCompressed(nil, req, wire.CompressorZstd, wire.ZlibDefaultLevel)
	}
	var conn bytes.Buffer // stands for the network connection
	_ = wire.WriteMessage(&conn, req)

	raw, _ := wire.ReadMessage(&conn, wire.DefaultMaxMessageSize)
	hdr, msg, err := wire.DecodeReply(raw, wire.DefaultMaxMessageSize)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(hdr.OpCode, msg.Body)
	fmt.Println(wire.CheckReply(msg.Body))
	// Output:
	// OP_MSG {"ping": {"$numberInt":"1"},"$db": "admin"}
	// wire: reply has no "ok" field
}

// A server or a proxy reads message after message from a connection: read
// through a *bufio.Reader and decoded into one Msg, each costs only its
// own bytes.
func ExampleDecodeMsgInto() {
	var conn bytes.Buffer // stands for the network connection
	for i, name := range []string{"ping", "hello"} {
		cmd, _ := bson.Marshal(bson.D{{Key: name, Value: 1}, {Key: "$db", Value: "admin"}})
		req, _ := wire.AppendMsg(nil, int32(i+1), 0, &wire.Msg{Body: cmd})
		_ = wire.WriteMessage(&conn, req)
	}

	br := bufio.NewReader(&conn)
	var m wire.Msg
	for {
		raw, err := wire.ReadMessage(br, wire.DefaultMaxMessageSize)
		if err != nil {
			fmt.Println(errors.Is(err, io.EOF))
			return
		}
		hdr, err := wire.DecodeMsgInto(&m, raw)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(hdr.RequestID, m.Body.Index(0).Key())
	}
	// Output:
	// 1 ping
	// 2 hello
	// true
}
