package pool_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mongopool/mongopool/pool"
)

// Checking in a connection of another pool, one checked in already, or nil is
// an error that changes no count.
func TestCheckInRejectsForeignAndDoubleCheckIns(t *testing.T) {
	p, log := newPool(t, &fakeConnector{})
	q, _ := newPool(t, &fakeConnector{})
	mustReady(t, p)
	mustReady(t, q)
	mine, theirs := mustCheckOut(t, p), mustCheckOut(t, q)
	before, events := p.Stats(), len(log.all())

	if err := p.CheckIn(theirs); !errors.Is(err, pool.ErrNotFromThisPool) {
		t.Fatalf("foreign check-in: %v", err)
	}
	if err := p.CheckIn(nil); !errors.Is(err, pool.ErrNotFromThisPool) {
		t.Fatalf("nil check-in: %v", err)
	}
	if p.Stats() != before || len(log.all()) != events {
		t.Fatal("a rejected check-in changed the pool")
	}

	mustCheckIn(t, p, mine)
	before, events = p.Stats(), len(log.all())
	if err := p.CheckIn(mine); !errors.Is(err, pool.ErrNotCheckedOut) {
		t.Fatalf("double check-in: %v", err)
	}
	if p.Stats() != before || len(log.all()) != events {
		t.Fatal("a double check-in changed the pool")
	}
	mustCheckIn(t, q, theirs)
	checkCounts(t, p.Stats())
	checkCounts(t, q.Stats())
}

func TestCloseClosesIdleNowAndInUseAtCheckIn(t *testing.T) {
	f := &fakeConnector{}
	p, log := newPool(t, f)
	mustReady(t, p)
	a, b := mustCheckOut(t, p), mustCheckOut(t, p)
	mustCheckIn(t, p, a)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !a.Link().(*fakeLink).closed.Load() || b.Link().(*fakeLink).closed.Load() {
		t.Fatal("Close must close the idle connection and leave the checked-out one")
	}
	if _, err := p.CheckOut(context.Background()); !errors.Is(err, pool.ErrPoolClosed) {
		t.Fatalf("check-out from a closed pool: %v", err)
	}
	mustCheckIn(t, p, b)
	if !b.Link().(*fakeLink).closed.Load() {
		t.Fatal("check-in to a closed pool must close the connection")
	}
	if err := p.Ready(); !errors.Is(err, pool.ErrPoolClosed) {
		t.Fatalf("Ready on a closed pool: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s := p.Stats()
	if s.State != "closed" || s.Total != 0 || s.ClosedPoolClosed != 2 || f.openLinks() != 0 {
		t.Fatalf("stats %+v, %d open links", s, f.openLinks())
	}
	if n := log.count(pool.PoolClosed); n != 1 {
		t.Fatalf("%d PoolClosed events, want 1", n)
	}
}

// Close fails the waiting check-outs and cancels the establishments.
func TestCloseEvictsWaitersAndEstablishments(t *testing.T) {
	f := &fakeConnector{Block: make(chan struct{})}
	p, log := newPool(t, f, pool.WithMaxConnecting(1))
	mustReady(t, p)
	r1 := checkOutAsync(context.Background(), p)
	r2 := checkOutAsync(context.Background(), p)
	log.waitFor(t, pool.ConnectionCheckOutStarted, 2)
	log.waitFor(t, pool.ConnectionCreated, 1)
	p.Close()
	for _, r := range []<-chan result{r1, r2} {
		if got := <-r; !errors.Is(got.err, pool.ErrPoolClosed) {
			t.Fatalf("waiting check-out: %v, want PoolClosedError", got.err)
		}
	}
	if f.inFlight.Load() != 0 {
		t.Fatal("Close returned with an establishment still running")
	}
	checkCounts(t, p.Stats())
}
