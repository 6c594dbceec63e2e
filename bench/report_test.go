package bench

import (
	"strings"
	"testing"
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
