package mongopool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/internal/deliver"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// Client is a client of a MongoDB deployment of any kind: a standalone
// server, a replica set, a sharded cluster or a load balancer. It keeps a
// topology (see package topology): a monitor per server, the SDAM rules, and
// a pool per data-bearing server, all with the options of the connection
// string; it selects a server by read preference for each operation, and
// retries a retryable read or write once where the specifications allow.
//
// A Client is safe for concurrent use. Close it when done.
type Client struct {
	cs   *connstring.ConnString
	topo *topology.Topology

	criteria           topology.Criteria // the connection string's read preference, heartbeat and latency window
	doOps              sync.Pool         // *operation: Do's, reused
	heartbeat          time.Duration
	timeout            time.Duration // timeoutMS; 0 for none
	retryReads         bool
	retryWrites        bool
	maxAdaptiveRetries int
	retarget           bool

	sessions sessionPool
	warnings []string
	closed   atomic.Bool
	ops      *opGate            // the operations under way, for Shutdown
	commands func(CommandEvent) // nil when nobody listens
	// commandEvents are the command events on their way to commands, on a
	// goroutine of their own.
	commandEvents deliver.Queue[CommandEvent]
	logs          bool // a logger was given: selections are logged
	// conns says how to connect to a server: the connection string's
	// settings, with the client's dialer and TLS configuration.
	conns connSettings
	opIDs atomic.Int64
	// clusterTime is the highest $clusterTime the servers' replies
	// carried, which every command sends (causal.go).
	clusterTime atomic.Pointer[clusterTime]
	// writeConcern and readConcern are the connection string's, nil when
	// it sets none (defaultconcern.go).
	writeConcern, readConcern bson.Raw

	// settings are the topology's settings from the connection string.
	settings topology.Settings
	// set is the client's pools in another client's topology (see
	// WithSharedTopology); nil when the topology is the client's own.
	set *topology.PoolSet

	poolsMu sync.Mutex    // protects following fields
	pools   []*pool.Pool  // the pools made for servers, closed ones until the next pass
	reconf  []pool.Option // limits set by Reconfigure, for the pools made later
}

// ClientOption configures a Client beyond its connection string.
type ClientOption func(*clientConfig) error

type clientConfig struct {
	poolOpts           []pool.Option
	events             func(topology.Event)
	resolver           connstring.Resolver
	maxAdaptiveRetries int
	retarget           bool
	minHeartbeat       time.Duration
	commands           func(CommandEvent)
	logger             *slog.Logger
	dial               func(ctx context.Context, network, address string) (net.Conn, error)
	tls                *tls.Config
	busyPoller         *connection.BusyPoller
	// single makes a client of the connection string's one host whatever
	// it is (directConnection), or of its load balancer: a Pool's.
	single bool
	// shared is the client whose topology the client shares.
	shared *Client
}

// singleServer makes the client a Pool's: see clientConfig.single.
func singleServer() ClientOption {
	return func(c *clientConfig) error {
		c.single = true
		return nil
	}
}

// WithPoolOptions adds options to every server's pool, after the connection
// string's (an event handler, a logger...).
func WithPoolOptions(opts ...pool.Option) ClientOption {
	return func(c *clientConfig) error {
		c.poolOpts = append(c.poolOpts, opts...)
		return nil
	}
}

// WithTopologyEventHandler receives the SDAM events: the topology's and the
// servers' changes and the monitors' heartbeats, in order, one at a time, on
// a goroutine of the client's own. Neither the topology, nor a monitor, nor
// an operation waits for it: it may be slow, and may call the client (Close
// included); events that come while it is 65,536 events behind are dropped
// (see topology.Topology.EventsDropped). A change is published to server
// selection before its event: a handler that hears of a new primary and
// writes finds it.
func WithTopologyEventHandler(fn func(topology.Event)) ClientOption {
	return func(c *clientConfig) error {
		c.events = fn
		return nil
	}
}

// WithLogger sets the logger of the client's log messages (those of the
// logging specification: the pools' connection messages, SDAM's topology
// messages, server selection's), and of the connection string's warnings.
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *clientConfig) error {
		c.logger = l
		return nil
	}
}

// WithDialer sets how the client opens its sockets, monitors' and pools'
// alike (a net.Dialer's DialContext otherwise): through a proxy, say, or to
// in-process servers in tests. TLS, when configured, still runs over them.
func WithDialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) ClientOption {
	return func(c *clientConfig) error {
		c.dial = dial
		return nil
	}
}

// WithTLSConfig sets the TLS configuration of every connection, instead of
// the one the connection string's tls options make; TLS is on with it. Its
// ServerName, when empty, is each server's host name.
func WithTLSConfig(cfg *tls.Config) ClientOption {
	return func(c *clientConfig) error {
		if cfg == nil {
			return errors.New("mongopool: WithTLSConfig(nil): give a configuration, or leave the option out")
		}
		c.tls = cfg
		return nil
	}
}

// WithResolver sets the DNS resolver of a mongodb+srv connection string's
// look-ups (net.DefaultResolver otherwise).
func WithResolver(r connstring.Resolver) ClientOption {
	return func(c *clientConfig) error {
		c.resolver = r
		return nil
	}
}

// WithMaxAdaptiveRetries sets how many times an operation is retried after
// overload errors (errors with the SystemOverloadedError and RetryableError
// labels), with an exponential backoff (100ms × 2^retry, or the error's
// baseBackoffMS × 2^retry, times a random jitter, at most 10s): the client
// backpressure specification's maxAdaptiveRetries, 2 by default; 0 turns
// these retries off. Once an operation has met an overload error, this also
// bounds its retries after other errors, timeoutMS or not.
func WithMaxAdaptiveRetries(n int) ClientOption {
	return func(c *clientConfig) error {
		if n < 0 {
			return fmt.Errorf("mongopool: WithMaxAdaptiveRetries(%d): the number of retries cannot be negative", n)
		}
		c.maxAdaptiveRetries = n
		return nil
	}
}

// WithOverloadRetargeting makes a retry after an overload error prefer
// another server than the overloaded one (the client backpressure
// specification's enableOverloadRetargeting, off by default). Other retries
// prefer another server in a sharded cluster only (another mongos); in a
// replica set they go where the read preference says, the failed server
// included, as the retryable reads and writes specifications want.
func WithOverloadRetargeting(on bool) ClientOption {
	return func(c *clientConfig) error {
		c.retarget = on
		return nil
	}
}

// WithBusyPoller makes the connections of the client's pools poll their
// socket for a moment before a read of a reply would park, with bp (see
// connection.BusyPoller; off by default, and never for the monitors'
// connections). With idle CPUs, a prompt reply then reaches its
// goroutine without waiting for a sleeping CPU and thread to wake: tens of
// microseconds less per operation on virtual machines, for CPU time that was
// idle. While more than one reply is awaited on the connections that share
// bp, nothing polls: share one between a process's clients. It is for
// servers in other processes: a server in the client's own process (the
// test server, say) gains nothing from it.
func WithBusyPoller(bp *connection.BusyPoller) ClientOption {
	return func(c *clientConfig) error {
		c.busyPoller = bp
		return nil
	}
}

// WithSharedTopology makes the client's pools part of base's topology
// instead of a topology of its own: one monitor per server, one view of the
// deployment and one balance of the operations in progress, for clients
// that differ in their connections only, as those of several credentials
// do (a proxy's, say). The client's connection string names the same
// deployment as base's (its hosts or SRV name, replicaSet, directConnection,
// loadBalanced; heartbeatFrequencyMS, serverMonitoringMode and
// serverSelectionTimeoutMS left out or the same), and sets its own
// connections' options (credentials, TLS, compressors, the pools' limits)
// and its operations' (read preference, retries, timeoutMS).
//
// The topology is base's: its events go to base's handler and logger
// (WithTopologyEventHandler is refused here), and closing base closes the
// client's pools too, after which its operations fail with
// topology.ErrClosed. Closing the client closes its pools only. The SDAM
// error rules apply to the client's connections as to base's, with one
// difference: a server that refuses the client's credential clears the
// client's pools of it alone (see topology.PoolSet).
func WithSharedTopology(base *Client) ClientOption {
	return func(c *clientConfig) error {
		if base == nil {
			return errors.New("mongopool: WithSharedTopology(nil): give the client whose topology to share")
		}
		c.shared = base
		return nil
	}
}

// NewClient parses uri (a mongodb:// or mongodb+srv:// connection string,
// with any number of hosts) and returns a Client of the deployment, without
// waiting for it: the monitors start checking the servers at once, and the
// first operation waits for a suitable server (serverSelectionTimeoutMS,
// 30s by default). Options of the connection string the client honours:
// those of the pools (see [New]), replicaSet, directConnection,
// loadBalanced, heartbeatFrequencyMS, serverMonitoringMode,
// serverSelectionTimeoutMS, localThresholdMS, readPreference,
// readPreferenceTags, maxStalenessSeconds, retryReads, retryWrites and
// timeoutMS. The SRV and TXT look-ups of a mongodb+srv URI are bounded by
// pool.DefaultConnectTimeout; use [Connect] to bound them with a context.
func NewClient(uri string, opts ...ClientOption) (*Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pool.DefaultConnectTimeout)
	defer cancel()
	return newClient(ctx, uri, opts)
}

// Connect is [NewClient] followed by a ping of a server of the deployment
// (any data-bearing one): it returns once the deployment answers, or the
// error that kept it from answering. ctx bounds the look-ups of a
// mongodb+srv URI, the server selection and the ping.
func Connect(ctx context.Context, uri string, opts ...ClientOption) (*Client, error) {
	c, err := newClient(ctx, uri, opts)
	if err != nil {
		return nil, err
	}
	nearest := topology.ReadPref{Mode: topology.ModeNearest}
	if _, err := c.Read(ctx, "admin", bson.D{{Key: "ping", Value: 1}}, WithReadPreference(nearest)); err != nil {
		c.Close()
		return nil, fmt.Errorf("mongopool: cannot reach the deployment of %s: %w", c.cs.Redacted(), err)
	}
	return c, nil
}

func newClient(ctx context.Context, uri string, opts []ClientOption) (*Client, error) {
	cfg := clientConfig{maxAdaptiveRetries: defaultMaxAdaptiveRetries}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	r := cfg.resolver
	if r == nil {
		r = net.DefaultResolver
	}
	cs, err := connstring.ParseWithResolver(ctx, uri, r)
	if err != nil {
		return nil, err
	}
	crit, err := topology.CriteriaFromConnString(cs)
	if err != nil {
		return nil, err
	}
	c := &Client{
		cs:                 cs,
		ops:                newOpGate(),
		criteria:           crit,
		heartbeat:          durationOr(cs.HeartbeatFrequency, topology.DefaultHeartbeatFrequency),
		timeout:            durationOr(cs.Timeout, 0),
		retryReads:         cs.RetryReads == nil || *cs.RetryReads,
		retryWrites:        cs.RetryWrites == nil || *cs.RetryWrites,
		maxAdaptiveRetries: cfg.maxAdaptiveRetries,
		retarget:           cfg.retarget,
		warnings:           slices.Clone(cs.Warnings),
		commands:           cfg.commands,
		logs:               cfg.logger != nil,
		writeConcern:       writeConcernOf(cs),
		readConcern:        readConcernOf(cs),
	}
	if cfg.single && len(cs.Hosts) != 1 {
		return nil, fmt.Errorf("mongopool: a pool serves one endpoint, and %s lists %d hosts (%s): use NewClient, or open one pool per host",
			cs.Redacted(), len(cs.Hosts), strings.Join(cs.Hosts, ", "))
	}
	// The connection settings are made once: files read, keys decrypted.
	// A monitor or a pool made for a server (under the topology's lock)
	// then costs no I/O.
	if c.conns, err = newConnSettings(cs, cfg.dial, cfg.tls); err != nil {
		return nil, err
	}
	if c.commands != nil {
		c.commandEvents.Init(0, c.commands, nil)
	}
	base := poolOptions(cs)
	if cfg.logger != nil {
		base = append(base, pool.WithLogger(cfg.logger))
		logWarnings(cfg.logger, cs, c.warnings)
	}
	newPool := func(address string, establishFailed func(error)) (*pool.Pool, error) {
		ccfg := c.conns.forAddress(address)
		// The monitors' connections, which wait for seconds, never
		// poll: only the pools' have the poller.
		ccfg.BusyPoller = cfg.busyPoller
		o := append(slices.Clone(base), pool.WithEstablishErrorHandler(establishFailed))
		o = append(o, cfg.poolOpts...)
		// Under the lock: a Reconfigure either is in o or sees the pool.
		c.poolsMu.Lock()
		defer c.poolsMu.Unlock()
		p, err := pool.New(address, NewConnector(ccfg), append(o, c.reconf...)...)
		if err == nil {
			c.pools = append(slices.DeleteFunc(c.pools, poolClosed), p)
		}
		return p, err
	}
	settings := topology.Settings{
		Seeds:            cs.Hosts,
		ReplicaSet:       cs.ReplicaSet,
		DirectConnection: isTrue(cs.DirectConnection) || cfg.single && !isTrue(cs.LoadBalanced),
		LoadBalanced:     isTrue(cs.LoadBalanced),
	}
	c.settings = settings
	if cfg.shared != nil {
		if err := c.joinTopology(cfg, settings, newPool); err != nil {
			return nil, err
		}
		return c, nil
	}
	tcfg := topology.Config{
		Settings:               settings,
		ServerSelectionTimeout: durationOr(cs.ServerSelectionTimeout, topology.DefaultServerSelectionTimeout),
		MinHeartbeatFrequency:  cfg.minHeartbeat,
		NewPool:                newPool,
		// The monitors connect as the pools do, without authentication.
		Connection:         c.conns.forAddress,
		HeartbeatFrequency: c.heartbeat,
		MonitoringMode:     topology.MonitoringMode(cs.ServerMonitoringMode),
		EventHandler:       cfg.events,
		Logger:             cfg.logger,
	}
	topo, err := topology.New(tcfg)
	if err != nil {
		return nil, fmt.Errorf("mongopool: %s: %w", cs.Redacted(), err)
	}
	if cs.Scheme == connstring.SchemeMongoDBSRV {
		// The SRV records of a sharded cluster's name are looked up
		// again every minute, and mongoses come and go with them (the
		// poller stops itself for the other topologies).
		maxHosts := 0
		if cs.SRVMaxHosts != nil {
			maxHosts = *cs.SRVMaxHosts
		}
		if err := topo.StartSRVPolling(topology.SRVPolling{
			Resolver: r, Host: cs.SRVHost, ServiceName: cs.SRVServiceName,
			SRVMaxHosts: maxHosts, HeartbeatFrequency: c.heartbeat,
		}); err != nil {
			topo.Close()
			return nil, fmt.Errorf("mongopool: %s: %w", cs.Redacted(), err)
		}
	}
	c.topo = topo
	return c, nil
}

// Topology returns the client's topology: its current Description, its
// servers and their pools.
func (c *Client) Topology() *topology.Topology { return c.topo }

// Warnings returns what the connection string had that was ignored: see
// [Pool.Warnings].
func (c *Client) Warnings() []string { return slices.Clone(c.warnings) }

// CommandOption changes how one operation runs.
type CommandOption func(*operation)

// WithReadPreference selects the server of a Read, a RunCommand or a Do by
// rp rather than by the connection string's read preference (for Read) or
// the primary (for RunCommand and Do).
func WithReadPreference(rp topology.ReadPref) CommandOption {
	return func(o *operation) { o.readPref, o.hasReadPref = rp, true }
}

// WithServer runs a Do, a RunCommand or a Conn on the server at address
// (host:port as the topology knows it) rather than on one selected by read
// preference: where a server holds state a command needs (a cursor, a
// transaction pinned to a mongos). The selection waits for that server to be
// known and available, until it times out; a server the topology does not
// have is never selected.
func WithServer(address string) CommandOption {
	return func(o *operation) { o.sel = serverAt(address) }
}

// operation is one command the client runs, through its attempts.
type operation struct {
	kind opKind
	cmd  bson.Raw // with $db
	// crit are the selection's criteria as the selection log describes
	// them (see operationOf).
	crit topology.Criteria
	// plainWrite is a Write that cannot be a retryable write (see
	// retryableWriteCommand): it gets no txnNumber and is sent once.
	plainWrite bool
	// noSession: the command gets no implicit session (an unacknowledged
	// write, endSessions, a command with its own lsid). dirty: a network
	// error met the session, which the pool then lets go (the sessions
	// specification). keepSession: a cursor keeps the session past the
	// operation.
	noSession, dirty, keepSession bool
	// sessionInCmd: cmd already has the session's lsid (a cursor's
	// getMore, which builds its command itself).
	sessionInCmd bool
	// noReply: an unacknowledged write, sent with moreToCome; its reply
	// is {ok: 1}, as the command monitoring specification has it.
	noReply bool
	// explicit is the Session the operation runs in (WithSession), whose
	// server session it borrows.
	explicit *Session
	// sel, if set, selects the server instead of the read preference (a
	// cursor's getMore: see serverAt); servedBy is the server it ran on.
	sel      topology.Selector
	servedBy string
	// A cursor's getMore options: see WithBatchSize, WithMaxAwaitTime,
	// WithGetMoreComment.
	batchSize      int32
	maxAwait       time.Duration
	getMoreComment bson.RawValue
	readPref       topology.ReadPref
	hasReadPref    bool
	session        *serverSession // a retryable write's, once it has one
	txn            int64          // its txnNumber
	// tx is set on a command of a transaction (see Session.joinLocked).
	tx *txnCommand
	id int64 // the operation id of its command events
}

// RunCommand runs cmd (a document: bson.D, a map, a struct, bson.Raw) on
// database db, on the primary unless WithReadPreference says otherwise, and
// returns the reply; a reply with ok: 0 is returned as a *wire.CommandError.
// It is not retried, as a driver's runCommand is not, but after an overload
// error (see [WithMaxAdaptiveRetries]) when both retryReads and retryWrites
// are on.
func (c *Client) RunCommand(ctx context.Context, db string, cmd any, opts ...CommandOption) (bson.Raw, error) {
	return c.run(ctx, opCommand, db, cmd, opts)
}

// Read runs the read command cmd (find, aggregate without $out, count,
// distinct, listCollections...) on database db, on a server chosen by the
// connection string's read preference (or WithReadPreference's), and
// retries it once on a retryable error (a network error, a "not writable
// primary" or "node is recovering" error, a cleared pool...) when
// retryReads is on (the default), as the retryable reads specification
// says; with timeoutMS, as many times as the time allows (the client side
// operations timeout specification).
func (c *Client) Read(ctx context.Context, db string, cmd any, opts ...CommandOption) (bson.Raw, error) {
	return c.run(ctx, opRead, db, cmd, opts)
}

// Write runs the write command cmd (insert, update, delete, findAndModify,
// an aggregate with $out...) on database db, on the primary. When
// retryWrites is on (the default), the deployment supports it (a replica
// set, a sharded cluster, a load balancer) and the command can be one (an
// insert, an update or a delete of single documents, a findAndModify, with
// an acknowledged write concern), it is a retryable write: the command gets
// an lsid and a txnNumber, and a retryable error (a network error, an error
// the server labels RetryableWriteError, a cleared pool) has it sent again
// once (with timeoutMS, as many times as the time allows), to the primary
// of the moment, which runs it at most once. A server older than 4.4 labels
// nothing: the client labels its errors by their codes, as the retryable
// writes specification says. Other writes (an update with multi: true, a
// delete with limit: 0...) are sent once, as they are.
func (c *Client) Write(ctx context.Context, db string, cmd any, opts ...CommandOption) (bson.Raw, error) {
	return c.run(ctx, opWrite, db, cmd, opts)
}

func (c *Client) run(ctx context.Context, k opKind, db string, cmd any, opts []CommandOption) (bson.Raw, error) {
	raw, err := withDB(cmd, db)
	if err != nil {
		return nil, err
	}
	w0 := unacknowledged(raw) || (k == opWrite && c.defaultUnacknowledged(raw))
	o := &operation{kind: k, cmd: raw, plainWrite: k == opWrite && (w0 || !retryableWriteCommand(raw)), noSession: w0, noReply: k == opWrite && w0}
	c.numberOp(o)
	for _, opt := range opts {
		opt(o)
	}
	if !o.hasReadPref {
		o.readPref = topology.ReadPref{Mode: topology.ModePrimary}
		if k == opRead {
			o.readPref = c.criteria.ReadPref
		}
	}
	if k == opWrite && o.hasReadPref && o.readPref.Mode != topology.ModePrimary {
		return nil, errors.New("mongopool: a write runs on the primary: WithReadPreference cannot choose another server")
	}
	defer c.endSession(o)
	return c.execute(ctx, o)
}

// execute runs o, selecting a server for each attempt, by the retry rules
// of the retryable reads and writes and the client backpressure
// specifications.
func (c *Client) execute(ctx context.Context, o *operation) (bson.Raw, error) {
	if c.closed.Load() || !c.ops.enter() {
		return nil, topology.ErrClosed
	}
	defer c.ops.leave()
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if s := o.explicit; s != nil && o.tx == nil {
		s.mu.Lock()
		err := s.joinLocked(c, o)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	if o.tx != nil && c.topo.Description().Type == topology.LoadBalanced {
		return c.executePinned(ctx, o)
	}
	var deprioritized []string
	// A read or a write is retried once, and under timeoutMS as long as
	// time is left (the client side operations timeout specification);
	// an overload error caps the retries at maxAdaptiveRetries from then
	// on, whatever errors follow.
	allowed := 0
	switch {
	case o.tx != nil && !o.tx.commitOrAbort:
		// A command of a transaction is not retried (but after an
		// overload error): the transaction is.
	case o.tx != nil && c.timeout == 0:
		allowed = 1 // a commit or an abort, whatever retryWrites says
	case o.kind == opCommand:
	case c.timeout > 0:
		allowed = math.MaxInt
	default:
		allowed = 1
	}
	var prev error
	for attempt := 0; ; attempt++ {
		s, err := c.topo.SelectServer(ctx, c.selector(o, deprioritized), c.operationOf(o))
		if err != nil {
			if prev != nil {
				// A retry that finds no server reports what made it retry.
				return nil, prev
			}
			if o.tx != nil {
				err = transactionError(o, err, false, true)
				o.explicit.note(c, o, "", nil, err)
			}
			return nil, err
		}
		reply, broken, err := c.attempt(ctx, s, o)
		if o.tx != nil {
			err = transactionError(o, err, broken, false)
			o.explicit.note(c, o, s.Address(), reply, err)
		}
		if err == nil {
			o.servedBy = s.Address()
			return reply, nil
		}
		if prev != nil && pool.HasErrorLabel(err, labelNoWritesPerform) {
			err = prev // the retry wrote nothing: the first error tells more
		}
		retry, overload := c.retryClass(o, err, broken)
		if !retry {
			return nil, err
		}
		if overload {
			allowed = c.maxAdaptiveRetries
		}
		if attempt+1 > allowed {
			return nil, err
		}
		// A sharded cluster's retry goes to another mongos when there is
		// one, whatever the error; elsewhere only an overload error moves
		// it, and only with enableOverloadRetargeting: a replica set's
		// primaryPreferred read that failed on the primary is retried on
		// it, by its read preference (retryable reads and writes).
		if overload && c.retarget || c.topo.Description().Type == topology.Sharded {
			deprioritized = append(deprioritized, s.Address())
		}
		if overload && !sleepCtx(ctx, overloadBackoff(attempt+1, err)) {
			return nil, err
		}
		if o.tx != nil && o.tx.commitOrAbort {
			o.explicit.mu.Lock()
			o.explicit.retryTerminalLocked(o, overload)
			o.explicit.mu.Unlock()
		}
		prev = err
	}
}

// checkOut checks a connection out of the client's pool of s. A pool found
// paused asks for a check of its server, which makes it ready again once the
// server answers.
func (c *Client) checkOut(ctx context.Context, s *topology.Server) (*pool.Pool, *pool.Conn, error) {
	p := s.Pool()
	if c.set != nil {
		if p = c.set.Pool(s); p == nil {
			return nil, nil, c.setPoolMissing(s)
		}
	}
	pc, err := p.CheckOut(ctx)
	if err != nil && errors.Is(err, pool.ErrPoolCleared) {
		s.RequestCheck()
	}
	return p, pc, err
}

// attempt runs o once on s. broken reports whether the error broke the
// connection (a network error), which the retry rules tell apart.
func (c *Client) attempt(ctx context.Context, s *topology.Server, o *operation) (reply bson.Raw, broken bool, err error) {
	defer s.Done()
	p, pc, err := c.checkOut(ctx, s)
	if err != nil {
		// Nothing was sent: a cleared pool's error and the handshake's
		// retryable errors make a retryable write's retry.
		handshake := retryableHandshakeError(err)
		if (errors.Is(err, pool.ErrPoolCleared) || handshake) && o.kind == opWrite &&
			(c.retryWrites && !o.plainWrite || o.tx != nil && o.tx.commitOrAbort) {
			err = labelled(err, labelRetryableWrite)
		}
		return nil, handshake && isNetworkError(err), err
	}
	defer p.CheckIn(pc)
	conn := pc.Link().(*connection.Conn)
	reply, err = c.exchange(ctx, s, pc, conn, o)
	if err == nil && o.kind == opWrite {
		err = writeReplyError(reply)
	}
	if err != nil && o.kind == opWrite && o.txn != 0 && conn.Description().MaxWireVersion < 9 {
		labelPre44(err, conn.Description().IsMongos())
	}
	switch err.(type) {
	case *WriteConcernError, *WriteErrors:
		return nil, false, err
	}
	broken = conn.Err() != nil
	retryable := o.txn != 0 || o.tx != nil && o.tx.commitOrAbort // a commit or an abort is one whatever retryWrites says
	if broken && retryable && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		err = labelled(err, labelRetryableWrite) // a retryable write's network error
	}
	return reply, broken, err
}

// writeReplyError returns the error a write's successful reply reports:
// its write errors (with its writeConcernError), or its writeConcernError.
func writeReplyError(reply bson.Raw) error {
	wce, hasWCE := writeConcernErrorOf(reply)
	if we, ok := writeErrorsOf(reply, wce); ok {
		return we
	}
	if hasWCE {
		return wce
	}
	return nil
}

// exchange runs o's command once on conn, a connection of s's pool checked
// out as pc: prepared for s, told to the command event handler, its outcome
// given to the SDAM rules; a network error makes o's session dirty.
func (c *Client) exchange(ctx context.Context, s *topology.Server, pc *pool.Conn, conn *connection.Conn, o *operation) (bson.Raw, error) {
	cmd, err := c.prepare(ctx, s, conn, o)
	if err != nil {
		return nil, err
	}
	var started time.Time
	if c.commands != nil {
		started = c.commandStarted(s, pc, conn, o, cmd)
	}
	var reply bson.Raw
	if o.noReply && o.tx == nil {
		if err = conn.Send(ctx, cmd); err == nil {
			reply = okReply
		}
	} else {
		reply, err = conn.RoundTrip(ctx, cmd)
		c.noteTimes(o, reply, err)
	}
	if err != nil {
		if ie := pc.Err(); ie != nil {
			// A clear interrupted the connection under the command: its
			// retryable error says so better than the closed socket's.
			err = ie
		}
		if conn.Err() != nil && o.session != nil {
			o.dirty = true
		}
	}
	if c.commands != nil {
		c.commandDone(s, pc, conn, o, cmd, reply, err, time.Since(started))
	}
	c.observe(s, pc, conn, reply, err)
	return reply, err
}

// okReply is the reply of an unacknowledged write: {ok: 1}.
var okReply = bson.Raw(bsoncore.NewDocumentBuilder().AppendDouble("ok", 1).Build())

// numberOp gives o an operation id, for its command events and log
// messages, when someone listens and it has none yet.
func (c *Client) numberOp(o *operation) {
	if o.id == 0 && (c.commands != nil || c.logs) {
		o.id = c.opIDs.Add(1)
	}
}

// prepare returns the command of an attempt on s: with the read preference
// a mongos or a secondary needs, a retryable write's session and
// txnNumber, and timeoutMS's maxTimeMS.
func (c *Client) prepare(ctx context.Context, s *topology.Server, conn *connection.Conn, o *operation) (bson.Raw, error) {
	desc := c.topo.Description()
	sd, _ := desc.Server(s.Address())
	var buf [8]field // the most fields a command gets: no allocation
	fields := buf[:0]
	if rp, ok := readPrefField(desc.Type, sd.Type, o); ok {
		fields = append(fields, field{"$readPreference", docValue(rp)})
	}
	timeout, sessions := supportsSessions(desc, sd)
	if o.explicit != nil && o.session == nil {
		if !sessions {
			return nil, errors.New("mongopool: WithSession: the deployment does not support sessions")
		}
		ss, err := o.explicit.take(c, timeout)
		if err != nil {
			return nil, err
		}
		o.session = ss
	}
	if sessions && o.session == nil && !o.noSession {
		if _, err := o.cmd.LookupErr("lsid"); err == nil {
			// The caller runs its own session: not ours to retry.
			o.noSession = true
			if o.kind == opWrite {
				o.kind = opCommand
			}
		} else {
			o.session = c.sessions.get(timeout, time.Now())
		}
	}
	if o.session != nil && !o.sessionInCmd {
		fields = append(fields, field{"lsid", docValue(o.session.lsid)})
	}
	base := o.cmd
	after, causal := afterClusterTime(o)
	if o.tx != nil {
		fields = append(fields, field{"txnNumber", int64Value(o.tx.number)})
		if o.tx.first {
			fields = append(fields, field{"startTransaction", boolValue(true)})
		}
		fields = append(fields, field{"autocommit", boolValue(false)})
		if rc := o.tx.readConcern; o.tx.first && (rc != nil || causal) {
			if causal {
				rc = readConcernWith(rc, after)
			}
			fields = append(fields, field{"readConcern", docValue(rc)})
		}
	} else if causal {
		rc, _ := o.cmd.Lookup("readConcern").DocumentOK()
		if rc != nil {
			base = withoutKey(o.cmd, "readConcern")
		} else if o.kind == opRead {
			rc = c.readConcern
		}
		fields = append(fields, field{"readConcern", docValue(readConcernWith(rc, after))})
	}
	fields = c.concernFields(o, causal, fields)
	if ct := c.clusterTimeFor(o); ct != nil {
		fields = append(fields, field{"$clusterTime", docValue(ct)})
	}
	if o.tx == nil && o.session != nil {
		if o.kind == opWrite && c.retryWrites && !o.plainWrite && sd.Type != topology.Standalone {
			if o.txn == 0 {
				o.session.txn++
				o.txn = o.session.txn
			}
			fields = append(fields, field{"txnNumber", int64Value(o.txn)})
		}
	}
	if c.timeout > 0 {
		dl, _ := ctx.Deadline()
		remaining := time.Until(dl) - sd.MinRoundTripTime
		if remaining <= 0 {
			return nil, fmt.Errorf("mongopool: timeoutMS (%v) leaves no time for the command after the server's round trip time (%v): %w",
				c.timeout, sd.MinRoundTripTime, context.DeadlineExceeded)
		}
		fields = append(fields, field{"maxTimeMS", int64Value(max(1, remaining.Milliseconds()))})
	}
	if len(fields) == 0 {
		return base, nil
	}
	return withFields(base, fields...), nil
}

// defaultSessionTimeout is the session timeout assumed behind a load
// balancer: MongoDB's default logicalSessionTimeoutMinutes.
const defaultSessionTimeout = 30 * time.Minute

// supportsSessions reports whether commands on sd can carry a session, and
// the server's session timeout: the deployment has sessions (the
// topology's logicalSessionTimeoutMinutes, kept while a server is Unknown
// for a moment), and sd, if a server connected to directly, is known. It
// reads the topology's Description after selection, where sd may already be
// Unknown.
func supportsSessions(d topology.Description, sd topology.ServerDescription) (time.Duration, bool) {
	if d.Type == topology.LoadBalanced {
		// The load balancer is never checked: the servers behind it
		// have sessions, as the load balancer specification assumes.
		return defaultSessionTimeout, true
	}
	if d.LogicalSessionTimeoutMinutes == nil || d.Type == topology.Single && sd.Type == topology.ServerUnknown {
		// (A replica set member or a mongos selected a moment ago keeps
		// its session while marked Unknown: a write's retry needs it.)
		return 0, false
	}
	return time.Duration(*d.LogicalSessionTimeoutMinutes) * time.Minute, true
}

// readPrefField returns the $readPreference of o for a server of type st in
// a topology of type tt, as the server selection specification's "Passing
// read preference" says: a mongos or a load balancer gets the read
// preference unless it is primary; a server connected to directly, none if
// it is a standalone, else the read preference, primaryPreferred for
// primary, so that it answers even as a secondary; a replica set member,
// the read preference unless it is primary.
func readPrefField(tt topology.TopologyType, st topology.ServerType, o *operation) (bson.Raw, bool) {
	if o.kind == opWrite {
		return nil, false
	}
	if tt == topology.Single && st != topology.Mongos && st != topology.LoadBalancer {
		// A direct connection: a standalone gets no read preference;
		// another server the application's, primaryPreferred for
		// primary, so that it runs the command whatever its state.
		switch {
		case st == topology.Standalone:
			return nil, false
		case o.readPref.Mode == topology.ModePrimary:
			return readPrefDoc(topology.ReadPref{Mode: topology.ModePrimaryPreferred}), true
		}
		return readPrefDoc(o.readPref), true
	}
	if o.readPref.Mode == topology.ModePrimary {
		return nil, false
	}
	return readPrefDoc(o.readPref), true
}

// observe applies the SDAM error rules to the outcome of a command on pc.
func (c *Client) observe(s *topology.Server, pc *pool.Conn, conn *connection.Conn, reply bson.Raw, err error) {
	var svc *bson.ObjectID
	if id := pc.ServiceID(); !id.IsZero() {
		oid := bson.ObjectID(id)
		svc = &oid
	}
	if err == nil {
		if c.set != nil {
			c.set.ReplyReceived(s, pc.Generation(), svc, reply)
		} else {
			s.ReplyReceived(pc.Generation(), svc, reply)
		}
		return
	}
	if pc.Err() != nil {
		return // a clear interrupted the connection: the pool's doing
	}
	if c.set != nil {
		c.set.OperationFailed(s, pc.Generation(), svc, conn.Err() != nil, err)
	} else {
		s.OperationFailed(pc.Generation(), svc, conn.Err() != nil, err)
	}
}

// endSession gives the operation's session back to the pool, unless a
// cursor keeps it; the pool lets a dirty one go.
func (c *Client) endSession(o *operation) {
	if o.explicit != nil {
		// The Session's, which EndSession gives back.
		if o.dirty {
			o.explicit.markDirty()
		}
		o.session = nil
		return
	}
	if o.session == nil || o.keepSession {
		return
	}
	if o.dirty {
		c.sessions.discard(o.session)
	} else {
		c.sessions.put(o.session, time.Now())
	}
	o.session = nil
}

// Do selects a server (the primary, unless WithReadPreference says
// otherwise), checks a connection out of its pool, calls fn with it and
// checks it back in, whatever fn does. The error fn returns goes through the
// SDAM rules (a network error marks the server Unknown and clears its pool,
// for instance); it is not retried.
func (c *Client) Do(ctx context.Context, fn func(*connection.Conn) error, opts ...CommandOption) error {
	if c.closed.Load() || !c.ops.enter() {
		return topology.ErrClosed
	}
	defer c.ops.leave()
	// An operation of Do's ends with Do: it is reused, which spares a
	// proxy, that calls Do for every operation it relays, an allocation
	// each time.
	o, _ := c.doOps.Get().(*operation)
	if o == nil {
		o = new(operation)
	}
	*o = operation{kind: opCommand, readPref: topology.ReadPref{Mode: topology.ModePrimary}}
	defer func() {
		*o = operation{}
		c.doOps.Put(o)
	}()
	for _, opt := range opts {
		opt(o)
	}
	s, err := c.topo.SelectServer(ctx, c.selector(o, nil), c.operationOf(o))
	if err != nil {
		return err
	}
	defer s.Done()
	p, pc, err := c.checkOut(ctx, s)
	if err != nil {
		return err
	}
	defer p.CheckIn(pc)
	conn := pc.Link().(*connection.Conn)
	err = fn(conn)
	c.observe(s, pc, conn, nil, err)
	if err != nil {
		if ie := pc.Err(); ie != nil {
			err = ie // interrupted by a clear: see attempt
		}
	}
	return err
}

// Close ends the client's sessions on the server (best effort, bounded by
// a second), stops the monitors and closes every pool. It returns once the
// client's goroutines have ended, but for those delivering events: the event
// handlers get the events of the closing after Close returns (see Flush),
// and may call Close themselves.
//
// A client that shares another's topology (WithSharedTopology) closes its
// own pools only.
func (c *Client) Close() error {
	c.ops.close()
	if !c.closed.Swap(true) {
		if ids := c.sessions.drain(); len(ids) > 0 {
			c.endSessions(ids)
		}
		if c.commandEvents.Close() {
			c.commandEvents.Wake()
		}
	}
	if c.set != nil {
		return c.set.Close()
	}
	return c.topo.Close()
}

// Flush returns once every event handler of the client (topology, pools,
// commands) and its logger have had every event emitted before the call, or
// with ctx's error when ctx ends first. The events are delivered on
// goroutines of the client's, never on an operation's nor on the monitors':
// Flush is how a test, or a tool that writes the events out, knows it has
// them all. Called from an event handler, it waits until ctx ends, since the
// events it waits for come after the one being handled.
func (c *Client) Flush(ctx context.Context) error {
	if err := c.commandEvents.Wait(ctx); err != nil {
		return err
	}
	if c.set != nil {
		return c.set.Flush(ctx)
	}
	return c.topo.Flush(ctx)
}

// endSessions tells a server the client is done with its sessions, so that
// it frees them before they expire.
func (c *Client) endSessions(ids [][16]byte) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	arr := make(bson.A, len(ids))
	for i, id := range ids {
		arr[i] = lsidDoc(id)
	}
	o := &operation{kind: opCommand, readPref: topology.ReadPref{Mode: topology.ModePrimaryPreferred}, noSession: true}
	raw, err := withDB(bson.D{{Key: "endSessions", Value: arr}}, "admin")
	if err != nil {
		return
	}
	o.cmd = raw
	s, err := c.topo.SelectServer(ctx, c.selector(o, nil), c.operationOf(o))
	if err != nil {
		return
	}
	_, _, _ = c.attempt(ctx, s, o)
}
