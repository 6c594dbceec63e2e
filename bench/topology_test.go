package bench

import (
	"strings"
	"testing"
)

// TestTopologySmoke runs each topology scenario once on a tiny scale (50
// seeds, 100 ms of load, short deadlines): the scenarios must run to their
// end and give figures for both clients, whatever the figures. Every wait of
// a scenario has a deadline of its own (SmokeTopology's Timeout), and every
// client and server is closed before it returns, which TestMain's leak
// check holds it to.
func TestTopologySmoke(t *testing.T) {
	cfg := SmokeTopology()
	var progress strings.Builder
	cfg.Progress = &progress
	tp := NewTopo(cfg)
	if err := tp.Run(); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	got := map[string]map[Kind]bool{}
	for _, r := range tp.Report.Rows {
		if got[r.Shape] == nil {
			got[r.Shape] = map[Kind]bool{}
		}
		if len(r.Figs) == 0 {
			t.Errorf("%s, %s: a row without figures", r.Shape, r.Kind)
		}
		got[r.Shape][r.Kind] = true
	}
	for _, shape := range []string{topoScaleShape, topoSlowShape, topoWriteShape, topoSelectionShape} {
		for _, k := range topoKinds {
			if !got[shape][k] {
				t.Errorf("scenario %s: no figures for %s", shape, k)
			}
		}
	}
	var sb strings.Builder
	WriteTopology(&sb, &tp.Report)
	t.Log(sb.String())
	if !strings.Contains(sb.String(), "| mongopool |") || !strings.Contains(sb.String(), "| official |") {
		t.Errorf("the report lacks a client's rows:\n%s", sb.String())
	}
}
