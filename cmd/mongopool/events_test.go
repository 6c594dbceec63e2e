package main

import (
	"testing"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// The pauses the summary of -scenario overload shows run from a failed
// establishment to the next attempt, when no establishment succeeded in
// between (a success ends the pool's backoff); an establishment interrupted
// by a clear or Close is no failure.
func TestEstablishmentPauses(t *testing.T) {
	var es establishments
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(typ pool.EventType, id int64, reason string) pool.Event {
		return pool.Event{Type: typ, Address: "a:1", ConnectionID: id, Reason: reason}
	}
	es.observe(ev(pool.ConnectionCreated, 1, ""), at(0))
	es.observe(ev(pool.ConnectionClosed, 1, pool.ReasonError), at(10))  // failed
	es.observe(ev(pool.ConnectionCreated, 2, ""), at(130))              // a pause of 120ms
	es.observe(ev(pool.ConnectionCreated, 3, ""), at(131))              // no failure since the last attempt
	es.observe(ev(pool.ConnectionClosed, 2, pool.ReasonError), at(140)) // failed
	es.observe(ev(pool.ConnectionReady, 3, ""), at(141))                // a success: the backoff is over
	es.observe(ev(pool.ConnectionCreated, 4, ""), at(142))              // no pause
	es.observe(ev(pool.ConnectionClosed, 4, pool.ReasonStale), at(150)) // interrupted, not failed
	es.observe(ev(pool.ConnectionCreated, 5, ""), at(400))              // no pause
	es.observe(ev(pool.ConnectionClosed, 3, pool.ReasonError), at(500)) // an established connection broke: no establishment failed
	es.observe(ev(pool.ConnectionCreated, 6, ""), at(600))              // no pause
	g := es.gaps()
	if g.n != 1 || g.max != 120*time.Millisecond {
		t.Errorf("%d pauses, the longest %v; want one of 120ms", g.n, g.max)
	}
	if len(es.pending) != 2 { // 5 and 6
		t.Errorf("%d connections pending, want 2", len(es.pending))
	}
}
