package pool_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// The events that carry a duration measure it: ConnectionReady from the
// start of the establishment, ConnectionCheckedOut and
// ConnectionCheckOutFailed from the start of the check-out; and the log
// messages' durationMS say the same in milliseconds. The pool is a second
// old when the story begins, so that a duration counted from its creation
// shows, and the bubble's fake clock makes every duration exact.
func TestEventDurationsAreMeasured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			establish = 250 * time.Millisecond
			held      = 300 * time.Millisecond
			queue     = time.Second
		)
		f := &fakeConnector{Delay: establish}
		h := newLogHandler(slog.LevelDebug)
		p, log := newPool(t, f, pool.WithMaxPoolSize(1), pool.WithWaitQueueTimeout(queue),
			pool.WithMaintenanceInterval(-1), pool.WithLogger(slog.New(h)))
		h.watch(p)
		mustReady(t, p)
		time.Sleep(time.Second)

		// A check-out that waits for its connection's establishment.
		c := mustCheckOut(t, p)
		// One that waits for a check-in.
		waiter := checkOutAsync(context.Background(), p)
		time.Sleep(held)
		mustCheckIn(t, p, c)
		r := recv(t, waiter, "the check-out waiting for the check-in")
		if r.err != nil {
			t.Fatal(r.err)
		}
		// One that gives up at waitQueueTimeoutMS.
		if _, err := checkOut(t, context.Background(), p); !errors.Is(err, pool.ErrWaitQueueTimeout) {
			t.Fatalf("check-out from a full pool: %v, want a wait queue timeout", err)
		}
		// One whose establishment fails.
		r.c.Link().(*fakeLink).fail(errors.New("connection reset by peer"))
		mustCheckIn(t, p, r.c) // closed: room for a new connection
		f.set(func(f *fakeConnector) { f.FailBeforeHello = errRefused })
		var ce *pool.ConnectionError
		if _, err := checkOut(t, context.Background(), p); !errors.As(err, &ce) {
			t.Fatalf("check-out with a failing connector: %v, want a ConnectionError", err)
		}

		want := map[pool.EventType][]time.Duration{
			pool.ConnectionReady:          {establish},
			pool.ConnectionCheckedOut:     {establish, held},
			pool.ConnectionCheckOutFailed: {queue, establish},
		}
		messages := map[pool.EventType]string{
			pool.ConnectionReady:          "Connection ready",
			pool.ConnectionCheckedOut:     "Connection checked out",
			pool.ConnectionCheckOutFailed: "Connection checkout failed",
		}
		for typ, durations := range want {
			var got []time.Duration
			for _, e := range log.all() {
				if e.Type == typ {
					got = append(got, e.Duration)
				}
			}
			if !slices.Equal(got, durations) {
				t.Errorf("%v events' durations %v, want %v", typ, got, durations)
			}
			var gotMS, wantMS []float64
			for _, d := range durations {
				wantMS = append(wantMS, float64(d.Milliseconds()))
			}
			for _, rec := range h.records() {
				if rec.Message == messages[typ] {
					gotMS = append(gotMS, rec.Attrs["durationMS"].Float64())
				}
			}
			if !slices.Equal(gotMS, wantMS) {
				t.Errorf("%q messages' durationMS %v, want %v", messages[typ], gotMS, wantMS)
			}
		}
	})
}
