package topology

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// eventString shows an event briefly, for comparisons.
func eventString(e Event) string {
	switch e := e.(type) {
	case *TopologyOpening:
		return "TopologyOpening"
	case *TopologyClosed:
		return "TopologyClosed"
	case *ServerOpening:
		return "ServerOpening " + e.Address
	case *ServerClosed:
		return "ServerClosed " + e.Address
	case *ServerDescriptionChanged:
		return fmt.Sprintf("ServerDescriptionChanged %s %s->%s", e.Address, e.Previous.Type, e.New.Type)
	case *TopologyDescriptionChanged:
		return fmt.Sprintf("TopologyDescriptionChanged %s(%d)->%s(%d)", e.Previous.Type, e.Previous.Len(), e.New.Type, e.New.Len())
	}
	return fmt.Sprintf("%T", e)
}

func eventsString(t *testing.T, id bson.ObjectID, events []Event) string {
	t.Helper()
	var out []string
	for _, e := range events {
		var got bson.ObjectID
		switch e := e.(type) {
		case *TopologyOpening:
			got = e.TopologyID
		case *TopologyClosed:
			got = e.TopologyID
		case *ServerOpening:
			got = e.TopologyID
		case *ServerClosed:
			got = e.TopologyID
		case *ServerDescriptionChanged:
			got = e.TopologyID
		case *TopologyDescriptionChanged:
			got = e.TopologyID
		}
		if got != id {
			t.Errorf("%s has topology id %s, want %s", eventString(e), got.Hex(), id.Hex())
		}
		out = append(out, eventString(e))
	}
	return strings.Join(out, "; ")
}

// TestOpenAndCloseEvents: the events of a topology's opening and closing,
// in the specification's order, load-balanced included.
func TestOpenAndCloseEvents(t *testing.T) {
	id := bson.NewObjectID()
	for _, c := range []struct {
		name        string
		s           Settings
		open, close string
	}{
		{"replica set", Settings{Seeds: []string{"b:1", "a:1"}, ReplicaSet: "rs"},
			"TopologyOpening; TopologyDescriptionChanged Unknown(0)->ReplicaSetNoPrimary(2); ServerOpening a:1; ServerOpening b:1",
			"ServerClosed a:1; ServerClosed b:1; TopologyDescriptionChanged ReplicaSetNoPrimary(2)->Unknown(0); TopologyClosed"},
		{"load-balanced", Settings{Seeds: []string{"lb:1"}, LoadBalanced: true},
			"TopologyOpening; TopologyDescriptionChanged Unknown(0)->LoadBalanced(1); ServerOpening lb:1; " +
				"ServerDescriptionChanged lb:1 Unknown->LoadBalancer; TopologyDescriptionChanged LoadBalanced(1)->LoadBalanced(1)",
			"ServerClosed lb:1; TopologyDescriptionChanged LoadBalanced(1)->Unknown(0); TopologyClosed"},
	} {
		d, events, err := openEvents(id, c.s)
		if err != nil {
			t.Fatal(err)
		}
		if got := eventsString(t, id, events); got != c.open {
			t.Errorf("%s: opening\n got %s\nwant %s", c.name, got, c.open)
		}
		want, _ := newDescription(c.s)
		if !d.Equal(want) {
			t.Errorf("%s: Open's description differs from newDescription's", c.name)
		}
		closed, events := closeEvents(id, d)
		if got := eventsString(t, id, events); got != c.close {
			t.Errorf("%s: closing\n got %s\nwant %s", c.name, got, c.close)
		}
		if closed.Type != TopologyUnknown || closed.Len() != 0 {
			t.Errorf("%s: closed description %s with %d servers", c.name, closed.Type, closed.Len())
		}
	}
	if _, _, err := openEvents(id, Settings{}); err == nil {
		t.Error("Open without seeds succeeded")
	}
}

// TestUpdateEvents: the events of updates: a server description change
// only for the server applied, closings and openings for the servers
// removed and added, and nothing for an update that changes nothing.
func TestUpdateEvents(t *testing.T) {
	id := bson.NewObjectID()
	d, _, _ := openEvents(id, Settings{Seeds: []string{"a:1", "x:1"}})
	secondary := hello(t, bson.D{{Key: "secondary", Value: true}, {Key: "setName", Value: "rs"},
		{Key: "hosts", Value: bson.A{"a:1", "b:1"}}, {Key: "primary", Value: "b:1"}, {Key: "maxWireVersion", Value: 21}})
	u := d.apply(newServerDescription("a:1", secondary, time.Millisecond, testNow))
	want := "ServerDescriptionChanged a:1 Unknown->RSSecondary; ServerOpening b:1; TopologyDescriptionChanged Unknown(2)->ReplicaSetNoPrimary(3)"
	if got := eventsString(t, id, u.events(id)); got != want {
		t.Errorf("secondary:\n got %s\nwant %s", got, want)
	}
	if b, _ := u.Description.Server("b:1"); b.Type != PossiblePrimary {
		t.Errorf("b:1 is %s, want the PossiblePrimary hint", b.Type)
	}
	// The same reply again, a second later: nothing to publish.
	again := u.Description.apply(newServerDescription("a:1", secondary, 2*time.Millisecond, testNow.Add(time.Second)))
	if !again.Applied || len(again.events(id)) != 0 {
		t.Errorf("same reply: applied %v, events %s", again.Applied, eventsString(t, id, again.events(id)))
	}
	primary := hello(t, bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "setName", Value: "rs"},
		{Key: "hosts", Value: bson.A{"b:1", "c:1"}}, {Key: "maxWireVersion", Value: 21}})
	u = again.Description.apply(newServerDescription("b:1", primary, time.Millisecond, testNow))
	want = "ServerDescriptionChanged b:1 PossiblePrimary->RSPrimary; ServerClosed a:1; ServerClosed x:1; ServerOpening c:1; " +
		"TopologyDescriptionChanged ReplicaSetNoPrimary(3)->ReplicaSetWithPrimary(2)"
	if got := eventsString(t, id, u.events(id)); got != want {
		t.Errorf("primary:\n got %s\nwant %s", got, want)
	}
}
