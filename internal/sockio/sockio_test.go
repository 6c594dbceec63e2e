//go:build unix

package sockio_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/sockio"
	"github.com/mongopool/mongopool/internal/testkit"
)

// echoPeer accepts one connection on loopback and, for each request of n
// bytes, answers with the same bytes, until the connection ends. It
// returns the client's end.
func echoPeer(t *testing.T, n int) net.Conn {
	t.Helper()
	nc, peer := testkit.TCPPair(t)
	done := make(chan struct{})
	t.Cleanup(func() {
		nc.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the peer did not end within 10s")
		}
	})
	go func() {
		defer close(done)
		buf := make([]byte, n)
		for {
			if _, err := io.ReadFull(peer, buf); err != nil {
				return
			}
			if _, err := peer.Write(buf); err != nil {
				return
			}
		}
	}()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	peer.SetDeadline(time.Now().Add(20 * time.Second))
	return nc
}

// readFull reads len(p) bytes with c.Read, as a bufio.Reader would.
func readFull(c *sockio.Conn, p []byte) error {
	for got := 0; got < len(p); {
		n, err := c.Read(p[got:])
		got += n
		if err != nil {
			return err
		}
	}
	return nil
}

// A kept request goes out with the read of its answer, and that read finds
// the answer at once: no read finds the socket empty.
func TestDeferredRequestIsAnswered(t *testing.T) {
	nc := echoPeer(t, 64)
	c := sockio.New(nc)
	if !c.Fused() {
		t.Fatal("a TCP connection is not fused")
	}
	req, got := make([]byte, 64), make([]byte, 64)
	for i := range 500 {
		req[0], req[63] = byte(i), byte(i>>8)
		if err := c.Defer(req); err != nil {
			t.Fatal(err)
		}
		if !c.Pending() {
			t.Fatal("Defer wrote at once on a TCP connection")
		}
		if err := readFull(c, got); err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
		if !bytes.Equal(got, req) {
			t.Fatalf("round trip %d: answer %x, want %x", i, got[:2], req[:2])
		}
		if c.Pending() {
			t.Fatal("the request is still kept after its answer was read")
		}
	}
	if n := c.EmptyReads(); n != 0 {
		t.Fatalf("%d of 500 reads found the socket empty: the wait began before the request was written", n)
	}
}

// Without a socket of its own (a pipe, TLS), Defer writes at once.
func TestDeferWithoutASocketWritesAtOnce(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := sockio.New(a)
	if c.Fused() {
		t.Fatal("a pipe is fused")
	}
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 5)
		io.ReadFull(b, buf)
		got <- buf
	}()
	if err := c.Defer([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if string(g) != "hello" {
			t.Fatalf("the peer read %q", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Defer on a pipe did not write within 10s")
	}
	if c.Pending() {
		t.Fatal("a pipe's Defer kept the message")
	}
}

// A request larger than the socket's buffer is written whole: the part the
// fused write could not place waits for room.
func TestDeferredRequestLargerThanTheBuffer(t *testing.T) {
	const size = 4 << 20
	nc := echoPeer(t, size)
	nc.(*net.TCPConn).SetWriteBuffer(16 << 10)
	c := sockio.New(nc)
	req := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	got := make([]byte, size)
	if err := c.Defer(req); err != nil {
		t.Fatal(err)
	}
	if err := readFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, req) {
		t.Fatal("the answer to a large request differs from it")
	}
}

// A request that cannot be written is a *WriteError, and nothing is read.
func TestDeferredRequestWriteFails(t *testing.T) {
	nc := echoPeer(t, 8)
	c := sockio.New(nc)
	nc.(*net.TCPConn).CloseWrite() // later writes fail with EPIPE
	if err := c.Defer([]byte("12345678")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 8))
	var we *sockio.WriteError
	if !errors.As(err, &we) || !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Read after a failed write: %v, want a *WriteError with EPIPE", err)
	}
	if c.Pending() {
		t.Fatal("the failed request is still kept")
	}
}

// A read whose deadline has passed before it begins still writes the kept
// request, as a separate Write would have, and then reports the timeout.
func TestDeferredRequestWrittenPastTheReadDeadline(t *testing.T) {
	nc := echoPeer(t, 4)
	c := sockio.New(nc)
	nc.SetReadDeadline(time.Unix(1, 0))
	if err := c.Defer([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 4))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline: %v, want a timeout", err)
	}
	if c.Pending() {
		t.Fatal("the request was not written")
	}
	// The peer answered the request: it was written.
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 4)
	if err := readFull(c, got); err != nil || string(got) != "ping" {
		t.Fatalf("the answer: %q, %v", got, err)
	}
}

// Close from another goroutine ends a read waiting for the answer.
func TestCloseEndsTheWait(t *testing.T) {
	nc, peer := testkit.TCPPair(t) // the peer reads nothing and never answers
	c := sockio.New(nc)
	c.Defer([]byte("ping"))
	ended := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 4))
		ended <- err
	}()
	got := make([]byte, 4)
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != "ping" {
		t.Fatalf("the peer read %q, %v", got, err)
	}
	nc.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("the waiting read ended with %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the waiting read within 10s")
	}
}

func TestRoundTripAllocatesNothing(t *testing.T) {
	nc := echoPeer(t, 32)
	c := sockio.New(nc)
	req, got := make([]byte, 32), make([]byte, 32)
	allocs := testing.AllocsPerRun(200, func() {
		c.Defer(req)
		if err := readFull(c, got); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a round trip allocates %v times", allocs)
	}
}
