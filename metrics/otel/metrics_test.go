package otelmetrics_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mongopool/mongopool/internal/pooltest"
	otelmetrics "github.com/mongopool/mongopool/metrics/otel"
	"github.com/mongopool/mongopool/pool"
)

// newReader returns a manual reader that reads m's instruments (and m's
// histograms, as an external producer), shut down when the test ends.
func newReader(t *testing.T, m *otelmetrics.Metrics) *sdkmetric.ManualReader {
	t.Helper()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(m))
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		if err := provider.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	reg, err := m.Register(provider.Meter(otelmetrics.ScopeName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := reg.Unregister(); err != nil {
			t.Error(err)
		}
	})
	return reader
}

// exported is what one collection gave: each time series' value, by the
// metric's name and the series' attributes ("name{key=value,...}"), and each
// metric's kind and unit ("counter {timeout}").
type exported struct {
	values map[string]float64
	kinds  map[string]string
}

func seriesKey(name string, attrs attribute.Set) string {
	var kv []string
	for _, a := range attrs.ToSlice() {
		kv = append(kv, string(a.Key)+"="+a.Value.Emit())
	}
	return name + "{" + strings.Join(kv, ",") + "}"
}

// collect runs one collection of reader and flattens it. A metric of an
// unexpected kind, temporality or scope fails the test.
func collect(t *testing.T, reader *sdkmetric.ManualReader) exported {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	e := exported{values: map[string]float64{}, kinds: map[string]string{}}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelmetrics.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otelmetrics.ScopeName)
		}
		for _, mt := range sm.Metrics {
			if _, dup := e.kinds[mt.Name]; dup {
				t.Errorf("metric %s exported twice", mt.Name)
			}
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				if d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: temporality %v, want cumulative", mt.Name, d.Temporality)
				}
				kind := "updowncounter"
				if d.IsMonotonic {
					kind = "counter"
				}
				e.kinds[mt.Name] = kind + " " + mt.Unit
				for _, dp := range d.DataPoints {
					e.values[seriesKey(mt.Name, dp.Attributes)] = float64(dp.Value)
				}
			case metricdata.Histogram[float64]:
				if d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: temporality %v, want cumulative", mt.Name, d.Temporality)
				}
				e.kinds[mt.Name] = "histogram " + mt.Unit
				for _, dp := range d.DataPoints {
					k := seriesKey(mt.Name, dp.Attributes)
					e.values[k+" count"] = float64(dp.Count)
					e.values[k+" sum"] = dp.Sum
					if len(dp.BucketCounts) != len(dp.Bounds)+1 {
						t.Errorf("%s: %d bucket counts for %d bounds", k, len(dp.BucketCounts), len(dp.Bounds))
					}
					// The pool's bounds, in seconds: 1µs doubling to 2^26µs,
					// and the unbounded last bucket implied.
					if n := len(dp.Bounds); n != 27 || dp.Bounds[0] != 1e-6 || math.Abs(dp.Bounds[n-1]-67.108864) > 1e-9 {
						t.Errorf("%s: bounds %v, want 1e-6 to 67.108864 seconds, 27 in all", k, dp.Bounds)
					}
					for i, n := range dp.BucketCounts {
						le := "+Inf"
						if i < len(dp.Bounds) {
							le = fmt.Sprint(dp.Bounds[i])
						}
						e.values[k+" le="+le] = float64(n)
					}
				}
			default:
				t.Errorf("%s: unexpected aggregation %T", mt.Name, mt.Data)
			}
		}
	}
	return e
}

// wantKinds is each instrument of the conventions, with its kind and unit.
var wantKinds = map[string]string{
	"db.client.connection.count":            "updowncounter {connection}",
	"db.client.connection.idle.max":         "updowncounter {connection}",
	"db.client.connection.idle.min":         "updowncounter {connection}",
	"db.client.connection.max":              "updowncounter {connection}",
	"db.client.connection.pending_requests": "updowncounter {request}",
	"db.client.connection.timeouts":         "counter {timeout}",
	"db.client.connection.create_time":      "histogram s",
	"db.client.connection.wait_time":        "histogram s",
	"db.client.connection.use_time":         "histogram s",
}

// wantValues is what a pool reported under name must export, from its stats.
func wantValues(name string, s pool.Stats) map[string]float64 {
	pn := "db.client.connection.pool.name=" + name
	w := map[string]float64{
		"db.client.connection.count{" + pn + ",db.client.connection.state=idle}": float64(s.Available),
		"db.client.connection.count{" + pn + ",db.client.connection.state=used}": float64(s.InUse),
		"db.client.connection.idle.min{" + pn + "}":                              float64(s.MinPoolSize),
		"db.client.connection.pending_requests{" + pn + "}":                      float64(s.Waiting),
		"db.client.connection.timeouts{" + pn + "}":                              float64(s.Timeouts),
	}
	if s.MaxPoolSize > 0 {
		w["db.client.connection.max{"+pn+"}"] = float64(s.MaxPoolSize)
		w["db.client.connection.idle.max{"+pn+"}"] = float64(s.MaxPoolSize)
	}
	for name, h := range map[string]pool.Histogram{
		"db.client.connection.create_time": s.Establish,
		"db.client.connection.wait_time":   s.CheckOutWait,
		"db.client.connection.use_time":    s.Use,
	} {
		k := name + "{" + pn + "}"
		w[k+" count"] = float64(h.Count)
		w[k+" sum"] = h.Sum.Seconds()
		for i, n := range h.Counts {
			le := "+Inf"
			if i < pool.HistogramBuckets-1 {
				le = fmt.Sprint(pool.HistogramBound(i).Seconds())
			}
			w[k+" le="+le] = float64(n)
		}
	}
	return w
}

// union merges maps of values.
func union(ms ...map[string]float64) map[string]float64 {
	u := map[string]float64{}
	for _, m := range ms {
		for k, v := range m {
			u[k] = v
		}
	}
	return u
}

// diffValues lists the series whose values differ, are missing or are extra.
func diffValues(got, want map[string]float64) []string {
	var diffs []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("missing %s (want %v)", k, w))
		case g != w:
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected %s = %v", k, g))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// checkExport fails the test unless got has exactly the instruments of the
// conventions and the values want.
func checkExport(t *testing.T, got exported, want map[string]float64) {
	t.Helper()
	for name, kind := range wantKinds {
		if got.kinds[name] != kind {
			t.Errorf("%s: exported as %q, want %q", name, got.kinds[name], kind)
		}
	}
	for name := range got.kinds {
		if _, ok := wantKinds[name]; !ok {
			t.Errorf("unexpected metric %s (%s)", name, got.kinds[name])
		}
	}
	for _, d := range diffValues(got.values, want) {
		t.Error(d)
	}
}

// stableCollect collects while nothing changes the pools: their stats before
// and after the collection must be the same, so that the values exported are
// the stats of that moment.
func stableCollect(t *testing.T, reader *sdkmetric.ManualReader, pools ...*pool.Pool) (exported, []pool.Stats) {
	t.Helper()
	var before []pool.Stats
	for _, p := range pools {
		before = append(before, p.Stats())
	}
	got := collect(t, reader)
	for i, p := range pools {
		if after := p.Stats(); after != before[i] {
			t.Fatalf("the pool of %s changed during the collection:\nbefore %+v\nafter  %+v", p.Address(), before[i], after)
		}
	}
	return got, before
}

// Every instrument exports what the pool's Stats say at the moment of the
// collection, for a named pool and for one named by its address, through a
// state with connections idle and in use and a check-out timed out, then one
// with a check-out waiting for the connection being established for it.
func TestExportEqualsStats(t *testing.T) {
	conns := &pooltest.Connector{}
	p := pooltest.ReadyPool(t, "127.0.0.1:27017", conns, pool.WithMaxPoolSize(3), pool.WithMinPoolSize(2), pool.WithUseSampling(1))
	unlimited := pooltest.ReadyPool(t, "127.0.0.1:27018", &pooltest.Connector{}, pool.WithMaxPoolSize(0))
	m := otelmetrics.New()
	if err := m.Add(p, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(unlimited, ""); err != nil {
		t.Fatal(err)
	}
	reader := newReader(t, m)

	// One connection idle, one in use, one check-out timed out.
	a := pooltest.CheckOut(t, p)
	b := pooltest.CheckOut(t, p)
	p.CheckIn(b)
	pooltest.TimeOut(t, p)
	got, stats := stableCollect(t, reader, p, unlimited)
	if s := stats[0]; s.Available != 1 || s.InUse != 1 || s.Timeouts != 1 || s.Waiting != 0 || s.MinPoolSize != 2 || s.MaxPoolSize != 3 ||
		s.Establish.Count != 2 || s.CheckOutWait.Count != 3 || s.Use.Count != 1 {
		t.Fatalf("the test did not bring the pool where it meant to: %+v", s)
	}
	checkExport(t, got, union(wantValues("orders", stats[0]), wantValues("127.0.0.1:27018", stats[1])))

	// Two in use, none idle, one connection being established for a
	// check-out, and another check-out waiting in the queue: the pool is full.
	b = pooltest.CheckOut(t, p)
	conns.Hold()
	results := make(chan *pool.Conn, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			c, _ := p.CheckOut(context.Background())
			results <- c
		})
	}
	recv(t, conns.Held(), "the establishment for a waiting check-out")
	waitStats(t, p, "two check-outs waiting", func(s pool.Stats) bool { return s.Waiting == 2 })
	got, stats = stableCollect(t, reader, p, unlimited)
	if s := stats[0]; s.Available != 0 || s.InUse != 2 || s.Pending != 1 || s.Waiting != 2 ||
		s.Establish.Count != 2 || s.CheckOutWait.Count != 4 || s.Use.Count != 1 {
		t.Fatalf("the test did not bring the pool where it meant to: %+v", s)
	}
	checkExport(t, got, union(wantValues("orders", stats[0]), wantValues("127.0.0.1:27018", stats[1])))

	// The established connection goes to one waiting check-out, a to the other.
	conns.Release()
	c := recv(t, results, "a waiting check-out")
	p.CheckIn(a)
	d := recv(t, results, "the other waiting check-out")
	wg.Wait()
	if c == nil || d == nil {
		t.Fatal("a waiting check-out failed")
	}
	for _, c := range []*pool.Conn{b, c, d} {
		p.CheckIn(c)
	}
}

// A pool is reported from Add to Remove, under a unique name.
func TestAddRemove(t *testing.T) {
	p := pooltest.ReadyPool(t, "127.0.0.1:27017", &pooltest.Connector{})
	q := pooltest.ReadyPool(t, "127.0.0.1:27017", &pooltest.Connector{})
	m := otelmetrics.New()
	reader := newReader(t, m)
	if got := collect(t, reader); len(got.values) != 0 {
		t.Errorf("exported with no pool: %v", got.values)
	}

	if err := m.Add(p, ""); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		p    *pool.Pool
		name string
		want string
	}{
		{nil, "x", "nil pool"},
		{p, "again", `already reported, as "127.0.0.1:27017"`},
		{q, "", `a pool named "127.0.0.1:27017" is already reported`},
	} {
		err := m.Add(bad.p, bad.name)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Add(%v, %q) = %v, want an error saying %q", bad.p, bad.name, err, bad.want)
		}
	}
	if err := m.Add(q, "secondary"); err != nil {
		t.Fatal(err)
	}
	got, stats := stableCollect(t, reader, p, q)
	checkExport(t, got, union(wantValues("127.0.0.1:27017", stats[0]), wantValues("secondary", stats[1])))

	if !m.Remove(p) {
		t.Error("Remove of a reported pool returned false")
	}
	if m.Remove(p) {
		t.Error("Remove of a pool no longer reported returned true")
	}
	got, stats = stableCollect(t, reader, q)
	checkExport(t, got, wantValues("secondary", stats[0]))
}

// Collections run while the pool is busy and pools come and go: every
// collection is consistent in itself (no more connections than the limit,
// timeouts never going back), and the last, once the pool is quiet, equals
// its stats. Run with -race, this also shows that collecting shares nothing
// with the pool unguarded.
func TestCollectWhileBusy(t *testing.T) {
	p := pooltest.ReadyPool(t, "127.0.0.1:27017", &pooltest.Connector{}, pool.WithMaxPoolSize(2))
	m := otelmetrics.New()
	if err := m.Add(p, "busy"); err != nil {
		t.Fatal(err)
	}
	reader := newReader(t, m)

	const workers, rounds = 4, 200
	idle := "db.client.connection.count{db.client.connection.pool.name=busy,db.client.connection.state=idle}"
	used := "db.client.connection.count{db.client.connection.pool.name=busy,db.client.connection.state=used}"
	timeouts := "db.client.connection.timeouts{db.client.connection.pool.name=busy}"
	var lastTimeouts float64
	// Every 10th check-out times out (its context canceled before it
	// starts), so that the timeouts move while collections run.
	pooltest.Busy(t, p, m, pooltest.Load{Workers: workers, Rounds: rounds, TimeoutEvery: 10}, func() {
		got := collect(t, reader)
		if n := got.values[idle] + got.values[used]; n > 2 {
			t.Fatalf("%v idle and used connections, beyond maxPoolSize 2", n)
		}
		if n := got.values[timeouts]; n < lastTimeouts {
			t.Fatalf("timeouts went from %v back to %v", lastTimeouts, n)
		} else {
			lastTimeouts = n
		}
	})
	got, stats := stableCollect(t, reader, p)
	checkExport(t, got, wantValues("busy", stats[0]))
	if s := stats[0]; s.Timeouts != workers*rounds/10 || s.CheckOutFailed != s.Timeouts {
		t.Errorf("want %d check-outs failed, all by timeout: %+v", workers*rounds/10, s)
	}
}
