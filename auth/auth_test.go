package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/internal/leakcheck"
	"github.com/mongopool/mongopool/wire"
)

var (
	alice = user{db: "admin", name: "alice", password: "s3cret", mechs: []string{SCRAMSHA1, SCRAMSHA256}}
	sha1U = user{db: "admin", name: "sha1", password: "sha1", mechs: []string{SCRAMSHA1}}
	sha2U = user{db: "admin", name: "sha256", password: "sha256", mechs: []string{SCRAMSHA256}}
	ix    = user{db: "admin", name: "IX", password: "IX", mechs: []string{SCRAMSHA256, SCRAMSHA1}}
	nine  = user{db: "admin", name: "\u2168", password: "\u2163", mechs: []string{SCRAMSHA256}}
	other = user{db: "sales", name: "bob", password: "pw", mechs: []string{SCRAMSHA256}}
	ldap  = user{db: "$external", name: "user", password: "pencil"}
)

func newServer(t *testing.T) *fakeServer {
	return &fakeServer{t: t, users: []user{alice, sha1U, sha2U, ix, nine, other, ldap}}
}

func cred(u user, mech string) Credential {
	c := Credential{Username: u.name, Password: u.password, PasswordSet: true, Mechanism: mech}
	if u.db != "admin" && u.db != "$external" {
		c.Source = u.db
	}
	return c
}

// authError checks that err is an *Error for mech and returns it.
func authError(t *testing.T, err error, mech string) *Error {
	t.Helper()
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want an *auth.Error", err, err)
	}
	if ae.Mechanism != mech {
		t.Errorf("Error.Mechanism = %q, want %q (err %v)", ae.Mechanism, mech, err)
	}
	return ae
}

func TestSCRAM(t *testing.T) {
	for _, mech := range []string{SCRAMSHA1, SCRAMSHA256} {
		for _, legacy := range []bool{false, true} {
			name := mech
			if legacy {
				name += "/legacy-server"
			}
			t.Run(name, func(t *testing.T) {
				s := newServer(t)
				s.legacy = legacy
				if err := Authenticate(context.Background(), s, cred(alice, mech), Hello{}); err != nil {
					t.Fatal(err)
				}
				want := "saslStart,saslContinue"
				if legacy {
					want += ",saslContinue" // the empty exchange
				}
				if got := strings.Join(s.names(), ","); got != want {
					t.Errorf("commands = %s, want %s", got, want)
				}
				cmds := s.commands()
				start := cmds[0]
				if got := start.Lookup("mechanism").StringValue(); got != mech {
					t.Errorf("mechanism = %q", got)
				}
				if skip, _ := start.Lookup("options", "skipEmptyExchange").BooleanOK(); !skip {
					t.Errorf("saslStart without options.skipEmptyExchange:true: %s", start)
				}
				if db := start.Lookup("$db").StringValue(); db != "admin" {
					t.Errorf("$db = %q", db)
				}
				if p := string(payload(start)); !strings.HasPrefix(p, "n,,n=alice,r=") {
					t.Errorf("client-first %q", p)
				}
				for _, c := range cmds[1:] {
					if id, ok := c.Lookup("conversationId").Int32OK(); !ok || id != 1 {
						t.Errorf("conversationId = %v", c.Lookup("conversationId"))
					}
				}
				if legacy && len(payload(cmds[2])) != 0 {
					t.Errorf("empty exchange payload %q", payload(cmds[2]))
				}
			})
		}
	}
}

func TestSCRAMSource(t *testing.T) {
	s := newServer(t)
	if err := Authenticate(context.Background(), s, cred(other, SCRAMSHA256), Hello{}); err != nil {
		t.Fatal(err)
	}
	if db := s.commands()[0].Lookup("$db").StringValue(); db != "sales" {
		t.Errorf("$db = %q, want sales", db)
	}
}

func TestSCRAMWrongPassword(t *testing.T) {
	for _, mech := range []string{SCRAMSHA1, SCRAMSHA256} {
		s := newServer(t)
		c := cred(alice, mech)
		c.Password = "wrong"
		err := Authenticate(context.Background(), s, c, Hello{})
		authError(t, err, mech)
		var se *wire.CommandError
		if !errors.As(err, &se) || se.Code != 18 {
			t.Errorf("%s: err = %v, want the server's AuthenticationFailed", mech, err)
		}
		if !strings.Contains(err.Error(), "AuthenticationFailed") || !strings.Contains(err.Error(), mech) {
			t.Errorf("%s: unclear message %q", mech, err)
		}
		if strings.Contains(err.Error(), "wrong") {
			t.Errorf("%s: message shows the password: %q", mech, err)
		}
	}
	// A user with only the other mechanism fails the same way.
	err := Authenticate(context.Background(), newServer(t), cred(sha1U, SCRAMSHA256), Hello{})
	authError(t, err, SCRAMSHA256)
}

// TestSASLprep is the specification's SASLprep test (auth.md, Step 4).
func TestSASLprep(t *testing.T) {
	cases := []struct {
		u        user
		password string
	}{
		{ix, "IX"},
		{ix, "I\u00ADX"},   // soft hyphen maps to nothing
		{nine, "IV"},       // the user was created with U+2163
		{nine, "I\u00ADV"}, // ... which NFKC maps to "IV"
		{nine, "\u2163"},
	}
	for _, tc := range cases {
		s := newServer(t)
		c := cred(tc.u, SCRAMSHA256)
		c.Password = tc.password
		if err := Authenticate(context.Background(), s, c, Hello{}); err != nil {
			t.Errorf("user %q password %q: %v", tc.u.name, tc.password, err)
		}
		// The username is sent as given, not SASLprepped.
		if p := string(payload(s.commands()[0])); !strings.Contains(p, "n="+tc.u.name+",") {
			t.Errorf("client-first %q does not carry the raw username %q", p, tc.u.name)
		}
		// Default negotiation with a mechanism list picks SCRAM-SHA-256.
		c.Mechanism = ""
		if err := Authenticate(context.Background(), newServer(t), c, Hello{SaslSupportedMechs: []string{SCRAMSHA256}}); err != nil {
			t.Errorf("negotiated, user %q password %q: %v", tc.u.name, tc.password, err)
		}
	}
	// SCRAM-SHA-1 does not SASLprep: the unnormalized form fails.
	c := cred(ix, SCRAMSHA1)
	c.Password = "I\u00ADX"
	authError(t, Authenticate(context.Background(), newServer(t), c, Hello{}), SCRAMSHA1)
	c.Password = "IX"
	if err := Authenticate(context.Background(), newServer(t), c, Hello{}); err != nil {
		t.Errorf("SCRAM-SHA-1 IX: %v", err)
	}
	// A password SASLprep prohibits is refused up front, without showing it.
	bad := cred(alice, SCRAMSHA256)
	bad.Password = "xyzzy\u0007xyzzy"
	_, err := New(bad)
	authError(t, err, SCRAMSHA256)
	if err != nil && strings.Contains(err.Error(), "xyzzy") {
		t.Errorf("message shows the password: %q", err)
	}
}

// TestSpecConversations replays the example conversations of auth.md with
// their client nonces and checks every client message byte for byte.
func TestSpecConversations(t *testing.T) {
	tests := []struct {
		mech, nonce                                        string
		clientFirst, serverFirst, clientFinal, serverFinal string
	}{
		{
			SCRAMSHA1, "fyko+d2lbbFgONRv9qkxdawL",
			"biwsbj11c2VyLHI9ZnlrbytkMmxiYkZnT05Sdjlxa3hkYXdM",
			"cj1meWtvK2QybGJiRmdPTlJ2OXFreGRhd0xIbytWZ2s3cXZVT0tVd3VXTElXZzRsLzlTcmFHTUhFRSxzPXJROVpZM01udEJldVAzRTFURFZDNHc9PSxpPTEwMDAw",
			"Yz1iaXdzLHI9ZnlrbytkMmxiYkZnT05Sdjlxa3hkYXdMSG8rVmdrN3F2VU9LVXd1V0xJV2c0bC85U3JhR01IRUUscD1NQzJUOEJ2Ym1XUmNrRHc4b1dsNUlWZ2h3Q1k9",
			"dj1VTVdlSTI1SkQxeU5ZWlJNcFo0Vkh2aFo5ZTA9",
		},
		{
			SCRAMSHA256, "rOprNGfwEbeRWgbNEkqO",
			"biwsbj11c2VyLHI9ck9wck5HZndFYmVSV2diTkVrcU8=",
			"cj1yT3ByTkdmd0ViZVJXZ2JORWtxTyVodllEcFdVYTJSYVRDQWZ1eEZJbGopaE5sRiRrMCxzPVcyMlphSjBTTlk3c29Fc1VFamI2Z1E9PSxpPTQwOTY=",
			"Yz1iaXdzLHI9ck9wck5HZndFYmVSV2diTkVrcU8laHZZRHBXVWEyUmFUQ0FmdXhGSWxqKWhObEYkazAscD1kSHpiWmFwV0lrNGpVaE4rVXRlOXl0YWc5empmTUhnc3FtbWl6N0FuZFZRPQ==",
			"dj02cnJpVFJCaTIzV3BSUi93dHVwK21NaFVaVW4vZEI1bkxUSlJzamw5NUc0PQ==",
		},
	}
	b64 := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tt := range tests {
		t.Run(tt.mech, func(t *testing.T) {
			a, err := New(Credential{Username: "user", Password: "pencil", Mechanism: tt.mech})
			if err != nil {
				t.Fatal(err)
			}
			a.nonceGen = func() string { return tt.nonce }
			s := newServer(t)
			s.hook = func(name string, cmd bson.Raw) (bson.Raw, error, bool) {
				switch name {
				case "saslStart":
					if got := payload(cmd); string(got) != string(b64(tt.clientFirst)) {
						t.Errorf("client-first = %q", got)
					}
					return reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "payload", Value: bson.Binary{Data: b64(tt.serverFirst)}},
						{Key: "done", Value: false}, {Key: "ok", Value: 1.0}}), nil, true
				case "saslContinue":
					if got := payload(cmd); string(got) != string(b64(tt.clientFinal)) {
						t.Errorf("client-final = %q\nwant %q", got, b64(tt.clientFinal))
					}
					return reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "payload", Value: bson.Binary{Data: b64(tt.serverFinal)}},
						{Key: "done", Value: true}, {Key: "ok", Value: 1.0}}), nil, true
				}
				return nil, nil, false
			}
			if err := a.Authenticate(context.Background(), s, Hello{}); err != nil {
				t.Fatal(err)
			}
			if n := len(s.commands()); n != 2 {
				t.Errorf("%d commands, want 2", n)
			}
		})
	}
}

func TestDefaultMechanism(t *testing.T) {
	tests := []struct {
		mechs []string
		want  string
	}{
		{[]string{SCRAMSHA1, SCRAMSHA256}, SCRAMSHA256},
		{[]string{SCRAMSHA256}, SCRAMSHA256},
		{[]string{SCRAMSHA1}, SCRAMSHA1},
		{nil, SCRAMSHA1},                                           // no saslSupportedMechs: SCRAM-SHA-1
		{[]string{}, SCRAMSHA1},                                    // present but empty: not SCRAM-SHA-256
		{[]string{"PLAIN", "GSSAPI", "MONGODB-FUTURE"}, SCRAMSHA1}, // never another default; unknown names are no error
	}
	for _, tt := range tests {
		s := newServer(t)
		if err := Authenticate(context.Background(), s, cred(alice, ""), Hello{SaslSupportedMechs: tt.mechs}); err != nil {
			t.Errorf("mechs %v: %v", tt.mechs, err)
			continue
		}
		if got := s.commands()[0].Lookup("mechanism").StringValue(); got != tt.want {
			t.Errorf("mechs %v: used %s, want %s", tt.mechs, got, tt.want)
		}
	}
	// A user with only SCRAM-SHA-256 whose server sent no list fails as an
	// auth error (SCRAM-SHA-1 is tried).
	err := Authenticate(context.Background(), newServer(t), cred(sha2U, ""), Hello{})
	authError(t, err, SCRAMSHA1)
	// A non-existent user fails with the same error type as a wrong password.
	err = Authenticate(context.Background(), newServer(t), Credential{Username: "nobody", Password: "x"}, Hello{})
	var se *wire.CommandError
	if authError(t, err, SCRAMSHA1); !errors.As(err, &se) || se.Code != 18 {
		t.Errorf("unknown user: %v", err)
	}
}

func TestSaslSupportedMechs(t *testing.T) {
	tests := []struct {
		c    Credential
		want string
	}{
		{Credential{Username: "alice", Password: "p"}, "admin.alice"},
		{Credential{Username: "alice", Password: "p", Source: "sales"}, "sales.alice"},
		{Credential{Username: "\u2168", Password: "p"}, "admin.\u2168"},
		{Credential{Username: "alice", Password: "p", Mechanism: SCRAMSHA256}, ""},
		{Credential{Username: "alice", Password: "p", Mechanism: PLAIN}, ""},
	}
	for _, tt := range tests {
		a, err := New(tt.c)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.SaslSupportedMechs(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.c, got, tt.want)
		}
	}
}

func TestSpeculativeSCRAM(t *testing.T) {
	for _, tc := range []struct {
		mech, want string
		legacy     bool
	}{
		{SCRAMSHA256, SCRAMSHA256, false},
		{SCRAMSHA1, SCRAMSHA1, false},
		{"", SCRAMSHA256, false}, // no mechanism: speculate with SCRAM-SHA-256
		{SCRAMSHA256, SCRAMSHA256, true},
	} {
		t.Run(tc.mech+"->"+tc.want, func(t *testing.T) {
			s := newServer(t)
			s.legacy = tc.legacy
			a, err := New(cred(alice, tc.mech))
			if err != nil {
				t.Fatal(err)
			}
			spec, err := a.Speculate()
			if err != nil {
				t.Fatal(err)
			}
			doc := spec.Command()
			if got := strings.Join(docKeys(t, doc), ","); got != "saslStart,mechanism,payload,options,db" {
				t.Errorf("speculative keys = %s", got)
			}
			if m := doc.Lookup("mechanism").StringValue(); m != tc.want {
				t.Errorf("speculative mechanism %s, want %s", m, tc.want)
			}
			if db := doc.Lookup("db").StringValue(); db != "admin" {
				t.Errorf("db = %q", db)
			}
			answer := s.speculate(doc)
			if answer == nil {
				t.Fatal("fake server declined")
			}
			err = spec.Finish(context.Background(), s, Hello{SpeculativeAuthenticate: answer, SaslSupportedMechs: []string{SCRAMSHA1}})
			if err != nil {
				t.Fatal(err)
			}
			// hello did the saslStart: only saslContinue went on the wire.
			want := "saslContinue"
			if tc.legacy {
				want += ",saslContinue"
			}
			if got := strings.Join(s.names(), ","); got != want {
				t.Errorf("commands = %s, want %s", got, want)
			}
			if err := spec.Finish(context.Background(), s, Hello{}); err == nil {
				t.Error("second Finish succeeded")
			}
		})
	}
}

func TestSpeculativeFallback(t *testing.T) {
	// The server did not answer speculativeAuthenticate: the full
	// conversation runs, with the mechanism negotiated from hello.
	s := newServer(t)
	a, _ := New(cred(alice, ""))
	spec, err := a.Speculate()
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Finish(context.Background(), s, Hello{SaslSupportedMechs: []string{SCRAMSHA1}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.names(), ","); got != "saslStart,saslContinue" {
		t.Errorf("commands = %s", got)
	}
	if m := s.commands()[0].Lookup("mechanism").StringValue(); m != SCRAMSHA1 {
		t.Errorf("fallback used %s, want the negotiated SCRAM-SHA-1", m)
	}

	// Wrong password: the speculative start succeeds, the continuation fails.
	s = newServer(t)
	c := cred(alice, SCRAMSHA256)
	c.Password = "nope"
	a, _ = New(c)
	spec, _ = a.Speculate()
	err = spec.Finish(context.Background(), s, Hello{SpeculativeAuthenticate: s.speculate(spec.Command())})
	var se *wire.CommandError
	if authError(t, err, SCRAMSHA256); !errors.As(err, &se) || se.Code != 18 {
		t.Errorf("err = %v", err)
	}

	// A malformed speculative answer is an auth error, not a panic.
	a, _ = New(cred(alice, SCRAMSHA256))
	spec, _ = a.Speculate()
	err = spec.Finish(context.Background(), newServer(t), Hello{SpeculativeAuthenticate: bson.Raw{9, 0, 0, 0, 1}})
	authError(t, err, SCRAMSHA256)

	// A default-mechanism credential whose password SASLprep refuses does
	// not speculate, and still authenticates with SCRAM-SHA-1.
	odd := user{db: "admin", name: "odd", password: "a\u0007b", mechs: []string{SCRAMSHA1}}
	s = newServer(t)
	s.users = append(s.users, odd)
	a, err = New(cred(odd, ""))
	if err != nil {
		t.Fatal(err)
	}
	spec, err = a.Speculate()
	if err != nil || spec.Command() != nil {
		t.Fatalf("Speculate = %v, %v; want no speculation", spec.Command(), err)
	}
	if err := spec.Finish(context.Background(), s, Hello{SaslSupportedMechs: []string{SCRAMSHA1}}); err != nil {
		t.Error(err)
	}
}

func docKeys(t *testing.T, d bson.Raw) []string {
	t.Helper()
	elems, err := d.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, e := range elems {
		ks = append(ks, e.Key())
	}
	return ks
}

func TestX509(t *testing.T) {
	const subject = "C=IS,ST=Reykjavik,L=Reykjavik,O=MongoDB,OU=Drivers,CN=client"
	for _, username := range []string{"", subject} {
		s := newServer(t)
		s.x509User = subject
		err := Authenticate(context.Background(), s, Credential{Mechanism: X509, Username: username}, Hello{})
		if err != nil {
			t.Fatalf("username %q: %v", username, err)
		}
		cmd := s.commands()[0]
		wantKeys := "authenticate,mechanism,$db"
		if username != "" {
			wantKeys = "authenticate,mechanism,user,$db"
		}
		if got := strings.Join(docKeys(t, cmd), ","); got != wantKeys {
			t.Errorf("keys = %s, want %s", got, wantKeys)
		}
		if cmd.Lookup("mechanism").StringValue() != X509 || cmd.Lookup("$db").StringValue() != "$external" {
			t.Errorf("command %s", cmd)
		}
	}
	// Rejected certificate.
	s := newServer(t)
	authError(t, Authenticate(context.Background(), s, Credential{Mechanism: X509}, Hello{}), X509)

	// Speculative: the authenticate command rides in hello; nothing more
	// goes on the wire when the server answers it.
	s = newServer(t)
	s.x509User = subject
	a, err := New(Credential{Mechanism: "mongodb-x509", Source: "$external"})
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := a.Speculate()
	if got := strings.Join(docKeys(t, spec.Command()), ","); got != "authenticate,mechanism" {
		t.Errorf("speculative keys = %s", got)
	}
	answer := s.speculate(spec.Command())
	if err := spec.Finish(context.Background(), s, Hello{SpeculativeAuthenticate: answer}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.names()); n != 1 { // the fake's own speculate call
		t.Errorf("%d commands after speculative X509, want none beyond hello's", n-1)
	}
	// ... and falls back to the command when it does not.
	s = newServer(t)
	s.x509User = subject
	spec, _ = a.Speculate()
	if err := spec.Finish(context.Background(), s, Hello{}); err != nil || strings.Join(s.names(), ",") != "authenticate" {
		t.Errorf("fallback: %v, commands %v", err, s.names())
	}
}

func TestPLAIN(t *testing.T) {
	s := newServer(t)
	if err := Authenticate(context.Background(), s, Credential{Mechanism: PLAIN, Username: "user", Password: "pencil"}, Hello{}); err != nil {
		t.Fatal(err)
	}
	cmd := s.commands()[0]
	// The specification's example: BinData(0, "AHVzZXIAcGVuY2ls").
	st, data, _ := cmd.Lookup("payload").BinaryOK()
	if st != 0 || base64.StdEncoding.EncodeToString(data) != "AHVzZXIAcGVuY2ls" {
		t.Errorf("payload subtype %d %q", st, data)
	}
	if cmd.Lookup("$db").StringValue() != "$external" || cmd.Lookup("mechanism").StringValue() != PLAIN {
		t.Errorf("command %s", cmd)
	}
	// A given source is kept.
	a, _ := New(Credential{Mechanism: PLAIN, Username: "u", Password: "p", Source: "ldapdb"})
	if a.Source() != "ldapdb" {
		t.Errorf("source %q", a.Source())
	}
	// No speculative form; Finish runs the conversation.
	a, _ = New(Credential{Mechanism: PLAIN, Username: "user", Password: "pencil"})
	spec, err := a.Speculate()
	if err != nil || spec.Command() != nil {
		t.Fatalf("PLAIN Speculate: %v %v", spec.Command(), err)
	}
	s = newServer(t)
	if err := spec.Finish(context.Background(), s, Hello{}); err != nil || len(s.names()) != 1 {
		t.Errorf("PLAIN Finish: %v %v", err, s.names())
	}
	// Wrong password.
	authError(t, Authenticate(context.Background(), newServer(t), Credential{Mechanism: PLAIN, Username: "user", Password: "x"}, Hello{}), PLAIN)
	// A server that does not end the conversation.
	s = newServer(t)
	s.hook = func(string, bson.Raw) (bson.Raw, error, bool) {
		return reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: false}, {Key: "ok", Value: 1.0}}), nil, true
	}
	authError(t, Authenticate(context.Background(), s, Credential{Mechanism: PLAIN, Username: "user", Password: "pencil"}, Hello{}), PLAIN)
}

func TestUnsupportedMechanisms(t *testing.T) {
	for _, m := range []string{"GSSAPI", "MONGODB-AWS", "MONGODB-OIDC", "MONGODB-CR", "SCRAM-SHA-512", "bogus"} {
		c := Credential{Mechanism: m, Username: "u", Password: "p"}
		_, err := New(c)
		authError(t, err, m)
		if !errors.Is(err, ErrUnsupportedMechanism) {
			t.Errorf("%s: %v is not ErrUnsupportedMechanism", m, err)
		}
		if !strings.Contains(err.Error(), m) || !strings.Contains(err.Error(), "mongopool") {
			t.Errorf("%s: unclear message %q", m, err)
		}
		s := newServer(t)
		if err := Authenticate(context.Background(), s, c, Hello{}); !errors.Is(err, ErrUnsupportedMechanism) || len(s.names()) != 0 {
			t.Errorf("%s: Authenticate %v after %v", m, err, s.names())
		}
	}
}

func TestInvalidCredentials(t *testing.T) {
	tests := []struct {
		c    Credential
		mech string
		want string
	}{
		{Credential{Password: "p"}, "", "username"},
		{Credential{Username: "u"}, "", "password"},
		{Credential{Username: "u", Mechanism: SCRAMSHA256}, SCRAMSHA256, "password"},
		{Credential{Password: "p", Mechanism: SCRAMSHA1}, SCRAMSHA1, "username"},
		{Credential{Username: "u", Mechanism: PLAIN}, PLAIN, "password"},
		{Credential{Mechanism: X509, Password: "p", PasswordSet: true}, X509, "password"},
		{Credential{Mechanism: X509, PasswordSet: true}, X509, "password"},
		{Credential{Mechanism: X509, Source: "admin"}, X509, "$external"},
		{Credential{Username: "u", Password: "p", Props: map[string]string{"SERVICE_NAME": "x"}}, "", "properties"},
	}
	for _, tt := range tests {
		_, err := New(tt.c)
		if err == nil {
			t.Errorf("%+v accepted", tt.c)
			continue
		}
		authError(t, err, tt.mech)
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %q does not mention %q", tt.c, err, tt.want)
		}
	}
	// An empty password that was explicitly given is allowed.
	if _, err := New(Credential{Username: "u", PasswordSet: true}); err != nil {
		t.Errorf("empty set password: %v", err)
	}
}

func TestArbiter(t *testing.T) {
	s := newServer(t)
	if err := Authenticate(context.Background(), s, cred(alice, ""), Hello{Arbiter: true}); err != nil || len(s.names()) != 0 {
		t.Errorf("arbiter: %v, %v", err, s.names())
	}
}

// neverDone makes the server answer every saslContinue after its final
// message with done:false.
func neverDone(s *fakeServer) {
	s.hook = func(name string, cmd bson.Raw) (bson.Raw, error, bool) {
		if name != "saslContinue" {
			return nil, nil, false
		}
		id, _ := cmd.Lookup("conversationId").Int32OK()
		s.mu.Lock()
		sc := s.convs[id]
		s.mu.Unlock()
		if sc != nil && sc.conv.Done() {
			return reply(bson.D{{Key: "conversationId", Value: id}, {Key: "done", Value: false},
				{Key: "payload", Value: bson.Binary{Data: []byte{}}}, {Key: "ok", Value: 1.0}}), nil, true
		}
		r, err := s.saslContinue(id, payload(cmd))
		if err != nil {
			return nil, err, true
		}
		// Strip done:true.
		elems, _ := r.Elements()
		var d bson.D
		for _, e := range elems {
			if e.Key() == "done" {
				d = append(d, bson.E{Key: "done", Value: false})
			} else {
				d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
			}
		}
		return reply(d), nil, true
	}
}

func TestServerNeverFinishes(t *testing.T) {
	s := newServer(t)
	neverDone(s)
	err := Authenticate(context.Background(), s, cred(alice, SCRAMSHA256), Hello{})
	authError(t, err, SCRAMSHA256)
	if !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("err = %v", err)
	}
	if n := len(s.names()); n != maxSASLSteps {
		t.Errorf("%d commands, want %d", n, maxSASLSteps)
	}
}

func TestServerMisbehaves(t *testing.T) {
	good := func(s *fakeServer, name string, cmd bson.Raw) bson.Raw {
		var r bson.Raw
		switch name {
		case "saslStart":
			r, _ = s.saslStart("admin", cmd.Lookup("mechanism").StringValue(), payload(cmd), true)
		default:
			r, _ = s.saslContinue(cmd.Lookup("conversationId").Int32(), payload(cmd))
		}
		return r
	}
	replace := func(r bson.Raw, key string, v any) bson.Raw {
		elems, _ := r.Elements()
		var d bson.D
		found := false
		for _, e := range elems {
			if e.Key() == key {
				found = true
				if v != nil {
					d = append(d, bson.E{Key: key, Value: v})
				}
				continue
			}
			d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
		}
		if !found && v != nil {
			d = append(d, bson.E{Key: key, Value: v})
		}
		return reply(d)
	}
	errNet := errors.New("connection reset by peer")
	tests := []struct {
		desc string
		on   string // command to tamper with
		fn   func(r bson.Raw) (bson.Raw, error)
		want string
	}{
		{"nil reply", "saslStart", func(bson.Raw) (bson.Raw, error) { return nil, nil }, "not a valid BSON document"},
		{"garbage bytes", "saslStart", func(bson.Raw) (bson.Raw, error) { return bson.Raw("\x07\x00\x00\x00garbage"), nil }, "not a valid BSON document"},
		{"truncated", "saslContinue", func(r bson.Raw) (bson.Raw, error) { return r[:len(r)/2], nil }, "not a valid BSON document"},
		{"no ok", "saslStart", func(r bson.Raw) (bson.Raw, error) { return replace(r, "ok", nil), nil }, `no "ok" field`},
		{"string ok", "saslStart", func(r bson.Raw) (bson.Raw, error) { return replace(r, "ok", "yes"), nil }, `"ok" is a BSON string`},
		{"no conversationId", "saslStart", func(r bson.Raw) (bson.Raw, error) { return replace(r, "conversationId", nil), nil }, "conversationId"},
		{"string conversationId", "saslStart", func(r bson.Raw) (bson.Raw, error) { return replace(r, "conversationId", "1"), nil }, "conversationId"},
		{"int payload", "saslStart", func(r bson.Raw) (bson.Raw, error) { return replace(r, "payload", int32(5)), nil }, "payload"},
		{"bad base64 payload", "saslStart", func(r bson.Raw) (bson.Raw, error) { return replace(r, "payload", "!!"), nil }, "base64"},
		{"string done", "saslContinue", func(r bson.Raw) (bson.Raw, error) { return replace(r, "done", "true"), nil }, "done"},
		{"garbage server-first", "saslStart", func(r bson.Raw) (bson.Raw, error) {
			return replace(r, "payload", bson.Binary{Data: []byte("\xff\x00,,=")}), nil
		}, "authentication failed"},
		{"nonce not extended", "saslStart", func(r bson.Raw) (bson.Raw, error) {
			return replace(r, "payload", bson.Binary{Data: []byte("r=abc,s=c2FsdA==,i=4096")}), nil
		}, "nonce"},
		{"too many iterations", "saslStart", func(r bson.Raw) (bson.Raw, error) {
			_, p, _ := r.Lookup("payload").BinaryOK()
			return replace(r, "payload", bson.Binary{Data: []byte(strings.Replace(string(p), "i=4096", "i=2000000000", 1))}), nil
		}, "2000000000 iterations"},
		{"too few iterations", "saslStart", func(r bson.Raw) (bson.Raw, error) {
			_, p, _ := r.Lookup("payload").BinaryOK()
			return replace(r, "payload", bson.Binary{Data: []byte(strings.Replace(string(p), "i=4096", "i=1000", 1))}), nil
		}, "iterations"},
		{"done before proof", "saslStart", func(r bson.Raw) (bson.Raw, error) { return replace(r, "done", true), nil }, "before proving"},
		{"forged server signature", "saslContinue", func(r bson.Raw) (bson.Raw, error) {
			return replace(r, "payload", bson.Binary{Data: []byte("v=" + base64.StdEncoding.EncodeToString(make([]byte, 32)))}), nil
		}, "server validation failed"},
		{"server error payload", "saslContinue", func(r bson.Raw) (bson.Raw, error) {
			return replace(r, "payload", bson.Binary{Data: []byte("e=other-error")}), nil
		}, "other-error"},
		{"network error", "saslContinue", func(bson.Raw) (bson.Raw, error) { return nil, errNet }, "connection reset"},
		{"EOF", "saslStart", func(bson.Raw) (bson.Raw, error) { return nil, io.EOF }, "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			s := newServer(t)
			s.hook = func(name string, cmd bson.Raw) (bson.Raw, error, bool) {
				r := good(s, name, cmd)
				if name != tt.on {
					return r, nil, true
				}
				r, err := tt.fn(r)
				return r, err, true
			}
			err := Authenticate(context.Background(), s, cred(alice, SCRAMSHA256), Hello{})
			if err == nil {
				t.Fatal("authenticated")
			}
			authError(t, err, SCRAMSHA256)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to mention %q", err, tt.want)
			}
			malformed := tt.desc == "nil reply" || tt.desc == "garbage bytes" || tt.desc == "truncated" ||
				tt.desc == "no ok" || tt.desc == "string ok"
			if malformed && !errors.Is(err, wire.ErrProtocol) {
				t.Errorf("err = %v, want it to match wire.ErrProtocol", err)
			}
		})
	}
	// Connection errors stay reachable.
	s := newServer(t)
	s.hook = func(string, bson.Raw) (bson.Raw, error, bool) { return nil, io.ErrUnexpectedEOF, true }
	err := Authenticate(context.Background(), s, cred(alice, ""), Hello{})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want it to wrap io.ErrUnexpectedEOF", err)
	}
}

// checkingConn is a RoundTripper that checks ok itself, as connection.Conn
// does: an ok:0 reply comes back with its *wire.CommandError.
type checkingConn struct{ s *fakeServer }

func (c checkingConn) RoundTrip(ctx context.Context, cmd bson.Raw) (bson.Raw, error) {
	r, err := c.s.RoundTrip(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return r, wire.CheckReply(r)
}

// TestCommandErrorFromConnection checks that a *wire.CommandError returned by
// the connection is wrapped in the *Error like one auth found itself.
func TestCommandErrorFromConnection(t *testing.T) {
	s := newServer(t)
	s.hook = func(string, bson.Raw) (bson.Raw, error, bool) {
		return reply(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "Authentication failed."},
			{Key: "code", Value: int32(18)}, {Key: "codeName", Value: "AuthenticationFailed"},
			{Key: "errorLabels", Value: bson.A{"SomeLabel"}}}), nil, true
	}
	err := Authenticate(context.Background(), checkingConn{s}, cred(alice, SCRAMSHA256), Hello{})
	authError(t, err, SCRAMSHA256)
	var ce *wire.CommandError
	if !errors.As(err, &ce) || ce.Code != 18 || ce.CodeName != "AuthenticationFailed" || !ce.HasErrorLabel("SomeLabel") {
		t.Errorf("err = %v, want the server's AuthenticationFailed with its label", err)
	}
	if !strings.Contains(err.Error(), "saslStart") || !strings.Contains(err.Error(), "AuthenticationFailed") {
		t.Errorf("unclear message %q", err)
	}
}

func TestContextCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := newServer(t)
	s.hook = func(name string, cmd bson.Raw) (bson.Raw, error, bool) {
		cancel() // cancelled while the conversation is under way
		return nil, nil, false
	}
	err := Authenticate(ctx, s, cred(alice, SCRAMSHA256), Hello{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	authError(t, err, SCRAMSHA256)
}

func TestConcurrentUse(t *testing.T) {
	a, err := New(cred(alice, ""))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := newServer(t)
			var err error
			if i%2 == 0 {
				err = a.Authenticate(context.Background(), s, Hello{SaslSupportedMechs: []string{SCRAMSHA256}})
			} else {
				spec, serr := a.Speculate()
				if serr != nil {
					err = serr
				} else {
					err = spec.Finish(context.Background(), s, Hello{SpeculativeAuthenticate: s.speculate(spec.Command())})
				}
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// TestSlowKeyDerivation: a server asking for many iterations cannot hold
// the caller past its deadline: Authenticate returns with the deadline's
// error while the key derivation (seconds long at 3,000,000 iterations) still
// runs on the goroutine step started.
func TestSlowKeyDerivation(t *testing.T) {
	// derivations returns the goroutines (by their "goroutine N" headers,
	// never reused) that step started and that still run: those of earlier
	// tests, abandoned when their context ended, must not pass for this
	// one's.
	derivations := func() map[string]bool {
		ids := map[string]bool{}
		for _, stack := range leakcheck.Running(leakcheck.Only("auth.(*scramConv).step")) {
			id, _, _ := strings.Cut(stack, " [")
			ids[id] = true
		}
		return ids
	}
	before := derivations()
	s := newServer(t)
	s.hook = func(name string, cmd bson.Raw) (bson.Raw, error, bool) {
		if name != "saslStart" {
			return nil, nil, false
		}
		r, _ := s.saslStart("admin", SCRAMSHA256, payload(cmd), true)
		_, p, _ := r.Lookup("payload").BinaryOK()
		p = []byte(strings.Replace(string(p), "i=4096", "i=3000000", 1))
		return reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: false},
			{Key: "payload", Value: bson.Binary{Data: p}}, {Key: "ok", Value: 1.0}}), nil, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := Authenticate(ctx, s, cred(alice, SCRAMSHA256), Hello{})
	running := false
	for id := range derivations() {
		running = running || !before[id]
	}
	if !running {
		t.Error("Authenticate returned after the key derivation ended: it waited for it past the deadline")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	authError(t, err, SCRAMSHA256)
}
