package wire_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/klauspost/compress/snappy"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/ and run with every
// "go test". TestWriteFuzzCorpus rewrites them:
//
//	go test -run TestWriteFuzzCorpus ./wire/ -args -update-corpus
var updateCorpus = flag.Bool("update-corpus", false, "rewrite the fuzz seed corpora under testdata/fuzz")

// fuzzMax is the maximum message size the fuzz targets allow, small enough to
// keep each execution cheap.
const fuzzMax = 1 << 20

// FuzzReadMessage feeds arbitrary streams to ReadMessage, then the message
// read to DecodeReply and CheckReply, as a connection would.
func FuzzReadMessage(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := wire.ReadMessage(bytes.NewReader(data), fuzzMax)
		msg2, err2 := wire.ReadMessage(iotest.OneByteReader(bytes.NewReader(data)), fuzzMax)
		if (err == nil) != (err2 == nil) || !bytes.Equal(msg, msg2) {
			t.Fatalf("the reader's chunking changed the result: %v / %v", err, err2)
		}
		if err != nil {
			if msg != nil {
				t.Fatalf("bytes returned with error %v", err)
			}
			return
		}
		if n := int(binary.LittleEndian.Uint32(msg)); n != len(msg) || n < wire.HeaderSize || n > fuzzMax || !bytes.Equal(msg, data[:n]) {
			t.Fatalf("read %d bytes for a declared length of %d", len(msg), n)
		}
		_, m, err := wire.DecodeReply(msg, fuzzMax)
		if err != nil {
			if !errors.Is(err, wire.ErrProtocol) {
				t.Fatalf("DecodeReply error is not a protocol error: %v", err)
			}
			return
		}
		checkReplyClassified(t, m.Body)
	})
}

// FuzzDecodeMsg feeds arbitrary bytes to DecodeMsg, as they are and with
// the length field fixed up (which lets mutations reach the sections). A
// message that decodes must re-encode to an equal message, and to the same
// bytes when its body section comes first.
func FuzzDecodeMsg(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeMsg(t, data)
		if len(data) >= wire.HeaderSize {
			fixed := bytes.Clone(data)
			binary.LittleEndian.PutUint32(fixed, uint32(len(fixed)))
			checkDecodeMsg(t, fixed)
		}
	})
}

func checkDecodeMsg(t *testing.T, data []byte) {
	h, m, err := wire.DecodeMsg(data)
	if err != nil {
		if m != nil || !errors.Is(err, wire.ErrProtocol) {
			t.Fatalf("DecodeMsg error %v (is ErrProtocol: %v), msg %v", err, errors.Is(err, wire.ErrProtocol), m)
		}
		return
	}
	if int(h.MessageLength) != len(data) || h.OpCode != wire.OpMsg {
		t.Fatalf("header %v for %d bytes", h, len(data))
	}
	if err := m.Body.Validate(); err != nil {
		t.Fatalf("decoded body is invalid: %v", err)
	}
	checkReplyClassified(t, m.Body)
	if m.Flags&^(wire.ChecksumPresent|wire.MoreToCome|wire.ExhaustAllowed) != 0 {
		return // unknown optional bits: decodable, but AppendMsg will not send them
	}
	out, err := wire.AppendMsg(nil, h.RequestID, h.ResponseTo, m)
	if err != nil {
		t.Fatalf("re-encoding a decoded message: %v", err)
	}
	_, m2, err := wire.DecodeMsg(out)
	if err != nil || !equalMsg(m, m2) {
		t.Fatalf("re-encoded message decodes differently: %v", err)
	}
	if data[wire.HeaderSize+4] == 0 && !bytes.Equal(out, data) {
		t.Fatalf("re-encoding a body-first message changed its bytes:\n%x\n%x", data, out)
	}
}

// checkReplyClassified runs CheckReply and checks its error is one of the
// documented kinds.
func checkReplyClassified(t *testing.T, body bson.Raw) {
	err := wire.CheckReply(body)
	var ce *wire.CommandError
	if err != nil && !errors.As(err, &ce) && !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("CheckReply returned an unclassified error: %v", err)
	}
	if ce != nil {
		_ = ce.Error()
		_ = ce.HasErrorLabel("RetryableError")
	}
}

// FuzzDecompress feeds arbitrary bytes to Decompress, as they are and with
// the length and opcode fixed up. A payload that decompresses must come back
// the same through every compressor.
func FuzzDecompress(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecompress(t, data)
		if len(data) >= wire.HeaderSize {
			fixed := bytes.Clone(data)
			binary.LittleEndian.PutUint32(fixed, uint32(len(fixed)))
			binary.LittleEndian.PutUint32(fixed[12:], uint32(wire.OpCompressed))
			checkDecompress(t, fixed)
		}
	})
}

func checkDecompress(t *testing.T, data []byte) {
	out, err := wire.Decompress(data, fuzzMax)
	// Inflating in steps of a few bytes, as large messages are, must come to
	// the same result.
	opts := wire.DecodeOptions{MaxMessageSize: fuzzMax, Compressors: []wire.CompressorID{0, 1, 2, 3}}
	stepped, err2 := wire.DecompressStep(context.Background(), data, opts, 7)
	if (err == nil) != (err2 == nil) || !bytes.Equal(out, stepped) || (err2 != nil && !errors.Is(err2, wire.ErrProtocol)) {
		t.Fatalf("in steps: %v, %d bytes; at once: %v, %d bytes", err2, len(stepped), err, len(out))
	}
	if err != nil {
		if out != nil || !errors.Is(err, wire.ErrProtocol) {
			t.Fatalf("Decompress error %v (is ErrProtocol: %v), %d bytes", err, errors.Is(err, wire.ErrProtocol), len(out))
		}
		return
	}
	in, _ := wire.ParseHeader(data)
	h, err := wire.ParseHeader(out)
	size := binary.LittleEndian.Uint32(data[20:])
	if err != nil || int(h.MessageLength) != len(out) || len(out) != wire.HeaderSize+int(size) || len(out) > fuzzMax ||
		h.RequestID != in.RequestID || h.ResponseTo != in.ResponseTo || uint32(h.OpCode) != binary.LittleEndian.Uint32(data[16:]) {
		t.Fatalf("decompressed header %v from %v, uncompressedSize %d", h, in, size)
	}
	for _, c := range []wire.CompressorID{wire.CompressorNoop, wire.CompressorSnappy, wire.CompressorZlib, wire.CompressorZstd} {
		again, err := wire.AppendCompressed(nil, out, c, wire.ZlibDefaultLevel)
		if err != nil {
			t.Fatalf("recompressing with %v: %v", c, err)
		}
		back, err := wire.Decompress(again, fuzzMax)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("%v round trip: %v", c, err)
		}
	}
}

// TestWriteFuzzCorpus writes the seed corpora, when asked to.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -args -update-corpus to rewrite testdata/fuzz")
	}
	ok := doc(t, bson.D{{Key: "ok", Value: 1.0}})
	cmd := doc(t, bson.D{{Key: "insert", Value: "coll"}, {Key: "$db", Value: "test"}})
	d1 := doc(t, bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: "abcabcabcabcabcabc"}})
	d2 := doc(t, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: bson.A{1, "x", bson.D{{Key: "y", Value: true}}}}})
	failed := doc(t, bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "not primary"}, {Key: "code", Value: int32(10107)},
		{Key: "codeName", Value: "NotWritablePrimary"}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}})
	enc := func(m *wire.Msg) []byte {
		b, err := wire.AppendMsg(nil, 11, 22, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	comp := func(msg []byte, c wire.CompressorID) []byte {
		b, err := wire.AppendCompressed(nil, msg, c, 6)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bodyOnly := enc(&wire.Msg{Body: ok})
	withSeqs := enc(&wire.Msg{Flags: wire.ChecksumPresent, Body: cmd, Sequences: []wire.Sequence{{Identifier: "documents", Documents: []bson.Raw{d1, d2}}, {Identifier: "empty"}}})
	reply := enc(&wire.Msg{Flags: wire.MoreToCome, Body: failed})
	badSum := bytes.Clone(withSeqs)
	badSum[len(badSum)-1] ^= 1
	body := withSeqs[16:]
	n := int32(len(body))

	msgs := map[string][]byte{
		"valid-body-only":           bodyOnly,
		"valid-sequences-checksum":  withSeqs,
		"valid-reply-error":         reply,
		"valid-sequence-first":      rawMsg(0, seqSec("documents", d1), bodySec(ok)),
		"valid-optional-flag":       rawMsg(1<<20, bodySec(ok)),
		"bad-checksum":              badSum,
		"two-bodies":                rawMsg(0, bodySec(ok), bodySec(cmd)),
		"no-body":                   rawMsg(0, seqSec("documents", d1)),
		"unknown-kind":              rawMsg(0, bodySec(ok), []byte{2, 5, 0, 0, 0, 0}),
		"sequence-overflow":         rawMsg(0, bodySec(ok), cat([]byte{1}, le32(1000), []byte("docs\x00"), d1)),
		"sequence-underflow":        rawMsg(0, bodySec(ok), cat([]byte{1}, le32(10), []byte("docs\x00"), d1)),
		"unterminated-identifier":   rawMsg(0, bodySec(ok), cat([]byte{1}, le32(8), []byte("docs"))),
		"duplicate-identifier":      rawMsg(0, bodySec(ok), seqSec("a", d1), seqSec("a", d2)),
		"invalid-bson":              rawMsg(0, bodySec([]byte{0x0c, 0, 0, 0, 0x7f, 'a', 0, 1, 2, 3, 4, 0})),
		"trailing-garbage":          rawMsg(0, bodySec(ok), []byte{0xff, 0xff}),
		"unknown-required-flag":     rawMsg(1<<3, bodySec(ok)),
		"length-mismatch":           bodyOnly[:len(bodyOnly)-1],
		"op-query":                  frame(1, 0, 2004, le32(0), []byte("admin.$cmd\x00"), le32(0), le32(1), ok),
		"compressed-snappy":         comp(withSeqs, wire.CompressorSnappy),
		"compressed-zlib":           comp(withSeqs, wire.CompressorZlib),
		"compressed-zstd":           comp(withSeqs, wire.CompressorZstd),
		"compressed-noop":           comp(reply, wire.CompressorNoop),
		"compressed-unknown":        compressedMsg(wire.OpMsg, n, 7, body),
		"compressed-size-mismatch":  compressedMsg(wire.OpMsg, n+1, 1, snappy.Encode(nil, body)),
		"compressed-size-huge":      compressedMsg(wire.OpMsg, 40_000_000, 3, []byte("tiny")),
		"compressed-size-negative":  compressedMsg(wire.OpMsg, -1, 0, body),
		"compressed-nested":         compressedMsg(wire.OpCompressed, n, 0, body),
		"compressed-corrupt-zlib":   compressedMsg(wire.OpMsg, n, 2, []byte{0x78, 0x9c, 0xff, 0xff, 0xff}),
		"compressed-corrupt-snappy": compressedMsg(wire.OpMsg, 10, 1, []byte{10, 0x01, 0x05}),
		"compressed-zstd-stream":    compressedMsg(wire.OpMsg, n, 3, zstdStream(t, body)),
		"compressed-zstd-rle":       compressedMsg(wire.OpMsg, 4<<17, 3, zstdRLE(0x38, 4)),
		"compressed-zstd-rle-bomb":  compressedMsg(wire.OpMsg, 1000, 3, zstdRLE(0x38, 64)),
		"compressed-zstd-window":    compressedMsg(wire.OpMsg, 4<<17, 3, zstdRLE(18<<3, 4)),
		"compressed-zstd-truncated": compressedMsg(wire.OpMsg, 4<<17, 3, zstdRLE(0x38, 4)[:12]),
	}
	streams := map[string][]byte{
		"empty":            nil,
		"negative-length":  cat(le32(-1), make([]byte, 12)),
		"tiny-length":      cat(le32(15), make([]byte, 12)),
		"huge-length":      cat(le32(40_000_000), le32(1), le32(0), le32(2013), []byte("short")),
		"truncated-header": bodyOnly[:9],
		"truncated-body":   withSeqs[:len(withSeqs)-7],
		"two-messages":     cat(bodyOnly, withSeqs),
	}
	write := func(target string, seeds map[string][]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	only := func(prefixes ...string) map[string][]byte {
		out := map[string][]byte{}
		for name, b := range msgs {
			for _, p := range prefixes {
				if strings.HasPrefix(name, p) {
					out[name] = b
				}
			}
		}
		return out
	}
	all := only("")
	for name, b := range streams {
		all["stream-"+name] = b
	}
	write("FuzzReadMessage", all)
	decodeSeeds := only("valid", "bad", "two", "no-", "unknown", "sequence", "unterminated", "duplicate", "invalid", "trailing", "length", "op-")
	decodeSeeds["empty"] = nil
	write("FuzzDecodeMsg", decodeSeeds)
	decompressSeeds := only("compressed")
	decompressSeeds["not-compressed"] = bodyOnly
	decompressSeeds["empty"] = nil
	write("FuzzDecompress", decompressSeeds)
}
