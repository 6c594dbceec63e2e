package mongotest_test

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// startRS starts a replica set that the test closes when it ends.
func startRS(t *testing.T, members int, opts ...mongotest.Option) *mongotest.ReplicaSet {
	t.Helper()
	rs, err := mongotest.StartReplicaSet("rs0", members, opts...)
	if err != nil {
		t.Fatalf("StartReplicaSet: %v", err)
	}
	t.Cleanup(func() {
		if err := rs.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return rs
}

// helloReply is a hello reply as a replica set member sends it.
type helloReply struct {
	OK                float64           `bson:"ok"`
	IsWritablePrimary *bool             `bson:"isWritablePrimary"`
	IsMaster          *bool             `bson:"ismaster"`
	Secondary         bool              `bson:"secondary"`
	ArbiterOnly       bool              `bson:"arbiterOnly"`
	Passive           bool              `bson:"passive"`
	Hidden            bool              `bson:"hidden"`
	SetName           string            `bson:"setName"`
	SetVersion        int32             `bson:"setVersion"`
	Hosts             []string          `bson:"hosts"`
	Passives          []string          `bson:"passives"`
	Arbiters          []string          `bson:"arbiters"`
	Primary           string            `bson:"primary"`
	Me                string            `bson:"me"`
	Tags              map[string]string `bson:"tags"`
	ElectionID        *bson.ObjectID    `bson:"electionId"`
	TopologyVersion   *topologyVersion  `bson:"topologyVersion"`
	LastWrite         *struct {
		OpTime            opTime    `bson:"opTime"`
		LastWriteDate     time.Time `bson:"lastWriteDate"`
		MajorityOpTime    opTime    `bson:"majorityOpTime"`
		MajorityWriteDate time.Time `bson:"majorityWriteDate"`
	} `bson:"lastWrite"`
	MaxWireVersion int32 `bson:"maxWireVersion"`
	ConnectionID   int32 `bson:"connectionId"`
}

type topologyVersion struct {
	ProcessID bson.ObjectID `bson:"processId"`
	Counter   int64         `bson:"counter"`
}

type opTime struct {
	TS bson.Timestamp `bson:"ts"`
	T  int64          `bson:"t"`
}

// decodeHello decodes a hello reply, which must be ok and carry a
// topologyVersion whose counter is an int64, as mongod sends it.
func decodeHello(t *testing.T, reply bson.Raw) helloReply {
	t.Helper()
	checkOK(t, reply)
	var h helloReply
	if err := bson.Unmarshal(reply, &h); err != nil {
		t.Fatalf("hello reply %s: %v", reply, err)
	}
	if h.TopologyVersion == nil {
		t.Fatalf("hello reply %s has no topologyVersion", reply)
	}
	if typ := reply.Lookup("topologyVersion", "counter").Type; typ != bson.TypeInt64 {
		t.Fatalf("topologyVersion.counter is a %v, want an int64 (reply %s)", typ, reply)
	}
	return h
}

// helloOf runs hello on a new connection to srv.
func helloOf(t *testing.T, srv *mongotest.Server) helloReply {
	t.Helper()
	return decodeHello(t, dialRaw(t, srv).run(helloCmd()))
}

func helloCmd(more ...bson.E) bson.D {
	return cmd("admin", append([]bson.E{{Key: "hello", Value: 1}}, more...)...)
}

// awaitableHello is a hello that waits for a change of tv, for at most ms.
func awaitableHello(tv topologyVersion, ms int64) bson.D {
	return helloCmd(bson.E{Key: "topologyVersion", Value: tv}, bson.E{Key: "maxAwaitTimeMS", Value: ms})
}

// electionIDOf returns the electionId mongod derives from a term: the
// largest positive timestamp, then the term, big-endian.
func electionIDOf(term int64) bson.ObjectID {
	var id bson.ObjectID
	copy(id[:], []byte{0x7f, 0xff, 0xff, 0xff})
	for i := range 8 {
		id[4+i] = byte(term >> (56 - 8*i))
	}
	return id
}

func addrs(members []*mongotest.Server, idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, members[i].Addr())
	}
	return out
}

func TestReplicaSetHelloByRole(t *testing.T) {
	rs := startRS(t, 5,
		mongotest.WithMember(0, mongotest.Member{Tags: map[string]string{"dc": "east"}}),
		mongotest.WithMember(2, mongotest.Member{Passive: true}),
		mongotest.WithMember(3, mongotest.Member{Hidden: true}),
		mongotest.WithMember(4, mongotest.Member{Arbiter: true}))
	m := rs.Members()
	if len(m) != 5 {
		t.Fatalf("%d members, want 5", len(m))
	}
	want := "mongodb://" + strings.Join(addrs(m, 0, 1, 2, 3, 4), ",") + "/?replicaSet=rs0"
	if rs.URI() != want {
		t.Errorf("URI %q, want %q", rs.URI(), want)
	}
	if rs.Primary() != m[0] {
		t.Errorf("Primary() is not member 0")
	}
	hellos := make([]helloReply, len(m))
	for i, srv := range m {
		h := helloOf(t, srv)
		hellos[i] = h
		if h.SetName != "rs0" || h.SetVersion != 1 || h.Me != srv.Addr() || h.Primary != m[0].Addr() {
			t.Errorf("member %d: setName %q setVersion %d me %q primary %q", i, h.SetName, h.SetVersion, h.Me, h.Primary)
		}
		if !slices.Equal(h.Hosts, addrs(m, 0, 1)) || !slices.Equal(h.Passives, addrs(m, 2)) || !slices.Equal(h.Arbiters, addrs(m, 4)) {
			t.Errorf("member %d: hosts %v passives %v arbiters %v", i, h.Hosts, h.Passives, h.Arbiters)
		}
		if h.MaxWireVersion != mongotest.DefaultMaxWireVersion || h.ConnectionID == 0 {
			t.Errorf("member %d: maxWireVersion %d connectionId %d", i, h.MaxWireVersion, h.ConnectionID)
		}
		if h.TopologyVersion.Counter != 0 {
			t.Errorf("member %d: topologyVersion.counter %d at start, want 0", i, h.TopologyVersion.Counter)
		}
		for j := range i {
			if hellos[j].TopologyVersion.ProcessID == h.TopologyVersion.ProcessID {
				t.Errorf("members %d and %d share the processId %v", j, i, h.TopologyVersion.ProcessID)
			}
		}
		if i == 4 {
			if h.LastWrite != nil {
				t.Errorf("the arbiter reports lastWrite %+v; it holds no data", h.LastWrite)
			}
		} else if h.LastWrite == nil || h.LastWrite.OpTime.T != 1 || h.LastWrite.OpTime.TS.T == 0 ||
			h.LastWrite.LastWriteDate.IsZero() || h.LastWrite.MajorityOpTime.TS.T == 0 || h.LastWrite.MajorityWriteDate.IsZero() {
			t.Errorf("member %d: lastWrite %+v, want opTime {ts, t: 1}, lastWriteDate, majorityOpTime, majorityWriteDate", i, h.LastWrite)
		}
	}
	type role struct{ writable, secondary, arbiter, passive, hidden, electionID bool }
	for i, want := range []role{{writable: true, electionID: true}, {secondary: true}, {secondary: true, passive: true},
		{secondary: true, passive: true, hidden: true}, {arbiter: true}} {
		h := hellos[i]
		got := role{*h.IsWritablePrimary, h.Secondary, h.ArbiterOnly, h.Passive, h.Hidden, h.ElectionID != nil}
		if got != want {
			t.Errorf("member %d: %+v, want %+v", i, got, want)
		}
	}
	if id := hellos[0].ElectionID; id == nil || *id != electionIDOf(1) {
		t.Errorf("the primary's electionId %v, want %v (term 1)", id, electionIDOf(1))
	}
	if !maps.Equal(hellos[0].Tags, map[string]string{"dc": "east"}) || len(hellos[1].Tags) != 0 {
		t.Errorf("tags %v and %v, want {dc: east} and none", hellos[0].Tags, hellos[1].Tags)
	}

	// Legacy hello answers ismaster, not isWritablePrimary.
	h := decodeHello(t, dialRaw(t, m[1]).run(cmd("admin", bson.E{Key: "isMaster", Value: 1})))
	if h.IsMaster == nil || *h.IsMaster || h.IsWritablePrimary != nil || !h.Secondary {
		t.Errorf("isMaster on a secondary: ismaster %v isWritablePrimary %v secondary %v", h.IsMaster, h.IsWritablePrimary, h.Secondary)
	}
}

func TestWithReplicaSetIsOneMemberSet(t *testing.T) {
	srv := start(t, mongotest.WithReplicaSet("solo"))
	h := helloOf(t, srv)
	if h.SetName != "solo" || !slices.Equal(h.Hosts, []string{srv.Addr()}) || h.Primary != srv.Addr() ||
		!*h.IsWritablePrimary || h.ElectionID == nil || h.LastWrite == nil {
		t.Errorf("hello %+v", h)
	}
}

// waitAwaiting waits until n hellos wait on srv for a topology change.
func waitAwaiting(t *testing.T, srv *mongotest.Server, n int64) {
	t.Helper()
	waitFor(t, "awaitable hellos waiting", func() bool { return srv.Stats().HellosAwaiting == n })
}

func TestAwaitableHelloReturnsOnChange(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	r0, r2 := dialRaw(t, m[0]), dialRaw(t, m[2])
	tv0, tv2 := *decodeHello(t, r0.run(helloCmd())).TopologyVersion, *decodeHello(t, r2.run(helloCmd())).TopologyVersion
	id0 := r0.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv0, 600000))}, nil)
	id2 := r2.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv2, 600000))}, nil)
	waitAwaiting(t, m[0], 1)
	waitAwaiting(t, m[2], 1)
	r0.expectSilence()
	if err := rs.StepDown(ctx(t)); err != nil {
		t.Fatalf("StepDown: %v", err)
	}
	for _, c := range []struct {
		r  *rawConn
		id int32
		tv topologyVersion
	}{{r0, id0, tv0}, {r2, id2, tv2}} {
		h, reply := decodeReplyTo(t, c.r, c.id)
		got := decodeHello(t, reply)
		if got.TopologyVersion.ProcessID != c.tv.ProcessID || got.TopologyVersion.Counter != c.tv.Counter+1 {
			t.Errorf("topologyVersion %+v after StepDown, want counter %d", got.TopologyVersion, c.tv.Counter+1)
		}
		if *got.IsWritablePrimary || !got.Secondary || got.Primary != "" || got.ElectionID != nil {
			t.Errorf("hello after StepDown: %+v, want a secondary with no primary", got)
		}
		if h.Flags != 0 {
			t.Errorf("reply flags %v, want none without exhaustAllowed", h.Flags)
		}
	}
	if st := m[0].Stats(); st.AwaitableHellos != 1 || st.HellosAwaiting != 0 {
		t.Errorf("AwaitableHellos %d HellosAwaiting %d, want 1 and 0", st.AwaitableHellos, st.HellosAwaiting)
	}
	if rs.Primary() != nil {
		t.Errorf("Primary() after StepDown is not nil")
	}
	// Member 1's hello changes at the election too: its awaitable hello
	// returns with the new primary.
	r1 := dialRaw(t, m[1])
	tv1 := *decodeHello(t, r1.run(helloCmd())).TopologyVersion
	id1 := r1.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv1, 600000))}, nil)
	waitAwaiting(t, m[1], 1)
	if err := rs.Elect(1); err != nil {
		t.Fatalf("Elect(1): %v", err)
	}
	_, reply := decodeReplyTo(t, r1, id1)
	got := decodeHello(t, reply)
	if !*got.IsWritablePrimary || got.Primary != m[1].Addr() || got.TopologyVersion.Counter != tv1.Counter+1 {
		t.Errorf("member 1 after Elect(1): %+v", got)
	}
	if got.ElectionID == nil || *got.ElectionID != electionIDOf(2) {
		t.Errorf("electionId %v after the second election, want %v", got.ElectionID, electionIDOf(2))
	}
	if rs.Primary() != m[1] {
		t.Errorf("Primary() after Elect(1) is not member 1")
	}
}

// decodeReplyTo reads the reply to the request id.
func decodeReplyTo(t *testing.T, r *rawConn, id int32) (*wire.Msg, bson.Raw) {
	t.Helper()
	h, m, err := wire.DecodeReply(r.read(), 0)
	if err != nil {
		t.Fatalf("decoding: %v", err)
	}
	if h.ResponseTo != id {
		t.Fatalf("responseTo %d, want %d", h.ResponseTo, id)
	}
	return m, m.Body
}

func TestAwaitableHelloAnswersAtOnce(t *testing.T) {
	rs := startRS(t, 2)
	m := rs.Members()
	r := dialRaw(t, m[0])
	tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
	// maxAwaitTimeMS passes with no change: the same topologyVersion.
	if got := decodeHello(t, r.run(awaitableHello(tv, 1))); *got.TopologyVersion != tv {
		t.Errorf("after maxAwaitTimeMS: %+v, want %+v", got.TopologyVersion, tv)
	}
	if got := decodeHello(t, r.run(awaitableHello(tv, 0))); *got.TopologyVersion != tv {
		t.Errorf("maxAwaitTimeMS 0: %+v, want %+v", got.TopologyVersion, tv)
	}
	// Another process's topologyVersion, or an older counter: at once, even
	// with a long maxAwaitTimeMS (the read deadline catches a wait).
	other := topologyVersion{ProcessID: bson.NewObjectID(), Counter: tv.Counter + 5}
	if got := decodeHello(t, r.run(awaitableHello(other, 600000))); *got.TopologyVersion != tv {
		t.Errorf("another processId: %+v", got.TopologyVersion)
	}
	if err := rs.SetLag(0, 0); err != nil { // bumps the counter
		t.Fatal(err)
	}
	if got := decodeHello(t, r.run(awaitableHello(tv, 600000))); got.TopologyVersion.Counter != tv.Counter+1 {
		t.Errorf("an older counter: %+v, want counter %d", got.TopologyVersion, tv.Counter+1)
	}
	if st := m[0].Stats(); st.AwaitableHellos != 4 {
		t.Errorf("AwaitableHellos %d, want 4", st.AwaitableHellos)
	}
}

func TestAwaitableHelloErrors(t *testing.T) {
	rs := startRS(t, 1)
	r := dialRaw(t, rs.Members()[0])
	tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
	e := func(k string, v any) bson.E { return bson.E{Key: k, Value: v} }
	tvDoc := func(fields ...bson.E) bson.E { return e("topologyVersion", bson.D(fields)) }
	pid, counter := e("processId", tv.ProcessID), e("counter", tv.Counter)
	for _, tc := range []struct {
		name   string
		fields []bson.E
		code   int32
	}{
		{"topologyVersion without maxAwaitTimeMS", []bson.E{tvDoc(pid, counter)}, 31368},
		{"maxAwaitTimeMS without topologyVersion", []bson.E{e("maxAwaitTimeMS", int64(0))}, 31368},
		{"a greater counter of this process", []bson.E{tvDoc(pid, e("counter", tv.Counter+1)), e("maxAwaitTimeMS", int64(0))}, 31382},
		{"topologyVersion not a document", []bson.E{e("topologyVersion", "x"), e("maxAwaitTimeMS", int64(0))}, 10065},
		{"processId not an ObjectId", []bson.E{tvDoc(e("processId", "p"), counter), e("maxAwaitTimeMS", int64(0))}, 14},
		{"counter not a long", []bson.E{tvDoc(pid, e("counter", int32(0))), e("maxAwaitTimeMS", int64(0))}, 14},
		{"no counter", []bson.E{tvDoc(pid), e("maxAwaitTimeMS", int64(0))}, 40414},
		{"no processId", []bson.E{tvDoc(counter), e("maxAwaitTimeMS", int64(0))}, 40414},
		{"a negative counter", []bson.E{tvDoc(pid, e("counter", int64(-1))), e("maxAwaitTimeMS", int64(0))}, 31372},
		{"an unknown field", []bson.E{tvDoc(pid, counter, e("x", 1)), e("maxAwaitTimeMS", int64(0))}, 40415},
		{"maxAwaitTimeMS not a number", []bson.E{tvDoc(pid, counter), e("maxAwaitTimeMS", "1")}, 14},
		{"a negative maxAwaitTimeMS", []bson.E{tvDoc(pid, counter), e("maxAwaitTimeMS", int64(-1))}, 31373},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply := r.run(helloCmd(tc.fields...))
			if code, _ := reply.Lookup("code").AsInt64OK(); code != int64(tc.code) || wire.CheckReply(reply) == nil {
				t.Errorf("reply %s, want error code %d", reply, tc.code)
			}
		})
	}
	// exhaustAllowed needs an awaitable hello.
	_, reply := r.roundTrip(&wire.Msg{Flags: wire.ExhaustAllowed, Body: marshal(t, helloCmd())}, nil)
	if code, _ := reply.Lookup("code").AsInt64OK(); code != 51756 {
		t.Errorf("exhaustAllowed on a plain hello: %s, want error 51756", reply)
	}
}

func TestExhaustHelloStreams(t *testing.T) {
	rs := startRS(t, 2)
	m := rs.Members()
	r := dialRaw(t, m[1])
	tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
	id := r.sendMsg(&wire.Msg{Flags: wire.ExhaustAllowed, Body: marshal(t, awaitableHello(tv, 1))}, nil)
	// With nothing changing, a reply each maxAwaitTimeMS, all with
	// moreToCome, each answering the previous one.
	responseTo := id
	for i := range 3 {
		raw := r.read()
		hdr, msg, err := wire.DecodeReply(raw, 0)
		if err != nil {
			t.Fatal(err)
		}
		if hdr.ResponseTo != responseTo || msg.Flags&wire.MoreToCome == 0 {
			t.Fatalf("reply %d: responseTo %d (want %d), flags %v (want moreToCome)", i, hdr.ResponseTo, responseTo, msg.Flags)
		}
		if got := decodeHello(t, msg.Body); *got.TopologyVersion != tv {
			t.Errorf("reply %d: topologyVersion %+v, want %+v", i, got.TopologyVersion, tv)
		}
		responseTo = hdr.RequestID
	}
	if st := m[1].Stats(); st.ExhaustReplies < 3 || st.AwaitableHellos < 3 || st.Commands["hello"] < 4 {
		t.Errorf("stats %+v: want at least 3 exhaust replies, 3 awaitable hellos and 4 hellos", st)
	}
	// A fail point on hello ends the stream with an error reply, without
	// moreToCome; the connection then takes commands again.
	if err := m[1].SetFailPoint(mongotest.FailPoint{Commands: []string{"hello"}, ErrorCode: 10107, Times: 1}); err != nil {
		t.Fatal(err)
	}
	for {
		hdr, msg, err := wire.DecodeReply(r.read(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if hdr.ResponseTo != responseTo {
			t.Fatalf("responseTo %d, want %d", hdr.ResponseTo, responseTo)
		}
		responseTo = hdr.RequestID
		if wire.CheckReply(msg.Body) == nil {
			continue // a reply streamed before the fail point was set
		}
		checkError(t, msg.Body, 10107, "NotWritablePrimary")
		if msg.Flags != 0 {
			t.Errorf("the error reply has flags %v, want none", msg.Flags)
		}
		if msg.Body.Lookup("topologyVersion").Type != bson.TypeEmbeddedDocument {
			t.Errorf("the NotWritablePrimary reply %s has no topologyVersion", msg.Body)
		}
		break
	}
	checkOK(t, r.run(cmd("admin", bson.E{Key: "ping", Value: 1})))
}

func TestExhaustHelloStreamsChanges(t *testing.T) {
	rs := startRS(t, 2)
	m := rs.Members()
	r := dialRaw(t, m[1])
	tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
	r.sendMsg(&wire.Msg{Flags: wire.ExhaustAllowed, Body: marshal(t, awaitableHello(tv, 600000))}, nil)
	for i, change := range []func() error{
		func() error { return rs.StepDown(ctx(t)) },
		func() error { return rs.Elect(1) },
		func() error { return rs.SetLag(1, 0) },
	} {
		waitAwaiting(t, m[1], 1)
		if err := change(); err != nil {
			t.Fatal(err)
		}
		_, msg, err := wire.DecodeReply(r.read(), 0)
		if err != nil {
			t.Fatal(err)
		}
		got := decodeHello(t, msg.Body)
		if msg.Flags&wire.MoreToCome == 0 || got.TopologyVersion.Counter != tv.Counter+int64(i)+1 {
			t.Errorf("change %d: flags %v, topologyVersion %+v", i, msg.Flags, got.TopologyVersion)
		}
		if i == 1 && (!*got.IsWritablePrimary || got.Primary != m[1].Addr()) {
			t.Errorf("after Elect(1), member 1 says %+v", got)
		}
	}
}

// write commands, each of which a secondary refuses.
var writeCommands = []bson.D{
	insertCmd(1),
	cmd("x", bson.E{Key: "update", Value: "c"}, bson.E{Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}}}}}),
	cmd("x", bson.E{Key: "delete", Value: "c"}, bson.E{Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}),
	cmd("x", bson.E{Key: "findAndModify", Value: "c"}, bson.E{Key: "query", Value: bson.D{}}, bson.E{Key: "remove", Value: true}),
	cmd("x", bson.E{Key: "createIndexes", Value: "c"}, bson.E{Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}}}}),
	cmd("x", bson.E{Key: "dropIndexes", Value: "c"}, bson.E{Key: "index", Value: "*"}),
	cmd("x", bson.E{Key: "create", Value: "d"}),
	cmd("x", bson.E{Key: "drop", Value: "c"}),
	cmd("x", bson.E{Key: "dropDatabase", Value: 1}),
}

func TestSecondaryRefusesWrites(t *testing.T) {
	rs := startRS(t, 3, mongotest.WithMember(2, mongotest.Member{Arbiter: true}))
	m := rs.Members()
	p, s, a := dialRaw(t, m[0]), dialRaw(t, m[1]), dialRaw(t, m[2])
	checkOK(t, p.run(insertCmd(7)))
	tv := *decodeHello(t, s.run(helloCmd())).TopologyVersion
	for _, c := range writeCommands {
		for who, r := range map[string]*rawConn{"secondary": s, "arbiter": a} {
			reply := r.run(c)
			if msg := checkError(t, reply, 10107, "NotWritablePrimary"); msg != "not primary" {
				t.Errorf("%s on the %s: errmsg %q", c[0].Key, who, msg)
			}
			if who == "secondary" {
				var got struct {
					TV topologyVersion `bson:"topologyVersion"`
				}
				if err := bson.Unmarshal(reply, &got); err != nil || got.TV != tv {
					t.Errorf("%s on the secondary: topologyVersion %+v (%v), want the member's %+v", c[0].Key, got.TV, err, tv)
				}
			}
		}
	}
	// A retryable write gets RetryableWriteError, so that drivers retry it
	// on the primary.
	reply := s.run(insertCmd(8, bson.E{Key: "lsid", Value: lsid(9)}, bson.E{Key: "txnNumber", Value: int64(1)}))
	checkError(t, reply, 10107, "NotWritablePrimary")
	if got := labelsOf(t, reply); !slices.Equal(got, []string{"RetryableWriteError"}) {
		t.Errorf("labels %v, want RetryableWriteError", got)
	}
	// Reads need a read preference other than primary.
	find := cmd("x", bson.E{Key: "find", Value: "c"})
	if msg := checkError(t, s.run(find), 13435, "NotPrimaryNoSecondaryOk"); msg != "not primary and secondaryOk=false" {
		t.Errorf("errmsg %q", msg)
	}
	checkError(t, s.run(append(find, bson.E{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "primary"}}})), 13435, "NotPrimaryNoSecondaryOk")
	secondaryOK := bson.E{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}}
	reply = s.run(append(find, secondaryOK, bson.E{Key: "batchSize", Value: 0}))
	checkOK(t, reply)
	id := reply.Lookup("cursor", "id").Int64()
	reply = s.run(cmd("x", bson.E{Key: "getMore", Value: id}, bson.E{Key: "collection", Value: "c"}))
	if docs, _ := reply.Lookup("cursor", "nextBatch").Array().Values(); len(docs) != 1 {
		t.Errorf("getMore on the secondary: %s, want the primary's document", reply)
	}
	checkError(t, s.run(append(find, bson.E{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "sometimes"}}})), 2, "BadValue")
	// The arbiter holds no data.
	checkError(t, a.run(append(find, secondaryOK)), 13436, "NotPrimaryOrSecondary")
	checkOK(t, a.run(cmd("admin", bson.E{Key: "ping", Value: 1})))
	// The local database takes writes on any member.
	checkOK(t, s.run(cmd("local", bson.E{Key: "insert", Value: "l"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "a", Value: 1}}}})))
	// An unacknowledged write to a secondary closes the connection.
	s.sendMsg(&wire.Msg{Flags: wire.MoreToCome, Body: marshal(t, insertCmd(9, bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}))}, nil)
	s.expectClosed()
}

func TestStepDownInterruptsWrites(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	if err := m[0].SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, BlockTime: time.Hour, Times: 1}); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, m[0])
	id := r.sendMsg(&wire.Msg{Body: marshal(t, insertCmd(1, bson.E{Key: "lsid", Value: lsid(1)}, bson.E{Key: "txnNumber", Value: int64(1)}))}, nil)
	if err := m[0].WaitForFailPoint(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	if err := rs.StepDown(ctx(t)); err != nil {
		t.Fatalf("StepDown: %v", err)
	}
	_, reply := decodeReplyTo(t, r, id)
	if msg := checkError(t, reply, 11602, "InterruptedDueToReplStateChange"); msg != "operation was interrupted" {
		t.Errorf("errmsg %q", msg)
	}
	if labels := labelsOf(t, reply); !slices.Equal(labels, []string{"RetryableWriteError"}) || reply.Lookup("topologyVersion").Type == 0 {
		t.Errorf("reply %s, want RetryableWriteError and topologyVersion", reply)
	}
	// The connection stays open, as since MongoDB 4.2; the write did not
	// happen, and its retry runs on the new primary.
	checkError(t, r.run(insertCmd(2)), 10107, "NotWritablePrimary")
	if err := rs.StepDown(ctx(t)); err == nil {
		t.Error("StepDown without a primary succeeded")
	}
	if err := rs.Elect(2); err != nil {
		t.Fatal(err)
	}
	p := dialRaw(t, m[2])
	checkOK(t, p.run(insertCmd(1, bson.E{Key: "lsid", Value: lsid(1)}, bson.E{Key: "txnNumber", Value: int64(1)})))
	reply = p.run(cmd("x", bson.E{Key: "count", Value: "c"}))
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 1 {
		t.Errorf("count %s, want 1", reply)
	}
	// A retryable write is remembered across a failover: its retry on
	// another primary gets the first reply rather than a duplicate key.
	if err := rs.StepDown(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := rs.Elect(0); err != nil {
		t.Fatal(err)
	}
	reply = dialRaw(t, m[0]).run(insertCmd(1, bson.E{Key: "lsid", Value: lsid(1)}, bson.E{Key: "txnNumber", Value: int64(1)}))
	checkOK(t, reply)
	if reply.Lookup("writeErrors").Type != 0 {
		t.Errorf("the retry on the new primary: %s, want the first reply", reply)
	}
	if id := helloOf(t, m[0]).ElectionID; id == nil || *id != electionIDOf(3) {
		t.Errorf("electionId %v after 3 elections, want %v", id, electionIDOf(3))
	}
}

func TestElectRefuses(t *testing.T) {
	rs := startRS(t, 4, mongotest.WithMember(2, mongotest.Member{Passive: true}), mongotest.WithMember(3, mongotest.Member{Arbiter: true}))
	for _, tc := range []struct {
		i    int
		want string
	}{{-1, "no member -1"}, {4, "no member 4"}, {0, "already primary"}, {2, "passive"}, {3, "arbiter"}} {
		if err := rs.Elect(tc.i); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Elect(%d): %v, want an error saying %q", tc.i, err, tc.want)
		}
	}
	if err := rs.Stop(1); err != nil {
		t.Fatal(err)
	}
	if err := rs.Elect(1); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("Elect of a stopped member: %v", err)
	}
	for name, err := range map[string]error{
		"Stop twice":        rs.Stop(1),
		"Restart a running": rs.Restart(0),
		"Heal":              rs.Heal(0),
		"SetLag <0":         rs.SetLag(0, -time.Second),
		"SetLag arbiter":    rs.SetLag(3, time.Second),
	} {
		if err == nil {
			t.Errorf("%s succeeded", name)
		}
	}
}

func TestStartReplicaSetRefuses(t *testing.T) {
	for name, start := range map[string]func() (*mongotest.ReplicaSet, error){
		"no name":    func() (*mongotest.ReplicaSet, error) { return mongotest.StartReplicaSet("", 3) },
		"no member":  func() (*mongotest.ReplicaSet, error) { return mongotest.StartReplicaSet("rs", 0) },
		"51 members": func() (*mongotest.ReplicaSet, error) { return mongotest.StartReplicaSet("rs", 51) },
		"member 3 of 3": func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 3, mongotest.WithMember(3, mongotest.Member{}))
		},
		"arbiter with tags": func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 2, mongotest.WithMember(1, mongotest.Member{Arbiter: true, Tags: map[string]string{"a": "b"}}))
		},
		"no electable member": func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 1, mongotest.WithMember(0, mongotest.Member{Passive: true}))
		},
		"load balanced": func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 1, mongotest.WithLoadBalanced(bson.ObjectID{}))
		},
	} {
		if rs, err := start(); err == nil {
			rs.Close()
			t.Errorf("%s: started", name)
		}
	}
	if _, err := mongotest.Start(mongotest.WithMember(0, mongotest.Member{})); err == nil {
		t.Error("Start with WithMember but no replica set succeeded")
	}
}

func TestStopAndRestart(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	before := helloOf(t, m[1])
	r1 := dialRaw(t, m[1])
	r2 := dialRaw(t, m[2])
	tv2 := *decodeHello(t, r2.run(helloCmd())).TopologyVersion
	if err := rs.Stop(1); err != nil {
		t.Fatal(err)
	}
	r1.expectClosed()
	if nc, err := net.DialTimeout("tcp", m[1].Addr(), 5*time.Second); err == nil {
		nc.Close()
		t.Fatal("a stopped member accepted a connection")
	}
	// Stopping a secondary changes no other member's hello.
	if got := decodeHello(t, r2.run(helloCmd())); *got.TopologyVersion != tv2 {
		t.Errorf("member 2's topologyVersion %+v after Stop(1), want %+v", got.TopologyVersion, tv2)
	}
	if err := rs.Restart(1); err != nil {
		t.Fatal(err)
	}
	after := helloOf(t, m[1])
	if after.TopologyVersion.ProcessID == before.TopologyVersion.ProcessID || after.TopologyVersion.Counter != 0 {
		t.Errorf("topologyVersion %+v after Restart, want a new processId and counter 0 (was %+v)", after.TopologyVersion, before.TopologyVersion)
	}
	if !after.Secondary || after.Primary != m[0].Addr() {
		t.Errorf("member 1 after Restart: %+v", after)
	}
	// Stopping the primary leaves the set without one: the others' hellos
	// change.
	if err := rs.Stop(0); err != nil {
		t.Fatal(err)
	}
	if got := decodeHello(t, r2.run(helloCmd())); got.Primary != "" || got.TopologyVersion.Counter != tv2.Counter+1 {
		t.Errorf("member 2 after Stop(0): %+v", got)
	}
	if rs.Primary() != nil {
		t.Error("Primary() with the primary stopped is not nil")
	}
	// A port that is taken makes Restart fail clearly.
	ln, err := net.Listen("tcp", m[0].Addr())
	if err != nil {
		t.Fatalf("taking the port of the stopped member: %v", err)
	}
	if err := rs.Restart(0); err == nil || !strings.Contains(err.Error(), m[0].Addr()) {
		t.Errorf("Restart on a taken port: %v, want an error naming %s", err, m[0].Addr())
	}
	ln.Close()
	if err := rs.Restart(0); err != nil {
		t.Fatal(err)
	}
	if got := helloOf(t, m[0]); !got.Secondary || got.Primary != "" {
		t.Errorf("the old primary after Restart: %+v, want a secondary of a set without primary", got)
	}
	if err := rs.Elect(0); err != nil {
		t.Fatal(err)
	}
	checkOK(t, dialRaw(t, m[0]).run(insertCmd(1)))
}

func TestPartitionAndHeal(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	old := dialRaw(t, m[0])
	checkOK(t, old.run(cmd("admin", bson.E{Key: "ping", Value: 1})))
	tv0 := *decodeHello(t, old.run(helloCmd())).TopologyVersion
	if err := rs.Partition(0); err != nil {
		t.Fatal(err)
	}
	if err := rs.Partition(0); err == nil {
		t.Error("Partition twice succeeded")
	}
	pingID := old.sendMsg(&wire.Msg{Body: marshal(t, cmd("admin", bson.E{Key: "ping", Value: 1}))}, nil)
	fresh := dialRaw(t, m[0]) // accepted, never answered
	helloID := fresh.sendMsg(&wire.Msg{Body: marshal(t, helloCmd())}, nil)
	old.expectSilence()
	fresh.expectSilence()
	// The others elect a new primary; the partitioned member does not hear
	// of it and keeps its state.
	if err := rs.Elect(1); err != nil {
		t.Fatal(err)
	}
	if got := helloOf(t, m[2]); got.Primary != m[1].Addr() {
		t.Errorf("member 2 after Elect(1): primary %q", got.Primary)
	}
	if rs.Primary() != m[1] {
		t.Error("Primary() is not member 1")
	}
	if err := rs.Heal(0); err != nil {
		t.Fatal(err)
	}
	_, reply := decodeReplyTo(t, old, pingID)
	checkOK(t, reply)
	_, reply = decodeReplyTo(t, fresh, helloID)
	got := decodeHello(t, reply)
	if *got.IsWritablePrimary || got.Primary != m[1].Addr() || got.TopologyVersion.Counter != tv0.Counter+1 {
		t.Errorf("the old primary after Heal: %+v, want a secondary that learned of member 1", got)
	}
	checkError(t, old.run(insertCmd(1)), 10107, "NotWritablePrimary")
}

func TestSetLag(t *testing.T) {
	rs := startRS(t, 2)
	m := rs.Members()
	if err := rs.SetLag(1, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	checkOK(t, dialRaw(t, m[0]).run(insertCmd(1)))
	p, s := helloOf(t, m[0]), helloOf(t, m[1])
	if lag := p.LastWrite.LastWriteDate.Sub(s.LastWrite.LastWriteDate); lag != 90*time.Second {
		t.Errorf("the secondary's lastWriteDate trails by %v, want 90s", lag)
	}
	if p.LastWrite.OpTime.TS.T-s.LastWrite.OpTime.TS.T != 90 {
		t.Errorf("opTimes %v and %v, want 90 s apart", p.LastWrite.OpTime, s.LastWrite.OpTime)
	}
	if s.TopologyVersion.Counter != 1 {
		t.Errorf("counter %d after SetLag, want 1", s.TopologyVersion.Counter)
	}
	// A write moves the primary's lastWrite on.
	checkOK(t, dialRaw(t, m[0]).run(insertCmd(2)))
	if p2 := helloOf(t, m[0]); !p2.LastWrite.OpTime.TS.After(p.LastWrite.OpTime.TS) {
		t.Errorf("opTime %v after a write, was %v", p2.LastWrite.OpTime, p.LastWrite.OpTime)
	}
}

// TestReplicaSetCloseEndsEverything checks that Close returns, and leaves
// no goroutine, with hellos awaiting, a stream, a partitioned member with
// connections held, and a stopped member.
func TestReplicaSetCloseEndsEverything(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs0", 4)
	if err != nil {
		t.Fatal(err)
	}
	m := rs.Members()
	for i := range 3 {
		r := dialRaw(t, m[i])
		tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
		flags := wire.Flag(0)
		if i == 1 {
			flags = wire.ExhaustAllowed
		}
		r.sendMsg(&wire.Msg{Flags: flags, Body: marshal(t, awaitableHello(tv, 600000))}, nil)
		waitAwaiting(t, m[i], 1)
	}
	if err := rs.Partition(2); err != nil {
		t.Fatal(err)
	}
	dialRaw(t, m[2]).sendMsg(&wire.Msg{Body: marshal(t, helloCmd())}, nil)
	if err := rs.Stop(3); err != nil {
		t.Fatal(err)
	}
	closeAndCheck(t, rs) // within testTimeout, and no goroutine left
	if err := rs.Restart(3); err == nil {
		t.Error("Restart after Close succeeded")
	}
	if err := rs.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// TestAwaitableHelloEndsWhenClientLeaves checks that a hello waiting for a
// change ends when the client hangs up, as mongod's does, rather than
// holding the connection until maxAwaitTimeMS.
func TestAwaitableHelloEndsWhenClientLeaves(t *testing.T) {
	rs := startRS(t, 1)
	srv := rs.Members()[0]
	r := dialRaw(t, srv)
	tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
	r.sendMsg(&wire.Msg{Flags: wire.ExhaustAllowed, Body: marshal(t, awaitableHello(tv, 600000))}, nil)
	waitAwaiting(t, srv, 1)
	r.nc.Close()
	waitFor(t, "the connection to close", func() bool { return srv.Stats().ConnectionsOpen == 0 })
	if n := srv.Stats().HellosAwaiting; n != 0 {
		t.Errorf("HellosAwaiting %d, want 0", n)
	}
}

// TestStepDownHonoursContext checks that StepDown with a context already
// over does nothing.
func TestStepDownHonoursContext(t *testing.T) {
	rs := startRS(t, 2)
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if err := rs.StepDown(c); !errors.Is(err, context.Canceled) {
		t.Errorf("StepDown with a canceled context: %v, want context.Canceled", err)
	}
	if rs.Primary() != rs.Members()[0] {
		t.Error("StepDown with a canceled context stepped the primary down")
	}
}

// TestAwaitableHelloOverTLS checks that a connection over TLS takes
// commands after awaitable hellos, which read it while they wait (to see
// the client hang up) and stop that read with a deadline.
func TestAwaitableHelloOverTLS(t *testing.T) {
	pki := testpki.New(t)
	rs := startRS(t, 1, mongotest.WithTLS(pki.ServerTLS()))
	r := dialRawTLS(t, rs.Members()[0], &tls.Config{RootCAs: pki.CAPool, ServerName: "127.0.0.1"})
	tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
	for range 3 {
		if got := decodeHello(t, r.run(awaitableHello(tv, 1))); *got.TopologyVersion != tv {
			t.Fatalf("topologyVersion %+v, want %+v", got.TopologyVersion, tv)
		}
		checkOK(t, r.run(cmd("admin", bson.E{Key: "ping", Value: 1})))
	}
	// A request sent while the server waits is kept for after the reply.
	id := r.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv, 600000))}, nil)
	waitAwaiting(t, rs.Members()[0], 1)
	pingID := r.sendMsg(&wire.Msg{Body: marshal(t, cmd("admin", bson.E{Key: "ping", Value: 1}))}, nil)
	if err := rs.SetLag(0, time.Second); err != nil {
		t.Fatal(err)
	}
	_, reply := decodeReplyTo(t, r, id)
	if got := decodeHello(t, reply); got.TopologyVersion.Counter != tv.Counter+1 {
		t.Errorf("topologyVersion %+v after SetLag", got.TopologyVersion)
	}
	_, reply = decodeReplyTo(t, r, pingID)
	checkOK(t, reply)
}

// A fail point set on hello ends the wait of an awaitable hello, so that it
// applies from the next hello at once; one on another command does not.
func TestAwaitableHelloEndsWhenAHelloFailPointIsSet(t *testing.T) {
	rs := startRS(t, 1)
	m := rs.Members()[0]
	r := dialRaw(t, m)
	tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
	id := r.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv, 600000))}, nil)
	waitAwaiting(t, m, 1)
	if err := m.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 2}); err != nil {
		t.Fatal(err)
	}
	r.expectSilence()
	if err := m.SetFailPoint(mongotest.FailPoint{Commands: []string{"hello"}, AppName: "other", CloseConnection: true}); err != nil {
		t.Fatal(err)
	}
	_, reply := decodeReplyTo(t, r, id)
	if got := decodeHello(t, reply); got.TopologyVersion.Counter != tv.Counter {
		t.Errorf("topologyVersion %+v, want the same as before", got.TopologyVersion)
	}
}

// A member of a replica set older than 4.4 reports no topologyVersion, in
// its hellos or its state change errors, and answers an awaitable hello at
// once, as mongod 4.2 does: clients poll it.
func TestPre44MemberHasNoTopologyVersion(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs", 1, mongotest.WithWireVersions(0, 8))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	srv := rs.Primary()
	r := dialRaw(t, srv)
	tv := topologyVersion{ProcessID: bson.NewObjectID(), Counter: 0}
	reply := r.run(awaitableHello(tv, 600000)) // mongod 4.4 would wait 10 minutes
	checkOK(t, reply)
	if _, err := reply.LookupErr("topologyVersion"); err == nil {
		t.Fatalf("a 4.2 member's hello has a topologyVersion: %s", reply)
	}
	if w, ok := reply.Lookup("isWritablePrimary").BooleanOK(); !ok || !w {
		t.Fatalf("the primary's hello: %s", reply)
	}
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1, ErrorCode: 10107}); err != nil {
		t.Fatal(err)
	}
	reply = r.run(cmd("db", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{}}}))
	if _, err := reply.LookupErr("topologyVersion"); err == nil {
		t.Fatalf("a 4.2 member's NotWritablePrimary error has a topologyVersion: %s", reply)
	}
}
