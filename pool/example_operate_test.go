package pool_test

import (
	"context"
	"fmt"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// Warm establishes connections before the traffic comes, so that the first
// requests do not wait for them.
func ExamplePool_Warm() {
	p, _ := pool.New("localhost:27017", exampleConnector, pool.WithMaxConnecting(4))
	defer p.Close()
	p.Ready()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.Warm(ctx, 8, func(w pool.WarmProgress) {
		if w.Established == w.Target {
			fmt.Printf("%d of %d connections established\n", w.Established, w.Target)
		}
	})
	fmt.Println("warm:", err)
	// Output:
	// 8 of 8 connections established
	// warm: <nil>
}

// Reconfigure changes the limits of a pool in service; its PoolReconfigured
// event tells every limit as it is now.
func ExamplePool_Reconfigure() {
	// The events come on a goroutine of the pool's: this handler passes
	// them on.
	reconfigured := make(chan pool.Event, 1)
	p, _ := pool.New("localhost:27017", exampleConnector, pool.WithMaxPoolSize(10),
		pool.WithEventHandler(func(e pool.Event) {
			if e.Type == pool.PoolReconfigured {
				reconfigured <- e
			}
		}))
	defer p.Close()
	p.Ready()

	if err := p.Reconfigure(pool.WithMaxPoolSize(50), pool.WithMinPoolSize(5)); err != nil {
		fmt.Println(err)
	}
	e := <-reconfigured
	fmt.Println(e.Type, "maxPoolSize", e.Options["maxPoolSize"], "minPoolSize", e.Options["minPoolSize"])
	err := p.Reconfigure(pool.WithTimeout(time.Second)) // not a limit
	fmt.Println(err)
	s := p.Stats()
	fmt.Println("maxPoolSize", s.MaxPoolSize, "minPoolSize", s.MinPoolSize)
	// Output:
	// ConnectionPoolReconfigured maxPoolSize 50 minPoolSize 5
	// mongopool: pool option timeoutMS: cannot be changed on a running pool: Reconfigure changes maxPoolSize, minPoolSize, maxConnecting, maxIdleTimeMS and waitQueueTimeoutMS
	// maxPoolSize 50 minPoolSize 5
}

// Shutdown lets the requests in flight finish before the connections close.
func ExamplePool_Shutdown() {
	p, _ := pool.New("localhost:27017", exampleConnector)
	p.Ready()

	c, _ := p.CheckOut(context.Background())
	go func() {
		time.Sleep(10 * time.Millisecond) // a request in flight
		p.CheckIn(c)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println("shutdown:", p.Shutdown(ctx))
	_, err := p.CheckOut(ctx)
	fmt.Println(err)
	// Output:
	// shutdown: <nil>
	// Attempted to check out a connection from closed connection pool (address localhost:27017)
}
