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

	// Limits, as configured.
	MaxPoolSize   int // 0 means no limit
	MinPoolSize   int
	MaxConnecting int

	// Connections created and closed since the pool was created; closes by
	// reason.
	Created          int64
	Closed           int64
	ClosedStale      int64 // after a clear
	ClosedIdle       int64 // idle longer than maxIdleTimeMS
	ClosedError      int64 // broken, or failed to establish
	ClosedPoolClosed int64 // by Close
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
}

// counters are the pool's running totals. Most are atomics so that they can
// be bumped on paths that do not hold the lock; Stats reads them under it.
// The check-out and check-in counts are bumped on the hot path, always under
// the lock, where a plain increment is cheaper than an atomic one.
type counters struct {
	created, establishFailed                              atomic.Int64
	closedStale, closedIdle, closedError, closedPoolClose atomic.Int64
	checkOutFailed, timeouts                              atomic.Int64
	waits, waitNanos                                      atomic.Int64
	clears                                                atomic.Int64

	checkedOut, checkedIn int64 // guarded by pool.mu
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
	}
}

func (c *counters) waited(d time.Duration) {
	c.waits.Add(1)
	c.waitNanos.Add(int64(d))
}

// Stats returns a snapshot of the pool. It takes the pool's lock for a few
// dozen instructions: cheap enough for every metrics scrape.
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
		Created:          c.created.Load(),
		ClosedStale:      c.closedStale.Load(),
		ClosedIdle:       c.closedIdle.Load(),
		ClosedError:      c.closedError.Load(),
		ClosedPoolClosed: c.closedPoolClose.Load(),
		EstablishFailed:  c.establishFailed.Load(),
		CheckedOut:       c.checkedOut,
		CheckedIn:        c.checkedIn,
		CheckOutFailed:   c.checkOutFailed.Load(),
		Timeouts:         c.timeouts.Load(),
		WaitCount:        c.waits.Load(),
		WaitDuration:     time.Duration(c.waitNanos.Load()),
		Clears:           c.clears.Load(),
	}
	s.Closed = s.ClosedStale + s.ClosedIdle + s.ClosedError + s.ClosedPoolClosed
	return s
}
