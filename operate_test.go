package mongopool_test

import (
	"context"
	"testing"

	"github.com/mongopool/mongopool/pool"
)

// Warm opens real connections to the server; Shutdown waits for the one in
// use, then every connection to the server is closed.
func TestPoolWarmAndShutdown(t *testing.T) {
	s := server(t)
	closed := make(chan struct{})
	p := open(t, s.URI()+"?maxPoolSize=5&maxConnecting=2", pool.WithEventHandler(func(e pool.Event) {
		if e.Type == pool.PoolClosed {
			close(closed)
		}
	}))
	var last pool.WarmProgress
	if err := p.Warm(ctx(t), 4, func(w pool.WarmProgress) { last = w }); err != nil {
		t.Fatal(err)
	}
	if last.Established != 4 || p.Stats().Total != 4 {
		t.Fatalf("after Warm: progress %+v, stats %+v; want 4 connections", last, p.Stats())
	}
	c, err := p.Pool().CheckOut(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(context.Background()) }()
	// Shutdown waits for c: the pool is closed for check-outs meanwhile.
	select {
	case <-closed:
	case <-ctx(t).Done():
		t.Fatal("no PoolClosed event")
	}
	if _, err := p.Pool().CheckOut(ctx(t)); err == nil {
		t.Fatal("a check-out succeeded during Shutdown")
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned with a connection checked out: %v", err)
	default:
	}
	if err := p.Pool().CheckIn(c); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx(t).Done():
		t.Fatal("Shutdown did not return after the last check-in")
	}
	if st := p.Stats(); st.Total != 0 || st.State != "closed" {
		t.Errorf("after Shutdown: %+v", st)
	}
}
