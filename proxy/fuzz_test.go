package proxy

import (
	"encoding/binary"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// seedMsg is cmd in an OP_MSG, a seed of the fuzz targets.
func seedMsg(f *testing.F, cmd bson.D) []byte {
	body, err := bson.Marshal(cmd)
	if err != nil {
		f.Fatal(err)
	}
	msg, err := wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: body})
	if err != nil {
		f.Fatal(err)
	}
	return msg
}

// FuzzRequest feeds a client's message, whatever its bytes, through what
// the proxy reads of it before routing: the OP_MSG decoding, the command's
// fields, a hello's, a $readPreference, and the in-place edits of
// maxTimeMS and a getMore's cursor id. None may panic or read out of
// bounds, whatever the bytes.
func FuzzRequest(f *testing.F) {
	for _, cmd := range []bson.D{
		{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{}}, {Key: "maxTimeMS", Value: int32(5)}, {Key: "$db", Value: "db"},
			{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondary"}, {Key: "tags", Value: bson.A{bson.D{{Key: "dc", Value: "a"}}}}, {Key: "maxStalenessSeconds", Value: 90}}}},
		{{Key: "getMore", Value: int64(7)}, {Key: "collection", Value: "c"}, {Key: "maxTimeMS", Value: 1.5}, {Key: "$db", Value: "db"}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}, bson.D{{Key: "$out", Value: "x"}}}}, {Key: "$db", Value: "db"}},
		{{Key: "hello", Value: 1}, {Key: "client", Value: bson.D{{Key: "application", Value: bson.D{{Key: "name", Value: "a"}}}}},
			{Key: "compression", Value: bson.A{"zstd"}}, {Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: bson.NewObjectID()}, {Key: "counter", Value: int64(0)}}},
			{Key: "maxAwaitTimeMS", Value: 10}, {Key: "saslSupportedMechs", Value: "admin.a"}, {Key: "$db", Value: "admin"}},
		{{Key: "insert", Value: "c"}, {Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}}, {Key: "txnNumber", Value: int64(1)},
			{Key: "autocommit", Value: false}, {Key: "startTransaction", Value: true}, {Key: "$db", Value: "db"}},
	} {
		f.Add(seedMsg(f, cmd))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) >= 4 {
			binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
		}
		_, m, err := wire.DecodeMsg(msg)
		if err != nil {
			return
		}
		req, err := parseRequest(m.Body)
		if err != nil {
			return
		}
		retryKindOf(&req)
		readsBy(&req)
		if req.readPref != nil {
			parseReadPref(req.readPref)
		}
		if req.maxTimeOff != 0 {
			req.setMaxTime(1)
		}
		if req.firstType == 0x12 {
			putInt64(req.body, req.firstOff, getInt64(req.body, req.firstOff))
		}
		parseHello(m.Body, false)
		if err := bson.Raw(req.body).Validate(); err != nil {
			t.Fatalf("the in-place edits broke the document: %v", err)
		}
	})
}

// FuzzOpQuery feeds arbitrary bytes to the OP_QUERY parser.
func FuzzOpQuery(f *testing.F) {
	doc, _ := bson.Marshal(bson.D{{Key: "isMaster", Value: 1}})
	msg := make([]byte, 16, 64)
	msg = binary.LittleEndian.AppendUint32(msg, 0)
	msg = append(append(msg, "admin.$cmd"...), 0)
	msg = binary.LittleEndian.AppendUint64(msg, 0)
	f.Add(append(msg, doc...))
	f.Fuzz(func(t *testing.T, msg []byte) {
		ns, cmd, ok := parseOpQuery(msg)
		if ok && (cmd.Validate() != nil || len(ns) > len(msg)) {
			t.Fatalf("parseOpQuery accepted %q, %v", ns, cmd)
		}
	})
}

// FuzzReply feeds a server's reply, any valid document, to what the proxy
// reads and edits of it: the cursor id (rewritten in place), the error
// code and labels, a state change error's topologyVersion.
func FuzzReply(f *testing.F) {
	for _, d := range []bson.D{
		{{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(5)}, {Key: "ns", Value: "db.c"}, {Key: "firstBatch", Value: bson.A{}}}}, {Key: "ok", Value: 1.0}},
		{{Key: "ok", Value: 0.0}, {Key: "code", Value: int32(10107)}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}, {Key: "topologyVersion", Value: bson.D{}}},
		{{Key: "ok", Value: 1.0}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(91)}}}},
	} {
		b, _ := bson.Marshal(d)
		f.Add(b)
	}
	p := &Proxy{}
	p.cfg.Store(&Config{})
	cc := &clientConn{p: p}
	f.Fuzz(func(t *testing.T, reply []byte) {
		if bson.Raw(reply).Validate() != nil {
			return
		}
		if off := cursorIDOffset(reply); off != 0 {
			putInt64(reply, off, getInt64(reply, off)+1)
		}
		replyCode(reply)
		hasLabel(reply, labelTransientTxn)
		for _, kind := range []retryKind{retryRead, retryWrite, retryEnd} {
			retryable(kind, reply, nil)
		}
		if out := cc.relay(reply); bson.Raw(out).Validate() != nil {
			t.Fatalf("relay made an invalid document of %v", bson.Raw(reply))
		}
		if bson.Raw(reply).Validate() != nil {
			t.Fatal("the cursor id's rewrite broke the document")
		}
	})
}
