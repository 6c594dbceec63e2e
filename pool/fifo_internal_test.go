package pool

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// internalConnector establishes links that do nothing, at once.
type internalConnector struct{}

type internalLink struct{}

func (internalLink) Close() error { return nil }
func (internalLink) Err() error   { return nil }

func (internalConnector) Connect(_ context.Context, a *Attempt) (Link, error) {
	a.HelloDone(ServiceID{})
	return internalLink{}, nil
}

// A check-out that arrived first (its CheckOutStarted event is out) but
// takes the pool's lock after a later one is served first: the wait queue
// keeps the order of arrival, which the events show, not the order in which
// sync.Mutex happens to hand the lock over.
func TestQueueKeepsTheOrderOfArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []EventType
		p, err := New("127.0.0.1:27017", internalConnector{}, WithMaxPoolSize(1), WithEventHandler(func(e Event) {
			mu.Lock()
			events = append(events, e.Type)
			mu.Unlock()
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		p.Ready()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		held, err := p.CheckOut(ctx)
		if err != nil {
			t.Fatal(err)
		}

		// The first check-out finds the lock taken, queues its event, and
		// stops before it waits for the lock.
		atLock, goOn := make(chan struct{}), make(chan struct{})
		p.testHookStarted = func() {
			p.testHookStarted = nil
			close(atLock)
			<-goOn
		}
		p.mu.Lock()
		served := make(chan string, 2)
		checkOut := func(name string) {
			c, err := p.CheckOut(ctx)
			if err != nil {
				t.Error(err)
				served <- "error"
				return
			}
			served <- name
			p.CheckIn(c)
		}
		go checkOut("first")
		<-atLock
		p.mu.Unlock()
		go checkOut("second") // takes the lock first, and waits
		synctest.Wait()
		if w := p.Stats().Waiting; w != 1 {
			t.Fatalf("%d check-outs waiting, want the second", w)
		}
		close(goOn)
		synctest.Wait()
		p.CheckIn(held)
		if a, b := <-served, <-served; a != "first" || b != "second" {
			t.Fatalf("served %s, then %s; want first, then second", a, b)
		}
	})
}
