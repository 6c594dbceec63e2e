package proxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/wire"
)

// This file keeps the upstream connections that a load-balanced upstream's
// cursors and transactions hold. Behind a load balancer a driver sends a
// cursor's getMores and killCursors, and every command of a transaction,
// over the connection that began it, the only way to reach the same mongos
// (the load balancer specification). The proxy does so for its clients,
// which see a mongos and send those commands over any of their connections:
// each open cursor and transaction holds an upstream connection until it
// ends, Config.MaxPinned of them at most, so that the pool keeps
// connections for the short operations (the pinned cursors that starve a
// pool, left open by mongobetween, MB#74, MB#75).

// held is an upstream connection held for cursors and a transaction.
type held struct {
	conn *mongopool.Conn
	// Guarded by holds.mu:
	refs     int           // the cursors and the transaction holding it
	used     time.Time     // the last command sent over it
	lifetime time.Duration // unused that long, it goes back to the pool
	gone     bool          // it went back: its holders' commands fail
}

// txnHold is the connection a session's transaction holds.
type txnHold struct {
	h         *held
	txnNumber int64
}

// holds is the proxy's held connections, and the transactions' by session.
type holds struct {
	reaper sync.Once // starts the goroutine that expires held connections

	mu      sync.Mutex // protects following fields
	set     map[*held]struct{}
	txns    map[string]txnHold // by pin key (see clientConn.pinKey)
	pending int                // reserved by commands under way that may hold one
}

// startReaper starts, at the first connection held, the goroutine that
// gives back those unused for their lifetime, every tick, until ctx ends.
func (hs *holds) startReaper(ctx context.Context, wg *sync.WaitGroup, tick time.Duration) {
	hs.reaper.Do(func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(tick)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-t.C:
					hs.expire(now, false)
				}
			}
		}()
	})
}

func newHolds() *holds {
	return &holds{set: map[*held]struct{}{}, txns: map[string]txnHold{}}
}

// len returns the connections held now.
func (hs *holds) len() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.set)
}

// reserve reserves a place for a connection a command under way may hold,
// and reports whether there was one below limit (held and reserved). The
// command then either adds its connection or unreserves.
func (hs *holds) reserve(limit int) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.set)+hs.pending >= limit {
		return false
	}
	hs.pending++
	return true
}

// unreserve gives back a place reserve gave, for a command that holds
// nothing after all.
func (hs *holds) unreserve() {
	hs.mu.Lock()
	hs.pending--
	hs.mu.Unlock()
}

// add holds conn for one holder, until lifetime passes unused, in the
// place reserve gave.
func (hs *holds) add(conn *mongopool.Conn, lifetime time.Duration) *held {
	h := &held{conn: conn, refs: 1, used: time.Now(), lifetime: lifetime}
	hs.mu.Lock()
	hs.pending--
	hs.set[h] = struct{}{}
	hs.mu.Unlock()
	return h
}

// ref adds a holder to h, and reports whether h is still held.
func (hs *holds) ref(h *held) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if h.gone {
		return false
	}
	h.refs++
	return true
}

// use marks h used now, and reports whether it is still held.
func (hs *holds) use(h *held) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h.used = time.Now()
	return !h.gone
}

// release takes a holder off h; the last one gives its connection back.
func (hs *holds) release(h *held) {
	hs.mu.Lock()
	h.refs--
	last := h.refs <= 0 && !h.gone
	if last {
		h.gone = true
		delete(hs.set, h)
	}
	hs.mu.Unlock()
	if last {
		h.conn.Close()
	}
}

// putTxn records the connection of the transaction txnNumber of the
// session key; the transaction it replaces lets its go.
func (hs *holds) putTxn(key []byte, txnNumber int64, h *held) {
	hs.mu.Lock()
	old, ok := hs.txns[string(key)]
	hs.txns[string(key)] = txnHold{h: h, txnNumber: txnNumber}
	hs.mu.Unlock()
	if ok {
		hs.release(old.h)
	}
}

// txn returns the connection of the transaction txnNumber of the session
// key, nil if it holds none (it never did, or it went back).
func (hs *holds) txn(key []byte, txnNumber int64) *held {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	t, ok := hs.txns[string(key)]
	if !ok || t.txnNumber != txnNumber || t.h.gone {
		return nil
	}
	return t.h
}

// endTxn lets the connection of the session key's transaction go.
func (hs *holds) endTxn(key []byte) {
	hs.mu.Lock()
	t, ok := hs.txns[string(key)]
	delete(hs.txns, string(key))
	hs.mu.Unlock()
	if ok {
		hs.release(t.h)
	}
}

// hasTxns reports whether any transaction holds a connection: the hot path
// looks no further when none does.
func (hs *holds) hasTxns() bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.txns) > 0
}

// expire gives back the connections unused for their lifetime (a cursor
// its client abandoned, a transaction never ended), and with all true,
// every one (Close). Their holders' commands fail as those of a cursor or
// a transaction the server forgot.
func (hs *holds) expire(now time.Time, all bool) {
	var back []*held
	hs.mu.Lock()
	for h := range hs.set {
		if all || now.Sub(h.used) >= h.lifetime {
			h.gone = true
			delete(hs.set, h)
			back = append(back, h)
		}
	}
	for k, t := range hs.txns {
		if t.h.gone {
			delete(hs.txns, k)
		}
	}
	hs.mu.Unlock()
	for _, h := range back {
		h.conn.Close()
	}
}

// opensCursor reports whether req may leave a cursor open on its server:
// its getMores would then have to follow it over its connection. These are
// the commands whose replies carry a cursor: the find, getMore and
// killCursors specification's, the index and collection listings, the
// results of bulkWrite (whose getMores, the bulk write specification says,
// go over the connection of the command behind a load balancer) and those
// of checkMetadataConsistency.
func opensCursor(req *request) bool {
	switch req.name {
	case "find", "aggregate", "listCollections", "listIndexes", "listSearchIndexes", "bulkWrite", "checkMetadataConsistency":
	default:
		return false
	}
	single, _ := req.body.Lookup("singleBatch").BooleanOK()
	return !single
}

// heldCommand routes a command to a load-balanced upstream: a transaction's
// over the connection its first command held, one that may open a cursor
// over a connection held for it if it does, the others over any.
func (cc *clientConn) heldCommand(ex exchangeOf, req *request, seqs []wire.Sequence) bool {
	p := cc.p
	txn := req.inTxn()
	var key []byte
	if req.lsid != nil {
		key = cc.pinKey(req.lsid)
	}
	switch {
	case txn && req.startTxn:
		p.holds.endTxn(key) // the session's transaction before, if it still holds one
		cc.holdWant = true
	case txn:
		// Without a held connection (the transaction's expired, or its
		// end is retried after it went back), the command goes over any:
		// another mongos answers NoSuchTransaction, or recovers a
		// commit's outcome with its recoveryToken.
		cc.holdUse = p.holds.txn(key, req.txnNumber)
	case req.lsid != nil && !req.autocommit && p.holds.hasTxns():
		p.holds.endTxn(key) // a command outside the transaction ends it on the session
	}
	if !txn && opensCursor(req) {
		cc.holdWant = true
	}
	reserved := cc.holdWant
	if reserved {
		if limit := p.conf().MaxPinned; !p.holds.reserve(limit) {
			cc.holdWant = false
			p.stats.local.Add(1)
			p.stats.overloaded.Add(1)
			return cc.reply(ex, errorReply(cc.dbuf, codeOverloaded, fmt.Sprintf("proxy: %d upstream connections are held for open cursors and transactions, the most (-max-pinned); close cursors, or retry later", limit), labelSystemOverloaded, labelRetryable))
		}
	}
	used := cc.holdUse
	reply, server, err := cc.forward(ex, req, seqs, nil, retryKindOf(req))
	got := cc.holdGot
	cc.holdUse, cc.holdWant, cc.holdGot = nil, false, nil
	// giveBack returns a connection checked out for a hold that is not
	// kept, and its reservation.
	giveBack := func() {
		if got != nil {
			got.Close()
		}
		if reserved {
			p.holds.unreserve()
		}
	}
	if ex.moreToCome {
		giveBack()
		return true
	}
	if err != nil {
		giveBack()
		if txn {
			p.holds.endTxn(key) // its connection failed: the driver retries the whole transaction
		}
		return cc.reply(ex, cc.failureReply(req, err))
	}
	off := cursorIDOffset(reply)
	cursor := off != 0 && getInt64(reply, off) != 0
	var h *held
	switch {
	case got != nil:
		keepTxn := txn && replyCode(reply) == 0 && !hasLabel(reply, labelTransientTxn)
		if !keepTxn && !cursor {
			giveBack()
			break
		}
		lifetime := p.conf().CursorTimeout
		if keepTxn {
			lifetime = max(lifetime, pinLifetime)
		}
		h = p.holds.add(got, lifetime)
		p.holds.startReaper(p.ctx, &p.bg, max(min(p.conf().CursorTimeout, pinLifetime)/4, 10*time.Millisecond))
		if keepTxn {
			if cursor {
				p.holds.ref(h) // the transaction's, and the cursor's
			}
			p.holds.putTxn(key, req.txnNumber, h)
		}
	case reserved:
		p.holds.unreserve() // no connection came: nothing to hold
	case used != nil && cursor && p.holds.ref(used):
		h = used // a cursor of the transaction, on its connection
	}
	if txn && (req.name == "commitTransaction" || req.name == "abortTransaction" || hasLabel(reply, labelTransientTxn)) {
		p.holds.endTxn(key)
	}
	if req.name == "endSessions" {
		cc.unpinSessions(req)
	}
	if cc.lbTracking() && txn {
		cc.trackLBTxn(req, "", reply)
	}
	if cursor {
		cc.mapCursor(req, reply, off, server, h)
	}
	return cc.reply(ex, cc.relay(reply))
}
