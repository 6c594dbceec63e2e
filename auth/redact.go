package auth

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/internal/redact"
	"github.com/mongopool/mongopool/wire"
)

// redactedText stands for a secret in everything the package shows.
const redactedText = redact.Text

// publicProps are the mechanism properties whose values are not secrets.
// Any other property (AWS_SESSION_TOKEN, or a misspelled name) is shown
// redacted.
var publicProps = map[string]bool{
	"SERVICE_NAME": true, "CANONICALIZE_HOST_NAME": true, "SERVICE_REALM": true, "SERVICE_HOST": true,
	"ENVIRONMENT": true, "TOKEN_RESOURCE": true,
}

// redacted returns c with its secrets replaced by redactedText.
func (c Credential) redacted() Credential {
	if c.Password != "" {
		c.Password = redactedText
	}
	if c.Props != nil {
		props := make(map[string]string, len(c.Props))
		for k, v := range c.Props {
			if !publicProps[strings.ToUpper(k)] {
				v = redactedText
			}
			props[k] = v
		}
		c.Props = props
	}
	return c
}

// Format implements fmt.Formatter: every verb shows the credential as fmt
// would, with the password and the secret mechanism properties replaced by
// "xxxxx".
//
// A struct that embeds a Credential gets this method too, and so prints as
// the credential alone: give the credential a named field instead. A
// Credential in an unexported field is printed by fmt without its methods,
// password included: keep it in an exported field or in an Authenticator.
func (c Credential) Format(f fmt.State, verb rune) {
	// credential has Credential's fields and none of its methods.
	type credential Credential
	s := fmt.Sprintf(fmt.FormatString(f, verb), credential(c.redacted()))
	if verb == 'v' && f.Flag('#') {
		s = strings.Replace(s, "auth.credential{", "auth.Credential{", 1)
	}
	io.WriteString(f, s)
}

// String returns the credential as %v shows it, password redacted.
func (c Credential) String() string { return fmt.Sprintf("%v", c) }

// keyring is what an Authenticator must never show: the password, and the
// SCRAM clients that hold it and the keys derived from it.
type keyring struct {
	password string
	scrub    *scrubber

	mu      sync.Mutex
	clients map[string]*scram.Client // by mechanism, with their key caches
}

// Format implements fmt.Formatter: every verb shows the mechanism, the
// source and the user name, and "xxxxx" for a password.
func (a *Authenticator) Format(f fmt.State, verb rune) {
	if a == nil {
		io.WriteString(f, "<nil>")
		return
	}
	type authenticator struct {
		Mechanism, Source, Username, Password string
	}
	shown := authenticator{Mechanism: a.mech, Source: a.source, Username: a.username}
	if a.passwordSet {
		shown.Password = redactedText
	}
	s := fmt.Sprintf(fmt.FormatString(f, verb), shown)
	if verb == 'v' && f.Flag('#') {
		s = "&" + strings.Replace(s, "auth.authenticator{", "auth.Authenticator{", 1)
	}
	io.WriteString(f, s)
}

// String returns the authenticator as %v shows it, password redacted.
func (a *Authenticator) String() string { return fmt.Sprintf("%v", a) }

// LogValue makes log/slog log the mechanism, the source and the user name,
// and "xxxxx" for a password.
func (a *Authenticator) LogValue() slog.Value {
	if a == nil {
		return slog.StringValue("<nil>")
	}
	attrs := []slog.Attr{
		slog.String("mechanism", a.mech),
		slog.String("source", a.source),
		slog.String("username", a.username),
	}
	if a.passwordSet {
		attrs = append(attrs, slog.String("password", redactedText))
	}
	return slog.GroupValue(attrs...)
}

// scrubber finds the forms of a password in what a server sent, so that no
// error shows them: a server may echo what it received (the PLAIN payload,
// raw or encoded) or anything else. The forms are:
//
//   - replaced where they occur: the password, its SASLprep form, its
//     escaped forms (Go and JSON string literals, URL encodings), its
//     hexadecimal encoding, and the SCRAM-SHA-1 password digest (a password
//     equivalent);
//   - replaced with the whole run of base64 characters around them (so that
//     no edge character leaks bits of the password): the base64 encodings
//     (standard and URL alphabets) of the password, of the PLAIN payload,
//     and of the password at each of the 3 alignments it may have inside a
//     longer encoded text (the characters that depend on the password
//     alone).
//
// Hexadecimal forms shorter than minHex and aligned base64 forms shorter
// than minBase64Core are left out: they would match ordinary text. The
// whole encodings of the password and of the PLAIN payload cover a short
// password, except a password of 1 or 2 bytes inside a longer encoded text
// at an unaligned position.
//
// The SCRAM client proof, which the client sends, is not a secret. The keys
// derived from the password never leave the SCRAM library.
type scrubber struct {
	exact  []string
	base64 []string
}

const (
	minHex        = 6
	minBase64Core = 3
)

// newScrubber returns the scrubber of a password, nil for an empty one.
func newScrubber(username, password string) *scrubber {
	if password == "" {
		return nil
	}
	s := &scrubber{}
	seen := map[string]bool{"": true}
	add := func(list *[]string, form string, min int) {
		if len(form) >= min && !seen[form] {
			seen[form] = true
			*list = append(*list, form)
		}
	}
	inner := func(quoted string) string { return strings.TrimSuffix(strings.TrimPrefix(quoted, `"`), `"`) }
	js, _ := json.Marshal(password)
	for _, f := range []string{password, inner(strconv.Quote(password)), inner(strconv.QuoteToASCII(password)),
		inner(string(js)), url.QueryEscape(password), url.PathEscape(password)} {
		add(&s.exact, f, 1)
	}
	if prepped, err := saslPrep(password); err == nil {
		add(&s.exact, prepped, 1)
	}
	h := hex.EncodeToString([]byte(password))
	add(&s.exact, h, minHex)
	add(&s.exact, strings.ToUpper(h), minHex)
	d := mongoPasswordDigest(username, password)
	add(&s.exact, d, 1)
	add(&s.exact, strings.ToUpper(d), 1)

	payload := plainPayload(username, password)
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k := 0; k < 3; k++ {
			e := enc.EncodeToString(append(make([]byte, k), password...))
			// The characters of e that hold bits of the password only.
			add(&s.base64, e[(8*k+5)/6:8*(k+len(password))/6], minBase64Core)
		}
		add(&s.base64, enc.EncodeToString([]byte(password)), 1)
		add(&s.base64, enc.EncodeToString(payload), 1)
	}
	add(&s.exact, hex.EncodeToString(payload), 1)
	return s
}

// isBase64Char reports whether b may be part of a base64 text, in either
// alphabet, padding included.
func isBase64Char(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' ||
		b == '+' || b == '/' || b == '-' || b == '_' || b == '='
}

// holds reports whether b holds a form of the password.
func (s *scrubber) holds(b []byte) bool {
	if s == nil {
		return false
	}
	str := string(b)
	for _, list := range [][]string{s.exact, s.base64} {
		for _, f := range list {
			if strings.Contains(str, f) {
				return true
			}
		}
	}
	return false
}

// scrub returns text with every form of the password replaced by
// redactedText, and whether it replaced any.
func (s *scrubber) scrub(text string) (string, bool) {
	if s == nil {
		return text, false
	}
	var spans []redact.Span
	find := func(f string, whole bool) {
		for from := 0; from < len(text); {
			i := strings.Index(text[from:], f)
			if i < 0 {
				return
			}
			start, end := from+i, from+i+len(f)
			from = start + 1
			if whole {
				for start > 0 && isBase64Char(text[start-1]) {
					start--
				}
				for end < len(text) && isBase64Char(text[end]) {
					end++
				}
				// The run is covered: go on after it, so that a long run
				// with many matches is walked once.
				from = end
			}
			spans = append(spans, redact.Span{Start: start, End: end})
		}
	}
	for _, f := range s.exact {
		find(f, false)
	}
	for _, f := range s.base64 {
		find(f, true)
	}
	if len(spans) == 0 {
		return text, false
	}
	return redact.Spans(text, spans), true
}

// error returns err, or, when anything it shows (its text, or the server's
// reply in a *wire.CommandError it wraps) holds a form of the password, an
// equivalent error that shows "xxxxx" in its place. errors.Is still reaches
// what err wraps, and errors.As reaches a copy of the *wire.CommandError
// whose message, code name, labels and reply are scrubbed.
func (s *scrubber) error(err error) error {
	if err == nil || s == nil {
		return err
	}
	var ce, clean *wire.CommandError
	if errors.As(err, &ce) && s.commandErrorHolds(ce) {
		clean = s.commandError(ce)
	}
	text, dirty := s.scrub(err.Error())
	if !dirty && clean == nil {
		return err
	}
	return &redactedError{text: text, ce: clean, err: err}
}

func (s *scrubber) commandErrorHolds(ce *wire.CommandError) bool {
	if s.holds([]byte(ce.Message)) || s.holds([]byte(ce.CodeName)) || s.holds(ce.Raw) {
		return true
	}
	for _, l := range ce.Labels {
		if s.holds([]byte(l)) {
			return true
		}
	}
	return false
}

// commandError returns a scrubbed copy of ce. It copies the fields it
// knows, scrubbed, and no other: a field added to wire.CommandError must be
// added here.
func (s *scrubber) commandError(ce *wire.CommandError) *wire.CommandError {
	c := &wire.CommandError{Code: ce.Code}
	c.Message, _ = s.scrub(ce.Message)
	c.CodeName, _ = s.scrub(ce.CodeName)
	for _, l := range ce.Labels {
		l, _ = s.scrub(l)
		c.Labels = append(c.Labels, l)
	}
	c.Raw = s.document(ce.Raw, 0)
	return c
}

// maxScrubDepth bounds the nesting that document rebuilds; deeper
// documents that hold a secret are replaced whole.
const maxScrubDepth = 32

// document returns doc with every element that holds a form of the
// password scrubbed: strings (and keys) scrubbed, documents and arrays
// rebuilt, other values replaced by the string "xxxxx". Elements without a
// secret are copied as they are.
func (s *scrubber) document(doc bson.Raw, depth int) bson.Raw {
	elems, err := doc.Elements()
	idx, out := bsoncore.AppendDocumentStart(nil)
	if err != nil {
		// Unreadable: keep nothing of it.
		out = bsoncore.AppendStringElement(out, "unreadable", redactedText)
		out, _ = bsoncore.AppendDocumentEnd(out, idx)
		return out
	}
	for _, e := range elems {
		if !s.holds(e) {
			out = append(out, e...)
			continue
		}
		key, _ := s.scrub(e.Key())
		v := e.Value()
		switch {
		case v.Type == bson.TypeString:
			str, _ := s.scrub(v.StringValue())
			out = bsoncore.AppendStringElement(out, key, str)
		case v.Type == bson.TypeEmbeddedDocument && depth < maxScrubDepth:
			out = bsoncore.AppendDocumentElement(out, key, s.document(v.Document(), depth+1))
		case v.Type == bson.TypeArray && depth < maxScrubDepth:
			out = bsoncore.AppendArrayElement(out, key, s.document(bson.Raw(v.Array()), depth+1))
		default:
			out = bsoncore.AppendStringElement(out, key, redactedText)
		}
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// redactedError stands for an error whose text held a form of the password.
type redactedError struct {
	text string
	ce   *wire.CommandError // the scrubbed copy, or nil when the original is clean
	err  error              // the original, for errors.Is and errors.As
}

func (e *redactedError) Error() string { return e.text }

// Unwrap returns the scrubbed *wire.CommandError, if any.
func (e *redactedError) Unwrap() error {
	if e.ce == nil {
		return nil
	}
	return e.ce
}

// Is reports whether the original error matches target, so that
// errors.Is(err, io.EOF) and the like keep working.
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }

// As finds target in the scrubbed *wire.CommandError first, so that the
// original one (of the same type) is never found; other targets in the
// original error.
func (e *redactedError) As(target any) bool {
	if e.ce != nil && errors.As(e.ce, target) {
		return true
	}
	return errors.As(e.err, target)
}
