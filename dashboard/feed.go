package dashboard

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// eventTypes is one more than the greatest pool.EventType, so that counts can
// be indexed by type; a type past it (a newer pool's) is counted in the total
// only.
const eventTypes = int(pool.ConnectionLeakSuspected) + 1

// feedKey names the events of one pool as an event handler sees them: the
// handler's name and the pool's address.
type feedKey struct {
	handler string
	address string
}

// A feed is what the dashboard keeps of the events of one pool: counts, kept
// by the event handler itself (an atomic add each, so that the rates are
// exact whatever the lists drop), and the recent events, kept by the
// dashboard's goroutine in a bounded ring per kind of event (see kind), so
// that the thousands of check-outs of a storm, or the failed check-outs that
// follow a clear, do not push the clear itself out of sight.
type feed struct {
	address string
	pruned  atomic.Bool // no longer the feed of its key: see Dashboard.pruneLocked

	counts  [eventTypes]atomic.Int64
	other   atomic.Int64 // events of a type past eventTypes
	dropped atomic.Int64 // events left out of the lists: the queue was full

	mu       sync.Mutex
	rings    [kinds]ring
	lastSeen time.Time // when the last event was listed
}

// The kinds of events, each listed in a ring of its own.
const (
	kindPool       = iota // the pool's own: created, ready, cleared, closed
	kindConnection        // the rest: connections created, ready, closed, failed check-outs, leaks
	kindCheckOut          // those of every check-out: started, checked out, checked in
	kinds
)

// kind returns the kind of an event of type t.
func kind(t pool.EventType) int {
	switch t {
	case pool.PoolCreated, pool.PoolReady, pool.PoolCleared, pool.PoolClosed, pool.PoolReconfigured:
		return kindPool
	case pool.ConnectionCheckOutStarted, pool.ConnectionCheckedOut, pool.ConnectionCheckedIn:
		return kindCheckOut
	}
	return kindConnection
}

func newFeed(address string, kept int, now time.Time) *feed {
	f := &feed{address: address, lastSeen: now}
	for i := range f.rings {
		f.rings[i] = newRing(kept)
	}
	return f
}

// total returns the number of events the handler saw.
func (f *feed) total() int64 {
	n := f.other.Load()
	for i := range f.counts {
		n += f.counts[i].Load()
	}
	return n
}

// count counts e; it runs in the event handler, on the pool's delivery
// goroutine.
func (f *feed) count(t pool.EventType) {
	if int(t) < eventTypes {
		f.counts[t].Add(1)
	} else {
		f.other.Add(1)
	}
}

// list keeps e in the recent events; it runs on the dashboard's goroutine.
func (f *feed) list(e *pool.Event, seq uint64, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastSeen = at
	f.rings[kind(e.Type)].put(record{seq: seq, at: at, ev: *e})
}

// A record is an event as the list keeps it: with its place in the order in
// which the dashboard received the events, and the time it did.
type record struct {
	seq uint64
	at  time.Time
	ev  pool.Event
}

// A ring keeps the last len(buf) records put in it.
type ring struct {
	buf  []record
	next int // where the next record goes
	full bool
}

func newRing(n int) ring { return ring{buf: make([]record, n)} }

func (r *ring) put(rec record) {
	r.buf[r.next] = rec
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// newest appends to dst the records of r numbered after after and up to
// upTo, newest first, at most limit of them.
func (r *ring) newest(dst []record, after, upTo uint64, limit int) []record {
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	for i := 0; i < n && limit > 0; i++ {
		rec := &r.buf[(r.next-1-i+len(r.buf))%len(r.buf)]
		if rec.seq <= after {
			break // the ring is in the order of the numbers
		}
		if rec.seq > upTo {
			continue
		}
		dst = append(dst, *rec)
		limit--
	}
	return dst
}

// delivery is an event on its way from a pool's event handler to the
// dashboard's goroutine.
type delivery struct {
	feed *feed
	ev   pool.Event
}

// EventHandler returns an event handler to give a pool (with
// [pool.WithEventHandler], or to a client's pools with
// mongopool.WithPoolOptions) so that its events appear on the dashboard:
// counted for the events per second, and listed among the recent events.
// The events of a pool go to the pool added under the same name with
// [Dashboard.Add], or to the pools of the source of that name
// ([Dashboard.AddSource]), told apart by their address; they are kept from
// the pool's creation on, before it is added.
//
// The pool calls the handler on a goroutine of its own, which delivers its
// events in order, after the changes they report; a handler that keeps it
// waiting puts the pool behind, and a pool a whole queue behind drops events
// (pool.Stats.EventsDropped). So the handler never waits: it counts the
// event and queues it for the dashboard's goroutine, and when the queue is
// full (the dashboard is behind, or closed) the event is left out of the
// list and counted as dropped, while still counted in the events per second.
func (d *Dashboard) EventHandler(name string) func(pool.Event) {
	// The feed of the last address seen: a handler usually serves one pool,
	// and this spares it a look-up per event.
	var last atomic.Pointer[feed]
	return func(e pool.Event) {
		f := last.Load()
		if f == nil || f.address != e.Address || f.pruned.Load() {
			f = d.feed(name, e.Address)
			last.Store(f)
		}
		f.count(e.Type)
		select {
		case d.queue <- delivery{feed: f, ev: e}:
		default:
			f.dropped.Add(1)
		}
	}
}

// feed returns the feed of (name, address), made if there is none.
func (d *Dashboard) feed(name, address string) *feed {
	k := feedKey{name, address}
	if v, ok := d.feeds.Load(k); ok {
		return v.(*feed)
	}
	v, _ := d.feeds.LoadOrStore(k, newFeed(address, d.cfg.kept, time.Now()))
	return v.(*feed)
}

// lookupFeed returns the feed of (name, address), or nil.
func (d *Dashboard) lookupFeed(name, address string) *feed {
	if v, ok := d.feeds.Load(feedKey{name, address}); ok {
		return v.(*feed)
	}
	return nil
}

// drain lists the events the handlers queue, until the dashboard is closed.
//
// Idle, it waits for an event; busy, it takes what the queue holds every
// drainPause rather than each event as it comes, so that a handler's send
// seldom has a goroutine to wake, which would cost it more than the rest of
// its work.
func (d *Dashboard) drain() {
	defer close(d.drained)
	var seq uint64
	list := func(dl delivery) {
		seq++
		dl.feed.list(&dl.ev, seq, time.Now())
		d.listed.Store(seq)
	}
	pause := time.NewTimer(drainPause)
	pause.Stop()
	for {
		select {
		case <-d.done:
			return
		case dl := <-d.queue:
			list(dl)
		}
		for {
			n := 0
			for more := true; more; {
				select {
				case dl := <-d.queue:
					list(dl)
					n++
				default:
					more = false
				}
			}
			if n == 0 {
				break
			}
			pause.Reset(drainPause)
			select {
			case <-d.done:
				return
			case <-pause.C:
			}
		}
	}
}
