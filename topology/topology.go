package topology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/internal/goid"
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

// ServerMonitor is what the topology needs of the monitor of a server (see
// StartMonitor): to be asked for a check, to cancel the check in progress
// and to be stopped. None of them may block, nor call the topology back
// before returning.
type ServerMonitor interface {
	RequestCheck()
	CancelCheck()
	Close()
}

// CheckOutcome is what a monitor's check found: the server's description
// when it succeeded, or the error and its kind when it failed.
type CheckOutcome struct {
	Server ServerDescription // valid when Err is nil
	Err    error
	Kind   ErrorKind // of Err

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
func (o CheckOutcome) stale() bool {
	return o.monitor != nil && o.monitor.staleSince(o.epoch)
}

// MonitorHandler is how a monitor reports to its topology: Checked with the
// outcome of each check, which returns true when the monitor is to check
// again at once (the "retry once" rule); Event with its heartbeat events.
// Both may be called from the monitor's goroutine only, one at a time.
type MonitorHandler struct {
	Checked func(CheckOutcome) (checkAgainNow bool)
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
	// finds it data-bearing (or at once for a load balancer), never under a
	// lock of the topology's.
	NewPool func(address string, establishFailed func(error)) (*pool.Pool, error)
	// StartMonitor starts the monitor of the server at address, which
	// reports to h. It is not called in a LoadBalanced topology, whose load
	// balancer is not monitored.
	StartMonitor func(address string, h MonitorHandler) ServerMonitor
	// EventHandler, if not nil, receives the SDAM events (the monitors'
	// heartbeat events among them) in order, one at a time, never under a
	// lock of the topology's: it may call the Topology back.
	EventHandler func(Event)
	// Logger, if not nil, receives the SDAM log messages of the logging
	// specification (component "topology"), at level Debug, for the same
	// events, in the same order.
	Logger *slog.Logger
}

// Topology is a client's running view of a deployment: the SDAM state
// machine (Description.Apply and the error rules) fed by a monitor per
// server, with a pool per data-bearing server that the rules clear and mark
// ready, and server selection over it.
//
// Decisions are taken under mu, against the current Description, and their
// effects (events, pool transitions, monitor requests, publishing the new
// Description to selection) are carried out outside it, in the order they
// were taken (see post): a check that found the server cannot mark its pool
// ready after an error cleared it, and no handler of ours runs under a lock.
// A server becomes selectable only once its pool is ready: selection reads
// the Description published after the pool transitions that came with it.
type Topology struct {
	id           bson.ObjectID
	cfg          Config
	timeout      time.Duration
	minHeartbeat time.Duration

	published atomic.Pointer[snapshot] // what selection sees

	mu sync.Mutex // protects following fields
	// desc is the current Description, ahead of the published one by the
	// effects still queued.
	desc    Description
	servers map[string]*Server // the servers of desc
	closed  bool
	// queue holds the effects of decisions not carried out yet, in order;
	// applying is true while a goroutine carries them out.
	queue    []func()
	applying bool
	applier  uint64 // the goroutine carrying the effects out, while applying
	// posted and applied count the effects queued and carried out;
	// appliedCond, on mu, is signalled as applied grows.
	posted, applied uint64
	appliedCond     *sync.Cond
	// poolErr is why Config.NewPool failed, if it did: selection fails
	// with it, as no server can have a pool.
	poolErr error
	// closeDone is closed once Close has carried out its effects.
	closeDone chan struct{}
}

// snapshot is a Description published to selection, with the servers that
// have a pool. It is never changed: a new one replaces it, and changed is
// closed then, waking the selections that found no suitable server.
type snapshot struct {
	desc    Description
	servers map[string]*Server
	changed chan struct{}
}

// New opens a topology: its initial Description from cfg.Settings, the
// opening events, a monitor per seed, and in a LoadBalanced topology the
// load balancer's pool, ready at once.
func New(cfg Config) (*Topology, error) {
	if cfg.NewPool == nil {
		return nil, errors.New("topology: Config.NewPool is nil")
	}
	if cfg.StartMonitor == nil && !cfg.Settings.LoadBalanced {
		return nil, errors.New("topology: Config.StartMonitor is nil")
	}
	id := bson.NewObjectID()
	desc, events, err := Open(id, cfg.Settings)
	if err != nil {
		return nil, err
	}
	t := &Topology{
		id:        id,
		cfg:       cfg,
		timeout:   cfg.ServerSelectionTimeout,
		desc:      desc,
		servers:   make(map[string]*Server),
		closeDone: make(chan struct{}),
	}
	t.appliedCond = sync.NewCond(&t.mu)
	if t.timeout <= 0 {
		t.timeout = DefaultServerSelectionTimeout
	}
	t.minHeartbeat = cfg.MinHeartbeatFrequency
	if t.minHeartbeat <= 0 {
		t.minHeartbeat = monitorMinHeartbeat
	}
	t.published.Store(&snapshot{desc: desc, changed: make(chan struct{})})
	t.mu.Lock()
	t.postEventsLocked(events)
	for _, sd := range desc.Servers() {
		s := t.addServerLocked(sd.Address)
		if sd.Type == LoadBalancer {
			t.postLocked(func() { t.readyPool(s) })
		}
	}
	t.publishLocked()
	t.unlockAndApply()
	return t, nil
}

// ID returns the topology's id, the one its events carry.
func (t *Topology) ID() bson.ObjectID { return t.id }

// Description returns the Description selection sees now.
func (t *Topology) Description() Description { return t.published.Load().desc }

// Server returns the server at address, if it is in the topology with a
// pool.
func (t *Topology) Server(address string) (*Server, bool) {
	s, ok := t.published.Load().servers[address]
	return s, ok
}

// addServerLocked adds the server at address, with its monitor (started by
// an effect, outside the lock).
func (t *Topology) addServerLocked(address string) *Server {
	s := &Server{topo: t, address: address, staleBelow: make(map[pool.ServiceID]uint64)}
	t.servers[address] = s
	t.startMonitorLocked(s)
	return s
}

// startMonitorLocked queues the start of the monitor of s.
func (t *Topology) startMonitorLocked(s *Server) {
	address := s.address
	if t.cfg.StartMonitor != nil && t.desc.Type != LoadBalanced {
		t.postLocked(func() {
			m := t.cfg.StartMonitor(address, MonitorHandler{
				Checked: func(o CheckOutcome) bool { return t.checked(s, o) },
				Event:   t.monitorEvent,
			})
			t.mu.Lock()
			if s.removed {
				t.mu.Unlock()
				m.Close()
				return
			}
			s.monitor = m
			t.mu.Unlock()
		})
	}
}

// checked applies the outcome of a check of s by its monitor.
func (t *Topology) checked(s *Server, o CheckOutcome) bool {
	t.mu.Lock()
	if t.closed || s.removed || o.stale() {
		t.mu.Unlock()
		return false
	}
	again := false
	if o.Err == nil {
		t.applyLocked(o.Server)
	} else {
		d := t.desc.DecideCheckError(s.address, o.Kind, o.Err)
		t.carryOutLocked(s, d, nil)
		again = d.CheckAgainNow
	}
	t.unlockAndApply()
	return again
}

// applyLocked applies a server description to the topology and queues what
// follows: the events, the pool made ready when the server is found
// data-bearing, monitors started and servers removed, checks asked for.
func (t *Topology) applyLocked(sd ServerDescription) Update {
	u := t.desc.Apply(sd)
	if u.Applied {
		t.applyUpdateLocked(u)
	}
	return u
}

// applyUpdateLocked makes u's Description the topology's and queues what
// follows: the pool of u's server made ready when the server was found
// data-bearing, monitors started for the servers added, the new state
// published, the events, the servers removed stopped, and the checks asked
// for.
func (t *Topology) applyUpdateLocked(u Update) {
	t.desc = u.Description
	// The servers' new state (pools made ready, servers added and
	// removed) is published before the events that tell of it: a handler
	// that learns of a change and selects a server sees the change.
	var removed []*Server
	for _, a := range u.Removed {
		if s := t.servers[a]; s != nil {
			delete(t.servers, a)
			s.removed = true
			removed = append(removed, s)
		}
	}
	added := make([]*Server, 0, len(u.Added))
	for _, a := range u.Added {
		s := &Server{topo: t, address: a, staleBelow: make(map[pool.ServiceID]uint64)}
		t.servers[a] = s
		added = append(added, s)
	}
	if s, ok := t.servers[u.Address]; ok && poolReadyAfter(u.Server, t.desc.Type) {
		t.postLocked(func() { t.readyPool(s) })
	}
	t.publishLocked()
	t.postEventsLocked(u.Events(t.id))
	// The monitors of the servers added start after their ServerOpening.
	for _, s := range added {
		t.startMonitorLocked(s)
	}
	for _, s := range removed {
		t.postLocked(s.stop)
	}
	for _, a := range u.CheckNow {
		if s, ok := t.servers[a]; ok {
			t.postLocked(s.RequestCheck)
		}
	}
}

// poolReadyAfter reports whether a check that found sd makes its pool ready:
// it is data-bearing, or the client talks to it alone, whatever it is.
func poolReadyAfter(sd ServerDescription, tt TopologyType) bool {
	if sd.Type == ServerUnknown || sd.Type == PossiblePrimary {
		return false
	}
	return sd.Type.DataBearing() || tt == Single
}

// stop stops the monitor of a removed server and closes its pool. It runs as
// an effect.
func (s *Server) stop() {
	s.topo.mu.Lock()
	m := s.monitor
	s.topo.mu.Unlock()
	if m != nil {
		m.Close()
	}
	if p := s.pool.Load(); p != nil {
		p.Close()
	}
}

// readyPool marks the pool of s ready, making it first if it has none. It
// runs as an effect, on the goroutine that carries them out.
func (t *Topology) readyPool(s *Server) {
	p := s.pool.Load()
	if p == nil {
		t.mu.Lock()
		gone := s.removed || t.closed
		t.mu.Unlock()
		if gone {
			return
		}
		np, err := t.cfg.NewPool(s.address, func(err error) { t.establishFailed(s, err) })
		if err != nil {
			t.mu.Lock()
			t.poolErr = fmt.Errorf("topology: cannot make the pool of %s: %w", s.address, err)
			t.mu.Unlock()
			return
		}
		s.pool.Store(np)
		p = np
	}
	p.Ready()
}

// carryOutLocked queues the effects of a decision about s: the server marked
// Unknown, its pool cleared, its monitor's check canceled or asked for.
func (t *Topology) carryOutLocked(s *Server, d Decision, cause error) {
	if d.MarkUnknown {
		t.applyLocked(d.Server)
	}
	if d.Clear {
		svc := pool.ServiceID{}
		if d.ServiceID != nil {
			svc = pool.ServiceID(*d.ServiceID)
		}
		// Errors of connections made before this clear are stale from now
		// on, even before the pool has carried it out.
		if p := s.pool.Load(); p != nil {
			s.staleBelow[svc] = max(s.staleBelow[svc], p.Generation(svc)+1)
		}
		if cause == nil {
			cause = d.Server.Error
		}
		o := pool.ClearOptions{InterruptInUse: d.InterruptInUse, Cause: cause, ServiceID: svc}
		t.postLocked(func() {
			if p := s.pool.Load(); p != nil {
				p.Clear(o)
			}
		})
	}
	if d.CancelCheck {
		// The check under way is stale from now on, even if it ends
		// before the effect below closes its connection.
		if m, ok := s.monitor.(cancelable); ok {
			m.markStale()
		}
		t.postLocked(s.cancelCheck)
	}
	if d.RequestCheck {
		t.postLocked(s.RequestCheck)
	}
}

// HandleError applies the specification's rules to an error an application's
// operation met on the server at e.Address: the server may be marked
// Unknown, its pool cleared, its monitor asked for a check. It returns the
// decision taken (the zero Decision, with a Reason, when the error was
// ignored), once the decision and every change before it are published to
// selection, so that a retry does not select the server as it was.
func (t *Topology) HandleError(e AppError) Decision {
	t.mu.Lock()
	s := t.servers[e.Address]
	if t.closed || s == nil {
		t.mu.Unlock()
		return Decision{Reason: "the server is not in the topology"}
	}
	d := t.desc.DecideAppError(s.generationLocked(e.ServiceID), e)
	t.carryOutLocked(s, d, e.Err)
	t.unlockAndApplyAll()
	return d
}

// establishFailed is the establish-error handler of the pool of s.
func (t *Topology) establishFailed(s *Server, err error) {
	e := EstablishError(s.address, err)
	t.HandleError(e)
}

// monitorEvent publishes a monitor's heartbeat event, in order with the rest.
func (t *Topology) monitorEvent(e Event) {
	if !t.listening() {
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.postLocked(func() { t.publish(e) })
	t.unlockAndApply()
}

// RequestCheck asks every monitor for a check as soon as it may: a selection
// found no suitable server.
func (t *Topology) RequestCheck() {
	t.mu.Lock()
	servers := make([]*Server, 0, len(t.servers))
	for _, s := range t.servers {
		servers = append(servers, s)
	}
	t.mu.Unlock()
	for _, s := range servers {
		s.RequestCheck()
	}
}

// Close closes the topology: the monitors are stopped, the pools closed, and
// the closing events published (a ServerClosed per server, a
// TopologyDescriptionChanged, TopologyClosed). It returns once all that is
// done, except when called from an event handler (or a pool's handler) the
// topology runs: the closing then completes after the handler returns. Later
// calls wait for the first one's closing likewise.
func (t *Topology) Close() error {
	t.mu.Lock()
	if t.closed {
		t.unlockAndWaitClosed()
		return nil
	}
	t.closed = true
	desc, events := Close(t.id, t.desc)
	t.desc = desc
	servers := t.servers
	t.servers = map[string]*Server{}
	for _, s := range servers {
		s.removed = true
		m := s.monitor
		t.postLocked(func() {
			if m != nil {
				m.Close()
			}
			if p := s.pool.Load(); p != nil {
				p.Close()
			}
		})
	}
	t.publishLocked()
	t.postEventsLocked(events)
	t.postLocked(func() { close(t.closeDone) })
	t.unlockAndApply()
	t.mu.Lock()
	t.unlockAndWaitClosed()
	return nil
}

// unlockAndWaitClosed unlocks mu and waits for the closing's effects, unless
// the calling goroutine is the one carrying them out.
func (t *Topology) unlockAndWaitClosed() {
	self := t.applying && t.applier == goid.Current()
	t.mu.Unlock()
	if !self {
		<-t.closeDone
	}
}

// postEventsLocked queues the events.
func (t *Topology) postEventsLocked(events []Event) {
	if !t.listening() {
		return
	}
	for _, e := range events {
		t.postLocked(func() { t.publish(e) })
	}
}

// publishLocked queues the publishing of the current Description, with the
// servers that have a pool by then.
func (t *Topology) publishLocked() {
	desc := t.desc
	servers := make([]*Server, 0, len(t.servers))
	for _, s := range t.servers {
		servers = append(servers, s)
	}
	t.postLocked(func() {
		next := &snapshot{desc: desc, servers: make(map[string]*Server, len(servers)), changed: make(chan struct{})}
		for _, s := range servers {
			if s.pool.Load() != nil {
				next.servers[s.address] = s
			}
		}
		prev := t.published.Swap(next)
		close(prev.changed)
	})
}

// listening reports whether anyone receives the events: an event handler
// or a logger. Events are not even built otherwise.
func (t *Topology) listening() bool { return t.cfg.EventHandler != nil || t.cfg.Logger != nil }

// publish delivers an event to the handler and the logger: the one place
// events go through.
func (t *Topology) publish(e Event) {
	// The log message first: a handler that waits for the event may look
	// for the message next.
	if t.cfg.Logger != nil {
		logEvent(t.cfg.Logger, t.id, e)
	}
	if t.cfg.EventHandler != nil {
		t.cfg.EventHandler(e)
	}
}

// postLocked queues an effect, carried out by unlockAndApply.
func (t *Topology) postLocked(fn func()) {
	t.queue = append(t.queue, fn)
	t.posted++
}

// unlockAndApply unlocks mu and carries out the queued effects in order,
// unless another goroutine is doing so: it will carry these out too.
func (t *Topology) unlockAndApply() {
	if t.applying {
		t.mu.Unlock()
		return
	}
	t.applying = true
	t.applier = goid.Current()
	for len(t.queue) > 0 {
		q := t.queue
		t.queue = nil
		t.mu.Unlock()
		for _, fn := range q {
			fn()
		}
		t.mu.Lock()
		t.applied += uint64(len(q))
		t.appliedCond.Broadcast()
	}
	t.applying, t.applier = false, 0
	t.mu.Unlock()
}

// unlockAndApplyAll is unlockAndApply that returns only once every effect
// queued so far is carried out, even by another goroutine: an operation
// that reported an error and retries must select among servers that the
// decision, and the checks before it, have been applied to. It does not
// wait when its caller is the goroutine carrying the effects out (a handler
// that reported an error): that would be waiting for itself.
func (t *Topology) unlockAndApplyAll() {
	target := t.posted
	t.unlockAndApply()
	t.mu.Lock()
	if t.applied < target && !(t.applying && t.applier == goid.Current()) {
		for t.applied < target {
			t.appliedCond.Wait()
		}
	}
	t.mu.Unlock()
}

// Server is one server of a Topology: its address, its pool, and the count of
// operations in progress that selection balances.
type Server struct {
	topo    *Topology
	address string
	pool    atomic.Pointer[pool.Pool]
	// inProgress counts the operations selected on the server and not done.
	inProgress atomic.Int64

	// Fields protected by topo.mu:
	monitor ServerMonitor
	removed bool
	// staleBelow holds, by service, the generation below which errors are
	// stale because of clears decided but maybe not carried out yet.
	staleBelow map[pool.ServiceID]uint64
}

// Address returns the server's address.
func (s *Server) Address() string { return s.address }

// Pool returns the server's pool; nil until a check first found the server.
func (s *Server) Pool() *pool.Pool { return s.pool.Load() }

// InProgress returns the number of operations in progress on the server.
func (s *Server) InProgress() int64 { return s.inProgress.Load() }

// Done ends an operation that SelectServer counted on s.
func (s *Server) Done() { s.inProgress.Add(-1) }

// HandleError applies the error rules to e, an error met on this server.
func (s *Server) HandleError(e AppError) Decision {
	e.Address = s.address
	return s.topo.HandleError(e)
}

func (s *Server) generationLocked(svcID *bson.ObjectID) uint64 {
	svc := pool.ServiceID{}
	if svcID != nil {
		svc = pool.ServiceID(*svcID)
	}
	gen := s.staleBelow[svc]
	if p := s.pool.Load(); p != nil {
		gen = max(gen, p.Generation(svc))
	}
	return gen
}

// RequestCheck asks the server's monitor for a check as soon as it may: an
// operation found its pool paused.
func (s *Server) RequestCheck() {
	s.topo.mu.Lock()
	m := s.monitor
	s.topo.mu.Unlock()
	if m != nil {
		m.RequestCheck()
	}
}

func (s *Server) cancelCheck() {
	s.topo.mu.Lock()
	m := s.monitor
	s.topo.mu.Unlock()
	if m != nil {
		m.CancelCheck()
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
	var buf [4]ServerDescription
	for {
		snap := t.published.Load()
		logs.started(snap.desc)
		if err := t.unusable(); err != nil {
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
			// check every minHeartbeatFrequencyMS: a request that came
			// while a check was under way was ignored.
			recheck = time.NewTicker(t.minHeartbeat)
			defer recheck.Stop()
		}
		t.RequestCheck()
		select {
		case <-recheck.C:
		case <-snap.changed:
		case <-ctx.Done():
			e := &SelectionError{Description: t.published.Load().desc, Err: ctx.Err(), Waited: time.Since(start)}
			return nil, logs.failed(e.Description, e)
		case <-timer.C:
			e := &SelectionError{Description: t.published.Load().desc, Waited: time.Since(start), Timeout: t.timeout}
			return nil, logs.failed(e.Description, e)
		}
	}
}

// unusable returns why selection cannot succeed, if it cannot: the topology
// is closed, or its pools cannot be made.
func (t *Topology) unusable() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	return t.poolErr
}

// pickServer picks among candidates those that have a pool, two at random,
// and counts an operation on the one with fewer in progress.
func pickServer(snap *snapshot, candidates []ServerDescription) *Server {
	// A candidate without a pool yet counts as the busiest: it is picked
	// only when both draws fall on such servers, and then none is.
	i := Choose(candidates, rand.IntN, snap.inProgress)
	if i < 0 {
		return nil
	}
	s := snap.servers[candidates[i].Address]
	if s == nil {
		return nil
	}
	s.inProgress.Add(1)
	return s
}

// inProgress returns the operations in progress on the server at address,
// or math.MaxInt64 when it has no pool in this snapshot.
func (snap *snapshot) inProgress(address string) int64 {
	if s := snap.servers[address]; s != nil {
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
	// Err is the context's error when it ended first, or the selector's.
	Err error
	// Waited is how long the selection waited; Timeout the server
	// selection timeout, when that is what ended it.
	Waited, Timeout time.Duration
}

// Error describes the failure with the topology's servers.
func (e *SelectionError) Error() string {
	var why string
	switch {
	case e.Timeout > 0:
		why = fmt.Sprintf("no suitable server within serverSelectionTimeoutMS (%v)", e.Timeout)
	case e.Err != nil && e.Waited > 0:
		why = fmt.Sprintf("no suitable server before the operation's context ended after %v (%v)", e.Waited.Round(time.Millisecond), e.Err)
	case e.Err != nil:
		why = e.Err.Error()
	default:
		why = "no suitable server"
	}
	return "server selection failed: " + why + "; topology: " + e.Description.Summary()
}

// Unwrap returns the context's or the selector's error.
func (e *SelectionError) Unwrap() error { return e.Err }

// failedMonitor is the monitor of a server that cannot be monitored at all:
// it reports its error once, as a failed check, when started.
type failedMonitor struct{}

func (failedMonitor) RequestCheck() {}
func (failedMonitor) CancelCheck()  {}
func (failedMonitor) Close()        {}

// StartFailedMonitor returns a monitor for the server at address that cannot
// check it because of err (settings that cannot apply to it): err is
// reported as a failed check, so that the server stays Unknown with err as
// its error, which server selection errors tell.
func StartFailedMonitor(address string, err error, h MonitorHandler) ServerMonitor {
	go h.Checked(CheckOutcome{Err: fmt.Errorf("cannot monitor %s: %w", address, err), Kind: KindCommand})
	return failedMonitor{}
}
