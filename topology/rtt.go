package topology

import "time"

// rttAlpha is the weight of a new sample in the moving average of round
// trip times, as the server selection specification sets it: about 85% of
// the average rests on the 9 most recent samples.
const rttAlpha = 0.2

// rttWindow is how many recent samples the minimum round trip time is taken
// over, as the server monitoring specification sets it.
const rttWindow = 10

// roundTrips keeps a server's round trip times: the exponentially weighted moving
// average that server selection uses (the specification's roundTripTime),
// and the least of the last 10 samples that client-side operation timeouts
// use (minRoundTripTime). Its zero value has no samples. It is a plain
// value, not safe for concurrent use: its owner (the server's monitor)
// guards it.
type roundTrips struct {
	average time.Duration
	samples [rttWindow]time.Duration // a ring of the last samples
	n       int                      // samples added, up to a point (see Add)
}

// Add records a sample. A negative one counts as zero.
func (r *roundTrips) Add(sample time.Duration) {
	if sample < 0 {
		sample = 0
	}
	if r.n == 0 {
		r.average = sample
	} else {
		r.average = movingAverage(r.average, sample)
	}
	r.samples[r.n%rttWindow] = sample
	r.n++
	if r.n == 2*rttWindow {
		// Keep n bounded while keeping its place in the ring and the
		// fact that the window is full.
		r.n = rttWindow
	}
}

// Average returns the moving average of the samples, and false when there
// is none yet.
func (r *roundTrips) Average() (time.Duration, bool) { return r.average, r.n > 0 }

// Min returns the least of the last 10 samples, or 0 while fewer than 2
// samples have been added, as the specification requires: one sample, the
// connection's first, says little.
func (r *roundTrips) Min() time.Duration {
	if r.n < 2 {
		return 0
	}
	k := min(r.n, rttWindow)
	least := r.samples[0]
	for _, s := range r.samples[1:k] {
		least = min(least, s)
	}
	return least
}

// Reset forgets every sample: the server was marked Unknown, and its next
// samples may be of another connection, or another server.
func (r *roundTrips) Reset() { *r = roundTrips{} }

// movingAverage returns the average after the sample x, from the previous
// average old: 0.2·x + 0.8·old.
func movingAverage(old, x time.Duration) time.Duration {
	return time.Duration(rttAlpha*float64(x) + (1-rttAlpha)*float64(old))
}
