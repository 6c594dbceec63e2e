package redact_test

import (
	"slices"
	"testing"

	"github.com/mongopool/mongopool/internal/redact"
)

func TestSpans(t *testing.T) {
	type sp = redact.Span
	tests := []struct {
		name  string
		text  string
		spans []redact.Span
		want  string
	}{
		{"none", "abcdef", nil, "abcdef"},
		{"one", "user:secret@host", []sp{{5, 11}}, "user:xxxxx@host"},
		{"whole text", "secret", []sp{{0, 6}}, "xxxxx"},
		{"at both ends", "abXXcdYY", []sp{{6, 8}, {0, 2}}, "xxxxxXXcdxxxxx"},
		{"unsorted", "a1b2c3", []sp{{5, 6}, {1, 2}, {3, 4}}, "axxxxxbxxxxxcxxxxx"},
		{"overlapping", "0123456789", []sp{{2, 5}, {4, 8}}, "01xxxxx89"},
		{"nested", "0123456789", []sp{{1, 9}, {3, 4}, {2, 8}}, "0xxxxx9"},
		{"same start", "0123456789", []sp{{2, 4}, {2, 7}}, "01xxxxx789"},
		{"adjacent", "0123456789", []sp{{2, 4}, {4, 6}}, "01xxxxxxxxxx6789"},
		{"empty span inserts", "alice:@h", []sp{{6, 6}}, "alice:xxxxx@h"},
		{"empty span inside another", "0123456789", []sp{{2, 6}, {4, 4}}, "01xxxxx6789"},
		{"empty span at the start of another", "0123456789", []sp{{2, 2}, {2, 6}}, "01xxxxx6789"},
		{"empty span at the end of another", "0123456789", []sp{{2, 6}, {6, 6}}, "01xxxxx6789"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans := slices.Clone(tt.spans)
			if got := redact.Spans(tt.text, spans); got != tt.want {
				t.Errorf("Spans(%q, %v) = %q, want %q", tt.text, tt.spans, got, tt.want)
			}
			if !slices.Equal(spans, tt.spans) {
				t.Errorf("Spans reordered its argument: %v, was %v", spans, tt.spans)
			}
		})
	}
}
