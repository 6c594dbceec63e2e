package mongotest

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file answers currentOp and killOp as mongod does
// (https://www.mongodb.com/docs/manual/reference/command/currentOp/ and
// .../killOp/): every command running has an operation id; currentOp lists
// them (filtered by a query on their documents), and killOp marks one
// killed: the JavaScript it runs, and a wait for a transaction's lock, stop
// with Interrupted (11601), as mongod's interrupted operations fail.

// activeOp is a command running, as currentOp shows it.
type activeOp struct {
	id      int32
	name    string
	db      string
	body    bson.Raw // the request's, valid while the op is registered
	started time.Time
	connID  int32
	appName string
	killed  chan struct{} // closed by killOp
	once    sync.Once
}

// activeOps are the server's commands running.
type activeOps struct {
	mu   sync.Mutex // protects following fields
	m    map[int32]*activeOp
	next int32
}

// start registers req's command.
func (a *activeOps) start(req *request) *activeOp {
	op := &activeOp{name: req.name, db: req.db, body: req.body, started: time.Now(), connID: req.conn.id,
		appName: req.conn.appName, killed: make(chan struct{})}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[int32]*activeOp{}
	}
	a.next++
	op.id = a.next
	a.m[op.id] = op
	return op
}

// end forgets op.
func (a *activeOps) end(op *activeOp) {
	a.mu.Lock()
	delete(a.m, op.id)
	a.mu.Unlock()
}

// killed returns the channel closed when req's operation is killed; nil
// (never closed) for a request that is not registered.
func (req *request) killed() <-chan struct{} {
	if req.op == nil {
		return nil
	}
	return req.op.killed
}

// errKilled is the error of a killed operation.
func errKilled() *cmdError {
	return errorf(codeInterrupted, "operation was interrupted")
}

// currentOp runs {currentOp: 1, ...filter}: the commands running (this one
// included, as in mongod), as documents the rest of the command filters
// like a query ({"command.find": "c"}, {secs_running: {$gte: 1}}...).
func (s *Server) currentOp(req *request) (bson.D, error) {
	if req.db != "admin" {
		return nil, errorf(codeUnauthorized, "currentOp may only be run against the admin database.")
	}
	var filter bson.D
	for _, e := range mustElements(req.body)[1:] {
		if k := e.Key(); !genericFields[k] && !slices.Contains([]string{"$all", "$ownOps", "$truncateOps", "$localOps"}, k) {
			filter = append(filter, bson.E{Key: k, Value: e.Value()})
		}
	}
	f, err := parseFilter(mustMarshal(filter))
	if err != nil {
		return nil, err
	}
	s.ops.mu.Lock()
	ops := make([]*activeOp, 0, len(s.ops.m))
	for _, op := range s.ops.m {
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(a, b *activeOp) int { return int(a.id - b.id) })
	inprog := bson.A{}
	for _, op := range ops {
		running := time.Since(op.started)
		doc := mustMarshal(bson.D{
			{Key: "type", Value: "op"},
			{Key: "desc", Value: "conn" + strconv.Itoa(int(op.connID))},
			{Key: "connectionId", Value: op.connID},
			{Key: "appName", Value: op.appName},
			{Key: "active", Value: true},
			{Key: "opid", Value: op.id},
			{Key: "secs_running", Value: int64(running / time.Second)},
			{Key: "microsecs_running", Value: running.Microseconds()},
			{Key: "op", Value: "command"},
			{Key: "ns", Value: op.db + ".$cmd"},
			{Key: "command", Value: op.body},
			{Key: "killPending", Value: isClosed(op.killed)},
		})
		if f.match(doc) {
			inprog = append(inprog, doc)
		}
	}
	s.ops.mu.Unlock()
	if err := f.err(); err != nil {
		return nil, err
	}
	return bson.D{{Key: "inprog", Value: inprog}}, nil
}

// killOp runs {killOp: 1, op: <opid>}: it marks the operation killed.
func (s *Server) killOp(req *request) (bson.D, error) {
	if req.db != "admin" {
		return nil, errorf(codeUnauthorized, "killOp may only be run against the admin database.")
	}
	if err := checkFields(req, "op"); err != nil {
		return nil, err
	}
	v, err := req.body.LookupErr("op")
	if err != nil {
		return nil, errorf(codeBadValue, "Did not provide \"op\" field")
	}
	id, ok := v.AsInt64OK()
	if !ok && v.Type == bson.TypeDouble {
		id, ok = int64(v.Double()), true
	}
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'killOp.op' is the wrong type '%s', expected a number", typeName(v.Type))
	}
	s.ops.mu.Lock()
	if op := s.ops.m[int32(id)]; op != nil {
		op.once.Do(func() { close(op.killed) })
	}
	s.ops.mu.Unlock()
	return bson.D{{Key: "info", Value: "attempting to kill op"}}, nil
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
