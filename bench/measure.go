package bench

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Measure is what one timed run gave: time, memory and allocations per
// operation, over N operations.
type Measure struct {
	N        int
	Elapsed  time.Duration
	NsOp     float64
	BOp      float64
	AllocsOp float64
	Allocs   uint64 // in all, for per-event ratios
}

func (m Measure) String() string {
	return fmt.Sprintf("%.0f ns/op, %.0f B/op, %.2f allocs/op", m.NsOp, m.BOp, m.AllocsOp)
}

// run times fn(n), counting the process's allocations in between (the
// in-process server's included, which is why the end-to-end shape compares
// the two clients against the same server).
func run(n int, fn func(n int) error) (Measure, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	err := fn(n)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	m := Measure{N: n, Elapsed: elapsed, Allocs: after.Mallocs - before.Mallocs}
	m.NsOp = float64(elapsed.Nanoseconds()) / float64(n)
	m.BOp = float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
	m.AllocsOp = float64(m.Allocs) / float64(n)
	return m, err
}

// Timing says how long each measured run lasts: runs grow their operation
// count until one lasts at least Target, as testing.Benchmark does. Fixed,
// when set, skips that and runs exactly Fixed operations (the smoke test).
type Timing struct {
	Target time.Duration
	Fixed  int
}

// measure calibrates n for fn and returns the last, full-length run.
func (t Timing) measure(fn func(n int) error) (Measure, error) {
	if t.Fixed > 0 {
		return run(t.Fixed, fn)
	}
	target := t.Target
	if target <= 0 {
		target = time.Second
	}
	n := 100
	for {
		m, err := run(n, fn)
		if err != nil || m.Elapsed >= target || n >= 1e8 {
			return m, err
		}
		// Aim 20% past the target from the rate seen, growing at most 100x
		// and at least 2x per step.
		next := int(float64(n) * 1.2 * float64(target) / float64(max(m.Elapsed, time.Microsecond)))
		n = min(max(next, 2*n), 100*n, 1e8)
	}
}

// parallel runs n calls of body spread over g goroutines (the first n%g get
// one more) and returns the first error.
func parallel(n, g int, body func(worker, count int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for w := range g {
		count := n / g
		if w < n%g {
			count++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := body(w, count); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// latencies summarizes durations: p50, p99 and max.
type latencies struct{ P50, P99, Max time.Duration }

func summarize(ds []time.Duration) latencies {
	slices.Sort(ds)
	if len(ds) == 0 {
		return latencies{}
	}
	return latencies{percentile(ds, 50), percentile(ds, 99), ds[len(ds)-1]}
}

func (l latencies) String() string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s", fmtDur(l.P50), fmtDur(l.P99), fmtDur(l.Max))
}

// fmtDur prints a duration with three significant figures.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.3gs", d.Seconds())
}

// median returns the run whose ns/op is the median of ms.
func median(ms []Measure) Measure {
	s := slices.Clone(ms)
	slices.SortFunc(s, func(a, b Measure) int { return cmp.Compare(a.NsOp, b.NsOp) })
	return s[len(s)/2]
}
