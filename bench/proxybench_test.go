package bench

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// TestProxyBenchFerretDB runs the proxy benchmark on a tiny scale with the
// embedded FerretDB as its server (testdata/ferretserver, built by the
// benchmark): the finds work straight and through mongopool-proxy, and
// FerretDB's serverStatus, which counts no connections, does not fail the
// run: on Linux the server's connections are counted in the kernel's socket
// tables (one per client straight, within the pool's bound through the
// proxy); elsewhere the report says they were not measured.
func TestProxyBenchFerretDB(t *testing.T) {
	if testing.Short() {
		t.Skip("builds FerretDB and the proxy and starts them")
	}
	repo, err := FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	cfg := SmokeProxy()
	cfg.Repo = repo
	cfg.Server = ServerFerretDB
	cfg.Clients = []int{1}
	cfg.IdleClients = 0
	var progress strings.Builder
	cfg.Progress = &progress
	b := NewProxyBench(cfg)
	if err := b.Run(); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	r := &b.Report
	if len(r.Runs) != 2 {
		t.Fatalf("%d runs, want direct and %s", len(r.Runs), ProxyTarget)
	}
	for _, x := range r.Runs {
		if x.Err != nil || x.Load.Ops == 0 || x.Load.Failed != 0 {
			t.Errorf("%s: %d operations, %d failed, %v (%v)", x.Target, x.Load.Ops, x.Load.Failed, x.Err, x.Load.Errors)
		}
		switch {
		case runtime.GOOS != "linux":
			if x.UpstreamSamples != 0 {
				t.Errorf("%s: %d readings of the server's connections, from a server that counts none", x.Target, x.UpstreamSamples)
			}
		case x.UpstreamSamples == 0:
			t.Errorf("%s: the server's connections were not counted", x.Target)
		case x.Target == DirectTarget && x.Upstream != 1:
			t.Errorf("direct: the server saw %d connections at most, want one, the client's", x.Upstream)
		case x.Target == ProxyTarget && (x.Upstream < 1 || x.Upstream-x.UpstreamIdle > cfg.MaxPoolSize):
			t.Errorf("%s: %d upstream connections, %d before any client, maxPoolSize %d", x.Target, x.Upstream, x.UpstreamIdle, cfg.MaxPoolSize)
		}
	}
	var sb strings.Builder
	r.Write(&sb)
	counted := "counted in the kernel's socket tables"
	if runtime.GOOS != "linux" {
		counted = "not measured"
	}
	for _, s := range []string{"Server: ferretdb, a standalone", counted, "| direct |", "| " + ProxyTarget + " |"} {
		if !strings.Contains(sb.String(), s) {
			t.Errorf("the report lacks %q:\n%s", s, sb.String())
		}
	}
}

// TestProxyBenchRefusesUnknownServer: a server the benchmark cannot run,
// or FerretDB as a replica set, is refused before anything is built.
func TestProxyBenchRefusesUnknownServer(t *testing.T) {
	for _, c := range []struct {
		server  string
		replSet int
		want    string
	}{
		{"mongod", 0, `unknown server "mongod"`},
		{ServerFerretDB, 3, "standalone only"},
	} {
		cfg := SmokeProxy()
		cfg.Repo = t.TempDir() // nothing to build there: a refusal must come first
		cfg.Server, cfg.ReplSet = c.server, c.replSet
		err := NewProxyBench(cfg).Run()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("server %q, replica set %d: %v, want an error saying %q", c.server, c.replSet, err, c.want)
		}
	}
}

// TestCountEstablished counts a socket table's established connections on
// a port: the server's ends only (not the clients' ends, whose remote port
// it is, nor the listening socket), IPv6 lines alike; a file that is not a
// socket table is an error, not a count of 0.
func TestCountEstablished(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:6989 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:6989 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:D431 0100007F:6989 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:6989 0100007F:D432 06 00000000:00000000 03:00000F6A 00000000     0        0 0 3 0000000000000000
   4: 0000000000000000FFFF00000100007F:6989 0000000000000000FFFF00000100007F:D433 01 00000000:00000000 00:00000000 00000000  1000 0 4 1 0 20 4 30 10 -1
`
	n, err := countEstablished([]byte(table), 0x6989)
	if err != nil || n != 2 {
		t.Errorf("countEstablished = %d, %v; want 2 (lines 1 and 4)", n, err)
	}
	if n, err := countEstablished([]byte(table), 0xD431); err != nil || n != 1 {
		t.Errorf("the client's port: %d, %v; want 1", n, err)
	}
	for _, bad := range []string{"", "hello\n", "  sl  local_address rem_address   st\n 0: 0100007F 00000000:0000 01\n", "  sl  local_address rem_address   st\n 0: 0100007F:ZZZZ 00000000:0000 01\n", "  sl  local_address rem_address   st\n 0:\n"} {
		if n, err := countEstablished([]byte(bad), 0x6989); err == nil {
			t.Errorf("%q: %d, want an error", bad, n)
		}
	}
}
