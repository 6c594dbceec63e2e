package proxy

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/topology"
)

// lbTxn is a transaction open on a load balancer connection.
type lbTxn struct {
	lsid      []byte // a copy
	txnNumber int64
	server    string // the mongos it is pinned to, in a sharded cluster
}

// releaseTimeout bounds what the proxy does for a closed load balancer
// connection (aborting its transactions, killing its cursors).
const releaseTimeout = 5 * time.Second

// lbTracking reports whether the connection keeps its transactions and
// cursors: one of a loadBalanced=true client.
func (cc *clientConn) lbTracking() bool {
	if !cc.loadBalanced {
		return false
	}
	if cc.lbTxns == nil {
		cc.lbTxns, cc.lbCursors = map[string]lbTxn{}, map[int64]struct{}{}
	}
	return true
}

// trackLBTxn notes what a command of a transaction did to it.
func (cc *clientConn) trackLBTxn(req *request, server string, reply bson.Raw) {
	key := string(req.lsid)
	switch {
	case req.name == "commitTransaction" && replyCode(reply) == 0, req.name == "abortTransaction":
		delete(cc.lbTxns, key)
	case req.startTxn:
		cc.lbTxns[key] = lbTxn{lsid: []byte(key), txnNumber: req.txnNumber, server: server}
	}
}

// forgetCursor forgets the proxy's cursor id, and lets go of the upstream
// connection it held.
func (cc *clientConn) forgetCursor(id int64) {
	if c, ok := cc.p.cursors.remove(id); ok && c.hold != nil {
		cc.p.holds.release(c.hold)
	}
	if cc.lbCursors != nil {
		delete(cc.lbCursors, id)
	}
}

// releaseLB aborts the transactions and kills the cursors a closed load
// balancer connection leaves, as the services behind a load balancer must
// (the load balancer specification): a driver never sends their
// commitTransaction, abortTransaction or killCursors on another
// connection. Best effort, within releaseTimeout.
func (cc *clientConn) releaseLB() {
	if len(cc.lbTxns) == 0 && len(cc.lbCursors) == 0 {
		return
	}
	p := cc.p
	ctx, cancel := context.WithTimeout(p.ctx, releaseTimeout)
	defer cancel()
	sharded := cc.up.Topology().Description().Type == topology.Sharded
	for _, t := range cc.lbTxns {
		idx, doc := bsoncore.AppendDocumentStart(nil)
		doc = bsoncore.AppendInt32Element(doc, "abortTransaction", 1)
		doc = bsoncore.AppendDocumentElement(doc, "lsid", t.lsid)
		doc = bsoncore.AppendInt64Element(doc, "txnNumber", t.txnNumber)
		doc = bsoncore.AppendBooleanElement(doc, "autocommit", false)
		doc = bsoncore.AppendStringElement(doc, "$db", "admin")
		doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
		var opts []mongopool.CommandOption
		if sharded && t.server != "" {
			opts = append(opts, mongopool.WithServer(t.server))
		}
		err := cc.doOver(ctx, p.holds.txn(cc.pinKey(t.lsid), t.txnNumber), doc, opts...)
		p.holds.endTxn(cc.pinKey(t.lsid))
		p.log.Debug("proxy: aborted the transaction of a closed load balancer connection", "conn", cc.id, "error", err)
	}
	type target struct {
		server, ns string
		hold       *held
	}
	byTarget := map[target][]int64{}
	for pid := range cc.lbCursors {
		if c, ok := p.cursors.remove(pid); ok {
			t := target{c.server, c.ns, c.hold}
			byTarget[t] = append(byTarget[t], c.id)
		}
	}
	for t, ids := range byTarget {
		cc.killLBCursors(ctx, t.server, t.ns, t.hold, ids)
		if t.hold != nil {
			for range ids {
				p.holds.release(t.hold) // each cursor's hold on it
			}
		}
	}
}

// killLBCursors kills the cursors ids of namespace ns on server, over the
// connection h they are held on, if any: best effort, within ctx.
func (cc *clientConn) killLBCursors(ctx context.Context, server, ns string, h *held, ids []int64) {
	db, coll, ok := strings.Cut(ns, ".")
	if !ok {
		return
	}
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendStringElement(doc, "killCursors", coll)
	aidx, a := bsoncore.AppendArrayElementStart(doc, "cursors")
	for i, id := range ids {
		a = bsoncore.AppendInt64Element(a, arrayKey(i), id)
	}
	doc, _ = bsoncore.AppendArrayEnd(a, aidx)
	doc = bsoncore.AppendStringElement(doc, "$db", db)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	err := cc.doOver(ctx, h, doc, mongopool.WithServer(server))
	cc.p.log.Debug("proxy: killed the cursors of a closed load balancer connection", "conn", cc.id, "cursors", len(ids), "error", err)
}

// doOver runs cmd over the held connection h, if still held, or else over
// any of the server opts select.
func (cc *clientConn) doOver(ctx context.Context, h *held, cmd bson.Raw, opts ...mongopool.CommandOption) error {
	run := func(conn *connection.Conn) error {
		_, err := conn.RoundTrip(ctx, cmd)
		return err
	}
	if h != nil && cc.p.holds.use(h) {
		return h.conn.Do(ctx, run)
	}
	return cc.up.Do(ctx, run, opts...)
}
