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

// observed reports whether someone listens: an event handler, or a logger
// enabled for Debug (asked each time, as its level may change).
func (p *Pool) observed() bool {
	return p.handled || p.cfg.logger != nil && p.cfg.logger.Enabled(context.Background(), slog.LevelDebug)
}

// emit reports a connection or check-out event: the one place where events
// are built and log records written, and only when someone listens. since is
// the start of the measured duration, if the event has one (0 if not). While
// a state change's events are being delivered, the event is queued behind
// them (see finishLocked) instead of delivered here.
func (p *Pool) emit(t EventType, c *Conn, since mono, reason string, err error) {
	if !p.observed() {
		return
	}
	e := p.event(t, c, since, reason, err)
	if p.queued.Load() && p.enqueue(&e) {
		return
	}
	p.publish(&e)
}

// deliver is emit for the goroutine whose turn it is to deliver: it never
// queues.
func (p *Pool) deliver(t EventType, c *Conn, since mono, reason string, err error) {
	if !p.observed() {
		return
	}
	e := p.event(t, c, since, reason, err)
	p.publish(&e)
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

// enqueue queues e behind the deliveries under way, if there still are any.
func (p *Pool) enqueue(e *Event) bool {
	p.mu.Lock()
	if !p.draining {
		p.mu.Unlock()
		return false
	}
	p.backlog = append(p.backlog, outbox{events: []Event{*e}})
	p.mu.Unlock()
	return true
}

// emitCreated reports the PoolCreated event, which New emits before anyone
// else can use the pool.
func (p *Pool) emitCreated() {
	if !p.observed() {
		return
	}
	e := Event{Type: PoolCreated, Address: p.address, Options: p.cfg.userOptions()}
	p.publish(&e)
}

// publish delivers e: to the flight recorder, the event handlers and the
// logger. It runs without the pool's lock held.
func (p *Pool) publish(e *Event) {
	if p.rec.ring != nil {
		p.record(e)
	}
	for _, h := range p.cfg.handlers {
		h(*e)
	}
	if l := p.cfg.logger; l != nil {
		level := slog.LevelDebug // the specification's messages
		if e.Type == ConnectionLeakSuspected {
			level = slog.LevelWarn // the pool's own, which asks for attention
		}
		if l.Enabled(context.Background(), level) {
			p.log(l, level, e)
		}
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
