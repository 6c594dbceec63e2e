package pool_test

import (
	"context"
	"errors"
	"fmt"
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
	// The pool calls handlers on its own goroutines too: guard what they share.
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
	p.Close()

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
