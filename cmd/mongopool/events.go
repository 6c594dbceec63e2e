package main

import (
	"fmt"
	"strings"
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

// eventMonitor counts the pool's events by type and, when print is set,
// prints each one as it happens. Its handle method is given to the pool with
// pool.WithEventHandler; the pool calls it on many goroutines at once.
type eventMonitor struct {
	start  time.Time
	print  bool
	out    *console
	counts [16]atomic.Int64 // by pool.EventType
	// byAddress, when set (a client's pools, one per server), also counts
	// the events of each pool apart, in perAddress, and prints the address
	// with each event.
	byAddress  bool
	perAddress sync.Map // address -> *eventCounts
	// created holds the options of the PoolCreated event: the pool's
	// configuration as the pool itself reports it.
	created atomic.Pointer[map[string]int64]
}

// eventCounts are the events of one pool by type.
type eventCounts [16]atomic.Int64

func (m *eventMonitor) handle(e pool.Event) {
	m.counts[e.Type].Add(1)
	if m.byAddress {
		c, ok := m.perAddress.Load(e.Address)
		if !ok {
			c, _ = m.perAddress.LoadOrStore(e.Address, new(eventCounts))
		}
		c.(*eventCounts)[e.Type].Add(1)
	}
	if e.Type == pool.PoolCreated {
		m.created.CompareAndSwap(nil, &e.Options)
	}
	if m.print {
		line := formatEvent(time.Since(m.start), e)
		if m.byAddress {
			line += " addr=" + e.Address
		}
		m.out.println(line)
	}
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

// formatEvent renders e on one line, with the fields its type carries.
func formatEvent(at time.Duration, e pool.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%9.6fs %-26s", at.Seconds(), e.Type)
	if e.ConnectionID != 0 {
		fmt.Fprintf(&b, " conn=%d", e.ConnectionID)
	}
	switch e.Type {
	case pool.ConnectionReady, pool.ConnectionCheckedOut, pool.ConnectionCheckOutFailed:
		fmt.Fprintf(&b, " duration=%v", e.Duration.Round(time.Microsecond))
	case pool.PoolCleared:
		fmt.Fprintf(&b, " interruptInUse=%t", e.Interrupt)
	case pool.PoolCreated:
		fmt.Fprintf(&b, " options=%v", e.Options)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", e.Reason)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " err=%q", e.Err)
	}
	return strings.TrimRight(b.String(), " ")
}
