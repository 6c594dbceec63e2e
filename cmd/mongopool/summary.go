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
	results  *results
	monitor  *eventMonitor
	elapsed  time.Duration
	problems []string // figures that should agree and do not
}

func summarize(s pool.Stats, r *results, m *eventMonitor, elapsed time.Duration) *summary {
	sum := &summary{stats: s, results: r, monitor: m, elapsed: elapsed}
	sum.crossCheck()
	return sum
}

func (s *summary) print(out *console) {
	st, r := s.stats, s.results
	ops := r.ok + r.interrupted + r.opCanceled + r.failedCheckOuts()
	lines := []string{
		"",
		fmt.Sprintf("operations   %d in %v (%.0f/s): %d ok, %d interrupted by a clear, %d canceled while running",
			ops, s.elapsed.Round(time.Millisecond), float64(ops)/s.elapsed.Seconds(), r.ok, r.interrupted, r.opCanceled),
		fmt.Sprintf("connections  created %d, closed %d: %d stale, %d idle, %d error, %d poolClosed; %d establishments failed",
			st.Created, st.Closed, st.ClosedStale, st.ClosedIdle, st.ClosedError, st.ClosedPoolClosed, st.EstablishFailed),
		fmt.Sprintf("checkouts    %d succeeded, %d failed: %d timeouts, %d pool cleared, %d connection errors, %d canceled, %d other",
			st.CheckedOut, st.CheckOutFailed, r.timeouts, r.cleared, r.connErrors, r.canceled, r.other),
	}
	if n := r.failedCheckOuts(); n > 0 {
		lines = append(lines,
			fmt.Sprintf("             of the failed: %d RetryableError, %d SystemOverloadedError; last: %v", r.retryable, r.overloaded, r.lastErr))
	}
	h := &r.latency
	lines = append(lines,
		fmt.Sprintf("latency      checkout p50 %v  p90 %v  p99 %v  max %v  (%d samples, as the workload measured it)",
			roundDur(h.quantile(0.50)), roundDur(h.quantile(0.90)), roundDur(h.quantile(0.99)), roundDur(h.max), h.n),
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
	for _, l := range lines {
		out.println(l)
	}
}

// crossCheck compares figures that must agree once the pool is closed and the
// workload is over: the pool's Stats, the events it emitted and what the
// workload saw.
func (s *summary) crossCheck() {
	st, r, ev := s.stats, s.results, s.monitor.count
	checks := []struct {
		what      string
		got, want int64
	}{
		{"Stats.CheckedOut vs operations that got a connection", st.CheckedOut, r.ok + r.interrupted + r.opCanceled},
		{"Stats.CheckOutFailed vs failed check-outs seen", st.CheckOutFailed, r.failedCheckOuts()},
		{"Stats.Timeouts vs timed-out and canceled check-outs seen", st.Timeouts, r.timeouts + r.canceled},
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
