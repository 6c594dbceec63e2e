package bench

import (
	"fmt"
	"io"
	"strings"
)

// Write prints the report as Markdown: one table per shape and case, with
// the figures of each pool, then the targets and whether they hold.
func (r *Report) Write(w io.Writer) {
	writeCases(w, r.Rows, "Shape", "pool")
	if len(r.Checks) > 0 {
		fmt.Fprintf(w, "\n## Targets\n\n| shape | target | measured | holds |\n| --- | --- | --- | --- |\n")
		for _, c := range r.Checks {
			ok := "yes"
			if !c.OK {
				ok = "**no**"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", c.Shape, c.Target, c.Got, ok)
		}
	}
	writeNotes(w, r.Notes)
}

// writeCases prints rows as Markdown, a table per case whose first column is
// named first, under a heading (heading and the shape) per shape: the rows
// of a case, and the cases of a shape, come together.
func writeCases(w io.Writer, rows []Row, heading, first string) {
	shape := ""
	for i := 0; i < len(rows); {
		head := rows[i]
		j := i
		for j < len(rows) && rows[j].Shape == head.Shape && rows[j].Case == head.Case {
			j++
		}
		if head.Shape != shape {
			shape = head.Shape
			fmt.Fprintf(w, "\n## %s %s\n", heading, shape)
		}
		fmt.Fprintf(w, "\n%s\n\n", head.Case)
		writeTable(w, first, rows[i:j])
		i = j
	}
}

// writeNotes prints the notes under the tables, a bullet each.
func writeNotes(w io.Writer, notes []string) {
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

// writeTable prints rows of one case, a column per figure name in the order
// they first appear, after the first, first (what the rows compare: "pool",
// "client").
func writeTable(w io.Writer, first string, rows []Row) {
	var names []string
	seen := map[string]bool{}
	for _, r := range rows {
		for _, f := range r.Figs {
			if !seen[f.Name] {
				seen[f.Name] = true
				names = append(names, f.Name)
			}
		}
	}
	fmt.Fprintf(w, "| %s | %s |\n|%s\n", first, strings.Join(names, " | "), strings.Repeat(" --- |", len(names)+1))
	for _, r := range rows {
		vals := make([]string, len(names))
		for i, n := range names {
			vals[i] = "-"
			for _, f := range r.Figs {
				if f.Name == n {
					vals[i] = f.Value
				}
			}
		}
		fmt.Fprintf(w, "| %s | %s |\n", r.Kind, strings.Join(vals, " | "))
	}
}

// Failed returns the targets that do not hold.
func (r *Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}
