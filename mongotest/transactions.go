package mongotest

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file runs the commands of multi-document transactions as mongod's
// transaction participant does (the transactions specification, and the
// manual's "Transactions" and "Production Considerations" pages):
//
//   - a command with autocommit: false and startTransaction: true starts
//     transaction txnNumber on its session, ending any older one; the
//     following commands of the transaction carry the same txnNumber and
//     autocommit: false; commitTransaction or abortTransaction ends it;
//   - only the first command may carry a readConcern (local, majority or
//     snapshot), and only commitTransaction and abortTransaction a
//     writeConcern;
//   - only the CRUD commands, getMore and killCursors run in a
//     transaction; others fail with OperationNotSupportedInTransaction
//     (263), but create and createIndexes, which mongod runs in one from
//     4.4 on and this server does not implement there (BadValue);
//   - a command that fails, or a write with a write error, aborts the
//     transaction; later commands get NoSuchTransaction (251), with the
//     TransientTransactionError label, as do commands of a transaction
//     aborted by a step-down or by its lifetime limit
//     (transactionLifetimeLimitSeconds, 60 by default: see
//     WithTransactionLifetime);
//   - commitTransaction may be sent again: a committed transaction answers
//     it with success again, on any member, as the commit is replicated;
//   - transactions run on a replica set's primary or a mongos; a
//     standalone refuses the txnNumber (IllegalOperation, 20).
//
// Isolation (snapshot reads, write conflicts) is in txnstore.go.

// The error codes of transactions.
const (
	codeWriteConflict                      = 112
	codeNoSuchTransaction                  = 251
	codeTransactionCommitted               = 256
	codeOperationNotSupportedInTransaction = 263
	codeTransactionRestart                 = 50911
)

// defaultTransactionLifetime is mongod's transactionLifetimeLimitSeconds.
const defaultTransactionLifetime = 60 * time.Second

// transactionCommands are the commands that run in a transaction.
var transactionCommands = map[string]bool{
	"find": true, "getMore": true, "killCursors": true, "insert": true, "update": true, "delete": true,
	"findAndModify": true, "findandmodify": true, "aggregate": true, "distinct": true, "bulkWrite": true,
	"commitTransaction": true, "abortTransaction": true,
}

// transactionReadConcerns are the read concern levels a transaction may
// start with.
var transactionReadConcerns = map[string]bool{"local": true, "majority": true, "snapshot": true}

// checkTransactionCommand checks, before the session is checked out, that
// the command may run in a transaction as it is.
func checkTransactionCommand(req *request) error {
	if req.name == "create" || req.name == "createIndexes" {
		// mongod runs them in a transaction from 4.4 on (on a
		// collection that does not exist yet): refused, not claimed
		// impossible.
		return errorf(codeBadValue, "mongotest does not implement %s in a multi-document transaction", req.name)
	}
	if !transactionCommands[req.name] {
		return errorf(codeOperationNotSupportedInTransaction, "Cannot run '%s' in a multi-document transaction.", req.name)
	}
	terminal := req.name == "commitTransaction" || req.name == "abortTransaction"
	if _, err := req.body.LookupErr("writeConcern"); err == nil && !terminal {
		return errorf(codeInvalidOptions, "Cannot set write concern after starting a transaction.")
	}
	rc, err := req.body.LookupErr("readConcern")
	if err != nil {
		return nil
	}
	if !req.session.startTxn {
		return errorf(codeInvalidOptions, "Only the first command in a transaction may specify a readConcern")
	}
	if level, ok := rc.Document().Lookup("level").StringValueOK(); ok && !transactionReadConcerns[level] {
		return errorf(codeInvalidOptions, "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction")
	}
	return nil
}

// runInTransaction runs req, a command of a transaction, with h.
func (s *Server) runInTransaction(req *request, h handler) (bson.D, error) {
	if err := checkTransactionCommand(req); err != nil {
		return nil, err
	}
	si := req.session
	sess, err := s.sessions.checkout(si.lsid)
	if err != nil {
		return nil, err
	}
	defer sess.mu.Unlock()
	t, err := s.transactionOf(req, sess)
	if err != nil {
		return nil, err
	}
	switch req.name {
	case "commitTransaction":
		if t.status() == txnCommitted {
			return bson.D{}, nil // a retried commit
		}
		if err := t.commit(); err != nil {
			return nil, err
		}
		return s.withRecoveryToken(t, bson.D{}), nil
	case "abortTransaction":
		t.abort()
		return s.withRecoveryToken(t, bson.D{}), nil
	}
	req.txn, t.conflict = t, nil
	d, err := h.run(s, req)
	switch {
	case t.conflict != nil:
		return nil, t.conflict // the transaction is aborted
	case err != nil:
		t.abort()
		return nil, err
	case hasWriteErrors(d):
		t.abort()
	}
	return s.withRecoveryToken(t, d), nil
}

// transactionOf returns the transaction of sess that req runs in: a new one
// when req starts it. sess is locked.
func (s *Server) transactionOf(req *request, sess *session) (*transaction, error) {
	si := req.session
	lsid := formatValue(si.lsid.Lookup("id"))
	if sess.started && si.txnNumber < sess.txnNumber {
		return nil, errorf(codeTransactionTooOld, "Cannot start transaction %d on session %s because a newer transaction %d has already started.", si.txnNumber, lsid, sess.txnNumber)
	}
	if si.startTxn {
		if sess.started && si.txnNumber == sess.txnNumber {
			state := txnInProgress
			if sess.txn != nil {
				state = sess.txn.status()
			}
			return nil, errorf(codeTransactionRestart, "Cannot start a transaction at given transaction number %d a transaction with the same number is in state %s", si.txnNumber, state)
		}
		epoch, err := s.transactionEpoch()
		if err != nil {
			return nil, err
		}
		if sess.txn != nil {
			sess.txn.abort() // a newer transaction ends the session's older one
		}
		sess.txnNumber, sess.started, sess.command, sess.reply = si.txnNumber, true, "", nil
		sess.txn = s.store.beginTxn(si.txnNumber, epoch, s.cfg.transactionLifetime, s.role == roleMongos)
		sess.current.Store(sess.txn)
		return sess.txn, nil
	}
	t := sess.txn
	if !sess.started || t == nil || t.number != si.txnNumber {
		active := int64(-1)
		if sess.started {
			active = sess.txnNumber
		}
		return nil, errorf(codeNoSuchTransaction, "Given transaction number %d does not match any in-progress transactions. The active transaction number is %d", si.txnNumber, active)
	}
	if s.rs != nil && !s.rs.isPrimary(s.self) && t.status() == txnInProgress {
		return nil, errorf(codeNotWritablePrimary, "not primary")
	}
	switch t.status() {
	case txnCommitted:
		if req.name == "commitTransaction" {
			return t, nil
		}
		return nil, errorf(codeTransactionCommitted, "Transaction %d has been committed.", t.number)
	case txnAborted:
		return nil, errorf(codeNoSuchTransaction, "Transaction with txnNumber %d has been aborted.", t.number)
	}
	return t, nil
}

// transactionEpoch returns what ends a transaction started now: on a
// replica set, the step-down of the primary it starts on; it fails on a
// member that is not primary, where transactions do not run.
func (s *Server) transactionEpoch() (<-chan struct{}, error) {
	if s.rs == nil {
		return nil, nil
	}
	ep := s.rs.primaryEpoch(s.self)
	if ep == nil {
		return nil, errorf(codeNotWritablePrimary, "not primary")
	}
	return ep, nil
}

// withRecoveryToken adds, on a mongos, the recoveryToken mongos gives the
// clients of a transaction to commit with on another mongos.
func (s *Server) withRecoveryToken(t *transaction, d bson.D) bson.D {
	if !t.mongos {
		return d
	}
	return append(d, bson.E{Key: "recoveryToken", Value: bson.D{{Key: "recoveryShardId", Value: "shard0"}}})
}

// hasWriteErrors reports whether the reply d of a write has write errors:
// writeErrors, or bulkWrite's count of failed operations, nErrors.
func hasWriteErrors(d bson.D) bool {
	for _, e := range d {
		if n, ok := e.Value.(int32); e.Key == "writeErrors" || e.Key == "nErrors" && ok && n > 0 {
			return true
		}
	}
	return false
}

// storeOf returns the store req works on: its transaction's view, or the
// server's store.
func (s *Server) storeOf(req *request) *store {
	if req.txn != nil {
		return req.txn.view
	}
	return s.store
}
