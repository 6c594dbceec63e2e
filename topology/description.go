package topology

import (
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/internal/ptree"
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
// It is a value, never changed once made: an update makes a new one, which
// shares with the one before all it did not change (its servers are kept in
// a persistent tree), so that making it costs the change, not the size of
// the topology, and any number of readers may keep and read old ones. The
// zero Description is an Unknown topology without servers; newDescription
// makes the initial one of a client.
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

	// servers, by address, is never modified once the Description is
	// made: updates make new versions of it.
	servers serverMap
	// singleSeed is set when the settings had one seed: a Standalone then
	// turns an Unknown topology into a Single one.
	singleSeed bool
}

// Compatible reports whether all servers are compatible with the client
// (the specification's compatible field).
func (d Description) Compatible() bool { return d.CompatibilityError == nil }

// Servers returns the descriptions of the servers, sorted by address.
func (d Description) Servers() []ServerDescription {
	out := make([]ServerDescription, 0, d.servers.Len())
	for c := d.servers.Cursor(); c.Next(); {
		out = append(out, c.Value())
	}
	return out
}

// Server returns the description of the server at address, if the topology
// has it.
func (d Description) Server(address string) (ServerDescription, bool) {
	return d.servers.Get(address)
}

// Len returns the number of servers.
func (d Description) Len() int { return d.servers.Len() }

// Equal reports whether d and o are alike: the same type, set name,
// maximum electionId and setVersion, compatibility (by message) and session
// timeout, and the same servers, equal by ServerDescription.Equal. It
// compares every server: O(n).
func (d Description) Equal(o Description) bool {
	if !d.sameFields(o) || d.servers.Len() != o.servers.Len() {
		return false
	}
	if d.servers.Same(o.servers) {
		return true
	}
	a, b := d.servers.Cursor(), o.servers.Cursor()
	for a.Next() && b.Next() {
		if a.Key() != b.Key() || !a.Value().Equal(b.Value()) {
			return false
		}
	}
	return true
}

// sameFields reports whether d and o are alike but for their servers.
func (d Description) sameFields(o Description) bool {
	return d.Type == o.Type && d.SetName == o.SetName &&
		ptrEqual(d.MaxElectionID, o.MaxElectionID) && ptrEqual(d.MaxSetVersion, o.MaxSetVersion) &&
		errorsEqual(d.CompatibilityError, o.CompatibilityError) &&
		ptrEqual(d.LogicalSessionTimeoutMinutes, o.LogicalSessionTimeoutMinutes)
}

// serverMap holds a Description's servers, by address, with what the
// topology needs to know of all of them at once (serverSummary) kept up to
// date in O(log n) per change.
type serverMap = ptree.Map[ServerDescription, serverSummary, summarizeServers]

// serverCursor walks a serverMap (see ptree.Map.Start).
type serverCursor = ptree.Cursor[ServerDescription, serverSummary]

// serverSummary is what the rules need of all the servers: how many are
// primaries, the least session timeout of the data-bearing ones, and the
// first (by address) whose wire versions the client cannot speak.
type serverSummary struct {
	primaries int
	// noTimeout counts the data-bearing servers without a session timeout;
	// minTimeout is the least of the others', when hasTimeout.
	noTimeout  int
	hasTimeout bool
	minTimeout int64
	// incompatible is the first incompatible server; nil when none.
	incompatible *incompatibleServer
}

// incompatibleServer is what the compatibility error says of a server.
type incompatibleServer struct {
	address          string
	minWire, maxWire int32
}

// summarizeServers computes serverSummary for the tree.
type summarizeServers struct{}

// Leaf is the summary of one server.
func (summarizeServers) Leaf(_ string, s ServerDescription) serverSummary {
	var sum serverSummary
	if s.Type == RSPrimary {
		sum.primaries = 1
	}
	if s.Type.DataBearing() {
		if s.LogicalSessionTimeoutMinutes == nil {
			sum.noTimeout = 1
		} else {
			sum.hasTimeout, sum.minTimeout = true, *s.LogicalSessionTimeoutMinutes
		}
	}
	if s.Type.known() && (s.MinWireVersion > clientMaxWireVersion || s.MaxWireVersion < clientMinWireVersion) {
		sum.incompatible = &incompatibleServer{s.Address, s.MinWireVersion, s.MaxWireVersion}
	}
	return sum
}

// Join is the summary of two runs of servers, left's addresses before
// right's.
func (summarizeServers) Join(l, r serverSummary) serverSummary {
	sum := serverSummary{
		primaries:    l.primaries + r.primaries,
		noTimeout:    l.noTimeout + r.noTimeout,
		hasTimeout:   l.hasTimeout || r.hasTimeout,
		incompatible: l.incompatible,
	}
	switch {
	case l.hasTimeout && r.hasTimeout:
		sum.minTimeout = min(l.minTimeout, r.minTimeout)
	case l.hasTimeout:
		sum.minTimeout = l.minTimeout
	default:
		sum.minTimeout = r.minTimeout
	}
	if sum.incompatible == nil {
		sum.incompatible = r.incompatible
	}
	return sum
}

// primary returns the primary, if there is one: the rules keep at most one.
func (d Description) primary() (ServerDescription, bool) {
	var p ServerDescription
	found := false
	d.servers.Walk(hasPrimaries, func(_ string, s ServerDescription) bool {
		if s.Type == RSPrimary {
			p, found = s, true
			return false
		}
		return true
	})
	return p, found
}

// hasPrimaries tells Walk to look only where there are primaries.
func hasPrimaries(s serverSummary) bool { return s.primaries > 0 }

// Settings are what the connection string says of the topology, from which
// newDescription makes the initial Description.
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

// ErrInvalidSettings is wrapped by the errors of newDescription: the
// settings are a combination the specification does not allow.
var ErrInvalidSettings = errors.New("invalid topology settings")

// newDescription returns the initial Description of a client with settings
// s: a server of type ServerUnknown for each seed, in a topology whose type
// follows the specification's table: Single with directConnection,
// ReplicaSetNoPrimary with a replicaSet name, Unknown otherwise; and
// LoadBalanced, with the one server of type LoadBalancer, with
// loadBalanced.
//
// It fails with an error wrapping ErrInvalidSettings when there is no seed,
// when directConnection or loadBalanced come with more than one seed, and
// when loadBalanced comes with directConnection or replicaSet.
func newDescription(s Settings) (Description, error) {
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
	d := Description{SetName: s.ReplicaSet, singleSeed: len(seeds) == 1}
	switch {
	case s.LoadBalanced:
		d.Type = LoadBalanced
		d.servers = d.servers.Set(seeds[0], loadBalancerServer(seeds[0]))
		return d, nil
	case s.DirectConnection:
		d.Type = Single
	case s.ReplicaSet != "":
		d.Type = ReplicaSetNoPrimary
	}
	unknown := make([]ServerDescription, len(seeds))
	for i, a := range seeds {
		unknown[i] = unknownServer(a, nil)
	}
	d.servers = ptree.FromSorted[ServerDescription, serverSummary, summarizeServers](seeds, unknown)
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
	s := d.servers.Summary().incompatible
	if d.Type == LoadBalanced || s == nil {
		return nil
	}
	if s.minWire > clientMaxWireVersion {
		return &incompatibleError{fmt.Sprintf(
			"Server at %s requires wire version %d, but this version of %s only supports up to %d.",
			s.address, s.minWire, handshake.DriverName, clientMaxWireVersion)}
	}
	return &incompatibleError{fmt.Sprintf(
		"Server at %s reports wire version %d, but this version of %s requires at least %d (MongoDB %s).",
		s.address, s.maxWire, handshake.DriverName, clientMinWireVersion, clientMinMongoDBVersion)}
}

// sessionTimeout returns the least logicalSessionTimeoutMinutes of the
// data-bearing servers; nil if one of them has none, or there is none. A
// load-balanced topology ignores it, as the load balancer specification
// requires. It returns the current one when it has not changed, so that an
// update allocates nothing for it.
func (d Description) sessionTimeout(current *int64) *int64 {
	sum := d.servers.Summary()
	if d.Type == LoadBalanced || sum.noTimeout > 0 || !sum.hasTimeout {
		return nil
	}
	if current != nil && *current == sum.minTimeout {
		return current
	}
	least := sum.minTimeout
	return &least
}

// withAggregates returns d with its compatibility error and session timeout
// computed again from its servers. The compatibility error is kept when its
// message has not changed.
func (d Description) withAggregates() Description {
	if c := d.compatibility(); !errorsEqual(c, d.CompatibilityError) {
		d.CompatibilityError = c
	}
	d.LogicalSessionTimeoutMinutes = d.sessionTimeout(d.LogicalSessionTimeoutMinutes)
	return d
}
