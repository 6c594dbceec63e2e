package connstring

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fuzzResolver answers every SRV look-up with one record in the host's
// domain, and every TXT look-up with none: deterministic, no DNS.
type fuzzResolver struct{}

func (fuzzResolver) LookupSRV(_ context.Context, _, _, name string) (string, []*net.SRV, error) {
	domain := name
	if strings.Count(name, ".") >= 2 {
		domain = name[strings.IndexByte(name, '.')+1:]
	}
	return "", []*net.SRV{{Target: "h1." + domain + ".", Port: 27017}}, nil
}

func (fuzzResolver) LookupTXT(context.Context, string) ([]string, error) { return nil, nil }

// fuzzOutcome is everything a parse shows: the error, or the warnings and
// renderings of the result.
type fuzzOutcome struct {
	err        string
	warnings   string
	renderings []string
}

func runFuzzParse(uri string, supportedOnly bool) (*parser, *ConnString, fuzzOutcome) {
	p := new(parser)
	cs, err := p.run(context.Background(), uri, fuzzResolver{}, supportedOnly)
	var o fuzzOutcome
	if err != nil {
		o.err = err.Error()
		return p, nil, o
	}
	o.warnings = strings.Join(cs.Warnings, "\n")
	js, _ := json.Marshal(cs)
	o.renderings = []string{cs.Redacted(), fmt.Sprintf("%v", cs), fmt.Sprintf("%+v", cs),
		fmt.Sprintf("%#v", cs), string(js)}
	return p, cs, o
}

// rotate changes every letter and digit of s to another one of the same
// class (hexadecimal digits stay hexadecimal), so that the parse of a
// connection string with s rotated in its password takes the same path:
// percent-encodings stay valid or invalid, and no delimiter appears or
// disappears.
func rotate(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case '0' <= c && c <= '9':
			b[i] = '0' + (c-'0'+1)%10
		case 'a' <= c && c <= 'f':
			b[i] = 'a' + (c-'a'+1)%6
		case 'A' <= c && c <= 'F':
			b[i] = 'A' + (c-'A'+1)%6
		case 'g' <= c && c <= 'z':
			b[i] = 'g' + (c-'g'+1)%20
		case 'G' <= c && c <= 'Z':
			b[i] = 'G' + (c-'G'+1)%20
		}
	}
	return string(b)
}

// FuzzParse checks that the parser never panics, and that it never shows a
// password:
//
//   - When the connection string has user information with a password (an
//     "@" in the host list, a colon before it), the password is rotated
//     (see rotate) and the connection string parsed again. Everything shown
//     (error, warnings, Redacted, %v, %+v, %#v, JSON) must be the same: had
//     any of it shown the password, or a piece of it, it would differ. The
//     check is exact, whatever the password, even one that also appears
//     elsewhere as an option value or in the messages' own words. It is
//     skipped only when a message withheld a value because it held a secret
//     (that value may be the password typed elsewhere, which does not rotate).
//   - When the host list has no "@" but a colon, and an "@" follows it,
//     everything from that colon to the last "@" may be a password with an
//     unescaped "/" or "?". That text (which holds a "/" or "?", which no
//     message of the package has) must not be shown, raw or decoded, and
//     neither may its pieces between the "/" and "?" (4 bytes or more),
//     unless they are words of the package's own messages or also appear
//     outside that text.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"mongodb://alice:secret@localhost:27017/admin?authSource=admin&maxPoolSize=5",
		"mongodb+srv://user:pass@cluster0.example.com/?retryWrites=true&w=majority",
		"mongodb://user:pa/ss@host/db",
		"mongodb://user:12345?appname=s3cr3t@host",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		p, cs, out := runFuzzParse(uri, false)
		if out.err == "" && (cs == nil || (len(cs.Hosts) == 0)) {
			t.Fatalf("parse(%q) succeeded without hosts: %+v", uri, cs)
		}
		if out.err == "" {
			for _, w := range cs.Warnings {
				if !strings.HasPrefix(w, "connstring: ") {
					t.Errorf("warning %q lacks the package prefix", w)
				}
			}
		} else if !strings.HasPrefix(out.err, "connstring: ") {
			t.Errorf("error %q lacks the package prefix", out.err)
		}
		_, pubCS, pubOut := runFuzzParse(uri, true)
		if pubOut.err == "" && out.err != "" {
			t.Fatalf("Parse(%q) succeeded (%v) where the specification-level parse failed: %s", uri, pubCS, out.err)
		}

		scheme, after, ok := strings.Cut(uri, "://")
		if !ok {
			return
		}
		hostEnd := strings.IndexAny(after, "/?")
		if hostEnd < 0 {
			hostEnd = len(after)
		}
		hostInfo := after[:hostEnd]
		start := len(scheme) + 3 // offset of after in uri

		if at := strings.LastIndexByte(hostInfo, '@'); at >= 0 {
			colon := strings.IndexByte(hostInfo[:at], ':')
			if colon < 0 {
				return
			}
			password := hostInfo[colon+1 : at]
			rotated := rotate(password)
			if rotated == password {
				return
			}
			uri2 := uri[:start+colon+1] + rotated + uri[start+at:]
			p2, _, out2 := runFuzzParse(uri2, false)
			if p.guardFired || p2.guardFired {
				return
			}
			if out.err != out2.err || out.warnings != out2.warnings ||
				strings.Join(out.renderings, "\x00") != strings.Join(out2.renderings, "\x00") {
				t.Fatalf("the output depends on the password:\n%q\n  err %q\n  warnings %q\n  shown %q\n%q\n  err %q\n  warnings %q\n  shown %q",
					uri, out.err, out.warnings, out.renderings, uri2, out2.err, out2.warnings, out2.renderings)
			}
			if out.err == "" {
				dec, _ := pctDecode(password)
				if !cs.PasswordSet || cs.Password != dec {
					t.Fatalf("parse(%q): password not the decoded %q", uri, password)
				}
			}
			return
		}

		lastAt := strings.LastIndexByte(after, '@')
		colon := strings.IndexByte(hostInfo, ':')
		if lastAt <= hostEnd || colon < 0 {
			return
		}
		region := after[colon+1 : lastAt]
		forbidden := []string{region}
		if dec, ok := pctDecode(region); ok {
			forbidden = append(forbidden, dec)
		}
		// The pieces between the "/" and "?" of the region, of 4 bytes or
		// more, must not show either, unless the words of the package's
		// messages have them, or the connection string has them outside the
		// region (a host name after the "@" is shown legitimately).
		outside := asciiLower(uri[:start+colon+1] + "\x00" + uri[start+lastAt:])
		var pieces []string
		for _, f := range forbidden {
			for _, piece := range strings.FieldsFunc(f, func(r rune) bool { return r == '/' || r == '?' }) {
				piece = asciiLower(piece)
				if len(piece) >= 4 && !strings.Contains(outside, piece) && !inVocabulary(t, piece) {
					pieces = append(pieces, piece)
				}
			}
		}
		shown := append([]string{out.err, out.warnings, pubOut.err, pubOut.warnings}, out.renderings...)
		shown = append(shown, pubOut.renderings...)
		for _, s := range shown {
			for _, secret := range forbidden {
				if strings.Contains(s, secret) {
					t.Fatalf("parse(%q) shows the possible password %q in %q", uri, secret, s)
				}
			}
			for _, piece := range pieces {
				if strings.Contains(asciiLower(s), piece) {
					t.Fatalf("parse(%q) shows %q, a piece of the possible password %q, in %q", uri, piece, region, s)
				}
			}
		}
	})
}

var (
	vocabularyOnce sync.Once
	vocabulary     string // the string literals of the package's non-test files, lower-cased
)

// inVocabulary reports whether s is a part of a string literal of the
// package's code, as the words of its messages are.
func inVocabulary(t *testing.T, s string) bool {
	vocabularyOnce.Do(func() {
		files, err := filepath.Glob("*.go")
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := goparser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						b.WriteString(asciiLower(v))
						b.WriteString("\x00")
					}
				}
				return true
			})
		}
		vocabulary = b.String()
	})
	return strings.Contains(vocabulary, s)
}
