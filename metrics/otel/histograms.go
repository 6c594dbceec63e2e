package otelmetrics

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mongopool/mongopool/pool"
)

// Metrics is a producer of the SDK's readers, for its histograms.
var _ sdkmetric.Producer = (*Metrics)(nil)

// Produce returns the histograms of the semantic conventions for every pool
// of m, read from one [pool.Pool.Stats] of each: db.client.connection.create_time
// (Stats.Establish), .wait_time (Stats.CheckOutWait) and .use_time
// (Stats.Use), in seconds, cumulative since the pool was created, with the
// pool's buckets as explicit bounds. It makes m an sdkmetric.Producer: pass it
// to the exporting reader with sdkmetric.WithProducer. The package
// documentation says why the histograms come this way.
func (m *Metrics) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	members := m.members()
	if len(members) == 0 {
		return nil, nil
	}
	now := time.Now()
	create := make([]metricdata.HistogramDataPoint[float64], 0, len(members))
	wait := make([]metricdata.HistogramDataPoint[float64], 0, len(members))
	use := make([]metricdata.HistogramDataPoint[float64], 0, len(members))
	for _, mb := range members {
		s := mb.pool.Stats()
		create = append(create, mb.point(s.Establish, now))
		wait = append(wait, mb.point(s.CheckOutWait, now))
		use = append(use, mb.point(s.Use, now))
	}
	histogram := func(name, description string, points []metricdata.HistogramDataPoint[float64]) metricdata.Metrics {
		return metricdata.Metrics{
			Name:        name,
			Description: description,
			Unit:        unitSeconds,
			Data:        metricdata.Histogram[float64]{DataPoints: points, Temporality: metricdata.CumulativeTemporality},
		}
	}
	return []metricdata.ScopeMetrics{{
		Scope: instrumentation.Scope{Name: ScopeName},
		Metrics: []metricdata.Metrics{
			histogram(metricCreateTime, "The time it took to establish a connection: dial, TLS, handshake and authentication.", create),
			histogram(metricWaitTime, "The time from the start of a check-out to the connection handed over, or to its failure; a check-out decided at once counts as 0.", wait),
			histogram(metricUseTime, "The time between the check-out of a connection and its check-in, for the check-outs the pool times (one in 64 at random by default).", use),
		},
	}}, nil
}

// point is the data point of one of mb's histograms.
func (mb *member) point(h pool.Histogram, now time.Time) metricdata.HistogramDataPoint[float64] {
	return metricdata.HistogramDataPoint[float64]{
		Attributes:   mb.attrs,
		StartTime:    mb.start,
		Time:         now,
		Count:        h.Count,
		Bounds:       bucketBounds(),
		BucketCounts: append([]uint64(nil), h.Counts[:]...),
		Sum:          h.Sum.Seconds(),
	}
}

// bucketBounds returns the upper bounds of the pool's buckets in seconds,
// but for the last, unbounded one, which OpenTelemetry's buckets imply. Each
// data point gets its own slice: exporters may keep it.
func bucketBounds() []float64 {
	bounds := make([]float64, pool.HistogramBuckets-1)
	for i := range bounds {
		bounds[i] = pool.HistogramBound(i).Seconds()
	}
	return bounds
}
