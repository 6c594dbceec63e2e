package topology

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/internal/deliver"
	"github.com/mongopool/mongopool/internal/ptree"
	"github.com/mongopool/mongopool/pool"
)

// Defaults of the options a Config leaves at zero.
const (
	// DefaultHeartbeatFrequency is heartbeatFrequencyMS's default.
	DefaultHeartbeatFrequency = 10 * time.Second
	// DefaultServerSelectionTimeout is serverSelectionTimeoutMS's default.
	DefaultServerSelectionTimeout = 30 * time.Second
)

// ErrClosed is returned by a Topology's methods once it is closed.
var ErrClosed = errors.New("topology: the topology is closed")

// serverMonitor is what the topology needs of the monitor of a server (see
// StartMonitor).
type serverMonitor interface {
	// RequestCheck asks for a check as soon as the monitor may. It never
	// blocks: the topology calls it under its lock.
	RequestCheck()
	// CancelCheck cancels the check in progress, closing its connection.
	// The topology calls it without its lock.
	CancelCheck()
	// Close stops the monitor without waiting for it: nothing is reported
	// once Done is closed. It never blocks.
	Close()
	// Done is closed once the monitor's goroutines have ended.
	Done() <-chan struct{}
}

// checkOutcome is what a monitor's check found: the server's description
// when it succeeded, or the error and its kind when it failed.
type checkOutcome struct {
	Server ServerDescription // valid when Err is nil
	Err    error
	Kind   errorKind // of Err

	// monitor and epoch tell, for a Monitor's outcome, whether a
	// cancellation came after the check began (see stale).
	monitor cancelable
	epoch   uint64
}

// cancelable is a monitor whose checks the topology can make stale under
// its lock, without the I/O of CancelCheck: a Monitor.
type cancelable interface {
	markStale()
	staleSince(epoch uint64) bool
}

// stale reports whether the check was canceled after it began: the server
// was marked Unknown since, and the outcome must not undo that. It is asked
// under the topology's lock, which decisions to cancel are taken under too.
func (o checkOutcome) stale() bool {
	return o.monitor != nil && o.monitor.staleSince(o.epoch)
}

// monitorHandler is how a monitor reports to its topology: Checked with the
// outcome of each check, which returns true when the monitor is to check
// again at once (the "retry once" rule); Event with its heartbeat events.
// Both may be called from the monitor's goroutine only, one at a time.
type monitorHandler struct {
	Checked func(checkOutcome) (checkAgainNow bool)
	Event   func(Event)
}

// Config is what a Topology is made of.
type Config struct {
	// Settings are the connection string's seeds and topology options.
	Settings Settings
	// ServerSelectionTimeout bounds SelectServer when the context has no
	// earlier deadline; DefaultServerSelectionTimeout when zero.
	ServerSelectionTimeout time.Duration
	// MinHeartbeatFrequency is minHeartbeatFrequencyMS, 500 ms when zero:
	// while a selection finds no suitable server, it asks the monitors
	// for a check this often. The specification does not let clients
	// change it; tests do.
	MinHeartbeatFrequency time.Duration
	// NewPool makes the pool of the server at address, with the options
	// every server's pool shares. The pool must report its establishment
	// errors to establishFailed (pool.WithEstablishErrorHandler), so that the
	// topology applies the specification's handshake error rules. The pool
	// starts paused, and the topology marks it ready when a check finds the
	// server. NewPool is called at most once per server, when a check first
	// finds it data-bearing (or at once for a load balancer or the server of
	// a Single topology), under the
	// topology's lock, so that the pool is ready before anyone can select
	// the server: it must not block, nor call the topology (pool.New
	// does neither).
	NewPool func(address string, establishFailed func(error)) (*pool.Pool, error)
	// Connection says how the monitor of the server at address connects to
	// it: the settings of the client's connections (TLS, the hello's
	// options, compressors, the dial function, connectTimeoutMS), of which
	// the monitor leaves authentication and the socket timeout out. It is
	// called under the topology's lock, so it must not block. It is not
	// called in a LoadBalanced topology, whose load balancer is not
	// monitored.
	Connection func(address string) connection.Config
	// HeartbeatFrequency is heartbeatFrequencyMS, DefaultHeartbeatFrequency
	// when zero.
	HeartbeatFrequency time.Duration
	// MonitoringMode is serverMonitoringMode: MonitoringAuto when empty.
	MonitoringMode MonitoringMode
	// startMonitor, set by the package's tests, starts fake monitors in
	// place of real ones.
	startMonitor func(address string, h monitorHandler) serverMonitor
	// EventHandler, if not nil, receives the SDAM events (the monitors'
	// heartbeat events among them) in order, one at a time, on a
	// goroutine of the topology's own: neither the topology, nor its
	// monitors, nor an operation ever waits for it, and it may call the
	// Topology back (Close included). Events that come while it is 65,536
	// events behind are dropped and counted (see EventsDropped).
	EventHandler func(Event)
	// Logger, if not nil, receives the SDAM log messages of the logging
	// specification (component "topology"), at level Debug, for the same
	// events, in the same order, and the server selection messages
	// (component "serverSelection"), all written on the goroutine that
	// delivers the events.
	Logger *slog.Logger
}

// Topology is a client's running view of a deployment: the SDAM state
// machine (Description.Apply and the error rules) fed by a monitor per
// server, with a pool per data-bearing server that the rules clear and mark
// ready, and server selection over it.
//
// Every decision is taken under mu, against the current Description, and
// carried out there too: the new Description is published to selection (an
// immutable snapshot, which shares with the one before all that did not
// change), the pools are made, cleared or marked ready, the events are queued
// for the delivery goroutine and the monitors are asked for checks, none of
// which blocks or runs code of the user's. What may block (a monitor or a
// pool stopped, a check canceled) is done by the goroutine that took the
// decision once it has released the lock, or by a goroutine of the
// topology's: no caller ever carries out another's work. A server becomes
// selectable only once its pool is ready: its pool is made ready before the
// snapshot that has it is published.
type Topology struct {
	id           bson.ObjectID
	cfg          Config
	timeout      time.Duration
	minHeartbeat time.Duration

	published atomic.Pointer[snapshot] // what selection sees
	// candidates are buffers for the selectors' results (see
	// SelectServer): a selector is a function value, so a buffer on
	// SelectServer's stack would be moved to the heap at every call.
	candidates sync.Pool // of *candidateBuf
	// events are the events and log records on their way to the handler
	// and the logger.
	events deliver.Queue[delivery]
	// ctx ends when the topology closes: the SRV poller's look-ups.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the topology's goroutines (the SRV poller, the closing of
	// removed servers), which Close waits for.
	wg sync.WaitGroup
	// closeDone is closed once Close is done.
	closeDone chan struct{}

	mu sync.Mutex // protects following fields
	// desc is the current Description, published as it changes.
	desc    Description
	servers serverSet // the servers of desc
	closed  bool
	// poolErr is why Config.NewPool failed, if it did: selection fails
	// with it, as no server can have a pool.
	poolErr error
	// retired are the pools of the servers removed (and, after Close, of
	// all of them) whose events may not all be delivered yet: Flush waits
	// for them too. A pool leaves the list once its events are out.
	retired []*pool.Pool
	// sets are the PoolSets open, by their index in Server.more; nil
	// where one was closed, for the next to take.
	sets []*PoolSet
	// readySoon are the timers that make a PoolSet's pool ready again
	// after its credential was refused (see readySoonLocked).
	readySoon map[*pool.Pool]*time.Timer
}

// serverSet is the topology's servers by address, persistent like a
// Description's, so that a snapshot keeps them at no cost.
type serverSet = ptree.Map[*Server, struct{}, noSummary]

// noSummary is the summary of a serverSet: none.
type noSummary struct{}

func (noSummary) Leaf(string, *Server) struct{}    { return struct{}{} }
func (noSummary) Join(struct{}, struct{}) struct{} { return struct{}{} }

// snapshot is what selection reads: a Description, with the servers, and
// why selection cannot succeed at all, if it cannot. It is never changed: a
// new one replaces it, and changed is closed then, waking the selections
// that found no suitable server.
type snapshot struct {
	desc    Description
	servers serverSet
	closed  bool
	poolErr error
	changed chan struct{}
}

// delivery is what the delivery goroutine hands on: an SDAM event, or a log
// record built where it happened (a server selection's).
type delivery struct {
	event  Event
	record *slog.Record
	ctx    context.Context // of the record
}

// effects are what a decision leaves to do once mu is released, by the
// goroutine that took it: what may block, or wake other goroutines.
type effects struct {
	changed []chan struct{} // of the snapshots replaced: closed
	wake    bool            // the delivery goroutine is to be woken
	cancel  []serverMonitor // checks to cancel
	stopped []*Server       // servers removed: their monitor and pool to close
}

// New opens a topology: its initial Description from cfg.Settings, the
// opening events, a monitor per seed, and in a LoadBalanced topology the
// load balancer's pool, ready at once.
func New(cfg Config) (*Topology, error) {
	if cfg.NewPool == nil {
		return nil, errors.New("topology: Config.NewPool is nil")
	}
	if cfg.Connection == nil && cfg.startMonitor == nil && !cfg.Settings.LoadBalanced {
		return nil, errors.New("topology: Config.Connection is nil: the monitors need to connect")
	}
	id := bson.NewObjectID()
	desc, events, err := openEvents(id, cfg.Settings)
	if err != nil {
		return nil, err
	}
	t := &Topology{
		id:        id,
		cfg:       cfg,
		timeout:   cfg.ServerSelectionTimeout,
		desc:      desc,
		closeDone: make(chan struct{}),
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.events.Init(0, t.deliver, t.eventsDropped)
	if t.timeout <= 0 {
		t.timeout = DefaultServerSelectionTimeout
	}
	t.minHeartbeat = cfg.MinHeartbeatFrequency
	if t.minHeartbeat <= 0 {
		t.minHeartbeat = monitorMinHeartbeat
	}
	t.published.Store(&snapshot{desc: desc, changed: make(chan struct{})})
	var fx effects
	t.mu.Lock()
	t.queueEventsLocked(events, &fx)
	for c := desc.servers.Cursor(); c.Next(); {
		s := t.addServerLocked(c.Key())
		switch {
		case c.Value().Type == LoadBalancer:
			t.wantPoolLocked(s)
		case desc.Type == Single:
			// The one server's pool exists from the start, paused
			// until a check finds the server.
			t.poolLocked(s)
		}
	}
	t.publishLocked(&fx)
	t.unlock(&fx)
	return t, nil
}

// ID returns the topology's id, the one its events carry.
func (t *Topology) ID() bson.ObjectID { return t.id }

// Description returns the Description selection sees now.
func (t *Topology) Description() Description { return t.published.Load().desc }

// Server returns the server at address, if it is in the topology with a
// pool (which may be paused: selection waits for it to be ready).
func (t *Topology) Server(address string) (*Server, bool) {
	s, ok := t.published.Load().servers.Get(address)
	if !ok || s.pool.Load() == nil {
		return nil, false
	}
	return s, true
}

// Err returns why selection cannot succeed at all, nil while it can: ErrClosed
// once the topology is closed, or why a server's pool could not be made.
func (t *Topology) Err() error { return t.published.Load().unusable() }

// Flush returns once the event handler and the logger have had every event
// and log record the topology queued before the call, and the pools' event
// handlers every event of the pools of the topology's servers (those removed,
// and after Close all of them, included), or with ctx's error when ctx ends
// first. Called from an event handler, it waits until
// ctx ends.
func (t *Topology) Flush(ctx context.Context) error {
	if err := t.events.Wait(ctx); err != nil {
		return err
	}
	t.mu.Lock()
	pools := slices.Clone(t.retired)
	t.mu.Unlock()
	for c := t.published.Load().servers.Cursor(); c.Next(); {
		pools = c.Value().appendPools(pools)
	}
	for _, p := range pools {
		if err := p.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// EventsDropped returns the number of events (and log records) the event
// handler and the logger never got, because they were 65,536 events behind
// when the events came.
func (t *Topology) EventsDropped() uint64 { return t.events.Dropped() }

// unlock releases mu, then carries out fx: the effects of the decisions its
// caller took under it, and no one else's.
func (t *Topology) unlock(fx *effects) {
	t.mu.Unlock()
	for _, ch := range fx.changed {
		close(ch)
	}
	if fx.wake {
		t.events.Wake()
	}
	for _, m := range fx.cancel {
		m.CancelCheck()
	}
	for _, s := range fx.stopped {
		go s.stop()
	}
}

// addServerLocked adds the server at address, with its monitor.
func (t *Topology) addServerLocked(address string) *Server {
	s := &Server{topo: t, address: address}
	t.servers = t.servers.Set(address, s)
	t.startMonitorLocked(s)
	return s
}

// startMonitorLocked starts the monitor of s.
func (t *Topology) startMonitorLocked(s *Server) {
	if t.desc.Type == LoadBalanced {
		return
	}
	h := monitorHandler{
		Checked: func(o checkOutcome) bool { return t.checked(s, o) },
		Event:   func(e Event) { t.monitorEvent(s, e) },
	}
	var m serverMonitor
	if t.cfg.startMonitor != nil {
		m = t.cfg.startMonitor(s.address, h)
	} else {
		m = startMonitor(monitorConfig{
			Address:               s.address,
			Conn:                  t.cfg.Connection(s.address),
			HeartbeatFrequency:    t.cfg.HeartbeatFrequency,
			MinHeartbeatFrequency: t.minHeartbeat,
			Mode:                  t.cfg.MonitoringMode,
			Handler:               h,
		})
	}
	s.monitor.Store(&m)
}

// checked applies the outcome of a check of s by its monitor.
func (t *Topology) checked(s *Server, o checkOutcome) bool {
	var fx effects
	t.mu.Lock()
	if t.closed || s.removed || o.stale() {
		t.unlock(&fx)
		return false
	}
	again := false
	if o.Err == nil {
		t.applyLocked(o.Server, &fx)
	} else {
		d := t.desc.decideCheckError(s.address, o.Kind, o.Err)
		t.carryOutLocked(s, d, nil, nil, &fx)
		again = d.CheckAgainNow
	}
	t.unlock(&fx)
	return again
}

// applyLocked applies a server description to the topology and carries out
// what follows: the events, the pool made ready when the server is found
// data-bearing, monitors started and servers removed, checks asked for.
func (t *Topology) applyLocked(sd ServerDescription, fx *effects) update {
	u := t.desc.apply(sd)
	if u.Applied {
		t.applyUpdateLocked(u, fx)
	}
	return u
}

// applyUpdateLocked makes u's Description the topology's and carries out
// what follows: the pool of u's server made ready when the server was found
// data-bearing, servers added and removed, the new state published, the
// events queued, the monitors of the servers added started, and the checks
// asked for. Its work is proportional to what u changed.
func (t *Topology) applyUpdateLocked(u update, fx *effects) {
	t.desc = u.Description
	// The servers' new state (pools made ready, servers added and
	// removed) is published before the events that tell of it: a handler
	// that learns of a change and selects a server sees the change.
	for _, a := range u.Removed {
		if s, ok := t.servers.Get(a); ok {
			t.servers = t.servers.Delete(a)
			t.removeLocked(s, fx)
		}
	}
	added := make([]*Server, 0, len(u.Added))
	for _, a := range u.Added {
		s := &Server{topo: t, address: a}
		t.servers = t.servers.Set(a, s)
		added = append(added, s)
	}
	if s, ok := t.servers.Get(u.Address); ok && poolReadyAfter(u.Server, t.desc.Type) {
		t.wantPoolLocked(s)
	}
	t.publishLocked(fx)
	t.queueEventsLocked(u.events(t.id), fx)
	// The monitors of the servers added start after their ServerOpening.
	for _, s := range added {
		t.startMonitorLocked(s)
	}
	for _, a := range u.CheckNow {
		if s, ok := t.servers.Get(a); ok {
			s.RequestCheck()
		}
	}
}

// removeLocked marks s removed: its monitor and pool are closed once the
// lock is released, on a goroutine of the topology's.
func (t *Topology) removeLocked(s *Server, fx *effects) {
	s.removed = true
	t.wg.Add(1) // under the lock, before Close can wait
	fx.stopped = append(fx.stopped, s)
	t.retireLocked(s)
}

// retireLocked keeps the pool of s, if it has one, for Flush, and forgets
// the pools retired before whose events are all out.
func (t *Topology) retireLocked(s *Server) {
	t.retired = s.appendPools(slices.DeleteFunc(t.retired, delivered))
}

// delivered reports whether p is closed and its events all delivered.
func delivered(p *pool.Pool) bool {
	st := p.Stats()
	return st.State == "closed" && st.EventsPending == 0
}

// poolReadyAfter reports whether a check that found sd makes its pool ready:
// it is data-bearing, or the client talks to it alone, whatever it is.
func poolReadyAfter(sd ServerDescription, tt TopologyType) bool {
	if sd.Type == ServerUnknown || sd.Type == PossiblePrimary {
		return false
	}
	return sd.Type.DataBearing() || tt == Single
}

// wantPoolLocked makes the pool of s ready, making it first if s has none:
// before the new state is published, so that a server is selectable only
// with a ready pool, and a handler that hears of it finds it so.
func (t *Topology) wantPoolLocked(s *Server) {
	if p := t.poolLocked(s); p != nil {
		p.Ready()
	}
	for _, ps := range t.sets {
		if ps != nil {
			if p := ps.poolLocked(s); p != nil {
				p.Ready()
			}
		}
	}
}

// poolLocked returns the pool of s, making it if s has none; nil if it
// cannot be made (selection then fails with why).
func (t *Topology) poolLocked(s *Server) *pool.Pool {
	if p := s.pool.Load(); p != nil {
		return p
	}
	p, err := t.cfg.NewPool(s.address, func(err error) { t.establishFailed(nil, s, err) })
	if err != nil {
		t.poolErr = fmt.Errorf("topology: cannot make the pool of %s: %w", s.address, err)
		return nil
	}
	s.pool.Store(p)
	return p
}

// stop stops the monitor of a removed server and closes its pool. It runs on
// a goroutine of its own, which Close waits for.
func (s *Server) stop() {
	defer s.topo.wg.Done()
	if m := s.monitor.Load(); m != nil {
		(*m).Close()
		<-(*m).Done()
	}
	for _, p := range s.appendPools(nil) {
		p.Close()
	}
}

// carryOutLocked carries out a decision about s: the server marked Unknown,
// its pool cleared, its monitor's check canceled or asked for.
//
// The server's pools are all cleared, its PoolSets' with its own, unless
// d.OwnPoolOnly says to clear only the pool of ps (nil: the topology's own),
// whose connection met the error.
func (t *Topology) carryOutLocked(s *Server, d decision, cause error, ps *PoolSet, fx *effects) {
	if d.MarkUnknown {
		t.applyLocked(d.Server, fx)
	}
	if d.Clear {
		svc := pool.ServiceID{}
		if d.ServiceID != nil {
			svc = pool.ServiceID(*d.ServiceID)
		}
		if cause == nil {
			cause = d.Server.Error
		}
		o := pool.ClearOptions{InterruptInUse: d.InterruptInUse, Cause: cause, ServiceID: svc}
		var buf [4]*pool.Pool
		var pools []*pool.Pool
		if d.OwnPoolOnly {
			pools = append(buf[:0], ps.pool(s))
		} else {
			pools = s.appendPools(buf[:0])
		}
		for _, p := range pools {
			if p != nil {
				p.Clear(o)
			}
		}
	}
	if d.CancelCheck {
		if m := s.monitor.Load(); m != nil {
			// The check under way is stale from now on, even if it ends
			// before the cancellation closes its connection.
			if c, ok := (*m).(cancelable); ok {
				c.markStale()
			}
			fx.cancel = append(fx.cancel, *m)
		}
	}
	if d.RequestCheck {
		s.RequestCheck()
	}
}

// HandleError applies the specification's rules to an error an application's
// operation met on the server at e.Address: the server may be marked
// Unknown, its pool cleared, its monitor asked for a check. It returns the
// decision taken (the zero decision, with a Reason, when the error was
// ignored), with the decision published to selection, so that a retry does
// not select the server as it was. It never waits for anything but the
// topology's lock, which is held for work proportional to the change.
//
// ps is the PoolSet whose connection met the error, nil for the topology's
// own pools: the error's generation is compared with that pool's, and a
// PoolSet's refused credential clears that pool alone (see PoolSet).
func (t *Topology) handleError(ps *PoolSet, e appError) decision {
	var fx effects
	t.mu.Lock()
	s, ok := t.servers.Get(e.Address)
	if t.closed || !ok {
		t.unlock(&fx)
		return decision{Reason: "the server is not in the topology"}
	}
	if ps != nil && ps.closed {
		t.unlock(&fx)
		return decision{Reason: "the pool set is closed"}
	}
	d := t.desc.decideAppError(s.generation(ps, e.ServiceID), e)
	if ps != nil && (d.MarkUnknown || d.Clear) && e.Phase == duringAuth && e.Kind == kindCommand && !isStateChange(e.Code, e.Message) {
		// The server answered, and refused this set's credential: the
		// others' pools have nothing to do with it. The pool is
		// cleared, as the rules clear a refused client's, so that its
		// check-outs fail at once with the server's error, and made
		// ready again after minHeartbeatFrequencyMS (a streaming
		// monitor's next check may be a heartbeat away).
		d = decision{Clear: true, ServiceID: d.ServiceID, OwnPoolOnly: true}
	}
	t.carryOutLocked(s, d, e.Err, ps, &fx)
	if d.OwnPoolOnly {
		t.readySoonLocked(ps, s)
	}
	t.unlock(&fx)
	return d
}

// readySoonLocked makes the pool of s in ps ready again after
// minHeartbeatFrequencyMS, if the server's own is ready then: the server
// refused the set's credential, which is tried again no sooner.
func (t *Topology) readySoonLocked(ps *PoolSet, s *Server) {
	p := ps.Pool(s)
	if p == nil || t.readySoon[p] != nil {
		return
	}
	if t.readySoon == nil {
		t.readySoon = map[*pool.Pool]*time.Timer{}
	}
	t.wg.Add(1) // under the lock, before Close can wait
	t.readySoon[p] = time.AfterFunc(t.minHeartbeat, func() {
		defer t.wg.Done()
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.readySoon, p)
		if own := s.pool.Load(); !t.closed && !s.removed && ps.Pool(s) == p && own != nil && own.Stats().State == "ready" {
			p.Ready()
		}
	})
}

// establishFailed is the establish-error handler of the pool of s in ps
// (nil: the topology's own).
func (t *Topology) establishFailed(ps *PoolSet, s *Server, err error) {
	t.handleError(ps, establishError(s.address, err))
}

// monitorEvent queues a monitor's heartbeat event, in order with the rest,
// unless its server was removed meanwhile.
func (t *Topology) monitorEvent(s *Server, e Event) {
	if !t.listening() {
		return
	}
	var fx effects
	t.mu.Lock()
	if !t.closed && !s.removed {
		t.queueEventsLocked([]Event{e}, &fx)
	}
	t.unlock(&fx)
}

// RequestCheck asks every monitor for a check as soon as it may: a selection
// found no suitable server. It takes no lock: it asks the servers of the
// published snapshot.
func (t *Topology) RequestCheck() { t.published.Load().requestChecks() }

// requestChecks asks the monitor of every server of snap for a check.
func (snap *snapshot) requestChecks() {
	for c := snap.servers.Cursor(); c.Next(); {
		c.Value().RequestCheck()
	}
}

// Close closes the topology: the monitors are stopped, the pools closed, and
// the closing events queued (a ServerClosed per server, a
// TopologyDescriptionChanged, TopologyClosed). It returns once the
// topology's goroutines, its monitors' and its pools' have ended. It does not
// wait for the event handler, which gets the closing events after Close
// returns: a handler may call Close. Later calls wait for the first one's
// closing.
func (t *Topology) Close() error {
	var fx effects
	t.mu.Lock()
	if t.closed {
		t.unlock(&fx)
		<-t.closeDone
		return nil
	}
	t.closed = true
	for p, timer := range t.readySoon {
		if timer.Stop() {
			t.wg.Done()
		}
		delete(t.readySoon, p)
	}
	desc, events := closeEvents(t.id, t.desc)
	t.desc = desc
	var servers []*Server
	for c := t.servers.Cursor(); c.Next(); {
		c.Value().removed = true
		servers = append(servers, c.Value())
		t.retireLocked(c.Value())
	}
	t.servers = serverSet{}
	t.publishLocked(&fx)
	t.queueEventsLocked(events, &fx)
	if t.events.Close() {
		fx.wake = true
	}
	t.unlock(&fx)
	t.cancel()
	// Everything is told to stop first, then waited for: the monitors
	// and pools end together, not one after the other.
	for _, s := range servers {
		if m := s.monitor.Load(); m != nil {
			(*m).Close()
		}
	}
	var closing sync.WaitGroup
	for _, s := range servers {
		for _, p := range s.appendPools(nil) {
			closing.Go(func() { p.Close() })
		}
	}
	for _, s := range servers {
		if m := s.monitor.Load(); m != nil {
			<-(*m).Done()
		}
	}
	closing.Wait()
	t.wg.Wait()
	close(t.closeDone)
	return nil
}

// queueEventsLocked queues the events for the handler and the logger, in
// order.
func (t *Topology) queueEventsLocked(events []Event, fx *effects) {
	if !t.listening() {
		return
	}
	for _, e := range events {
		if t.events.Push(delivery{event: e}) {
			fx.wake = true
		}
	}
}

// queueRecord queues a log record built where it happened.
func (t *Topology) queueRecord(ctx context.Context, r slog.Record) {
	if t.events.Push(delivery{record: &r, ctx: context.WithoutCancel(ctx)}) {
		t.events.Wake()
	}
}

// publishLocked publishes the current Description, with the servers, to
// selection.
func (t *Topology) publishLocked(fx *effects) {
	next := &snapshot{desc: t.desc, servers: t.servers, closed: t.closed, poolErr: t.poolErr, changed: make(chan struct{})}
	prev := t.published.Swap(next)
	fx.changed = append(fx.changed, prev.changed)
}

// listening reports whether anyone receives the events: an event handler
// or a logger. Events are not even built otherwise.
func (t *Topology) listening() bool { return t.cfg.EventHandler != nil || t.cfg.Logger != nil }

// deliver hands an event to the logger and the handler, or a record to the
// logger: on the delivery goroutine, in the order they were queued.
func (t *Topology) deliver(d delivery) {
	l := t.cfg.Logger
	if d.record != nil {
		if h := l.Handler(); h.Enabled(d.ctx, d.record.Level) {
			h.Handle(d.ctx, *d.record)
		}
		return
	}
	// The log message first: a handler that waits for the event may look
	// for the message next.
	if l != nil {
		logEvent(l, t.id, d.event)
	}
	if t.cfg.EventHandler != nil {
		t.cfg.EventHandler(d.event)
	}
}

// eventsDropped tells the logger that events were dropped.
func (t *Topology) eventsDropped(n uint64) {
	if l := t.cfg.Logger; l != nil {
		l.LogAttrs(context.Background(), slog.LevelWarn,
			"mongopool: topology events dropped: the event handler or the logger is slower than the topology",
			slog.String("component", componentTopology), slog.String("topologyId", t.id.Hex()), slog.Uint64("dropped", n))
	}
}

// Server is one server of a Topology: its address, its pool, and the count of
// operations in progress that selection balances.
type Server struct {
	topo    *Topology
	address string
	pool    atomic.Pointer[pool.Pool]
	// more are the server's pools of the topology's PoolSets, by the
	// sets' index, nil where a set has none: replaced, never changed,
	// under the topology's lock.
	more    atomic.Pointer[[]setPool]
	monitor atomic.Pointer[serverMonitor] // set once, when it starts
	// inProgress counts the operations selected on the server and not done.
	inProgress atomic.Int64

	// Fields protected by topo.mu:
	removed bool
}

// Address returns the server's address.
func (s *Server) Address() string { return s.address }

// Pool returns the server's pool, the topology's own (Config.NewPool's);
// nil until a check first found the server. A PoolSet's pool of the server
// is PoolSet.Pool's.
func (s *Server) Pool() *pool.Pool { return s.pool.Load() }

// appendPools appends the pools of s, the topology's own and its PoolSets',
// to dst.
func (s *Server) appendPools(dst []*pool.Pool) []*pool.Pool {
	if p := s.pool.Load(); p != nil {
		dst = append(dst, p)
	}
	if more := s.more.Load(); more != nil {
		for _, sp := range *more {
			if sp.pool != nil {
				dst = append(dst, sp.pool)
			}
		}
	}
	return dst
}

// InProgress returns the number of operations in progress on the server.
func (s *Server) InProgress() int64 { return s.inProgress.Load() }

// Done ends an operation that SelectServer counted on s.
func (s *Server) Done() { s.inProgress.Add(-1) }

// HandleError applies the error rules to e, an error met on this server.
func (s *Server) handleError(e appError) decision {
	e.Address = s.address
	return s.topo.handleError(nil, e)
}

// OperationFailed applies the specification's error rules to err, which an
// application's operation met on a connection of the server's pool of
// generation gen (of service svc, in a load-balanced topology; nil
// otherwise): the server may be marked Unknown, its pool cleared, its
// monitor asked for a check. broken says whether err broke the connection (a
// network error, a reply that breaks the protocol: the connection's Err).
// An error that is none of the server's (the caller's context ending, a
// command that could not be encoded) changes nothing. The decision is
// published to selection before OperationFailed returns, so that a retry
// does not select the server as it was; it never waits for anything but the
// topology's lock.
func (s *Server) OperationFailed(gen uint64, svc *bson.ObjectID, broken bool, err error) {
	if e, ok := operationError(s.address, gen, svc, broken, err); ok {
		s.handleError(e)
	}
}

// ReplyReceived applies the error rules to a successful reply (ok: 1) that a
// connection of the server's pool of generation gen (service svc) received:
// a writeConcernError with a state change code ("not writable primary",
// "shutting down") counts as the same error in a failed reply would. A reply
// without one costs a look for the field's name.
func (s *Server) ReplyReceived(gen uint64, svc *bson.ObjectID, reply bson.Raw) {
	if !bytes.Contains(reply, writeConcernErrorKey) {
		return
	}
	if e, ok := replyError(s.address, reply); ok {
		e.Phase, e.Generation, e.ServiceID = afterHandshake, gen, svc
		s.handleError(e)
	}
}

// writeConcernErrorKey is the name of a reply's writeConcernError field as
// it appears in the BSON.
var writeConcernErrorKey = []byte("writeConcernError\x00")

// generation returns the generation of the pool of s in ps (nil: the
// topology's own), or of its service svcID in load-balanced mode; 0 without
// a pool.
func (s *Server) generation(ps *PoolSet, svcID *bson.ObjectID) uint64 {
	svc := pool.ServiceID{}
	if svcID != nil {
		svc = pool.ServiceID(*svcID)
	}
	if p := ps.pool(s); p != nil {
		return p.Generation(svc)
	}
	return 0
}

// RequestCheck asks the server's monitor for a check as soon as it may: an
// operation found its pool paused. It never blocks.
func (s *Server) RequestCheck() {
	if m := s.monitor.Load(); m != nil {
		(*m).RequestCheck()
	}
}

// Selector returns the servers of d suitable for an operation, within the
// latency window, appended to dst; an error when the operation cannot be
// served by this kind of topology at all (an invalid read preference, an
// incompatible server).
type Selector func(d Description, dst []ServerDescription) ([]ServerDescription, error)

// SelectServer selects a server for an operation: among the suitable servers
// that sel returns, two picked at random, the one with fewer operations in
// progress (the specification's "power of two random choices"). While none
// is suitable, it asks the monitors for checks and waits for the topology to
// change, until ctx ends or the server selection timeout passes. The
// operation counts on the server until Done is called.
//
// op, if given, names the operation in the server selection log messages
// (see Operation), which the Config's Logger receives.
func (t *Topology) SelectServer(ctx context.Context, sel Selector, op ...Operation) (*Server, error) {
	start := time.Now()
	logs := t.selectionLog(ctx, start, op)
	var timer *time.Timer
	var recheck *time.Ticker
	buf, _ := t.candidates.Get().(*candidateBuf)
	if buf == nil {
		buf = new(candidateBuf)
	}
	defer t.putCandidates(buf)
	for {
		snap := t.published.Load()
		logs.started(snap.desc)
		if err := snap.unusable(); err != nil {
			return nil, logs.failed(snap.desc, err)
		}
		candidates, err := sel(snap.desc, buf[:0])
		if err != nil {
			return nil, logs.failed(snap.desc, &SelectionError{Description: snap.desc, Err: err})
		}
		if s := pickServer(snap, candidates); s != nil {
			logs.succeeded(snap.desc, s.address)
			return s, nil
		}
		logs.waiting(snap.desc)
		if timer == nil {
			timer = time.NewTimer(t.timeout)
			defer timer.Stop()
			// While no server is suitable, the monitors are asked for a
			// check now and every minHeartbeatFrequencyMS (a request
			// that came while a check was under way was ignored), not at
			// every change: a change comes from a check.
			recheck = time.NewTicker(t.minHeartbeat)
			defer recheck.Stop()
			snap.requestChecks()
		}
		select {
		case <-recheck.C:
			t.published.Load().requestChecks()
		case <-snap.changed:
		case <-ctx.Done():
			e := &SelectionError{Description: t.published.Load().desc, Err: ctx.Err(), Waited: time.Since(start)}
			return nil, logs.failed(e.Description, e)
		case <-timer.C:
			e := &SelectionError{Description: t.published.Load().desc, Err: context.DeadlineExceeded, Waited: time.Since(start),
				Timeout: t.timeout}
			return nil, logs.failed(e.Description, e)
		}
	}
}

// candidateBuf holds the candidates of most selections: a deployment's
// suitable servers are seldom more (a selector that returns more grows its
// own slice).
type candidateBuf [4]ServerDescription

// putCandidates clears buf, so that it keeps no description alive, and
// keeps it for another selection.
func (t *Topology) putCandidates(buf *candidateBuf) {
	clear(buf[:])
	t.candidates.Put(buf)
}

// unusable returns why selection cannot succeed, if it cannot: the topology
// is closed, or its pools cannot be made.
func (snap *snapshot) unusable() error {
	if snap.closed {
		return ErrClosed
	}
	return snap.poolErr
}

// pickServer picks among candidates those that have a pool, two at random,
// and counts an operation on the one with fewer in progress.
func pickServer(snap *snapshot, candidates []ServerDescription) *Server {
	// A candidate without a pool yet counts as the busiest: it is picked
	// only when both draws fall on such servers, and then none is.
	i := choose(candidates, rand.IntN, snap.inProgress)
	if i < 0 {
		return nil
	}
	s, ok := snap.servers.Get(candidates[i].Address)
	if !ok || s.pool.Load() == nil {
		return nil
	}
	s.inProgress.Add(1)
	return s
}

// inProgress returns the operations in progress on the server at address,
// or math.MaxInt64 when it has no pool.
func (snap *snapshot) inProgress(address string) int64 {
	if s, ok := snap.servers.Get(address); ok && s.pool.Load() != nil {
		return s.inProgress.Load()
	}
	return math.MaxInt64
}

// SelectionError is returned by SelectServer when no suitable server was
// found in time: it carries the topology's Description at the end, so that
// the message says which servers were seen, in which state, and their last
// errors.
type SelectionError struct {
	Description Description
	// Err is the context's error when it ended first,
	// context.DeadlineExceeded when serverSelectionTimeoutMS did, or the
	// selector's: errors.Is(err, context.DeadlineExceeded) holds for
	// every timeout.
	Err error
	// Waited is how long the selection waited; Timeout the server
	// selection timeout, when that is what ended it.
	Waited, Timeout time.Duration
}

// Error describes the failure with the topology's servers.
func (e *SelectionError) Error() string {
	return "server selection failed: " + e.reason() + "; topology: " + e.Description.Summary()
}

// Unwrap returns the context's or the selector's error, if any, then the last
// errors of the servers (at most maxShownServers of them, by address), so
// that errors.Is and errors.As find why the servers could not be used: a
// refused connection, a server's error to the monitor's hello, a failed
// authentication.
func (e *SelectionError) Unwrap() []error {
	var errs []error
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	for c := e.Description.servers.Cursor(); c.Next() && len(errs) < maxShownServers+1; {
		if err := c.Value().Error; err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// failedMonitor is the monitor of a server that cannot be monitored at all:
// it reports its error once, as a failed check, when started.
type failedMonitor struct{ done chan struct{} }

func (failedMonitor) RequestCheck()           {}
func (failedMonitor) CancelCheck()            {}
func (failedMonitor) Close()                  {}
func (m failedMonitor) Done() <-chan struct{} { return m.done }

// startFailedMonitor returns a monitor for the server at address that cannot
// check it because of err (settings that cannot apply to it): err is
// reported as a failed check, so that the server stays Unknown with err as
// its error, which server selection errors tell.
func startFailedMonitor(address string, err error, h monitorHandler) serverMonitor {
	m := failedMonitor{done: make(chan struct{})}
	go func() {
		defer close(m.done)
		h.Checked(checkOutcome{Err: fmt.Errorf("cannot monitor %s: %w", address, err), Kind: kindCommand})
	}()
	return m
}
