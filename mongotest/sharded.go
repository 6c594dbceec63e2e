package mongotest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements the sharded cluster: mongoses in front of shards,
// each shard a replica set. A mongos answers the handshake and the
// diagnostic commands itself, and routes the commands on data to the
// primary shard of their database (chosen by a hash of its name: the
// collections are not sharded, they live whole on their database's shard),
// in-process, as a mongos sends them to its shards:
//
//   - to the shard's primary (or a secondary, for a read whose
//     $readPreference allows one), waiting for one while the shard has none
//     (a step-down, a stopped primary), up to the command's maxTimeMS or 10
//     seconds, after which it fails with FailedToSatisfyReadPreference (133),
//     as mongos does; a read, a retryable write, a commit or an abort that
//     meets a "not primary" error of the shard is sent again to the next
//     primary, as mongos retries them;
//   - cursors get ids of the mongos's own, so that two shards' cursors
//     never collide, and their getMores and killCursors go to the shard
//     member that has them;
//   - a transaction is the mongos's (its router keeps which transactions
//     of which sessions it started, and on which shard): a command of a
//     transaction that another mongos started fails with NoSuchTransaction,
//     but a commitTransaction with the recoveryToken the mongoses add to
//     the replies of a transaction, which a driver sends on the new
//     mongos, recovers the decision; a transaction whose commands reach
//     two shards is refused (mongotest has no two-phase commit);
//   - the replies of the shards lose their topologyVersion, which is the
//     shard member's, not the mongos's.
//
// Every server of the cluster shares the users: AddUser on any of them adds
// a user to all, as the config servers hold them.

// defaultRouteWait bounds how long a mongos waits for a shard's primary.
const defaultRouteWait = 10 * time.Second

// codeFailedToSatisfyReadPreference is mongos's error when no member of a
// shard matches the read preference in time.
const codeFailedToSatisfyReadPreference = 133

// ShardedCluster is a sharded cluster of in-process servers, started by
// StartShardedCluster: mongoses in front of replica-set shards. Its
// methods are safe for concurrent use.
type ShardedCluster struct {
	mongoses []*Server
	shards   []*ReplicaSet

	mu     sync.Mutex // protects following fields
	closed bool
}

// StartShardedCluster starts a sharded cluster of mongoses mongoses (1 to
// 50) in front of shards shards (1 to 50), each a replica set named
// "shard0", "shard1"... of WithShardMembers members (1 by default), every
// server on its own port of 127.0.0.1 (or on the Network of WithNetwork).
// The options apply to every server (TLS, compressors, wire versions,
// transaction lifetime); WithPorts gives the mongoses' ports, then the
// shards' members', shard after shard; WithReplicaSet, WithMongos, WithLoadBalanced,
// WithMember and WithAdvertisedHosts do not apply.
//
// A mongos's hello says msg: "isdbgrid", as mongos's does; see this file's
// comment for how it routes commands.
func StartShardedCluster(mongoses, shards int, opts ...Option) (*ShardedCluster, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	switch {
	case mongoses < 1 || mongoses > maxMembers:
		return nil, fmt.Errorf("mongotest: a sharded cluster has 1 to %d mongoses, not %d", maxMembers, mongoses)
	case shards < 1 || shards > maxMembers:
		return nil, fmt.Errorf("mongotest: a sharded cluster has 1 to %d shards, not %d", maxMembers, shards)
	case cfg.replicaSet != "" || cfg.mongos || cfg.loadBalanced:
		return nil, errors.New("mongotest: StartShardedCluster makes the mongoses and the shards: WithReplicaSet, WithMongos and WithLoadBalanced do not apply")
	case len(cfg.members) > 0 || cfg.advertised != nil:
		return nil, errors.New("mongotest: StartShardedCluster: WithMember and WithAdvertisedHosts do not apply")
	}
	sc := &ShardedCluster{}
	users := &users{}
	for k := range shards {
		// WithPorts gives the mongoses' ports first, then each shard's
		// members', shard after shard.
		shardCfg := cfg
		shardCfg.users = users
		shardCfg.ports = nil
		if from := mongoses + k*cfg.shardMembers; from < len(cfg.ports) {
			shardCfg.ports = cfg.ports[from:min(len(cfg.ports), from+cfg.shardMembers)]
		}
		rs, err := startReplicaSet(fmt.Sprintf("shard%d", k), cfg.shardMembers, shardCfg)
		if err != nil {
			sc.Close()
			return nil, err
		}
		sc.shards = append(sc.shards, rs)
	}
	mcfg := cfg
	mcfg.mongos = true
	for i := range mongoses {
		ln, err := cfg.listen(cfg.listenAddr(i))
		if err != nil {
			sc.Close()
			return nil, err
		}
		srv := newServer(mcfg, ln.Addr().String(), &shared{users: users})
		srv.role = roleMongos
		srv.router = &router{sc: sc}
		srv.router.reset()
		if err := srv.serve(ln); err != nil {
			sc.Close()
			return nil, err
		}
		sc.mongoses = append(sc.mongoses, srv)
	}
	if cfg.network != nil {
		cfg.network.track(sc)
	}
	return sc, nil
}

// WithShardMembers sets the number of members of each shard of
// StartShardedCluster (default 1).
func WithShardMembers(n int) Option {
	return func(c *config) error {
		if n < 1 || n > maxMembers {
			return fmt.Errorf("mongotest: WithShardMembers: a shard has 1 to %d members, not %d", maxMembers, n)
		}
		c.shardMembers = n
		return nil
	}
}

// Mongoses returns the cluster's mongoses.
func (sc *ShardedCluster) Mongoses() []*Server { return append([]*Server(nil), sc.mongoses...) }

// Shards returns the cluster's shards.
func (sc *ShardedCluster) Shards() []*ReplicaSet { return append([]*ReplicaSet(nil), sc.shards...) }

// URI returns a connection string that lists every mongos.
func (sc *ShardedCluster) URI() string {
	hosts := make([]string, len(sc.mongoses))
	for i, m := range sc.mongoses {
		hosts[i] = m.addr
	}
	return "mongodb://" + strings.Join(hosts, ",") + "/"
}

// ShardOf returns the index of the shard that holds database db.
func (sc *ShardedCluster) ShardOf(db string) int {
	if db == "admin" || db == "config" {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(db))
	return int(h.Sum32() % uint32(len(sc.shards)))
}

// StopMongos stops mongos i, as a killed process stops: its listener and
// connections close, until RestartMongos.
func (sc *ShardedCluster) StopMongos(i int) error {
	m, err := sc.mongosAt("StopMongos", i)
	if err != nil {
		return err
	}
	m.mu.Lock()
	running := m.life != nil
	m.mu.Unlock()
	if !running {
		return fmt.Errorf("mongotest: StopMongos(%d): the mongos is stopped already", i)
	}
	return m.stop(false)
}

// RestartMongos starts mongos i again after StopMongos, on the same port,
// as a new process: no cursor, no transaction, no fail point.
func (sc *ShardedCluster) RestartMongos(i int) error {
	m, err := sc.mongosAt("RestartMongos", i)
	if err != nil {
		return err
	}
	m.mu.Lock()
	running := m.life != nil
	m.mu.Unlock()
	if running {
		return fmt.Errorf("mongotest: RestartMongos(%d): the mongos runs; StopMongos it first", i)
	}
	ln, err := m.cfg.listen(m.addr)
	if err != nil {
		return fmt.Errorf("mongotest: RestartMongos(%d): %w", i, err)
	}
	m.failPoints.set(nil)
	m.router.reset()
	m.processID = bson.NewObjectID() // a new process: no connection reads it while stopped
	return m.serve(ln)
}

func (sc *ShardedCluster) mongosAt(op string, i int) (*Server, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	switch {
	case sc.closed:
		return nil, fmt.Errorf("mongotest: %s: the cluster is closed", op)
	case i < 0 || i >= len(sc.mongoses):
		return nil, fmt.Errorf("mongotest: %s(%d): the cluster has mongoses 0 to %d", op, i, len(sc.mongoses)-1)
	}
	return sc.mongoses[i], nil
}

// Close stops every mongos and every shard, and returns once all their
// goroutines have ended. It is idempotent.
func (sc *ShardedCluster) Close() error {
	sc.mu.Lock()
	sc.closed = true
	sc.mu.Unlock()
	var errs []error
	for _, m := range sc.mongoses {
		errs = append(errs, m.Close())
	}
	for _, rs := range sc.shards {
		errs = append(errs, rs.Close())
	}
	return errors.Join(errs...)
}

// router is a mongos's routing state: its cursors and its transactions.
type router struct {
	sc *ShardedCluster

	mu      sync.Mutex // protects following fields
	cursors map[int64]routedCursor
	txns    map[string]routedTxn // by lsid key
}

// routedCursor is a cursor of a shard member, as a mongos knows it.
type routedCursor struct {
	srv *Server
	id  int64
}

// routedTxn is a transaction a mongos started: its number and its shard.
type routedTxn struct {
	number int64
	shard  int
}

func (r *router) reset() {
	r.mu.Lock()
	r.cursors, r.txns = map[int64]routedCursor{}, map[string]routedTxn{}
	r.mu.Unlock()
}

// routedCommands are the commands a mongos of a cluster sends to a shard.
var routedCommands = map[string]bool{
	"insert": true, "update": true, "delete": true, "findAndModify": true, "findandmodify": true,
	"find": true, "getMore": true, "killCursors": true, "count": true, "distinct": true, "aggregate": true,
	"create": true, "createIndexes": true, "listIndexes": true, "dropIndexes": true, "drop": true,
	"dropDatabase": true, "listCollections": true, "commitTransaction": true, "abortTransaction": true,
	"listDatabases": true, "endSessions": true, "killSessions": true, "bulkWrite": true, "dbStats": true, "dbstats": true,
}

// forwardedError is a shard's error reply, which the mongos returns as it
// is (but its topologyVersion).
type forwardedError struct{ reply bson.Raw }

func (e *forwardedError) Error() string { return "mongotest: a shard's error reply" }

// route runs req, a routed command, on the shards.
func (r *router) route(s *Server, req *request) (bson.D, error) {
	switch req.name {
	case "getMore":
		return r.getMore(req)
	case "killCursors":
		return r.killCursors(req)
	case "listDatabases":
		return r.listDatabases(req)
	case "endSessions", "killSessions":
		return r.endSessions(req)
	}
	shard := r.sc.ShardOf(req.db)
	if req.name == "bulkWrite" {
		var err error
		if shard, err = r.bulkWriteShard(req); err != nil {
			return nil, err
		}
	}
	si := req.session
	var key string
	if si.inTransaction() {
		key = valueKey(docValue(si.lsid))
		r.mu.Lock()
		t, ok := r.txns[key]
		r.mu.Unlock()
		terminal := req.name == "commitTransaction" || req.name == "abortTransaction"
		switch {
		case si.startTxn:
		case ok && t.number == si.txnNumber:
			if !terminal && t.shard != shard {
				return nil, errorf(codeBadValue, "mongotest does not implement transactions across shards: the transaction runs on shard%d, and database %s is on shard%d", t.shard, req.db, shard)
			}
			shard = t.shard
		case req.name == "commitTransaction":
			// Another mongos started it: the recoveryToken says where
			// the decision is.
			tok, err := recoveryShard(req.body, len(r.sc.shards))
			if err != nil {
				return nil, err
			}
			return r.recoverDecision(req, tok)
		default:
			return nil, errorf(codeNoSuchTransaction, "cannot continue transaction %d of session %s: this mongos did not start it", si.txnNumber, formatValue(si.lsid.Lookup("id")))
		}
		if si.startTxn {
			r.mu.Lock()
			_, known := r.txns[key]
			full := !known && len(r.txns) >= maxSessions
			if !full {
				r.txns[key] = routedTxn{number: si.txnNumber, shard: shard}
			}
			r.mu.Unlock()
			if full {
				return nil, errorf(codeTooManyLogicalSessions, "Unable to add session into the cache because the number of active sessions is too high (%d)", maxSessions)
			}
		}
	}
	reply, member, err := r.forward(req, r.sc.shards[shard])
	if err != nil {
		return nil, err
	}
	d := rawFields(reply)
	d = r.ownCursor(d, member)
	if si.inTransaction() {
		d = append(d, bson.E{Key: "recoveryToken", Value: bson.D{{Key: "recoveryShardId", Value: r.sc.shards[shard].name}}})
	}
	return d, nil
}

// bulkWriteShard returns the shard of the databases of bulkWrite's
// namespaces. A mongos splits a bulkWrite among the shards of its
// namespaces; this one does not, and refuses one whose namespaces are on
// different shards.
func (r *router) bulkWriteShard(req *request) (int, error) {
	nss, err := bulkWriteNamespaces(req)
	if err != nil {
		return 0, err
	}
	shard := r.sc.ShardOf(nss[0].db)
	for _, ns := range nss[1:] {
		if other := r.sc.ShardOf(ns.db); other != shard {
			return 0, errorf(codeBadValue, "mongotest does not implement a bulkWrite across shards: database %s is on shard%d, and database %s on shard%d", nss[0].db, shard, ns.db, other)
		}
	}
	return shard, nil
}

// recoverDecision answers a commitTransaction that another mongos's
// transaction sends here with its recoveryToken, as mongos recovers a
// decision from the recovery shard: a committed transaction is reported
// committed; one that never began to commit is aborted, and one aborted
// stays so: NoSuchTransaction.
func (r *router) recoverDecision(req *request, shard int) (bson.D, error) {
	si := req.session
	rs := r.sc.shards[shard]
	sess := rs.members[0].srv.sessions.lookup(si.lsid)
	if sess != nil {
		sess.mu.Lock()
		t := sess.txn
		sess.mu.Unlock()
		if t != nil && t.number == si.txnNumber {
			if t.status() == txnCommitted {
				return bson.D{{Key: "recoveryToken", Value: bson.D{{Key: "recoveryShardId", Value: rs.name}}}}, nil
			}
			t.abort()
		}
	}
	return nil, errorf(codeNoSuchTransaction, "Transaction %d of session %s has no commit decision to recover: it was aborted", si.txnNumber, formatValue(si.lsid.Lookup("id")))
}

// recoveryShard returns the shard a commit's recoveryToken names.
func recoveryShard(body bson.Raw, shards int) (int, error) {
	id, ok := body.Lookup("recoveryToken", "recoveryShardId").StringValueOK()
	if !ok {
		return 0, errorf(codeNoSuchTransaction, "Cannot recover the transaction decision without a recoveryToken")
	}
	var k int
	if _, err := fmt.Sscanf(id, "shard%d", &k); err != nil || k < 0 || k >= shards {
		return 0, errorf(codeNoSuchTransaction, "the recoveryToken names no shard of the cluster: %q", id)
	}
	return k, nil
}

// retriedOnNewPrimary reports whether a mongos sends req again to the next
// primary of its shard after a "not primary" error.
func retriedOnNewPrimary(req *request, h handler) bool {
	switch {
	case req.name == "commitTransaction" || req.name == "abortTransaction":
		return true
	case req.session.inTransaction():
		return false
	case req.session.retryableWrite():
		return true
	}
	return h.secondary != secondaryNever // a read
}

// forward sends req to the member of rs that its read preference selects,
// waiting for a primary if need be, and returns the reply (an ok: 1 one;
// an error reply comes back as a *forwardedError) and the member.
func (r *router) forward(req *request, rs *ReplicaSet) (bson.Raw, *Server, error) {
	wait := defaultRouteWait
	if ms, ok := req.body.Lookup("maxTimeMS").AsInt64OK(); ok && ms > 0 {
		wait = time.Duration(ms) * time.Millisecond
	}
	deadline := time.Now().Add(wait)
	secondaryOK, err := secondaryOK(req.body)
	if err != nil {
		return nil, nil, err
	}
	secondaryOK = secondaryOK && !req.session.inTransaction()
	for attempt := 0; ; attempt++ {
		member, err := rs.awaitMember(req, secondaryOK, deadline)
		if err != nil {
			return nil, nil, err
		}
		sub := &request{conn: req.conn, name: req.name, db: req.db, body: req.body, seqs: req.seqs,
			flags: req.flags, compressor: req.compressor}
		reply, err := member.dispatch(sub)
		if err != nil {
			// A fail point of the shard closed its connection: the mongos
			// reports a network error to its client.
			return nil, nil, errorf(6, "mongotest: the connection to %s (%s) closed: %v", member.addr, rs.name, err)
		}
		code, _ := reply.Lookup("code").AsInt64OK()
		if ok, _ := reply.Lookup("ok").AsFloat64OK(); ok == 1 {
			return withoutField(reply, "topologyVersion"), member, nil
		}
		if notPrimaryCodes[int32(code)] && attempt < 3 && retriedOnNewPrimary(req, handlers[req.name]) && time.Now().Before(deadline) {
			continue
		}
		return nil, nil, &forwardedError{reply: withoutField(reply, "topologyVersion")}
	}
}

// awaitMember returns the member of rs a command goes to: the primary, or
// with secondaryOK a secondary if one is up (the primary otherwise),
// waiting for one until deadline, or until the client's connection ends.
func (rs *ReplicaSet) awaitMember(req *request, secondaryOK bool, deadline time.Time) (*Server, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		m, changed := rs.upMember(secondaryOK)
		if m != nil {
			return m, nil
		}
		select {
		case <-changed: // an election, a restart, a heal...
		case <-req.conn.life.done:
			return nil, errInterrupted()
		case <-timer.C:
			mode := "primary"
			if secondaryOK {
				mode = "secondaryPreferred"
			}
			return nil, errorf(codeFailedToSatisfyReadPreference, "Could not find host matching read preference { mode: \"%s\" } for set %s", mode, rs.name)
		}
	}
}

// upMember returns the primary (or, with secondaryOK, a secondary first)
// if it runs and is not partitioned, nil otherwise; and the channel closed
// at the set's next change.
func (rs *ReplicaSet) upMember(secondaryOK bool) (*Server, <-chan struct{}) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	up := func(m *member) bool { return !m.stopped && m.partitioned == nil }
	if secondaryOK {
		for _, m := range rs.members {
			if m.role == roleSecondary && up(m) {
				return m.srv, rs.changed
			}
		}
	}
	if rs.primary >= 0 && up(rs.members[rs.primary]) && rs.members[rs.primary].role == rolePrimary {
		return rs.members[rs.primary].srv, rs.changed
	}
	return nil, rs.changed
}

// withoutField returns doc without its top-level field key.
func withoutField(doc bson.Raw, key string) bson.Raw {
	if _, err := doc.LookupErr(key); err != nil {
		return doc
	}
	d := rawFields(doc)
	out := d[:0]
	for _, e := range d {
		if e.Key != key {
			out = append(out, e)
		}
	}
	return mustMarshal(out)
}

// ownCursor replaces the id of the cursor of d (a reply of member), if it
// has an open one, with an id of the mongos's own.
func (r *router) ownCursor(d bson.D, member *Server) bson.D {
	for i, e := range d {
		if e.Key != "cursor" {
			continue
		}
		raw, ok := e.Value.(bson.RawValue)
		if !ok {
			return d
		}
		cur := rawFields(raw.Document())
		for j, ce := range cur {
			if ce.Key != "id" {
				continue
			}
			id, _ := ce.Value.(bson.RawValue).Int64OK()
			if id == 0 {
				return d
			}
			r.mu.Lock()
			own := r.newCursorIDLocked()
			r.cursors[own] = routedCursor{srv: member, id: id}
			r.mu.Unlock()
			cur[j].Value = own
			d[i].Value = cur
		}
	}
	return d
}

// getMore sends a getMore to the member that has the cursor.
func (r *router) getMore(req *request) (bson.D, error) {
	id, ok := req.body.Lookup("getMore").Int64OK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'getMore.getMore' is the wrong type '%s', expected type 'long'", req.body.Lookup("getMore").Type)
	}
	r.mu.Lock()
	rc, found := r.cursors[id]
	r.mu.Unlock()
	if !found {
		return nil, errorf(codeCursorNotFound, "cursor id %d not found", id)
	}
	d := rawFields(req.body)
	d[0].Value = rc.id
	sub := &request{conn: req.conn, name: req.name, db: req.db, body: mustMarshal(d), flags: req.flags, compressor: req.compressor}
	reply, err := rc.srv.dispatch(sub)
	if err != nil {
		return nil, errorf(6, "mongotest: the connection to %s closed: %v", rc.srv.addr, err)
	}
	if ok, _ := reply.Lookup("ok").AsFloat64OK(); ok != 1 {
		if code, _ := reply.Lookup("code").AsInt64OK(); code == codeCursorNotFound {
			r.forget(id)
		}
		return nil, &forwardedError{reply: withoutField(reply, "topologyVersion")}
	}
	out := rawFields(withoutField(reply, "topologyVersion"))
	for i, e := range out {
		if e.Key != "cursor" {
			continue
		}
		cur := rawFields(e.Value.(bson.RawValue).Document())
		for j, ce := range cur {
			if ce.Key == "id" {
				if next, _ := ce.Value.(bson.RawValue).Int64OK(); next == 0 {
					r.forget(id)
				} else {
					cur[j].Value = id
				}
			}
		}
		out[i].Value = cur
	}
	return out, nil
}

// newCursorIDLocked returns an id for a new cursor of the mongos: random,
// as mongos's are, so that no two of its cursors (nor, but by chance, two
// mongoses') share one. r.mu is held.
func (r *router) newCursorIDLocked() int64 {
	for {
		id := rand.Int64()
		if _, taken := r.cursors[id]; id != 0 && !taken {
			return id
		}
	}
}

func (r *router) forget(id int64) {
	r.mu.Lock()
	delete(r.cursors, id)
	r.mu.Unlock()
}

// killCursors kills the cursors on the members that have them.
func (r *router) killCursors(req *request) (bson.D, error) {
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	v := req.body.Lookup("cursors")
	if v.Type != bson.TypeArray {
		return nil, errorf(codeTypeMismatch, "BSON field 'killCursors.cursors' is the wrong type '%s', expected type 'array'", typeName(v.Type))
	}
	killed, notFound := bson.A{}, bson.A{}
	for _, e := range arrayValues(v) {
		id, ok := e.Int64OK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field 'killCursors.cursors' holds a '%s', expected type 'long'", typeName(e.Type))
		}
		r.mu.Lock()
		rc, found := r.cursors[id]
		delete(r.cursors, id)
		r.mu.Unlock()
		if found {
			sub := &request{conn: req.conn, name: req.name, db: req.db, compressor: req.compressor,
				body: mustMarshal(bson.D{{Key: "killCursors", Value: coll}, {Key: "cursors", Value: bson.A{rc.id}}, {Key: "$db", Value: req.db}})}
			reply, err := rc.srv.dispatch(sub)
			if err == nil && len(arrayValues(reply.Lookup("cursorsKilled"))) == 1 {
				killed = append(killed, id)
				continue
			}
		}
		notFound = append(notFound, id)
	}
	return bson.D{
		{Key: "cursorsKilled", Value: killed},
		{Key: "cursorsNotFound", Value: notFound},
		{Key: "cursorsAlive", Value: bson.A{}},
		{Key: "cursorsUnknown", Value: bson.A{}},
	}, nil
}

// listDatabases lists the databases of every shard.
func (r *router) listDatabases(req *request) (bson.D, error) {
	var dbs bson.A
	var total int64
	seen := map[string]bool{}
	for _, rs := range r.sc.shards {
		reply, _, err := r.forward(req, rs)
		if err != nil {
			return nil, err
		}
		for _, v := range arrayValues(reply.Lookup("databases")) {
			name, _ := v.Document().Lookup("name").StringValueOK()
			if seen[name] {
				continue
			}
			seen[name] = true
			dbs = append(dbs, v.Document())
			size, _ := v.Document().Lookup("sizeOnDisk").AsInt64OK()
			total += size
		}
	}
	if dbs == nil {
		dbs = bson.A{}
	}
	d := bson.D{{Key: "databases", Value: dbs}}
	if nameOnly, _ := req.body.Lookup("nameOnly").BooleanOK(); !nameOnly {
		d = append(d, bson.E{Key: "totalSize", Value: total}, bson.E{Key: "totalSizeMb", Value: total >> 20})
	}
	return d, nil
}

// endSessions ends the sessions on every shard, and forgets their
// transactions here. It waits for no shard: the members of a shard share
// their sessions, which a stopped or partitioned member holds too.
func (r *router) endSessions(req *request) (bson.D, error) {
	lsids, err := sessionList(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	for _, d := range lsids {
		delete(r.txns, valueKey(docValue(d)))
	}
	r.mu.Unlock()
	for _, rs := range r.sc.shards {
		rs.members[0].srv.sessions.end(lsids)
	}
	return bson.D{}, nil
}
