package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// recorder keeps what shapes 4 and 5 read from the events: the order in
// which check-outs started and were served, the establishments in flight,
// and when each connection became ready.
//
// Events carry no check-out identity, so a check-out is recognised in each
// event differently. CheckOutStarted is emitted on the check-out's own
// goroutine by both pools, and is keyed by goroutine. CheckedOut is keyed by
// connection and use: the k-th CheckedOut of connection c is the k-th
// check-out of c, which the check-out itself reads once it has c (nobody else
// can check c out before it checks c in).
type recorder struct {
	start time.Time

	// Keys in event order. A slot is taken with an atomic add, which orders
	// the events without a lock: a lock would let a late arrival barge ahead
	// of a goroutine parked on it, and the recorder would see an order that
	// neither pool made.
	started, served     []int64
	nStarted, nServed   atomic.Int64
	lostStart, lostServ atomic.Int64 // events past the slices' capacity
	uses                []atomic.Int64
	badConn             atomic.Int64 // a connection id beyond uses

	mu       sync.Mutex
	pending  map[int64]bool
	peak     int
	created  int
	readyAt  []time.Duration
	want     int           // ready connections that close done
	done     chan struct{} // closed at want ready connections
	doneOnce sync.Once
}

// maxConnID bounds the connection ids the recorder tells apart; a storm
// creates a few hundred at most.
const maxConnID = 1 << 16

// newRecorder returns a recorder for up to checkOuts check-outs that closes
// done when wantReady connections are ready.
func newRecorder(checkOuts, wantReady int) *recorder {
	r := &recorder{
		start:   time.Now(),
		started: make([]int64, checkOuts),
		served:  make([]int64, checkOuts),
		pending: make(map[int64]bool),
		want:    wantReady,
		done:    make(chan struct{}),
	}
	if checkOuts > 0 {
		r.uses = make([]atomic.Int64, maxConnID)
	}
	return r
}

// useKey identifies the k-th check-out of connection id.
func useKey(id, k int64) int64 { return id<<32 | k }

func (r *recorder) event(e Ev) {
	switch e.Type {
	case EvCheckOutStarted:
		put(r.started, &r.nStarted, &r.lostStart, goid())
		return
	case EvCheckedOut:
		if e.Conn <= 0 || e.Conn >= int64(len(r.uses)) {
			r.badConn.Add(1)
			return
		}
		put(r.served, &r.nServed, &r.lostServ, useKey(e.Conn, r.uses[e.Conn].Add(1)))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Type {
	case EvCreated:
		r.created++
		r.pending[e.Conn] = true
		r.peak = max(r.peak, len(r.pending))
	case EvReady:
		delete(r.pending, e.Conn)
		r.readyAt = append(r.readyAt, time.Since(r.start))
		if len(r.readyAt) == r.want {
			r.doneOnce.Do(func() { close(r.done) })
		}
	case EvClosed:
		delete(r.pending, e.Conn)
	}
}

// used returns the key of the check-out of connection id that its holder
// has just received.
func (r *recorder) used(id int64) int64 {
	if id <= 0 || id >= int64(len(r.uses)) {
		return -1
	}
	return useKey(id, r.uses[id].Load())
}

func put(s []int64, n, lost *atomic.Int64, key int64) {
	if i := n.Add(1) - 1; i < int64(len(s)) {
		s[i] = key
	} else {
		lost.Add(1)
	}
}

// checkOut is what one storm check-out knows of itself.
type checkOut struct {
	g        int64 // its goroutine
	use      int64 // the key of its connection's use
	returned int   // its place in the order the check-outs returned
	wait     time.Duration
}

// ranks returns, for each check-out, its rank in CheckOutStarted order and
// in CheckedOut order.
func (r *recorder) ranks(cos []checkOut) (start, served []int, err error) {
	if r.lostStart.Load() > 0 || r.lostServ.Load() > 0 || r.badConn.Load() > 0 {
		return nil, nil, fmt.Errorf("bench: more events than check-outs, or connection ids past %d", maxConnID)
	}
	byG := make(map[int64]int, len(cos))
	for i, g := range r.started[:r.nStarted.Load()] {
		byG[g] = i
	}
	byUse := make(map[int64]int, len(cos))
	for i, u := range r.served[:r.nServed.Load()] {
		byUse[u] = i
	}
	start, served = make([]int, len(cos)), make([]int, len(cos))
	for i, c := range cos {
		var ok1, ok2 bool
		start[i], ok1 = byG[c.g]
		served[i], ok2 = byUse[c.use]
		if !ok1 || !ok2 {
			return nil, nil, fmt.Errorf("bench: check-out %d has no CheckOutStarted (%v) or no CheckedOut (%v) event", i, ok1, ok2)
		}
	}
	return start, served, nil
}

// fifo compares the order in which check-outs were served with the order in
// which they started (start[i] and served[i] are check-out i's ranks, each a
// permutation of 0..n-1): the fraction of pairs served in the opposite order,
// and the most later check-outs any one check-out saw served before it.
func fifo(start, served []int) (inverted float64, maxOvertaken int, err error) {
	n := len(start)
	if len(served) != n {
		return 0, 0, fmt.Errorf("bench: %d start ranks, %d service ranks", n, len(served))
	}
	order := make([]int, n) // start ranks in service order
	filled := make([]bool, n)
	for i, r := range served {
		if r < 0 || r >= n || filled[r] || start[i] < 0 || start[i] >= n {
			return 0, 0, fmt.Errorf("bench: the ranks are not permutations of 0..%d", n-1)
		}
		order[r], filled[r] = start[i], true
	}
	if n < 2 {
		return 0, 0, nil
	}
	var inv int
	for i := range n {
		overtaken := 0 // served before order[i] although started after it
		for j := range i {
			if order[j] > order[i] {
				overtaken++
			}
		}
		inv += overtaken
		maxOvertaken = max(maxOvertaken, overtaken)
	}
	return float64(inv) / float64(n*(n-1)/2), maxOvertaken, nil
}

// rankShift returns the largest difference between a check-out's rank in
// service order and its rank in start order, either way.
func rankShift(start, served []int) int {
	most := 0
	for i := range min(len(start), len(served)) {
		d := served[i] - start[i]
		most = max(most, d, -d)
	}
	return most
}

// stormResult is what one storm gave.
type stormResult struct {
	wall         time.Duration
	peak         int
	created      int
	waits        latencies
	inverted     float64 // from the events
	maxOvertaken int     // from the events
	shift        int     // from the events
	retInverted  float64 // from the order in which check-outs returned
	retOvertaken int
}

// storm releases s.StormGoroutines check-outs at once against an empty pool
// of kind k on the server with slow hellos; each holds its connection for
// s.StormHold.
func (s *Suite) storm(k Kind, maxConnecting int) (stormResult, error) {
	n := s.StormGoroutines
	rec := newRecorder(n, -1)
	p, err := NewPool(k, Config{Addr: s.slow.Addr(), MaxPoolSize: 100, MaxConnecting: maxConnecting, Events: rec.event})
	if err != nil {
		return stormResult{}, err
	}
	defer p.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cos := make([]checkOut, n)
	var returned atomic.Int64
	var parked, done sync.WaitGroup
	release := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		parked.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			co := &cos[i]
			co.g = goid()
			parked.Done()
			<-release
			t := time.Now()
			c, err := p.Get(ctx)
			co.wait = time.Since(t)
			if err != nil {
				errs <- err
				return
			}
			co.returned = int(returned.Add(1) - 1)
			co.use = rec.used(p.ID(c))
			time.Sleep(s.StormHold) // the work done with the connection
			p.Put(c)
		}()
	}
	parked.Wait()
	t0 := time.Now()
	close(release)
	done.Wait()
	wall := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return stormResult{}, err
	}

	start, served, err := rec.ranks(cos)
	if err != nil {
		return stormResult{}, err
	}
	rets := make([]int, n)
	waits := make([]time.Duration, n)
	for i, c := range cos {
		rets[i], waits[i] = c.returned, c.wait
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	res := stormResult{wall: wall, peak: rec.peak, created: rec.created, waits: summarize(waits)}
	if res.inverted, res.maxOvertaken, err = fifo(start, served); err != nil {
		return res, err
	}
	res.shift = rankShift(start, served)
	res.retInverted, res.retOvertaken, err = fifo(start, rets)
	return res, err
}

// Storm is shape 4: a connection storm against an empty pool.
func (s *Suite) Storm() error {
	kinds := []Kind{Mongopool, Official}
	for _, mc := range []int{2, 10} {
		cas := fmt.Sprintf("%d goroutines, maxConnecting %d", s.StormGoroutines, mc)
		s.progress("shape 4: storm, %s", cas)
		// Rounds storms per pool, alternating: the median by wall time
		// counts, and the worst FIFO figures of all.
		runs := make(map[Kind][]stormResult, 2)
		for range s.Rounds {
			for _, k := range kinds {
				r, err := s.storm(k, mc)
				if err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
				runs[k] = append(runs[k], r)
			}
		}
		res := make(map[Kind]stormResult, 2)
		for _, k := range kinds {
			rs := runs[k]
			slices.SortFunc(rs, func(a, b stormResult) int { return cmp.Compare(a.wall, b.wall) })
			r := rs[len(rs)/2]
			for _, x := range rs {
				r.peak = max(r.peak, x.peak)
				r.inverted = max(r.inverted, x.inverted)
				r.maxOvertaken = max(r.maxOvertaken, x.maxOvertaken)
				r.shift = max(r.shift, x.shift)
				r.retInverted = max(r.retInverted, x.retInverted)
				r.retOvertaken = max(r.retOvertaken, x.retOvertaken)
			}
			res[k] = r
			s.row("4 storm", cas, k,
				Fig{"wall", fmtDur(r.wall)},
				Fig{"peak establishing", strconv.Itoa(r.peak)},
				Fig{"created", strconv.Itoa(r.created)},
				Fig{"check-out wait", r.waits.String()},
				Fig{"pairs out of order", fmt.Sprintf("%.4f%%", 100*r.inverted)},
				Fig{"most overtaken by", strconv.Itoa(r.maxOvertaken)},
				Fig{"largest rank shift", strconv.Itoa(r.shift)},
				Fig{"pairs returned out of order", fmt.Sprintf("%.4f%%", 100*r.retInverted)},
				Fig{"most overtaken on return", strconv.Itoa(r.retOvertaken)},
			)
		}
		mp, off := res[Mongopool], res[Official]
		s.check("4 storm", fmt.Sprintf("maxConnecting %d: in flight <= %d, wall <= official, no check-out overtaken by more than 5", mc, mc),
			fmt.Sprintf("peak %d; wall %s vs %s; most overtaken by %d (official: %d)",
				mp.peak, fmtDur(mp.wall), fmtDur(off.wall), mp.maxOvertaken, off.maxOvertaken),
			mp.peak <= mc && mp.wall <= off.wall && mp.maxOvertaken <= 5)
	}
	return nil
}

// warmUpTime times, from the moment the pool is made ready, the establishment of
// minPoolSize connections on the server with slow hellos.
func (s *Suite) warmUpTime(k Kind, tick time.Duration, limit time.Duration) (time.Duration, []time.Duration, error) {
	rec := newRecorder(0, s.WarmUpMin)
	cfg := Config{Addr: s.slow.Addr(), MaxPoolSize: s.WarmUpMin, MinPoolSize: s.WarmUpMin, Events: rec.event, MaintainInterval: tick}
	rec.start = time.Now() // both constructors make the pool ready and return at once
	p, err := NewPool(k, cfg)
	if err != nil {
		return 0, nil, err
	}
	defer p.Close()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-rec.done:
	case <-t.C:
		rec.mu.Lock()
		n := len(rec.readyAt)
		rec.mu.Unlock()
		return 0, nil, fmt.Errorf("%w: %d of %d connections after %s", errTimeout, n, s.WarmUpMin, limit)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	at := append([]time.Duration(nil), rec.readyAt[:s.WarmUpMin]...)
	return at[len(at)-1], at, nil
}

// bursts counts the groups of ready times separated by more than gap, and
// returns the size of the largest and the length of the last.
func bursts(at []time.Duration, gap time.Duration) (n, largest int, last time.Duration) {
	begin, size := 0, 0
	for i, t := range at {
		if i == 0 || t-at[i-1] > gap {
			n++
			begin, size = i, 0
		}
		size++
		largest = max(largest, size)
	}
	if len(at) > 0 {
		last = at[len(at)-1] - at[begin]
	}
	return n, largest, last
}

// defaultMaintainInterval is the official pool's maintenance tick when
// nothing sets it (a mongo.Client cannot).
const defaultMaintainInterval = 10 * time.Second

// WarmUp is shape 5: from Ready until minPoolSize connections are available.
func (s *Suite) WarmUp() error {
	cas := fmt.Sprintf("minPoolSize %d, %s first reply", s.WarmUpMin, s.Delay)
	s.progress("shape 5: warm-up, %s", cas)
	mp, _, err := s.warmUpTime(Mongopool, 0, 30*time.Second)
	if err != nil {
		return fmt.Errorf("mongopool: %w", err)
	}
	s.row("5 warm-up", cas, Mongopool, Fig{"time to minPoolSize", fmtDur(mp)})

	s.progress("shape 5: official pool, maintenance tick %s", s.OfficialTick)
	off, at, err := s.warmUpTime(Official, s.OfficialTick, 60*time.Second)
	if err != nil {
		return fmt.Errorf("official: %w", err)
	}
	ticks, perTick, last := bursts(at, s.OfficialTick/2)
	extrapolated := time.Duration(ticks-1)*defaultMaintainInterval + last
	s.row("5 warm-up", cas, Official,
		Fig{"time to minPoolSize", fmt.Sprintf("%s with a %s tick", fmtDur(off), s.OfficialTick)},
		Fig{"ticks", fmt.Sprintf("%d, up to %d connections each", ticks, perTick)},
		Fig{"at its default 10 s tick", fmt.Sprintf("%s (extrapolated: %d ticks)", fmtDur(extrapolated), ticks)},
	)
	s.note("Shape 5, official pool: measured with its maintenance interval set to %s "+
		"(topology.WithConnectionPoolMaintainInterval); it established up to %d connections per tick over %d ticks. "+
		"At the default 10 s interval the same ticks take (ticks-1) x 10 s + the last tick's %s = %s.",
		s.OfficialTick, perTick, ticks, fmtDur(last), fmtDur(extrapolated))
	if s.Long {
		s.progress("shape 5: official pool at its default 10 s tick (about 90 s)")
		long, _, err := s.warmUpTime(Official, 0, 3*time.Minute)
		if err != nil {
			return fmt.Errorf("official, default tick: %w", err)
		}
		s.row("5 warm-up", cas+", default tick", Official, Fig{"time to minPoolSize", fmtDur(long)})
	}
	budget := time.Duration(s.WarmUpMin)*s.Delay/2 + 100*time.Millisecond
	s.check("5 warm-up", fmt.Sprintf("<= %s (%d x %s / maxConnecting 2 + 100 ms)", fmtDur(budget), s.WarmUpMin, s.Delay),
		fmt.Sprintf("%s (official: %s at its default tick)", fmtDur(mp), fmtDur(extrapolated)), mp <= budget)
	return nil
}
