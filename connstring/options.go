package connstring

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// optionDef describes one URI option.
type optionDef struct {
	name string // canonical spelling, as the URI Options specification writes it
	// aliasOf is the canonical name of the option that this deprecated or
	// alternative key sets ("" for a canonical option).
	aliasOf string
	// list options take every instance; others keep the last valid one and
	// warn when repeated.
	list bool
	// onceOnly options are an error when repeated.
	onceOnly bool
	// allowEmpty options are given their empty value; others ignore it with a
	// warning, as the specification says of integers and booleans.
	allowEmpty bool
	// secret options never have their value shown.
	secret bool
	// apply parses the (decoded, non-empty unless allowEmpty) value and sets
	// the field. An *invalidValue error is a warning: the value is ignored.
	// Other errors are fatal.
	apply func(p *parser, v string) error
}

func (d *optionDef) setName() string {
	if d.aliasOf != "" {
		return d.aliasOf
	}
	return d.name
}

// invalidValue is the error of an option value that is ignored with a
// warning. Its reason never quotes the value.
type invalidValue struct{ reason string }

func (e *invalidValue) Error() string { return e.reason }

func invalid(reason string) error { return &invalidValue{reason} }

const (
	maxInt32      = math.MaxInt32
	maxDurationMS = math.MaxInt64 / int64(time.Millisecond)
)

// optionDefs is every option the parser knows.
var optionDefs = []*optionDef{
	{name: "appname", apply: func(p *parser, v string) error {
		// The handshake specification limits client.application.name to 128
		// bytes, and the server refuses a handshake with a longer one.
		if len(v) > 128 {
			return p.errorf("appname", "appname is %d bytes long; the limit is 128", len(v))
		}
		p.cs.AppName = v
		return nil
	}},
	{name: "authMechanism", apply: func(p *parser, v string) error {
		m, ok := canonicalMechanism(v)
		if !ok {
			return p.errorf("authMechanism", "unknown authMechanism %s (valid: %s)", p.show(v),
				strings.Join(allMechanisms, ", "))
		}
		p.cs.AuthMechanism = m
		return nil
	}},
	{name: "authMechanismProperties", apply: func(p *parser, v string) error {
		props, err := parseProperties(v)
		if err != nil {
			return err
		}
		p.cs.AuthMechanismProperties = props
		return nil
	}},
	{name: "gssapiServiceName", aliasOf: "authMechanismProperties", apply: func(p *parser, v string) error {
		p.gssapiServiceName = v
		return nil
	}},
	{name: "authSource", allowEmpty: true, apply: func(p *parser, v string) error {
		if v == "" {
			return p.errorf("authSource", "authSource must not be empty")
		}
		p.cs.AuthSource = v
		return nil
	}},
	{name: "compressors", apply: func(p *parser, v string) error {
		var list []string
		for _, name := range strings.Split(v, ",") {
			switch name {
			case "snappy", "zlib", "zstd":
				if !slices.Contains(list, name) {
					list = append(list, name)
				}
			default:
				p.warnf("unknown compressor %s in compressors ignored (known: snappy, zlib, zstd)", p.show(name))
			}
		}
		if len(list) == 0 {
			return invalid("no known compressor")
		}
		p.cs.Compressors = list
		return nil
	}},
	{name: "zlibCompressionLevel", apply: intOption(func(c *ConnString) **int { return &c.ZlibCompressionLevel },
		-1, 9, "must be an integer from -1 to 9")},
	{name: "connectTimeoutMS", apply: msOption(func(c *ConnString) **time.Duration { return &c.ConnectTimeout },
		0, maxInt32, "must be a non-negative integer")},
	{name: "socketTimeoutMS", apply: msOption(func(c *ConnString) **time.Duration { return &c.SocketTimeout },
		0, maxInt32, "must be a non-negative integer")},
	{name: "serverSelectionTimeoutMS", apply: msOption(func(c *ConnString) **time.Duration { return &c.ServerSelectionTimeout },
		1, maxInt32, "must be a positive integer")},
	{name: "heartbeatFrequencyMS", apply: msOption(func(c *ConnString) **time.Duration { return &c.HeartbeatFrequency },
		500, maxInt32, "must be an integer of at least 500")},
	{name: "localThresholdMS", apply: msOption(func(c *ConnString) **time.Duration { return &c.LocalThreshold },
		0, maxInt32, "must be a non-negative integer")},
	{name: "timeoutMS", apply: msOption(func(c *ConnString) **time.Duration { return &c.Timeout },
		0, maxDurationMS, "must be a non-negative integer")},
	{name: "maxIdleTimeMS", apply: msOption(func(c *ConnString) **time.Duration { return &c.MaxIdleTime },
		0, maxInt32, "must be a non-negative integer")},
	{name: "waitQueueTimeoutMS", apply: msOption(func(c *ConnString) **time.Duration { return &c.WaitQueueTimeout },
		0, maxInt32, "must be a non-negative integer")},
	{name: "maxPoolSize", apply: intOption(func(c *ConnString) **int { return &c.MaxPoolSize },
		0, maxInt32, "must be a non-negative integer")},
	{name: "minPoolSize", apply: intOption(func(c *ConnString) **int { return &c.MinPoolSize },
		0, maxInt32, "must be a non-negative integer")},
	{name: "maxConnecting", apply: intOption(func(c *ConnString) **int { return &c.MaxConnecting },
		1, maxInt32, "must be a positive integer")},
	{name: "tls", apply: tlsOption},
	{name: "ssl", aliasOf: "tls", apply: tlsOption},
	{name: "tlsCAFile", apply: stringOption(func(c *ConnString) *string { return &c.TLSCAFile })},
	{name: "tlsCertificateKeyFile", apply: stringOption(func(c *ConnString) *string { return &c.TLSCertificateKeyFile })},
	{name: "tlsCertificateKeyFilePassword", secret: true,
		apply: stringOption(func(c *ConnString) *string { return &c.TLSCertificateKeyFilePassword })},
	{name: "tlsAllowInvalidCertificates", apply: boolOption(func(c *ConnString) **bool { return &c.TLSAllowInvalidCertificates })},
	{name: "tlsAllowInvalidHostnames", apply: boolOption(func(c *ConnString) **bool { return &c.TLSAllowInvalidHostnames })},
	{name: "tlsInsecure", apply: boolOption(func(c *ConnString) **bool { return &c.TLSInsecure })},
	{name: "tlsDisableOCSPEndpointCheck", apply: boolOption(func(c *ConnString) **bool { return &c.TLSDisableOCSPEndpointCheck })},
	{name: "tlsDisableCertificateRevocationCheck",
		apply: boolOption(func(c *ConnString) **bool { return &c.TLSDisableCertificateRevocationCheck })},
	{name: "directConnection", apply: boolOption(func(c *ConnString) **bool { return &c.DirectConnection })},
	{name: "loadBalanced", apply: boolOption(func(c *ConnString) **bool { return &c.LoadBalanced })},
	{name: "replicaSet", apply: stringOption(func(c *ConnString) *string { return &c.ReplicaSet })},
	{name: "serverMonitoringMode", apply: func(p *parser, v string) error {
		switch v {
		case "stream", "poll", "auto":
			p.cs.ServerMonitoringMode = v
			return nil
		}
		return invalid(`must be "stream", "poll" or "auto"`)
	}},
	{name: "serverSelectionTryOnce", apply: boolOption(func(c *ConnString) **bool { return &c.ServerSelectionTryOnce })},
	{name: "srvMaxHosts", apply: intOption(func(c *ConnString) **int { return &c.SRVMaxHosts },
		0, maxInt32, "must be a non-negative integer")},
	{name: "srvServiceName", apply: func(p *parser, v string) error {
		if !validServiceName(v) {
			return invalid("must be a service name of RFC 6335: 1 to 15 letters, digits and inner hyphens, with a letter")
		}
		p.cs.SRVServiceName = v
		return nil
	}},
	{name: "readPreference", apply: func(p *parser, v string) error {
		switch v {
		case "primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest":
			p.cs.ReadPreference = v
			return nil
		}
		return invalid("must be primary, primaryPreferred, secondary, secondaryPreferred or nearest")
	}},
	{name: "readPreferenceTags", list: true, allowEmpty: true, apply: func(p *parser, v string) error {
		set := TagSet{}
		if v != "" {
			for _, pair := range strings.Split(v, ",") {
				name, value, ok := strings.Cut(pair, ":")
				if !ok || name == "" {
					return invalid(`must be a comma-separated list of name:value tags`)
				}
				set = append(set, Tag{Name: name, Value: value})
			}
		}
		p.cs.ReadPreferenceTags = append(p.cs.ReadPreferenceTags, set)
		return nil
	}},
	{name: "maxStalenessSeconds", apply: func(p *parser, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 || (n >= 0 && n < 90) || n > maxInt32 {
			return invalid("must be -1 (no maximum) or an integer of at least 90")
		}
		i := int(n)
		p.cs.MaxStalenessSeconds = &i
		return nil
	}},
	{name: "readConcernLevel", apply: stringOption(func(c *ConnString) *string { return &c.ReadConcernLevel })},
	{name: "w", apply: func(p *parser, v string) error {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil || isRangeError(err) {
			if err != nil || n < 0 || n > maxInt32 {
				return invalid("must be a non-negative integer or a tag")
			}
			p.cs.W = &WOption{N: int(n)}
			return nil
		}
		p.cs.W = &WOption{Tag: v}
		return nil
	}},
	{name: "journal", apply: boolOption(func(c *ConnString) **bool { return &c.Journal })},
	{name: "wTimeoutMS", apply: msOption(func(c *ConnString) **time.Duration { return &c.WTimeout },
		0, maxDurationMS, "must be a non-negative integer")},
	{name: "wtimeout", aliasOf: "wTimeoutMS", apply: func(p *parser, v string) error {
		n, err := parseIntRange(v, 0, maxDurationMS, "must be a non-negative integer")
		if err != nil {
			return err
		}
		d := time.Duration(n) * time.Millisecond
		p.wtimeout = &d
		return nil
	}},
	{name: "retryReads", apply: boolOption(func(c *ConnString) **bool { return &c.RetryReads })},
	{name: "retryWrites", apply: boolOption(func(c *ConnString) **bool { return &c.RetryWrites })},
	{name: "maxAdaptiveRetries", apply: intOption(func(c *ConnString) **int { return &c.MaxAdaptiveRetries },
		0, maxInt32, "must be a non-negative integer")},
	{name: "enableOverloadRetargeting", apply: boolOption(func(c *ConnString) **bool { return &c.EnableOverloadRetargeting })},
	// The SOCKS5 specification makes a repeated proxy option an error.
	{name: "proxyHost", onceOnly: true, apply: stringOption(func(c *ConnString) *string { return &c.ProxyHost })},
	{name: "proxyPort", onceOnly: true, apply: intOption(func(c *ConnString) **int { return &c.ProxyPort },
		0, 65535, "must be an integer from 0 to 65535")},
	{name: "proxyUsername", onceOnly: true, apply: stringOption(func(c *ConnString) *string { return &c.ProxyUsername })},
	{name: "proxyPassword", onceOnly: true, secret: true,
		apply: stringOption(func(c *ConnString) *string { return &c.ProxyPassword })},
}

// optionsByKey indexes optionDefs by lower-cased name.
var optionsByKey = func() map[string]*optionDef {
	m := make(map[string]*optionDef, len(optionDefs))
	for _, d := range optionDefs {
		m[asciiLower(d.name)] = d
	}
	return m
}()

// parseBool accepts "true" and "false" only: the alternative spellings of
// the specification ("1", "yes", ...) are a legacy that it allows but does
// not require, and they get a warning.
func parseBool(v string) (bool, error) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, invalid(`must be "true" or "false"`)
}

// tlsOption applies tls and its alias ssl. Every valid value is kept, so that
// validateOptions can refuse the two given with different values.
func tlsOption(p *parser, v string) error {
	b, err := parseBool(v)
	if err != nil {
		return err
	}
	p.tlsValues = append(p.tlsValues, b)
	p.cs.TLS = &b
	return nil
}

func boolOption(field func(*ConnString) **bool) func(*parser, string) error {
	return func(p *parser, v string) error {
		b, err := parseBool(v)
		if err != nil {
			return err
		}
		*field(p.cs) = &b
		return nil
	}
}

func stringOption(field func(*ConnString) *string) func(*parser, string) error {
	return func(p *parser, v string) error {
		*field(p.cs) = v
		return nil
	}
}

func parseIntRange(v string, min, max int64, rule string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		return 0, invalid(rule)
	}
	return n, nil
}

func intOption(field func(*ConnString) **int, min, max int64, rule string) func(*parser, string) error {
	return func(p *parser, v string) error {
		n, err := parseIntRange(v, min, max, rule)
		if err != nil {
			return err
		}
		i := int(n)
		*field(p.cs) = &i
		return nil
	}
}

func msOption(field func(*ConnString) **time.Duration, min, max int64, rule string) func(*parser, string) error {
	return func(p *parser, v string) error {
		n, err := parseIntRange(v, min, max, rule)
		if err != nil {
			return err
		}
		d := time.Duration(n) * time.Millisecond
		*field(p.cs) = &d
		return nil
	}
}

func isRangeError(err error) bool {
	var ne *strconv.NumError
	return errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange)
}

// parseProperties parses authMechanismProperties: comma-separated
// NAME:value pairs, the value being everything after the first colon (it may
// hold colons, as in TOKEN_RESOURCE:mongodb://foo). Names are upper-cased:
// they are case-insensitive.
func parseProperties(v string) (map[string]string, error) {
	props := make(map[string]string)
	for _, pair := range strings.Split(v, ",") {
		name, value, ok := strings.Cut(pair, ":")
		if !ok || name == "" {
			return nil, invalid("must be a comma-separated list of NAME:value pairs " +
				"(a value cannot contain a comma)")
		}
		props[asciiUpper(name)] = value
	}
	return props, nil
}

// validServiceName reports whether s is a service name of RFC 6335 section
// 5.1: 1 to 15 characters, letters, digits and hyphens, at least one letter,
// no hyphen at either end and no two hyphens in a row.
func validServiceName(s string) bool {
	if len(s) == 0 || len(s) > 15 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	letter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			letter = true
		case '0' <= c && c <= '9', c == '-':
		default:
			return false
		}
	}
	return letter
}

var allMechanisms = []string{MechSCRAMSHA256, MechSCRAMSHA1, MechPLAIN, MechX509, MechGSSAPI, MechAWS, MechOIDC}

// canonicalMechanism returns the canonical spelling of an authMechanism,
// matched case-insensitively.
func canonicalMechanism(v string) (string, bool) {
	u := asciiUpper(v)
	for _, m := range allMechanisms {
		if u == m {
			return m, true
		}
	}
	return "", false
}
