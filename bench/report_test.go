package bench

import (
	"strings"
	"testing"
	"time"
)

// The rows are printed a table per case, under one heading per shape, in
// their order.
func TestWriteCasesGroups(t *testing.T) {
	row := func(shape, c, who string) Row {
		return Row{Shape: shape, Case: c, Kind: Kind(who), Figs: []Fig{{"ns/op", "1"}}}
	}
	var sb strings.Builder
	writeCases(&sb, []Row{row("1", "a", "x"), row("1", "a", "y"), row("1", "b", "x"), row("2", "c", "x")}, "Shape", "pool")
	got := sb.String()
	if n := strings.Count(got, "## Shape 1\n"); n != 1 {
		t.Errorf("%d headings of shape 1, want 1:\n%s", n, got)
	}
	if n := strings.Count(got, "| pool |"); n != 3 {
		t.Errorf("%d tables, want 3 (cases a, b, c):\n%s", n, got)
	}
	if a, b, c := strings.Index(got, "\na\n"), strings.Index(got, "\nb\n"), strings.Index(got, "## Shape 2"); a < 0 || !(a < b && b < c) {
		t.Errorf("cases out of order:\n%s", got)
	}
}

// TestProxyUpstreamChecks: the bound on upstream connections holds only on
// readings, every round's: a round without any (the server too busy to
// answer serverStatus) neither passes the check nor hides another round's
// excess.
func TestProxyUpstreamChecks(t *testing.T) {
	round := func(ops int64, upstream, idle, samples int) proxyRun {
		return proxyRun{Target: ProxyTarget, Clients: 1000, Elapsed: time.Second, Load: LoadResult{Ops: ops},
			Upstream: upstream, UpstreamIdle: idle, UpstreamSamples: samples}
	}
	direct := proxyRun{Target: DirectTarget, Clients: 1000, Elapsed: time.Second, Load: LoadResult{Ops: 100}, UpstreamIdle: -1, UpstreamSamples: 1}
	cases := []struct {
		name   string
		rounds []proxyRun
		got    string
		ok     bool
	}{
		{"measured", []proxyRun{round(10, 102, 2, 5), round(20, 101, 2, 5), round(30, 102, 2, 5)}, "102 at most, 2 of them", true},
		{"median round unread", []proxyRun{round(10, 102, 2, 5), round(20, 0, -1, 0), round(30, 102, 2, 5)}, "102 at most, 2 of them", true},
		{"no reading", []proxyRun{round(10, 0, -1, 0), round(20, 0, -1, 0), round(30, 0, -1, 0)}, "not measured", false},
		{"excess in another round", []proxyRun{round(10, 150, 2, 5), round(20, 102, 2, 5), round(30, 102, 2, 5)}, "150 at most", false},
		{"idle unread", []proxyRun{round(10, 0, -1, 0), round(20, 101, -1, 5), round(30, 0, -1, 0)}, "101 at most (those open before any client not measured)", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &ProxyReport{Config: ProxyConfig{MaxPoolSize: 100}, Runs: []proxyRun{direct, medianRun(tc.rounds)}}
			r.check()
			for _, c := range r.Checks {
				if strings.Contains(c.Target, "upstream connections") {
					if !strings.Contains(c.Got, tc.got) || c.OK != tc.ok {
						t.Errorf("%q: %q, holds %v; want %q, %v", c.Target, c.Got, c.OK, tc.got, tc.ok)
					}
					return
				}
			}
			t.Fatal("no check of the upstream connections")
		})
	}
}
