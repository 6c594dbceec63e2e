package mongotest_test

import (
	"errors"
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/pool"
)

// A rate limit of 0 connections a second with a burst of 2 admits two
// connections and closes the third as soon as it is accepted, before
// reading anything; the connections admitted are served as usual. Turning
// the limit off admits connections again.
func TestLimitConnectionRate(t *testing.T) {
	srv := start(t)
	if err := srv.LimitConnectionRate(0, 2); err != nil {
		t.Fatal(err)
	}
	first, second := dialRaw(t, srv), dialRaw(t, srv)
	first.run(cmd("admin", bson.E{Key: "ping", Value: 1}))
	second.run(cmd("admin", bson.E{Key: "ping", Value: 1}))
	refused := dialRaw(t, srv)
	refused.expectClosed()
	if st := srv.Stats(); st.ConnectionsAccepted != 2 || st.ConnectionsRejected != 1 || st.Commands["ping"] != 2 {
		t.Fatalf("stats %+v; want 2 connections accepted, 1 rejected, 2 pings", st)
	}
	// The connections admitted before keep working.
	first.run(cmd("admin", bson.E{Key: "ping", Value: 1}))

	if err := srv.LimitConnectionRate(0, 0); err != nil {
		t.Fatal(err)
	}
	dialRaw(t, srv).run(cmd("admin", bson.E{Key: "ping", Value: 1}))
	if st := srv.Stats(); st.ConnectionsAccepted != 3 || st.ConnectionsRejected != 1 {
		t.Fatalf("stats %+v; want the limit off: 3 accepted, still 1 rejected", st)
	}
}

// Invalid limits are refused, and change nothing.
func TestLimitConnectionRateRejects(t *testing.T) {
	srv := start(t)
	for _, tc := range []struct {
		rate  float64
		burst int
	}{{-1, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {1, -1}, {1, 0}} {
		if err := srv.LimitConnectionRate(tc.rate, tc.burst); err == nil {
			t.Errorf("LimitConnectionRate(%v, %d) accepted", tc.rate, tc.burst)
		}
	}
	dialRaw(t, srv).run(cmd("admin", bson.E{Key: "ping", Value: 1}))
	if st := srv.Stats(); st.ConnectionsRejected != 0 {
		t.Fatalf("stats %+v; want no connection rejected after refused limits", st)
	}
}

// What a client's pool makes of a refused connection: its handshake fails
// with a network error, which the pool labels as the client backpressure
// specification says (SystemOverloadedError, RetryableError).
func TestLimitConnectionRatePoolSeesOverload(t *testing.T) {
	srv := start(t)
	// Two connections admitted: the monitor's, and the one of Open's ping.
	if err := srv.LimitConnectionRate(0, 2); err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	p, err := mongopool.Open(c, srv.URI()+"?serverMonitoringMode=poll")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	held, err := p.Pool().CheckOut(c)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Pool().CheckIn(held)
	_, err = p.Pool().CheckOut(c) // needs a second connection
	var cerr *pool.ConnectionError
	if !errors.As(err, &cerr) || cerr.DuringAuth {
		t.Fatalf("check-out: %v (%T); want a *pool.ConnectionError of the handshake", err, err)
	}
	if !pool.HasErrorLabel(err, pool.LabelSystemOverloaded) || !pool.HasErrorLabel(err, pool.LabelRetryable) {
		t.Errorf("check-out error %v: want the labels SystemOverloadedError and RetryableError", err)
	}
	if st := srv.Stats(); st.ConnectionsRejected != 1 {
		t.Errorf("stats %+v; want 1 connection rejected", st)
	}
}
