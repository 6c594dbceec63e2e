package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// summary is the end-of-run report: the pool's own Stats, what the workload
// measured, the events seen, and the cross-checks between the three.
type summary struct {
	stats   pool.Stats
	w       *workload
	results *results // the workload's
	admin   *results // the job's own commands around it (dropDatabase, a scenario's fail point)
	started int64    // the workload's operations, by the progress counter
	monitor *eventMonitor
	elapsed time.Duration
	// openCheckOuts is the number of check-outs before the workload's:
	// the first ping (none for a storm, which does not ping).
	openCheckOuts int64
	// closeCheckedOut and closeCheckOutFailed count the check-outs of
	// Close: its endSessions, which ends the sessions of the ping and the
	// job's own commands (none when the server has no sessions), at most
	// one.
	closeCheckedOut, closeCheckOutFailed int64
	loadBalanced                         bool     // the pool's, of a load balancer
	scenario                             []string // the scenario's lines
	took                                 string   // the line on how long the run lasted
	problems                             []string // figures that should agree and do not
	failures                             []string // what failed, one phrase each, for the line at the end
}

// openCheckOuts is the number of check-outs connect makes: the ping that
// checks the server answers through the pool.
const openCheckOuts = 1

// summarize gathers the figures of the report; crossCheck and judge then
// compare them.
func summarize(s pool.Stats, w *workload, m *eventMonitor, elapsed time.Duration) *summary {
	return &summary{stats: s, w: w, results: &w.results, admin: &w.adminResults, started: w.ops.Load(), monitor: m, elapsed: elapsed}
}

// judge adds to the failures what went wrong in the workload.
func (s *summary) judge() {
	r := s.results
	if len(s.problems) > 0 {
		s.failures = append(s.failures, fmt.Sprintf("%d of the summary's cross-checks failed (MISMATCH above)", len(s.problems)))
	}
	if n := r.unexplained(); n > 0 {
		s.failures = append(s.failures, fmt.Sprintf("%d operations failed: %s", n, r.kinds(0, numKinds, false)))
	}
	if r.notFound > 0 {
		s.failures = append(s.failures, fmt.Sprintf("%d finds did not find a document the workload had inserted", r.notFound))
	}
	if r.ok() == 0 {
		s.failures = append(s.failures, "no operation succeeded")
	}
}

// timing says how long the run lasted, from the start of the connecting to
// the end of Close, against -duration, and fails a run that lasted longer
// than -duration + grace.
func (s *summary) timing(took, duration, grace time.Duration) {
	s.took, s.failures = timingLine(took, duration, grace, s.failures)
}

// timingLine renders how long the run took against its limit, and adds a
// failure when it overran.
func timingLine(took, duration, grace time.Duration, failures []string) (string, []string) {
	line := fmt.Sprintf("time         %v in all: -duration %v, then %v to finish (at most %v)", roundDur(took), duration, roundDur(max(took-duration, 0)), grace)
	if took > duration+grace {
		failures = append(failures, fmt.Sprintf("the run lasted %v, more than -duration (%v) and %v to finish", roundDur(took), duration, grace))
	}
	return line, failures
}

// kinds renders the counts of the failed operations' kinds in [from, to),
// "3 out of time, 2 server errors (UnknownError 2)", leaving out the kinds
// with no failure, and those that -clear-every caused unless withFlag.
func (r *results) kinds(from, to failureKind, withFlag bool) string {
	return renderKinds(&r.byKind, from, to, withFlag, r.cmdErrors)
}

// checkOutKinds renders the counts of the failed check-outs' kinds: those
// of the attempts that failed before a connection, but for those that
// selected no server, which never reached the pool.
func (r *results) checkOutKinds() string {
	kinds := r.attemptKinds
	kinds[noServer] = 0
	return renderKinds(&kinds, 0, firstAfterCheckOut, true, nil)
}

// retriedKinds renders the kinds of the failed attempts that were retried:
// the failed attempts of each kind but the operations' final failures.
func retriedKinds(r *results) string {
	var retried [numKinds]int64
	for k := range retried {
		retried[k] = r.attemptKinds[k] - r.byKind[k]
	}
	return renderKinds(&retried, 0, numKinds, true, nil)
}

// renderKinds renders counts by kind in [from, to), leaving out the kinds
// with none, and those that -clear-every caused unless withFlag; the server
// errors with their counts by codeName when cmdErrors has them.
func renderKinds(counts *[numKinds]int64, from, to failureKind, withFlag bool, cmdErrors map[string]int64) string {
	var parts []string
	for k := from; k < to; k++ {
		if counts[k] == 0 || k.byFlag() && !withFlag {
			continue
		}
		part := fmt.Sprintf("%d %v", counts[k], k)
		if k == serverError {
			part += byName(cmdErrors)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

func (s *summary) print(out *console) {
	st, r, a := s.stats, s.results, s.admin
	var all results // every attempt of the job but the first ping: the workload's and the drop's
	all.merge(r)
	all.merge(a)
	lines := []string{
		"",
		fmt.Sprintf("operations   %d succeeded in %v: %.0f ops/s; %d inserts, %d finds by _id of a document inserted before",
			r.ok(), s.elapsed.Round(time.Millisecond), perSecond(r.ok(), s.elapsed), r.inserts, r.finds),
	}
	if r.notFound > 0 {
		lines = append(lines, fmt.Sprintf("             %d of the finds did not find their document", r.notFound))
	}
	if r.failed == 0 {
		lines = append(lines, fmt.Sprintf("failed       no operation of %d", r.started))
	} else {
		lines = append(lines, fmt.Sprintf("failed       %d of %d operations: %s", r.failed, r.started, r.kinds(0, numKinds, true)))
		if n := r.byFlag(); n > 0 {
			lines = append(lines, fmt.Sprintf("             %d of them caused by -clear-every itself, %d not", n, r.unexplained()))
		}
		if r.byKind[checkOutTooLate]+r.byKind[tooLate] > 0 {
			lines = append(lines, fmt.Sprintf("             out of time: still running %v after the end of the run, canceled", drainLimit))
		}
		if r.lastCheckOutErr != nil {
			lines = append(lines, fmt.Sprintf("             last failed check-out (%v): %v", r.lastCheckOutKind, r.lastCheckOutErr))
		}
		if r.lastOpErr != nil {
			lines = append(lines, fmt.Sprintf("             last failed command (%v): %v", r.lastOpKind, r.lastOpErr))
		}
	}
	lines = append(lines,
		fmt.Sprintf("done         %d operations = %d succeeded + %d failed", r.started, r.ok(), r.failed),
		attemptsLine(r))
	if r.retries > 0 {
		line := fmt.Sprintf("retries      %d attempts retried: %s; %d operations succeeded on a retry", r.retries, retriedKinds(r), r.retriedOK)
		if r.rewritten > 0 {
			line += fmt.Sprintf(" (%d inserts found their document written by the attempt interrupted)", r.rewritten)
		}
		lines = append(lines, line)
	}
	if a.ok() == a.started {
		lines = append(lines, "cleanup      dropped the demo's database")
	} else {
		lines = append(lines, "cleanup      could not drop the demo's database (the line at the end says why)")
	}
	if n := all.noConn; n == 0 {
		lines = append(lines, fmt.Sprintf("checkouts    no check-out of %d failed", st.CheckedOut+st.CheckOutFailed))
	} else {
		lines = append(lines, fmt.Sprintf("checkouts    %d of %d failed: %s", n, st.CheckedOut+st.CheckOutFailed, all.checkOutKinds()),
			fmt.Sprintf("             of the failed: %d RetryableError, %d SystemOverloadedError; last: %v", all.retryable, all.overloaded, all.lastCheckOutErr))
	}
	if all.noServer > 0 {
		lines = append(lines, fmt.Sprintf("             and %d attempts never reached the pool; the last: %s", all.noServer, briefError(all.lastSelectionErr)))
	}
	lines = append(lines,
		fmt.Sprintf("             %d succeeded; %d by the workload, %d by the first ping, %d by the job's own commands (dropDatabase, a fail point), %d by the closing (endSessions)",
			st.CheckedOut, r.gotConn, s.openCheckOuts, a.gotConn, s.closeCheckedOut),
		fmt.Sprintf("connections  created %d, closed %d: %d stale, %d idle, %d error, %d poolClosed; %d establishments failed",
			st.Created, st.Closed, st.ClosedStale, st.ClosedIdle, st.ClosedError, st.ClosedPoolClosed, st.EstablishFailed),
		"latency      (measured by the workload, successful calls only)",
		latencyLine("CheckOut", &r.checkout, "time in Pool.CheckOut"),
		latencyLine("command", &r.command, "round trip of the insert or find on the connection"),
		latencyLine("operation", &r.operation, "CheckOut + command + CheckIn"),
		fmt.Sprintf("waits        %d check-outs waited, %v on average; %d timeouts (pool's count); %d clears",
			st.WaitCount, roundDur(avg(st.WaitDuration, st.WaitCount)), st.Timeouts, st.Clears),
		"events",
	)
	for _, t := range eventTypes {
		lines = append(lines, fmt.Sprintf("  %-26s %d", t, s.monitor.count(t)))
	}
	lines = append(lines, s.scenario...)
	if s.took != "" {
		lines = append(lines, s.took)
	}
	if len(s.problems) == 0 {
		lines = append(lines, "checks       stats, events and the workload's own counts agree")
	}
	for _, p := range s.problems {
		lines = append(lines, "MISMATCH     "+p)
	}
	for _, l := range lines {
		out.println(l)
	}
}

// attemptsLine splits the workload's attempts into operations and retries,
// and by how their check-out went.
func attemptsLine(r *results) string {
	line := fmt.Sprintf("attempts     %d = %d operations + %d retries = %d got a connection + %d did not", r.attempts, r.started, r.retries, r.gotConn, r.noConn)
	if r.noServer > 0 {
		line += fmt.Sprintf(" + %d selected no server", r.noServer)
	}
	return line
}

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func latencyLine(name string, h *histogram, what string) string {
	return fmt.Sprintf("  %-10s p50 %-9v p90 %-9v p99 %-9v max %-9v  %d samples: %s",
		name, roundDur(h.quantile(0.50)), roundDur(h.quantile(0.90)), roundDur(h.quantile(0.99)), roundDur(h.max), h.n, what)
}

// byName renders the server errors by codeName, " (Name 3, Other 1)".
func byName(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	return " (" + sortedCounts(m) + ")"
}

// crossCheck compares figures that must agree once the pool is closed and the
// workload is over: the pool's Stats, the events it emitted and what the
// workload (plus the first ping and the final dropDatabase) saw, and the
// workload's own counts with one another.
func (s *summary) crossCheck() {
	st, r, a, ev := s.stats, s.results, s.admin, s.monitor.count
	checks := []struct {
		what      string
		got, want int64
	}{
		{"operations started vs the progress counter", r.started, s.started},
		{"operations started vs succeeded + failed", r.started, r.ok() + r.failed},
		{"failed operations vs their count by kind", r.failed, r.kindsTotal()},
		{"attempts vs operations + retries", r.attempts, r.started + r.retries},
		{"attempts vs those that got a connection + those that did not + those that selected no server", r.attempts, r.gotConn + r.noConn + r.noServer},
		{"attempts vs succeeded + failed attempts by kind", r.attempts, r.ok() + r.attemptKindsTotal()},
		{"the job's own commands: started vs succeeded + failed", a.started, a.ok() + a.failed},
		{"the job's own commands: failed vs their count by kind", a.failed, a.kindsTotal()},
		{"Stats.CheckedOut vs attempts that got a connection", st.CheckedOut, s.openCheckOuts + r.gotConn + a.gotConn + s.closeCheckedOut},
		{"check-outs of Close (its endSessions) beyond one", max(0, s.closeCheckedOut+s.closeCheckOutFailed-1), 0},
		{"Stats.CheckOutFailed vs failed check-outs seen", st.CheckOutFailed, r.noConn + a.noConn + s.closeCheckOutFailed},
		{"failed check-outs seen vs their count by kind", r.noConn + a.noConn, r.checkOutKindsTotal() + a.checkOutKindsTotal()},
		{"Stats.Timeouts vs WaitQueueTimeoutErrors seen", st.Timeouts, r.waitTimeouts + a.waitTimeouts},
		{"Stats.CheckedIn vs Stats.CheckedOut", st.CheckedIn, st.CheckedOut},
		{"Stats.Closed vs Stats.Created after Close", st.Closed, st.Created},
		{"Stats.Total after Close", int64(st.Total), 0},
		{"ConnectionCreated events vs Stats.Created", ev(pool.ConnectionCreated), st.Created},
		{"ConnectionClosed events vs Stats.Closed", ev(pool.ConnectionClosed), st.Closed},
		{"ConnectionCheckedOut events vs Stats.CheckedOut", ev(pool.ConnectionCheckedOut), st.CheckedOut},
		{"ConnectionCheckedIn events vs Stats.CheckedIn", ev(pool.ConnectionCheckedIn), st.CheckedIn},
		{"ConnectionCheckOutFailed events vs Stats.CheckOutFailed", ev(pool.ConnectionCheckOutFailed), st.CheckOutFailed},
		{"ConnectionCheckOutStarted events vs check-outs", ev(pool.ConnectionCheckOutStarted), st.CheckedOut + st.CheckOutFailed},
		{"ConnectionPoolCreated events", ev(pool.PoolCreated), 1},
		{"ConnectionPoolClosed events", ev(pool.PoolClosed), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			s.problems = append(s.problems, fmt.Sprintf("%s: %d, expected %d", c.what, c.got, c.want))
		}
	}
	s.problems = append(s.problems, clearChecks("", s.loadBalanced, ev(pool.PoolCleared), ev(pool.PoolReady), st.Clears)...)
	if st.State != "closed" {
		s.problems = append(s.problems, fmt.Sprintf("pool state after Close: %q", st.State))
	}
	if st.EventsDropped > 0 {
		s.problems = append(s.problems, droppedProblem("", st.EventsDropped))
	}
}

// clearChecks compares a pool's clears and readies. A pool starts paused and
// is readied once its server is known up (by the monitor's check, or by the
// job's own Ready after a -clear-every clear); a clear of a ready pool pauses
// it and emits ConnectionPoolCleared, while a clear of a paused pool (the
// topology's, after each failed check of the server) counts in Stats.Clears
// and emits nothing. So: cleared events <= Stats.Clears, and cleared <= ready
// <= cleared + 1. A load-balanced pool is readied once and never paused:
// each clear emits its event. prefix names the pool, for a client's.
func clearChecks(prefix string, loadBalanced bool, cleared, ready, clears int64) []string {
	var problems []string
	if loadBalanced {
		if cleared != clears {
			problems = append(problems, fmt.Sprintf("%sConnectionPoolCleared events vs Stats.Clears: %d, expected %d", prefix, cleared, clears))
		}
		if ready != 1 {
			problems = append(problems, fmt.Sprintf("%sConnectionPoolReady events of a load-balanced pool: %d, expected 1", prefix, ready))
		}
		return problems
	}
	if cleared > clears {
		problems = append(problems, fmt.Sprintf("%sConnectionPoolCleared events vs Stats.Clears: %d, expected at most %d", prefix, cleared, clears))
	}
	if ready < cleared || ready > cleared+1 {
		problems = append(problems, fmt.Sprintf("%sConnectionPoolReady events vs ConnectionPoolCleared events: %d, expected %d or %d", prefix, ready, cleared, cleared+1))
	}
	return problems
}

// droppedProblem says that the pool (at addr, for one of a client's) dropped
// n events, which explains the event counts that fall short.
func droppedProblem(addr string, n uint64) string {
	if addr != "" {
		addr += ": "
	}
	return fmt.Sprintf("%sthe pool dropped %d events, its event handlers a whole queue behind: the counts of events fall short", addr, n)
}

func avg(total time.Duration, n int64) time.Duration {
	if n == 0 {
		return 0
	}
	return total / time.Duration(n)
}

// roundDur keeps three significant figures or so.
func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= time.Microsecond:
		return d.Round(10 * time.Nanosecond)
	}
	return d
}
