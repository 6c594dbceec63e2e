package topology

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/handshake"
)

// rsWithPrimary returns a replica set whose primary a:27017 has topology
// version (pid, 1).
func rsWithPrimary(t *testing.T, pid bson.ObjectID) Description {
	t.Helper()
	d, err := newDescription(Settings{Seeds: []string{"a:27017"}, ReplicaSet: "rs"})
	if err != nil {
		t.Fatal(err)
	}
	u := d.apply(newServerDescription("a:27017", hello(t, bson.D{
		{Key: "isWritablePrimary", Value: true}, {Key: "setName", Value: "rs"},
		{Key: "hosts", Value: bson.A{"a:27017"}}, {Key: "maxWireVersion", Value: 21},
		{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: pid}, {Key: "counter", Value: int64(1)}}},
	}), time.Millisecond, testNow))
	if u.Description.Type != ReplicaSetWithPrimary {
		t.Fatalf("setup: %s", u.Description.Type)
	}
	return u.Description
}

func loadBalanced(t *testing.T) Description {
	t.Helper()
	d, err := newDescription(Settings{Seeds: []string{"lb:27017"}, LoadBalanced: true})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDecideAppError: the decisions of the "Error handling" rules that the
// specification's test files do not reach: the authentication phase, the
// backpressure label, load-balanced topologies, and what each decision asks
// of the caller besides the Unknown description.
func TestDecideAppError(t *testing.T) {
	pid := bson.ObjectID{9}
	rs := rsWithPrimary(t, pid)
	lb := loadBalanced(t)
	svc := bson.ObjectID{7}
	newer := &handshake.TopologyVersion{ProcessID: pid, Counter: 2}
	boom := errors.New("boom")
	type want struct {
		unknown, clear, request, cancel bool
		service                         *bson.ObjectID
	}
	for _, c := range []struct {
		name string
		d    Description
		gen  uint64
		e    appError
		want want
	}{
		{"network error after the handshake", rs, 0,
			appError{Address: "a:27017", Kind: kindNetwork, Phase: afterHandshake, Err: boom},
			want{unknown: true, clear: true, cancel: true}},
		{"network error while authenticating", rs, 0,
			appError{Address: "a:27017", Kind: kindNetwork, Phase: duringAuth, Err: boom},
			want{unknown: true, clear: true, cancel: true}},
		{"timeout while authenticating", rs, 0,
			appError{Address: "a:27017", Kind: kindTimeout, Phase: duringAuth, Err: boom},
			want{unknown: true, clear: true, cancel: true}},
		{"authentication failed", rs, 0,
			appError{Address: "a:27017", Kind: kindCommand, Phase: duringAuth, Code: 18, Message: "Authentication failed.", Err: boom},
			want{unknown: true, clear: true, cancel: true}},
		{"hello failed on an application connection", rs, 0,
			appError{Address: "a:27017", Kind: kindCommand, Phase: beforeHandshake, Code: 8000, Err: boom},
			want{unknown: true, clear: true, cancel: true}},
		{"overloaded while authenticating", rs, 0,
			appError{Address: "a:27017", Kind: kindCommand, Phase: duringAuth, Code: 462, SystemOverloaded: true, Err: boom},
			want{}},
		{"overloaded network error", rs, 0,
			appError{Address: "a:27017", Kind: kindNetwork, Phase: duringAuth, SystemOverloaded: true, Err: boom},
			want{}},
		{"network error before the hello's reply", rs, 0,
			appError{Address: "a:27017", Kind: kindNetwork, Phase: beforeHandshake, Err: boom},
			want{}},
		{"timeout after the handshake", rs, 0,
			appError{Address: "a:27017", Kind: kindTimeout, Phase: afterHandshake, Err: boom},
			want{}},
		{"other command error", rs, 0,
			appError{Address: "a:27017", Kind: kindCommand, Phase: afterHandshake, Code: 11000, Message: "duplicate key", Err: boom},
			want{}},
		{"not writable primary", rs, 0,
			appError{Address: "a:27017", Kind: kindCommand, Phase: afterHandshake, Code: 10107, TopologyVersion: newer, Err: boom},
			want{unknown: true, request: true}},
		{"shutting down", rs, 0,
			appError{Address: "a:27017", Kind: kindCommand, Phase: afterHandshake, Code: 91, TopologyVersion: newer, Err: boom},
			want{unknown: true, clear: true, request: true}},
		{"state change by message", rs, 0,
			appError{Address: "a:27017", Kind: kindCommand, Phase: afterHandshake, Message: "not master", Err: boom},
			want{unknown: true, request: true}},
		{"state change with a stale generation", rs, 1,
			appError{Address: "a:27017", Kind: kindCommand, Phase: afterHandshake, Code: 91, Generation: 0, Err: boom},
			want{}},
		{"server not in the topology", rs, 0,
			appError{Address: "z:27017", Kind: kindNetwork, Phase: afterHandshake, Err: boom},
			want{}},
		{"load-balanced network error", lb, 0,
			appError{Address: "lb:27017", Kind: kindNetwork, Phase: afterHandshake, ServiceID: &svc, Err: boom},
			want{clear: true, service: &svc}},
		{"load-balanced authentication failure", lb, 0,
			appError{Address: "lb:27017", Kind: kindCommand, Phase: duringAuth, Code: 18, ServiceID: &svc, Err: boom},
			want{clear: true, service: &svc}},
		{"load-balanced error before the hello's reply", lb, 0,
			appError{Address: "lb:27017", Kind: kindCommand, Phase: beforeHandshake, Code: 8000, Err: boom},
			want{}},
		{"load-balanced network error without serviceId", lb, 0,
			appError{Address: "lb:27017", Kind: kindNetwork, Phase: afterHandshake, Err: boom},
			want{}},
		{"load-balanced shutting down", lb, 0,
			appError{Address: "lb:27017", Kind: kindCommand, Phase: afterHandshake, Code: 11600, ServiceID: &svc, Err: boom},
			want{clear: true, service: &svc}},
		{"load-balanced not writable primary", lb, 0,
			appError{Address: "lb:27017", Kind: kindCommand, Phase: afterHandshake, Code: 10107, ServiceID: &svc, Err: boom},
			want{}},
		{"load-balanced stale generation", lb, 3,
			appError{Address: "lb:27017", Kind: kindNetwork, Phase: afterHandshake, Generation: 2, ServiceID: &svc, Err: boom},
			want{}},
	} {
		got := c.d.decideAppError(c.gen, c.e)
		g := want{got.MarkUnknown, got.Clear, got.RequestCheck, got.CancelCheck, got.ServiceID}
		if g.unknown != c.want.unknown || g.clear != c.want.clear || g.request != c.want.request || g.cancel != c.want.cancel ||
			!ptrEqual(g.service, c.want.service) || got.InterruptInUse || got.CheckAgainNow {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
			continue
		}
		ignored := !got.MarkUnknown && !got.Clear
		if ignored != (got.Reason != "") {
			t.Errorf("%s: reason %q for a decision that ignores the error: %v", c.name, got.Reason, ignored)
		}
		if got.MarkUnknown {
			s := got.Server
			if s.Address != c.e.Address || s.Type != ServerUnknown || s.Error != boom || !ptrEqual(s.TopologyVersion, c.e.TopologyVersion) {
				t.Errorf("%s: Unknown server %+v", c.name, s)
			}
		}
	}
}

// TestDecideCheckError: a failed check marks the server Unknown and clears its
// pool, interrupting the connections in use after a timeout, and checks
// again at once after a network error on a server that was known.
func TestDecideCheckError(t *testing.T) {
	rs := rsWithPrimary(t, bson.ObjectID{9})
	boom := errors.New("boom")
	for _, c := range []struct {
		name                string
		d                   Description
		addr                string
		kind                errorKind
		interrupt, againNow bool
		ignored             bool
	}{
		{"network error, known server", rs, "a:27017", kindNetwork, false, true, false},
		{"timeout, known server", rs, "a:27017", kindTimeout, true, true, false},
		{"command error, known server", rs, "a:27017", kindCommand, false, false, false},
		{"network error, Unknown server", rs.apply(unknownServer("a:27017", boom)).Description, "a:27017", kindNetwork, false, false, false},
		{"server not in the topology", rs, "z:27017", kindNetwork, false, false, true},
		{"load-balanced", loadBalanced(t), "lb:27017", kindNetwork, false, false, true},
	} {
		got := c.d.decideCheckError(c.addr, c.kind, boom)
		if c.ignored {
			if got.MarkUnknown || got.Clear || got.Reason == "" {
				t.Errorf("%s: %+v, want ignored with a reason", c.name, got)
			}
			continue
		}
		if !got.MarkUnknown || got.Server.Type != ServerUnknown || got.Server.Error != boom || got.Server.Address != c.addr ||
			!got.Clear || got.InterruptInUse != c.interrupt || got.CheckAgainNow != c.againNow ||
			got.RequestCheck || got.CancelCheck || got.ServiceID != nil {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

// TestReplyError: the error a reply carries for the rules, from ok: 0 or a
// writeConcernError, with its topologyVersion and backpressure label; none
// from writeErrors or a successful reply.
func TestReplyError(t *testing.T) {
	pid := bson.ObjectID{4}
	tv := bson.D{{Key: "processId", Value: pid}, {Key: "counter", Value: int64(3)}}
	for _, c := range []struct {
		name      string
		reply     bson.D
		ok        bool
		code      int32
		msg       string
		hasTV     bool
		overload  bool
		stateChg  bool
		shutdown  bool
		errSubstr string
	}{
		{"ok 0", bson.D{{Key: "ok", Value: 0.0}, {Key: "code", Value: int32(91)}, {Key: "errmsg", Value: "shutting down"}, {Key: "topologyVersion", Value: tv}},
			true, 91, "shutting down", true, false, true, true, "server error: shutting down (code 91)"},
		{"writeConcernError", bson.D{{Key: "ok", Value: 1.0}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(189)}, {Key: "errmsg", Value: "stepped down"}}}},
			true, 189, "stepped down", false, false, true, false, "write concern error: server error: stepped down (code 189)"},
		{"writeConcernError with its own topologyVersion", bson.D{{Key: "ok", Value: 1.0}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(11602)}, {Key: "errmsg", Value: "x"}, {Key: "topologyVersion", Value: tv}}}},
			true, 11602, "x", true, false, true, false, "write concern error"},
		{"message only: not master or secondary", bson.D{{Key: "ok", Value: 0}, {Key: "errmsg", Value: "not master or secondary; no query"}},
			true, 0, "not master or secondary; no query", false, false, true, false, ""},
		{"message only: unrelated", bson.D{{Key: "ok", Value: 0}, {Key: "errmsg", Value: "bad"}},
			true, 0, "bad", false, false, false, false, ""},
		{"code wins over message", bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int32(2)}, {Key: "errmsg", Value: "node is recovering"}},
			true, 2, "node is recovering", false, false, false, false, ""},
		{"overloaded", bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int32(462)}, {Key: "errorLabels", Value: bson.A{"RetryableError", "SystemOverloadedError"}}},
			true, 462, "", false, true, false, false, ""},
		{"writeErrors only", bson.D{{Key: "ok", Value: 1}, {Key: "writeErrors", Value: bson.A{bson.D{{Key: "code", Value: int32(10107)}, {Key: "errmsg", Value: "x"}}}}},
			false, 0, "", false, false, false, false, ""},
		{"success", bson.D{{Key: "ok", Value: 1}}, false, 0, "", false, false, false, false, ""},
	} {
		raw, _ := bson.Marshal(c.reply)
		e, ok := replyError("a:27017", raw)
		if ok != c.ok {
			t.Errorf("%s: found %v, want %v", c.name, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if e.Address != "a:27017" || e.Kind != kindCommand || e.Code != c.code || e.Message != c.msg ||
			(e.TopologyVersion != nil) != c.hasTV || e.SystemOverloaded != c.overload ||
			isStateChange(e.Code, e.Message) != c.stateChg || isShutdown(e.Code) != c.shutdown ||
			!strings.Contains(e.Err.Error(), c.errSubstr) {
			t.Errorf("%s: %+v (%v)", c.name, e, e.Err)
		}
		if c.hasTV && *e.TopologyVersion != (handshake.TopologyVersion{ProcessID: pid, Counter: 3}) {
			t.Errorf("%s: topologyVersion %+v", c.name, *e.TopologyVersion)
		}
	}
	if _, ok := replyError("a:27017", bson.Raw{1, 2}); ok {
		t.Error("a malformed reply has an error")
	}
}

// TestIsStateChange: the specification's classification of errors, by code
// when there is one, by message only when there is none.
func TestIsStateChange(t *testing.T) {
	for _, c := range []struct {
		name           string
		code           int32
		msg            string
		change, shutdn bool
	}{
		{"NotWritablePrimary", 10107, "", true, false},
		{"NotPrimaryNoSecondaryOk", 13435, "", true, false},
		{"LegacyNotPrimary", 10058, "", true, false},
		{"InterruptedDueToReplStateChange", 11602, "", true, false},
		{"NotPrimaryOrSecondary", 13436, "", true, false},
		{"PrimarySteppedDown", 189, "", true, false},
		{"ShutdownInProgress", 91, "", true, true},
		{"InterruptedAtShutdown", 11600, "", true, true},
		{"another code, a telling message", 2, "not master", false, false},
		{"no code: node is recovering", 0, "node is recovering", true, false},
		{"no code: not master or secondary", 0, "not master or secondary; cannot currently read", true, false},
		{"no code: not master", 0, "not master", true, false},
		{"no code, another message", 0, "something else", false, false},
	} {
		if got := isStateChange(c.code, c.msg); got != c.change {
			t.Errorf("%s: isStateChange = %v, want %v", c.name, got, c.change)
		}
		if got := isShutdown(c.code); got != c.shutdn {
			t.Errorf("%s: isShutdown = %v, want %v", c.name, got, c.shutdn)
		}
	}
}
