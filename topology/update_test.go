package topology

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func primaryReply(t *testing.T, eid byte, setVersion int32, hosts ...string) bson.Raw {
	t.Helper()
	h := bson.A{}
	for _, a := range hosts {
		h = append(h, a)
	}
	return hello(t, bson.D{
		{Key: "isWritablePrimary", Value: true}, {Key: "setName", Value: "rs"}, {Key: "hosts", Value: h},
		{Key: "electionId", Value: bson.ObjectID{11: eid}}, {Key: "setVersion", Value: setVersion},
		{Key: "maxWireVersion", Value: 21},
	})
}

// TestApplyReportsChanges: an update tells the servers it added and
// removed, the old primary whose monitor must check it now, and leaves the
// Description it was applied to as it was.
func TestApplyReportsChanges(t *testing.T) {
	d0, err := newDescription(Settings{Seeds: []string{"a:1", "b:1", "x:1"}, ReplicaSet: "rs"})
	if err != nil {
		t.Fatal(err)
	}
	u1 := d0.apply(newServerDescription("a:1", primaryReply(t, 1, 1, "a:1", "b:1", "c:1"), time.Millisecond, testNow))
	if !u1.Applied || !slices.Equal(u1.Added, []string{"c:1"}) || !slices.Equal(u1.Removed, []string{"x:1"}) || len(u1.CheckNow) != 0 {
		t.Fatalf("first primary: applied %v, added %v, removed %v, check now %v", u1.Applied, u1.Added, u1.Removed, u1.CheckNow)
	}
	if _, ok := d0.Server("x:1"); !ok || d0.Len() != 3 || d0.Type != ReplicaSetNoPrimary {
		t.Fatal("Apply changed the Description it was applied to")
	}
	u2 := u1.Description.apply(newServerDescription("b:1", primaryReply(t, 2, 1, "a:1", "b:1"), time.Millisecond, testNow))
	if !slices.Equal(u2.CheckNow, []string{"a:1"}) || !slices.Equal(u2.Removed, []string{"c:1"}) || len(u2.Added) != 0 {
		t.Fatalf("new primary: check now %v, removed %v, added %v", u2.CheckNow, u2.Removed, u2.Added)
	}
	old, _ := u2.Description.Server("a:1")
	if old.Type != ServerUnknown || old.Error == nil || !strings.Contains(old.Error.Error(), newerPrimary) {
		t.Errorf("old primary: %s, %v", old.Type, old.Error)
	}
	if a, _ := u1.Description.Server("a:1"); a.Type != RSPrimary {
		t.Error("Apply changed the Description it was applied to")
	}

	// The old primary, still claiming to be one with its older electionId,
	// is stale: Unknown, with both tuples in the error.
	u3 := u2.Description.apply(newServerDescription("a:1", primaryReply(t, 1, 1, "a:1", "b:1"), time.Millisecond, testNow))
	want := staleMismatchPrefix + ", (electionId 000000000000000000000001, setVersion 1) is stale compared to (electionId 000000000000000000000002, setVersion 1)"
	if u3.Server.Type != ServerUnknown || u3.Server.Error == nil || !strings.Contains(u3.Server.Error.Error(), want) {
		t.Errorf("stale primary: %s, %v; want an error containing %q", u3.Server.Type, u3.Server.Error, want)
	}
}

// TestApplyIgnores: descriptions of servers not in the topology, of older
// topology versions, and of the wrong kind for a load-balanced topology
// change nothing.
func TestApplyIgnores(t *testing.T) {
	d, _ := newDescription(Settings{Seeds: []string{"a:1"}})
	lb, _ := newDescription(Settings{Seeds: []string{"lb:1"}, LoadBalanced: true})
	for _, c := range []struct {
		name string
		d    Description
		s    ServerDescription
	}{
		{"not in the topology", d, unknownServer("z:1", nil)},
		{"LoadBalancer outside a load-balanced topology", d, loadBalancerServer("a:1")},
		{"Unknown in a load-balanced topology", lb, unknownServer("lb:1", errors.New("x"))},
		{"Standalone in a load-balanced topology", lb, newServerDescription("lb:1", hello(t, bson.D{{Key: "isWritablePrimary", Value: true}}), 0, testNow)},
	} {
		u := c.d.apply(c.s)
		if u.Applied || !u.Description.Equal(c.d) || u.events(bson.ObjectID{}) != nil {
			t.Errorf("%s: applied %v", c.name, u.Applied)
		}
	}
}

// TestSingleKeepsFailedCheck: with TopologyType Single and a required set
// name, a failed check's Unknown description keeps its own error, and a
// wrong set name gives one that says so.
func TestSingleKeepsFailedCheck(t *testing.T) {
	d, _ := newDescription(Settings{Seeds: []string{"a:1"}, DirectConnection: true, ReplicaSet: "rs"})
	boom := errors.New("boom")
	if u := d.apply(unknownServer("a:1", boom)); u.Server.Error != boom {
		t.Errorf("failed check: error %v, want %v", u.Server.Error, boom)
	}
	u := d.apply(newServerDescription("a:1", hello(t, bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "setName", Value: "other"}}), 0, testNow))
	if u.Description.Type != Single || u.Server.Type != ServerUnknown || u.Server.Error == nil ||
		!strings.Contains(u.Server.Error.Error(), `replica set name "other", not the "rs" required`) {
		t.Errorf("wrong set name: %s %s %v", u.Description.Type, u.Server.Type, u.Server.Error)
	}
}

// TestSingleRequiresSetName: with TopologyType Single and a required set
// name, a server that reports none (a standalone, a ghost) is Unknown too.
func TestSingleRequiresSetName(t *testing.T) {
	d, _ := newDescription(Settings{Seeds: []string{"a:1"}, DirectConnection: true, ReplicaSet: "rs"})
	for _, reply := range []bson.D{
		{{Key: "isWritablePrimary", Value: true}},
		{{Key: "isreplicaset", Value: true}},
	} {
		u := d.apply(newServerDescription("a:1", hello(t, reply), 0, testNow))
		if u.Server.Type != ServerUnknown || u.Server.Error == nil || !strings.Contains(u.Server.Error.Error(), `replica set name "", not the "rs" required`) {
			t.Errorf("%v: %s, %v", reply, u.Server.Type, u.Server.Error)
		}
	}
}

// TestMemberWithMismatchedMe: with a primary known, a member whose me is
// not the address it was reached by is removed (it is monitored under its
// configured address), and the primary stays.
func TestMemberWithMismatchedMe(t *testing.T) {
	d, _ := newDescription(Settings{Seeds: []string{"a:1"}, ReplicaSet: "rs"})
	d = d.apply(newServerDescription("a:1", primaryReply(t, 1, 1, "a:1", "b:1", "c:1"), 0, testNow)).Description
	u := d.apply(newServerDescription("b:1", hello(t, bson.D{{Key: "secondary", Value: true}, {Key: "setName", Value: "rs"},
		{Key: "hosts", Value: bson.A{"a:1", "c:1"}}, {Key: "me", Value: "c:1"}, {Key: "maxWireVersion", Value: 21}}), 0, testNow))
	if !slices.Equal(u.Removed, []string{"b:1"}) || u.Description.Type != ReplicaSetWithPrimary || u.Description.Len() != 2 {
		t.Errorf("removed %v, %s with %d servers; want b:1 removed, the primary kept", u.Removed, u.Description.Type, u.Description.Len())
	}
}
