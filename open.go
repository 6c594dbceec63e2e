package mongopool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/auth"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/pool"
)

// Pool is a connection pool to one MongoDB endpoint, with real connections,
// and the part of server discovery and monitoring (SDAM) that a pool to a
// single server needs: see [New].
type Pool struct {
	p        *pool.Pool
	cs       *connstring.ConnString
	sdam     *sdam
	warnings []string // the connection string's, then New's own
}

// New parses uri (a mongodb:// or mongodb+srv:// connection string) and returns
// a ready pool to its single endpoint, configured by the URI's options:
// maxPoolSize, minPoolSize, maxIdleTimeMS, maxConnecting, waitQueueTimeoutMS,
// timeoutMS, connectTimeoutMS, socketTimeoutMS, heartbeatFrequencyMS, the tls
// options, compressors, zlibCompressionLevel, appName, loadBalanced,
// serverMonitoringMode ("poll" and "auto" poll; "stream" polls too, with a
// warning: the streaming protocol is not implemented yet) and the
// credential. opts come after the URI's and override them (event handlers, a
// logger...); establish-error handlers add to the pool's own. What the URI
// had that was ignored (an unknown option, an invalid value) is returned by
// [Pool.Warnings] and, when opts give a logger, logged at level Warn.
//
// New does not connect, as a driver's client constructor does not: the first
// check-out establishes the first connection (and minPoolSize connections are
// established in the background). A connection string that lists several hosts
// is an error: a pool serves one endpoint. The SRV and TXT lookups of a
// mongodb+srv URI are bounded by pool.DefaultConnectTimeout; use [Open] to
// bound them with a context.
//
// The pool follows the server discovery and monitoring (SDAM) rules for a
// single server. A monitor checks the server with a hello on a connection of
// its own, without authentication, every heartbeatFrequencyMS (default 10s;
// the first check a heartbeat after New), and sooner, but at most once every
// 500ms, when Do or RunCommand meets a paused pool. The server is marked
// Unknown, and the pool cleared and paused, when:
//
//   - a check fails (a timeout also interrupts the connections in use);
//   - establishing a connection fails in the handshake or in authentication
//     with an error that does not carry the SystemOverloadedError label
//     (network errors up to the end of the hello carry it: they may come
//     from an overloaded server, and the pool backs off instead);
//   - an operation run through Do or RunCommand meets a network error, or a
//     reply that breaks the protocol, on an established connection (not a
//     timeout: a slow operation is not a dead server);
//   - a reply says the server is shutting down (ShutdownInProgress,
//     InterruptedAtShutdown). Other "not writable primary" and "node is
//     recovering" errors ask the monitor for a check without clearing.
//
// While paused, check-outs fail at once with a retryable
// *pool.PoolClearedError, whose Cause says why, until a check succeeds and
// marks the pool ready. An error from a connection created before the last
// clear changes nothing. In load-balanced mode there is no monitor and the
// pool is never paused: an error after the hello clears the connections of
// that connection's service only, and one before or during the hello changes
// nothing, as the load-balancer specification says.
//
// A Clear made through [Pool.Pool] pauses the pool until Ready is called or
// the next successful check of the monitor.
func New(uri string, opts ...pool.Option) (*Pool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pool.DefaultConnectTimeout)
	defer cancel()
	return build(ctx, uri, opts)
}

// Open is [New] followed by a ping: it connects to the single endpoint of uri
// and returns a ready pool, or the error that kept the first connection from
// being established or the ping from succeeding. ctx bounds the resolution of
// a mongodb+srv URI, the first connection and the ping; the pool keeps the
// connection. See New for the options and for what an establishment error does
// to the pool.
func Open(ctx context.Context, uri string, opts ...pool.Option) (*Pool, error) {
	mp, err := build(ctx, uri, opts)
	if err != nil {
		return nil, err
	}
	if _, err := mp.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		mp.Close()
		return nil, fmt.Errorf("mongopool: cannot use the server at %s: %w", mp.Address(), err)
	}
	return mp, nil
}

// build is New under ctx.
func build(ctx context.Context, uri string, opts []pool.Option) (*Pool, error) {
	cs, err := connstring.ParseWithResolver(ctx, uri, net.DefaultResolver)
	if err != nil {
		return nil, err
	}
	if len(cs.Hosts) != 1 {
		return nil, fmt.Errorf("mongopool: a pool serves one endpoint, and %s lists %d hosts (%s): open one pool per host",
			cs.Redacted(), len(cs.Hosts), strings.Join(cs.Hosts, ", "))
	}
	addr := cs.Hosts[0]
	cfg, err := connectionConfig(cs, addr)
	if err != nil {
		return nil, err
	}
	s := newSDAM(cfg, cs)
	// The SDAM handler comes first so that a user's handler sees the pool
	// as SDAM left it.
	all := append(poolOptions(cs), pool.WithEstablishErrorHandler(s.establishFailed))
	p, err := pool.New(addr, NewConnector(cfg), append(all, opts...)...)
	if err != nil {
		s.close()
		return nil, err
	}
	warnings := append(slices.Clone(cs.Warnings), optionWarnings(cs)...)
	logWarnings(p.Logger(), cs, warnings)
	s.start(p) // before Ready: no establishment can fail before it
	if err := p.Ready(); err != nil {
		s.close()
		p.Close()
		return nil, err
	}
	return &Pool{p: p, cs: cs, sdam: s, warnings: warnings}, nil
}

// optionWarnings tells of the valid options the pool does not honour as
// asked.
func optionWarnings(cs *connstring.ConnString) []string {
	var w []string
	if cs.ServerMonitoringMode == "stream" {
		w = append(w, "serverMonitoringMode=stream: the monitor polls, the streaming protocol is not implemented yet")
	}
	return w
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

// connectionConfig turns the connection string into how to establish
// connections to addr.
func connectionConfig(cs *connstring.ConnString, addr string) (connection.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr // a Unix socket
	}
	tlsCfg, err := tlsConfig(cs, host)
	if err != nil {
		return connection.Config{}, err
	}
	cfg := connection.Config{
		Address:        addr,
		ConnectTimeout: durationOr(cs.ConnectTimeout, pool.DefaultConnectTimeout),
		SocketTimeout:  durationOr(cs.SocketTimeout, 0),
		TLS:            tlsCfg,
		Handshake: handshake.Options{
			AppName:      cs.AppName,
			Compressors:  cs.Compressors,
			LoadBalanced: isTrue(cs.LoadBalanced),
		},
		ZlibLevel: -1,
	}
	if cs.ZlibCompressionLevel != nil {
		cfg.ZlibLevel = *cs.ZlibCompressionLevel
	}
	if cs.AuthConfigured {
		a, err := auth.New(auth.Credential{
			Source:      cs.ResolvedAuthSource(),
			Username:    cs.Username,
			Password:    cs.Password,
			PasswordSet: cs.PasswordSet,
			Mechanism:   cs.AuthMechanism,
			Props:       cs.AuthMechanismProperties,
		})
		if err != nil {
			return connection.Config{}, err
		}
		cfg.Auth = a
	}
	return cfg, nil
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

// Do checks a connection out, calls fn with it and checks it back in: see
// pool.Pool.Do. The error fn returns goes through the SDAM rules (see New): a
// network error marks the server Unknown and clears the pool, for instance.
// A check-out that finds the pool paused fails with a retryable
// *pool.PoolClearedError and asks the monitor to check the server now.
func (p *Pool) Do(ctx context.Context, fn func(*connection.Conn) error) error {
	return p.do(ctx, func(c *pool.Conn, conn *connection.Conn) error { return fn(conn) })
}

// do is Do with the pool's connection at hand too.
func (p *Pool) do(ctx context.Context, fn func(*pool.Conn, *connection.Conn) error) error {
	err := p.p.Do(ctx, func(c *pool.Conn) error {
		conn := c.Link().(*connection.Conn)
		err := fn(c, conn)
		if err != nil {
			p.sdam.operationFailed(c, conn, err)
		}
		return err
	})
	if err != nil && errors.Is(err, pool.ErrPoolCleared) {
		p.sdam.requestCheck()
	}
	return err
}

// RunCommand runs cmd (a document: bson.D, a map, a struct, bson.Raw) on
// database db through a pooled connection and returns the reply. A reply with
// ok: 0 is returned as a *wire.CommandError.
func (p *Pool) RunCommand(ctx context.Context, db string, cmd any) (bson.Raw, error) {
	raw, err := withDB(cmd, db)
	if err != nil {
		return nil, err
	}
	var reply bson.Raw
	err = p.do(ctx, func(c *pool.Conn, conn *connection.Conn) error {
		reply, err = conn.RoundTrip(ctx, raw)
		if err == nil {
			p.sdam.replyReceived(c, reply)
		}
		return err
	})
	return reply, err
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
// values that were ignored (the option keeps its default), repeated options;
// and the valid options the pool does not honour as asked
// (serverMonitoringMode=stream: the monitor polls).
func (p *Pool) Warnings() []string { return slices.Clone(p.warnings) }

// Pool returns the underlying pool, for CheckOut/CheckIn, Clear and Ready.
func (p *Pool) Pool() *pool.Pool { return p.p }

// Stats returns a snapshot of the pool: see pool.Pool.Stats.
func (p *Pool) Stats() pool.Stats { return p.p.Stats() }

// Address returns the endpoint.
func (p *Pool) Address() string { return p.p.Address() }

// Close stops the monitor of the server, if one runs, and closes the pool and
// its connections. Close the pool through this method rather than through
// [Pool.Pool], so that no clear of the pool races with its closing. Like
// pool.Pool.Close, it may be called from an event handler.
func (p *Pool) Close() error {
	p.sdam.close()
	return p.p.Close()
}

// Shutdown is Close that first lets the connections checked out come back,
// until ctx ends: see pool.Pool.Shutdown.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.sdam.close()
	return p.p.Shutdown(ctx)
}

// Warm establishes connections up to minPoolSize, or target if above 0, and
// returns once they are established, telling progress (if not nil) as they
// are: see pool.Pool.Warm.
func (p *Pool) Warm(ctx context.Context, target int, progress func(pool.WarmProgress)) error {
	return p.p.Warm(ctx, target, progress)
}
