package mongotest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements the replica set: members that share one store and
// answer hello, the awaitable hello and the commands as the members of a
// replica set do, and the controls a test changes the set with (StepDown,
// Elect, Stop, Restart, Partition, Heal, SetLag).
//
// Replication is instantaneous: a write on the primary is on every member
// at once. Nothing happens on its own either: no election follows a
// step-down (but the handoff of the replSetStepDown command, see
// replcmds.go), and a member learns of a change when the control makes it,
// unless it is partitioned or stopped then.

// The error codes of a replica set member's refusals.
const (
	codeNotWritablePrimary              = 10107
	codeNotPrimaryNoSecondaryOk         = 13435
	codeNotPrimaryOrSecondary           = 13436
	codeInterruptedDueToReplStateChange = 11602
	codePrimarySteppedDown              = 189

	// The codes of mongod's refusals of an awaitable hello, which have
	// no name.
	codeAwaitPairing          = 31368 // topologyVersion and maxAwaitTimeMS go together
	codeAwaitNegativeTime     = 31373
	codeAwaitCounterAhead     = 31382 // a counter greater than the server's
	codeAwaitNegativeCounter  = 31372
	codeNotAnObject           = 10065
	codeMissingField          = 40414
	codeExhaustNeedsAwaitTime = 51756
)

// notPrimaryCodes are mongod's NotPrimaryError category: a replica set
// member's error reply with one of them carries the member's
// topologyVersion, and an unacknowledged write that meets one closes the
// connection.
var notPrimaryCodes = map[int32]bool{
	codeNotWritablePrimary: true, codeNotPrimaryNoSecondaryOk: true, codeNotPrimaryOrSecondary: true,
	codeInterruptedDueToReplStateChange: true, codePrimarySteppedDown: true,
}

// maxMembers is the most members a replica set has, as in MongoDB.
const maxMembers = 50

// setVersion is the version of the replica set's configuration, which
// never changes: elections change the term, not the configuration.
const setVersion = 1

// Member is the configuration of one member of a replica set (see
// WithMember), as the member's document of a replica set configuration
// gives it.
type Member struct {
	// Tags are the member's tags, which hello reports and read
	// preferences select members by.
	Tags map[string]string
	// Passive makes the member never electable (priority 0): it is listed
	// in passives rather than hosts, and its hello says passive.
	Passive bool
	// Hidden makes the member passive and hidden: it is in no member's
	// list, and its hello says hidden, so that drivers do not use it.
	Hidden bool
	// Arbiter makes the member an arbiter: it votes, holds no data and is
	// never elected; it is listed in arbiters, its hello says arbiterOnly,
	// and it refuses reads and writes. An arbiter has no tags.
	Arbiter bool
}

func (m Member) clone() Member {
	m.Tags = maps.Clone(m.Tags)
	return m
}

// electable reports whether the member may become primary.
func (m Member) electable() bool { return !m.Passive && !m.Hidden && !m.Arbiter }

// ReplicaSet is a replica set of in-process servers, its members, started
// by StartReplicaSet. Its methods are safe for concurrent use, while
// clients use the members.
type ReplicaSet struct {
	name string

	// ctl serializes the controls, which may wait (StepDown, Stop) without
	// holding mu.
	ctl sync.Mutex

	mu      sync.Mutex // guards what follows, and the members' state
	members []*member
	term    int64
	// primary is the member elected in the current term while it is
	// primary, -1 when there is none.
	primary int
	// The last write of the set: every member has it, but a lagging one
	// (SetLag) reports it later.
	opTS          bson.Timestamp
	opTerm        int64
	lastWriteDate time.Time
	closed        bool
	// electionTS is the opTime timestamp of the entry the primary of the
	// current term wrote when elected: its electionTime.
	electionTS bson.Timestamp
	// replicaSetID is the configuration's settings.replicaSetId.
	replicaSetID bson.ObjectID
	// changed is closed, and replaced, at each change of the members'
	// state (see notifyLocked), which a replSetStepDown waiting for an
	// electable secondary waits for.
	changed chan struct{}
}

// member is a replica set member's state, guarded by ReplicaSet.mu.
type member struct {
	srv  *Server
	conf Member
	role memberRole
	// primary is the member this one takes for the primary, -1 if none.
	primary int
	// term is the latest term the member knows.
	term int64
	// stopped is set while the member does not run (Stop, or Close).
	stopped bool
	// partitioned, while the member is partitioned, is the channel Heal
	// closes; nil otherwise.
	partitioned chan struct{}
	lag         time.Duration
	// writes are the writes the member admitted as primary; nil when it is
	// not primary.
	writes *writeEpoch
	// upSince is when the member's process started (StartReplicaSet,
	// Restart), for replSetGetStatus's uptime.
	upSince time.Time
	// frozenUntil is when the member may be elected again after a
	// replSetStepDown or a replSetFreeze; zero if it is not frozen.
	frozenUntil time.Time
	// steppingDown is set while the primary runs a replSetStepDown that
	// waits for an electable secondary: it takes no writes meanwhile.
	steppingDown bool
	// downAt is when the member last stopped or was partitioned, and
	// downWrite the set's last write then: what the others last heard of
	// it, for replSetGetStatus.
	downAt, downWrite time.Time

	// The member's topologyVersion: processId and counter, and changed,
	// closed (and replaced) when the counter moves on.
	processID bson.ObjectID
	counter   int64
	changed   chan struct{}
}

// memberRole is a member's replica set state, as its hello reports it.
type memberRole int

const (
	rolePrimary memberRole = iota + 1
	roleSecondary
	roleArbiter
)

// writeEpoch counts the writes in progress on a member while it is
// primary, so that a step-down interrupts them and waits for them.
type writeEpoch struct {
	interrupt chan struct{} // closed when the member stops being primary
	n         int           // the writes in progress
	idle      chan struct{} // if not nil, closed when n comes to 0
}

// StartReplicaSet starts a replica set named name of members members (1
// to 50), each a server listening on its own port of 127.0.0.1 (on TCP,
// or on the Network of WithNetwork), with its own connections, cursors,
// stats, fail points and faults, and all sharing one store: a write on the
// primary is on every member at once. The
// options apply to every member (TLS, compressors, wire versions), but
// WithMember, which configures one member; WithReplicaSet and
// WithLoadBalanced are refused. Users added to any member (AddUser) exist
// on all, as in a replica set.
//
// The first electable member is elected primary, in term 1; the others
// are secondaries (or arbiters). Every member answers hello as a member of
// a replica set does: setName, setVersion, hosts (the electable members),
// passives and arbiters, primary (while there is one), me,
// isWritablePrimary (ismaster for legacy hello), secondary, arbiterOnly,
// passive, hidden, tags, electionId (the primary only; derived from the
// term as mongod derives it, so that a later election has a greater one),
// lastWrite ({opTime, lastWriteDate, majorityOpTime, majorityWriteDate}; not
// on an arbiter) and topologyVersion ({processId, counter}: a new
// processId at each start, and a counter that each change of the member's
// hello moves on), besides what a standalone reports.
//
// A hello with topologyVersion and maxAwaitTimeMS waits until the member's
// topologyVersion changes or maxAwaitTimeMS passes, or answers at once if
// its processId is another; with the OP_MSG exhaustAllowed flag, the reply
// has moreToCome and the member keeps sending a reply at each change (or
// maxAwaitTimeMS) until one is an error or the connection closes: the
// streaming protocol of server monitoring. A waiting hello ends when the
// client hangs up. A driver's Disconnect may wait for its monitor's
// awaitable hello to return, up to heartbeatFrequencyMS (the official Go
// driver does, when it disconnects just as a check starts): a short
// heartbeatFrequencyMS, or closing the set first, keeps it short.
//
// A member that is not primary refuses writes with NotWritablePrimary
// (10107), and reads without a $readPreference other than primary with
// NotPrimaryNoSecondaryOk (13435); an arbiter refuses the reads too, with
// NotPrimaryOrSecondary (13436). Those errors, and InterruptedDueToReplStateChange
// (11602), carry the member's topologyVersion, as mongod's do. Retryable
// writes work on the primary and are remembered across a failover. The
// local database takes writes on any member.
func StartReplicaSet(name string, members int, opts ...Option) (*ReplicaSet, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.replicaSet != "" {
		return nil, errors.New("mongotest: StartReplicaSet names the replica set: WithReplicaSet does not apply")
	}
	return startReplicaSet(name, members, cfg)
}

// startReplicaSet starts the replica set name of n members configured by
// cfg.
func startReplicaSet(name string, n int, cfg config) (*ReplicaSet, error) {
	switch {
	case name == "":
		return nil, errors.New("mongotest: a replica set needs a name")
	case n < 1 || n > maxMembers:
		return nil, fmt.Errorf("mongotest: a replica set has 1 to %d members, not %d", maxMembers, n)
	case cfg.loadBalanced:
		return nil, errors.New("mongotest: WithLoadBalanced makes a mongos, not a replica set member")
	case cfg.mongos:
		return nil, errors.New("mongotest: WithMongos makes a mongos, not a replica set member")
	case cfg.advertised != nil && len(cfg.advertised) != n:
		return nil, fmt.Errorf("mongotest: WithAdvertisedHosts gives %d addresses for a replica set of %d members", len(cfg.advertised), n)
	}
	confs := make([]Member, n)
	for i, m := range cfg.members {
		if i >= n {
			return nil, fmt.Errorf("mongotest: WithMember(%d) for a replica set of %d members", i, n)
		}
		if m.Arbiter && (len(m.Tags) > 0 || m.Passive || m.Hidden) {
			return nil, fmt.Errorf("mongotest: WithMember(%d): an arbiter has no tags, and is neither passive nor hidden", i)
		}
		confs[i] = m
	}
	first := slices.IndexFunc(confs, Member.electable)
	if first < 0 {
		return nil, errors.New("mongotest: a replica set needs an electable member: one neither passive, hidden nor an arbiter")
	}
	advertised := cfg.advertised
	cfg.replicaSet = name
	cfg.members, cfg.advertised = nil, nil

	lns := make([]net.Listener, 0, n)
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	for i := range n {
		addr := cfg.listenAddr(i)
		if cfg.network != nil && advertised != nil {
			addr = advertised[i] // on a Network, a member listens where it says it is
		}
		ln, err := cfg.listen(addr)
		if err != nil {
			closeAll()
			return nil, err
		}
		lns = append(lns, ln)
	}
	rs := &ReplicaSet{name: name, primary: first, term: 1, replicaSetID: bson.NewObjectID(), changed: make(chan struct{})}
	rs.noteWriteLocked() // the set's initiation, the first entry of its oplog
	rs.electionTS = rs.opTS
	sh := &shared{users: cfg.users} // a sharded cluster's servers share their users
	for i, ln := range lns {
		srv := newServer(cfg, ln.Addr().String(), sh)
		srv.role, srv.rs, srv.self = roleReplicaSet, rs, i
		if advertised != nil {
			srv.advertised = advertised[i]
		}
		m := &member{srv: srv, conf: confs[i], primary: first, term: 1, upSince: time.Now(),
			processID: bson.NewObjectID(), changed: make(chan struct{})}
		m.role = m.restingRole()
		if i == first {
			m.role, m.writes = rolePrimary, newWriteEpoch()
		}
		rs.members = append(rs.members, m)
	}
	for i, ln := range lns {
		if err := rs.members[i].srv.serve(ln); err != nil {
			lns = lns[i+1:] // serve closed lns[i]; the members before it run
			closeAll()
			rs.Close()
			return nil, err
		}
	}
	if cfg.network != nil {
		cfg.network.track(rs)
	}
	return rs, nil
}

func newWriteEpoch() *writeEpoch { return &writeEpoch{interrupt: make(chan struct{})} }

// restingRole is the member's role when it is not primary.
func (m *member) restingRole() memberRole {
	if m.conf.Arbiter {
		return roleArbiter
	}
	return roleSecondary
}

// Name returns the replica set's name.
func (rs *ReplicaSet) Name() string { return rs.name }

// Members returns the members, in order: member i is the i of the
// controls. Each is a Server, with its own Stats, fail points and faults.
func (rs *ReplicaSet) Members() []*Server {
	out := make([]*Server, len(rs.members))
	for i, m := range rs.members {
		out[i] = m.srv
	}
	return out
}

// URI returns a connection string that lists every member and names the
// set: "mongodb://127.0.0.1:p1,127.0.0.1:p2,.../?replicaSet=name", or the
// addresses given to WithAdvertisedHosts.
func (rs *ReplicaSet) URI() string {
	hosts := make([]string, len(rs.members))
	for i, m := range rs.members {
		hosts[i] = m.srv.advertised
	}
	return "mongodb://" + strings.Join(hosts, ",") + "/?replicaSet=" + rs.name
}

// Primary returns the primary, nil when the set has none (after StepDown,
// or Stop of the primary, until Elect).
func (rs *ReplicaSet) Primary() *Server {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.primary < 0 {
		return nil
	}
	return rs.members[rs.primary].srv
}

// StepDown makes the primary a secondary, and leaves the set without a
// primary until Elect (unlike the replSetStepDown command, whose election
// handoff elects another member at once, as mongod's). The primary's
// writes in progress fail with InterruptedDueToReplStateChange (11602), as
// mongod kills them; StepDown returns once they have ended, or when ctx
// ends. The connections stay open, as with MongoDB 4.2 and later. It fails
// if the set has no primary, or, doing nothing, if ctx is over already.
func (rs *ReplicaSet) StepDown(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mongotest: StepDown: %w", err)
	}
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	rs.mu.Lock()
	if err := rs.usableLocked("StepDown"); err != nil {
		rs.mu.Unlock()
		return err
	}
	if rs.primary < 0 {
		rs.mu.Unlock()
		return errors.New("mongotest: StepDown: the replica set has no primary")
	}
	idle := rs.stepDownLocked()
	rs.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mongotest: StepDown: waiting for the interrupted writes: %w", ctx.Err())
	}
}

// Elect makes member i the primary, in a new term: its electionId is
// greater than any before. A primary that hears of it steps down (its
// writes in progress are interrupted, as by StepDown); the members that
// are stopped or partitioned hear of it when they come back.
// It fails if member i is stopped, partitioned, primary already, or may not
// be elected (passive, hidden, arbiter). A freeze of the member
// (replSetFreeze, or the period after its replSetStepDown) does not stop
// Elect: the test decides the outcome of the election.
func (rs *ReplicaSet) Elect(i int) error {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	m, err := rs.memberLocked("Elect", i)
	if err != nil {
		return err
	}
	switch {
	case m.conf.Arbiter:
		return fmt.Errorf("mongotest: Elect(%d): the member is an arbiter", i)
	case m.conf.Hidden:
		return fmt.Errorf("mongotest: Elect(%d): the member is hidden, and passive", i)
	case m.conf.Passive:
		return fmt.Errorf("mongotest: Elect(%d): the member is passive (priority 0)", i)
	case m.stopped:
		return fmt.Errorf("mongotest: Elect(%d): the member is stopped", i)
	case m.partitioned != nil:
		return fmt.Errorf("mongotest: Elect(%d): the member is partitioned, and reaches no majority", i)
	case m.role == rolePrimary:
		return fmt.Errorf("mongotest: Elect(%d): the member is already primary", i)
	}
	rs.electLocked(i)
	return nil
}

// stepDownLocked makes the primary step down, leaving the set without a
// primary, and returns a channel closed once the writes it interrupts
// have ended, nil if there are none.
func (rs *ReplicaSet) stepDownLocked() (idle chan struct{}) {
	old := rs.members[rs.primary]
	ep := old.writes
	rs.primary = -1
	rs.syncLocked(old)
	rs.syncReachableLocked()
	rs.notifyLocked()
	if ep != nil && ep.n > 0 {
		idle = make(chan struct{})
		ep.idle = idle
	}
	return idle
}

// electLocked makes member i the primary in a new term, whose first
// oplog entry, written at once, is its electionTime.
func (rs *ReplicaSet) electLocked(i int) {
	rs.term++
	rs.primary = i
	rs.syncReachableLocked()
	rs.noteWriteLocked() // the new primary's first entry of its term
	rs.electionTS = rs.opTS
	rs.notifyLocked()
}

// notifyLocked tells the waiters of rs.changed that the members' state
// changed.
func (rs *ReplicaSet) notifyLocked() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// Stop stops member i, as a killed mongod: it closes its listener and
// every connection, and returns once they are closed. If it was the
// primary, the set has none until Elect. Its port stays free for Restart.
func (rs *ReplicaSet) Stop(i int) error {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	rs.mu.Lock()
	m, err := rs.memberLocked("Stop", i)
	if err == nil && m.stopped {
		err = fmt.Errorf("mongotest: Stop(%d): the member is stopped already", i)
	}
	rs.mu.Unlock()
	if err != nil {
		return err
	}
	err = m.srv.stop(false)
	rs.memberDown(i)
	if err != nil {
		return fmt.Errorf("mongotest: Stop(%d): %w", i, err)
	}
	return nil
}

// memberDown records that member i stopped (Stop, or its Close).
func (rs *ReplicaSet) memberDown(i int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	m := rs.members[i]
	if m.stopped {
		return
	}
	m.stopped = true
	m.downAt, m.downWrite = time.Now(), rs.lastWriteDate
	if m.writes != nil {
		close(m.writes.interrupt)
		m.writes = nil
	}
	if rs.primary == i {
		rs.primary = -1
		rs.syncReachableLocked()
	}
	rs.notifyLocked()
}

// Restart starts member i again after Stop, on the same port, as a new
// process: its topologyVersion has a new processId and its counter starts
// again at 0, and it has no cursor and no fail point. It comes back as a
// secondary (or arbiter) that knows the set's primary. It fails if the
// member runs, or if the port cannot be had again.
func (rs *ReplicaSet) Restart(i int) error {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	rs.mu.Lock()
	m, err := rs.memberLocked("Restart", i)
	if err == nil && !m.stopped {
		err = fmt.Errorf("mongotest: Restart(%d): the member runs; Stop it first", i)
	}
	rs.mu.Unlock()
	if err != nil {
		return err
	}
	ln, err := m.srv.cfg.listen(m.srv.addr)
	if err != nil {
		return fmt.Errorf("mongotest: Restart(%d): %w", i, err)
	}
	m.srv.failPoints.set(nil)
	m.srv.cursors.reset()
	rs.mu.Lock()
	m.stopped = false
	m.processID = bson.NewObjectID()
	m.upSince = time.Now()
	m.frozenUntil = time.Time{} // a restart unfreezes, as mongod's replSetFreeze says
	rs.syncLocked(m)
	m.counter = 0 // a new process starts at 0, whatever it learned
	rs.notifyLocked()
	rs.mu.Unlock()
	if err := m.srv.serve(ln); err != nil {
		rs.memberDown(i)
		return fmt.Errorf("mongotest: Restart(%d): %w", i, err)
	}
	return nil
}

// Partition cuts member i off: it answers nothing, neither on its
// connections nor on those it accepts from now on, until Heal; what it
// receives meanwhile is answered then, as a network that comes back
// delivers what it held. It hears of no change of the set meanwhile, and
// keeps its own state: a primary that is partitioned still takes itself
// for the primary.
func (rs *ReplicaSet) Partition(i int) error {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	m, err := rs.memberLocked("Partition", i)
	if err != nil {
		return err
	}
	if m.partitioned != nil {
		return fmt.Errorf("mongotest: Partition(%d): the member is partitioned already", i)
	}
	m.partitioned = make(chan struct{})
	m.downAt, m.downWrite = time.Now(), rs.lastWriteDate
	rs.notifyLocked()
	return nil
}

// Heal ends the partition of member i: it answers again, and learns of the
// set's changes, as at its first heartbeat: a primary that the set
// replaced steps down.
func (rs *ReplicaSet) Heal(i int) error {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	m, err := rs.memberLocked("Heal", i)
	if err != nil {
		return err
	}
	if m.partitioned == nil {
		return fmt.Errorf("mongotest: Heal(%d): the member is not partitioned", i)
	}
	if !m.stopped {
		rs.syncLocked(m)
	}
	close(m.partitioned)
	m.partitioned = nil
	rs.notifyLocked()
	return nil
}

// SetLag makes member i's lastWrite trail the set's last write by d (0
// ends the lag), for tests of maxStalenessSeconds: its lastWriteDate is
// the primary's less d, and its opTime as many seconds older. The data it
// serves does not lag: replication stays instantaneous. The member's
// topologyVersion moves on, so that an awaitable hello brings the news at
// once.
func (rs *ReplicaSet) SetLag(i int, d time.Duration) error {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	m, err := rs.memberLocked("SetLag", i)
	switch {
	case err != nil:
		return err
	case d < 0:
		return fmt.Errorf("mongotest: SetLag(%d, %v): a lag is not negative", i, d)
	case m.conf.Arbiter:
		return fmt.Errorf("mongotest: SetLag(%d): an arbiter holds no data, and has no lag", i)
	}
	m.lag = d
	m.bump()
	return nil
}

// Close closes every member (see Server.Close) and returns once all their
// goroutines have ended. Close is idempotent; the controls fail
// afterwards.
func (rs *ReplicaSet) Close() error {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	rs.mu.Lock()
	rs.closed = true
	rs.mu.Unlock()
	var errs []error
	for _, m := range rs.members {
		if err := m.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// usableLocked fails once the set is closed.
func (rs *ReplicaSet) usableLocked(op string) error {
	if rs.closed {
		return fmt.Errorf("mongotest: %s: the replica set is closed", op)
	}
	return nil
}

// memberLocked returns member i, for the control op.
func (rs *ReplicaSet) memberLocked(op string, i int) (*member, error) {
	if err := rs.usableLocked(op); err != nil {
		return nil, err
	}
	if i < 0 || i >= len(rs.members) {
		return nil, fmt.Errorf("mongotest: %s(%d): no member %d in a replica set of %d", op, i, i, len(rs.members))
	}
	return rs.members[i], nil
}

// syncReachableLocked brings every member that runs and is not
// partitioned up to date with the set.
func (rs *ReplicaSet) syncReachableLocked() {
	for _, m := range rs.members {
		if !m.stopped && m.partitioned == nil {
			rs.syncLocked(m)
		}
	}
}

// syncLocked brings m up to date with the set: its term, its primary and
// its role. If that changes its hello, its topologyVersion moves on; if it
// stops being primary, its writes in progress are interrupted.
func (rs *ReplicaSet) syncLocked(m *member) {
	role := m.restingRole()
	if rs.primary >= 0 && rs.members[rs.primary] == m {
		role = rolePrimary
	}
	changed := m.role != role || m.primary != rs.primary || (role == rolePrimary && m.term != rs.term)
	if m.role == rolePrimary && role != rolePrimary && m.writes != nil {
		close(m.writes.interrupt)
		m.writes = nil
	}
	if role != rolePrimary && m.steppingDown {
		m.steppingDown = false
		changed = true
	}
	if role == rolePrimary && m.role != rolePrimary {
		m.writes = newWriteEpoch()
	}
	m.role, m.primary, m.term = role, rs.primary, rs.term
	if changed {
		m.bump()
	}
}

// bump moves the member's topologyVersion on, which wakes its awaitable
// hellos.
func (m *member) bump() {
	m.counter++
	close(m.changed)
	m.changed = make(chan struct{})
}

// noteWrite records a write on the primary: the set's last write moves on.
func (rs *ReplicaSet) noteWrite() {
	rs.mu.Lock()
	rs.noteWriteLocked()
	rs.mu.Unlock()
}

// noteWriteLocked moves the set's last write on: a new opTime in the
// current term, as the oplog entry of a write has, at the present time.
func (rs *ReplicaSet) noteWriteLocked() {
	now := time.Now()
	sec := uint32(now.Unix())
	if sec > rs.opTS.T {
		rs.opTS = bson.Timestamp{T: sec, I: 1}
	} else {
		rs.opTS.I++
	}
	rs.opTerm = rs.term
	if d := now.Truncate(time.Millisecond); d.After(rs.lastWriteDate) {
		rs.lastWriteDate = d
	}
}

// electionID returns the electionId of term, as mongod makes it: the
// largest positive timestamp, then the term, big-endian, so that a later
// term has a greater one.
func electionID(term int64) bson.ObjectID {
	var id bson.ObjectID
	copy(id[:4], []byte{0x7f, 0xff, 0xff, 0xff})
	for i := range 8 {
		id[4+i] = byte(uint64(term) >> (56 - 8*i))
	}
	return id
}

// helloMember returns the replica set fields of a member's hello reply,
// after the wait of an awaitable hello, and sets req.next for an exhaust
// one.
func (s *Server) helloMember(req *request) (bson.D, error) {
	if !s.streams() {
		// A member older than 4.4 knows no awaitable hello: it ignores
		// the fields, answers at once, and reports no topologyVersion.
		d, _ := s.rs.helloFields(s.self, req.name == "hello")
		return slices.DeleteFunc(d, func(e bson.E) bool { return e.Key == "topologyVersion" }), nil
	}
	aw, err := parseAwait(req)
	if err != nil {
		return nil, err
	}
	if aw != nil {
		s.stats.awaitableHello()
		if err := s.awaitChange(req, aw); err != nil {
			return nil, err
		}
	}
	d, tv := s.rs.helloFields(s.self, req.name == "hello")
	if aw != nil && req.flags&wire.ExhaustAllowed != 0 {
		req.next = nextHello(req.body, tv)
	}
	return d, nil
}

// await is an awaitable hello's topologyVersion and maxAwaitTimeMS.
type await struct {
	processID bson.ObjectID
	counter   int64
	max       time.Duration
}

// parseAwait reads the topologyVersion and maxAwaitTimeMS of a hello, as
// mongod checks them; nil if it has neither.
func parseAwait(req *request) (*await, error) {
	tvv, tvErr := req.body.LookupErr("topologyVersion")
	mv, maxErr := req.body.LookupErr("maxAwaitTimeMS")
	switch {
	case tvErr == nil && maxErr != nil:
		return nil, errorf(codeAwaitPairing, "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'")
	case tvErr != nil && maxErr == nil:
		return nil, errorf(codeAwaitPairing, "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'")
	case tvErr != nil:
		if req.flags&wire.ExhaustAllowed != 0 {
			return nil, errorf(codeExhaustNeedsAwaitTime, "An isMaster or hello request with exhaust must specify 'maxAwaitTimeMS'")
		}
		return nil, nil
	}
	doc, ok := tvv.DocumentOK()
	if !ok {
		return nil, errorf(codeNotAnObject, "invalid parameter: expected an object (topologyVersion)")
	}
	aw := &await{}
	var hasPID, hasCounter bool
	for _, e := range mustElements(doc) {
		v := e.Value()
		switch e.Key() {
		case "processId":
			if aw.processID, hasPID = v.ObjectIDOK(); !hasPID {
				return nil, errorf(codeTypeMismatch, "BSON field 'TopologyVersion.processId' is the wrong type '%s', expected type 'objectId'", typeName(v.Type))
			}
		case "counter":
			if aw.counter, hasCounter = v.Int64OK(); !hasCounter {
				return nil, errorf(codeTypeMismatch, "BSON field 'TopologyVersion.counter' is the wrong type '%s', expected type 'long'", typeName(v.Type))
			}
		default:
			return nil, errorf(codeIDLUnknownField, "BSON field 'TopologyVersion.%s' is an unknown field.", e.Key())
		}
	}
	switch {
	case !hasPID:
		return nil, errorf(codeMissingField, "BSON field 'TopologyVersion.processId' is missing but a required field")
	case !hasCounter:
		return nil, errorf(codeMissingField, "BSON field 'TopologyVersion.counter' is missing but a required field")
	case aw.counter < 0:
		return nil, errorf(codeAwaitNegativeCounter, "topologyVersion must have a non-negative counter")
	}
	ms, err := integerField(mv, "maxAwaitTimeMS")
	if err != nil {
		return nil, err
	}
	if ms < 0 {
		return nil, errorf(codeAwaitNegativeTime, "maxAwaitTimeMS must be a non-negative integer")
	}
	aw.max = time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
	return aw, nil
}

// integerField reads an integer argument as mongod's
// bsonExtractIntegerField does: any number with an integral value.
func integerField(v bson.RawValue, name string) (int64, error) {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return v.AsInt64(), nil
	case bson.TypeDouble:
		f := v.Double()
		if f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
			return 0, errorf(codeBadValue, "Expected field \"%s\" to have a value exactly representable as a 64-bit integer, but found %s: %v", name, name, f)
		}
		return int64(f), nil
	}
	return 0, errorf(codeTypeMismatch, "Expected field \"%s\" to have numeric type, but found %s", name, typeName(v.Type))
}

// awaitChange waits as an awaitable hello does: until the server's
// topologyVersion moves past aw's (a standalone's never does), or aw.max
// passes; at once if aw is of
// another process, or older. It ends the connection (errCloseConnection)
// if the client hangs up or the server stops meanwhile.
func (s *Server) awaitChange(req *request, aw *await) error {
	pid, counter, changed := s.topology()
	switch {
	case aw.processID != pid || aw.counter < counter:
		return nil // the client's version is of another process, or old
	case aw.counter > counter:
		code := int32(codeAwaitCounterAhead)
		if s.rs == nil {
			code = codeAwaitStandaloneCounterAhead
		}
		return errorf(code, "Received a topology version with counter: %d which is greater than the server topology version counter: %d", aw.counter, counter)
	case aw.max == 0:
		return nil
	}
	s.stats.awaiting(1)
	defer s.stats.awaiting(-1)
	// A fail point set on hello ends the wait early, so that it applies
	// from the next hello of the stream at once: mongod would apply it
	// only after maxAwaitTimeMS, which tests of heartbeat failures do not
	// wait for. The reply is the same as at the end of the wait.
	fpSet := s.failPoints.helloChanged()
	w := req.conn.watchHangUp()
	t := time.NewTimer(aw.max)
	defer t.Stop()
	select {
	case <-changed:
	case <-fpSet:
	case <-t.C:
	case <-w.gone:
	case <-req.conn.life.done:
	}
	if w.stop() || req.conn.closing() {
		return errCloseConnection
	}
	return nil
}

// nextHello returns the command an exhaust hello runs next: body with the
// topologyVersion of the reply just made, tv, so that it waits for the
// next change.
func nextHello(body bson.Raw, tv bson.D) bson.Raw {
	var d bson.D
	for _, e := range mustElements(body) {
		if e.Key() != "topologyVersion" {
			d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
		}
	}
	return mustMarshal(append(d, bson.E{Key: "topologyVersion", Value: tv}))
}

// streams reports whether the server has the awaitable hello and the
// topologyVersion of MongoDB 4.4 (maxWireVersion 9) and later.
func (s *Server) streams() bool { return s.cfg.maxWireVersion >= 9 }

// helloFields returns the replica set fields of member i's hello (modern
// is hello rather than legacy hello), in mongod's order, and its
// topologyVersion.
func (rs *ReplicaSet) helloFields(i int, modern bool) (d, tv bson.D) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	m := rs.members[i]
	tv = bson.D{{Key: "processId", Value: m.processID}, {Key: "counter", Value: m.counter}}
	hosts, passives, arbiters := bson.A{}, bson.A{}, bson.A{}
	for _, o := range rs.members {
		switch {
		case o.conf.Hidden:
		case o.conf.Arbiter:
			arbiters = append(arbiters, o.srv.advertised)
		case o.conf.Passive:
			passives = append(passives, o.srv.advertised)
		default:
			hosts = append(hosts, o.srv.advertised)
		}
	}
	d = bson.D{{Key: "topologyVersion", Value: tv}, {Key: "hosts", Value: hosts}}
	if len(passives) > 0 {
		d = append(d, bson.E{Key: "passives", Value: passives})
	}
	if len(arbiters) > 0 {
		d = append(d, bson.E{Key: "arbiters", Value: arbiters})
	}
	writable := "isWritablePrimary"
	if !modern {
		writable = "ismaster"
	}
	d = append(d,
		bson.E{Key: "setName", Value: rs.name},
		bson.E{Key: "setVersion", Value: int32(setVersion)},
		bson.E{Key: writable, Value: m.role == rolePrimary && !m.steppingDown},
		bson.E{Key: "secondary", Value: m.role == roleSecondary})
	if m.primary >= 0 {
		d = append(d, bson.E{Key: "primary", Value: rs.members[m.primary].srv.advertised})
	}
	switch {
	case m.conf.Arbiter:
		d = append(d, bson.E{Key: "arbiterOnly", Value: true})
	case !m.conf.electable():
		d = append(d, bson.E{Key: "passive", Value: true})
	}
	if m.conf.Hidden {
		d = append(d, bson.E{Key: "hidden", Value: true})
	}
	if len(m.conf.Tags) > 0 {
		tags := bson.D{}
		for _, k := range slices.Sorted(maps.Keys(m.conf.Tags)) {
			tags = append(tags, bson.E{Key: k, Value: m.conf.Tags[k]})
		}
		d = append(d, bson.E{Key: "tags", Value: tags})
	}
	d = append(d, bson.E{Key: "me", Value: m.srv.advertised})
	if m.role == rolePrimary {
		d = append(d, bson.E{Key: "electionId", Value: electionID(m.term)})
	}
	if !m.conf.Arbiter {
		d = append(d, bson.E{Key: "lastWrite", Value: rs.lastWriteLocked(m)})
	}
	return d, tv
}

// lastWriteLocked returns m's lastWrite: the set's last write, less m's
// lag. Replication being instantaneous, the majority has it too.
func (rs *ReplicaSet) lastWriteLocked(m *member) bson.D {
	ts, date := rs.appliedLocked(m)
	op := bson.D{{Key: "ts", Value: ts}, {Key: "t", Value: rs.opTerm}}
	return bson.D{
		{Key: "opTime", Value: op},
		{Key: "lastWriteDate", Value: bson.NewDateTimeFromTime(date)},
		{Key: "majorityOpTime", Value: op},
		{Key: "majorityWriteDate", Value: bson.NewDateTimeFromTime(date)},
	}
}

// appliedLocked returns the timestamp and wall time of m's last applied
// write: the set's last write, less m's lag.
func (rs *ReplicaSet) appliedLocked(m *member) (bson.Timestamp, time.Time) {
	ts, date := rs.opTS, rs.lastWriteDate
	if m.lag > 0 {
		date = date.Add(-m.lag)
		ts.T -= min(ts.T, uint32(min(m.lag/time.Second, math.MaxUint32)))
	}
	return ts, date
}

// admit checks, as a member does before the fail point, that req may run
// on this member now, and refuses it as mongod does: a write elsewhere
// than on the primary with NotWritablePrimary; a read without a
// $readPreference other than primary with NotPrimaryNoSecondaryOk; a read
// on an arbiter with NotPrimaryOrSecondary. A write admitted on the
// primary is counted until release, so that a step-down interrupts it and
// waits for it.
func (s *Server) admit(req *request, h handler) (release func(), err error) {
	secondaryOK, err := secondaryOK(req.body)
	if err != nil {
		return nil, err
	}
	rs := s.rs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	m := rs.members[s.self]
	if m.steppingDown && h.secondary == secondaryNever && req.db != "local" {
		// A primary that runs replSetStepDown takes no writes while it
		// waits for a secondary to catch up, as mongod.
		return nil, errorf(codeNotWritablePrimary, "not primary")
	}
	if m.role == rolePrimary || req.db == "local" {
		if m.role != rolePrimary || h.secondary != secondaryNever {
			return func() {}, nil
		}
		ep := m.writes
		ep.n++
		req.interrupt = ep.interrupt
		return func() {
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if ep.n--; ep.n == 0 && ep.idle != nil {
				close(ep.idle)
				ep.idle = nil
			}
		}, nil
	}
	switch h.secondary {
	case secondaryNever:
		return nil, errorf(codeNotWritablePrimary, "not primary")
	case secondaryOptIn:
		if !secondaryOK {
			return nil, errorf(codeNotPrimaryNoSecondaryOk, "not primary and secondaryOk=false")
		}
	}
	if h.secondary != secondaryAlways && m.role != roleSecondary {
		return nil, errorf(codeNotPrimaryOrSecondary, "node is not in primary or recovering state")
	}
	return func() {}, nil
}

// isPrimary reports whether member i is primary.
func (rs *ReplicaSet) isPrimary(i int) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.members[i].role == rolePrimary
}

// primaryEpoch returns the channel closed when member i stops being
// primary, nil if it is not primary: what ends a transaction started there.
func (rs *ReplicaSet) primaryEpoch(i int) <-chan struct{} {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if m := rs.members[i]; m.role == rolePrimary {
		return m.writes.interrupt
	}
	return nil
}

// readPreferenceModes are the modes of a $readPreference.
var readPreferenceModes = []string{"primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest"}

// secondaryOK reports whether the command's $readPreference lets a
// secondary run it: a mode other than primary.
func secondaryOK(body bson.Raw) (bool, error) {
	v, err := body.LookupErr("$readPreference")
	if err != nil {
		return false, nil
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return false, errorf(codeTypeMismatch, "BSON field '$readPreference' is the wrong type '%s', expected type 'object'", typeName(v.Type))
	}
	mv, err := doc.LookupErr("mode")
	if err != nil {
		return false, errorf(codeFailedToParse, "BSON field '$readPreference.mode' is missing but a required field")
	}
	mode, ok := mv.StringValueOK()
	if !ok {
		return false, errorf(codeTypeMismatch, "BSON field '$readPreference.mode' is the wrong type '%s', expected type 'string'", typeName(mv.Type))
	}
	if !slices.Contains(readPreferenceModes, mode) {
		return false, errorf(codeBadValue, "Enumeration value '%s' for field '$readPreference.mode' is not a valid value.", mode)
	}
	return mode != "primary", nil
}

// interrupted reports whether ch, a write's interrupt, is closed.
func interrupted(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// errInterrupted is the failure of a write that a step-down killed.
func errInterrupted() error {
	return errorf(codeInterruptedDueToReplStateChange, "operation was interrupted")
}

// stateChangeFields returns the fields a replica set member adds to a
// reply with the error code: its topologyVersion, for the codes of the
// NotPrimaryError category, as mongod adds it.
func (s *Server) stateChangeFields(code int32) []bson.E {
	if s.rs == nil || !notPrimaryCodes[code] || !s.streams() {
		return nil
	}
	s.rs.mu.Lock()
	defer s.rs.mu.Unlock()
	m := s.rs.members[s.self]
	return []bson.E{{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: m.processID}, {Key: "counter", Value: m.counter}}}}
}

// reachable waits while the server is partitioned (ReplicaSet.Partition):
// it returns true once it may answer, false if done closes first.
func (s *Server) reachable(done <-chan struct{}) bool {
	if s.rs == nil {
		return true
	}
	for {
		s.rs.mu.Lock()
		healed := s.rs.members[s.self].partitioned
		s.rs.mu.Unlock()
		if healed == nil {
			return true
		}
		select {
		case <-healed:
		case <-done:
			return false
		}
	}
}
