package topology

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mongopool/mongopool/connstring"
)

// DefaultLocalThreshold is localThresholdMS's default: the width of the
// latency window.
const DefaultLocalThreshold = 15 * time.Millisecond

// Criteria are what an operation asks of the server it is to run on: the
// specification's operation type and read preference, with the client's
// options that selection depends on.
//
// The zero Criteria are those of a read with the default read preference
// (primary), the default heartbeatFrequencyMS and localThresholdMS, and no
// server deprioritized.
type Criteria struct {
	// Write is true for a write operation, which ReadPref does not apply to.
	Write bool
	// ReadPref is the read preference of a read operation.
	ReadPref ReadPref
	// HeartbeatFrequency is the client's heartbeatFrequencyMS, by which the
	// staleness of secondaries is estimated and a maximum staleness is
	// bounded; zero (or negative) means DefaultHeartbeatFrequency.
	HeartbeatFrequency time.Duration
	// LocalThreshold is the client's localThresholdMS, the width of the
	// latency window: zero means DefaultLocalThreshold, a negative value a
	// window of width zero (only the servers with the shortest round trip
	// time), which is what localThresholdMS=0 asks for.
	LocalThreshold time.Duration
	// Deprioritized are the addresses of servers that an earlier attempt of
	// the operation failed on: a deprioritized server is suitable only when
	// no other server is, in every type of topology.
	Deprioritized []string
}

// CriteriaFromConnString returns the Criteria of a read with the
// connection string's read preference (see ReadPrefFromConnString),
// heartbeatFrequencyMS and localThresholdMS, or their defaults when it does
// not set them. A nil cs gives the defaults.
func CriteriaFromConnString(cs *connstring.ConnString) (Criteria, error) {
	rp, err := ReadPrefFromConnString(cs)
	if err != nil {
		return Criteria{}, err
	}
	c := Criteria{ReadPref: rp}
	if cs == nil {
		return c, nil
	}
	if cs.HeartbeatFrequency != nil {
		c.HeartbeatFrequency = *cs.HeartbeatFrequency
	}
	if cs.LocalThreshold != nil {
		c.LocalThreshold = *cs.LocalThreshold
		if c.LocalThreshold == 0 {
			c.LocalThreshold = -1
		}
	}
	return c, nil
}

// heartbeat returns the heartbeat frequency c stands for.
func (c Criteria) heartbeat() time.Duration {
	if c.HeartbeatFrequency <= 0 {
		return DefaultHeartbeatFrequency
	}
	return c.HeartbeatFrequency
}

// threshold returns the width of the latency window c stands for.
func (c Criteria) threshold() time.Duration {
	switch {
	case c.LocalThreshold == 0:
		return DefaultLocalThreshold
	case c.LocalThreshold < 0:
		return 0
	}
	return c.LocalThreshold
}

// String describes the criteria for messages, bounded in length: "write",
// or "read with read preference " and the read preference, and the
// deprioritized servers when there are some.
func (c Criteria) String() string {
	var b strings.Builder
	if c.Write {
		b.WriteString("write")
	} else {
		b.WriteString("read with read preference ")
		b.WriteString(c.ReadPref.String())
	}
	if len(c.Deprioritized) > 0 {
		b.WriteString(", deprioritized [")
		for i, a := range c.Deprioritized {
			if i == maxShownServers {
				fmt.Fprintf(&b, ", and %d more", len(c.Deprioritized)-i)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(clip(a, maxAddressLen))
		}
		b.WriteByte(']')
	}
	return b.String()
}

// SelectCandidates appends to dst the servers of d that are suitable for an
// operation with criteria c and within the latency window, by the rules of
// the server selection specification, and returns the extended slice. The
// order of the servers appended is unspecified. When dst has the capacity
// for them, it allocates nothing.
//
// The rules, by topology type:
//
//   - Unknown: no server is suitable;
//   - Single: the one server, whatever its type, if it is available (neither
//     Unknown nor PossiblePrimary); the read preference does not choose
//     (but must be valid);
//   - Sharded: the mongoses; the read preference does not choose either (it
//     is passed to them);
//   - LoadBalanced: the load balancer;
//   - ReplicaSetWithPrimary and ReplicaSetNoPrimary: for writes, the
//     primary; for reads, by the read preference's mode: the primary, or
//     the secondaries (and the primary with mode nearest) whose estimated
//     staleness is within its maximum, then of those the ones that match
//     its first tag set that any of them matches. PrimaryPreferred falls
//     back to those secondaries when there is no primary, secondaryPreferred
//     to the primary when no secondary is eligible.
//
// A deprioritized server is left out, unless no server is suitable without
// it. The latency window then keeps, of the suitable servers, those whose
// average round trip time is at most the shortest one's plus the local
// threshold (a server without one, such as a load balancer, is kept).
//
// The staleness of a secondary S is estimated, as the max staleness
// specification says, from the primary P as (S.LastUpdateTime -
// S.LastWriteDate) - (P.LastUpdateTime - P.LastWriteDate) + the heartbeat
// frequency, or, without a primary, from the secondary SMax with the latest
// LastWriteDate as SMax.LastWriteDate - S.LastWriteDate + the heartbeat
// frequency, in milliseconds. P and SMax are taken among all the servers,
// deprioritized or not. A secondary without a LastWriteDate, or whose
// primary has none, is too stale for any maximum.
//
// It returns dst unchanged and an error, without looking for servers, when
// the operation cannot be served as asked: for a read, an error wrapping
// ErrInvalidReadPref when the read preference breaks a rule of
// ReadPref.Validate, or in a replica set, when its maximum staleness is
// below 90 s or below the heartbeat frequency plus 10 s; and, for any
// operation, d.CompatibilityError when a server's wire versions are out of
// the client's range. No suitable server is no error: dst comes back
// unchanged, and the caller waits for the topology to change.
func (d Description) SelectCandidates(c Criteria, dst []ServerDescription) ([]ServerDescription, error) {
	base := len(dst)
	dst, err := d.selectSuitable(c, dst)
	if err != nil {
		return dst, err
	}
	return latencyWindow(dst, base, c.threshold()), nil
}

// selectSuitable is SelectCandidates without the latency window: it appends
// the suitable servers.
func (d Description) selectSuitable(c Criteria, dst []ServerDescription) ([]ServerDescription, error) {
	if !c.Write {
		if err := c.ReadPref.Validate(); err != nil {
			return dst, err
		}
	}
	if d.CompatibilityError != nil {
		return dst, d.CompatibilityError
	}
	if !c.Write && c.ReadPref.HasMaxStaleness && d.Type.replicaSet() {
		if err := checkMaxStaleness(c.ReadPref.MaxStaleness, c.heartbeat()); err != nil {
			return dst, err
		}
	}
	base := len(dst)
	dst = d.appendSuitable(c, dst, true)
	if len(dst) == base && len(c.Deprioritized) > 0 {
		dst = d.appendSuitable(c, dst, false)
	}
	return dst, nil
}

// replicaSet reports whether t is one of the replica set topology types.
func (t TopologyType) replicaSet() bool {
	return t == ReplicaSetNoPrimary || t == ReplicaSetWithPrimary
}

// appendSuitable appends to dst the servers of d suitable for c, before the
// latency window; the deprioritized ones too unless skip.
func (d Description) appendSuitable(c Criteria, dst []ServerDescription, skip bool) []ServerDescription {
	s := selection{d: d, c: c, skip: skip && len(c.Deprioritized) > 0}
	switch d.Type {
	case Single:
		// Any available server: not Unknown, nor PossiblePrimary.
		return s.appendByType(dst, ^(typeSet(1)<<ServerUnknown | 1<<PossiblePrimary))
	case Sharded:
		return s.appendByType(dst, 1<<Mongos)
	case LoadBalanced:
		return s.appendByType(dst, 1<<LoadBalancer)
	case ReplicaSetWithPrimary:
		if c.Write {
			return s.appendPrimary(dst)
		}
		return s.appendForRead(dst)
	case ReplicaSetNoPrimary:
		if c.Write {
			return dst // no server is suitable for a write without a primary
		}
		return s.appendForRead(dst)
	}
	return dst // TopologyUnknown: no server is suitable
}

// selection is one pass of appendSuitable.
type selection struct {
	d    Description
	c    Criteria
	skip bool // leave the deprioritized servers out
}

// skipped reports whether the server at address is left out as
// deprioritized.
func (s *selection) skipped(address string) bool {
	return s.skip && slices.Contains(s.c.Deprioritized, address)
}

// typeSet is a set of server types, 1<<t for each type t.
type typeSet uint32

// appendByType appends the servers whose type is in types.
func (s *selection) appendByType(dst []ServerDescription, types typeSet) []ServerDescription {
	var c serverCursor
	for s.d.servers.Start(&c); c.Next(); {
		sd := c.ValuePtr()
		if types&(1<<sd.Type) != 0 && !s.skipped(sd.Address) {
			dst = append(dst, *sd)
		}
	}
	return dst
}

// appendPrimary appends the primary, if there is one not left out.
func (s *selection) appendPrimary(dst []ServerDescription) []ServerDescription {
	// There is at most one primary: the rules mark any other one Unknown.
	if p, ok := s.d.primary(); ok && !s.skipped(p.Address) {
		dst = append(dst, p)
	}
	return dst
}

// appendForRead appends the servers of a replica set suitable for a read,
// by the read preference's mode.
func (s *selection) appendForRead(dst []ServerDescription) []ServerDescription {
	base := len(dst)
	switch s.c.ReadPref.Mode {
	case ModePrimary:
		return s.appendPrimary(dst)
	case ModePrimaryPreferred:
		if dst = s.appendPrimary(dst); len(dst) > base {
			return dst
		}
		return s.appendEligible(dst, false)
	case ModeSecondary:
		return s.appendEligible(dst, false)
	case ModeSecondaryPreferred:
		if dst = s.appendEligible(dst, false); len(dst) > base {
			return dst
		}
		return s.appendPrimary(dst)
	case ModeNearest:
		return s.appendEligible(dst, true)
	}
	return dst // unreachable: the mode was validated
}

// appendEligible appends the eligible servers among the secondaries, and
// the primary too when withPrimary: those not too stale, then those that
// match the first tag set that any of them matches.
func (s *selection) appendEligible(dst []ServerDescription, withPrimary bool) []ServerDescription {
	rp := &s.c.ReadPref
	stale := rp.HasMaxStaleness && rp.MaxStaleness > 0
	var ref staleness
	if stale {
		ref = s.stalenessRef()
	}
	base := len(dst)
	best := math.MaxInt // the index of the tag set the servers appended match
	var c serverCursor
	for s.d.servers.Start(&c); c.Next(); {
		sd := c.ValuePtr()
		if sd.Type != RSSecondary && (!withPrimary || sd.Type != RSPrimary) {
			continue
		}
		if s.skipped(sd.Address) {
			continue
		}
		if stale && sd.Type == RSSecondary && !ref.within(sd, rp.MaxStaleness) {
			continue
		}
		rank := 0
		if len(rp.TagSets) > 0 {
			if rank = firstMatch(rp.TagSets, sd.Tags); rank < 0 || rank > best {
				continue
			}
		}
		if rank < best {
			// An earlier tag set matches: the servers that matched a later
			// one are not eligible.
			clear(dst[base:])
			dst, best = dst[:base], rank
		}
		dst = append(dst, *sd)
	}
	return dst
}

// firstMatch returns the index of the first of sets that tags match; -1
// when they match none.
func firstMatch(sets []TagSet, tags map[string]string) int {
	for i, t := range sets {
		if t.matches(tags) {
			return i
		}
	}
	return -1
}

// staleness is what the staleness of secondaries is estimated from, in
// milliseconds: the primary's lag of its last write behind the client's
// clock (P.lastUpdateTime - P.lastWriteDate), or without a primary, the
// latest lastWriteDate of a secondary; and the heartbeat frequency.
type staleness struct {
	withPrimary bool
	known       bool  // false when the reference has no lastWriteDate
	primaryLag  int64 // with a primary
	maxWrite    int64 // without one
	heartbeat   int64
}

// stalenessRef returns what the staleness of secondaries is estimated from
// in this topology: its primary, or its secondaries without one.
func (s *selection) stalenessRef() staleness {
	ref := staleness{heartbeat: s.c.heartbeat().Milliseconds()}
	if s.d.Type == ReplicaSetWithPrimary {
		if sd, ok := s.d.primary(); ok {
			ref.withPrimary = true
			ref.known = !sd.LastWriteDate.IsZero()
			ref.primaryLag = sd.LastUpdateTime.UnixMilli() - sd.LastWriteDate.UnixMilli()
			return ref
		}
	}
	var c serverCursor
	for s.d.servers.Start(&c); c.Next(); {
		sd := c.ValuePtr()
		if sd.Type == RSSecondary && !sd.LastWriteDate.IsZero() {
			if w := sd.LastWriteDate.UnixMilli(); !ref.known || w > ref.maxWrite {
				ref.known, ref.maxWrite = true, w
			}
		}
	}
	return ref
}

// within reports whether the secondary sd's estimated staleness is at most
// maxStaleness. Milliseconds since the epoch of any time.Time fit an int64
// many times over, so the sums cannot overflow.
func (ref staleness) within(sd *ServerDescription, maxStaleness time.Duration) bool {
	if !ref.known || sd.LastWriteDate.IsZero() {
		return false
	}
	var estimate int64
	if ref.withPrimary {
		estimate = sd.LastUpdateTime.UnixMilli() - sd.LastWriteDate.UnixMilli() - ref.primaryLag + ref.heartbeat
	} else {
		estimate = ref.maxWrite - sd.LastWriteDate.UnixMilli() + ref.heartbeat
	}
	return estimate <= maxStaleness.Milliseconds()
}

// latencyWindow keeps, of the servers dst[base:], those within the latency
// window of the given width, in place, and returns the shortened dst.
func latencyWindow(dst []ServerDescription, base int, width time.Duration) []ServerDescription {
	found := dst[base:]
	if len(found) < 2 {
		return dst
	}
	shortest, measured := time.Duration(0), false
	for i := range found {
		if s := &found[i]; s.HasRoundTripTime && (!measured || s.RoundTripTime < shortest) {
			shortest, measured = s.RoundTripTime, true
		}
	}
	if !measured {
		return dst
	}
	limit := shortest + width
	if limit < shortest { // overflow
		limit = math.MaxInt64
	}
	n := base
	for i := range found {
		if s := &found[i]; !s.HasRoundTripTime || s.RoundTripTime <= limit {
			if n != base+i {
				dst[n] = *s
			}
			n++
		}
	}
	clear(dst[n:])
	return dst[:n]
}

// Choose returns the index in candidates of the server an operation is to
// run on, by the specification's "power of two random choices": of two
// distinct candidates drawn at random, the one with fewer operations in
// progress, the first one drawn when they have as many; the only one when
// there is one; -1 when there is none. intN returns a random integer in
// [0, n), uniformly (such as the IntN method of a math/rand/v2 Rand, which
// the caller seeds and guards); inProgress returns the number of operations
// in progress on the server at an address.
func choose(candidates []ServerDescription, intN func(n int) int, inProgress func(address string) int64) int {
	switch n := len(candidates); n {
	case 0:
		return -1
	case 1:
		return 0
	default:
		i := intN(n)
		j := intN(n - 1)
		if j >= i {
			j++
		}
		if inProgress(candidates[j].Address) < inProgress(candidates[i].Address) {
			return j
		}
		return i
	}
}

// Bounds on what Summary shows, so that its length does not depend on the
// topology: some 16 x (300 + 200 + 40) bytes at most.
const (
	maxShownServers = 16
	maxShownError   = 200
)

// Summary describes d in one line for error messages and logs, bounded in
// length: its type and set name, then each server by address, with its
// type, its average round trip time and, for an Unknown one, why (its last
// error, or that it was not checked yet); at most 16 servers, then how many
// more, each error cut at 200 bytes; and the compatibility error, if any.
// For example:
//
//	ReplicaSetNoPrimary, set "rs0", 2 servers: a:27017 RSSecondary (rtt 1.2ms); b:27017 Unknown (dial tcp 127.0.0.1:27017: connection refused)
func (d Description) Summary() string {
	var b strings.Builder
	b.WriteString(d.Type.String())
	if d.SetName != "" {
		fmt.Fprintf(&b, ", set %q", clip(d.SetName, maxShown))
	}
	n := d.servers.Len()
	switch n {
	case 0:
		b.WriteString(", no servers")
	case 1:
		b.WriteString(", 1 server: ")
	default:
		fmt.Fprintf(&b, ", %d servers: ", n)
	}
	i := 0
	for c := d.servers.Cursor(); c.Next(); i++ {
		s := c.Value()
		if i == maxShownServers {
			fmt.Fprintf(&b, "; and %d more", n-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(clip(s.Address, maxAddressLen))
		b.WriteByte(' ')
		b.WriteString(s.Type.String())
		switch {
		case s.Error != nil:
			b.WriteString(" (")
			b.WriteString(oneLine(clip(s.Error.Error(), maxShownError)))
			b.WriteByte(')')
		case !s.Type.known():
			b.WriteString(" (not checked yet)")
		case s.HasRoundTripTime:
			fmt.Fprintf(&b, " (rtt %v)", s.RoundTripTime.Round(100*time.Microsecond))
		}
	}
	if d.CompatibilityError != nil {
		b.WriteString("; ")
		b.WriteString(oneLine(clip(d.CompatibilityError.Error(), maxShownError)))
	}
	return b.String()
}

// oneLine replaces the line breaks of s with spaces, so that a message
// stays on one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
