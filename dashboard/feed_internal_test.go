package dashboard

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// TestHandlerNeverWaits checks that an event handler returns at once when the
// dashboard's goroutine is behind: the events it cannot queue are dropped from
// the list and counted as dropped, and every event is counted.
func TestHandlerNeverWaits(t *testing.T) {
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := d.EventHandler("p")
	h(pool.Event{Type: pool.PoolCreated, Address: "a:1"})
	f := d.lookupFeed("p", "a:1")
	if f == nil {
		t.Fatal("no feed after an event")
	}

	// The dashboard's goroutine stalls on the feed's lock with the next
	// event, and the queue fills up behind it.
	f.mu.Lock()
	const n = queueLen + 1000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			h(pool.Event{Type: pool.ConnectionCheckedOut, Address: "a:1", ConnectionID: 1})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		f.mu.Unlock()
		t.Fatal("the event handler waited for the dashboard")
	}
	f.mu.Unlock()

	if got := f.counts[pool.ConnectionCheckedOut].Load(); got != n {
		t.Errorf("%d events counted, want %d", got, n)
	}
	// The queue took queueLen events: one more if the goroutine took one
	// before it stalled, one less if the PoolCreated event was still in it.
	if got := f.dropped.Load(); got < n-queueLen-1 || got > n-queueLen+1 {
		t.Errorf("%d events dropped, want %d give or take one", got, n-queueLen)
	}
}

// flush waits until the handlers of p have had its events so far: the pool
// delivers them on a goroutine of its own, after the change they report.
func flush(t *testing.T, p *pool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("the pool's events were not delivered: %v", err)
	}
}

// TestPrune checks that the events of a pool no longer shown are forgotten
// once quiet for pruneAfter, and that its handler then starts anew.
func TestPrune(t *testing.T) {
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := pool.New("a.example:1", pool.ConnectorFunc(func(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
		return nil, errors.New("no connection in this test")
	}), pool.WithEventHandler(d.EventHandler("p")), pool.WithMaintenanceInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := d.Add("p", p); err != nil {
		t.Fatal(err)
	}
	flush(t, p) // ConnectionPoolCreated: the handler has made the feed
	now := time.Now()
	d.refresh(now.Add(2 * pruneAfter))
	old := d.lookupFeed("p", "a.example:1")
	if old == nil {
		t.Fatal("the feed of a pool shown was pruned")
	}
	d.Remove("p")
	d.refresh(now.Add(pruneAfter / 2))
	if d.lookupFeed("p", "a.example:1") != old {
		t.Fatal("the feed of a pool taken off was pruned before pruneAfter")
	}
	d.refresh(now.Add(2 * pruneAfter))
	if d.lookupFeed("p", "a.example:1") != nil || !old.pruned.Load() {
		t.Fatal("the feed of a pool taken off was kept after pruneAfter")
	}
	if err := p.Ready(); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	if f := d.lookupFeed("p", "a.example:1"); f == nil || f == old || f.counts[pool.PoolReady].Load() != 1 {
		t.Errorf("after pruning, the handler did not start a new feed: %p (old %p)", f, old)
	}
}

// TestRingNewest checks which records a ring gives: those numbered after
// after and up to upTo, newest first, at most limit, and only the last ones
// put once it wrapped around.
func TestRingNewest(t *testing.T) {
	r := newRing(5)
	for seq := uint64(1); seq <= 8; seq++ {
		r.put(record{seq: seq})
	}
	seqs := func(recs []record) []uint64 {
		var s []uint64
		for _, rec := range recs {
			s = append(s, rec.seq)
		}
		return s
	}
	for _, c := range []struct {
		after, upTo uint64
		limit       int
		want        []uint64
	}{
		{0, 8, 10, []uint64{8, 7, 6, 5, 4}},
		{5, 8, 10, []uint64{8, 7, 6}},
		{0, 6, 10, []uint64{6, 5, 4}}, // 7 and 8 were listed after the snapshot began
		{4, 7, 2, []uint64{7, 6}},
		{8, 8, 10, nil},
	} {
		if got := seqs(r.newest(nil, c.after, c.upTo, c.limit)); !slices.Equal(got, c.want) {
			t.Errorf("newest(after %d, upTo %d, limit %d) = %v, want %v", c.after, c.upTo, c.limit, got, c.want)
		}
	}
}
