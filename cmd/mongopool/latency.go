package main

import (
	"math/bits"
	"time"
)

// histogram records durations in buckets 1/16 of a power of two wide, so that
// percentiles stay within about 6% of the truth whatever the number of
// samples, in a fixed 8 KB. Each worker keeps its own; they are merged at the
// end.
type histogram struct {
	counts [1024]uint64
	n      uint64
	max    time.Duration
}

const subBuckets = 16

// bucketOf returns the bucket of v nanoseconds: values below 16 have a bucket
// each; above, 16 buckets per power of two.
func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - 5 // v>>shift is in [16, 32)
	return shift*subBuckets + int(v>>shift)
}

// upperBound returns the largest value, in nanoseconds, of bucket i.
func upperBound(i int) uint64 {
	if i < subBuckets {
		return uint64(i)
	}
	shift := i/subBuckets - 1
	return (uint64(i%subBuckets+subBuckets+1) << shift) - 1
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
	h.max = max(h.max, d)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the duration below which a fraction q of the samples fall
// (the upper bound of its bucket, never more than the largest sample).
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return min(time.Duration(upperBound(i)), h.max)
		}
	}
	return h.max
}
