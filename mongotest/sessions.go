package mongotest

import (
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements what a command's session fields (lsid, txnNumber,
// autocommit, startTransaction) mean to the server, as mongod checks them
// before a command runs:
//
//   - a standalone refuses txnNumber: "Transaction numbers are only allowed
//     on a replica set member or mongos" (IllegalOperation, 20), so neither
//     retryable writes nor transactions reach it, as with mongod;
//   - a replica set member (WithReplicaSet) and a mongos (WithMongos,
//     WithLoadBalanced) take retryable writes: a write command with a
//     txnNumber runs once per session and txnNumber, and a retry of it gets
//     the reply of the first run, as mongod keeps it;
//   - a command with autocommit: false is part of a multi-document
//     transaction (see transactions.go).

// role is what the server is to its clients.
type role int

const (
	roleStandalone role = iota // a standalone mongod
	roleReplicaSet             // a member of a replica set (see ReplicaSet)
	roleMongos                 // a mongos (WithMongos), or one behind a load balancer
)

// sessionInfo is a command's session fields.
type sessionInfo struct {
	lsid          bson.Raw // nil if none
	txnNumber     int64
	hasTxn        bool
	autocommit    bool
	hasAutocommit bool
	startTxn      bool
	hasStartTxn   bool
}

// retryableWrite reports whether the command is a retryable write: a
// txnNumber outside a transaction.
func (si sessionInfo) retryableWrite() bool { return si.hasTxn && !si.hasAutocommit }

// inTransaction reports whether the command is part of a transaction.
func (si sessionInfo) inTransaction() bool { return si.hasTxn && si.hasAutocommit }

// retryableWriteCommands are the commands a retryable write may be.
var retryableWriteCommands = map[string]bool{
	"insert": true, "update": true, "delete": true, "findAndModify": true, "findandmodify": true, "bulkWrite": true,
}

// parseSessionInfo reads the session fields of body, with mongod's types.
func parseSessionInfo(body bson.Raw) (sessionInfo, error) {
	var si sessionInfo
	if v, err := body.LookupErr("lsid"); err == nil {
		d, ok := v.DocumentOK()
		if !ok {
			return si, errorf(codeTypeMismatch, "BSON field 'OperationSessionInfo.lsid' is the wrong type '%s', expected type 'object'", typeName(v.Type))
		}
		if st, _, ok := d.Lookup("id").BinaryOK(); !ok || st != 4 {
			return si, errorf(codeTypeMismatch, "BSON field 'OperationSessionInfo.lsid.id' must be a UUID (binary subtype 4)")
		}
		si.lsid = d
	}
	if v, err := body.LookupErr("txnNumber"); err == nil {
		n, ok := v.Int64OK()
		if !ok {
			return si, errorf(codeTypeMismatch, "BSON field 'OperationSessionInfo.txnNumber' is the wrong type '%s', expected type 'long'", typeName(v.Type))
		}
		si.txnNumber, si.hasTxn = n, true
	}
	for _, f := range []struct {
		key      string
		val, has *bool
	}{{"autocommit", &si.autocommit, &si.hasAutocommit}, {"startTransaction", &si.startTxn, &si.hasStartTxn}} {
		if v, err := body.LookupErr(f.key); err == nil {
			b, ok := v.BooleanOK()
			if !ok {
				return si, errorf(codeTypeMismatch, "BSON field 'OperationSessionInfo.%s' is the wrong type '%s', expected type 'bool'", f.key, typeName(v.Type))
			}
			*f.val, *f.has = b, true
		}
	}
	return si, nil
}

// checkSession reads and checks the session fields of req as mongod does
// before the fail point: the command fails when they break a rule.
func (s *Server) checkSession(req *request) (sessionInfo, error) {
	si, err := parseSessionInfo(req.body)
	if err != nil {
		return sessionInfo{}, err
	}
	switch {
	case si.hasTxn && si.lsid == nil:
		return sessionInfo{}, errorf(codeInvalidOptions, "Transaction number requires a session ID to also be specified")
	case si.hasTxn && s.role == roleStandalone:
		return sessionInfo{}, errorf(codeIllegalOperation, "Transaction numbers are only allowed on a replica set member or mongos")
	case si.hasTxn && si.txnNumber < 0:
		return sessionInfo{}, errorf(codeInvalidOptions, "Transaction number cannot be negative")
	case !si.hasTxn && si.hasAutocommit:
		return sessionInfo{}, errorf(codeInvalidOptions, "'autocommit' field requires a transaction number to also be specified")
	case si.hasAutocommit && si.autocommit:
		return sessionInfo{}, errorf(codeInvalidOptions, "Specifying autocommit=true is not allowed.")
	case si.hasStartTxn && !si.hasAutocommit:
		return sessionInfo{}, errorf(codeInvalidOptions, "'startTransaction' field requires 'autocommit' field to also be specified")
	case si.hasStartTxn && !si.startTxn:
		return sessionInfo{}, errorf(codeInvalidOptions, "Specifying startTransaction=false is not allowed.")
	}
	return si, nil
}

// checkSessionUse checks, after the fail point as mongod does, that the
// command may run with its session fields.
func checkSessionUse(req *request) error {
	si := req.session
	switch {
	case si.inTransaction():
		return nil // runInTransaction checks the command
	case si.hasTxn && !retryableWriteCommands[req.name]:
		return errorf(codeNotARetryableWriteCommand, "txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and %s is not a retryable write command.", req.name)
	}
	return nil
}

// maxSessions bounds the sessions the server keeps retryable writes for;
// beyond, a new session is refused, as mongod refuses one beyond its
// limit. endSessions frees them.
const maxSessions = 10000

// sessions are the sessions of retryable writes, by lsid.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

// session is the retryable write state of one session: the latest
// txnNumber, and the reply of the write that ran with it.
type session struct {
	mu        sync.Mutex // held while a write of the session runs
	txnNumber int64
	started   bool
	command   string
	reply     bson.Raw // nil until a write with txnNumber succeeded
	// txn is the session's latest transaction, if any; current is the
	// same, for endSessions and killSessions, which abort it without
	// waiting for the session's command.
	txn     *transaction
	current atomic.Pointer[transaction]
}

// checkout returns the session of lsid, locked, creating it if need be.
func (ss *sessions) checkout(lsid bson.Raw) (*session, error) {
	key := valueKey(docValue(lsid))
	ss.mu.Lock()
	if ss.m == nil {
		ss.m = map[string]*session{}
	}
	sess := ss.m[key]
	if sess == nil {
		if len(ss.m) >= maxSessions {
			ss.mu.Unlock()
			return nil, errorf(codeTooManyLogicalSessions, "Unable to add session into the cache because the number of active sessions is too high (%d)", maxSessions)
		}
		sess = &session{}
		ss.m[key] = sess
	}
	ss.mu.Unlock()
	sess.mu.Lock()
	return sess, nil
}

// lookup returns the session of lsid, nil if there is none.
func (ss *sessions) lookup(lsid bson.Raw) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m[valueKey(docValue(lsid))]
}

// end forgets the sessions of endSessions and killSessions, and aborts
// their transactions, as mongod does.
func (ss *sessions) end(lsids []bson.Raw) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, l := range lsids {
		key := valueKey(docValue(l))
		if sess := ss.m[key]; sess != nil {
			if t := sess.current.Load(); t != nil {
				t.abort()
			}
		}
		delete(ss.m, key)
	}
}

// runRetryable runs the retryable write req with h, once per session and
// txnNumber: a retry gets the reply of the first run; a txnNumber older
// than the session's latest is refused, as mongod refuses it.
func (s *Server) runRetryable(req *request, h handler) (bson.D, error) {
	si := req.session
	sess, err := s.sessions.checkout(si.lsid)
	if err != nil {
		return nil, err
	}
	defer sess.mu.Unlock()
	switch {
	case sess.started && si.txnNumber < sess.txnNumber:
		return nil, errorf(codeTransactionTooOld, "Retryable write with txnNumber %d is prohibited on session %s because a newer retryable write with txnNumber %d has already started on this session.",
			si.txnNumber, formatValue(si.lsid.Lookup("id")), sess.txnNumber)
	case sess.started && si.txnNumber == sess.txnNumber && sess.reply != nil && sess.command == req.name:
		return rawFields(sess.reply), nil
	}
	if sess.txn != nil && si.txnNumber > sess.txnNumber {
		sess.txn.abort() // a newer txnNumber ends the session's transaction
	}
	sess.txnNumber, sess.started, sess.command, sess.reply = si.txnNumber, true, req.name, nil
	d, err := h.run(s, req)
	if err == nil {
		sess.reply = mustMarshal(d) // a copy: d may share the request's buffers
	}
	return d, err
}

// endSessions runs {endSessions: [lsid, ...]} and {killSessions: [lsid,
// ...]}: it aborts the transactions of the sessions and forgets their
// retryable writes.
func (s *Server) endSessions(req *request) (bson.D, error) {
	lsids, err := sessionList(req)
	if err != nil {
		return nil, err
	}
	s.sessions.end(lsids)
	return bson.D{}, nil
}

// sessionList returns the lsids of {endSessions: [...]} or {killSessions:
// [...]}, checked.
func sessionList(req *request) ([]bson.Raw, error) {
	v := req.body.Lookup(req.name)
	if v.Type != bson.TypeArray {
		return nil, errorf(codeTypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'", req.name, req.name, typeName(v.Type))
	}
	var lsids []bson.Raw
	for _, v := range arrayValues(v) {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'object'", req.name, req.name, typeName(v.Type))
		}
		lsids = append(lsids, d)
	}
	return lsids, nil
}

// refreshSessions runs {refreshSessions: [lsid, ...]}: sessions here do
// not expire, so there is nothing to refresh.
func (s *Server) refreshSessions(req *request) (bson.D, error) {
	if v := req.body.Lookup(req.name); v.Type != bson.TypeArray {
		return nil, errorf(codeTypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'", req.name, req.name, typeName(v.Type))
	}
	return bson.D{}, nil
}

// rawFields returns the fields of doc as a bson.D of raw values.
func rawFields(doc bson.Raw) bson.D {
	elems, _ := doc.Elements()
	d := make(bson.D, len(elems))
	for i, e := range elems {
		d[i] = bson.E{Key: e.Key(), Value: e.Value()}
	}
	return d
}
