package mongotest

import (
	"testing"
	"time"
)

// The token bucket admits its burst at once, then one connection per 1/rate
// of time, and never saves up more than its burst however long it waits.
func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newTokenBucket(2, 3, t0) // 2 a second, bursts of 3
	for i := range 3 {
		if !b.take(t0) {
			t.Fatalf("connection %d of the burst refused", i+1)
		}
	}
	if b.take(t0) {
		t.Fatal("a fourth connection at once admitted: the burst is 3")
	}
	if b.take(t0.Add(499 * time.Millisecond)) {
		t.Fatal("admitted 499ms later: a token takes 500ms at 2 a second")
	}
	if !b.take(t0.Add(500 * time.Millisecond)) {
		t.Fatal("refused 500ms later: a token takes 500ms at 2 a second")
	}
	// An hour later the bucket holds its burst, no more.
	later := t0.Add(time.Hour)
	for i := range 3 {
		if !b.take(later) {
			t.Fatalf("an hour later, connection %d of the burst refused", i+1)
		}
	}
	if b.take(later) {
		t.Fatal("an hour later, a fourth connection at once admitted: the bucket saved up more than its burst")
	}
	// A clock that goes back does not add tokens.
	if b.take(t0) {
		t.Fatal("admitted at an earlier time")
	}

	z := newTokenBucket(0, 1, t0) // no refill
	if !z.take(t0) || z.take(t0.Add(time.Hour)) {
		t.Fatal("a rate of 0 must admit the burst and then nothing")
	}
}
