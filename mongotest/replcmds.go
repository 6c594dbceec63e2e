package mongotest

import (
	"maps"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements the replica set commands that drivers, their test
// runners and mongosh use: replSetGetStatus (rs.status()), replSetGetConfig
// (rs.conf()), replSetStepDown (rs.stepDown()) and replSetFreeze
// (rs.freeze()). As mongod's ReplSetCommands, they run on the admin
// database only, on any member (a secondary, an arbiter), and a mongod
// that is not a replica set member refuses them.
//
// Nothing happens on its own in the test server's replica set, but what
// mongod does at once as part of these commands. replSetStepDown on the
// primary waits, as mongod, for an electable secondary to have its writes
// (with instantaneous replication, one that runs and is reachable), then
// steps down; the member is then not electable for the command's period,
// and, unless force was given, the election handoff of mongod
// (enableElectionHandoff, on by default since MongoDB 4.0.2) elects an
// electable secondary at once, in a new term. What mongod does later, by
// timeouts, the test server does not: no election follows a forced
// step-down, or a handoff to no one, until Elect, and a one-member set
// does not elect itself again once the period is over (replSetFreeze: 0
// does, as mongod's). Where mongod's handoff would ask a frozen member,
// which refuses, and another would win an election after
// electionTimeoutMillis, the test server elects that other at once.

// The error codes of the replica set commands, beyond replset.go's.
const (
	codeNoReplicationEnabled           = 76
	codeNotSecondary                   = 95
	codeConflictingOperationInProgress = 117
	codeExceededTimeLimit              = 262
)

func init() {
	for code, name := range map[int32]string{
		codeNoReplicationEnabled:           "NoReplicationEnabled",
		codeNotSecondary:                   "NotSecondary",
		codeConflictingOperationInProgress: "ConflictingOperationInProgress",
		codeExceededTimeLimit:              "ExceededTimeLimit",
		codePrimarySteppedDown:             "PrimarySteppedDown",
	} {
		if _, ok := codeNames[code]; !ok {
			codeNames[code] = name
		}
	}
}

// maxVotingMembers is the most voting members a replica set configuration
// may have in MongoDB.
const maxVotingMembers = 7

// The settings of the configuration: mongod's defaults.
const (
	heartbeatIntervalMillis    = 2000
	heartbeatTimeoutSecs       = 10
	electionTimeoutMillis      = 10000
	catchUpTimeoutMillis       = -1
	catchUpTakeoverDelayMillis = 30000
)

// The states of a member, as replSetGetStatus reports them (mongod's
// MemberState).
const (
	statePrimary   = 1
	stateSecondary = 2
	stateArbiter   = 7
	stateDown      = 8
)

// replCommand checks what every replica set command checks first: that it
// runs on admin (mongod's adminOnly commands), then that the server is a
// replica set member (checkReplEnabledForCommand).
func (s *Server) replCommand(req *request) error {
	if err := adminOnly(req); err != nil {
		return err
	}
	if s.rs == nil {
		return errorf(codeNoReplicationEnabled, "not running with --replSet")
	}
	return nil
}

// adminOnly refuses a command that mongod runs on the admin database only.
func adminOnly(req *request) error {
	if req.db != "admin" {
		return errorf(codeUnauthorized, "%s may only be run against the admin database.", req.name)
	}
	return nil
}

// notOnMongos refuses, on a mongos, the replica set commands it does not
// have.
func (s *Server) notOnMongos(req *request) error {
	if s.role == roleMongos {
		return errorf(codeCommandNotFound, "no such command: '%s'", req.name)
	}
	return nil
}

// replSetGetStatus runs {replSetGetStatus: 1}: the state of the set as
// the member sees it, in the shape of mongod's
// TopologyCoordinator::prepareStatusResponse. The member knows the others
// as its heartbeats would: a member that is stopped or partitioned is
// down ((not reachable/healthy)), the others as they are. It leaves out
// what the test server has not (electionCandidateMetrics,
// electionParticipantMetrics, lastStableRecoveryTimestamp).
func (s *Server) replSetGetStatus(req *request) (bson.D, error) {
	if s.role == roleMongos {
		if err := adminOnly(req); err != nil {
			return nil, err
		}
		return nil, errorf(codeBadValue, "mongotest does not implement replSetGetStatus on a mongos, which refuses it: replSetGetStatus is not supported through mongos")
	}
	if err := s.replCommand(req); err != nil {
		return nil, err
	}
	rs := s.rs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err := rs.checkVotersLocked(req.name); err != nil {
		return nil, err
	}
	now := time.Now()
	self := rs.members[s.self]
	members := bson.A{}
	for i := range rs.members {
		members = append(members, rs.memberStatusLocked(s.self, i, now))
	}
	source, sourceID := rs.syncSourceLocked(self)
	voting, writable := rs.votersLocked()
	ts, wall, term := bson.Timestamp{}, time.Unix(0, 0), int64(-1)
	if !self.conf.Arbiter {
		ts, wall = rs.appliedLocked(self)
		term = rs.opTerm
	}
	op := bson.D{{Key: "ts", Value: ts}, {Key: "t", Value: term}}
	return bson.D{
		{Key: "set", Value: rs.name},
		{Key: "date", Value: bson.NewDateTimeFromTime(now)},
		{Key: "myState", Value: stateOf(self)},
		{Key: "term", Value: self.term},
		{Key: "syncSourceHost", Value: source},
		{Key: "syncSourceId", Value: sourceID},
		{Key: "heartbeatIntervalMillis", Value: int64(heartbeatIntervalMillis)},
		{Key: "majorityVoteCount", Value: int32(voting/2 + 1)},
		{Key: "writeMajorityCount", Value: int32(min(voting/2+1, writable))},
		{Key: "votingMembersCount", Value: int32(voting)},
		{Key: "writableVotingMembersCount", Value: int32(writable)},
		{Key: "optimes", Value: bson.D{
			// Replication is instantaneous: the majority has every write.
			{Key: "lastCommittedOpTime", Value: op},
			{Key: "lastCommittedWallTime", Value: bson.NewDateTimeFromTime(wall)},
			{Key: "readConcernMajorityOpTime", Value: op},
			{Key: "appliedOpTime", Value: op},
			{Key: "durableOpTime", Value: op},
			{Key: "lastAppliedWallTime", Value: bson.NewDateTimeFromTime(wall)},
			{Key: "lastDurableWallTime", Value: bson.NewDateTimeFromTime(wall)},
		}},
		{Key: "members", Value: members},
	}, nil
}

// memberStatusLocked returns member i's entry of replSetGetStatus's
// members, as member self sees it at now.
func (rs *ReplicaSet) memberStatusLocked(self, i int, now time.Time) bson.D {
	o := rs.members[i]
	d := bson.D{{Key: "_id", Value: int32(i)}, {Key: "name", Value: o.srv.advertised}}
	if i != self && (o.stopped || o.partitioned != nil) {
		// What mongod's heartbeats leave of a member they do not reach
		// (MemberData::setDownValues): state DOWN, no optime.
		msg := "Error connecting to " + o.srv.advertised + " :: caused by :: Connection refused"
		if !o.stopped {
			msg = "Couldn't get a connection within the time limit"
		}
		null := bson.D{{Key: "ts", Value: bson.Timestamp{}}, {Key: "t", Value: int64(-1)}}
		d = append(d,
			bson.E{Key: "health", Value: 0.0},
			bson.E{Key: "state", Value: int32(stateDown)},
			bson.E{Key: "stateStr", Value: "(not reachable/healthy)"},
			bson.E{Key: "uptime", Value: int32(0)})
		if !o.conf.Arbiter {
			d = append(d,
				bson.E{Key: "optime", Value: null},
				bson.E{Key: "optimeDurable", Value: null},
				bson.E{Key: "optimeDate", Value: bson.DateTime(0)},
				bson.E{Key: "optimeDurableDate", Value: bson.DateTime(0)},
				bson.E{Key: "lastAppliedWallTime", Value: bson.NewDateTimeFromTime(o.downWrite)},
				bson.E{Key: "lastDurableWallTime", Value: bson.NewDateTimeFromTime(o.downWrite)})
		}
		return append(d,
			bson.E{Key: "lastHeartbeat", Value: bson.NewDateTimeFromTime(now)},
			bson.E{Key: "lastHeartbeatRecv", Value: bson.NewDateTimeFromTime(o.downAt)},
			bson.E{Key: "pingMs", Value: int64(0)},
			bson.E{Key: "lastHeartbeatMessage", Value: msg},
			bson.E{Key: "syncSourceHost", Value: ""},
			bson.E{Key: "syncSourceId", Value: int32(-1)},
			bson.E{Key: "infoMessage", Value: ""},
			bson.E{Key: "configVersion", Value: int32(setVersion)},
			bson.E{Key: "configTerm", Value: int32(o.term)})
	}
	d = append(d,
		bson.E{Key: "health", Value: 1.0},
		bson.E{Key: "state", Value: stateOf(o)},
		bson.E{Key: "stateStr", Value: stateString(stateOf(o))},
		bson.E{Key: "uptime", Value: int32(now.Sub(o.upSince) / time.Second)})
	if !o.conf.Arbiter {
		ts, wall := rs.appliedLocked(o)
		op := bson.D{{Key: "ts", Value: ts}, {Key: "t", Value: rs.opTerm}}
		date := bson.NewDateTimeFromTime(time.Unix(int64(ts.T), 0))
		d = append(d, bson.E{Key: "optime", Value: op})
		if i != self {
			d = append(d, bson.E{Key: "optimeDurable", Value: op})
		}
		d = append(d, bson.E{Key: "optimeDate", Value: date})
		if i != self {
			d = append(d, bson.E{Key: "optimeDurableDate", Value: date})
		}
		d = append(d,
			bson.E{Key: "lastAppliedWallTime", Value: bson.NewDateTimeFromTime(wall)},
			bson.E{Key: "lastDurableWallTime", Value: bson.NewDateTimeFromTime(wall)})
	}
	if i != self {
		// Heartbeats are instantaneous: the last one is now.
		d = append(d,
			bson.E{Key: "lastHeartbeat", Value: bson.NewDateTimeFromTime(now)},
			bson.E{Key: "lastHeartbeatRecv", Value: bson.NewDateTimeFromTime(now)},
			bson.E{Key: "pingMs", Value: int64(0)},
			bson.E{Key: "lastHeartbeatMessage", Value: ""})
	}
	source, sourceID := rs.syncSourceLocked(o)
	d = append(d,
		bson.E{Key: "syncSourceHost", Value: source},
		bson.E{Key: "syncSourceId", Value: sourceID},
		bson.E{Key: "infoMessage", Value: ""})
	if o.role == rolePrimary {
		d = append(d,
			bson.E{Key: "electionTime", Value: rs.electionTS},
			bson.E{Key: "electionDate", Value: bson.NewDateTimeFromTime(time.Unix(int64(rs.electionTS.T), 0))})
	}
	d = append(d,
		bson.E{Key: "configVersion", Value: int32(setVersion)},
		bson.E{Key: "configTerm", Value: int32(o.term)})
	if i == self {
		d = append(d, bson.E{Key: "self", Value: true}, bson.E{Key: "lastHeartbeatMessage", Value: ""})
	}
	return d
}

// stateOf returns m's replica set state.
func stateOf(m *member) int32 {
	switch m.role {
	case rolePrimary:
		return statePrimary
	case roleArbiter:
		return stateArbiter
	}
	return stateSecondary
}

// stateString is mongod's name of a member state.
func stateString(state int32) string {
	switch state {
	case statePrimary:
		return "PRIMARY"
	case stateArbiter:
		return "ARBITER"
	}
	return "SECONDARY"
}

// syncSourceLocked returns the member m replicates from, and its _id: the
// primary, for a secondary that reaches one; "" and -1 otherwise, as for
// the primary and arbiters.
func (rs *ReplicaSet) syncSourceLocked(m *member) (string, int32) {
	if m.role != roleSecondary || rs.primary < 0 {
		return "", -1
	}
	p := rs.members[rs.primary]
	if p.stopped || p.partitioned != nil {
		return "", -1
	}
	return p.srv.advertised, int32(rs.primary)
}

// votersLocked returns the count of the voting members (every member),
// and of those that hold data (all but the arbiters).
func (rs *ReplicaSet) votersLocked() (voting, writable int) {
	for _, m := range rs.members {
		voting++
		if !m.conf.Arbiter {
			writable++
		}
	}
	return voting, writable
}

// checkVotersLocked refuses to describe a set with more voting members
// than MongoDB allows: mongod has no configuration for it.
func (rs *ReplicaSet) checkVotersLocked(command string) error {
	if voting, _ := rs.votersLocked(); voting > maxVotingMembers {
		return errorf(codeBadValue, "mongotest: %s: the replica set has %d members, which all vote, and MongoDB allows at most %d voting members: there is no configuration to describe",
			command, voting, maxVotingMembers)
	}
	return nil
}

// replSetGetConfig runs {replSetGetConfig: 1, commitmentStatus}: the
// set's configuration, as mongod's ReplSetConfig serializes it (and
// rs.conf() shows it): version 1, the term of the last election (from
// MongoDB 4.4), each member's priority (0 for a passive, hidden or
// arbiter member, 1 otherwise), votes and tags, mongod's default
// settings. commitmentStatus, on the primary only as mongod, is always
// true: the configuration never changes.
func (s *Server) replSetGetConfig(req *request) (bson.D, error) {
	if err := s.notOnMongos(req); err != nil {
		return nil, err
	}
	if err := s.replCommand(req); err != nil {
		return nil, err
	}
	commitment, err := boolArg(req.body, "commitmentStatus", false)
	if err != nil {
		return nil, err
	}
	rs := s.rs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err := rs.checkVotersLocked(req.name); err != nil {
		return nil, err
	}
	m := rs.members[s.self]
	if commitment && (m.role != rolePrimary || m.steppingDown) {
		return nil, errorf(codeNotWritablePrimary, "commitmentStatus is only supported on primary.")
	}
	d := bson.D{{Key: "config", Value: rs.configLocked(s.cfg.maxWireVersion)}}
	if commitment {
		d = append(d, bson.E{Key: "commitmentStatus", Value: true})
	}
	return d, nil
}

// configLocked returns the set's configuration document, as a server of
// maxWireVersion wire serializes it.
func (rs *ReplicaSet) configLocked(wire int32) bson.D {
	delay := "secondaryDelaySecs"
	if wire < 13 { // before MongoDB 5.0
		delay = "slaveDelay"
	}
	members := bson.A{}
	for i, m := range rs.members {
		priority := 1.0
		if !m.conf.electable() {
			priority = 0
		}
		tags := bson.D{}
		for _, k := range slices.Sorted(maps.Keys(m.conf.Tags)) {
			tags = append(tags, bson.E{Key: k, Value: m.conf.Tags[k]})
		}
		members = append(members, bson.D{
			{Key: "_id", Value: int32(i)},
			{Key: "host", Value: m.srv.advertised},
			{Key: "arbiterOnly", Value: m.conf.Arbiter},
			{Key: "buildIndexes", Value: true},
			{Key: "hidden", Value: m.conf.Hidden},
			{Key: "priority", Value: priority},
			{Key: "tags", Value: tags},
			{Key: delay, Value: int64(0)},
			{Key: "votes", Value: int32(1)},
		})
	}
	d := bson.D{{Key: "_id", Value: rs.name}, {Key: "version", Value: int32(setVersion)}}
	if wire >= 9 {
		// From MongoDB 4.4, the configuration has the term of the
		// primary that wrote it: a new primary writes it again.
		d = append(d, bson.E{Key: "term", Value: int32(rs.term)})
	}
	return append(d,
		bson.E{Key: "members", Value: members},
		bson.E{Key: "protocolVersion", Value: int64(1)},
		bson.E{Key: "writeConcernMajorityJournalDefault", Value: true},
		bson.E{Key: "settings", Value: bson.D{
			{Key: "chainingAllowed", Value: true},
			{Key: "heartbeatIntervalMillis", Value: int32(heartbeatIntervalMillis)},
			{Key: "heartbeatTimeoutSecs", Value: int32(heartbeatTimeoutSecs)},
			{Key: "electionTimeoutMillis", Value: int32(electionTimeoutMillis)},
			{Key: "catchUpTimeoutMillis", Value: int32(catchUpTimeoutMillis)},
			{Key: "catchUpTakeoverDelayMillis", Value: int32(catchUpTakeoverDelayMillis)},
			{Key: "getLastErrorModes", Value: bson.D{}},
			{Key: "getLastErrorDefaults", Value: bson.D{{Key: "w", Value: int32(1)}, {Key: "wtimeout", Value: int32(0)}}},
			{Key: "replicaSetId", Value: rs.replicaSetID},
		}})
}

// replSetFreeze runs {replSetFreeze: seconds}: the member, which must not
// be the primary, may not be elected for seconds; 0 ends a freeze (and
// the period of a replSetStepDown). As mongod's
// TopologyCoordinator::prepareFreezeResponse, it warns of a freeze of one
// second, says "unfreezing" for 0, and, for 0 on the only member of a set
// with no primary, elects it.
func (s *Server) replSetFreeze(req *request) (bson.D, error) {
	if err := s.notOnMongos(req); err != nil {
		return nil, err
	}
	if err := s.replCommand(req); err != nil {
		return nil, err
	}
	secs := numberValue(req.body.Index(0).Value()) // mongod's safeNumberInt: 0 unless a number
	rs := s.rs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	m := rs.members[s.self]
	if m.role == rolePrimary {
		return nil, errorf(codeNotSecondary, "Cannot freeze node when primary or running for election, state: Primary")
	}
	now := time.Now()
	if secs == 0 {
		m.frozenUntil = time.Time{}
		if len(rs.members) == 1 && m.conf.electable() && rs.primary < 0 {
			rs.electLocked(s.self)
		}
		return bson.D{{Key: "info", Value: "unfreezing"}}, nil
	}
	var d bson.D
	if secs == 1 {
		d = bson.D{{Key: "warning", Value: "you really want to freeze for only 1 second?"}}
	}
	if until := now.Add(seconds(secs)); until.After(m.frozenUntil) {
		m.frozenUntil = until
	}
	return d, nil
}

// numberValue is a number's value as mongod's BSONElement::numberLong
// takes it, truncated; 0 for any other type.
func numberValue(v bson.RawValue) int64 {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return v.AsInt64()
	case bson.TypeDouble:
		f := v.Double()
		if f != f || f >= 1<<63 || f < -(1<<63) {
			return 0
		}
		return int64(f)
	}
	return 0
}

// trueValue is mongod's BSONElement::trueValue: false for a missing field,
// null, undefined, false or a zero number; true otherwise.
func trueValue(v bson.RawValue) bool {
	switch v.Type {
	case 0, bson.TypeNull, bson.TypeUndefined:
		return false
	case bson.TypeBoolean:
		return v.Boolean()
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		f, _ := v.AsFloat64OK()
		return f != 0
	}
	return true
}

// replSetStepDown runs {replSetStepDown: seconds,
// secondaryCatchUpPeriodSecs, force}, with mongod's defaults and checks
// (CmdReplSetStepDown): 60 seconds for 0, a catch-up period of 10 seconds
// (0 with force) that may not exceed the step-down's.
func (s *Server) replSetStepDown(req *request) (bson.D, error) {
	if err := s.notOnMongos(req); err != nil {
		return nil, err
	}
	if err := adminOnly(req); err != nil {
		return nil, err
	}
	force := trueValue(req.body.Lookup("force"))
	if s.rs == nil {
		return nil, errorf(codeNoReplicationEnabled, "not running with --replSet")
	}
	secs := numberValue(req.body.Index(0).Value())
	switch {
	case secs == 0:
		secs = 60
	case secs < 0:
		return nil, errorf(codeBadValue, "stepdown period must be a positive integer")
	}
	catchUp := int64(10)
	if force {
		catchUp = 0
	}
	if v, err := req.body.LookupErr("secondaryCatchUpPeriodSecs"); err == nil {
		if catchUp, err = integerField(v, "secondaryCatchUpPeriodSecs"); err != nil {
			return nil, err
		}
	}
	switch {
	case catchUp < 0:
		return nil, errorf(codeBadValue, "secondaryCatchUpPeriodSecs period must be a positive or absent")
	case secs < catchUp:
		return nil, errorf(codeBadValue, "stepdown period must be longer than secondaryCatchUpPeriodSecs")
	}
	return s.stepDown(req, force, seconds(catchUp), seconds(secs))
}

// seconds returns n seconds, capped where a time.Duration ends.
func seconds(n int64) time.Duration {
	return time.Duration(min(n, int64(1<<63-1)/int64(time.Second))) * time.Second
}

// stepDown steps the member down as mongod's
// ReplicationCoordinatorImpl::stepDown does. It interrupts the writes in
// progress and refuses new ones (its hello says it is not writable),
// then, until catchUp has passed, waits for a majority of the members
// that hold data, an electable secondary among them, to have its writes;
// replication being instantaneous, the members that run and are
// reachable have them. It then steps down, is not electable for period,
// and without force hands the election over to the first electable
// secondary that is not frozen. Past catchUp, with force it steps down
// anyway; without, it stays primary and fails with ExceededTimeLimit.
func (s *Server) stepDown(req *request, force bool, catchUp, period time.Duration) (bson.D, error) {
	rs := s.rs
	start := time.Now()
	waitUntil, stepDownUntil := start.Add(catchUp), start.Add(period)
	rs.mu.Lock()
	m := rs.members[s.self]
	if m.role != rolePrimary {
		rs.mu.Unlock()
		return nil, errorf(codeNotWritablePrimary, "not primary so can't step down")
	}
	if m.steppingDown {
		rs.mu.Unlock()
		return nil, errorf(codeConflictingOperationInProgress, "This node is already in the process of stepping down")
	}
	term := rs.term
	m.steppingDown = true
	// The writes in progress are killed (mongod takes the replication
	// state transition lock); those to come are refused until the end.
	ep := m.writes
	close(ep.interrupt)
	m.writes = newWriteEpoch()
	var idle chan struct{}
	if ep.n > 0 {
		idle = make(chan struct{})
		ep.idle = idle
	}
	m.bump()
	rs.mu.Unlock()
	if idle != nil {
		if !s.waitFor(req, idle, nil) {
			return nil, rs.abandonStepDown(m, term, errCloseConnection)
		}
	}
	for {
		rs.mu.Lock()
		if m.role != rolePrimary || !m.steppingDown || rs.term != term {
			rs.mu.Unlock()
			return nil, errorf(codePrimarySteppedDown,
				"While waiting for secondaries to catch up before stepping down, this node decided to step down for other reasons")
		}
		now := time.Now()
		if !now.Before(stepDownUntil) {
			rs.mu.Unlock()
			return nil, rs.abandonStepDown(m, term, errorf(codeExceededTimeLimit,
				"By the time we were ready to step down, we were already past the time we were supposed to step down until"))
		}
		if rs.safeToStepDownLocked(s.self) || (force && !now.Before(waitUntil)) {
			rs.stepDownLocked() // its writes were interrupted already
			m.frozenUntil = stepDownUntil
			if !force {
				if c := rs.handoffCandidateLocked(s.self, now); c >= 0 {
					rs.electLocked(c)
				}
			}
			rs.mu.Unlock()
			return bson.D{}, nil
		}
		if !now.Before(waitUntil) {
			rs.mu.Unlock()
			return nil, rs.abandonStepDown(m, term, errorf(codeExceededTimeLimit,
				"No electable secondaries caught up as of %s. Please use the replSetStepDown command with the argument {force: true} to force node to step down.",
				now.Format("2006-01-02T15:04:05.000-0700")))
		}
		changed := rs.changed
		rs.mu.Unlock()
		t := time.NewTimer(waitUntil.Sub(now))
		ok := s.waitFor(req, changed, t.C)
		t.Stop()
		if !ok {
			return nil, rs.abandonStepDown(m, term, errCloseConnection)
		}
	}
}

// abandonStepDown ends m's step-down attempt, begun in term, that failed
// with err: m takes writes again, and says so in hello. It returns err.
func (rs *ReplicaSet) abandonStepDown(m *member, term int64, err error) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if m.steppingDown && m.role == rolePrimary && rs.term == term {
		m.steppingDown = false
		m.bump()
		rs.notifyLocked()
	}
	return err
}

// waitFor waits, for the command req, until ch or timeout (which may be
// nil) is ready; false if the client hangs up or the server stops first.
func (s *Server) waitFor(req *request, ch <-chan struct{}, timeout <-chan time.Time) bool {
	w := req.conn.watchHangUp()
	select {
	case <-ch:
	case <-timeout:
	case <-w.gone:
	case <-req.conn.life.done:
	}
	return !w.stop() && !req.conn.closing()
}

// safeToStepDownLocked reports whether the primary, member self, may step
// down, as mongod's TopologyCoordinator::isSafeToStepDown says: a majority
// of the voting members that hold data (writeMajorityCount, itself
// included) have its last write, and one of them is an electable
// secondary. Replication being instantaneous, every member that runs and
// is reachable has it.
func (rs *ReplicaSet) safeToStepDownLocked(self int) bool {
	voting, writable := rs.votersLocked()
	caughtUp, electable := 0, false
	for i, o := range rs.members {
		if o.conf.Arbiter || (i != self && (o.stopped || o.partitioned != nil)) {
			continue
		}
		caughtUp++
		electable = electable || (i != self && o.conf.electable())
	}
	return electable && caughtUp >= min(voting/2+1, writable)
}

// handoffCandidateLocked returns the member that the election handoff of
// a step-down of member self elects, as mongod's
// chooseElectionHandoffCandidate chooses it (all electable members have
// priority 1: the first in the configuration), among those that are not
// frozen; -1 if there is none.
func (rs *ReplicaSet) handoffCandidateLocked(self int, now time.Time) int {
	for i, o := range rs.members {
		if i != self && o.conf.electable() && !o.stopped && o.partitioned == nil && o.role == roleSecondary &&
			!now.Before(o.frozenUntil) {
			return i
		}
	}
	return -1
}
