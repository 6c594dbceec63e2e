package topology

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchReplicaSet returns a replica set of n members, the first one
// primary: member i is in data center ny, sf or la (i mod 3), on rack i mod
// 5, with an average round trip time of 1 + 3·(i mod 7) ms, so that the
// latency window keeps some of them. The bench module builds the same
// deployment for the official driver's selection.
func benchReplicaSet(n int) Description {
	servers := make([]ServerDescription, 0, n)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		s := srv(fmt.Sprintf("host%02d.example.com:27017", i), RSSecondary, 1+3*(i%7))
		if i == 0 {
			s.Type = RSPrimary
		}
		s.Tags = map[string]string{"dc": []string{"ny", "sf", "la"}[i%3], "rack": fmt.Sprint(i % 5)}
		s.LastWriteDate, s.LastUpdateTime = now.Add(-time.Duration(i)*time.Second), now
		servers = append(servers, s)
	}
	return topo(ReplicaSetWithPrimary, servers...)
}

// benchCriteria are the read shapes the benchmarks compare.
var benchCriteria = []struct {
	name string
	c    Criteria
}{
	{"primary", Criteria{}},
	{"secondary-tags", Criteria{ReadPref: ReadPref{Mode: ModeSecondary,
		TagSets: []TagSet{ts("dc", "la", "rack", "9"), ts("dc", "sf")}}}},
	{"nearest", Criteria{ReadPref: ReadPref{Mode: ModeNearest}}},
}

// BenchmarkSelection: a whole selection, SelectCandidates into a buffer
// with room, then Choose among the candidates.
func BenchmarkSelection(b *testing.B) {
	for _, n := range []int{3, 50} {
		d := benchReplicaSet(n)
		inProgress := map[string]int64{}
		for i, s := range d.Servers() {
			inProgress[s.Address] = int64(i % 4)
		}
		count := func(a string) int64 { return inProgress[a] }
		for _, bc := range benchCriteria {
			b.Run(fmt.Sprintf("%d/%s", n, bc.name), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				buf := make([]ServerDescription, 0, n)
				b.ReportAllocs()
				for b.Loop() {
					cands, err := d.SelectCandidates(bc.c, buf[:0])
					if err != nil {
						b.Fatal(err)
					}
					if choose(cands, rng.IntN, count) < 0 {
						b.Fatal("no server")
					}
				}
			})
		}
	}
}
