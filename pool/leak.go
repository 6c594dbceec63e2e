package pool

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A CallSite is where a connection was checked out: the innermost frames of
// the stack of the caller of [Pool.CheckOut] or [Pool.Do], kept as program
// counters and turned into functions, files and lines only when asked. The
// zero value has no frames.
type CallSite struct {
	stack *callStack // nil for no frames; a pointer keeps Event, which carries a CallSite, small
}

type callStack struct {
	pcs []uintptr
}

// newCallSite returns the call site of the program counters pcs, which it
// copies.
func newCallSite(pcs []uintptr) CallSite {
	if len(pcs) == 0 {
		return CallSite{}
	}
	return CallSite{&callStack{slices.Clone(pcs)}}
}

// Frames returns the call site's frames, innermost first (the caller of
// CheckOut or Do first).
func (s CallSite) Frames() []runtime.Frame {
	if s.stack == nil {
		return nil
	}
	out := make([]runtime.Frame, 0, len(s.stack.pcs))
	frames := runtime.CallersFrames(s.stack.pcs)
	for {
		f, more := frames.Next()
		out = append(out, f)
		if !more {
			return out
		}
	}
}

// String returns the frames as a stack trace prints them: each function on
// a line, then its file and line indented on the next; "" for no frames.
func (s CallSite) String() string {
	var b strings.Builder
	for i, f := range s.Frames() {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(f.Function)
		b.WriteString("\n\t")
		b.WriteString(f.File)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(f.Line))
	}
	return b.String()
}

// LogValue formats the call site for a log record, only when a handler
// writes the record.
func (s CallSite) LogValue() slog.Value { return slog.StringValue(s.String()) }

// checkOutTraced is a check-out with the leak detector asking for call sites:
// it keeps the stack of the caller of CheckOut or Do. It is not inlined, so
// that its buffer stays out of the frame of checkOut when the detector is
// off.
//
//go:noinline
func (p *Pool) checkOutTraced(ctx context.Context) (*Conn, error) {
	var pcs [MaxCallSiteFrames]uintptr
	// Skip runtime.Callers, this function, checkOut, and CheckOut (inlined
	// or not, it is a frame of its own here) or Do.
	site := pcs[:runtime.Callers(4, pcs[:p.cfg.leakFrames])]
	return p.checkOut(ctx, &site)
}

// keepSite copies the call site of a check-out into dst, whose memory is
// reused from one check-out to the next. site is nil when the leak detector
// keeps no call site.
func keepSite(dst *[]uintptr, site *[]uintptr) {
	if site == nil {
		return
	}
	if cap(*dst) < len(*site) {
		*dst = make([]uintptr, 0, MaxCallSiteFrames)
	}
	*dst = append((*dst)[:0], *site...)
}

// leakReport is a check-out the leak detector found.
type leakReport struct {
	id   int64
	held time.Duration
	site CallSite
}

// findLeaks appends to found the check-outs that have kept their connection
// for the threshold or longer and were not reported yet, marks them
// reported, and returns how long until the next one is due.
func (p *Pool) findLeaks(found []leakReport) ([]leakReport, time.Duration) {
	threshold := p.cfg.leakThreshold
	next := threshold // a connection checked out from now on is due then at the earliest
	p.mu.Lock()
	now := p.clock()
	for _, c := range p.conns {
		if c.state != stateInUse || c.leakReported || c.outAt == 0 {
			continue
		}
		held := time.Duration(now - c.outAt)
		if held < threshold {
			next = min(next, threshold-held)
			continue
		}
		c.leakReported = true
		p.counts.leaks.Add(1)
		found = append(found, leakReport{id: c.id, held: held, site: newCallSite(c.site)})
	}
	p.mu.Unlock()
	return found, next
}

// reportLeak emits the ConnectionLeakSuspected event of r, which the log
// writes at Warn: built when a handler, the flight recorder or a logger
// enabled for Warn listens.
func (p *Pool) reportLeak(r *leakReport) {
	if !p.handled && !(p.cfg.logger != nil && p.cfg.logger.Enabled(context.Background(), slog.LevelWarn)) {
		return
	}
	e := Event{Type: ConnectionLeakSuspected, Address: p.address, ConnectionID: r.id, Duration: r.held, CallSite: r.site}
	p.mu.Lock()
	p.unlockAndWake(p.queueLocked(&e))
}
