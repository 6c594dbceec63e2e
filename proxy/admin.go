package proxy

import (
	"net"
	"slices"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/pool"
)

// maxApps bounds the application names the proxy counts apart: a client
// names itself, so a hostile one could otherwise grow the table without
// end. Those beyond are counted under otherApps.
const maxApps = 1000

// otherApps is where the clients beyond maxApps application names, and
// those that give none, are counted.
const otherApps = ""

// appCounters are the counters of the clients of one application name
// (the handshake's client.application.name).
type appCounters struct {
	name       string
	conns      atomic.Int64 // open now
	accepted   atomic.Int64
	operations atomic.Int64 // relayed upstream
	errors     atomic.Int64 // answered with ok: 0 (the proxy's or a server's)
	latency    pool.Recorder
}

// app returns the counters of name, made on first use (under the cap).
func (p *Proxy) app(name string) *appCounters {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.apps[name]; ok {
		return a
	}
	if len(p.apps) >= maxApps {
		return p.apps[otherApps]
	}
	a := &appCounters{name: name}
	p.apps[name] = a
	return a
}

// AppStats are the counters of the clients of one application name.
type AppStats struct {
	// AppName is the application name the clients gave in their handshake
	// ("" for those that gave none, and for the names beyond the first
	// thousand).
	AppName string
	// Connections is the number of their connections open now;
	// Accepted counts those opened in all.
	Connections, Accepted int64
	// Operations counts their commands relayed to a server; Errors their
	// replies with ok: 0.
	Operations, Errors int64
	// Latency is the time of their relayed operations, as Stats.Latency
	// has it for all.
	Latency pool.Histogram
}

// Apps returns the counters of the clients by application name, sorted by
// name.
func (p *Proxy) Apps() []AppStats {
	p.mu.Lock()
	out := make([]AppStats, 0, len(p.apps))
	for _, a := range p.apps {
		out = append(out, AppStats{AppName: a.name, Connections: a.conns.Load(), Accepted: a.accepted.Load(),
			Operations: a.operations.Load(), Errors: a.errors.Load(), Latency: a.latency.Histogram()})
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b AppStats) int {
		switch {
		case a.AppName < b.AppName:
			return -1
		case a.AppName > b.AppName:
			return 1
		}
		return 0
	})
	return out
}

// ClientInfo describes one client connection.
type ClientInfo struct {
	ID      int64
	Remote  string
	AppName string
	Persona Persona
	// Busy is true while the proxy serves one of its requests.
	Busy bool
	// Opened is when the proxy accepted it.
	Opened time.Time
	// Operations counts its commands relayed to a server.
	Operations int64
}

// Clients lists the client connections open now (a copy: the list costs
// time and memory in proportion to their number).
func (p *Proxy) Clients() []ClientInfo {
	p.mu.Lock()
	out := make([]ClientInfo, 0, len(p.conns))
	for cc := range p.conns {
		out = append(out, cc.info())
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b ClientInfo) int { return int(a.ID - b.ID) })
	return out
}

func (cc *clientConn) info() ClientInfo {
	app := ""
	if a := cc.app.Load(); a != nil {
		app = a.name
	}
	return ClientInfo{ID: cc.id, Remote: cc.nc.RemoteAddr().String(), AppName: app, Persona: cc.persona,
		Busy: cc.busy.Load(), Opened: cc.opened, Operations: cc.operations.Load()}
}

// appendLatency appends h to doc as latencyMicros: its mean, p50 and p99.
func appendLatency(doc []byte, h pool.Histogram) []byte {
	idx, l := bsoncore.AppendDocumentElementStart(doc, "latencyMicros")
	l = bsoncore.AppendInt64Element(l, "mean", h.Mean().Microseconds())
	l = bsoncore.AppendInt64Element(l, "p50", h.Quantile(0.5).Microseconds())
	l = bsoncore.AppendInt64Element(l, "p99", h.Quantile(0.99).Microseconds())
	doc, _ = bsoncore.AppendDocumentEnd(l, idx)
	return doc
}

// proxyStatus answers the proxyStatus admin command (see Status).
func (cc *clientConn) proxyStatus(ex exchangeOf, body bson.Raw) bool {
	listClients := false
	if v, err := body.LookupErr("clients"); err == nil {
		listClients = v.Type == bson.TypeBoolean && v.Boolean()
	}
	return cc.reply(ex, cc.p.Status(listClients))
}

// Status returns the reply of the proxyStatus command, with ok: 1: the
// proxy's counters, its latency and busy polls, its pinned cursors and
// transactions, each upstream server's pool, and its clients by
// application name and address (and each client, with listClients).
func (p *Proxy) Status(listClients bool) bson.Raw {
	st := p.Stats()
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendObjectIDElement(doc, "processId", p.processID)
	doc = bsoncore.AppendInt64Element(doc, "uptimeMillis", time.Since(p.started).Milliseconds())

	cidx, d := bsoncore.AppendDocumentElementStart(doc, "clients")
	d = bsoncore.AppendInt64Element(d, "current", int64(st.ClientConns))
	d = bsoncore.AppendInt64Element(d, "accepted", st.AcceptedConns)
	d = bsoncore.AppendInt64Element(d, "refused", st.RefusedConns)
	d = bsoncore.AppendInt64Element(d, "max", int64(p.conf().MaxClientConns))
	aidx, a := bsoncore.AppendDocumentElementStart(d, "byAppName")
	for _, app := range p.Apps() {
		name := app.AppName
		if name == "" {
			name = "(none)"
		}
		eidx, e := bsoncore.AppendDocumentElementStart(a, name)
		e = bsoncore.AppendInt64Element(e, "connections", app.Connections)
		e = bsoncore.AppendInt64Element(e, "accepted", app.Accepted)
		e = bsoncore.AppendInt64Element(e, "operations", app.Operations)
		e = bsoncore.AppendInt64Element(e, "errors", app.Errors)
		e = appendLatency(e, app.Latency)
		a, _ = bsoncore.AppendDocumentEnd(e, eidx)
	}
	d, _ = bsoncore.AppendDocumentEnd(a, aidx)
	clients := p.Clients()
	byHost := map[string]int64{}
	for _, c := range clients {
		host, _, err := net.SplitHostPort(c.Remote)
		if err != nil {
			host = c.Remote
		}
		byHost[host]++
	}
	hidx, h := bsoncore.AppendDocumentElementStart(d, "byAddress")
	hosts := make([]string, 0, len(byHost))
	for host := range byHost {
		hosts = append(hosts, host)
	}
	slices.Sort(hosts)
	for _, host := range hosts {
		h = bsoncore.AppendInt64Element(h, host, byHost[host])
	}
	d, _ = bsoncore.AppendDocumentEnd(h, hidx)
	if listClients {
		lidx, l := bsoncore.AppendArrayElementStart(d, "list")
		for i, c := range clients {
			eidx, e := bsoncore.AppendDocumentElementStart(l, arrayKey(i))
			e = bsoncore.AppendInt64Element(e, "id", c.ID)
			e = bsoncore.AppendStringElement(e, "address", c.Remote)
			e = bsoncore.AppendStringElement(e, "appName", c.AppName)
			e = bsoncore.AppendStringElement(e, "persona", c.Persona.String())
			e = bsoncore.AppendBooleanElement(e, "busy", c.Busy)
			e = bsoncore.AppendDateTimeElement(e, "opened", c.Opened.UnixMilli())
			e = bsoncore.AppendInt64Element(e, "operations", c.Operations)
			l, _ = bsoncore.AppendDocumentEnd(e, eidx)
		}
		d, _ = bsoncore.AppendArrayEnd(l, lidx)
	}
	doc, _ = bsoncore.AppendDocumentEnd(d, cidx)

	oidx, o := bsoncore.AppendDocumentElementStart(doc, "operations")
	o = bsoncore.AppendInt64Element(o, "relayed", st.Operations)
	o = bsoncore.AppendInt64Element(o, "local", st.Local)
	o = bsoncore.AppendInt64Element(o, "queued", st.Queued)
	o = bsoncore.AppendInt64Element(o, "maxQueued", int64(p.conf().MaxQueued))
	o = bsoncore.AppendInt64Element(o, "overloaded", st.Overloaded)
	o = bsoncore.AppendInt64Element(o, "held", st.Held)
	o = bsoncore.AppendInt64Element(o, "heldRecovered", st.HeldRecovered)
	o = bsoncore.AppendInt64Element(o, "maxTimeExpired", st.MaxTimeExpired)
	o = bsoncore.AppendInt64Element(o, "longPolls", int64(st.LongPolls))
	o = bsoncore.AppendInt64Element(o, "slow", st.SlowOperations)
	o = appendLatency(o, st.Latency)
	doc, _ = bsoncore.AppendDocumentEnd(o, oidx)

	if bp := p.conf().BusyPoller; bp != nil {
		bidx, b := bsoncore.AppendDocumentElementStart(doc, "busyPoll")
		b = bsoncore.AppendInt64Element(b, "budgetMicros", bp.Budget().Microseconds())
		b = bsoncore.AppendInt64Element(b, "polls", st.BusyPolls)
		b = bsoncore.AppendInt64Element(b, "hits", st.BusyPollHits)
		doc, _ = bsoncore.AppendDocumentEnd(b, bidx)
	}

	pidx, pd := bsoncore.AppendDocumentElementStart(doc, "pinned")
	pd = bsoncore.AppendInt64Element(pd, "cursors", int64(st.Cursors))
	pd = bsoncore.AppendInt64Element(pd, "transactions", int64(st.Pins))
	pd = bsoncore.AppendInt64Element(pd, "connections", int64(st.PinnedConns))
	pd = bsoncore.AppendInt64Element(pd, "maxConnections", int64(p.conf().MaxPinned))
	doc, _ = bsoncore.AppendDocumentEnd(pd, pidx)

	if paused, until := p.Paused(""); paused {
		doc = bsoncore.AppendDateTimeElement(doc, "pausedUntil", until.UnixMilli())
	}
	desc := p.client.Topology().Description()
	doc = bsoncore.AppendStringElement(doc, "topologyType", desc.Type.String())
	uidx, u := bsoncore.AppendArrayElementStart(doc, "upstreams")
	pools := map[string]int{}
	all := p.client.Pools()
	for i, pl := range all {
		pools[pl.Address()] = i
	}
	for i, sd := range desc.Servers() {
		eidx, e := bsoncore.AppendDocumentElementStart(u, arrayKey(i))
		e = bsoncore.AppendStringElement(e, "address", sd.Address)
		e = bsoncore.AppendStringElement(e, "type", sd.Type.String())
		if j, ok := pools[sd.Address]; ok {
			ps := all[j].Stats()
			qidx, q := bsoncore.AppendDocumentElementStart(e, "pool")
			q = bsoncore.AppendStringElement(q, "state", ps.State)
			q = bsoncore.AppendInt64Element(q, "total", int64(ps.Total))
			q = bsoncore.AppendInt64Element(q, "available", int64(ps.Available))
			q = bsoncore.AppendInt64Element(q, "pending", int64(ps.Pending))
			q = bsoncore.AppendInt64Element(q, "inUse", int64(ps.InUse))
			q = bsoncore.AppendInt64Element(q, "waiting", int64(ps.Waiting))
			q = bsoncore.AppendInt64Element(q, "maxPoolSize", int64(ps.MaxPoolSize))
			q = bsoncore.AppendInt64Element(q, "created", ps.Created)
			q = bsoncore.AppendInt64Element(q, "timeouts", ps.Timeouts)
			q = bsoncore.AppendInt64Element(q, "clears", ps.Clears)
			e, _ = bsoncore.AppendDocumentEnd(q, qidx)
		}
		u, _ = bsoncore.AppendDocumentEnd(e, eidx)
	}
	doc, _ = bsoncore.AppendArrayEnd(u, uidx)
	doc = bsoncore.AppendDoubleElement(doc, "ok", 1)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc
}
