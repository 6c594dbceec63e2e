package pool_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mongopool/mongopool/pool"
)

var svcA, svcB = pool.ServiceID{0xa}, pool.ServiceID{0xb}

// oddEven puts odd connection ids on service A and even ones on B.
func oddEven(id int64) pool.ServiceID {
	if id%2 == 1 {
		return svcA
	}
	return svcB
}

func TestLoadBalancedGenerations(t *testing.T) {
	f := &fakeConnector{ServiceID: oddEven}
	p, log := newPool(t, f, pool.WithLoadBalanced(true))
	mustReady(t, p)
	conns := make([]*pool.Conn, 4)
	for i := range conns {
		conns[i] = mustCheckOut(t, p)
		if want := oddEven(conns[i].ID()); conns[i].ServiceID() != want || conns[i].Generation() != 0 {
			t.Fatalf("connection %d: service %v gen %d, want %v gen 0", conns[i].ID(), conns[i].ServiceID(), conns[i].Generation(), want)
		}
	}
	if s := p.Stats(); s.Services != 2 {
		t.Fatalf("%d services, want 2", s.Services)
	}

	// A check-out waiting when service A is cleared stays in the queue.
	f.set(func(f *fakeConnector) { f.Block = make(chan struct{}) })
	if err := p.Clear(pool.ClearOptions{ServiceID: svcA, Cause: errors.New("A failed")}); err != nil {
		t.Fatal(err)
	}
	ev := log.all()
	if last := ev[len(ev)-1]; last.Type != pool.PoolCleared || last.ServiceID != svcA {
		t.Fatalf("last event %+v, want PoolCleared for service A", last)
	}
	if s := p.Stats(); s.State != "ready" {
		t.Fatalf("load-balanced clear paused the pool: %+v", s)
	}

	// A's connections are stale and closed at check-in; B's go back.
	for _, c := range conns {
		mustCheckIn(t, p, c)
	}
	s := p.Stats()
	if s.ClosedStale != 2 || s.Available != 2 || s.Services != 1 {
		t.Fatalf("stats %+v, want A's 2 connections closed, B's 2 idle, A's entry gone", s)
	}
	// With A's entry removed, a new connection to A starts again at
	// generation 0, as the specification's map does.
	f.set(func(f *fakeConnector) { f.Block = nil; f.ServiceID = func(int64) pool.ServiceID { return svcA } })
	var fresh []*pool.Conn
	for range 3 {
		fresh = append(fresh, mustCheckOut(t, p))
	}
	c := fresh[2]
	if c.ServiceID() != svcA || c.Generation() != 0 {
		t.Fatalf("new connection to A: service %v gen %d", c.ServiceID(), c.Generation())
	}
	for _, c := range fresh {
		mustCheckIn(t, p, c)
	}
	checkCounts(t, p.Stats())
}

func TestLoadBalancedClearKeepsWaiters(t *testing.T) {
	f := &fakeConnector{ServiceID: oddEven}
	p, log := newPool(t, f, pool.WithLoadBalanced(true), pool.WithMaxPoolSize(1))
	mustReady(t, p)
	c := mustCheckOut(t, p) // service A
	res := checkOutAsync(context.Background(), p)
	log.waitFor(t, pool.ConnectionCheckOutStarted, 2)
	if err := p.Clear(pool.ClearOptions{ServiceID: svcA}); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Waiting != 1 {
		t.Fatalf("clear evicted the waiter: %+v", s)
	}
	mustCheckIn(t, p, c) // stale: closed, which makes room for the waiter
	r := recv(t, res, "the waiting check-out")
	if r.err != nil || r.c.ID() != 2 || r.c.ServiceID() != svcB {
		t.Fatalf("waiter got %v, %v; want the new connection 2 to B", r.c, r.err)
	}
	mustCheckIn(t, p, r.c)
}

func TestLoadBalancedNeedsServiceID(t *testing.T) {
	p, _ := newPool(t, &fakeConnector{}, pool.WithLoadBalanced(true))
	mustReady(t, p)
	_, err := checkOut(t, context.Background(), p)
	var ce *pool.ConnectionError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "serviceId") {
		t.Fatalf("check-out without a serviceId: %v", err)
	}
	if err := p.Clear(pool.ClearOptions{}); err == nil || !strings.Contains(err.Error(), "ServiceID") {
		t.Fatalf("Clear without a ServiceID in load-balanced mode: %v", err)
	}
	q, _ := newPool(t, &fakeConnector{})
	if err := q.Clear(pool.ClearOptions{ServiceID: svcA}); err == nil {
		t.Fatal("Clear with a ServiceID on a non-load-balanced pool succeeded")
	}
}
