package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/puddle/v2"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/address"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/mnet"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/session"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/pool"
)

// Pool is one of the pools under test, reduced to what the shapes do with
// it. The connection travels as an any holding a pointer, which costs no
// allocation, so that the harness adds the same few nanoseconds to every
// pool and nothing to their allocation counts.
type Pool interface {
	Get(ctx context.Context) (any, error)
	Put(c any)
	// ID returns the pool's id of a connection it handed out, the
	// ConnectionID of its events.
	ID(c any) int64
	// Flush returns once the event handler has had every event the pool
	// emitted before the call. mongopool delivers its events on a
	// goroutine of its own, after the calls that caused them may have
	// returned; the official pool calls its handler inside those calls, on
	// the goroutine that makes the change, and has nothing to wait for.
	Flush(ctx context.Context) error
	// Close closes the pool; mongopool's also waits for the delivery of
	// its events, so that none of one pool's events is still being
	// delivered while the next pool is measured.
	Close()
}

// Kind names a pool implementation.
type Kind string

// The pools compared.
const (
	Mongopool Kind = "mongopool"
	Official  Kind = "official"
	Puddle    Kind = "puddle"
)

// Config is what a shape asks of a pool; each pool maps it onto its own
// options, the same values for all.
type Config struct {
	Addr          string // the server
	MaxPoolSize   int
	MinPoolSize   int
	MaxConnecting int // 0: the default of 2

	// Events, if not nil, receives every pool event in a common form, on
	// whatever goroutine the pool delivers it (see Pool.Flush).
	Events func(Ev)
	// Established, if not nil, is told of each connection whose
	// establishment (connection, handshake) has just succeeded, on the
	// goroutine that established it, before the pool hands it out:
	// mongopool's through its Connector, which returns then; the official
	// pool's through its ConnectionReady event, which it emits there.
	// Unlike an event of mongopool's, the call comes when the connection
	// is ready, not when a delivery goroutine gets to it.
	Established func(id int64)
	// DebugLog writes the pool's debug log messages, formatted by a
	// slog.TextHandler into io.Discard, for both drivers.
	DebugLog bool
	// MaintainInterval is the official pool's maintenance tick (0: its
	// default of 10 s). mongopool's maintenance runs when it is needed, so
	// it has no equivalent here.
	MaintainInterval time.Duration
}

// EvType is an event type both drivers emit, by its specification name.
type EvType uint8

// The events the shapes look at.
const (
	EvOther EvType = iota
	EvCheckOutStarted
	EvCheckedOut
	EvCheckedIn
	EvCreated
	EvReady
	EvClosed
)

// Ev is a pool event in the common form.
type Ev struct {
	Type EvType
	Conn int64
}

func discardLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// NewPool returns a pool of the given kind, ready, with cfg's options.
// Puddle's resources are trivial values; it ignores Addr, the events and the
// log.
func NewPool(kind Kind, cfg Config) (Pool, error) {
	switch kind {
	case Mongopool:
		return newMongopool(cfg)
	case Official:
		return newOfficial(cfg)
	case Puddle:
		return newPuddle(cfg)
	}
	return nil, fmt.Errorf("bench: unknown pool kind %q", kind)
}

// mongopoolPool is mongopool's pool with the real connector.
type mongopoolPool struct{ p *pool.Pool }

func newMongopool(cfg Config) (*mongopoolPool, error) {
	opts := []pool.Option{pool.WithMaxPoolSize(cfg.MaxPoolSize), pool.WithMinPoolSize(cfg.MinPoolSize)}
	if cfg.MaxConnecting > 0 {
		opts = append(opts, pool.WithMaxConnecting(cfg.MaxConnecting))
	}
	if h := cfg.Events; h != nil {
		opts = append(opts, pool.WithEventHandler(func(e pool.Event) { h(Ev{mongopoolEvTypes[e.Type], e.ConnectionID}) }))
	}
	if cfg.DebugLog {
		opts = append(opts, pool.WithLogger(discardLogger()))
	}
	var conn pool.Connector = mongopool.NewConnector(connection.Config{Address: cfg.Addr})
	if est := cfg.Established; est != nil {
		inner := conn
		conn = pool.ConnectorFunc(func(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
			l, err := inner.Connect(ctx, a)
			if err == nil && l != nil {
				est(a.ConnectionID())
			}
			return l, err
		})
	}
	p, err := pool.New(cfg.Addr, conn, opts...)
	if err != nil {
		return nil, err
	}
	if err := p.Ready(); err != nil {
		p.Close()
		return nil, err
	}
	return &mongopoolPool{p}, nil
}

// mongopoolEvTypes maps mongopool's event types to the common form, by their
// specification names (pool.EventType's String), so that one list of names,
// evTypeOf's, serves both drivers. Indexed by a uint8, it needs no bounds
// check on the event path.
var mongopoolEvTypes = func() (m [256]EvType) {
	for t := range m {
		m[t] = evTypeOf(pool.EventType(t).String())
	}
	return m
}()

func (m *mongopoolPool) Get(ctx context.Context) (any, error) { return m.p.CheckOut(ctx) }
func (m *mongopoolPool) Put(c any)                            { m.p.CheckIn(c.(*pool.Conn)) }
func (m *mongopoolPool) ID(c any) int64                       { return c.(*pool.Conn).ID() }
func (m *mongopoolPool) Flush(ctx context.Context) error      { return m.p.Flush(ctx) }

// Close shuts the pool down: unlike its Close, Shutdown also waits for the
// delivery of the closing's events.
func (m *mongopoolPool) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.p.Shutdown(ctx)
}

// officialPool is the official driver's pool, driven through its server type
// as a mongo.Client would, with heartbeats pushed out of the way.
type officialPool struct{ s *topology.Server }

func newOfficial(cfg Config) (*officialPool, error) {
	co := options.Client().SetHosts([]string{cfg.Addr}).
		SetMaxPoolSize(uint64(cfg.MaxPoolSize)).
		SetMinPoolSize(uint64(cfg.MinPoolSize)).
		SetHeartbeatInterval(time.Hour)
	if cfg.MaxConnecting > 0 {
		co.SetMaxConnecting(uint64(cfg.MaxConnecting))
	}
	if cfg.DebugLog {
		co.SetLoggerOptions(options.Logger().
			SetSink(slogSink{discardLogger()}).
			SetComponentLevel(options.LogComponentConnection, options.LogLevelDebug))
	}
	tc, err := topology.NewConfig(co, new(session.ClusterClock))
	if err != nil {
		return nil, err
	}
	sopts := append([]topology.ServerOption(nil), tc.ServerOpts...)
	if h, est := cfg.Events, cfg.Established; h != nil || est != nil {
		mon := &event.PoolMonitor{Event: func(e *event.PoolEvent) {
			if est != nil && e.Type == event.ConnectionReady {
				est(int64(e.ConnectionID))
			}
			if h != nil {
				h(Ev{evTypeOf(e.Type), int64(e.ConnectionID)})
			}
		}}
		sopts = append(sopts, topology.WithConnectionPoolMonitor(func(*event.PoolMonitor) *event.PoolMonitor { return mon }))
	}
	if d := cfg.MaintainInterval; d > 0 {
		sopts = append(sopts, topology.WithConnectionPoolMaintainInterval(func(time.Duration) time.Duration { return d }))
	}
	s := topology.NewServer(address.Address(cfg.Addr), bson.NewObjectID(), tc.ConnectTimeout, sopts...)
	if err := s.Connect(nil); err != nil {
		return nil, err
	}
	return &officialPool{s}, nil
}

// evTypeOf returns the common form of an event type by its specification
// name, which is the official driver's event type and mongopool's String.
func evTypeOf(name string) EvType {
	switch name {
	case event.ConnectionCheckOutStarted:
		return EvCheckOutStarted
	case event.ConnectionCheckedOut:
		return EvCheckedOut
	case event.ConnectionCheckedIn:
		return EvCheckedIn
	case event.ConnectionCreated:
		return EvCreated
	case event.ConnectionReady:
		return EvReady
	case event.ConnectionClosed:
		return EvClosed
	}
	return EvOther
}

func (o *officialPool) Get(ctx context.Context) (any, error) { return o.s.Connection(ctx) }
func (o *officialPool) Put(c any)                            { c.(*mnet.Connection).Close() }
func (o *officialPool) ID(c any) int64                       { return c.(*mnet.Connection).DriverConnectionID() }
func (o *officialPool) Flush(context.Context) error          { return nil }
func (o *officialPool) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o.s.Disconnect(ctx)
}

// slogSink adapts a slog.Logger to the official driver's log sink, so that
// both drivers' debug messages are formatted by the same handler.
type slogSink struct{ l *slog.Logger }

func (s slogSink) Info(level int, msg string, kv ...any) {
	s.l.Log(context.Background(), slog.LevelDebug, msg, kv...)
}

func (s slogSink) Error(err error, msg string, kv ...any) {
	s.l.Log(context.Background(), slog.LevelError, msg, append(kv, "error", err)...)
}

// puddlePool is jackc/puddle with a trivial resource: what a generic Go pool
// costs when establishing is free and nothing is checked.
type puddlePool struct{ p *puddle.Pool[int] }

func newPuddle(cfg Config) (*puddlePool, error) {
	p, err := puddle.NewPool(&puddle.Config[int]{
		Constructor: func(context.Context) (int, error) { return 1, nil },
		Destructor:  func(int) {},
		MaxSize:     int32(cfg.MaxPoolSize),
	})
	if err != nil {
		return nil, err
	}
	return &puddlePool{p}, nil
}

func (p *puddlePool) Get(ctx context.Context) (any, error) { return p.p.Acquire(ctx) }
func (p *puddlePool) Put(c any)                            { c.(*puddle.Resource[int]).Release() }
func (p *puddlePool) ID(any) int64                         { return 0 }
func (p *puddlePool) Flush(context.Context) error          { return nil }
func (p *puddlePool) Close()                               { p.p.Close() }
