// Command proxybench measures mongopool-proxy against clients connected
// straight to the test server (direct), and against any other proxy given
// with -peer, side by side in one run: throughput, latency, the hop's added
// latency, the CPU time the proxy and the server spend per operation, the
// connections the server sees, and the proxy's memory per idle client. It
// prints Markdown to stdout, with the targets and whether each
// holds; progress goes to stderr.
//
//	go run ./cmd/proxybench                       # 1, 64 and 1000 clients, about a minute
//	go run ./cmd/proxybench -huge                 # and 10000 clients
//	go run ./cmd/proxybench -peer 'mongobetween: ./mongobetween -pretty {listen_port}={upstream_uri}'
//
// The test server (cmd/mongotest) and mongopool-proxy (cmd/mongopool-proxy)
// are built from the repository into a temporary directory, and run as
// processes of their own; the load is generated here, over the wire
// protocol without a driver. Past what one process may hold open, the
// clients are spread over processes of this command (run again with the
// hidden flag -worker).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mongopool/mongopool/bench"
)

func main() {
	cfg := bench.FullProxy()
	clients := flag.String("clients", "1,64,1000", "the numbers of clients, comma-separated, a case each")
	huge := flag.Bool("huge", false, "add a case of 10000 clients")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "the measured time of each run")
	flag.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "the warm-up before each measured time")
	flag.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "runs of each (target, clients), the targets in turn; the median counts")
	flag.IntVar(&cfg.Docs, "docs", cfg.Docs, "documents in the collection the finds look up by _id")
	flag.IntVar(&cfg.ReplSet, "replset", 0, "run the server as a replica set of `N` members (the load on its primary) rather than a standalone")
	flag.BoolVar(&cfg.Proxy, "proxy", cfg.Proxy, "measure mongopool-proxy (built from cmd/mongopool-proxy)")
	flag.BoolVar(&cfg.Unix, "unix", cfg.Unix, "measure mongopool-proxy on a Unix socket too, its clients connecting there (mongopool-proxy-unix: the sidecar layout)")
	flag.StringVar(&cfg.ProxyBin, "proxy-bin", "", "a mongopool-proxy binary to run rather than build")
	flag.StringVar(&cfg.Server, "server", bench.ServerMongotest, "the server: "+bench.ServerMongotest+" (the test server) or "+bench.ServerFerretDB+" (the embedded FerretDB on SQLite, as a process; it counts no connections, and finds by _id cost it milliseconds: give it -docs 100 and fewer clients)")
	flag.StringVar(&cfg.ServerBin, "server-bin", "", "a binary of the server to run rather than build (it prints its connection string first and exits at the end of its input with -exit-on-eof, as mongotest does)")
	flag.IntVar(&cfg.MaxPoolSize, "max-pool-size", cfg.MaxPoolSize, "mongopool-proxy's -max-pool-size")
	proxyArgs := flag.String("proxy-args", "", "more flags for mongopool-proxy, space-separated")
	var peers []bench.Peer
	flag.Func("peer", "another proxy, `'[NAME:] CMD'`, run through sh for each run (repeatable): {listen} becomes the 127.0.0.1:port it must listen on ({listen_port} the port), {upstream} the server's host:port, {upstream_uri} its connection string", func(s string) error {
		p, err := bench.ParsePeer(s)
		if err == nil {
			peers = append(peers, p)
		}
		return err
	})
	flag.IntVar(&cfg.IdleClients, "idle", cfg.IdleClients, "idle clients of the memory measurement (0: none); with -huge, 10000 unless given")
	flag.IntVar(&cfg.PerProcess, "per-process", 0, "the most clients one process runs, the rest in worker processes (0: what the open files limit allows)")
	flag.DurationVar(&cfg.OpTimeout, "op-timeout", cfg.OpTimeout, "the bound of each round trip")
	flag.DurationVar(&cfg.StartTimeout, "start-timeout", cfg.StartTimeout, "the bound of the wait for a proxy to answer a hello")
	repo := flag.String("repo", "", "the repository's root (default: found from the working directory)")
	strict := flag.Bool("strict", false, "exit with status 1 if a target does not hold")
	worker := flag.Bool("worker", false, "run a group of clients for a benchmark process (used by the command itself)")
	flag.Parse()
	if *worker {
		os.Exit(bench.RunLoadWorker(os.Stdin, os.Stdout))
	}
	idleSet := false
	flag.Visit(func(f *flag.Flag) { idleSet = idleSet || f.Name == "idle" })

	var err error
	if cfg.Clients, err = ints(*clients); err != nil {
		fail(2, "-clients: %v", err)
	}
	if *huge {
		cfg.Clients = append(cfg.Clients, 10000)
		if !idleSet {
			cfg.IdleClients = 10000
		}
	}
	cfg.ProxyArgs = strings.Fields(*proxyArgs)
	cfg.Peers = peers
	if cfg.Repo = *repo; cfg.Repo == "" {
		wd, _ := os.Getwd()
		if cfg.Repo, err = bench.FindRepo(wd); err != nil && (cfg.ServerBin == "" || (cfg.Proxy && cfg.ProxyBin == "")) {
			fail(2, "%v (give -repo)", err)
		}
	}
	cfg.Progress = os.Stderr

	b := bench.NewProxyBench(cfg)
	if err := b.Run(); err != nil {
		fail(1, "%v", err)
	}
	fmt.Printf("# proxybench: %s, GOMAXPROCS %d, %d CPUs, %s/%s, `%s`, ran in %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
		strings.TrimSpace("proxybench "+quoteArgs(os.Args[1:])), b.Report.Elapsed.Round(time.Second))
	b.Report.Write(os.Stdout)
	if *strict && len(b.Report.Failed()) > 0 {
		os.Exit(1)
	}
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "proxybench: "+format+"\n", args...)
	os.Exit(code)
}

// ints parses a comma-separated list of positive integers.
func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// quoteArgs returns the arguments as a shell would take them back.
func quoteArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t'\"{}$;&|<>*?") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
