package mongopool_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// sdamEvents records a pool's events and signals each PoolReady and
// PoolCleared.
type sdamEvents struct {
	t       *testing.T
	p       flusher // whose events types and count wait for: see sdamNew
	mu      sync.Mutex
	events  []pool.Event
	ready   chan struct{}
	cleared chan pool.Event
}

func newSDAMEvents() *sdamEvents {
	return &sdamEvents{ready: make(chan struct{}, 16), cleared: make(chan pool.Event, 16)}
}

func (r *sdamEvents) handle(e pool.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	switch e.Type {
	case pool.PoolReady:
		r.ready <- struct{}{}
	case pool.PoolCleared:
		r.cleared <- e
	}
}

// types returns the types of the events so far, after the first from.
func (r *sdamEvents) types(from int) []string {
	r.flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events[min(from, len(r.events)):] {
		out = append(out, e.Type.String())
	}
	return out
}

func (r *sdamEvents) count() int {
	r.flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// flush waits for the events so far, when the pool is known.
func (r *sdamEvents) flush() {
	if r.p != nil {
		flush(r.t, r.p)
	}
}

// awaitReady waits for a PoolReady event.
func (r *sdamEvents) awaitReady(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-r.ready:
	case <-ctx.Done():
		t.Fatalf("the pool was not marked ready again: %v; events %v", ctx.Err(), r.types(0))
	}
}

// sdamNew is New with the pool closed at the end of the test; rec, if not
// nil, records its events.
func sdamNew(t *testing.T, uri string, rec *sdamEvents, opts ...pool.Option) *mongopool.Pool {
	t.Helper()
	if rec != nil {
		opts = append([]pool.Option{pool.WithEventHandler(rec.handle)}, opts...)
	}
	p, err := mongopool.New(uri, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if rec != nil {
		rec.t, rec.p = t, p
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func sdamFailPoint(t *testing.T, s *mongotest.Server, fp mongotest.FailPoint) {
	t.Helper()
	if err := s.SetFailPoint(fp); err != nil {
		t.Fatal(err)
	}
}

// New makes no connection of the pool's: the monitor checks the server on a
// connection of its own, which makes the pool ready, and the first command
// establishes the pool's first connection.
func TestNewDoesNotConnect(t *testing.T) {
	s := server(t)
	rec := newSDAMEvents()
	p := sdamNew(t, s.URI()+"?minPoolSize=0", rec)
	if st := p.Stats(); st.Created != 0 {
		t.Fatalf("after New: %+v", st)
	}
	rec.awaitReady(t, ctx(t)) // the monitor's first check found the server
	if got := rec.types(0); !slices.Equal(got, []string{"ConnectionPoolCreated", "ConnectionPoolReady"}) {
		t.Fatalf("events after the first check: %v", got)
	}
	if st := p.Stats(); st.State != "ready" || st.Created != 0 {
		t.Fatalf("after the first check: %+v", st)
	}
	if _, err := p.RunCommand(ctx(t), "admin", ping); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Created != 1 {
		t.Fatalf("after the first command: %+v", st)
	}

	// Nothing listens: New still succeeds; a command waits for the server
	// until the selection timeout, and says why it found none.
	p2 := sdamNew(t, refusedURI(t)+"?connectTimeoutMS=2000&serverSelectionTimeoutMS=200", nil)
	_, err := p2.RunCommand(ctx(t), "admin", ping)
	var se *topology.SelectionError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a command against nothing: %v, want a selection error that names the refused connection", err)
	}

	if _, err := mongopool.New("mongodb://a:1,b:2/"); err == nil || !strings.Contains(err.Error(), "one endpoint") {
		t.Fatalf("New with two hosts: %v", err)
	}
}

// A network error during authentication (the fail point closes the
// connection on saslContinue) marks the server unknown: the pool is cleared
// and paused, and the next command waits for the monitor, asked for a check,
// to find the server answering, which makes the pool ready again. A user's
// establish-error handler still runs.
func TestSDAMAuthErrorClearsUntilServerAnswers(t *testing.T) {
	s := aliceServer(t, "secret")
	rec := newSDAMEvents()
	var mu sync.Mutex
	var userSaw []error
	// heartbeatFrequencyMS is long: only the selection's request can make
	// the monitor check within the test.
	p := sdamNew(t, "mongodb://alice:secret@"+s.Addr()+"/?appName=sdam-auth&heartbeatFrequencyMS=3600000", rec,
		pool.WithEstablishErrorHandler(func(err error) { mu.Lock(); userSaw = append(userSaw, err); mu.Unlock() }))
	rec.awaitReady(t, ctx(t))
	sdamFailPoint(t, s, mongotest.FailPoint{Commands: []string{"saslContinue"}, AppName: "sdam-auth", CloseConnection: true, Times: 1})

	start := rec.count()
	_, err := p.RunCommand(ctx(t), "admin", ping)
	var ce *pool.ConnectionError
	if !errors.As(err, &ce) || !ce.DuringAuth || pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		t.Fatalf("command: %v, want an unlabelled connection error during authentication", err)
	}
	want := []string{"ConnectionCheckOutStarted", "ConnectionCreated", "ConnectionPoolCleared", "ConnectionClosed", "ConnectionCheckOutFailed"}
	if got := rec.types(start); !slices.Equal(got[:min(len(got), len(want))], want) {
		t.Fatalf("events %v, want %v first", got, want)
	}
	if st := p.Stats(); st.Clears != 1 {
		t.Fatalf("after the error: %+v", st)
	}
	mu.Lock()
	if len(userSaw) != 1 || !errors.Is(userSaw[0], ce) {
		t.Fatalf("the user's handler saw %v", userSaw)
	}
	mu.Unlock()

	if _, err := p.RunCommand(ctx(t), "admin", ping); err != nil {
		t.Fatalf("after the server answered: %v", err)
	}
	rec.awaitReady(t, ctx(t))
	if st := p.Stats(); st.State != "ready" || st.Clears != 1 {
		t.Fatalf("at the end: %+v", st)
	}
}

// Without any command, the monitor checks the server every
// heartbeatFrequencyMS, and the pool becomes ready again.
func TestSDAMHeartbeatRecovers(t *testing.T) {
	s := aliceServer(t, "secret")
	rec := newSDAMEvents()
	p := sdamNew(t, "mongodb://alice:secret@"+s.Addr()+"/?appName=sdam-hb&heartbeatFrequencyMS=500", rec)
	rec.awaitReady(t, ctx(t))
	// A server error during authentication clears too: any establishment
	// error without the backpressure label does.
	sdamFailPoint(t, s, mongotest.FailPoint{Commands: []string{"saslContinue"}, AppName: "sdam-hb", ErrorCode: 18, Times: 1})
	_, err := p.RunCommand(ctx(t), "admin", ping)
	if err == nil || !strings.Contains(err.Error(), "failCommand") {
		t.Fatalf("command: %v, want the fail point's error", err)
	}
	if st := p.Stats(); st.Clears != 1 {
		t.Fatalf("after the auth error: %+v", st)
	}
	rec.awaitReady(t, ctx(t))
	if _, err := p.RunCommand(ctx(t), "admin", ping); err != nil {
		t.Fatalf("after the heartbeat: %v", err)
	}
}

// Errors that carry the SystemOverloadedError label (the pool's, for a
// network error up to the hello; the server's, in its reply) do not clear
// the pool: the server may be overloaded, not gone. A server error in the
// hello without the label does.
func TestSDAMBackpressureDoesNotClear(t *testing.T) {
	var limits caseLimits
	hello := []string{"hello", "isMaster"}
	for _, tc := range []struct {
		name  string
		fp    mongotest.FailPoint
		clear bool
	}{
		{"network error in hello", mongotest.FailPoint{Commands: hello, CloseConnection: true}, false},
		{"overload label in hello reply", mongotest.FailPoint{Commands: hello, ErrorCode: 462, ErrorLabels: []string{pool.LabelSystemOverloaded, pool.LabelRetryable}}, false},
		// BadValue: not a state change. A shutdown code would also have the
		// monitor check the server at once, and the pool could be ready
		// again before the test looks (TestShuttingDownInHandshakeClears
		// covers those codes).
		{"server error in hello", mongotest.FailPoint{Commands: hello, ErrorCode: 2}, true},
	} {
		limits.run(t, tc.name, func(t *testing.T) {
			s := server(t)
			rec := newSDAMEvents()
			// The monitor polls, once an hour: its hello is done before
			// the fail point is set, and no other hello of its (a
			// streaming monitor's round-trip-time hellos) can meet the
			// fail point instead of the pool's connection.
			p := sdamNew(t, s.URI()+"?appName=sdam-bp&heartbeatFrequencyMS=3600000&serverMonitoringMode=poll", rec)
			rec.awaitReady(t, limits.ctx(t))
			fp := tc.fp
			fp.AppName, fp.Times = "sdam-bp", 1
			sdamFailPoint(t, s, fp)
			// An error with the label is retried (the client
			// backpressure specification), and the retry gets through.
			_, err := p.RunCommand(limits.ctx(t), "admin", ping)
			if (err != nil) != tc.clear {
				t.Fatalf("the command through the fail point: %v", err)
			}
			cleared := slices.Contains(rec.types(0), "ConnectionPoolCleared")
			st := p.Stats()
			if cleared != tc.clear || (st.Clears == 1) != tc.clear {
				t.Fatalf("cleared %v (events %v, stats %+v), want %v", cleared, rec.types(0), st, tc.clear)
			}
		})
	}
}

// Two establishments of the same generation fail: the first clears, the
// second is stale and does not clear again.
func TestSDAMStaleErrorDoesNotClearAgain(t *testing.T) {
	s, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AddUser("admin", "alice", "secret"); err != nil {
		t.Fatal(err)
	}
	rec := newSDAMEvents()
	// The monitor polls, once an hour: a streaming one would see the
	// server close too, and clear the pool itself.
	p := sdamNew(t, "mongodb://alice:secret@"+s.Addr()+"/?appName=sdam-stale&maxConnecting=2&heartbeatFrequencyMS=3600000&serverMonitoringMode=poll", rec)
	rec.awaitReady(t, ctx(t))
	// Both connections block in saslContinue; closing the server then
	// breaks them both during authentication.
	sdamFailPoint(t, s, mongotest.FailPoint{Commands: []string{"saslContinue"}, AppName: "sdam-stale", BlockTime: time.Hour, Times: 2})
	c := ctx(t)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := p.RunCommand(c, "admin", ping)
			errs <- err
		}()
	}
	if err := s.WaitForFailPoint(c, 2); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for range 2 {
		var err error
		select {
		case err = <-errs:
		case <-c.Done():
			t.Fatal(c.Err())
		}
		var ce *pool.ConnectionError
		if !errors.As(err, &ce) || !ce.DuringAuth {
			t.Fatalf("command: %v, want a connection error during authentication", err)
		}
	}
	if st := p.Stats(); st.Clears != 1 || st.State != "paused" {
		t.Fatalf("stats %+v, want one clear", st)
	}
	rec.flush()
	if n := len(rec.cleared); n != 1 {
		t.Fatalf("%d PoolCleared events, want 1", n)
	}
}

// In load-balanced mode the pool is never paused: an error after the hello
// clears the service's connections only, and one in the hello clears
// nothing.
func TestSDAMLoadBalanced(t *testing.T) {
	sid := bson.NewObjectID()
	s := aliceServer(t, "secret", mongotest.WithLoadBalanced(sid))
	rec := newSDAMEvents()
	p := sdamNew(t, "mongodb://alice:secret@"+s.Addr()+"/?loadBalanced=true&appName=sdam-lb", rec)

	sdamFailPoint(t, s, mongotest.FailPoint{Commands: []string{"hello", "isMaster"}, AppName: "sdam-lb", ErrorCode: 91, Times: 1})
	if _, err := p.RunCommand(ctx(t), "admin", ping); err == nil {
		t.Fatal("the command succeeded through the hello fail point")
	}
	if st := p.Stats(); st.Clears != 0 || st.State != "ready" {
		t.Fatalf("after a hello error: %+v", st)
	}

	sdamFailPoint(t, s, mongotest.FailPoint{Commands: []string{"saslContinue"}, AppName: "sdam-lb", CloseConnection: true, Times: 1})
	_, err := p.RunCommand(ctx(t), "admin", ping)
	var ce *pool.ConnectionError
	if !errors.As(err, &ce) || !ce.DuringAuth {
		t.Fatalf("command: %v, want a connection error during authentication", err)
	}
	rec.flush()
	select {
	case e := <-rec.cleared:
		if e.ServiceID != pool.ServiceID(sid) {
			t.Fatalf("cleared service %v, want %v", e.ServiceID, sid)
		}
	default:
		t.Fatalf("no PoolCleared event; events %v", rec.types(0))
	}
	if st := p.Stats(); st.Clears != 1 || st.State != "ready" {
		t.Fatalf("after an auth error: %+v", st)
	}
	if _, err := p.RunCommand(ctx(t), "admin", ping); err != nil {
		t.Fatalf("the load-balanced pool does not serve after the clear: %v", err)
	}
}
