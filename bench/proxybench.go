package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// The proxy benchmark: clients straight to the test server (direct), then
// through mongopool-proxy and through any other proxy (a peer), side by
// side in one run, each (target, number of clients) measured the same way:
// throughput, latency, the CPU each process spent per operation, the
// connections the server saw, and the memory a proxy holds per idle client.

// ProxyTarget names the proxy of the repository, built from cmd/mongopool-proxy.
const ProxyTarget = "mongopool-proxy"

// ProxyUnixTarget names mongopool-proxy listening on a Unix socket: the
// sidecar layout, its clients on its host (see ProxyConfig.Unix).
const ProxyUnixTarget = "mongopool-proxy-unix"

// DirectTarget names the clients connected straight to the server.
const DirectTarget = "direct"

// The servers ProxyConfig.Server names.
const (
	ServerMongotest = "mongotest"
	ServerFerretDB  = "ferretdb"
)

// ProxyConfig is what the proxy benchmark measures, and how.
type ProxyConfig struct {
	// Repo is the repository's root, where cmd/mongotest and
	// cmd/mongopool-proxy are built from. ServerBin and ProxyBin, when set,
	// are binaries to use instead.
	Repo      string
	ServerBin string
	ProxyBin  string
	// Server is the server the clients and the proxies use: ServerMongotest
	// (the default, also for "") or ServerFerretDB, the embedded FerretDB
	// on SQLite as a process (testdata/ferretserver): a server nobody here
	// wrote, whose cost grows with its concurrent operations. FerretDB's
	// serverStatus has no connection count: its upstream connections are
	// not measured.
	Server string

	// Clients are the numbers of clients of each case, each a connection
	// of its own.
	Clients []int
	// Warmup and Duration: each (target, clients) run finds unmeasured for
	// Warmup, then for Duration measured.
	Warmup   time.Duration
	Duration time.Duration
	// Rounds repeats every run, the targets in turn (a different one first
	// each round); the run of median throughput counts.
	Rounds int
	// Docs is how many documents the finds look up by _id.
	Docs int
	// ReplSet, when above 0, runs the server as a replica set of that many
	// members; the load goes to its primary, straight or through the
	// proxies (mongopool-proxy is given the replica set's URI).
	ReplSet int

	// Proxy adds mongopool-proxy; MaxPoolSize is its -max-pool-size, and
	// ProxyArgs more flags for it.
	Proxy       bool
	MaxPoolSize int
	ProxyArgs   []string
	// Unix adds mongopool-proxy listening on a Unix socket, its clients
	// connecting there (ProxyUnixTarget), beside the one on TCP: a
	// sidecar's clients are on its host. The targets are checked
	// against the TCP one.
	Unix bool
	// Peers are other proxies, each a command started for each run.
	Peers []Peer

	// IdleClients is how many idle clients the memory measurement connects
	// to each target (0: none).
	IdleClients int
	// Settle is how long the memory measurement waits before each reading.
	Settle time.Duration

	// PerProcess is the most clients one process runs: past it, the
	// clients are spread over worker processes, each started by Worker
	// (which RunLoadWorker must serve). 0: what the limit of open files
	// allows.
	PerProcess int
	Worker     func() *exec.Cmd

	// OpTimeout bounds each round trip (and each handshake).
	OpTimeout time.Duration
	// StartTimeout bounds the wait for a proxy to answer.
	StartTimeout time.Duration

	// Progress, if not nil, hears what is being measured.
	Progress io.Writer
}

// Peer is another proxy: a shell command in which {listen} becomes the
// address, 127.0.0.1:port, where it must listen ({listen_port} the port
// alone), {upstream} the server's host:port (a replica set's primary) and
// {upstream_uri} the server's connection string.
type Peer struct {
	Name     string
	Template string
}

// ParsePeer reads a -peer flag: a command template, optionally preceded by
// its name and a colon ("mongobetween: ./mongobetween ..."). Without a
// name, the peer is named after the command's first word.
func ParsePeer(s string) (Peer, error) {
	s = strings.TrimSpace(s)
	f := strings.Fields(s)
	if len(f) == 0 {
		return Peer{}, errors.New("an empty command")
	}
	if name, ok := strings.CutSuffix(f[0], ":"); ok && name != "" {
		rest := strings.TrimSpace(strings.TrimPrefix(s, f[0]))
		if rest == "" {
			return Peer{}, fmt.Errorf("peer %s: no command", name)
		}
		return Peer{name, rest}, checkTemplate(rest)
	}
	return Peer{filepath.Base(f[0]), s}, checkTemplate(s)
}

func checkTemplate(t string) error {
	if !strings.Contains(t, "{listen}") && !strings.Contains(t, "{listen_port}") {
		return fmt.Errorf("%q has neither {listen} nor {listen_port}: where would it listen?", t)
	}
	return nil
}

// FullProxy returns the settings of the full run.
func FullProxy() ProxyConfig {
	return ProxyConfig{
		Clients:      []int{1, 64, 1000},
		Warmup:       time.Second,
		Duration:     5 * time.Second,
		Rounds:       1,
		Docs:         1000,
		Proxy:        true,
		MaxPoolSize:  100,
		IdleClients:  1000,
		Settle:       time.Second,
		OpTimeout:    10 * time.Second,
		StartTimeout: 60 * time.Second,
	}
}

// SmokeProxy returns settings that run everything once on a tiny scale,
// in seconds: for CI, to catch breakage, not to measure.
func SmokeProxy() ProxyConfig {
	return ProxyConfig{
		Clients:      []int{1, 5},
		Warmup:       50 * time.Millisecond,
		Duration:     200 * time.Millisecond,
		Rounds:       1,
		Docs:         20,
		Proxy:        true,
		MaxPoolSize:  2,
		IdleClients:  10,
		Settle:       50 * time.Millisecond,
		OpTimeout:    5 * time.Second,
		StartTimeout: 30 * time.Second,
	}
}

// FindRepo returns the repository's root: dir or the first of its parents
// whose go.mod declares the module github.com/mongopool/mongopool.
func FindRepo(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && modulePath(b) == "github.com/mongopool/mongopool" {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of github.com/mongopool/mongopool in %s or above", dir)
		}
	}
}

var moduleLine = regexp.MustCompile(`(?m)^module\s+(\S+)`)

func modulePath(gomod []byte) string {
	if m := moduleLine.FindSubmatch(gomod); m != nil {
		return string(m[1])
	}
	return ""
}

// ProxyBench runs the proxy benchmark.
type ProxyBench struct {
	cfg     ProxyConfig
	tmp     string
	server  *serverProc
	targets []*benchTarget
	Report  ProxyReport
}

// benchTarget is where the clients connect: the server itself, or a proxy
// started afresh for each run.
type benchTarget struct {
	name string
	unix bool // listens on a Unix socket
	// command returns the command that starts the proxy listening on
	// listen; nil for direct.
	command func(listen string) *exec.Cmd
}

func (t *benchTarget) direct() bool { return t.command == nil }

// NewProxyBench returns a benchmark of cfg; Run runs it.
func NewProxyBench(cfg ProxyConfig) *ProxyBench {
	cfg.Rounds = max(cfg.Rounds, 1)
	cfg.Docs = max(cfg.Docs, 1)
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 10 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.PerProcess <= 0 {
		// What the client connections may take of the open files, with a
		// margin for everything else.
		cfg.PerProcess = max(openFileLimit()-1024, 100)
	}
	return &ProxyBench{cfg: cfg}
}

func (b *ProxyBench) progress(format string, args ...any) {
	if b.cfg.Progress != nil {
		fmt.Fprintf(b.cfg.Progress, "proxybench: "+format+"\n", args...)
	}
}

// Run builds what it needs, starts the server, measures every case and
// fills in the report. The processes it started are stopped when it
// returns, whatever happened.
func (b *ProxyBench) Run() (err error) {
	began := time.Now()
	switch b.cfg.Server {
	case "":
		b.cfg.Server = ServerMongotest
	case ServerMongotest:
	case ServerFerretDB:
		if b.cfg.ReplSet > 0 {
			return errors.New("the embedded FerretDB runs as a standalone only: a replica set needs the server mongotest")
		}
	default:
		return fmt.Errorf("unknown server %q: %s or %s", b.cfg.Server, ServerMongotest, ServerFerretDB)
	}
	if b.tmp, err = os.MkdirTemp("", "proxybench"); err != nil {
		return err
	}
	defer os.RemoveAll(b.tmp)
	if err := b.build(); err != nil {
		return err
	}
	if b.server, err = startServerProc(b.cfg.ServerBin, b.cfg.ReplSet, b.cfg.Docs, b.cfg.OpTimeout); err != nil {
		return err
	}
	b.server.name = b.cfg.Server
	defer func() {
		if exit := b.server.close(); exit != "exit 0" {
			b.note("The test server stopped with %s.", exit)
		}
	}()
	b.progress("server %s (primary %s, pid %d), %d documents", b.server.uri, b.server.primary, b.server.proc.pid(), b.cfg.Docs)
	b.Report.Server = b.server.describe()
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Report.LoadAvg = strings.Join(strings.Fields(string(la))[:3], " ")
	}
	b.Report.Config = b.cfg

	// Memory first, while the server has not grown its heap for the load.
	if b.cfg.IdleClients > 0 {
		for _, t := range b.targets {
			b.progress("memory: %s with %d idle clients", t.name, b.cfg.IdleClients)
			m := b.idleMemory(t, b.cfg.IdleClients)
			b.Report.Memory = append(b.Report.Memory, m)
		}
	}
	for _, n := range b.cfg.Clients {
		runs := map[string][]proxyRun{}
		for round := range b.cfg.Rounds {
			for i := range b.targets {
				t := b.targets[(i+round)%len(b.targets)]
				b.progress("%d clients, %s, round %d of %d", n, t.name, round+1, b.cfg.Rounds)
				r := b.runOne(t, n)
				b.progress("  %s", r.summary())
				if r.Exit != "" {
					last := ""
					if len(r.Output) > 0 {
						last = "; its last: " + r.Output[len(r.Output)-1]
					}
					b.progress("  %s: %s, %d lines of output%s", t.name, r.Exit, r.Lines, last)
				}
				runs[t.name] = append(runs[t.name], r)
			}
		}
		for _, t := range b.targets {
			b.Report.Runs = append(b.Report.Runs, medianRun(runs[t.name]))
		}
	}
	b.Report.Elapsed = time.Since(began)
	b.Report.check()
	return nil
}

func (b *ProxyBench) note(format string, args ...any) {
	b.Report.Notes = append(b.Report.Notes, fmt.Sprintf(format, args...))
}

// build builds the server and mongopool-proxy (unless given), and lists
// the targets.
func (b *ProxyBench) build() error {
	goBuild := func(name, dir string) (string, error) {
		out := filepath.Join(b.tmp, name)
		b.progress("building %s", dir)
		cmd := exec.Command("go", "build", "-o", out, ".")
		cmd.Dir = filepath.Join(b.cfg.Repo, dir)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build in %s: %v\n%s", cmd.Dir, err, msg)
		}
		return out, nil
	}
	var err error
	if b.cfg.ServerBin == "" {
		name, dir := "mongotest", filepath.Join("cmd", "mongotest")
		if b.cfg.Server == ServerFerretDB {
			name, dir = "ferretserver", filepath.Join("bench", "testdata", "ferretserver")
		}
		if b.cfg.ServerBin, err = goBuild(name, dir); err != nil {
			return err
		}
	}
	b.targets = []*benchTarget{{name: DirectTarget}}
	if (b.cfg.Proxy || b.cfg.Unix) && b.cfg.ProxyBin == "" {
		if _, err := os.Stat(filepath.Join(b.cfg.Repo, "cmd", ProxyTarget)); errors.Is(err, os.ErrNotExist) {
			b.note("There is no cmd/%s in %s: measured without it.", ProxyTarget, b.cfg.Repo)
			b.progress("no cmd/%s: measuring without it", ProxyTarget)
			b.cfg.Proxy, b.cfg.Unix = false, false
		}
	}
	if b.cfg.Proxy || b.cfg.Unix {
		if b.cfg.ProxyBin == "" {
			if b.cfg.ProxyBin, err = goBuild(ProxyTarget, filepath.Join("cmd", ProxyTarget)); err != nil {
				return err
			}
		}
		bin := b.cfg.ProxyBin
		command := func(listen string) *exec.Cmd {
			args := []string{"-listen", listen, "-upstream", b.server.proxyUpstream()}
			if b.cfg.MaxPoolSize > 0 {
				args = append(args, "-max-pool-size", strconv.Itoa(b.cfg.MaxPoolSize))
			}
			// Its admin HTTP listener's default port is fixed: two
			// proxies, this one and another on the machine, would fight
			// for it.
			if !slices.ContainsFunc(b.cfg.ProxyArgs, func(a string) bool { return strings.HasPrefix(strings.TrimLeft(a, "-"), "admin") }) {
				args = append(args, "-admin=")
			}
			return exec.Command(bin, append(args, b.cfg.ProxyArgs...)...)
		}
		if b.cfg.Proxy {
			b.targets = append(b.targets, &benchTarget{name: ProxyTarget, command: command})
		}
		if b.cfg.Unix {
			b.targets = append(b.targets, &benchTarget{name: ProxyUnixTarget, unix: true, command: command})
		}
	}
	names := map[string]int{}
	for _, t := range b.targets {
		names[t.name]++
	}
	for _, p := range b.cfg.Peers {
		name := p.Name
		if names[name]++; names[name] > 1 {
			name = fmt.Sprintf("%s#%d", name, names[name])
		}
		b.targets = append(b.targets, &benchTarget{name: name, command: func(listen string) *exec.Cmd {
			return exec.Command("sh", "-c", b.server.expand(p.Template, listen))
		}})
	}
	return nil
}

// proxyRun is what one (target, clients) run measured.
type proxyRun struct {
	Target  string
	Clients int
	Load    LoadResult
	Elapsed time.Duration // the measured time
	// CPU time per measured operation, of the target's processes, the
	// server's and the clients' (this process and its workers); negative
	// when unknown.
	TargetCPU, ServerCPU, ClientCPU time.Duration
	// Upstream is the most connections the server had open at once over
	// the run, above those it had before the target started (the
	// benchmark's own); UpstreamIdle, those the target had opened once
	// ready, before any client connected (-1 for direct, or when the
	// server did not answer). UpstreamSamples counts the readings of
	// Upstream (0: not measured, the server too busy to answer
	// serverStatus in time, say).
	Upstream, UpstreamIdle int
	UpstreamSamples        int
	// TargetRSS is the target's largest resident set over the run (0 for
	// direct or unknown).
	TargetRSS int64
	Exit      string   // how the target stopped
	Output    []string // its last lines of output
	Lines     int      // how many it printed
	Err       error    // a run that could not be made
}

func (r proxyRun) opsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Load.Ops) / r.Elapsed.Seconds()
}

func (r proxyRun) summary() string {
	if r.Err != nil {
		return "failed: " + r.Err.Error()
	}
	upstream := "not measured"
	if r.UpstreamSamples > 0 {
		upstream = fmt.Sprint(r.Upstream)
	}
	return fmt.Sprintf("%.0f ops/s, p50 %s, p99 %s, %d failed, upstream conns %s", r.opsPerSec(),
		fmtDur(histPercentile(r.Load.Hist, 50)), fmtDur(histPercentile(r.Load.Hist, 99)), r.Load.Failed, upstream)
}

// medianRun returns the run of median throughput, with the upstream
// connections of all: the most any round had open, and the fewest the
// target opened on its own (the bound on connections holds in every round,
// or it does not).
func medianRun(runs []proxyRun) proxyRun {
	s := slices.Clone(runs)
	slices.SortStableFunc(s, func(a, b proxyRun) int { return cmp.Compare(a.opsPerSec(), b.opsPerSec()) })
	m := s[len(s)/2]
	m.Upstream, m.UpstreamSamples = 0, 0
	for _, r := range runs {
		if r.UpstreamSamples > 0 {
			m.Upstream = max(m.Upstream, r.Upstream)
			m.UpstreamSamples += r.UpstreamSamples
		}
		if r.UpstreamIdle >= 0 && (m.UpstreamIdle < 0 || r.UpstreamIdle < m.UpstreamIdle) {
			m.UpstreamIdle = r.UpstreamIdle
		}
	}
	return m
}

// startTarget starts t's proxy, if it has one, and returns where the
// clients connect.
func (b *ProxyBench) startTarget(t *benchTarget) (addr string, p *proc, err error) {
	if t.direct() {
		return b.server.primary, nil, nil
	}
	if t.unix {
		addr = filepath.Join(b.tmp, "proxy.sock")
	} else if addr, err = freeAddr(); err != nil {
		return "", nil, err
	}
	if p, err = startProc(t.name, t.command(addr)); err != nil {
		return "", nil, err
	}
	if err := waitReady(p, addr, b.cfg.StartTimeout); err != nil {
		p.stop(5 * time.Second)
		return "", nil, err
	}
	return addr, p, nil
}

// loaders returns the groups of n clients connecting to addr: one in this
// process, or as many worker processes as PerProcess asks.
func (b *ProxyBench) loaders(addr string, n int) ([]loader, error) {
	spec := LoadSpec{Addr: addr, Docs: b.cfg.Docs, Warmup: b.cfg.Warmup, Duration: b.cfg.Duration, OpTimeout: b.cfg.OpTimeout}
	if n <= b.cfg.PerProcess {
		spec.Clients = n
		return []loader{localLoader{newLoadGroup(spec)}}, nil
	}
	procs := (n + b.cfg.PerProcess - 1) / b.cfg.PerProcess
	var out []loader
	for i := range procs {
		spec.First = i * n / procs
		spec.Clients = (i+1)*n/procs - spec.First
		cmd, err := b.workerCmd()
		var w *workerLoader
		if err == nil {
			w, err = startWorker(cmd, spec)
		}
		if err != nil {
			for _, l := range out {
				l.close()
			}
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func (b *ProxyBench) workerCmd() (*exec.Cmd, error) {
	if b.cfg.Worker != nil {
		return b.cfg.Worker(), nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(exe, "-worker"), nil
}

// connectAll connects every group's clients, the groups at once, and
// returns how many connected.
func connectAll(ls []loader) (int, error) {
	counts := make([]int, len(ls))
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Add(1)
		go func() { defer wg.Done(); counts[i], errs[i] = l.connect() }()
	}
	wg.Wait()
	var sum int
	for _, c := range counts {
		sum += c
	}
	return sum, errors.Join(errs...)
}

func closeAll(ls []loader) error {
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.close())
	}
	return errors.Join(errs...)
}

// runOne measures n clients against t: the server back to its idle
// connections, the target started, the clients connected, their load run
// while the server's connections and the target's memory are sampled every
// 100 ms and the processes' CPU times read at the start and the end of the
// measured time; then the clients and the target stopped.
func (b *ProxyBench) runOne(t *benchTarget, n int) (r proxyRun) {
	r = proxyRun{Target: t.name, Clients: n, TargetCPU: -1, ServerCPU: -1, ClientCPU: -1, UpstreamIdle: -1}
	if err := b.server.waitIdle(10 * time.Second); err != nil {
		b.note("%d clients, %s: %v; its connections count from there.", n, t.name, err)
	}
	addr, p, err := b.startTarget(t)
	if err != nil {
		r.Err = err
		return r
	}
	if p != nil {
		defer func() {
			r.Exit = p.stop(10 * time.Second)
			r.Output, r.Lines = p.output()
		}()
		// What the proxy opened on its own, its monitoring say, shows
		// once it had a moment.
		time.Sleep(200 * time.Millisecond)
		if c, err := b.server.connections(); err == nil {
			r.UpstreamIdle = c
		}
	}
	ls, err := b.loaders(addr, n)
	if err != nil {
		r.Err = err
		return r
	}
	defer func() {
		if err := closeAll(ls); err != nil {
			b.note("%d clients, %s: closing the clients: %v", n, t.name, err)
		}
	}()
	if _, err := connectAll(ls); err != nil {
		r.Err = err
		return r
	}

	// The target's processes: the proxy and whatever it started (a shell
	// and its command, `go run` and its program).
	var targetPIDs []int
	var targetMain int
	if p != nil {
		targetPIDs = procTree(p.pid())
		targetMain = cmp.Or(listenerPID(targetPIDs, portOf(addr)), p.pid())
	}
	clientPIDs := []int{os.Getpid()}
	for _, l := range ls {
		if pid := l.pid(); pid != 0 {
			clientPIDs = append(clientPIDs, pid)
		}
	}

	start := time.Now().Add(50 * time.Millisecond)
	measure := start.Add(b.cfg.Warmup)
	end := measure.Add(b.cfg.Duration)
	stopSampling := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Add(2)
	go func() {
		defer sampled.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if c, err := b.server.connections(); err == nil {
				r.Upstream = max(r.Upstream, c)
				r.UpstreamSamples++
			}
			if targetMain != 0 {
				if rss, err := procRSS(targetMain); err == nil {
					r.TargetRSS = max(r.TargetRSS, rss)
				}
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	var cpu0, cpu1 [3]time.Duration
	var cpuErr [3]error
	read := func(into *[3]time.Duration) {
		var err error
		if p != nil {
			into[0], err = treeCPU(targetPIDs)
			cpuErr[0] = cmp.Or(cpuErr[0], err)
		}
		into[1], err = treeCPU([]int{b.server.proc.pid()})
		cpuErr[1] = cmp.Or(cpuErr[1], err)
		into[2], err = treeCPU(clientPIDs)
		cpuErr[2] = cmp.Or(cpuErr[2], err)
	}
	go func() {
		defer sampled.Done()
		time.Sleep(time.Until(measure))
		read(&cpu0)
		time.Sleep(time.Until(end))
		read(&cpu1)
	}()

	results := make([]LoadResult, len(ls))
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Add(1)
		go func() { defer wg.Done(); results[i], errs[i] = l.run(start) }()
	}
	wg.Wait()
	close(stopSampling)
	sampled.Wait()
	if err := errors.Join(errs...); err != nil {
		r.Err = err
		return r
	}
	for _, res := range results {
		r.Load.merge(res)
	}
	r.Elapsed = b.cfg.Duration
	if r.Load.Ops > 0 {
		perOp := func(i int) time.Duration {
			if cpuErr[i] != nil {
				return -1
			}
			return (cpu1[i] - cpu0[i]) / time.Duration(r.Load.Ops)
		}
		if p != nil {
			r.TargetCPU = perOp(0)
		}
		r.ServerCPU, r.ClientCPU = perOp(1), perOp(2)
	}
	return r
}

// idleMem is a target's resident memory without clients and with n idle
// ones, connected and handshaken: the proxy's, or the server's for direct.
type idleMem struct {
	Target        string
	Clients       int // those that connected
	Before, After int64
	Err           error
}

// idleMemory measures t's memory per idle client.
func (b *ProxyBench) idleMemory(t *benchTarget, n int) (m idleMem) {
	m.Target = t.name
	if err := b.server.waitIdle(10 * time.Second); err != nil {
		b.note("memory, %s: %v", t.name, err)
	}
	addr, p, err := b.startTarget(t)
	if err != nil {
		m.Err = err
		return m
	}
	pid := b.server.proc.pid()
	if p != nil {
		defer p.stop(10 * time.Second)
		pid = cmp.Or(listenerPID(procTree(p.pid()), portOf(addr)), p.pid())
	}
	time.Sleep(b.cfg.Settle)
	if m.Before, err = procRSS(pid); err != nil {
		m.Err = err
		return m
	}
	ls, err := b.loaders(addr, n)
	if err != nil {
		m.Err = err
		return m
	}
	defer closeAll(ls)
	if m.Clients, err = connectAll(ls); err != nil {
		m.Err = err
		return m
	}
	time.Sleep(b.cfg.Settle)
	m.After, m.Err = procRSS(pid)
	return m
}

// serverProc is the test server, a process of its own, with a connection
// to each of its servers for serverStatus.
type serverProc struct {
	proc    *proc
	stdin   io.WriteCloser // kept open: the server stops at its end
	uri     string
	hosts   []string
	replSet string
	primary string
	name    string // ServerMongotest or ServerFerretDB, as the report says

	mu     sync.Mutex
	status []*wireConn // one per host
	// primaryConn is the connection of status to the primary.
	primaryConn *wireConn
	idle        []int // the connections each had open before any target
	timeout     time.Duration
	// bySockets: the server's serverStatus has no connections.current
	// (FerretDB's), so that its connections are counted in the kernel's
	// socket tables; uncounted: nor there (not on Linux), so that they are
	// not measured.
	bySockets, uncounted bool
}

// errUncounted is current's error for a server whose serverStatus has no
// connections.current.
var errUncounted = errors.New("the server's serverStatus has no connections.current")

// startServerProc starts the test server (a replica set of replSet
// members if above 0), waits for its primary and inserts the documents.
func startServerProc(bin string, replSet, docs int, timeout time.Duration) (*serverProc, error) {
	args := []string{"-exit-on-eof"}
	if replSet > 0 {
		args = append(args, "-replset", strconv.Itoa(replSet))
	}
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe() // its end ends the server, should this process die
	if err != nil {
		return nil, err
	}
	p, err := startProc("the test server", cmd)
	if err != nil {
		return nil, err
	}
	s := &serverProc{proc: p, stdin: stdin, timeout: timeout}
	var line string
	var ok bool
	select {
	case line, ok = <-p.first:
	case <-time.After(60 * time.Second):
	}
	if !ok {
		s.close()
		return nil, fmt.Errorf("the test server printed no connection string%s", p.lastLines())
	}
	u, err := url.Parse(strings.TrimSpace(line))
	if err != nil || u.Scheme != "mongodb" || u.Host == "" {
		s.close()
		return nil, fmt.Errorf("the test server's first line %q is not a connection string", line)
	}
	s.uri = u.String()
	s.hosts = strings.Split(u.Host, ",")
	s.replSet = u.Query().Get("replicaSet")
	// The benchmark's own connections, one per host, are made first: they
	// find the primary, insert the documents and read serverStatus. No
	// other is made before the idle counts are read, since a server may
	// count a connection the benchmark closed until it notices the close
	// (on a loaded machine, the idle counts were one too many, and every
	// count of the runs one too few).
	for _, h := range s.hosts {
		c, err := dialWire(h, timeout)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("connecting to %s: %w", h, err)
		}
		s.status = append(s.status, c)
	}
	if err := s.findPrimary(30 * time.Second); err != nil {
		s.close()
		return nil, err
	}
	if err := s.insert(docs); err != nil {
		s.close()
		return nil, fmt.Errorf("inserting the documents: %w", err)
	}
	s.idle = make([]int, len(s.hosts))
	for i := range s.hosts {
		s.idle[i], err = s.current(i)
		if errors.Is(err, errUncounted) && !s.bySockets {
			s.bySockets = true
			if s.idle[i], err = s.current(i); err != nil {
				s.bySockets, s.uncounted, err = false, true, nil
			}
		}
		if err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// findPrimary waits for the host that answers hello as a writable primary,
// asking over the benchmark's own connections.
func (s *serverProc) findPrimary(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		for i, h := range s.hosts {
			reply, err := s.status[i].roundTrip(helloBody, time.Now().Add(s.timeout))
			if err != nil {
				return fmt.Errorf("hello to %s: %w", h, err)
			}
			if v, ok := reply.Lookup("isWritablePrimary").BooleanOK(); ok && v {
				s.primary, s.primaryConn = h, s.status[i]
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no primary among %s within %s", strings.Join(s.hosts, ", "), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// insert inserts the documents the finds look up, _id 0 to docs-1.
func (s *serverProc) insert(docs int) error {
	c := s.primaryConn
	const batch = 1000
	for first := 0; first < docs; first += batch {
		var arr bson.A
		for k := first; k < min(first+batch, docs); k++ {
			arr = append(arr, bson.D{
				{Key: "_id", Value: int32(k)},
				{Key: "name", Value: fmt.Sprintf("document %d", k)},
				{Key: "n", Value: int64(k)},
				{Key: "pad", Value: strings.Repeat("x", 64)},
			})
		}
		body := mustMarshal(bson.D{{Key: "insert", Value: "bench"}, {Key: "documents", Value: arr}, {Key: "$db", Value: "bench"}})
		reply, err := c.roundTrip(body, time.Now().Add(s.timeout))
		if err == nil {
			err = wire.CheckReply(reply)
		}
		if err == nil {
			if n, _ := reply.Lookup("n").AsInt64OK(); n != int64(len(arr)) {
				err = fmt.Errorf("%d documents inserted of %d: %s", n, len(arr), reply)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var serverStatusBody = mustMarshal(bson.D{{Key: "serverStatus", Value: 1}, {Key: "$db", Value: "admin"}})

// current returns connections.current of host i's serverStatus, or the
// connections the kernel's socket tables list for its port (bySockets).
func (s *serverProc) current(i int) (int, error) {
	if s.bySockets {
		n, err := establishedOn(portOf(s.hosts[i]))
		if err != nil {
			return 0, fmt.Errorf("counting the connections of %s: %w", s.hosts[i], err)
		}
		return n, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	reply, err := s.status[i].roundTrip(serverStatusBody, time.Now().Add(s.timeout))
	if err == nil {
		err = wire.CheckReply(reply)
	}
	if err != nil {
		return 0, fmt.Errorf("serverStatus of %s: %w", s.hosts[i], err)
	}
	v, err := reply.LookupErr("connections", "current")
	if err != nil {
		return 0, fmt.Errorf("serverStatus of %s: %w", s.hosts[i], errUncounted)
	}
	n, ok := v.AsInt64OK()
	if !ok {
		return 0, fmt.Errorf("serverStatus of %s: connections.current is a %s", s.hosts[i], v.Type)
	}
	return int(n), nil
}

// connections returns the most connections any of the servers has open
// above its idle count.
func (s *serverProc) connections() (int, error) {
	if s.uncounted {
		return 0, errUncounted
	}
	most := 0
	for i := range s.hosts {
		c, err := s.current(i)
		if err != nil {
			return 0, err
		}
		most = max(most, c-s.idle[i])
	}
	return most, nil
}

// waitIdle waits until the servers are back to their idle connections,
// those of a run before having closed.
func (s *serverProc) waitIdle(timeout time.Duration) error {
	if s.uncounted {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for {
		c, err := s.connections()
		if err != nil {
			return err
		}
		if c <= 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server still had %d connections more than when idle after %s", c, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxyUpstream returns the connection string mongopool-proxy is given:
// the standalone's with directConnection=true, or the replica set's.
func (s *serverProc) proxyUpstream() string {
	if s.replSet != "" {
		return s.uri
	}
	return "mongodb://" + s.primary + "/?directConnection=true"
}

// expand fills in a peer's command template.
func (s *serverProc) expand(template, listen string) string {
	return strings.NewReplacer(
		"{upstream_uri}", s.proxyUpstream(),
		"{upstream}", s.primary,
		"{listen_port}", strconv.Itoa(portOf(listen)),
		"{listen}", listen,
	).Replace(template)
}

func (s *serverProc) describe() string {
	if s.replSet != "" {
		return fmt.Sprintf("%s, a replica set of %d members (%s), the load on its primary", s.name, len(s.hosts), s.replSet)
	}
	switch {
	case s.bySockets:
		return s.name + ", a standalone (its serverStatus counts no connections: they are counted in the kernel's socket tables)"
	case s.uncounted:
		return s.name + ", a standalone (its serverStatus counts no connections: the upstream connections are not measured)"
	}
	return s.name + ", a standalone"
}

// close stops the server and says how it ended.
func (s *serverProc) close() string {
	for _, c := range s.status {
		c.close()
	}
	return s.proc.stop(10 * time.Second)
}
