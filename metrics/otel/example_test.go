package otelmetrics_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	otelmetrics "github.com/mongopool/mongopool/metrics/otel"
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

// The pool's metrics are wired into the application's meter provider: the
// instruments through a meter, the histograms as a producer of its reader. A
// real application reads with a periodic reader and an exporter
// (sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithProducer(m))); the
// manual reader here shows what an export carries.
func Example() {
	// WithUseSampling(1) times every use of a connection, for this example;
	// by default the pool times one check-out in 64, at random.
	p, err := pool.New("localhost:27017", exampleConnector, pool.WithMaxPoolSize(10), pool.WithUseSampling(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	p.Ready()

	m := otelmetrics.New()
	if err := m.Add(p, "orders"); err != nil {
		fmt.Println(err)
		return
	}
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(m))
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	if _, err := m.Register(provider.Meter(otelmetrics.ScopeName)); err != nil {
		fmt.Println(err)
		return
	}

	// Two connections, one checked back in.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, _ := p.CheckOut(ctx)
	c2, _ := p.CheckOut(ctx)
	p.CheckIn(c1)
	defer p.CheckIn(c2)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		fmt.Println(err)
		return
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch data := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					lines = append(lines, fmt.Sprintf("%s %s {%s} %d", mt.Name, mt.Unit, attributes(dp.Attributes), dp.Value))
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					lines = append(lines, fmt.Sprintf("%s %s {%s} count %d", mt.Name, mt.Unit, attributes(dp.Attributes), dp.Count))
				}
			}
		}
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// db.client.connection.count {connection} {db.client.connection.pool.name=orders db.client.connection.state=idle} 1
	// db.client.connection.count {connection} {db.client.connection.pool.name=orders db.client.connection.state=used} 1
	// db.client.connection.create_time s {db.client.connection.pool.name=orders} count 2
	// db.client.connection.idle.max {connection} {db.client.connection.pool.name=orders} 10
	// db.client.connection.idle.min {connection} {db.client.connection.pool.name=orders} 0
	// db.client.connection.max {connection} {db.client.connection.pool.name=orders} 10
	// db.client.connection.pending_requests {request} {db.client.connection.pool.name=orders} 0
	// db.client.connection.timeouts {timeout} {db.client.connection.pool.name=orders} 0
	// db.client.connection.use_time s {db.client.connection.pool.name=orders} count 1
	// db.client.connection.wait_time s {db.client.connection.pool.name=orders} count 2
}

// attributes formats a series' attributes as key=value pairs.
func attributes(set attribute.Set) string {
	var kv []string
	for _, a := range set.ToSlice() {
		kv = append(kv, fmt.Sprintf("%s=%s", a.Key, a.Value.Emit()))
	}
	return strings.Join(kv, " ")
}
