package pool

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults of the options, as the specification sets them.
const (
	DefaultMaxPoolSize         = 100
	DefaultMaxConnecting       = 2
	DefaultConnectTimeout      = 10 * time.Second
	DefaultMaintenanceInterval = time.Second
)

// An Option configures a pool at construction. Options left out keep the
// specification's defaults; an option given an invalid value makes [New] fail
// with an [*OptionError] naming it.
type Option func(*config)

// config is the resolved set of options of a pool.
type config struct {
	maxPoolSize         int
	minPoolSize         int
	maxConnecting       int
	maxIdleTime         time.Duration
	waitQueueTimeout    time.Duration
	timeout             time.Duration
	connectTimeout      time.Duration
	maintenanceInterval time.Duration
	loadBalanced        bool
	handlers            []func(Event)
	logger              *slog.Logger
	establishFailed     func(error)
	useSampling         int  // one check-out in useSampling has its use timed
	flightRecorder      int  // events the flight recorder keeps; 0 when off
	leakDetector        bool // WithLeakDetector was given
	leakThreshold       time.Duration
	leakFrames          int // frames of a check-out's call site the leak detector keeps
	maxLifetime         time.Duration
	lifetimeJitter      time.Duration

	set optionSet // which options the user gave, for the created event and log
	// fixed names an option given that Reconfigure cannot change (the last
	// one applied), for its error; "" if there is none.
	fixed string
}

// optionSet records which of the specification's options the user set.
type optionSet uint8

const (
	setMaxPoolSize optionSet = 1 << iota
	setMinPoolSize
	setMaxConnecting
	setMaxIdleTime
	setWaitQueueTimeout
)

// WithMaxPoolSize sets maxPoolSize: the most connections (pending, idle and in
// use) the pool may have at once. 0 means no limit. Default 100.
func WithMaxPoolSize(n int) Option {
	return func(c *config) { c.maxPoolSize = n; c.set |= setMaxPoolSize }
}

// WithMinPoolSize sets minPoolSize: the number of connections the pool keeps
// established in the background while it is ready. Default 0.
func WithMinPoolSize(n int) Option {
	return func(c *config) { c.minPoolSize = n; c.set |= setMinPoolSize }
}

// WithMaxConnecting sets maxConnecting: the most connections the pool
// establishes at once. Must be at least 1. Default 2.
func WithMaxConnecting(n int) Option {
	return func(c *config) { c.maxConnecting = n; c.set |= setMaxConnecting }
}

// WithMaxIdleTime sets maxIdleTimeMS: an idle connection older than this is
// closed instead of being checked out. 0 means no limit. Default 0.
func WithMaxIdleTime(d time.Duration) Option {
	return func(c *config) { c.maxIdleTime = d; c.set |= setMaxIdleTime }
}

// WithWaitQueueTimeout sets the specification's deprecated waitQueueTimeoutMS:
// the longest a check-out waits in the queue for an idle connection or for its
// turn to establish one. Time spent establishing its own connection does not
// count. 0 means no limit. Default 0.
func WithWaitQueueTimeout(d time.Duration) Option {
	return func(c *config) { c.waitQueueTimeout = d; c.set |= setWaitQueueTimeout }
}

// WithTimeout sets timeoutMS, the client-side operation timeout: a check-out
// gives up after this long in all, establishment included. 0 means no limit.
// The context's deadline applies as well; the earliest limit wins.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d; c.fixed = "timeoutMS" }
}

// WithConnectTimeout bounds the whole establishment of one connection (dial,
// TLS, handshake, authentication). The establishment runs on its own goroutine
// under this limit, not under the context of the check-out that asked for it,
// so a caller that gives up wastes no half-built connection. 0 means no limit.
// Default 10s, the default of connectTimeoutMS.
func WithConnectTimeout(d time.Duration) Option {
	return func(c *config) { c.connectTimeout = d; c.fixed = "connectTimeoutMS" }
}

// WithMaintenanceInterval sets the time between two runs of the background
// maintenance, which closes idle and stale connections and establishes
// connections up to minPoolSize. A negative interval disables the maintenance
// entirely (the specification's tests use this). Default 1s. A run also starts
// at once after Ready, after Clear and whenever an establishment ends below
// minPoolSize.
func WithMaintenanceInterval(d time.Duration) Option {
	return func(c *config) { c.maintenanceInterval = d; c.fixed = "maintenanceInterval" }
}

// WithLoadBalanced puts the pool in load-balanced mode: the Connector must
// report each connection's serviceId, generations are kept per service, and
// Clear takes a serviceId and neither pauses the pool nor empties its queue.
func WithLoadBalanced(on bool) Option {
	return func(c *config) { c.loadBalanced = on; c.fixed = "loadBalanced" }
}

// WithEventHandler subscribes fn to the pool's events. Handlers run on a
// goroutine of the pool's own, one event at a time, in the order the events
// happened (the order of the changes under the pool's lock), each event to
// every handler in the order they were given, never with a lock of the pool's
// held. The pool never waits for them: a slow handler delays only the events
// after it, and a handler may call the pool, Close included. Events that come
// while the handlers are 65,536 events behind are dropped and counted in
// [Stats].EventsDropped (and logged at Warn by the logger, if any); a call
// that finds them a quarter of that behind yields its processor once, so
// that they keep up with callers that keep every processor busy. Close
// does not wait for the handlers: the events of the closing, PoolClosed last,
// are delivered after it returns, and the delivery goroutine ends after the
// last one; [Pool.Shutdown] waits for them.
func WithEventHandler(fn func(Event)) Option {
	return func(c *config) {
		if fn != nil {
			c.handlers = append(c.handlers, fn)
		}
		c.fixed = "eventHandler"
	}
}

// WithLogger makes the pool write the specification's connection log messages
// to l at Debug level, with the attribute component="connection". Nothing is
// formatted unless l is enabled for Debug. The records are written on the
// goroutine that delivers the events (see [WithEventHandler]); the pool asks l
// whether it is enabled at the start of each of its calls, never under its
// lock.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l; c.fixed = "logger" }
}

// WithEstablishErrorHandler registers fn to be told of every failed
// establishment, before the failed connection is closed and before the
// check-out waiting on it fails. It is the hook through which a topology layer
// applies the SDAM rules for errors during connection establishment (typically
// by clearing the pool). fn runs on the establishing goroutine and may call the
// pool, but not Close or Shutdown, which wait for that goroutine to end.
// Several handlers compose: each is called, in the order they were given,
// so that a user's handler does not displace a topology layer's.
func WithEstablishErrorHandler(fn func(error)) Option {
	return func(c *config) {
		c.fixed = "establishErrorHandler"
		switch prev := c.establishFailed; {
		case fn == nil:
		case prev == nil:
			c.establishFailed = fn
		default:
			c.establishFailed = func(err error) { prev(err); fn(err) }
		}
	}
}

// WithUseSampling sets how many check-outs there are, on average, for each
// one whose use (the time until its check-in) the Use histogram of
// [Pool.Stats] times: the pool picks them at random, each check-out with a
// probability of 1/every, so that the samples follow the workload's
// distribution whatever its rhythm. 1 times every check-out, at the cost of
// a read of the monotonic clock at each check-out and each check-in, which
// makes an idle check-out and check-in several times as slow (see the
// package's benchmarks). Must be at least 1. Default [DefaultUseSampling].
// The leak detector times every check-out anyway: with it on, every use is
// timed.
func WithUseSampling(every int) Option {
	return func(c *config) { c.useSampling = every; c.fixed = "useSampling" }
}

// MaxFlightRecorder is the most events [WithFlightRecorder] keeps.
const MaxFlightRecorder = 1 << 16

// WithFlightRecorder keeps the last n events of the pool, the specification's
// and the leak detector's, in a ring of small records with no pointers into
// the pool (see [RecordedEvent]): [Pool.RecentEvents] returns them, and a
// [*WaitQueueTimeoutError] carries those emitted before the check-out gave
// up. Events are recorded as they are emitted, under the pool's lock, and
// recording allocates nothing;
// like an event handler, it makes the pool build its events (see
// [WithEventHandler]). 0, the default, turns it off; n must not be above
// [MaxFlightRecorder].
func WithFlightRecorder(n int) Option {
	return func(c *config) { c.flightRecorder = n; c.fixed = "flightRecorder" }
}

// MaxCallSiteFrames is the most frames of a call site [WithLeakDetector]
// keeps.
const MaxCallSiteFrames = 64

// WithLeakDetector reports every check-out that keeps its connection for
// threshold or longer, once, with the call site that checked it out: the
// innermost frames (at most frames, 0 for none) of the stack of the caller of
// [Pool.CheckOut] or [Pool.Do]. A report is a [ConnectionLeakSuspected]
// event, delivered like the others to the event handlers and the flight
// recorder, and a log record at level Warn through the logger given with
// [WithLogger] (a record also written when the logger is not enabled for
// Debug). The pool's maintenance goroutine looks for such check-outs when the
// earliest of them is due, whether or not the maintenance itself is on.
//
// The detector costs each check-out and each check-in a read of the clock
// and, with frames above 0, each check-out a walk of the caller's stack
// (runtime.Callers; the frames are formatted only when a report is printed);
// a report is due within a millisecond of the threshold. Off, the default, it
// costs nothing. threshold must be positive; frames between 0 and
// [MaxCallSiteFrames].
func WithLeakDetector(threshold time.Duration, frames int) Option {
	return func(c *config) {
		c.leakDetector, c.leakThreshold, c.leakFrames = true, threshold, frames
		c.fixed = "leakDetector"
	}
}

// WithMaxLifetime closes connections once they are older than lifetime
// (counted from their creation), less a random part of jitter drawn for each
// connection, so that connections made together, after a failover or a
// scale-out, do not all expire together and the load they carry spreads to
// the servers of the moment. A connection that has expired is closed, with
// reason [ReasonLifetime], when it is checked in or found idle (by a
// check-out or the maintenance), never while it is checked out.
//
// This is an extension of the specification, off by default (a lifetime of
// 0). jitter must be between 0 and lifetime.
func WithMaxLifetime(lifetime, jitter time.Duration) Option {
	return func(c *config) { c.maxLifetime, c.lifetimeJitter = lifetime, jitter; c.fixed = "maxLifetime" }
}

// Logger returns the logger given with [WithLogger], or nil: a layer above
// the pool logs its own messages there.
func (p *Pool) Logger() *slog.Logger { return p.cfg.logger }

func defaultConfig() config {
	return config{
		maxPoolSize:         DefaultMaxPoolSize,
		maxConnecting:       DefaultMaxConnecting,
		connectTimeout:      DefaultConnectTimeout,
		maintenanceInterval: DefaultMaintenanceInterval,
		useSampling:         DefaultUseSampling,
	}
}

// OptionError reports an invalid pool option.
type OptionError struct {
	Option string // the specification's name of the option, e.g. "maxConnecting"
	Value  any    // the value that was given; nil when the option was refused whatever its value
	Reason string // what the value must be instead
}

func (e *OptionError) Error() string {
	if e.Value == nil {
		return fmt.Sprintf("mongopool: pool option %s: %s", e.Option, e.Reason)
	}
	return fmt.Sprintf("mongopool: invalid pool option %s=%v: %s", e.Option, e.Value, e.Reason)
}

func (c *config) validate() error {
	switch {
	case c.maxPoolSize < 0:
		return &OptionError{"maxPoolSize", c.maxPoolSize, "must be >= 0 (0 means no limit)"}
	case c.minPoolSize < 0:
		return &OptionError{"minPoolSize", c.minPoolSize, "must be >= 0"}
	case c.maxPoolSize > 0 && c.minPoolSize > c.maxPoolSize:
		return &OptionError{"minPoolSize", c.minPoolSize, fmt.Sprintf("must not exceed maxPoolSize (%d)", c.maxPoolSize)}
	case c.maxConnecting <= 0:
		return &OptionError{"maxConnecting", c.maxConnecting, "must be > 0"}
	case c.maxIdleTime < 0:
		return &OptionError{"maxIdleTimeMS", c.maxIdleTime, "must be >= 0 (0 means no limit)"}
	case c.waitQueueTimeout < 0:
		return &OptionError{"waitQueueTimeoutMS", c.waitQueueTimeout, "must be >= 0 (0 means no limit)"}
	case c.timeout < 0:
		return &OptionError{"timeoutMS", c.timeout, "must be >= 0 (0 means no limit)"}
	case c.connectTimeout < 0:
		return &OptionError{"connectTimeoutMS", c.connectTimeout, "must be >= 0 (0 means no limit)"}
	case c.maintenanceInterval == 0:
		return &OptionError{"maintenanceInterval", c.maintenanceInterval, "must be positive, or negative to disable maintenance"}
	case c.useSampling < 1:
		return &OptionError{"useSampling", c.useSampling, "must be >= 1 (1 times every check-out)"}
	case c.flightRecorder < 0 || c.flightRecorder > MaxFlightRecorder:
		return &OptionError{"flightRecorder", c.flightRecorder, fmt.Sprintf("must be between 0 (off) and %d", MaxFlightRecorder)}
	case c.maxLifetime < 0:
		return &OptionError{"maxLifetime", c.maxLifetime, "must be >= 0 (0 means no limit)"}
	case c.lifetimeJitter < 0 || c.lifetimeJitter > c.maxLifetime:
		return &OptionError{"lifetimeJitter", c.lifetimeJitter, fmt.Sprintf("must be between 0 and maxLifetime (%v)", c.maxLifetime)}
	case c.leakDetector && c.leakThreshold <= 0:
		return &OptionError{"leakThreshold", c.leakThreshold, "must be positive"}
	case c.leakDetector && (c.leakFrames < 0 || c.leakFrames > MaxCallSiteFrames):
		return &OptionError{"leakFrames", c.leakFrames, fmt.Sprintf("must be between 0 (no call site) and %d", MaxCallSiteFrames)}
	}
	return nil
}

// timesEveryCheckOut reports whether every check-out reads the clock: its
// use is timed, and the leak detector needs to know when it began.
func (c *config) timesEveryCheckOut() bool {
	return c.useSampling == 1 || c.leakDetector
}

// userOptions lists the specification's options the user set, with their
// values in the units the specification uses, for the PoolCreated event and
// log message.
func (c *config) userOptions() map[string]int64 {
	m := make(map[string]int64, 5)
	if c.set&setMaxIdleTime != 0 {
		m["maxIdleTimeMS"] = ceilMS(c.maxIdleTime)
	}
	if c.set&setMinPoolSize != 0 {
		m["minPoolSize"] = int64(c.minPoolSize)
	}
	if c.set&setMaxPoolSize != 0 {
		m["maxPoolSize"] = int64(c.maxPoolSize)
	}
	if c.set&setMaxConnecting != 0 {
		m["maxConnecting"] = int64(c.maxConnecting)
	}
	if c.set&setWaitQueueTimeout != 0 {
		m["waitQueueTimeoutMS"] = ceilMS(c.waitQueueTimeout)
	}
	return m
}

// ceilMS converts d to whole milliseconds, rounding up, so that a limit below
// one millisecond does not read as 0, which means "no limit".
func ceilMS(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
