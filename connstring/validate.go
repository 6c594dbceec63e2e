package connstring

import (
	"slices"
	"sort"
	"strings"
)

// validateOptions checks the combinations of options that do not depend on
// the hosts nor on the TXT record of a "mongodb+srv" host, so that they fail
// before any DNS look-up.
func (p *parser) validateOptions() error {
	c := p.cs

	// URI Options: conflicting TLS options.
	conflicts := [][2]string{
		{"tlsInsecure", "tlsAllowInvalidCertificates"},
		{"tlsInsecure", "tlsAllowInvalidHostnames"},
		{"tlsInsecure", "tlsDisableOCSPEndpointCheck"},
		{"tlsInsecure", "tlsDisableCertificateRevocationCheck"},
		{"tlsAllowInvalidCertificates", "tlsDisableOCSPEndpointCheck"},
		{"tlsAllowInvalidCertificates", "tlsDisableCertificateRevocationCheck"},
		{"tlsDisableOCSPEndpointCheck", "tlsDisableCertificateRevocationCheck"},
	}
	for _, pair := range conflicts {
		if c.IsSet(pair[0]) && c.IsSet(pair[1]) {
			return p.errorf(pair[0], "options %s and %s cannot both be given", pair[0], pair[1])
		}
	}
	for _, v := range p.tlsValues {
		if v != p.tlsValues[0] {
			return p.errorf("tls", "options tls and ssl are given with different values")
		}
	}

	// directConnection, srvMaxHosts and srvServiceName against the scheme.
	if c.srvHost {
		if isTrue(c.DirectConnection) {
			return p.errorf("directConnection", "directConnection=true is not allowed with mongodb+srv")
		}
	} else {
		if c.IsSet("srvMaxHosts") {
			return p.errorf("srvMaxHosts", "option srvMaxHosts requires the mongodb+srv scheme")
		}
		if c.IsSet("srvServiceName") {
			return p.errorf("srvServiceName", "option srvServiceName requires the mongodb+srv scheme")
		}
	}

	// SOCKS5 proxy.
	if c.ProxyHost == "" {
		for _, o := range []string{"proxyPort", "proxyUsername", "proxyPassword"} {
			if c.IsSet(o) {
				return p.errorf(o, "option %s requires proxyHost", o)
			}
		}
	}
	if (c.ProxyUsername == "") != (c.ProxyPassword == "") {
		return p.errorf("proxyUsername", "options proxyUsername and proxyPassword must be given together")
	}

	// Write concern: an unacknowledged write cannot wait for the journal.
	if c.W != nil && c.W.Tag == "" && c.W.N == 0 && isTrue(c.Journal) {
		return p.errorf("journal", "journal=true is not allowed with w=0")
	}

	// Connection pool.
	if c.MinPoolSize != nil && c.MaxPoolSize != nil && *c.MaxPoolSize > 0 && *c.MinPoolSize > *c.MaxPoolSize {
		return p.errorf("minPoolSize", "minPoolSize %s is greater than maxPoolSize %s",
			p.showNumber(*c.MinPoolSize), p.showNumber(*c.MaxPoolSize))
	}

	// Read preference: mode primary (given or by default) takes no tags and
	// no maximum staleness.
	if c.ReadPreference == "" || c.ReadPreference == "primary" {
		for _, set := range c.ReadPreferenceTags {
			if len(set) > 0 {
				return p.errorf("readPreferenceTags", "readPreferenceTags are not allowed with read preference mode primary")
			}
		}
		if c.MaxStalenessSeconds != nil && *c.MaxStalenessSeconds > 0 {
			return p.errorf("maxStalenessSeconds", "maxStalenessSeconds is not allowed with read preference mode primary")
		}
	}
	return nil
}

// validateResolved checks what depends on the hosts or on the TXT record:
// directConnection and loadBalanced against the hosts, srvMaxHosts, and the
// credentials (authSource may come from the TXT record).
func (p *parser) validateResolved() error {
	c := p.cs
	if isTrue(c.DirectConnection) && len(c.Hosts) > 1 {
		return p.errorf("directConnection", "directConnection=true is not allowed with more than one host")
	}
	if isTrue(c.LoadBalanced) {
		switch {
		case len(c.Hosts) > 1:
			return p.errorf("loadBalanced", "loadBalanced=true is not allowed with more than one host")
		case c.ReplicaSet != "":
			return p.errorf("loadBalanced", "loadBalanced=true is not allowed with replicaSet")
		case isTrue(c.DirectConnection):
			return p.errorf("loadBalanced", "loadBalanced=true is not allowed with directConnection=true")
		case c.SRVMaxHosts != nil && *c.SRVMaxHosts > 0:
			return p.errorf("loadBalanced", "loadBalanced=true is not allowed with a positive srvMaxHosts")
		}
	}
	if c.SRVMaxHosts != nil && *c.SRVMaxHosts > 0 && c.ReplicaSet != "" {
		return p.errorf("srvMaxHosts", "a positive srvMaxHosts is not allowed with replicaSet")
	}
	return p.validateAuth()
}

func isTrue(b *bool) bool { return b != nil && *b }

// mechanismProperties lists the authMechanismProperties that each mechanism
// takes from a connection string.
var mechanismProperties = map[string][]string{
	MechGSSAPI: {"SERVICE_NAME", "CANONICALIZE_HOST_NAME", "SERVICE_REALM", "SERVICE_HOST"},
	MechAWS:    {"AWS_SESSION_TOKEN"},
	MechOIDC:   {"ENVIRONMENT", "TOKEN_RESOURCE"},
}

// validateAuth applies the credential rules of the Authentication
// specification. Messages name the mechanism and the property, never a user
// name or a password.
func (p *parser) validateAuth() error {
	c := p.cs
	if c.AuthMechanism != "" {
		c.AuthConfigured = true
	}
	if !c.AuthConfigured {
		if len(c.AuthMechanismProperties) > 0 {
			return p.errorf("authMechanismProperties", "authMechanismProperties requires authMechanism")
		}
		return nil
	}
	mech := c.AuthMechanism
	name := mech
	if name == "" {
		name = "the default mechanism (SCRAM)"
	}
	if c.hasUserInfo && c.Username == "" {
		return p.errorf("", "the user name is empty; %s needs one", name)
	}

	// Properties.
	allowed := mechanismProperties[mech]
	names := make([]string, 0, len(c.AuthMechanismProperties))
	for k := range c.AuthMechanismProperties {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return p.errorf("authMechanismProperties", "%s takes no authMechanismProperties", name)
			}
			return p.errorf("authMechanismProperties", "authMechanismProperties %s does not apply to %s (valid: %s)",
				p.show(k), name, strings.Join(allowed, ", "))
		}
	}

	external := func() error {
		if c.AuthSource != "" && c.AuthSource != "$external" {
			return p.errorf("authSource", `%s requires authSource "$external", not %s`, name, p.show(c.AuthSource))
		}
		return nil
	}
	switch mech {
	case "", MechSCRAMSHA1, MechSCRAMSHA256, MechPLAIN:
		if c.Username == "" {
			return p.errorf("", "%s needs a user name", name)
		}
	case MechX509:
		if c.PasswordSet {
			return p.errorf("", "%s does not take a password", name)
		}
		return external()
	case MechGSSAPI:
		if c.Username == "" {
			return p.errorf("", "%s needs a user name", name)
		}
		if v, ok := c.AuthMechanismProperties["CANONICALIZE_HOST_NAME"]; ok {
			switch v {
			case "true", "false", "none", "forward", "forwardAndReverse":
			default:
				return p.errorf("authMechanismProperties",
					"CANONICALIZE_HOST_NAME must be none, forward, forwardAndReverse, true or false, not %s", p.show(v))
			}
		}
		return external()
	case MechAWS:
		if c.Username != "" && !c.PasswordSet {
			return p.errorf("", "%s needs a password with the user name", name)
		}
		return external()
	case MechOIDC:
		if c.PasswordSet {
			return p.errorf("", "%s does not take a password", name)
		}
		env, hasEnv := c.AuthMechanismProperties["ENVIRONMENT"]
		_, hasResource := c.AuthMechanismProperties["TOKEN_RESOURCE"]
		switch env {
		case "", "test", "azure", "gcp", "k8s":
		default:
			return p.errorf("authMechanismProperties", "ENVIRONMENT must be test, azure, gcp or k8s, not %s", p.show(env))
		}
		if hasEnv && env == "" {
			return p.errorf("authMechanismProperties", "ENVIRONMENT must not be empty")
		}
		cloud := env == "azure" || env == "gcp"
		if hasResource && !cloud {
			return p.errorf("authMechanismProperties", "TOKEN_RESOURCE requires ENVIRONMENT azure or gcp")
		}
		if cloud && !hasResource {
			return p.errorf("authMechanismProperties", "ENVIRONMENT %s requires TOKEN_RESOURCE", env)
		}
		if c.Username != "" && (env == "test" || env == "gcp") {
			return p.errorf("", "%s with ENVIRONMENT %s does not take a user name", name, env)
		}
		return external()
	}
	return nil
}
