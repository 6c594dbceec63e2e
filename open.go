package mongopool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// Pool is a client of a single MongoDB endpoint with its connection pool in
// hand: a [Client] of a Single topology (directConnection, or loadBalanced
// for a load balancer), for programs that want one server and its pool,
// CheckOut and CheckIn included. See [New].
type Pool struct {
	c       *Client
	p       *pool.Pool
	address string
}

// New parses uri (a mongodb:// or mongodb+srv:// connection string with one
// host) and returns a Pool of that endpoint, configured by the URI's options
// as [NewClient] is: maxPoolSize, minPoolSize, maxIdleTimeMS, maxConnecting,
// waitQueueTimeoutMS, timeoutMS, connectTimeoutMS, socketTimeoutMS,
// heartbeatFrequencyMS, serverMonitoringMode, serverSelectionTimeoutMS, the
// tls options, compressors, zlibCompressionLevel, appName, loadBalanced,
// replicaSet (the name the server must report) and the credential. opts
// come after the URI's pool options and override them (event handlers, a
// logger...); establish-error handlers add to the topology's own. What the
// URI had that was ignored (an unknown option, an invalid value) is returned
// by [Pool.Warnings] and, when opts give a logger, logged at level Warn.
//
// The client talks to the one server whatever it is (the Single topology of
// directConnection), or to the load balancer with loadBalanced. New does
// not wait for the server: the monitor starts checking it at once, on a
// connection of its own, and the pool, which exists from the start, is
// paused until that check finds the server. Do and RunCommand wait for it,
// up to serverSelectionTimeoutMS (30s by default); a CheckOut through
// [Pool.Pool] before then fails with a retryable *pool.PoolClearedError. A
// connection string that lists several hosts is an error: use [NewClient].
// The SRV and TXT lookups of a mongodb+srv URI are bounded by
// pool.DefaultConnectTimeout; use [Open] to bound them with a context.
//
// The server discovery and monitoring rules apply as they do for any
// Client: the server is marked Unknown, and the pool cleared and paused,
// when a check fails (a timeout also interrupts the connections in use);
// when establishing a connection fails in the handshake or in
// authentication with an error that does not carry the
// SystemOverloadedError label; when an operation run through Do or
// RunCommand meets a network error, or a reply that breaks the protocol (not
// a timeout: a slow operation is not a dead server); and when a reply says
// the server is shutting down. Other "not writable primary" and "node is
// recovering" errors ask the monitor for a check without clearing. While
// the pool is paused, check-outs fail at once with a retryable
// *pool.PoolClearedError, whose Cause says why, and the monitor is asked
// for a check, which marks the pool ready again once the server answers.
// In load-balanced mode there is no monitor and the pool is never paused:
// an error after the hello clears the connections of that connection's
// service only.
//
// A Clear made through [Pool.Pool] pauses the pool until Ready is called or
// the next successful check of the monitor.
func New(uri string, opts ...pool.Option) (*Pool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pool.DefaultConnectTimeout)
	defer cancel()
	return build(ctx, uri, opts, nil)
}

// Open is [New] followed by a ping: it returns once the server answers, or
// with the error that kept the ping from succeeding (the server selection
// error, with the server's last error, when the server was not found). ctx
// bounds the resolution of a mongodb+srv URI, the wait for the server and
// the ping; the pool keeps the connection.
func Open(ctx context.Context, uri string, opts ...pool.Option) (*Pool, error) {
	mp, err := build(ctx, uri, opts, nil)
	if err != nil {
		return nil, err
	}
	if _, err := mp.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		mp.Close()
		return nil, fmt.Errorf("mongopool: cannot use the server at %s: %w", mp.Address(), err)
	}
	return mp, nil
}

// build is New under ctx, with the client options more.
func build(ctx context.Context, uri string, opts []pool.Option, more []ClientOption) (*Pool, error) {
	c, err := newClient(ctx, uri, append([]ClientOption{WithPoolOptions(opts...), singleServer()}, more...))
	if err != nil {
		return nil, err
	}
	address := c.cs.Hosts[0]
	s, ok := c.topo.Server(address)
	if !ok {
		// The topology makes the pool of its one server at once: only
		// the pool's options can have kept it from doing so.
		err := c.topo.Err()
		c.Close()
		if err == nil {
			err = fmt.Errorf("mongopool: the pool of %s was not made", address)
		}
		return nil, err
	}
	p := s.Pool()
	logWarnings(p.Logger(), c.cs, c.warnings)
	return &Pool{c: c, p: p, address: address}, nil
}

// logWarnings logs what the connection string had that was ignored, once,
// when the pool is built: an unknown option or an invalid value that goes
// unnoticed otherwise is how a misconfigured pool goes to production.
func logWarnings(l *slog.Logger, cs *connstring.ConnString, warnings []string) {
	if l == nil {
		return
	}
	for _, w := range warnings {
		l.LogAttrs(context.Background(), slog.LevelWarn, "mongopool: connection string: "+w,
			slog.String("uri", cs.Redacted()))
	}
}

// poolOptions turns the pool options the connection string sets into the
// pool's; the ones it does not set keep the specification's defaults.
func poolOptions(cs *connstring.ConnString) []pool.Option {
	var o []pool.Option
	if v := cs.MaxPoolSize; v != nil {
		o = append(o, pool.WithMaxPoolSize(*v))
	}
	if v := cs.MinPoolSize; v != nil {
		o = append(o, pool.WithMinPoolSize(*v))
	}
	if v := cs.MaxConnecting; v != nil {
		o = append(o, pool.WithMaxConnecting(*v))
	}
	if v := cs.MaxIdleTime; v != nil {
		o = append(o, pool.WithMaxIdleTime(*v))
	}
	if v := cs.WaitQueueTimeout; v != nil {
		o = append(o, pool.WithWaitQueueTimeout(*v))
	}
	if v := cs.Timeout; v != nil {
		o = append(o, pool.WithTimeout(*v))
	}
	if v := cs.ConnectTimeout; v != nil {
		o = append(o, pool.WithConnectTimeout(*v))
	}
	if isTrue(cs.LoadBalanced) {
		o = append(o, pool.WithLoadBalanced(true))
	}
	return o
}

func durationOr(d *time.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return *d
}

// Do waits for the server (see [New]), checks a connection out, calls fn
// with it and checks it back in: see [Client.Do]. The error fn returns goes
// through the SDAM rules (a network error marks the server Unknown and
// clears the pool, for instance). A check-out that finds the pool paused
// fails with a retryable *pool.PoolClearedError and asks the monitor to check
// the server now.
func (p *Pool) Do(ctx context.Context, fn func(*connection.Conn) error) error {
	return p.c.Do(ctx, fn)
}

// RunCommand runs cmd (a document: bson.D, a map, a struct, bson.Raw) on
// database db through a pooled connection and returns the reply: see
// [Client.RunCommand]. A reply with ok: 0 is returned as a
// *wire.CommandError.
func (p *Pool) RunCommand(ctx context.Context, db string, cmd any) (bson.Raw, error) {
	return p.c.RunCommand(ctx, db, cmd)
}

// withDB marshals cmd and appends the "$db" field OP_MSG commands carry.
func withDB(cmd any, db string) (bson.Raw, error) {
	var raw []byte
	switch c := cmd.(type) {
	case bson.Raw:
		raw = c
	case []byte:
		raw = c
	default:
		var err error
		if raw, err = bson.Marshal(cmd); err != nil {
			return nil, fmt.Errorf("mongopool: the command is not a document: %w", err)
		}
	}
	if err := bson.Raw(raw).Validate(); err != nil || len(raw) < 5 {
		return nil, errors.New("mongopool: the command is not a valid BSON document")
	}
	if _, err := bson.Raw(raw).LookupErr("$db"); err == nil {
		return raw, nil
	}
	out := make([]byte, 0, len(raw)+len(db)+10)
	out = append(out, raw[:len(raw)-1]...) // without the terminating 0
	out = bsoncore.AppendStringElement(out, "$db", db)
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out))), nil
}

// Warnings returns what the connection string had that the URI
// specification says to report without failing: unknown options, invalid
// values that were ignored (the option keeps its default), repeated options.
func (p *Pool) Warnings() []string { return p.c.Warnings() }

// Pool returns the underlying pool, for CheckOut/CheckIn, Clear and Ready.
func (p *Pool) Pool() *pool.Pool { return p.p }

// Client returns the client of the pool's server, for what a Client does
// beyond a Pool (its topology, its events, Read and Write with retries).
func (p *Pool) Client() *Client { return p.c }

// Stats returns a snapshot of the pool: see pool.Pool.Stats.
func (p *Pool) Stats() pool.Stats { return p.p.Stats() }

// Address returns the endpoint.
func (p *Pool) Address() string { return p.address }

// Close stops the monitor of the server and closes the pool and its
// connections: see [Client.Close]. It may be called from an event handler.
func (p *Pool) Close() error { return p.c.Close() }

// Shutdown is Close that first lets the operations under way (Do,
// RunCommand) end, and the connections checked out of [Pool.Pool] come back,
// until ctx ends: then those still in use are closed under their users, and
// Shutdown returns an error wrapping ctx's. It waits for the event handlers
// too: see [Client.Shutdown] and pool.Pool.Shutdown.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.c.ops.close()
	if err := p.c.ops.wait(ctx); err != nil {
		return p.c.Shutdown(ctx) // interrupts them, and says how many there were
	}
	err := p.p.Shutdown(ctx)
	if cerr := p.c.Shutdown(ctx); err == nil {
		err = cerr
	}
	return err
}

// Flush returns once the event handlers have had every event so far: see
// [Client.Flush].
func (p *Pool) Flush(ctx context.Context) error { return p.c.Flush(ctx) }

// Warm waits for the server (see [New]), then establishes connections up to
// minPoolSize, or target if above 0, and returns once they are established,
// telling progress (if not nil) as they are: see pool.Pool.Warm.
func (p *Pool) Warm(ctx context.Context, target int, progress func(pool.WarmProgress)) error {
	s, err := p.c.topo.SelectServer(ctx, anyServer)
	if err != nil {
		return err
	}
	s.Done()
	return p.p.Warm(ctx, target, progress)
}

// anyServer selects whatever server is available.
func anyServer(d topology.Description, dst []topology.ServerDescription) ([]topology.ServerDescription, error) {
	return d.SelectCandidates(topology.Criteria{ReadPref: topology.ReadPref{Mode: topology.ModeNearest}}, dst)
}
