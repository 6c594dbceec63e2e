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
// The password of the user information, tlsCertificateKeyFilePassword and
// proxyPassword (and an AWS_SESSION_TOKEN) never appear in an error, a
// warning, [ConnString.String], [ConnString.Redacted], fmt's verbs (%v, %+v,
// %#v, %s, %q), a log/slog value or encoding/json's output: they are
// replaced by "xxxxx", and a message withholds any value that holds one. A
// connection string with an "@" after its host list (which may come from a
// password whose "/" or "?" was not percent-encoded) gets errors and
// warnings that quote nothing from it.
package connstring
