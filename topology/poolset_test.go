package topology

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mongopool/mongopool/internal/testkit"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// setConnector makes the connections of a PoolSet's pools in the tests:
// while code is set, the server fails the authentication after the hello
// with that code (18: the credential is refused).
type setConnector struct {
	mu   sync.Mutex
	code int32
}

func (c *setConnector) set(code int32) {
	c.mu.Lock()
	c.code = code
	c.mu.Unlock()
}

func (c *setConnector) Connect(_ context.Context, a *pool.Attempt) (pool.Link, error) {
	a.HelloDone(pool.ServiceID{})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.code != 0 {
		return nil, &wire.CommandError{Code: c.code, Message: "authentication failed with code " + strconv.Itoa(int(c.code))}
	}
	return &link{}, nil
}

// setLog is the events of a set's pools, in the order their pools' handlers
// got them.
type setLog struct {
	mu    sync.Mutex
	lines []string
}

// addSet adds a PoolSet whose pools record their events in h.sets, with the
// address prefixed with "set/".
func (h *harness) addSet(c pool.Connector) (*PoolSet, map[string]*pool.Pool) {
	h.t.Helper()
	pools := map[string]*pool.Pool{}
	log := &setLog{}
	ps, err := h.topo.AddPoolSet(func(address string, establishFailed func(error)) (*pool.Pool, error) {
		p, err := pool.New(address, c,
			pool.WithMaintenanceInterval(-1),
			pool.WithEstablishErrorHandler(establishFailed),
			pool.WithEventHandler(func(e pool.Event) {
				switch e.Type {
				case pool.PoolCreated, pool.PoolReady, pool.PoolCleared, pool.PoolClosed:
					log.mu.Lock()
					log.lines = append(log.lines, e.Type.String()+" set/"+e.Address)
					log.mu.Unlock()
				}
			}))
		if err == nil {
			h.mu.Lock()
			pools[address] = p
			h.mu.Unlock()
		}
		return p, err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { ps.Close() })
	h.mu.Lock()
	if h.setLogs == nil {
		h.setLogs = map[*PoolSet]*setLog{}
	}
	h.setLogs[ps] = log
	h.mu.Unlock()
	return ps, pools
}

// takeSet returns the set's pool events since the last call, after
// flushing them.
func (h *harness) takeSet(ps *PoolSet) string {
	h.t.Helper()
	if err := ps.Flush(ctx(h.t)); err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	log := h.setLogs[ps]
	h.mu.Unlock()
	log.mu.Lock()
	defer log.mu.Unlock()
	s := strings.Join(log.lines, "\n")
	log.lines = nil
	return s
}

func (h *harness) state(p *pool.Pool) string { return p.Stats().State }

// A PoolSet's pools follow the topology's own: made ready when a check
// finds their server (at once for a server found before the set was added),
// cleared with them when an error met on either marks the server Unknown,
// made ready again by the next check, closed when their server leaves; the
// set's Close closes its pools and leaves the topology's.
func TestPoolSetFollowsTheTopology(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	h.check("a:1", primaryHello("a:1", "b:1"))
	ps, pools := h.addSet(&setConnector{})
	h.flush()
	if got := h.takeSet(ps); got != "ConnectionPoolCreated set/a:1\nConnectionPoolReady set/a:1" {
		t.Fatalf("the set's pool of a server found before it:\n%s", got)
	}
	h.check("b:1", secondaryHello("a:1", "b:1"))
	if got := h.takeSet(ps); got != "ConnectionPoolCreated set/b:1\nConnectionPoolReady set/b:1" {
		t.Fatalf("the set's pool of a server found after it:\n%s", got)
	}
	h.take()
	h.takePools()

	// Selection serves the set: the server selected has the set's pool.
	s, err := h.topo.SelectServer(ctx(t), selectType(RSPrimary))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Done()
	p := ps.Pool(s)
	if p == nil || p == s.Pool() || p != pools["a:1"] {
		t.Fatalf("the set's pool of a:1: %p (the topology's: %p)", p, s.Pool())
	}
	c, err := p.CheckOut(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	p.CheckIn(c)

	// A network error on the set's connection marks the server Unknown
	// and clears every pool of it.
	ps.OperationFailed(s, 0, nil, true, io.ErrUnexpectedEOF)
	h.wantUnknownAndCleared(ps, "a set's network error")
	// Its generation is the set pool's: the same error again is stale.
	ps.OperationFailed(s, 0, nil, true, io.ErrUnexpectedEOF)
	h.check("a:1", primaryHello("a:1", "b:1"))
	if got := h.takeSet(ps); got != "ConnectionPoolReady set/a:1" {
		t.Errorf("after the next check, the set's pool events:\n%s", got)
	}
	// An error on the topology's own connection clears the set's pool too.
	s.OperationFailed(s.Pool().Generation(pool.ServiceID{}), nil, true, io.ErrUnexpectedEOF)
	if got := h.takeSet(ps); got != "ConnectionPoolCleared set/a:1" {
		t.Errorf("after the topology's pool's error, the set's pool events:\n%s", got)
	}
	h.check("a:1", primaryHello("a:1", "b:1"))
	h.takeSet(ps)

	// b:1 leaves: the set's pool of it closes too.
	h.check("a:1", primaryHello("a:1"))
	h.mu.Lock()
	pb := pools["b:1"]
	h.mu.Unlock()
	testkit.WaitFor(t, "the set's pool of b:1 to close", func() bool { return h.state(pb) == "closed" })

	// The set's Close closes its pools; the topology's stay, and a set
	// added later has pools of its own.
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	if h.state(pools["a:1"]) != "closed" || h.state(s.Pool()) != "ready" {
		t.Errorf("after the set's Close: its pool %s, the topology's %s", h.state(pools["a:1"]), h.state(s.Pool()))
	}
	if ps.Pool(s) != nil || !errors.Is(ps.Err(), ErrClosed) {
		t.Errorf("a closed set: pool %p, Err %v", ps.Pool(s), ps.Err())
	}
	ps2, pools2 := h.addSet(&setConnector{})
	if p := ps2.Pool(s); p == nil || p != pools2["a:1"] || h.state(p) != "ready" {
		t.Errorf("a set added after another closed: its pool of a:1 %p (%v)", p, pools2)
	}
	if ps.Pool(s) != nil {
		t.Error("the closed set sees the pool of the set that took its place")
	}
	h.topo.Close()
	if st := h.state(pools2["a:1"]); st != "closed" {
		t.Errorf("the topology's Close left the set's pool %s", st)
	}
	if _, err := h.topo.AddPoolSet(func(string, func(error)) (*pool.Pool, error) { return nil, nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("AddPoolSet on a closed topology: %v", err)
	}
}

// failingSet returns a harness whose a:1 is a selectable primary, with a
// PoolSet whose authentications fail with code, its connector, and a:1;
// the events so far are taken.
func failingSet(t *testing.T, code int32) (*harness, *PoolSet, *setConnector, *Server) {
	t.Helper()
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	h.check("a:1", primaryHello("a:1"))
	conn := &setConnector{code: code}
	ps, _ := h.addSet(conn)
	h.take()
	h.takePools()
	h.takeSet(ps)
	s, ok := h.topo.Server("a:1")
	if !ok {
		t.Fatal("a:1 is not selectable")
	}
	return h, ps, conn, s
}

// The server refusing a set's credential clears that set's pool alone: the
// server stays as it is, the topology's pool ready, and the set's pool is
// made ready again after minHeartbeatFrequencyMS. The topology's own pool
// meeting the same error marks the server Unknown, as the rules say.
func TestPoolSetCredentialRefused(t *testing.T) {
	h, ps, conn, s := failingSet(t, 18)
	_, err := ps.Pool(s).CheckOut(ctx(t))
	var ce *pool.ConnectionError
	if !errors.As(err, &ce) || !ce.DuringAuth {
		t.Fatalf("check-out with a refused credential: %v", err)
	}
	if got, pools := h.take(), h.takePools(); got != "" || pools != "" {
		t.Errorf("a refused set's credential changed the topology:\n%s\n%s", got, pools)
	}
	if st := h.state(s.Pool()); st != "ready" {
		t.Errorf("the topology's pool is %s", st)
	}
	conn.set(0)
	testkit.WaitFor(t, "the set's pool to be ready again", func() bool { return h.state(ps.Pool(s)) == "ready" })
	if got := h.takeSet(ps); got != "ConnectionPoolCleared set/a:1\nConnectionPoolReady set/a:1" {
		t.Errorf("the set's pool events:\n%s", got)
	}
	c, err := ps.Pool(s).CheckOut(ctx(t))
	if err != nil {
		t.Fatalf("after the credential is accepted: %v", err)
	}
	ps.Pool(s).CheckIn(c)

	// The set's generations are its pool's, which the refusal cleared
	// alone: a network error on a connection made before is stale, one
	// on a connection made since is not.
	ps.OperationFailed(s, 0, nil, true, io.ErrUnexpectedEOF)
	if got := h.take(); got != "" {
		t.Errorf("an error older than the set's pool marked the server:\n%s", got)
	}
	ps.OperationFailed(s, ps.Pool(s).Generation(pool.ServiceID{}), nil, true, io.ErrUnexpectedEOF)
	if got := h.take(); !strings.Contains(got, "a:1 RSPrimary->Unknown") {
		t.Errorf("an error of the set's pool's generation:\n%s", got)
	}
	h.check("a:1", primaryHello("a:1"))
	h.takeSet(ps)

	// The topology's own pool: the rules as written.
	e := establishError("a:1", &pool.ConnectionError{Address: "a:1", DuringAuth: true, Generation: s.Pool().Generation(pool.ServiceID{}),
		Err: &wire.CommandError{Code: 18, Message: "Authentication failed."}})
	if d := s.handleError(e); !d.MarkUnknown || !d.Clear || d.OwnPoolOnly {
		t.Errorf("the topology's own refused credential: %+v", d)
	}
	if got := h.takeSet(ps); got != "ConnectionPoolCleared set/a:1" {
		t.Errorf("the topology's refused credential, the set's pool events:\n%s", got)
	}
}

// A state change while authenticating a set's connection ("shutdown in
// progress") is the server's, not the credential's: the server is marked
// Unknown and every pool of it cleared.
func TestPoolSetStateChangeWhileAuthenticating(t *testing.T) {
	h, ps, _, s := failingSet(t, 91)
	if _, err := ps.Pool(s).CheckOut(ctx(t)); err == nil {
		t.Fatal("the check-out succeeded")
	}
	h.wantUnknownAndCleared(ps, "a shutdown while authenticating")
}

// wantUnknownAndCleared checks that, after what, a:1 was marked Unknown and
// both its pools, the topology's and ps's, were cleared.
func (h *harness) wantUnknownAndCleared(ps *PoolSet, what string) {
	h.t.Helper()
	if got := h.take(); !strings.Contains(got, "ServerDescriptionChanged a:1 RSPrimary->Unknown") {
		h.t.Errorf("%s did not mark a:1 Unknown:\n%s", what, got)
	}
	if got := h.takePools(); got != "ConnectionPoolCleared a:1" {
		h.t.Errorf("after %s, the topology's pool events:\n%s", what, got)
	}
	if got := h.takeSet(ps); got != "ConnectionPoolCleared set/a:1" {
		h.t.Errorf("after %s, the set's pool events:\n%s", what, got)
	}
}
