package pool_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// bucketOf returns the bucket a duration belongs to, from the bounds alone.
func bucketOf(d time.Duration) int {
	for i := range pool.HistogramBuckets {
		if d <= pool.HistogramBound(i) {
			return i
		}
	}
	return -1
}

// The bounds double from 1µs, cover a minute, and end with the unbounded
// bucket; out-of-range indexes do not panic.
func TestHistogramBounds(t *testing.T) {
	if pool.HistogramBuckets > 32 {
		t.Errorf("%d buckets: more than a snapshot should copy", pool.HistogramBuckets)
	}
	if got := pool.HistogramBound(0); got != time.Microsecond {
		t.Errorf("first bound %v, want 1µs", got)
	}
	last := pool.HistogramBuckets - 1
	for i := 1; i < last; i++ {
		if got, want := pool.HistogramBound(i), 2*pool.HistogramBound(i-1); got != want {
			t.Errorf("bound %d = %v, want %v (twice the previous one)", i, got, want)
		}
	}
	if got := pool.HistogramBound(last - 1); got < time.Minute {
		t.Errorf("last finite bound %v, want a minute or more", got)
	}
	if got := pool.HistogramBound(last); got != math.MaxInt64 {
		t.Errorf("last bound %v, want math.MaxInt64", got)
	}
	if got := pool.HistogramBound(-1); got != 0 {
		t.Errorf("HistogramBound(-1) = %v, want 0", got)
	}
	if got := pool.HistogramBound(pool.HistogramBuckets); got != math.MaxInt64 {
		t.Errorf("HistogramBound past the last = %v, want math.MaxInt64", got)
	}
}

func TestHistogramQuantileAndMean(t *testing.T) {
	var empty pool.Histogram
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 {
		t.Errorf("empty histogram: quantile %v, mean %v; want 0, 0", empty.Quantile(0.5), empty.Mean())
	}

	// 10 samples in bucket 3 (4µs, 8µs], 10 in bucket 5 (16µs, 32µs].
	var h pool.Histogram
	h.Counts[3], h.Counts[5] = 10, 10
	h.Count, h.Sum = 20, 10*6*time.Microsecond+10*24*time.Microsecond
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0, 4 * time.Microsecond},     // the lower bound of the first sample's bucket
		{0.25, 6 * time.Microsecond},  // halfway through bucket 3
		{0.5, 8 * time.Microsecond},   // the end of bucket 3
		{0.75, 24 * time.Microsecond}, // halfway through bucket 5
		{1, 32 * time.Microsecond},
		{-1, 4 * time.Microsecond}, // clamped to 0
		{2, 32 * time.Microsecond}, // clamped to 1
		{math.NaN(), 4 * time.Microsecond},
	} {
		if got := h.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := h.Mean(); got != 15*time.Microsecond {
		t.Errorf("Mean() = %v, want 15µs", got)
	}

	// The unbounded bucket has no upper bound to interpolate to: its
	// quantiles are its lower bound, the last finite one.
	var slow pool.Histogram
	slow.Counts[pool.HistogramBuckets-1], slow.Count = 3, 3
	slow.Sum = 3 * time.Hour
	if got, want := slow.Quantile(0.99), pool.HistogramBound(pool.HistogramBuckets-2); got != want {
		t.Errorf("Quantile in the unbounded bucket = %v, want %v", got, want)
	}
	if slow.Mean() != time.Hour {
		t.Errorf("Mean() = %v, want 1h", slow.Mean())
	}

	// A histogram whose Count disagrees with its Counts (built by hand)
	// gives a quantile within the bounds, never a panic.
	bad := pool.Histogram{Count: 5}
	bad.Counts[1] = 2
	if got := bad.Quantile(0.99); got < 0 || got > pool.HistogramBound(1) {
		t.Errorf("inconsistent histogram: Quantile = %v", got)
	}
}

// A sample equal to a bucket's bound goes in that bucket, one a nanosecond
// longer in the next; the last bucket takes everything longer than the last
// finite bound.
func TestHistogramBucketEdges(t *testing.T) {
	last := pool.HistogramBuckets - 1
	for _, i := range []int{0, 1, 2, 9, 10, last - 1} {
		t.Run(pool.HistogramBound(i).String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := readyPool(t, pool.WithUseSampling(1), pool.WithMaintenanceInterval(-1))
				for _, d := range []time.Duration{pool.HistogramBound(i), pool.HistogramBound(i) + 1} {
					c := mustCheckOut(t, p)
					time.Sleep(d)
					mustCheckIn(t, p, c)
				}
				u := p.Stats().Use
				if u.Counts[i] != 1 || u.Counts[i+1] != 1 {
					t.Errorf("uses of %v and 1ns more: buckets %d and %d hold %d and %d, want 1 and 1",
						pool.HistogramBound(i), i, i+1, u.Counts[i], u.Counts[i+1])
				}
				if want := 2*pool.HistogramBound(i) + 1; u.Sum != want {
					t.Errorf("Sum %v, want %v", u.Sum, want)
				}
			})
		})
	}
	t.Run("an hour", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := readyPool(t, pool.WithUseSampling(1), pool.WithMaintenanceInterval(-1))
			c := mustCheckOut(t, p)
			time.Sleep(time.Hour)
			mustCheckIn(t, p, c)
			if u := p.Stats().Use; u.Counts[last] != 1 {
				t.Errorf("an hour's use is not in the unbounded bucket: %v", u.Counts)
			}
		})
	})
}

// checkHistogram asserts what every histogram of a snapshot must hold.
func checkHistogram(t testing.TB, name string, h pool.Histogram) {
	t.Helper()
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	if n != h.Count {
		t.Errorf("%s: Count %d, but its buckets hold %d", name, h.Count, n)
	}
	if h.Sum < 0 {
		t.Errorf("%s: negative Sum %v", name, h.Sum)
	}
}

// The check-out wait: a check-out served at once counts as 0; one that
// waited counts from the start of CheckOut to the connection handed over or
// the failure; failures count as well as successes.
func TestStatsCheckOutWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := readyPool(t, pool.WithMaxPoolSize(1), pool.WithWaitQueueTimeout(10*time.Millisecond))
		c := mustCheckOut(t, p) // established: waits for its connection, 0 on the fake clock
		mustCheckIn(t, p, c)
		c = mustCheckOut(t, p) // idle: served at once

		// Waits 30ms in the queue for the check-in.
		ctx := context.Background()
		res := checkOutAsync(ctx, p)
		synctest.Wait()
		time.Sleep(30 * time.Millisecond)
		// waitQueueTimeoutMS is 10ms: the waiter above timed out already.
		r := recv(t, res, "the waiting check-out")
		if !errors.Is(r.err, pool.ErrWaitQueueTimeout) {
			t.Fatalf("waiting check-out: %v, %v; want a wait queue timeout", r.c, r.err)
		}
		// A second waiter is served by a check-in after 4ms.
		res = checkOutAsync(ctx, p)
		synctest.Wait()
		time.Sleep(4 * time.Millisecond)
		mustCheckIn(t, p, c)
		r = recv(t, res, "the waiting check-out")
		must(t, r.err)
		mustCheckIn(t, p, r.c)
		closePool(t, p)
		if _, err := checkOut(t, ctx, p); !errors.Is(err, pool.ErrPoolClosed) {
			t.Fatalf("check-out of a closed pool: %v", err)
		}

		s := p.Stats()
		checkCounts(t, s)
		w := s.CheckOutWait
		if w.Count != 5 || s.CheckedOut != 3 || s.CheckOutFailed != 2 {
			t.Fatalf("%d samples for %d check-outs and %d failures, want 5, 3, 2", w.Count, s.CheckedOut, s.CheckOutFailed)
		}
		want := make(map[int]uint64)
		want[0] = 3 // established at once (fake clock), idle, closed pool
		want[bucketOf(10*time.Millisecond)]++
		want[bucketOf(4*time.Millisecond)]++
		for i, n := range w.Counts {
			if n != want[i] {
				t.Errorf("bucket %d (up to %v): %d samples, want %d", i, pool.HistogramBound(i), n, want[i])
			}
		}
		if w.Sum != 14*time.Millisecond {
			t.Errorf("Sum %v, want 14ms", w.Sum)
		}
	})
}

// The establishment: from ConnectionCreated to ConnectionReady, for the
// connections established only.
func TestStatsEstablish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Delay: 5 * time.Millisecond}
		p, log := newPool(t, f, pool.WithMaintenanceInterval(-1))
		mustReady(t, p)
		c := mustCheckOut(t, p)
		f.set(func(f *fakeConnector) { f.Delay = 700 * time.Millisecond })
		c2 := mustCheckOut(t, p)
		f.set(func(f *fakeConnector) { f.FailBeforeHello = errors.New("connection refused") })
		if _, err := checkOut(t, context.Background(), p); err == nil {
			t.Fatal("a check-out succeeded when the establishment failed")
		}
		mustCheckIn(t, p, c)
		mustCheckIn(t, p, c2)

		s := p.Stats()
		checkCounts(t, s)
		e := s.Establish
		if e.Count != 2 || uint64(log.count(pool.ConnectionReady)) != e.Count {
			t.Fatalf("%d samples for %d ConnectionReady events, want 2", e.Count, log.count(pool.ConnectionReady))
		}
		if e.Counts[bucketOf(5*time.Millisecond)] != 1 || e.Counts[bucketOf(700*time.Millisecond)] != 1 {
			t.Errorf("buckets %v, want one sample at 5ms and one at 700ms", e.Counts)
		}
		if e.Sum != 705*time.Millisecond {
			t.Errorf("Sum %v, want 705ms", e.Sum)
		}
		for _, ev := range log.all() {
			if ev.Type == pool.ConnectionReady && ev.Duration != 5*time.Millisecond && ev.Duration != 700*time.Millisecond {
				t.Errorf("ConnectionReady of connection %d lasted %v, not a sample of the histogram", ev.ConnectionID, ev.Duration)
			}
		}
	})
}

// The use: from check-out to check-in, every one timed with
// WithUseSampling(1).
func TestStatsUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := readyPool(t, pool.WithUseSampling(1), pool.WithMaxPoolSize(1))
		c := mustCheckOut(t, p)
		time.Sleep(7 * time.Millisecond)
		// A check-out waiting for it is handed it at the check-in; its use
		// starts then.
		res := checkOutAsync(context.Background(), p)
		synctest.Wait()
		time.Sleep(time.Millisecond)
		mustCheckIn(t, p, c)
		r := recv(t, res, "the waiting check-out")
		must(t, r.err)
		time.Sleep(300 * time.Millisecond)
		mustCheckIn(t, p, r.c)
		mustCheckIn(t, p, mustCheckOut(t, p)) // in use for 0 on the fake clock

		s := p.Stats()
		checkCounts(t, s)
		u := s.Use
		if u.Count != 3 || int64(u.Count) != s.CheckedIn {
			t.Fatalf("%d samples for %d check-ins, want 3", u.Count, s.CheckedIn)
		}
		if u.Counts[0] != 1 || u.Counts[bucketOf(8*time.Millisecond)] != 1 || u.Counts[bucketOf(300*time.Millisecond)] != 1 {
			t.Errorf("buckets %v, want one sample each at 0, 8ms and 300ms", u.Counts)
		}
		if u.Sum != 308*time.Millisecond {
			t.Errorf("Sum %v, want 308ms", u.Sum)
		}
	})
}

// By default the use is sampled, one check-out in DefaultUseSampling, at
// random: a workload that alternates short and long uses has both sampled,
// as it would not if every nth check-out were timed.
func TestStatsUseSampledAtRandom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := readyPool(t)
		const cycles = 100 * pool.DefaultUseSampling // about 200 samples of 2 kinds
		for range cycles {
			mustCheckIn(t, p, mustCheckOut(t, p)) // short: 0 on the fake clock
			c := mustCheckOut(t, p)
			time.Sleep(time.Millisecond) // long
			mustCheckIn(t, p, c)
		}
		s := p.Stats()
		checkCounts(t, s)
		u := s.Use
		short, long := u.Counts[0], u.Counts[bucketOf(time.Millisecond)]
		if short+long != u.Count {
			t.Fatalf("samples %v outside the two kinds of use", u.Counts)
		}
		// 200 expected; each kind 100: the bounds are more than 7 standard
		// deviations away.
		if u.Count < 100 || u.Count > 300 {
			t.Errorf("%d samples of %d check-ins, want about %d", u.Count, s.CheckedIn, 2*cycles/pool.DefaultUseSampling)
		}
		if short < u.Count/4 || long < u.Count/4 {
			t.Errorf("%d short and %d long uses sampled: the sampling follows the workload's rhythm", short, long)
		}
		if u.Sum != time.Duration(long)*time.Millisecond {
			t.Errorf("Sum %v for %d long samples of 1ms", u.Sum, long)
		}
	})
}

func TestRecorder(t *testing.T) {
	var r pool.Recorder
	for _, d := range []time.Duration{-time.Second, 0, time.Microsecond, 3 * time.Microsecond, time.Millisecond} {
		r.Observe(d)
	}
	h := r.Histogram()
	if h.Count != 5 || h.Sum != time.Millisecond+4*time.Microsecond {
		t.Fatalf("Count %d, Sum %v; want 5 samples summing to 1.004ms (the negative one as 0)", h.Count, h.Sum)
	}
	// 0, 0 and 1µs in bucket 0; 3µs in bucket 2 (2µs, 4µs]; 1ms in bucket
	// 10 (512µs, 1024µs].
	want := map[int]uint64{0: 3, 2: 1, 10: 1}
	for i, n := range h.Counts {
		if n != want[i] {
			t.Errorf("bucket %d: %d samples, want %d", i, n, want[i])
		}
	}
}
