// Package auth authenticates a MongoDB connection, per the Authentication
// specification: SCRAM-SHA-256, SCRAM-SHA-1, PLAIN and MONGODB-X509, the
// default mechanism negotiation and speculative authentication.
//
// An Authenticator is made once per credential (per pool) and used for every
// connection; it keeps the SCRAM key cache the specification requires. For
// each new connection:
//
//	spec, err := a.Speculate()              // the speculativeAuthenticate document
//	hello := handshake.Options{SaslSupportedMechs: a.SaslSupportedMechs(),
//		SpeculativeAuthenticate: spec.Command(), ...}
//	... run the handshake, parse the reply into desc ...
//	err = spec.Finish(ctx, conn, auth.Hello{
//		SaslSupportedMechs:      desc.SaslSupportedMechs,
//		SpeculativeAuthenticate: desc.SpeculativeAuthenticate,
//		Arbiter:                 desc.IsArbiter(),
//	})
//
// Finish completes the speculative conversation when the server answered it,
// and runs the whole conversation otherwise. Authenticate runs it without
// speculation.
//
// Every error from this package is an *Error. Errors met on the connection
// stay wrapped in it, so errors.Is and errors.As reach them; a server that
// refuses a command (ok:0, such as AuthenticationFailed) shows as a wrapped
// *wire.CommandError.
//
// No password reaches an output of this package, whatever the server sends:
// a Credential and an Authenticator show "xxxxx" in its place with every
// verb of fmt, in log/slog and in encoding/json; an error that would quote
// the password, raw, escaped or encoded (a server that echoes the PLAIN
// payload in its errmsg, for one), shows "xxxxx" instead, and the
// *wire.CommandError that errors.As finds is a copy whose message, code
// name, labels and reply are scrubbed the same way.
package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// Mechanism names.
const (
	SCRAMSHA1   = "SCRAM-SHA-1"
	SCRAMSHA256 = "SCRAM-SHA-256"
	PLAIN       = "PLAIN"
	X509        = "MONGODB-X509"
)

// Credential is what the user configured.
//
// A Credential never shows its password: fmt's verbs (see Format) show
// "xxxxx" in its place, and encoding/json (and so log/slog's JSON handler)
// leaves out Password and Props (which may hold a token).
type Credential struct {
	// Source is the authentication database. Empty for the mechanism's
	// default: "admin" for SCRAM, "$external" for PLAIN and MONGODB-X509.
	Source   string
	Username string
	Password string `json:"-"`
	// PasswordSet is true when a password was given, even an empty one.
	PasswordSet bool
	// Mechanism is empty to negotiate SCRAM-SHA-256 or SCRAM-SHA-1.
	Mechanism string
	// Props are the mechanism properties; none of the supported mechanisms
	// takes any.
	Props map[string]string `json:"-"`
}

// Hello is what the handshake reply told about authentication.
type Hello struct {
	// SaslSupportedMechs is the reply's saslSupportedMechs; nil when the
	// reply had none.
	SaslSupportedMechs []string
	// SpeculativeAuthenticate is the reply's speculativeAuthenticate
	// document; nil when the server did not answer it.
	SpeculativeAuthenticate bson.Raw
	// Arbiter is true when the server is a replica set arbiter
	// (arbiterOnly with a setName): no authentication is possible there,
	// and none is attempted.
	Arbiter bool
}

// ErrUnsupportedMechanism is wrapped by the *Error for a mechanism mongopool
// does not implement (GSSAPI, MONGODB-AWS, MONGODB-OIDC, ...).
var ErrUnsupportedMechanism = errors.New("mechanism not supported by mongopool")

// Error is an authentication error: an invalid credential, an unsupported
// mechanism, a server that refused the credential or misbehaved, or a
// connection error met while authenticating (wrapped).
type Error struct {
	// Mechanism is the mechanism used, or the one asked for.
	Mechanism string
	Err       error
}

func (e *Error) Error() string {
	if e.Mechanism == "" {
		return "auth: " + e.Err.Error()
	}
	return "auth: " + e.Mechanism + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

func authErr(mech string, format string, args ...any) *Error {
	return &Error{Mechanism: mech, Err: fmt.Errorf(format, args...)}
}

// Authenticator authenticates connections with one credential. It is safe
// for concurrent use.
//
// No Authenticator shows its password, nor the keys derived from it: fmt's
// verbs and log/slog show its mechanism, source and user name only, and an
// error it returns shows "xxxxx" where the server's reply (or anything else)
// held the password or an encoding of it (see scrubber).
type Authenticator struct {
	mech        string // canonical name; "" to negotiate
	source      string
	username    string
	passwordSet bool
	// keys holds the password and what is derived from it. It is reached
	// through a function, which fmt prints as an address whatever the verb:
	// a struct that holds the Authenticator in an unexported field, which
	// fmt prints without calling its methods, cannot show them.
	keys func() *keyring

	nonceGen scram.NonceGeneratorFcn // tests only; nil: crypto/rand
}

// New checks the credential and returns its Authenticator. It fails, with an
// *Error, for an unsupported mechanism or a credential the mechanism cannot
// use.
func New(cred Credential) (*Authenticator, error) {
	mech, err := canonical(cred.Mechanism)
	if err != nil {
		return nil, err
	}
	k := &keyring{password: cred.Password, scrub: newScrubber(cred.Username, cred.Password)}
	a := &Authenticator{mech: mech, source: cred.Source, username: cred.Username,
		passwordSet: cred.PasswordSet || cred.Password != "", keys: func() *keyring { return k }}
	name := mech // "" when negotiated: the errors below then name no mechanism
	if len(cred.Props) > 0 {
		return nil, authErr(name, "mechanism properties are not supported")
	}
	hasPassword := a.passwordSet
	switch mech {
	case "", SCRAMSHA1, SCRAMSHA256, PLAIN:
		if cred.Username == "" {
			return nil, authErr(name, "a username is required")
		}
		if !hasPassword {
			return nil, authErr(name, "a password is required")
		}
		if a.source == "" {
			a.source = "admin"
			if mech == PLAIN {
				a.source = "$external"
			}
		}
	case X509:
		if hasPassword {
			return nil, authErr(name, "a password must not be given")
		}
		if a.source != "" && a.source != "$external" {
			return nil, authErr(name, "the source must be $external, not %q", a.source)
		}
		a.source = "$external"
	}
	if mech == SCRAMSHA256 {
		// Fail early on a password SASLprep rejects.
		if _, err := saslPrep(cred.Password); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// canonical returns the mechanism's canonical name ("" to negotiate), or an
// *Error wrapping ErrUnsupportedMechanism.
func canonical(m string) (string, error) {
	switch u := strings.ToUpper(m); u {
	case "", SCRAMSHA1, SCRAMSHA256, PLAIN, X509:
		return u, nil
	}
	return "", &Error{Mechanism: m, Err: fmt.Errorf(
		"%w: mongopool authenticates with SCRAM-SHA-256, SCRAM-SHA-1, PLAIN or MONGODB-X509 only", ErrUnsupportedMechanism)}
}

// Mechanism returns the configured mechanism, or "" when it is negotiated.
func (a *Authenticator) Mechanism() string { return a.mech }

// Source returns the authentication database in use.
func (a *Authenticator) Source() string { return a.source }

// SaslSupportedMechs returns the handshake's saslSupportedMechs value,
// "<source>.<username>", when the mechanism is negotiated, and "" otherwise.
// The username is not SASLprepped.
func (a *Authenticator) SaslSupportedMechs() string {
	if a.mech != "" {
		return ""
	}
	return a.source + "." + a.username
}

// Authenticate runs the authentication conversation on conn, choosing the
// default mechanism from hello when none is configured. It does nothing on an
// arbiter.
func (a *Authenticator) Authenticate(ctx context.Context, conn wire.RoundTripper, hello Hello) error {
	if hello.Arbiter {
		return nil
	}
	mech := a.mech
	if mech == "" {
		mech = negotiate(hello.SaslSupportedMechs)
	}
	switch mech {
	case SCRAMSHA1, SCRAMSHA256:
		c, err := a.newSCRAM(mech)
		if err != nil {
			return err
		}
		return c.run(ctx, conn)
	case PLAIN:
		return a.plain(ctx, conn)
	default: // X509
		return a.x509(ctx, conn)
	}
}

// negotiate applies the specification's default-mechanism rule.
func negotiate(mechs []string) string {
	for _, m := range mechs {
		if m == SCRAMSHA256 {
			return SCRAMSHA256
		}
	}
	return SCRAMSHA1
}

// Authenticate is New(cred) followed by Authenticate. A long-lived caller
// should keep an Authenticator instead, for its SCRAM key cache.
func Authenticate(ctx context.Context, conn wire.RoundTripper, cred Credential, hello Hello) error {
	a, err := New(cred)
	if err != nil {
		return err
	}
	return a.Authenticate(ctx, conn, hello)
}

// Speculation is the speculative authentication of one connection. It is
// used once, by one goroutine.
type Speculation struct {
	a    *Authenticator
	mech string
	cmd  bson.Raw
	sc   *scramConv // SCRAM only
	used bool
}

// Speculate starts a speculative authentication for a new connection: its
// Command goes into the handshake's speculativeAuthenticate. Without a
// configured mechanism it speculates with SCRAM-SHA-256, as the handshake
// specification requires. PLAIN has no speculative form; its Command is nil.
func (a *Authenticator) Speculate() (*Speculation, error) {
	s := &Speculation{a: a, mech: a.mech}
	switch a.mech {
	case "", SCRAMSHA256, SCRAMSHA1:
		if s.mech == "" {
			s.mech = SCRAMSHA256
			if _, err := saslPrep(a.keys().password); err != nil {
				// Negotiation may still pick SCRAM-SHA-1, which
				// does not SASLprep: do not speculate.
				return s, nil
			}
		}
		sc, err := a.newSCRAM(s.mech)
		if err != nil {
			return nil, err
		}
		start, err := sc.start()
		if err != nil {
			return nil, err
		}
		start = append(start, bson.E{Key: "db", Value: a.source})
		if s.cmd, err = marshal(s.mech, start); err != nil {
			return nil, err
		}
		s.sc = sc
	case X509:
		cmd, err := marshal(X509, a.x509Command())
		if err != nil {
			return nil, err
		}
		s.cmd = cmd
	}
	return s, nil
}

// Command returns the document for the handshake's speculativeAuthenticate,
// or nil when the mechanism has none.
func (s *Speculation) Command() bson.Raw {
	if s == nil {
		return nil
	}
	return s.cmd
}

// Finish completes authentication after the handshake. When the server
// answered the speculative command (hello.SpeculativeAuthenticate), the
// conversation goes on from that answer; otherwise the full conversation
// runs, with the default mechanism negotiated from hello.
func (s *Speculation) Finish(ctx context.Context, conn wire.RoundTripper, hello Hello) error {
	if hello.Arbiter {
		return nil
	}
	if s.used {
		return authErr(s.mech, "speculative authentication finished twice")
	}
	s.used = true
	if s.cmd == nil || len(hello.SpeculativeAuthenticate) == 0 {
		return s.a.Authenticate(ctx, conn, hello)
	}
	reply := hello.SpeculativeAuthenticate
	if err := reply.Validate(); err != nil {
		return authErr(s.mech, "malformed speculativeAuthenticate reply: %v", err)
	}
	if s.sc == nil { // X509: the reply is the authenticate command's
		return nil
	}
	r, err := parseSASLReply(s.mech, reply)
	if err != nil {
		return err
	}
	return s.sc.finish(ctx, conn, r)
}

// marshal encodes a command.
func marshal(mech string, d bson.D) (bson.Raw, error) {
	b, err := bson.Marshal(d)
	if err != nil {
		return nil, authErr(mech, "encoding a command: %v", err)
	}
	return b, nil
}

// roundTrip runs cmd (with "$db") and checks the reply's ok with
// wire.CheckReply. A failure is an *Error naming the command that wraps the
// cause: the *wire.CommandError of an ok:0 reply (whether conn or
// wire.CheckReply made it), or the connection's error, scrubbed of the
// password (a server may echo what it received).
func (a *Authenticator) roundTrip(ctx context.Context, conn wire.RoundTripper, mech, name string, d bson.D, db string) (bson.Raw, error) {
	d = append(d, bson.E{Key: "$db", Value: db})
	cmd, err := marshal(mech, d)
	if err != nil {
		return nil, err
	}
	reply, err := conn.RoundTrip(ctx, cmd)
	if err == nil {
		err = wire.CheckReply(reply)
	}
	if err != nil {
		return nil, &Error{Mechanism: mech, Err: fmt.Errorf("%s: %w", name, a.keys().scrub.error(err))}
	}
	return reply, nil
}
