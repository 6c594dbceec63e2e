package mongopool_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/topology"
)

// These tests hold the engine to its promise that no user callback can stall
// it: an event handler runs on a goroutine of its own, so that one that is
// slow, stuck or calls the client back delays only the events after it,
// never the topology, a monitor or an operation.

// within runs fn on a goroutine and fails the test if fn has not returned
// after hangLimit: what it waits for must not wait for a stuck handler.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(hangLimit):
		t.Fatalf("%s did not return within %v: it waits for an event handler", what, hangLimit)
	}
}

// stuckHandler is a topology event handler that blocks on every event once
// armed, until the test ends.
type stuckHandler struct {
	armed   chan struct{} // closed to arm it
	stuck   chan struct{} // closed once it blocks
	release chan struct{} // closed at the end of the test
	once    sync.Once
}

func newStuckHandler(t *testing.T, armed bool) *stuckHandler {
	h := &stuckHandler{armed: make(chan struct{}), stuck: make(chan struct{}), release: make(chan struct{})}
	if armed {
		close(h.armed)
	}
	t.Cleanup(func() { close(h.release) })
	return h
}

func (h *stuckHandler) handle(topology.Event) {
	select {
	case <-h.armed:
	default:
		return
	}
	h.once.Do(func() { close(h.stuck) })
	<-h.release
}

// NewClient returns while the event handler is stuck on the first event:
// the opening's events are not delivered on NewClient's goroutine.
func TestNewClientDoesNotWaitForTheHandler(t *testing.T) {
	srv := startServer(t)
	h := newStuckHandler(t, true)
	within(t, "NewClient", func() {
		c, err := mongopool.NewClient(srv.URI(), mongopool.WithTopologyEventHandler(h.handle))
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { c.Close() })
		// And the client works all the same.
		if _, err := c.RunCommand(ctx(t), "admin", ping); err != nil {
			t.Error(err)
		}
	})
}

// A read that meets a network error while the event handler is stuck returns
// (its retry succeeds on the server the monitor finds again): the error's
// handling does not wait for the handler to hear of the changes before it.
func TestErrorPathDoesNotWaitForTheHandler(t *testing.T) {
	rs := startReplicaSet(t, 3)
	h := newStuckHandler(t, false)
	c := newClient(t, rs.URI()+"&heartbeatFrequencyMS=500", mongopool.WithTopologyEventHandler(h.handle))
	if _, err := c.Write(ctx(t), "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}); err != nil {
		t.Fatal(err)
	}
	close(h.armed)
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, CloseConnection: true, Times: 1}); err != nil {
		t.Fatal(err)
	}
	within(t, "a read that met a network error", func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.Read(rctx, "db", bson.D{{Key: "find", Value: "c"}}); err != nil {
			t.Errorf("the read: %v, want its retry to succeed", err)
		}
	})
}

// A handler that, hearing that the primary is lost, writes through the
// client (the documentation says handlers may call the client) gets its
// write acknowledged once a new primary is elected: the topology goes on
// updating while the handler waits.
func TestHandlerMayWriteWhenThePrimaryIsLost(t *testing.T) {
	rs := startReplicaSet(t, 3)
	wrote := make(chan error, 1)
	var c *mongopool.Client
	var once sync.Once
	ready := make(chan struct{})
	handler := func(e topology.Event) {
		tdc, ok := e.(*topology.TopologyDescriptionChanged)
		if !ok || tdc.Previous.Type != topology.ReplicaSetWithPrimary || tdc.New.Type != topology.ReplicaSetNoPrimary {
			return
		}
		once.Do(func() {
			<-ready
			wctx, cancel := context.WithTimeout(context.Background(), hangLimit)
			defer cancel()
			_, err := c.Write(wctx, "db", bson.D{{Key: "insert", Value: "lost"}, {Key: "documents", Value: bson.A{bson.D{}}}})
			wrote <- err
		})
	}
	c = newClient(t, rs.URI()+"&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=20000", mongopool.WithTopologyEventHandler(handler))
	close(ready)
	waitTopology(t, c, "a primary", func(d topology.Description) bool { return d.Type == topology.ReplicaSetWithPrimary })
	old := rs.Primary().Addr()
	if err := rs.StepDown(ctx(t)); err != nil {
		t.Fatal(err)
	}
	waitTopology(t, c, "no primary", func(d topology.Description) bool { return d.Type == topology.ReplicaSetNoPrimary })
	next := 0
	if rs.Members()[0].Addr() == old {
		next = 1
	}
	if err := rs.Elect(next); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if err != nil {
			var se *topology.SelectionError
			if errors.As(err, &se) {
				t.Fatalf("the handler's write found no primary: %v", err)
			}
			t.Fatalf("the handler's write: %v", err)
		}
	case <-time.After(hangLimit):
		t.Fatal("the handler's write did not end")
	}
}

// The topology's work per update is proportional to what the update changes,
// not to the number of servers: a client of n seeds that nobody answers
// allocates, from its creation until it has heard every seed's failed check
// and closed, an amount that grows like n. (When each update copied the whole
// description, this grew like n², and 10,000 seeds took gigabytes.) The
// figures are totals of allocated bytes, the same at every run give or take
// the runtime's own, and compared as a ratio between two sizes, not to a
// constant.
func TestTopologyAllocationGrowsLinearlyWithTheSeeds(t *testing.T) {
	const small, large = 250, 1000
	perSeed := func(n int) float64 {
		var heard sync.Map // address -> struct{}, of the seeds whose failed check was applied
		var count atomic.Int64
		all := make(chan struct{})
		handler := func(e topology.Event) {
			if ch, ok := e.(*topology.ServerDescriptionChanged); ok && ch.New.Error != nil {
				if _, dup := heard.LoadOrStore(ch.Address, struct{}{}); !dup && count.Add(1) == int64(n) {
					close(all)
				}
			}
		}
		var uri strings.Builder
		uri.WriteString("mongodb://")
		for i := range n {
			if i > 0 {
				uri.WriteByte(',')
			}
			fmt.Fprintf(&uri, "h%d.invalid:27017", i)
		}
		uri.WriteString("/?serverSelectionTimeoutMS=1000")
		refuse := func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("connection refused (by the test's dialer)")
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c, err := mongopool.NewClient(uri.String(), mongopool.WithDialer(refuse), mongopool.WithTopologyEventHandler(handler))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-all:
		case <-time.After(hangLimit):
			c.Close()
			t.Fatalf("%d seeds: the failed checks of %d were heard after %v", n, count.Load(), hangLimit)
		}
		c.Close()
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
	}
	perSeed(small) // the first client's one-time costs (caches, pools) out of the way
	s, l := perSeed(small), perSeed(large)
	t.Logf("bytes allocated per seed: %.0f with %d seeds, %.0f with %d", s, small, l, large)
	if l > 2*s {
		t.Fatalf("a client of %d seeds allocated %.0f bytes per seed, one of %d %.0f: the topology's work per update grows with the number of servers",
			large, l, small, s)
	}
}
