package pool

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a pool: its connections now, and running totals since
// it was created. All figures are taken together under the pool's lock, so
// they agree with one another (Total = Available + Pending + InUse, Created -
// Closed = Total).
type Stats struct {
	Address string
	State   string // "paused", "ready" or "closed"

	// Connections now, by the specification's states.
	Total     int // Available + Pending + InUse
	Available int // idle in the pool
	Pending   int // being established
	InUse     int // checked out
	// Check-outs waiting now: in the queue, or for the connection being
	// established for them.
	Waiting int

	// Generation is the pool's generation (the number of clears); in
	// load-balanced mode, Services is the number of services it has
	// connections to, each with its own generation.
	Generation uint64
	Services   int

	// Limits, as configured now. After a Reconfigure that lowered
	// MaxPoolSize, Total stays above it until enough connections in use
	// have come back (see Reconfigure); after one that lowered
	// MaxConnecting, Pending may stay above it until the establishments
	// under way end.
	MaxPoolSize      int // 0 means no limit
	MinPoolSize      int
	MaxConnecting    int
	MaxIdleTime      time.Duration // 0 means no limit
	WaitQueueTimeout time.Duration // 0 means no limit
	MaxLifetime      time.Duration // 0 means no limit (WithMaxLifetime)

	// Connections created and closed since the pool was created; closes by
	// reason.
	Created          int64
	Closed           int64
	ClosedStale      int64 // after a clear
	ClosedIdle       int64 // idle longer than maxIdleTimeMS
	ClosedError      int64 // broken, or failed to establish
	ClosedPoolClosed int64 // by Close
	ClosedLifetime   int64 // older than their lifetime (WithMaxLifetime)
	ClosedShrunk     int64 // above a maxPoolSize that Reconfigure lowered
	EstablishFailed  int64 // establishments that failed (also in ClosedError)

	// Check-outs since the pool was created.
	CheckedOut     int64 // successful check-outs
	CheckedIn      int64
	CheckOutFailed int64 // failed check-outs, Timeouts included
	Timeouts       int64 // check-outs ended by a time limit or their context
	// Check-outs that had to wait (queue or establishment), and how long
	// they waited in all.
	WaitCount    int64
	WaitDuration time.Duration

	Clears int64 // calls to Clear

	// Leaks is the number of check-outs the leak detector reported (see
	// WithLeakDetector).
	Leaks int64

	// EventsDropped is the number of events the handlers and the logger
	// never got: events are delivered on a goroutine of the pool's (see
	// WithEventHandler), and those that come while the handlers are a
	// whole queue (65,536 events) behind are dropped rather than held.
	EventsDropped uint64
	// EventsPending is the number of events emitted and not yet delivered
	// to the handlers and the logger: how far behind they are.
	EventsPending int

	// Distributions of durations since the pool was created, in the same
	// snapshot as the counts above: CheckOutWait.Count is CheckedOut +
	// CheckOutFailed, and Use.Count is CheckedIn when every use is timed.
	//
	// CheckOutWait runs from the start of a check-out to the connection
	// handed over, or to the failure. A check-out decided at once, without
	// waiting for anything (an idle connection handed over, a closed or
	// paused pool, a context done before it began), counts as 0: it takes a
	// few dozen nanoseconds, well within the first bucket, and timing it
	// would cost more than the check-out itself. A check-out that had to wait
	// for the pool's lock, the queue or an establishment is timed.
	CheckOutWait Histogram
	// Establish runs from ConnectionCreated to ConnectionReady, for each
	// connection established (not those that failed or were interrupted).
	Establish Histogram
	// Use runs from the check-out to the check-in, for the check-outs the
	// pool timed: one in DefaultUseSampling at random by default, every one
	// with WithUseSampling(1) or the leak detector on. Its Count is the
	// number of uses timed.
	Use Histogram
}

// counters are the pool's running totals. Most are atomics so that they can
// be bumped on paths that do not hold the lock; Stats reads them under it.
// The check-out and check-in counts are bumped on the hot path, always under
// the lock, where a plain increment is cheaper than an atomic one.
type counters struct {
	created, establishFailed                              atomic.Int64
	closedStale, closedIdle, closedError, closedPoolClose atomic.Int64
	closedLifetime, closedShrunk                          atomic.Int64
	waits, waitNanos                                      atomic.Int64
	clears, leaks                                         atomic.Int64

	// Guarded by pool.mu, and bumped under it together with the sample of
	// checkOutWait they go with.
	checkedOut, checkedIn    int64
	checkOutFailed, timeouts int64
	immediate                int64 // check-outs decided at once: samples of 0 not in checkOutWait

	// The distributions. Each sample is recorded under pool.mu, in the
	// critical section that changes the counts it goes with.
	checkOutWait, establish, use histogram
}

func (c *counters) closed(reason string) {
	switch reason {
	case ReasonStale:
		c.closedStale.Add(1)
	case ReasonIdle:
		c.closedIdle.Add(1)
	case ReasonError:
		c.closedError.Add(1)
	case ReasonPoolClosed:
		c.closedPoolClose.Add(1)
	case ReasonLifetime:
		c.closedLifetime.Add(1)
	case ReasonShrunk:
		c.closedShrunk.Add(1)
	}
}

func (c *counters) waited(d time.Duration) {
	c.waits.Add(1)
	c.waitNanos.Add(int64(d))
}

// Stats returns a snapshot of the pool. It takes the pool's lock for a few
// hundred instructions: cheap enough for every metrics scrape.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &p.counts
	s := Stats{
		Address:          p.address,
		State:            p.state.String(),
		Total:            len(p.conns),
		Available:        len(p.idle),
		Pending:          p.pending,
		InUse:            p.inUse,
		Waiting:          p.waiting,
		Generation:       p.main.gen,
		Services:         len(p.services),
		MaxPoolSize:      p.cfg.maxPoolSize,
		MinPoolSize:      p.cfg.minPoolSize,
		MaxConnecting:    p.cfg.maxConnecting,
		MaxIdleTime:      p.cfg.maxIdleTime,
		WaitQueueTimeout: p.cfg.waitQueueTimeout,
		MaxLifetime:      p.cfg.maxLifetime,
		Created:          c.created.Load(),
		ClosedStale:      c.closedStale.Load(),
		ClosedIdle:       c.closedIdle.Load(),
		ClosedError:      c.closedError.Load(),
		ClosedPoolClosed: c.closedPoolClose.Load(),
		ClosedLifetime:   c.closedLifetime.Load(),
		ClosedShrunk:     c.closedShrunk.Load(),
		EstablishFailed:  c.establishFailed.Load(),
		CheckedOut:       c.checkedOut,
		CheckedIn:        c.checkedIn,
		CheckOutFailed:   c.checkOutFailed,
		Timeouts:         c.timeouts,
		WaitCount:        c.waits.Load(),
		WaitDuration:     time.Duration(c.waitNanos.Load()),
		Clears:           c.clears.Load(),
		Leaks:            c.leaks.Load(),
		EventsDropped:    p.events.Dropped(),
		EventsPending:    p.events.Pending(),
		CheckOutWait:     c.checkOutWait.load(),
		Establish:        c.establish.load(),
		Use:              c.use.load(),
	}
	s.Closed = s.ClosedStale + s.ClosedIdle + s.ClosedError + s.ClosedPoolClosed + s.ClosedLifetime + s.ClosedShrunk
	s.CheckOutWait.Counts[0] += uint64(c.immediate)
	s.CheckOutWait.Count += uint64(c.immediate)
	return s
}
