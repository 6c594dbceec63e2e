package otelmetrics_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/pooltest"
	"github.com/mongopool/mongopool/pool"
)

// hangLimit bounds every wait of the tests, so that a regression that leaves
// one waiting fails in seconds with a message: the bound of the shared pool
// helpers.
const hangLimit = pooltest.HangLimit

// recv returns the next value of ch, failing the test if none comes within
// hangLimit.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(hangLimit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing after %v", what, hangLimit)
		panic("unreachable")
	}
}

// waitStats waits until p's stats satisfy cond, failing the test after
// hangLimit. It is for the states no event tells of, such as a check-out
// having joined the queue.
func waitStats(t *testing.T, p *pool.Pool, what string, cond func(pool.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for !cond(p.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v; stats %+v", what, hangLimit, p.Stats())
		}
		runtime.Gosched()
	}
}
