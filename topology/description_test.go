package topology

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/handshake"
)

// TestNewDescription: the initial TopologyType by the specification's
// table, the seeds normalized, and the combinations it forbids refused.
func TestNewDescription(t *testing.T) {
	for _, c := range []struct {
		name     string
		s        Settings
		want     TopologyType
		servers  string
		srvType  ServerType
		setName  string
		errSubst string
	}{
		{"one seed", Settings{Seeds: []string{"a:1"}}, TopologyUnknown, "a:1", ServerUnknown, "", ""},
		{"seeds lower-cased, sorted, deduplicated", Settings{Seeds: []string{"B:1", "a:1", "b:1"}}, TopologyUnknown, "a:1,b:1", ServerUnknown, "", ""},
		{"replicaSet", Settings{Seeds: []string{"a:1", "b:1"}, ReplicaSet: "rs"}, ReplicaSetNoPrimary, "a:1,b:1", ServerUnknown, "rs", ""},
		{"directConnection", Settings{Seeds: []string{"a:1"}, DirectConnection: true}, Single, "a:1", ServerUnknown, "", ""},
		{"directConnection and replicaSet", Settings{Seeds: []string{"a:1"}, DirectConnection: true, ReplicaSet: "rs"}, Single, "a:1", ServerUnknown, "rs", ""},
		{"loadBalanced", Settings{Seeds: []string{"lb:1"}, LoadBalanced: true}, LoadBalanced, "lb:1", LoadBalancer, "", ""},
		{"no seeds", Settings{}, 0, "", 0, "", "no seeds"},
		{"directConnection with two seeds", Settings{Seeds: []string{"a:1", "b:1"}, DirectConnection: true}, 0, "", 0, "", "directConnection requires exactly one seed, not 2"},
		{"loadBalanced with two seeds", Settings{Seeds: []string{"a:1", "b:1"}, LoadBalanced: true}, 0, "", 0, "", "loadBalanced requires exactly one seed, not 2"},
		{"loadBalanced and directConnection", Settings{Seeds: []string{"a:1"}, LoadBalanced: true, DirectConnection: true}, 0, "", 0, "", "loadBalanced cannot be used with directConnection"},
		{"loadBalanced and replicaSet", Settings{Seeds: []string{"a:1"}, LoadBalanced: true, ReplicaSet: "rs"}, 0, "", 0, "", "loadBalanced cannot be used with replicaSet"},
	} {
		d, err := newDescription(c.s)
		if c.errSubst != "" {
			if !errors.Is(err, ErrInvalidSettings) || !strings.Contains(err.Error(), c.errSubst) {
				t.Errorf("%s: %v, want an error containing %q", c.name, err, c.errSubst)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var addrs []string
		for _, s := range d.Servers() {
			addrs = append(addrs, s.Address)
			if s.Type != c.srvType {
				t.Errorf("%s: server %s is %s, want %s", c.name, s.Address, s.Type, c.srvType)
			}
		}
		if d.Type != c.want || strings.Join(addrs, ",") != c.servers || d.SetName != c.setName || !d.Compatible() ||
			d.LogicalSessionTimeoutMinutes != nil || d.MaxElectionID != nil || d.MaxSetVersion != nil {
			t.Errorf("%s: %s %v %q, want %s %s %q", c.name, d.Type, addrs, d.SetName, c.want, c.servers, c.setName)
		}
	}
}

// TestCompatibilityError: the topology's compatibility errors are the
// handshake's for the same server, word for word, and wrap
// handshake.ErrIncompatible; unknown servers do not count.
func TestCompatibilityError(t *testing.T) {
	for _, c := range []struct {
		name     string
		min, max int32
	}{
		{"too old", 0, handshake.MinWireVersion - 1},
		{"too new", handshake.MaxWireVersion + 1, handshake.MaxWireVersion + 5},
	} {
		reply := hello(t, bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "msg", Value: "isdbgrid"},
			{Key: "minWireVersion", Value: c.min}, {Key: "maxWireVersion", Value: c.max}})
		_, want := handshake.Parse(reply, handshake.Options{Address: "b:27017"})
		if !errors.Is(want, handshake.ErrIncompatible) {
			t.Fatalf("%s: handshake.Parse: %v, want an incompatibility", c.name, want)
		}
		d, _ := newDescription(Settings{Seeds: []string{"a:27017", "b:27017"}})
		d = d.apply(newServerDescription("a:27017", hello(t, bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "msg", Value: "isdbgrid"},
			{Key: "maxWireVersion", Value: 21}}), time.Millisecond, testNow)).Description
		if !d.Compatible() {
			t.Fatalf("%s: a compatible mongos makes the topology incompatible: %v", c.name, d.CompatibilityError)
		}
		d = d.apply(newServerDescription("b:27017", reply, time.Millisecond, testNow)).Description
		if d.Compatible() || d.CompatibilityError.Error() != want.Error() || !errors.Is(d.CompatibilityError, handshake.ErrIncompatible) {
			t.Errorf("%s: %v, want %q", c.name, d.CompatibilityError, want)
		}
		d = d.apply(unknownServer("b:27017", errors.New("gone"))).Description
		if !d.Compatible() {
			t.Errorf("%s: an Unknown server is incompatible: %v", c.name, d.CompatibilityError)
		}
	}
}
