package wire_test

import (
	"bytes"
	"fmt"

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
