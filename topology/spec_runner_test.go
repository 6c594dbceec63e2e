package topology

// Tests of the spec runner itself: it fails a file with a field or an event
// it does not know, naming it, and a file whose outcome the topology does
// not meet; it passes the file unchanged.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recordTB is a testing.TB that records failures instead of failing the
// test; Fatal ends the goroutine, as testing's does.
type recordTB struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recordTB) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
}

func (r *recordTB) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recordTB) Error(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *recordTB) Fatalf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recordTB) Fatal(args ...any) { r.fail(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recordTB) Helper()           {}
func (r *recordTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs) > 0
}

// runRecorded runs the SDAM runner on the file at path and returns its
// failures.
func runRecorded(t *testing.T, path string) string {
	t.Helper()
	return recordRun(t, runSpecFile, path)
}

// mutated writes a copy of the spec file folder/name, changed by change, to
// a temporary file and returns its path.
func mutated(t *testing.T, folder, name string, change func(f map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(specDir, folder, name))
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
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func phase(f map[string]any, i int) map[string]any { return f["phases"].([]any)[i].(map[string]any) }

func outcome(f map[string]any, i int) map[string]any {
	return phase(f, i)["outcome"].(map[string]any)
}

func TestSpecRunnerIsStrict(t *testing.T) {
	for _, c := range []struct {
		name, folder, file string
		change             func(f map[string]any)
		want               string // in the failures; "" for none
	}{
		{"unchanged", "errors", "non-stale-network-error.json", func(map[string]any) {}, ""},
		{"unchanged monitoring", "monitoring", "replica_set_with_removal.json", func(map[string]any) {}, ""},
		{"unknown top-level field", "rs", "discover_primary_replicaset.json",
			func(f map[string]any) { f["runOnRequirements"] = []any{} }, `unknown field "runOnRequirements"`},
		{"unknown phase field", "rs", "discover_primary_replicaset.json",
			func(f map[string]any) { phase(f, 0)["heartbeats"] = []any{} }, `unknown field "heartbeats"`},
		{"unknown outcome field", "rs", "discover_primary_replicaset.json",
			func(f map[string]any) { outcome(f, 0)["stale"] = false }, `unknown field "stale"`},
		{"unknown server field", "rs", "discover_primary_replicaset.json",
			func(f map[string]any) {
				outcome(f, 0)["servers"].(map[string]any)["a:27017"].(map[string]any)["roundTripTime"] = 1
			}, `unknown field "roundTripTime"`},
		{"unknown applicationError field", "errors", "non-stale-network-error.json",
			func(f map[string]any) {
				phase(f, 1)["applicationErrors"].([]any)[0].(map[string]any)["serviceId"] = "x"
			},
			`unknown field "serviceId"`},
		{"unknown applicationError type", "errors", "non-stale-network-error.json",
			func(f map[string]any) { phase(f, 1)["applicationErrors"].([]any)[0].(map[string]any)["type"] = "auth" },
			`unknown type "auth"`},
		{"unknown event", "monitoring", "standalone.json",
			func(f map[string]any) {
				o := outcome(f, 0)
				o["events"] = append(o["events"].([]any), map[string]any{"server_heartbeat_started_event": map[string]any{}})
			}, `unknown event "server_heartbeat_started_event"`},
		{"unknown event field", "monitoring", "standalone.json",
			func(f map[string]any) {
				e := outcome(f, 0)["events"].([]any)[0].(map[string]any)["topology_opening_event"].(map[string]any)
				e["clientId"] = "1"
			}, `unknown field "clientId"`},
		{"wrong server type", "rs", "discover_primary_replicaset.json",
			func(f map[string]any) {
				outcome(f, 0)["servers"].(map[string]any)["a:27017"].(map[string]any)["type"] = "RSSecondary"
			}, "type RSPrimary"},
		{"wrong pool generation", "errors", "non-stale-network-error.json",
			func(f map[string]any) {
				outcome(f, 1)["servers"].(map[string]any)["a:27017"].(map[string]any)["pool"] = map[string]any{"generation": 0}
			}, "pool generation 1, want 0"},
		{"missing event", "monitoring", "standalone.json",
			func(f map[string]any) {
				o := outcome(f, 0)
				o["events"] = o["events"].([]any)[1:]
			}, "5 events, want 4"},
	} {
		got := runRecorded(t, mutated(t, c.folder, c.file, c.change))
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: failures %q, want %q", c.name, got, c.want)
		}
	}
}
