// Package redact replaces the secrets of a text, found beforehand as spans
// of bytes, with a marker. The packages that show connection strings and
// server replies use it, so that a secret looks the same wherever it is
// hidden.
package redact

import (
	"cmp"
	"slices"
	"strings"
)

// Text stands for a secret in everything shown.
const Text = "xxxxx"

// Span is the range [Start, End) of byte offsets in a text.
type Span struct{ Start, End int }

// Spans returns text with each span replaced by Text. The spans may come in
// any order and may overlap: spans that overlap are replaced as one, by a
// single Text, so that the length of what is shown tells nothing of how the
// secrets lie; spans that only touch are replaced each. An empty span
// inserts Text where it is (a secret known to be there, even empty), unless
// it lies within another span or at one of its ends. Every span must lie
// within text; spans is left as it is.
func Spans(text string, spans []Span) string {
	if len(spans) == 0 {
		return text
	}
	// By start, and the longest first among those that start together, so
	// that one within another (an empty one included) is covered by it.
	sorted := slices.Clone(spans)
	slices.SortFunc(sorted, func(a, b Span) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(b.End, a.End))
	})
	var b strings.Builder
	pos := 0 // the end of what is written
	for _, s := range sorted {
		if s.End <= pos {
			continue // within what is already replaced
		}
		if s.Start >= pos {
			// Not within the previous span: a new one.
			b.WriteString(text[pos:s.Start])
			b.WriteString(Text)
		}
		pos = s.End
	}
	b.WriteString(text[pos:])
	return b.String()
}
