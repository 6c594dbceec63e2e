// Package prommetrics exposes the metrics of mongopool's pools to Prometheus:
// [Collector] is a prometheus.Collector of one pool or many, to register once
// and serve with promhttp.
//
// It lives in a module of its own so that the pool itself depends on nothing
// but the standard library.
//
// Every metric is labelled pool (the name given to [Collector.Add], the
// pool's "host:port" by default) and address (the pool's "host:port"). Each
// scrape reads one [pool.Pool.Stats] snapshot per pool, so that the figures
// of a pool agree with one another:
//
//   - gauges of the pool now: mongopool_connections{state="idle"|"used"|"pending"},
//     mongopool_checkouts_waiting, mongopool_state{state="paused"|"ready"|"closed"},
//     and its limits mongopool_max_connections (absent without a limit),
//     mongopool_min_connections, mongopool_max_connecting;
//   - counters since the pool was created: mongopool_connections_created_total,
//     mongopool_connections_closed_total{reason=...},
//     mongopool_connection_establish_failures_total, mongopool_checkouts_total,
//     mongopool_checkout_failures_total, mongopool_checkout_timeouts_total,
//     mongopool_checkins_total, mongopool_checkouts_waited_total,
//     mongopool_checkouts_waited_seconds_total, mongopool_clears_total,
//     mongopool_leaks_suspected_total;
//   - histograms since the pool was created, the pool's own (Stats.CheckOutWait,
//     Establish, Use) with its buckets, upper bounds in seconds from 1µs
//     doubling to about 67s, then +Inf: mongopool_checkout_wait_seconds,
//     mongopool_connection_establish_seconds, mongopool_connection_use_seconds
//     (the uses the pool times: a sample, see pool.WithUseSampling).
//
// The metrics' README (metrics/README.md in the repository) describes them
// for an operator, with the queries and alerts of a dashboard.
package prommetrics
