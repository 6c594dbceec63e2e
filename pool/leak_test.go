package pool_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

const leakMessage = "Connection checked out longer than the leak threshold"

// leaks returns the leak reports among the events.
func leaks(l *evLog) []pool.Event {
	var out []pool.Event
	for _, e := range l.all() {
		if e.Type == pool.ConnectionLeakSuspected {
			out = append(out, e)
		}
	}
	return out
}

// holdViaDo checks a connection out through Do and holds it until release is
// closed: the call site of the check-out is this function.
func holdViaDo(p *pool.Pool, release <-chan struct{}) error {
	return p.Do(context.Background(), func(*pool.Conn) error {
		<-release
		return nil
	})
}

// A connection checked out for the threshold is reported once, through an
// event and a Warn log record, with the call site of the check-out; a new
// check-out of it may be reported again.
func TestLeakDetectorReportsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLogHandler(slog.LevelWarn)
		p, log := newPool(t, &fakeConnector{}, pool.WithLeakDetector(time.Second, 8), pool.WithLogger(slog.New(h)))
		h.watch(p)
		mustReady(t, p)
		c := mustCheckOut(t, p) // through checkOutAsync
		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		if n := len(leaks(log)); n != 0 {
			t.Fatalf("%d reports before the threshold", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		ls := leaks(log)
		if len(ls) != 1 {
			t.Fatalf("%d reports at the threshold, want 1", len(ls))
		}
		e := ls[0]
		if e.ConnectionID != c.ID() || e.Duration != time.Second || e.Address != "127.0.0.1:27017" {
			t.Errorf("report %+v: want connection %d, checked out for 1s", e, c.ID())
		}
		frames := e.CallSite.Frames()
		if len(frames) == 0 || !strings.HasSuffix(frames[0].Function, "pool_test.checkOutAsync.func1") {
			t.Fatalf("call site %v, want it to begin at the caller of CheckOut", frames)
		}
		if len(frames) > 8 {
			t.Errorf("%d frames, want 8 at most", len(frames))
		}
		site := e.CallSite.String()
		if !strings.Contains(site, "checkOutAsync.func1") || !strings.Contains(site, "helpers_test.go:") {
			t.Errorf("call site printed as %q, want the function and its file", site)
		}

		rs := h.records()
		if len(rs) != 1 {
			t.Fatalf("log records %s, want the report alone (Debug is off)", logDump(rs))
		}
		r := rs[0]
		if r.Level != slog.LevelWarn || r.Message != leakMessage {
			t.Errorf("record %v: want level Warn, message %q", r, leakMessage)
		}
		for k, want := range map[string]string{
			"component": "connection", "serverHost": "127.0.0.1", "serverPort": "27017",
			"driverConnectionId": "1", "durationMS": "1000", "leakThresholdMS": "1000",
		} {
			if got := r.Attrs[k].String(); got != want {
				t.Errorf("record's %s = %q, want %q", k, got, want)
			}
		}
		if got := r.Attrs["callSite"].String(); got != site {
			t.Errorf("record's callSite %q, want %q", got, site)
		}

		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := len(leaks(log)); n != 1 {
			t.Fatalf("%d reports after 11s, want 1: a check-out is reported once", n)
		}
		if s := p.Stats(); s.Leaks != 1 {
			t.Errorf("Stats().Leaks = %d, want 1", s.Leaks)
		}
		mustCheckIn(t, p, c)

		// Checked out again, through Do this time.
		release := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- holdViaDo(p, release) }()
		time.Sleep(time.Second)
		synctest.Wait()
		ls = leaks(log)
		if len(ls) != 2 {
			t.Fatalf("%d reports, want a second one for the second check-out", len(ls))
		}
		if fs := ls[1].CallSite.Frames(); len(fs) == 0 || !strings.HasSuffix(fs[0].Function, "pool_test.holdViaDo") {
			t.Errorf("call site %v, want it to begin at the caller of Do", fs)
		}
		close(release)
		must(t, recv(t, done, "Do"))
	})
}

// A connection checked in before the threshold is not reported, and the
// detector works with the maintenance off.
func TestLeakDetectorQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, log := newPool(t, &fakeConnector{}, pool.WithLeakDetector(time.Second, 8), pool.WithMaintenanceInterval(-1))
		mustReady(t, p)
		for range 3 {
			c := mustCheckOut(t, p)
			time.Sleep(900 * time.Millisecond)
			mustCheckIn(t, p, c)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := len(leaks(log)); n != 0 {
			t.Fatalf("%d reports of connections checked in in time", n)
		}
		c := mustCheckOut(t, p)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(leaks(log)); n != 1 {
			t.Fatalf("%d reports with the maintenance off, want 1", n)
		}
		mustCheckIn(t, p, c)
	})
}

// With no frames asked for, the report comes without a call site; with no
// event handler and a logger at Warn, the log record alone is written.
func TestLeakDetectorWithoutCallSiteOrHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLogHandler(slog.LevelWarn)
		p := h.watch(readyPool(t, pool.WithLeakDetector(time.Minute, 0), pool.WithLogger(slog.New(h))))
		c := mustCheckOut(t, p)
		time.Sleep(time.Minute)
		synctest.Wait()
		rs := h.records()
		if len(rs) != 1 || rs[0].Message != leakMessage {
			t.Fatalf("records %s, want the leak report", logDump(rs))
		}
		if v, ok := rs[0].Attrs["callSite"]; ok {
			t.Errorf("callSite %v, want none", v)
		}
		mustCheckIn(t, p, c)
	})
	var empty pool.CallSite
	if empty.String() != "" || len(empty.Frames()) != 0 {
		t.Errorf("zero CallSite: %q, %v", empty.String(), empty.Frames())
	}
}

// The detector's bookkeeping allocates nothing per check-out.
func TestLeakDetectorAllocatesNothing(t *testing.T) {
	p := readyPool(t, pool.WithLeakDetector(time.Hour, 8))
	if allocs := idleRoundTripAllocs(t, p); allocs != 0 {
		t.Fatalf("check-out + check-in with the leak detector: %v allocations, want 0", allocs)
	}
}

func TestLeakEventName(t *testing.T) {
	if got := pool.ConnectionLeakSuspected.String(); got != "ConnectionLeakSuspected" {
		t.Errorf("String() = %q", got)
	}
}
