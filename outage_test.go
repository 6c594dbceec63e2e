package mongopool_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// These tests watch what a dead or broken server costs over a window of time.
// Their bounds are upper bounds on connection attempts, which a slow machine
// only lowers, and they wait for the events they need with deadlines.

// resettingListener accepts connections and resets each at once, as a server
// that is going away does, counting them.
func resettingListener(t *testing.T) (uri string, accepted *atomic.Int64) {
	t.Helper()
	accepted = new(atomic.Int64)
	addr := rawListener(t, func(c net.Conn) {
		accepted.Add(1)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	})
	return "mongodb://" + addr + "/", accepted
}

// A pool left idle with minPoolSize against a server that drops every
// connection costs a few attempts, not thousands: the monitor's checks fail,
// the server stays Unknown and its pool paused, so that only the monitor
// dials, once a heartbeat (and once more at once after a network error on a
// known server, which this one never is). On the fake clock, over two
// seconds.
func TestDeadServerIdleCostsFewDials(t *testing.T) {
	for _, minSize := range []int{1, 5} {
		t.Run(fmt.Sprint("minPoolSize=", minSize), func(t *testing.T) {
			inBubble(t, func(t *testing.T, n *mongotest.Network) {
				l, err := n.Listen("127.0.0.1:27017")
				if err != nil {
					t.Fatal(err)
				}
				var accepted atomic.Int64
				go func() {
					for {
						c, err := l.Accept()
						if err != nil {
							return // the network closed
						}
						accepted.Add(1)
						c.Close()
					}
				}()
				p := bubblePool(t, n, fmt.Sprint("mongodb://127.0.0.1:27017/?heartbeatFrequencyMS=500&minPoolSize=", minSize))
				time.Sleep(2 * time.Second) // the window of the report
				synctest.Wait()
				st := p.Stats()
				if st.State != "paused" || st.Created != 0 {
					t.Fatalf("stats %+v; want the pool paused, never dialling, while the server is Unknown", st)
				}
				sd, _ := p.Client().Topology().Description().Server(p.Address())
				if sd.Type != topology.ServerUnknown || sd.Error == nil {
					t.Fatalf("server %+v; want it Unknown with the monitor's error", sd)
				}
				// A check every 500ms from the first, at 0: 5 in 2s.
				if n := accepted.Load(); n != 5 {
					t.Fatalf("%d connections to a dead server in 2s; want 5, a check every 500ms", n)
				}
			})
		})
	}
}

// Under load, a server whose replies are broken (not BSON) after a good
// handshake costs a bounded number of connections: each broken reply marks
// the server Unknown and clears the pool, check-outs then fail at once
// without dialling until the monitor's check (at most every 500ms) makes the
// pool ready again.
func TestBrokenRepliesUnderLoadAreBounded(t *testing.T) {
	s := server(t)
	faultInject(t, s, mongotest.Fault{Kind: mongotest.FaultNotBSON, Commands: []string{"ping"}})
	rec := newE2EEventLog()
	p := sdamNew(t, s.URI()+"?maxPoolSize=8", nil, pool.WithEventHandler(rec.handler))
	rec.attach(p)
	c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var ops atomic.Int64
	for range 8 {
		wg.Go(func() {
			for c.Err() == nil {
				p.RunCommand(c, "admin", ping)
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	st := p.Stats()
	t.Logf("%d connections, %d operations, %d clears in 2s", st.Created, ops.Load(), st.Clears)
	if st.Clears == 0 {
		t.Fatalf("stats %+v: broken replies never cleared the pool", st)
	}
	// At most maxPoolSize new connections for each generation: the first,
	// and one each time the monitor made the pool ready again (a check at
	// once, then one every 500ms at most: 6 in 2s at most), with room for
	// a check that lands as the window closes.
	if most := int64(8 * 8); st.Created > most {
		t.Fatalf("%d connections in 2s of broken replies (%d operations, %d clears); want at most %d", st.Created, ops.Load(), st.Clears, most)
	}
	if len(rec.filter(func(e pool.Event) bool { return e.Type == pool.PoolReady })) < 2 {
		t.Fatalf("the monitor never made the pool ready again: stats %+v", st)
	}
}

// A server that says it is shutting down, in its answer to every hello, is
// Unknown to the monitor: its pool is never made ready and never dials, and a
// command fails after serverSelectionTimeoutMS with a selection error that
// carries the server's error.
func TestShuttingDownInHandshakeClears(t *testing.T) {
	for _, code := range []int32{91, 11600} {
		t.Run(fmt.Sprint("code ", code), func(t *testing.T) {
			inBubble(t, func(t *testing.T, n *mongotest.Network) {
				s := bubbleServer(t, n)
				sdamFailPoint(t, s, mongotest.FailPoint{Commands: []string{"hello", "isMaster"}, AppName: "shutdown", ErrorCode: code})
				p := bubblePool(t, n, s.URI()+"?appName=shutdown&minPoolSize=3")
				start := time.Now()
				_, err := p.RunCommand(context.Background(), "admin", ping)
				var se *topology.SelectionError
				var ce *wire.CommandError
				if !errors.As(err, &se) || !errors.As(err, &ce) || ce.Code != code {
					t.Fatalf("command: %v; want a selection error carrying the server's error %d", err, code)
				}
				if waited := time.Since(start); waited != 30*time.Second {
					t.Fatalf("the command failed after %v; want serverSelectionTimeoutMS's default, 30s", waited)
				}
				if st := p.Stats(); st.State != "paused" || st.Created != 0 {
					t.Fatalf("stats %+v; want the pool paused, never dialling", st)
				}
			})
		})
	}
}

// In load-balanced mode errors of the hello change nothing (there is no
// service to clear yet), so it is the pool's backoff that keeps a server
// answering every hello with ShutdownInProgress from being dialled without
// pause by the population: over a second of the fake clock, at most two
// attempts (maxConnecting) at each end of a backoff (100-200ms, then
// 200-400ms, then 400-800ms).
func TestLoadBalancedHelloErrorsBackOff(t *testing.T) {
	inBubble(t, func(t *testing.T, n *mongotest.Network) {
		s := bubbleServer(t, n, mongotest.WithLoadBalanced(bson.NewObjectID()))
		sdamFailPoint(t, s, mongotest.FailPoint{Commands: []string{"hello", "isMaster"}, AppName: "lb-shutdown", ErrorCode: 91})
		p := bubblePool(t, n, s.URI()+"?loadBalanced=true&appName=lb-shutdown&minPoolSize=2")
		time.Sleep(time.Second) // the window
		synctest.Wait()
		st := p.Stats()
		t.Logf("%d attempts in 1s", st.Created)
		if st.Created > 8 || st.EstablishFailed == 0 {
			t.Fatalf("stats %+v; want a few failed attempts in a second", st)
		}
	})
}

// "Not writable primary" and "node is recovering" errors in an operation's
// reply make the monitor check the server at once (it may answer) but do not
// clear the pool; "shutting down" ones clear it. A writeConcernError counts
// as the same error.
func TestStateChangeErrorsOfOperations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fp    mongotest.FailPoint
		clear bool
	}{
		{"NotWritablePrimary", mongotest.FailPoint{ErrorCode: 10107}, false},
		{"InterruptedDueToReplStateChange", mongotest.FailPoint{ErrorCode: 11602}, false},
		{"ShutdownInProgress", mongotest.FailPoint{ErrorCode: 91}, true},
		{"InterruptedAtShutdown in writeConcernError", mongotest.FailPoint{WriteConcernError: bson.D{{Key: "code", Value: 11600}, {Key: "errmsg", Value: "shutting down"}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, n *mongotest.Network) {
				s := bubbleServer(t, n)
				rec := newE2EEventLog()
				// The monitor polls: one that streams a standalone's
				// hellos ignores the request for a check while its
				// awaitable hello waits (see pollAfterStateChange).
				p := bubblePool(t, n, s.URI()+"?appName=statechange&heartbeatFrequencyMS=3600000&"+pollAfterStateChange,
					pool.WithEventHandler(rec.handler))
				rec.attach(p)
				ctx := context.Background()
				if _, err := p.RunCommand(ctx, "admin", ping); err != nil {
					t.Fatal(err)
				}
				hellos := s.Stats().Commands["isMaster"] + s.Stats().Commands["hello"]
				fp := tc.fp
				fp.Commands, fp.AppName, fp.Times = []string{"insert"}, "statechange", 1
				sdamFailPoint(t, s, fp)
				p.RunCommand(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
				if st := p.Stats(); (st.Clears == 1) != tc.clear {
					t.Fatalf("stats %+v; want cleared: %v", st, tc.clear)
				}
				// The monitor checks at once (within minHeartbeatFrequencyMS
				// of its last check), not after the hour of its heartbeat.
				time.Sleep(500 * time.Millisecond)
				synctest.Wait()
				if s.Stats().Commands["isMaster"]+s.Stats().Commands["hello"] == hellos {
					t.Fatal("the monitor did not check the server after a state change error")
				}
				if tc.clear {
					readies := rec.filter(func(e pool.Event) bool { return e.Type == pool.PoolReady })
					if len(readies) != 2 {
						t.Fatalf("%d PoolReady events; want the pool ready again after the check", len(readies))
					}
				}
				if _, err := p.RunCommand(ctx, "admin", ping); err != nil {
					t.Fatalf("after the check: %v", err)
				}
			})
		})
	}
}

// A timeout of the monitor's check clears the pool with
// interruptInUseConnections: an operation in progress fails with the
// retryable error that says so. The hello of the monitor's own connection is
// what hangs; the pool's connection was made before.
func TestMonitorTimeoutInterruptsInUse(t *testing.T) {
	s := server(t)
	rec := newE2EEventLog()
	p := sdamNew(t, s.URI()+"?heartbeatFrequencyMS=500&connectTimeoutMS=300", nil, pool.WithEventHandler(rec.handler))
	rec.attach(p)
	if _, err := p.RunCommand(ctx(t), "admin", ping); err != nil {
		t.Fatal(err)
	}
	// The hello hangs from now on (the monitor's check), and so does the
	// operation's find: only an interruption can end the find early.
	faultInject(t, s, mongotest.Fault{Kind: mongotest.FaultHang, Commands: []string{"hello", "isMaster", "find"}})
	_, err := p.RunCommand(ctx(t), "db", bson.D{{Key: "find", Value: "c"}})
	var pce *pool.PoolClearedError
	if !errors.As(err, &pce) || !pce.Interrupted || !pool.HasErrorLabel(err, pool.LabelRetryable) {
		t.Fatalf("find: %v; want it interrupted by the monitor's clear", err)
	}
	cleared := rec.last(t, pool.PoolCleared)
	if !cleared.Interrupt {
		t.Fatalf("PoolCleared %+v; want interruptInUseConnections", cleared)
	}
}

// An event handler may close the Pool of this package: here the handler of
// the PoolCleared event that an operation's error causes (delivered on the
// operation's goroutine, its connection still checked out), and that of the
// PoolReady event the monitor delivers once its check finds the server
// answering again. Neither deadlocks, and no goroutine is left.
func TestHandlersMayCloseThePool(t *testing.T) {
	for _, on := range []pool.EventType{pool.PoolCleared, pool.PoolReady} {
		t.Run(on.String(), func(t *testing.T) {
			s := server(t)
			var (
				mp     *mongopool.Pool
				armed  atomic.Bool
				once   sync.Once
				closed = make(chan struct{})
			)
			mp, err := mongopool.New(s.URI()+"?heartbeatFrequencyMS=500", pool.WithEventHandler(func(e pool.Event) {
				if e.Type == on && armed.Load() {
					once.Do(func() {
						mp.Close()
						close(closed)
					})
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			defer mp.Close()
			armed.Store(true)
			// A broken reply clears the pool; the next command meets the
			// paused pool and asks the monitor for the check that makes
			// it ready again.
			remove := faultInject(t, s, mongotest.Fault{Kind: mongotest.FaultNotBSON, Commands: []string{"ping"}, Times: 1})
			mp.RunCommand(ctx(t), "admin", ping)
			remove()
			mp.RunCommand(ctx(t), "admin", ping)
			select {
			case <-closed:
			case <-ctx(t).Done():
				t.Fatal("the handler's Close did not return")
			}
			if st := mp.Stats(); st.State != "closed" {
				t.Fatalf("stats %+v after the handler's Close", st)
			}
		})
	}
}

// outageProxy forwards connections to a server until cut: then it resets
// every connection it carries and refuses new ones (its port is closed)
// until restored, on the same port, as a server that goes down and comes
// back does.
type outageProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	l     net.Listener
	conns []net.Conn
	wg    sync.WaitGroup
}

func newOutageProxy(t *testing.T, target string) *outageProxy {
	t.Helper()
	p := &outageProxy{t: t, target: target}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = l.Addr().String()
	p.serve(l)
	t.Cleanup(func() {
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *outageProxy) serve(l net.Listener) {
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Go(func() { io.Copy(up, c); up.Close() })
			p.wg.Go(func() { io.Copy(c, up); c.Close() })
		}
	})
}

// cut resets every connection and closes the port.
func (p *outageProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
	p.conns = nil
}

// restore opens the port again.
func (p *outageProxy) restore() {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("listening again on %s: %v", p.addr, err)
	}
	p.serve(l)
}

// Under load, a 3-second outage costs a bounded number of connection
// attempts: the first network error marks the server Unknown and pauses the
// pool, check-outs then fail at once without dialling, and the monitor, asked
// at most every 500ms, finds the server back and makes the pool ready again.
func TestOutageUnderLoadIsBounded(t *testing.T) {
	s := server(t)
	proxy := newOutageProxy(t, s.Addr())
	p := sdamNew(t, "mongodb://"+proxy.addr+"/?maxPoolSize=8&connectTimeoutMS=2000", nil)
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range 8 {
		wg.Go(func() {
			for c.Err() == nil {
				if _, err := p.RunCommand(c, "admin", ping); err == nil {
					ok.Add(1)
				}
			}
		})
	}
	waitOps := func(n int64) {
		t.Helper()
		for start := ok.Load(); ok.Load() < start+n; {
			select {
			case <-c.Done():
				t.Fatal(c.Err())
			case <-time.After(time.Millisecond):
			}
		}
	}
	waitOps(100)
	before := p.Stats().Created
	proxy.cut()
	time.Sleep(3 * time.Second) // the outage
	during := p.Stats().Created - before
	t.Logf("attempts during the outage: %d", during)
	proxy.restore()
	waitOps(100) // the pool serves again
	cancel()
	wg.Wait()
	st := p.Stats()
	if st.Clears == 0 {
		t.Fatalf("stats %+v: the outage never cleared the pool", st)
	}
	// The attempts of the pool during the outage: its population and the
	// check-outs' establishments, backing off, before the first network
	// error paused the pool, and after each check that found the server
	// down... which does not make it ready. A few at most.
	if during > 16 {
		t.Fatalf("%d connections attempted during a 3s outage (stats %+v); want a few", during, st)
	}
}

// An error of the minPoolSize population that the SDAM rules turn into a
// clear (ShutdownInProgress in the hello of the pool's connection, which the
// monitor's check came before) clears the pool, as a driver's pool inside its
// topology is cleared; the monitor, asked for a check, finds the server again
// and the population goes on.
func TestPopulationShutdownErrorClears(t *testing.T) {
	s := server(t)
	// Skip 1: the monitor's hello goes through; the pool's fail until the
	// test turns the failpoint off.
	sdamFailPoint(t, s, mongotest.FailPoint{Commands: []string{"hello", "isMaster"}, AppName: "popclear", ErrorCode: 91, Skip: 1})
	rec := newE2EEventLog()
	p := sdamNew(t, s.URI()+"?appName=popclear&minPoolSize=1&serverMonitoringMode=poll&heartbeatFrequencyMS=3600000", nil,
		pool.WithEventHandler(rec.handler))
	rec.attach(p)
	cleared := rec.waitFor(ctx(t), t, "the clear", func(e pool.Event) bool { return e.Type == pool.PoolCleared })
	if cleared.Interrupt {
		t.Errorf("PoolCleared %+v: a shutdown error does not interrupt", cleared)
	}
	s.ClearFailPoints()
	// The check the error asked for may have met the failpoint too: a
	// command's selection asks for checks until one finds the server.
	if _, err := p.RunCommand(ctx(t), "admin", ping); err != nil {
		t.Fatal(err)
	}
	rec.waitN(ctx(t), t, "the pool ready again", 2, func(e pool.Event) bool { return e.Type == pool.PoolReady })
	rec.waitFor(ctx(t), t, "the population's connection", func(e pool.Event) bool { return e.Type == pool.ConnectionReady })
}
