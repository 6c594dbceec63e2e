package proxy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/proxy"
	"github.com/mongopool/mongopool/wire"
)

// slowFind is a find that holds its upstream connection for ms
// milliseconds (the test server runs $where's JavaScript, on the one
// document of the collection "slow" that holdConnection makes).
func slowFind(t testing.TB, ms int) bson.Raw {
	return mustMarshal(t, bson.D{{Key: "find", Value: "slow"}, {Key: "filter", Value: bson.D{{Key: "$where", Value: "sleep(" + strconv.Itoa(ms) + "); return true"}}}, {Key: "$db", Value: "db"}})
}

// holdConnection starts a slow find through addr and returns once the
// proxy has it upstream (its queue is empty again with the operation
// counted), and a function that waits for its reply.
func holdConnection(t *testing.T, p *proxy.Proxy, addr string, ms int) func() bson.Raw {
	t.Helper()
	raw := dialRaw(t, addr)
	raw.roundTrip(mustMarshal(t, bson.D{{Key: "update", Value: "slow"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}, {Key: "upsert", Value: true}}}}, {Key: "$db", Value: "db"}}))
	before := p.Stats().Operations
	id := raw.send(slowFind(t, ms), 0, 0)
	deadline := time.Now().Add(10 * time.Second)
	for st := p.Stats(); st.Operations == before || st.Queued != 0; st = p.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("the slow find never left the queue: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	return func() bson.Raw {
		h, _, body, _ := raw.read()
		if h.ResponseTo != id {
			t.Fatalf("reply answers %d, not %d", h.ResponseTo, id)
		}
		return body
	}
}

func TestQueueBoundAnswersOverloaded(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI()+"&maxPoolSize=1", proxy.Mongos, proxy.Config{MaxQueued: 1})
	done := holdConnection(t, p, addr, 400)
	// One operation may wait; the next is refused at once.
	waiter := dialRaw(t, addr)
	wid := waiter.send(mustMarshal(t, bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}}), 0, 0)
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Queued != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second operation never queued")
		}
		time.Sleep(time.Millisecond)
	}
	refused := dialRaw(t, addr).roundTrip(mustMarshal(t, bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}}))
	if refused.Lookup("code").Int32() != 462 || !hasLabels(refused, "SystemOverloadedError", "RetryableError") {
		t.Fatalf("beyond the queue bound: %v, want code 462 with SystemOverloadedError and RetryableError", refused)
	}
	if ok := done().Lookup("ok").Double(); ok != 1 {
		t.Fatal("the slow find failed")
	}
	h, _, body, _ := waiter.read()
	if h.ResponseTo != wid || body.Lookup("ok").Double() != 1 {
		t.Fatalf("the queued count: %v", body)
	}
	if st := p.Stats(); st.Overloaded != 1 || st.Queued != 0 {
		t.Fatalf("stats %+v: want 1 overloaded, 0 queued", st)
	}
}

func hasLabels(reply bson.Raw, labels ...string) bool {
	arr, ok := reply.Lookup("errorLabels").ArrayOK()
	if !ok {
		return false
	}
	vals, _ := arr.Values()
	for _, l := range labels {
		found := false
		for _, v := range vals {
			if v.StringValue() == l {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func TestMaxTimeMSReducedByTheWait(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI()+"&maxPoolSize=1", proxy.Mongos, proxy.Config{})
	done := holdConnection(t, p, addr, 500)
	// maxTimeMS 100 runs out in the queue: MaxTimeMSExpired, without the
	// command reaching the server.
	reply := dialRaw(t, addr).roundTrip(mustMarshal(t, bson.D{{Key: "count", Value: "c"}, {Key: "maxTimeMS", Value: 100}, {Key: "$db", Value: "db"}}))
	if reply.Lookup("code").Int32() != 50 {
		t.Fatalf("maxTimeMS 100 behind a 500 ms operation: %v, want MaxTimeMSExpired (50)", reply)
	}
	done()
	if n := rs.Primary().Stats().Commands["count"]; n != 0 {
		t.Fatalf("the server got %d counts", n)
	}
	// A maxTimeMS that outlasts the wait reaches the server reduced by
	// it: 400 ms, after 300 ms in the queue, is too short for a 250 ms
	// find on the server.
	done = holdConnection(t, p, addr, 300)
	find := bson.D{}
	if err := bson.Unmarshal(slowFind(t, 250), &find); err != nil {
		t.Fatal(err)
	}
	reply = dialRaw(t, addr).roundTrip(mustMarshal(t, append(find, bson.E{Key: "maxTimeMS", Value: int64(400)})))
	if reply.Lookup("code").Int32() != 50 {
		t.Fatalf("a 250 ms find with maxTimeMS 400 after 300 ms in the queue: %v, want the server's MaxTimeMSExpired", reply)
	}
	done()
	if st := p.Stats(); st.MaxTimeExpired != 1 {
		t.Fatalf("stats %+v: want 1 MaxTimeExpired (the proxy's own)", st)
	}
}

func TestQueueTimeoutAnswersOverloaded(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI()+"&maxPoolSize=1", proxy.Mongos, proxy.Config{QueueTimeout: 100 * time.Millisecond})
	done := holdConnection(t, p, addr, 600)
	reply := dialRaw(t, addr).roundTrip(mustMarshal(t, bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}}))
	if reply.Lookup("code").Int32() != 462 || !hasLabels(reply, "SystemOverloadedError", "RetryableError") {
		t.Fatalf("a wait past QueueTimeout: %v, want code 462 with the overload labels", reply)
	}
	done()
}

func TestClientConnectionCap(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{MaxClientConns: 2})
	hello := mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	a.roundTrip(hello)
	b.roundTrip(hello)
	c := dialRaw(t, addr)
	reply := c.roundTrip(hello)
	if reply.Lookup("code").Int32() != 462 || !hasLabels(reply, "SystemOverloadedError", "RetryableError") {
		t.Fatalf("a third connection with MaxClientConns 2: %v, want an overload error", reply)
	}
	if _, err := c.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the refused connection stays open: %v", err)
	}
	if st := p.Stats(); st.RefusedConns != 1 {
		t.Fatalf("stats %+v: want 1 refused", st)
	}
	// Once one closes, a new connection is served.
	a.nc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().ClientConns > 1 {
		if time.Now().After(deadline) {
			t.Fatal("the closed connection is still counted")
		}
		time.Sleep(time.Millisecond)
	}
	if dialRaw(t, addr).roundTrip(hello).Lookup("ok").Double() != 1 {
		t.Fatal("a connection under the cap was refused")
	}
}

func TestHostileMessagesCloseTheConnection(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	header := func(length int32, opcode int32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, uint32(length))
		b = binary.LittleEndian.AppendUint32(b, 1)
		b = binary.LittleEndian.AppendUint32(b, 0)
		return binary.LittleEndian.AppendUint32(b, uint32(opcode))
	}
	for name, msg := range map[string][]byte{
		"2 GiB length":     header(1<<31-1, 2013),
		"negative length":  header(-5, 2013),
		"length below 16":  header(3, 2013),
		"unknown opcode":   header(16, 9999),
		"invalid BSON":     append(header(16+4+1+5, 2013), 0, 0, 0, 0, 0, 9, 0, 0, 0, 0),
		"truncated OP_MSG": append(header(16+4, 2013), 0, 0, 0, 0),
	} {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, addr)
			if _, err := c.nc.Write(msg); err != nil {
				t.Fatal(err)
			}
			c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := c.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Fatalf("read %d bytes, %v: want the connection closed", n, err)
			}
		})
	}
	// Others are unaffected.
	if dialRaw(t, addr).roundTrip(mustMarshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})).Lookup("ok").Double() != 1 {
		t.Fatal("ping failed after the hostile clients")
	}
	if st := p.Stats(); st.Operations != 0 {
		t.Fatalf("hostile messages reached the server: %+v", st)
	}
}

func TestHalfAMessageHoldsNoUpstreamConnection(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI()+"&maxPoolSize=1", proxy.Mongos, proxy.Config{})
	stalled := dialRaw(t, addr)
	msg := mustMarshal(t, bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}})
	full := binary.LittleEndian.AppendUint32(nil, uint32(16+5+len(msg)))
	full = append(full, 1, 0, 0, 0, 0, 0, 0, 0, 0xdd, 7, 0, 0, 0, 0, 0, 0, 0)
	full = append(full, msg...)
	if _, err := stalled.nc.Write(full[:len(full)/2]); err != nil {
		t.Fatal(err)
	}
	// With the only upstream connection's client stalled mid-request,
	// others still get served.
	for range 3 {
		if dialRaw(t, addr).roundTrip(msg).Lookup("ok").Double() != 1 {
			t.Fatal("count failed while a client stalls")
		}
	}
	if _, err := stalled.nc.Write(full[len(full)/2:]); err != nil {
		t.Fatal(err)
	}
	_, _, body, _ := stalled.read()
	if body.Lookup("ok").Double() != 1 {
		t.Fatalf("the stalled client's count: %v", body)
	}
	_ = p
}

func TestStateChangeErrorsDoNotMarkTheProxyUnknown(t *testing.T) {
	rs := startReplicaSet(t, 2)
	_, addr := startProxy(t, rs.URI()+"&heartbeatFrequencyMS=500", proxy.Mongos, proxy.Config{ElectionHold: -1})
	var mu sync.Mutex
	var unknown []string
	monitor := &event.ServerMonitor{ServerDescriptionChanged: func(e *event.ServerDescriptionChangedEvent) {
		if e.PreviousDescription.Kind != "" && e.NewDescription.Kind == "Unknown" {
			mu.Lock()
			unknown = append(unknown, e.Address.String())
			mu.Unlock()
		}
	}}
	ctx := testContext(t)
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?retryWrites=false").SetServerMonitor(monitor).SetServerSelectionTimeout(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	coll := c.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	for _, code := range []int32{10107, 91, 11600} {
		if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: code, Times: 1}); err != nil {
			t.Fatal(err)
		}
		_, err = coll.InsertOne(ctx, bson.D{})
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(int(code)) {
			t.Fatalf("an insert failing with %d, not held: %v, want the error relayed", code, err)
		}
	}
	if _, err := coll.InsertOne(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(unknown) != 0 {
		t.Fatalf("the driver marked the proxy Unknown: %v", unknown)
	}
}

func TestOversizedCommandRefusedWithoutBreakingTheConnection(t *testing.T) {
	rs := startReplicaSet(t, 1)
	_, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	c := dialRaw(t, addr)
	big := make([]byte, 17<<20)
	reply := c.roundTrip(mustMarshal(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "b", Value: big}}}}, {Key: "$db", Value: "db"}}))
	if reply.Lookup("code").Int32() != 10334 {
		t.Fatalf("a 17 MiB command: %v, want BSONObjectTooLarge (10334)", reply)
	}
	if c.roundTrip(mustMarshal(t, bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}})).Lookup("ok").Double() != 1 {
		t.Fatal("the connection is not usable after the refusal")
	}
}

func TestReconfigure(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{})
	hello := mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	first := dialRaw(t, addr)
	first.roundTrip(hello)
	if err := p.Reconfigure(proxy.Config{MaxClientConns: 1}); err != nil {
		t.Fatal(err)
	}
	if reply := dialRaw(t, addr).roundTrip(hello); reply.Lookup("code").Int32() != 462 {
		t.Fatalf("a second connection after lowering MaxClientConns to 1: %v", reply)
	}
	for _, bad := range []proxy.Config{{MaxQueued: -1}, {MaxPinned: -1}, {Compressors: []string{"zlib"}}, {CursorTimeout: time.Second}} {
		if err := p.Reconfigure(bad); err == nil {
			t.Errorf("Reconfigure(%+v) accepted", bad)
		}
	}
	// A refused change leaves the limits as they were.
	if reply := dialRaw(t, addr).roundTrip(hello); reply.Lookup("code").Int32() != 462 {
		t.Fatalf("after a refused change: %v", reply)
	}
	if err := p.Reconfigure(proxy.Config{}); err != nil {
		t.Fatal(err)
	}
	if reply := dialRaw(t, addr).roundTrip(hello); reply.Lookup("ok").Double() != 1 {
		t.Fatalf("after going back to the defaults: %v", reply)
	}
}

func TestSilentAndNonReadingClientsDisconnected(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{HandshakeTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	// A connection that sends nothing is closed after HandshakeTimeout.
	silent := dialRaw(t, addr)
	if _, err := silent.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a silent connection: %v, want it closed", err)
	}
	// One that handshook may stay idle longer.
	idle := dialRaw(t, addr)
	idle.roundTrip(mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}))
	time.Sleep(400 * time.Millisecond)
	idle.roundTrip(mustMarshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}))

	// A client that sends requests and never reads the replies is
	// disconnected once a reply cannot be written for WriteTimeout.
	greedy := dialRaw(t, addr)
	big := make([]byte, 1<<20)
	greedy.roundTrip(mustMarshal(t, bson.D{{Key: "insert", Value: "big"}, {Key: "documents", Value: bson.A{bson.D{{Key: "b", Value: big}}}}, {Key: "$db", Value: "db"}}))
	find := mustMarshal(t, bson.D{{Key: "find", Value: "big"}, {Key: "$db", Value: "db"}})
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := greedy.nc.Write(wireMsg(t, find)); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("a client that never reads was not disconnected")
	}
	if idle.roundTrip(mustMarshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})).Lookup("ok").Double() != 1 {
		t.Fatal("another client was affected")
	}
	if st := p.Stats(); st.ClientConns > 2 {
		t.Fatalf("%d client connections left, want the idle one (and maybe the greedy one closing)", st.ClientConns)
	}
}

// wireMsg returns cmd in an OP_MSG.
func wireMsg(t testing.TB, cmd bson.Raw) []byte {
	msg, err := wire.AppendMsg(nil, wire.NextRequestID(), 0, &wire.Msg{Body: cmd})
	if err != nil {
		t.Error(err)
	}
	return msg
}

func TestPauseAndResume(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{QueueTimeout: 5 * time.Second})
	c := dialRaw(t, addr) // a loopback client: it may administer the proxy
	count := mustMarshal(t, bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}})
	reply := c.roundTrip(mustMarshal(t, bson.D{{Key: "proxyPause", Value: ""}, {Key: "timeoutMS", Value: 10000}, {Key: "$db", Value: "admin"}}))
	if b, _ := reply.Lookup("paused").BooleanOK(); !b {
		t.Fatalf("proxyPause: %v", reply)
	}
	// An operation waits while paused, and goes on at the resume.
	waiter := dialRaw(t, addr)
	id := waiter.send(count, 0, 0)
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Queued != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the operation did not wait")
		}
		time.Sleep(time.Millisecond)
	}
	// One with a short maxTimeMS fails with MaxTimeMSExpired meanwhile.
	short := dialRaw(t, addr).roundTrip(mustMarshal(t, bson.D{{Key: "count", Value: "c"}, {Key: "maxTimeMS", Value: 50}, {Key: "$db", Value: "db"}}))
	if short.Lookup("code").Int32() != 50 {
		t.Fatalf("maxTimeMS 50 while paused: %v", short)
	}
	if n := rs.Primary().Stats().Commands["count"]; n != 0 {
		t.Fatalf("%d counts reached the server while paused", n)
	}
	reply = c.roundTrip(mustMarshal(t, bson.D{{Key: "proxyResume", Value: ""}, {Key: "$db", Value: "admin"}}))
	if b, _ := reply.Lookup("paused").BooleanOK(); b {
		t.Fatalf("proxyResume: %v", reply)
	}
	h, _, body, _ := waiter.read()
	if h.ResponseTo != id || body.Lookup("ok").Double() != 1 {
		t.Fatalf("the held count after the resume: %v", body)
	}
	// A pause ends by itself at its timeout.
	if err := p.Pause("", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if c.roundTrip(count).Lookup("ok").Double() != 1 {
		t.Fatal("a count after a pause that timed out")
	}
	if paused, _ := p.Paused(""); paused {
		t.Fatal("the pause did not end at its timeout")
	}
	for _, bad := range []bson.D{
		{{Key: "proxyPause", Value: "nosuch"}, {Key: "timeoutMS", Value: 10}, {Key: "$db", Value: "admin"}},
		{{Key: "proxyPause", Value: ""}, {Key: "$db", Value: "admin"}},
	} {
		if c.roundTrip(mustMarshal(t, bad)).Lookup("ok").Double() != 0 {
			t.Fatalf("%v succeeded", bad)
		}
	}
}

// startAdminProxy starts an authenticating proxy in front of a replica set
// of one, with the users app (password a) and root (r, an admin).
func startAdminProxy(t *testing.T) (*mongotest.ReplicaSet, *proxy.Proxy, string) {
	t.Helper()
	rs := startReplicaSet(t, 1)
	admin, err := proxy.DeriveUser("root", "admin", "r", "")
	if err != nil {
		t.Fatal(err)
	}
	admin.Admin = true
	p, addr := startAuthProxy(t, rs.URI(), []proxy.User{mustDerive(t, "app", "a", ""), admin}, nil, proxy.Config{})
	return rs, p, addr
}

func TestPauseNeedsAnAdmin(t *testing.T) {
	_, _, addr := startAdminProxy(t)
	ctx := testContext(t)
	pause := bson.D{{Key: "proxyPause", Value: ""}, {Key: "timeoutMS", Value: 1000}}
	err := driverClient(t, "mongodb://app:a@"+addr+"/").Database("admin").RunCommand(ctx, pause).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(13) {
		t.Fatalf("proxyPause by a user without admin: %v, want Unauthorized", err)
	}
	if err := driverClient(t, "mongodb://root:r@"+addr+"/").Database("admin").RunCommand(ctx, pause).Err(); err != nil {
		t.Fatalf("proxyPause by an admin: %v", err)
	}
}

// proxyReconnect replaces the upstream connections without failing
// anything: operations go on through it, on new connections, and the old
// ones are closed. It needs an admin, as proxyPause does.
func TestReconnect(t *testing.T) {
	rs, p, addr := startAdminProxy(t)
	ctx := testContext(t)
	app := driverClient(t, "mongodb://app:a@"+addr+"/")
	coll := app.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	reconnect := bson.D{{Key: "proxyReconnect", Value: ""}}
	var se mongo.ServerError
	if err := app.Database("admin").RunCommand(ctx, reconnect).Err(); !errors.As(err, &se) || !se.HasErrorCode(13) {
		t.Fatalf("proxyReconnect by a user without admin: %v, want Unauthorized", err)
	}
	primary := rs.Primary()
	before := primary.Stats().ConnectionsAccepted

	// Writers under way through the reconnect: none fails.
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var done sync.WaitGroup
	for w := range 4 {
		done.Go(func() {
			for i := 1; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: w*1_000_000 + i}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	if err := driverClient(t, "mongodb://root:r@"+addr+"/").Database("admin").RunCommand(ctx, reconnect).Err(); err != nil {
		t.Fatalf("proxyReconnect by an admin: %v", err)
	}
	if err := p.Reconnect("no-such-upstream"); err == nil {
		t.Error("Reconnect of an unknown upstream succeeded")
	}
	// The operations after the reconnect get new connections.
	deadline := time.Now().Add(10 * time.Second)
	for primary.Stats().ConnectionsAccepted == before {
		if time.Now().After(deadline) {
			t.Fatal("no new upstream connection within 10 s of the reconnect")
		}
		if _, err := coll.CountDocuments(ctx, bson.D{}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a write through the reconnect failed: %v", err)
		}
	}
	// The old connections are closed: the server has no more open than
	// the pool made since, and the proxy's monitoring.
	var inPool int
	for _, pl := range p.Upstream("").Pools() {
		inPool += pl.Stats().Total
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		open := primary.Stats().ConnectionsOpen
		accepted := primary.Stats().ConnectionsAccepted
		// Open now: the pool's, the monitor's two, the test's drivers'
		// none (they talk to the proxy). Made since: at least the pool's.
		if open <= int64(inPool)+2 && accepted-before >= int64(inPool) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server has %d connections open (%d accepted since the reconnect) for a pool of %d", open, accepted-before, inPool)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
