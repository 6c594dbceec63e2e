package mongotest

import (
	"errors"
	"maps"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file gives multi-document transactions their isolation, as
// WiredTiger gives it to mongod's:
//
//   - Snapshot reads. A transaction reads the store as it was when it
//     started, and its own writes. It works on a view: a private store
//     whose collections are copies, made when the transaction first uses
//     them, of the collections as they were at its snapshot. A live write
//     about to change a collection that an open transaction has not copied
//     yet first freezes a copy of it for that transaction, so a late first
//     use still sees the snapshot.
//   - Write conflicts. A transaction's write of a document takes the
//     document's lock (and the lock of each unique index key it writes);
//     it fails with WriteConflict (112), which aborts the transaction, when
//     another open transaction holds the lock or when the document changed
//     after the snapshot.
//   - A write outside transactions that meets a document locked by an open
//     transaction waits until the transaction ends, as mongod retries its
//     write conflicts, and then runs on what the transaction left.
//   - Commit applies the transaction's writes to the store at once, under
//     its lock, so that no reader sees half of them.
//
// A transaction is alive until it commits or aborts, its lifetime limit
// passes, or the primary it ran on steps down; a dead transaction's locks
// are free, and its session learns of its end at its next command, which
// is all that a client can see of mongod aborting it at that moment.

// txnState is where a transaction is in its life.
type txnState int

const (
	txnInProgress txnState = iota
	txnCommitted
	txnAborted
)

func (st txnState) String() string {
	switch st {
	case txnCommitted:
		return "TxnCommitted"
	case txnAborted:
		return "TxnAborted"
	}
	return "TxnInProgress"
}

// transaction is one multi-document transaction of a session.
type transaction struct {
	number int64
	live   *store
	view   *store
	// epoch is closed when the primary the transaction runs on stops being
	// primary (nil off a replica set); deadline is when its lifetime
	// limit passes. Both are set at its start and never change.
	epoch    <-chan struct{}
	deadline time.Time
	// recoveryToken is what a mongos gives its clients to commit with.
	mongos bool
	// seen are the namespaces the view has looked up (the view's).
	seen map[string]bool

	// Guarded by live.mu:
	state    txnState
	snapshot uint64                 // live.clock when the transaction started
	resolved map[string]bool        // namespaces copied into the view
	frozen   map[string]*collection // copies frozen for it by live writers
	// written are the _id keys of the documents the transaction wrote, by
	// namespace, in the order it first wrote them; locks, the keys of the
	// locks it holds.
	written map[string][]string
	locks   []string
	done    chan struct{} // closed when the transaction ends

	// conflict is the WriteConflict that aborted the transaction during a
	// statement, returned by the statement whatever its handler made of it
	// (a write error, say). The session's, like the view.
	conflict *cmdError
}

// beginTxn starts transaction number n on the store st.
func (st *store) beginTxn(n int64, epoch <-chan struct{}, lifetime time.Duration, mongos bool) *transaction {
	t := &transaction{number: n, live: st, epoch: epoch, deadline: time.Now().Add(lifetime), mongos: mongos,
		seen: map[string]bool{}, resolved: map[string]bool{}, frozen: map[string]*collection{},
		written: map[string][]string{}, done: make(chan struct{})}
	t.view = &store{txn: t}
	t.view.init()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.open == nil {
		st.open = map[*transaction]struct{}{}
		st.locks = map[string]*transaction{}
	}
	t.snapshot = st.clock
	st.open[t] = struct{}{}
	return t
}

// aliveLocked reports whether the transaction may still run: it has not
// ended, its primary has not stepped down and its lifetime has not passed.
// live.mu must be held.
func (t *transaction) aliveLocked() bool {
	return t.state == txnInProgress && !interrupted(t.epoch) && time.Now().Before(t.deadline)
}

// status returns the transaction's state as its session sees it: a
// transaction that died is aborted.
func (t *transaction) status() txnState {
	t.live.mu.Lock()
	defer t.live.mu.Unlock()
	if t.state == txnInProgress && !t.aliveLocked() {
		t.endLocked(txnAborted)
	}
	return t.state
}

// endLocked ends the transaction: its locks are freed and its waiters
// woken. live.mu must be held.
func (t *transaction) endLocked(state txnState) {
	if t.state != txnInProgress {
		return
	}
	t.state = state
	st := t.live
	for _, k := range t.locks {
		if st.locks[k] == t {
			delete(st.locks, k)
		}
	}
	t.locks = nil
	delete(st.open, t)
	t.frozen = nil
	close(t.done)
}

// abort aborts the transaction if it is in progress.
func (t *transaction) abort() {
	t.live.mu.Lock()
	defer t.live.mu.Unlock()
	t.endLocked(txnAborted)
}

// commit applies the transaction's writes to the store and ends it. It
// fails with NoSuchTransaction if the transaction died first.
func (t *transaction) commit() error {
	// The locks are taken in the one order of every path: the view's,
	// then the store's.
	t.view.mu.Lock()
	defer t.view.mu.Unlock()
	st := t.live
	st.mu.Lock()
	defer st.mu.Unlock()
	if !t.aliveLocked() {
		t.endLocked(txnAborted)
		return errorf(codeNoSuchTransaction, "Transaction with txnNumber %d has been aborted.", t.number)
	}
	for ns, ids := range t.written {
		db, coll := splitNS(ns)
		src := t.view.dbs[db][coll]
		var dst *collection
		for _, id := range ids {
			var doc bson.Raw
			if r := src.byIDOrNil(id); r != nil {
				doc = r.doc
			}
			if dst == nil {
				dst = st.collection(db, coll, doc != nil)
			}
			if dst == nil {
				continue // removing from a collection that no longer exists
			}
			// The locks the transaction holds keep other writers off these
			// documents and keys, so the writes cannot fail here.
			st.freezeLocked(dst)
			old := dst.byID[id]
			switch {
			case doc == nil && old != nil:
				dst.removeCommitted(old)
			case doc != nil && old != nil:
				dst.replaceCommitted(old, doc)
			case doc != nil:
				dst.addCommitted(doc)
			}
		}
	}
	t.endLocked(txnCommitted)
	return nil
}

// splitNS splits ns at its first dot.
func splitNS(ns string) (db, coll string) {
	for i := range len(ns) {
		if ns[i] == '.' {
			return ns[:i], ns[i+1:]
		}
	}
	return ns, ""
}

// byIDOrNil returns the record of the _id key id, nil if there is none or
// no collection.
func (c *collection) byIDOrNil(id string) *record {
	if c == nil {
		return nil
	}
	return c.byID[id]
}

// resolve returns the transaction's copy of db.coll as it was at its
// snapshot, nil if it did not exist then. view.mu is held; live.mu is
// taken (the order is always view, then live).
func (t *transaction) resolve(db, coll string) *collection {
	ns := db + "." + coll
	st := t.live
	st.mu.Lock()
	defer st.mu.Unlock()
	t.resolved[ns] = true
	src := t.frozen[ns]
	delete(t.frozen, ns)
	if src == nil {
		if c := st.dbs[db][coll]; c != nil && c.ver <= t.snapshot {
			src = c
		}
	}
	if src == nil {
		return nil
	}
	return src.clone(t.view)
}

// freezeLocked gives the open transactions that still see c as it is now,
// and have not copied it, a frozen copy of it, before a live writer
// changes it. st.mu must be held.
func (st *store) freezeLocked(c *collection) {
	var cp *collection
	for t := range st.open {
		if t.snapshot < c.ver || t.resolved[c.ns] || t.frozen[c.ns] != nil || !t.aliveLocked() {
			continue
		}
		if cp == nil {
			cp = c.clone(nil)
		}
		t.frozen[c.ns] = cp
	}
}

// clone returns a copy of c for the store owner (nil for a frozen copy):
// new records and index owners over the same documents, which are never
// modified in place.
func (c *collection) clone(owner *store) *collection {
	cp := &collection{ns: c.ns, byID: make(map[string]*record, len(c.byID)), examined: c.examined, st: owner, ver: c.ver}
	cp.recs = make([]*record, 0, c.count())
	moved := make(map[*record]*record, c.count())
	for _, r := range c.recs[c.head:] {
		if r == nil {
			continue
		}
		nr := &record{doc: r.doc, pos: len(cp.recs), ver: r.ver}
		cp.recs = append(cp.recs, nr)
		moved[r] = nr
	}
	for k, r := range c.byID {
		cp.byID[k] = moved[r]
	}
	for _, ix := range c.indexes {
		nix := *ix
		if ix.owners != nil {
			nix.owners = make(map[string]*record, len(ix.owners))
			for k, r := range ix.owners {
				nix.owners[k] = moved[r]
			}
		}
		cp.indexes = append(cp.indexes, &nix)
	}
	return cp
}

// errWriteConflict is the error of a write that conflicts with another
// transaction's or with a write after the transaction's snapshot.
func errWriteConflict() *cmdError {
	return errorf(codeWriteConflict, "Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.")
}

// errLocked is the error of a write outside transactions that met a
// document or key locked by the open transaction t: untilUnlocked waits
// for t to end and runs the statement again. Should it reach a client, it
// reads as the WriteConflict it is.
func errLocked(t *transaction) *cmdError {
	e := errWriteConflict()
	e.wait = t
	return e
}

// idLock and keyLock are the lock keys of a document and of a unique index
// key.
func idLock(ns, id string) string       { return ns + "\x00_id\x00" + id }
func keyLock(ns, ix, key string) string { return ns + "\x00" + ix + "\x00" + key }

// lockOwnerLocked returns the live transaction that holds the lock k, if
// any; a dead one's locks are freed. st.mu is held.
func (st *store) lockOwnerLocked(k string) *transaction {
	t := st.locks[k]
	if t != nil && !t.aliveLocked() {
		t.endLocked(txnAborted)
		return nil
	}
	return t
}

// beforeWrite is called by a collection of st before it writes doc (nil
// to remove) over r (nil to insert), with the unique index keys doc has.
// On the store it checks the locks of open transactions and freezes copies
// for them; on a transaction's view it takes the locks, or fails with a
// WriteConflict. st.mu is held.
func (st *store) beforeWrite(c *collection, r *record, doc bson.Raw, keys [][]indexKey) *cmdError {
	if t := st.txn; t != nil {
		return t.lockForWrite(c, r, doc, keys)
	}
	if len(st.open) == 0 {
		return nil
	}
	owner := st.lockOwnerLocked(idLock(c.ns, idKeyOf(r, doc)))
	for i, ks := range keys {
		for _, k := range ks {
			if owner == nil {
				owner = st.lockOwnerLocked(keyLock(c.ns, c.indexes[i].name, k.str))
			}
		}
	}
	switch {
	case owner != nil && st.mutated:
		// Part of the statement ran: running it again would apply that
		// part twice. Only a unique key written by a transaction gets
		// here; mongod would wait, this server fails the statement.
		return errWriteConflict()
	case owner != nil:
		return errLocked(owner)
	}
	st.freezeLocked(c)
	return nil
}

// afterWrite records that c changed: its version and the record's.
// st.mu is held.
func (st *store) afterWrite(c *collection, r *record) {
	if st.txn != nil {
		return
	}
	st.clock++
	st.mutated = true
	c.ver = st.clock
	if r != nil {
		r.ver = st.clock
	}
}

// idKeyOf returns the _id key of the record or document being written.
func idKeyOf(r *record, doc bson.Raw) string {
	if r != nil {
		return valueKey(r.doc.Lookup("_id"))
	}
	return valueKey(doc.Lookup("_id"))
}

// lockForWrite takes the locks of a write of the transaction's view, or
// fails it with a WriteConflict, which aborts the transaction. view.mu is
// held; live.mu is taken.
func (t *transaction) lockForWrite(c *collection, r *record, doc bson.Raw, keys [][]indexKey) *cmdError {
	st := t.live
	st.mu.Lock()
	defer st.mu.Unlock()
	id := idKeyOf(r, doc)
	db, coll := splitNS(c.ns)
	lc := st.dbs[db][coll]
	want := []string{idLock(c.ns, id)}
	conflict := false
	switch owner := st.lockOwnerLocked(want[0]); {
	case owner == t:
	case owner != nil:
		conflict = true
	default:
		// The document must be as the snapshot has it: not changed,
		// removed or inserted since.
		live := lc.byIDOrNil(id)
		conflict = (live != nil && live.ver > t.snapshot) || (live == nil) != (r == nil)
	}
	for i, ks := range keys {
		for _, k := range ks {
			name := c.indexes[i].name
			lk := keyLock(c.ns, name, k.str)
			switch owner := st.lockOwnerLocked(lk); {
			case owner == t:
			case owner != nil:
				conflict = true
			default:
				// A key taken by a document written since the snapshot.
				if o := lc.uniqueOwner(name, k.str); o != nil && o.ver > t.snapshot {
					conflict = true
				}
			}
			want = append(want, lk)
		}
	}
	if conflict {
		t.endLocked(txnAborted)
		t.conflict = errWriteConflict()
		return t.conflict
	}
	if st.locks[want[0]] != t { // the transaction's first write of the document
		t.written[c.ns] = append(t.written[c.ns], id)
	}
	for _, k := range want {
		if st.locks[k] != t {
			st.locks[k] = t
			t.locks = append(t.locks, k)
		}
	}
	return nil
}

// uniqueOwner returns the record that owns key in the unique index named
// ix of c, if any.
func (c *collection) uniqueOwner(ix, key string) *record {
	if c == nil {
		return nil
	}
	for _, x := range c.indexes {
		if x.name == ix && x.owners != nil {
			return x.owners[key]
		}
	}
	return nil
}

// wait waits until the transaction ends or dies, or the request is
// interrupted (a step-down, the server's end, the client hanging up, its
// maxTimeMS).
func (t *transaction) wait(req *request) error {
	t.live.mu.Lock()
	alive := t.aliveLocked()
	t.live.mu.Unlock()
	if !alive {
		return nil
	}
	limit := time.Until(t.deadline)
	expire := time.Duration(math.MaxInt64)
	if ms, ok := req.body.Lookup("maxTimeMS").AsInt64OK(); ok && ms > 0 {
		expire = time.Duration(ms) * time.Millisecond
	}
	timer := time.NewTimer(min(limit, expire))
	defer timer.Stop()
	st := &req.conn.srv.stats
	st.transactionWait(1)
	defer st.transactionWait(-1)
	hang := req.conn.watchHangUp()
	defer hang.stop()
	select {
	case <-t.done:
	case <-t.epoch:
	case <-timer.C:
		if expire < limit {
			return errorf(codeMaxTimeMSExpired, "operation exceeded time limit")
		}
	case <-req.interrupt:
		return errInterrupted()
	case <-req.killed():
		return errKilled()
	case <-req.conn.life.done:
		return errInterrupted()
	case <-hang.done:
		return errInterrupted()
	}
	return nil
}

// untilUnlocked runs a write statement, again each time it met a lock of
// an open transaction, once the transaction has ended.
func (s *Server) untilUnlocked(req *request, run func() error) error {
	for {
		err := run()
		var ce *cmdError
		if !errors.As(err, &ce) || ce == nil || ce.wait == nil {
			return err
		}
		if err := ce.wait.wait(req); err != nil {
			return err
		}
	}
}

// checkLocksLocked fails, with errLocked, a statement outside
// transactions about to write recs when an open transaction holds the
// lock of one of them. st.mu is held.
func (st *store) checkLocksLocked(c *collection, recs []*record) error {
	if st.txn != nil || len(st.open) == 0 || c == nil {
		return nil
	}
	for _, r := range recs {
		if t := st.lockOwnerLocked(idLock(c.ns, valueKey(r.doc.Lookup("_id")))); t != nil {
			return errLocked(t)
		}
	}
	return nil
}

// checkNamespaceLocked fails, with errLocked, a command outside
// transactions that changes the catalog of db (and of coll, "" for the
// whole database) while an open transaction wrote there: mongod's command
// waits for the transaction's lock. st.mu is held.
func (st *store) checkNamespaceLocked(db, coll string) error {
	for t := range st.open {
		if !t.aliveLocked() {
			continue
		}
		for ns := range maps.Keys(t.written) {
			d, c := splitNS(ns)
			if d == db && (coll == "" || c == coll) {
				return errLocked(t)
			}
		}
	}
	return nil
}
