package mongotest_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// adminCmd is the command name: value on admin, with more fields.
func adminCmd(name string, value any, more ...bson.E) bson.D {
	return cmd("admin", append([]bson.E{{Key: name, Value: value}}, more...)...)
}

// The replica set commands are mongod's ReplSetCommands: admin only
// (13 Unauthorized, "<name> may only be run against the admin database."),
// and refused by a mongod started without --replSet with 76
// NoReplicationEnabled, "not running with --replSet"
// (ReplicationCoordinatorImpl::checkReplEnabledForCommand). A mongos has
// none but replSetGetStatus, which it refuses.
func TestReplCommandsOutsideAReplicaSet(t *testing.T) {
	names := []string{"replSetGetStatus", "replSetGetConfig", "replSetStepDown", "replSetFreeze"}
	r := dialRaw(t, start(t))
	rs := dialRaw(t, startRS(t, 1).Members()[0])
	mongos := dialRaw(t, start(t, mongotest.WithMongos()))
	for _, name := range names {
		if msg := checkError(t, r.run(adminCmd(name, 1)), 76, "NoReplicationEnabled"); msg != "not running with --replSet" {
			t.Errorf("%s on a standalone: errmsg %q", name, msg)
		}
		for _, c := range []*rawConn{r, rs} {
			want := name + " may only be run against the admin database."
			if msg := checkError(t, c.run(cmd("test", bson.E{Key: name, Value: 1})), 13, "Unauthorized"); msg != want {
				t.Errorf("%s on test: errmsg %q, want %q", name, msg, want)
			}
		}
		if name == "replSetGetStatus" {
			checkError(t, mongos.run(adminCmd(name, 1)), 2, "BadValue")
		} else {
			checkError(t, mongos.run(adminCmd(name, 1)), 59, "CommandNotFound")
		}
	}
}

// memberStatus is a member of replSetGetStatus's members.
type memberStatus struct {
	ID                int32          `bson:"_id"`
	Name              string         `bson:"name"`
	Health            float64        `bson:"health"`
	State             int32          `bson:"state"`
	StateStr          string         `bson:"stateStr"`
	Uptime            int32          `bson:"uptime"`
	Optime            *opTime        `bson:"optime"`
	OptimeDate        *time.Time     `bson:"optimeDate"`
	SyncSourceHost    string         `bson:"syncSourceHost"`
	SyncSourceID      int32          `bson:"syncSourceId"`
	ElectionTime      bson.Timestamp `bson:"electionTime"`
	ElectionDate      *time.Time     `bson:"electionDate"`
	ConfigVersion     int32          `bson:"configVersion"`
	ConfigTerm        int32          `bson:"configTerm"`
	Self              bool           `bson:"self"`
	LastHeartbeat     *time.Time     `bson:"lastHeartbeat"`
	LastHeartbeatMsg  *string        `bson:"lastHeartbeatMessage"`
	InfoMessage       *string        `bson:"infoMessage"`
	PingMs            *int64         `bson:"pingMs"`
	LastAppliedWallTm *time.Time     `bson:"lastAppliedWallTime"`
}

// replSetStatus is a replSetGetStatus reply.
type replSetStatus struct {
	Set                        string         `bson:"set"`
	Date                       time.Time      `bson:"date"`
	MyState                    int32          `bson:"myState"`
	Term                       int64          `bson:"term"`
	SyncSourceHost             string         `bson:"syncSourceHost"`
	SyncSourceID               int32          `bson:"syncSourceId"`
	HeartbeatIntervalMillis    int64          `bson:"heartbeatIntervalMillis"`
	MajorityVoteCount          int32          `bson:"majorityVoteCount"`
	WriteMajorityCount         int32          `bson:"writeMajorityCount"`
	VotingMembersCount         int32          `bson:"votingMembersCount"`
	WritableVotingMembersCount int32          `bson:"writableVotingMembersCount"`
	Optimes                    map[string]any `bson:"optimes"`
	Members                    []memberStatus `bson:"members"`
}

// statusOf runs replSetGetStatus on srv.
func statusOf(t *testing.T, srv *mongotest.Server) (replSetStatus, bson.Raw) {
	t.Helper()
	reply := dialRaw(t, srv).run(adminCmd("replSetGetStatus", 1))
	checkOK(t, reply)
	var st replSetStatus
	if err := bson.Unmarshal(reply, &st); err != nil {
		t.Fatalf("replSetGetStatus %s: %v", reply, err)
	}
	return st, reply
}

// replSetGetStatus reports the set as mongod's
// TopologyCoordinator::prepareStatusResponse does, in the shape of the
// manual's replSetGetStatus page
// (https://www.mongodb.com/docs/manual/reference/command/replSetGetStatus/):
// members sorted by _id, each with health, state and stateStr, the
// optimes of the members that hold data, the primary's electionTime, the
// sync source of the secondaries; the set's counts of votes.
func TestReplSetGetStatus(t *testing.T) {
	rs := startRS(t, 5,
		mongotest.WithMember(2, mongotest.Member{Passive: true}),
		mongotest.WithMember(3, mongotest.Member{Hidden: true}),
		mongotest.WithMember(4, mongotest.Member{Arbiter: true}))
	m := rs.Members()
	before := time.Now().Add(-time.Second)
	st, reply := statusOf(t, m[0])
	if st.Set != "rs0" || st.MyState != 1 || st.Term != 1 || st.SyncSourceHost != "" || st.SyncSourceID != -1 ||
		st.HeartbeatIntervalMillis != 2000 || st.Date.Before(before) {
		t.Errorf("status %s", reply)
	}
	for field, typ := range map[string]bson.Type{"myState": bson.TypeInt32, "term": bson.TypeInt64,
		"heartbeatIntervalMillis": bson.TypeInt64, "date": bson.TypeDateTime} {
		if got := reply.Lookup(field).Type; got != typ {
			t.Errorf("%s is a %v, want a %v", field, got, typ)
		}
	}
	// Five voting members, an arbiter among them: majorityVoteCount 3,
	// writeMajorityCount min(3, 4 writable voters) (ReplSetConfig's
	// majorities).
	if st.MajorityVoteCount != 3 || st.WriteMajorityCount != 3 || st.VotingMembersCount != 5 || st.WritableVotingMembersCount != 4 {
		t.Errorf("counts %d %d %d %d, want 3 3 5 4", st.MajorityVoteCount, st.WriteMajorityCount, st.VotingMembersCount, st.WritableVotingMembersCount)
	}
	for _, k := range []string{"lastCommittedOpTime", "lastCommittedWallTime", "readConcernMajorityOpTime", "appliedOpTime",
		"durableOpTime", "lastAppliedWallTime", "lastDurableWallTime"} {
		if _, ok := st.Optimes[k]; !ok {
			t.Errorf("optimes has no %s: %v", k, st.Optimes)
		}
	}
	wantStates := []struct {
		state int32
		str   string
	}{{1, "PRIMARY"}, {2, "SECONDARY"}, {2, "SECONDARY"}, {2, "SECONDARY"}, {7, "ARBITER"}}
	if len(st.Members) != 5 {
		t.Fatalf("members %s", reply)
	}
	h := helloOf(t, m[0])
	for i, ms := range st.Members {
		if ms.ID != int32(i) || ms.Name != m[i].Addr() || ms.Health != 1 || ms.State != wantStates[i].state || ms.StateStr != wantStates[i].str {
			t.Errorf("member %d: %+v", i, ms)
		}
		if ms.Self != (i == 0) || ms.ConfigVersion != 1 || ms.ConfigTerm != 1 || ms.InfoMessage == nil || ms.LastHeartbeatMsg == nil {
			t.Errorf("member %d: self %v configVersion %d configTerm %d", i, ms.Self, ms.ConfigVersion, ms.ConfigTerm)
		}
		// The arbiter holds no data: no optime.
		if (ms.Optime == nil) != (i == 4) || (i < 4 && (ms.Optime.TS != h.LastWrite.OpTime.TS || ms.OptimeDate == nil ||
			!ms.OptimeDate.Equal(time.Unix(int64(ms.Optime.TS.T), 0)))) {
			t.Errorf("member %d: optime %+v date %v, want the set's last write %+v", i, ms.Optime, ms.OptimeDate, h.LastWrite.OpTime)
		}
		// The secondaries sync from the primary; mongod reports the
		// heartbeats of the others, not its own.
		wantSource, wantID := "", int32(-1)
		if i >= 1 && i <= 3 {
			wantSource, wantID = m[0].Addr(), 0
		}
		if ms.SyncSourceHost != wantSource || ms.SyncSourceID != wantID {
			t.Errorf("member %d: syncSourceHost %q syncSourceId %d, want %q %d", i, ms.SyncSourceHost, ms.SyncSourceID, wantSource, wantID)
		}
		if (ms.LastHeartbeat == nil) != (i == 0) || (ms.PingMs == nil) != (i == 0) {
			t.Errorf("member %d: lastHeartbeat %v pingMs %v", i, ms.LastHeartbeat, ms.PingMs)
		}
		if (ms.ElectionDate != nil) != (i == 0) {
			t.Errorf("member %d: electionDate %v, want one on the primary only", i, ms.ElectionDate)
		}
	}
	first := st.Members[0].ElectionTime
	if first.T == 0 || !st.Members[0].ElectionDate.Equal(time.Unix(int64(first.T), 0)) {
		t.Errorf("electionTime %v electionDate %v", first, st.Members[0].ElectionDate)
	}

	// Seen from a secondary, and from the arbiter.
	st, reply = statusOf(t, m[2])
	if st.MyState != 2 || st.SyncSourceHost != m[0].Addr() || st.SyncSourceID != 0 || !st.Members[2].Self || st.Members[0].Self {
		t.Errorf("status on a secondary %s", reply)
	}
	if st, reply = statusOf(t, m[4]); st.MyState != 7 || st.SyncSourceHost != "" || st.Members[4].Optime != nil {
		t.Errorf("status on the arbiter %s", reply)
	}

	// A stopped member is down, as the heartbeats of mongod find it.
	if err := rs.Stop(1); err != nil {
		t.Fatal(err)
	}
	st, reply = statusOf(t, m[0])
	down := st.Members[1]
	if down.Health != 0 || down.State != 8 || down.StateStr != "(not reachable/healthy)" || down.Uptime != 0 ||
		down.Optime == nil || down.Optime.T != -1 || down.Optime.TS != (bson.Timestamp{}) ||
		!strings.Contains(*down.LastHeartbeatMsg, "Connection refused") || down.SyncSourceHost != "" {
		t.Errorf("a stopped member: %s", reply)
	}

	// An election: a new term, the new primary's electionTime, the
	// configuration's term with it (mongod's config term follows the
	// primary's).
	if err := rs.Restart(1); err != nil {
		t.Fatal(err)
	}
	if err := rs.StepDown(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := rs.Elect(1); err != nil {
		t.Fatal(err)
	}
	st, reply = statusOf(t, m[1])
	if st.MyState != 1 || st.Term != 2 || st.Members[1].State != 1 || st.Members[0].State != 2 || st.Members[0].ElectionDate != nil ||
		st.Members[1].ElectionTime.Compare(first) <= 0 || st.Members[1].ConfigTerm != 2 || st.Members[0].SyncSourceHost != m[1].Addr() {
		t.Errorf("status after Elect(1): %s", reply)
	}
}

// A set of more voting members than mongod allows (7) has no
// configuration mongod would take: the commands that describe it refuse.
func TestReplSetCommandsRefuseMoreThanSevenVoters(t *testing.T) {
	rs := startRS(t, 8)
	r := dialRaw(t, rs.Members()[0])
	for _, name := range []string{"replSetGetStatus", "replSetGetConfig"} {
		if msg := checkError(t, r.run(adminCmd(name, 1)), 2, "BadValue"); !strings.Contains(msg, "7 voting members") {
			t.Errorf("%s: errmsg %q", name, msg)
		}
	}
}

// replSetGetConfig returns the configuration as rs.conf() shows it, in
// the shape of the manual's Replica Set Configuration page
// (https://www.mongodb.com/docs/manual/reference/replica-configuration/):
// each member's priority 0 when it is passive, hidden or an arbiter, the
// default settings, and the term of the last election (MongoDB 4.4).
func TestReplSetGetConfig(t *testing.T) {
	rs := startRS(t, 4,
		mongotest.WithMember(0, mongotest.Member{Tags: map[string]string{"dc": "east", "rack": "1"}}),
		mongotest.WithMember(1, mongotest.Member{Hidden: true}),
		mongotest.WithMember(2, mongotest.Member{Passive: true}),
		mongotest.WithMember(3, mongotest.Member{Arbiter: true}))
	m := rs.Members()
	type memberConf struct {
		ID                 int32             `bson:"_id"`
		Host               string            `bson:"host"`
		ArbiterOnly        bool              `bson:"arbiterOnly"`
		BuildIndexes       bool              `bson:"buildIndexes"`
		Hidden             bool              `bson:"hidden"`
		Priority           float64           `bson:"priority"`
		Tags               map[string]string `bson:"tags"`
		SecondaryDelaySecs int64             `bson:"secondaryDelaySecs"`
		Votes              int32             `bson:"votes"`
	}
	var got struct {
		Config struct {
			ID                                 string       `bson:"_id"`
			Version                            int32        `bson:"version"`
			Term                               int32        `bson:"term"`
			Members                            []memberConf `bson:"members"`
			ProtocolVersion                    int64        `bson:"protocolVersion"`
			WriteConcernMajorityJournalDefault bool         `bson:"writeConcernMajorityJournalDefault"`
			Settings                           struct {
				ChainingAllowed         bool          `bson:"chainingAllowed"`
				HeartbeatIntervalMillis int32         `bson:"heartbeatIntervalMillis"`
				HeartbeatTimeoutSecs    int32         `bson:"heartbeatTimeoutSecs"`
				ElectionTimeoutMillis   int32         `bson:"electionTimeoutMillis"`
				CatchUpTimeoutMillis    int32         `bson:"catchUpTimeoutMillis"`
				GetLastErrorDefaults    bson.M        `bson:"getLastErrorDefaults"`
				ReplicaSetID            bson.ObjectID `bson:"replicaSetId"`
			} `bson:"settings"`
		} `bson:"config"`
	}
	reply := dialRaw(t, m[2]).run(adminCmd("replSetGetConfig", 1))
	checkOK(t, reply)
	if err := bson.Unmarshal(reply, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Config
	if c.ID != "rs0" || c.Version != 1 || c.Term != 1 || c.ProtocolVersion != 1 || !c.WriteConcernMajorityJournalDefault {
		t.Errorf("config %s", reply)
	}
	if s := c.Settings; !s.ChainingAllowed || s.HeartbeatIntervalMillis != 2000 || s.HeartbeatTimeoutSecs != 10 ||
		s.ElectionTimeoutMillis != 10000 || s.CatchUpTimeoutMillis != -1 || s.ReplicaSetID.IsZero() {
		t.Errorf("settings %s", reply)
	}
	want := []memberConf{
		{0, m[0].Addr(), false, true, false, 1, map[string]string{"dc": "east", "rack": "1"}, 0, 1},
		{1, m[1].Addr(), false, true, true, 0, map[string]string{}, 0, 1},
		{2, m[2].Addr(), false, true, false, 0, map[string]string{}, 0, 1},
		{3, m[3].Addr(), true, true, false, 0, map[string]string{}, 0, 1},
	}
	if len(c.Members) != len(want) {
		t.Fatalf("members %s", reply)
	}
	for i, w := range want {
		g := c.Members[i]
		if g.ID != w.ID || g.Host != w.Host || g.ArbiterOnly != w.ArbiterOnly || g.BuildIndexes != w.BuildIndexes || g.Hidden != w.Hidden ||
			g.Priority != w.Priority || len(g.Tags) != len(w.Tags) || g.Tags["dc"] != w.Tags["dc"] || g.SecondaryDelaySecs != 0 || g.Votes != 1 {
			t.Errorf("member %d: %+v, want %+v", i, g, w)
		}
	}
	// The field order and types of mongod's MemberConfig, as rs.conf()
	// prints them: priority a double, secondaryDelaySecs a long.
	mem := reply.Lookup("config", "members", "0").Document()
	var keys []string
	elems, _ := mem.Elements()
	for _, e := range elems {
		keys = append(keys, e.Key())
	}
	if strings.Join(keys, ",") != "_id,host,arbiterOnly,buildIndexes,hidden,priority,tags,secondaryDelaySecs,votes" {
		t.Errorf("member fields %v", keys)
	}
	if mem.Lookup("priority").Type != bson.TypeDouble || mem.Lookup("secondaryDelaySecs").Type != bson.TypeInt64 {
		t.Errorf("member %s: priority a double and secondaryDelaySecs a long, as mongod's", mem)
	}
	// Every member answers the same; commitmentStatus is for the primary
	// (mongod: NotWritablePrimary elsewhere).
	same := dialRaw(t, m[0]).run(adminCmd("replSetGetConfig", 1, bson.E{Key: "commitmentStatus", Value: true}))
	if ok, _ := same.Lookup("commitmentStatus").BooleanOK(); !ok || !same.Lookup("config").Equal(reply.Lookup("config")) {
		t.Errorf("replSetGetConfig on the primary: %s", same)
	}
	checkError(t, dialRaw(t, m[2]).run(adminCmd("replSetGetConfig", 1, bson.E{Key: "commitmentStatus", Value: true})), 10107, "NotWritablePrimary")

	// Before MongoDB 5.0 (maxWireVersion 13) the field was slaveDelay.
	old := startRS(t, 1, mongotest.WithWireVersions(0, 12))
	reply = dialRaw(t, old.Members()[0]).run(adminCmd("replSetGetConfig", 1))
	if reply.Lookup("config", "members", "0", "slaveDelay").Type != bson.TypeInt64 ||
		reply.Lookup("config", "members", "0", "secondaryDelaySecs").Type != 0 {
		t.Errorf("a 4.4 member's configuration %s, want slaveDelay", reply)
	}
}

// replSetStepDown's arguments, as mongod's CmdReplSetStepDown checks them
// (repl_set_commands.cpp), and its refusal on a member that is not
// primary: NotWritablePrimary, "not primary so can't step down".
func TestReplSetStepDownRefuses(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	r := dialRaw(t, m[0])
	for _, tc := range []struct {
		name string
		cmd  bson.D
		code int32
		msg  string
	}{
		{"a negative period", adminCmd("replSetStepDown", -1), 2, "stepdown period must be a positive integer"},
		{"a negative catch-up period", adminCmd("replSetStepDown", 60, bson.E{Key: "secondaryCatchUpPeriodSecs", Value: -1}), 2,
			"secondaryCatchUpPeriodSecs period must be a positive or absent"},
		{"a catch-up period longer than the step-down", adminCmd("replSetStepDown", 5), 2,
			"stepdown period must be longer than secondaryCatchUpPeriodSecs"},
		{"a catch-up period not a number", adminCmd("replSetStepDown", 60, bson.E{Key: "secondaryCatchUpPeriodSecs", Value: "1"}), 14, ""},
	} {
		if msg := checkError(t, r.run(tc.cmd), tc.code, map[int32]string{2: "BadValue", 14: "TypeMismatch"}[tc.code]); tc.msg != "" && msg != tc.msg {
			t.Errorf("%s: errmsg %q, want %q", tc.name, msg, tc.msg)
		}
	}
	if msg := checkError(t, dialRaw(t, m[1]).run(adminCmd("replSetStepDown", 60)), 10107, "NotWritablePrimary"); msg != "not primary so can't step down" {
		t.Errorf("on a secondary: errmsg %q", msg)
	}
	if rs.Primary() != m[0] {
		t.Error("a refused replSetStepDown changed the primary")
	}
}

// replSetStepDown on the primary: it steps down, and is not electable for
// the period; the election that mongod's election handoff
// (enableElectionHandoff, on by default since 4.0.2) starts at once makes
// an electable secondary primary, in a new term. The connection stays open
// (MongoDB 4.2 and later), the writes in progress are interrupted, and
// the members' topologyVersion moves on, so that awaitable hellos tell of
// it at once.
func TestReplSetStepDownElectsAnother(t *testing.T) {
	rs := startRS(t, 4, mongotest.WithMember(1, mongotest.Member{Passive: true}))
	m := rs.Members()
	r := dialRaw(t, m[0])
	tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
	hello := r.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv, 600000))}, nil)
	waitAwaiting(t, m[0], 1)
	if err := m[0].SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, BlockTime: time.Hour, Times: 1}); err != nil {
		t.Fatal(err)
	}
	w := dialRaw(t, m[0])
	write := w.sendMsg(&wire.Msg{Body: marshal(t, insertCmd(1))}, nil)
	if err := m[0].WaitForFailPoint(ctx(t), 1); err != nil {
		t.Fatal(err)
	}

	c := dialRaw(t, m[0])
	checkOK(t, c.run(adminCmd("replSetStepDown", 60, bson.E{Key: "secondaryCatchUpPeriodSecs", Value: 10})))
	_, reply := decodeReplyTo(t, w, write)
	checkError(t, reply, 11602, "InterruptedDueToReplStateChange")
	_, reply = decodeReplyTo(t, r, hello)
	if got := decodeHello(t, reply); *got.IsWritablePrimary || got.TopologyVersion.Counter <= tv.Counter {
		t.Errorf("the awaitable hello after the step-down: %+v", got)
	}
	// The first electable member, the passive one skipped.
	if rs.Primary() != m[2] {
		t.Fatalf("primary %v after replSetStepDown, want member 2", rs.Primary())
	}
	h := helloOf(t, m[0])
	if !h.Secondary || h.Primary != m[2].Addr() {
		t.Errorf("member 0 after the step-down: %+v", h)
	}
	if id := helloOf(t, m[2]).ElectionID; id == nil || *id != electionIDOf(2) {
		t.Errorf("the new primary's electionId %v, want term 2's", id)
	}
	checkOK(t, c.run(cmd("admin", bson.E{Key: "ping", Value: 1}))) // the connection stays open

	// Member 0 is not electable for the 60 seconds: member 2's step-down
	// hands over to member 3.
	checkOK(t, dialRaw(t, m[2]).run(adminCmd("replSetStepDown", 60)))
	if rs.Primary() != m[3] {
		t.Fatalf("primary %v, want member 3: member 0 stepped down less than 60s ago", rs.Primary())
	}
	// replSetFreeze: 0 makes member 0 electable again.
	reply = dialRaw(t, m[0]).run(adminCmd("replSetFreeze", 0))
	checkOK(t, reply)
	if info, _ := reply.Lookup("info").StringValueOK(); info != "unfreezing" {
		t.Errorf("replSetFreeze: 0 %s, want info: unfreezing", reply)
	}
	checkOK(t, dialRaw(t, m[3]).run(adminCmd("replSetStepDown", 60)))
	if rs.Primary() != m[0] {
		t.Fatalf("primary %v, want member 0, unfrozen", rs.Primary())
	}
	// With every electable member frozen, force steps down and nobody is
	// elected (mongod would hold an election once a freeze ends; the test
	// server waits for Elect).
	checkOK(t, dialRaw(t, m[0]).run(adminCmd("replSetStepDown", 60, bson.E{Key: "force", Value: true})))
	if rs.Primary() != nil {
		t.Errorf("primary %v, want none: every electable member is frozen", rs.Primary())
	}
	if err := rs.Elect(2); err != nil {
		t.Fatal(err)
	}
}

// replSetFreeze, as mongod's TopologyCoordinator::prepareFreezeResponse:
// refused on the primary with 95 NotSecondary; on a secondary a warning
// for one second, info for zero. A frozen secondary is not elected by the
// handoff of a replSetStepDown.
func TestReplSetFreeze(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	msg := checkError(t, dialRaw(t, m[0]).run(adminCmd("replSetFreeze", 30)), 95, "NotSecondary")
	if msg != "Cannot freeze node when primary or running for election, state: Primary" {
		t.Errorf("errmsg %q", msg)
	}
	reply := dialRaw(t, m[1]).run(adminCmd("replSetFreeze", 1))
	checkOK(t, reply)
	if w, _ := reply.Lookup("warning").StringValueOK(); w != "you really want to freeze for only 1 second?" {
		t.Errorf("replSetFreeze: 1 %s", reply)
	}
	checkOK(t, dialRaw(t, m[1]).run(adminCmd("replSetFreeze", 300)))
	checkOK(t, dialRaw(t, m[0]).run(adminCmd("replSetStepDown", 60)))
	if rs.Primary() != m[2] {
		t.Errorf("primary %v, want member 2: member 1 is frozen", rs.Primary())
	}
}

// A one-member set: replSetStepDown without force waits
// secondaryCatchUpPeriodSecs for an electable secondary to catch up, then
// fails with 262 ExceededTimeLimit and stays primary; meanwhile it takes no
// writes and says so in hello. A member that comes back during the wait
// ends it: the step-down goes on. replSetFreeze: 0 on the single member
// of a set without a primary elects it, as mongod's
// kSingleNodeSelfElect does.
func TestReplSetStepDownWaitsForCatchUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		solo := replicaSetOn(t, n, 1)
		p := solo.Members()[0]
		r := dialRawOn(t, n, p.Addr())
		start := time.Now()
		id := r.sendMsg(&wire.Msg{Body: marshal(t, adminCmd("replSetStepDown", 60))}, nil)
		synctest.Wait()
		w := dialRawOn(t, n, p.Addr())
		if h := decodeHello(t, w.run(helloCmd())); *h.IsWritablePrimary || h.Secondary {
			t.Errorf("hello while stepping down %+v: want isWritablePrimary false, not a secondary", h)
		}
		checkError(t, w.run(insertCmd(1)), 10107, "NotWritablePrimary")
		_, reply := r.replyWithin(id, time.Minute)
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("replSetStepDown failed after %v, want the 10s of secondaryCatchUpPeriodSecs", d)
		}
		msg := checkError(t, reply, 262, "ExceededTimeLimit")
		if !strings.HasPrefix(msg, "No electable secondaries caught up as of ") ||
			!strings.HasSuffix(msg, "Please use the replSetStepDown command with the argument {force: true} to force node to step down.") {
			t.Errorf("errmsg %q", msg)
		}
		if solo.Primary() != p || !*decodeHello(t, w.run(helloCmd())).IsWritablePrimary {
			t.Error("the primary did not stay primary")
		}
		checkOK(t, w.run(insertCmd(1)))

		// force steps down at once, with no election.
		checkOK(t, r.run(adminCmd("replSetStepDown", 60, bson.E{Key: "force", Value: true})))
		if solo.Primary() != nil {
			t.Error("a primary after a forced step-down of the only member")
		}
		checkOK(t, r.run(adminCmd("replSetFreeze", 0)))
		if solo.Primary() != p {
			t.Error("replSetFreeze: 0 did not elect the only member")
		}

		// In a set of three with both secondaries stopped, the step-down
		// waits; a secondary that comes back ends the wait.
		rs := replicaSetOn(t, n, 3)
		m := rs.Members()
		for _, i := range []int{1, 2} {
			if err := rs.Stop(i); err != nil {
				t.Fatal(err)
			}
		}
		r = dialRawOn(t, n, m[0].Addr())
		id = r.sendMsg(&wire.Msg{Body: marshal(t, adminCmd("replSetStepDown", 60, bson.E{Key: "secondaryCatchUpPeriodSecs", Value: 30}))}, nil)
		time.Sleep(5 * time.Second)
		start = time.Now()
		if err := rs.Restart(2); err != nil {
			t.Fatal(err)
		}
		_, reply = r.replyWithin(id, time.Minute)
		checkOK(t, reply)
		if d := time.Since(start); d != 0 {
			t.Errorf("the step-down ended %v after the restart, want at once", d)
		}
		if rs.Primary() != m[2] {
			t.Errorf("primary %v, want member 2", rs.Primary())
		}
	})
}

// A concurrent change of the set ends a step-down that waits: another
// primary elected meanwhile (PrimarySteppedDown, as mongod's
// tryToStartStepDown), a second replSetStepDown (ConflictingOperationInProgress).
func TestReplSetStepDownInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		rs := replicaSetOn(t, n, 3)
		m := rs.Members()
		if err := rs.Stop(2); err != nil {
			t.Fatal(err)
		}
		if err := rs.Partition(1); err != nil {
			t.Fatal(err)
		}
		r := dialRawOn(t, n, m[0].Addr())
		id := r.sendMsg(&wire.Msg{Body: marshal(t, adminCmd("replSetStepDown", 60))}, nil)
		synctest.Wait()
		checkError(t, dialRawOn(t, n, m[0].Addr()).run(adminCmd("replSetStepDown", 60)), 117, "ConflictingOperationInProgress")
		if err := rs.StepDown(t.Context()); err != nil {
			t.Fatal(err)
		}
		_, reply := r.replyWithin(id, time.Minute)
		checkError(t, reply, 189, "PrimarySteppedDown")
		if err := rs.Heal(1); err != nil {
			t.Fatal(err)
		}
	})
}

// The SDAM specification's "Rediscover quickly after replSetStepDown"
// (server-discovery-and-monitoring/tests/unified/rediscover-quickly-after-step-down.json)
// through the official driver: replSetFreeze: 0 on a secondary, then
// replSetStepDown with a catch-up period on the primary; the driver,
// which checks only every minute, finds the new primary through its
// streaming hellos within the test's 15 seconds, and writes to it without
// clearing a pool.
func TestDriverRediscoversAfterReplSetStepDown(t *testing.T) {
	rs := startRS(t, 3)
	m := rs.Members()
	w := newTopologyWatch()
	var cleared atomic.Int64
	pm := &event.PoolMonitor{Event: func(e *event.PoolEvent) {
		if e.Type == event.ConnectionPoolCleared {
			cleared.Add(1)
		}
	}}
	client := connectRS(t, rs, w, options.Client().SetHeartbeatInterval(time.Minute).SetPoolMonitor(pm))
	w.waitFor(t, "the replica set", hasPrimary(m, 0))
	c := ctx(t)
	coll := client.Database("sdam-tests").Collection("test-replSetStepDown")
	if _, err := coll.InsertMany(c, []any{bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "_id", Value: 4}}}); err != nil {
		t.Fatal(err)
	}
	admin := client.Database("admin")
	if err := admin.RunCommand(c, bson.D{{Key: "replSetFreeze", Value: 0}}, options.RunCmd().SetReadPreference(readpref.Secondary())).Err(); err != nil {
		t.Fatalf("replSetFreeze: %v", err)
	}
	start := time.Now()
	err := admin.RunCommand(c, bson.D{{Key: "replSetStepDown", Value: 30}, {Key: "secondaryCatchUpPeriodSecs", Value: 30},
		{Key: "force", Value: false}}).Err()
	if err != nil {
		t.Fatalf("replSetStepDown: %v", err)
	}
	w.waitFor(t, "member 1 as the primary", hasPrimary(m, 1))
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the driver found the new primary after %v, want within 15s", d)
	}
	if _, err := coll.InsertMany(c, []any{bson.D{{Key: "_id", Value: 5}}, bson.D{{Key: "_id", Value: 6}}}); err != nil {
		t.Fatal(err)
	}
	if n := cleared.Load(); n != 0 {
		t.Errorf("%d pool clears, want none", n)
	}
	var docs []bson.M
	cur, err := coll.Find(c, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(c, &docs); err != nil || len(docs) != 4 {
		t.Errorf("%d documents, %v; want the 4 inserted", len(docs), err)
	}
}

// A step-down that waits ends with its client, or with the set: the member
// takes writes again when the client hangs up, and Close leaves no
// goroutine behind.
func TestReplSetStepDownEndsWithItsConnection(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs0", 1)
	if err != nil {
		t.Fatal(err)
	}
	p := rs.Members()[0]
	writable := func() bool { return *helloOf(t, p).IsWritablePrimary }
	r := dialRaw(t, p)
	r.sendMsg(&wire.Msg{Body: marshal(t, adminCmd("replSetStepDown", 600, bson.E{Key: "secondaryCatchUpPeriodSecs", Value: 300}))}, nil)
	waitFor(t, "the step-down to begin", func() bool { return !writable() })
	r.nc.Close()
	waitFor(t, "the member to take writes again", writable)
	checkOK(t, dialRaw(t, p).run(insertCmd(1)))

	r = dialRaw(t, p)
	r.sendMsg(&wire.Msg{Body: marshal(t, adminCmd("replSetStepDown", 600, bson.E{Key: "secondaryCatchUpPeriodSecs", Value: 300}))}, nil)
	waitFor(t, "the step-down to begin", func() bool { return !writable() })
	closeAndCheck(t, rs)
	r.expectClosed()
}
