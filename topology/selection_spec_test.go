package topology

// The runners of the server selection specification's tests (the
// server_selection, rtt and in_window folders of
// testdata/spec/server-selection) and of the max staleness specification's
// (testdata/spec/max-staleness): every JSON file under each folder runs, and
// a file dropped in needs no code change. A field the runners do not know
// fails the file by name, so that a newer file cannot pass by being half
// read.
//
// A server_selection or max-staleness file becomes a Description made of
// its servers (a server without maxWireVersion is taken as compatible with
// the client; compatibility is then computed as Apply computes it) and
// Criteria made of its operation, read preference, heartbeatFrequencyMS and
// deprioritized servers. Its expectations are met through SelectCandidates
// (in_latency_window, error) and through the same selection without the
// latency window (suitable_servers).

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	selectionSpecDir = "../testdata/spec/server-selection"
	stalenessSpecDir = "../testdata/spec/max-staleness"
)

// specFiles returns the JSON files under dir, in all its folders, failing
// the test when there is none.
func specFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no test files under %s", dir)
	}
	return files
}

// runEach runs run on every JSON file under dir, as a subtest named by its
// path below dir.
func runEach(t *testing.T, dir string, run func(testing.TB, string)) {
	for _, path := range specFiles(t, dir) {
		name, _ := filepath.Rel(dir, path)
		t.Run(strings.TrimSuffix(filepath.ToSlash(name), ".json"), func(t *testing.T) { run(t, path) })
	}
}

func TestServerSelectionSpec(t *testing.T) {
	runEach(t, filepath.Join(selectionSpecDir, "server_selection"), runSelectionFile)
}

func TestMaxStalenessSpec(t *testing.T) {
	runEach(t, stalenessSpecDir, runSelectionFile)
}

func TestRTTSpec(t *testing.T) {
	runEach(t, filepath.Join(selectionSpecDir, "rtt"), runRTTFile)
}

func TestInWindowSpec(t *testing.T) {
	runEach(t, filepath.Join(selectionSpecDir, "in_window"), runInWindowFile)
}

// The formats of the files, decoded strictly (see decodeStrict).
type (
	selFile struct {
		HeartbeatFrequencyMS *int64       `json:"heartbeatFrequencyMS"`
		TopologyDescription  selTopology  `json:"topology_description"`
		Operation            string       `json:"operation"`
		ReadPreference       *selReadPref `json:"read_preference"`
		Deprioritized        []selServer  `json:"deprioritized_servers"`
		Suitable             *[]selServer `json:"suitable_servers"`
		InLatencyWindow      *[]selServer `json:"in_latency_window"`
		Error                bool         `json:"error"`
		Description          string       `json:"description"`
	}
	selTopology struct {
		Type    string      `json:"type"`
		Servers []selServer `json:"servers"`
	}
	selServer struct {
		Address        string            `json:"address"`
		Type           string            `json:"type"`
		AvgRTTMS       *float64          `json:"avg_rtt_ms"`
		Tags           map[string]string `json:"tags"`
		MaxWireVersion *int32            `json:"maxWireVersion"`
		LastUpdateTime *int64            `json:"lastUpdateTime"`
		LastWrite      *struct {
			LastWriteDate json.RawMessage `json:"lastWriteDate"`
		} `json:"lastWrite"`
	}
	selReadPref struct {
		Mode                *string             `json:"mode"`
		TagSets             []map[string]string `json:"tag_sets"`
		MaxStalenessSeconds *int64              `json:"maxStalenessSeconds"`
	}
	rttFile struct {
		AvgRTTMS  json.RawMessage `json:"avg_rtt_ms"` // a number or "NULL"
		NewRTTMS  float64         `json:"new_rtt_ms"`
		NewAvgRTT float64         `json:"new_avg_rtt"`
	}
	inWindowFile struct {
		Description         string      `json:"description"`
		TopologyDescription selTopology `json:"topology_description"`
		MockedTopologyState []struct {
			Address        string `json:"address"`
			OperationCount int64  `json:"operation_count"`
		} `json:"mocked_topology_state"`
		Iterations int `json:"iterations"`
		Outcome    struct {
			Tolerance           float64            `json:"tolerance"`
			ExpectedFrequencies map[string]float64 `json:"expected_frequencies"`
		} `json:"outcome"`
	}
)

// readSpec reads the file at path into v, strictly.
func readSpec(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeStrict(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// millis returns a duration of ms milliseconds, to the nanosecond.
func millis(ms float64) time.Duration { return time.Duration(math.Round(ms * 1e6)) }

// serverType returns the ServerType of a specification's name.
func serverType(t testing.TB, name string) ServerType {
	t.Helper()
	for i, n := range serverTypeNames {
		if n == name {
			return ServerType(i)
		}
	}
	t.Fatalf("unknown server type %q", name)
	return 0
}

// topologyType returns the TopologyType of a specification's name.
func topologyType(t testing.TB, name string) TopologyType {
	t.Helper()
	for i, n := range topologyTypeNames {
		if n == name {
			return TopologyType(i)
		}
	}
	t.Fatalf("unknown topology type %q", name)
	return 0
}

// description returns the Description of a file's topology_description.
func (td selTopology) description(t testing.TB) Description {
	t.Helper()
	d := Description{Type: topologyType(t, td.Type)}
	for _, s := range td.Servers {
		if _, dup := d.servers.Get(s.Address); dup {
			t.Fatalf("server %s given twice", s.Address)
		}
		d.servers = d.servers.Set(s.Address, s.server(t))
	}
	d.CompatibilityError = d.compatibility()
	return d
}

// server returns the ServerDescription of a file's server.
func (s selServer) server(t testing.TB) ServerDescription {
	t.Helper()
	sd := ServerDescription{Address: s.Address, Type: serverType(t, s.Type), Tags: s.Tags,
		MinWireVersion: clientMinWireVersion, MaxWireVersion: clientMaxWireVersion}
	if s.AvgRTTMS != nil {
		sd.RoundTripTime, sd.HasRoundTripTime = millis(*s.AvgRTTMS), true
	}
	if s.MaxWireVersion != nil {
		sd.MaxWireVersion = *s.MaxWireVersion
		sd.MinWireVersion = min(sd.MinWireVersion, sd.MaxWireVersion)
	}
	if s.LastUpdateTime != nil {
		sd.LastUpdateTime = time.UnixMilli(*s.LastUpdateTime)
	}
	if s.LastWrite != nil {
		v := extValue(t, s.LastWrite.LastWriteDate)
		ms, ok := v.AsInt64OK()
		if !ok {
			t.Fatalf("%s: lastWriteDate %s is not an integer", s.Address, s.LastWrite.LastWriteDate)
		}
		sd.LastWriteDate = time.UnixMilli(ms)
	}
	return sd
}

// criteria returns the Criteria of a file's operation and read preference.
func (f selFile) criteria(t testing.TB) Criteria {
	t.Helper()
	var c Criteria
	switch f.Operation {
	case "", "read":
	case "write":
		c.Write = true
	default:
		t.Fatalf("unknown operation %q", f.Operation)
	}
	if f.HeartbeatFrequencyMS != nil {
		c.HeartbeatFrequency = time.Duration(*f.HeartbeatFrequencyMS) * time.Millisecond
	}
	if rp := f.ReadPreference; rp != nil {
		if rp.Mode != nil {
			m, err := ParseReadPrefMode(*rp.Mode)
			if err != nil {
				t.Fatal(err)
			}
			c.ReadPref.Mode = m
		}
		for _, set := range rp.TagSets {
			t := TagSet{}
			for _, name := range slices.Sorted(maps.Keys(set)) {
				t = append(t, Tag{Name: name, Value: set[name]})
			}
			c.ReadPref.TagSets = append(c.ReadPref.TagSets, t)
		}
		// -1 is "no maximum"; any other value is a maximum, valid or not.
		if s := rp.MaxStalenessSeconds; s != nil && *s != -1 {
			c.ReadPref.MaxStaleness, c.ReadPref.HasMaxStaleness = time.Duration(*s)*time.Second, true
		}
	}
	for _, s := range f.Deprioritized {
		c.Deprioritized = append(c.Deprioritized, s.Address)
	}
	return c
}

// serverList returns the servers as "address type" lines, sorted.
func serverList(servers []ServerDescription) string {
	lines := make([]string, 0, len(servers))
	for _, s := range servers {
		lines = append(lines, s.Address+" "+s.Type.String())
	}
	slices.Sort(lines)
	return strings.Join(lines, ", ")
}

// expectedList returns a file's expected servers as serverList does.
func expectedList(t testing.TB, servers []selServer) string {
	t.Helper()
	sds := make([]ServerDescription, 0, len(servers))
	for _, s := range servers {
		sds = append(sds, s.server(t))
	}
	return serverList(sds)
}

func runSelectionFile(t testing.TB, path string) {
	var f selFile
	readSpec(t, path, &f)
	d := f.TopologyDescription.description(t)
	c := f.criteria(t)
	if !f.Error && f.Suitable == nil && f.InLatencyWindow == nil {
		t.Fatalf("%s: no expectation: neither error, suitable_servers nor in_latency_window", path)
	}

	got, err := d.SelectCandidates(c, nil)
	if f.Error {
		if !errors.Is(err, ErrInvalidReadPref) {
			t.Fatalf("selection with %s: got %v, %v; want an error wrapping ErrInvalidReadPref", c, serverList(got), err)
		}
		if len(got) != 0 {
			t.Errorf("selection failed but returned servers: %s", serverList(got))
		}
		return
	}
	if err != nil {
		t.Fatalf("selection with %s: %v", c, err)
	}
	if f.InLatencyWindow != nil {
		if g, w := serverList(got), expectedList(t, *f.InLatencyWindow); g != w {
			t.Errorf("in the latency window with %s: got [%s], want [%s]", c, g, w)
		}
	}
	if f.Suitable != nil {
		suitable, err := d.selectSuitable(c, nil)
		if err != nil {
			t.Fatalf("suitable servers: %v", err)
		}
		if g, w := serverList(suitable), expectedList(t, *f.Suitable); g != w {
			t.Errorf("suitable with %s: got [%s], want [%s]", c, g, w)
		}
	}
}

// runRTTFile checks the moving average of round trip times: the roundTrips of a
// server whose average is avg_rtt_ms ("NULL" when it has none) after the
// sample new_rtt_ms.
func runRTTFile(t testing.TB, path string) {
	var f rttFile
	readSpec(t, path, &f)
	var r roundTrips
	if string(f.AvgRTTMS) != `"NULL"` {
		var avg float64
		if err := json.Unmarshal(f.AvgRTTMS, &avg); err != nil {
			t.Fatalf("avg_rtt_ms %s: %v", f.AvgRTTMS, err)
		}
		r.Add(millis(avg)) // the first sample is the average
	}
	r.Add(millis(f.NewRTTMS))
	got, ok := r.Average()
	if want := millis(f.NewAvgRTT); !ok || (got-want).Abs() > time.Nanosecond {
		t.Errorf("average after %vms from %s ms: %v, %v; want %v", f.NewRTTMS, f.AvgRTTMS, got, ok, want)
	}
}

// runInWindowFile selects a server for a read with mode nearest as many
// times as the file says, with the operation counts it gives (which the
// selections do not change), and checks how often each server was chosen.
// The random source is seeded and the candidates sorted by address before
// the choice, so that a run is the same every time.
func runInWindowFile(t testing.TB, path string) {
	var f inWindowFile
	readSpec(t, path, &f)
	d := f.TopologyDescription.description(t)
	counts := map[string]int64{}
	for _, s := range f.MockedTopologyState {
		counts[s.Address] = s.OperationCount
	}
	if f.Iterations <= 0 {
		t.Fatalf("iterations %d", f.Iterations)
	}
	inProgress := func(address string) int64 {
		n, ok := counts[address]
		if !ok {
			t.Fatalf("no operation count for %s", address)
		}
		return n
	}
	rng := rand.New(rand.NewPCG(1, 2))
	c := Criteria{ReadPref: ReadPref{Mode: ModeNearest}}
	chosen := map[string]int{}
	buf := make([]ServerDescription, 0, d.Len())
	for range f.Iterations {
		cands, err := d.SelectCandidates(c, buf[:0])
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(cands, func(a, b ServerDescription) int { return strings.Compare(a.Address, b.Address) })
		i := choose(cands, rng.IntN, inProgress)
		if i < 0 {
			t.Fatalf("no server chosen among [%s]", serverList(cands))
		}
		chosen[cands[i].Address]++
	}
	for addr := range chosen {
		if _, ok := f.Outcome.ExpectedFrequencies[addr]; !ok {
			t.Errorf("%s chosen %d times, but has no expected frequency", addr, chosen[addr])
		}
	}
	for addr, want := range f.Outcome.ExpectedFrequencies {
		got := float64(chosen[addr]) / float64(f.Iterations)
		exact := want == 0 || want == 1
		if exact && got != want || !exact && math.Abs(got-want) > f.Outcome.Tolerance {
			t.Errorf("%s chosen at frequency %.3f, want %.3f (tolerance %v)", addr, got, want, f.Outcome.Tolerance)
		}
	}
}

// TestSelectionRunnersAreStrict: the runners fail a file with a field they
// do not know, naming it, and a file whose expectations selection does not
// meet; they pass the file unchanged.
func TestSelectionRunnersAreStrict(t *testing.T) {
	sel := filepath.Join(selectionSpecDir, "server_selection", "ReplicaSetWithPrimary", "read", "SecondaryPreferred_tags.json")
	stale := filepath.Join(stalenessSpecDir, "ReplicaSetWithPrimary", "Nearest.json")
	window := filepath.Join(selectionSpecDir, "in_window", "one-least-two-tied.json")
	rtt := filepath.Join(selectionSpecDir, "rtt", "value_test_2.json")
	servers := func(f map[string]any, key string) []any { return f[key].([]any) }
	server := func(f map[string]any, i int) map[string]any {
		return servers(f["topology_description"].(map[string]any), "servers")[i].(map[string]any)
	}
	for _, c := range []struct {
		name, path string
		run        func(testing.TB, string)
		change     func(f map[string]any)
		want       string // in the failures; "" for none
	}{
		{"unchanged", sel, runSelectionFile, func(map[string]any) {}, ""},
		{"unchanged staleness", stale, runSelectionFile, func(map[string]any) {}, ""},
		{"unchanged in_window", window, runInWindowFile, func(map[string]any) {}, ""},
		{"unchanged rtt", rtt, runRTTFile, func(map[string]any) {}, ""},
		{"unknown field", sel, runSelectionFile, func(f map[string]any) { f["localThresholdMS"] = 0 },
			`unknown field "localThresholdMS"`},
		{"unknown server field", sel, runSelectionFile, func(f map[string]any) { server(f, 0)["minWireVersion"] = 8 },
			`unknown field "minWireVersion"`},
		{"unknown read preference field", sel, runSelectionFile,
			func(f map[string]any) { f["read_preference"].(map[string]any)["hedge"] = map[string]any{} }, `unknown field "hedge"`},
		{"unknown server type", sel, runSelectionFile, func(f map[string]any) { server(f, 1)["type"] = "RSPassive" },
			`unknown server type "RSPassive"`},
		{"unknown operation", sel, runSelectionFile, func(f map[string]any) { f["operation"] = "aggregate" },
			`unknown operation "aggregate"`},
		{"wrong window", sel, runSelectionFile, func(f map[string]any) { f["in_latency_window"] = []any{} },
			"in the latency window with read with read preference secondaryPreferred, tag sets [{data_center: nyc}]: got [a:27017 RSPrimary], want []"},
		{"wrong suitable", stale, runSelectionFile, func(f map[string]any) { f["suitable_servers"] = f["in_latency_window"] },
			"suitable with read with read preference nearest, maxStaleness 2m30s: got [a:27017 RSPrimary, b:27017 RSSecondary], want [a:27017 RSPrimary]"},
		{"error expected", stale, runSelectionFile, func(f map[string]any) { f["error"] = true },
			"want an error wrapping ErrInvalidReadPref"},
		{"error not expected", filepath.Join(stalenessSpecDir, "ReplicaSetNoPrimary", "ZeroMaxStaleness.json"), runSelectionFile,
			func(f map[string]any) { delete(f, "error"); f["in_latency_window"] = []any{} }, "maxStaleness 0s is less than 1m30s"},
		{"no expectation", sel, runSelectionFile,
			func(f map[string]any) { delete(f, "in_latency_window"); delete(f, "suitable_servers") }, "no expectation"},
		{"wrong frequency", window, runInWindowFile,
			func(f map[string]any) {
				f["outcome"].(map[string]any)["expected_frequencies"].(map[string]any)["b:27017"] = 0.5
			},
			"b:27017 chosen at frequency 0.6"},
		{"unlisted server chosen", window, runInWindowFile,
			func(f map[string]any) {
				delete(f["outcome"].(map[string]any)["expected_frequencies"].(map[string]any), "a:27017")
			},
			"a:27017 chosen"},
		{"wrong average", rtt, runRTTFile, func(f map[string]any) { f["new_avg_rtt"] = 9.7 }, "want 9.7ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := recordRun(t, c.run, mutatedFile(t, c.path, c.change))
			switch {
			case c.want == "" && got != "":
				t.Errorf("failures: %s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("failures %q, want %q in them", got, c.want)
			}
		})
	}
}

// recordRun runs run on the file at path and returns its failures.
func recordRun(t *testing.T, run func(testing.TB, string), path string) string {
	t.Helper()
	r := &recordTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(r, path)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the runner did not return within 10s")
	}
	return strings.Join(r.msgs, "\n")
}

// mutatedFile writes a copy of the spec file at path, changed by change, to
// a temporary file and returns its path.
func mutatedFile(t *testing.T, path string, change func(f map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	change(f)
	if data, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}
