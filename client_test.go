package mongopool_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// startServer starts a test server closed at the end of the test.
func startServer(t *testing.T, opts ...mongotest.Option) *mongotest.Server {
	t.Helper()
	srv, err := mongotest.Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// newClient makes a client closed at the end of the test.
func newClient(t *testing.T, uri string, opts ...mongopool.ClientOption) *mongopool.Client {
	t.Helper()
	c, err := mongopool.NewClient(uri, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// topologyEvents records a client's SDAM events.
type topologyEvents struct {
	mu     sync.Mutex
	events []topology.Event
}

func (r *topologyEvents) handler(e topology.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *topologyEvents) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		switch e := e.(type) {
		case *topology.ServerHeartbeatStarted, *topology.ServerHeartbeatSucceeded, *topology.ServerHeartbeatFailed:
			continue
		case *topology.ServerDescriptionChanged:
			out = append(out, "ServerDescriptionChanged "+e.New.Type.String())
		case *topology.TopologyDescriptionChanged:
			out = append(out, "TopologyDescriptionChanged "+e.New.Type.String())
		default:
			out = append(out, typeString(e))
		}
	}
	return out
}

func typeString(v any) string {
	switch v.(type) {
	case *topology.TopologyOpening:
		return "TopologyOpening"
	case *topology.TopologyClosed:
		return "TopologyClosed"
	case *topology.ServerOpening:
		return "ServerOpening"
	case *topology.ServerClosed:
		return "ServerClosed"
	}
	return "?"
}

// A client of a standalone server discovers it (TopologyType Single), runs
// commands, reads and writes on it, and closes every goroutine it started.
func TestClientStandalone(t *testing.T) {
	srv := startServer(t)
	var ev topologyEvents
	c := newClient(t, srv.URI(), mongopool.WithTopologyEventHandler(ev.handler))
	ctx := ctx(t)
	if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}); err != nil {
		t.Fatalf("a write on a standalone (no retryable write there): %v", err)
	}
	reply, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 {
		t.Fatalf("count: %v", reply)
	}
	if d := c.Topology().Description(); d.Type != topology.Single {
		t.Errorf("topology type %v, want Single", d.Type)
	}
	c.Close()
	flush(t, c) // the events of the closing come after Close returns
	got := strings.Join(ev.names(), "\n")
	want := strings.Join([]string{
		"TopologyOpening",
		"TopologyDescriptionChanged Unknown",
		"ServerOpening",
		"ServerDescriptionChanged Standalone",
		"TopologyDescriptionChanged Single",
		"ServerClosed",
		"TopologyDescriptionChanged Unknown",
		"TopologyClosed",
	}, "\n")
	if got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
}

// Selection fails after serverSelectionTimeoutMS with an error that names
// the server and why it is Unknown.
func TestClientSelectionErrorNamesTheServers(t *testing.T) {
	uri := refusedURI(t)
	c := newClient(t, uri+"?serverSelectionTimeoutMS=300")
	_, err := c.Read(ctx(t), "db", bson.D{{Key: "ping", Value: 1}})
	var se *topology.SelectionError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *topology.SelectionError", err)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(uri, "mongodb://"), "/")
	for _, want := range []string{"serverSelectionTimeoutMS (300ms)", addr + " Unknown", "refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// A retryable write that meets a network error is sent again, with the same
// txnNumber, and the server runs it once.
func TestClientRetryableWriteAfterNetworkError(t *testing.T) {
	srv := startServer(t, mongotest.WithReplicaSet("rs"))
	c := newClient(t, srv.URI()+"?replicaSet=rs&heartbeatFrequencyMS=500")
	ctx := ctx(t)
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1, CloseConnection: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}); err != nil {
		t.Fatalf("the retried write failed: %v", err)
	}
	if n := srv.Stats().Commands["insert"]; n != 2 {
		t.Errorf("inserts seen by the server: %d, want 2 (the write and its retry)", n)
	}
	reply, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 {
		t.Fatalf("documents: %d, want 1", n)
	}
	// With retryWrites=false it is not retried.
	c2 := newClient(t, srv.URI()+"?replicaSet=rs&retryWrites=false")
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1, CloseConnection: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}}); err == nil {
		t.Error("with retryWrites=false the write was retried")
	}
}

// A retryable read that meets a state change error is retried once; a
// command run with RunCommand is not.
func TestClientRetryableRead(t *testing.T) {
	srv := startServer(t, mongotest.WithReplicaSet("rs"))
	c := newClient(t, srv.URI()+"?replicaSet=rs&heartbeatFrequencyMS=500")
	ctx := ctx(t)
	if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"count"}, Times: 1, ErrorCode: 11602}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}); err != nil {
		t.Fatalf("the retried read failed: %v", err)
	}
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"count"}, Times: 1, ErrorCode: 11602}); err != nil {
		t.Fatal(err)
	}
	_, err := c.RunCommand(ctx, "db", bson.D{{Key: "count", Value: "c"}})
	var ce *wire.CommandError
	if !errors.As(err, &ce) || ce.Code != 11602 {
		t.Errorf("RunCommand: %v, want the error itself", err)
	}
}

// Overload errors (SystemOverloadedError and RetryableError) are retried up
// to maxAdaptiveRetries times, even for RunCommand; not at all with 0.
func TestClientOverloadRetries(t *testing.T) {
	srv := startServer(t)
	overload := mongotest.FailPoint{Commands: []string{"ping"}, Times: 2, ErrorCode: 462,
		ErrorLabels: []string{pool.LabelSystemOverloaded, pool.LabelRetryable}}
	c := newClient(t, srv.URI())
	ctx := ctx(t)
	if err := srv.SetFailPoint(overload); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatalf("two overload errors, two retries: %v", err)
	}
	overload.Times = 3
	if err := srv.SetFailPoint(overload); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); !pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
		t.Fatalf("three overload errors: %v, want the third", err)
	}
	srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"ping"}, Times: 0, ErrorCode: 0})
	c0 := newClient(t, srv.URI(), mongopool.WithMaxAdaptiveRetries(0))
	overload.Times = 1
	if err := srv.SetFailPoint(overload); err != nil {
		t.Fatal(err)
	}
	if _, err := c0.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err == nil {
		t.Fatal("with maxAdaptiveRetries 0 the overload error was retried")
	}
}

// timeoutMS bounds the whole operation, and the server is told the time
// left (maxTimeMS): a blocked command fails with a timeout in time.
func TestClientTimeoutMS(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.URI()+"?timeoutMS=200")
	ctx := ctx(t)
	if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"count"}, Times: 1, BlockTime: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.RunCommand(ctx, "db", bson.D{{Key: "count", Value: "c"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		var ne interface{ Timeout() bool }
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("err = %v, want a timeout", err)
		}
	}
	if time.Since(start) > 4*time.Second {
		t.Fatalf("timeoutMS=200 did not bound the command") // the fail point blocks 5s
	}
}

// A write cannot be sent elsewhere than the primary.
func TestClientWriteRefusesReadPreference(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.URI())
	_, err := c.Write(ctx(t), "db", bson.D{{Key: "insert", Value: "c"}}, mongopool.WithReadPreference(topology.ReadPref{Mode: topology.ModeSecondary}))
	if err == nil || !strings.Contains(err.Error(), "primary") {
		t.Fatalf("err = %v", err)
	}
}

// A write whose reply has a writeConcernError labelled RetryableWriteError is
// retried with the same lsid and txnNumber: the server does not run it twice
// (a second insert of the same _id would fail with a duplicate key error).
func TestClientRetryableWriteAfterWriteConcernError(t *testing.T) {
	srv := startServer(t, mongotest.WithReplicaSet("rs"))
	c := newClient(t, srv.URI()+"?replicaSet=rs&heartbeatFrequencyMS=500")
	ctx := ctx(t)
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1,
		WriteConcernError: bson.D{{Key: "code", Value: 91}, {Key: "errmsg", Value: "shutting down"}}}); err != nil {
		t.Fatal(err)
	}
	insert := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}
	if _, err := c.Write(ctx, "db", insert); err != nil {
		t.Fatalf("the retried write failed: %v", err)
	}
	if n := srv.Stats().Commands["insert"]; n != 2 {
		t.Errorf("inserts seen by the server: %d, want 2 (the write and its retry)", n)
	}
	// Without a retry, the error comes back as a *WriteConcernError.
	c2 := newClient(t, srv.URI()+"?replicaSet=rs&retryWrites=false")
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1,
		WriteConcernError: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "timed out"}}}); err != nil {
		t.Fatal(err)
	}
	insert[1].Value = bson.A{bson.D{{Key: "_id", Value: 2}}}
	_, err := c2.Write(ctx, "db", insert)
	var wce *mongopool.WriteConcernError
	if !errors.As(err, &wce) || wce.Code != 64 {
		t.Fatalf("err = %v, want a *WriteConcernError of code 64", err)
	}
}

// A network error on a read marks the server Unknown and clears its pool;
// the retry waits for the monitor to find the server again, and succeeds.
func TestClientNetworkErrorClearsAndRetryRecovers(t *testing.T) {
	srv := startServer(t, mongotest.WithReplicaSet("rs"))
	log := newE2EEventLog()
	var ev topologyEvents
	c := newClient(t, srv.URI()+"?replicaSet=rs",
		mongopool.WithPoolOptions(pool.WithEventHandler(log.handler)),
		mongopool.WithTopologyEventHandler(ev.handler))
	ctx := ctx(t)
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"count"}, Times: 1, CloseConnection: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}); err != nil {
		t.Fatalf("the retried read failed: %v", err)
	}
	flush(t, c)
	if n := len(log.filter(func(e pool.Event) bool { return e.Type == pool.PoolCleared })); n != 1 {
		t.Errorf("%d PoolCleared events, want 1", n)
	}
	names := strings.Join(ev.names(), "\n")
	if !strings.Contains(names, "ServerDescriptionChanged Unknown\nTopologyDescriptionChanged ReplicaSetNoPrimary") {
		t.Errorf("the server was not marked Unknown:\n%s", names)
	}
}

// Each command sent has a CommandStarted event and a CommandSucceeded or
// CommandFailed one; a retry's have the same operation id; the commands
// that carry secrets are published without their body and reply.
func TestClientCommandEvents(t *testing.T) {
	srv := startServer(t, mongotest.WithReplicaSet("rs"))
	var mu sync.Mutex
	var events []mongopool.CommandEvent
	c := newClient(t, srv.URI()+"?replicaSet=rs&heartbeatFrequencyMS=500", mongopool.WithCommandEventHandler(func(e mongopool.CommandEvent) {
		e.Command, e.Reply = slices.Clone(e.Command), slices.Clone(e.Reply)
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}))
	take := func() []mongopool.CommandEvent {
		flush(t, c)
		mu.Lock()
		defer mu.Unlock()
		out := events
		events = nil
		return out
	}
	ctx := ctx(t)
	if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	ev := take()
	if len(ev) != 2 || ev[0].Type != mongopool.CommandStarted || ev[1].Type != mongopool.CommandSucceeded ||
		ev[0].Name != "ping" || ev[0].Database != "admin" || ev[0].Command == nil || ev[1].Reply == nil ||
		ev[1].Duration <= 0 || ev[0].Address != srv.Addr() || ev[0].ConnectionID == 0 {
		t.Fatalf("ping's events: %+v", ev)
	}
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"count"}, Times: 1, ErrorCode: 11602}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	ev = take()
	var types []string
	for _, e := range ev {
		types = append(types, e.Type.String())
	}
	if strings.Join(types, " ") != "CommandStarted CommandFailed CommandStarted CommandSucceeded" {
		t.Fatalf("a retried read's events: %v", types)
	}
	if ev[0].OperationID == 0 || ev[2].OperationID != ev[0].OperationID {
		t.Errorf("operation ids %d and %d", ev[0].OperationID, ev[2].OperationID)
	}
	var ce *wire.CommandError
	if !errors.As(ev[1].Failure, &ce) || ce.Code != 11602 {
		t.Errorf("failure %v", ev[1].Failure)
	}
	_, _ = c.RunCommand(ctx, "admin", bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "secret"}, {Key: "roles", Value: bson.A{}}})
	for _, e := range take() {
		if e.Command != nil || e.Reply != nil || strings.Contains(e.Command.String(), "secret") {
			t.Errorf("createUser published its body or reply: %+v", e)
		}
	}
}

// A write on a standalone is not a retryable write (no sessions there): a
// network error is not retried, since the write may have been applied.
func TestClientWriteOnStandaloneIsNotResent(t *testing.T) {
	srv := startServer(t)
	c := newClient(t, srv.URI())
	ctx := ctx(t)
	if _, err := c.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1, CloseConnection: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}); err == nil {
		t.Fatal("the write was sent again after a network error")
	}
	if n := srv.Stats().Commands["insert"]; n != 1 {
		t.Errorf("inserts seen by the server: %d, want 1", n)
	}
}

// In a Single topology, a standalone gets no $readPreference, and another
// server the application's, or primaryPreferred for primary (the server
// selection specification's "Topology type: Single").
func TestReadPreferenceSingleTopology(t *testing.T) {
	standalone := startServer(t)
	rs := startReplicaSet(t, 2)
	secondary := rs.Members()[1]
	nearest := topology.ReadPref{Mode: topology.ModeNearest}
	for _, tc := range []struct {
		uri  string
		opts []mongopool.CommandOption
		want string // the mode, "" for none
	}{
		{standalone.URI(), nil, ""},
		{standalone.URI(), []mongopool.CommandOption{mongopool.WithReadPreference(nearest)}, ""},
		{"mongodb://" + secondary.Addr() + "/?directConnection=true", nil, "primaryPreferred"},
		{"mongodb://" + secondary.Addr() + "/?directConnection=true", []mongopool.CommandOption{mongopool.WithReadPreference(nearest)}, "nearest"},
	} {
		var log commandLog
		c := newClient(t, tc.uri, mongopool.WithCommandEventHandler(log.handler))
		for _, run := range []func(context.Context, string, any, ...mongopool.CommandOption) (bson.Raw, error){c.RunCommand, c.Read} {
			if _, err := run(ctx(t), "db", bson.D{{Key: "count", Value: "c"}}, tc.opts...); err != nil {
				t.Fatalf("%s: %v", tc.uri, err)
			}
			cmd := log.take(t, c, "count")[0].Command
			got, _ := cmd.Lookup("$readPreference", "mode").StringValueOK()
			if got != tc.want {
				t.Errorf("%s with %d options: $readPreference %s, want mode %q", tc.uri, len(tc.opts), cmd.Lookup("$readPreference"), tc.want)
			}
		}
	}
}

// An unacknowledged write (w: 0) is sent with moreToCome and gets no reply,
// as the OP_MSG specification says; its succeeded event tells {ok: 1}, as
// the command monitoring specification says. A RunCommand with w: 0 is
// sent as any command.
func TestUnacknowledgedWrite(t *testing.T) {
	srv := startServer(t, mongotest.WithReplicaSet("rs"))
	var log commandLog
	c := newClient(t, srv.URI()+"?replicaSet=rs", mongopool.WithCommandEventHandler(log.handler))
	ctx := ctx(t)
	w0 := bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}
	reply, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}, w0})
	if err != nil {
		t.Fatal(err)
	}
	if len(reply) != 0 && reply.Lookup("n").Type != 0 {
		t.Errorf("the reply of an unacknowledged write: %s, want {ok: 1} at most", reply)
	}
	for _, e := range log.take(t, c, "insert") {
		if e.Type == mongopool.CommandSucceeded {
			if e.Reply.Lookup("n").Type != 0 || e.Reply.Lookup("ok").AsFloat64() != 1 {
				t.Errorf("the succeeded event's reply %s, want {ok: 1}", e.Reply)
			}
		}
	}
	// It was written, and the connection is in step for the next command.
	if n := countIn(t, c); n != 1 {
		t.Errorf("%d documents, want the unacknowledged insert's", n)
	}
}
