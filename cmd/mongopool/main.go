// Command mongopool drives a connection pool through a workload and reports
// what the pool did. Until the wire connector lands, connections are
// simulated: establishing one takes a few milliseconds and sometimes fails
// with a network error, and an operation holds its connection for a while.
//
// Usage:
//
//	go run ./cmd/mongopool [flags]
//
// Run with -h for the flags. It stops by itself after -duration, or at Ctrl-C,
// closes the pool and prints a summary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// config is the command line.
type config struct {
	goroutines       int
	duration         time.Duration
	maxPoolSize      int
	minPoolSize      int
	maxConnecting    int
	maxIdleTime      time.Duration
	waitQueueTimeout time.Duration
	hold             time.Duration
	connectMin       time.Duration
	connectMax       time.Duration
	connectFail      float64
	clearEvery       time.Duration
	interrupt        bool
	events           bool
}

// drainLimit bounds how long the operations under way at the end may take to
// finish before they are canceled.
const drainLimit = 5 * time.Second

func main() {
	var c config
	flag.IntVar(&c.goroutines, "goroutines", 32, "goroutines running operations concurrently")
	flag.DurationVar(&c.duration, "duration", 3*time.Second, "how long to run the workload")
	flag.IntVar(&c.maxPoolSize, "maxPoolSize", 10, "maxPoolSize: most connections at once (0 = no limit)")
	flag.IntVar(&c.minPoolSize, "minPoolSize", 0, "minPoolSize: connections kept established in the background")
	flag.IntVar(&c.maxConnecting, "maxConnecting", pool.DefaultMaxConnecting, "maxConnecting: most connections established at once")
	flag.DurationVar(&c.maxIdleTime, "maxIdleTime", 0, "maxIdleTimeMS: close connections idle longer than this (0 = never)")
	flag.DurationVar(&c.waitQueueTimeout, "waitQueueTimeout", 0, "waitQueueTimeoutMS: longest wait for a connection (0 = no limit)")
	flag.DurationVar(&c.hold, "hold", 2*time.Millisecond, "how long an operation holds its connection (±50%)")
	flag.DurationVar(&c.connectMin, "connect-min", 2*time.Millisecond, "shortest simulated establishment")
	flag.DurationVar(&c.connectMax, "connect-max", 8*time.Millisecond, "longest simulated establishment")
	flag.Float64Var(&c.connectFail, "connect-fail", 0.02, "fraction of establishments that fail with a network error")
	flag.DurationVar(&c.clearEvery, "clear-every", 0, "clear the pool this often, then ready it again (0 = never)")
	flag.BoolVar(&c.interrupt, "interrupt", false, "with -clear-every: clear with interruptInUseConnections")
	flag.BoolVar(&c.events, "events", false, "print every pool event as it happens")
	flag.Parse()
	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "mongopool:", err)
		flag.Usage()
		os.Exit(2)
	}

	// Ctrl-C stops the run early; the summary is still printed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, c)
	if ctx.Err() != nil {
		code = max(code, 130)
	}
	stop()
	os.Exit(code)
}

func (c *config) check() error {
	switch {
	case flag.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	case c.goroutines < 1:
		return errors.New("-goroutines must be at least 1")
	case c.duration <= 0:
		return errors.New("-duration must be positive")
	case c.hold < 0, c.connectMin < 0, c.clearEvery < 0:
		return errors.New("-hold, -connect-min and -clear-every must not be negative")
	case c.connectMax < c.connectMin:
		return errors.New("-connect-max must not be less than -connect-min")
	case c.connectFail < 0 || c.connectFail > 1:
		return errors.New("-connect-fail must be between 0 and 1")
	}
	return nil
}

// run creates the pool, drives the workload through it for c.duration, closes
// it and prints the summary. It returns the exit code.
func run(ctx context.Context, c config) int {
	out := newConsole(os.Stdout)
	defer out.flush()
	monitor := &eventMonitor{start: time.Now(), print: c.events, out: out}

	p, err := pool.New("localhost:27017",
		&simConnector{minLatency: c.connectMin, maxLatency: c.connectMax, failRate: c.connectFail},
		pool.WithMaxPoolSize(c.maxPoolSize),
		pool.WithMinPoolSize(c.minPoolSize),
		pool.WithMaxConnecting(c.maxConnecting),
		pool.WithMaxIdleTime(c.maxIdleTime),
		pool.WithWaitQueueTimeout(c.waitQueueTimeout),
		pool.WithEventHandler(monitor.handle),
	)
	if err != nil {
		out.println(err.Error()) // an *pool.OptionError: a bad flag
		return 2
	}
	out.println(fmt.Sprintf("mongopool: %d goroutines for %v against a simulated %s; maxPoolSize %d, minPoolSize %d, maxConnecting %d",
		c.goroutines, c.duration, p.Address(), c.maxPoolSize, c.minPoolSize, c.maxConnecting))
	if err := p.Ready(); err != nil {
		out.println(err.Error())
		p.Close()
		return 1
	}

	// running ends after c.duration (or at Ctrl-C): no operation starts after.
	// opCtx is what the operations run under: it ends at Ctrl-C, or when the
	// last ones take longer than drainLimit to finish.
	running, endRun := context.WithTimeout(ctx, c.duration)
	defer endRun()
	opCtx, cancelOps := context.WithCancel(ctx)
	defer cancelOps()

	w := &workload{pool: p, goroutines: c.goroutines, hold: c.hold}
	var bg sync.WaitGroup
	bg.Go(func() { progress(running, out, p, w, out.tty && !c.events) })
	if c.clearEvery > 0 {
		bg.Go(func() { clearPeriodically(running, p, c.clearEvery, c.interrupt, out) })
	}

	began := time.Now()
	done := make(chan struct{})
	go func() { w.run(running, opCtx); close(done) }()
	drainedLate := false
	select {
	case <-done:
	case <-running.Done():
		select {
		case <-done:
		case <-time.After(drainLimit):
			drainedLate = true
			cancelOps()
			<-done
		}
	}
	elapsed := time.Since(began)
	bg.Wait()

	if err := p.Close(); err != nil {
		out.println("mongopool: closing the pool: " + err.Error())
	}
	if drainedLate {
		out.println(fmt.Sprintf("mongopool: the last operations took more than %v to finish and were canceled", drainLimit))
	}
	if ctx.Err() != nil {
		out.println("mongopool: interrupted")
	}
	s := summarize(p.Stats(), &w.results, monitor, elapsed)
	s.print(out)
	if len(s.problems) > 0 {
		return 1
	}
	return 0
}

// clearPeriodically clears the pool every interval, as a topology layer would
// when the server's monitor reports an error, and readies it right after, as
// it would once the server is back. Connections of the old generation become
// stale: idle ones are closed, checked-out ones when they come back.
func clearPeriodically(ctx context.Context, p *pool.Pool, every time.Duration, interrupt bool, out *console) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := p.Clear(pool.ClearOptions{Cause: errSimFailover, InterruptInUse: interrupt})
		if err == nil {
			err = p.Ready()
		}
		if err != nil {
			out.println(err.Error())
		}
	}
}

var errSimFailover = errors.New("simulated server failure (-clear-every)")
