package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// echoPassword is the password of the redaction tests. Its quote and
// backslash make its escaped forms differ from it.
const echoPassword = `Pw"d\S3cr3t-Value!`

// passwordForms returns what must never be shown of a password: the
// password itself and its escaped forms (whose every 6-byte window is
// checked), and its hexadecimal and base64 encodings (checked whole; for
// base64, the characters that depend on the password alone, whatever its
// alignment in the encoded text).
func passwordForms(pw string) (windows, whole []string) {
	js, _ := json.Marshal(pw)
	for _, f := range []string{pw, strconv.Quote(pw), strconv.QuoteToASCII(pw), string(js)} {
		f = strings.Trim(f, `"`)
		n := min(6, len(f))
		for i := 0; i+n <= len(f); i++ {
			windows = append(windows, f[i:i+n])
		}
	}
	// The PLAIN payload of the tests' user, encoded whole.
	payload := []byte("\x00alice\x00" + pw)
	whole = append(whole, base64.RawStdEncoding.EncodeToString(payload), base64.RawURLEncoding.EncodeToString(payload))
	whole = append(whole, hex.EncodeToString([]byte(pw)), strings.ToUpper(hex.EncodeToString([]byte(pw))))
	for k := 0; k < 3; k++ {
		enc := base64.RawStdEncoding.EncodeToString(append(make([]byte, k), pw...))
		core := enc[(8*k+5)/6 : 8*(k+len(pw))/6]
		if len(core) >= 3 {
			whole = append(whole, core, strings.NewReplacer("+", "-", "/", "_").Replace(core))
		}
	}
	return windows, whole
}

// showsPassword returns the form of pw that s shows, or "".
func showsPassword(s, pw string) string {
	windows, whole := passwordForms(pw)
	// The edges of a base64 text that holds pw: they hold bits of it too.
	for k := range 3 {
		enc := base64.StdEncoding.EncodeToString(append([]byte("xx")[:k], pw...))
		whole = append(whole, enc[:4], enc[len(enc)-4:])
	}
	for _, f := range append(windows, whole...) {
		if strings.Contains(s, f) {
			return f
		}
	}
	return ""
}

// renderValue returns every way v may be shown: fmt's verbs, in a struct
// that embeds it and in one that has it as a field, log/slog's text and JSON
// handlers, and encoding/json.
func renderValue(v any) map[string]string {
	out := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%T"} {
		out[verb] = fmt.Sprintf(verb, v)
		out["field "+verb] = fmt.Sprintf(verb, struct {
			Name string
			V    any
			L    []any
		}{"n", v, []any{v}})
	}
	out["Sprint"] = fmt.Sprint(v)
	out["Errorf %v"] = fmt.Errorf("wrapped: %v", v).Error()
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("msg", "v", v, slog.Any("any", v), slog.Group("g", "v", v))
	slog.New(slog.NewJSONHandler(&js, nil)).Info("msg", "v", v, slog.Any("any", v), slog.Group("g", "v", v))
	out["slog text"] = text.String()
	out["slog json"] = js.String()
	data, err := json.Marshal(v)
	out["json"] = string(data) + fmt.Sprint(err)
	return out
}

// embedsCredential is a configuration struct of a user of the package.
type embedsCredential struct {
	Host string
	Credential
	Cred  Credential
	PCred *Credential
}

// TestCredentialNeverShowsPassword: a Credential, an Authenticator and the
// structs that hold them are shown without the password, by every verb of
// fmt, log/slog and encoding/json.
func TestCredentialNeverShowsPassword(t *testing.T) {
	c := Credential{Username: "alice", Password: echoPassword, PasswordSet: true, Mechanism: SCRAMSHA256, Source: "admin",
		Props: map[string]string{"AWS_SESSION_TOKEN": "T0ken-" + echoPassword}}
	a, err := New(Credential{Username: "alice", Password: echoPassword, PasswordSet: true})
	if err != nil {
		t.Fatal(err)
	}
	// Derive and cache the keys, as a connection does.
	if err := a.Authenticate(context.Background(), newServer(t), Hello{}); err == nil {
		t.Fatal("authenticated with a password the server does not know")
	}
	spec, err := a.Speculate()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"Credential":  c,
		"*Credential": &c,
		"embedded":    embedsCredential{Host: "h", Credential: c, Cred: c, PCred: &c},
		"*embedded":   &embedsCredential{Host: "h", Credential: c, Cred: c, PCred: &c},
		"Authenticator": func() any {
			type holder struct{ A *Authenticator }
			return holder{a}
		}(),
		"*Authenticator": a,
		"*Speculation":   spec,
		"unexported": func() any {
			type holder struct {
				a *Authenticator
				s *Speculation
			}
			return holder{a, spec}
		}(),
		"unexported value": func() any {
			type holder struct{ a Authenticator }
			return holder{*a}
		}(),
	}
	for name, v := range values {
		for how, s := range renderValue(v) {
			if f := showsPassword(s, echoPassword); f != "" {
				t.Errorf("%s shown with %s shows %q: %s", name, how, f, s)
			}
		}
	}
	// The credential is still recognisable: what is not secret shows.
	for how, s := range renderValue(c) {
		if verb := strings.TrimPrefix(how, "field "); verb == "%T" || verb == "%d" || verb == "%x" {
			continue
		}
		if !strings.Contains(s, "alice") || !strings.Contains(s, SCRAMSHA256) {
			t.Errorf("Credential shown with %s hides its user name or mechanism: %s", how, s)
		}
	}
	for how, s := range renderValue(a) {
		if how == "%v" || how == "%+v" || how == "slog text" || how == "slog json" {
			if !strings.Contains(s, "alice") {
				t.Errorf("Authenticator shown with %s hides its user name: %s", how, s)
			}
		}
	}
}

// echoReply is the ok:0 reply of a server that echoes cmd, which holds the
// client's payload, in every part of its reply and in every form, and the
// password pw too.
func echoReply(cmd bson.Raw, pw string) bson.Raw {
	_, p, _ := cmd.Lookup("payload").BinaryOK()
	forms := []string{
		string(p),
		base64.StdEncoding.EncodeToString(p),
		base64.RawURLEncoding.EncodeToString(p),
		base64.StdEncoding.EncodeToString(cmd), // the whole command
		base64.StdEncoding.EncodeToString(append([]byte{'x'}, cmd...)),
		base64.StdEncoding.EncodeToString(append([]byte{'x', 'y'}, cmd...)),
		hex.EncodeToString(p),
		strconv.Quote(string(p)),
		cmd.String(),
		fmt.Sprintf("%v", cmd),
		pw,
		hex.EncodeToString([]byte(pw)),
	}
	for k := range 3 {
		forms = append(forms, base64.StdEncoding.EncodeToString(append([]byte("xx")[:k], pw...)))
	}
	msg := "Authentication failed; received " + strings.Join(forms, " | ")
	return reply(bson.D{
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: msg},
		{Key: "code", Value: int32(18)},
		{Key: "codeName", Value: "AuthenticationFailed " + pw},
		{Key: "errorLabels", Value: bson.A{"SomeLabel", base64.StdEncoding.EncodeToString(p)}},
		{Key: "received", Value: cmd},
		{Key: "nested", Value: bson.D{{Key: "list", Value: bson.A{msg, bson.Binary{Data: p}, bson.D{{Key: "x", Value: p}}}}}},
		{Key: pw, Value: int32(1)},
	})
}

// checkErrorHidesPassword checks every rendering of err, and of the server's
// error that it wraps.
func checkErrorHidesPassword(t *testing.T, name string, err error, pw string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", name)
		return
	}
	for how, s := range renderValue(err) {
		if f := showsPassword(s, pw); f != "" {
			t.Errorf("%s: error shown with %s shows %q: %s", name, how, f, s)
		}
	}
	var ce *wire.CommandError
	if !errors.As(err, &ce) {
		return
	}
	parts := map[string]string{
		"Message":     ce.Message,
		"CodeName":    ce.CodeName,
		"Labels":      strings.Join(ce.Labels, ","),
		"Raw":         ce.Raw.String(),
		"Raw bytes":   string(ce.Raw),
		"Raw %v":      fmt.Sprintf("%v", ce.Raw),
		"CommandErr":  fmt.Sprintf("%+v %#v", ce, *ce),
		"errors.As %": fmt.Sprintf("%v", errors.Unwrap(err)),
	}
	for part, s := range parts {
		if f := showsPassword(s, pw); f != "" {
			t.Errorf("%s: the server's error's %s shows %q: %s", name, part, f, s)
		}
	}
	if ce.Code != 18 || !ce.HasErrorLabel("SomeLabel") || !strings.Contains(ce.Message, "Authentication failed") {
		t.Errorf("%s: the server's error lost what is not secret: %+v", name, ce)
	}
}

// fixedNonce returns the Authenticator of c with a fixed SCRAM nonce, so
// that the text of its conversations, and so what the leak checks see, is
// the same at every run.
func fixedNonce(t *testing.T, c Credential) *Authenticator {
	t.Helper()
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	a.nonceGen = func() string { return "fyko+d2lbbFgONRv9qkxdawL" }
	return a
}

// TestServerEchoNeverShowsPassword: a server that echoes what it received,
// in its errmsg and anywhere else in its reply, raw, base64, hex or quoted,
// cannot make an authentication error show the password, with any
// mechanism, whether the connection or auth checks the reply's ok, with a
// long password or a short one (whose encodings are short too).
func TestServerEchoNeverShowsPassword(t *testing.T) {
	for _, pw := range []string{echoPassword, "pw7"} {
		for _, mech := range []string{PLAIN, SCRAMSHA1, SCRAMSHA256, ""} {
			for _, on := range []string{"saslStart", "saslContinue"} {
				if mech == PLAIN && on == "saslContinue" {
					continue
				}
				for _, checking := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/checking=%v/%d-byte password", mech, on, checking, len(pw))
					s := &fakeServer{t: t, nonce: "3rfcNHYJY1ZVvWVs7j", users: []user{
						{db: "admin", name: "alice", password: pw, mechs: []string{SCRAMSHA1, SCRAMSHA256}},
						{db: "$external", name: "alice", password: pw},
					}}
					s.hook = func(name string, cmd bson.Raw) (bson.Raw, error, bool) {
						if name == on {
							return echoReply(cmd, pw), nil, true
						}
						return nil, nil, false
					}
					var conn wire.RoundTripper = s
					if checking {
						conn = checkingConn{s}
					}
					c := Credential{Username: "alice", Password: pw, PasswordSet: true, Mechanism: mech}
					err := fixedNonce(t, c).Authenticate(context.Background(), conn, Hello{SaslSupportedMechs: []string{SCRAMSHA256}})
					checkErrorHidesPassword(t, name, err, pw)
				}
			}
		}
	}

	// SCRAM: the server-final message's "e=" error and a malformed
	// server-first message, both quoted by the SCRAM conversation.
	for _, msg := range []string{"e=" + echoPassword, "r=" + echoPassword + ",x,y"} {
		s := &fakeServer{t: t, nonce: "3rfcNHYJY1ZVvWVs7j", users: []user{{db: "admin", name: "alice", password: echoPassword, mechs: []string{SCRAMSHA256}}}}
		s.hook = func(name string, cmd bson.Raw) (bson.Raw, error, bool) {
			var r bson.Raw
			if name == "saslStart" {
				r, _ = s.saslStart("admin", SCRAMSHA256, payload(cmd), true)
				if strings.HasPrefix(msg, "r=") {
					r = reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: false},
						{Key: "payload", Value: bson.Binary{Data: []byte(msg)}}, {Key: "ok", Value: 1.0}})
				}
				return r, nil, true
			}
			return reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: true},
				{Key: "payload", Value: bson.Binary{Data: []byte(msg)}}, {Key: "ok", Value: 1.0}}), nil, true
		}
		err := fixedNonce(t, Credential{Username: "alice", Password: echoPassword, Mechanism: SCRAMSHA256}).Authenticate(context.Background(), s, Hello{})
		for how, str := range renderValue(err) {
			if f := showsPassword(str, echoPassword); f != "" {
				t.Errorf("SCRAM payload %q: error shown with %s shows %q: %s", msg, how, f, str)
			}
		}
	}

	// The SCRAM client proof is not a secret: an echo of the client-final
	// message still shows it, so the error keeps telling what was sent.
	s := &fakeServer{t: t, nonce: "3rfcNHYJY1ZVvWVs7j", users: []user{{db: "admin", name: "alice", password: echoPassword, mechs: []string{SCRAMSHA256}}}}
	var final string
	s.hook = func(name string, cmd bson.Raw) (bson.Raw, error, bool) {
		if name == "saslContinue" {
			final = string(payload(cmd))
			return echoReply(cmd, echoPassword), nil, true
		}
		return nil, nil, false
	}
	err := fixedNonce(t, Credential{Username: "alice", Password: echoPassword, Mechanism: SCRAMSHA256}).Authenticate(context.Background(), s, Hello{})
	if _, proof, ok := strings.Cut(final, ",p="); !ok || !strings.Contains(fmt.Sprint(err), proof) {
		t.Errorf("the echoed client proof of %q is not in %v", final, err)
	}
}

// TestScrub: the scrubber replaces a base64 text that holds the password
// whole, edges and padding included, and finds the encodings of a password
// too short to have aligned forms of its own.
func TestScrub(t *testing.T) {
	long := newScrubber("alice", echoPassword)
	for k := range 3 {
		enc := base64.StdEncoding.EncodeToString(append([]byte("xx")[:k], echoPassword...))
		if got, _ := long.scrub("got " + enc + ", then"); got != "got xxxxx, then" {
			t.Errorf("alignment %d: %q", k, got)
		}
	}
	short := newScrubber("alice", "p7")
	for _, text := range []string{
		base64.StdEncoding.EncodeToString([]byte("p7")),
		base64.RawURLEncoding.EncodeToString([]byte("\x00alice\x00p7")),
		"p7",
	} {
		if got, ok := short.scrub("got " + text + ", then"); got != "got xxxxx, then" || !ok {
			t.Errorf("%q: %q %v", text, got, ok)
		}
	}
	if got, ok := short.scrub("nothing here"); got != "nothing here" || ok {
		t.Errorf("%q %v", got, ok)
	}
}
