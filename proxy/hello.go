package proxy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/topology"
)

// The size limits the proxy announces: every MongoDB server's, which the
// proxy checks requests against too.
const (
	maxBSONObjectSize  = 16 * 1024 * 1024
	maxMessageSize     = 48000000
	maxWriteBatchSize  = 100000
	defaultSessionMins = 30
)

// helloState is what the proxy's hello says of its upstreams; a change of
// it is a new topologyVersion.
type helloState struct {
	counter          int64 // topologyVersion.counter
	minWire, maxWire int32
	sessionMins      int64 // 0: the upstreams do not support sessions
}

// upstreamState computes the hello fields from the topology now: the wire
// version range every data-bearing upstream server supports (the greatest
// minimum, the least maximum), and the deployment's session timeout. ok is
// false while no data-bearing server is known.
func upstreamState(d topology.Description) (st helloState, ok bool) {
	for _, sd := range d.Servers() {
		if !sd.Type.DataBearing() {
			continue
		}
		if !ok {
			st.minWire, st.maxWire, ok = sd.MinWireVersion, sd.MaxWireVersion, true
			continue
		}
		st.minWire = max(st.minWire, sd.MinWireVersion)
		st.maxWire = min(st.maxWire, sd.MaxWireVersion)
	}
	if d.LogicalSessionTimeoutMinutes != nil {
		st.sessionMins = *d.LogicalSessionTimeoutMinutes
	}
	return st, ok
}

// helloNow returns the proxy's hello state. While no data-bearing upstream
// server is known, it is the last state: the proxy answers for itself, as a
// mongos does whatever its shards do, and the operations meet the
// upstream's state (a driver whose handshake waited for the upstream would
// take the proxy for down, its server selection timing out first). Only
// before any state, at the start, does it wait (within ctx) for one. A
// change from the last state makes a new topologyVersion, and wakes the
// streaming hellos.
func (p *Proxy) helloNow(ctx context.Context) (*helloState, error) {
	d := p.client.Topology().Description()
	if d.Type == topology.LoadBalanced {
		return p.lbHelloNow(ctx)
	}
	st, ok := upstreamState(d)
	if !ok {
		p.mu.Lock()
		last := p.persona
		p.mu.Unlock()
		if last != nil {
			return last, nil
		}
		s, err := p.client.Topology().SelectServer(ctx, func(d topology.Description, dst []topology.ServerDescription) ([]topology.ServerDescription, error) {
			for _, sd := range d.Servers() {
				if sd.Type.DataBearing() {
					dst = append(dst, sd)
				}
			}
			return dst, nil
		})
		if err != nil {
			return nil, fmt.Errorf("no upstream server is available: %w", err)
		}
		s.Done()
		if st, ok = upstreamState(p.client.Topology().Description()); !ok {
			return nil, fmt.Errorf("no upstream server is available")
		}
	}
	return p.publishPersona(st), nil
}

// lbRelearn is how often the hello state of a load-balanced upstream is
// learnt again from a connection's handshake (its mongoses may be upgraded
// behind it).
const lbRelearn = 10 * time.Second

// lbHelloNow is helloNow's for a load-balanced upstream, which no monitor
// describes (the load balancer specification): the handshake of one of its
// pool's connections tells the wire versions and the session timeout. The
// first hello waits (within ctx) for one; after it, the state is learnt
// again at most every lbRelearn, in the background, while the hellos get
// the last state at once: a hello never waits for a connection that the
// operations hold.
func (p *Proxy) lbHelloNow(ctx context.Context) (*helloState, error) {
	p.mu.Lock()
	cur, learnt := p.persona, p.lbLearnt
	p.mu.Unlock()
	if cur == nil {
		if err := p.lbLearn(ctx); err != nil {
			return nil, fmt.Errorf("no upstream server is available: %w", err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.persona, nil
	}
	if time.Since(learnt) >= lbRelearn && p.lbLearning.CompareAndSwap(false, true) {
		p.bg.Add(1)
		go func() {
			defer p.bg.Done()
			defer p.lbLearning.Store(false)
			ctx, cancel := context.WithTimeout(p.ctx, p.conf().QueueTimeout)
			defer cancel()
			if err := p.lbLearn(ctx); err != nil {
				p.log.Debug("proxy: the load balancer's hello state was not learnt again; the last one holds", "error", err)
			}
		}()
	}
	return cur, nil
}

// lbLearn learns the hello state from a connection's handshake, and
// publishes it.
func (p *Proxy) lbLearn(ctx context.Context) error {
	var st helloState
	err := p.client.Do(ctx, func(conn *connection.Conn) error {
		d := conn.Description()
		st.minWire, st.maxWire = d.MinWireVersion, d.MaxWireVersion
		if d.HasLogicalSessionTimeout {
			st.sessionMins = d.LogicalSessionTimeoutMinutes
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.lbLearnt = time.Now()
	p.mu.Unlock()
	p.publishPersona(st)
	return nil
}

// publishPersona makes st the hello state, unless it is the same.
func (p *Proxy) publishPersona(st helloState) *helloState {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.persona
	if cur != nil && cur.minWire == st.minWire && cur.maxWire == st.maxWire && cur.sessionMins == st.sessionMins {
		return cur
	}
	if cur != nil {
		st.counter = cur.counter + 1
		close(p.changed)
		p.changed = make(chan struct{})
	}
	p.persona = &st
	return p.persona
}

// personaChanged returns a channel closed at the next change of the hello
// state.
func (p *Proxy) personaChanged() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// helloRequest is what a hello asks.
type helloRequest struct {
	legacy        bool // isMaster or ismaster
	helloOK       bool
	loadBalanced  bool
	hasClient     bool
	appName       string
	compression   []string
	tvProcess     bson.ObjectID
	tvCounter     int64
	hasTV         bool
	maxAwait      time.Duration
	hasMaxAwait   bool
	saslMechsUser string
	speculative   bson.Raw
}

// parseHello reads a hello command document.
func parseHello(body bson.Raw, legacy bool) helloRequest {
	h := helloRequest{legacy: legacy}
	elems, err := body.Elements()
	if err != nil {
		return h
	}
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "helloOk":
			h.helloOK = v.Type == bson.TypeBoolean && v.Boolean()
		case "loadBalanced":
			h.loadBalanced = v.Type == bson.TypeBoolean && v.Boolean()
		case "client":
			h.hasClient = true
			if d, ok := v.DocumentOK(); ok {
				if a, ok := d.Lookup("application", "name").StringValueOK(); ok {
					h.appName = a
				}
			}
		case "compression":
			if a, ok := v.ArrayOK(); ok {
				vals, _ := a.Values()
				for _, c := range vals {
					if s, ok := c.StringValueOK(); ok {
						h.compression = append(h.compression, s)
					}
				}
			}
		case "topologyVersion":
			if d, ok := v.DocumentOK(); ok {
				pid, ok1 := d.Lookup("processId").ObjectIDOK()
				n, ok2 := d.Lookup("counter").AsInt64OK()
				if ok1 && ok2 {
					h.tvProcess, h.tvCounter, h.hasTV = pid, n, true
				}
			}
		case "maxAwaitTimeMS":
			if n, ok := v.AsInt64OK(); ok && n >= 0 {
				h.maxAwait, h.hasMaxAwait = time.Duration(n)*time.Millisecond, true
			}
		case "saslSupportedMechs":
			h.saslMechsUser, _ = v.StringValueOK()
		case "speculativeAuthenticate":
			h.speculative, _ = v.DocumentOK()
		}
	}
	return h
}

// appendHello appends the proxy's hello reply to dst; spec is the reply to
// the hello's speculativeAuthenticate, if any.
func (cc *clientConn) appendHello(dst []byte, h helloRequest, st *helloState, spec bson.Raw) []byte {
	p := cc.p
	idx, doc := bsoncore.AppendDocumentStart(dst)
	if h.legacy {
		doc = bsoncore.AppendBooleanElement(doc, "ismaster", true)
	} else {
		doc = bsoncore.AppendBooleanElement(doc, "isWritablePrimary", true)
	}
	doc = bsoncore.AppendStringElement(doc, "msg", "isdbgrid")
	if h.helloOK || !h.legacy {
		doc = bsoncore.AppendBooleanElement(doc, "helloOk", true)
	}
	tidx, d := bsoncore.AppendDocumentElementStart(doc, "topologyVersion")
	d = bsoncore.AppendObjectIDElement(d, "processId", p.processID)
	d = bsoncore.AppendInt64Element(d, "counter", st.counter)
	doc, _ = bsoncore.AppendDocumentEnd(d, tidx)
	doc = bsoncore.AppendInt32Element(doc, "maxBsonObjectSize", maxBSONObjectSize)
	doc = bsoncore.AppendInt32Element(doc, "maxMessageSizeBytes", maxMessageSize)
	doc = bsoncore.AppendInt32Element(doc, "maxWriteBatchSize", maxWriteBatchSize)
	doc = bsoncore.AppendDateTimeElement(doc, "localTime", time.Now().UnixMilli())
	if st.sessionMins > 0 {
		doc = bsoncore.AppendInt32Element(doc, "logicalSessionTimeoutMinutes", int32(st.sessionMins))
	}
	doc = bsoncore.AppendInt64Element(doc, "connectionId", cc.id)
	doc = bsoncore.AppendInt32Element(doc, "minWireVersion", st.minWire)
	doc = bsoncore.AppendInt32Element(doc, "maxWireVersion", st.maxWire)
	doc = bsoncore.AppendBooleanElement(doc, "readOnly", false)
	if cc.compressor != 0 && len(h.compression) > 0 {
		aidx, arr := bsoncore.AppendArrayElementStart(doc, "compression")
		arr = bsoncore.AppendStringElement(arr, "0", cc.compressor.String())
		doc, _ = bsoncore.AppendArrayEnd(arr, aidx)
	}
	if cc.loadBalanced {
		doc = bsoncore.AppendObjectIDElement(doc, "serviceId", p.serviceID)
	}
	if h.saslMechsUser != "" {
		// The mechanisms of the user "db.name"; none for a user the proxy
		// does not know, or when it authenticates no client.
		var mechs []string
		if db, name, ok := strings.Cut(h.saslMechsUser, "."); ok {
			if u := p.users.Load().lookup(db, name); u != nil {
				mechs = u.mechanisms()
			}
		}
		aidx, arr := bsoncore.AppendArrayElementStart(doc, "saslSupportedMechs")
		for i, m := range mechs {
			arr = bsoncore.AppendStringElement(arr, arrayKey(i), m)
		}
		doc, _ = bsoncore.AppendArrayEnd(arr, aidx)
	}
	if spec != nil {
		doc = bsoncore.AppendDocumentElement(doc, "speculativeAuthenticate", spec)
	}
	doc = bsoncore.AppendDoubleElement(doc, "ok", 1)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc
}
