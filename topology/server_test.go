package topology

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/internal/testkit"
	"github.com/mongopool/mongopool/wire"
)

// hello marshals a reply for the tests; ok: 1 is added unless the document
// has an ok of its own.
func hello(t testing.TB, d bson.D) bson.Raw {
	t.Helper()
	hasOK := false
	for _, e := range d {
		hasOK = hasOK || e.Key == "ok"
	}
	if !hasOK {
		d = append(d, bson.E{Key: "ok", Value: 1.0})
	}
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

var testNow = time.Unix(1700000000, 0)

// TestServerType: the type of each kind of reply, by the specification's
// table, and isWritablePrimary taking precedence over the legacy ismaster.
func TestServerType(t *testing.T) {
	for _, c := range []struct {
		name  string
		reply bson.D
		want  ServerType
	}{
		{"standalone", bson.D{{Key: "isWritablePrimary", Value: true}}, Standalone},
		{"legacy standalone", bson.D{{Key: "ismaster", Value: true}}, Standalone},
		{"mongos", bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "msg", Value: "isdbgrid"}}, Mongos},
		{"primary", bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "setName", Value: "rs"}}, RSPrimary},
		{"legacy primary", bson.D{{Key: "ismaster", Value: true}, {Key: "setName", Value: "rs"}}, RSPrimary},
		{"isWritablePrimary false wins over ismaster true",
			bson.D{{Key: "isWritablePrimary", Value: false}, {Key: "ismaster", Value: true}, {Key: "secondary", Value: true}, {Key: "setName", Value: "rs"}}, RSSecondary},
		{"secondary", bson.D{{Key: "secondary", Value: true}, {Key: "setName", Value: "rs"}}, RSSecondary},
		{"hidden secondary", bson.D{{Key: "secondary", Value: true}, {Key: "hidden", Value: true}, {Key: "setName", Value: "rs"}}, RSOther},
		{"arbiter", bson.D{{Key: "arbiterOnly", Value: true}, {Key: "setName", Value: "rs"}}, RSArbiter},
		{"other", bson.D{{Key: "setName", Value: "rs"}}, RSOther},
		{"ghost", bson.D{{Key: "isreplicaset", Value: true}}, RSGhost},
		{"ghost with a setName", bson.D{{Key: "isreplicaset", Value: true}, {Key: "setName", Value: "rs"}}, RSGhost},
		{"msg not a string", bson.D{{Key: "msg", Value: 1}}, Standalone},
	} {
		s := newServerDescription("a:27017", hello(t, c.reply), time.Millisecond, testNow)
		if s.Type != c.want || s.Error != nil {
			t.Errorf("%s: %s (%v), want %s", c.name, s.Type, s.Error, c.want)
		}
	}
}

// TestNewServerDescriptionFields: every field is read, host names are
// lower-cased, the member lists sorted without duplicates, null is absent,
// and a check's round trip time and time are kept.
func TestNewServerDescriptionFields(t *testing.T) {
	eid := bson.ObjectID{1}
	pid := bson.ObjectID{2}
	sid := bson.ObjectID{3}
	date := time.UnixMilli(1700000000123).UTC()
	s := newServerDescription("a:27017", hello(t, bson.D{
		{Key: "isWritablePrimary", Value: true},
		{Key: "setName", Value: "rs"},
		{Key: "hosts", Value: bson.A{"B:27017", "A:27017", "b:27017"}},
		{Key: "passives", Value: bson.A{"[FE80::1%Eth0]:27017"}},
		{Key: "arbiters", Value: bson.A{"C:27017"}},
		{Key: "me", Value: "A:27017"},
		{Key: "primary", Value: "A:27017"},
		{Key: "tags", Value: bson.D{{Key: "dc", Value: "east"}}},
		{Key: "electionId", Value: eid},
		{Key: "setVersion", Value: int32(3)},
		{Key: "minWireVersion", Value: int32(0)},
		{Key: "maxWireVersion", Value: int32(21)},
		{Key: "lastWrite", Value: bson.D{{Key: "lastWriteDate", Value: bson.NewDateTimeFromTime(date)}, {Key: "opTime", Value: bson.D{{Key: "t", Value: int64(1)}}}}},
		{Key: "logicalSessionTimeoutMinutes", Value: int32(30)},
		{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: pid}, {Key: "counter", Value: int64(7)}}},
		{Key: "iscryptd", Value: true},
		{Key: "serviceId", Value: sid},
		{Key: "helloOk", Value: true},
	}), 5*time.Millisecond, testNow)
	if s.Error != nil || s.Type != RSPrimary {
		t.Fatalf("%s, %v", s.Type, s.Error)
	}
	check := func(name string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %+v", name, s)
		}
	}
	check("hosts", strings.Join(s.Hosts, ",") == "a:27017,b:27017")
	check("passives (zone keeps its case)", strings.Join(s.Passives, ",") == "[fe80::1%Eth0]:27017")
	check("arbiters", strings.Join(s.Arbiters, ",") == "c:27017")
	check("me", s.Me == "a:27017")
	check("primary", s.Primary == "a:27017")
	check("tags", len(s.Tags) == 1 && s.Tags["dc"] == "east")
	check("electionId", s.ElectionID != nil && *s.ElectionID == eid)
	check("setVersion", s.SetVersion != nil && *s.SetVersion == 3)
	check("wire versions", s.MinWireVersion == 0 && s.MaxWireVersion == 21)
	check("lastWriteDate", s.LastWriteDate.Equal(date))
	check("opTime", s.OpTime.Type == bson.TypeEmbeddedDocument)
	check("logicalSessionTimeoutMinutes", s.LogicalSessionTimeoutMinutes != nil && *s.LogicalSessionTimeoutMinutes == 30)
	check("topologyVersion", s.TopologyVersion != nil && *s.TopologyVersion == handshake.TopologyVersion{ProcessID: pid, Counter: 7})
	check("iscryptd", s.IsCryptd)
	check("serviceId", s.ServiceID != nil && *s.ServiceID == sid)
	check("helloOk", s.HelloOK)
	check("round trip time", s.HasRoundTripTime && s.RoundTripTime == 5*time.Millisecond)
	check("lastUpdateTime", s.LastUpdateTime.Equal(testNow))

	nulls := newServerDescription("a:27017", hello(t, bson.D{
		{Key: "isWritablePrimary", Value: true},
		{Key: "setVersion", Value: nil},
		{Key: "electionId", Value: nil},
		{Key: "logicalSessionTimeoutMinutes", Value: nil},
	}), time.Millisecond, testNow)
	if nulls.Error != nil || nulls.SetVersion != nil || nulls.ElectionID != nil || nulls.LogicalSessionTimeoutMinutes != nil {
		t.Errorf("nulls: %+v", nulls)
	}
}

// TestNewServerDescriptionRefuses: a failed or malformed reply gives an
// Unknown server with an error that says why.
func TestNewServerDescriptionRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		reply bson.Raw
		want  string // in the error
		cmd   bool   // a *CommandError
	}{
		{"ok 0", hello(t, bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "boom"}, {Key: "code", Value: int32(8000)}, {Key: "codeName", Value: "AtlasError"}}), "server error: (AtlasError) boom (code 8000)", true},
		{"ok false", hello(t, bson.D{{Key: "ok", Value: false}}), "server error: command failed", true},
		{"no ok", func() bson.Raw { r, _ := bson.Marshal(bson.D{{Key: "isWritablePrimary", Value: true}}); return r }(), "no ok field", false},
		{"ok a string", hello(t, bson.D{{Key: "ok", Value: "1"}}), "ok is a string", false},
		{"not BSON", bson.Raw{5, 0, 0, 0, 1}, "malformed BSON", false},
		{"empty", nil, "malformed BSON", false},
		{"setName a number", hello(t, bson.D{{Key: "setName", Value: 1}}), "setName is a 32-bit integer, not a string", false},
		{"hosts a string", hello(t, bson.D{{Key: "hosts", Value: "a:1"}}), "hosts is a string, not an array", false},
		{"host a number", hello(t, bson.D{{Key: "hosts", Value: bson.A{"a:1", 2}}}), "hosts[1] is a 32-bit integer, not a string", false},
		{"electionId a string", hello(t, bson.D{{Key: "electionId", Value: "x"}}), "electionId is a string, not an ObjectId", false},
		{"setVersion fractional", hello(t, bson.D{{Key: "setVersion", Value: 1.5}}), "setVersion is a double, not an integer", false},
		{"negative wire version", hello(t, bson.D{{Key: "maxWireVersion", Value: -1}}), "maxWireVersion is not an integer from 0", false},
		{"wire versions upside down", hello(t, bson.D{{Key: "minWireVersion", Value: 9}, {Key: "maxWireVersion", Value: 8}}), "minWireVersion 9 is greater than maxWireVersion 8", false},
		{"topologyVersion without counter", hello(t, bson.D{{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: bson.ObjectID{}}}}}), "topologyVersion.counter is missing", false},
		{"tag not a string", hello(t, bson.D{{Key: "tags", Value: bson.D{{Key: "dc", Value: 1}}}}), `tag "dc" is a 32-bit integer`, false},
		{"isWritablePrimary a number", hello(t, bson.D{{Key: "isWritablePrimary", Value: 1}}), "isWritablePrimary is a 32-bit integer, not a boolean", false},
		{"lastWriteDate a string", hello(t, bson.D{{Key: "lastWrite", Value: bson.D{{Key: "lastWriteDate", Value: "x"}}}}), "lastWriteDate is a string, not a date", false},
	} {
		s := newServerDescription("a:27017", c.reply, time.Millisecond, testNow)
		if s.Type != ServerUnknown || s.Error == nil || !strings.Contains(s.Error.Error(), c.want) {
			t.Errorf("%s: %s, %v; want Unknown with an error containing %q", c.name, s.Type, s.Error, c.want)
			continue
		}
		var ce *wire.CommandError
		if errors.As(s.Error, &ce) != c.cmd || !c.cmd && !errors.Is(s.Error, ErrInvalidReply) {
			t.Errorf("%s: error %v: a *CommandError %v, want %v (else ErrInvalidReply)", c.name, s.Error, !c.cmd, c.cmd)
		}
		if s.HasRoundTripTime || !s.LastUpdateTime.Equal(testNow) {
			t.Errorf("%s: a failed check has a round trip time, or no update time: %+v", c.name, s)
		}
	}
}

// TestNewServerDescriptionBounds: a reply past each bound is refused, with
// an error naming the bound, and a reply just within is accepted.
func TestNewServerDescriptionBounds(t *testing.T) {
	hosts := func(n int) bson.A {
		a := bson.A{}
		for i := range n {
			a = append(a, "h"+strconv.Itoa(i)+":27017")
		}
		return a
	}
	tags := func(n int) bson.D {
		d := bson.D{}
		for i := range n {
			d = append(d, bson.E{Key: "t" + strconv.Itoa(i), Value: "v"})
		}
		return d
	}
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, c := range []struct {
		name      string
		fit, over bson.D
		want      string
	}{
		{"members",
			bson.D{{Key: "hosts", Value: hosts(200)}, {Key: "passives", Value: hosts(56)}},
			bson.D{{Key: "hosts", Value: hosts(200)}, {Key: "arbiters", Value: hosts(57)}},
			"hosts, passives and arbiters have more than 256 entries"},
		{"tags", bson.D{{Key: "tags", Value: tags(256)}}, bson.D{{Key: "tags", Value: tags(257)}}, "tags has more than 256 entries"},
		{"address", bson.D{{Key: "me", Value: long(300)}}, bson.D{{Key: "me", Value: long(301)}}, "me of 301 bytes is longer than the limit of 300"},
		{"host", bson.D{{Key: "hosts", Value: bson.A{long(300)}}}, bson.D{{Key: "hosts", Value: bson.A{long(301)}}}, "hosts[0] of 301 bytes is longer than the limit of 300"},
		{"setName", bson.D{{Key: "setName", Value: long(1024)}}, bson.D{{Key: "setName", Value: long(1025)}}, "setName of 1025 bytes is longer than the limit of 1024"},
		{"tag value", bson.D{{Key: "tags", Value: bson.D{{Key: "k", Value: long(1024)}}}}, bson.D{{Key: "tags", Value: bson.D{{Key: "k", Value: long(1025)}}}}, "longer than the limit of 1024 bytes"},
		{"opTime", bson.D{{Key: "lastWrite", Value: bson.D{{Key: "opTime", Value: long(1000)}}}}, bson.D{{Key: "lastWrite", Value: bson.D{{Key: "opTime", Value: long(1100)}}}}, "opTime of 1105 bytes is longer than the limit of 1024"},
	} {
		if s := newServerDescription("a:1", hello(t, c.fit), 0, testNow); s.Error != nil {
			t.Errorf("%s: a reply within the bound is refused: %v", c.name, s.Error)
		}
		s := newServerDescription("a:1", hello(t, c.over), 0, testNow)
		if s.Type != ServerUnknown || !errors.Is(s.Error, ErrInvalidReply) || !strings.Contains(s.Error.Error(), c.want) {
			t.Errorf("%s: %s, %v; want Unknown with an error containing %q", c.name, s.Type, s.Error, c.want)
		}
	}
	big := make(bson.Raw, handshake.MaxReplySize+1)
	if s := newServerDescription("a:1", big, 0, testNow); !errors.Is(s.Error, ErrInvalidReply) || !strings.Contains(s.Error.Error(), "more than the") {
		t.Errorf("oversized reply: %v", s.Error)
	}
}

// TestNewServerDescriptionHostileReplies: replies of megabytes, with half a
// million hosts, tags or top-level fields, cost far less memory than their
// size.
func TestNewServerDescriptionHostileReplies(t *testing.T) {
	const n = 500_000
	manyHosts := testkit.HugeArrayHello("hosts", n, func(i int) string { return "h" + strconv.Itoa(i) + ":27017" })
	manyFields := func() bson.Raw {
		di, doc := bsoncore.AppendDocumentStart(nil)
		for i := range n {
			doc = bsoncore.AppendInt32Element(doc, "f"+strconv.Itoa(i), int32(i))
		}
		doc = bsoncore.AppendDoubleElement(doc, "ok", 1)
		doc, _ = bsoncore.AppendDocumentEnd(doc, di)
		return bson.Raw(doc)
	}()
	manyTags := func() bson.Raw {
		ti, tags := bsoncore.AppendDocumentStart(nil)
		for i := range n {
			tags = bsoncore.AppendStringElement(tags, "t"+strconv.Itoa(i), "v")
		}
		tags, _ = bsoncore.AppendDocumentEnd(tags, ti)
		di, doc := bsoncore.AppendDocumentStart(nil)
		doc = bsoncore.AppendDocumentElement(doc, "tags", tags)
		doc = bsoncore.AppendDoubleElement(doc, "ok", 1)
		doc, _ = bsoncore.AppendDocumentEnd(doc, di)
		return bson.Raw(doc)
	}()
	const budget = 1 << 20
	for _, c := range []struct {
		name    string
		reply   bson.Raw
		refused bool
	}{{"hosts", manyHosts, true}, {"top-level fields", manyFields, false}, {"tags", manyTags, true}} {
		var s ServerDescription
		got := testkit.Allocated(func() { s = newServerDescription("a:1", c.reply, 0, testNow) })
		if (s.Error != nil) != c.refused {
			t.Errorf("%s: error %v, want refused %v", c.name, s.Error, c.refused)
		}
		t.Logf("%s: %d-byte reply, %d bytes allocated", c.name, len(c.reply), got)
		if got > budget {
			t.Errorf("%s: %d bytes allocated for a %d-byte reply", c.name, got, len(c.reply))
		}
	}
}

// TestEqual: each field the specification marks (=) makes descriptions
// differ; round trip times, update times and the fields it does not mark do
// not; member lists compare as sets; errors by their messages.
func TestEqual(t *testing.T) {
	eid, pid := bson.ObjectID{1}, bson.ObjectID{2}
	v, w := int64(1), int64(2)
	base := ServerDescription{
		Address: "a:1", Type: RSPrimary, MinWireVersion: 0, MaxWireVersion: 21, Me: "a:1",
		Hosts: []string{"a:1", "b:1"}, Passives: []string{"c:1"}, Arbiters: []string{"d:1"},
		Tags: map[string]string{"dc": "east"}, SetName: "rs", ElectionID: &eid, SetVersion: &v,
		Primary: "a:1", LogicalSessionTimeoutMinutes: &v,
		TopologyVersion: &handshake.TopologyVersion{ProcessID: pid, Counter: 1},
	}
	if !base.Equal(base) {
		t.Fatal("a description differs from itself")
	}
	for name, change := range map[string]func(*ServerDescription){
		"address":       func(s *ServerDescription) { s.Address = "b:1" },
		"type":          func(s *ServerDescription) { s.Type = RSSecondary },
		"error":         func(s *ServerDescription) { s.Error = errors.New("x") },
		"minWire":       func(s *ServerDescription) { s.MinWireVersion = 1 },
		"maxWire":       func(s *ServerDescription) { s.MaxWireVersion = 20 },
		"me":            func(s *ServerDescription) { s.Me = "b:1" },
		"hosts":         func(s *ServerDescription) { s.Hosts = []string{"a:1"} },
		"passives":      func(s *ServerDescription) { s.Passives = nil },
		"arbiters":      func(s *ServerDescription) { s.Arbiters = []string{"e:1"} },
		"tags":          func(s *ServerDescription) { s.Tags = map[string]string{"dc": "west"} },
		"setName":       func(s *ServerDescription) { s.SetName = "other" },
		"electionId":    func(s *ServerDescription) { s.ElectionID = &pid },
		"no electionId": func(s *ServerDescription) { s.ElectionID = nil },
		"setVersion":    func(s *ServerDescription) { s.SetVersion = &w },
		"primary":       func(s *ServerDescription) { s.Primary = "" },
		"lstm":          func(s *ServerDescription) { s.LogicalSessionTimeoutMinutes = nil },
		"tv counter":    func(s *ServerDescription) { s.TopologyVersion = &handshake.TopologyVersion{ProcessID: pid, Counter: 2} },
		"tv process":    func(s *ServerDescription) { s.TopologyVersion = &handshake.TopologyVersion{ProcessID: eid, Counter: 1} },
		"iscryptd":      func(s *ServerDescription) { s.IsCryptd = true },
	} {
		o := base
		change(&o)
		if base.Equal(o) || o.Equal(base) {
			t.Errorf("%s: a change leaves the descriptions equal", name)
		}
	}
	same := base
	same.RoundTripTime, same.HasRoundTripTime, same.MinRoundTripTime = time.Second, true, time.Millisecond
	same.LastUpdateTime = testNow
	same.LastWriteDate = testNow
	same.HelloOK = true
	same.Hosts = []string{"b:1", "a:1"}
	v2 := v
	same.SetVersion = &v2 // equal values behind other pointers
	if !base.Equal(same) {
		t.Error("times, helloOk or the order of hosts make descriptions differ")
	}
	e1 := unknownServer("a:1", errors.New("boom"))
	e2 := unknownServer("a:1", errors.New("boom"))
	if !e1.Equal(e2) {
		t.Error("errors with the same message make descriptions differ")
	}
}
