package mongotest_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A standalone mongod of 4.4 or later reports a topologyVersion in hello,
// after isWritablePrimary (ismaster for legacy hello), whose processId is
// the process's and whose counter stays 0 while it runs: mongod's
// appendReplicationInfo (src/mongo/db/repl/replication_info.cpp) and the
// SDAM spec's "Streaming Protocol" (server-monitoring.md, "the server
// MUST include topologyVersion").
func TestStandaloneHelloTopologyVersion(t *testing.T) {
	srv := start(t)
	var first bson.ObjectID
	for i, name := range []string{"hello", "isMaster", "ismaster"} {
		reply := dialRaw(t, srv).run(cmd("admin", bson.E{Key: name, Value: 1}))
		checkOK(t, reply)
		elems, err := reply.Elements()
		if err != nil {
			t.Fatal(err)
		}
		writable := "isWritablePrimary"
		if name != "hello" {
			writable = "ismaster"
		}
		if len(elems) < 2 || elems[0].Key() != writable || elems[1].Key() != "topologyVersion" {
			t.Fatalf("%s: reply %s; want %s then topologyVersion first, as mongod", name, reply, writable)
		}
		h := decodeHello(t, reply)
		if h.TopologyVersion.Counter != 0 || h.TopologyVersion.ProcessID.IsZero() {
			t.Errorf("%s: topologyVersion %+v, want a processId and counter 0", name, h.TopologyVersion)
		}
		if i == 0 {
			first = h.TopologyVersion.ProcessID
		} else if h.TopologyVersion.ProcessID != first {
			t.Errorf("%s: processId %v on another connection, want the process's %v", name, h.TopologyVersion.ProcessID, first)
		}
	}
	if other := helloOf(t, start(t)); other.TopologyVersion.ProcessID == first {
		t.Errorf("two servers share the processId %v", first)
	}

	// Before 4.4 (maxWireVersion 9), mongod has no topologyVersion, and
	// takes a hello with the awaitable fields as a plain one.
	old := start(t, mongotest.WithWireVersions(0, 8))
	r := dialRaw(t, old)
	reply := r.run(awaitableHello(topologyVersion{ProcessID: first}, 600000))
	checkOK(t, reply)
	if _, err := reply.LookupErr("topologyVersion"); err == nil {
		t.Errorf("a 4.2 standalone's hello %s has a topologyVersion", reply)
	}
}

// An awaitable hello on a standalone: with the server's topologyVersion it
// waits maxAwaitTimeMS, since a standalone's never changes while it runs;
// with another process's it answers at once; with a greater counter it
// fails with 51764, mongod's code for a standalone (replication_info.cpp),
// rather than the 31382 of a replica set member.
func TestStandaloneAwaitableHello(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion

	// Another process's topologyVersion, or an old counter: at once, even
	// with a long maxAwaitTimeMS.
	got := decodeHello(t, r.run(awaitableHello(topologyVersion{ProcessID: bson.NewObjectID()}, 600000)))
	if *got.TopologyVersion != tv {
		t.Errorf("topologyVersion %+v, want %+v", got.TopologyVersion, tv)
	}
	reply := r.run(awaitableHello(topologyVersion{ProcessID: tv.ProcessID, Counter: 1}, 600000))
	msg := checkError(t, reply, 51764, "Location51764")
	if want := "Received a topology version with counter: 1 which is greater than the server topology version counter: 0"; msg != want {
		t.Errorf("errmsg %q, want %q", msg, want)
	}

	// The server's own: it waits, counted in the stats, until maxAwaitTimeMS.
	start := time.Now()
	got = decodeHello(t, r.run(awaitableHello(tv, 100)))
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("the awaitable hello returned after %v, before its maxAwaitTimeMS of 100ms", d)
	}
	if *got.TopologyVersion != tv {
		t.Errorf("topologyVersion %+v, want %+v", got.TopologyVersion, tv)
	}
	id := r.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv, 600000))}, nil)
	waitAwaiting(t, srv, 1)
	r.expectSilence()
	if st := srv.Stats(); st.AwaitableHellos != 4 {
		t.Errorf("AwaitableHellos %d, want the 4 hellos with maxAwaitTimeMS", st.AwaitableHellos)
	}
	// As on a replica set member, a fail point set on hello ends the
	// wait, with the unchanged reply.
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"hello"}, AppName: "nobody", ErrorCode: 2}); err != nil {
		t.Fatal(err)
	}
	_, reply = r.replyWithin(id, testTimeout)
	if got := decodeHello(t, reply); *got.TopologyVersion != tv {
		t.Errorf("topologyVersion %+v, want %+v", got.TopologyVersion, tv)
	}
	waitAwaiting(t, srv, 0)
}

// A standalone's waiting hello ends with the server: Close returns, closes
// the connection, and leaves no goroutine.
func TestStandaloneCloseEndsAwaitableHello(t *testing.T) {
	quit, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	rq := dialRaw(t, quit)
	tvq := *decodeHello(t, rq.run(helloCmd())).TopologyVersion
	rq.sendMsg(&wire.Msg{Flags: wire.ExhaustAllowed, Body: marshal(t, awaitableHello(tvq, 600000))}, nil)
	waitAwaiting(t, quit, 1)
	closeAndCheck(t, quit)
	rq.expectClosed()
}

// On the fake clock of a Network, a standalone's awaitable hello takes
// exactly maxAwaitTimeMS, and an exhaust one streams a reply, with
// moreToCome, every maxAwaitTimeMS: the streaming protocol of the SDAM
// spec (server-monitoring.md), which drivers use with a standalone of 4.4
// and later.
func TestStandaloneStreamsOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		srv, err := mongotest.Start(mongotest.WithNetwork(n))
		if err != nil {
			t.Fatal(err)
		}
		r := dialRawOn(t, n, srv.Addr())
		tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
		start := time.Now()
		id := r.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv, 10000))}, nil)
		_, reply := r.replyWithin(id, time.Minute)
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("the awaitable hello returned after %v, want 10s", d)
		}
		decodeHello(t, reply)
		start = time.Now()
		decodeHello(t, r.run(awaitableHello(tv, 0)))
		if d := time.Since(start); d != 0 {
			t.Errorf("maxAwaitTimeMS 0 took %v, want no wait", d)
		}

		start = time.Now()
		responseTo := r.sendMsg(&wire.Msg{Flags: wire.ExhaustAllowed, Body: marshal(t, awaitableHello(tv, 10000))}, nil)
		for i := 1; i <= 3; i++ {
			h, m, err := wire.DecodeReply(r.readWithin(time.Minute), 0)
			if err != nil {
				t.Fatal(err)
			}
			if h.ResponseTo != responseTo || m.Flags&wire.MoreToCome == 0 {
				t.Errorf("reply %d: responseTo %d (want %d), flags %v (want moreToCome)", i, h.ResponseTo, responseTo, m.Flags)
			}
			if d := time.Since(start); d != time.Duration(i)*10*time.Second {
				t.Errorf("reply %d after %v, want %v", i, d, time.Duration(i)*10*time.Second)
			}
			if got := decodeHello(t, m.Body); *got.TopologyVersion != tv {
				t.Errorf("reply %d: topologyVersion %+v, want %+v", i, got.TopologyVersion, tv)
			}
			responseTo = h.RequestID
		}
		if st := srv.Stats(); st.ExhaustReplies != 3 {
			t.Errorf("ExhaustReplies %d, want 3", st.ExhaustReplies)
		}
	})
}

// The official driver streams a standalone's hellos, as the SDAM spec
// says a driver does with any server that reports a topologyVersion:
// its heartbeats succeed on awaited hellos.
func TestDriverStreamsStandaloneHellos(t *testing.T) {
	srv := start(t)
	awaited := make(chan struct{}, 1)
	monitor := &event.ServerMonitor{
		ServerHeartbeatSucceeded: func(e *event.ServerHeartbeatSucceededEvent) {
			if e.Awaited {
				select {
				case awaited <- struct{}{}:
				default:
				}
			}
		},
	}
	client := connectWith(t, options.Client().ApplyURI(srv.URI()).SetServerMonitor(monitor).
		SetHeartbeatInterval(500*time.Millisecond))
	t.Cleanup(func() { srv.Close() }) // before Disconnect: a monitor's awaited hello then ends at once
	if err := client.Ping(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-awaited:
	case <-ctx(t).Done():
		t.Fatal("no heartbeat succeeded on an awaited hello")
	}
	waitFor(t, "streamed hellos", func() bool {
		st := srv.Stats()
		return st.AwaitableHellos >= 2 && st.ExhaustReplies >= 1
	})
}
