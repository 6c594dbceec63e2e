package mongopool

import (
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/wire"
)

// The specification's classification of errors: by code when there is one,
// by message only when there is none; a writeConcernError counts; errors in
// writeErrors do not.
func TestStateChangeOf(t *testing.T) {
	pid := bson.NewObjectID()
	tv := bson.D{{Key: "processId", Value: pid}, {Key: "counter", Value: int64(7)}}
	for _, tc := range []struct {
		name       string
		err        error
		reply      bson.D
		want       bool
		shutdown   bool
		hasVersion bool
	}{
		{name: "NotWritablePrimary", err: &wire.CommandError{Code: 10107}, want: true},
		{name: "NotPrimaryNoSecondaryOk", err: &wire.CommandError{Code: 13435}, want: true},
		{name: "LegacyNotPrimary", err: &wire.CommandError{Code: 10058}, want: true},
		{name: "InterruptedDueToReplStateChange", err: &wire.CommandError{Code: 11602}, want: true},
		{name: "NotPrimaryOrSecondary", err: &wire.CommandError{Code: 13436}, want: true},
		{name: "PrimarySteppedDown", err: &wire.CommandError{Code: 189}, want: true},
		{name: "ShutdownInProgress", err: &wire.CommandError{Code: 91}, want: true, shutdown: true},
		{name: "InterruptedAtShutdown", err: fmt.Errorf("wrapped: %w", &wire.CommandError{Code: 11600}), want: true, shutdown: true},
		{name: "another code, a telling message", err: &wire.CommandError{Code: 2, Message: "not master"}},
		{name: "no code: node is recovering", err: &wire.CommandError{Message: "node is recovering"}, want: true},
		{name: "no code: not master or secondary", err: &wire.CommandError{Message: "not master or secondary; cannot currently read"}, want: true},
		{name: "no code: not master", err: &wire.CommandError{Message: "not master"}, want: true},
		{name: "no code, another message", err: &wire.CommandError{Message: "something else"}},
		{name: "not a server error", err: errors.New("not master")},
		{name: "topologyVersion kept", err: &wire.CommandError{Code: 91, Raw: mustRaw(t, bson.D{{Key: "ok", Value: 0}, {Key: "topologyVersion", Value: tv}})},
			want: true, shutdown: true, hasVersion: true},
		{name: "writeConcernError", reply: bson.D{{Key: "ok", Value: 1}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 11600}, {Key: "errmsg", Value: "x"}}}},
			want: true, shutdown: true},
		{name: "writeConcernError without code", reply: bson.D{{Key: "ok", Value: 1}, {Key: "writeConcernError", Value: bson.D{{Key: "errmsg", Value: "node is recovering"}}}},
			want: true},
		{name: "writeErrors are not checked", reply: bson.D{{Key: "ok", Value: 1}, {Key: "writeErrors", Value: bson.A{bson.D{{Key: "code", Value: 10107}}}}}},
		{name: "a plain reply", reply: bson.D{{Key: "ok", Value: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reply bson.Raw
			if tc.reply != nil {
				reply = mustRaw(t, tc.reply)
			}
			sc, ok := stateChangeOf(tc.err, reply)
			if ok != tc.want || sc.shutdown != tc.shutdown || (sc.version != nil) != tc.hasVersion {
				t.Fatalf("stateChangeOf = %+v, %v; want state change %v, shutdown %v, version %v", sc, ok, tc.want, tc.shutdown, tc.hasVersion)
			}
			if tc.hasVersion && (sc.version.ProcessID != pid || sc.version.Counter != 7) {
				t.Fatalf("version %+v", sc.version)
			}
		})
	}
}

// A successful reply without a writeConcernError, the common case, costs
// no allocation to check.
func TestStateChangeOfPlainReplyAllocatesNothing(t *testing.T) {
	reply := mustRaw(t, bson.D{{Key: "ok", Value: 1.0}, {Key: "n", Value: 1}})
	if n := testing.AllocsPerRun(100, func() { stateChangeOf(nil, reply) }); n != 0 {
		t.Fatalf("%v allocations per reply", n)
	}
}

// An error's topologyVersion no newer than the server's is stale; one from
// another process, or with a greater counter, is not; without both, nothing
// is stale.
func TestStaleVersion(t *testing.T) {
	a, b := bson.NewObjectID(), bson.NewObjectID()
	cur := &handshake.TopologyVersion{ProcessID: a, Counter: 5}
	for _, tc := range []struct {
		errV *handshake.TopologyVersion
		cur  *handshake.TopologyVersion
		want bool
	}{
		{&handshake.TopologyVersion{ProcessID: a, Counter: 4}, cur, true},
		{&handshake.TopologyVersion{ProcessID: a, Counter: 5}, cur, true},
		{&handshake.TopologyVersion{ProcessID: a, Counter: 6}, cur, false},
		{&handshake.TopologyVersion{ProcessID: b, Counter: 1}, cur, false},
		{nil, cur, false},
		{&handshake.TopologyVersion{ProcessID: a, Counter: 1}, nil, false},
	} {
		if got := staleVersion(tc.cur, tc.errV); got != tc.want {
			t.Errorf("staleVersion(%+v, %+v) = %v, want %v", tc.cur, tc.errV, got, tc.want)
		}
	}
}

func mustRaw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
