package mongotest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// This file compiles MongoDB's regular expressions. mongod matches them
// with PCRE2 in UTF mode, without UCP (so \d, \w, \s and \b are ASCII
// only: SERVER-23881), with the options i, m, s, x and u
// (https://www.mongodb.com/docs/manual/reference/operator/query/regex/).
// This package matches them with regexp2, a backtracking engine of .NET's
// syntax: translatePCRE rewrites what the two read differently ($ and ^ at
// a final newline, \d \w \s \b \h \v, POSIX classes, \x{...}, Python-style
// names, a [ within a class), and refuses, with BadValue, the PCRE features
// regexp2 lacks (recursion, verbs, \K, branch reset) rather than match
// differently. Named groups keep their PCRE numbers
// (OptionMaintainCaptureOrder).
//
// A backtracking match may take exponential time: each match is bounded
// by regexMatchTimeout, and a match that passes it fails the command.

// regexMatchTimeout bounds one match of a regular expression against one
// value.
const regexMatchTimeout = time.Second

// maxRegexLength is the longest pattern mongod takes
// (RegexMatchExpression::kMaxPatternSize).
const maxRegexLength = 32764

// The codes of mongod's refusals of a regular expression (Location codes
// of src/mongo/db/matcher/expression_leaf.cpp and pcre_util.cpp).
const (
	codeRegexInvalid     = 51091 // "Regular expression is invalid: ..."
	codeRegexInvalidUTF8 = 5108300
)

// compileRegex compiles a MongoDB regular expression and its options, with
// mongod's refusals: a flag other than i, m, s, x, u is 51108 "invalid flag
// in regex options" (pcre_util::flagsToOptions); a pattern PCRE would not
// compile is 51091 "Regular expression is invalid".
func compileRegex(pattern, options string) (*regexp2.Regexp, error) {
	switch {
	case len(pattern) > maxRegexLength:
		return nil, errorf(codeBadValue, "Regular expression is too long")
	case strings.ContainsRune(pattern, 0):
		return nil, errorf(codeBadValue, "Regular expression cannot contain an embedded null byte")
	case strings.ContainsRune(options, 0):
		return nil, errorf(codeBadValue, "Regular expression options string cannot contain an embedded null byte")
	case !utf8.ValidString(pattern):
		return nil, errorf(codeRegexInvalidUTF8, "Regular expression is invalid UTF-8")
	}
	opts := regexp2.None
	for _, o := range options {
		switch o {
		case 'i':
			opts |= regexp2.IgnoreCase
		case 'm':
			opts |= regexp2.Multiline
		case 's':
			opts |= regexp2.Singleline
		case 'x':
			opts |= regexp2.IgnorePatternWhitespace
		case 'u': // UTF is always on
		default:
			return nil, errorf(codeBadRegexOption, "invalid flag in regex options: %c", o)
		}
	}
	translated, err := translatePCRE(pattern, strings.ContainsRune(options, 'x'))
	if err != nil {
		return nil, err
	}
	re, err := regexp2.Compile(translated, opts, regexp2.OptionMaintainCaptureOrder())
	if err != nil {
		return nil, errorf(codeRegexInvalid, "Regular expression is invalid: %v", err)
	}
	re.MatchTimeout = regexMatchTimeout
	return re, nil
}

// regexFailure is the failure of a command whose regular expression could
// not finish matching a value.
func regexFailure(pattern, options string, err error) *cmdError {
	why := fmt.Sprintf("it took longer than %v", regexMatchTimeout)
	if errors.Is(err, regexp2.ErrBacktrackingStackLimit) {
		why = "it backtracked past regexp2's limit"
	} else if !strings.Contains(err.Error(), "timeout") {
		why = err.Error()
	}
	return errorf(codeBadValue, "mongotest stopped matching the regular expression /%s/%s: %s (a pattern that backtracks this much would also be slow on mongod)", pattern, options, why)
}

// The ASCII classes of PCRE without UCP, as regexp2 classes. Those with
// letters are made case-sensitive: \w is a character type in PCRE, which
// the i option does not widen (regexp2 would fold the Kelvin sign into k).
const (
	asciiDigit    = `[0-9]`
	asciiNotDigit = `[^0-9]`
	asciiWord     = `(?-i:[a-zA-Z0-9_])`
	asciiNotWord  = `(?-i:[^a-zA-Z0-9_])`
	asciiSpace    = `[\t\n\x0B\f\r ]`
	asciiNotSpace = `[^\t\n\x0B\f\r ]`
	wordBoundary  = `(?-i:(?<=[a-zA-Z0-9_])(?![a-zA-Z0-9_])|(?<![a-zA-Z0-9_])(?=[a-zA-Z0-9_]))`
	notBoundary   = `(?-i:(?<=[a-zA-Z0-9_])(?=[a-zA-Z0-9_])|(?<![a-zA-Z0-9_])(?![a-zA-Z0-9_]))`
	// PCRE's ^ does not match after a newline that ends the subject, even
	// in multiline mode, where regexp2's does.
	circumflex = `(?:^(?!(?<=\n)\z))`
)

// runeRange is a range of code points, for the classes of PCRE escapes.
type runeRange struct{ lo, hi rune }

// The sets of PCRE's escapes, as ranges, for use within a class.
var (
	digitSet  = []runeRange{{'0', '9'}}
	wordSet   = []runeRange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	spaceSet  = []runeRange{{'\t', '\r'}, {' ', ' '}}
	vspaceSet = []runeRange{{'\n', '\r'}, {0x85, 0x85}, {0x2028, 0x2029}}
	hspaceSet = []runeRange{{'\t', '\t'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x180E, 0x180E},
		{0x2000, 0x200A}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}}
)

// posixClasses are PCRE's POSIX classes, ASCII only without UCP.
var posixClasses = map[string][]runeRange{
	"alpha":  {{'A', 'Z'}, {'a', 'z'}},
	"digit":  digitSet,
	"alnum":  {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}},
	"upper":  {{'A', 'Z'}},
	"lower":  {{'a', 'z'}},
	"space":  spaceSet,
	"blank":  {{'\t', '\t'}, {' ', ' '}},
	"punct":  {{'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}},
	"xdigit": {{'0', '9'}, {'A', 'F'}, {'a', 'f'}},
	"word":   wordSet,
	"cntrl":  {{0, 0x1F}, {0x7F, 0x7F}},
	"graph":  {{'!', '~'}},
	"print":  {{' ', '~'}},
	"ascii":  {{0, 0x7F}},
}

// classItems writes the ranges as the items of a regexp2 class; negated,
// their complement.
func classItems(set []runeRange, negated bool) string {
	if negated {
		var out []runeRange
		next := rune(0)
		for _, r := range set {
			if r.lo > next {
				out = append(out, runeRange{next, r.lo - 1})
			}
			next = r.hi + 1
		}
		if next <= unicode.MaxRune {
			out = append(out, runeRange{next, unicode.MaxRune})
		}
		set = out
	}
	var sb strings.Builder
	for _, r := range set {
		sb.WriteString(runeEscape(r.lo))
		if r.hi != r.lo {
			sb.WriteString("-" + runeEscape(r.hi))
		}
	}
	return sb.String()
}

// runeEscape writes the code point r so that regexp2 reads it as a
// literal, in a class or out of one.
func runeEscape(r rune) string {
	if r <= 0xFFFF {
		return fmt.Sprintf(`\u%04X`, r)
	}
	return string(r) // no escape reaches past U+FFFF; the rune itself is no metacharacter
}

// notImplemented is the refusal of a PCRE feature this package lacks.
func notImplemented(what string) *cmdError {
	return errorf(codeBadValue, "mongotest does not implement %s in regular expressions", what)
}

// invalidRegex is mongod's refusal of a pattern PCRE does not compile.
func invalidRegex(why string) *cmdError {
	return errorf(codeRegexInvalid, "Regular expression is invalid: %s", why)
}

// pcreTranslator rewrites one PCRE pattern for regexp2.
type pcreTranslator struct {
	in  []rune
	i   int
	out strings.Builder
	// extended holds the x option of each open group, the innermost
	// last: in x mode, # starts a comment to the end of the line.
	extended []bool
}

// translatePCRE rewrites the PCRE pattern for regexp2 (see the top of this
// file); extended is the x option.
func translatePCRE(pattern string, extended bool) (string, error) {
	t := &pcreTranslator{in: []rune(pattern), extended: []bool{extended}}
	for t.i < len(t.in) {
		if err := t.step(); err != nil {
			return "", err
		}
	}
	return t.out.String(), nil
}

func (t *pcreTranslator) peek(k int) rune {
	if t.i+k < len(t.in) {
		return t.in[t.i+k]
	}
	return -1
}

func (t *pcreTranslator) hasPrefix(s string) bool {
	rs := []rune(s)
	if t.i+len(rs) > len(t.in) {
		return false
	}
	for k, r := range rs {
		if t.in[t.i+k] != r {
			return false
		}
	}
	return true
}

// step translates the next item outside a class.
func (t *pcreTranslator) step() error {
	c := t.in[t.i]
	switch {
	case c == '\\':
		return t.escape()
	case c == '[':
		return t.class()
	case c == '(':
		return t.group()
	case c == ')':
		if len(t.extended) > 1 {
			t.extended = t.extended[:len(t.extended)-1]
		}
	case c == '^':
		t.out.WriteString(circumflex)
		t.i++
		return nil
	case c == '#' && t.extended[len(t.extended)-1]:
		// A comment: copied as it is, for regexp2 to skip.
		for t.i < len(t.in) && t.in[t.i] != '\n' {
			t.out.WriteRune(t.in[t.i])
			t.i++
		}
		return nil
	}
	t.out.WriteRune(c)
	t.i++
	return nil
}

// escape translates an escape outside a class.
func (t *pcreTranslator) escape() error {
	c := t.peek(1)
	if c < 0 {
		return invalidRegex(`\ at end of pattern`)
	}
	t.i += 2
	switch c {
	case 'd':
		t.out.WriteString(asciiDigit)
	case 'D':
		t.out.WriteString(asciiNotDigit)
	case 'w':
		t.out.WriteString(asciiWord)
	case 'W':
		t.out.WriteString(asciiNotWord)
	case 's':
		t.out.WriteString(asciiSpace)
	case 'S':
		t.out.WriteString(asciiNotSpace)
	case 'b':
		t.out.WriteString(wordBoundary)
	case 'B':
		t.out.WriteString(notBoundary)
	case 'v', 'V':
		t.out.WriteString("[" + classItems(vspaceSet, c == 'V') + "]")
	case 'h', 'H':
		t.out.WriteString("[" + classItems(hspaceSet, c == 'H') + "]")
	case 'N':
		if t.peek(0) == '{' {
			return notImplemented(`\N{...}`)
		}
		t.out.WriteString(`[^\n]`)
	case 'K':
		return notImplemented(`\K`)
	case 'C':
		return notImplemented(`\C`)
	case 'Q':
		return t.quoted()
	case 'E':
		// A \E without \Q is ignored.
	case 'x', 'o':
		r, err := t.codePoint(c)
		if err != nil {
			return err
		}
		t.out.WriteString(runeEscape(r))
	case 'g':
		return t.backref()
	case 'k':
		if t.peek(0) == '{' {
			name, err := t.until('}')
			if err != nil {
				return err
			}
			t.out.WriteString(`\k<` + name + `>`)
			return nil
		}
		t.out.WriteString(`\k`)
	case 'p', 'P', 'R', 'X', 'A', 'z', 'Z', 'G', 'a', 'e', 'f', 'n', 'r', 't':
		t.out.WriteString(`\` + string(c))
	case 'c':
		x := t.peek(0)
		if x < 0 || x > 127 {
			return invalidRegex(`\c must be followed by a printable ASCII character`)
		}
		t.out.WriteString(`\c` + string(x))
		t.i++
	case '0':
		t.out.WriteString(runeEscape(t.octal(2)))
	default:
		switch {
		case c >= '1' && c <= '9':
			// A backreference (or an octal escape, read alike).
			t.out.WriteString(`\` + string(c))
		case c < 128 && (unicode.IsLetter(c) || unicode.IsDigit(c)):
			return invalidRegex(fmt.Sprintf(`unrecognized character follows \ (\%c)`, c))
		default:
			t.literal(c)
		}
	}
	return nil
}

// literal writes the character c, which an escape made literal.
func (t *pcreTranslator) literal(c rune) {
	switch {
	case c == '_' || c >= 128:
		t.out.WriteRune(c)
	case c < ' ' || c == 0x7F:
		t.out.WriteString(runeEscape(c))
	default:
		t.out.WriteString(`\` + string(c))
	}
}

// quoted copies \Q...\E (or to the end) as literals.
func (t *pcreTranslator) quoted() error {
	for t.i < len(t.in) {
		if t.hasPrefix(`\E`) {
			t.i += 2
			return nil
		}
		t.literal(t.in[t.i])
		t.i++
	}
	return nil
}

// until reads a name between the current { or < and end, past both.
func (t *pcreTranslator) until(end rune) (string, error) {
	start := t.i + 1
	for j := start; j < len(t.in); j++ {
		if t.in[j] == end {
			t.i = j + 1
			return string(t.in[start:j]), nil
		}
	}
	return "", invalidRegex("missing terminator " + string(end))
}

// codePoint reads the code point of \x (hh, or {hhh}) or \o{ooo}, past
// the escape letter.
func (t *pcreTranslator) codePoint(kind rune) (rune, error) {
	base := 16
	if kind == 'o' {
		base = 8
	}
	var digits string
	if t.peek(0) == '{' {
		s, err := t.until('}')
		if err != nil {
			return 0, err
		}
		digits = s
	} else if kind == 'o' {
		return 0, invalidRegex(`{ is required after \o`)
	} else {
		// Up to two hex digits; none is NUL.
		for len(digits) < 2 && strings.ContainsRune("0123456789abcdefABCDEF", t.peek(0)) && t.peek(0) >= 0 {
			digits += string(t.peek(0))
			t.i++
		}
		if digits == "" {
			return 0, nil
		}
	}
	n, err := strconv.ParseUint(digits, base, 32)
	if err != nil || n > unicode.MaxRune || n >= 0xD800 && n <= 0xDFFF {
		return 0, invalidRegex("character code point value in \\x{} or \\o{} is too large or invalid")
	}
	return rune(n), nil
}

// octal reads up to n more octal digits after a \0.
func (t *pcreTranslator) octal(n int) rune {
	var r rune
	for k := 0; k < n && t.peek(0) >= '0' && t.peek(0) <= '7'; k++ {
		r = r*8 + t.peek(0) - '0'
		t.i++
	}
	return r
}

// backref translates \g: \g1, \g{1}, \g{name}; relative references
// (\g{-1}) and subroutine calls (\g<...>) are refused.
func (t *pcreTranslator) backref() error {
	var ref string
	switch c := t.peek(0); {
	case c == '{':
		s, err := t.until('}')
		if err != nil {
			return err
		}
		ref = s
	case c >= '0' && c <= '9':
		for t.peek(0) >= '0' && t.peek(0) <= '9' {
			ref += string(t.peek(0))
			t.i++
		}
	case c == '<' || c == '\'':
		return notImplemented("subroutine calls (\\g<...>)")
	default:
		return invalidRegex(`a numbered reference must not be zero, or \g must be followed by a number or a name`)
	}
	if strings.HasPrefix(ref, "-") || strings.HasPrefix(ref, "+") {
		return notImplemented("relative backreferences (\\g{-n})")
	}
	t.out.WriteString(`\k<` + ref + `>`)
	return nil
}

// group translates the start of a group.
func (t *pcreTranslator) group() error {
	x := t.extended[len(t.extended)-1]
	switch {
	case t.hasPrefix("(*"):
		return notImplemented("PCRE verbs and start options such as (*UCP)")
	case t.hasPrefix("(?#"):
		// A comment, copied to its end.
		for t.i < len(t.in) && t.in[t.i] != ')' {
			t.out.WriteRune(t.in[t.i])
			t.i++
		}
		if t.i == len(t.in) {
			return invalidRegex("missing ) after (?# comment")
		}
		t.out.WriteRune(')')
		t.i++
		return nil
	case t.hasPrefix("(?P<"):
		t.out.WriteString("(?<")
		t.i += 4
	case t.hasPrefix("(?P="):
		t.i += 3
		name, err := t.until(')')
		if err != nil {
			return err
		}
		t.out.WriteString(`\k<` + name + `>`)
		return nil
	case t.hasPrefix("(?P>"), t.hasPrefix("(?&"), t.hasPrefix("(?R"), t.hasPrefix("(?+"),
		t.hasPrefix("(?-") && t.peek(3) >= '0' && t.peek(3) <= '9',
		t.hasPrefix("(?") && t.peek(2) >= '0' && t.peek(2) <= '9':
		return notImplemented("recursion and subroutine calls")
	case t.hasPrefix("(?|"):
		return notImplemented("branch reset groups (?|...)")
	case t.hasPrefix("(?(R"), t.hasPrefix("(?(DEFINE"):
		return notImplemented("recursion conditions")
	case t.hasPrefix("(?<=") || t.hasPrefix("(?<!") || t.hasPrefix("(?=") || t.hasPrefix("(?!") ||
		t.hasPrefix("(?>") || t.hasPrefix("(?:") || t.hasPrefix("(?<") || t.hasPrefix("(?'") || t.hasPrefix("(?("):
		t.out.WriteString("(?")
		t.i += 2
	case t.hasPrefix("(?"):
		return t.flags()
	default:
		t.out.WriteRune('(')
		t.i++
	}
	t.extended = append(t.extended, x)
	return nil
}

// flags translates (?flags) and (?flags:...), keeping track of x.
func (t *pcreTranslator) flags() error {
	start := t.i
	t.i += 2
	on := true
	x := t.extended[len(t.extended)-1]
	for t.i < len(t.in) {
		c := t.in[t.i]
		switch c {
		case 'i', 'm', 's', 'n':
		case 'x':
			if t.peek(1) == 'x' {
				return notImplemented("the option xx")
			}
			x = on
		case '-':
			on = false
		case ')', ':':
			t.out.WriteString(string(t.in[start : t.i+1]))
			t.i++
			if c == ')' {
				// The options hold to the end of the enclosing group.
				t.extended[len(t.extended)-1] = x
			} else {
				t.extended = append(t.extended, x)
			}
			return nil
		case '^', 'J', 'U', 'X', 'a', 'r':
			return notImplemented(fmt.Sprintf("the inline option %c", c))
		default:
			return invalidRegex(fmt.Sprintf("unrecognized character after (? or (?- (%c)", c))
		}
		t.i++
	}
	return invalidRegex("missing closing parenthesis")
}

// class translates a character class, from its [ to its ].
func (t *pcreTranslator) class() error {
	t.out.WriteRune('[')
	t.i++
	if t.peek(0) == '^' {
		t.out.WriteRune('^')
		t.i++
	}
	first := true
	for t.i < len(t.in) {
		c := t.in[t.i]
		switch {
		case c == ']' && !first:
			t.out.WriteRune(']')
			t.i++
			return nil
		case c == ']':
			// A ] first in a class is a literal.
			t.out.WriteString(`\]`)
			t.i++
		case c == '[' && (t.peek(1) == ':' || t.peek(1) == '.' || t.peek(1) == '='):
			if err := t.posixClass(); err != nil {
				return err
			}
		case c == '[':
			// A literal in PCRE; regexp2 would read -[ as a subtraction.
			t.out.WriteString(`\[`)
			t.i++
		case c == '\\':
			if err := t.classEscape(); err != nil {
				return err
			}
		default:
			t.out.WriteRune(c)
			t.i++
		}
		first = false
	}
	return invalidRegex("missing terminating ] for character class")
}

// posixClass translates [:name:] or [:^name:] within a class.
func (t *pcreTranslator) posixClass() error {
	kind := t.peek(1)
	end := -1
	for j := t.i + 2; j+1 < len(t.in); j++ {
		if t.in[j] == kind && t.in[j+1] == ']' {
			end = j
			break
		}
	}
	if end < 0 {
		// Not a POSIX class after all: a literal [.
		t.out.WriteString(`\[`)
		t.i++
		return nil
	}
	if kind != ':' {
		return invalidRegex("POSIX collating elements are not supported")
	}
	name := string(t.in[t.i+2 : end])
	negated := strings.HasPrefix(name, "^")
	set, ok := posixClasses[strings.TrimPrefix(name, "^")]
	if !ok {
		return invalidRegex("unknown POSIX class name")
	}
	t.out.WriteString(classItems(set, negated))
	t.i = end + 2
	return nil
}

// classEscape translates an escape within a class.
func (t *pcreTranslator) classEscape() error {
	c := t.peek(1)
	if c < 0 {
		return invalidRegex(`\ at end of pattern`)
	}
	t.i += 2
	var set []runeRange
	switch c {
	case 'd', 'D':
		set = digitSet
	case 'w', 'W':
		set = wordSet
	case 's', 'S':
		set = spaceSet
	case 'v', 'V':
		set = vspaceSet
	case 'h', 'H':
		set = hspaceSet
	}
	if set != nil {
		t.out.WriteString(classItems(set, unicode.IsUpper(c)))
		return nil
	}
	switch c {
	case 'b':
		t.out.WriteString(`\b`) // backspace, as in PCRE
	case 'x', 'o':
		r, err := t.codePoint(c)
		if err != nil {
			return err
		}
		t.out.WriteString(runeEscape(r))
	case 'Q':
		return t.quoted()
	case 'E':
	case 'p', 'P', 'a', 'e', 'f', 'n', 'r', 't':
		t.out.WriteString(`\` + string(c))
	case 'c':
		x := t.peek(0)
		if x < 0 || x > 127 {
			return invalidRegex(`\c must be followed by a printable ASCII character`)
		}
		t.out.WriteString(`\c` + string(x))
		t.i++
	default:
		switch {
		case c >= '0' && c <= '7':
			// An octal escape: in a class, never a backreference.
			t.i--
			t.out.WriteString(runeEscape(t.octal(3)))
		case c < 128 && (unicode.IsLetter(c) || unicode.IsDigit(c)):
			return invalidRegex(fmt.Sprintf(`escape sequence is invalid in character class (\%c)`, c))
		default:
			t.literal(c)
		}
	}
	return nil
}
