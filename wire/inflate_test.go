package wire_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/internal/testkit"
	"github.com/mongopool/mongopool/wire"
)

// zstdRLE builds a zstd frame by hand: no declared content size, the given
// window descriptor (0x38: 128 KiB), and blocks RLE blocks of 128 KiB of
// zeros each, 4 bytes apiece. 16,384 of them, 64 KiB, inflate to 2 GiB.
func zstdRLE(windowDescriptor byte, blocks int) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, windowDescriptor}
	for i := range blocks {
		h := uint32(128<<10)<<3 | 1<<1 // block size, RLE
		if i == blocks-1 {
			h |= 1 // last block
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return b
}

// allocated is testkit.Allocated, under the name the package's tests use.

var accept = []wire.CompressorID{wire.CompressorSnappy, wire.CompressorZlib, wire.CompressorZstd}

// TestDecompressContextStops inflates 40 MiB of zeros with zlib and zstd
// under a context whose deadline passes after the first step: decompression
// stops there, with the context's error, having allocated a fraction of the
// output. Without the deadline, the same payloads inflate in full.
func TestDecompressContextStops(t *testing.T) {
	const size = 40 << 20
	zeros := make([]byte, size)
	payloads := map[string][]byte{
		"zlib": compressedMsg(wire.OpMsg, size, 2, zlibBytes(t, zeros)),
		"zstd": compressedMsg(wire.OpMsg, size, 3, zstdRLE(0x38, size/(128<<10))),
	}
	zeros = nil
	opts := wire.DecodeOptions{MaxMessageSize: 48000000, Compressors: accept}
	for name, msg := range payloads {
		t.Run(name, func(t *testing.T) {
			var out []byte
			var err error
			got := testkit.LeastAllocated(3, func() { out, err = wire.DecompressContext(testkit.ExpiresAfter(1), msg, opts) })
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, wire.ErrProtocol) || out != nil {
				t.Fatalf("err = %v (%d bytes), want context.DeadlineExceeded and no protocol error", err, len(out))
			}
			if !strings.Contains(err.Error(), "stopped after") {
				t.Errorf("error %q does not say how far it got", err)
			}
			if got > 8<<20 {
				t.Errorf("allocated %d bytes before stopping a 40 MiB inflation after its first step", got)
			}

			// A context ended before the call: nothing is inflated.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			got = testkit.Allocated(func() { _, err = wire.DecompressContext(ctx, msg, opts) })
			if !errors.Is(err, context.Canceled) || got > 64<<10 {
				t.Errorf("canceled context: %v, %d bytes allocated", err, got)
			}
			ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer cancel()
			if _, err = wire.DecompressContext(ctx, msg, opts); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("past deadline: %v", err)
			}

			out, err = wire.DecompressContext(context.Background(), msg, opts)
			if err != nil || len(out) != 16+size || bytes.ContainsFunc(out[16:], func(r rune) bool { return r != 0 }) {
				t.Errorf("without a deadline: %v, %d bytes", err, len(out))
			}
		})
	}
	// snappy decodes in one step, but a done context still stops it before.
	snap := compressedMsg(wire.OpMsg, 1000, 1, snappy.Encode(nil, make([]byte, 1000)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := wire.DecompressContext(ctx, snap, opts); !errors.Is(err, context.Canceled) {
		t.Errorf("snappy under a canceled context: %v", err)
	}
}

// TestDecompressGrowsWithOutput sends 64 KiB payloads claiming 40 MB that
// break after producing about 1 MiB: the memory allocated follows what was
// produced, not what was claimed.
func TestDecompressGrowsWithOutput(t *testing.T) {
	data := make([]byte, 4<<20) // 1 MiB of zeros, then noise
	r := rand.New(rand.NewPCG(1, 2))
	for i := 1 << 20; i < len(data); i++ {
		data[i] = byte(r.Uint32())
	}
	var zs bytes.Buffer
	enc, err := zstd.NewWriter(&zs, zstd.WithWindowSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(data)
	enc.Close()
	for name, msg := range map[string][]byte{
		"zlib": compressedMsg(wire.OpMsg, 40_000_000, 2, zlibBytes(t, data)[:64<<10]),
		"zstd": compressedMsg(wire.OpMsg, 40_000_000, 3, zs.Bytes()[:64<<10]),
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			got := testkit.LeastAllocated(3, func() { _, err = wire.Decompress(msg, 48000000) })
			wantProtoErr(t, err, "corrupt "+name)
			if got > 8<<20 {
				t.Errorf("allocated %d bytes for a payload that breaks after producing about 1 MiB", got)
			}
		})
	}
}

// TestDecompressZstdWindowBound sends a zstd frame of 2 MiB that declares a
// 256 MiB window: a decoder reading in steps would allocate the window, so
// the frame is refused. Windows up to 8 MiB, or up to the message's size,
// are accepted.
func TestDecompressZstdWindowBound(t *testing.T) {
	const size = 2 << 20
	huge := compressedMsg(wire.OpMsg, size, 3, zstdRLE(18<<3, size/(128<<10))) // windowLog 28
	var err error
	got := testkit.LeastAllocated(3, func() { _, err = wire.Decompress(huge, 48000000) })
	wantProtoErr(t, err, "corrupt zstd payload")
	if got > 16<<20 {
		t.Errorf("allocated %d bytes for a 2 MiB message declaring a 256 MiB window", got)
	}
	// The same frame, with windows of 8 MiB and 32 MiB, in a 2 MiB and a
	// 32 MiB message.
	for _, tc := range []struct {
		descriptor byte
		size       int
	}{{13 << 3, size}, {15 << 3, 32 << 20}} {
		msg := compressedMsg(wire.OpMsg, int32(tc.size), 3, zstdRLE(tc.descriptor, tc.size/(128<<10)))
		if out, err := wire.Decompress(msg, 48000000); err != nil || len(out) != 16+tc.size {
			t.Errorf("window descriptor %#x, %d bytes: %v", tc.descriptor, tc.size, err)
		}
	}
	// A streaming encoder's 8 MiB window for a small message.
	data := bytes.Repeat([]byte("abcdefgh"), size/8)
	var buf bytes.Buffer
	enc, _ := zstd.NewWriter(&buf, zstd.WithWindowSize(8<<20))
	enc.Write(data)
	enc.Close()
	if out, err := wire.Decompress(compressedMsg(wire.OpMsg, size, 3, buf.Bytes()), 0); err != nil || !bytes.Equal(out[16:], data) {
		t.Errorf("streamed frame with an 8 MiB window: %v", err)
	}
}

// TestDecodeReplyContextCompressors checks that a reply may use only the
// negotiated compressors.
func TestDecodeReplyContextCompressors(t *testing.T) {
	body := doc(t, bson.D{{Key: "ok", Value: 1}})
	plain, err := wire.AppendMsg(nil, 1, 2, &wire.Msg{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	comp := func(c wire.CompressorID) []byte {
		b, err := wire.AppendCompressed(nil, plain, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	snappyOnly := []wire.CompressorID{wire.CompressorSnappy}
	tests := []struct {
		name   string
		msg    []byte
		accept []wire.CompressorID
		want   string // "" for success
	}{
		{"plain, none negotiated", plain, nil, ""},
		{"snappy, none negotiated", comp(wire.CompressorSnappy), nil, "OP_COMPRESSED with snappy received, but no compressor was negotiated"},
		{"noop, none negotiated", comp(wire.CompressorNoop), nil, "OP_COMPRESSED with noop received, but no compressor was negotiated"},
		{"snappy negotiated", comp(wire.CompressorSnappy), snappyOnly, ""},
		{"zlib, snappy negotiated", comp(wire.CompressorZlib), snappyOnly, "OP_COMPRESSED with zlib received, but only snappy was negotiated"},
		{"noop, snappy negotiated", comp(wire.CompressorNoop), snappyOnly, "with noop received"},
		{"zstd, two negotiated", comp(wire.CompressorZstd), []wire.CompressorID{wire.CompressorZlib, wire.CompressorZstd}, ""},
		{"snappy, two negotiated", comp(wire.CompressorSnappy), []wire.CompressorID{wire.CompressorZlib, wire.CompressorZstd}, "only zlib, zstd was negotiated"},
		{"unknown compressor", compressedMsg(wire.OpMsg, 4, 9, []byte("abcd")), snappyOnly, "unknown compressorId 9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m *wire.Msg
			var err error
			got := testkit.LeastAllocated(3, func() {
				_, m, err = wire.DecodeReplyContext(context.Background(), tc.msg, wire.DecodeOptions{Compressors: tc.accept})
			})
			if tc.want == "" {
				if err != nil || string(m.Body) != string(body) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			wantProtoErr(t, err, tc.want)
			if got > 4<<10 {
				t.Errorf("allocated %d bytes before refusing", got)
			}
		})
	}
	// Decompress and DecodeReply keep accepting every compressor.
	if _, _, err := wire.DecodeReply(comp(wire.CompressorNoop), 0); err != nil {
		t.Errorf("DecodeReply of noop: %v", err)
	}
}

// TestDecompressStepwiseMatches decompresses the same messages in steps of
// a few bytes and at once: the results agree.
func TestDecompressStepwiseMatches(t *testing.T) {
	orig := testMsg(t, 300)
	opts := wire.DecodeOptions{Compressors: accept}
	for _, c := range compressorCases() {
		msg, err := wire.AppendCompressed(nil, orig, c.id, c.level)
		if err != nil {
			t.Fatal(err)
		}
		if c.id == wire.CompressorNoop {
			opts.Compressors = []wire.CompressorID{wire.CompressorNoop}
		} else {
			opts.Compressors = accept
		}
		for _, step := range []int{1, 7, 4096, 1 << 20} {
			out, err := wire.DecompressStep(context.Background(), msg, opts, step)
			if err != nil || !bytes.Equal(out, orig) {
				t.Errorf("%s in steps of %d: %v", c.name, step, err)
			}
			// Only zlib and zstd work in steps; the others (and zstd for
			// a message within one step) decode in one.
			stepwise := (c.id == wire.CompressorZlib || c.id == wire.CompressorZstd) && step < len(orig)-16
			if _, err := wire.DecompressStep(testkit.ExpiresAfter(1), msg, opts, step); stepwise != errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s in steps of %d, deadline after the first: %v", c.name, step, err)
			}
		}
	}
}

// TestDecompressStepwiseConcurrent shares the pooled stream decoders
// between goroutines, with messages large enough to be inflated in steps;
// run it with -race.
func TestDecompressStepwiseConcurrent(t *testing.T) {
	data := bytes.Repeat([]byte("a fairly repetitive document, "), (3<<20)/30)
	orig := frame(5, 6, wire.OpMsg, data)
	var msgs [][]byte
	for _, c := range []wire.CompressorID{wire.CompressorZlib, wire.CompressorZstd} {
		m, err := wire.AppendCompressed(nil, orig, c, wire.ZlibDefaultLevel)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	msgs = append(msgs, compressedMsg(wire.OpMsg, 9<<20, 3, zstdRLE(0x38, 72))) // 9 MiB: its decoder is not pooled after
	opts := wire.DecodeOptions{Compressors: accept}
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 3 {
				msg := msgs[(g+i)%len(msgs)]
				out, err := wire.DecompressContext(context.Background(), msg, opts)
				if err == nil && (g+i)%len(msgs) < 2 && !bytes.Equal(out, orig) {
					err = errors.New("output differs")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
