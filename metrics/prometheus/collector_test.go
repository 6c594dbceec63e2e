package prommetrics_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/mongopool/mongopool/internal/pooltest"
	prommetrics "github.com/mongopool/mongopool/metrics/prometheus"
	"github.com/mongopool/mongopool/pool"
)

// establishDelay is how long the test connector takes to establish a
// connection; on the fake clock of a synctest bubble it is exact, and so are
// the times the pool measures.
const establishDelay = 5 * time.Millisecond

// useTime is how long the test keeps a connection checked out.
const useTime = 2 * time.Millisecond

// expositionFile holds what TestExposition's collector must expose, in the
// text format Prometheus scrapes; metrics/README.md quotes it. go test -run
// TestExposition -update rewrites it from what the collector exposes now:
// review the difference before keeping it.
const expositionFile = "testdata/exposition.txt"

var update = flag.Bool("update", false, "rewrite "+expositionFile+" from the collector's output")

// writeExposition writes what c exposes to file, in the text format.
func writeExposition(t *testing.T, c prometheus.Collector, file string) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The collector exposes what the pools' Stats say, in the Prometheus text
// format, for a named pool brought through check-outs, a timeout, a clear and
// a check-out refused by the paused pool, and for a pool without a limit,
// named by its address, with check-outs waiting.
func TestExposition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := pooltest.ReadyPool(t, "127.0.0.1:27017", &pooltest.Connector{Delay: establishDelay}, pool.WithMaxPoolSize(3), pool.WithMinPoolSize(2), pool.WithUseSampling(1))
		conns := &pooltest.Connector{Delay: establishDelay}
		unlimited := pooltest.ReadyPool(t, "127.0.0.1:27018", conns, pool.WithMaxPoolSize(0), pool.WithMaxConnecting(1))
		c := prommetrics.NewCollector()
		if err := c.Add(p, "orders"); err != nil {
			t.Fatal(err)
		}
		if err := c.Add(unlimited, ""); err != nil {
			t.Fatal(err)
		}

		a := pooltest.CheckOut(t, p) // both wait establishDelay for their connection
		b := pooltest.CheckOut(t, p)
		time.Sleep(useTime)
		p.CheckIn(b) // idle, after useTime in use
		pooltest.TimeOut(t, p)
		p.Clear(pool.ClearOptions{Cause: errors.New("server went away")}) // paused
		p.CheckIn(a)                                                      // stale: closed, after establishDelay + useTime in use
		if _, err := p.CheckOut(context.Background()); !errors.Is(err, pool.ErrPoolCleared) {
			t.Fatalf("check-out of a paused pool: %v", err)
		}

		// The other pool: one connection in use, another being established
		// for a check-out, and a second check-out waiting its turn to
		// establish one (maxConnecting is 1).
		x := pooltest.CheckOut(t, unlimited)
		conns.Hold()
		got := make(chan *pool.Conn, 2)
		for range 2 {
			go func() {
				c, _ := unlimited.CheckOut(context.Background())
				got <- c
			}()
		}
		synctest.Wait() // both check-outs wait

		if *update {
			writeExposition(t, c, expositionFile)
		}
		want, err := os.Open(expositionFile)
		if err != nil {
			t.Fatal(err)
		}
		defer want.Close()
		if err := testutil.CollectAndCompare(c, want); err != nil {
			t.Error(err)
		}

		conns.Release()
		for _, conn := range []*pool.Conn{x, <-got, <-got} {
			unlimited.CheckIn(conn)
		}
	})
}

// The metrics follow Prometheus's naming conventions, as its linter checks
// them.
func TestLint(t *testing.T) {
	p := pooltest.ReadyPool(t, "127.0.0.1:27017", &pooltest.Connector{}, pool.WithMaxPoolSize(3))
	c := prommetrics.NewCollector()
	if err := c.Add(p, ""); err != nil {
		t.Fatal(err)
	}
	p.CheckIn(pooltest.CheckOut(t, p))
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("%s: %s", pr.Metric, pr.Text)
	}
	if n := testutil.CollectAndCount(c); n == 0 {
		t.Error("nothing collected: nothing linted")
	}
}

// A pool is collected from Add to Remove, under a unique name.
func TestAddRemove(t *testing.T) {
	p := pooltest.ReadyPool(t, "127.0.0.1:27017", &pooltest.Connector{})
	q := pooltest.ReadyPool(t, "127.0.0.1:27017", &pooltest.Connector{})
	c := prommetrics.NewCollector()
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("%d metrics collected with no pool", n)
	}
	if err := c.Add(p, ""); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		p    *pool.Pool
		name string
		want string
	}{
		{nil, "x", "nil pool"},
		{p, "again", `already collected, as "127.0.0.1:27017"`},
		{q, "", `a pool named "127.0.0.1:27017" is already collected`},
	} {
		err := c.Add(bad.p, bad.name)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Add(%v, %q) = %v, want an error saying %q", bad.p, bad.name, err, bad.want)
		}
	}
	if err := c.Add(q, "secondary"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	wantPools := func(want ...string) {
		t.Helper()
		values := gather(t, reg)
		var got []string
		for k := range values {
			if name, ok := strings.CutPrefix(k, `mongopool_checkins_total{address="127.0.0.1:27017",pool="`); ok {
				got = append(got, strings.TrimSuffix(name, `"}`))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("pools collected: %q, want %q", got, want)
		}
	}
	wantPools("127.0.0.1:27017", "secondary")

	if !c.Remove(p) {
		t.Error("Remove of a collected pool returned false")
	}
	if c.Remove(p) {
		t.Error("Remove of a pool no longer collected returned true")
	}
	wantPools("secondary")
}

// Scrapes run while the pool is busy and pools come and go: each is accepted
// by a pedantic registry (metrics as described, no series twice), and shows
// no more connections than the limit. Run with -race, this also shows that
// collecting shares nothing with the pool unguarded.
func TestScrapeWhileBusy(t *testing.T) {
	p := pooltest.ReadyPool(t, "127.0.0.1:27017", &pooltest.Connector{}, pool.WithMaxPoolSize(2))
	c := prommetrics.NewCollector()
	if err := c.Add(p, "busy"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	const workers, rounds = 4, 200
	pooltest.Busy(t, p, c, pooltest.Load{Workers: workers, Rounds: rounds}, func() {
		values := gather(t, reg)
		var n float64
		for _, state := range []string{"idle", "used", "pending"} {
			n += values[`mongopool_connections{address="127.0.0.1:27017",pool="busy",state="`+state+`"}`]
		}
		if n > 2 {
			t.Fatalf("%v connections, beyond maxPoolSize 2", n)
		}
	})
	values := gather(t, reg)
	if got, want := values[`mongopool_checkouts_total{address="127.0.0.1:27017",pool="busy"}`], float64(workers*rounds); got != want {
		t.Errorf("mongopool_checkouts_total = %v, want %v", got, want)
	}
}

// gather scrapes g and flattens what it gives: the value of each gauge and
// counter, by its name and labels as the text format writes them.
func gather(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetGauge() != nil:
				values[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				values[key] = m.GetCounter().GetValue()
			}
		}
	}
	return values
}
