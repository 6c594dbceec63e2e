package main

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// The pool's eleven event types, in the specification's order.
var eventTypes = []pool.EventType{
	pool.PoolCreated, pool.PoolReady, pool.PoolCleared, pool.PoolClosed,
	pool.ConnectionCreated, pool.ConnectionReady, pool.ConnectionClosed,
	pool.ConnectionCheckOutStarted, pool.ConnectionCheckOutFailed,
	pool.ConnectionCheckedOut, pool.ConnectionCheckedIn,
}

// eventMonitor counts the pool's events by type and, with log (-events),
// writes each one as it is delivered. Its handle method is given to the pool
// with pool.WithEventHandler; each pool calls it on a delivery goroutine of
// its own, in order, so that a client's pools call it at once. The events
// come after the changes they report: a count is complete once the pool's
// Flush has returned (see flushEvents).
type eventMonitor struct {
	start  time.Time
	log    *eventLog        // nil without -events
	counts [16]atomic.Int64 // by pool.EventType
	// byAddress, when set (a client's pools, one per server), also counts
	// the events of each pool apart, in perAddress.
	byAddress  bool
	perAddress sync.Map // address -> *eventCounts
	// created holds the options of the PoolCreated event: the pool's
	// configuration as the pool itself reports it.
	created atomic.Pointer[map[string]int64]

	est establishments
}

// eventCounts are the events of one pool by type.
type eventCounts [16]atomic.Int64

// establishments follows the connections being established, from their
// events, to tell how soon the pool tries again after a failed one: the
// pool's backoff, as the server sees it.
type establishments struct {
	mu sync.Mutex
	// pending holds the connections created and not ready yet.
	pending map[connKey]struct{}
	// failedAt is when the last establishment failed, if no connection
	// has been created or become ready since; zero otherwise.
	failedAt time.Time
	// afterFailure holds, for each failure followed by another attempt
	// with no success between them, the time between the two: the pool's
	// backoff, and the time a check-out then took to ask for a connection.
	afterFailure histogram
}

// connKey names a connection of one of the pools.
type connKey struct {
	addr string
	id   int64
}

func (m *eventMonitor) handle(e pool.Event) {
	m.counts[e.Type].Add(1)
	if m.byAddress {
		c, ok := m.perAddress.Load(e.Address)
		if !ok {
			c, _ = m.perAddress.LoadOrStore(e.Address, new(eventCounts))
		}
		c.(*eventCounts)[e.Type].Add(1)
	}
	switch e.Type {
	case pool.PoolCreated:
		m.created.CompareAndSwap(nil, &e.Options)
	case pool.ConnectionCreated, pool.ConnectionReady, pool.ConnectionClosed:
		m.est.observe(e, time.Now())
	}
	if m.log != nil {
		m.log.poolEvent(e)
	}
}

// observe follows one event of a connection's life, at now.
func (es *establishments) observe(e pool.Event, now time.Time) {
	k := connKey{e.Address, e.ConnectionID}
	es.mu.Lock()
	defer es.mu.Unlock()
	switch e.Type {
	case pool.ConnectionCreated:
		if es.pending == nil {
			es.pending = map[connKey]struct{}{}
		}
		es.pending[k] = struct{}{}
		if !es.failedAt.IsZero() {
			es.afterFailure.record(now.Sub(es.failedAt))
			es.failedAt = time.Time{}
		}
	case pool.ConnectionReady:
		delete(es.pending, k)
		es.failedAt = time.Time{} // a success ends the backoff: what follows is no pause
	case pool.ConnectionClosed:
		if _, ok := es.pending[k]; ok {
			delete(es.pending, k)
			if e.Reason == pool.ReasonError { // not interrupted by a clear or Close: failed
				es.failedAt = now
			}
		}
	}
}

// gaps returns the times between a failed establishment and the next
// attempt.
func (es *establishments) gaps() histogram {
	es.mu.Lock()
	defer es.mu.Unlock()
	return es.afterFailure
}

func (m *eventMonitor) count(t pool.EventType) int64 { return m.counts[t].Load() }

// countAt returns the number of events of type t of the pools at address
// (byAddress only).
func (m *eventMonitor) countAt(address string, t pool.EventType) int64 {
	c, ok := m.perAddress.Load(address)
	if !ok {
		return 0
	}
	return c.(*eventCounts)[t].Load()
}

// options renders the options of the PoolCreated event, sorted by name.
func (m *eventMonitor) options() string {
	o := m.created.Load()
	if o == nil || len(*o) == 0 {
		return "the specification's defaults"
	}
	return sortedCounts(*o)
}
