package pool_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// Many goroutines check out and in while the pool is cleared (with and without
// interrupt), readied and read: every snapshot agrees with itself, no
// connection is handed out twice, and Close leaves no link open.
func TestCountsStayConsistentUnderLoad(t *testing.T) {
	f := &fakeConnector{}
	p, _ := newPool(t, f, pool.WithMaxPoolSize(8), pool.WithMinPoolSize(2),
		pool.WithMaxIdleTime(time.Millisecond), pool.WithMaintenanceInterval(time.Millisecond))
	mustReady(t, p)

	var (
		wg       sync.WaitGroup
		holders  sync.Map // *pool.Conn -> worker, to catch a double hand-out
		failures = make(chan error, 1)
	)
	fail := func(err error) {
		select {
		case failures <- err:
		default:
		}
	}
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 300 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(2000))*time.Microsecond)
				err := p.Do(ctx, func(c *pool.Conn) error {
					if _, dup := holders.LoadOrStore(c, w); dup {
						fail(errors.New("connection handed to two check-outs at once"))
					}
					if rng.IntN(50) == 0 {
						c.Link().(*fakeLink).fail(errors.New("broken"))
					}
					holders.Delete(c)
					return nil
				})
				cancel()
				if err != nil && !errors.Is(err, pool.ErrPoolCleared) && !errors.Is(err, pool.ErrWaitQueueTimeout) {
					fail(err)
				}
			}
		}()
	}
	stop := make(chan struct{})
	halt := sync.OnceFunc(func() { close(stop) })
	defer halt() // also when the test fails before the end
	var side sync.WaitGroup
	side.Add(2)
	go func() { // the clearer
		defer side.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			p.Clear(pool.ClearOptions{InterruptInUse: i%3 == 0})
			p.Ready()
		}
	}()
	go func() { // the scraper
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			checkCounts(t, p.Stats())
		}
	}()
	// Every Do has a deadline of 2ms at most, but a pool that forgot to
	// wake a check-out would keep it waiting for ever: the wait for the
	// workers is bounded too.
	within(t, hangLimit, wg.Wait)
	halt()
	within(t, hangLimit, side.Wait)
	select {
	case err := <-failures:
		t.Fatal(err)
	default:
	}
	s := p.Stats()
	checkCounts(t, s)
	if s.InUse != 0 || s.Waiting != 0 {
		t.Fatalf("after the load: %+v", s)
	}
	closePool(t, p)
	s = p.Stats()
	checkCounts(t, s)
	if s.Total != 0 || f.openLinks() != 0 {
		t.Fatalf("after Close: %+v, %d links open", s, f.openLinks())
	}
	t.Logf("created %d, closed stale %d idle %d error %d, checkouts %d, failed %d, clears %d",
		s.Created, s.ClosedStale, s.ClosedIdle, s.ClosedError, s.CheckedOut, s.CheckOutFailed, s.Clears)
}
