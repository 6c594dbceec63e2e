package mongopool_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/internal/leakcheck"
	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// faultInject injects f into s until the test ends or remove is called.
func faultInject(t *testing.T, s *mongotest.Server, f mongotest.Fault) (remove func()) {
	t.Helper()
	remove, err := s.InjectFault(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return remove
}

// faultCheckStats checks that the pool's figures agree and that nothing is
// checked out or being established.
func faultCheckStats(t *testing.T, st pool.Stats) {
	t.Helper()
	if st.Total != st.Available+st.Pending+st.InUse || int64(st.Total) != st.Created-st.Closed ||
		st.InUse != 0 || st.Pending != 0 || st.CheckedOut != st.CheckedIn {
		t.Fatalf("inconsistent stats after the fault: %+v", st)
	}
}

// A fault in the reply to a command, through Open's pool: the error names
// the problem and matches what it is, the connection is marked broken and
// closed at check-in with reason "error", the counts stay right, and the
// pool serves the next command on a fresh connection once the fault is gone.
// A broken reply is a network error to SDAM: the server is marked Unknown and
// the pool cleared until the monitor's check finds it answering; a timeout is
// not (a slow server is not a dead one), and the pool stays ready.
func TestFaultsInReplies(t *testing.T) {
	var limits caseLimits
	for _, tc := range []struct {
		name  string
		fault mongotest.Fault
		query string // more URI options
		// callTimeout bounds the command when the fault never ends it.
		callTimeout time.Duration
		is          error  // what the error matches
		want        string // what it says
		timeout     bool   // a net.Error timeout
	}{
		{name: "hang", fault: mongotest.Fault{Kind: mongotest.FaultHang}, callTimeout: 200 * time.Millisecond,
			is: context.DeadlineExceeded, want: "reading the reply", timeout: true},
		{name: "delay beyond socketTimeoutMS", fault: mongotest.Fault{Kind: mongotest.FaultDelay, Delay: time.Hour},
			query: "&socketTimeoutMS=200", is: os.ErrDeadlineExceeded, want: "i/o timeout", timeout: true},
		{name: "wrong responseTo", fault: mongotest.Fault{Kind: mongotest.FaultWrongResponseTo},
			is: wire.ErrProtocol, want: "answers request"},
		{name: "truncated frame", fault: mongotest.Fault{Kind: mongotest.FaultTruncatedFrame},
			is: io.ErrUnexpectedEOF, want: "message truncated"},
		{name: "negative length", fault: mongotest.Fault{Kind: mongotest.FaultNegativeLength},
			is: wire.ErrProtocol, want: "message length -1 is negative"},
		{name: "tiny length", fault: mongotest.Fault{Kind: mongotest.FaultTinyLength},
			is: wire.ErrProtocol, want: "message length 4 is below the 16-byte header size"},
		{name: "huge length", fault: mongotest.Fault{Kind: mongotest.FaultHugeLength},
			is: wire.ErrProtocol, want: "message length 1073741824 exceeds the maximum message size"},
		{name: "not BSON", fault: mongotest.Fault{Kind: mongotest.FaultNotBSON},
			is: wire.ErrProtocol, want: "invalid BSON"},
		{name: "reset mid-reply", fault: mongotest.Fault{Kind: mongotest.FaultResetMidReply},
			is: syscall.ECONNRESET, want: "connection reset"},
	} {
		for _, comp := range []string{"", "zlib"} {
			name := tc.name
			if comp != "" {
				name += "/" + comp
			}
			limits.run(t, name, func(t *testing.T) {
				leakcheck.Check(t)
				s := server(t)
				rec := newE2EEventLog()
				uri := s.URI() + "?maxPoolSize=2" + tc.query
				if comp != "" {
					uri += "&compressors=" + comp
				}
				p := openCtx(t, limits.ctx(t), uri, pool.WithEventHandler(rec.handler))
				rec.attach(p)
				fault := tc.fault
				fault.Commands = []string{"ping"} // not the handshake
				remove := faultInject(t, s, fault)
				// A broken reply cancels the monitor's check under way, and
				// the pool stays paused until the test asks for a check. The
				// faults come only once the monitor's awaitable hello waits
				// on the server: were the monitor between two checks, its
				// next would start at once on a new connection, as the
				// specification has it, and could make the pool ready again
				// before the test looks (a loaded machine did that).
				streaming := func(after int64) {
					t.Helper()
					waitFor(t, func() string {
						return fmt.Sprintf("the monitor's awaitable hello (%d received, want more than %d)", s.Stats().AwaitableHellos, after)
					}, func() bool { return s.Stats().AwaitableHellos > after })
				}
				streaming(0)

				checkErr := func(err error) {
					t.Helper()
					t.Logf("error: %v", err)
					var ce *wire.CommandError
					var ne net.Error
					switch {
					case err == nil:
						t.Fatal("the command succeeded")
					case !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), s.Addr()):
						t.Fatalf("error %q; want one matching %v that says %q and names %s", err, tc.is, tc.want, s.Addr())
					case errors.As(err, &ce):
						t.Fatalf("error %v is a server's command error", err)
					case tc.is != wire.ErrProtocol && errors.Is(err, wire.ErrProtocol):
						t.Fatalf("a network failure reported as a protocol error: %v", err)
					case tc.timeout != (errors.As(err, &ne) && ne.Timeout()):
						t.Fatalf("error %v: Timeout() should be %v", err, tc.timeout)
					}
				}
				call := func() context.Context {
					if tc.callTimeout == 0 {
						return limits.ctx(t)
					}
					c, cancel := context.WithTimeout(limits.ctx(t), tc.callTimeout)
					t.Cleanup(cancel)
					return c
				}

				// RunCommand: the error, the event, the counts.
				_, err := p.RunCommand(call(), "admin", ping)
				checkErr(err)
				out := rec.last(t, pool.ConnectionCheckedOut)
				closed := rec.filter(e2eClosedConn(out.ConnectionID))
				if len(closed) != 1 || closed[0].Reason != pool.ReasonError || !errors.Is(closed[0].Err, tc.is) {
					t.Fatalf("ConnectionClosed events of connection %d: %+v; want one with reason error and the fault's error", out.ConnectionID, closed)
				}
				st := p.Stats()
				faultCheckStats(t, st)
				if st.ClosedError != 1 || st.Total != 0 {
					t.Fatalf("stats %+v; want the broken connection closed with reason error and none left", st)
				}
				readies := 1 // Open's
				recovered := func() {
					t.Helper()
					if tc.timeout {
						if st := p.Stats(); st.State != "ready" || st.Clears != 0 {
							t.Fatalf("stats %+v after a timeout; want the pool ready, not cleared", st)
						}
						return
					}
					// Cleared and paused, the server Unknown; a check, which
					// the next command's selection would ask for, finds the
					// server answering its hello and makes the pool ready.
					if st := p.Stats(); st.State != "paused" || st.Clears != int64(readies) {
						t.Fatalf("stats %+v after a broken reply; want the pool cleared and paused", st)
					}
					sd, _ := p.Client().Topology().Description().Server(s.Addr())
					if sd.Type != topology.ServerUnknown || !errors.Is(sd.Error, tc.is) {
						t.Fatalf("server %+v after a broken reply; want it Unknown with the fault as its error", sd)
					}
					awaited := s.Stats().AwaitableHellos
					p.Client().Topology().RequestCheck()
					readies++
					rec.waitN(limits.ctx(t), t, "the pool made ready by the monitor", readies, func(e pool.Event) bool { return e.Type == pool.PoolReady })
					streaming(awaited)
				}
				recovered()

				// Do: the connection itself is marked broken.
				var link *connection.Conn
				err = p.Do(call(), func(c *connection.Conn) error {
					link = c
					_, err := c.RoundTrip(call(), pingCmd)
					return err
				})
				checkErr(err)
				if link == nil || !errors.Is(link.Err(), tc.is) {
					t.Fatalf("the connection's Err is %v after the fault; want it broken by the fault", link.Err())
				}
				if _, err := link.RoundTrip(limits.ctx(t), pingCmd); err == nil || !strings.Contains(err.Error(), "no longer usable") {
					t.Fatalf("a broken connection ran a command: %v", err)
				}
				if st := p.Stats(); st.ClosedError != 2 || st.Created != 2 {
					t.Fatalf("stats %+v; want a fresh connection for the second command, closed with reason error too", st)
				}
				recovered()

				// Once the fault is gone, a fresh connection serves.
				remove()
				if _, err := p.RunCommand(limits.ctx(t), "admin", ping); err != nil {
					t.Fatalf("after the fault: %v", err)
				}
				st = p.Stats()
				faultCheckStats(t, st)
				if st.Created != 3 || st.ClosedError != 2 || st.Available != 1 || st.State != "ready" {
					t.Fatalf("stats %+v; want a third connection, idle, in a ready pool", st)
				}
				if comp != "" && s.Stats().CompressedSent[comp] == 0 {
					t.Fatalf("no %s reply: the fault was not tested through compression", comp)
				}
			})
		}
	}
}

// A delay within the timeouts is only a delay: the command succeeds and the
// connection is reused.
func TestFaultDelayWithinTimeouts(t *testing.T) {
	leakcheck.Check(t)
	s := server(t)
	p := openCtx(t, ctx(t), s.URI()+"?socketTimeoutMS=20000")
	faultInject(t, s, mongotest.Fault{Kind: mongotest.FaultDelay, Delay: 20 * time.Millisecond, Commands: []string{"ping"}, Times: 2})
	for range 3 {
		if _, err := p.RunCommand(ctx(t), "admin", ping); err != nil {
			t.Fatal(err)
		}
	}
	st := p.Stats()
	faultCheckStats(t, st)
	if st.Created != 1 || st.Closed != 0 {
		t.Fatalf("stats %+v; want the one connection, reused", st)
	}
}

// A fault while establishing a connection, through pool.New and the
// Connector: the check-out fails with a *pool.ConnectionError that says what
// went wrong; network errors and timeouts up to the end of the hello carry
// the backpressure labels, protocol errors do not; the counts stay right; and
// the pool establishes again once the fault is gone.
func TestFaultsWhileEstablishing(t *testing.T) {
	var limits caseLimits
	pki := testpki.New(t)
	hello := []string{"hello"} // also isMaster and ismaster
	for _, tc := range []struct {
		name string
		tls  bool
		// fault sets the fault up, and returns what ends it.
		fault   func(t *testing.T, s *mongotest.Server) (end func())
		is      error
		want    string
		labels  bool
		timeout bool
	}{
		{name: "hang on hello", fault: injectFn(mongotest.Fault{Kind: mongotest.FaultHang, Commands: hello}),
			is: context.DeadlineExceeded, want: "hello: reading the reply", labels: true, timeout: true},
		{name: "delay of hello beyond connectTimeoutMS", fault: injectFn(mongotest.Fault{Kind: mongotest.FaultDelay, Delay: time.Hour, Commands: hello}),
			is: context.DeadlineExceeded, want: "hello: reading the reply", labels: true, timeout: true},
		{name: "reset during hello", fault: injectFn(mongotest.Fault{Kind: mongotest.FaultResetMidReply, Commands: hello}),
			is: syscall.ECONNRESET, want: "hello: reading the reply", labels: true},
		{name: "truncated hello", fault: injectFn(mongotest.Fault{Kind: mongotest.FaultTruncatedFrame, Commands: hello}),
			is: io.ErrUnexpectedEOF, want: "hello: reading the reply", labels: true},
		{name: "wrong responseTo to hello", fault: injectFn(mongotest.Fault{Kind: mongotest.FaultWrongResponseTo, Commands: hello}),
			is: wire.ErrProtocol, want: "answers request"},
		{name: "hello not BSON", fault: injectFn(mongotest.Fault{Kind: mongotest.FaultNotBSON, Commands: hello}),
			is: wire.ErrProtocol, want: "invalid BSON"},
		{name: "huge hello", fault: injectFn(mongotest.Fault{Kind: mongotest.FaultHugeLength, Commands: hello}),
			is: wire.ErrProtocol, want: "exceeds the maximum message size"},
		{name: "accept and never answer", fault: injectFn(mongotest.Fault{Kind: mongotest.FaultSilentAccept}),
			is: context.DeadlineExceeded, want: "hello: reading the reply", labels: true, timeout: true},
		{name: "accept and never answer TLS", tls: true, fault: injectFn(mongotest.Fault{Kind: mongotest.FaultSilentAccept}),
			is: context.DeadlineExceeded, want: "TLS handshake", labels: true, timeout: true},
		{name: "listener stops accepting", fault: func(t *testing.T, s *mongotest.Server) func() {
			s.PauseAccepting()
			return s.ResumeAccepting
		}, is: context.DeadlineExceeded, want: "hello: reading the reply", labels: true, timeout: true},
	} {
		limits.run(t, tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			cfg := connection.Config{ConnectTimeout: 200 * time.Millisecond, ZlibLevel: -1}
			var opts []mongotest.Option
			if tc.tls {
				opts = append(opts, mongotest.WithTLS(pki.ServerTLS()))
				cfg.TLS = &tls.Config{RootCAs: pki.CAPool}
			}
			s := server(t, opts...)
			cfg.Address = s.Addr()
			rec := newE2EEventLog()
			p, err := pool.New(s.Addr(), mongopool.NewConnector(cfg), pool.WithEventHandler(rec.handler))
			if err != nil {
				t.Fatal(err)
			}
			rec.attach(p)
			t.Cleanup(func() { p.Close() })
			if err := p.Ready(); err != nil {
				t.Fatal(err)
			}
			// A connection established before the fault, kept checked out
			// so that the next check-out must establish.
			held, err := p.CheckOut(limits.ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			acceptedBefore := s.Stats().ConnectionsAccepted

			end := tc.fault(t, s)
			_, err = p.CheckOut(limits.ctx(t))
			t.Logf("error: %v", err)
			var cerr *pool.ConnectionError
			var ne net.Error
			switch {
			case err == nil:
				t.Fatal("the check-out succeeded")
			case !errors.As(err, &cerr) || cerr.DuringAuth:
				t.Fatalf("error %v (%T); want a *pool.ConnectionError from before the handshake completed", err, err)
			case !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), s.Addr()):
				t.Fatalf("error %q; want one matching %v that says %q and names %s", err, tc.is, tc.want, s.Addr())
			case pool.HasErrorLabel(err, pool.LabelSystemOverloaded) != tc.labels || pool.HasErrorLabel(err, pool.LabelRetryable) != tc.labels:
				t.Fatalf("error %v has labels %v; want SystemOverloadedError and RetryableError: %v", err, cerr.ErrorLabels(), tc.labels)
			case tc.timeout != (errors.As(err, &ne) && ne.Timeout()):
				t.Fatalf("error %v: Timeout() should be %v", err, tc.timeout)
			}
			failed := rec.last(t, pool.ConnectionCheckOutFailed)
			closed := rec.filter(e2eClosedConn(cerr.ConnectionID))
			if failed.Reason != pool.ReasonConnectionError || len(closed) != 1 || closed[0].Reason != pool.ReasonError || !errors.Is(closed[0].Err, tc.is) {
				t.Fatalf("check-out failed with %+v, connection %d closed with %+v; want reasons connectionError and error", failed, cerr.ConnectionID, closed)
			}
			st := p.Stats()
			if st.EstablishFailed != 1 || st.ClosedError != 1 || st.CheckOutFailed != 1 || st.Total != 1 || st.InUse != 1 || st.Pending != 0 {
				t.Fatalf("stats %+v; want one failed establishment, closed with reason error, and the held connection", st)
			}
			if tc.name == "listener stops accepting" && s.Stats().ConnectionsAccepted != acceptedBefore {
				t.Fatalf("the paused server accepted a connection: %+v", s.Stats())
			}

			// Once the fault is gone, the pool establishes again.
			end()
			if err := p.CheckIn(held); err != nil {
				t.Fatal(err)
			}
			c1, err := p.CheckOut(limits.ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			c2, err := p.CheckOut(limits.ctx(t))
			if err != nil {
				t.Fatalf("establishing after the fault: %v", err)
			}
			for _, c := range []*pool.Conn{c1, c2} {
				if _, err := c.Link().(*connection.Conn).RoundTrip(limits.ctx(t), pingCmd); err != nil {
					t.Fatal(err)
				}
				p.CheckIn(c)
			}
			st = p.Stats()
			faultCheckStats(t, st)
			if st.Total != 2 || st.EstablishFailed != 1 || st.State != "ready" {
				t.Fatalf("stats %+v; want two connections in a ready pool", st)
			}
		})
	}
}

// injectFn returns a fault setup that injects f until the test ends or the
// returned function is called.
func injectFn(f mongotest.Fault) func(t *testing.T, s *mongotest.Server) func() {
	return func(t *testing.T, s *mongotest.Server) func() { return faultInject(t, s, f) }
}

// Canceling the context of a command that hangs ends it at once, with
// context.Canceled, and breaks the connection.
func TestFaultHangCanceled(t *testing.T) {
	leakcheck.Check(t)
	s := server(t)
	rec := newE2EEventLog()
	p := openCtx(t, ctx(t), s.URI(), pool.WithEventHandler(rec.handler))
	rec.attach(p)
	// The fail point holds the ping for longer than the test runs (the
	// server's Close ends the block), and tells when it holds it.
	if err := s.SetFailPoint(mongotest.FailPoint{Commands: []string{"ping"}, BlockTime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	testCtx := ctx(t)
	c, cancel := context.WithCancel(testCtx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := p.RunCommand(c, "admin", ping)
		done <- err
	}()
	if err := s.WaitForFailPoint(testCtx, 1); err != nil {
		t.Fatalf("the server never held the ping: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the command ended before it was canceled: %v", err)
	default:
	}
	cancel()
	var err error
	select {
	case err = <-done:
	case <-testCtx.Done():
		t.Fatal("canceling did not end the command")
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "reading the reply") {
		t.Fatalf("error %v; want context.Canceled while reading the reply", err)
	}
	closed := rec.filter(func(e pool.Event) bool { return e.Type == pool.ConnectionClosed })
	if len(closed) != 1 || closed[0].Reason != pool.ReasonError {
		t.Fatalf("ConnectionClosed events %+v; want one with reason error", closed)
	}
	faultCheckStats(t, p.Stats())
}

// Open against a server whose hello hangs fails within
// serverSelectionTimeoutMS: the monitor's checks time out after
// connectTimeoutMS, and the selection error names the hello's timeout.
// Nothing is left behind.
func TestFaultOpenHelloHangs(t *testing.T) {
	leakcheck.Check(t)
	s := server(t)
	faultInject(t, s, mongotest.Fault{Kind: mongotest.FaultHang, Commands: []string{"isMaster", "hello"}})
	p, err := mongopool.Open(ctx(t), s.URI()+"?connectTimeoutMS=200&serverSelectionTimeoutMS=500")
	if err == nil {
		p.Close()
		t.Fatal("Open succeeded")
	}
	var se *topology.SelectionError
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "hello") {
		t.Fatalf("Open: %v; want a selection error that names the hello's timeout", err)
	}
}
