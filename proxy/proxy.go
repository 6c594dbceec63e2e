package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// Persona is what a listener presents itself as in its hello replies.
type Persona uint8

const (
	// Mongos: drivers see a mongos (msg "isdbgrid"). They monitor it (by
	// streaming hello), pin a transaction and a cursor's getMores to it,
	// and, given several proxies in one seed list, balance operations
	// among them by latency. The default.
	Mongos Persona = iota
	// LoadBalancer: drivers that connect with loadBalanced=true see a load
	// balancer in front of a mongos (a serviceId in hello): they start no
	// monitor, and pin a cursor or a transaction to one connection.
	LoadBalancer
)

// String returns "mongos" or "loadBalancer".
func (p Persona) String() string {
	if p == LoadBalancer {
		return "loadBalancer"
	}
	return "mongos"
}

// ParsePersona parses "mongos" (or "") and "loadBalancer" (or "lb",
// "load-balancer"), in any case.
func ParsePersona(s string) (Persona, error) {
	switch strings.ToLower(s) {
	case "mongos", "":
		return Mongos, nil
	case "loadbalancer", "lb", "load-balancer":
		return LoadBalancer, nil
	}
	return Mongos, fmt.Errorf("proxy: unknown persona %q: use mongos or loadBalancer", s)
}

// Config holds the proxy's limits; the zero value of a field means its
// default.
type Config struct {
	// MaxClientConns caps the client connections open at once (10,000 by
	// default). A connection beyond it is answered, at its first command,
	// with an overload error, and closed.
	MaxClientConns int
	// MaxQueued caps the operations waiting for an upstream server or
	// connection at once (10,000 by default). Beyond it, an operation is
	// answered at once with code 462 and the SystemOverloadedError and
	// RetryableError labels.
	MaxQueued int
	// QueueTimeout bounds an operation's wait for a server and a connection
	// (10 s by default); the command's maxTimeMS bounds it too.
	QueueTimeout time.Duration
	// ElectionHold is how long a retryable operation whose server failed
	// (a network error, a state change error) is held and retried on the
	// deployment's new primary before its error goes back to the client
	// (15 s by default; a negative value turns holding off).
	ElectionHold time.Duration
	// MaxLongPolls caps the getMores of tailable awaitData cursors (change
	// streams included) in flight at once, which hold an upstream
	// connection for up to their maxTimeMS (16 by default). Beyond it, such
	// a getMore is answered with an overload error, which drivers retry.
	MaxLongPolls int
	// MaxPinned caps the upstream connections held at once for the
	// cursors and transactions of a load-balanced upstream (a
	// loadBalanced=true connection string), whose getMores, killCursors
	// and transaction commands must all go over the connection that began
	// them (the load balancer specification): 50 by default; keep it
	// below the upstream's maxPoolSize, so that short operations still
	// find connections. Beyond it, a command that would hold one more is
	// answered with an overload error, which drivers retry.
	MaxPinned int
	// CursorTimeout is how long a cursor the proxy maps may stay unused
	// before the proxy forgets it (10 minutes by default: the servers'
	// own cursorTimeoutMillis).
	CursorTimeout time.Duration
	// Compressors are offered to clients that list them in their handshake,
	// in the clients' order of preference (snappy, zstd and zlib by
	// default; none when set to an empty, non-nil slice).
	Compressors []string
	// Logger receives the proxy's log (nothing by default).
	Logger *slog.Logger

	// Users, when set, turns client authentication on: clients
	// authenticate to the proxy as to mongod (SCRAM-SHA-256, SCRAM-SHA-1,
	// MONGODB-X509 over TLS), and may run nothing but the handshake and
	// the authentication commands before. Each user's operations go to
	// the pools of its upstream credential (User.Upstream), and its
	// cursors are its own.
	Users *Users
	// Upstreams are the clients of the upstream credentials users name,
	// one pool per server each: a credential's sessions and cursors stay
	// its own. The proxy's own client serves the users that name none.
	// Made with mongopool.WithSharedTopology of the proxy's client, they
	// share its topology (its monitors, its view of the deployment)
	// instead of keeping one each.
	Upstreams map[string]*mongopool.Client
	// HandshakeTimeout bounds the time a new connection has to send its
	// first command whole, its TLS handshake included (30 s by default):
	// a connection that sends nothing holds nothing for long. After that,
	// an idle client connection stays open, as drivers' pools keep them.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds the writing of one reply (60 s by default): a
	// client that stops reading its replies is disconnected, rather than
	// hold its connection's buffers for ever.
	WriteTimeout time.Duration
	// MaxAuthFailures caps the failed authentications of one user from
	// one client address per minute (20 by default); beyond, that user's
	// attempts from that address fail at once for the rest of the minute,
	// and other users of the address go on.
	MaxAuthFailures int
	// BusyPoller, if not nil, polls a client's socket for a moment after
	// its reply, when the client sent its last request that promptly
	// after the reply before, and few replies are awaited (see
	// connection.BusyPoller): with idle CPUs, the next request is then
	// served without waiting for a sleeping CPU to wake. Give the proxy's
	// clients the same one (mongopool.WithBusyPoller), for the upstream
	// side of the hop.
	BusyPoller *connection.BusyPoller
	// SlowOperation is the time past which a relayed operation is logged
	// at Warn, with its client, application, command, database, server,
	// time and outcome (1 s by default; a negative value turns it off).
	// At most 10 lines a second: the next line says how many were not
	// logged; Stats.SlowOperations counts them all.
	SlowOperation time.Duration
}

// withDefaults returns cfg with its defaults filled in.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.MaxClientConns == 0 {
		cfg.MaxClientConns = 10000
	}
	if cfg.MaxQueued == 0 {
		cfg.MaxQueued = 10000
	}
	if cfg.QueueTimeout == 0 {
		cfg.QueueTimeout = 10 * time.Second
	}
	if cfg.ElectionHold == 0 {
		cfg.ElectionHold = 15 * time.Second
	}
	if cfg.MaxLongPolls == 0 {
		cfg.MaxLongPolls = 16
	}
	if cfg.MaxPinned == 0 {
		cfg.MaxPinned = 50
	}
	if cfg.CursorTimeout == 0 {
		cfg.CursorTimeout = 10 * time.Minute
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = time.Minute
	}
	if cfg.SlowOperation == 0 {
		cfg.SlowOperation = time.Second
	}
	if cfg.MaxAuthFailures == 0 {
		cfg.MaxAuthFailures = defaultMaxAuthFailures
	}
	if cfg.Compressors == nil {
		cfg.Compressors = []string{"snappy", "zstd", "zlib"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.MaxClientConns < 0:
		return cfg, fmt.Errorf("proxy: MaxClientConns %d is negative", cfg.MaxClientConns)
	case cfg.MaxQueued < 0:
		return cfg, fmt.Errorf("proxy: MaxQueued %d is negative", cfg.MaxQueued)
	case cfg.QueueTimeout < 0:
		return cfg, fmt.Errorf("proxy: QueueTimeout %v is negative", cfg.QueueTimeout)
	case cfg.MaxLongPolls < 0:
		return cfg, fmt.Errorf("proxy: MaxLongPolls %d is negative", cfg.MaxLongPolls)
	case cfg.MaxPinned < 0:
		return cfg, fmt.Errorf("proxy: MaxPinned %d is negative", cfg.MaxPinned)
	case cfg.CursorTimeout < 0:
		return cfg, fmt.Errorf("proxy: CursorTimeout %v is negative", cfg.CursorTimeout)
	case cfg.HandshakeTimeout < 0 || cfg.WriteTimeout < 0:
		return cfg, fmt.Errorf("proxy: HandshakeTimeout %v and WriteTimeout %v may not be negative", cfg.HandshakeTimeout, cfg.WriteTimeout)
	case cfg.MaxAuthFailures < 0:
		return cfg, fmt.Errorf("proxy: MaxAuthFailures %d is negative", cfg.MaxAuthFailures)
	}
	for _, name := range cfg.Compressors {
		if _, ok := wire.ParseCompressor(name); !ok || name == "noop" {
			return cfg, fmt.Errorf("proxy: unknown compressor %q: use snappy, zstd or zlib", name)
		}
	}
	return cfg, nil
}

// Proxy serves MongoDB clients on its listeners, with the connections of a
// mongopool.Client. Make one with New, give it listeners with Serve, and end
// it with Shutdown or Close.
type Proxy struct {
	client    *mongopool.Client
	cfg       atomic.Pointer[Config] // replaced whole by Reconfigure and SetUpstreams, under cfgMu
	cfgMu     sync.Mutex             // serializes the changes of cfg and users
	log       *slog.Logger
	offer     []wire.CompressorID // cfg.Compressors, parsed
	processID bson.ObjectID       // of the proxy's topologyVersion
	serviceID bson.ObjectID       // the LoadBalancer persona's serviceId

	ctx    context.Context // ended by Close: the upstream exchanges' context
	cancel context.CancelFunc

	cursors   *cursorTable
	pins      *pinTable
	holds     *holds                // a load-balanced upstream's connections held for cursors and transactions
	users     atomic.Pointer[Users] // nil: no authentication
	authFails *failTable

	nextConnID atomic.Int64
	queued     atomic.Int64  // operations waiting for a server or connection
	paused     atomic.Int32  // upstreams paused: 0 spares the hot path a look
	longPolls  atomic.Int64  // awaitData getMores in flight
	lbLearning atomic.Bool   // a load-balanced upstream's hello state being learnt again
	latency    pool.Recorder // of the operations relayed (see Stats.Latency)
	slowLog    slowLog
	stats      counters

	wg      sync.WaitGroup // the listeners' and the connections' goroutines
	bg      sync.WaitGroup // the background goroutines, that end with ctx (see holds)
	started time.Time

	mu        sync.Mutex              // protects following fields
	apps      map[string]*appCounters // by application name
	pauses    map[*mongopool.Client]*pause
	listeners map[net.Listener]struct{}
	conns     map[*clientConn]struct{}
	closed    bool
	draining  bool
	persona   *helloState   // the hello fields that come from the upstreams
	lbLearnt  time.Time     // when a load-balanced upstream's handshake last gave persona
	changed   chan struct{} // closed when persona changes
}

// New returns a proxy that serves clients with client's connections. The
// proxy does not own client: close it after the proxy. Behind a load
// balancer (a client of a loadBalanced=true connection string), each open
// cursor and transaction holds an upstream connection until it ends (see
// Config.MaxPinned).
func New(client *mongopool.Client, cfg Config) (*Proxy, error) {
	if client == nil {
		return nil, errors.New("proxy: New needs a client")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		client:    client,
		log:       cfg.Logger,
		processID: bson.NewObjectID(),
		serviceID: bson.NewObjectID(),
		cursors:   newCursorTable(cfg.CursorTimeout),
		pins:      newPinTable(),
		holds:     newHolds(),
		authFails: newFailTable(),
		started:   time.Now(),
		apps:      map[string]*appCounters{otherApps: {}},
		pauses:    map[*mongopool.Client]*pause{},
		listeners: map[net.Listener]struct{}{},
		conns:     map[*clientConn]struct{}{},
		changed:   make(chan struct{}),
	}
	p.cfg.Store(&cfg)
	for _, name := range cfg.Compressors {
		id, _ := wire.ParseCompressor(name)
		p.offer = append(p.offer, id)
	}
	if err := checkUpstreams(cfg.Upstreams); err != nil {
		return nil, err
	}
	if cfg.Users != nil {
		if err := p.SetUsers(cfg.Users); err != nil {
			return nil, err
		}
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// refuseWait is how long a connection beyond MaxClientConns may take to
// send its first command, which gets the overload error.
const refuseWait = 5 * time.Second

// conf returns the configuration now.
func (p *Proxy) conf() *Config { return p.cfg.Load() }

// Reconfigure changes the proxy's limits while it runs (a reload of its
// configuration): MaxClientConns, MaxQueued, QueueTimeout, ElectionHold,
// MaxLongPolls and MaxAuthFailures take effect for the next operation or
// connection; the other fields must be as they are (zero for their
// default), or it refuses the change, and changes nothing. Users change
// with SetUsers, upstream credentials with SetUpstreams.
func (p *Proxy) Reconfigure(cfg Config) error {
	p.cfgMu.Lock()
	defer p.cfgMu.Unlock()
	cur := p.conf()
	cfg.Users, cfg.Upstreams, cfg.Logger = cur.Users, cur.Upstreams, cur.Logger
	if cfg.Compressors == nil {
		cfg.Compressors = cur.Compressors
	}
	if cfg.CursorTimeout == 0 {
		cfg.CursorTimeout = cur.CursorTimeout
	}
	next, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if !slices.Equal(next.Compressors, cur.Compressors) {
		return errors.New("proxy: Reconfigure cannot change the compressors: restart the proxy")
	}
	if next.CursorTimeout != cur.CursorTimeout {
		return errors.New("proxy: Reconfigure cannot change the cursor timeout: restart the proxy")
	}
	p.cfg.Store(&next)
	return nil
}

// ErrClosed is returned by Serve once the proxy is shut down or closed.
var ErrClosed = errors.New("proxy: closed")

// Serve accepts client connections on ln, presenting persona, until the
// proxy is shut down or closed (it then returns ErrClosed) or ln fails. It
// closes ln when it returns.
func (p *Proxy) Serve(ln net.Listener, persona Persona) error {
	p.mu.Lock()
	if p.closed || p.draining {
		p.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	p.listeners[ln] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, ln)
		p.mu.Unlock()
		ln.Close()
	}()
	var tempDelay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			p.mu.Lock()
			done := p.closed || p.draining
			p.mu.Unlock()
			if done {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of file descriptors, for instance: wait a little
				// rather than spin.
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), time.Second)
				p.log.Warn("proxy: accepting a connection failed; retrying", "error", err, "delay", tempDelay)
				select {
				case <-time.After(tempDelay):
				case <-p.ctx.Done():
					return ErrClosed
				}
				continue
			}
			return fmt.Errorf("proxy: accepting connections: %w", err)
		}
		tempDelay = 0
		p.accept(nc, persona)
	}
}

// accept starts serving nc, unless the proxy is closing.
func (p *Proxy) accept(nc net.Conn, persona Persona) {
	cc := newClientConn(p, nc, persona)
	p.mu.Lock()
	if p.closed || p.draining {
		p.mu.Unlock()
		nc.Close()
		return
	}
	if len(p.conns) >= p.conf().MaxClientConns {
		// Refused at its first command, which it has a little while to
		// send: a connection beyond the cap holds nothing for long.
		cc.refuse = true
		nc.SetReadDeadline(time.Now().Add(min(refuseWait, p.conf().HandshakeTimeout)))
		p.stats.refusedConns.Add(1)
	} else {
		nc.SetReadDeadline(time.Now().Add(p.conf().HandshakeTimeout))
	}
	p.conns[cc] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	p.stats.acceptedConns.Add(1)
	go func() {
		defer p.wg.Done()
		cc.serve()
		if a := cc.app.Load(); a != nil {
			a.conns.Add(-1)
		}
		p.mu.Lock()
		delete(p.conns, cc)
		p.mu.Unlock()
	}()
}

// Close closes the listeners and every client connection at once (an
// operation under way fails), and returns once the proxy's goroutines
// have ended. It does not close the client.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for _, ps := range p.pauses {
		ps.timer.Stop()
	}
	for ln := range p.listeners {
		ln.Close()
	}
	for cc := range p.conns {
		cc.nc.Close()
	}
	p.mu.Unlock()
	p.cancel()
	// The waits and round trips under way: each fails at once (see
	// queueContext and startUpstream).
	p.mu.Lock()
	for cc := range p.conns {
		cc.qctx.parentEnded()
		cc.interruptUpstream()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.bg.Wait()
	// The connections held for cursors and transactions go back to their
	// pools, for the client's Close.
	p.holds.expire(time.Now(), true)
	return nil
}

// Shutdown stops accepting connections, closes the client connections that
// are between operations, lets the operations under way finish (closing
// each connection once its reply is written), and returns once all are
// closed. When ctx ends first, it closes the rest as Close does and returns
// ctx's error.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.draining = true
	for ln := range p.listeners {
		ln.Close()
	}
	for cc := range p.conns {
		cc.drain()
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		p.Close()
		return nil
	case <-ctx.Done():
		p.Close()
		return fmt.Errorf("proxy: shutdown: closed the connections still busy: %w", ctx.Err())
	}
}

// Stats are the proxy's counters.
type Stats struct {
	// ClientConns is the number of client connections open now.
	ClientConns int
	// AcceptedConns and RefusedConns count the connections accepted in
	// all, and those refused for MaxClientConns.
	AcceptedConns, RefusedConns int64
	// Operations counts the commands relayed upstream; Local those the
	// proxy answered itself (handshakes, ping, errors of its own).
	Operations, Local int64
	// Queued is the number of operations waiting for a server or an
	// upstream connection now; Overloaded counts those refused for
	// MaxQueued, MaxLongPolls or QueueTimeout.
	Queued     int64
	Overloaded int64
	// Held counts the retries of operations held through a failure of
	// their server (see Config.ElectionHold); HeldRecovered those that
	// then succeeded.
	Held, HeldRecovered int64
	// MaxTimeExpired counts the operations whose maxTimeMS ran out while
	// they waited.
	MaxTimeExpired int64
	// AuthFailures counts the failed authentications.
	AuthFailures int64
	// Cursors and Pins are the cursors the proxy maps now and the
	// transactions pinned to a mongos; LongPolls the awaitData getMores
	// in flight; PinnedConns the upstream connections held for the
	// cursors and transactions of a load-balanced upstream (see
	// Config.MaxPinned).
	Cursors, Pins, LongPolls, PinnedConns int
	// Latency is the distribution of the relayed operations' times, from
	// a request read whole to its server's reply (the waits for a server
	// and a connection, and the retries held through a failure, included):
	// one sample for each operation Operations counts, but the awaitData
	// getMores, which wait for data.
	Latency pool.Histogram
	// SlowOperations counts the relayed operations that took
	// Config.SlowOperation or longer, logged or not.
	SlowOperations int64
	// BusyPolls counts the waits for a socket that Config.BusyPoller
	// polled (for the clients' requests and, if the proxy's clients share
	// it, for the upstream replies); BusyPollHits those that saw the
	// socket readable before the budget ran out. Their ratio says whether
	// the polling pays.
	BusyPolls, BusyPollHits int64
}

// counters are the Stats the connections count.
type counters struct {
	acceptedConns, refusedConns atomic.Int64
	operations, local           atomic.Int64
	overloaded, maxTimeExpired  atomic.Int64
	held, heldRecovered         atomic.Int64
	slowOperations              atomic.Int64
	authFailures                atomic.Int64
	sendingAhead                atomic.Int64 // connections found pipelining (see clientConn.pipelines)
}

// Stats returns the proxy's counters now.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	n := len(p.conns)
	p.mu.Unlock()
	st := Stats{
		ClientConns:    n,
		AcceptedConns:  p.stats.acceptedConns.Load(),
		RefusedConns:   p.stats.refusedConns.Load(),
		Operations:     p.stats.operations.Load(),
		Local:          p.stats.local.Load(),
		Queued:         p.queued.Load(),
		Overloaded:     p.stats.overloaded.Load(),
		Held:           p.stats.held.Load(),
		HeldRecovered:  p.stats.heldRecovered.Load(),
		MaxTimeExpired: p.stats.maxTimeExpired.Load(),
		AuthFailures:   p.stats.authFailures.Load(),
		Cursors:        p.cursors.len(),
		Pins:           p.pins.len(),
		LongPolls:      int(p.longPolls.Load()),
		PinnedConns:    p.holds.len(),
	}
	st.BusyPolls, st.BusyPollHits = p.cfg.Load().BusyPoller.Stats()
	st.Latency = p.latency.Histogram()
	st.SlowOperations = p.stats.slowOperations.Load()
	return st
}
