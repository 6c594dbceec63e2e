package topology

import (
	"context"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connstring"
)

// The hosts of the SRV polling tests: localhost.test.build.10gen.cc on
// ports 27017 to 27020.
const (
	srv17 = "localhost.test.build.10gen.cc:27017"
	srv18 = "localhost.test.build.10gen.cc:27018"
	srv19 = "localhost.test.build.10gen.cc:27019"
	srv20 = "localhost.test.build.10gen.cc:27020"
)

func mongosHello() bson.D {
	return bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "msg", Value: "isdbgrid"},
		{Key: "minWireVersion", Value: 0}, {Key: "maxWireVersion", Value: 21}}
}

// shardedOf returns a Sharded topology of mongoses at seeds, all checked.
func shardedOf(t *testing.T, seeds ...string) Description {
	t.Helper()
	d, err := newDescription(Settings{Seeds: seeds})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range seeds {
		d = d.apply(newServerDescription(a, hello(t, mongosHello()), time.Millisecond, time.Now())).Description
	}
	if d.Type != Sharded {
		t.Fatalf("the mongoses make a %v topology", d.Type)
	}
	return d
}

// srvUpdateString shows what an update did: the servers removed and added,
// and the topology after, each server with its type.
func srvUpdateString(u update) string {
	var servers []string
	for _, sd := range u.Description.Servers() {
		servers = append(servers, sd.Address+"="+sd.Type.String())
	}
	return "removed " + strings.Join(u.Removed, ",") + "; added " + strings.Join(u.Added, ",") +
		"; " + u.Description.Type.String() + " " + strings.Join(servers, " ")
}

// TestApplySRV runs the SRV polling specification's prose tests 1 to 5, 10
// and 11 on the rule alone: the hosts found are added as Unknown servers,
// those gone are removed, and those still there keep their descriptions.
func TestApplySRV(t *testing.T) {
	for _, tc := range []struct {
		name        string
		hosts       []string
		srvMaxHosts int
		want        string
	}{
		{"1. a record added", []string{srv17, srv18, srv19}, 0,
			"removed ; added " + srv19 + "; Sharded " + srv17 + "=Mongos " + srv18 + "=Mongos " + srv19 + "=Unknown"},
		{"2. a record removed", []string{srv17}, 0,
			"removed " + srv18 + "; added ; Sharded " + srv17 + "=Mongos"},
		{"3. a record replaced", []string{srv17, srv19}, 0,
			"removed " + srv18 + "; added " + srv19 + "; Sharded " + srv17 + "=Mongos " + srv19 + "=Unknown"},
		{"4. both replaced by one", []string{srv19}, 0,
			"removed " + srv17 + "," + srv18 + "; added " + srv19 + "; Sharded " + srv19 + "=Unknown"},
		{"5. both replaced by two", []string{srv19, srv20}, 0,
			"removed " + srv17 + "," + srv18 + "; added " + srv19 + "," + srv20 + "; Sharded " + srv19 + "=Unknown " + srv20 + "=Unknown"},
		{"10. srvMaxHosts=0 takes all", []string{srv17, srv19, srv20}, 0,
			"removed " + srv18 + "; added " + srv19 + "," + srv20 + "; Sharded " + srv17 + "=Mongos " + srv19 + "=Unknown " + srv20 + "=Unknown"},
		{"11. srvMaxHosts >= records takes all", []string{srv19, srv20}, 2,
			"removed " + srv17 + "," + srv18 + "; added " + srv19 + "," + srv20 + "; Sharded " + srv19 + "=Unknown " + srv20 + "=Unknown"},
		{"nothing changed", []string{srv18, srv17}, 0,
			"removed ; added ; Sharded " + srv17 + "=Mongos " + srv18 + "=Mongos"},
		{"host names are case-insensitive, and duplicates count once", []string{"LOCALHOST.test.build.10gen.cc:27017", srv17, srv19, strings.ToUpper(srv19)}, 0,
			"removed " + srv18 + "; added " + srv19 + "; Sharded " + srv17 + "=Mongos " + srv19 + "=Unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := shardedOf(t, srv17, srv18)
			u := d.applySRV(tc.hosts, tc.srvMaxHosts, rand.New(rand.NewPCG(1, 2)))
			if !u.Applied {
				t.Fatal("the rescan was not applied")
			}
			if got := srvUpdateString(u); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if !u.Previous.Equal(d) {
				t.Error("Previous is not the topology before")
			}
			for _, sd := range u.Description.Servers() {
				if prev, ok := d.Server(sd.Address); ok && !prev.Equal(sd) {
					t.Errorf("%s was still found, and its description changed: %+v -> %+v", sd.Address, prev, sd)
				}
			}
		})
	}
}

// TestApplySRVMaxHostsPicksAtRandom is the prose test 12: with srvMaxHosts
// 2, the host kept stays and one of the two new ones joins it, picked at
// random: each is picked by some sources of randomness.
func TestApplySRVMaxHostsPicksAtRandom(t *testing.T) {
	d := shardedOf(t, srv17, srv18)
	picked := map[string]int{}
	for seed := range uint64(64) {
		u := d.applySRV([]string{srv17, srv19, srv20}, 2, rand.New(rand.NewPCG(seed, seed)))
		if !slices.Equal(u.Removed, []string{srv18}) || len(u.Added) != 1 || u.Description.Len() != 2 {
			t.Fatalf("seed %d: %s; want %s removed and one host added", seed, srvUpdateString(u), srv18)
		}
		if _, ok := u.Description.Server(srv17); !ok {
			t.Fatalf("seed %d: %s lost", seed, srv17)
		}
		picked[u.Added[0]]++
	}
	if picked[srv19] == 0 || picked[srv20] == 0 || len(picked) != 2 {
		t.Errorf("picked %v in 64 rescans; want each of %s and %s some of the time", picked, srv19, srv20)
	}
}

// TestApplySRVMaxHostsTopsUp checks that new hosts only fill the room that
// srvMaxHosts leaves: none while the topology is full, and as many as it
// lacks when some left.
func TestApplySRVMaxHostsTopsUp(t *testing.T) {
	d := shardedOf(t, srv17, srv18)
	if u := d.applySRV([]string{srv17, srv18, srv19, srv20}, 2, nil); len(u.Added) != 0 || len(u.Removed) != 0 {
		t.Errorf("full topology: %s; want no change", srvUpdateString(u))
	}
	if u := d.applySRV([]string{srv17, srv18, srv19, srv20}, 3, nil); len(u.Added) != 1 || u.Description.Len() != 3 {
		t.Errorf("one place left: %s; want one host added", srvUpdateString(u))
	}
	if u := d.applySRV([]string{srv19, srv20}, 1, nil); len(u.Added) != 1 || u.Description.Len() != 1 || len(u.Removed) != 2 {
		t.Errorf("both gone, srvMaxHosts 1: %s; want one of the two new hosts", srvUpdateString(u))
	}
}

// TestApplySRVIgnored checks the rescans that change nothing: one that found
// no host, and any in a topology that is not Unknown or Sharded.
func TestApplySRVIgnored(t *testing.T) {
	unknown, err := newDescription(Settings{Seeds: []string{srv17}})
	if err != nil {
		t.Fatal(err)
	}
	if u := unknown.applySRV(nil, 0, nil); u.Applied || !u.Description.Equal(unknown) {
		t.Errorf("no host: applied %v, %s", u.Applied, srvUpdateString(u))
	}
	if u := unknown.applySRV([]string{srv18}, 0, nil); !u.Applied || srvUpdateString(u) != "removed "+srv17+"; added "+srv18+"; Unknown "+srv18+"=Unknown" {
		t.Errorf("an Unknown topology is rescanned: applied %v, %s", u.Applied, srvUpdateString(u))
	}
	rs := unknown.apply(newServerDescription(srv17, hello(t, bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "setName", Value: "rs"},
		{Key: "hosts", Value: bson.A{srv17}}, {Key: "minWireVersion", Value: 0}, {Key: "maxWireVersion", Value: 21}}), time.Millisecond, time.Now())).Description
	single, err := newDescription(Settings{Seeds: []string{srv17}, DirectConnection: true})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := newDescription(Settings{Seeds: []string{srv17}, LoadBalanced: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []Description{rs, single, lb} {
		if u := d.applySRV([]string{srv18}, 0, nil); u.Applied || !u.Description.Equal(d) || len(u.Added)+len(u.Removed) != 0 {
			t.Errorf("%v topology: applied %v, %s", d.Type, u.Applied, srvUpdateString(u))
		}
	}
}

// TestApplySRVEvents checks the events of a rescan: a ServerClosed per
// server removed, a ServerOpening per server added, and the
// TopologyDescriptionChanged; none when nothing changed.
func TestApplySRVEvents(t *testing.T) {
	id := bson.NewObjectID()
	d := shardedOf(t, srv17, srv18)
	got := eventsString(t, id, d.applySRV([]string{srv17, srv19}, 0, nil).events(id))
	want := "ServerClosed " + srv18 + "; ServerOpening " + srv19 + "; TopologyDescriptionChanged Sharded(2)->Sharded(2)"
	if got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
	if got := d.applySRV([]string{srv17, srv18}, 0, nil).events(id); len(got) != 0 {
		t.Errorf("a rescan that changed nothing published %s", eventsString(t, id, got))
	}
}

// TestSRVAddresses checks the verification of a rescan's records, record by
// record: a target outside the host's domain, or a record without a port,
// is left out and reported, the others kept.
func TestSRVAddresses(t *testing.T) {
	records := []*net.SRV{
		{Target: "localhost.test.build.10gen.cc.", Port: 27017},
		{Target: "Localhost.Test.Build.10gen.cc", Port: 27018},
		{Target: "localhost.evil.build.10gen.cc.", Port: 27019},
		nil,
		{Target: "localhost.test.build.10gen.cc.", Port: 0},
		{Target: "localhost.sub.test.build.10gen.cc.", Port: 27020},
	}
	valid, rejected := srvAddresses("test1.test.build.10gen.cc", records)
	if want := []string{srv17, srv18, "localhost.sub.test.build.10gen.cc:27020"}; !slices.Equal(valid, want) {
		t.Errorf("valid %v, want %v", valid, want)
	}
	if want := []string{"localhost.evil.build.10gen.cc.:27019", "an empty record", "localhost.test.build.10gen.cc.:0"}; !slices.Equal(rejected, want) {
		t.Errorf("rejected %v, want %v", rejected, want)
	}
}

// TestSRVAddressesAgreeWithConnstring checks that a rescan verifies a
// record's target as the initial discovery does (connstring's look-up): the
// specification's test records, and its prose tests' host names.
func TestSRVAddressesAgreeWithConnstring(t *testing.T) {
	for _, tc := range []struct{ host, target string }{
		{"test1.test.build.10gen.cc", "localhost.test.build.10gen.cc."},
		{"test12.test.build.10gen.cc", "localhost.build.10gen.cc."},
		{"test13.test.build.10gen.cc", "test.build.10gen.cc."},
		{"test14.test.build.10gen.cc", "localhost.not-test.build.10gen.cc."},
		{"test15.test.build.10gen.cc", "localhost.test.not-build.10gen.cc."},
		{"test16.test.build.10gen.cc", "localhost.test.build.not-10gen.cc."},
		{"test17.test.build.10gen.cc", "localhost.test.build.10gen.not-cc."},
		{"test18.test.build.10gen.cc", "localhost.sub.test.build.10gen.cc."},
		{"test19.test.build.10gen.cc", "localhost.evil.build.10gen.cc."},
		{"localhost", "localhost.mongodb"},
		{"localhost", "localhost"},
		{"localhost", "test_1.cluster_1localhost"},
		{"localhost", "a.localhost"},
		{"mongo.local", "test_1.evil.local"},
		{"mongo.local", "mongo.local"},
		{"mongo.local", "test_1.my_hostmongo.local"},
		{"mongo.local", "test_1.mongo.local"},
		{"blogs.mongodb.com", "blogs.evil.com"},
		{"blogs.mongodb.com", "cluster.testmongodb.com"},
		{"blogs.mongodb.com", "cluster.mongodb.com"},
		{"blogs.mongodb.com", ".mongodb.com"},
		{"blogs.mongodb.com", "a..mongodb.com"},
	} {
		valid, _ := srvAddresses(tc.host, []*net.SRV{{Target: tc.target, Port: 27017}})
		r := oneSRV{target: tc.target}
		_, err := connstring.ParseWithResolver(context.Background(), "mongodb+srv://"+tc.host+"/", r)
		if (len(valid) == 1) != (err == nil) {
			t.Errorf("SRV record %s of %s: the rescan keeps it: %v; the initial discovery: %v", tc.target, tc.host, len(valid) == 1, err)
		}
	}
}

// oneSRV is a resolver with one SRV record, on port 27017, and no TXT
// record.
type oneSRV struct{ target string }

func (r oneSRV) LookupSRV(context.Context, string, string, string) (string, []*net.SRV, error) {
	return "", []*net.SRV{{Target: r.target, Port: 27017}}, nil
}

func (oneSRV) LookupTXT(_ context.Context, name string) ([]string, error) {
	return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}
