package topology

import (
	"bytes"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/handshake"
)

// update is what applying a ServerDescription did to a Description.
type update struct {
	// Previous is the Description before, Description the one after
	// (Previous again when the server description was ignored).
	Previous, Description Description
	// Address is the address of the server description applied.
	Address string
	// Applied is false when the server description was ignored: its server
	// is not in the topology (it was removed while being checked), or its
	// topologyVersion is older than the one the topology has. Nothing
	// changed then.
	Applied bool
	// PreviousServer is the description the server had before; Server is
	// the one the topology took for it: the one applied, or an Unknown one
	// when the rules refused it (a stale primary, a wrong set name with
	// TopologyType Single). The server may have been removed since (see
	// Removed).
	PreviousServer, Server ServerDescription
	// Added and Removed are the addresses of the servers the update added
	// to the topology and removed from it, sorted: the caller starts and
	// stops their monitors and pools.
	Added, Removed []string
	// CheckNow are the addresses of the servers whose monitors must check
	// them at once: primaries marked Unknown because a newer one was found.
	CheckNow []string
	// Changed is true when Description differs from Previous (by
	// Description.Equal): found by comparing the servers the update
	// touched, not every server.
	Changed bool
}

// staleMismatchPrefix and newerPrimary begin the errors of primaries marked
// Unknown by updateRSFromPrimary; the specification fixes these words.
const (
	staleMismatchPrefix = "primary marked stale due to electionId/setVersion mismatch"
	newerPrimary        = "primary marked stale due to discovery of newer primary"
)

// Apply returns the Description after the server description s, the outcome
// of a check (or an Unknown one from an error), by the rules of the
// specification's "Updating the TopologyDescription", with the update that
// tells what changed.
//
// s is ignored when its server is not in the topology, when its
// topologyVersion is older than the current one's (same processId, smaller
// counter), when it is a LoadBalancer outside a LoadBalanced topology, and
// in a LoadBalanced topology, whose load balancer stays as it is, unless it
// is a LoadBalancer. Otherwise it replaces the server's description, even
// when equal (to keep the round trip time and the update time), and then
// the actions of the TopologyType table run: updateUnknownWithStandalone,
// updateRSWithoutPrimary, updateRSWithPrimaryFromMember,
// updateRSFromPrimary, checkIfHasPrimary and remove; with TopologyType
// Single, a server with another set name than the settings' replicaSet
// becomes Unknown. Compatibility and logicalSessionTimeoutMinutes are then
// computed again.
func (d Description) apply(s ServerDescription) update {
	u := update{Previous: d, Description: d, Address: s.Address}
	cur, ok := d.servers.Get(s.Address)
	u.PreviousServer, u.Server = cur, cur
	switch {
	case !ok,
		compareTopologyVersion(cur.TopologyVersion, s.TopologyVersion) > 0,
		(d.Type == LoadBalanced) != (s.Type == LoadBalancer):
		return u
	}
	w := &updater{d: d, applied: s}
	w.set(s)
	w.run(s)
	w.d = w.d.withAggregates()
	u.Description, u.Applied, u.Server = w.d, true, w.applied
	w.finish(&u)
	return u
}

// updater carries out the actions of one Apply on a new version of the
// Description, and keeps the addresses it touched: what the update changed
// is found among them, never by looking at every server.
type updater struct {
	d Description
	// applied is the description the topology took for the server applied.
	applied  ServerDescription
	checkNow []string
	touched  []string // the addresses set or removed, maybe more than once
}

// set gives the server at s.Address the description s, adding it if it is
// new.
func (w *updater) set(s ServerDescription) {
	w.d.servers = w.d.servers.Set(s.Address, s)
	w.touched = append(w.touched, s.Address)
}

// finish fills in what the update did, from the addresses it touched: the
// servers added and removed, and whether the Description changed.
func (w *updater) finish(u *update) {
	prev, next := u.Previous, u.Description
	slices.Sort(w.touched)
	w.touched = slices.Compact(w.touched)
	u.Changed = !prev.sameFields(next)
	for _, a := range w.touched {
		before, was := prev.servers.Get(a)
		after, is := next.servers.Get(a)
		switch {
		case was && !is:
			u.Removed = append(u.Removed, a)
			u.Changed = true
		case !was && is:
			u.Added = append(u.Added, a)
			u.Changed = true
		case was && is && !before.Equal(after):
			u.Changed = true
		}
	}
	u.CheckNow = w.checkNow
}

// run applies the TopologyType table to s, whose description has just
// replaced the server's.
func (w *updater) run(s ServerDescription) {
	t := s.Type
	if t == PossiblePrimary { // a hint, not a check's outcome
		t = ServerUnknown
	}
	switch w.d.Type {
	case Single:
		if w.d.SetName != "" && t != ServerUnknown && s.SetName != w.d.SetName {
			w.replace(unknownServer(s.Address, fmt.Errorf(
				"topology: server %s reports replica set name %q, not the %q required", s.Address, s.SetName, w.d.SetName)))
		}
	case TopologyUnknown:
		switch t {
		case Standalone:
			w.updateUnknownWithStandalone(s)
		case Mongos:
			w.d.Type = Sharded
		case RSPrimary:
			w.d.Type = ReplicaSetWithPrimary
			w.updateRSFromPrimary(s)
		case RSSecondary, RSArbiter, RSOther:
			w.d.Type = ReplicaSetNoPrimary
			w.updateRSWithoutPrimary(s)
		}
	case Sharded:
		if t != ServerUnknown && t != Mongos {
			w.remove(s.Address)
		}
	case ReplicaSetNoPrimary:
		switch t {
		case Standalone, Mongos:
			w.remove(s.Address)
		case RSPrimary:
			w.d.Type = ReplicaSetWithPrimary
			w.updateRSFromPrimary(s)
		case RSSecondary, RSArbiter, RSOther:
			w.updateRSWithoutPrimary(s)
		}
	case ReplicaSetWithPrimary:
		switch t {
		case ServerUnknown, RSGhost:
			w.checkIfHasPrimary()
		case Standalone, Mongos:
			w.remove(s.Address)
			w.checkIfHasPrimary()
		case RSPrimary:
			w.updateRSFromPrimary(s)
		case RSSecondary, RSArbiter, RSOther:
			w.updateRSWithPrimaryFromMember(s)
		}
	}
}

// updateUnknownWithStandalone: a standalone found in an Unknown topology
// makes it Single when it was the only seed, and is removed otherwise (the
// user's other seeds are likely a replica set it left).
func (w *updater) updateUnknownWithStandalone(s ServerDescription) {
	if w.d.singleSeed {
		w.d.Type = Single
		return
	}
	w.remove(s.Address)
}

// updateRSWithoutPrimary: a member heard from while no primary is known
// adds the members it knows, without removing any (only a primary's view is
// authoritative), and names the possible primary.
func (w *updater) updateRSWithoutPrimary(s ServerDescription) {
	if w.d.SetName == "" {
		w.d.SetName = s.SetName
	} else if w.d.SetName != s.SetName {
		w.remove(s.Address)
		return
	}
	w.addMembers(s)
	w.hintPrimary(s)
	if s.Me != "" && s.Me != s.Address {
		// Reached through an address that is not its configured one: the
		// member is (or will be) monitored under the configured one.
		w.remove(s.Address)
	}
}

// updateRSWithPrimaryFromMember: a member heard from while a primary is
// known; it may show that the primary is gone (it was this member).
func (w *updater) updateRSWithPrimaryFromMember(s ServerDescription) {
	if w.d.SetName != s.SetName || s.Me != "" && s.Me != s.Address {
		w.remove(s.Address)
		w.checkIfHasPrimary()
		return
	}
	if !w.hasPrimary() {
		w.d.Type = ReplicaSetNoPrimary
		w.hintPrimary(s)
	}
}

// updateRSFromPrimary: a primary heard from. Unless its (electionId,
// setVersion) shows it stale, its view of the members is authoritative:
// any other primary is marked Unknown, and the members it lists replace the
// servers.
func (w *updater) updateRSFromPrimary(s ServerDescription) {
	if w.d.SetName == "" {
		w.d.SetName = s.SetName
	} else if w.d.SetName != s.SetName {
		w.remove(s.Address)
		w.checkIfHasPrimary()
		return
	}
	if stale := w.staleElection(s); stale != "" {
		w.replace(unknownServer(s.Address, fmt.Errorf("topology: %s", stale)))
		w.checkIfHasPrimary()
		return
	}
	// The other primaries, found without looking at every server.
	var others []string
	w.d.servers.Walk(hasPrimaries, func(a string, o ServerDescription) bool {
		if a != s.Address && o.Type == RSPrimary {
			others = append(others, a)
		}
		return true
	})
	for _, a := range others {
		w.set(unknownServer(a, fmt.Errorf("topology: %s", newerPrimary)))
		w.checkNow = append(w.checkNow, a)
	}
	w.addMembers(s)
	// A primary's view of the members replaces the topology's: a walk of
	// the servers, about as many as the members the primary's reply lists.
	var gone []string
	for c := w.d.servers.Cursor(); c.Next(); {
		if !s.isMember(c.Key()) {
			gone = append(gone, c.Key())
		}
	}
	for _, a := range gone {
		w.remove(a)
	}
	w.checkIfHasPrimary()
}

// staleElection compares the primary's (electionId, setVersion) with the
// greatest seen, recording it when not older, and returns the error of a
// stale primary, "" for a current one. From MongoDB 6.0 (wire version 17)
// electionId comes first; before, setVersion did, and a primary without
// both is never stale.
func (w *updater) staleElection(s ServerDescription) string {
	d := &w.d
	if s.MaxWireVersion >= 17 {
		e := compareElectionID(s.ElectionID, d.MaxElectionID)
		if e > 0 || e == 0 && compareSetVersion(s.SetVersion, d.MaxSetVersion) >= 0 {
			d.MaxElectionID, d.MaxSetVersion = s.ElectionID, s.SetVersion
			return ""
		}
		return staleMessage(s, d)
	}
	if s.SetVersion != nil && s.ElectionID != nil {
		if d.MaxSetVersion != nil && d.MaxElectionID != nil &&
			(*d.MaxSetVersion > *s.SetVersion ||
				*d.MaxSetVersion == *s.SetVersion && compareElectionID(d.MaxElectionID, s.ElectionID) > 0) {
			return staleMessage(s, d)
		}
		d.MaxElectionID = s.ElectionID
	}
	if s.SetVersion != nil && (d.MaxSetVersion == nil || *s.SetVersion > *d.MaxSetVersion) {
		d.MaxSetVersion = s.SetVersion
	}
	return ""
}

func staleMessage(s ServerDescription, d *Description) string {
	return fmt.Sprintf("%s, (electionId %s, setVersion %s) is stale compared to (electionId %s, setVersion %s)",
		staleMismatchPrefix, showOID(s.ElectionID), showInt(s.SetVersion), showOID(d.MaxElectionID), showInt(d.MaxSetVersion))
}

func showOID(p *bson.ObjectID) string {
	if p == nil {
		return "null"
	}
	return p.Hex()
}

func showInt(p *int64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// addMembers adds an Unknown server for each member s lists that the
// topology does not have yet.
func (w *updater) addMembers(s ServerDescription) {
	for _, a := range s.members() {
		if _, ok := w.d.servers.Get(a); !ok {
			w.set(unknownServer(a, nil))
		}
	}
}

// hintPrimary marks the primary s names PossiblePrimary, if the topology
// has it and knows nothing of it.
func (w *updater) hintPrimary(s ServerDescription) {
	if s.Primary == "" {
		return
	}
	if p, ok := w.d.servers.Get(s.Primary); ok && p.Type == ServerUnknown {
		p.Type = PossiblePrimary
		w.set(p)
	}
}

// checkIfHasPrimary sets the type of a replica set by whether it has a
// primary.
func (w *updater) checkIfHasPrimary() {
	if w.hasPrimary() {
		w.d.Type = ReplicaSetWithPrimary
	} else {
		w.d.Type = ReplicaSetNoPrimary
	}
}

func (w *updater) hasPrimary() bool { return w.d.servers.Summary().primaries > 0 }

// replace replaces the description of the server being applied.
func (w *updater) replace(s ServerDescription) {
	w.set(s)
	w.applied = s
}

// remove removes a server from the topology: its monitor is to stop.
func (w *updater) remove(address string) {
	w.d.servers = w.d.servers.Delete(address)
	w.touched = append(w.touched, address)
}

// compareElectionID compares electionIds as 12-byte strings; nil is less
// than any electionId.
func compareElectionID(a, b *bson.ObjectID) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return bytes.Compare(a[:], b[:])
}

// compareSetVersion compares setVersions; nil is less than any setVersion.
func compareSetVersion(a, b *int64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	switch {
	case *a < *b:
		return -1
	case *a > *b:
		return 1
	}
	return 0
}

// compareTopologyVersion returns 1 when current is newer than other, 0 when
// they are the same, and -1 otherwise: other is assumed newer when either
// is missing or their processIds differ (the server restarted).
func compareTopologyVersion(current, other *handshake.TopologyVersion) int {
	if current == nil || other == nil || current.ProcessID != other.ProcessID {
		return -1
	}
	switch {
	case current.Counter > other.Counter:
		return 1
	case current.Counter == other.Counter:
		return 0
	}
	return -1
}
