package mongotest_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestAdvertisedHosts checks that members started WithAdvertisedHosts report
// those addresses wherever a member's address appears, listen where they
// did, and keep them across a Stop and Restart.
func TestAdvertisedHosts(t *testing.T) {
	names := []string{"db0.example.test:27017", "db1.example.test:27018", "db2.example.test:27019", "db3.example.test:27020"}
	rs := startRS(t, 4, mongotest.WithAdvertisedHosts(names...),
		mongotest.WithMember(2, mongotest.Member{Passive: true}),
		mongotest.WithMember(3, mongotest.Member{Arbiter: true}))
	m := rs.Members()
	if want := "mongodb://" + strings.Join(names, ",") + "/?replicaSet=rs0"; rs.URI() != want {
		t.Errorf("URI %q, want %q", rs.URI(), want)
	}
	check := func(when string) {
		t.Helper()
		for i, srv := range m {
			if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") {
				t.Errorf("%s: member %d listens on %s, want 127.0.0.1", when, i, srv.Addr())
			}
			h := helloOf(t, srv)
			if h.Me != names[i] || h.Primary != names[0] {
				t.Errorf("%s: member %d: me %q primary %q, want %q and %q", when, i, h.Me, h.Primary, names[i], names[0])
			}
			if !slices.Equal(h.Hosts, names[:2]) || !slices.Equal(h.Passives, names[2:3]) || !slices.Equal(h.Arbiters, names[3:]) {
				t.Errorf("%s: member %d: hosts %v passives %v arbiters %v", when, i, h.Hosts, h.Passives, h.Arbiters)
			}
			status := dialRaw(t, srv).run(cmd("admin", bson.E{Key: "serverStatus", Value: 1}))
			if host, _ := status.Lookup("host").StringValueOK(); host != names[i] {
				t.Errorf("%s: member %d: serverStatus host %q, want %q", when, i, host, names[i])
			}
		}
	}
	check("at start")
	if err := rs.Stop(1); err != nil {
		t.Fatal(err)
	}
	if err := rs.Restart(1); err != nil {
		t.Fatal(err)
	}
	check("after a restart")

	one := start(t, mongotest.WithReplicaSet("solo"), mongotest.WithAdvertisedHosts("solo.example.test:27017"))
	if h := helloOf(t, one); h.Me != "solo.example.test:27017" || !slices.Equal(h.Hosts, []string{"solo.example.test:27017"}) {
		t.Errorf("WithReplicaSet: me %q hosts %v, want solo.example.test:27017", h.Me, h.Hosts)
	}
}

// TestAdvertisedHostsWithoutTheOption checks that members report their
// 127.0.0.1 addresses by default: what every other test of the package sees.
func TestAdvertisedHostsWithoutTheOption(t *testing.T) {
	rs := startRS(t, 2)
	m := rs.Members()
	for i, srv := range m {
		if h := helloOf(t, srv); h.Me != srv.Addr() || !slices.Equal(h.Hosts, addrs(m, 0, 1)) {
			t.Errorf("member %d: me %q hosts %v, want its address and %v", i, h.Me, h.Hosts, addrs(m, 0, 1))
		}
	}
}

// TestAdvertisedHostsRefused checks that invalid advertised addresses, or
// a count that does not match the members, are refused with an error that
// names the problem.
func TestAdvertisedHostsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func() (*mongotest.ReplicaSet, error)
		want  string
	}{
		{"none", func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 1, mongotest.WithAdvertisedHosts())
		}, "WithAdvertisedHosts: no address"},
		{"no port", func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 1, mongotest.WithAdvertisedHosts("db.example.test"))
		}, `WithAdvertisedHosts: "db.example.test" is not host:port`},
		{"port 0", func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 1, mongotest.WithAdvertisedHosts("db.example.test:0"))
		}, `WithAdvertisedHosts: "db.example.test:0" has no valid port`},
		{"port too big", func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 1, mongotest.WithAdvertisedHosts("db.example.test:65536"))
		}, `WithAdvertisedHosts: "db.example.test:65536" has no valid port`},
		{"no host", func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 1, mongotest.WithAdvertisedHosts(":27017"))
		}, `WithAdvertisedHosts: ":27017" has no host`},
		{"twice the same", func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 2, mongotest.WithAdvertisedHosts("db.example.test:1", "DB.example.test:1"))
		}, `WithAdvertisedHosts: "DB.example.test:1" is given twice`},
		{"fewer than the members", func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 3, mongotest.WithAdvertisedHosts("a.test:1", "b.test:2"))
		}, "WithAdvertisedHosts gives 2 addresses for a replica set of 3 members"},
		{"more than the members", func() (*mongotest.ReplicaSet, error) {
			return mongotest.StartReplicaSet("rs", 1, mongotest.WithAdvertisedHosts("a.test:1", "b.test:2"))
		}, "WithAdvertisedHosts gives 2 addresses for a replica set of 1 members"},
	} {
		rs, err := tc.start()
		if err == nil {
			rs.Close()
			t.Errorf("%s: started", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
	for name, opts := range map[string][]mongotest.Option{
		"standalone": {mongotest.WithAdvertisedHosts("a.test:1")},
		"mongos":     {mongotest.WithMongos(), mongotest.WithAdvertisedHosts("a.test:1")},
	} {
		srv, err := mongotest.Start(opts...)
		if err == nil {
			srv.Close()
			t.Errorf("%s: Start with WithAdvertisedHosts succeeded", name)
		} else if want := "WithAdvertisedHosts names the members of a replica set"; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error saying %q", name, err, want)
		}
	}
}

// TestDriverAdvertisedHosts runs the official driver against a replica set
// whose members advertise host names: through a dialer that maps each name
// to its member, the driver discovers the set by those names and writes to
// the primary.
func TestDriverAdvertisedHosts(t *testing.T) {
	names := []string{"db0.example.test:27017", "db1.example.test:27017", "db2.example.test:27017"}
	rs := startRS(t, 3, mongotest.WithAdvertisedHosts(names...))
	route := map[string]string{}
	for i, srv := range rs.Members() {
		route[names[i]] = srv.Addr()
	}
	var dialer net.Dialer
	dial := dialFunc(func(ctx context.Context, network, address string) (net.Conn, error) {
		real, ok := route[address]
		if !ok {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errUnmapped(address)}
		}
		return dialer.DialContext(ctx, network, real)
	})
	w := newTopologyWatch()
	client := connectWith(t, options.Client().ApplyURI("mongodb://"+names[1]+"/?replicaSet=rs0").
		SetDialer(dial).SetServerMonitor(w.monitor()).SetServerSelectionTimeout(testTimeout))
	if _, err := client.Database("x").Collection("c").InsertOne(ctx(t), bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatalf("InsertOne: %v", err)
	}
	w.waitFor(t, "the members by their advertised names", func(d event.TopologyDescription) bool {
		var got []string
		for _, s := range d.Servers {
			got = append(got, s.Addr.String())
		}
		slices.Sort(got)
		return slices.Equal(got, names)
	})
}

// dialFunc is a function that dials, as the official driver's options take
// a dialer.
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

func (f dialFunc) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return f(ctx, network, address)
}

// errUnmapped is the error of a dial to an address no server stands for.
type errUnmapped string

func (e errUnmapped) Error() string { return "no test server at " + string(e) }
