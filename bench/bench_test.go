package bench

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/mongopool/mongopool/internal/leakcheck"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
)

// TestMain fails the run if a goroutine outlives the tests: every pool,
// client and server a shape starts, the peers' included, has to be closed
// when it ends.
// Run with loadWorkerEnv=1, the test binary is the proxy benchmark's load
// worker, as the proxybench command is with -worker.
func TestMain(m *testing.M) {
	if os.Getenv(loadWorkerEnv) == "1" {
		os.Exit(RunLoadWorker(os.Stdin, os.Stdout))
	}
	leakcheck.Main(m)
}

// TestSmoke runs every shape once on a tiny scale: the suite must keep
// working, whatever the figures. It also checks what holds at any scale:
// mongopool never has more establishments in flight than maxConnecting.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts FerretDB")
	}
	s := Smoke()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	shapes := map[string]bool{}
	for _, r := range s.Report.Rows {
		shapes[r.Shape] = true
		if r.Shape == "4 storm" {
			// The hand-over order comes from the events of the pools
			// that emit them as they hand over, and only from those.
			v := figValue(t, r, "most overtaken, as handed over")
			if _, err := strconv.Atoi(v); (err == nil) != eventsAtHandOver[r.Kind] {
				t.Errorf("%s, %s: most overtaken as handed over %q", r.Case, r.Kind, v)
			}
			fig(t, r, "most overtaken, as returned")
		}
		if r.Shape == "4 storm" && r.Kind == Mongopool {
			mc := 2
			if strings.HasSuffix(r.Case, "maxConnecting 10") {
				mc = 10
			}
			if peak := fig(t, r, "peak establishing"); peak > mc {
				t.Errorf("%s: %d establishments in flight, maxConnecting is %d", r.Case, peak, mc)
			}
			if fig(t, r, "created") == 0 {
				t.Errorf("%s: the storm created no connection", r.Case)
			}
		}
	}
	for _, want := range []string{"1 serial", "2 parallel", "3 contended", "4 storm", "5 warm-up", "6 ping", "7 monitoring"} {
		if !shapes[want] {
			t.Errorf("no figures for shape %s", want)
		}
	}
	if len(s.Report.Checks) != 8 {
		t.Errorf("%d targets checked, want 8 (1, 2, 3, 4 twice, 5, 6 twice)", len(s.Report.Checks))
	}
	var sb strings.Builder
	s.Report.Write(&sb)
	t.Log(sb.String())
	if !strings.Contains(sb.String(), "| mongopool |") || !strings.Contains(sb.String(), "## Targets") {
		t.Errorf("the report lacks the tables or the targets:\n%s", sb.String())
	}
}

// fig returns the integer figure name of r.
func fig(t *testing.T, r Row, name string) int {
	t.Helper()
	for _, f := range r.Figs {
		if f.Name == name {
			n, err := strconv.Atoi(f.Value)
			if err != nil {
				t.Fatalf("%s: %q is not an integer", name, f.Value)
			}
			return n
		}
	}
	t.Fatalf("row %s/%s/%s has no figure %q", r.Shape, r.Case, r.Kind, name)
	return 0
}

// Both drivers' events map to the same common types: mongopool's through
// their String, which must be the specification's name, as the official
// driver's event types are.
func TestEvTypes(t *testing.T) {
	for _, c := range []struct {
		mongopool pool.EventType
		official  string
		want      EvType
	}{
		{pool.ConnectionCheckOutStarted, event.ConnectionCheckOutStarted, EvCheckOutStarted},
		{pool.ConnectionCheckedOut, event.ConnectionCheckedOut, EvCheckedOut},
		{pool.ConnectionCheckedIn, event.ConnectionCheckedIn, EvCheckedIn},
		{pool.ConnectionCreated, event.ConnectionCreated, EvCreated},
		{pool.ConnectionReady, event.ConnectionReady, EvReady},
		{pool.ConnectionClosed, event.ConnectionClosed, EvClosed},
		{pool.ConnectionCheckOutFailed, event.ConnectionCheckOutFailed, EvOther},
		{pool.PoolCleared, event.ConnectionPoolCleared, EvOther},
	} {
		if got := mongopoolEvTypes[c.mongopool]; got != c.want {
			t.Errorf("mongopool's %v: %d, want %d", c.mongopool, got, c.want)
		}
		if got := evTypeOf(c.official); got != c.want {
			t.Errorf("the official driver's %s: %d, want %d", c.official, got, c.want)
		}
	}
}

func TestFIFO(t *testing.T) {
	cases := []struct {
		name          string
		start, served []int
		inverted      float64
		most          int
	}{
		{"in order", []int{0, 1, 2, 3}, []int{0, 1, 2, 3}, 0, 0},
		{"last first", []int{0, 1, 2, 3}, []int{1, 2, 3, 0}, 0.5, 1},
		{"reversed", []int{0, 1, 2}, []int{2, 1, 0}, 1, 2},
		{"one overtaken by two", []int{0, 1, 2, 3}, []int{2, 0, 1, 3}, 2.0 / 6, 2},
		{"listed in any order", []int{3, 1, 2, 0}, []int{3, 1, 2, 0}, 0, 0},
	}
	for _, c := range cases {
		inv, most, err := fifo(c.start, c.served)
		if err != nil {
			t.Fatal(err)
		}
		if inv != c.inverted || most != c.most {
			t.Errorf("%s: fifo = %v, %d; want %v, %d", c.name, inv, most, c.inverted, c.most)
		}
	}
	if _, _, err := fifo([]int{0, 1}, []int{1, 1}); err == nil {
		t.Error("two check-outs served at the same rank: no error")
	}
}

// A CheckedOut event is matched to its check-out by connection and use,
// whichever goroutine delivers it, and whenever.
func TestHandOver(t *testing.T) {
	rec := newRecorder(4, -1)
	// Connection 1 serves check-outs 2 then 0, connection 2 check-outs 3
	// then 1; the events come 1, 2, 2, 1.
	cos := []checkOut{{use: useKey(1, 2)}, {use: useKey(2, 2)}, {use: useKey(1, 1)}, {use: useKey(2, 1)}}
	for _, id := range []int64{1, 2, 2, 1} {
		rec.event(Ev{EvCheckOutStarted, 0})
		rec.event(Ev{EvCheckedOut, id})
	}
	ranks, err := rec.handOver(cos)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{3, 2, 0, 1}; !slices.Equal(ranks, want) {
		t.Errorf("ranks %v, want %v", ranks, want)
	}
	cos[0].use = useKey(1, 3) // a use the events never showed
	if _, err := rec.handOver(cos); err == nil {
		t.Error("a check-out without its CheckedOut event: no error")
	}
	rec.event(Ev{EvCheckOutStarted, 0})
	if _, err := rec.handOver(cos); err == nil {
		t.Error("more CheckOutStarted events than check-outs: no error")
	}
}

func TestRankShift(t *testing.T) {
	if got := rankShift([]int{0, 1, 2, 3}, []int{0, 1, 2, 3}); got != 0 {
		t.Errorf("in order: shift %d, want 0", got)
	}
	if got := rankShift([]int{0, 1, 2, 3}, []int{3, 0, 1, 2}); got != 3 {
		t.Errorf("first served last: shift %d, want 3", got)
	}
}

func TestBursts(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	n, largest, last := bursts(ms(1, 2, 3, 100, 101, 200, 202, 205), 50*time.Millisecond)
	if n != 3 || largest != 3 || last != 5*time.Millisecond {
		t.Errorf("bursts = %d, %d, %s; want 3, 3, 5ms", n, largest, last)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	l := summarize(ds)
	if l.P50 != 50 || l.P99 != 99 || l.Max != 100 {
		t.Errorf("summarize(1..100) = %+v, want p50 50, p99 99, max 100", l)
	}
}

// The micro-benchmarks, for `go test -bench .`: each pool against the same
// test server.

func benchServer(b *testing.B) string {
	srv, err := mongotest.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	return srv.Addr()
}

func benchPools(b *testing.B, cfg Config, warm int, kinds []Kind, w workload) {
	cfg.Addr = benchServer(b)
	for _, k := range kinds {
		b.Run(string(k), func(b *testing.B) {
			p, err := NewPool(k, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			if err := warmUp(p, warm); err != nil {
				b.Fatal(err)
			}
			fn := flushed(p, w(p)) // the events it caused delivered, whichever the pool
			b.ReportAllocs()
			b.ResetTimer()
			if err := fn(b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func BenchmarkSerial(b *testing.B) {
	benchPools(b, Config{MaxPoolSize: 100}, 1, allKinds, serial)
}

func BenchmarkSerialEvents(b *testing.B) {
	benchPools(b, Config{MaxPoolSize: 100, Events: func(Ev) {}}, 1, []Kind{Mongopool, Official}, serial)
}

func BenchmarkParallel(b *testing.B) {
	for _, g := range []int{runtime.GOMAXPROCS(0), 64} {
		b.Run(map[bool]string{true: "gomaxprocs", false: "64"}[g != 64], func(b *testing.B) {
			benchPools(b, Config{MaxPoolSize: 100}, g, allKinds, spread(g))
		})
	}
}

func BenchmarkContended(b *testing.B) {
	benchPools(b, Config{MaxPoolSize: 4}, 4, allKinds, spread(contendedGoroutines))
}

func BenchmarkPing(b *testing.B) {
	addr := benchServer(b)
	for _, k := range []Kind{Mongopool, Official} {
		b.Run(string(k), func(b *testing.B) {
			c, err := newPinger(k, addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.close()
			fn := pings(c, 8)
			if err := fn(32); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := fn(b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkStorm runs shape 4 (maxConnecting 10) once per iteration, for
// profiling; the figures that matter are the suite's.
func BenchmarkStorm(b *testing.B) {
	for _, k := range []Kind{Mongopool, Official} {
		b.Run(string(k), func(b *testing.B) {
			s := Full()
			s.Ferret = false
			if err := s.Start(); err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var wall time.Duration
			for range b.N {
				r, err := s.storm(k, 10)
				if err != nil {
					b.Fatal(err)
				}
				wall += r.wall
			}
			b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "wall-ms")
		})
	}
}
