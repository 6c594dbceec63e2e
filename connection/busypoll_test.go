package connection

import (
	"crypto/tls"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/testkit"
	"github.com/mongopool/mongopool/internal/testpki"
)

func skipIfUnsupported(t *testing.T) {
	if !pollSupported || runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 {
		t.Skip("a BusyPoller polls only on Linux with 2 CPUs or more")
	}
}

// longPoller returns a BusyPoller whose waits poll for up to a minute
// (see LongPoll): a test's poll ends when the test makes the socket
// readable, not when a millisecond is over.
func longPoller() *BusyPoller {
	p := NewBusyPoller(MaxBusyPoll)
	LongPoll(p)
	return p
}

// waitFor waits until cond holds, for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// startWait runs wait on a goroutine, and once it polls (as the first poll
// of p), returns a channel closed when it returns.
func startWait(t *testing.T, p *BusyPoller, wait func()) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait()
	}()
	waitFor(t, "the poll to start", func() bool { polls, _ := p.Stats(); return polls == 1 })
	return done
}

// awaitDone waits for done, for up to 10 s, and fails with why otherwise.
func awaitDone(t *testing.T, done <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal(why)
	}
}

func TestWaitSeesBytesAndLeavesThem(t *testing.T) {
	skipIfUnsupported(t)
	a, b := testkit.TCPPair(t)
	p := longPoller()
	done := startWait(t, p, func() { p.Socket(a).Wait() })
	select {
	case <-done:
		t.Fatal("Wait returned before anything was sent")
	default:
	}
	seesBytes(t, p, done, b, a)
}

// seesBytes writes to w while the wait done tells of polls r, and checks
// that the wait returns with a hit, and that r still reads the bytes.
func seesBytes(t *testing.T, p *BusyPoller, done <-chan struct{}, w io.Writer, r io.Reader) {
	t.Helper()
	if _, err := w.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	awaitDone(t, done, "Wait did not return once the socket was readable")
	if polls, hits := p.Stats(); polls != 1 || hits != 1 {
		t.Errorf("Stats() = %d polls, %d hits; want 1, 1", polls, hits)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("read after Wait: %q, %v; want the bytes sent", buf, err)
	}
}

func TestWaitSeesTheEndOfTheStream(t *testing.T) {
	skipIfUnsupported(t)
	a, b := testkit.TCPPair(t)
	p := longPoller()
	done := startWait(t, p, func() { p.Socket(a).Wait() })
	b.Close()
	awaitDone(t, done, "Wait did not return once the peer hung up")
	if _, err := a.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after Wait: %v; want EOF", err)
	}
}

func TestWaitGivesUpAtTheBudget(t *testing.T) {
	skipIfUnsupported(t)
	a, _ := testkit.TCPPair(t)
	p := NewBusyPoller(time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Socket(a).Wait()
	}()
	awaitDone(t, done, "Wait polled past its budget")
	if polls, hits := p.Stats(); polls != 1 || hits != 0 {
		t.Errorf("Stats() = %d polls, %d hits; want 1, 0", polls, hits)
	}
}

func TestWaitStopsWhenAReplyIsAwaited(t *testing.T) {
	skipIfUnsupported(t)
	for _, c := range []struct {
		name string
		own  bool // the waiting connection awaits a reply of its own
	}{
		{"Wait", false},
		{"waitReply", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _ := testkit.TCPPair(t)
			p := longPoller()
			done := startWait(t, p, func() {
				if c.own {
					p.enter()
					defer p.exit()
					p.Socket(a).waitReply()
				} else {
					p.Socket(a).Wait()
				}
			})
			p.enter() // another reply is awaited: its goroutine may want the CPU
			awaitDone(t, done, "the wait went on polling with another reply awaited")
		})
	}
}

func TestWaitDoesNotPoll(t *testing.T) {
	skipIfUnsupported(t)
	a, _ := testkit.TCPPair(t)
	pa, pb := net.Pipe()
	defer pa.Close()
	defer pb.Close()

	busy := NewBusyPoller(MaxBusyPoll)
	busy.enter()
	busy2 := NewBusyPoller(MaxBusyPoll)
	busy2.enter()
	busy2.enter()
	crowded := NewBusyPoller(MaxBusyPoll)
	crowded.enter()
	crowded.enter()
	crowded.exit()
	crowded.exit()
	off := NewBusyPoller(0)
	var nilPoller *BusyPoller
	for _, c := range []struct {
		name string
		p    *BusyPoller
		nc   net.Conn
		own  bool
	}{
		{"a reply awaited", busy, a, false},
		{"another reply awaited", busy2, a, true},
		{"two replies awaited at once a moment ago", crowded, a, false},
		{"no budget", off, a, false},
		{"a connection without a socket", NewBusyPoller(MaxBusyPoll), pa, false},
		{"a nil BusyPoller", nilPoller, a, false},
	} {
		// Each returns at once, or the test times out.
		if c.own {
			c.p.Socket(c.nc).waitReply()
		} else {
			c.p.Socket(c.nc).Wait()
		}
		if polls, _ := c.p.Stats(); polls != 0 {
			t.Errorf("%s: polled %d times, want 0", c.name, polls)
		}
	}
}

func TestOnePollerAtATime(t *testing.T) {
	skipIfUnsupported(t)
	a, b := testkit.TCPPair(t)
	c, _ := testkit.TCPPair(t)
	p := longPoller()
	done := startWait(t, p, func() { p.Socket(a).Wait() })
	p.Socket(c).Wait() // returns at once: a's wait polls
	if polls, _ := p.Stats(); polls != 1 {
		t.Errorf("%d polls, want 1: two goroutines polled at once", polls)
	}
	b.Write([]byte{1})
	awaitDone(t, done, "Wait did not return once the socket was readable")
}

func TestSetBudget(t *testing.T) {
	skipIfUnsupported(t)
	a, _ := testkit.TCPPair(t)
	p := NewBusyPoller(MaxBusyPoll)
	p.SetBudget(-1)
	p.Socket(a).Wait()
	if polls, _ := p.Stats(); polls != 0 {
		t.Errorf("%d polls after SetBudget(-1), want 0", polls)
	}
}

func TestWaitPollsATLSConnectionsSocket(t *testing.T) {
	skipIfUnsupported(t)
	a, b := testkit.TCPPair(t)
	pki := testpki.New(t)
	client := tls.Client(a, &tls.Config{RootCAs: pki.CAPool, ServerName: "127.0.0.1"})
	server := tls.Server(b, pki.ServerTLS())
	handshook := make(chan error, 1)
	go func() { handshook <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-handshook; err != nil {
		t.Fatal(err)
	}
	p := longPoller()
	done := startWait(t, p, func() { p.Socket(client).Wait() })
	seesBytes(t, p, done, server, client)
}

// BenchmarkBusyPollerCrowded is the cost a BusyPoller adds to each reply
// under load: marking it awaited and done, with others awaited at once.
func BenchmarkBusyPollerCrowded(b *testing.B) {
	p := NewBusyPoller(MaxBusyPoll)
	p.enter() // another reply, always awaited
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.enter()
			p.exit()
		}
	})
}
