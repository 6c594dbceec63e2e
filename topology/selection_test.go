package topology

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/handshake"
)

// topo returns a Description of type tt with the given servers, as the
// spec runner makes it.
func topo(tt TopologyType, servers ...ServerDescription) Description {
	d := Description{Type: tt}
	for _, s := range servers {
		if s.MaxWireVersion == 0 {
			s.MinWireVersion, s.MaxWireVersion = clientMinWireVersion, clientMaxWireVersion
		}
		d.servers = d.servers.Set(s.Address, s)
	}
	d.CompatibilityError = d.compatibility()
	return d
}

// srv returns a server at address of type st with the average round trip
// time rtt, in milliseconds.
func srv(address string, st ServerType, rtt int) ServerDescription {
	return ServerDescription{Address: address, Type: st, RoundTripTime: time.Duration(rtt) * time.Millisecond, HasRoundTripTime: true}
}

func tagged(s ServerDescription, tags map[string]string) ServerDescription { s.Tags = tags; return s }

// ts returns the tag set of the given names and values, in turn.
func ts(nameValues ...string) TagSet {
	t := TagSet{}
	for i := 0; i+1 < len(nameValues); i += 2 {
		t = append(t, Tag{Name: nameValues[i], Value: nameValues[i+1]})
	}
	return t
}

// written returns s with its last write at w and its last check at u,
// seconds after a fixed instant.
func written(s ServerDescription, w, u float64) ServerDescription {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.LastWriteDate = base.Add(time.Duration(math.Round(w*1e3)) * time.Millisecond)
	s.LastUpdateTime = base.Add(time.Duration(math.Round(u*1e3)) * time.Millisecond)
	return s
}

// addresses returns the addresses of servers, sorted.
func addresses(servers []ServerDescription) []string {
	out := make([]string, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.Address)
	}
	slices.Sort(out)
	return out
}

func selectAddrs(t *testing.T, d Description, c Criteria) []string {
	t.Helper()
	got, err := d.SelectCandidates(c, nil)
	if err != nil {
		t.Fatalf("SelectCandidates(%s): %v", c, err)
	}
	return addresses(got)
}

func nearest(maxStaleness time.Duration) Criteria {
	return Criteria{ReadPref: ReadPref{Mode: ModeNearest, MaxStaleness: maxStaleness, HasMaxStaleness: true}}
}

// TestStalenessBoundaries: a secondary is eligible up to its estimated
// staleness equal to maxStaleness, to the millisecond, by both formulas.
func TestStalenessBoundaries(t *testing.T) {
	const hb = 10 // seconds, the default heartbeat
	// With a primary: (S.update - S.write) - (P.update - P.write) + hb.
	// P lags 5 s behind its last check; s1 lags 5+80 s, staleness 90 s;
	// s2 1 ms more.
	withPrimary := topo(ReplicaSetWithPrimary,
		written(srv("p:1", RSPrimary, 1), 100, 105),
		written(srv("s1:1", RSSecondary, 1), 20, 105),
		written(srv("s2:1", RSSecondary, 1), 19.999, 105),
	)
	if got, want := selectAddrs(t, withPrimary, nearest(90*time.Second)), []string{"p:1", "s1:1"}; !slices.Equal(got, want) {
		t.Errorf("with a primary: %v, want %v", got, want)
	}
	// The update times count: s2 checked 1 ms earlier is as stale as s1.
	withPrimary.servers = withPrimary.servers.Set("s2:1", written(srv("s2:1", RSSecondary, 1), 19.999, 104.999))
	if got, want := selectAddrs(t, withPrimary, nearest(90*time.Second)), []string{"p:1", "s1:1", "s2:1"}; !slices.Equal(got, want) {
		t.Errorf("with a primary, s2 checked earlier: %v, want %v", got, want)
	}

	// Without a primary: SMax.write - S.write + hb.
	noPrimary := topo(ReplicaSetNoPrimary,
		written(srv("s1:1", RSSecondary, 1), 100, 0),
		written(srv("s2:1", RSSecondary, 1), 100-(90-hb), 500),
		written(srv("s3:1", RSSecondary, 1), 100-(90-hb)-0.001, 0),
	)
	if got, want := selectAddrs(t, noPrimary, nearest(90*time.Second)), []string{"s1:1", "s2:1"}; !slices.Equal(got, want) {
		t.Errorf("without a primary: %v, want %v", got, want)
	}
	// SMax is a secondary: members of other types do not count, whatever
	// they report.
	other := written(srv("o:1", RSOther, 1), 1000, 0)
	arbiter := written(srv("ar:1", RSArbiter, 1), 1000, 0)
	noPrimary.servers = noPrimary.servers.Set("o:1", other).Set("ar:1", arbiter)
	if got, want := selectAddrs(t, noPrimary, nearest(90*time.Second)), []string{"s1:1", "s2:1"}; !slices.Equal(got, want) {
		t.Errorf("without a primary, with an RSOther and an RSArbiter written later: %v, want %v", got, want)
	}
	// The heartbeat counts.
	c := nearest(90 * time.Second)
	c.HeartbeatFrequency = 10*time.Second + time.Millisecond
	if got, want := selectAddrs(t, noPrimary, c), []string{"s1:1"}; !slices.Equal(got, want) {
		t.Errorf("without a primary, heartbeat 10.001s: %v, want %v", got, want)
	}
}

// TestStalenessWithoutLastWrite: a secondary without a lastWriteDate, or
// whose primary has none, is too stale for any maximum; without a maximum,
// it is eligible.
func TestStalenessWithoutLastWrite(t *testing.T) {
	long := nearest(time.Duration(math.MaxInt32) * time.Second)
	noWrite := srv("s2:1", RSSecondary, 1)
	noWrite.LastUpdateTime = time.Unix(1e9, 0)
	d := topo(ReplicaSetWithPrimary,
		written(srv("p:1", RSPrimary, 1), 100, 105),
		written(srv("s1:1", RSSecondary, 1), 100, 105),
		noWrite,
	)
	if got, want := selectAddrs(t, d, long), []string{"p:1", "s1:1"}; !slices.Equal(got, want) {
		t.Errorf("a secondary without lastWriteDate: %v, want %v", got, want)
	}
	p := srv("p:1", RSPrimary, 1)
	p.LastUpdateTime = time.Unix(1e9, 0)
	d.servers = d.servers.Set("p:1", p)
	if got, want := selectAddrs(t, d, long), []string{"p:1"}; !slices.Equal(got, want) {
		t.Errorf("a primary without lastWriteDate: %v, want %v", got, want)
	}
	if got, want := selectAddrs(t, d, Criteria{ReadPref: ReadPref{Mode: ModeNearest}}), []string{"p:1", "s1:1", "s2:1"}; !slices.Equal(got, want) {
		t.Errorf("no maximum: %v, want %v", got, want)
	}
	// Without a primary nor any lastWriteDate, no secondary is eligible.
	d = topo(ReplicaSetNoPrimary, noWrite)
	if got := selectAddrs(t, d, long); len(got) != 0 {
		t.Errorf("no lastWriteDate at all: %v", got)
	}
}

// TestStalenessExtremeTimes: dates at the ends of time.Time's range do not
// overflow the estimate into an eligible one.
func TestStalenessExtremeTimes(t *testing.T) {
	far := time.Date(292277026596, 1, 1, 0, 0, 0, 0, time.UTC)
	early := time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)
	s := srv("s:1", RSSecondary, 1)
	s.LastWriteDate, s.LastUpdateTime = early, far
	p := srv("p:1", RSPrimary, 1)
	p.LastWriteDate, p.LastUpdateTime = far, early
	d := topo(ReplicaSetWithPrimary, p, s)
	if got, want := selectAddrs(t, d, nearest(time.Duration(math.MaxInt32)*time.Second)), []string{"p:1"}; !slices.Equal(got, want) {
		t.Errorf("a secondary 2^63 s stale: %v, want %v", got, want)
	}
}

func TestLatencyWindowWidth(t *testing.T) {
	d := topo(Sharded, srv("a:1", Mongos, 10), srv("b:1", Mongos, 25), srv("c:1", Mongos, 26), srv("d:1", Mongos, 11))
	for _, c := range []struct {
		threshold time.Duration
		want      []string
	}{
		{0, []string{"a:1", "b:1", "d:1"}}, // the default, 15 ms
		{-1, []string{"a:1"}},              // width zero
		{time.Millisecond, []string{"a:1", "d:1"}},
		{math.MaxInt64, []string{"a:1", "b:1", "c:1", "d:1"}}, // no overflow
	} {
		if got := selectAddrs(t, d, Criteria{LocalThreshold: c.threshold}); !slices.Equal(got, c.want) {
			t.Errorf("localThreshold %v: %v, want %v", c.threshold, got, c.want)
		}
	}
	// Equal round trip times are all within a window of width zero.
	d = topo(Sharded, srv("a:1", Mongos, 10), srv("b:1", Mongos, 10), srv("c:1", Mongos, 11))
	if got, want := selectAddrs(t, d, Criteria{LocalThreshold: -1}), []string{"a:1", "b:1"}; !slices.Equal(got, want) {
		t.Errorf("width zero, equal times: %v, want %v", got, want)
	}
	// A server without a round trip time does not anchor the window, and
	// stays in it.
	none := srv("z:1", Mongos, 0)
	none.HasRoundTripTime = false
	d = topo(Sharded, srv("a:1", Mongos, 20), srv("b:1", Mongos, 40), none)
	if got, want := selectAddrs(t, d, Criteria{}), []string{"a:1", "z:1"}; !slices.Equal(got, want) {
		t.Errorf("a server without a round trip time: %v, want %v", got, want)
	}
}

// TestSelectAppends: the servers are appended after what dst holds, which
// stays as it was, including when an earlier tag set or the latency window
// drops servers appended first.
func TestSelectAppends(t *testing.T) {
	var servers []ServerDescription
	for i := range 20 {
		// The later servers are slower; only the even ones match dc:ny.
		s := srv(fmt.Sprintf("s%02d:1", i), RSSecondary, 1+i)
		if i%2 == 0 {
			s = tagged(s, map[string]string{"dc": "ny"})
		} else {
			s = tagged(s, map[string]string{"dc": "sf"})
		}
		servers = append(servers, s)
	}
	d := topo(ReplicaSetNoPrimary, servers...)
	c := Criteria{ReadPref: ReadPref{Mode: ModeSecondary, TagSets: []TagSet{ts("dc", "la"), ts("dc", "ny"), {}}}, LocalThreshold: 4 * time.Millisecond}
	for range 20 { // the map's order changes from run to run
		sentinel := srv("kept:1", Standalone, 99)
		dst := append(make([]ServerDescription, 0, 32), sentinel)
		got, err := d.SelectCandidates(c, dst)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Address != "kept:1" || got[0].RoundTripTime != 99*time.Millisecond {
			t.Fatalf("dst[0] changed: %+v", got[0])
		}
		if g, w := addresses(got[1:]), []string{"s00:1", "s02:1", "s04:1"}; !slices.Equal(g, w) {
			t.Fatalf("appended %v, want %v", g, w)
		}
		// What the selection dropped is not left behind in dst's array.
		for _, s := range got[len(got):cap(got)] {
			if s.Address != "" || s.Tags != nil {
				t.Fatalf("a dropped server is left beyond the length: %s", s.Address)
			}
		}
	}
}

func TestSelectErrors(t *testing.T) {
	rs := topo(ReplicaSetWithPrimary, srv("p:1", RSPrimary, 1), srv("s:1", RSSecondary, 1))
	incompatible := srv("old:1", RSSecondary, 1)
	incompatible.MinWireVersion, incompatible.MaxWireVersion = 0, 6
	old := topo(ReplicaSetWithPrimary, srv("p:1", RSPrimary, 1), incompatible)
	if old.CompatibilityError == nil {
		t.Fatal("setup: the old server is compatible")
	}
	for _, c := range []struct {
		name string
		d    Description
		c    Criteria
		want error
		msg  string
	}{
		{"primary with tags", rs, Criteria{ReadPref: ReadPref{TagSets: []TagSet{ts("dc", "ny")}}}, ErrInvalidReadPref,
			"tag sets are not allowed with mode primary"},
		{"maximum below 90s", rs, nearest(89 * time.Second), ErrInvalidReadPref,
			"maxStaleness 1m29s is less than 1m30s"},
		{"maximum below heartbeat + 10s", rs, Criteria{HeartbeatFrequency: 100 * time.Second,
			ReadPref: ReadPref{Mode: ModeSecondary, MaxStaleness: 109 * time.Second, HasMaxStaleness: true}}, ErrInvalidReadPref,
			"maxStaleness 1m49s is less than 1m50s, the least allowed: 90s, and heartbeatFrequencyMS (1m40s) plus the idle write period (10s)"},
		{"zero maximum", topo(ReplicaSetNoPrimary, srv("s:1", RSSecondary, 1)), nearest(0), ErrInvalidReadPref,
			"maxStaleness 0s is less than 1m30s"},
		{"incompatible, read", old, Criteria{}, handshake.ErrIncompatible, "old:1"},
		{"incompatible, write", old, Criteria{Write: true}, handshake.ErrIncompatible, "old:1"},
	} {
		dst := []ServerDescription{srv("kept:1", Standalone, 1)}
		got, err := c.d.SelectCandidates(c.c, dst)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v; want an error wrapping %v with %q", c.name, err, c.want, c.msg)
		}
		if len(got) != 1 || got[0].Address != "kept:1" {
			t.Errorf("%s: dst changed: %v", c.name, addresses(got))
		}
	}

	// The bounds of maxStaleness are the replica set's: elsewhere, and for
	// writes, the read preference is not checked against the heartbeat.
	sharded := topo(Sharded, srv("m:1", Mongos, 1))
	if got := selectAddrs(t, sharded, nearest(time.Second)); !slices.Equal(got, []string{"m:1"}) {
		t.Errorf("sharded with maxStaleness 1s: %v", got)
	}
	c := nearest(time.Second)
	c.Write = true
	if got := selectAddrs(t, rs, c); !slices.Equal(got, []string{"p:1"}) {
		t.Errorf("a write with maxStaleness 1s: %v", got)
	}
	// A write ignores the read preference, even an invalid one.
	c = Criteria{Write: true, ReadPref: ReadPref{TagSets: []TagSet{ts("dc", "ny")}}}
	if got := selectAddrs(t, rs, c); !slices.Equal(got, []string{"p:1"}) {
		t.Errorf("a write with an invalid read preference: %v", got)
	}
}

// TestSelectByTopologyType covers what the specification's files do not:
// the server types that are never suitable, in each topology type.
func TestSelectByTopologyType(t *testing.T) {
	all := []ServerType{ServerUnknown, Standalone, Mongos, PossiblePrimary, RSPrimary, RSSecondary, RSArbiter, RSOther, RSGhost, LoadBalancer}
	for _, c := range []struct {
		tt          TopologyType
		read, write []ServerType // the suitable types, for a nearest read and for a write
	}{
		{TopologyUnknown, nil, nil},
		{Sharded, []ServerType{Mongos}, []ServerType{Mongos}},
		{LoadBalanced, []ServerType{LoadBalancer}, []ServerType{LoadBalancer}},
		{ReplicaSetWithPrimary, []ServerType{RSPrimary, RSSecondary}, []ServerType{RSPrimary}},
		{ReplicaSetNoPrimary, []ServerType{RSPrimary, RSSecondary}, nil},
	} {
		var servers []ServerDescription
		for _, st := range all {
			servers = append(servers, srv(st.String()+":1", st, 1))
		}
		d := topo(c.tt, servers...)
		for _, op := range []struct {
			c    Criteria
			want []ServerType
		}{{Criteria{ReadPref: ReadPref{Mode: ModeNearest}}, c.read}, {Criteria{Write: true}, c.write}} {
			var want []string
			for _, st := range op.want {
				want = append(want, st.String()+":1")
			}
			slices.Sort(want)
			if got := selectAddrs(t, d, op.c); !slices.Equal(got, want) {
				t.Errorf("%v, %s: %v, want %v", c.tt, op.c, got, want)
			}
		}
	}
	// Single: the one server, whatever its type, if it is available.
	for _, st := range all {
		d := topo(Single, srv("a:1", st, 1))
		got := selectAddrs(t, d, Criteria{ReadPref: ReadPref{Mode: ModeSecondary}})
		if want := st != ServerUnknown && st != PossiblePrimary; (len(got) == 1) != want {
			t.Errorf("Single with a %v: %v; want suitable %v", st, got, want)
		}
	}
}

// TestTagSets: a server matches a tag set when it has each of its tags,
// with the same value; the first tag set that any candidate matches
// decides.
func TestTagSets(t *testing.T) {
	d := topo(ReplicaSetNoPrimary,
		tagged(srv("a:1", RSSecondary, 1), map[string]string{"dc": "ny", "rack": "1", "size": "large"}),
		tagged(srv("b:1", RSSecondary, 1), map[string]string{"rack": "1"}),
		tagged(srv("c:1", RSSecondary, 1), map[string]string{"dc": "sf"}),
		srv("d:1", RSSecondary, 1),
	)
	for _, c := range []struct {
		sets []TagSet
		want []string
	}{
		{nil, []string{"a:1", "b:1", "c:1", "d:1"}},
		{[]TagSet{}, []string{"a:1", "b:1", "c:1", "d:1"}},
		{[]TagSet{{}}, []string{"a:1", "b:1", "c:1", "d:1"}},
		{[]TagSet{ts("dc", "ny")}, []string{"a:1"}},
		{[]TagSet{ts("dc", "ny", "rack", "1")}, []string{"a:1"}},
		{[]TagSet{ts("rack", "1")}, []string{"a:1", "b:1"}},
		{[]TagSet{ts("dc", "ny", "rack", "2")}, nil},
		{[]TagSet{ts("dc", "la")}, nil},
		{[]TagSet{ts("size", "small"), ts("dc", "sf"), {}}, []string{"c:1"}},
		{[]TagSet{ts("dc", "la"), {}, ts("dc", "sf")}, []string{"a:1", "b:1", "c:1", "d:1"}},
		{[]TagSet{ts("DC", "ny"), ts("dc", "NY")}, nil},
		{[]TagSet{ts("dc", "ny", "dc", "sf")}, nil},
		{[]TagSet{ts("dc", "ny", "dc", "ny")}, []string{"a:1"}},
	} {
		cr := Criteria{ReadPref: ReadPref{Mode: ModeSecondary, TagSets: c.sets}}
		if got := selectAddrs(t, d, cr); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", cr, got, c.want)
		}
	}
}

// TestDeprioritizedFallback: deprioritized servers are left out while
// another server is suitable, whatever the mode and the topology type.
func TestDeprioritizedFallback(t *testing.T) {
	rs := topo(ReplicaSetWithPrimary, srv("p:1", RSPrimary, 1), srv("s1:1", RSSecondary, 1), srv("s2:1", RSSecondary, 50))
	for _, c := range []struct {
		mode ReadPrefMode
		dep  []string
		want []string
	}{
		{ModeSecondary, []string{"s1:1"}, []string{"s2:1"}}, // s2 is outside s1's window, but s1 is left out
		{ModeSecondary, []string{"s1:1", "s2:1"}, []string{"s1:1"}},
		{ModeSecondaryPreferred, []string{"s1:1", "s2:1"}, []string{"p:1"}},
		{ModePrimaryPreferred, []string{"p:1"}, []string{"s1:1"}},
		{ModePrimary, []string{"p:1"}, []string{"p:1"}},
		{ModeNearest, []string{"p:1", "s1:1", "s2:1", "x:1"}, []string{"p:1", "s1:1"}},
	} {
		cr := Criteria{ReadPref: ReadPref{Mode: c.mode}, Deprioritized: c.dep}
		if got := selectAddrs(t, rs, cr); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", cr, got, c.want)
		}
	}
	lb := topo(LoadBalanced, loadBalancerServer("lb:1"))
	if got := selectAddrs(t, lb, Criteria{Deprioritized: []string{"lb:1"}}); !slices.Equal(got, []string{"lb:1"}) {
		t.Errorf("the deprioritized load balancer: %v", got)
	}
}

// TestSelectAllocatesNothing: with the capacity in dst, a selection
// allocates nothing, whatever the rules it goes through.
func TestSelectAllocatesNothing(t *testing.T) {
	var servers []ServerDescription
	servers = append(servers, written(tagged(srv("p:1", RSPrimary, 5), map[string]string{"dc": "ny"}), 100, 100))
	for i := range 49 {
		s := written(srv(fmt.Sprintf("s%02d:1", i), RSSecondary, 1+i%20), 100-float64(i), 100)
		servers = append(servers, tagged(s, map[string]string{"dc": []string{"ny", "sf"}[i%2], "rack": fmt.Sprint(i % 3)}))
	}
	rs := topo(ReplicaSetWithPrimary, servers...)
	dst := make([]ServerDescription, 0, 50)
	for _, c := range []Criteria{
		{},
		{Write: true},
		{ReadPref: ReadPref{Mode: ModeNearest}},
		{ReadPref: ReadPref{Mode: ModeSecondary, TagSets: []TagSet{ts("dc", "la"), ts("dc", "sf", "rack", "1")}}},
		{ReadPref: ReadPref{Mode: ModeSecondaryPreferred, TagSets: []TagSet{ts("dc", "la")}, MaxStaleness: 90 * time.Second, HasMaxStaleness: true}},
		{ReadPref: ReadPref{Mode: ModePrimaryPreferred}, Deprioritized: []string{"p:1"}},
		{ReadPref: ReadPref{Mode: ModeNearest}, Deprioritized: []string{"p:1", "s00:1"}, LocalThreshold: -1},
	} {
		var n int
		allocs := testing.AllocsPerRun(100, func() {
			got, err := rs.SelectCandidates(c, dst[:0])
			if err != nil {
				t.Fatal(err)
			}
			n = len(got)
		})
		if n == 0 {
			t.Errorf("%s: nothing selected", c)
		}
		if allocs != 0 {
			t.Errorf("%s: %v allocations per selection, want 0", c, allocs)
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	inProgress := func(string) int64 { return 0 }
	if allocs := testing.AllocsPerRun(100, func() { choose(servers, rng.IntN, inProgress) }); allocs != 0 {
		t.Errorf("Choose: %v allocations, want 0", allocs)
	}
}

func TestChoose(t *testing.T) {
	three := []ServerDescription{srv("a:1", Mongos, 1), srv("b:1", Mongos, 1), srv("c:1", Mongos, 1)}
	none := func(int) int { t.Fatal("drew a random number"); return 0 }
	if got := choose(nil, none, nil); got != -1 {
		t.Errorf("no candidate: %d", got)
	}
	if got := choose(three[:1], none, nil); got != 0 {
		t.Errorf("one candidate: %d", got)
	}

	// draws returns intN answering the given numbers in turn, checking
	// that it is asked for n, then n-1.
	draws := func(n int, answers ...int) func(int) int {
		k := 0
		return func(m int) int {
			if want := n - k; m != want {
				t.Fatalf("draw %d: intN(%d), want intN(%d)", k, m, want)
			}
			k++
			return answers[k-1]
		}
	}
	load := map[string]int64{"a:1": 3, "b:1": 1, "c:1": 3}
	inProgress := func(a string) int64 { return load[a] }
	for _, c := range []struct {
		i, j int // the draws
		want int
	}{
		{0, 0, 1}, // a, then the first of b, c: b has fewer
		{1, 0, 1}, // b, then a
		{0, 1, 0}, // a, then c: as many, a drawn first
		{2, 0, 2}, // c, then a: as many, c drawn first
		{2, 1, 1}, // c, then b
	} {
		if got := choose(three, draws(3, c.i, c.j), inProgress); got != c.want {
			t.Errorf("draws %d, %d: chose %d, want %d", c.i, c.j, got, c.want)
		}
	}
	// The two drawn are distinct: with three servers of equal load, each is
	// chosen, and the two compared never are the same.
	rng := rand.New(rand.NewPCG(3, 4))
	seen := map[string]int{}
	for range 300 {
		var asked []string
		i := choose(three, rng.IntN, func(a string) int64 { asked = append(asked, a); return 0 })
		if len(asked) != 2 || asked[0] == asked[1] {
			t.Fatalf("compared %v", asked)
		}
		seen[three[i].Address]++
	}
	if len(seen) != 3 {
		t.Errorf("chosen: %v", seen)
	}
}

func TestSummary(t *testing.T) {
	id := srv("b:1", RSSecondary, 0)
	id.RoundTripTime = 1234567 * time.Nanosecond
	d := topo(ReplicaSetNoPrimary,
		id,
		unknownServer("a:1", errors.New("dial tcp 127.0.0.1:1: connect: connection refused")),
		unknownServer("c:1", nil),
	)
	d.SetName = "rs0"
	want := `ReplicaSetNoPrimary, set "rs0", 3 servers: a:1 Unknown (dial tcp 127.0.0.1:1: connect: connection refused); b:1 RSSecondary (rtt 1.2ms); c:1 Unknown (not checked yet)`
	if got := d.Summary(); got != want {
		t.Errorf("Summary():\n got %s\nwant %s", got, want)
	}
	if got := (Description{}).Summary(); got != "Unknown, no servers" {
		t.Errorf("zero Description: %q", got)
	}
	lb := topo(LoadBalanced, loadBalancerServer("lb:1"))
	if got := lb.Summary(); got != "LoadBalanced, 1 server: lb:1 LoadBalancer" {
		t.Errorf("load balanced: %q", got)
	}

	// However many servers and however long their errors, the summary is
	// bounded, and on one line.
	var servers []ServerDescription
	for i := range 100 {
		servers = append(servers, unknownServer(fmt.Sprintf("%s%03d:1", strings.Repeat("h", 250), i),
			errors.New(strings.Repeat("line\n", 10000))))
	}
	incompatible := srv("old:1", RSSecondary, 1)
	incompatible.MinWireVersion, incompatible.MaxWireVersion = 0, 6
	d = topo(ReplicaSetNoPrimary, append(servers, incompatible)...)
	d.SetName = strings.Repeat("s", 1<<20)
	s := d.Summary()
	if len(s) > 16*(300+200+40)+1000 || strings.ContainsAny(s, "\r\n") {
		t.Errorf("Summary of 101 servers with long errors: %d bytes, or not on one line", len(s))
	}
	for _, part := range []string{"101 servers", "and 85 more", "Server at old:1 reports wire version 6"} {
		if !strings.Contains(s, part) {
			t.Errorf("Summary does not say %q: %.300q...", part, s)
		}
	}
}

func TestCriteriaString(t *testing.T) {
	for _, c := range []struct {
		c    Criteria
		want string
	}{
		{Criteria{}, "read with read preference primary"},
		{Criteria{Write: true, ReadPref: ReadPref{Mode: ModeNearest}}, "write"},
		{Criteria{ReadPref: ReadPref{Mode: ModeNearest}, Deprioritized: []string{"a:1", "b:1"}},
			"read with read preference nearest, deprioritized [a:1, b:1]"},
	} {
		if got := c.c.String(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
	many := Criteria{Write: true}
	for range 1000 {
		many.Deprioritized = append(many.Deprioritized, strings.Repeat("h", 1000))
	}
	if s := many.String(); len(s) > 16*310+100 || !strings.HasSuffix(s, ", and 984 more]") {
		t.Errorf("1000 deprioritized servers: %d bytes, ...%q", len(s), s[max(0, len(s)-40):])
	}
}
