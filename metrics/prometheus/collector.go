package prommetrics

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mongopool/mongopool/pool"
)

// Labels of every metric: the pool's name, and the server it connects to.
const (
	labelPool    = "pool"
	labelAddress = "address"
)

// Collector is a [prometheus.Collector] of the metrics of a set of pools.
// Every metric carries the labels pool (the name given to [Collector.Add])
// and address (the server's "host:port"). Each scrape takes one
// [pool.Pool.Stats] snapshot per pool, so that the figures of a pool agree
// with one another.
//
// Its zero value is not usable: make one with [NewCollector]. It is safe for
// concurrent use; pools may be added and removed while it is being scraped.
type Collector struct {
	mu    sync.Mutex
	pools []*member // in the order they were added; replaced, never modified
}

// member is one pool of a Collector, or a source of pools.
type member struct {
	pool   *pool.Pool
	source func() []*pool.Pool
	name   string
}

// NewCollector returns a Collector of no pool yet. Register it once, then add
// pools as they are created.
func NewCollector() *Collector { return &Collector{} }

// Add collects p's metrics under the label pool=name; an empty name stands
// for the pool's address. Names must be unique among the pools of c: two
// pools to the same server need names.
//
// The pool stays collected, closed or not, until [Collector.Remove].
func (c *Collector) Add(p *pool.Pool, name string) error {
	if p == nil {
		return errors.New("prommetrics: Add of a nil pool")
	}
	if name == "" {
		name = p.Address()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.pools {
		if o.pool == p {
			return fmt.Errorf("prommetrics: the pool of %s is already collected, as %q", p.Address(), o.name)
		}
		if o.name == name {
			return fmt.Errorf("prommetrics: a pool named %q is already collected: give the pool of %s another name", name, p.Address())
		}
	}
	// A fresh slice rather than an append in place: scrapes iterate over the
	// slice they took under the lock, without it.
	c.pools = append(slices.Clip(c.pools), &member{pool: p, name: name})
	return nil
}

// AddSource collects the metrics of the pools pools returns at each scrape,
// each under the label pool=name and its own address: the pools of a
// mongopool.Client (its Pools method), which come and go with the
// deployment's servers. name must be unique among the names of c.
func (c *Collector) AddSource(name string, pools func() []*pool.Pool) error {
	if pools == nil {
		return errors.New("prommetrics: AddSource of a nil source")
	}
	if name == "" {
		return errors.New("prommetrics: AddSource needs a name")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.pools {
		if o.name == name {
			return fmt.Errorf("prommetrics: a pool named %q is already collected: give the source another name", name)
		}
	}
	c.pools = append(slices.Clip(c.pools), &member{source: pools, name: name})
	return nil
}

// Remove stops collecting p; it reports whether p was collected. Remove a
// pool when it is closed for good, or its last values are scraped for ever.
func (c *Collector) Remove(p *pool.Pool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.pools, func(o *member) bool { return o.pool == p && p != nil })
	if i < 0 {
		return false
	}
	c.pools = slices.Concat(c.pools[:i], c.pools[i+1:])
	return true
}

func (c *Collector) members() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pools
}

// Describe sends the descriptions of all the metrics c may collect.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs.all() {
		ch <- d
	}
}

// Collect sends the metrics of every pool of c, from one snapshot of each.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.members() {
		if m.source == nil {
			collectPool(ch, m.name, m.pool.Stats())
			continue
		}
		for _, p := range m.source() {
			collectPool(ch, m.name, p.Stats())
		}
	}
}

// collectPool sends the metrics of one pool's snapshot.
func collectPool(ch chan<- prometheus.Metric, name string, s pool.Stats) {
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{name, s.Address}, extra...)...)
	}
	counter := func(d *prometheus.Desc, v int64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{name, s.Address}, extra...)...)
	}

	gauge(descs.connections, float64(s.Available), "idle")
	gauge(descs.connections, float64(s.InUse), "used")
	gauge(descs.connections, float64(s.Pending), "pending")
	gauge(descs.waiting, float64(s.Waiting))
	if s.MaxPoolSize > 0 {
		gauge(descs.maxConnections, float64(s.MaxPoolSize))
	}
	gauge(descs.minConnections, float64(s.MinPoolSize))
	gauge(descs.maxConnecting, float64(s.MaxConnecting))
	for _, state := range poolStates {
		v := 0.0
		if s.State == state {
			v = 1
		}
		gauge(descs.state, v, state)
	}

	counter(descs.created, s.Created)
	counter(descs.closed, s.ClosedStale, pool.ReasonStale)
	counter(descs.closed, s.ClosedIdle, pool.ReasonIdle)
	counter(descs.closed, s.ClosedError, pool.ReasonError)
	counter(descs.closed, s.ClosedPoolClosed, pool.ReasonPoolClosed)
	counter(descs.closed, s.ClosedLifetime, pool.ReasonLifetime)
	counter(descs.closed, s.ClosedShrunk, pool.ReasonShrunk)
	counter(descs.establishFailures, s.EstablishFailed)
	counter(descs.checkOuts, s.CheckedOut)
	counter(descs.checkOutFailures, s.CheckOutFailed)
	counter(descs.timeouts, s.Timeouts)
	counter(descs.checkIns, s.CheckedIn)
	counter(descs.waited, s.WaitCount)
	ch <- prometheus.MustNewConstMetric(descs.waitedSeconds, prometheus.CounterValue, s.WaitDuration.Seconds(), name, s.Address)
	counter(descs.clears, s.Clears)
	counter(descs.leaks, s.Leaks)

	histogram := func(d *prometheus.Desc, h pool.Histogram) {
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), cumulative(h), name, s.Address)
	}
	histogram(descs.waitSeconds, s.CheckOutWait)
	histogram(descs.establishSeconds, s.Establish)
	histogram(descs.useSeconds, s.Use)
}

// cumulative returns h's buckets as Prometheus counts them: by upper bound in
// seconds, each with the samples up to it. The pool's last bucket, unbounded,
// is Prometheus's +Inf bucket, which the histogram's count stands for.
func cumulative(h pool.Histogram) map[float64]uint64 {
	buckets := make(map[float64]uint64, pool.HistogramBuckets-1)
	var n uint64
	for i := range pool.HistogramBuckets - 1 {
		n += h.Counts[i]
		buckets[pool.HistogramBound(i).Seconds()] = n
	}
	return buckets
}

// poolStates are the values of Stats.State.
var poolStates = [...]string{"paused", "ready", "closed"}

// descs describes the metrics; they are the same for every Collector.
var descs = newDescs()

type descSet struct {
	connections, waiting, maxConnections, minConnections, maxConnecting, state *prometheus.Desc

	created, closed, establishFailures              *prometheus.Desc
	checkOuts, checkOutFailures, timeouts, checkIns *prometheus.Desc
	waited, waitedSeconds, clears, leaks            *prometheus.Desc

	waitSeconds, establishSeconds, useSeconds *prometheus.Desc
}

func newDescs() *descSet {
	desc := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc("mongopool_"+name, help, append([]string{labelPool, labelAddress}, extra...), nil)
	}
	return &descSet{
		connections:    desc("connections", "Connections of the pool now, by state: idle in the pool, used (checked out), or pending (being established).", "state"),
		waiting:        desc("checkouts_waiting", "Check-outs waiting now for a connection: in the queue, or for the connection being established for them."),
		maxConnections: desc("max_connections", "maxPoolSize: the most connections the pool may have, pending, idle and used together. Absent when the pool has no limit."),
		minConnections: desc("min_connections", "minPoolSize: the connections the pool keeps established while it is ready."),
		maxConnecting:  desc("max_connecting", "maxConnecting: the most connections the pool establishes at once."),
		state:          desc("state", "1 for the state the pool is in, 0 for the others. A paused pool (after a clear, until the server is seen healthy again) fails its check-outs at once.", "state"),

		created:           desc("connections_created_total", "Connections the pool has created (started to establish)."),
		closed:            desc("connections_closed_total", "Connections the pool has closed, by reason: stale (the pool was cleared), idle (idle longer than maxIdleTimeMS), error (broken, or failed to establish), poolClosed, lifetime (older than the maximum lifetime), shrunk (above a lowered maxPoolSize).", "reason"),
		establishFailures: desc("connection_establish_failures_total", "Establishments of a connection that failed (also counted as closed with reason error)."),
		checkOuts:         desc("checkouts_total", "Check-outs that got a connection."),
		checkOutFailures:  desc("checkout_failures_total", "Check-outs that failed, timeouts included."),
		timeouts:          desc("checkout_timeouts_total", "Check-outs ended by a time limit (waitQueueTimeoutMS, timeoutMS) or their context."),
		checkIns:          desc("checkins_total", "Connections checked back in."),
		waited:            desc("checkouts_waited_total", "Check-outs that had to wait, in the queue or for a connection being established."),
		waitedSeconds:     desc("checkouts_waited_seconds_total", "Time the check-outs that had to wait spent waiting, in all."),
		clears:            desc("clears_total", "Times the pool was cleared."),
		leaks:             desc("leaks_suspected_total", "Check-outs that kept their connection past the leak detector's threshold; 0 without the detector."),

		waitSeconds:      desc("checkout_wait_seconds", "Time from the start of a check-out to the connection handed over or the failure. Check-outs decided at once count as 0."),
		establishSeconds: desc("connection_establish_seconds", "Time to establish a connection (dial, TLS, handshake, authentication), for the connections established."),
		useSeconds:       desc("connection_use_seconds", "Time from the check-out of a connection to its check-in, for the check-outs the pool timed: one in 64 at random by default."),
	}
}

func (d *descSet) all() []*prometheus.Desc {
	return []*prometheus.Desc{
		d.connections, d.waiting, d.maxConnections, d.minConnections, d.maxConnecting, d.state,
		d.created, d.closed, d.establishFailures, d.checkOuts, d.checkOutFailures, d.timeouts,
		d.checkIns, d.waited, d.waitedSeconds, d.clears, d.leaks,
		d.waitSeconds, d.establishSeconds, d.useSeconds,
	}
}
