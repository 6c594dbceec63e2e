package topology

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/handshake"
)

// ServerDescription is the client's view of one server after its last
// check: the specification's ServerDescription.
//
// It is a value, never changed once made: a new check makes a new one. Its
// slices, map and pointers may be shared between copies, so they must not
// be modified. A field that the specification says may be null is a nil
// pointer (or the zero time for LastWriteDate) when it is.
type ServerDescription struct {
	// Address is the "host:port" the client connects to (not the server's
	// own "me"), with the host name lower-cased.
	Address string
	// Type is what the server is; ServerUnknown after a failed check.
	Type ServerType
	// Error is why the server is ServerUnknown, when a check or an
	// operation failed; nil otherwise.
	Error error

	// RoundTripTime is the duration of the check, valid when
	// HasRoundTripTime: only a successful check measures one. Averaging
	// the samples is the monitor's task.
	RoundTripTime    time.Duration
	HasRoundTripTime bool
	// MinRoundTripTime is the least of the monitor's recent samples (the
	// monitor sets it; newServerDescription leaves it zero).
	MinRoundTripTime time.Duration

	// LastWriteDate is lastWrite.lastWriteDate of the reply; the zero time
	// when absent.
	LastWriteDate time.Time
	// OpTime is lastWrite.opTime of the reply, kept opaque; nil when absent.
	OpTime bson.RawValue

	// MinWireVersion and MaxWireVersion are the server's range of wire
	// protocol versions, 0 when absent.
	MinWireVersion, MaxWireVersion int32

	// Me is the address the server has in its replica set's configuration,
	// lower-cased; "" when absent.
	Me string
	// Hosts, Passives and Arbiters are the server's view of its replica
	// set's members: lower-cased addresses, sorted, without duplicates.
	Hosts, Passives, Arbiters []string
	// Tags are the member's tags; nil when none.
	Tags map[string]string
	// SetName is the name of the server's replica set; "" when none.
	SetName string
	// ElectionID is the electionId of a primary; nil when absent.
	ElectionID *bson.ObjectID
	// SetVersion is the version of the replica set's configuration; nil
	// when absent.
	SetVersion *int64
	// Primary is the address of the primary as the server sees it,
	// lower-cased; "" when absent.
	Primary string

	// LastUpdateTime is when the check ended; the zero time for a server
	// never checked.
	LastUpdateTime time.Time

	// LogicalSessionTimeoutMinutes is the server's session timeout; nil
	// when the server does not support sessions.
	LogicalSessionTimeoutMinutes *int64
	// TopologyVersion is the topologyVersion of the reply, or of the state
	// change error that marked the server Unknown; nil when absent.
	TopologyVersion *handshake.TopologyVersion
	// IsCryptd is true for a mongocryptd.
	IsCryptd bool
	// ServiceID is the serviceId of a server behind a load balancer; nil
	// when absent.
	ServiceID *bson.ObjectID
	// HelloOK is true when the server supports the hello command.
	HelloOK bool
}

// Bounds on what newServerDescription keeps of a reply. A reply beyond them
// is refused: the server becomes Unknown with an error naming the bound, so
// that a hostile reply costs no more memory than a legitimate one.
const (
	// maxMembers bounds the entries of hosts, passives and arbiters
	// together. A replica set has at most 50 members.
	maxMembers = 256
	// maxTags bounds the tags of a member.
	maxTags = 256
	// maxAddressLen bounds an address: a host name of 253 bytes (or an
	// IPv6 literal with its zone, in brackets), a colon and a port.
	maxAddressLen = 300
	// maxNameLen bounds setName and the names and values of tags. The
	// handshake bounds setName the same way.
	maxNameLen = 1024
	// maxOpTimeLen bounds lastWrite.opTime, a document of a timestamp and
	// a term, some 30 bytes.
	maxOpTimeLen = 1024
)

// ErrInvalidReply is wrapped by the Error of a ServerDescription made from a
// reply that is malformed, has a field of the wrong type, or goes beyond
// the bounds of what is kept (see newServerDescription).
var ErrInvalidReply = errors.New("invalid hello reply")

// unknownServer returns the description of a server of type ServerUnknown,
// at address, because of err (nil for a server not checked yet).
func unknownServer(address string, err error) ServerDescription {
	return ServerDescription{Address: address, Error: err}
}

// loadBalancerServer returns the description of the load balancer at
// address: the only server of a LoadBalanced topology, whose other fields
// stay unset because it is never checked.
func loadBalancerServer(address string) ServerDescription {
	return ServerDescription{Address: address, Type: LoadBalancer}
}

// newServerDescription returns the description of the server at address
// from its reply to a successful hello (or legacy hello) command: a check
// that took rtt and ended at now.
//
// The type follows the specification's rules: RSGhost for isreplicaset:
// true; with a setName, RSPrimary when isWritablePrimary (or, when that is
// absent, the legacy ismaster) is true, otherwise RSOther when hidden, then
// RSSecondary, RSArbiter or RSOther; without one, Mongos for msg:
// "isdbgrid" and Standalone otherwise. Host names in me, primary, hosts,
// passives and arbiters are lower-cased.
//
// A reply with ok other than 1 gives a ServerUnknown whose Error is a
// *wire.CommandError. A reply that cannot be parsed gives a ServerUnknown whose
// Error wraps ErrInvalidReply: malformed BSON, a missing ok, a field the
// rules use with the wrong type, a reply larger than handshake.MaxReplySize,
// more than 256 entries in hosts, passives and arbiters together, more than
// 256 tags, an address longer than 300 bytes, a setName or a tag longer
// than 1024 bytes, or a lastWrite.opTime longer than 1024 bytes. None of
// them panics, and nothing is copied beyond these bounds.
func newServerDescription(address string, reply bson.Raw, rtt time.Duration, now time.Time) ServerDescription {
	s, err := parseReply(address, reply)
	if err != nil {
		u := unknownServer(address, err)
		u.LastUpdateTime = now
		return u
	}
	s.RoundTripTime, s.HasRoundTripTime = rtt, true
	s.LastUpdateTime = now
	return s
}

// Equal reports whether s and o describe the same server alike by the
// specification's "Server Description Equality": the same address, and
// equal values of the fields it marks (=): Error (by message), Type, the
// wire versions, Me, Hosts, Passives and Arbiters (as sets), Tags, SetName,
// ElectionID, SetVersion, Primary, LogicalSessionTimeoutMinutes,
// TopologyVersion and IsCryptd. The round trip times and LastUpdateTime do
// not count: a check that only measured time changes nothing.
func (s ServerDescription) Equal(o ServerDescription) bool {
	return s.Address == o.Address &&
		s.Type == o.Type &&
		errorsEqual(s.Error, o.Error) &&
		s.MinWireVersion == o.MinWireVersion && s.MaxWireVersion == o.MaxWireVersion &&
		s.Me == o.Me &&
		sameSet(s.Hosts, o.Hosts) && sameSet(s.Passives, o.Passives) && sameSet(s.Arbiters, o.Arbiters) &&
		maps.Equal(s.Tags, o.Tags) &&
		s.SetName == o.SetName &&
		ptrEqual(s.ElectionID, o.ElectionID) &&
		ptrEqual(s.SetVersion, o.SetVersion) &&
		s.Primary == o.Primary &&
		ptrEqual(s.LogicalSessionTimeoutMinutes, o.LogicalSessionTimeoutMinutes) &&
		ptrEqual(s.TopologyVersion, o.TopologyVersion) &&
		s.IsCryptd == o.IsCryptd
}

// members returns the addresses of hosts, passives and arbiters.
func (s ServerDescription) members() []string {
	return slices.Concat(s.Hosts, s.Passives, s.Arbiters)
}

// isMember reports whether addr is in s's hosts, passives or arbiters.
func (s ServerDescription) isMember(addr string) bool {
	return contains(s.Hosts, addr) || contains(s.Passives, addr) || contains(s.Arbiters, addr)
}

// contains reports whether the sorted list has addr.
func contains(sorted []string, addr string) bool {
	_, found := slices.BinarySearch(sorted, addr)
	return found
}

func errorsEqual(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if slices.Equal(a, b) {
		return true
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// normalizeAddress lower-cases the host name of an address. The zone of an
// IPv6 literal (an interface name) and the path of a Unix domain socket keep
// their case, as in the connection string's seeds.
func normalizeAddress(a string) string {
	if strings.HasSuffix(a, ".sock") {
		return a
	}
	if strings.HasPrefix(a, "[") {
		end := strings.IndexAny(a, "%]")
		if end < 0 {
			return asciiLower(a)
		}
		return asciiLower(a[:end]) + a[end:]
	}
	return asciiLower(a)
}

// asciiLower lower-cases ASCII letters only: host names are ASCII, and the
// Unicode rules of strings.ToLower could change a byte string's length.
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
