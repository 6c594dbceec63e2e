package bench

import (
	"strings"
	"testing"
)

// TestFailoverSmoke runs shape 8 once, briefly: a step-down and an election
// under load, for each client. It checks sanity, not figures: both clients
// did operations, each saw a write acknowledged by the new primary, and
// mongopool failed none of its operations (retried writes and reads carry it
// through the failover). The official driver's failures, if any, are figures
// for the report, not a fault here.
func TestFailoverSmoke(t *testing.T) {
	s := &Suite{Rounds: 1}
	if err := s.Failover(SmokeFailover()); err != nil {
		t.Fatal(err)
	}
	rows := map[Kind]Row{}
	for _, r := range s.Report.Rows {
		if r.Shape == failoverShapeName {
			rows[r.Kind] = r
		}
	}
	for _, k := range []Kind{Mongopool, Official} {
		r, ok := rows[k]
		if !ok {
			t.Fatalf("no failover figures for %s: %+v", k, s.Report.Rows)
		}
		if n := fig(t, r, "ops done"); n == 0 {
			t.Errorf("%s did no operation", k)
		}
		if v := figValue(t, r, "failover"); v == "" || strings.HasPrefix(v, "none") {
			t.Errorf("%s: no write acknowledged by the new primary (failover %q)", k, v)
		}
	}
	if n := fig(t, rows[Mongopool], "failed ops"); n != 0 {
		t.Errorf("mongopool failed %d operations during the failover; notes: %q", n, s.Report.Notes)
	}
	if len(s.Report.Checks) != 1 || !s.Report.Checks[0].OK {
		t.Errorf("checks: %+v, want one that holds", s.Report.Checks)
	}
	var sb strings.Builder
	s.Report.Write(&sb)
	t.Log(sb.String())
}

// figValue returns the figure name of r as printed.
func figValue(t *testing.T, r Row, name string) string {
	t.Helper()
	for _, f := range r.Figs {
		if f.Name == name {
			return f.Value
		}
	}
	t.Fatalf("row %s/%s/%s has no figure %q", r.Shape, r.Case, r.Kind, name)
	return ""
}
