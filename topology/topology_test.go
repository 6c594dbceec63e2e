package topology

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/internal/testkit"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// fakeMonitor is a monitor the test drives: it reports what the test tells
// it to, and records what the topology asked of it.
type fakeMonitor struct {
	address string
	h       monitorHandler

	mu                         sync.Mutex
	requested, canceled, close int
	epoch                      uint64
}

func (m *fakeMonitor) markStale() { m.mu.Lock(); m.epoch++; m.mu.Unlock() }
func (m *fakeMonitor) staleSince(e uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch != e
}

func (m *fakeMonitor) RequestCheck() { m.mu.Lock(); m.requested++; m.mu.Unlock() }
func (m *fakeMonitor) CancelCheck()  { m.mu.Lock(); m.canceled++; m.mu.Unlock() }
func (m *fakeMonitor) Close()        { m.mu.Lock(); m.close++; m.mu.Unlock() }

// Done is closed at once: a fake monitor has no goroutine.
func (m *fakeMonitor) Done() <-chan struct{} { return closedChan }

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (m *fakeMonitor) counts() (requested, canceled, closed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requested, m.canceled, m.close
}

type link struct{ err error }

func (*link) Close() error   { return nil }
func (l *link) Err() error   { return l.err }
func (*link) String() string { return "link" }

type connector struct{}

func (connector) Connect(_ context.Context, a *pool.Attempt) (pool.Link, error) {
	a.HelloDone(pool.ServiceID{})
	return &link{}, nil
}

// harness is a Topology with fake monitors and pools of fake connections,
// recording the events of the topology in one list, and those of the pools
// (delivered by goroutines of their own, in no order with the topology's) in
// another. A ServerDescriptionChanged to a data-bearing server is recorded
// with " (ready)" when, as the handler sees it, the server is selectable with
// a ready pool: the topology publishes a change before the events that tell
// of it.
type harness struct {
	t    *testing.T
	topo *Topology

	mu       sync.Mutex
	monitors map[string]*fakeMonitor
	started  []string // the monitors started, in order
	pools    map[string]*pool.Pool
	events   []string
	poolLog  []string
	onEvent  func(Event)
	setLogs  map[*PoolSet]*setLog // the PoolSets' pools' events (poolset_test.go)
}

func newHarness(t *testing.T, s Settings) *harness {
	t.Helper()
	h := &harness{t: t, monitors: map[string]*fakeMonitor{}, pools: map[string]*pool.Pool{}}
	made := make(chan struct{}) // h.topo is set: the handler may run before New returns
	topo, err := New(Config{
		Settings:               s,
		ServerSelectionTimeout: 50 * time.Millisecond,
		MinHeartbeatFrequency:  time.Millisecond,
		NewPool: func(address string, establishFailed func(error)) (*pool.Pool, error) {
			p, err := pool.New(address, connector{},
				pool.WithMaintenanceInterval(-1),
				pool.WithEstablishErrorHandler(establishFailed),
				pool.WithEventHandler(func(e pool.Event) {
					switch e.Type {
					case pool.PoolCreated, pool.PoolReady, pool.PoolCleared, pool.PoolClosed:
						h.mu.Lock()
						h.poolLog = append(h.poolLog, fmt.Sprintf("%v %s", e.Type, e.Address))
						h.mu.Unlock()
					}
				}))
			if err == nil {
				h.mu.Lock()
				h.pools[address] = p
				h.mu.Unlock()
			}
			return p, err
		},
		startMonitor: func(address string, mh monitorHandler) serverMonitor {
			m := &fakeMonitor{address: address, h: mh}
			h.mu.Lock()
			h.monitors[address] = m
			h.started = append(h.started, address)
			h.mu.Unlock()
			return m
		},
		EventHandler: func(e Event) {
			<-made
			line := eventString(e)
			if sdc, ok := e.(*ServerDescriptionChanged); ok && sdc.New.Type.DataBearing() {
				if s, ok := h.topo.Server(sdc.Address); ok && s.Pool().Stats().State == "ready" {
					line += " (ready)"
				}
			}
			h.record(line)
			h.mu.Lock()
			fn := h.onEvent
			h.mu.Unlock()
			if fn != nil {
				fn(e)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.topo = topo
	close(made)
	t.Cleanup(func() { topo.Close() })
	return h
}

func (h *harness) record(s string) {
	h.mu.Lock()
	h.events = append(h.events, s)
	h.mu.Unlock()
}

// flush waits for the events so far to be delivered.
func (h *harness) flush() {
	h.t.Helper()
	if err := h.topo.Flush(ctx(h.t)); err != nil {
		h.t.Fatalf("the events were not delivered: %v", err)
	}
}

// take returns the topology's events recorded since the last call.
func (h *harness) take() string {
	h.t.Helper()
	h.flush()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := strings.Join(h.events, "\n")
	h.events = nil
	return s
}

// takePools returns the pools' events recorded since the last call, one pool
// after the other, each pool's in order.
func (h *harness) takePools() string {
	h.t.Helper()
	h.flush()
	h.mu.Lock()
	defer h.mu.Unlock()
	lines := slices.Clone(h.poolLog)
	slices.SortStableFunc(lines, func(a, b string) int {
		return strings.Compare(a[strings.LastIndexByte(a, ' '):], b[strings.LastIndexByte(b, ' '):])
	})
	h.poolLog = nil
	return strings.Join(lines, "\n")
}

// takeStarted returns the addresses of the monitors started since the last
// call, in order.
func (h *harness) takeStarted() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := strings.Join(h.started, " ")
	h.started = nil
	return s
}

func (h *harness) monitor(address string) *fakeMonitor {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.monitors[address]
	if m == nil {
		h.t.Fatalf("no monitor for %s", address)
	}
	return m
}

// check reports a successful check of address with the hello reply d.
func (h *harness) check(address string, d bson.D) bool {
	h.t.Helper()
	sd := newServerDescription(address, hello(h.t, d), time.Millisecond, time.Now())
	return h.monitor(address).h.Checked(checkOutcome{Server: sd})
}

func primaryHello(hosts ...string) bson.D {
	return bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "setName", Value: "rs"},
		{Key: "hosts", Value: bson.A(toAny(hosts))}, {Key: "minWireVersion", Value: 0}, {Key: "maxWireVersion", Value: 21}}
}

func secondaryHello(hosts ...string) bson.D {
	return bson.D{{Key: "secondary", Value: true}, {Key: "setName", Value: "rs"},
		{Key: "hosts", Value: bson.A(toAny(hosts))}, {Key: "minWireVersion", Value: 0}, {Key: "maxWireVersion", Value: 21}}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// selectType selects the servers of type want, as a stand-in for server
// selection by read preference.
func selectType(want ServerType) Selector {
	return func(d Description, dst []ServerDescription) ([]ServerDescription, error) {
		for _, sd := range d.Servers() {
			if sd.Type == want {
				dst = append(dst, sd)
			}
		}
		return dst, nil
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// A replica set is discovered from one seed: the primary's hosts are added
// with monitors of their own; a pool is made and marked ready for each
// data-bearing server as its check finds it, before selection can pick it.
func TestDiscoveryMakesPoolsReady(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	if got := h.take(); got != "TopologyOpening\nTopologyDescriptionChanged Unknown(0)->Unknown(1)\nServerOpening a:1" {
		t.Fatalf("opening:\n%s", got)
	}
	if got := h.takeStarted(); got != "a:1" {
		t.Fatalf("monitors started: %s", got)
	}
	h.check("a:1", primaryHello("a:1", "b:1", "c:1"))
	// The pool is ready, and the new state published, before the events
	// that tell of it.
	want := strings.Join([]string{
		"ServerDescriptionChanged a:1 Unknown->RSPrimary (ready)",
		"ServerOpening b:1",
		"ServerOpening c:1",
		"TopologyDescriptionChanged Unknown(1)->ReplicaSetWithPrimary(3)",
	}, "\n")
	if got := h.take(); got != want {
		t.Fatalf("after the primary's check:\n%s\nwant:\n%s", got, want)
	}
	if got := h.takePools(); got != "ConnectionPoolCreated a:1\nConnectionPoolReady a:1" {
		t.Fatalf("pool events:\n%s", got)
	}
	if got := h.takeStarted(); got != "b:1 c:1" {
		t.Fatalf("monitors started: %s", got)
	}
	s, err := h.topo.SelectServer(ctx(t), selectType(RSPrimary))
	if err != nil {
		t.Fatal(err)
	}
	if s.Address() != "a:1" || s.InProgress() != 1 {
		t.Fatalf("selected %s with %d in progress", s.Address(), s.InProgress())
	}
	c, err := s.Pool().CheckOut(ctx(t))
	if err != nil {
		t.Fatalf("the selected server's pool: %v", err)
	}
	s.Pool().CheckIn(c)
	s.Done()

	// A secondary is selectable once its check made its pool ready; a
	// selection waiting for it wakes then.
	got := make(chan *Server, 1)
	go func() {
		s, err := h.topo.SelectServer(ctx(t), selectType(RSSecondary))
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	testkit.WaitFor(t, "the waiting selection to ask for checks", func() bool { r, _, _ := h.monitor("b:1").counts(); return r > 0 })
	h.check("b:1", secondaryHello("a:1", "b:1", "c:1"))
	select {
	case s := <-got:
		if s == nil || s.Address() != "b:1" {
			t.Fatalf("selected %v", s)
		}
		if _, err := s.Pool().CheckOut(ctx(t)); err != nil {
			t.Fatalf("the secondary's pool is not ready: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the selection did not wake when the secondary was found")
	}
}

// A server the primary no longer lists is removed: its monitor stopped and
// its pool closed.
func TestRemovedServerIsClosed(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	h.check("a:1", primaryHello("a:1", "b:1"))
	h.check("b:1", secondaryHello("a:1", "b:1"))
	h.take()
	h.takePools()
	h.check("a:1", primaryHello("a:1"))
	if got := h.take(); !strings.Contains(got, "ServerClosed b:1") {
		t.Errorf("no ServerClosed b:1 in:\n%s", got)
	}
	// The monitor and the pool are closed on a goroutine of the
	// topology's, which Close waits for.
	testkit.WaitFor(t, "the monitor of b:1 to be closed", func() bool { _, _, closed := h.monitor("b:1").counts(); return closed > 0 })
	h.mu.Lock()
	pb := h.pools["b:1"]
	h.mu.Unlock()
	testkit.WaitFor(t, "the pool of b:1 to be closed", func() bool { return pb.Stats().State == "closed" })
	if err := pb.Flush(ctx(t)); err != nil { // b:1 is no longer the topology's: its own flush
		t.Fatal(err)
	}
	if got := h.takePools(); !strings.Contains(got, "ConnectionPoolClosed b:1") {
		t.Errorf("no ConnectionPoolClosed b:1 in:\n%s", got)
	}
	if _, _, closed := h.monitor("b:1").counts(); closed != 1 {
		t.Errorf("b's monitor closed %d times", closed)
	}
	if _, ok := h.topo.Server("b:1"); ok {
		t.Error("b:1 is still selectable")
	}
	// A check of the removed server that was under way changes nothing.
	if again := h.check("b:1", secondaryHello("a:1", "b:1")); again || h.take() != "" {
		t.Error("a removed server's check was applied")
	}
}

// A network error on an established connection marks the server Unknown,
// clears its pool and cancels its monitor's check; a second error of the
// same generation is stale, even before the pool carried out the clear.
func TestNetworkErrorClearsOnce(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	h.check("a:1", primaryHello("a:1"))
	h.take()
	s, ok := h.topo.Server("a:1")
	if !ok {
		t.Fatal("a:1 not selectable")
	}
	e, ok := operationError("a:1", 0, nil, true, io.ErrUnexpectedEOF)
	if !ok || e.Kind != kindNetwork {
		t.Fatalf("OperationError: %+v, %v", e, ok)
	}
	h.takePools()
	d := s.handleError(e)
	if !d.MarkUnknown || !d.Clear {
		t.Fatalf("decision %+v", d)
	}
	if got := h.take(); !strings.Contains(got, "ServerDescriptionChanged a:1 RSPrimary->Unknown") {
		t.Errorf("no ServerDescriptionChanged in:\n%s", got)
	}
	if got := h.takePools(); got != "ConnectionPoolCleared a:1" {
		t.Errorf("pool events:\n%s", got)
	}
	if _, canceled, _ := h.monitor("a:1").counts(); canceled != 1 {
		t.Errorf("the monitor's check was canceled %d times", canceled)
	}
	if d := s.handleError(e); d.Clear || d.Reason == "" {
		t.Errorf("a second error of the same generation: %+v", d)
	}
	if got, pools := h.take(), h.takePools(); got != "" || pools != "" {
		t.Errorf("the stale error did something:\n%s\n%s", got, pools)
	}
	if _, err := h.topo.SelectServer(ctx(t), selectType(RSPrimary)); err == nil {
		t.Error("an Unknown server was selected")
	}
	// The next check makes it selectable again.
	h.check("a:1", primaryHello("a:1"))
	if !strings.Contains(h.takePools(), "ConnectionPoolReady a:1") {
		t.Error("the check after the error did not make the pool ready")
	}
}

// A command error that is neither a state change nor a network error leaves
// everything as it is; an error that broke nothing of the connection and is
// no reply of the server is not the topology's business.
func TestOperationErrorsThatChangeNothing(t *testing.T) {
	if _, ok := operationError("a:1", 0, nil, false, errors.New("cannot encode the command")); ok {
		t.Error("an error of the client's own counts")
	}
	if _, ok := operationError("a:1", 0, nil, true, context.Canceled); ok {
		t.Error("a canceled context counts")
	}
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	h.check("a:1", primaryHello("a:1"))
	h.take()
	s, _ := h.topo.Server("a:1")
	e, ok := operationError("a:1", 0, nil, false, &wire.CommandError{Code: 11000, Message: "duplicate key"})
	if !ok || e.Kind != kindCommand {
		t.Fatalf("%+v %v", e, ok)
	}
	if d := s.handleError(e); d.MarkUnknown || d.Clear {
		t.Errorf("a duplicate key error: %+v", d)
	}
	// "not writable primary" marks Unknown and asks for a check, without a
	// clear.
	e, _ = operationError("a:1", 0, nil, false, &wire.CommandError{Code: 10107, Message: "not primary"})
	d := s.handleError(e)
	if !d.MarkUnknown || d.Clear || !d.RequestCheck {
		t.Errorf("NotWritablePrimary: %+v", d)
	}
	if r, _, _ := h.monitor("a:1").counts(); r != 1 {
		t.Errorf("checks requested: %d", r)
	}
}

// A failed check marks the server Unknown and clears its pool, interrupting
// the connections in use after a timeout; a known server's network error is
// retried at once.
func TestFailedCheckClears(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	h.check("a:1", primaryHello("a:1"))
	h.take()
	var interrupted []bool
	h.mu.Lock()
	p := h.pools["a:1"]
	h.mu.Unlock()
	c, err := p.CheckOut(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	again := h.monitor("a:1").h.Checked(checkOutcome{Err: context.DeadlineExceeded, Kind: kindTimeout})
	if !again {
		t.Error("a known server's timeout is not retried at once")
	}
	interrupted = append(interrupted, c.Err() != nil)
	if !interrupted[0] {
		t.Error("a timeout of the check did not interrupt the connection in use")
	}
	if got := h.takePools(); !strings.Contains(got, "ConnectionPoolCleared a:1") {
		t.Errorf("no clear:\n%s", got)
	}
}

// Selection fails after the server selection timeout with an error that
// names the servers, their types and their last errors; and at once when
// the context ends first.
func TestSelectionErrorSaysWhy(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1", "b:1"}})
	h.monitor("a:1").h.Checked(checkOutcome{Err: errors.New("connection refused"), Kind: kindNetwork})
	_, err := h.topo.SelectServer(ctx(t), selectType(RSPrimary))
	var se *SelectionError
	if !errors.As(err, &se) || se.Timeout != 50*time.Millisecond {
		t.Fatalf("err = %v", err)
	}
	// A timeout is a timeout, whichever ran out: the context's deadline or
	// serverSelectionTimeoutMS.
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v is not context.DeadlineExceeded", err)
	}
	for _, want := range []string{"serverSelectionTimeoutMS (50ms)", "a:1 Unknown (connection refused)", "b:1 Unknown"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.topo.SelectServer(c, selectType(RSPrimary)); !errors.Is(err, context.Canceled) {
		t.Errorf("with a canceled context: %v", err)
	}
}

// A load balancer is not monitored; its pool is ready at once.
func TestLoadBalancedPoolIsReadyAtOnce(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"lb:1"}, LoadBalanced: true})
	if got := h.takeStarted(); got != "" {
		t.Fatalf("monitors started: %s", got)
	}
	if got := h.takePools(); !strings.Contains(got, "ConnectionPoolReady lb:1") {
		t.Fatalf("opening:\n%s", got)
	}
	s, err := h.topo.SelectServer(ctx(t), selectType(LoadBalancer))
	if err != nil || s.Address() != "lb:1" {
		t.Fatalf("%v %v", s, err)
	}
}

// Close stops the monitors, closes the pools and ends with TopologyClosed;
// called from an event handler, it does not wait for itself: the handler
// runs on the delivery goroutine, which Close does not wait for.
func TestCloseFromAnEventHandler(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	h.check("a:1", primaryHello("a:1"))
	h.take()
	closed := make(chan struct{})
	h.mu.Lock()
	h.onEvent = func(e Event) {
		if _, ok := e.(*ServerDescriptionChanged); ok {
			h.topo.Close()
			close(closed)
		}
	}
	h.mu.Unlock()
	h.check("a:1", secondaryHello("a:1"))
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close from the handler did not return")
	}
	done := make(chan struct{})
	go func() { h.topo.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if got := h.take(); !strings.HasSuffix(got, "TopologyClosed") {
		t.Fatalf("closing:\n%s", got)
	}
	h.mu.Lock()
	pa := h.pools["a:1"]
	h.mu.Unlock()
	if err := pa.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if got := h.takePools(); !strings.Contains(got, "ConnectionPoolClosed a:1") {
		t.Fatalf("pool events of the closing:\n%s", got)
	}
	if _, _, closed := h.monitor("a:1").counts(); closed != 1 {
		t.Errorf("monitor closed %d times", closed)
	}
	if _, err := h.topo.SelectServer(ctx(t), selectType(RSPrimary)); !errors.Is(err, ErrClosed) {
		t.Errorf("selection after Close: %v", err)
	}
}

// The two random choices prefer the server with fewer operations in
// progress.
func TestSelectionPrefersFewerInProgress(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	h.check("a:1", primaryHello("a:1", "b:1"))
	h.check("b:1", secondaryHello("a:1", "b:1"))
	both := func(d Description, dst []ServerDescription) ([]ServerDescription, error) {
		return append(dst, d.Servers()...), nil
	}
	a, _ := h.topo.Server("a:1")
	a.inProgress.Add(5)
	for range 50 {
		s, err := h.topo.SelectServer(ctx(t), both)
		if err != nil {
			t.Fatal(err)
		}
		if s.Address() != "b:1" {
			t.Fatalf("selected the busier %s", s.Address())
		}
		s.Done()
	}
}

// While no server is suitable, the monitors are asked for a check again and
// again (every minHeartbeatFrequencyMS), not once: a monitor ignores a
// request that comes during a check.
func TestSelectionKeepsAskingForChecks(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	h.topo.timeout = 10 * time.Second
	done := make(chan error, 1)
	go func() {
		s, err := h.topo.SelectServer(ctx(t), selectType(RSPrimary))
		if err == nil {
			s.Done()
		}
		done <- err
	}()
	testkit.WaitFor(t, "three requests for a check", func() bool { r, _, _ := h.monitor("a:1").counts(); return r >= 3 })
	h.check("a:1", primaryHello("a:1"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the selection did not end")
	}
}

// A check that was under way when an error marked the server Unknown (and
// canceled the check) is stale: its success, reported after the decision,
// does not make the server known again.
func TestCanceledCheckIsNotApplied(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	h.check("a:1", primaryHello("a:1"))
	m := h.monitor("a:1")
	m.mu.Lock()
	begun := m.epoch // a check begins
	m.mu.Unlock()
	s, _ := h.topo.Server("a:1")
	e, _ := operationError("a:1", 0, nil, true, io.ErrUnexpectedEOF)
	if d := s.handleError(e); !d.CancelCheck {
		t.Fatalf("decision %+v", d)
	}
	sd := newServerDescription("a:1", hello(t, primaryHello("a:1")), time.Millisecond, time.Now())
	m.h.Checked(checkOutcome{Server: sd, monitor: m, epoch: begun})
	if got, _ := h.topo.Description().Server("a:1"); got.Type != ServerUnknown {
		t.Fatalf("the canceled check made the server %v", got.Type)
	}
}

// A primary with a newer electionId makes the old primary Unknown, and the
// old one's monitor is asked for a check at once (the SDAM rules'
// "updateRSFromPrimary"), so that the client learns what it is now without
// waiting for its heartbeat.
func TestNewerPrimaryChecksTheOldOneAtOnce(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{"a:1"}})
	electedHello := func(term byte) bson.D {
		d := primaryHello("a:1", "b:1")
		return append(d, bson.E{Key: "electionId", Value: bson.ObjectID{11: term}}, bson.E{Key: "setVersion", Value: int64(1)})
	}
	h.check("a:1", electedHello(1))
	h.check("b:1", secondaryHello("a:1", "b:1"))
	before, _, _ := h.monitor("a:1").counts()
	// b:1 reports itself primary in a newer term.
	h.check("b:1", electedHello(2))
	if sd, _ := h.topo.Description().Server("a:1"); sd.Type != ServerUnknown {
		t.Fatalf("the old primary is %v, want Unknown", sd.Type)
	}
	if after, _, _ := h.monitor("a:1").counts(); after != before+1 {
		t.Fatalf("the old primary's monitor was asked for %d checks, want 1", after-before)
	}
}
