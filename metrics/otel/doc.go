// Package otelmetrics reports the metrics of mongopool's pools through
// OpenTelemetry, under the semantic conventions for database client
// connection pools: the db.client.connection.* metrics, each with the
// attribute db.client.connection.pool.name, and db.client.connection.count
// with db.client.connection.state too.
//
// It lives in a module of its own so that the pool itself depends on nothing
// but the standard library.
//
// # Wiring
//
// A [Metrics] reports a set of pools, added with [Metrics.Add] and removed
// with [Metrics.Remove]. It reaches the application's meter provider in two
// ways, because the OpenTelemetry API has no asynchronous histogram:
//
//   - [Metrics.Register] creates the counts and gauges as asynchronous
//     instruments on a meter; a callback observes them from each pool's
//     [pool.Pool.Stats] when the reader collects.
//   - [Metrics.Produce] returns the three histograms, and makes Metrics an
//     sdkmetric.Producer: give it to the reader that exports
//     (sdkmetric.WithProducer(m)).
//
// For example:
//
//	m := otelmetrics.New()
//	reader := sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithProducer(m))
//	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
//	if _, err := m.Register(provider.Meter(otelmetrics.ScopeName)); err != nil {
//		return err
//	}
//	p, err := mongopool.Open(ctx, uri)
//	...
//	m.Add(p.Pool(), "orders")
//
// # The histograms
//
// db.client.connection.create_time, .wait_time and .use_time are the pool's
// own histograms (Stats.Establish, Stats.CheckOutWait and Stats.Use),
// exported as they are: the pool's fixed buckets as explicit bounds in
// seconds, its exact counts and sums, cumulative since the pool was created
// (the start time they carry is when the pool was added: add a pool as soon
// as it is opened).
// The pool measures these durations anyway, on its own clock, where they
// happen; exporting its buckets is the only way for the export to agree with
// Stats. The bounds double from 1µs to about 67s, so a quantile is known to
// a factor of two. use_time has the uses the pool times: one check-out in 64
// at random by default, every one with pool.WithUseSampling(1).
//
// The two other designs were rejected. A synchronous histogram fed from the
// pool's histograms would have to invent the individual durations behind each
// bucket's count (its sum and any bucket bounds other than the pool's would
// be made up). A synchronous histogram fed by an event handler would measure
// everything a second time, with a lock and a map of checked-out connections
// on the check-out path for use_time, and would still disagree with Stats.
//
// What it costs: the histograms bypass the meter provider, so views do not
// apply to them (no renaming, no other buckets, no exponential histogram),
// they are always cumulative whatever temporality the exporter prefers, and
// they are exported only by the readers given the producer.
//
// # Choices
//
//   - db.client.connection.count: idle is Stats.Available, used is
//     Stats.InUse. Connections being established are neither, and are not
//     counted.
//   - db.client.connection.max and .idle.max are maxPoolSize, which bounds the
//     idle connections too; neither is reported for a pool without a limit.
//   - db.client.connection.idle.min is minPoolSize: the pool keeps that many
//     connections established, idle or in use.
//   - db.client.connection.pending_requests is Stats.Waiting: the check-outs
//     waiting in the queue or for the connection being established for them.
//   - db.client.connection.timeouts is Stats.Timeouts: check-outs ended by
//     waitQueueTimeoutMS, timeoutMS or their context.
//   - db.client.connection.pool.name is the name given to [Metrics.Add], or
//     the pool's "host:port" when none is: the conventions' fallback of
//     server.address:server.port (a pool serves one server and no particular
//     database).
package otelmetrics
