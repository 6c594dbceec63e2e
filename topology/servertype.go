package topology

import "strconv"

// ServerType is what a server is, as far as the client can tell from its
// last check: the specification's ServerType. The zero value is
// ServerUnknown.
type ServerType uint8

// The server types of the specification. ServerUnknown is the
// specification's "Unknown", prefixed to keep it apart from TopologyUnknown.
const (
	// ServerUnknown: not checked yet, or the last check failed.
	ServerUnknown ServerType = iota
	// Standalone: a mongod that is not a replica set member.
	Standalone
	// Mongos: a router of a sharded cluster (msg: "isdbgrid").
	Mongos
	// PossiblePrimary: not checked yet, but a member named it the primary.
	// For the client it is a ServerUnknown; the type only records the hint.
	PossiblePrimary
	// RSPrimary: the replica set's writable primary.
	RSPrimary
	// RSSecondary: a secondary of a replica set.
	RSSecondary
	// RSArbiter: an arbiter, which holds no data.
	RSArbiter
	// RSOther: a member that is hidden, starting up or recovering.
	RSOther
	// RSGhost: a member of no set yet, or removed from one
	// (isreplicaset: true).
	RSGhost
	// LoadBalancer: the load balancer in front of the servers of a
	// load-balanced topology; it is never checked.
	LoadBalancer
)

var serverTypeNames = [...]string{
	ServerUnknown:   "Unknown",
	Standalone:      "Standalone",
	Mongos:          "Mongos",
	PossiblePrimary: "PossiblePrimary",
	RSPrimary:       "RSPrimary",
	RSSecondary:     "RSSecondary",
	RSArbiter:       "RSArbiter",
	RSOther:         "RSOther",
	RSGhost:         "RSGhost",
	LoadBalancer:    "LoadBalancer",
}

// String returns the specification's name of t, such as "RSPrimary".
func (t ServerType) String() string {
	if int(t) < len(serverTypeNames) {
		return serverTypeNames[t]
	}
	return "ServerType(" + strconv.Itoa(int(t)) + ")"
}

// DataBearing reports whether operations can read data from a server of
// type t: a standalone, a mongos, a primary, a secondary or a load balancer
// (the specification's data-bearing server types).
func (t ServerType) DataBearing() bool {
	switch t {
	case Standalone, Mongos, RSPrimary, RSSecondary, LoadBalancer:
		return true
	}
	return false
}

// known reports whether t is what a successful check says (PossiblePrimary
// is only a hint, an Unknown to the client).
func (t ServerType) known() bool { return t != ServerUnknown && t != PossiblePrimary }

// TopologyType is the kind of deployment the client believes it talks to:
// the specification's TopologyType. The zero value is TopologyUnknown.
type TopologyType uint8

// The topology types of the specification. TopologyUnknown is the
// specification's "Unknown", prefixed to keep it apart from ServerUnknown.
const (
	// TopologyUnknown: no server has told what the deployment is yet.
	TopologyUnknown TopologyType = iota
	// Single: one server, connected to directly, whatever its type.
	Single
	// ReplicaSetNoPrimary: a replica set whose primary is not known.
	ReplicaSetNoPrimary
	// ReplicaSetWithPrimary: a replica set with a known primary.
	ReplicaSetWithPrimary
	// Sharded: one or more mongoses.
	Sharded
	// LoadBalanced: one load balancer in front of the servers.
	LoadBalanced
)

var topologyTypeNames = [...]string{
	TopologyUnknown:       "Unknown",
	Single:                "Single",
	ReplicaSetNoPrimary:   "ReplicaSetNoPrimary",
	ReplicaSetWithPrimary: "ReplicaSetWithPrimary",
	Sharded:               "Sharded",
	LoadBalanced:          "LoadBalanced",
}

// String returns the specification's name of t, such as
// "ReplicaSetWithPrimary".
func (t TopologyType) String() string {
	if int(t) < len(topologyTypeNames) {
		return topologyTypeNames[t]
	}
	return "TopologyType(" + strconv.Itoa(int(t)) + ")"
}
