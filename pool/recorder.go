package pool

import "time"

// RecordedEvent is an event as the flight recorder keeps it (see
// [WithFlightRecorder]): the fields of [Event] that fit in a small record,
// without its error, options or call site.
type RecordedEvent struct {
	Time         time.Time // when the event was emitted
	Type         EventType
	ConnectionID int64
	Duration     time.Duration
	Reason       string
	ServiceID    ServiceID
	Interrupt    bool
}

// record is a RecordedEvent in the ring: fixed size, and without a pointer,
// so that the ring costs the collector nothing to scan and an event costs no
// allocation to keep.
type record struct {
	at, dur, conn int64 // at: nanoseconds since the pool's epoch
	svc           ServiceID
	typ           EventType
	reason        uint8 // index in recordReasons
	interrupt     bool
}

// recordReasons are the reasons an event may carry, by their index in a
// record; 0 is none.
var recordReasons = [...]string{"", ReasonStale, ReasonIdle, ReasonError, ReasonPoolClosed, ReasonTimeout, ReasonConnectionError,
	ReasonLifetime, ReasonShrunk}

func reasonIndex(reason string) uint8 {
	for i, r := range recordReasons {
		if r == reason {
			return uint8(i)
		}
	}
	return 0
}

// recorder is the flight recorder's ring; guarded by pool.mu.
type recorder struct {
	ring []record // its length is the recorder's size; nil when off
	next int      // where the next record goes
	full bool     // the ring has wrapped: next is also the oldest record
}

// recordLocked keeps e, emitted now, in the ring, dropping the oldest record
// once the ring is full. The clock is read under the lock, so that the
// records' times follow their order.
func (p *Pool) recordLocked(e *Event) {
	r := &p.rec.ring[p.rec.next]
	*r = record{
		at:        int64(time.Since(p.epoch)),
		dur:       int64(e.Duration),
		conn:      e.ConnectionID,
		svc:       e.ServiceID,
		typ:       e.Type,
		reason:    reasonIndex(e.Reason),
		interrupt: e.Interrupt,
	}
	if p.rec.next++; p.rec.next == len(p.rec.ring) {
		p.rec.next, p.rec.full = 0, true
	}
}

// RecentEvents returns the events the flight recorder keeps, oldest first,
// in a slice of the caller's; nil when the recorder is off (see
// [WithFlightRecorder]).
func (p *Pool) RecentEvents() []RecordedEvent {
	if p.rec.ring == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recentEventsLocked()
}

func (p *Pool) recentEventsLocked() []RecordedEvent {
	n, first := p.rec.next, 0
	if p.rec.full {
		n, first = len(p.rec.ring), p.rec.next
	}
	out := make([]RecordedEvent, n)
	for i := range out {
		r := &p.rec.ring[(first+i)%len(p.rec.ring)]
		out[i] = RecordedEvent{
			Time:         p.epoch.Add(time.Duration(r.at)),
			Type:         r.typ,
			ConnectionID: r.conn,
			Duration:     time.Duration(r.dur),
			Reason:       recordReasons[r.reason],
			ServiceID:    r.svc,
			Interrupt:    r.interrupt,
		}
	}
	return out
}
