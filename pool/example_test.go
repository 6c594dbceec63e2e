package pool_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// exampleLink stands for an established connection. A real Connector returns
// a link that wraps the network connection it dialed, handshook and
// authenticated.
type exampleLink struct {
	id int64
}

func (*exampleLink) Close() error { return nil }
func (*exampleLink) Err() error   { return nil }

// exampleConnector "establishes" connections at once. A real one dials, runs
// the hello command, calls HelloDone, then authenticates.
var exampleConnector = pool.ConnectorFunc(func(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
	a.HelloDone(pool.ServiceID{})
	return &exampleLink{id: a.ConnectionID()}, nil
})

// A pool is created paused, made ready, then used through Do, which checks a
// connection out, runs the function and checks the connection back in.
func Example() {
	p, err := pool.New("localhost:27017", exampleConnector, pool.WithMaxPoolSize(10))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	if err := p.Ready(); err != nil {
		fmt.Println(err)
		return
	}

	// Give every use of the pool a deadline: a check-out that cannot be
	// served in time fails rather than wait for ever.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		err = p.Do(ctx, func(c *pool.Conn) error {
			link := c.Link().(*exampleLink) // the Connector's own type
			fmt.Println("running on connection", c.ID(), "link", link.id)
			return nil
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// running on connection 1 link 1
	// running on connection 1 link 1
}

// Stats is a consistent snapshot of the pool.
func ExamplePool_Stats() {
	p, _ := pool.New("localhost:27017", exampleConnector)
	defer p.Close()
	p.Ready()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, _ := p.CheckOut(ctx)
	c2, _ := p.CheckOut(ctx)
	p.CheckIn(c1)

	s := p.Stats()
	fmt.Printf("%s: %d connections, %d available, %d in use\n", s.State, s.Total, s.Available, s.InUse)
	fmt.Printf("created %d, checked out %d, checked in %d\n", s.Created, s.CheckedOut, s.CheckedIn)

	p.CheckIn(c2)
	p.Close()
	s = p.Stats()
	fmt.Printf("%s: %d connections, closed %d (%d because the pool closed)\n", s.State, s.Total, s.Closed, s.ClosedPoolClosed)
	// Output:
	// ready: 2 connections, 1 available, 1 in use
	// created 2, checked out 2, checked in 1
	// closed: 0 connections, closed 2 (2 because the pool closed)
}

// An event handler sees everything the pool does. Here: the pool's life, with
// one check-out that has to establish its connection.
func ExampleWithEventHandler() {
	var (
		mu     sync.Mutex
		events []pool.Event
	)
	// The pool calls handlers on a goroutine of its own: guard what they share.
	record := func(e pool.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}

	p, _ := pool.New("localhost:27017", exampleConnector, pool.WithEventHandler(record))
	p.Ready()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.Do(ctx, func(*pool.Conn) error { return nil })
	p.Shutdown(ctx) // Close would not wait for the handler to have every event

	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		if e.Reason != "" {
			fmt.Println(e.Type, e.Reason)
		} else {
			fmt.Println(e.Type)
		}
	}
	// Output:
	// ConnectionPoolCreated
	// ConnectionPoolReady
	// ConnectionCheckOutStarted
	// ConnectionCreated
	// ConnectionReady
	// ConnectionCheckedOut
	// ConnectionCheckedIn
	// ConnectionClosed poolClosed
	// ConnectionPoolClosed
}

// Clear makes the pool's connections stale and pauses it: check-outs fail with
// a retryable error until Ready, and the stale connections are not reused.
func ExamplePool_Clear() {
	p, _ := pool.New("localhost:27017", exampleConnector)
	defer p.Close()
	p.Ready()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.Do(ctx, func(*pool.Conn) error { return nil }) // connection 1, now idle

	p.Clear(pool.ClearOptions{Cause: errors.New("server went away")})

	err := p.Do(ctx, func(*pool.Conn) error { return nil })
	fmt.Println(errors.Is(err, pool.ErrPoolCleared), pool.HasErrorLabel(err, pool.LabelRetryable))
	fmt.Println(err)

	p.Ready()
	p.Do(ctx, func(c *pool.Conn) error {
		fmt.Println("after Ready: connection", c.ID(), "of generation", c.Generation())
		return nil
	})
	fmt.Println("closed as stale:", p.Stats().ClosedStale)
	// Output:
	// true true
	// Connection pool for localhost:27017 was cleared because another operation failed with: server went away
	// after Ready: connection 2 of generation 1
	// closed as stale: 1
}

// The buckets of the pool's latency histograms double from 1µs up to about a
// minute; the last one takes everything longer.
func ExampleHistogramBound() {
	for _, i := range []int{0, 1, 2, 10, 20, pool.HistogramBuckets - 2} {
		fmt.Printf("bucket %2d: up to %v\n", i, pool.HistogramBound(i))
	}
	fmt.Println("bucket", pool.HistogramBuckets-1, "unbounded:", pool.HistogramBound(pool.HistogramBuckets-1) == math.MaxInt64)
	// Output:
	// bucket  0: up to 1µs
	// bucket  1: up to 2µs
	// bucket  2: up to 4µs
	// bucket 10: up to 1.024ms
	// bucket 20: up to 1.048576s
	// bucket 26: up to 1m7.108864s
	// bucket 27 unbounded: true
}

// Quantiles are interpolated within the bucket they fall in.
func ExampleHistogram_Quantile() {
	// 90 check-outs served at once, 10 that waited between 2.048ms and
	// 4.096ms.
	var h pool.Histogram
	h.Counts[0], h.Counts[12] = 90, 10
	h.Count, h.Sum = 100, 30*time.Millisecond
	fmt.Println("p50:", h.Quantile(0.5))
	fmt.Println("p95:", h.Quantile(0.95))
	fmt.Println("mean:", h.Mean())
	// Output:
	// p50: 556ns
	// p95: 3.072ms
	// mean: 300µs
}

// Stats holds the distributions of check-out waits, establishments and uses,
// taken in the same snapshot as the counts.
func ExamplePool_Stats_distributions() {
	// The use of every check-out is timed: the default samples one in
	// DefaultUseSampling.
	p, _ := pool.New("localhost:27017", exampleConnector, pool.WithUseSampling(1))
	defer p.Close()
	p.Ready()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, _ := p.CheckOut(ctx)
	c2, _ := p.CheckOut(ctx)
	p.CheckIn(c1)

	s := p.Stats()
	fmt.Printf("check-outs: %d, their waits: %d\n", s.CheckedOut, s.CheckOutWait.Count)
	fmt.Printf("connections created: %d, establishments timed: %d\n", s.Created, s.Establish.Count)
	fmt.Printf("check-ins: %d, uses timed: %d\n", s.CheckedIn, s.Use.Count)
	fmt.Println("p99 of the waits under a minute:", s.CheckOutWait.Quantile(0.99) < time.Minute)
	p.CheckIn(c2)
	// Output:
	// check-outs: 2, their waits: 2
	// connections created: 2, establishments timed: 2
	// check-ins: 1, uses timed: 1
	// p99 of the waits under a minute: true
}

// A check-out that times out says which limit held it up and, with the
// flight recorder on, what the pool did before.
func ExampleWithFlightRecorder() {
	p, _ := pool.New("localhost:27017", exampleConnector, pool.WithMaxPoolSize(1), pool.WithFlightRecorder(5))
	defer p.Close()
	p.Ready()

	held, _ := p.CheckOut(context.Background())
	defer p.CheckIn(held)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := p.CheckOut(ctx)

	var e *pool.WaitQueueTimeoutError
	if errors.As(err, &e) {
		fmt.Printf("held up by %v: %d in use of %d\n", e.Bottleneck, e.InUse, e.MaxPoolSize)
		for _, r := range e.RecentEvents {
			fmt.Println(r.Type, r.ConnectionID)
		}
	}
	// Output:
	// held up by maxPoolSize: 1 in use of 1
	// ConnectionCheckOutStarted 0
	// ConnectionCreated 1
	// ConnectionReady 1
	// ConnectionCheckedOut 1
	// ConnectionCheckOutStarted 0
}

// The leak detector reports a connection checked out for too long, with the
// place it was checked out from.
func ExampleWithLeakDetector() {
	reports := make(chan pool.Event, 1)
	p, _ := pool.New("localhost:27017", exampleConnector,
		pool.WithLeakDetector(10*time.Millisecond, 4),
		pool.WithEventHandler(func(e pool.Event) {
			if e.Type == pool.ConnectionLeakSuspected {
				reports <- e
			}
		}))
	defer p.Close()
	p.Ready()

	c, _ := p.CheckOut(context.Background()) // and forgotten
	defer p.CheckIn(c)
	select {
	case e := <-reports:
		fmt.Printf("connection %d checked out for %v or more\n", e.ConnectionID, 10*time.Millisecond)
		fmt.Println("by", strings.TrimPrefix(e.CallSite.Frames()[0].Function, "github.com/mongopool/mongopool/"))
	case <-time.After(10 * time.Second):
		fmt.Println("no report")
	}
	// Output:
	// connection 1 checked out for 10ms or more
	// by pool_test.ExampleWithLeakDetector
}
