package pool_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// Check-outs are served in the order of their CheckOutStarted events, and a
// handler stuck on an event holds no check-out up: here the handler blocks on
// the first check-out's CheckOutStarted, yet both check-outs queue, in order,
// and are served in that order; the events, once the handler returns, show
// them in that order too. The test runs in a synctest bubble, so that
// synctest.Wait tells when every check-out has got as far as it can.
func TestQueueServesInCheckOutStartedOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			hold    atomic.Bool // the next CheckOutStarted handler blocks
			inside  = make(chan struct{})
			release = make(chan struct{})
		)
		log := newEvLog()
		handler := func(e pool.Event) {
			if e.Type == pool.ConnectionCheckOutStarted && hold.CompareAndSwap(true, false) {
				close(inside)
				<-release
			}
			log.handle(e)
		}
		p, err := pool.New("127.0.0.1:27017", &fakeConnector{}, pool.WithMaxPoolSize(1), pool.WithEventHandler(handler))
		if err != nil {
			t.Fatal(err)
		}
		defer closePool(t, p)
		mustReady(t, p)
		held := mustCheckOut(t, p)
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		served := make(chan string, 2)
		checkOut := func(name string) {
			c, err := p.CheckOut(ctx)
			if err != nil {
				t.Error(err)
				served <- "error"
				return
			}
			served <- name
			if err := p.CheckIn(c); err != nil {
				t.Error(err)
			}
		}
		hold.Store(true)
		go checkOut("first")
		recv(t, inside, "the first check-out's event") // the handler is stuck on it
		synctest.Wait()
		wantQueued(t, p, 1) // queued all the same
		go checkOut("second")
		synctest.Wait()
		wantQueued(t, p, 2)
		mustCheckIn(t, p, held)
		if a, b := recv(t, served, "a check-out served"), recv(t, served, "a check-out served"); a != "first" || b != "second" {
			t.Errorf("served %s, then %s; want first, then second", a, b)
		}
		close(release)
		synctest.Wait()
		// The held connection's check-in, then the first check-out served,
		// its check-in, and the second's.
		got := fmt.Sprint(log.types(pool.PoolCreated, pool.PoolReady, pool.ConnectionCreated, pool.ConnectionReady))
		want := fmt.Sprint([]string{"ConnectionCheckOutStarted", "ConnectionCheckedOut", // held
			"ConnectionCheckOutStarted", "ConnectionCheckOutStarted", "ConnectionCheckedIn",
			"ConnectionCheckedOut", "ConnectionCheckedIn", "ConnectionCheckedOut", "ConnectionCheckedIn"})
		if got != want {
			t.Errorf("events %s\nwant   %s", got, want)
		}
	})
}

// wantQueued checks that n check-outs wait in p's queue.
func wantQueued(t *testing.T, p *pool.Pool, n int) {
	t.Helper()
	if got := p.Stats().Waiting; got != n {
		t.Fatalf("%d check-outs waiting, want %d", got, n)
	}
}

// A check-out that waited returns after its ConnectionCheckedOut event,
// which the pool emits when it hands the connection over.
func TestWaiterCheckedOutEventPrecedesReturn(t *testing.T) {
	p, log := newPool(t, &fakeConnector{}, pool.WithMaxPoolSize(1))
	mustReady(t, p)
	held := mustCheckOut(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ch := checkOutAsync(ctx, p)
	log.waitFor(t, pool.ConnectionCheckOutStarted, 2)
	mustCheckIn(t, p, held)
	r := recv(t, ch, "the waiting check-out")
	if r.err != nil {
		t.Fatal(r.err)
	}
	// Read at once: nothing else runs in the pool now.
	if got := log.count(pool.ConnectionCheckedOut); got != 2 {
		t.Errorf("%d ConnectionCheckedOut events when the waiter got its connection, want 2: %v", got, log.types())
	}
	evs := log.all()
	if last := evs[len(evs)-1]; last.Type != pool.ConnectionCheckedOut || last.ConnectionID != r.c.ID() || last.Duration <= 0 {
		t.Errorf("last event %+v, want the waiter's ConnectionCheckedOut of connection %d with its duration", last, r.c.ID())
	}
	mustCheckIn(t, p, r.c)
}

// A check-out that has to wait for a connection, with nobody listening,
// allocates at most once: its waiter is recycled, its wake-up is a signal on
// a channel it keeps.
func TestBlockedCheckOutAllocations(t *testing.T) {
	p := readyPool(t, pool.WithMaxPoolSize(1))
	mustCheckIn(t, p, mustCheckOut(t, p))

	ctx := context.Background()
	want, got := make(chan struct{}), make(chan *pool.Conn)
	go func() {
		for range want {
			c, err := p.CheckOut(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- c
		}
	}()
	defer close(want)
	// One limit for the whole run: a timer per wait would be counted among
	// the allocations.
	limit := time.NewTimer(hangLimit)
	defer limit.Stop()
	deadline := time.Now().Add(hangLimit)
	allocs := testing.AllocsPerRun(200, func() {
		c, err := p.CheckOut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want <- struct{}{}
		for p.Stats().Waiting == 0 { // until the other check-out waits
			if time.Now().After(deadline) {
				t.Fatal("the second check-out never queued")
			}
			runtime.Gosched()
		}
		if err := p.CheckIn(c); err != nil { // straight to the waiter
			t.Fatal(err)
		}
		select {
		case c = <-got:
		case <-limit.C:
			t.Fatalf("the waiter did not get its connection within %v", hangLimit)
		}
		if c == nil {
			t.Fatal("the waiter got no connection")
		}
		if err := p.CheckIn(c); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("a blocked check-out and its hand-over: %v allocations, want at most 1", allocs)
	}
	if s := p.Stats(); s.WaitCount < 200 {
		t.Errorf("WaitCount %d: the check-outs did not wait", s.WaitCount)
	}
}
