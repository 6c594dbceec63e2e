package pool_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

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
	events := len(log.all()) // flushed first: Stats counts the events pending
	before := p.Stats()

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
	events = len(log.all())
	before = p.Stats()
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
	closePool(t, p)
	if !a.Link().(*fakeLink).closed.Load() || b.Link().(*fakeLink).closed.Load() {
		t.Fatal("Close must close the idle connection and leave the checked-out one")
	}
	if _, err := checkOut(t, context.Background(), p); !errors.Is(err, pool.ErrPoolClosed) {
		t.Fatalf("check-out from a closed pool: %v", err)
	}
	mustCheckIn(t, p, b)
	if !b.Link().(*fakeLink).closed.Load() {
		t.Fatal("check-in to a closed pool must close the connection")
	}
	if err := p.Ready(); !errors.Is(err, pool.ErrPoolClosed) {
		t.Fatalf("Ready on a closed pool: %v", err)
	}
	closePool(t, p) // a second Close
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
	closePool(t, p)
	for _, r := range []<-chan result{r1, r2} {
		if got := recv(t, r, "a waiting check-out"); !errors.Is(got.err, pool.ErrPoolClosed) {
			t.Fatalf("waiting check-out: %v, want PoolClosedError", got.err)
		}
	}
	if f.inFlight.Load() != 0 {
		t.Fatal("Close returned with an establishment still running")
	}
	checkCounts(t, p.Stats())
}

// A connection still being established when the pool closes is closed by
// Close with reason poolClosed, its ConnectionClosed event before
// PoolClosed, and whatever its Connector returns then (the error of its
// canceled context, another error, or a link after all) is not a failed
// establishment: no count, no establish-error handler (which would have a
// topology layer mark the server Unknown), no ConnectionReady, no second
// ConnectionClosed; a link it returns is closed. A check-out waiting for it
// fails with a PoolClosedError.
func TestCloseWhileEstablishing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// honour: the Connector returns when its context ends; otherwise it
		// returns only when the test releases it, with a link or fail.
		honour    bool
		fail      error
		minPool   bool // established for minPoolSize rather than a check-out
		wantLinks int  // links the Connector made
	}{
		{name: "for a check-out, context honoured", honour: true},
		{name: "for minPoolSize, context honoured", honour: true, minPool: true},
		{name: "connector returns an error after Close", fail: io.EOF},
		{name: "connector returns a link after Close", wantLinks: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				releaseOnce := sync.OnceFunc(func() { close(release) })
				var links []*fakeLink
				connector := pool.ConnectorFunc(func(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
					if tc.honour {
						<-ctx.Done()
						return nil, ctx.Err()
					}
					<-release
					if tc.fail != nil {
						return nil, tc.fail
					}
					a.HelloDone(pool.ServiceID{})
					l := &fakeLink{id: a.ConnectionID()}
					links = append(links, l)
					return l, nil
				})
				var handled []error
				opts := []pool.Option{pool.WithEstablishErrorHandler(func(err error) { handled = append(handled, err) })}
				if tc.minPool {
					opts = append(opts, pool.WithMinPoolSize(1))
				}
				log := newEvLog()
				p, err := pool.New("127.0.0.1:27017", connector, append(opts, pool.WithEventHandler(log.handle))...)
				must(t, err)
				log.pool = p
				defer releaseOnce() // for a test that fails before it releases the Connector
				t.Cleanup(func() { closePool(t, p) })
				mustReady(t, p)
				var res <-chan result
				if !tc.minPool {
					res = checkOutAsync(context.Background(), p)
				}
				synctest.Wait()
				if s := p.Stats(); s.Pending != 1 {
					t.Fatalf("stats %+v, want one connection being established", s)
				}

				closed := make(chan error, 1)
				go func() { closed <- p.Close() }()
				synctest.Wait()
				if !tc.honour {
					select {
					case <-closed:
						t.Fatal("Close returned while an establishment was still running")
					default:
					}
				}
				releaseOnce() // a Connector that ignored the cancel returns now
				recv(t, closed, "Close")
				synctest.Wait()

				var got []string
				for _, e := range log.all() {
					got = append(got, e.Type.String())
					if e.Type == pool.ConnectionClosed && (e.ConnectionID != 1 || e.Reason != pool.ReasonPoolClosed || e.Err != nil) {
						t.Errorf("%+v, want connection 1 closed with reason poolClosed and no error", e)
					}
					if e.Type == pool.ConnectionCheckOutFailed && e.Reason != pool.ReasonPoolClosed {
						t.Errorf("%+v, want the check-out failed with reason poolClosed", e)
					}
				}
				want := []string{"ConnectionPoolCreated", "ConnectionPoolReady", "ConnectionCheckOutStarted", "ConnectionCreated",
					"ConnectionClosed", "ConnectionPoolClosed", "ConnectionCheckOutFailed"}
				if tc.minPool {
					want = slices.DeleteFunc(want, func(s string) bool { return strings.Contains(s, "CheckOut") })
				}
				if !slices.Equal(got, want) {
					t.Errorf("events %v\nwant %v", got, want)
				}
				if res != nil {
					if r := recv(t, res, "the check-out waiting for the establishment"); !errors.Is(r.err, pool.ErrPoolClosed) {
						t.Errorf("check-out: %v, %v; want a PoolClosedError", r.c, r.err)
					}
				}
				s := p.Stats()
				if s.EstablishFailed != 0 || len(handled) != 0 {
					t.Errorf("%d failed establishments, establish-error handler called with %v; want none", s.EstablishFailed, handled)
				}
				if s.ClosedPoolClosed != 1 || s.Closed != 1 || s.Total != 0 {
					t.Errorf("stats %+v, want the one connection closed as poolClosed", s)
				}
				if len(links) != tc.wantLinks {
					t.Fatalf("%d links made, want %d", len(links), tc.wantLinks)
				}
				for _, l := range links {
					if n := l.closes.Load(); n != 1 {
						t.Errorf("the link returned after Close was closed %d times, want once", n)
					}
				}
			})
		})
	}
}
