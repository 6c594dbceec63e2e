package prommetrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	prommetrics "github.com/mongopool/mongopool/metrics/prometheus"
	"github.com/mongopool/mongopool/pool"
)

// exampleLink stands for an established connection. A real connector returns
// a link that wraps the network connection it dialed and handshook.
type exampleLink struct{}

func (exampleLink) Close() error { return nil }
func (exampleLink) Err() error   { return nil }

// exampleConnector "establishes" connections at once. A real application
// opens its pool with mongopool.Open, whose connector dials the server.
var exampleConnector = pool.ConnectorFunc(func(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
	a.HelloDone(pool.ServiceID{})
	return exampleLink{}, nil
})

// The collector is registered once; pools are added as they are created and
// removed when they are closed. The registry is served on /metrics for
// Prometheus to scrape.
func Example() {
	p, err := pool.New("localhost:27017", exampleConnector, pool.WithMaxPoolSize(10))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	p.Ready()

	collector := prommetrics.NewCollector()
	registry := prometheus.NewRegistry()
	registry.MustRegister(collector)
	if err := collector.Add(p, "orders"); err != nil {
		fmt.Println(err)
		return
	}
	defer collector.Remove(p)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	server := httptest.NewServer(mux) // an application: http.ListenAndServe(":9090", mux)
	defer server.Close()

	// Two connections, one checked back in.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, _ := p.CheckOut(ctx)
	c2, _ := p.CheckOut(ctx)
	p.CheckIn(c1)
	defer p.CheckIn(c2)

	// What Prometheus scrapes, the connections by state and the limit.
	resp, err := http.Get(server.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if line := lines.Text(); strings.HasPrefix(line, "mongopool_connections{") || strings.HasPrefix(line, "mongopool_max_connections{") {
			fmt.Println(line)
		}
	}
	// Output:
	// mongopool_connections{address="localhost:27017",pool="orders",state="idle"} 1
	// mongopool_connections{address="localhost:27017",pool="orders",state="pending"} 0
	// mongopool_connections{address="localhost:27017",pool="orders",state="used"} 1
	// mongopool_max_connections{address="localhost:27017",pool="orders"} 10
}
