package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// compressedMsg builds an OP_COMPRESSED by hand.
func compressedMsg(orig wire.OpCode, size int32, id byte, payload []byte) []byte {
	return frame(5, 6, wire.OpCompressed, le32(int32(orig)), le32(size), []byte{id}, payload)
}

// testMsg builds an OP_MSG with a body and a sequence of n documents.
func testMsg(t testing.TB, n int) []byte {
	var docs []bson.Raw
	for i := range n {
		docs = append(docs, doc(t, bson.D{{Key: "_id", Value: i}, {Key: "name", Value: "a fairly repetitive document"}}))
	}
	m := &wire.Msg{
		Flags:     wire.ChecksumPresent,
		Body:      doc(t, bson.D{{Key: "insert", Value: "coll"}, {Key: "$db", Value: "test"}}),
		Sequences: []wire.Sequence{{Identifier: "documents", Documents: docs}},
	}
	b, err := wire.AppendMsg(nil, 77, 12, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type compressorCase struct {
	name  string
	id    wire.CompressorID
	level int
}

func compressorCases() []compressorCase {
	cs := []compressorCase{{"noop", wire.CompressorNoop, 0}, {"snappy", wire.CompressorSnappy, 0}, {"zstd", wire.CompressorZstd, 0}}
	for l := wire.ZlibDefaultLevel; l <= wire.ZlibMaxLevel; l++ {
		cs = append(cs, compressorCase{fmt.Sprintf("zlib-%d", l), wire.CompressorZlib, l})
	}
	return cs
}

func TestCompressRoundTrip(t *testing.T) {
	for _, size := range []int{0, 3, 5000} {
		orig := testMsg(t, size)
		for _, c := range compressorCases() {
			t.Run(fmt.Sprintf("%s/%d-docs", c.name, size), func(t *testing.T) {
				out, err := wire.AppendCompressed([]byte("pre"), orig, c.id, c.level)
				if err != nil {
					t.Fatal(err)
				}
				if string(out[:3]) != "pre" {
					t.Fatalf("dst's contents lost")
				}
				comp := out[3:]
				h, err := wire.ParseHeader(comp)
				if err != nil {
					t.Fatal(err)
				}
				if h != (wire.Header{MessageLength: int32(len(comp)), RequestID: 77, ResponseTo: 12, OpCode: wire.OpCompressed}) {
					t.Errorf("header %v", h)
				}
				if op := binary.LittleEndian.Uint32(comp[16:]); op != uint32(wire.OpMsg) {
					t.Errorf("originalOpcode %d", op)
				}
				if n := binary.LittleEndian.Uint32(comp[20:]); n != uint32(len(orig)-16) {
					t.Errorf("uncompressedSize %d, want %d", n, len(orig)-16)
				}
				if comp[24] != byte(c.id) {
					t.Errorf("compressorId %d", comp[24])
				}
				if size == 5000 && c.id != wire.CompressorNoop && c.level != 0 && len(comp) > len(orig)/3 {
					t.Errorf("%s compressed %d bytes to %d", c.name, len(orig), len(comp))
				}
				got, err := wire.Decompress(comp, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, orig) {
					t.Fatalf("Decompress did not restore the message")
				}
				_, m, err := wire.DecodeReply(comp, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(m.Sequences) != 1 || len(m.Sequences[0].Documents) != size {
					t.Errorf("DecodeReply: %+v", m)
				}
			})
		}
	}
}

func TestAppendCompressedErrors(t *testing.T) {
	orig := testMsg(t, 1)
	comp, _ := wire.AppendCompressed(nil, orig, wire.CompressorSnappy, 0)
	cases := []struct {
		name  string
		msg   []byte
		id    wire.CompressorID
		level int
		want  string
	}{
		{"short", orig[:5], wire.CompressorSnappy, 0, "5 bytes do not form a message"},
		{"length mismatch", orig[:len(orig)-1], wire.CompressorSnappy, 0, "header declares"},
		{"already compressed", comp, wire.CompressorZstd, 0, "already OP_COMPRESSED"},
		{"unknown compressor", orig, 9, 0, "unknown compressor 9"},
		{"zlib level too low", orig, wire.CompressorZlib, -2, "zlib compression level -2 is outside -1..9"},
		{"zlib level too high", orig, wire.CompressorZlib, 10, "zlib compression level 10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := wire.AppendCompressed([]byte("keep"), tc.msg, tc.id, tc.level)
			wantErrText(t, err, tc.want)
			if string(out) != "keep" {
				t.Errorf("dst changed on error: %q", out)
			}
		})
	}
	// The level does not matter to other compressors.
	if _, err := wire.AppendCompressed(nil, orig, wire.CompressorSnappy, 42); err != nil {
		t.Errorf("snappy with an out-of-range zlib level: %v", err)
	}
}

func zlibBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zstdBytes(t testing.TB, b []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(b, nil)
}

// zstdStream compresses b with the streaming encoder: its frame header does
// not declare the content size.
func zstdStream(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(b)
	enc.Close()
	return buf.Bytes()
}

func TestDecompressErrors(t *testing.T) {
	orig := testMsg(t, 2)
	body := orig[16:]
	n := int32(len(body))
	snap := snappy.Encode(nil, body)
	zl := zlibBytes(t, body)
	zs := zstdBytes(t, body)
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 0x55; return b }

	cases := []struct {
		name string
		msg  []byte
		max  int32
		want []string
	}{
		{"not OP_COMPRESSED", orig, 0, []string{"unsupported OP_MSG (2013)", "only OP_COMPRESSED (2012)"}},
		{"too short for its headers", frame(1, 0, wire.OpCompressed, []byte{1, 2, 3}), 0, []string{"shorter than the 25 bytes of its headers"}},
		{"length mismatch", compressedMsg(wire.OpMsg, n, 0, body)[:40], 0, []string{"truncated"}},
		{"nested OP_COMPRESSED", compressedMsg(wire.OpCompressed, n, 0, body), 0, []string{"nested compression"}},
		{"unknown compressor 4", compressedMsg(wire.OpMsg, n, 4, body), 0, []string{"unknown compressorId 4"}},
		{"unknown compressor 255", compressedMsg(wire.OpMsg, n, 255, body), 0, []string{"unknown compressorId 255"}},
		{"negative uncompressedSize", compressedMsg(wire.OpMsg, -1, 0, body), 0, []string{"uncompressedSize -1 is negative"}},
		{"uncompressedSize above default max", compressedMsg(wire.OpMsg, wire.DefaultMaxMessageSize, 2, zl), 0, []string{"uncompressedSize 48000000 makes a 48000016-byte message, above the maximum message size 48000000"}},
		{"uncompressedSize above given max", compressedMsg(wire.OpMsg, n, 1, snap), n, []string{"above the maximum message size"}},
		{"zlib claim out of proportion", compressedMsg(wire.OpMsg, 1_000_000, 2, zl[:100]), 0, []string{"uncompressedSize 1000000 is impossible for a 100-byte zlib payload", "1032:1"}},
		{"zstd claim out of proportion", compressedMsg(wire.OpMsg, 40_000_000, 3, []byte("tiny")), 0, []string{"impossible for a 4-byte zstd payload"}},
		{"snappy claim out of proportion", compressedMsg(wire.OpMsg, 1000, 1, []byte{0xe8, 0x07, 0, 1}), 0, []string{"impossible for a 4-byte snappy payload"}},
		{"noop too short", compressedMsg(wire.OpMsg, n+1, 0, body), 0, []string{"noop payload decompresses to", "uncompressedSize is"}},
		{"noop too long", compressedMsg(wire.OpMsg, n-1, 0, body), 0, []string{"noop payload"}},
		{"snappy size larger", compressedMsg(wire.OpMsg, n+1, 1, snap), 0, []string{"snappy payload decompresses to", fmt.Sprintf("uncompressedSize is %d", n+1)}},
		{"snappy size smaller", compressedMsg(wire.OpMsg, n-1, 1, snap), 0, []string{"snappy payload decompresses to"}},
		{"snappy corrupt", compressedMsg(wire.OpMsg, 10, 1, []byte{10, 0x01, 0x05}), 0, []string{"corrupt snappy payload"}}, // copy before any output
		{"snappy truncated", compressedMsg(wire.OpMsg, n, 1, snap[:len(snap)-3]), 0, []string{"corrupt snappy payload"}},
		{"snappy bad length varint", compressedMsg(wire.OpMsg, n, 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), 0, []string{"corrupt snappy payload"}},
		{"zlib size larger", compressedMsg(wire.OpMsg, n+10, 2, zl), 0, []string{"zlib payload decompresses to", fmt.Sprintf("uncompressedSize is %d", n+10)}},
		{"zlib size smaller", compressedMsg(wire.OpMsg, n-1, 2, zl), 0, []string{"zlib payload decompresses to more than uncompressedSize"}},
		{"zlib corrupt header", compressedMsg(wire.OpMsg, n, 2, flip(zl, 0)), 0, []string{"corrupt zlib payload"}},
		{"zlib corrupt data", compressedMsg(wire.OpMsg, n, 2, flip(zl, len(zl)/2)), 0, []string{"corrupt zlib payload"}},
		{"zlib bad checksum", compressedMsg(wire.OpMsg, n, 2, flip(zl, len(zl)-1)), 0, []string{"corrupt zlib payload"}},
		{"zlib truncated", compressedMsg(wire.OpMsg, n, 2, zl[:len(zl)-6]), 0, []string{"corrupt zlib payload"}},
		{"zlib trailing bytes", compressedMsg(wire.OpMsg, n, 2, cat(zl, []byte{1, 2})), 0, []string{"2 trailing bytes after the zlib stream"}},
		{"zlib empty", compressedMsg(wire.OpMsg, n, 2, nil), 0, []string{"impossible for a 0-byte zlib payload"}},
		{"zstd size larger", compressedMsg(wire.OpMsg, n+1, 3, zs), 0, []string{"zstd payload decompresses to", fmt.Sprintf("uncompressedSize is %d", n+1)}},
		{"zstd size smaller", compressedMsg(wire.OpMsg, n-1, 3, zs), 0, []string{"zstd payload decompresses to more than uncompressedSize"}},
		{"zstd corrupt", compressedMsg(wire.OpMsg, n, 3, flip(zs, len(zs)/2)), 0, []string{"corrupt zstd payload"}},
		{"zstd bad magic", compressedMsg(wire.OpMsg, n, 3, flip(zs, 0)), 0, []string{"corrupt zstd payload"}},
		{"zstd truncated", compressedMsg(wire.OpMsg, n, 3, zs[:len(zs)-5]), 0, []string{"zstd payload"}},
		{"zstd empty", compressedMsg(wire.OpMsg, n, 3, nil), 0, []string{"impossible for a 0-byte zstd payload"}},
		{"zstd skippable frame only", compressedMsg(wire.OpMsg, 10, 3, []byte{0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0}), 0, []string{"zstd payload decompresses to 0 bytes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := wire.Decompress(tc.msg, tc.max)
			if got != nil {
				t.Errorf("got %d bytes with the error", len(got))
			}
			wantProtoErr(t, err, tc.want...)
		})
	}
	// The sanity of the fixtures: each decompresses when the size is right.
	for id, p := range map[byte][]byte{0: body, 1: snap, 2: zl, 3: zs} {
		if got, err := wire.Decompress(compressedMsg(wire.OpMsg, n, id, p), 0); err != nil || !bytes.Equal(got[16:], body) {
			t.Errorf("compressor %d fixture: %v", id, err)
		}
	}
	// A zstd frame without a declared content size decodes too.
	if got, err := wire.Decompress(compressedMsg(wire.OpMsg, n, 3, zstdStream(t, body)), 0); err != nil || !bytes.Equal(got[16:], body) {
		t.Errorf("zstd stream frame: %v", err)
	}
}

func TestDecompressKeepsOtherOpcodes(t *testing.T) {
	// OP_COMPRESSED may wrap any opcode; DecodeReply then refuses it.
	payload := []byte("legacy reply bytes")
	comp := compressedMsg(1, int32(len(payload)), 0, payload)
	got, err := wire.Decompress(comp, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := wire.ParseHeader(got); h != (wire.Header{MessageLength: int32(16 + len(payload)), RequestID: 5, ResponseTo: 6, OpCode: 1}) {
		t.Errorf("header %v", h)
	}
	_, _, err = wire.DecodeReply(comp, 0)
	wantProtoErr(t, err, "unsupported OP_REPLY (1)")
	_, _, err = wire.DecodeReply(frame(1, 2, 2004, []byte("x")), 0)
	wantProtoErr(t, err, "unsupported OP_QUERY (2004)")
	_, _, err = wire.DecodeReply([]byte{1, 2}, 0)
	wantProtoErr(t, err, "header needs 16 bytes")
}

// TestDecompressionBombs feeds payloads that inflate to 32 MiB while the
// header claims a small size, and checks the decoders stop early: the memory
// allocated stays far below what the payload would inflate to.
func TestDecompressionBombs(t *testing.T) {
	zeros := make([]byte, 32<<20)
	bombs := map[string][]byte{
		"snappy":        compressedMsg(wire.OpMsg, 1000, 1, snappy.Encode(nil, zeros)),
		"zlib":          compressedMsg(wire.OpMsg, 1000, 2, zlibBytes(t, zeros)),
		"zstd":          compressedMsg(wire.OpMsg, 1000, 3, zstdBytes(t, zeros)),
		"zstd-nosize":   compressedMsg(wire.OpMsg, 1000, 3, zstdStream(t, zeros)),
		"zstd-at-limit": compressedMsg(wire.OpMsg, 1<<20-16, 3, zstdStream(t, zeros)),
	}
	zeros = nil
	for name, msg := range bombs {
		t.Run(name, func(t *testing.T) {
			wire.Decompress(msg, 1<<20) // warm pools and shared decoders
			const runs = 5
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range runs {
				_, err := wire.Decompress(msg, 1<<20)
				wantProtoErr(t, err, "decompresses to")
			}
			runtime.ReadMemStats(&after)
			perRun := (after.TotalAlloc - before.TotalAlloc) / runs
			t.Logf("%d-byte bomb: %d bytes allocated per Decompress", len(msg), perRun)
			if perRun > 4<<20 {
				t.Errorf("allocated %d bytes per Decompress for a bomb limited to 1 MiB", perRun)
			}
		})
	}
}

// TestDecompressHugeClaimAllocatesNothing checks that an uncompressedSize
// above the maximum, or out of proportion with the payload, or different
// from a snappy block's own length header, is refused before the buffer is
// allocated.
func TestDecompressHugeClaimAllocatesNothing(t *testing.T) {
	tooBig := compressedMsg(wire.OpMsg, 40_000_000, 3, bytes.Repeat([]byte("x"), 2000))                           // above the maximum
	disproportionate := compressedMsg(wire.OpMsg, 40_000_000, 2, []byte("tiny"))                                  // impossible for the payload
	snappyLie := compressedMsg(wire.OpMsg, 40_000_000, 1, cat([]byte{0x80, 0xb4, 0x89, 0x13}, make([]byte, 100))) // block header agrees
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		if _, err := wire.Decompress(tooBig, 1<<20); err == nil {
			t.Fatal("no error")
		}
		if _, err := wire.Decompress(disproportionate, 0); err == nil {
			t.Fatal("no error")
		}
		if _, err := wire.Decompress(snappyLie, 0); err == nil {
			t.Fatal("no error")
		}
	}
	runtime.ReadMemStats(&after)
	if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > 3*4<<10 { // the error values only
		t.Errorf("%d bytes allocated per refused Decompress", perRun)
	}
}

// TestCompressConcurrent shares the pooled and global codecs between
// goroutines; run it with -race.
func TestCompressConcurrent(t *testing.T) {
	orig := testMsg(t, 50)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := range 20 {
				c := compressorCases()[(g+i)%len(compressorCases())]
				var err error
				buf, err = wire.AppendCompressed(buf[:0], orig, c.id, c.level)
				if err != nil {
					errs <- err
					return
				}
				got, err := wire.Decompress(buf, 0)
				if err != nil || !bytes.Equal(got, orig) {
					errs <- fmt.Errorf("%s: %v", c.name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCompressorNames(t *testing.T) {
	for _, name := range []string{"snappy", "zlib", "zstd"} {
		c, ok := wire.ParseCompressor(name)
		if !ok || c.String() != name {
			t.Errorf("ParseCompressor(%q) = %v, %v", name, c, ok)
		}
	}
	for _, name := range []string{"noop", "", "Snappy", "snoopy", "gzip"} {
		if c, ok := wire.ParseCompressor(name); ok {
			t.Errorf("ParseCompressor(%q) = %v, want false", name, c)
		}
	}
	if wire.CompressorNoop.String() != "noop" || wire.CompressorID(7).String() != "compressor 7" {
		t.Errorf("String: %v %v", wire.CompressorNoop, wire.CompressorID(7))
	}
	if wire.CompressorSnappy != 1 || wire.CompressorZlib != 2 || wire.CompressorZstd != 3 {
		t.Errorf("compressor IDs differ from the specification")
	}
}

func TestCompressible(t *testing.T) {
	for _, name := range []string{"hello", "isMaster", "ismaster", "ISMASTER", "saslStart", "saslContinue",
		"getnonce", "authenticate", "createUser", "updateUser", "copydbSaslStart", "copydbgetnonce", "copydb", "Hello"} {
		if wire.Compressible(name) {
			t.Errorf("Compressible(%q) = true", name)
		}
	}
	for _, name := range []string{"ping", "find", "insert", "helloWorld", "saslStartX", "copydbSaslStartAndMore", "dropUser", ""} {
		if !wire.Compressible(name) {
			t.Errorf("Compressible(%q) = false", name)
		}
	}
}

func TestDecompressErrorsAreProtocolErrors(t *testing.T) {
	_, err := wire.Decompress(nil, 0)
	if !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("got %v", err)
	}
}
