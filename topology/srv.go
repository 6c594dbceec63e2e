package topology

import (
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
)

// This file is the pure part of SRV polling (the "Polling SRV Records for
// mongos Discovery" specification): which records of a rescan count, and
// what the hosts they name do to the topology. The poller is in srvpoll.go.

// applySRV returns the Description after a rescan of the SRV records of a
// mongodb+srv connection string found hosts ("host:port", the records that
// passed verification), by the specification's rules:
//
//   - only an Unknown or a Sharded topology is changed: any other (a
//     replica set, a single server, a load balancer) is left as it is, and
//     so is any topology when hosts is empty (a look-up that found nothing
//     must not empty the topology);
//   - the servers that are not among hosts are removed; those that are keep
//     their descriptions, as if no rescan had happened;
//   - the hosts the topology does not have are added as Unknown servers:
//     all of them when srvMaxHosts is 0, or else as many as the topology
//     lacks to have srvMaxHosts servers, picked at random by a
//     Fisher-Yates shuffle with rnd (math/rand/v2's global source when
//     nil), as the initial discovery picks them.
//
// Host names are compared without regard to case. The update tells the
// servers added and removed (for their monitors and pools, and the events);
// its Address is empty, as no server description was applied. Applied is
// false when the topology was left as it is for one of the reasons above.
func (d Description) applySRV(hosts []string, srvMaxHosts int, rnd *rand.Rand) update {
	u := update{Previous: d, Description: d}
	if len(hosts) == 0 || d.Type != TopologyUnknown && d.Type != Sharded {
		return u
	}
	found := make(map[string]bool, len(hosts))
	var fresh []string
	for _, h := range hosts {
		a := normalizeAddress(h)
		if found[a] {
			continue
		}
		found[a] = true
		if _, ok := d.servers.Get(a); !ok {
			fresh = append(fresh, a)
		}
	}
	next := d
	for c := d.servers.Cursor(); c.Next(); {
		if !found[c.Key()] {
			u.Removed = append(u.Removed, c.Key())
		}
	}
	for _, a := range u.Removed {
		next.servers = next.servers.Delete(a)
	}
	// The order of the records is the resolver's: sorting first makes the
	// pick depend on rnd alone.
	slices.Sort(fresh)
	if srvMaxHosts > 0 && next.servers.Len()+len(fresh) > srvMaxHosts {
		shuffle := rand.Shuffle
		if rnd != nil {
			shuffle = rnd.Shuffle
		}
		shuffle(len(fresh), func(i, j int) { fresh[i], fresh[j] = fresh[j], fresh[i] })
		fresh = fresh[:max(0, srvMaxHosts-next.servers.Len())]
	}
	for _, a := range fresh {
		next.servers = next.servers.Set(a, unknownServer(a, nil))
	}
	u.Added = fresh
	slices.Sort(u.Added)
	next = next.withAggregates()
	u.Description, u.Applied = next, true
	u.Changed = len(u.Added) > 0 || len(u.Removed) > 0 || !d.sameFields(next)
	return u
}

// srvAddresses verifies the records of a rescan of the SRV records of host
// (a mongodb+srv connection string's host name), record by
// record, as the specification asks of a rescan: valid are the addresses of
// the records whose target is in host's domain, as the initial discovery
// requires (for a host of three parts or more, host without its first part;
// for a shorter one, host itself, with at least one more part), and that
// have a port; rejected tells the others, to be logged. Targets are
// lower-cased, without their final dot.
func srvAddresses(host string, records []*net.SRV) (valid, rejected []string) {
	host = asciiLower(strings.TrimSuffix(host, "."))
	domain := host
	if strings.Count(host, ".") >= 2 {
		domain = host[strings.IndexByte(host, '.')+1:]
	}
	for _, r := range records {
		if r == nil {
			rejected = append(rejected, "an empty record")
			continue
		}
		port := strconv.Itoa(int(r.Port))
		target := asciiLower(strings.TrimSuffix(r.Target, "."))
		if r.Port == 0 || target == "" || strings.HasPrefix(target, ".") || strings.Contains(target, "..") ||
			!strings.HasSuffix(target, "."+domain) {
			rejected = append(rejected, net.JoinHostPort(r.Target, port))
			continue
		}
		valid = append(valid, net.JoinHostPort(target, port))
	}
	return valid, rejected
}
