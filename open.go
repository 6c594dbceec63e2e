package mongopool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/auth"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/pool"
)

// Pool is a ready connection pool to one MongoDB endpoint, with real
// connections.
type Pool struct {
	p  *pool.Pool
	cs *connstring.ConnString
}

// Open connects to the single endpoint of uri (a mongodb:// or mongodb+srv://
// connection string) and returns a ready pool configured by the URI's options:
// maxPoolSize, minPoolSize, maxIdleTimeMS, maxConnecting, waitQueueTimeoutMS,
// timeoutMS, connectTimeoutMS, socketTimeoutMS, the tls options,
// compressors, zlibCompressionLevel, appName, loadBalanced and the credential.
// opts come after the URI's and override them (event handlers, a logger...).
//
// Open establishes a first connection, under ctx, to check that the server is
// there and accepts the credential; the pool keeps it. A connection string
// that lists several hosts is an error: a pool serves one endpoint.
func Open(ctx context.Context, uri string, opts ...pool.Option) (*Pool, error) {
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
	p, err := pool.New(addr, NewConnector(cfg), append(poolOptions(cs), opts...)...)
	if err != nil {
		return nil, err
	}
	if err := p.Ready(); err != nil {
		p.Close()
		return nil, err
	}
	mp := &Pool{p: p, cs: cs}
	if _, err := mp.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		p.Close()
		return nil, fmt.Errorf("mongopool: cannot use the server at %s: %w", addr, err)
	}
	return mp, nil
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
// pool.Pool.Do.
func (p *Pool) Do(ctx context.Context, fn func(*connection.Conn) error) error {
	return p.p.Do(ctx, func(c *pool.Conn) error { return fn(c.Link().(*connection.Conn)) })
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
	err = p.Do(ctx, func(c *connection.Conn) error {
		reply, err = c.RoundTrip(ctx, raw)
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
	out = append(out, 0x02)                // string
	out = append(out, "$db"...)
	out = append(out, 0)
	n := int32(len(db) + 1)
	out = append(out, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	out = append(out, db...)
	out = append(out, 0, 0)
	l := int32(len(out))
	out[0], out[1], out[2], out[3] = byte(l), byte(l>>8), byte(l>>16), byte(l>>24)
	return out, nil
}

// Warnings returns what the connection string had that the URI
// specification says to report without failing: unknown options, invalid
// values that were ignored (the option keeps its default), repeated options.
func (p *Pool) Warnings() []string { return append([]string(nil), p.cs.Warnings...) }

// Pool returns the underlying pool, for CheckOut/CheckIn, Clear and Ready.
func (p *Pool) Pool() *pool.Pool { return p.p }

// Stats returns a snapshot of the pool: see pool.Pool.Stats.
func (p *Pool) Stats() pool.Stats { return p.p.Stats() }

// Address returns the endpoint.
func (p *Pool) Address() string { return p.p.Address() }

// Close closes the pool and its connections.
func (p *Pool) Close() error { return p.p.Close() }
