// Command poolbench runs the benchmark suite of issue 6 (mongopool's pool
// against the official Go driver's pool and jackc/puddle, same process, same
// servers) and the failover scenario (shape 8: mongopool.Client against a
// mongo.Client on an in-process replica set), and prints every figure and
// the targets as Markdown.
//
//	go run ./cmd/poolbench            # everything, two to three minutes
//	go run ./cmd/poolbench -shapes 1,3 -benchtime 2s -rounds 5
//	go run ./cmd/poolbench -shapes 8 -rounds 5
//	go run ./cmd/poolbench -long      # adds the official pool's 90 s warm-up
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
	s := bench.Full()
	shapes := flag.String("shapes", "1,2,3,4,5,6,7,8", "comma-separated shapes to run")
	flag.DurationVar(&s.Timing.Target, "benchtime", s.Timing.Target, "length of each measured run")
	flag.IntVar(&s.Rounds, "rounds", s.Rounds, "measured runs per pool and case, alternating the pools; the median counts")
	flag.BoolVar(&s.Long, "long", false, "also time the official pool's warm-up at its default 10 s maintenance tick (about 90 s)")
	flag.BoolVar(&s.Ferret, "ferretdb", s.Ferret, "include FerretDB in shape 6")
	strict := flag.Bool("strict", false, "exit with status 1 if a target does not hold")
	flag.Parse()

	var list []int
	for _, f := range strings.Split(*shapes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > bench.FailoverShape {
			fmt.Fprintf(os.Stderr, "poolbench: -shapes: %q is not a shape number from 1 to %d\n", f, bench.FailoverShape)
			os.Exit(2)
		}
		list = append(list, n)
	}
	s.Progress = os.Stderr
	if err := s.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "poolbench:", err)
		os.Exit(1)
	}
	began := time.Now()
	var err error
	for _, n := range list {
		if n == bench.FailoverShape {
			// The failover runs on replica sets of its own, not on the
			// suite's servers.
			if err = s.Failover(bench.FullFailover()); err != nil {
				err = fmt.Errorf("shape %d: %w", n, err)
			}
		} else {
			err = s.Run(n)
		}
		if err != nil {
			break
		}
	}
	s.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "poolbench:", err)
		os.Exit(1)
	}
	fmt.Printf("# poolbench: %s, GOMAXPROCS %d, %s/%s, %d rounds of %s, ran in %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, s.Rounds, s.Timing.Target, time.Since(began).Round(time.Second))
	s.Report.Write(os.Stdout)
	if failed := s.Report.Failed(); *strict && len(failed) > 0 {
		os.Exit(1)
	}
}
