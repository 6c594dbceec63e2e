package wire_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

func TestMsgRoundTrip(t *testing.T) {
	cmd := doc(t, bson.D{{Key: "insert", Value: "coll"}, {Key: "$db", Value: "test"}})
	d1 := doc(t, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: "a"}})
	d2 := doc(t, bson.D{{Key: "_id", Value: 2}, {Key: "y", Value: bson.D{{Key: "nested", Value: true}}}})
	d3 := doc(t, bson.D{})
	cases := map[string]*wire.Msg{
		"body only":          {Body: cmd},
		"empty body":         {Body: d3},
		"one sequence":       {Body: cmd, Sequences: []wire.Sequence{{Identifier: "documents", Documents: []bson.Raw{d1, d2}}}},
		"several sequences":  {Body: cmd, Sequences: []wire.Sequence{{Identifier: "documents", Documents: []bson.Raw{d1}}, {Identifier: "updates", Documents: []bson.Raw{d2, d3, d1}}, {Identifier: "deletes", Documents: nil}}},
		"checksum":           {Flags: wire.ChecksumPresent, Body: cmd},
		"checksum+sequences": {Flags: wire.ChecksumPresent, Body: cmd, Sequences: []wire.Sequence{{Identifier: "documents", Documents: []bson.Raw{d1, d2}}}},
		"moreToCome":         {Flags: wire.MoreToCome, Body: cmd},
		"exhaustAllowed":     {Flags: wire.ExhaustAllowed | wire.ChecksumPresent, Body: cmd},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			prefix := []byte("prefix")
			out, err := wire.AppendMsg(prefix, 42, 17, m)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(out, prefix) {
				t.Fatalf("AppendMsg did not keep dst's contents")
			}
			raw := out[len(prefix):]
			h, got, err := wire.DecodeMsg(raw)
			if err != nil {
				t.Fatal(err)
			}
			want := wire.Header{MessageLength: int32(len(raw)), RequestID: 42, ResponseTo: 17, OpCode: wire.OpMsg}
			if h != want {
				t.Errorf("header %v, want %v", h, want)
			}
			if !equalMsg(got, m) {
				t.Errorf("decoded %+v, want %+v", got, m)
			}
			if m.Flags&wire.ChecksumPresent != 0 {
				sum := binary.LittleEndian.Uint32(raw[len(raw)-4:])
				if want := crc32.Checksum(raw[:len(raw)-4], crc32.MakeTable(crc32.Castagnoli)); sum != want {
					t.Errorf("checksum %#x, want CRC-32C %#x", sum, want)
				}
			}
			// DecodeReply takes uncompressed messages as they are.
			if _, got2, err := wire.DecodeReply(raw, 0); err != nil || !equalMsg(got2, m) {
				t.Errorf("DecodeReply: %v, %+v", err, got2)
			}
			// Into a Msg that held another message, nothing of which
			// may remain.
			stale := func() wire.Msg {
				return wire.Msg{Flags: wire.MoreToCome, Body: d1, Sequences: []wire.Sequence{{Identifier: "stale", Documents: []bson.Raw{d2}}}}
			}
			into := stale()
			if h2, err := wire.DecodeMsgInto(&into, raw); err != nil || h2 != h || !equalMsg(&into, m) {
				t.Errorf("DecodeMsgInto: %v, %v, %+v", err, h2, into)
			}
			into = stale()
			if h2, err := wire.DecodeReplyInto(context.Background(), &into, raw, wire.DecodeOptions{}); err != nil || h2 != h || !equalMsg(&into, m) {
				t.Errorf("DecodeReplyInto: %v, %v, %+v", err, h2, into)
			}
		})
	}
}

func TestAppendMsgReusesBuffer(t *testing.T) {
	m := &wire.Msg{Body: doc(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})}
	buf, err := wire.AppendMsg(nil, 1, 0, m)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		buf, err = wire.AppendMsg(buf[:0], 2, 0, m)
	})
	if err != nil || allocs != 0 {
		t.Errorf("AppendMsg into a reused buffer: %v allocations, err %v", allocs, err)
	}
}

// TestDecodeMsgIntoAllocs: a message without sequences decodes into a
// reused Msg without allocating, as a connection and the proxy decode
// every message.
func TestDecodeMsgIntoAllocs(t *testing.T) {
	raw, err := wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: doc(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})})
	if err != nil {
		t.Fatal(err)
	}
	var m wire.Msg
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := wire.DecodeMsgInto(&m, raw); err != nil {
			t.Fatal(err)
		}
		if _, err := wire.DecodeReplyInto(context.Background(), &m, raw, wire.DecodeOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("DecodeMsgInto and DecodeReplyInto: %v allocations, want 0", allocs)
	}
}

// TestDecodeHandBuilt decodes bytes written out by hand from the spec.
func TestDecodeHandBuilt(t *testing.T) {
	msg := []byte{
		0x33, 0, 0, 0, // messageLength 51
		0x01, 0, 0, 0, // requestID 1
		0x09, 0, 0, 0, // responseTo 9
		0xdd, 0x07, 0, 0, // opCode 2013
		0x02, 0, 0, 0, // flagBits: moreToCome
		0x01,          // section kind 1
		0x0e, 0, 0, 0, // size 14: itself, "docs\x00", {}
		'd', 'o', 'c', 's', 0, // identifier
		0x05, 0, 0, 0, 0, // {}
		0x00,                                                      // section kind 0
		0x0f, 0, 0, 0, 0x10, 'p', 'i', 'n', 'g', 0, 1, 0, 0, 0, 0, // {ping: int32(1)}
	}
	h, m, err := wire.DecodeMsg(msg)
	if err != nil {
		t.Fatal(err)
	}
	if h != (wire.Header{MessageLength: 51, RequestID: 1, ResponseTo: 9, OpCode: wire.OpMsg}) {
		t.Errorf("header %v", h)
	}
	if m.Flags != wire.MoreToCome {
		t.Errorf("flags %v", m.Flags)
	}
	if v, ok := m.Body.Lookup("ping").Int32OK(); !ok || v != 1 {
		t.Errorf("body %v", m.Body)
	}
	if len(m.Sequences) != 1 || m.Sequences[0].Identifier != "docs" || len(m.Sequences[0].Documents) != 1 || len(m.Sequences[0].Documents[0]) != 5 {
		t.Errorf("sequences %+v", m.Sequences)
	}
}

func TestDecodeMsgOptionalFlagBitsIgnored(t *testing.T) {
	d := doc(t, bson.D{{Key: "ok", Value: 1}})
	_, m, err := wire.DecodeMsg(rawMsg(1<<20|1<<31|uint32(wire.ExhaustAllowed), bodySec(d)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Flags != wire.Flag(1<<20|1<<31)|wire.ExhaustAllowed {
		t.Errorf("flags %v", m.Flags)
	}
}

func TestDecodeMsgErrors(t *testing.T) {
	d := doc(t, bson.D{{Key: "ok", Value: 1}})
	d2 := doc(t, bson.D{{Key: "n", Value: "x"}})
	badBSON := []byte{0x0c, 0, 0, 0, 0x7f, 'a', 0, 1, 2, 3, 4, 0} // element type 0x7f
	good := rawMsg(0, bodySec(d))
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	badSum := withChecksum(rawMsg(uint32(wire.ChecksumPresent), bodySec(d)))
	badSum[len(badSum)-1] ^= 0xff
	flipped := withChecksum(rawMsg(uint32(wire.ChecksumPresent), bodySec(d)))
	flipped[25] ^= 0x01 // a byte of the body

	cases := []struct {
		name string
		msg  []byte
		want []string
	}{
		{"empty", nil, []string{"header needs 16 bytes, got 0"}},
		{"short header", good[:10], []string{"header needs 16 bytes, got 10"}},
		{"length larger than buffer", good[:len(good)-1], []string{"messageLength is 34", "holds only 33", "truncated"}},
		{"trailing bytes after message", cat(good, []byte{0xde, 0xad}), []string{"messageLength is 34", "2 trailing bytes"}},
		{"negative length", mutate(func(b []byte) []byte { copy(b, le32(-5)); return b }), []string{"messageLength is -5"}},
		{"OP_QUERY", frame(1, 0, 2004, le32(0)), []string{"unsupported OP_QUERY (2004)", "OP_MSG (2013)"}},
		{"unknown opcode", frame(1, 0, 9999, le32(0)), []string{"unsupported opcode 9999"}},
		{"OP_COMPRESSED", frame(1, 0, wire.OpCompressed, le32(0)), []string{"OP_COMPRESSED", "decompress it first"}},
		{"no sections", rawMsg(0), []string{"shorter than the 26-byte minimum"}},
		{"unknown required flag", rawMsg(1<<2, bodySec(d)), []string{"unknown required flag bits 0x4"}},
		{"unknown required flag 15", rawMsg(1<<15|uint32(wire.MoreToCome), bodySec(d)), []string{"unknown required flag bits 0x8000"}},
		{"bad checksum", badSum, []string{"checksum mismatch"}},
		{"corrupted byte under checksum", flipped, []string{"checksum mismatch"}},
		{"checksum flag without room", rawMsg(uint32(wire.ChecksumPresent), bodySec(d[:5:5])), []string{"checksumPresent", "too short"}},
		{"two body sections", rawMsg(0, bodySec(d), bodySec(d2)), []string{"second body section (kind 0)", "exactly one"}},
		{"no body section", rawMsg(0, seqSec("documents", d), seqSec("updates", d)), []string{"no body section (kind 0)"}},
		{"unknown section kind", rawMsg(0, bodySec(d), []byte{2, 5, 0, 0, 0, 0}), []string{"unknown section kind 2 at offset 34"}},
		{"body length below 5", rawMsg(0, cat([]byte{0}, le32(4), []byte{0, 0, 0, 0, 0})), []string{"document length 4 is below the BSON minimum of 5"}},
		{"body length negative", rawMsg(0, cat([]byte{0}, le32(-1), []byte{0, 0, 0, 0, 0})), []string{"document length -1 is below"}},
		{"body length overruns", rawMsg(0, cat([]byte{0}, le32(int32(len(d)+3)), d[4:])), []string{"body section at offset 20", "overruns its section by 3 bytes"}},
		{"body section truncated", rawMsg(0, bodySec(d), []byte{0, 1, 2}), []string{"body section at offset 34", "needs 4 bytes, only 2 remain"}},
		{"invalid BSON body", rawMsg(0, bodySec(badBSON)), []string{"body section at offset 20", "invalid BSON document of 12 bytes"}},
		{"body missing final NUL", rawMsg(0, bodySec(cat(d[:len(d)-1], []byte{1}))), []string{"invalid BSON"}},
		{"sequence size overflow", rawMsg(0, bodySec(d), cat([]byte{1}, le32(100), []byte("docs\x00"), d)), []string{"document sequence section at offset 34", "size 100 overruns the message"}},
		{"sequence size underflow", rawMsg(0, bodySec(d), cat([]byte{1}, le32(3), []byte("x\x00"))), []string{"size 3 is too small"}},
		{"sequence size cuts a document", rawMsg(0, bodySec(d), cat([]byte{1}, le32(int32(4+5+len(d)-2)), []byte("docs\x00"), d), []byte{0, 0}), []string{"identifier \"docs\": document 0", "overruns its section by 2 bytes"}},
		{"sequence trailing bytes", rawMsg(0, bodySec(d), cat([]byte{1}, le32(int32(4+5+len(d)+2)), []byte("docs\x00"), d, []byte{9, 9})), []string{"document 1", "needs 4 bytes, only 2 remain"}},
		{"unterminated identifier", rawMsg(0, bodySec(d), cat([]byte{1}, le32(8), []byte("docs"))), []string{"identifier cstring is not NUL-terminated"}},
		{"empty identifier", rawMsg(0, bodySec(d), cat([]byte{1}, le32(int32(5+len(d))), []byte{0}, d)), []string{"empty identifier"}},
		{"duplicate identifier", rawMsg(0, bodySec(d), seqSec("docs", d), seqSec("docs", d2)), []string{"identifier \"docs\" already used"}},
		{"invalid BSON in sequence", rawMsg(0, bodySec(d), seqSec("docs", d, badBSON)), []string{"identifier \"docs\": document 1", "invalid BSON"}},
		{"trailing garbage after sections", rawMsg(0, bodySec(d), []byte{0xff, 0xff}), []string{"unknown section kind 255"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, m, err := wire.DecodeMsg(tc.msg)
			if m != nil {
				t.Errorf("got a message with the error")
			}
			wantProtoErr(t, err, tc.want...)
		})
	}
}

// TestDecodeMsgManySequences checks that a message with very many sequences
// is decoded in linear time, duplicates still caught.
func TestDecodeMsgManySequences(t *testing.T) {
	d := doc(t, bson.D{{Key: "ok", Value: 1}})
	secs := [][]byte{bodySec(d)}
	for i := range 20000 {
		secs = append(secs, seqSec(string(rune('a'+i%26))+string(rune(0x100+i))))
	}
	_, m, err := wire.DecodeMsg(rawMsg(0, secs...))
	if err != nil || len(m.Sequences) != 20000 {
		t.Fatalf("got %v", err)
	}
	secs = append(secs, seqSec(m.Sequences[100].Identifier))
	_, _, err = wire.DecodeMsg(rawMsg(0, secs...))
	wantProtoErr(t, err, "already used")
}

func TestAppendMsgErrors(t *testing.T) {
	d := doc(t, bson.D{{Key: "ping", Value: 1}})
	cases := []struct {
		name string
		m    *wire.Msg
		want string
	}{
		{"nil", nil, "nil *Msg"},
		{"undefined flag", &wire.Msg{Flags: 1 << 5, Body: d}, "undefined flag bits 0x20"},
		{"no body", &wire.Msg{}, "body: document of 0 bytes"},
		{"body length mismatch", &wire.Msg{Body: d[:len(d)-1]}, "body: document length prefix is"},
		{"body without NUL", &wire.Msg{Body: bson.Raw{5, 0, 0, 0, 1}}, "does not end with a NUL"},
		{"empty identifier", &wire.Msg{Body: d, Sequences: []wire.Sequence{{}}}, "sequence 0 (\"\"): empty identifier"},
		{"NUL in identifier", &wire.Msg{Body: d, Sequences: []wire.Sequence{{Identifier: "do\x00cs"}}}, "NUL byte at offset 2"},
		{"duplicate identifier", &wire.Msg{Body: d, Sequences: []wire.Sequence{{Identifier: "a"}, {Identifier: "a"}}}, "two sequences named \"a\""},
		{"bad document", &wire.Msg{Body: d, Sequences: []wire.Sequence{{Identifier: "a", Documents: []bson.Raw{d, {1, 2}}}}}, "document 1: document of 2 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := wire.AppendMsg(dst, 1, 0, tc.m)
			wantErrText(t, err, tc.want)
			if string(out) != "keep" {
				t.Errorf("dst changed on error: %q", out)
			}
			if errors.Is(err, wire.ErrProtocol) {
				t.Errorf("an encoding error is not a protocol error: %v", err)
			}
		})
	}
}

// TestChecksumCoversEveryByte flips each byte of a checksummed message and
// expects DecodeMsg to refuse every one of them.
func TestChecksumCoversEveryByte(t *testing.T) {
	m := &wire.Msg{Flags: wire.ChecksumPresent, Body: doc(t, bson.D{{Key: "ok", Value: 1.0}}),
		Sequences: []wire.Sequence{{Identifier: "cursor", Documents: []bson.Raw{doc(t, bson.D{{Key: "a", Value: 1}})}}}}
	msg, err := wire.AppendMsg(nil, 3, 4, m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range msg {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(msg)
			b[i] ^= bit
			if _, _, err := wire.DecodeMsg(b); err == nil {
				t.Errorf("flipping bit %#x of byte %d went unnoticed", bit, i)
			}
		}
	}
}

func TestCRC32CVector(t *testing.T) {
	// The check value of CRC-32C: proves Castagnoli, not IEEE.
	if got := crc32.Checksum([]byte("123456789"), crc32.MakeTable(crc32.Castagnoli)); got != 0xe3069283 {
		t.Fatalf("CRC-32C check value %#x", got)
	}
	// And a message AppendMsg checksums decodes with our independent sum.
	m := &wire.Msg{Body: doc(t, bson.D{{Key: "ping", Value: 1}})}
	plain, _ := wire.AppendMsg(nil, 1, 0, m)
	m.Flags = wire.ChecksumPresent
	summed, _ := wire.AppendMsg(nil, 1, 0, m)
	plain[16] = byte(wire.ChecksumPresent)
	if !bytes.Equal(withChecksum(plain), summed) {
		t.Errorf("AppendMsg checksum differs from an independent CRC-32C")
	}
}

func TestFlagString(t *testing.T) {
	for f, want := range map[wire.Flag]string{
		0: "0", wire.ChecksumPresent: "checksumPresent", wire.MoreToCome | wire.ExhaustAllowed: "moreToCome|exhaustAllowed",
		wire.ChecksumPresent | 1<<4: "checksumPresent|0x10",
	} {
		if got := f.String(); got != want {
			t.Errorf("Flag(%#x).String() = %q, want %q", uint32(f), got, want)
		}
	}
}

func TestHeader(t *testing.T) {
	h := wire.Header{MessageLength: 100, RequestID: -2, ResponseTo: 3, OpCode: wire.OpCompressed}
	b := wire.AppendHeader([]byte{9}, h)
	if len(b) != 17 || b[0] != 9 {
		t.Fatalf("AppendHeader: %v", b)
	}
	got, err := wire.ParseHeader(b[1:])
	if err != nil || got != h {
		t.Fatalf("ParseHeader: %v, %v", got, err)
	}
	if s := h.String(); s != "{length 100, requestID -2, responseTo 3, OP_COMPRESSED}" {
		t.Errorf("String: %s", s)
	}
	for op, want := range map[wire.OpCode]string{wire.OpMsg: "OP_MSG", 2004: "OP_QUERY", 1: "OP_REPLY", 5: "opcode 5"} {
		if op.String() != want {
			t.Errorf("%d: %s", int32(op), op)
		}
	}
}
