package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/internal/embedded"
)

// match returns the submatches of the pattern re in the summary, failing
// the test when the summary has no line that matches.
func match(t *testing.T, stdout, re string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)` + re).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no line of the summary matches %q:\n%s", re, stdout)
	}
	return m
}

// atoi is strconv.Atoi for the numbers a pattern matched.
func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

// checkAttempts checks the summary's "attempts" line, attempts = operations
// + retries = with a connection + without, against the "done" line, and
// returns the retries.
func checkAttempts(t *testing.T, stdout string) (retries int64) {
	t.Helper()
	done, _ := checkDone(t, stdout)
	m := match(t, stdout, `^attempts +(\d+) = (\d+) operations \+ (\d+) retries = (\d+) got a connection \+ (\d+) did not$`)
	attempts, ops, retries, got, not := atoi(t, m[1]), atoi(t, m[2]), atoi(t, m[3]), atoi(t, m[4]), atoi(t, m[5])
	if attempts != ops+retries || attempts != got+not || ops != int64(done) {
		t.Errorf("attempts line %q does not add up, or its operations are not the %d done", m[0], done)
	}
	if n := int64(checkSums(t, stdout, "checkouts")); n != not {
		t.Errorf("the checkouts line counts %d failed, the attempts line %d without a connection", n, not)
	}
	if retries > 0 && int64(checkSums(t, stdout, "retries")) != retries {
		t.Errorf("the retries line does not count the %d retries", retries)
	}
	if strings.Contains(stdout, "MISMATCH") || !strings.Contains(stdout, "checks       stats, events and the workload's own counts agree") {
		t.Errorf("the counts disagree:\n%s", stdout)
	}
	return retries
}

// -scenario storm: a thousand goroutines (by default) check out at once
// from an empty pool, one operation each, and the run ends when they are
// done, long before -duration. The summary says when the queue drained,
// the waits, and the connections established, no more than maxPoolSize.
func TestScenarioStorm(t *testing.T) {
	code, stdout, stderr := runOnce(t, "-scenario", "storm", "-duration", "40s")
	if code != 0 || stderr != "" {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if done, failed := checkDone(t, stdout); done != 1000 || failed != 0 {
		t.Errorf("%d operations done, %d failed: want the 1000 of the storm, none failed", done, failed)
	}
	checkAttempts(t, stdout)
	match(t, stdout, `^storm +1000 operations released at once on an empty pool; the queue drained [0-9.]+[µnm]?s after`)
	m := match(t, stdout, `^ +waits p50 ([0-9.]+[µnm]?s) p99 ([0-9.]+[µnm]?s) max ([0-9.]+[µnm]?s) \(workload's\); pool's CheckOutWait p50 \S+ p90 \S+ p99 \S+$`)
	p50, _ := time.ParseDuration(m[1])
	p99, _ := time.ParseDuration(m[2])
	maxWait, _ := time.ParseDuration(m[3])
	if p50 > p99 || p99 > maxWait {
		t.Errorf("waits p50 %v, p99 %v, max %v: not in order", p50, p99, maxWait)
	}
	m = match(t, stdout, `^ +connections established (\d+) for maxPoolSize 10;`)
	if n := atoi(t, m[1]); n < 1 || n > 10 {
		t.Errorf("%d connections established for maxPoolSize 10", n)
	}
	// An empty pool: nothing checked out before the storm.
	match(t, stdout, `\d+ by the workload, 0 by the first ping`)
	// The storm ended the run, not -duration.
	match(t, stdout, `^time +\S+ in all: -duration 40s, then 0s to finish`)
}

// -scenario slow: the server delays every insert and find by -delay, with
// the failCommand fail point of the pool's own appName: every command takes
// at least the delay, and the waits are told against it. The fail point is
// set and turned off by the job's own commands, which the counts include.
func TestScenarioSlow(t *testing.T) {
	code, stdout, stderr := runOnce(t, "-scenario", "slow", "-delay", "20ms", "-duration", "1s", "-goroutines", "6", "-maxPoolSize", "2")
	if code != 0 || stderr != "" {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	checkAttempts(t, stdout)
	match(t, stdout, `^slow +replies to inserts and finds delayed 20ms by the server \(failCommand blockConnection, appName mongopool-slow-[0-9a-f]+\)$`)
	m := match(t, stdout, `^ +commands p50 (\S+), ([0-9.]+)× the delay; (\d+) of (\d+) answered faster than the delay$`)
	if atoi(t, m[3]) != 0 || atoi(t, m[4]) == 0 {
		t.Errorf("%s of %s commands faster than the delay: want some commands, none faster", m[3], m[4])
	}
	if p50, _ := time.ParseDuration(m[1]); p50 < 20*time.Millisecond {
		t.Errorf("commands p50 %v, below the delay", p50)
	}
	match(t, stdout, `^ +check-out waits \(pool's\) p50 \S+ p90 \S+ p99 \S+: [0-9.]+×, [0-9.]+×, [0-9.]+× the delay, 6 goroutines for maxPoolSize 2$`)
	// configureFailPoint on and off, and the drop.
	match(t, stdout, `1 by the first ping, 3 by the job's own commands`)
}

// -scenario slow with -uri: the fail point applies to the appName of the
// connection string, fires during the run, and is off afterwards.
func TestScenarioSlowURI(t *testing.T) {
	srv := startTestServer(t)
	code, stdout, stderr := runOnce(t, "-uri", srv.URI()+"?appName=slowtest", "-scenario", "slow", "-delay", "5ms", "-duration", "300ms", "-goroutines", "2")
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	match(t, stdout, `^slow +replies to inserts and finds delayed 5ms by the server \(failCommand blockConnection, appName slowtest\)$`)
	fired := srv.Stats().FailCommandFired
	if fired == 0 {
		t.Fatal("the fail point never fired")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := mongopool.Open(ctx, srv.URI()+"?appName=slowtest")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.RunCommand(ctx, "other", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Stats().FailCommandFired; n != fired {
		t.Errorf("the fail point fired after the run (%d times, %d before): it was left on", n, fired)
	}
}

// -scenario slow against a server without the failCommand fail point: a
// clear message, exit code 1, before any workload.
func TestScenarioSlowUnsupported(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	code, stdout, stderr := runOnce(t, "-uri", srv.URI(), "-scenario", "slow", "-duration", "2s")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if line := verdict(t, stderr); !strings.Contains(line, "-scenario slow: the server does not take the failCommand fail point") {
		t.Errorf("verdict %q: want why the scenario cannot run", line)
	}
}

// -scenario clear: clears every -clear-every, with and without
// interruptInUseConnections in turn; the operations they turn away or
// interrupt are retried, and none fails in the end. The summary counts the
// clears, the interrupted connections and the retries, which add up.
func TestScenarioClear(t *testing.T) {
	code, stdout, stderr := runOnce(t, "-scenario", "clear", "-clear-every", "20ms", "-duration", "600ms", "-goroutines", "8", "-maxPoolSize", "3")
	if code != 0 || stderr != "" {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	retries := checkAttempts(t, stdout)
	_, failed := checkDone(t, stdout) // all of them by the clears, or the exit code would say so
	m := match(t, stdout, `^clear +(\d+) clears every 20ms: (\d+) with interruptInUseConnections, (\d+) without; \d+ connections closed stale$`)
	clears, with, without := atoi(t, m[1]), atoi(t, m[2]), atoi(t, m[3])
	if clears != with+without || with == 0 || without == 0 || with > without || without > with+1 {
		t.Errorf("%d clears, %d with interruptInUseConnections, %d without: want both, in turn", clears, with, without)
	}
	if n := atoi(t, match(t, stdout, `ConnectionPoolCleared +(\d+)`)[1]); n != clears {
		t.Errorf("%d ConnectionPoolCleared events for %d clears", n, clears)
	}
	m = match(t, stdout, `^ +(\d+) operations had their connection interrupted, (\d+) check-outs were turned away; (\d+) retries, (\d+) operations succeeded on a retry$`)
	// Each attempt interrupted or turned away was retried (some operations
	// more than once), but those of the operations that failed in the end,
	// their retries spent.
	interrupted, turnedAway, retriedOK := atoi(t, m[1]), atoi(t, m[2]), atoi(t, m[4])
	if atoi(t, m[3]) != retries || interrupted+turnedAway != retries+int64(failed) || retriedOK == 0 || retriedOK > retries {
		t.Errorf("%q: want each attempt interrupted or turned away retried but the last ones of the %d operations failed, the %d retries of the attempts line", m[0], failed, retries)
	}
	if failed > 0 {
		match(t, stdout, `^ +`+strconv.Itoa(failed)+` of them caused by -clear-every itself, 0 not$`)
	}
}

// -scenario overload: the in-process server refuses the connections beyond
// its rate; the pool labels the failures, backs off, and serves the
// workload with the connections it has; the failed check-outs are retried.
// The summary counts the refusals, the establishments and the pauses.
func TestScenarioOverload(t *testing.T) {
	code, stdout, stderr := runOnce(t, "-scenario", "overload", "-duration", "1200ms", "-goroutines", "16", "-maxPoolSize", "8")
	if code != 0 || stderr != "" {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	retries := checkAttempts(t, stdout)
	m := match(t, stdout, `^overload +the server admits at most 2 new connections a second: it refused (\d+); the pool's establishments: (\d+) attempted, (\d+) established, (\d+) failed$`)
	refused, attempted, established, failed := atoi(t, m[1]), atoi(t, m[2]), atoi(t, m[3]), atoi(t, m[4])
	if failed == 0 || refused < failed || attempted < established+failed {
		t.Errorf("%q: want failed establishments, each one a refusal, within the attempts", m[0])
	}
	if n := atoi(t, match(t, stdout, `^connections .*; (\d+) establishments failed$`)[1]); n != failed {
		t.Errorf("the connections line counts %d failed establishments, the overload line %d", n, failed)
	}
	match(t, stdout, `^ +instead of a retry storm: [0-9.]+ attempts a second, for \d+ check-outs that waited \(\d+ a second\)$`)
	match(t, stdout, `^ +backoff: after a failure, the pool waited p50 \S+, max \S+ before its next attempt \(\d+ pauses\)$`)
	m = match(t, stdout, `^ +(\d+) check-outs failed with SystemOverloadedError; (\d+) retries, (\d+) operations succeeded on a retry$`)
	if atoi(t, m[1]) == 0 || atoi(t, m[2]) != retries {
		t.Errorf("%q: want the check-outs the refusals failed, and the %d retries of the attempts line", m[0], retries)
	}
}

// -scenario failover: the in-process replica set's primary steps down
// halfway; the summary tells when the client saw the new primary and how
// many operations failed.
func TestScenarioFailover(t *testing.T) {
	code, stdout, stderr := runOnce(t, "-scenario", "failover", "-duration", "1500ms", "-goroutines", "4")
	if code != 0 || stderr != "" {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	_, failed := checkDone(t, stdout)
	m := match(t, stdout, `^failover +at [0-9.]+s: \S+ stepped down, \S+ elected; the client saw it as primary [0-9.]+[µnm]?s after the election, .*; (\d+) operations failed$`)
	if atoi(t, m[1]) != int64(failed) {
		t.Errorf("the failover line counts %s failed operations, the done line %d", m[1], failed)
	}
	match(t, stdout, `^time +\S+ in all: -duration 1.5s, then \S+ to finish \(at most 4s\)$`)
}

// Scenario flags that make no sense are refused before anything starts.
func TestParseFlagsRejectsScenarios(t *testing.T) {
	for _, args := range [][]string{
		{"-scenario", "nosuch"},
		{"-scenario", "overload", "-uri", "mongodb://127.0.0.1"},
		{"-scenario", "failover", "-uri", "mongodb://127.0.0.1"},
		{"-scenario", "storm", "-replset"},
		{"-scenario", "storm", "-clear-every", "1s"},
		{"-scenario", "clear", "-interrupt"},
		{"-scenario", "slow", "-delay", "0s"},
		{"-delay", "1s"},
		{"-events"},
	} {
		var errOut bytes.Buffer
		if _, err := parseFlags(args, &errOut); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	c := mustParse(t, "-scenario", "storm")
	if c.goroutines != stormGoroutines {
		t.Errorf("-scenario storm: %d goroutines, want %d", c.goroutines, stormGoroutines)
	}
	if c := mustParse(t, "-scenario", "storm", "-goroutines", "5"); c.goroutines != 5 {
		t.Errorf("-scenario storm -goroutines 5: %d goroutines", c.goroutines)
	}
	if c := mustParse(t, "-scenario", "failover"); !c.replset {
		t.Error("-scenario failover does not run the replica set")
	}
	var help bytes.Buffer
	parseFlags([]string{"-h"}, &help)
	for _, name := range scenarioNames() {
		if !regexp.MustCompile(`(?m)^  ` + name + ` +\S`).MatchString(help.String()) {
			t.Errorf("-h does not describe -scenario %s:\n%s", name, help.String())
		}
	}
}

// A run that lasts longer than -duration and its grace fails, and says so;
// the grace is in the summary.
func TestRunOverrun(t *testing.T) {
	srv := startTestServer(t)
	c := mustParse(t, "-uri", srv.URI(), "-duration", "200ms", "-goroutines", "2")
	c.grace = 0 // any time at all past -duration overruns
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, c, &out, &errOut); code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if line := verdict(t, errOut.String()); !regexp.MustCompile(`the run lasted \S+, more than -duration \(200ms\) and 0s to finish`).MatchString(line) {
		t.Errorf("verdict %q: want the overrun", line)
	}
	match(t, out.String(), `^time +\S+ in all: -duration 200ms, then \S+ to finish \(at most 0s\)$`)
}

// withOption adds an option wherever the connection string's options go.
func TestWithOption(t *testing.T) {
	for uri, want := range map[string]string{
		"mongodb://h:1":              "mongodb://h:1/?appName=x",
		"mongodb://h:1/":             "mongodb://h:1/?appName=x",
		"mongodb://h:1/db":           "mongodb://h:1/db?appName=x",
		"mongodb://h:1/?":            "mongodb://h:1/?appName=x",
		"mongodb://u:p@h:1/db?w=1":   "mongodb://u:p@h:1/db?w=1&appName=x",
		"mongodb://%2Ftmp%2Fs.sock":  "mongodb://%2Ftmp%2Fs.sock/?appName=x",
		"mongodb+srv://c.example/?a": "mongodb+srv://c.example/?a&appName=x",
	} {
		if got := withOption(uri, "appName", "x"); got != want {
			t.Errorf("withOption(%q) = %q, want %q", uri, got, want)
		}
	}
}
