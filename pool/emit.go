package pool

import (
	"context"
	"log/slog"
	"time"
)

// mono is a reading of the pool's clock: the time since the pool's epoch on
// the monotonic clock, plus a nanosecond, so that a reading is never 0, the
// value that stands for "not read". It costs a read of the monotonic clock
// alone, about half the cost of time.Now, which reads the wall clock too;
// and a single integer is cheaper to keep and subtract than a time.Time, on
// paths that count nanoseconds. Durations and deadlines are all the pool
// uses it for.
type mono int64

// clock reads the pool's clock.
func (p *Pool) clock() mono { return mono(time.Since(p.epoch)) + 1 }

// observed reports whether someone listens: an event handler, the flight
// recorder, or a logger enabled for Debug. It asks the logger (whose level
// may change) and keeps its answer for observedLocked: it is called where the
// pool's lock is not held, at the start of the calls that emit events, so
// that no code of the user's runs under the lock. Ready and Clear do not
// ask (they go by the last answer): a topology calls them under its own
// lock.
func (p *Pool) observed() bool {
	if l := p.cfg.logger; l != nil {
		debug := l.Enabled(context.Background(), slog.LevelDebug)
		if debug != p.logDebug.Load() {
			p.logDebug.Store(debug)
		}
	}
	return p.observedLocked()
}

// observedLocked is observed with the logger's last answer: for the code that
// holds the lock.
func (p *Pool) observedLocked() bool {
	return p.handled || p.logDebug.Load()
}

// emitLocked reports a connection or check-out event, with the lock held: the
// one place where events are built, and only when someone listens. since is
// the start of the measured duration, if the event has one (0 if not). The
// event is queued for the delivery goroutine, in the order of the changes
// that the lock orders; emitLocked returns true when that goroutine must be
// woken once the lock is released (see unlockAndWake).
func (p *Pool) emitLocked(t EventType, c *Conn, since mono, reason string, err error) (wake bool) {
	if !p.observedLocked() {
		return false
	}
	e := p.event(t, c, since, reason, err)
	return p.queueLocked(&e)
}

// unlockAndWake releases the lock, then wakes the delivery goroutine if
// queueing an event said so: the scheduler's work is not done under the lock.
func (p *Pool) unlockAndWake(wake bool) {
	p.mu.Unlock()
	if wake {
		p.events.Wake()
	}
}

func (p *Pool) event(t EventType, c *Conn, since mono, reason string, err error) Event {
	e := Event{Type: t, Address: p.address, Reason: reason, Err: err}
	if c != nil {
		e.ConnectionID = c.id
	}
	if since != 0 {
		e.Duration = max(time.Duration(p.clock()-since), time.Nanosecond)
	}
	return e
}

// queuedEvent is an event on its way to the delivery goroutine, packed into
// 24 bytes: each byte queued is a byte the delivering processor fetches from
// the one that queued it, and a check-out and its check-in queue three events.
// hdr holds the fields most events have: the type in its low byte, the
// reason's index in recordReasons in the next, the interrupt flag in bit 16
// and the connection's id from bit 24 on. The events with more (a
// PoolCreated's options, a leak's call site, an error, a service id) or an
// id past 40 bits go whole in an Event of their own: they report failures,
// clears and rarities, not the check-outs of a busy pool.
type queuedEvent struct {
	hdr  uint64
	dur  time.Duration
	full *Event // the whole event, when the fields above cannot hold it
}

// The layout of queuedEvent.hdr.
const (
	hdrReasonShift = 8
	hdrInterrupt   = 1 << 16
	hdrConnShift   = 24
	maxPackedConn  = 1<<(64-hdrConnShift) - 1
)

// pack returns e as queued.
func pack(e *Event) queuedEvent {
	reason := reasonIndex(e.Reason)
	if e.Options != nil || e.CallSite.stack != nil || e.Err != nil || !e.ServiceID.IsZero() ||
		e.ConnectionID < 0 || e.ConnectionID > maxPackedConn || recordReasons[reason] != e.Reason {
		full := *e
		return queuedEvent{hdr: uint64(e.Type), full: &full}
	}
	hdr := uint64(e.Type) | uint64(reason)<<hdrReasonShift | uint64(e.ConnectionID)<<hdrConnShift
	if e.Interrupt {
		hdr |= hdrInterrupt
	}
	return queuedEvent{hdr: hdr, dur: e.Duration}
}

// queuedType returns the queued event of type t, which has no other field.
func queuedType(t EventType) queuedEvent { return queuedEvent{hdr: uint64(t)} }

// unpack returns the event q stands for.
func (p *Pool) unpack(q *queuedEvent) Event {
	if q.full != nil {
		return *q.full
	}
	return Event{Type: EventType(q.hdr), Interrupt: q.hdr&hdrInterrupt != 0, Address: p.address,
		ConnectionID: int64(q.hdr >> hdrConnShift), Duration: q.dur, Reason: recordReasons[uint8(q.hdr>>hdrReasonShift)]}
}

// queueLocked hands e to the flight recorder and queues it for the handlers
// and the logger, when they listen; it reports whether the delivery goroutine
// must be woken.
func (p *Pool) queueLocked(e *Event) (wake bool) {
	if p.rec.ring != nil {
		p.recordLocked(e)
	}
	if len(p.cfg.handlers) == 0 && p.cfg.logger == nil {
		return false
	}
	return p.events.Push(pack(e))
}

// queueStarted queues the CheckOutStarted event of a check-out that must wait
// for the lock, and returns its place among the events, which is the
// check-out's place in the wait queue (see checkOut).
func (p *Pool) queueStarted() (ticket uint64) {
	if len(p.cfg.handlers) == 0 && p.cfg.logger == nil {
		// Only the flight recorder listens: the order of arrival is kept
		// all the same.
		return p.tickets.Add(1)
	}
	ticket, wake := p.events.PushTicket(queuedType(ConnectionCheckOutStarted))
	if wake {
		p.events.Wake()
	}
	return ticket
}

// queueStartedLocked hands an observed check-out's CheckOutStarted event to
// the flight recorder and, unless queued already (queued, by queueStarted),
// queues it, with then, if not nil, the event of the check-out's outcome, in
// one push. It returns the event's ticket (0 when queued already) and
// whether the delivery goroutine must be woken.
func (p *Pool) queueStartedLocked(queued bool, then *Event) (ticket uint64, wake bool) {
	started := Event{Type: ConnectionCheckOutStarted, Address: p.address}
	if p.rec.ring != nil {
		p.recordLocked(&started)
		if then != nil {
			p.recordLocked(then)
		}
	}
	if len(p.cfg.handlers) == 0 && p.cfg.logger == nil {
		if !queued {
			ticket = p.tickets.Add(1)
		}
		return ticket, false
	}
	switch {
	case queued && then == nil:
		return 0, false
	case queued:
		return 0, p.events.Push(pack(then))
	case then == nil:
		return p.events.PushTicket(queuedType(ConnectionCheckOutStarted))
	}
	return p.events.PushAll(queuedType(ConnectionCheckOutStarted), pack(then))
}

// emitCreated reports the PoolCreated event, which New emits before anyone
// else can use the pool. It does not ask the logger whether it is enabled
// (the delivery goroutine does): New runs no code of the user's, so that a
// topology may make a pool under its lock.
func (p *Pool) emitCreated() {
	if !p.handled && p.cfg.logger == nil {
		return
	}
	e := Event{Type: PoolCreated, Address: p.address, Options: p.cfg.userOptions()}
	p.mu.Lock()
	p.unlockAndWake(p.queueLocked(&e))
}

// deliverEvent delivers e to the event handlers and the logger. It runs on
// the pool's delivery goroutine, in the order the events were queued, under
// no lock: a handler may call the pool back, Close included, and a slow one
// delays only the events after it.
func (p *Pool) deliverEvent(q queuedEvent) {
	e := p.unpack(&q)
	for _, h := range p.cfg.handlers {
		h(e)
	}
	if l := p.cfg.logger; l != nil {
		level := slog.LevelDebug // the specification's messages
		if e.Type == ConnectionLeakSuspected {
			level = slog.LevelWarn // the pool's own, which asks for attention
		}
		if l.Enabled(context.Background(), level) {
			p.log(l, level, &e)
		}
	}
}

// Flush returns once the event handlers and the logger have had every event
// the pool emitted before the call, or with ctx's error when ctx ends first.
// The events are delivered on a goroutine of the pool's (see
// [WithEventHandler]): Flush is how a test, or a tool that writes the
// events out, knows it has them all. Called from an event handler, it waits
// until ctx ends, since the events it waits for come after the one being
// handled.
func (p *Pool) Flush(ctx context.Context) error { return p.events.Wait(ctx) }

// eventsDropped tells the logger that events were dropped: the handlers fell
// a whole queue behind. It runs on the delivery goroutine.
func (p *Pool) eventsDropped(n uint64) {
	if l := p.cfg.logger; l != nil {
		l.LogAttrs(context.Background(), slog.LevelWarn,
			"mongopool: pool events dropped: the event handlers are slower than the pool",
			slog.String("component", "connection"), slog.String("serverHost", p.host), slog.Uint64("dropped", n))
	}
}

// The specification's log message strings.
var logMessages = [...]string{
	PoolCreated:               "Connection pool created",
	PoolReady:                 "Connection pool ready",
	PoolCleared:               "Connection pool cleared",
	PoolClosed:                "Connection pool closed",
	ConnectionCreated:         "Connection created",
	ConnectionReady:           "Connection ready",
	ConnectionClosed:          "Connection closed",
	ConnectionCheckOutStarted: "Connection checkout started",
	ConnectionCheckOutFailed:  "Connection checkout failed",
	ConnectionCheckedOut:      "Connection checked out",
	ConnectionCheckedIn:       "Connection checked in",
	ConnectionLeakSuspected:   "Connection checked out longer than the leak threshold",
	PoolReconfigured:          "Connection pool reconfigured",
}

// The specification's reason strings of the log messages, by event reason.
var (
	closedReasons = map[string]string{
		ReasonStale:      "Connection became stale because the pool was cleared",
		ReasonIdle:       "Connection has been available but unused for longer than the configured max idle time",
		ReasonError:      "An error occurred while using the connection",
		ReasonPoolClosed: "Connection pool was closed",
		ReasonLifetime:   "Connection is older than the configured max lifetime",
		ReasonShrunk:     "Connection is above the pool's lowered max pool size",
	}
	checkOutFailedReasons = map[string]string{
		ReasonTimeout:         "Wait queue timeout elapsed without a connection becoming available",
		ReasonConnectionError: "An error occurred while trying to establish a new connection",
		ReasonPoolClosed:      "Connection pool was closed",
	}
)

// Pool options in the order the specification lists them in its message.
var logOptionOrder = []string{"maxIdleTimeMS", "minPoolSize", "maxPoolSize", "maxConnecting", "waitQueueTimeoutMS"}

// log writes the log message for e at level: component "connection", the
// message as the record's message and the specification's keys as
// attributes (and, for a leak, the threshold and the call site).
func (p *Pool) log(l *slog.Logger, level slog.Level, e *Event) {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("component", "connection"), slog.String("serverHost", p.host))
	if p.port != 0 {
		attrs = append(attrs, slog.Int("serverPort", p.port))
	}
	if e.Type >= ConnectionCreated && e.ConnectionID != 0 {
		attrs = append(attrs, slog.Int64("driverConnectionId", e.ConnectionID))
	}
	switch e.Type {
	case PoolCreated, PoolReconfigured:
		for _, k := range logOptionOrder {
			if v, ok := e.Options[k]; ok {
				attrs = append(attrs, slog.Int64(k, v))
			}
		}
	case PoolCleared:
		if !e.ServiceID.IsZero() {
			attrs = append(attrs, slog.String("serviceId", e.ServiceID.String()))
		}
	case ConnectionClosed:
		attrs = append(attrs, slog.String("reason", closedReasons[e.Reason]))
		if e.Reason == ReasonError && e.Err != nil {
			attrs = append(attrs, slog.Any("error", e.Err))
		}
	case ConnectionCheckOutFailed:
		attrs = append(attrs, slog.String("reason", checkOutFailedReasons[e.Reason]))
		if e.Reason == ReasonConnectionError && e.Err != nil {
			attrs = append(attrs, slog.Any("error", e.Err))
		}
	}
	switch e.Type {
	case ConnectionReady, ConnectionCheckedOut, ConnectionCheckOutFailed, ConnectionLeakSuspected:
		attrs = append(attrs, slog.Float64("durationMS", float64(e.Duration)/float64(time.Millisecond)))
	}
	if e.Type == ConnectionLeakSuspected {
		attrs = append(attrs, slog.Float64("leakThresholdMS", float64(p.cfg.leakThreshold)/float64(time.Millisecond)))
		if e.CallSite.stack != nil {
			attrs = append(attrs, slog.Any("callSite", e.CallSite)) // formatted by the handler, if it writes the record
		}
	}
	l.LogAttrs(context.Background(), level, logMessages[e.Type], attrs...)
}
