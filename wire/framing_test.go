package wire_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

func TestReadMessage(t *testing.T) {
	m1, _ := wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: doc(t, bson.D{{Key: "a", Value: 1}})})
	big := bytes.Repeat([]byte("x"), 3<<20) // several doublings of the buffer
	m2, _ := wire.AppendMsg(nil, 2, 0, &wire.Msg{Body: doc(t, bson.D{{Key: "big", Value: string(big)}})})
	stream := cat(m1, m2)
	readers := map[string]func(io.Reader) io.Reader{
		"plain":   func(r io.Reader) io.Reader { return r },
		"half":    iotest.HalfReader,
		"dataErr": iotest.DataErrReader,
		"oneByte": func(r io.Reader) io.Reader { return iotest.OneByteReader(io.LimitReader(r, int64(len(m1)))) },
		// A *bufio.Reader's header is peeked: at its smallest buffer, the
		// header's size, and over a reader that gives a byte at a time.
		"bufio":        func(r io.Reader) io.Reader { return bufio.NewReaderSize(r, 16) },
		"bufioOneByte": func(r io.Reader) io.Reader { return bufio.NewReader(iotest.OneByteReader(r)) },
	}
	for name, wrap := range readers {
		t.Run(name, func(t *testing.T) {
			r := wrap(bytes.NewReader(stream))
			got, err := wire.ReadMessage(r, 0)
			if err != nil || !bytes.Equal(got, m1) {
				t.Fatalf("first message: %v", err)
			}
			if name == "oneByte" {
				return
			}
			got, err = wire.ReadMessage(r, 0)
			if err != nil || !bytes.Equal(got, m2) {
				t.Fatalf("second message: %v", err)
			}
			if _, err = wire.ReadMessage(r, 0); !errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("at the end: %v, want io.EOF", err)
			}
		})
	}
}

func TestReadMessageErrors(t *testing.T) {
	header := func(length int32, rest int) []byte {
		return cat(le32(length), le32(1), le32(0), le32(int32(wire.OpMsg)), make([]byte, rest))
	}
	cases := []struct {
		name     string
		data     []byte
		max      int32
		protocol bool
		is       error
		want     []string
	}{
		{"negative length", header(-1, 100), 0, true, nil, []string{"message length -1 is negative"}},
		{"min int32 length", header(-1<<31, 0), 0, true, nil, []string{"is negative"}},
		{"zero length", header(0, 0), 0, true, nil, []string{"message length 0 is below the 16-byte header size"}},
		{"tiny length", header(15, 0), 0, true, nil, []string{"message length 15 is below"}},
		{"above default max", header(wire.DefaultMaxMessageSize+1, 0), 0, true, nil, []string{"message length 48000001 exceeds the maximum message size 48000000"}},
		{"above given max", header(1001, 2000), 1000, true, nil, []string{"exceeds the maximum message size 1000"}},
		{"empty stream", nil, 0, false, io.EOF, []string{"reading message header"}},
		{"truncated header", header(100, 0)[:9], 0, false, io.ErrUnexpectedEOF, []string{"header truncated after 9 of 16 bytes"}},
		{"length larger than data", header(100, 20), 0, false, io.ErrUnexpectedEOF, []string{"message truncated: got 36 of the 100 bytes"}},
		{"header only, body missing", header(17, 0), 0, false, io.ErrUnexpectedEOF, []string{"got 16 of the 17 bytes"}},
	}
	readers := map[string]func(io.Reader) io.Reader{
		"plain": func(r io.Reader) io.Reader { return r },
		"bufio": func(r io.Reader) io.Reader { return bufio.NewReader(iotest.OneByteReader(r)) },
	}
	for _, tc := range cases {
		for name, wrap := range readers {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				readMessageError(t, wrap(bytes.NewReader(tc.data)), tc.max, tc.protocol, tc.is, tc.want)
			})
		}
	}
}

// TestReadMessageAllocs: from a *bufio.Reader, as connections read, a
// message costs one allocation, its own.
func TestReadMessageAllocs(t *testing.T) {
	m, _ := wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: doc(t, bson.D{{Key: "a", Value: 1}})})
	r := bytes.NewReader(nil)
	br := bufio.NewReader(r)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(m)
		br.Reset(r)
		if _, err := wire.ReadMessage(br, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 {
		t.Errorf("ReadMessage from a *bufio.Reader: %v allocations, want 1", allocs)
	}
}

// readMessageError reads a message from r that must fail: with a
// protocol error, or an I/O error that wraps is; either way saying want.
func readMessageError(t *testing.T, r io.Reader, max int32, protocol bool, is error, want []string) {
	t.Helper()
	got, err := wire.ReadMessage(r, max)
	if got != nil {
		t.Errorf("got %d bytes with the error", len(got))
	}
	if protocol {
		wantProtoErr(t, err, want...)
		return
	}
	wantErrText(t, err, want...)
	if !errors.Is(err, is) {
		t.Errorf("error %q does not wrap %v", err, is)
	}
	if errors.Is(err, wire.ErrProtocol) {
		t.Errorf("an I/O error is not a protocol error: %v", err)
	}
}

func TestReadMessageReaderError(t *testing.T) {
	boom := errors.New("boom")
	m, _ := wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: doc(t, bson.D{{Key: "a", Value: 1}})})
	r := io.MultiReader(bytes.NewReader(m[:20]), iotest.ErrReader(boom))
	_, err := wire.ReadMessage(r, 0)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "got 20 of the") {
		t.Fatalf("got %v", err)
	}
}

// claimingReader sends a header claiming claimed bytes, then n more bytes,
// then EOF.
type claimingReader struct {
	hdr  []byte
	left int
}

func newClaimingReader(claimed int32, n int) *claimingReader {
	return &claimingReader{hdr: cat(le32(claimed), le32(1), le32(0), le32(int32(wire.OpMsg))), left: n}
}

func (r *claimingReader) Read(p []byte) (int, error) {
	if len(r.hdr) > 0 {
		n := copy(p, r.hdr)
		r.hdr = r.hdr[n:]
		return n, nil
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.left)
	clear(p[:n])
	r.left -= n
	return n, nil
}

// TestReadMessageHostileLength checks that a peer claiming a large message
// costs memory in proportion to what it sends, not to what it claims.
func TestReadMessageHostileLength(t *testing.T) {
	const claimed = 40_000_000
	for _, sent := range []int{20, 100_000, 1_000_000} {
		const runs = 20
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range runs {
			_, err := wire.ReadMessage(newClaimingReader(claimed, sent), 0)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("sent %d: %v", sent, err)
			}
		}
		runtime.ReadMemStats(&after)
		perRun := (after.TotalAlloc - before.TotalAlloc) / runs
		limit := uint64(4*sent + 64<<10) // buffers double: at most ~2x what arrived, plus slack
		t.Logf("claimed %d, sent %d: %d bytes allocated per read", claimed, sent, perRun)
		if perRun > limit {
			t.Errorf("claimed %d, sent %d: allocated %d bytes per read, want <= %d", claimed, sent, perRun, limit)
		}
	}
}

func TestWriteMessage(t *testing.T) {
	m, _ := wire.AppendMsg(nil, 1, 0, &wire.Msg{Body: doc(t, bson.D{{Key: "a", Value: 1}})})
	var buf bytes.Buffer
	if err := wire.WriteMessage(&buf, m); err != nil || !bytes.Equal(buf.Bytes(), m) {
		t.Fatalf("WriteMessage: %v", err)
	}
	wantErrText(t, wire.WriteMessage(&buf, m[:10]), "10 bytes do not form a message")
	wantErrText(t, wire.WriteMessage(&buf, m[:len(m)-1]), "header declares")
	boom := errors.New("boom")
	if err := wire.WriteMessage(failingWriter{boom}, m); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write(p []byte) (int, error) { return 0, w.err }
