package main

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mongopool/mongopool/pool"
)

// waits returns a histogram of check-out waits with n samples in each of
// the buckets given, bucket i holding the samples above 2^(i-1)µs and up to
// 2^iµs.
func waits(buckets map[int]uint64) pool.Histogram {
	var h pool.Histogram
	for i, n := range buckets {
		h.Counts[i] = n
		h.Count += n
	}
	return h
}

// busyPool is a pool in the middle of a run: 10 connections of maxPoolSize
// 20 (6 in use, 3 idle, 1 being established), 7 check-outs waiting. Of its
// 100 waits, 50 are in (512µs, 1024µs], 40 in (2048µs, 4096µs] and 10 in
// (8192µs, 16384µs]: p50 1024µs, p90 4096µs, p99 15.6ms once interpolated.
// Its establishments: all 4 in (256µs, 512µs], p50 384µs.
func busyPool() pool.Stats {
	return pool.Stats{
		Address: "127.0.0.1:27017", State: "ready",
		Total: 10, Available: 3, Pending: 1, InUse: 6, Waiting: 7,
		MaxPoolSize: 20, CheckedOut: 1500,
		CheckOutWait: waits(map[int]uint64{10: 50, 12: 40, 14: 10}),
		Establish:    waits(map[int]uint64{9: 4}),
	}
}

// The view of one pool, at 120 columns: the title, the columns, and the
// pool's line with its check-out rate over the window, its waits, its
// establishments and a bar of its connections against maxPoolSize.
func TestRenderViewOnePool(t *testing.T) {
	then := pool.Stats{CheckedOut: 500} // a second before, 1000 check-outs less
	s := viewSnapshot{
		title: "slow", elapsed: 2500 * time.Millisecond, limit: 5 * time.Second, opsRate: 987.4,
		window: time.Second,
		pools:  []viewPool{{addr: "127.0.0.1:27017", now: busyPool(), then: then}},
	}
	got := strings.Join(renderView(s, 120), "\n")
	want := "" +
		"mongopool slow  2.5s of 5s  987 ops/s\n" +
		"pool                  in use  idle  pend  queue checkouts/s wait p50      p90      p99  est p50  connections\n" +
		"127.0.0.1:27017            6     3     1      7        1000   1.02ms    4.1ms   15.6ms    384µs  [#####==+.......] 10/20"
	if got != want {
		t.Errorf("view:\n%s\nwant:\n%s", got, want)
	}
}

// The view of a client's pools: the topology in the title, and a column of
// the servers' types. A pool without a window yet (the first frame) has no
// rate, and one without samples no percentiles.
func TestRenderViewClient(t *testing.T) {
	idle := pool.Stats{Total: 2, Available: 2, MaxPoolSize: 10}
	s := viewSnapshot{
		title: "failover", elapsed: time.Second, limit: 2 * time.Second, opsRate: 12,
		topology: "ReplicaSetWithPrimary",
		pools: []viewPool{
			{addr: "127.0.0.1:1001", typ: "RSPrimary", now: busyPool()},
			{addr: "127.0.0.1:1002", typ: "RSSecondary", now: idle},
		},
	}
	got := strings.Join(renderView(s, 130), "\n")
	want := "" +
		"mongopool failover  1.0s of 2s  12 ops/s  topology ReplicaSetWithPrimary\n" +
		"pool                  type        in use  idle  pend  queue checkouts/s wait p50      p90      p99  est p50  connections\n" +
		"127.0.0.1:1001        RSPrimary        6     3     1      7           -   1.02ms    4.1ms   15.6ms    384µs  [####==+......] 10/20\n" +
		"127.0.0.1:1002        RSSecondary      0     2     0      0           -        -        -        -        -  [===...........] 2/10"
	if got != want {
		t.Errorf("view:\n%s\nwant:\n%s", got, want)
	}
}

// However narrow the terminal, no line is wider than it: the bar goes
// first, then the lines are cut, so that the block keeps one line per row
// and redraws in place.
func TestRenderViewNarrow(t *testing.T) {
	s := viewSnapshot{title: "storm", elapsed: time.Second, limit: time.Minute, pools: []viewPool{{addr: "127.0.0.1:27017", now: busyPool()}}}
	for _, width := range []int{0, 20, 60, 100, 101, 200} {
		lines := renderView(s, width)
		max := width
		if width == 0 {
			max = defaultWidth
		}
		if len(lines) != 3 {
			t.Fatalf("width %d: %d lines, want 3", width, len(lines))
		}
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); n > max {
				t.Errorf("width %d: line of %d columns: %q", width, n, l)
			}
		}
	}
	if l := renderView(s, 60)[2]; strings.Contains(l, "[") {
		t.Errorf("at 60 columns, want no room for the bar: %q", l)
	}
	if l := renderView(s, 200)[2]; !strings.HasSuffix(l, "] 10/20") || strings.Count(l, "#")+strings.Count(l, "=")+strings.Count(l, "+")+strings.Count(l, ".") < maxBar {
		t.Errorf("at 200 columns, want the widest bar: %q", l)
	}
}

// The bar's parts are the connections in use, idle and pending against
// maxPoolSize, and always fill the bar exactly; without maxPoolSize they are
// scaled to the connections there are.
func TestConnectionsBar(t *testing.T) {
	for _, tc := range []struct {
		s    pool.Stats
		room int
		want string
	}{
		// 30 columns, less "10/20" and "[] ": 22 cells, 22/20 a connection.
		{pool.Stats{Total: 10, InUse: 6, Available: 3, Pending: 1, MaxPoolSize: 20}, 30, "[#######===+...........] 10/20"},
		{pool.Stats{Total: 0, MaxPoolSize: 10}, 30, "[" + strings.Repeat(".", 23) + "] 0/10"},
		// 14 cells for 3 connections: the parts end at 4.7, 9.3 and 14 cells.
		{pool.Stats{Total: 3, InUse: 1, Available: 1, Pending: 1, MaxPoolSize: 3}, 20, "[#####====+++++] 3/3"},
		{pool.Stats{Total: 4, InUse: 4}, 20, "[################] 4"},
		{pool.Stats{Total: 4, InUse: 4, MaxPoolSize: 4}, 200, "[" + strings.Repeat("#", maxBar) + "] 4/4"},
		{pool.Stats{Total: 4, InUse: 4, MaxPoolSize: 4}, 13, "4/4"}, // 7 cells: too few
		{pool.Stats{}, 30, "0"},
	} {
		if got := connectionsBar(tc.s, tc.room); got != tc.want {
			t.Errorf("connectionsBar(%+v, %d) = %q, want %q", tc.s, tc.room, got, tc.want)
		}
	}
}

// shortDur keeps three significant digits and moves to the next unit
// rather than print 1000 of one.
func TestShortDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                          "0ns",
		999:                        "999ns",
		time.Microsecond:           "1µs",
		1234 * time.Nanosecond:     "1.23µs",
		999499 * time.Nanosecond:   "999µs",
		999600 * time.Nanosecond:   "1ms",
		15564800 * time.Nanosecond: "15.6ms",
		999600 * time.Microsecond:  "1s",
		90 * time.Second:           "90s",
		1000 * time.Second:         "1000s",
		12345 * time.Second:        "12345s",
	} {
		if got := shortDur(d); got != want {
			t.Errorf("shortDur(%v) = %q, want %q", d, got, want)
		}
	}
}

// The waits of the window are those of now less those of then; a then that
// is not an earlier snapshot of the same pool counts for nothing.
func TestHistogramSince(t *testing.T) {
	then := waits(map[int]uint64{3: 5})
	now := waits(map[int]uint64{3: 7, 9: 2})
	d := histogramSince(now, then)
	if d.Count != 4 || d.Counts[3] != 2 || d.Counts[9] != 2 {
		t.Errorf("since: %+v, want 2 in bucket 3 and 2 in bucket 9", d)
	}
	if d := histogramSince(then, now); d.Count != then.Count {
		t.Errorf("a then with more samples: %+v, want now whole", d)
	}
}

// The live view compares each pool with its snapshot of about a second
// before: the rate is over that window, whatever the frames in between.
func TestLiveViewWindow(t *testing.T) {
	v := &liveView{title: "storm", limit: 5 * time.Second}
	t0 := time.Unix(1000, 0)
	frame := func(at time.Duration, checkedOut int64) string {
		st := busyPool()
		st.CheckedOut = checkedOut
		lines := v.frame(t0.Add(at), at, 0, []viewPool{{addr: st.Address, now: st}}, 200)
		return strings.Fields(lines[2])[5] // the checkouts/s column
	}
	if got := frame(0, 0); got != "-" {
		t.Errorf("first frame: rate %q, want none yet", got)
	}
	if got := frame(250*time.Millisecond, 100); got != "400" {
		t.Errorf("after 250ms and 100 check-outs: rate %q, want 400", got)
	}
	frame(500*time.Millisecond, 200)
	frame(750*time.Millisecond, 300)
	frame(time.Second, 400)
	// At 1.25s the window starts at 250ms: 1100-100 check-outs in 1s.
	if got := frame(1250*time.Millisecond, 1100); got != "1000" {
		t.Errorf("at 1.25s: rate %q, want 1000 over the last second", got)
	}
	// A new pool at the same address (fewer check-outs than before): no
	// window to compare with.
	if got := frame(1500*time.Millisecond, 3); got != "-" {
		t.Errorf("a new pool: rate %q, want none", got)
	}
}
