package connstring

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
)

// Resolver looks up the SRV and TXT records of a "mongodb+srv" host.
// *net.Resolver satisfies it.
type Resolver interface {
	// LookupSRV looks up "_service._proto.name", as net.Resolver.LookupSRV.
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
	// LookupTXT looks up the TXT records of name, each one's strings joined.
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// txtOptions are the only options a TXT record may set (Initial DNS
// Seedlist Discovery and Load Balancer specifications).
var txtOptions = map[string]bool{"authsource": true, "replicaset": true, "loadbalanced": true}

// resolveSRV turns the host of a "mongodb+srv" connection string into the
// seed list (SRV records) and options (TXT record), per the Initial DNS
// Seedlist Discovery specification:
//   - the SRV look-up of "_{srvServiceName}._tcp.{host}" must return at least
//     one record, and every target must be in the host's parent domain (the
//     host without its first label; for a host of fewer than three labels,
//     the host itself, with at least one more label);
//   - at most one TXT record, of options authSource, replicaSet and
//     loadBalanced only, which the connection string's own options override;
//   - srvMaxHosts > 0 keeps that many hosts, picked at random.
func (p *parser) resolveSRV(ctx context.Context, r Resolver) error {
	c := p.cs
	service := c.SRVServiceName
	if service == "" {
		service = "mongodb"
	}
	// Messages quote the host unless it holds a secret; then they do not
	// show the resolver's error either, which would name it.
	host := p.quote(c.SRVHost)
	record := p.quote("_" + service + "._tcp." + c.SRVHost)
	hideErr := host == "<withheld>"
	_, srvs, err := r.LookupSRV(ctx, service, "tcp", c.SRVHost)
	if err != nil {
		return &Error{msg: fmt.Sprintf("SRV look-up of %s failed", record), err: err, hideErr: hideErr}
	}
	if len(srvs) == 0 {
		return &Error{msg: fmt.Sprintf("SRV look-up of %s returned no record", record)}
	}
	hosts := make([]string, 0, len(srvs))
	for _, srv := range srvs {
		if srv == nil {
			return &Error{msg: fmt.Sprintf("SRV look-up of %s returned an empty record", record)}
		}
		target := strings.TrimSuffix(asciiLower(srv.Target), ".")
		if !inSRVDomain(c.SRVHost, target) {
			return &Error{msg: fmt.Sprintf("SRV record %s of %s is not in the domain of %s",
				p.quote(srv.Target), record, host)}
		}
		if srv.Port == 0 {
			return &Error{msg: fmt.Sprintf("SRV record %s of %s has port 0", p.quote(srv.Target), record)}
		}
		hosts = append(hosts, net.JoinHostPort(target, strconv.Itoa(int(srv.Port))))
	}

	txts, err := r.LookupTXT(ctx, c.SRVHost)
	if err != nil {
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			return &Error{msg: fmt.Sprintf("TXT look-up of %s failed", host), err: err, hideErr: hideErr}
		}
		txts = nil
	}
	if len(txts) > 1 {
		return &Error{msg: fmt.Sprintf("%s has %d TXT records; at most one is allowed", host, len(txts))}
	}
	if len(txts) == 1 {
		if err := p.applyTXT(txts[0]); err != nil {
			return err
		}
	}

	if c.SRVMaxHosts != nil && *c.SRVMaxHosts > 0 && *c.SRVMaxHosts < len(hosts) {
		rand.Shuffle(len(hosts), func(i, j int) { hosts[i], hosts[j] = hosts[j], hosts[i] })
		hosts = hosts[:*c.SRVMaxHosts]
	}
	c.Hosts = hosts
	return nil
}

// inSRVDomain reports whether target (lower-case, without the final dot) may
// be returned for the SRV host.
func inSRVDomain(host, target string) bool {
	if target == "" || strings.Contains(target, "..") || strings.HasPrefix(target, ".") {
		return false
	}
	domain := host
	if strings.Count(host, ".") >= 2 {
		domain = host[strings.IndexByte(host, '.')+1:]
	}
	return strings.HasSuffix(target, "."+domain)
}

// applyTXT applies the options of a TXT record, those that the connection
// string does not set itself. The record is public DNS data, so messages may
// quote it.
func (p *parser) applyTXT(txt string) error {
	host := p.quote(p.cs.SRVHost)
	seen := make(map[string]bool)
	for _, pair := range strings.Split(txt, "&") {
		if pair == "" {
			continue
		}
		rawKey, rawValue, ok := strings.Cut(pair, "=")
		key, ok1 := pctDecode(rawKey)
		value, ok2 := pctDecode(rawValue)
		if !ok || !ok1 || !ok2 {
			return &Error{msg: fmt.Sprintf("TXT record of %s is not a list of key=value options: %s",
				host, p.quote(txt))}
		}
		lower := asciiLower(key)
		if !txtOptions[lower] {
			return &Error{msg: fmt.Sprintf("TXT record of %s has option %s; only authSource, replicaSet and loadBalanced are allowed",
				host, p.quote(key))}
		}
		def := optionsByKey[lower]
		if seen[lower] {
			p.warnf("TXT record of %s gives option %s more than once; the last valid value is used", host, def.name)
		}
		seen[lower] = true
		if p.cs.set[lower] {
			continue // the connection string's own (valid) value wins
		}
		if value == "" && def.name == "authSource" {
			return &Error{Option: def.name, msg: fmt.Sprintf("TXT record of %s has an empty authSource", host)}
		}
		if value == "" {
			p.warnf("TXT record of %s has an empty value for option %s, ignored", host, def.name)
			continue
		}
		err := def.apply(p, value)
		var iv *invalidValue
		switch {
		case err == nil:
			p.cs.set[lower] = true
		case errors.As(err, &iv):
			p.warnf("TXT record of %s: invalid value %s for option %s ignored: %s",
				host, p.quote(value), def.name, iv.reason)
		default:
			return err
		}
	}
	return nil
}
