package bench

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// loadWorkerEnv makes the test binary a load worker (see TestMain).
const loadWorkerEnv = "BENCH_PROXY_LOAD_WORKER"

// TestProxyBenchSmoke runs the proxy benchmark on a tiny scale against the
// test server straight, mongopool-proxy when the repository has it, and a
// peer that only forwards bytes (testdata/fwdproxy, started through the
// -peer template): the harness must keep working, whatever the figures.
// It checks what holds at any scale: every run made operations and none
// failed, every measured operation has its latency, the server saw one
// connection per client straight and through the forwarder, and the
// report has its tables. The larger case runs its clients in two worker
// processes (this test binary again).
func TestProxyBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the test server and the proxies")
	}
	repo, err := FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	fwd := filepath.Join(t.TempDir(), "fwdproxy")
	if out, err := exec.Command("go", "build", "-o", fwd, "./testdata/fwdproxy").CombinedOutput(); err != nil {
		t.Fatalf("building the forwarder: %v\n%s", err, out)
	}
	cfg := SmokeProxy()
	cfg.Repo = repo
	cfg.Peers = []Peer{{Name: "fwd", Template: fwd + " -listen {listen} -upstream {upstream}"}}
	cfg.Unix = true    // and on a Unix socket, when the repository has the proxy
	cfg.PerProcess = 3 // 5 clients: two workers
	cfg.Worker = func() *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), loadWorkerEnv+"=1")
		return cmd
	}
	var progress strings.Builder
	cfg.Progress = &progress
	b := NewProxyBench(cfg)
	if err := b.Run(); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	_, err = os.Stat(filepath.Join(repo, "cmd", ProxyTarget))
	withProxy := !errors.Is(err, os.ErrNotExist)
	want := []string{DirectTarget, "fwd"}
	if withProxy {
		want = []string{DirectTarget, ProxyTarget, ProxyUnixTarget, "fwd"}
	}

	r := &b.Report
	if got := r.targets(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("targets %v, want %v", got, want)
	}
	if len(r.Runs) != len(want)*len(cfg.Clients) {
		t.Errorf("%d runs, want %d", len(r.Runs), len(want)*len(cfg.Clients))
	}
	for _, x := range r.Runs {
		where := x.Target + ", " + plural(x.Clients, "client")
		if x.Err != nil {
			t.Errorf("%s: %v", where, x.Err)
			continue
		}
		if x.Load.Ops == 0 || x.Load.Failed != 0 {
			t.Errorf("%s: %d operations, %d failed (%v)", where, x.Load.Ops, x.Load.Failed, x.Load.Errors)
		}
		var timed uint64
		for _, n := range x.Load.Hist {
			timed += n
		}
		if timed != uint64(x.Load.Ops) {
			t.Errorf("%s: %d latencies for %d operations", where, timed, x.Load.Ops)
		}
		if x.ServerCPU < 0 || x.ClientCPU < 0 || (x.Target != DirectTarget && x.TargetCPU < 0) {
			t.Errorf("%s: CPU per operation missing: server %v, clients %v, target %v", where, x.ServerCPU, x.ClientCPU, x.TargetCPU)
		}
		// Straight, or through a forwarder, each client is a connection
		// of the server's.
		if (x.Target == DirectTarget || x.Target == "fwd") && x.Upstream != x.Clients {
			t.Errorf("%s: the server saw %d connections at most, want one per client", where, x.Upstream)
		}
		if (x.Target == ProxyTarget || x.Target == ProxyUnixTarget) && (x.Upstream < 1 || x.Upstream-x.UpstreamIdle > cfg.MaxPoolSize) {
			t.Errorf("%s: %d upstream connections, %d before any client, maxPoolSize %d", where, x.Upstream, x.UpstreamIdle, cfg.MaxPoolSize)
		}
		if x.Target != DirectTarget && x.TargetRSS == 0 {
			t.Errorf("%s: no resident set sampled", where)
		}
	}
	if len(r.Memory) != len(want) {
		t.Errorf("%d memory measurements, want %d", len(r.Memory), len(want))
	}
	for _, m := range r.Memory {
		if m.Err != nil || m.Clients != cfg.IdleClients || m.Before <= 0 || m.After <= 0 {
			t.Errorf("memory, %s: %d clients connected of %d, RSS %d then %d, %v", m.Target, m.Clients, cfg.IdleClients, m.Before, m.After, m.Err)
		}
	}
	if withProxy && len(r.Checks) == 0 {
		t.Error("mongopool-proxy measured, but no target checked")
	}

	var sb strings.Builder
	r.Write(&sb)
	t.Log(sb.String())
	for _, s := range []string{"### 1 client\n", "### 5 clients\n", "| direct |", "| fwd |", "### Memory per idle client", "mongobetween"} {
		if !strings.Contains(sb.String(), s) {
			t.Errorf("the report lacks %q:\n%s", s, sb.String())
		}
	}
	if withProxy && !strings.Contains(sb.String(), "### Targets (mongopool-proxy)") {
		t.Errorf("the report lacks the targets:\n%s", sb.String())
	}
}
