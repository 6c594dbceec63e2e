// Package connstring parses MongoDB connection strings ("mongodb://..." and
// "mongodb+srv://...") into typed options, following the Connection String
// and URI Options specifications, the connection-string rules of the
// Authentication specification, and the URI validation of the Initial DNS
// Seedlist Discovery and Load Balancer specifications.
//
// # Parsing
//
// [Parse] parses a connection string; a "mongodb+srv" one is resolved through
// the system's DNS resolver. [ParseWithResolver] takes a context and a
// [Resolver] (a *net.Resolver satisfies it; tests pass a fake one).
//
// Every option records whether the connection string set it: scalar options
// are pointers (nil when unset), string options are "" when unset (an empty
// value is ignored with a warning, so a set string is never empty), lists and
// maps are nil when unset. [ConnString.IsSet] answers the same question by
// option name.
//
// # Errors and warnings
//
// As the specifications require, an invalid value of an option (a
// non-numeric maxPoolSize, a boolean that is neither "true" nor "false", an
// empty value, ...) and an unknown option are not errors: the option is
// ignored and a message is added to [ConnString.Warnings]. Malformed
// connection strings, conflicting options (tlsInsecure with
// tlsAllowInvalidCertificates, directConnection=true with several hosts,
// loadBalanced=true with a replicaSet, ...), invalid credentials, an unknown
// authMechanism, an empty authSource and an appname over 128 bytes are
// errors, of type [*Error]. Messages name the option and, where it is safe,
// the value. A repeated option keeps its last valid value, with a warning
// (readPreferenceTags is a list; a repeated proxy option is an error).
//
// What a message shows is bounded, whatever the input: a connection string
// over 64 KiB is refused at once; a message quotes at most the first 64
// bytes of a value, followed by "..." and the value's length; a host name
// or an IP literal over 253 bytes (the DNS limit) and a Unix domain socket
// path over 255 bytes are errors, so that no address in the pool's events
// and logs is longer. Warnings are human-readable
// sentences that start with "connstring: ": a warning repeated (the same
// unknown option given a thousand times) is kept once, with " (N times)";
// at most 20 distinct warnings are kept, in order, and a last one tells how
// many more there were. Parsing takes time and memory linear in the length
// of the connection string.
//
// Legacy forms that the Connection String specification only allows ("MAY")
// are not supported: ";" as a separator between options, and the alternative
// boolean spellings ("1", "yes", "y", "t", ...), which get a warning and are
// ignored.
//
// # Authentication mechanisms
//
// The parser knows every mechanism of the Authentication specification and
// validates their credentials, so that it passes the specification's tests.
// mongopool itself only implements SCRAM-SHA-256, SCRAM-SHA-1, PLAIN and
// MONGODB-X509: [Parse] and [ParseWithResolver] return an error wrapping
// [ErrUnsupportedAuthMechanism] for GSSAPI, MONGODB-AWS and MONGODB-OIDC,
// instead of a client that would fail (or hang) at its first connection. The
// specification-level parse without that check is internal to the package and
// used by its specification tests.
//
// # TLS
//
// [ConnString.TLS] is what the connection string says (tls or its alias
// ssl). [ConnString.TLSEnabled] is the effective setting: TLS is on when
// tls=true; when tls is not given, it is on for "mongodb+srv" and when any
// other tls-prefixed option is present (tlsCAFile, tlsInsecure, ...); tls=false
// always turns it off.
//
// # Secrets
//
// The secrets are the password of the user information, the values of
// tlsCertificateKeyFilePassword and proxyPassword, and the values of the
// authMechanismProperties other than the public ones (SERVICE_NAME,
// CANONICALIZE_HOST_NAME, SERVICE_REALM, SERVICE_HOST, ENVIRONMENT and
// TOKEN_RESOURCE): AWS_SESSION_TOKEN, or a misspelling of it. They never
// appear in an error, a warning, [ConnString.String], [ConnString.Redacted],
// fmt's verbs (%v, %+v, %#v, %s, %q, ...), a log/slog value or
// encoding/json's output: they are replaced by "xxxxx", and a message
// withholds any value that holds one (and every value, when a connection
// string has more than 16 distinct secrets). A repeated secret option has
// every one of its values hidden.
//
// A value that may be a secret put where none is expected is hidden too:
// the value of an unknown option (a misspelled "pasword=" or "proxyPasswd="
// is unknown) never shows, in Redacted or in its warning, which names the
// option only; an authMechanismProperties that is not a list of NAME:value
// pairs, or has a property that is not public, is hidden whole. A
// connection string with an "@" after its host list (which may come from a
// password whose "/" or "?" was not percent-encoded) gets errors and
// warnings that quote nothing from it.
package connstring
