package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mongopool/mongopool/dashboard"
	"github.com/mongopool/mongopool/internal/pooltest"
	"github.com/mongopool/mongopool/pool"
)

// TestStreamCarriesStats checks that the frames of /events are JSON
// snapshots that carry the pool's Stats: connections by state, the wait
// queue, the totals and the limits.
func TestStreamCarriesStats(t *testing.T) {
	d, srv := newDashboard(t, dashboard.WithInterval(20*time.Millisecond))
	conns := &pooltest.Connector{}
	p := pooltest.ReadyPool(t, "db.example:27017", conns,
		pool.WithMaxPoolSize(4), pool.WithEventHandler(d.EventHandler("orders")))
	if err := d.Add("orders", p); err != nil {
		t.Fatal(err)
	}
	a, b, c := pooltest.CheckOut(t, p), pooltest.CheckOut(t, p), pooltest.CheckOut(t, p)
	defer p.CheckIn(a)
	defer p.CheckIn(c)
	flush(t, p) // the handler has counted the three check-outs

	// Two check-outs wait: one for the connection being established for
	// it, which the connector holds, then one in the queue, as the pool is
	// at maxPoolSize.
	conns.Hold()
	var wg sync.WaitGroup
	defer wg.Wait()
	waiter := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
			defer cancel()
			if c, err := p.CheckOut(ctx); err == nil {
				p.CheckIn(c)
			}
		}()
	}
	st := openStream(t, srv)
	waiter()
	st.until("a connection pending", func(s *snapshotJSON) bool { return s.pool("orders").Pending == 1 })
	waiter()
	s := st.until("a connection pending and two check-outs waiting", func(s *snapshotJSON) bool {
		ps := s.pool("orders")
		return ps.Pending == 1 && ps.Waiting == 2
	})
	ps := s.pool("orders")
	want := p.Stats()
	if ps.Address != "db.example:27017" || ps.State != "ready" {
		t.Errorf("address %q, state %q; want db.example:27017, ready", ps.Address, ps.State)
	}
	if ps.Idle != want.Available || ps.InUse != want.InUse || ps.Pending != want.Pending || ps.Total != want.Total {
		t.Errorf("idle %d, in use %d, pending %d, total %d; Stats says %d, %d, %d, %d",
			ps.Idle, ps.InUse, ps.Pending, ps.Total, want.Available, want.InUse, want.Pending, want.Total)
	}
	if ps.Idle != 0 || ps.InUse != 3 || ps.Total != 4 {
		t.Errorf("idle %d, in use %d, total %d; want 0, 3 and 4", ps.Idle, ps.InUse, ps.Total)
	}
	if ps.Totals.CheckedOut != want.CheckedOut || ps.Totals.Created != want.Created {
		t.Errorf("totals %+v; Stats says %d checked out, %d created", ps.Totals, want.CheckedOut, want.Created)
	}
	if got := ps.option("maxPoolSize"); got != "4" {
		t.Errorf("option maxPoolSize %q, want 4", got)
	}
	if !ps.Listening || ps.EventCounts["ConnectionCheckedOut"] < 3 {
		t.Errorf("listening %v, event counts %v; want the handler's events", ps.Listening, ps.EventCounts)
	}

	conns.Release()
	p.CheckIn(b)
	s = st.until("the waiting check-outs served", func(s *snapshotJSON) bool {
		ps := s.pool("orders")
		return ps.Waiting == 0 && ps.Pending == 0 && ps.Idle == 2 && ps.Totals.CheckedOut == 5
	})
	// A frame after another has rates.
	ps = s.pool("orders")
	if ps.CheckOutsPerSecond == nil || ps.EventsPerSecond == nil || *ps.EventsPerSecond <= 0 {
		t.Errorf("rates after frames before: check-outs/s %v, events/s %v", ptrString(ps.CheckOutsPerSecond), ptrString(ps.EventsPerSecond))
	}
}

// TestWindowedPercentiles checks that the wait and establishment percentiles
// cover the check-outs since the previous snapshot, not the pool's whole life.
func TestWindowedPercentiles(t *testing.T) {
	const establish = 20 * time.Millisecond
	d, srv := newDashboard(t)
	p := pooltest.ReadyPool(t, "db.example:27017", &pooltest.Connector{Delay: establish})
	if err := d.Add("p", p); err != nil {
		t.Fatal(err)
	}
	// Many check-outs served at once by an idle connection: a wait of 0.
	p.CheckIn(pooltest.CheckOut(t, p))
	for range 100 {
		p.CheckIn(pooltest.CheckOut(t, p))
	}
	s0 := snapshotOf(t, srv)
	first := s0.pool("p")
	if first.Wait.Samples != 0 || first.Wait.P50 != nil {
		t.Errorf("first snapshot: wait %+v; want no window yet", first.Wait)
	}
	if first.WaitAllTime.Samples != 101 {
		t.Errorf("first snapshot: %d waits all told, want 101", first.WaitAllTime.Samples)
	}

	// One more connection, established while its check-out waits.
	held := pooltest.CheckOut(t, p)
	slow := pooltest.CheckOut(t, p)
	p.CheckIn(held)
	p.CheckIn(slow)
	s1 := snapshotOf(t, srv)
	s := s1.pool("p")
	if s.Wait.Samples != 2 {
		t.Fatalf("wait over the window: %d samples, want 2; %+v", s.Wait.Samples, s.Wait)
	}
	// p99 of {0, ≥20ms} is in the bucket of the slow one; the median of the
	// pool's life is 0.
	if s.Wait.P99 == nil || *s.Wait.P99 < float64(pool.HistogramBound(13))/1e6 {
		t.Errorf("wait p99 over the window %v ms, want at least %v", ptrString(s.Wait.P99), pool.HistogramBound(13))
	}
	if s.WaitAllTime.P50 == nil || *s.WaitAllTime.P50 > 0.001 {
		t.Errorf("wait p50 since creation %v ms, want about 0", ptrString(s.WaitAllTime.P50))
	}
	if s.Establish.Samples != 1 || s.Establish.P50 == nil || *s.Establish.P50 < float64(pool.HistogramBound(13))/1e6 {
		t.Errorf("establishment over the window %+v (p50 %v ms), want 1 sample of at least %v", s.Establish, ptrString(s.Establish.P50), establish)
	}
	if s.CheckOutsPerSecond == nil || *s.CheckOutsPerSecond <= 0 {
		t.Errorf("check-outs per second %v, want some", ptrString(s.CheckOutsPerSecond))
	}
	if s.EventsPerSecond != nil || s.Listening {
		t.Errorf("events per second %v, listening %v, for a pool without the dashboard's handler", ptrString(s.EventsPerSecond), s.Listening)
	}
}

func ptrString(f *float64) any {
	if f == nil {
		return "null"
	}
	return *f
}

// TestMetrics checks that /metrics serves the pools' metrics in Prometheus'
// text format.
func TestMetrics(t *testing.T) {
	d, srv := newDashboard(t)
	p := pooltest.ReadyPool(t, "db.example:27017", &pooltest.Connector{})
	if err := d.Add("orders", p); err != nil {
		t.Fatal(err)
	}
	c := pooltest.CheckOut(t, p)
	defer p.CheckIn(c)
	resp, body := get(t, srv, "/metrics", http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the text format", ct)
	}
	for _, want := range []string{
		`mongopool_connections{address="db.example:27017",pool="orders",state="used"} 1`,
		`mongopool_checkouts_total{address="db.example:27017",pool="orders"} 1`,
		`# TYPE mongopool_checkout_wait_seconds histogram`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no line %q:\n%s", want, body)
		}
	}
}

// TestEventsKeptBounded checks that the lists of recent events keep the
// number of events asked for, the newest, while the counts count them all,
// and that a storm of check-outs does not push the other events out.
func TestEventsKeptBounded(t *testing.T) {
	const kept, rounds = 10, 50
	d, srv := newDashboard(t, dashboard.WithEventsKept(kept))
	p := pooltest.ReadyPool(t, "db.example:27017", &pooltest.Connector{}, pool.WithEventHandler(d.EventHandler("p")))
	if err := d.Add("p", p); err != nil {
		t.Fatal(err)
	}
	for range rounds {
		p.CheckIn(pooltest.CheckOut(t, p))
	}
	s := waitSnapshot(t, srv, "every event listed", func(s *snapshotJSON) bool {
		ps := s.pool("p")
		return ps.EventCounts["ConnectionCheckedIn"] == rounds && allListed(ps)
	})
	ps := s.pool("p")
	if len(ps.CheckOuts) != kept {
		t.Errorf("%d check-out events listed, want %d", len(ps.CheckOuts), kept)
	}
	if !slices.IsSortedFunc(ps.CheckOuts, func(a, b eventJSON) int { return int(b.Seq) - int(a.Seq) }) {
		t.Errorf("check-out events not newest first: %+v", ps.CheckOuts)
	}
	if got, want := types(ps.Events), []string{"ConnectionReady", "ConnectionCreated"}; !slices.Equal(got, want) {
		t.Errorf("events of connections %v, want %v", got, want)
	}
	if got, want := types(ps.PoolEvents), []string{"ConnectionPoolReady", "ConnectionPoolCreated"}; !slices.Equal(got, want) {
		t.Errorf("events of the pool %v, want %v", got, want)
	}
	if n := ps.EventCounts["ConnectionCheckOutStarted"]; n != rounds {
		t.Errorf("%d ConnectionCheckOutStarted counted, want %d", n, rounds)
	}
	if ps.DroppedEvents != 0 {
		t.Errorf("%d events dropped, want none", ps.DroppedEvents)
	}
}

// TestClearNotPushedOut checks that the failed check-outs that follow a clear,
// which come by the thousand when a workload retries at once, do not push the
// clear out of the recent events.
func TestClearNotPushedOut(t *testing.T) {
	const kept = 5
	d, srv := newDashboard(t, dashboard.WithEventsKept(kept))
	p := pooltest.ReadyPool(t, "db.example:27017", &pooltest.Connector{}, pool.WithEventHandler(d.EventHandler("p")))
	if err := d.Add("p", p); err != nil {
		t.Fatal(err)
	}
	p.CheckIn(pooltest.CheckOut(t, p))
	if err := p.Clear(pool.ClearOptions{Cause: errors.New("test")}); err != nil {
		t.Fatal(err)
	}
	for range 10 * kept {
		if _, err := p.CheckOut(context.Background()); err == nil {
			t.Fatal("a check-out of a paused pool succeeded")
		}
	}
	s := waitSnapshot(t, srv, "the failed check-outs listed", func(s *snapshotJSON) bool {
		return s.pool("p").EventCounts["ConnectionCheckOutFailed"] == 10*kept && allListed(s.pool("p"))
	})
	if got := s.pool("p").Events; len(got) != kept || got[0].Type != "ConnectionCheckOutFailed" {
		t.Errorf("events of connections %v, want the last %d, newest a failed check-out", types(got), kept)
	}
	if got := types(s.pool("p").PoolEvents); !slices.Contains(got, "ConnectionPoolCleared") {
		t.Errorf("events of the pool %v: the clear is not among them", got)
	}
}

// TestStreamListsEachEventOnce checks that the frames of /events carry the
// events that came since the previous frame, each once, and that a clear
// appears.
func TestStreamListsEachEventOnce(t *testing.T) {
	d, srv := newDashboard(t, dashboard.WithInterval(10*time.Millisecond))
	p := pooltest.ReadyPool(t, "db.example:27017", &pooltest.Connector{}, pool.WithEventHandler(d.EventHandler("p")))
	if err := d.Add("p", p); err != nil {
		t.Fatal(err)
	}
	st := openStream(t, srv)
	seen := map[uint64]bool{}
	var clears int
	note := func(s *snapshotJSON) {
		ps := s.pool("p")
		for _, e := range slices.Concat(ps.PoolEvents, ps.Events, ps.CheckOuts) {
			if seen[e.Seq] {
				t.Fatalf("event %d (%s) listed twice", e.Seq, e.Type)
			}
			seen[e.Seq] = true
			if e.Type == "ConnectionPoolCleared" {
				clears++
			}
		}
	}
	for i := range 20 {
		p.CheckIn(pooltest.CheckOut(t, p))
		if i == 10 {
			if err := p.Clear(pool.ClearOptions{Cause: errors.New("test")}); err != nil {
				t.Fatal(err)
			}
			if err := p.Ready(); err != nil {
				t.Fatal(err)
			}
		}
		s := st.next()
		note(&s)
	}
	st.until("every event listed", func(s *snapshotJSON) bool {
		note(s)
		return len(seen) == int(sum(s.pool("p").EventCounts))
	})
	if clears != 1 {
		t.Errorf("ConnectionPoolCleared listed %d times, want once", clears)
	}
}

// allListed reports whether the snapshot of ps was taken after the dashboard
// had listed every event its handler counted: the events are numbered in the
// order the dashboard lists them, so with one pool on the dashboard and none
// dropped, the newest listed is numbered with the count of them all. A
// snapshot taken while events are being listed may show fewer than are kept:
// those listed after it began wait for the next one.
func allListed(ps *poolJSON) bool {
	var newest uint64
	for _, e := range slices.Concat(ps.PoolEvents, ps.Events, ps.CheckOuts) {
		newest = max(newest, e.Seq)
	}
	return ps.DroppedEvents == 0 && newest == uint64(sum(ps.EventCounts))
}

func types(events []eventJSON) []string {
	var ts []string
	for _, e := range events {
		ts = append(ts, e.Type)
	}
	return ts
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestRemove checks that a pool taken off the dashboard disappears from the
// snapshots and the metrics, and so does a pool its source no longer lists.
func TestRemove(t *testing.T) {
	d, srv := newDashboard(t)
	a := pooltest.ReadyPool(t, "a.example:27017", &pooltest.Connector{})
	b := pooltest.ReadyPool(t, "b.example:27017", &pooltest.Connector{})
	c := pooltest.ReadyPool(t, "c.example:27017", &pooltest.Connector{})
	if err := d.Add("a", a); err != nil {
		t.Fatal(err)
	}
	if err := d.Add("b", b); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	listed := []*pool.Pool{c}
	if err := d.AddSource("cluster", func() []*pool.Pool { mu.Lock(); defer mu.Unlock(); return slices.Clone(listed) }); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		var ns []string
		s := snapshotOf(t, srv)
		for _, p := range s.Pools {
			ns = append(ns, p.Name)
		}
		return ns
	}
	if got, want := names(), []string{"a", "b", "cluster/c.example:27017"}; !slices.Equal(got, want) {
		t.Fatalf("pools %v, want %v", got, want)
	}
	if !d.Remove("a") {
		t.Error("Remove(a) found no pool")
	}
	if d.Remove("a") {
		t.Error("a second Remove(a) found a pool")
	}
	mu.Lock()
	listed = nil
	mu.Unlock()
	if got, want := names(), []string{"b"}; !slices.Equal(got, want) {
		t.Errorf("pools %v, want %v", got, want)
	}
	_, body := get(t, srv, "/metrics", http.StatusOK)
	if strings.Contains(body, `pool="a"`) || strings.Contains(body, "cluster/") {
		t.Errorf("/metrics still has a pool taken off:\n%s", body)
	}
	if !strings.Contains(body, `pool="b"`) {
		t.Errorf("/metrics lost pool b:\n%s", body)
	}
	if !d.Remove("cluster") {
		t.Error("Remove(cluster) found no source")
	}
}

// TestClosedPool checks that a closed pool is shown as closed, by every path.
func TestClosedPool(t *testing.T) {
	d, srv := newDashboard(t, dashboard.WithInterval(10*time.Millisecond))
	p := pooltest.ReadyPool(t, "db.example:27017", &pooltest.Connector{}, pool.WithEventHandler(d.EventHandler("p")))
	if err := d.Add("p", p); err != nil {
		t.Fatal(err)
	}
	p.CheckIn(pooltest.CheckOut(t, p))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, srv, "the pool closed", func(s *snapshotJSON) bool {
		ps := s.pool("p")
		return ps.State == "closed" && len(ps.PoolEvents) > 0 && ps.PoolEvents[0].Type == "ConnectionPoolClosed"
	})
	openStream(t, srv).until("the pool closed", func(s *snapshotJSON) bool { return s.pool("p").State == "closed" })
	_, body := get(t, srv, "/metrics", http.StatusOK)
	if !strings.Contains(body, `mongopool_state{address="db.example:27017",pool="p",state="closed"} 1`) {
		t.Errorf("/metrics does not show the pool closed:\n%s", body)
	}
}

// TestStreamEnds checks that a stream of /events ends when its client goes
// away and when the dashboard is closed.
func TestStreamEnds(t *testing.T) {
	d, srv := newDashboard(t, dashboard.WithInterval(10*time.Millisecond))
	gone := openStream(t, srv)
	gone.next()
	gone.close() // the client goes away; the server's Close would hang on a stream left

	st := openStream(t, srv)
	st.next()
	d.Close()
	st.ended()
	// A closed dashboard refuses new streams rather than serve one that
	// never sends.
	get(t, srv, "/events", http.StatusServiceUnavailable)
}

// TestTooManyStreams checks that the dashboard serves at most MaxStreams
// streams at once.
func TestTooManyStreams(t *testing.T) {
	_, srv := newDashboard(t, dashboard.WithInterval(time.Second))
	for range dashboard.MaxStreams {
		openStream(t, srv).next()
	}
	get(t, srv, "/events", http.StatusServiceUnavailable)
}

// TestPaths checks what the dashboard serves beside the streams.
func TestPaths(t *testing.T) {
	_, srv := newDashboard(t)
	resp, body := get(t, srv, "/", http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("/: Content-Type %q", ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("/: Content-Security-Policy %q", csp)
	}
	for _, ref := range []string{"static/vendor/uplot/uPlot.iife.min.js", "static/dashboard.js", "static/dashboard.css", "static/vendor/uplot/uPlot.min.css"} {
		if !strings.Contains(body, ref) {
			t.Errorf("the page does not load %s", ref)
		}
		resp, _ := get(t, srv, "/"+ref, http.StatusOK)
		if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "javascript") && !strings.Contains(ct, "css") {
			t.Errorf("/%s: Content-Type %q", ref, ct)
		}
	}
	get(t, srv, "/static/vendor/uplot/LICENSE", http.StatusOK)
	get(t, srv, "/nothing", http.StatusNotFound)
	get(t, srv, "/static/nothing.js", http.StatusNotFound)
	// The page's files are served, not listed.
	get(t, srv, "/static/", http.StatusNotFound)
	get(t, srv, "/static/vendor/uplot/", http.StatusNotFound)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/snapshot", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /snapshot: status %d, want 405", resp.StatusCode)
	}
}

// TestMounted checks that the dashboard works under a prefix, as the
// package documentation mounts it.
func TestMounted(t *testing.T) {
	d, err := dashboard.New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mux := http.NewServeMux()
	mux.Handle("/pools/", http.StripPrefix("/pools", d))
	srv := httptestServer(t, mux)
	get(t, srv, "/pools/", http.StatusOK)
	get(t, srv, "/pools/snapshot", http.StatusOK)
	get(t, srv, "/pools/static/dashboard.js", http.StatusOK)
}

// TestBadInput checks the errors of invalid names, pools and options.
func TestBadInput(t *testing.T) {
	if _, err := dashboard.New(dashboard.WithInterval(0)); err == nil || !strings.Contains(err.Error(), "interval") {
		t.Errorf("WithInterval(0): %v", err)
	}
	if _, err := dashboard.New(dashboard.WithEventsKept(0)); err == nil || !strings.Contains(err.Error(), "events kept") {
		t.Errorf("WithEventsKept(0): %v", err)
	}
	if _, err := dashboard.New(dashboard.WithEventsKept(dashboard.MaxKept + 1)); err == nil {
		t.Error("WithEventsKept(MaxKept+1): no error")
	}
	d, _ := newDashboard(t)
	p := pooltest.ReadyPool(t, "db.example:27017", &pooltest.Connector{})
	for _, name := range []string{"", "a/b", "tab\there", strings.Repeat("x", dashboard.MaxNameLen+1)} {
		if err := d.Add(name, p); err == nil {
			t.Errorf("Add(%q): no error", name)
		}
		if err := d.AddSource(name, func() []*pool.Pool { return nil }); err == nil {
			t.Errorf("AddSource(%q): no error", name)
		}
	}
	if err := d.Add("p", nil); err == nil {
		t.Error("Add of a nil pool: no error")
	}
	if err := d.AddSource("s", nil); err == nil {
		t.Error("AddSource of a nil function: no error")
	}
	if err := d.Add("p", p); err != nil {
		t.Fatal(err)
	}
	if err := d.Add("q", p); err == nil || !strings.Contains(err.Error(), `already on the dashboard, as "p"`) {
		t.Errorf("Add of a pool already added: %v", err)
	}
	if err := d.Add("p", pooltest.ReadyPool(t, "other.example:27017", &pooltest.Connector{})); err == nil || !strings.Contains(err.Error(), `"p"`) {
		t.Errorf("Add under a name taken: %v", err)
	}
	if err := d.AddSource("p", func() []*pool.Pool { return nil }); err == nil {
		t.Error("AddSource under a pool's name: no error")
	}
}

// TestHeadEvents checks that a HEAD of /events answers the headers and ends,
// rather than stream nothing for ever.
func TestHeadEvents(t *testing.T) {
	_, srv := newDashboard(t, dashboard.WithInterval(10*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, srv.URL+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("HEAD /events: status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The stream's handler has returned: the server's Close, which waits
	// for handlers, would hang otherwise; and a new request on the same
	// connection is served.
	get(t, srv, "/snapshot", http.StatusOK)
}
