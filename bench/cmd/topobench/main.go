// Command topobench runs the topology scenarios of the bench package
// (mongopool.Client beside the official driver's mongo.Client): thousands of
// seeds where nothing listens, a slow SDAM event handler, a handler that
// writes when the primary is lost, and server selection timing out among
// many seeds. It prints every figure as Markdown; progress goes to stderr.
//
//	go run ./cmd/topobench                         # everything, about three minutes
//	go run ./cmd/topobench -scenarios 1 -seeds 2000,5000,10000
//	go run ./cmd/topobench -scenarios 2,3 -timeout 60s
//
// Each client's run of a scenario is a process of its own (this command,
// run again with -child), one after the other, so that a run that never
// returns or takes all the memory leaves the others alone; -isolate=false
// runs them all in this process. Every wait is bounded by -timeout, and a
// child process by the sum of its waits: a call that has not returned by
// then is reported as such.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mongopool/mongopool/bench"
)

func main() {
	cfg := bench.FullTopology()
	scenarios := flag.String("scenarios", "1,2,3,4", "comma-separated scenarios to run (1 scale, 2 slow handler, 3 handler writes on primary lost, 4 selection timeout)")
	seeds := flag.String("seeds", "2000,10000", "scenario 1's numbers of seeds, comma-separated, a case each")
	flag.IntVar(&cfg.SelectionSeeds, "selection-seeds", cfg.SelectionSeeds, "scenario 4's number of seeds")
	flag.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound of every wait (a client's creation or closing, the checks of all seeds, a drain, an operation)")
	flag.DurationVar(&cfg.Load, "load", cfg.Load, "scenario 2's time of changing hellos")
	maxHeap := flag.Int64("max-heap", cfg.HeapLimit>>20, "scenario 1's heap limit in MiB: a run stops once its heap in use passes it (0 for none)")
	isolate := flag.Bool("isolate", true, "run each client's run of a scenario in a child process")
	child := flag.String("child", "", "run one client's run (scenario:seeds:client) and print its figures as JSON (used by the command itself)")
	flag.Parse()
	cfg.HeapLimit = *maxHeap << 20

	list, err := ints(*scenarios)
	for _, n := range list {
		if err == nil && !slices.Contains(bench.TopoScenarios, n) {
			err = fmt.Errorf("%d is not a scenario (1 to 4)", n)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "topobench: -scenarios:", err)
		os.Exit(2)
	}
	if cfg.Seeds, err = ints(*seeds); err != nil {
		fmt.Fprintln(os.Stderr, "topobench: -seeds:", err)
		os.Exit(2)
	}
	if *child != "" {
		runChild(cfg, *child)
	}
	cfg.Progress = os.Stderr

	t := bench.NewTopo(cfg)
	if *isolate {
		t.Runner = func(scenario, seeds int, k bench.Kind) ([]bench.Fig, error) {
			return runIsolated(cfg.RunBound(), scenario, seeds, k)
		}
	}
	began := time.Now()
	err = t.Run(list...)
	fmt.Printf("# topobench: %s, GOMAXPROCS %d, %s/%s, -scenarios %s -seeds %s -timeout %s -max-heap %d -isolate=%t, ran in %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, *scenarios, *seeds, cfg.Timeout, *maxHeap, *isolate, time.Since(began).Round(time.Second))
	bench.WriteTopology(os.Stdout, &t.Report)
	if *isolate {
		fmt.Println("- Each client's run was a process of its own; peak RSS is that process's (getrusage), the in-process test servers included.")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "topobench:", err)
		os.Exit(1)
	}
	// Goroutines of calls that did not return may still run: exit without
	// waiting for them.
	os.Exit(0)
}

// runChild runs one client's run, prints its figures as JSON on stdout and
// exits at once, leaving whatever did not return.
func runChild(cfg bench.TopoConfig, spec string) {
	parts := strings.Split(spec, ":")
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "topobench: -child %q: want scenario:seeds:client\n", spec)
		os.Exit(2)
	}
	scenario, err1 := strconv.Atoi(parts[0])
	seeds, err2 := strconv.Atoi(parts[1])
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintf(os.Stderr, "topobench: -child %q: %v\n", spec, err)
		os.Exit(2)
	}
	cfg.Isolated = true
	figs, err := bench.NewTopo(cfg).RunOne(scenario, seeds, bench.Kind(parts[2]))
	if err != nil {
		fmt.Fprintln(os.Stderr, "topobench:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(figs); err != nil {
		fmt.Fprintln(os.Stderr, "topobench:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runIsolated runs one client's run in a child process, this command again
// with the same flags and -child, for bound at the most, and returns its
// figures and the child's peak RSS. A child that fails, is killed or
// exceeds bound gives a row that says so.
func runIsolated(bound time.Duration, scenario, seeds int, k bench.Kind) ([]bench.Fig, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := append(slices.Clone(os.Args[1:]), "-child", fmt.Sprintf("%d:%d:%s", scenario, seeds, k))
	cmd := exec.Command(exe, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(os.Stderr, &errOut)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	var killed bool
	select {
	case err = <-waited:
	case <-timer.C:
		killed = true
		cmd.Process.Kill()
		err = <-waited
	}
	var figs []bench.Fig
	switch {
	case killed:
		figs = []bench.Fig{{Name: "run", Value: fmt.Sprintf("did not end within %s: killed", bound)}}
	case err != nil:
		msg := strings.TrimSpace(errOut.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		figs = []bench.Fig{{Name: "run", Value: fmt.Sprintf("failed (%v): %s", err, strings.ReplaceAll(msg, "|", "/"))}}
	default:
		if err := json.Unmarshal(out.Bytes(), &figs); err != nil {
			return nil, fmt.Errorf("the figures of %s: %w", k, err)
		}
	}
	if rss := peakRSS(cmd.ProcessState); rss > 0 {
		figs = append(figs, bench.Fig{Name: "peak RSS", Value: fmt.Sprintf("%.0f MiB", float64(rss)/(1<<20))})
	}
	return figs, nil
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
