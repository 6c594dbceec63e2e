package topology

// Server selection, mongopool's (Description.SelectCandidates and
// Choose) against the official driver's, over the same replica
// set of 3 and of 50 members, for reads with modes primary, secondary with
// tag sets, and nearest.
//
// The official driver's selectors (internal/serverselector) cannot be
// imported, and its Topology selects only from the description its
// monitors build from live servers. Its selector is taken from the driver
// itself instead: a mongo.Client over a deployment of ours (the
// "deployment" internal client option) hands the selector a Collection's
// read builds to Deployment.SelectServer, and the benchmark calls it on a
// description.Topology, as Topology.SelectServer does: the compatibility
// check, the candidates without the Unknown servers, the selector, then two
// random choices compared by operation count. What is left out of the
// official path (Topology.FindServer's lock and the *SelectedServer it
// allocates for each of the two choices) would only make it slower.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/address"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/tag"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/description"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"
)

// member i of the replica set: in data center ny, sf or la (i mod 3), on
// rack i mod 5, with an average round trip time of 1 + 3·(i mod 7) ms, so
// that the latency window keeps some of the members; member 0 is the
// primary, member i wrote i seconds before the primary.
func memberAddr(i int) string                    { return fmt.Sprintf("host%02d.example.com:27017", i) }
func memberDC(i int) string                      { return []string{"ny", "sf", "la"}[i%3] }
func memberRack(i int) string                    { return fmt.Sprint(i % 5) }
func memberRTT(i int) time.Duration              { return time.Duration(1+3*(i%7)) * time.Millisecond }
func memberWrite(now time.Time, i int) time.Time { return now.Add(-time.Duration(i) * time.Second) }

var selectionNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ourReplicaSet returns mongopool's Description of the replica set of n
// members, made as the monitors make it: from each member's hello reply.
func ourReplicaSet(tb testing.TB, n int) Description {
	tb.Helper()
	hosts := bson.A{}
	for i := range n {
		hosts = append(hosts, memberAddr(i))
	}
	d, err := newDescription(Settings{Seeds: []string{memberAddr(0)}, ReplicaSet: "rs"})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		reply, err := bson.Marshal(bson.D{
			{Key: "isWritablePrimary", Value: i == 0}, {Key: "secondary", Value: i != 0},
			{Key: "setName", Value: "rs"}, {Key: "hosts", Value: hosts}, {Key: "me", Value: memberAddr(i)},
			{Key: "tags", Value: bson.D{{Key: "dc", Value: memberDC(i)}, {Key: "rack", Value: memberRack(i)}}},
			{Key: "lastWrite", Value: bson.D{{Key: "lastWriteDate", Value: bson.NewDateTimeFromTime(memberWrite(selectionNow, i))}}},
			{Key: "minWireVersion", Value: 0}, {Key: "maxWireVersion", Value: 21}, {Key: "ok", Value: 1.0},
		})
		if err != nil {
			tb.Fatal(err)
		}
		u := d.apply(newServerDescription(memberAddr(i), reply, memberRTT(i), selectionNow))
		if !u.Applied || u.Server.Type == ServerUnknown {
			tb.Fatalf("member %d: %v", i, u.Server.Error)
		}
		d = u.Description
	}
	if d.Type != ReplicaSetWithPrimary || d.Len() != n {
		tb.Fatalf("replica set of %d: %s", n, d.Summary())
	}
	return d
}

// officialReplicaSet returns the official driver's description of the same
// replica set.
func officialReplicaSet(n int) description.Topology {
	topo := description.Topology{Kind: description.TopologyKindReplicaSetWithPrimary, SetName: "rs"}
	for i := range n {
		kind := description.ServerKindRSSecondary
		if i == 0 {
			kind = description.ServerKindRSPrimary
		}
		topo.Servers = append(topo.Servers, description.Server{
			Addr: address.Address(memberAddr(i)), Kind: kind, SetName: "rs",
			AverageRTT: memberRTT(i), AverageRTTSet: true, HeartbeatInterval: 10 * time.Second,
			Tags:          tag.Set{{Name: "dc", Value: memberDC(i)}, {Name: "rack", Value: memberRack(i)}},
			LastWriteTime: memberWrite(selectionNow, i), LastUpdateTime: selectionNow,
			WireVersion: &description.VersionRange{Min: 0, Max: 21},
		})
	}
	return topo
}

// selectionShape is a read the benchmarks compare, in both drivers' terms.
type selectionShape struct {
	name     string
	ours     Criteria
	official *readpref.ReadPref
}

var selectionShapes = []selectionShape{
	{"primary", Criteria{}, readpref.Primary()},
	{"secondary-tags",
		Criteria{ReadPref: ReadPref{Mode: ModeSecondary, TagSets: []TagSet{
			{{Name: "dc", Value: "la"}, {Name: "rack", Value: "9"}}, {{Name: "dc", Value: "sf"}}}}},
		readpref.Secondary(readpref.WithTagSets(
			tag.Set{{Name: "dc", Value: "la"}, {Name: "rack", Value: "9"}}, tag.Set{{Name: "dc", Value: "sf"}}))},
	{"nearest", Criteria{ReadPref: ReadPref{Mode: ModeNearest}}, readpref.Nearest()},
}

// capturingDeployment is a driver.Deployment whose SelectServer keeps the
// selector it is given and fails the operation.
type capturingDeployment struct{ selector description.ServerSelector }

var errCaptured = errors.New("selector captured")

func (d *capturingDeployment) SelectServer(_ context.Context, s description.ServerSelector) (driver.Server, error) {
	d.selector = s
	return nil, errCaptured
}

func (d *capturingDeployment) Kind() description.TopologyKind {
	return description.TopologyKindReplicaSetWithPrimary
}

func (d *capturingDeployment) GetServerSelectionTimeout() time.Duration { return time.Second }

// officialSelector returns the selector the official driver builds for a
// find with read preference rp on a collection.
func officialSelector(tb testing.TB, rp *readpref.ReadPref) description.ServerSelector {
	tb.Helper()
	dep := &capturingDeployment{}
	opts := options.Client()
	if err := xoptions.SetInternalClientOptions(opts, "deployment", dep); err != nil {
		tb.Fatal(err)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	coll := client.Database("db").Collection("c", options.Collection().SetReadPreference(rp))
	if err := coll.FindOne(context.Background(), bson.D{}).Err(); !errors.Is(err, errCaptured) {
		tb.Fatalf("find: %v, want the capture", err)
	}
	if dep.selector == nil {
		tb.Fatal("no selector captured")
	}
	return dep.selector
}

// officialSelect is what Topology.SelectServer does with a description
// that has a suitable server (selectServerFromDescription, then pick2 and
// the operation counts), without the lock and allocation of FindServer.
func officialSelect(topo description.Topology, sel description.ServerSelector, rng *rand.Rand,
	inProgress map[address.Address]int64) (description.Server, error) {
	if topo.CompatibilityErr != nil {
		return description.Server{}, topo.CompatibilityErr
	}
	allowedIndexes := make([]int, 0, len(topo.Servers))
	for i, s := range topo.Servers {
		if s.Kind != description.Unknown {
			allowedIndexes = append(allowedIndexes, i)
		}
	}
	allowed := make([]description.Server, len(allowedIndexes))
	for i, idx := range allowedIndexes {
		allowed[i] = topo.Servers[idx]
	}
	suitable, err := sel.SelectServer(topo, allowed)
	if err != nil {
		return description.Server{}, err
	}
	switch len(suitable) {
	case 0:
		return description.Server{}, errors.New("no suitable server")
	case 1:
		return suitable[0], nil
	}
	idx := rng.IntN(len(suitable))
	s1 := suitable[idx]
	suitable[idx], suitable[len(suitable)-1] = suitable[len(suitable)-1], suitable[idx]
	s2 := suitable[rng.IntN(len(suitable)-1)]
	if inProgress[s1.Addr] < inProgress[s2.Addr] {
		return s1, nil
	}
	return s2, nil
}

// TestSelectionAgrees: for each shape, both drivers find the same servers,
// so that the benchmarks compare the same work.
func TestSelectionAgrees(t *testing.T) {
	for _, n := range []int{3, 50} {
		ours, official := ourReplicaSet(t, n), officialReplicaSet(n)
		for _, sh := range selectionShapes {
			got, err := ours.SelectCandidates(sh.ours, nil)
			if err != nil {
				t.Fatal(err)
			}
			var mine []string
			for _, s := range got {
				mine = append(mine, s.Address)
			}
			suitable, err := officialSelector(t, sh.official).SelectServer(official, official.Servers)
			if err != nil {
				t.Fatal(err)
			}
			var theirs []string
			for _, s := range suitable {
				theirs = append(theirs, string(s.Addr))
			}
			slices.Sort(mine)
			slices.Sort(theirs)
			if len(mine) == 0 || !slices.Equal(mine, theirs) {
				t.Errorf("%d members, %s: mongopool selects %v, the official driver %v", n, sh.name, mine, theirs)
			}
		}
	}
}

// BenchmarkSelection runs, for each size and shape, mongopool's selection
// and the official driver's one after the other, in the same run.
func BenchmarkSelectionBesideOfficial(b *testing.B) {
	for _, n := range []int{3, 50} {
		ours, official := ourReplicaSet(b, n), officialReplicaSet(n)
		counts := map[string]int64{}
		officialCounts := map[address.Address]int64{}
		for i := range n {
			counts[memberAddr(i)] = int64(i % 4)
			officialCounts[address.Address(memberAddr(i))] = int64(i % 4)
		}
		inProgress := func(a string) int64 { return counts[a] }
		for _, sh := range selectionShapes {
			b.Run(fmt.Sprintf("%d/%s/mongopool", n, sh.name), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				buf := make([]ServerDescription, 0, n)
				b.ReportAllocs()
				for b.Loop() {
					cands, err := ours.SelectCandidates(sh.ours, buf[:0])
					if err != nil {
						b.Fatal(err)
					}
					if choose(cands, rng.IntN, inProgress) < 0 {
						b.Fatal("no server")
					}
				}
			})
			sel := officialSelector(b, sh.official)
			b.Run(fmt.Sprintf("%d/%s/official", n, sh.name), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := officialSelect(official, sel, rng, officialCounts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
