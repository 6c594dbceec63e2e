package proxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// retryKind is how an operation may be retried on another server, or the
// same one after its failure.
type retryKind uint8

const (
	retryNone  retryKind = iota
	retryRead            // a retryable read
	retryWrite           // a retryable write: a txnNumber outside a transaction
	retryEnd             // commitTransaction or abortTransaction
)

// retryKindOf classifies req as the retryable reads and writes
// specifications do.
func retryKindOf(req *request) retryKind {
	switch req.name {
	case "commitTransaction", "abortTransaction":
		return retryEnd
	}
	if req.autocommit {
		return retryNone // within a transaction, only its end is retried
	}
	if req.hasTxn {
		return retryWrite
	}
	switch req.name {
	case "find", "count", "distinct", "listCollections", "listIndexes", "listDatabases":
		return retryRead
	case "aggregate":
		if !req.pipelineHas("$out", false) && !req.pipelineHas("$merge", false) {
			return retryRead
		}
	}
	return retryNone
}

// readsBy reports whether req goes where its $readPreference says: the
// commands that only read. Writes go to the primary whatever they carry.
func readsBy(req *request) bool {
	switch req.name {
	case "insert", "update", "delete", "findAndModify", "create", "drop", "createIndexes", "dropIndexes",
		"dropDatabase", "renameCollection", "bulkWrite", "mapReduce", "commitTransaction", "abortTransaction",
		"endSessions", "killSessions":
		return false
	case "aggregate":
		return !req.pipelineHas("$out", false) && !req.pipelineHas("$merge", false)
	}
	return !req.autocommit
}

// upstreamError is why an operation got no reply from a server.
type upstreamError struct {
	code   int32
	msg    string
	labels []string
	retry  bool // a failure that a retry on another server (or later) may get past
}

func (e *upstreamError) Error() string { return e.msg }

// command routes a command that is neither a handshake nor a cursor's.
func (cc *clientConn) command(ex exchangeOf, req *request, seqs []wire.Sequence) bool {
	p := cc.p
	var opt mongopool.CommandOption
	var pinKey []byte
	typ := cc.up.Topology().Description().Type
	if typ == topology.LoadBalanced {
		return cc.heldCommand(ex, req, seqs)
	}
	sharded := typ == topology.Sharded
	switch {
	case sharded && req.inTxn():
		// The transactions specification's mongos pinning: every command
		// of a transaction to the mongos of its first.
		pinKey = cc.pinKey(req.lsid)
		if req.startTxn {
			p.pins.remove(pinKey)
		} else if server, ok := p.pins.get(pinKey, req.txnNumber); ok {
			if req.name != "commitTransaction" && req.name != "abortTransaction" || cc.available(server) {
				opt = mongopool.WithServer(server)
			} else {
				// The pinned mongos is gone: another one recovers the
				// commit's outcome with the recoveryToken.
				p.pins.remove(pinKey)
			}
		}
	case req.lsid != nil && p.pins.len() > 0 && !req.autocommit:
		p.pins.remove(cc.pinKey(req.lsid)) // a command outside the transaction unpins its session
	}
	if opt == nil && req.readPref != nil && readsBy(req) {
		rp, err := parseReadPref(req.readPref)
		if err != nil {
			p.stats.local.Add(1)
			return cc.reply(ex, errorReply(cc.dbuf, codeFailedToParse, "proxy: $readPreference: "+err.Error()))
		}
		if rp.Mode != topology.ModePrimary {
			opt = mongopool.WithReadPreference(rp)
		}
	}
	reply, server, err := cc.forward(ex, req, seqs, opt, retryKindOf(req))
	if ex.moreToCome {
		return true
	}
	if err != nil {
		return cc.reply(ex, cc.failureReply(req, err))
	}
	if pinKey != nil {
		switch {
		case hasLabel(reply, labelTransientTxn):
			p.pins.remove(pinKey)
		case req.startTxn:
			p.pins.put(pinKey, req.txnNumber, server)
		}
	}
	if req.name == "endSessions" {
		cc.unpinSessions(req)
	}
	if cc.lbTracking() && req.inTxn() {
		cc.trackLBTxn(req, server, reply)
	}
	if off := cursorIDOffset(reply); off != 0 && getInt64(reply, off) != 0 {
		cc.mapCursor(req, reply, off, server, nil)
	}
	return cc.reply(ex, cc.relay(reply))
}

// mapCursor maps the cursor a reply opened (its id at off) to a new id of
// the proxy's, which it writes in its place: server's cursor, held on h if
// not nil.
func (cc *clientConn) mapCursor(req *request, reply bson.Raw, off int, server string, h *held) {
	longPoll := req.tailable && req.await || req.name == "aggregate" && req.pipelineHas("$changeStream", true)
	c := cursorEntry{server: server, id: getInt64(reply, off), longPoll: longPoll, up: cc.up, owner: cc.identity, hold: h}
	if cc.lbTracking() {
		c.ns, _ = reply.Lookup("cursor", "ns").StringValueOK()
	}
	pid := cc.p.cursors.add(c)
	putInt64(reply, off, pid)
	if c.ns != "" {
		cc.lbCursors[pid] = struct{}{}
	}
}

// pinKey is the key of a session's pin: its lsid, and the user's identity
// (sessions belong to a user).
func (cc *clientConn) pinKey(lsid []byte) []byte {
	if cc.identity == "" {
		return lsid
	}
	return append(append([]byte(cc.identity), 0), lsid...)
}

// unpinSessions forgets the pins of the sessions an endSessions ends, and
// lets go of the connections their transactions held.
func (cc *clientConn) unpinSessions(req *request) {
	v, err := req.body.LookupErr("endSessions")
	if err != nil {
		return
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			cc.p.pins.remove(cc.pinKey(d))
			cc.p.holds.endTxn(cc.pinKey(d))
			if cc.lbTxns != nil {
				delete(cc.lbTxns, string(d))
			}
		}
	}
}

// available reports whether the server at address is known and not
// Unknown.
func (cc *clientConn) available(address string) bool {
	sd, ok := cc.up.Topology().Description().Server(address)
	return ok && sd.Type != topology.ServerUnknown
}

// getMore routes a getMore to the server of its cursor, with the server's
// cursor id in place of the proxy's, and the proxy's in the reply.
func (cc *clientConn) getMore(ex exchangeOf, req *request, seqs []wire.Sequence) bool {
	p := cc.p
	if req.firstType != bsoncore.TypeInt64 {
		p.stats.local.Add(1)
		return cc.reply(ex, errorReply(cc.dbuf, codeTypeMismatch, "Field 'getMore' must be of type long"))
	}
	id := getInt64(req.body, req.firstOff)
	c, ok := p.cursors.get(id)
	if !ok {
		p.stats.local.Add(1)
		return cc.reply(ex, errorReply(cc.dbuf, codeCursorNotFound, fmt.Sprintf("cursor id %d not found", id)))
	}
	if c.up != cc.up || c.owner != cc.identity {
		p.stats.local.Add(1)
		return cc.reply(ex, errorReply(cc.dbuf, codeUnauthorized, fmt.Sprintf("cursor id %d was not created by the authenticated user", id)))
	}
	if c.longPoll {
		if p.longPolls.Add(1) > int64(p.conf().MaxLongPolls) {
			p.longPolls.Add(-1)
			p.stats.local.Add(1)
			p.stats.overloaded.Add(1)
			return cc.reply(ex, errorReply(cc.dbuf, codeOverloaded, fmt.Sprintf("proxy: too many awaitData getMores in flight (the most is %d); retry later", p.conf().MaxLongPolls), labelSystemOverloaded, labelRetryable))
		}
	}
	if c.hold != nil && !p.holds.use(c.hold) {
		if c.longPoll {
			p.longPolls.Add(-1)
		}
		cc.forgetCursor(id)
		p.stats.local.Add(1)
		return cc.reply(ex, errorReply(cc.dbuf, codeCursorNotFound, fmt.Sprintf("cursor id %d not found (unused for %s, its upstream connection went back to the pool)", id, p.conf().CursorTimeout)))
	}
	putInt64(req.body, req.firstOff, c.id)
	ex.longPoll = c.longPoll
	cc.holdUse = c.hold // a load-balanced upstream's cursor: over its connection
	reply, _, err := cc.forward(ex, req, seqs, mongopool.WithServer(c.server), retryNone)
	cc.holdUse = nil
	if c.longPoll {
		p.longPolls.Add(-1) // before the reply: the client may count on it then
	}
	if err != nil && c.hold != nil {
		cc.forgetCursor(id) // its connection failed, and the cursor with it
	}
	if ex.moreToCome {
		return true
	}
	if err != nil {
		return cc.reply(ex, cc.failureReply(req, err))
	}
	if off := cursorIDOffset(reply); off != 0 {
		if getInt64(reply, off) == 0 {
			cc.forgetCursor(id)
		} else {
			putInt64(reply, off, id)
		}
	} else if code := replyCode(reply); code == codeCursorNotFound || code == 237 /* CursorKilled */ || code == 175 /* QueryPlanKilled */ {
		cc.forgetCursor(id)
	}
	return cc.reply(ex, cc.relay(reply))
}

// killCursors sends each id to the server of its cursor (one killCursors
// per server), and answers with the proxy's ids.
func (cc *clientConn) killCursors(ex exchangeOf, req *request) bool {
	p := cc.p
	coll, _ := bson.Raw(req.body).Lookup("killCursors").StringValueOK()
	arr, ok := bson.Raw(req.body).Lookup("cursors").ArrayOK()
	if !ok {
		p.stats.local.Add(1)
		return cc.reply(ex, errorReply(cc.dbuf, codeFailedToParse, "killCursors: the cursors field must be an array of cursor ids"))
	}
	vals, _ := arr.Values()
	type group struct {
		real, proxy []int64
	}
	type target struct {
		server string
		hold   *held // a load-balanced upstream's cursors: their connection's
	}
	groups := map[target]*group{}
	var order []target
	var killed, notFound, alive, unknown []int64
	for _, v := range vals {
		id, ok := v.Int64OK()
		if !ok {
			p.stats.local.Add(1)
			return cc.reply(ex, errorReply(cc.dbuf, codeTypeMismatch, "killCursors: each cursor id must be of type long"))
		}
		c, ok := p.cursors.get(id)
		if !ok || c.up != cc.up || c.owner != cc.identity {
			// Another user's cursor is not for this client to know of.
			notFound = append(notFound, id)
			continue
		}
		t := target{c.server, c.hold}
		g := groups[t]
		if g == nil {
			g = &group{}
			groups[t] = g
			order = append(order, t)
		}
		g.real, g.proxy = append(g.real, c.id), append(g.proxy, id)
	}
	for _, t := range order {
		g := groups[t]
		idx, doc := bsoncore.AppendDocumentStart(nil)
		doc = bsoncore.AppendStringElement(doc, "killCursors", coll)
		aidx, a := bsoncore.AppendArrayElementStart(doc, "cursors")
		for i, id := range g.real {
			a = bsoncore.AppendInt64Element(a, arrayKey(i), id)
		}
		doc, _ = bsoncore.AppendArrayEnd(a, aidx)
		doc = bsoncore.AppendStringElement(doc, "$db", string(req.db))
		if req.lsid != nil {
			doc = bsoncore.AppendDocumentElement(doc, "lsid", req.lsid)
		}
		doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
		sub := &request{body: doc, name: "killCursors"}
		var reply bson.Raw
		var err error
		if t.hold == nil || p.holds.use(t.hold) {
			cc.holdUse = t.hold
			reply, _, err = cc.forward(exchangeOf{received: ex.received}, sub, nil, mongopool.WithServer(t.server), retryNone)
			cc.holdUse = nil
		} else {
			err = mongopool.ErrConnClosed // gone back to the pool: the server's cursor is unknown
		}
		for i, id := range g.proxy {
			cc.forgetCursor(id)
			switch {
			case err != nil || replyCode(reply) != 0:
				unknown = append(unknown, id)
			case containsID(reply, "cursorsKilled", g.real[i]):
				killed = append(killed, id)
			case containsID(reply, "cursorsNotFound", g.real[i]):
				notFound = append(notFound, id)
			case containsID(reply, "cursorsAlive", g.real[i]):
				alive = append(alive, id)
			default:
				unknown = append(unknown, id)
			}
		}
	}
	if ex.moreToCome {
		return true
	}
	idx, doc := bsoncore.AppendDocumentStart(cc.dbuf[:0])
	for _, f := range []struct {
		name string
		ids  []int64
	}{{"cursorsKilled", killed}, {"cursorsNotFound", notFound}, {"cursorsAlive", alive}, {"cursorsUnknown", unknown}} {
		aidx, a := bsoncore.AppendArrayElementStart(doc, f.name)
		for i, id := range f.ids {
			a = bsoncore.AppendInt64Element(a, arrayKey(i), id)
		}
		doc, _ = bsoncore.AppendArrayEnd(a, aidx)
	}
	doc = bsoncore.AppendDoubleElement(doc, "ok", 1)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	cc.dbuf = doc
	return cc.reply(ex, doc)
}

func containsID(reply bson.Raw, field string, id int64) bool {
	arr, ok := reply.Lookup(field).ArrayOK()
	if !ok {
		return false
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		if n, ok := v.Int64OK(); ok && n == id {
			return true
		}
	}
	return false
}

// forward sends req to a server (opt selects it; the primary without),
// holding and retrying it through a failure of its server as kind allows,
// within Config.ElectionHold. It returns the reply and the server's
// address, or why no server replied.
func (cc *clientConn) forward(ex exchangeOf, req *request, seqs []wire.Sequence, opt mongopool.CommandOption, kind retryKind) (bson.Raw, string, error) {
	reply, server, err := cc.forwardAttempts(ex, req, seqs, opt, kind)
	if !ex.longPoll {
		took := time.Since(ex.received)
		cc.p.latency.Observe(took)
		if a := cc.app.Load(); a != nil {
			a.latency.Observe(took)
		}
		if slow := cc.p.conf().SlowOperation; slow > 0 && took >= slow {
			cc.slowOperation(req, server, took, reply, err)
		}
	}
	return reply, server, err
}

// slowOperation counts and logs an operation slower than
// Config.SlowOperation: what, whose, where, how long, and how it ended.
// At most slowLogsPerSecond are logged each second; the next line logged
// says how many were not.
func (cc *clientConn) slowOperation(req *request, server string, took time.Duration, reply bson.Raw, err error) {
	p := cc.p
	p.stats.slowOperations.Add(1)
	suppressed, ok := p.slowLog.allow(time.Now())
	if !ok {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = err.Error()
	} else if werr := wire.CheckReply(reply); werr != nil {
		outcome = werr.Error()
	}
	app := ""
	if a := cc.app.Load(); a != nil {
		app = a.name
	}
	p.log.Warn("proxy: slow operation", "conn", cc.id, "remote", cc.nc.RemoteAddr().String(), "app", app,
		"command", req.name, "db", string(req.db), "server", server, "took", took, "outcome", outcome,
		"suppressed", suppressed)
}

// slowLogsPerSecond bounds the slow operations logged each second: under
// an overload every operation may be slow, and the log must not add to it.
const slowLogsPerSecond = 10

// slowLog is the rate limit of the slow operations' log.
type slowLog struct {
	mu         sync.Mutex // protects following fields
	second     time.Time  // the start of the current second
	logged     int        // lines logged in it
	suppressed int        // lines not logged since the last one logged
}

// allow reports whether a line may be logged at now, and how many were
// suppressed before it.
func (l *slowLog) allow(now time.Time) (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.second) >= time.Second {
		l.second, l.logged = now, 0
	}
	if l.logged >= slowLogsPerSecond {
		l.suppressed++
		return 0, false
	}
	l.logged++
	suppressed, l.suppressed = l.suppressed, 0
	return suppressed, true
}

// forwardAttempts is forward but for the timing of the operation.
func (cc *clientConn) forwardAttempts(ex exchangeOf, req *request, seqs []wire.Sequence, opt mongopool.CommandOption, kind retryKind) (bson.Raw, string, error) {
	p := cc.p
	p.stats.operations.Add(1)
	cc.operations.Add(1)
	if a := cc.app.Load(); a != nil {
		a.operations.Add(1)
	}
	holdUntil := ex.received.Add(p.conf().ElectionHold)
	if ex.moreToCome || p.conf().ElectionHold < 0 {
		kind = retryNone
	}
	for attempt := 0; ; attempt++ {
		reply, server, err := cc.exchange(ex, req, seqs, opt)
		if kind == retryNone || !retryable(kind, reply, err) || attempt >= maxHeldAttempts || !time.Now().Before(holdUntil) {
			if attempt > 0 && err == nil && !retryable(kind, reply, nil) {
				p.stats.heldRecovered.Add(1)
			}
			return reply, server, err
		}
		p.stats.held.Add(1)
		p.log.Debug("proxy: holding an operation through a failure of its server", "conn", cc.id, "command", req.name, "server", server, "attempt", attempt+1, "error", errOrReply(err, reply))
		// The failure marked the server Unknown: the next selection waits
		// for the deployment's new primary. The pause keeps a server that
		// fails fast from being hammered.
		t := time.NewTimer(min(10*time.Millisecond<<attempt, 500*time.Millisecond))
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return reply, server, err
		}
	}
}

// maxHeldAttempts bounds the retries of one held operation.
const maxHeldAttempts = 30

func errOrReply(err error, reply bson.Raw) string {
	if err != nil {
		return err.Error()
	}
	if wireErr := wire.CheckReply(reply); wireErr != nil {
		return wireErr.Error()
	}
	return ""
}

// exchange is one attempt: a server and a connection for req, within the
// queue's bounds, and its round trip.
func (cc *clientConn) exchange(ex exchangeOf, req *request, seqs []wire.Sequence, opt mongopool.CommandOption) (reply bson.Raw, server string, err error) {
	p := cc.p
	if p.queued.Add(1) > int64(p.conf().MaxQueued) {
		p.queued.Add(-1)
		p.stats.overloaded.Add(1)
		return nil, "", &upstreamError{code: codeOverloaded, labels: overloadLabels,
			msg: fmt.Sprintf("proxy: too many operations waiting for a connection (the most is %d); retry later", p.conf().MaxQueued)}
	}
	queued := true
	deadline := time.Now().Add(p.conf().QueueTimeout)
	byMaxTime := false
	if req.maxTimeOff != 0 && req.maxTimeMS > 0 {
		if d := ex.received.Add(time.Duration(req.maxTimeMS) * time.Millisecond); d.Before(deadline) {
			deadline, byMaxTime = d, true
		}
	}
	qctx := &cc.qctx
	qctx.reset(cc.ctx, deadline)
	defer qctx.release()
	if err := p.waitResumed(qctx, cc.up); err != nil {
		p.queued.Add(-1)
		if byMaxTime && p.ctx.Err() == nil {
			p.stats.maxTimeExpired.Add(1)
			return nil, "", &upstreamError{code: codeMaxTimeMSExpired, msg: "operation exceeded time limit (waiting for a paused upstream)"}
		}
		p.stats.overloaded.Add(1)
		return nil, "", &upstreamError{code: codeOverloaded, labels: overloadLabels,
			msg: "proxy: the upstream is paused (for maintenance) and did not resume within the operation's wait; retry later"}
	}
	expired := false
	fn := func(conn *connection.Conn) error {
		p.queued.Add(-1)
		queued = false
		server = conn.Address()
		if req.maxTimeOff != 0 && req.maxTimeMS > 0 {
			left := req.maxTimeMS - time.Since(ex.received).Milliseconds()
			if left <= 0 {
				expired = true
				return nil
			}
			req.setMaxTime(left)
		}
		if err := cc.startUpstream(conn); err != nil {
			return err
		}
		defer cc.endUpstream()
		var e error
		if ex.moreToCome {
			e = conn.SendMsg(cc.upCtx, req.body, seqs)
		} else {
			reply, e = conn.RoundTripMsg(cc.upCtx, req.body, seqs)
		}
		if e != nil && cc.ctx.Err() != nil {
			// Close interrupted it: not the server's failure (see
			// startUpstream).
			e = fmt.Errorf("%w: %w", cc.ctx.Err(), e)
		}
		return e
	}
	var doErr error
	switch {
	case cc.holdUse != nil:
		// A held connection: only its own command can be under way on
		// it, the Conn's lock keeps the others out.
		if !p.holds.use(cc.holdUse) {
			doErr = mongopool.ErrConnClosed
		} else {
			doErr = cc.holdUse.conn.Do(qctx, fn)
		}
		if doErr != nil {
			// A retry (a commit's, an abort's) goes over another
			// connection: this one failed, and any mongos recovers a
			// transaction's outcome.
			cc.holdUse = nil
		}
	case cc.holdWant:
		if cc.holdGot != nil {
			cc.holdGot.Close() // an earlier attempt's, which failed
			cc.holdGot = nil
		}
		var cn *mongopool.Conn
		if opt != nil {
			cn, doErr = cc.up.Conn(qctx, opt)
		} else {
			cn, doErr = cc.up.Conn(qctx)
		}
		if doErr == nil {
			cc.holdGot = cn
			doErr = cn.Do(qctx, fn)
		}
	case opt != nil:
		doErr = cc.up.Do(qctx, fn, opt)
	default:
		doErr = cc.up.Do(qctx, fn)
	}
	if queued {
		p.queued.Add(-1)
	}
	switch {
	case reply != nil:
		return reply, server, nil
	case expired:
		p.stats.maxTimeExpired.Add(1)
		return nil, server, &upstreamError{code: codeMaxTimeMSExpired, msg: "operation exceeded time limit"}
	case doErr == nil:
		return nil, server, nil // sent with moreToCome
	}
	if errors.Is(doErr, topology.ErrClosed) && p.ctx.Err() == nil && cc.up != p.client {
		if !p.holdsUpstream(cc.up) {
			// A reload removed the connection's upstream credential,
			// and its client was shut down: the connection closes, and
			// its driver retries on a new one, authenticated anew.
			cc.hangUp = true
		} else {
			// A client the proxy still holds was closed under it: no
			// retry can help, so none is invited.
			return nil, server, &upstreamError{code: codeInternalError,
				msg: "proxy: the client of this connection's upstream credential is closed while the proxy still serves it (Config.Upstreams): reload or restart the proxy"}
		}
	}
	return nil, server, p.classify(doErr, queued, byMaxTime, qctx)
}

var overloadLabels = []string{labelSystemOverloaded, labelRetryable}

// classify turns an attempt's failure into the error the client gets.
func (p *Proxy) classify(err error, queued, byMaxTime bool, qctx context.Context) *upstreamError {
	var wq *pool.WaitQueueTimeoutError
	var sel *topology.SelectionError
	var size *wire.SizeLimitError
	switch {
	case p.ctx.Err() != nil:
		return &upstreamError{code: codeShutdownInProgress, msg: "proxy: the proxy is shutting down"}
	case errors.Is(err, topology.ErrClosed):
		return &upstreamError{code: codeShutdownInProgress, msg: "proxy: the proxy's client of the deployment is closed"}
	case errors.As(err, &size):
		return &upstreamError{code: codeBSONObjectTooLarge, msg: "proxy: " + err.Error()}
	case queued && byMaxTime && qctx.Err() != nil:
		p.stats.maxTimeExpired.Add(1)
		return &upstreamError{code: codeMaxTimeMSExpired, msg: "operation exceeded time limit (waiting for a connection to a server)"}
	case upstreamCredentialRefused(err):
		// Holding the operation would not help: the credential is
		// refused until the operator changes it, or the server's users.
		return &upstreamError{code: codeAuthenticationFailed,
			msg: "proxy: the server refused the proxy's upstream credential that serves this client (its operator must fix the credential or the server's user): " + err.Error()}
	case errors.As(err, &wq):
		p.stats.overloaded.Add(1)
		return &upstreamError{code: codeOverloaded, labels: overloadLabels, msg: "proxy: no connection to the server came free in time: " + err.Error()}
	case errors.As(err, &sel) || queued && qctx.Err() != nil:
		return &upstreamError{code: codeFailedToSatisfyReadPref, retry: true, msg: "proxy: " + err.Error()}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &upstreamError{code: codeNetworkTimeout, retry: true, msg: "proxy: " + err.Error()}
	}
	return &upstreamError{code: codeHostUnreachable, retry: true, msg: "proxy: " + err.Error()}
}

// holdsUpstream reports whether c is one of the proxy's upstream clients
// now.
func (p *Proxy) holdsUpstream(c *mongopool.Client) bool {
	for _, u := range p.conf().Upstreams {
		if u == c {
			return true
		}
	}
	return c == p.client
}

// upstreamCredentialRefused reports whether err is a server's refusal of the
// credential an upstream connection authenticated with (a paused pool's
// error carries it too, as its cause): a command error while
// authenticating, but for those an operation is retried on (a state change,
// a shutdown, an overload), which are the server's state, not the
// credential's.
func upstreamCredentialRefused(err error) bool {
	var ce *pool.ConnectionError
	var cmd *wire.CommandError
	return errors.As(err, &ce) && ce.DuringAuth && errors.As(ce.Err, &cmd) && !retryableCodes[cmd.Code] &&
		!pool.HasErrorLabel(err, pool.LabelSystemOverloaded)
}

// retryableCodes are the codes of errors a retryable read or write is
// retried on (the retryable reads and writes specifications).
var retryableCodes = map[int32]bool{
	6: true, 7: true, 89: true, 91: true, 134: true, 189: true, 262: true, 9001: true,
	10107: true, 11600: true, 11602: true, 13435: true, 13436: true,
}

// retryable reports whether an attempt's outcome is one the operation is
// retried on.
func retryable(kind retryKind, reply bson.Raw, err error) bool {
	if err != nil {
		var ue *upstreamError
		return errors.As(err, &ue) && ue.retry
	}
	if reply == nil {
		return false
	}
	if code := replyCode(reply); code != 0 {
		if kind == retryRead && code == 134 || code != 134 && retryableCodes[code] {
			return true
		}
		return kind != retryRead && hasLabel(reply, labelRetryableWrite)
	}
	if kind == retryRead {
		return false
	}
	if hasLabel(reply, labelRetryableWrite) {
		return true
	}
	if wce, ok := reply.Lookup("writeConcernError").DocumentOK(); ok {
		if code, ok := wce.Lookup("code").AsInt64OK(); ok && retryableCodes[int32(code)] && code != 134 {
			return true
		}
	}
	return false
}

// replyCode returns the code of an error reply (ok: 0), 0 for a success.
func replyCode(reply bson.Raw) int32 {
	if ok, err := reply.LookupErr("ok"); err == nil {
		if n, isNum := ok.AsFloat64OK(); isNum && n == 1 {
			return 0
		}
		if b, isBool := ok.BooleanOK(); isBool && b {
			return 0
		}
	}
	if code, ok := reply.Lookup("code").AsInt64OK(); ok {
		return int32(code)
	}
	return 8 // UnknownError: ok: 0 without a code
}

// hasLabel reports whether reply's errorLabels include label.
func hasLabel(reply bson.Raw, label string) bool {
	arr, ok := reply.Lookup("errorLabels").ArrayOK()
	if !ok {
		return false
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		if s, ok := v.StringValueOK(); ok && s == label {
			return true
		}
	}
	return false
}

// failureReply is the reply for a request no server answered: the error's
// code and message, with the labels a driver needs to act on it.
func (cc *clientConn) failureReply(req *request, err error) bson.Raw {
	var ue *upstreamError
	if !errors.As(err, &ue) {
		ue = &upstreamError{code: codeHostUnreachable, msg: "proxy: " + err.Error(), retry: true}
	}
	labels := ue.labels
	if ue.retry {
		switch kind := retryKindOf(req); {
		case req.name == "commitTransaction":
			labels = append(labels[:len(labels):len(labels)], labelUnknownCommit)
		case req.autocommit:
			labels = append(labels[:len(labels):len(labels)], labelTransientTxn)
		case kind == retryWrite:
			labels = append(labels[:len(labels):len(labels)], labelRetryableWrite)
		}
	}
	return cc.relay(errorReply(cc.dbuf, ue.code, ue.msg, labels...))
}

// relay returns the reply a client gets for reply: reply itself, but for a
// state change error (not writable primary, node is recovering, a
// shutdown), which gets the proxy's own topologyVersion in place of the
// server's. The proxy's state has not changed: its hello says the same.
// With the version the client already has from the proxy's hello, the
// driver takes the error as stale (the SDAM specification's isStaleError)
// and neither marks the proxy Unknown nor clears its pool to it, while
// the operation's own error handling (its retry on the code or the
// RetryableWriteError label) goes on as for any error.
func (cc *clientConn) relay(reply bson.Raw) bson.Raw {
	code := replyCode(reply)
	if code == 0 {
		if wce, ok := reply.Lookup("writeConcernError").DocumentOK(); ok {
			if c, ok := wce.Lookup("code").AsInt64OK(); ok {
				code = int32(c)
			}
		}
	}
	if !stateChange(code) {
		return reply
	}
	p := cc.p
	p.mu.Lock()
	var counter int64
	if p.persona != nil {
		counter = p.persona.counter
	}
	p.mu.Unlock()
	idx, doc := bsoncore.AppendDocumentStart(nil)
	elems, _ := reply.Elements()
	for _, e := range elems {
		if e.Key() != "topologyVersion" {
			doc = append(doc, e...)
		}
	}
	tidx, d := bsoncore.AppendDocumentElementStart(doc, "topologyVersion")
	d = bsoncore.AppendObjectIDElement(d, "processId", p.processID)
	d = bsoncore.AppendInt64Element(d, "counter", counter)
	doc, _ = bsoncore.AppendDocumentEnd(d, tidx)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc
}

// stateChange reports whether code is a state change error's (the SDAM
// specification's recovering and not writable primary codes).
func stateChange(code int32) bool {
	switch code {
	case 11600, 11602, 13436, 189, 91, 10107, 13435, 10058:
		return true
	}
	return false
}

// newCursorID returns a random positive cursor id.
func newCursorID() int64 { return rand.Int64N(1<<63-1) + 1 }
