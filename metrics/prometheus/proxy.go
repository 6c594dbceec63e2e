package prommetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mongopool/mongopool/proxy"
)

// ProxyCollector is a [prometheus.Collector] of a proxy's own metrics (its
// upstream pools are a Collector's, with [Collector.AddSource] of its
// client's Pools): client connections, by application name (the
// handshake's client.application.name) where it matters, operations,
// the wait queue, overload, held retries, pinned cursors and transactions.
type ProxyCollector struct {
	p *proxy.Proxy
}

// NewProxyCollector returns the collector of p's metrics.
func NewProxyCollector(p *proxy.Proxy) *ProxyCollector { return &ProxyCollector{p: p} }

var proxyDescs = struct {
	clients, accepted, refused, appOps, appErrors, appConns, appLatency  *prometheus.Desc
	operations, local, queued, overloaded, held, heldRecovered, maxTimed *prometheus.Desc
	cursors, pins, longPolls, authFailures, busyPolls, busyPollHits      *prometheus.Desc
	latency, slowOps, pinnedConns                                        *prometheus.Desc
}{
	clients:       prometheus.NewDesc("mongopool_proxy_client_connections", "Client connections open now.", nil, nil),
	accepted:      prometheus.NewDesc("mongopool_proxy_client_connections_accepted_total", "Client connections accepted.", nil, nil),
	refused:       prometheus.NewDesc("mongopool_proxy_client_connections_refused_total", "Client connections refused for the cap on client connections (answered with an overload error).", nil, nil),
	appConns:      prometheus.NewDesc("mongopool_proxy_app_connections", "Client connections open now, by the application name of their handshake (\"\" for none, and for the names beyond the first thousand).", []string{"app"}, nil),
	appOps:        prometheus.NewDesc("mongopool_proxy_app_operations_total", "Commands relayed to a server, by application name.", []string{"app"}, nil),
	appErrors:     prometheus.NewDesc("mongopool_proxy_app_errors_total", "Replies with ok: 0 (the proxy's or a server's), by application name.", []string{"app"}, nil),
	appLatency:    prometheus.NewDesc("mongopool_proxy_app_operation_duration_seconds", "Relayed operations' time, as mongopool_proxy_operation_duration_seconds, by application name: _sum over _count is their mean (the proxy-wide histogram has the buckets, which per application would multiply the series).", []string{"app"}, nil),
	operations:    prometheus.NewDesc("mongopool_proxy_operations_total", "Commands relayed to a server.", nil, nil),
	local:         prometheus.NewDesc("mongopool_proxy_local_replies_total", "Commands the proxy answered itself: handshakes, ping, its own errors.", nil, nil),
	queued:        prometheus.NewDesc("mongopool_proxy_queued_operations", "Operations waiting now for an upstream server and connection.", nil, nil),
	overloaded:    prometheus.NewDesc("mongopool_proxy_overloaded_total", "Operations answered with an overload error (the wait queue's bound, its timeout, the cap on long polls or client connections).", nil, nil),
	held:          prometheus.NewDesc("mongopool_proxy_held_retries_total", "Retries of operations held through a failure of their server (an election, a network error).", nil, nil),
	heldRecovered: prometheus.NewDesc("mongopool_proxy_held_recovered_total", "Held operations that then succeeded: failures the clients never saw.", nil, nil),
	maxTimed:      prometheus.NewDesc("mongopool_proxy_max_time_expired_total", "Operations whose maxTimeMS ran out while they waited in the proxy.", nil, nil),
	cursors:       prometheus.NewDesc("mongopool_proxy_cursors", "Cursors the proxy maps to their servers now.", nil, nil),
	pins:          prometheus.NewDesc("mongopool_proxy_pinned_transactions", "Transactions pinned to a mongos now.", nil, nil),
	pinnedConns:   prometheus.NewDesc("mongopool_proxy_pinned_connections", "Upstream connections held now for the open cursors and transactions of a load-balanced upstream (their getMores and commands must follow them); at -max-pinned, more are refused.", nil, nil),
	longPolls:     prometheus.NewDesc("mongopool_proxy_long_polls", "getMores of awaitData cursors (change streams, tailable cursors) in flight now.", nil, nil),
	authFailures:  prometheus.NewDesc("mongopool_proxy_auth_failures_total", "Failed authentications of clients (the log says who and from where, without secrets).", nil, nil),
	busyPolls:     prometheus.NewDesc("mongopool_proxy_busy_polls_total", "Waits for a socket (a client's next request, an upstream reply) polled before sleeping, at low load.", nil, nil),
	busyPollHits:  prometheus.NewDesc("mongopool_proxy_busy_poll_hits_total", "Busy polls that saw their socket readable within the budget: the share of polls that paid.", nil, nil),
	slowOps:       prometheus.NewDesc("mongopool_proxy_slow_operations_total", "Relayed operations that took the slow operation threshold or longer (-slow-op), logged or not.", nil, nil),
	latency:       prometheus.NewDesc("mongopool_proxy_operation_duration_seconds", "Relayed operations, from a request read whole to its server's reply: the waits for a server and a connection and the retries held through failures included, awaitData getMores apart.", nil, nil),
}

// Describe sends the descriptions of the proxy's metrics.
func (c *ProxyCollector) Describe(ch chan<- *prometheus.Desc) {
	d := proxyDescs
	for _, desc := range []*prometheus.Desc{d.clients, d.accepted, d.refused, d.appConns, d.appOps, d.appErrors, d.appLatency,
		d.operations, d.local, d.queued, d.overloaded, d.held, d.heldRecovered, d.maxTimed, d.cursors, d.pins, d.pinnedConns, d.longPolls, d.authFailures, d.busyPolls, d.busyPollHits, d.latency, d.slowOps} {
		ch <- desc
	}
}

// Collect sends the proxy's metrics now.
func (c *ProxyCollector) Collect(ch chan<- prometheus.Metric) {
	d := proxyDescs
	st := c.p.Stats()
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(d.clients, float64(st.ClientConns))
	counter(d.accepted, st.AcceptedConns)
	counter(d.refused, st.RefusedConns)
	for _, a := range c.p.Apps() {
		gauge(d.appConns, float64(a.Connections), a.AppName)
		counter(d.appOps, a.Operations, a.AppName)
		counter(d.appErrors, a.Errors, a.AppName)
		ch <- prometheus.MustNewConstSummary(d.appLatency, a.Latency.Count, a.Latency.Sum.Seconds(), nil, a.AppName)
	}
	counter(d.operations, st.Operations)
	counter(d.local, st.Local)
	gauge(d.queued, float64(st.Queued))
	counter(d.overloaded, st.Overloaded)
	counter(d.held, st.Held)
	counter(d.heldRecovered, st.HeldRecovered)
	counter(d.maxTimed, st.MaxTimeExpired)
	gauge(d.cursors, float64(st.Cursors))
	gauge(d.pins, float64(st.Pins))
	gauge(d.pinnedConns, float64(st.PinnedConns))
	gauge(d.longPolls, float64(st.LongPolls))
	counter(d.authFailures, st.AuthFailures)
	counter(d.busyPolls, st.BusyPolls)
	counter(d.busyPollHits, st.BusyPollHits)
	counter(d.slowOps, st.SlowOperations)
	ch <- prometheus.MustNewConstHistogram(d.latency, st.Latency.Count, st.Latency.Sum.Seconds(), cumulative(st.Latency))
}
