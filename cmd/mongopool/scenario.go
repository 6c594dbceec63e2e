package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// The scenarios of -scenario.
const (
	scenarioStorm    = "storm"
	scenarioSlow     = "slow"
	scenarioClear    = "clear"
	scenarioOverload = "overload"
	scenarioFailover = "failover"
)

// scenarioList describes the scenarios for -h, in order; the lines of a
// description after the first are indented under it.
var scenarioList = []struct{ name, about string }{
	{scenarioStorm, "" +
		"a thousand goroutines check out at once from an empty pool, one\n" +
		"operation each; the run ends when they are done. Summary: when the\n" +
		"queue drained, the waits, the connections made. Works with -uri."},
	{scenarioSlow, "" +
		"the server delays each insert and find by -delay: the failCommand fail\n" +
		"point (blockConnection) of the pool's appName. Summary: the waits\n" +
		"against the delay. Works with a -uri whose server takes\n" +
		"configureFailPoint (a mongod with enableTestCommands)."},
	{scenarioClear, "" +
		"the pool is cleared every -clear-every (" + defaultClearEvery.String() + "), every other time with\n" +
		"interruptInUseConnections; the operations turned away or interrupted\n" +
		"are retried. Summary: the clears, the interrupted connections, the\n" +
		"retries. Works with -uri."},
	{scenarioOverload, "" +
		"the server admits " + fmt.Sprint(overloadRate) + " new connections a second and refuses the\n" +
		"others, as an overloaded MongoDB does; the pool labels the failures\n" +
		"SystemOverloadedError and backs off. Summary: the establishments\n" +
		"failed, the backoff, the attempts a second. In-process only."},
	{scenarioFailover, "" +
		"an in-process replica set of " + fmt.Sprint(replsetMembers) + " members whose primary steps down\n" +
		"halfway, as -replset. Summary: the time to the new primary, the\n" +
		"failed operations. In-process only."},
}

const (
	// defaultClearEvery is -clear-every for -scenario clear.
	defaultClearEvery = 100 * time.Millisecond
	// defaultDelay is -delay, for -scenario slow.
	defaultDelay = 20 * time.Millisecond
	// stormGoroutines is -goroutines for -scenario storm.
	stormGoroutines = 1000
	// overloadRate and overloadBurst are the connection rate limit of the
	// in-process server of -scenario overload (mongotest's
	// LimitConnectionRate): new connections a second, and at once.
	overloadRate  = 2
	overloadBurst = 1
	// scenarioRetries is how often the scenarios retry an operation that
	// failed with a retryable error: MAX_RETRIES of the client
	// backpressure specification.
	scenarioRetries = 2
)

func scenarioNames() []string {
	names := make([]string, len(scenarioList))
	for i, s := range scenarioList {
		names[i] = s.name
	}
	return names
}

// checkScenario checks -scenario and the flags that go with it.
func (c *config) checkScenario() error {
	known := c.scenario == ""
	for _, s := range scenarioList {
		known = known || s.name == c.scenario
	}
	switch {
	case !known:
		return fmt.Errorf("unknown -scenario %q: it is one of %s", c.scenario, strings.Join(scenarioNames(), ", "))
	case c.set["delay"] && c.scenario != scenarioSlow:
		return errors.New("-delay goes with -scenario slow")
	case c.delay <= 0:
		return errors.New("-delay must be positive")
	case c.clearEvery > 0 && c.scenario != "" && c.scenario != scenarioClear:
		return fmt.Errorf("-clear-every goes with the plain workload or -scenario clear, not with -scenario %s", c.scenario)
	case c.interrupt && c.scenario == scenarioClear:
		return errors.New("-scenario clear alternates clears with and without interruptInUseConnections: it does not take -interrupt")
	case c.replset && c.scenario != "" && c.scenario != scenarioFailover:
		return fmt.Errorf("-replset is -scenario failover: it does not go with -scenario %s", c.scenario)
	case (c.scenario == scenarioOverload || c.scenario == scenarioFailover) && c.uri != "":
		return fmt.Errorf("-scenario %s runs against in-process servers of its own: it does not take -uri", c.scenario)
	}
	return nil
}

// applyScenarioDefaults sets what a scenario changes of the defaults, for
// the flags not given.
func (c *config) applyScenarioDefaults() {
	switch c.scenario {
	case scenarioStorm:
		if !c.set["goroutines"] {
			c.goroutines = stormGoroutines
		}
	case scenarioClear:
		if c.clearEvery == 0 {
			c.clearEvery = defaultClearEvery
		}
	case scenarioFailover:
		c.replset = true
	}
}

// scenarioRun is a scenario's part of a run of a single pool: what it sets
// up around the workload, and the figures it adds to the summary.
type scenarioRun struct {
	name       string
	srv        *mongotest.Server // the in-process server; nil with -uri
	delay      time.Duration     // slow
	appName    string            // slow: the fail point applies to it
	goroutines int
	clearEvery time.Duration
	failPoint  bool // slow: set, to be turned off
}

// newScenario returns the scenario of c for a run against srv (nil with
// -uri), or nil for the plain workload.
func newScenario(c config, srv *mongotest.Server) *scenarioRun {
	if c.scenario == "" {
		return nil
	}
	return &scenarioRun{name: c.scenario, srv: srv, delay: c.delay, goroutines: c.goroutines, clearEvery: c.clearEvery}
}

// adjustURI returns the connection string the pool is opened with. For
// slow, it gives the pool's connections an application name of their own,
// unless the connection string has one, so that the fail point delays them
// and nobody else's.
func (sc *scenarioRun) adjustURI(uri string, cs *connstring.ConnString) string {
	if sc.name != scenarioSlow {
		return uri
	}
	if cs.AppName != "" {
		sc.appName = cs.AppName
		return uri
	}
	sc.appName = "mongopool-slow-" + randomHex(4)
	return withOption(uri, "appName", sc.appName)
}

// withOption adds the option name=value to the connection string uri,
// which does not have it. The hosts of a connection string hold no "/" (a
// Unix socket's is escaped), so the first one after the scheme starts the
// path, and a "?" after it the options.
func withOption(uri, name, value string) string {
	rest := uri
	if i := strings.Index(uri, "://"); i >= 0 {
		rest = uri[i+3:]
	}
	slash := strings.Index(rest, "/")
	switch {
	case slash < 0:
		return uri + "/?" + name + "=" + value
	case strings.Contains(rest[slash:], "?"):
		if strings.HasSuffix(uri, "?") || strings.HasSuffix(uri, "&") {
			return uri + name + "=" + value
		}
		return uri + "&" + name + "=" + value
	}
	return uri + "?" + name + "=" + value
}

// describe says in a line what the scenario does.
func (sc *scenarioRun) describe() string {
	switch sc.name {
	case scenarioStorm:
		return fmt.Sprintf("%d goroutines check out at once from an empty pool, one operation each", sc.goroutines)
	case scenarioSlow:
		return fmt.Sprintf("the server delays each reply to an insert or a find by %v (failCommand blockConnection, appName %s)", sc.delay, sc.appName)
	case scenarioClear:
		return fmt.Sprintf("the pool is cleared every %v, every other time with interruptInUseConnections; retryable failures are retried", sc.clearEvery)
	case scenarioOverload:
		return fmt.Sprintf("the server admits %d new connections a second (%d at once) and closes the others as soon as accepted", overloadRate, overloadBurst)
	}
	return ""
}

// prepare sets the scenario up once the pool is open: slow sets the fail
// point (through the workload, which counts the command as the job's own),
// overload limits the server's connection rate.
func (sc *scenarioRun) prepare(ctx context.Context, w *workload) error {
	switch sc.name {
	case scenarioSlow:
		ms := (sc.delay + time.Millisecond - 1) / time.Millisecond // blockTimeMS, rounded up
		err := w.admin(ctx, "admin", bson.D{
			{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: "alwaysOn"},
			{Key: "data", Value: bson.D{
				{Key: "failCommands", Value: bson.A{"insert", "find"}},
				{Key: "blockConnection", Value: true},
				{Key: "blockTimeMS", Value: int64(ms)},
				{Key: "appName", Value: sc.appName},
			}},
		})
		var cmdErr *wire.CommandError
		if errors.As(err, &cmdErr) {
			return fmt.Errorf("the server does not take the failCommand fail point (a mongod takes it with --setParameter enableTestCommands=1): configureFailPoint: %v", cmdErr)
		}
		if err != nil {
			return fmt.Errorf("setting the failCommand fail point: %v", err)
		}
		w.delay = time.Duration(ms) * time.Millisecond
		sc.failPoint = true
	case scenarioOverload:
		if sc.srv == nil {
			return errors.New("it needs the in-process server")
		}
		return sc.srv.LimitConnectionRate(overloadRate, overloadBurst)
	}
	return nil
}

// restore undoes what prepare did to the server: slow turns its fail point
// off.
func (sc *scenarioRun) restore(ctx context.Context, w *workload) error {
	if !sc.failPoint {
		return nil
	}
	return w.admin(ctx, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
}

// summary returns the scenario's lines of the summary s, and adds to its
// failures what the scenario's own checks find.
func (sc *scenarioRun) summary(s *summary, clears *clearer) []string {
	st, r := s.stats, s.results
	label := fmt.Sprintf("%-13s", sc.name)
	switch sc.name {
	case scenarioStorm:
		return sc.stormLines(label, s)
	case scenarioSlow:
		lines := []string{
			label + fmt.Sprintf("replies to inserts and finds delayed %v by the server (failCommand blockConnection, appName %s)", sc.delay, sc.appName),
			fmt.Sprintf("             commands p50 %v, %.2f× the delay; %d of %d answered faster than the delay",
				roundDur(r.command.quantile(0.5)), ratio(r.command.quantile(0.5), sc.delay), r.belowDelay, r.command.n),
			fmt.Sprintf("             check-out waits (pool's) p50 %v p90 %v p99 %v: %.2f×, %.2f×, %.2f× the delay, %d goroutines for maxPoolSize %d",
				roundDur(st.CheckOutWait.Quantile(0.5)), roundDur(st.CheckOutWait.Quantile(0.9)), roundDur(st.CheckOutWait.Quantile(0.99)),
				ratio(st.CheckOutWait.Quantile(0.5), sc.delay), ratio(st.CheckOutWait.Quantile(0.9), sc.delay), ratio(st.CheckOutWait.Quantile(0.99), sc.delay),
				sc.goroutines, st.MaxPoolSize),
		}
		if r.belowDelay > 0 {
			s.failures = append(s.failures, fmt.Sprintf("%d commands were answered faster than the delay of %v: the fail point did not delay them", r.belowDelay, sc.delay))
		}
		return lines
	case scenarioClear:
		return []string{
			label + fmt.Sprintf("%d clears every %v: %d with interruptInUseConnections, %d without; %d connections closed stale",
				clears.done, sc.clearEvery, clears.interrupting, clears.done-clears.interrupting, st.ClosedStale),
			fmt.Sprintf("             %d operations had their connection interrupted, %d check-outs were turned away; %d retries, %d operations succeeded on a retry",
				r.attemptKinds[interruptedByFlag], r.attemptKinds[turnedAwayByFlag], r.retries, r.retriedOK),
		}
	case scenarioOverload:
		return sc.overloadLines(label, s)
	}
	return nil
}

// stormLines are the storm's figures: when the queue drained, the waits, the
// connections made against maxPoolSize.
func (sc *scenarioRun) stormLines(label string, s *summary) []string {
	st, r, w := s.stats, s.results, s.w
	drained := "the queue did not drain: no check-out succeeded"
	if !r.lastCheckedOut.IsZero() && !w.released.IsZero() {
		drained = fmt.Sprintf("the queue drained %v after (the last check-out served)", roundDur(r.lastCheckedOut.Sub(w.released)))
	}
	lines := []string{
		label + fmt.Sprintf("%d operations released at once on an empty pool; %s", r.started, drained),
		fmt.Sprintf("             waits p50 %v p99 %v max %v (workload's); pool's CheckOutWait p50 %v p90 %v p99 %v",
			roundDur(r.checkout.quantile(0.5)), roundDur(r.checkout.quantile(0.99)), roundDur(r.checkout.max),
			roundDur(st.CheckOutWait.Quantile(0.5)), roundDur(st.CheckOutWait.Quantile(0.9)), roundDur(st.CheckOutWait.Quantile(0.99))),
		fmt.Sprintf("             connections established %d for maxPoolSize %d; establishment p50 %v",
			s.monitor.count(pool.ConnectionReady), st.MaxPoolSize, roundDur(st.Establish.Quantile(0.5))),
	}
	// Nothing closes a connection before Close in a storm unless it broke:
	// then the pool may never have held more than maxPoolSize at once.
	if st.MaxPoolSize > 0 && st.Closed == st.ClosedPoolClosed && st.Created > int64(st.MaxPoolSize) {
		s.problems = append(s.problems, fmt.Sprintf("the pool created %d connections, none closed before Close: more than maxPoolSize %d", st.Created, st.MaxPoolSize))
	}
	return lines
}

// overloadLines are the overload's figures: the connections the server
// refused, the pool's establishments and how soon it tried again after a
// failure, against the check-outs it served meanwhile.
func (sc *scenarioRun) overloadLines(label string, s *summary) []string {
	st, r, m := s.stats, s.results, s.monitor
	refused := "unknown"
	if sc.srv != nil {
		refused = fmt.Sprint(sc.srv.Stats().ConnectionsRejected)
	}
	attempts := m.count(pool.ConnectionCreated)
	gaps := m.est.gaps()
	lines := []string{
		label + fmt.Sprintf("the server admits at most %d new connections a second: it refused %s; the pool's establishments: %d attempted, %d established, %d failed",
			overloadRate, refused, attempts, m.count(pool.ConnectionReady), st.EstablishFailed),
		fmt.Sprintf("             instead of a retry storm: %.1f attempts a second, for %d check-outs that waited (%.0f a second)",
			perSecond(attempts, s.elapsed), st.WaitCount, perSecond(st.WaitCount, s.elapsed)),
		fmt.Sprintf("             backoff: after a failure, the pool waited p50 %v, max %v before its next attempt (%d pauses)",
			roundDur(gaps.quantile(0.5)), roundDur(gaps.max), gaps.n),
		fmt.Sprintf("             %d check-outs failed with SystemOverloadedError; %d retries, %d operations succeeded on a retry",
			r.overloaded+s.admin.overloaded, r.retries, r.retriedOK),
	}
	return lines
}

// ratio is d over unit, 0 for no unit.
func ratio(d, unit time.Duration) float64 {
	if unit <= 0 {
		return 0
	}
	return float64(d) / float64(unit)
}
