package otelmetrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mongopool/mongopool/pool"
)

// ScopeName is the instrumentation scope of the metrics: the name to give
// MeterProvider.Meter for [Metrics.Register], and the scope of the histograms
// [Metrics.Produce] returns.
const ScopeName = "github.com/mongopool/mongopool/metrics/otel"

// The names, attributes and units of the semantic conventions for database
// client connection pools.
const (
	metricCount           = "db.client.connection.count"
	metricIdleMax         = "db.client.connection.idle.max"
	metricIdleMin         = "db.client.connection.idle.min"
	metricMax             = "db.client.connection.max"
	metricPendingRequests = "db.client.connection.pending_requests"
	metricTimeouts        = "db.client.connection.timeouts"
	metricCreateTime      = "db.client.connection.create_time"
	metricWaitTime        = "db.client.connection.wait_time"
	metricUseTime         = "db.client.connection.use_time"

	attrPoolName = attribute.Key("db.client.connection.pool.name")
	attrState    = attribute.Key("db.client.connection.state")

	stateIdle = "idle"
	stateUsed = "used"

	unitConnection = "{connection}"
	unitRequest    = "{request}"
	unitTimeout    = "{timeout}"
	unitSeconds    = "s"
)

// Metrics reports the metrics of a set of pools. Its zero value is not
// usable: make one with [New]. It is safe for concurrent use; pools may be
// added and removed while metrics are being collected.
type Metrics struct {
	mu    sync.Mutex
	pools []*member // in the order they were added
}

// member is one reported pool, with its attribute sets built once.
type member struct {
	pool  *pool.Pool
	name  string
	attrs attribute.Set // pool name
	idle  attribute.Set // pool name, state idle
	used  attribute.Set // pool name, state used
	start time.Time     // when it was added: the start of its cumulative histograms
}

// New returns a Metrics that reports no pool yet.
func New() *Metrics { return &Metrics{} }

// Add reports p under the name given, its db.client.connection.pool.name.
// An empty name stands for the pool's address ("host:port"), which is what
// the semantic conventions ask for when a pool has no name of its own (a
// pool serves one server and no particular database). Names must be unique
// among the pools of m: two pools to the same server need names.
//
// The pool stays reported, closed or not, until [Metrics.Remove].
func (m *Metrics) Add(p *pool.Pool, name string) error {
	if p == nil {
		return errors.New("otelmetrics: Add of a nil pool")
	}
	if name == "" {
		name = p.Address()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.pools {
		if o.pool == p {
			return fmt.Errorf("otelmetrics: the pool of %s is already reported, as %q", p.Address(), o.name)
		}
		if o.name == name {
			return fmt.Errorf("otelmetrics: a pool named %q is already reported: give the pool of %s another name", name, p.Address())
		}
	}
	// A fresh slice rather than an append in place: collections iterate over
	// the slice they took under the lock, without it.
	m.pools = append(slices.Clip(m.pools), &member{
		pool:  p,
		name:  name,
		attrs: attribute.NewSet(attrPoolName.String(name)),
		idle:  attribute.NewSet(attrPoolName.String(name), attrState.String(stateIdle)),
		used:  attribute.NewSet(attrPoolName.String(name), attrState.String(stateUsed)),
		start: time.Now(),
	})
	return nil
}

// Remove stops reporting p; it reports whether p was reported. Remove a pool
// when it is closed for good, or its last values are reported for ever.
func (m *Metrics) Remove(p *pool.Pool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.pools, func(o *member) bool { return o.pool == p })
	if i < 0 {
		return false
	}
	m.pools = slices.Concat(m.pools[:i], m.pools[i+1:])
	return true
}

// members returns the pools reported now. The slice is never modified
// afterwards: Add and Remove replace it.
func (m *Metrics) members() []*member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pools
}

// Register creates the counts and gauges of the semantic conventions as
// asynchronous instruments on meter (name it [ScopeName]), and registers a
// callback that observes them from each pool's [pool.Pool.Stats] at every
// collection; the package documentation says what each one reports. Several
// meters may be registered. Unregister the returned registration to stop
// observing.
func (m *Metrics) Register(meter metric.Meter) (metric.Registration, error) {
	count, err1 := meter.Int64ObservableUpDownCounter(metricCount,
		metric.WithUnit(unitConnection),
		metric.WithDescription("The number of connections in the state the db.client.connection.state attribute gives: idle in the pool, or used (checked out)."))
	idleMax, err2 := meter.Int64ObservableUpDownCounter(metricIdleMax,
		metric.WithUnit(unitConnection),
		metric.WithDescription("The most idle connections the pool may keep: its maxPoolSize."))
	idleMin, err3 := meter.Int64ObservableUpDownCounter(metricIdleMin,
		metric.WithUnit(unitConnection),
		metric.WithDescription("The connections the pool keeps established, idle or in use: its minPoolSize."))
	maxConns, err4 := meter.Int64ObservableUpDownCounter(metricMax,
		metric.WithUnit(unitConnection),
		metric.WithDescription("The most connections the pool may have open or being established: its maxPoolSize."))
	pending, err5 := meter.Int64ObservableUpDownCounter(metricPendingRequests,
		metric.WithUnit(unitRequest),
		metric.WithDescription("The check-outs waiting for a connection now."))
	timeouts, err6 := meter.Int64ObservableCounter(metricTimeouts,
		metric.WithUnit(unitTimeout),
		metric.WithDescription("The check-outs that ended without a connection because a time limit or their context ran out."))
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return nil, fmt.Errorf("otelmetrics: creating the instruments: %w", err)
	}

	observe := func(_ context.Context, o metric.Observer) error {
		for _, mb := range m.members() {
			s := mb.pool.Stats()
			o.ObserveInt64(count, int64(s.Available), metric.WithAttributeSet(mb.idle))
			o.ObserveInt64(count, int64(s.InUse), metric.WithAttributeSet(mb.used))
			attrs := metric.WithAttributeSet(mb.attrs)
			if s.MaxPoolSize > 0 {
				o.ObserveInt64(maxConns, int64(s.MaxPoolSize), attrs)
				o.ObserveInt64(idleMax, int64(s.MaxPoolSize), attrs)
			}
			o.ObserveInt64(idleMin, int64(s.MinPoolSize), attrs)
			o.ObserveInt64(pending, int64(s.Waiting), attrs)
			o.ObserveInt64(timeouts, s.Timeouts, attrs)
		}
		return nil
	}
	reg, err := meter.RegisterCallback(observe, count, idleMax, idleMin, maxConns, pending, timeouts)
	if err != nil {
		return nil, fmt.Errorf("otelmetrics: registering the callback: %w", err)
	}
	return reg, nil
}
