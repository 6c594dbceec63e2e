package pool

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// HistogramBuckets is the number of buckets of a [Histogram]. Bucket i holds
// the samples above [HistogramBound](i-1) (above 0 for bucket 0, which also
// holds the samples of 0) and up to HistogramBound(i). The bounds double from
// 1µs to 2^26µs (about 67s): the waits, establishments and uses of a pool
// span from the tens of nanoseconds of an idle check-out to the seconds of a
// connect timeout or a long transaction, and a factor of two keeps a
// quantile's estimate within its bucket's width with 28 counters in all. The
// last bucket, unbounded, takes everything longer.
const HistogramBuckets = 28

// HistogramBound returns the upper bound (inclusive) of bucket i of a
// [Histogram]: 1µs << i, and math.MaxInt64 for the last bucket, which is
// unbounded. It returns 0 for a negative i and math.MaxInt64 past the last
// bucket.
func HistogramBound(i int) time.Duration {
	switch {
	case i < 0:
		return 0
	case i >= HistogramBuckets-1:
		return math.MaxInt64
	}
	return time.Microsecond << i
}

// bucketOf returns the bucket that d falls in.
func bucketOf(d time.Duration) int {
	if d <= time.Microsecond {
		return 0
	}
	// d is in bucket i when 2^(i-1) µs < d <= 2^i µs, that is when
	// (d-1ns)/1µs, rounded down, has i significant bits.
	return min(bits.Len64(uint64((d-1)/time.Microsecond)), HistogramBuckets-1)
}

// Histogram is a distribution of durations in fixed buckets, as [Pool.Stats]
// returns it. Its fields are plain values: a snapshot, not a live view.
type Histogram struct {
	Count  uint64                   // samples
	Sum    time.Duration            // their total
	Counts [HistogramBuckets]uint64 // samples per bucket (not cumulative): see HistogramBound
}

// Quantile returns an estimate of the q-quantile of the samples (q = 0.99 for
// the 99th percentile), interpolated linearly within the bucket it falls in:
// it is known to that bucket's width. A quantile in the last, unbounded
// bucket is that bucket's lower bound, the last finite one. q is clamped to
// [0, 1] (NaN counts as 0). Quantile returns 0 when there are no samples.
func (h Histogram) Quantile(q float64) time.Duration {
	var total uint64
	for _, n := range h.Counts {
		total += n // rather than Count, which a histogram built by hand may get wrong
	}
	if total == 0 {
		return 0
	}
	switch {
	case !(q > 0): // NaN included
		q = 0
	case q > 1:
		q = 1
	}
	rank := q * float64(total)
	var below uint64 // samples in the buckets before i
	for i, n := range h.Counts {
		if n == 0 || float64(below+n) < rank {
			below += n
			continue
		}
		lo := HistogramBound(i - 1)
		if i == HistogramBuckets-1 {
			return lo
		}
		hi := HistogramBound(i)
		frac := (rank - float64(below)) / float64(n)
		return lo + time.Duration(math.Round(frac*float64(hi-lo)))
	}
	return HistogramBound(HistogramBuckets - 2) // not reached: rank <= total
}

// Mean returns the mean of the samples, 0 when there are none.
func (h Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// histogram is the live form of a Histogram: atomic counters that a sample
// updates without a lock of its own. The pool records its samples while it
// holds its lock, in the same critical section as the counts they go with,
// so that Stats, which reads them under the lock too, finds them in step
// with the counts.
type histogram struct {
	counts [HistogramBuckets]atomic.Uint64
	sum    atomic.Int64
}

// observe records one sample; a negative one (a clock that went back) counts
// as 0.
func (h *histogram) observe(d time.Duration) {
	d = max(d, 0)
	h.counts[bucketOf(d)].Add(1)
	h.sum.Add(int64(d))
}

// load returns the histogram's current values.
func (h *histogram) load() Histogram {
	var s Histogram
	for i := range h.counts {
		n := h.counts[i].Load()
		s.Counts[i] = n
		s.Count += n
	}
	s.Sum = time.Duration(h.sum.Load())
	return s
}

// Recorder records durations in a [Histogram]'s buckets, with atomic
// counters and no lock: for the timings of a pool's user beside the pool's
// own (a proxy's operations, say), read as the pool's are. Its zero value
// is ready; it must not be copied after first use.
type Recorder struct {
	h histogram
}

// Observe records one sample; a negative one (a clock that went back)
// counts as 0.
func (r *Recorder) Observe(d time.Duration) { r.h.observe(d) }

// Histogram returns the samples recorded so far.
func (r *Recorder) Histogram() Histogram { return r.h.load() }

// DefaultUseSampling is how many check-outs there are, on average, for each
// one whose use the Use histogram times: see [WithUseSampling].
const DefaultUseSampling = 64

// useSampler picks the check-outs whose use is timed: each one with a
// probability of 1/every, independently of the others, so that a workload
// with a rhythm of its own (a short use, then a long one) is sampled
// evenly. It draws the number of check-outs to skip before the next timed
// one from the geometric distribution, so that a check-out costs a
// comparison and a decrement (see Pool.checkOutLocked); with every = 1 it
// never skips. Guarded by pool.mu.
type useSampler struct {
	all  bool    // every is 1: time every check-out
	rate float64 // -log(1 - 1/every)
	skip int     // check-outs left to skip before the next timed one
}

func newUseSampler(every int) useSampler {
	s := useSampler{all: every <= 1, rate: -math.Log1p(-1 / float64(every))}
	s.skip = s.draw()
	return s
}

// draw returns a number of check-outs to skip: floor(E/rate) for an
// exponential E is geometric with a success probability of 1/every.
func (s *useSampler) draw() int {
	if s.all {
		return 0
	}
	return int(min(rand.ExpFloat64()/s.rate, 1<<30))
}
