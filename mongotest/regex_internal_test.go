package mongotest

import "testing"

// TestTranslatePCRE checks patterns whose PCRE reading differs from
// regexp2's own, against strings, after translation. The PCRE behaviours
// are those of the pcre2pattern manual
// (https://www.pcre.org/current/doc/html/pcre2pattern.html: circumflex in
// multiline mode, \h \v \N, octal escapes, POSIX classes), in UTF mode
// without UCP, as mongod compiles patterns (SERVER-23881: \w and \b are
// ASCII only).
func TestTranslatePCRE(t *testing.T) {
	for _, tc := range []struct {
		pattern, options, s string
		want                bool
	}{
		{"a # [ not a class\n b", "x", "ab", true},
		{"(?x) a b # ]\n", "", "ab", true},
		{`a\ b`, "x", "a b", true},
		{`\Q[\E`, "", "[", true},
		{`[\d-z]`, "", "-", true},
		{`\x41\101`, "", "AA", true}, // without 101 groups, \101 is the octal A in PCRE
		{`^$`, "m", "a\n", false},    // PCRE's ^ does not match after a final newline
		{`^$`, "m", "a\n\n", true},
		{`\w`, "i", "\u212a", false}, // the Kelvin sign is no ASCII word character
		{`[[:digit:]]`, "", "٣", false},
		{`\d`, "", "٣", false},
		{`\s`, "", "\u00a0", false},
		{`\h`, "", "\u00a0", true},
		{`\v`, "", "\n", true},
		{`\N`, "", "\n", false},
		{`(?<n>a)(b)\2`, "", "abb", true}, // groups numbered in order, named or not
		{`(?<n>a)(b)\1`, "", "aba", true},
	} {
		re, err := compileRegex(tc.pattern, tc.options)
		if err != nil {
			t.Errorf("/%s/%s: %v", tc.pattern, tc.options, err)
			continue
		}
		if got, err := re.MatchString(tc.s); got != tc.want || err != nil {
			tr, _ := translatePCRE(tc.pattern, false)
			t.Errorf("/%s/%s (as %s) on %q = %v, %v; want %v", tc.pattern, tc.options, tr, tc.s, got, err, tc.want)
		}
	}
}
