package topology

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/handshake"
)

// The client's range of wire versions: the handshake's, which refuses the
// servers outside it.
const (
	clientMinWireVersion = handshake.MinWireVersion
	clientMaxWireVersion = handshake.MaxWireVersion
	// clientMinMongoDBVersion is the MongoDB release of
	// clientMinWireVersion, named in the compatibility error.
	clientMinMongoDBVersion = "4.2"
)

// Description is the client's view of the whole deployment: the
// specification's TopologyDescription.
//
// It is a value, never changed once made: Apply returns a new one. The zero
// Description is an Unknown topology without servers; NewDescription makes
// the initial one of a client.
type Description struct {
	// Type is the kind of deployment.
	Type TopologyType
	// SetName is the replica set's name: the one the settings require, or
	// the one the first member discovered reports; "" when none.
	SetName string
	// MaxElectionID and MaxSetVersion are the greatest (electionId,
	// setVersion) a primary has reported, by which stale primaries are
	// told; nil until one reports them.
	MaxElectionID *bson.ObjectID
	MaxSetVersion *int64
	// CompatibilityError is why a server's wire versions are out of the
	// client's range (the specification's compatibilityError); nil when
	// all servers are compatible. It wraps handshake.ErrIncompatible.
	CompatibilityError error
	// LogicalSessionTimeoutMinutes is the least session timeout of the
	// data-bearing servers; nil when one of them, or all of them, have
	// none.
	LogicalSessionTimeoutMinutes *int64

	// servers, by address, is never modified once the Description is made.
	servers map[string]ServerDescription
	// singleSeed is set when the settings had one seed: a Standalone then
	// turns an Unknown topology into a Single one.
	singleSeed bool
}

// Compatible reports whether all servers are compatible with the client
// (the specification's compatible field).
func (d Description) Compatible() bool { return d.CompatibilityError == nil }

// Servers returns the descriptions of the servers, sorted by address.
func (d Description) Servers() []ServerDescription {
	out := make([]ServerDescription, 0, len(d.servers))
	for _, a := range slices.Sorted(maps.Keys(d.servers)) {
		out = append(out, d.servers[a])
	}
	return out
}

// Server returns the description of the server at address, if the topology
// has it.
func (d Description) Server(address string) (ServerDescription, bool) {
	s, ok := d.servers[address]
	return s, ok
}

// Len returns the number of servers.
func (d Description) Len() int { return len(d.servers) }

// Equal reports whether d and o are alike: the same type, set name,
// maximum electionId and setVersion, compatibility (by message) and session
// timeout, and the same servers, equal by ServerDescription.Equal.
func (d Description) Equal(o Description) bool {
	return d.Type == o.Type && d.SetName == o.SetName &&
		ptrEqual(d.MaxElectionID, o.MaxElectionID) && ptrEqual(d.MaxSetVersion, o.MaxSetVersion) &&
		errorsEqual(d.CompatibilityError, o.CompatibilityError) &&
		ptrEqual(d.LogicalSessionTimeoutMinutes, o.LogicalSessionTimeoutMinutes) &&
		maps.EqualFunc(d.servers, o.servers, ServerDescription.Equal)
}

// Settings are what the connection string says of the topology, from which
// NewDescription makes the initial Description.
type Settings struct {
	// Seeds are the addresses of the seed list, "host:port"; host names
	// are lower-cased and duplicates dropped.
	Seeds []string
	// ReplicaSet is the replicaSet option: the name the replica set must
	// have; "" for none.
	ReplicaSet string
	// DirectConnection is the directConnection option: the client talks to
	// the one seed, whatever it is (TopologyType Single).
	DirectConnection bool
	// LoadBalanced is the loadBalanced option: the one seed is a load
	// balancer (TopologyType LoadBalanced).
	LoadBalanced bool
}

// ErrInvalidSettings is wrapped by the errors of NewDescription: the
// settings are a combination the specification does not allow.
var ErrInvalidSettings = errors.New("invalid topology settings")

// NewDescription returns the initial Description of a client with settings
// s: a server of type ServerUnknown for each seed, in a topology whose type
// follows the specification's table: Single with directConnection,
// ReplicaSetNoPrimary with a replicaSet name, Unknown otherwise; and
// LoadBalanced, with the one server of type LoadBalancer, with
// loadBalanced.
//
// It fails with an error wrapping ErrInvalidSettings when there is no seed,
// when directConnection or loadBalanced come with more than one seed, and
// when loadBalanced comes with directConnection or replicaSet.
func NewDescription(s Settings) (Description, error) {
	seeds := make([]string, 0, len(s.Seeds))
	for _, a := range s.Seeds {
		seeds = append(seeds, normalizeAddress(a))
	}
	slices.Sort(seeds)
	seeds = slices.Compact(seeds)
	invalid := func(msg string) (Description, error) {
		return Description{}, fmt.Errorf("topology: %w: %s", ErrInvalidSettings, msg)
	}
	switch {
	case len(seeds) == 0:
		return invalid("no seeds")
	case s.LoadBalanced && s.DirectConnection:
		return invalid("loadBalanced cannot be used with directConnection")
	case s.LoadBalanced && s.ReplicaSet != "":
		return invalid("loadBalanced cannot be used with replicaSet")
	case s.LoadBalanced && len(seeds) > 1:
		return invalid(fmt.Sprintf("loadBalanced requires exactly one seed, not %d", len(seeds)))
	case s.DirectConnection && len(seeds) > 1:
		return invalid(fmt.Sprintf("directConnection requires exactly one seed, not %d", len(seeds)))
	}
	d := Description{SetName: s.ReplicaSet, singleSeed: len(seeds) == 1, servers: make(map[string]ServerDescription, len(seeds))}
	switch {
	case s.LoadBalanced:
		d.Type = LoadBalanced
		d.servers[seeds[0]] = LoadBalancerServer(seeds[0])
		return d, nil
	case s.DirectConnection:
		d.Type = Single
	case s.ReplicaSet != "":
		d.Type = ReplicaSetNoPrimary
	}
	for _, a := range seeds {
		d.servers[a] = UnknownServer(a, nil)
	}
	return d, nil
}

// incompatibleError is a compatibility error, with the specification's
// message; it unwraps to handshake.ErrIncompatible.
type incompatibleError struct{ msg string }

func (e *incompatibleError) Error() string { return e.msg }
func (e *incompatibleError) Unwrap() error { return handshake.ErrIncompatible }

// compatibility returns the compatibility error of the first server, by
// address, whose wire versions do not meet the client's; nil when there is
// none. Servers of unknown type do not count. A load-balanced topology is
// always compatible.
func (d Description) compatibility() error {
	if d.Type == LoadBalanced {
		return nil
	}
	for _, s := range d.Servers() {
		if !s.Type.known() {
			continue
		}
		switch {
		case s.MinWireVersion > clientMaxWireVersion:
			return &incompatibleError{fmt.Sprintf(
				"Server at %s requires wire version %d, but this version of %s only supports up to %d.",
				s.Address, s.MinWireVersion, handshake.DriverName, clientMaxWireVersion)}
		case s.MaxWireVersion < clientMinWireVersion:
			return &incompatibleError{fmt.Sprintf(
				"Server at %s reports wire version %d, but this version of %s requires at least %d (MongoDB %s).",
				s.Address, s.MaxWireVersion, handshake.DriverName, clientMinWireVersion, clientMinMongoDBVersion)}
		}
	}
	return nil
}

// sessionTimeout returns the least logicalSessionTimeoutMinutes of the
// data-bearing servers; nil if one of them has none, or there is none. A
// load-balanced topology ignores it, as the load balancer specification
// requires.
func (d Description) sessionTimeout() *int64 {
	if d.Type == LoadBalanced {
		return nil
	}
	var least *int64
	for _, s := range d.servers {
		if !s.Type.DataBearing() {
			continue
		}
		if s.LogicalSessionTimeoutMinutes == nil {
			return nil
		}
		if least == nil || *s.LogicalSessionTimeoutMinutes < *least {
			least = s.LogicalSessionTimeoutMinutes
		}
	}
	return least
}
