package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/pool"
)

// pause is an upstream's pause: resumed is closed at its end.
type pause struct {
	resumed chan struct{}
	timer   *time.Timer // the automatic resume
	until   time.Time
}

// Pause holds the new operations of the upstream credential name ("" for
// the proxy's own client) until Resume, or until timeout passes, when the
// proxy resumes by itself: for a maintenance of the servers, say, during
// which clients wait rather than fail. The operations under way go on. A
// held operation still waits no longer than Config.QueueTimeout and its
// maxTimeMS: past those it fails as any operation that waited too long.
// Pausing a paused upstream moves its automatic resume.
func (p *Proxy) Pause(name string, timeout time.Duration) error {
	up := p.upstream(name)
	if up == nil {
		return fmt.Errorf("proxy: Pause: no upstream %q", name)
	}
	if timeout <= 0 {
		return fmt.Errorf("proxy: Pause: the timeout %v must be positive: a pause always ends", timeout)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ps := p.pauses[up]; ps != nil {
		ps.timer.Stop()
		ps.timer = time.AfterFunc(timeout, func() { p.Resume(name) })
		ps.until = time.Now().Add(timeout)
		return nil
	}
	p.pauses[up] = &pause{resumed: make(chan struct{}), until: time.Now().Add(timeout),
		timer: time.AfterFunc(timeout, func() { p.Resume(name) })}
	p.paused.Add(1)
	p.log.Warn("proxy: upstream paused", "upstream", name, "timeout", timeout)
	return nil
}

// Resume ends the pause of the upstream name: the operations it held go
// on. Resuming an upstream that is not paused does nothing.
func (p *Proxy) Resume(name string) error {
	up := p.upstream(name)
	if up == nil {
		return fmt.Errorf("proxy: Resume: no upstream %q", name)
	}
	p.endPause(name, up)
	return nil
}

// endPause ends the pause of up, the client of the upstream name, if it is
// paused.
func (p *Proxy) endPause(name string, up *mongopool.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.pauses[up]
	if ps == nil {
		return
	}
	ps.timer.Stop()
	close(ps.resumed)
	delete(p.pauses, up)
	p.paused.Add(-1)
	p.log.Warn("proxy: upstream resumed", "upstream", name)
}

// errReconnect is the cause of Reconnect's clears.
var errReconnect = errors.New("proxy: an administrator asked the proxy to reconnect to its upstream")

// Reconnect replaces the upstream credential name's connections ("" for
// the proxy's own client) with new ones, without pausing anything: idle
// connections are closed now, those in use once their operation is done,
// and the operations that follow get new ones. After a credential's
// password changed on the servers, say, or a server moved behind its
// name.
func (p *Proxy) Reconnect(name string) error {
	up := p.upstream(name)
	if up == nil {
		return fmt.Errorf("proxy: Reconnect: no upstream %q", name)
	}
	for _, pl := range up.Pools() {
		if err := pl.Clear(pool.ClearOptions{Cause: errReconnect, KeepReady: true}); err != nil {
			return fmt.Errorf("proxy: Reconnect: %s: %w", pl.Address(), err)
		}
	}
	p.log.Warn("proxy: reconnecting to the upstream", "upstream", name)
	return nil
}

// Paused reports whether the upstream name is paused, and until when at
// the latest.
func (p *Proxy) Paused(name string) (bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ps := p.pauses[p.upstream(name)]; ps != nil {
		return true, ps.until
	}
	return false, time.Time{}
}

// waitResumed waits, within ctx, for up's pause to end, if it is paused.
func (p *Proxy) waitResumed(ctx context.Context, up *mongopool.Client) error {
	if p.paused.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	ps := p.pauses[up]
	p.mu.Unlock()
	if ps == nil {
		return nil
	}
	select {
	case <-ps.resumed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mayAdminister reports whether the client may pause and resume the
// proxy: an authenticated user with admin: true, or, when the proxy
// authenticates no client, a client on the proxy's own host (loopback, or
// a Unix socket).
func (cc *clientConn) mayAdminister() bool {
	if cc.p.authRequired() {
		return cc.user != nil && cc.user.Admin
	}
	switch addr := cc.nc.RemoteAddr().(type) {
	case *net.TCPAddr:
		return addr.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// pauseCommand serves {proxyPause: upstream, timeoutMS},
// {proxyResume: upstream} and {proxyReconnect: upstream}.
func (cc *clientConn) pauseCommand(ex exchangeOf, name string, body bson.Raw) bool {
	if !cc.mayAdminister() {
		return cc.reply(ex, errorReply(cc.dbuf, codeUnauthorized, fmt.Sprintf("not authorized to run %s: it takes a user with admin: true, or, without authentication, a client on the proxy's host", name)))
	}
	upstream, _ := body.Lookup(name).StringValueOK()
	var err error
	if name == "proxyReconnect" {
		if err := cc.p.Reconnect(upstream); err != nil {
			return cc.reply(ex, errorReply(cc.dbuf, codeBadValue, err.Error()))
		}
		idx, doc := bsoncore.AppendDocumentStart(nil)
		doc = bsoncore.AppendDoubleElement(doc, "ok", 1)
		doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
		return cc.reply(ex, doc)
	}
	if name == "proxyPause" {
		ms, ok := body.Lookup("timeoutMS").AsInt64OK()
		if !ok {
			return cc.reply(ex, errorReply(cc.dbuf, codeFailedToParse, "proxyPause: give timeoutMS, after which the proxy resumes by itself"))
		}
		err = cc.p.Pause(upstream, time.Duration(ms)*time.Millisecond)
	} else {
		err = cc.p.Resume(upstream)
	}
	if err != nil {
		return cc.reply(ex, errorReply(cc.dbuf, codeBadValue, err.Error()))
	}
	paused, until := cc.p.Paused(upstream)
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendBooleanElement(doc, "paused", paused)
	if paused {
		doc = bsoncore.AppendDateTimeElement(doc, "until", until.UnixMilli())
	}
	doc = bsoncore.AppendDoubleElement(doc, "ok", 1)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return cc.reply(ex, doc)
}
