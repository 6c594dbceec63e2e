package main

import (
	"fmt"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// summary is the end-of-run report: the pool's own Stats, what the workload
// measured, the events seen, and the cross-checks between the three.
type summary struct {
	stats    pool.Stats
	results  *results // the workload's
	admin    *results // the demo's own commands around it (dropDatabase)
	monitor  *eventMonitor
	elapsed  time.Duration
	problems []string // figures that should agree and do not
	failures []string // operations the server or the network failed
}

// openCheckOuts is the number of check-outs mongopool.Open makes: the ping
// that checks the server is there.
const openCheckOuts = 1

func summarize(s pool.Stats, w *workload, m *eventMonitor, elapsed time.Duration) *summary {
	sum := &summary{stats: s, results: &w.results, admin: &w.adminResults, monitor: m, elapsed: elapsed}
	sum.crossCheck()
	r := sum.results
	if n := r.unexpected(); n > 0 {
		sum.failures = append(sum.failures, fmt.Sprintf("%d operations failed because of the server or the network", n))
	}
	if r.notFound > 0 {
		sum.failures = append(sum.failures, fmt.Sprintf("%d finds did not find a document the workload had inserted", r.notFound))
	}
	if r.ok() == 0 {
		sum.failures = append(sum.failures, "no operation succeeded")
	}
	return sum
}

func (s *summary) print(out *console) {
	st, r := s.stats, s.results
	secs := s.elapsed.Seconds()
	lines := []string{
		"",
		fmt.Sprintf("operations   %d succeeded in %v: %.0f ops/s; %d inserts, %d finds by _id of a document inserted before",
			r.ok(), s.elapsed.Round(time.Millisecond), float64(r.ok())/secs, r.inserts, r.finds),
	}
	if r.notFound > 0 {
		lines = append(lines, fmt.Sprintf("             %d of the finds did not find their document", r.notFound))
	}
	failedOps := r.gotConnection() - r.ok()
	if failedOps > 0 || r.failedCheckOuts() > 0 {
		lines = append(lines,
			fmt.Sprintf("failed       %d operations: %d check-outs failed (below); after a check-out: %d interrupted by a clear, %d canceled at the end, %d broken connections, %d server errors%s",
				failedOps+r.failedCheckOuts(), r.failedCheckOuts(), r.interrupted, r.opCanceled, r.broken, r.commandErrors(), byName(r.cmdErrors)))
		if r.lastOpErr != nil {
			lines = append(lines, fmt.Sprintf("             last failed command: %v", r.lastOpErr))
		}
	} else {
		lines = append(lines, "failed       no operation")
	}
	lines = append(lines,
		fmt.Sprintf("connections  created %d, closed %d: %d stale, %d idle, %d error, %d poolClosed; %d establishments failed",
			st.Created, st.Closed, st.ClosedStale, st.ClosedIdle, st.ClosedError, st.ClosedPoolClosed, st.EstablishFailed),
		fmt.Sprintf("checkouts    %d succeeded, %d failed: %d timeouts, %d pool cleared, %d connection errors, %d canceled, %d other",
			st.CheckedOut, st.CheckOutFailed, r.timeouts, r.cleared, r.connErrors, r.canceled, r.other),
		fmt.Sprintf("             of which %d by the workload; %d by Open's ping and %d by the final dropDatabase",
			r.gotConnection()+r.failedCheckOuts(), openCheckOuts, s.admin.gotConnection()+s.admin.failedCheckOuts()),
	)
	if n := r.failedCheckOuts(); n > 0 {
		lines = append(lines,
			fmt.Sprintf("             of the failed: %d RetryableError, %d SystemOverloadedError; last: %v", r.retryable, r.overloaded, r.lastCheckOutErr))
	}
	lines = append(lines,
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
	if len(s.problems) == 0 {
		lines = append(lines, "checks       stats, events and the workload's own counts agree")
	}
	for _, p := range s.problems {
		lines = append(lines, "MISMATCH     "+p)
	}
	for _, f := range s.failures {
		lines = append(lines, "FAILED       "+f)
	}
	for _, l := range lines {
		out.println(l)
	}
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
// workload (plus Open's ping and the final dropDatabase) saw.
func (s *summary) crossCheck() {
	st, r, a, ev := s.stats, s.results, s.admin, s.monitor.count
	checks := []struct {
		what      string
		got, want int64
	}{
		{"Stats.CheckedOut vs operations that got a connection", st.CheckedOut, openCheckOuts + r.gotConnection() + a.gotConnection()},
		{"Stats.CheckOutFailed vs failed check-outs seen", st.CheckOutFailed, r.failedCheckOuts() + a.failedCheckOuts()},
		{"Stats.Timeouts vs timed-out and canceled check-outs seen", st.Timeouts, r.timeouts + r.canceled + a.timeouts + a.canceled},
		{"Stats.CheckedIn vs Stats.CheckedOut", st.CheckedIn, st.CheckedOut},
		{"Stats.Closed vs Stats.Created after Close", st.Closed, st.Created},
		{"Stats.Total after Close", int64(st.Total), 0},
		{"ConnectionCreated events vs Stats.Created", ev(pool.ConnectionCreated), st.Created},
		{"ConnectionClosed events vs Stats.Closed", ev(pool.ConnectionClosed), st.Closed},
		{"ConnectionCheckedOut events vs Stats.CheckedOut", ev(pool.ConnectionCheckedOut), st.CheckedOut},
		{"ConnectionCheckedIn events vs Stats.CheckedIn", ev(pool.ConnectionCheckedIn), st.CheckedIn},
		{"ConnectionCheckOutFailed events vs Stats.CheckOutFailed", ev(pool.ConnectionCheckOutFailed), st.CheckOutFailed},
		{"ConnectionCheckOutStarted events vs check-outs", ev(pool.ConnectionCheckOutStarted), st.CheckedOut + st.CheckOutFailed},
		{"ConnectionPoolCleared events vs Stats.Clears", ev(pool.PoolCleared), st.Clears},
		{"ConnectionPoolReady events vs 1 + Stats.Clears", ev(pool.PoolReady), 1 + st.Clears},
		{"ConnectionPoolCreated events", ev(pool.PoolCreated), 1},
		{"ConnectionPoolClosed events", ev(pool.PoolClosed), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			s.problems = append(s.problems, fmt.Sprintf("%s: %d, expected %d", c.what, c.got, c.want))
		}
	}
	if st.State != "closed" {
		s.problems = append(s.problems, fmt.Sprintf("pool state after Close: %q", st.State))
	}
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
