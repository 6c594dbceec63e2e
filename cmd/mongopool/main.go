// Command mongopool drives a real connection pool through a workload of
// inserts and finds and reports what the pool did.
//
// By default it starts an embedded FerretDB (a MongoDB-wire server on SQLite,
// in a temporary directory) and runs against it; -uri runs against any
// MongoDB-wire server instead. The pool is made with mongopool.New, so the
// URI's own options apply; the pool flags override them when given, and their
// defaults fill in what the URI leaves unset. The workload starts once the
// server's monitor has found the server and a ping has gone through the pool;
// a server that the monitor's first check cannot reach (a refused
// connection, an error to its hello) ends the run at once, with one line that
// names the address and the cause. The connection string's warnings (an
// unknown option, a value ignored) are printed before the workload starts.
//
// A connection string of a replica set (replicaSet), of several hosts, or
// mongodb+srv runs the workload through a mongopool.Client instead, which
// keeps a pool per server: the progress and the summary then show the
// topology and each server's pool. -replset starts an in-process replica set
// of three members and runs against it, with a step-down of the primary and
// the election of another member halfway through the run, and the summary
// says how long the client took to write to the new primary.
//
// -scenario runs one of the scenarios (storm, slow, clear, overload,
// failover: see -h) against in-process servers, or, for those that make
// sense there, the server of -uri; each adds its own figures to the
// summary. On a terminal, a live view of the pools (connections by state,
// the wait queue, check-outs a second, wait percentiles, a bar of the
// connections) is redrawn in place four times a second; otherwise a plain
// line a second is printed. -events writes every pool event as a JSON line.
//
// The workload writes to a database of its own (mongopool_demo_ and a random
// suffix) and drops it at the end.
//
// Usage:
//
//	go run ./cmd/mongopool [flags]
//
// Run with -h for the flags. It stops by itself after -duration (connecting
// included; the operations under way then get 1s more, and the cleanup 2s
// more), or at Ctrl-C, closes the pool and prints a summary. It exits with
// 1, and one line at the end that says why, when an operation failed (other
// than those -clear-every itself turned away or interrupted), when no
// operation succeeded, when the database could not be dropped, when the
// summary's cross-checks disagree, when the run lasted longer than
// -duration and its grace, when a scenario's own check fails, or, with
// -replset, when the failover failed or the new primary acknowledged no
// write.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/internal/embedded"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// config is the command line.
type config struct {
	uri              string
	scenario         string
	goroutines       int
	duration         time.Duration
	findRatio        float64
	maxPoolSize      int
	minPoolSize      int
	maxConnecting    int
	maxIdleTime      time.Duration
	waitQueueTimeout time.Duration
	connectTimeout   time.Duration
	clearEvery       time.Duration
	interrupt        bool
	delay            time.Duration
	events           string
	replset          bool
	http             string

	// grace is how long a run may last beyond -duration before it counts
	// as overrun: overrunGrace, which the tests lower.
	grace time.Duration

	set map[string]bool // the flags given on the command line
}

const (
	// openLimit bounds the start (parsing the URI, with a DNS look-up for
	// mongodb+srv, the monitor's first check of the server, the pool's
	// first connection and its ping) when -duration is longer; otherwise
	// -duration does.
	openLimit = 10 * time.Second
	// drainLimit is how long the operations under way at the end of the run
	// may take to finish. Those still running then are canceled and count as
	// failed ("out of time").
	drainLimit = time.Second
	// cleanupLimit bounds what the job undoes after the drain: a scenario's
	// fail point, and the drop of the demo's database.
	cleanupLimit = 2 * time.Second
	// overrunGrace is how much longer than -duration a run may last, from
	// the start of the connecting to the end of Close: the drain, the
	// cleanup and a second to close the connections. A run that lasts longer
	// fails.
	overrunGrace = drainLimit + cleanupLimit + time.Second
	// collection is where the workload inserts and finds.
	collection = "docs"
)

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2) // the flag package or parseFlags said why
	}

	// Ctrl-C stops the run early; the summary is still printed. A second
	// Ctrl-C kills the program at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()
	code := run(ctx, c, os.Stdout, os.Stderr)
	if ctx.Err() != nil {
		code = max(code, 130)
	}
	stop()
	os.Exit(code)
}

// parseFlags parses the command line args (without the program name). Errors
// and -h go to errOut.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	c := config{set: map[string]bool{}, grace: overrunGrace}
	fs := flag.NewFlagSet("mongopool", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&c.uri, "uri", "", "MongoDB connection string of the server to use (default: start an embedded FerretDB, or for a -scenario the in-process test server); one of a replica set (replicaSet, several hosts, or mongodb+srv) runs through a client with a pool per server")
	fs.StringVar(&c.scenario, "scenario", "", "run a scenario instead of the plain workload: "+strings.Join(scenarioNames(), ", ")+" (see below)")
	fs.IntVar(&c.goroutines, "goroutines", 32, "goroutines running operations concurrently (-scenario storm: 1000 unless given)")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "how long the run lasts, connecting to the server included; the operations under way at the end get "+drainLimit.String()+" more, and the cleanup (the demo's database dropped, a scenario's fail point turned off) "+cleanupLimit.String()+" more; a run that lasts more than "+overrunGrace.String()+" longer than this fails")
	fs.Float64Var(&c.findRatio, "find-ratio", 0.5, "fraction of the operations that are finds; the others are inserts")
	fs.IntVar(&c.maxPoolSize, "maxPoolSize", 10, "maxPoolSize: most connections at once (0 = no limit)")
	fs.IntVar(&c.minPoolSize, "minPoolSize", 0, "minPoolSize: connections kept established in the background")
	fs.IntVar(&c.maxConnecting, "maxConnecting", pool.DefaultMaxConnecting, "maxConnecting: most connections established at once")
	fs.DurationVar(&c.maxIdleTime, "maxIdleTime", 0, "maxIdleTimeMS: close connections idle longer than this (0 = never)")
	fs.DurationVar(&c.waitQueueTimeout, "waitQueueTimeout", 0, "waitQueueTimeoutMS: longest wait for a connection (0 = no limit)")
	fs.DurationVar(&c.connectTimeout, "connectTimeout", 5*time.Second, "longest establishment of one connection, handshake and authentication included (0 = no limit of the pool's own; the dial keeps the URI's connectTimeoutMS, 10s by default)")
	fs.DurationVar(&c.clearEvery, "clear-every", 0, "clear the pool this often, then ready it again (0 = never; -scenario clear: "+defaultClearEvery.String()+" unless given)")
	fs.BoolVar(&c.interrupt, "interrupt", false, "with -clear-every: clear with interruptInUseConnections")
	fs.DurationVar(&c.delay, "delay", defaultDelay, "-scenario slow: how long the server delays each reply to an insert or a find")
	fs.StringVar(&c.events, "events", "", "write every pool event (and, with a client, every change of the topology) as a JSON line to this file; - for standard output, the report then going to standard error, without the live view")
	fs.StringVar(&c.http, "http", "", "serve a live dashboard of the pools (charts, options, recent events, /metrics) on this address while the run lasts, e.g. 127.0.0.1:8080 (with a longer -duration to watch it)")
	fs.BoolVar(&c.replset, "replset", false, "run against an in-process replica set of "+strconv.Itoa(replsetMembers)+" members, through a client of the whole set, with a step-down of the primary and an election halfway through the run (as -scenario failover)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mongopool [flags]\n\n"+
			"Drives a connection pool through a workload of inserts and finds against an\n"+
			"embedded FerretDB, or the server of -uri, and prints what the pool did.\n"+
			"A -uri of a replica set (replicaSet, several hosts, mongodb+srv) runs through\n"+
			"a client with a pool per server; so does -replset, on an in-process set.\n"+
			"The pool flags override the URI's options when given; their defaults apply\n"+
			"where the URI sets nothing. On a terminal, a live view of the pools is\n"+
			"redrawn in place; otherwise a line a second.\n\n"+
			"Scenarios (-scenario), each against the in-process test server unless -uri:\n")
		for _, s := range scenarioList {
			fmt.Fprintf(fs.Output(), "  %-9s %s\n", s.name, strings.ReplaceAll(s.about, "\n", "\n            "))
		}
		fmt.Fprintf(fs.Output(), "\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	if err := c.check(fs.Args()); err != nil {
		fmt.Fprintln(errOut, "mongopool:", err)
		fs.Usage()
		return c, err
	}
	c.applyScenarioDefaults()
	return c, nil
}

func (c *config) check(rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected arguments: %v", rest)
	case c.goroutines < 1:
		return errors.New("-goroutines must be at least 1")
	case c.duration <= 0:
		return errors.New("-duration must be positive")
	case c.findRatio < 0 || c.findRatio > 1:
		return errors.New("-find-ratio must be between 0 and 1")
	case c.clearEvery < 0:
		return errors.New("-clear-every must not be negative")
	case c.interrupt && c.clearEvery == 0:
		return errors.New("-interrupt needs -clear-every")
	case c.replset && c.uri != "":
		return errors.New("-replset starts a replica set of its own: it does not take -uri")
	case c.replset && c.clearEvery > 0:
		return errors.New(errClearEveryClient)
	}
	return c.checkScenario()
}

// errClearEveryClient says why -clear-every does not go with a deployment
// run through a client.
const errClearEveryClient = "-clear-every clears a single pool: it does not apply to a replica set or a deployment of several servers, whose client keeps a pool per server and clears them by the SDAM rules"

// poolOptions returns the pool options of the flags: each one that was given
// on the command line, and the default of each one the URI does not set (the
// URI's own options are applied by mongopool.New, before these).
func (c *config) poolOptions(cs *connstring.ConnString) []pool.Option {
	var o []pool.Option
	for _, f := range []struct {
		flag, uriOption string
		opt             pool.Option
	}{
		{"maxPoolSize", "maxPoolSize", pool.WithMaxPoolSize(c.maxPoolSize)},
		{"minPoolSize", "minPoolSize", pool.WithMinPoolSize(c.minPoolSize)},
		{"maxConnecting", "maxConnecting", pool.WithMaxConnecting(c.maxConnecting)},
		{"maxIdleTime", "maxIdleTimeMS", pool.WithMaxIdleTime(c.maxIdleTime)},
		{"waitQueueTimeout", "waitQueueTimeoutMS", pool.WithWaitQueueTimeout(c.waitQueueTimeout)},
		{"connectTimeout", "connectTimeoutMS", pool.WithConnectTimeout(c.connectTimeout)},
	} {
		if c.set[f.flag] || !cs.IsSet(f.uriOption) {
			o = append(o, f.opt)
		}
	}
	return o
}

// output is where a run writes: the report (the progress, the live view,
// the summary), the one line that says why it failed, and the event log.
type output struct {
	out    *console
	errOut io.Writer
	events *eventLog // nil without -events
	web    *web      // nil without -http
	live   bool      // the live view, rather than a plain line a second
}

// fail ends the report and prints why the run failed, in one line; it
// returns the exit code, 1.
func (o *output) fail(format string, args ...any) int {
	o.out.flush()
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "mongopool: ", "") // the library's prefix
	fmt.Fprintln(o.errOut, "mongopool: "+msg)
	return 1
}

// run starts the server (unless c.uri names one), opens the pool, drives the
// workload through it until c.duration has passed since the pool was asked
// to connect, drops the demo's database, closes the pool and prints the
// summary; for a replica set or several servers (-replset, -scenario
// failover, or a -uri that names one), the same through a client (see
// runClient). Every step is bounded: see drainLimit, cleanupLimit and
// overrunGrace. run returns the exit code: 0 when all went well, 1 when
// something failed (a one-line message on errOut says what).
func run(ctx context.Context, c config, stdout, errOut io.Writer) int {
	report := stdout
	if c.events == "-" {
		report = errOut // standard output is the events'
	}
	o := &output{out: newConsole(report), errOut: errOut}
	defer o.out.flush()
	o.live = o.out.tty && c.events != "-"
	if c.events != "" {
		l, err := openEventLog(c.events, stdout, time.Now())
		if err != nil {
			return o.fail("cannot write the events: %v", err)
		}
		o.events = l
		defer l.close() // closed before the summary; this is for the early returns
	}

	if c.http != "" {
		wb, err := startWeb(c.http)
		if err != nil {
			return o.fail("cannot serve the dashboard: %v", err)
		}
		defer wb.close()
		o.web = wb
		o.out.println("mongopool: dashboard at " + wb.url())
	}

	uri, where := c.uri, ""
	var rs *mongotest.ReplicaSet
	var srv *mongotest.Server // the in-process test server of a scenario
	switch {
	case c.replset:
		var err error
		if rs, err = mongotest.StartReplicaSet(replsetName, replsetMembers); err != nil {
			return o.fail("cannot start the in-process replica set: %v", err)
		}
		defer rs.Close() // after the client's Close
		// The finds read from the secondaries, so that every member's pool
		// has work; the inserts go to the primary.
		uri = rs.URI() + "&readPreference=secondaryPreferred"
		where = fmt.Sprintf("the in-process replica set %s of %d members", replsetName, replsetMembers)
	case uri == "" && c.scenario != "":
		var err error
		if srv, err = mongotest.Start(); err != nil {
			return o.fail("cannot start the in-process test server: %v", err)
		}
		defer srv.Close()
		uri, where = srv.URI(), "the in-process test server at "+srv.Addr()
	case uri == "":
		srv, err := embedded.Start(embedded.Options{})
		if err != nil {
			return o.fail("cannot start the embedded FerretDB: %v", err)
		}
		defer srv.Close()
		uri, where = srv.URI(), "the embedded FerretDB at "+srv.Addr()
	}

	// running ends after c.duration (or at Ctrl-C): it bounds the start,
	// and no operation starts after it.
	began := time.Now()
	running, endRun := context.WithTimeout(ctx, c.duration)
	defer endRun()
	openCtx, cancelOpen := context.WithTimeout(running, openLimit)
	defer cancelOpen()
	cs, err := connstring.ParseWithResolver(openCtx, uri, net.DefaultResolver)
	if err != nil {
		return o.fail("bad -uri: %v", err) // the message never holds a secret
	}
	if where == "" {
		where = cs.Redacted()
	}
	if usesClient(cs) {
		switch {
		case c.clearEvery > 0 && c.scenario == "":
			return o.fail("%s", errClearEveryClient)
		case c.scenario != "" && c.scenario != scenarioFailover:
			return o.fail("-scenario %s drives a single pool: it does not apply to a replica set or a deployment of several servers", c.scenario)
		}
		cancelOpen()
		return runClient(ctx, running, began, c, cs, uri, where, rs, o)
	}

	sc := newScenario(c, srv)
	if sc != nil {
		uri = sc.adjustURI(uri, cs)
	}
	monitor := &eventMonitor{start: began, log: o.events}
	opts := append(c.poolOptions(cs), pool.WithEventHandler(monitor.handle))
	if o.web != nil {
		opts = append(opts, o.web.handler(webPool))
	}
	// New connects nothing: the server's monitor checks it at once, and
	// connect waits for that check (a storm is on an empty pool: it does
	// not ping).
	mp, err := mongopool.New(uri, opts...)
	if err == nil && (sc == nil || sc.name != scenarioStorm) {
		if err = connect(openCtx, mp); err != nil {
			mp.Close()
		}
	}
	if err != nil {
		printWarnings(o.out, cs.Warnings) // they may say why
		return o.fail("%s", openFailure(ctx, running, err, cs, where, time.Since(began)))
	}
	cancelOpen()
	p := mp.Pool()
	if o.web != nil {
		if err := o.web.d.Add(webPool, p); err != nil {
			mp.Close()
			return o.fail("cannot show the pool on the dashboard: %v", err)
		}
	}

	db := "mongopool_demo_" + randomHex(4)
	title := "workload"
	if sc != nil {
		title = sc.name
		o.out.println(fmt.Sprintf("mongopool: -scenario %s: %s", sc.name, sc.describe()))
	}
	o.out.println(fmt.Sprintf("mongopool: %d goroutines for %v against %s: %.0f%% finds, %.0f%% inserts into %s.%s",
		c.goroutines, c.duration, where, 100*c.findRatio, 100*(1-c.findRatio), db, collection))
	printWarnings(o.out, mp.Warnings())
	// The pool's events come on a goroutine of their own: the PoolCreated
	// whose options this line shows may not have come yet.
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	mp.Flush(fctx)
	fcancel()
	o.out.println("pool: " + monitor.options())

	w := &workload{pool: mp, db: db, goroutines: c.goroutines, findRatio: c.findRatio}
	if sc != nil {
		w.maxRetries = scenarioRetries
		w.storm = sc.name == scenarioStorm
	}

	// opCtx is what the operations run under: the ones under way at the end
	// (or at Ctrl-C) may finish, unless they take longer than drainLimit.
	opCtx, cancelOps := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelOps()

	if sc != nil {
		if err := sc.prepare(running, w); err != nil {
			mp.Close()
			return o.fail("-scenario %s: %v", sc.name, err)
		}
	}

	var bg sync.WaitGroup
	progress := &watcher{out: o.out, w: w,
		plain: func(elapsed time.Duration, rate float64) []string {
			return []string{progressLine(elapsed, rate, p.Stats())}
		}}
	if o.live {
		progress.live = &liveView{title: title, limit: c.duration}
	}
	if o.events != nil {
		progress.onTick = o.events.flush
	}
	bg.Go(func() {
		observe(running, func() []viewPool { return []viewPool{{addr: p.Address(), now: p.Stats()}} }, progress)
	})
	var clears *clearer
	if c.clearEvery > 0 {
		clears = &clearer{p: p, every: c.clearEvery, interrupt: c.interrupt, alternate: sc != nil && sc.name == scenarioClear, out: o.out}
		bg.Go(func() { clears.run(running) })
	}
	elapsed := drive(running, opCtx, cancelOps, w)
	endRun() // the workload may end before -duration (a storm): so does what runs beside it
	bg.Wait()

	// Leave the server as it was, even after Ctrl-C: best effort, bounded.
	cleanupCtx, cancelCleanup := context.WithTimeout(context.WithoutCancel(ctx), cleanupLimit)
	var restoreErr error
	if sc != nil {
		restoreErr = sc.restore(cleanupCtx, w)
	}
	dropErr := w.admin(cleanupCtx, db, bson.D{{Key: "dropDatabase", Value: 1}})
	cancelCleanup()

	// Close ends the sessions of the ping and the job's own commands
	// (endSessions): a check-out of its own, counted apart.
	beforeClose := p.Stats()
	closeErr := mp.Close()
	// The closing events (PoolClosed last) reach the handlers after Close:
	// the summary counts them all.
	flushErr := flushEvents(mp.Flush, p)
	took := time.Since(began)
	if ctx.Err() != nil {
		o.out.println("mongopool: interrupted")
	}
	s := summarize(p.Stats(), w, monitor, elapsed)
	if sc == nil || sc.name != scenarioStorm {
		s.openCheckOuts = openCheckOuts
	}
	s.closeCheckedOut = s.stats.CheckedOut - beforeClose.CheckedOut
	s.closeCheckOutFailed = s.stats.CheckOutFailed - beforeClose.CheckOutFailed
	s.loadBalanced = isTrue(cs.LoadBalanced)
	s.crossCheck()
	if sc != nil {
		s.scenario = sc.summary(s, clears) // with its own checks
	}
	s.judge()
	s.timing(took, c.duration, c.grace)
	if restoreErr != nil {
		s.failures = append(s.failures, fmt.Sprintf("could not turn the fail point off: %s", briefError(restoreErr)))
	}
	if dropErr != nil {
		s.failures = append(s.failures, fmt.Sprintf("could not drop the database %s: %s", db, briefError(dropErr)))
	}
	if closeErr != nil {
		s.failures = append(s.failures, "closing the pool: "+closeErr.Error())
	}
	if flushErr != nil {
		s.failures = append(s.failures, flushErr.Error())
	}
	if o.events != nil {
		if err := o.events.close(); err != nil {
			s.failures = append(s.failures, err.Error())
		}
	}
	s.print(o.out)
	if len(s.failures) > 0 {
		return o.fail("%s", strings.Join(s.failures, "; "))
	}
	return 0
}

// drive runs the workload w until running ends, its operations under
// opCtx; the ones under way then get drainLimit to finish, after which
// cancelOps cancels them. It returns how long the workload ran.
func drive(running, opCtx context.Context, cancelOps context.CancelFunc, w *workload) time.Duration {
	start := time.Now()
	done := make(chan struct{})
	go func() { w.run(running, opCtx); close(done) }()
	select {
	case <-done:
	case <-running.Done():
		drain := time.NewTimer(drainLimit)
		select {
		case <-done:
		case <-drain.C:
			cancelOps() // every operation ends at once: its check-out and round trip are under opCtx
			<-done
		}
		drain.Stop()
	}
	return time.Since(start)
}

// usesClient reports whether the deployment of cs is run through a
// mongopool.Client rather than a single pool: a replica set (replicaSet), a
// connection string of several hosts, or a mongodb+srv one (whose look-up
// may give several), unless it connects directly to its one host or to a
// load balancer, which one pool serves.
func usesClient(cs *connstring.ConnString) bool {
	if len(cs.Hosts) > 1 {
		return true
	}
	if isTrue(cs.DirectConnection) || isTrue(cs.LoadBalanced) {
		return false
	}
	return cs.ReplicaSet != "" || cs.Scheme == connstring.SchemeMongoDBSRV
}

func isTrue(b *bool) bool { return b != nil && *b }

// printWarnings prints the connection string's warnings (options unknown or
// ignored), one per line.
func printWarnings(out *console, warnings []string) {
	for _, w := range warnings {
		out.println("mongopool: warning: " + w)
	}
}

// connect waits for the first check of the server by its monitor, then pings
// it through the pool, which establishes the pool's first connection: what
// mongopool.Open does, but for a check that fails, which ends the wait at
// once with the check's error (a *checkFailed) rather than waiting for the
// server to come up until ctx ends or serverSelectionTimeoutMS passes: a
// server that refuses the connection, or does not answer the hello, is not
// there to run a workload against.
func connect(ctx context.Context, mp *mongopool.Pool) error {
	s, err := mp.Client().Topology().SelectServer(ctx, checkedServer)
	if err != nil {
		return err
	}
	s.Done()
	_, err = mp.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}})
	return err
}

// checkFailed is the error of a check of the server at address that found
// it unusable (Unknown, with err as its error).
type checkFailed struct {
	address string
	err     error
}

func (e *checkFailed) Error() string { return e.err.Error() }
func (e *checkFailed) Unwrap() error { return e.err }

// checkedServer is a server selector that selects the server once a check
// found it, and fails with a *checkFailed once a check failed; until then it
// selects nothing, and the selection waits for the check.
func checkedServer(d topology.Description, dst []topology.ServerDescription) ([]topology.ServerDescription, error) {
	for _, sd := range d.Servers() {
		if sd.Type == topology.ServerUnknown && sd.Error != nil {
			return nil, &checkFailed{address: sd.Address, err: sd.Error}
		}
	}
	return d.SelectCandidates(topology.Criteria{ReadPref: topology.ReadPref{Mode: topology.ModeNearest}}, dst)
}

// openFailure explains in one line why the pool could not be opened (see
// connect), naming the address and the cause: the topology's description
// that a server selection error carries is left out, its server's last
// error kept.
// ctx is the job's (Ctrl-C ends it), running ends with -duration.
func openFailure(ctx, running context.Context, err error, cs *connstring.ConnString, where string, took time.Duration) string {
	if len(cs.Hosts) != 1 {
		return err.Error() // several hosts: the message says it all
	}
	addr := cs.Hosts[0]
	if ctx.Err() != nil {
		return fmt.Sprintf("interrupted while connecting to %s", where)
	}
	var (
		failed *checkFailed
		cerr   *pool.ConnectionError
		cmdErr *wire.CommandError
		se     *topology.SelectionError
	)
	switch {
	case errors.As(err, &failed):
		cause := checkCause(failed.address, failed.err)
		if errors.As(cause, &cmdErr) {
			return fmt.Sprintf("the server at %s (%s) refused the first command: %v", addr, where, cmdErr)
		}
		return fmt.Sprintf("cannot connect to the server at %s (%s): %v", addr, where, cause)
	case running.Err() != nil:
		return fmt.Sprintf("the server at %s (%s) was not ready within -duration (%v): %s", addr, where, took.Round(time.Millisecond), notReady(err, addr))
	case errors.As(err, &cerr) && cerr.DuringAuth:
		return fmt.Sprintf("cannot authenticate to the server at %s (%s): %v", addr, where, cerr.Err)
	case errors.As(err, &cerr):
		return fmt.Sprintf("cannot connect to the server at %s (%s): %v", addr, where, cerr.Err)
	case errors.Is(err, pool.ErrWaitQueueTimeout):
		return fmt.Sprintf("cannot connect to the server at %s (%s): no connection within %v", addr, where, took.Round(100*time.Millisecond))
	case errors.As(err, &cmdErr):
		return fmt.Sprintf("the server at %s (%s) refused the first command: %v", addr, where, cmdErr)
	case errors.As(err, &se):
		return fmt.Sprintf("the server at %s (%s) was not ready within %v: %s", addr, where, took.Round(time.Millisecond), notReady(err, addr))
	}
	return fmt.Sprintf("cannot use the server at %s (%s): %v", addr, where, err)
}

// checkCause is the cause of the error of the server at address: the error
// the monitor's check met, without the words "the check of <address>
// failed" that wrap it, which the caller says its own way; any other error
// (an operation's) as it is.
func checkCause(address string, err error) error {
	if inner := errors.Unwrap(err); inner != nil && err.Error() == "the check of "+address+" failed: "+inner.Error() {
		return inner
	}
	return err
}

// notReady says why the server at addr was not ready when the time to
// connect was up: its last error, or that the monitor's first check had no
// reply, when no server was selected; err otherwise (the ping's).
func notReady(err error, addr string) string {
	var se *topology.SelectionError
	if !errors.As(err, &se) {
		return err.Error()
	}
	sd, ok := se.Description.Server(addr)
	switch {
	case ok && sd.Error != nil:
		return checkCause(addr, sd.Error).Error()
	case ok && sd.Type == topology.ServerUnknown:
		return "no reply to the first check of the server"
	}
	return briefError(err)
}

// briefError renders err for a line of its own: a server selection error as
// why no server was selected and each server's last error, without the rest
// of the topology's description; any other error as it is.
func briefError(err error) string {
	var se *topology.SelectionError
	if !errors.As(err, &se) {
		return err.Error()
	}
	var why string
	switch {
	case se.Timeout > 0:
		why = fmt.Sprintf("no server selected within serverSelectionTimeoutMS (%v)", se.Timeout)
	case errors.Is(se.Err, context.DeadlineExceeded) || errors.Is(se.Err, context.Canceled):
		why = fmt.Sprintf("no server selected before the time was up (%v)", roundDur(se.Waited))
	case se.Err != nil:
		why = "no server selected: " + se.Err.Error()
	default:
		why = "no server selected"
	}
	var servers []string
	for _, sd := range se.Description.Servers() {
		switch {
		case sd.Error != nil:
			servers = append(servers, fmt.Sprintf("%s: %v", sd.Address, checkCause(sd.Address, sd.Error)))
		case sd.Type == topology.ServerUnknown:
			servers = append(servers, sd.Address+": no reply to the first check of the server")
		}
	}
	if len(servers) > 0 {
		why += ": " + strings.Join(servers, "; ")
	}
	return why
}

// flushLimit bounds the wait, after Close, for the event handlers to have
// every event of the run: the pools, the topology and the client deliver
// their events on goroutines of their own, the closing events after Close
// has returned, and the summary counts them all.
const flushLimit = time.Second

// flushEvents waits, up to flushLimit, until the event handlers have had
// every event emitted so far: those of the client (flush: its commands, its
// topology) and those of each pool (a closed client no longer lists its
// pools). It returns an error that says so when the time ran out.
func flushEvents(flush func(context.Context) error, pools ...*pool.Pool) error {
	ctx, cancel := context.WithTimeout(context.Background(), flushLimit)
	defer cancel()
	err := flush(ctx)
	for _, p := range pools {
		if err != nil {
			break
		}
		err = p.Flush(ctx)
	}
	if err != nil {
		return fmt.Errorf("the event handlers had not had every event %v after Close: the counts of events are short", flushLimit)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// clearer clears the pool every interval, as a topology layer would when
// the server's monitor reports an error, and readies it right after, as it
// would once the server is back. Connections of the old generation become
// stale: idle ones are closed, checked-out ones when they come back (or at
// once, with interruptInUseConnections).
type clearer struct {
	p         *pool.Pool
	every     time.Duration
	interrupt bool // every clear interrupts the connections in use
	// alternate makes every other clear interrupt them (-scenario clear),
	// the first one not.
	alternate bool
	out       *console

	// The clears done, with and without interruptInUseConnections; read
	// once run has returned.
	done, interrupting int64
}

// run clears the pool every c.every until ctx ends.
func (c *clearer) run(ctx context.Context) {
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		interrupt := c.interrupt || c.alternate && c.done%2 == 1
		if err := clearOnce(c.p, interrupt); err != nil {
			c.out.println("mongopool: -clear-every: " + err.Error())
			continue
		}
		c.done++
		if interrupt {
			c.interrupting++
		}
	}
}

// clearOnce clears the pool with errClearEvery as the cause, so that the
// operations it fails say who cleared the pool, then readies it.
func clearOnce(p *pool.Pool, interrupt bool) error {
	if err := p.Clear(pool.ClearOptions{Cause: errClearEvery, InterruptInUse: interrupt}); err != nil {
		return err
	}
	return p.Ready()
}

// errClearEvery is the cause of the clears of -clear-every: the check-outs
// they turn away and the operations they interrupt fail with an error that
// wraps it.
var errClearEvery = errors.New("cleared by -clear-every")

// sortedCounts renders counts by name, sorted by name: "a 1, b 2". It
// renders the options of the PoolCreated event and the server errors.
func sortedCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
