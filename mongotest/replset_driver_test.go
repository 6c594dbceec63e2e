package mongotest_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// topologyWatch follows the driver's view of the topology through its
// event.ServerMonitor.
type topologyWatch struct {
	mu      sync.Mutex
	last    event.TopologyDescription
	changed chan struct{} // closed, and replaced, at each change
	awaited atomic.Int64  // heartbeats that succeeded on awaitable hellos
}

func newTopologyWatch() *topologyWatch { return &topologyWatch{changed: make(chan struct{})} }

func (w *topologyWatch) monitor() *event.ServerMonitor {
	return &event.ServerMonitor{
		TopologyDescriptionChanged: func(e *event.TopologyDescriptionChangedEvent) {
			w.mu.Lock()
			w.last = e.NewDescription
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
		},
		ServerHeartbeatSucceeded: func(e *event.ServerHeartbeatSucceededEvent) {
			if e.Awaited {
				w.awaited.Add(1)
			}
		},
	}
}

// waitFor waits until the driver's topology description satisfies cond,
// and returns it.
func (w *topologyWatch) waitFor(t *testing.T, what string, cond func(event.TopologyDescription) bool) event.TopologyDescription {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		last, changed := w.last, w.changed
		w.mu.Unlock()
		if cond(last) {
			return last
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("the driver never saw %s; its last view: %s", what, describe(last))
		}
	}
}

// describe prints a topology description briefly.
func describe(td event.TopologyDescription) string {
	s := fmt.Sprintf("%s %q:", td.Kind, td.SetName)
	for _, sd := range td.Servers {
		s += fmt.Sprintf(" %s=%s", sd.Addr, sd.Kind)
	}
	return s
}

// hasPrimary returns a condition: the driver sees a replica set named rs0
// whose primary is members[p] and whose other members are secondaries.
func hasPrimary(members []*mongotest.Server, p int) func(event.TopologyDescription) bool {
	return func(td event.TopologyDescription) bool {
		if td.Kind != "ReplicaSetWithPrimary" || td.SetName != "rs0" || len(td.Servers) != len(members) {
			return false
		}
		for _, sd := range td.Servers {
			i := slices.IndexFunc(members, func(s *mongotest.Server) bool { return s.Addr() == sd.Addr.String() })
			switch {
			case i < 0:
				return false
			case i == p && (sd.Kind != "RSPrimary" || sd.SetName != "rs0"):
				return false
			case i != p && sd.Kind != "RSSecondary":
				return false
			}
		}
		return true
	}
}

// connectRS connects the driver to rs with w watching; heartbeats every
// 500ms keep the test short where it waits for a heartbeat. The set is
// closed before the client disconnects: the driver's Disconnect may
// otherwise wait for an awaitable hello of its monitor to return, up to
// the heartbeat interval, when it comes just as a check starts.
func connectRS(t *testing.T, rs *mongotest.ReplicaSet, w *topologyWatch, opts ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	base := options.Client().ApplyURI(rs.URI()).SetServerMonitor(w.monitor()).
		SetHeartbeatInterval(500 * time.Millisecond).SetServerSelectionTimeout(testTimeout)
	client := connectWith(t, append([]*options.ClientOptions{base}, opts...)...)
	t.Cleanup(func() { rs.Close() }) // runs before the Disconnect; startRS's Close checks the error
	return client
}

func TestDriverDiscoversReplicaSet(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	w := newTopologyWatch()
	connectRS(t, rs, w)
	td := w.waitFor(t, "1 primary and 2 secondaries of rs0", hasPrimary(m, 0))
	for _, sd := range td.Servers {
		if !slices.Equal(sd.Hosts, addrs(m, 0, 1, 2)) || sd.TopologyVersionCounter != 0 || sd.TopologyVersionProcessID.IsZero() {
			t.Errorf("server %s: hosts %v, topologyVersion %v/%d", sd.Addr, sd.Hosts, sd.TopologyVersionProcessID, sd.TopologyVersionCounter)
		}
	}
}

func TestDriverReadsFromSecondary(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	w := newTopologyWatch()
	client := connectRS(t, rs, w)
	w.waitFor(t, "the replica set", hasPrimary(m, 0))
	c := ctx(t)
	coll := client.Database("x").Collection("c")
	if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	finds := func() []int64 {
		var n []int64
		for _, srv := range m {
			n = append(n, srv.Stats().Commands["find"])
		}
		return n
	}
	before := finds()
	secondary := client.Database("x", options.Database().SetReadPreference(readpref.Secondary())).Collection("c")
	var doc bson.M
	if err := secondary.FindOne(c, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil {
		t.Fatalf("FindOne on a secondary: %v", err)
	}
	after := finds()
	if after[0] != before[0] || after[1]+after[2] != before[1]+before[2]+1 {
		t.Errorf("finds by member %v, then %v: want one more on a secondary, none on the primary", before, after)
	}
}

// TestDriverFollowsFailover runs retryable writes in a loop while the
// primary steps down, with one write in progress, and another member is
// elected: every write succeeds, once, and the driver sees the new primary.
func TestDriverFollowsFailover(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	w := newTopologyWatch()
	client := connectRS(t, rs, w)
	w.waitFor(t, "the replica set", hasPrimary(m, 0))
	coll := client.Database("x").Collection("c")
	c := ctx(t)

	var written atomic.Int64
	progress := make(chan struct{}, 1)
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := coll.InsertOne(c, bson.D{{Key: "_id", Value: i}}); err != nil {
				errs <- fmt.Errorf("InsertOne %d: %w", i, err)
				return
			}
			written.Add(1)
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()
	waitWritten := func(n int64) {
		t.Helper()
		for written.Load() < n {
			select {
			case <-progress:
			case err := <-errs:
				t.Fatalf("the writes stopped: %v", err)
			case <-c.Done():
				t.Fatalf("only %d writes of %d", written.Load(), n)
			}
		}
	}
	waitWritten(20)
	// The next insert on member 0 blocks, in progress when the primary
	// steps down: it is interrupted, and the driver retries it.
	if err := m[0].SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, BlockTime: time.Hour, Times: 1}); err != nil {
		t.Fatal(err)
	}
	if err := m[0].WaitForFailPoint(c, 1); err != nil {
		t.Fatal(err)
	}
	if err := rs.StepDown(c); err != nil {
		t.Fatal(err)
	}
	if err := rs.Elect(1); err != nil {
		t.Fatal(err)
	}
	waitWritten(written.Load() + 20)
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	n, err := coll.CountDocuments(c, bson.D{})
	if err != nil || n != written.Load() {
		t.Errorf("CountDocuments = %d, %v; want the %d writes", n, err, written.Load())
	}
	if got := m[1].Stats().Commands["insert"]; got < 20 {
		t.Errorf("member 1 ran %d inserts, want the 20 or more after its election", got)
	}
	w.waitFor(t, "member 1 as the primary", hasPrimary(m, 1))
}

// TestDriverStreamsHellos checks that the driver monitors the members with
// the streaming protocol: awaitable hellos with exhaustAllowed, answered
// with moreToCome.
func TestDriverStreamsHellos(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	w := newTopologyWatch()
	connectRS(t, rs, w)
	w.waitFor(t, "the replica set", hasPrimary(m, 0))
	for i, srv := range m {
		waitFor(t, fmt.Sprintf("streamed hellos on member %d", i), func() bool {
			st := srv.Stats()
			return st.AwaitableHellos >= 2 && st.ExhaustReplies >= 2
		})
	}
	if w.awaited.Load() == 0 {
		t.Error("no heartbeat succeeded on an awaited hello")
	}
	// A change reaches a driver through the stream at once: with a
	// heartbeat of an hour, its awaitable hellos return only because the
	// members' topologyVersion moved on.
	slow := newTopologyWatch()
	connectRS(t, rs, slow, options.Client().SetHeartbeatInterval(time.Hour))
	slow.waitFor(t, "the replica set", hasPrimary(m, 0))
	for _, srv := range m {
		waitAwaiting(t, srv, 2) // both clients' monitors wait
	}
	if err := rs.StepDown(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := rs.Elect(2); err != nil {
		t.Fatal(err)
	}
	slow.waitFor(t, "member 2 as the primary", hasPrimary(m, 2))
}

// The test server's replica set is used by the driver as a real one: it
// connects with the URI, follows the failover, and retries the write that
// the step-down refused.
func ExampleStartReplicaSet() {
	rs, err := mongotest.StartReplicaSet("rs0", 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The driver monitors the members with awaitable hellos, which wait
	// up to heartbeatFrequencyMS: a short one keeps Disconnect short.
	client, err := mongo.Connect(options.Client().ApplyURI(rs.URI() + "&heartbeatFrequencyMS=500"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Disconnect(ctx)
	coll := client.Database("test").Collection("people")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "Ada"}}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("primary:", slices.Index(rs.Members(), rs.Primary()))

	if err := rs.StepDown(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("primary after the step-down:", rs.Primary())
	if err := rs.Elect(1); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "Grace"}}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("primary after the election:", slices.Index(rs.Members(), rs.Primary()))
	n, err := client.Database("test", options.Database().SetReadPreference(readpref.Secondary())).
		Collection("people").CountDocuments(ctx, bson.D{})
	fmt.Println("documents on a secondary:", n, err)
	// Output:
	// primary: 0
	// primary after the step-down: <nil>
	// primary after the election: 1
	// documents on a secondary: 2 <nil>
}
