package connstring

import (
	"errors"
	"sort"
	"time"

	"github.com/mongopool/mongopool/internal/redact"
)

// Schemes of a connection string.
const (
	SchemeMongoDB    = "mongodb"
	SchemeMongoDBSRV = "mongodb+srv"
)

// DefaultPort is the port of a host that gives none.
const DefaultPort = 27017

// Authentication mechanisms, as authMechanism spells them.
const (
	MechSCRAMSHA1   = "SCRAM-SHA-1"
	MechSCRAMSHA256 = "SCRAM-SHA-256"
	MechPLAIN       = "PLAIN"
	MechX509        = "MONGODB-X509"
	MechGSSAPI      = "GSSAPI"
	MechAWS         = "MONGODB-AWS"
	MechOIDC        = "MONGODB-OIDC"
)

// ErrUnsupportedAuthMechanism is wrapped by the error [Parse] returns for a
// valid authMechanism that mongopool does not implement (GSSAPI, MONGODB-AWS,
// MONGODB-OIDC).
var ErrUnsupportedAuthMechanism = errors.New("authentication mechanism not supported by mongopool")

// ConnString is a parsed connection string.
//
// Scalar options are pointers, nil when the connection string does not set
// them; string options are "" when unset; list and map options are nil when
// unset. Durations come from the options in milliseconds (or seconds for
// maxStalenessSeconds, kept as a number because -1 is meaningful).
//
// Password, TLSCertificateKeyFilePassword, ProxyPassword and the values of
// AuthMechanismProperties other than the public ones (AWS_SESSION_TOKEN
// among them) are secrets, and so may be the values of unknown options: the
// String, Redacted, GoString, Format, LogValue and MarshalJSON methods never
// show them, and neither do errors and warnings. Do not print them yourself.
type ConnString struct {
	// Scheme is SchemeMongoDB or SchemeMongoDBSRV.
	Scheme string
	// Hosts are the seeds, as "host:port" (the port is DefaultPort when the
	// connection string gives none), "[ipv6]:port", or the decoded path of a
	// Unix domain socket (ending in ".sock", without a port). Host names are
	// lower-cased. For "mongodb+srv" they are the results of the SRV look-up
	// (at most srvMaxHosts of them, picked at random).
	Hosts []string
	// SRVHost is the host name of a "mongodb+srv" connection string, whose
	// SRV and TXT records were looked up; "" otherwise.
	SRVHost string

	// Username is the decoded user name of the user information.
	Username string
	// Password is the decoded password; PasswordSet tells an empty password
	// ("user:@host") from none ("user@host").
	Password    string
	PasswordSet bool
	// AuthConfigured is true when the connection string asks for
	// authentication: it has user information ("user@host") or an
	// authMechanism. A database or an authSource alone does not ask for it.
	AuthConfigured bool
	// Database is the decoded database of the path ("" when none).
	Database string

	AuthMechanism string // authMechanism, canonical upper-case spelling
	AuthSource    string // authSource, as given; see ResolvedAuthSource
	// AuthMechanismProperties are the authMechanismProperties, with the
	// property names upper-cased (they are case-insensitive), plus
	// SERVICE_NAME from the deprecated gssapiServiceName.
	AuthMechanismProperties map[string]string

	AppName string // appname

	// Connection pool.
	MaxPoolSize      *int           // maxPoolSize; 0 means no limit
	MinPoolSize      *int           // minPoolSize
	MaxConnecting    *int           // maxConnecting; > 0
	MaxIdleTime      *time.Duration // maxIdleTimeMS; 0 means no limit
	WaitQueueTimeout *time.Duration // waitQueueTimeoutMS; 0 means no limit

	// Timeouts.
	Timeout                *time.Duration // timeoutMS; 0 means no limit
	ConnectTimeout         *time.Duration // connectTimeoutMS; 0 means no limit
	SocketTimeout          *time.Duration // socketTimeoutMS; 0 means no limit
	ServerSelectionTimeout *time.Duration // serverSelectionTimeoutMS; > 0
	HeartbeatFrequency     *time.Duration // heartbeatFrequencyMS; >= 500 ms
	LocalThreshold         *time.Duration // localThresholdMS

	// TLS. See TLSEnabled.
	TLS                                  *bool // tls, or its alias ssl
	TLSCAFile                            string
	TLSCertificateKeyFile                string
	TLSCertificateKeyFilePassword        string
	TLSAllowInvalidCertificates          *bool
	TLSAllowInvalidHostnames             *bool
	TLSInsecure                          *bool
	TLSDisableOCSPEndpointCheck          *bool
	TLSDisableCertificateRevocationCheck *bool

	// Compression.
	Compressors          []string // compressors: known names only (snappy, zlib, zstd), in order
	ZlibCompressionLevel *int     // zlibCompressionLevel, -1 to 9

	// Topology and server selection.
	DirectConnection       *bool
	LoadBalanced           *bool
	ReplicaSet             string
	ServerMonitoringMode   string // "stream", "poll" or "auto"
	ServerSelectionTryOnce *bool
	SRVMaxHosts            *int   // srvMaxHosts; 0 means no limit
	SRVServiceName         string // srvServiceName; the SRV look-up uses "mongodb" when ""

	// Read and write concerns, read preference, retries.
	ReadPreference      string   // primary, primaryPreferred, secondary, secondaryPreferred or nearest
	ReadPreferenceTags  []TagSet // one per readPreferenceTags, in order; an empty value is an empty set
	MaxStalenessSeconds *int     // maxStalenessSeconds: -1 (no maximum) or >= 90
	ReadConcernLevel    string
	W                   *WOption
	Journal             *bool
	WTimeout            *time.Duration // wTimeoutMS (or the deprecated wtimeout)
	RetryReads          *bool
	RetryWrites         *bool

	// Client backpressure.
	MaxAdaptiveRetries        *int
	EnableOverloadRetargeting *bool

	// SOCKS5 proxy.
	ProxyHost     string
	ProxyPort     *int
	ProxyUsername string
	ProxyPassword string

	// Warnings are the problems that the specifications say to report without
	// failing: unknown options, ignored invalid values, repeated options,
	// deprecated options. They never contain a secret. Each is one bounded
	// sentence starting with "connstring: "; a repeated one is given once,
	// ending with " (N times)"; at most 20 distinct ones are kept, and then a
	// last one tells how many were left out.
	Warnings []string

	raw         string          // the connection string as given: holds secrets
	redact      []redact.Span   // the parts of raw that Redacted replaces
	set         map[string]bool // lower-cased canonical names of the options set
	srvHost     bool            // scheme is mongodb+srv
	hasUserInfo bool            // the connection string has "...@" before its hosts
	// suspect is set when the connection string has no user information,
	// a colon in its host list and an "@" after it: a password with an
	// unescaped "/" or "?" may have landed in the hosts, database or options.
	suspect bool
}

// Tag is one name:value pair of a read preference tag set.
type Tag struct {
	Name  string
	Value string
}

// TagSet is one readPreferenceTags value, its tags in the order given.
type TagSet []Tag

// WOption is the w option: a number of nodes, or a tag such as "majority".
type WOption struct {
	N   int    // when Tag is ""
	Tag string // "majority" or a custom write concern name
}

// IsSet reports whether the connection string (or, for authSource,
// replicaSet and loadBalanced, the TXT record of a "mongodb+srv" host) set
// the option, with a valid value. Names are case-insensitive; the aliases
// ssl (of tls), wtimeout (of wTimeoutMS) and gssapiServiceName (of
// authMechanismProperties) are accepted.
func (c *ConnString) IsSet(option string) bool {
	key := asciiLower(option)
	if def, ok := optionsByKey[key]; ok {
		key = asciiLower(def.setName())
	}
	return c.set[key]
}

// TLSEnabled reports whether connections must use TLS: tls (or ssl) when it
// is given; otherwise true for a "mongodb+srv" connection string and when
// any other tls-prefixed option is set.
func (c *ConnString) TLSEnabled() bool {
	if c.TLS != nil {
		return *c.TLS
	}
	if c.srvHost {
		return true
	}
	for _, o := range []string{"tlsCAFile", "tlsCertificateKeyFile", "tlsCertificateKeyFilePassword",
		"tlsAllowInvalidCertificates", "tlsAllowInvalidHostnames", "tlsInsecure",
		"tlsDisableOCSPEndpointCheck", "tlsDisableCertificateRevocationCheck"} {
		if c.IsSet(o) {
			return true
		}
	}
	return false
}

// ResolvedAuthSource returns the database that authentication commands go
// to, per the Authentication specification: authSource when given;
// otherwise "$external" for MONGODB-X509, GSSAPI, MONGODB-AWS and
// MONGODB-OIDC; the database of the path or "$external" for PLAIN; the
// database of the path or "admin" for SCRAM and the default mechanism. It is
// "" when AuthConfigured is false.
func (c *ConnString) ResolvedAuthSource() string {
	if !c.AuthConfigured {
		return ""
	}
	if c.AuthSource != "" {
		return c.AuthSource
	}
	switch c.AuthMechanism {
	case MechX509, MechGSSAPI, MechAWS, MechOIDC:
		return "$external"
	case MechPLAIN:
		if c.Database != "" {
			return c.Database
		}
		return "$external"
	default:
		if c.Database != "" {
			return c.Database
		}
		return "admin"
	}
}

// SetOptions returns the canonical names of the options set, sorted.
func (c *ConnString) SetOptions() []string {
	var names []string
	for _, def := range optionDefs {
		if def.aliasOf == "" && c.set[asciiLower(def.name)] {
			names = append(names, def.name)
		}
	}
	sort.Strings(names)
	return names
}

// asciiLower lower-cases A to Z only, as the Connection String specification
// normalizes keys.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// asciiUpper upper-cases a to z only.
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}
