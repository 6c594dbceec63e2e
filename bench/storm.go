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

// recorder keeps what shapes 4 and 5 learn from a pool's events: the order
// in which the pool says it handed connections over, the establishments in
// flight, and the connections that became ready.
//
// Events carry no check-out identity, and mongopool delivers them on a
// goroutine of its own, after the calls that caused them may have returned:
// neither the goroutine a handler runs on nor the moment it runs tells which
// check-out an event is about. A ConnectionCheckedOut event is matched to its
// check-out by connection and use instead: the k-th CheckedOut event of
// connection c is the k-th check-out of c, and each check-out counts its own
// use of c once it has c (nobody else can check c out before it checks c in,
// so the holders of c count 1, 2, 3... in the order c went to them). That
// holds for any pool that emits the CheckedOut events of a connection in
// the order of its check-outs, whichever goroutine emits them, and whenever.
// CheckOutStarted events name no connection: they are only counted.
type recorder struct {
	start time.Time

	// served holds the CheckedOut events' keys in the order the pool
	// emitted them. A slot is taken with an atomic add, which orders the
	// events without a lock: the official pool emits them on the
	// check-outs' goroutines, and a lock would let a late one barge ahead
	// of one parked on it, an order the pool did not make.
	served   []int64
	nServed  atomic.Int64
	lost     atomic.Int64   // CheckedOut events past served's capacity
	uses     []atomic.Int64 // CheckedOut events so far, by connection id
	badConn  atomic.Int64   // a connection id beyond uses
	nStarted atomic.Int64   // CheckOutStarted events

	mu          sync.Mutex
	pending     map[int64]bool
	peak        int
	created     int
	established map[int64]time.Duration // since start, by connection id
	readyAt     []time.Duration         // established times of the ready connections
	unmatched   int                     // ready connections not established through Established
	want        int                     // ready connections that close done
	done        chan struct{}           // closed at want ready connections
	doneOnce    sync.Once
}

// maxConnID bounds the connection ids the recorder tells apart; a storm
// creates a few hundred at most.
const maxConnID = 1 << 16

// newRecorder returns a recorder for up to checkOuts check-outs that closes
// done when wantReady connections are ready.
func newRecorder(checkOuts, wantReady int) *recorder {
	r := &recorder{
		start:       time.Now(),
		served:      make([]int64, checkOuts),
		pending:     make(map[int64]bool),
		established: make(map[int64]time.Duration),
		want:        wantReady,
		done:        make(chan struct{}),
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
		r.nStarted.Add(1)
		return
	case EvCheckedOut:
		if e.Conn <= 0 || e.Conn >= int64(len(r.uses)) {
			r.badConn.Add(1)
			return
		}
		key := useKey(e.Conn, r.uses[e.Conn].Add(1))
		if i := r.nServed.Add(1) - 1; i < int64(len(r.served)) {
			r.served[i] = key
		} else {
			r.lost.Add(1)
		}
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
		if at, ok := r.established[e.Conn]; ok {
			r.readyAt = append(r.readyAt, at)
		} else {
			r.unmatched++
		}
		if len(r.readyAt)+r.unmatched == r.want {
			r.doneOnce.Do(func() { close(r.done) })
		}
	case EvClosed:
		delete(r.pending, e.Conn)
	}
}

// establishedConn is Config.Established: connection id is ready now.
func (r *recorder) establishedConn(id int64) {
	at := time.Since(r.start)
	r.mu.Lock()
	r.established[id] = at
	r.mu.Unlock()
}

// checkOut is what one storm check-out knows of itself.
type checkOut struct {
	arrived  int   // its ticket, taken just before it called the pool
	returned int   // its place in the order the calls returned
	use      int64 // the key of its use of its connection
	wait     time.Duration
}

// handOverRanks returns each check-out's rank in the order of the pool's
// CheckedOut events (served, keyed by connection and use).
func handOverRanks(served []int64, cos []checkOut) ([]int, error) {
	if len(served) != len(cos) {
		return nil, fmt.Errorf("bench: %d CheckedOut events for %d check-outs", len(served), len(cos))
	}
	byUse := make(map[int64]int, len(served))
	for i, u := range served {
		byUse[u] = i
	}
	ranks := make([]int, len(cos))
	for i, c := range cos {
		r, ok := byUse[c.use]
		if !ok {
			return nil, fmt.Errorf("bench: check-out %d (use %d of connection %d) has no CheckedOut event", i, c.use&(1<<32-1), c.use>>32)
		}
		ranks[i] = r
	}
	return ranks, nil
}

// handOver returns each check-out's rank in the order of the pool's
// CheckedOut events, once they have all been delivered.
func (r *recorder) handOver(cos []checkOut) ([]int, error) {
	if n := r.badConn.Load(); n > 0 {
		return nil, fmt.Errorf("bench: %d CheckedOut events of connection ids past %d", n, maxConnID)
	}
	if n := r.lost.Load(); n > 0 {
		return nil, fmt.Errorf("bench: %d CheckedOut events more than check-outs", n)
	}
	if n := r.nStarted.Load(); n != int64(len(cos)) {
		return nil, fmt.Errorf("bench: %d CheckOutStarted events for %d check-outs", n, len(cos))
	}
	return handOverRanks(r.served[:r.nServed.Load()], cos)
}

// fifo compares the order in which check-outs were served with the order in
// which they arrived (arrived[i] and served[i] are check-out i's ranks, each
// a permutation of 0..n-1): the fraction of pairs served in the opposite
// order, and the most later check-outs any one check-out saw served before
// it.
func fifo(arrived, served []int) (inverted float64, maxOvertaken int, err error) {
	n := len(arrived)
	if len(served) != n {
		return 0, 0, fmt.Errorf("bench: %d arrival ranks, %d service ranks", n, len(served))
	}
	order := make([]int, n) // arrival ranks in service order
	filled := make([]bool, n)
	for i, r := range served {
		if r < 0 || r >= n || filled[r] || arrived[i] < 0 || arrived[i] >= n {
			return 0, 0, fmt.Errorf("bench: the ranks are not permutations of 0..%d", n-1)
		}
		order[r], filled[r] = arrived[i], true
	}
	if n < 2 {
		return 0, 0, nil
	}
	var inv int
	for i := range n {
		overtaken := 0 // served before order[i] although arrived after it
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
// service order and its rank in arrival order, either way.
func rankShift(arrived, served []int) int {
	most := 0
	for i := range min(len(arrived), len(served)) {
		d := served[i] - arrived[i]
		most = max(most, d, -d)
	}
	return most
}

// order is how far an order of service is from the order of arrival.
type order struct {
	inverted  float64 // fraction of pairs served in the opposite order
	overtaken int     // most later arrivals served before one check-out
	shift     int     // largest difference of ranks
}

func orderOf(arrived, served []int) (order, error) {
	inv, most, err := fifo(arrived, served)
	return order{inv, most, rankShift(arrived, served)}, err
}

// worst keeps the worst of each figure of o and x.
func (o order) worst(x order) order {
	return order{max(o.inverted, x.inverted), max(o.overtaken, x.overtaken), max(o.shift, x.shift)}
}

// eventsAtHandOver tells the pools whose ConnectionCheckedOut events come in
// the order the pool hands connections over: mongopool queues the event under
// its lock as it hands a connection to a check-out. The official pool emits
// it on the check-out's goroutine once that goroutine has been woken and
// runs, so that its events come in the order its check-outs return, the
// scheduler's reordering of woken goroutines included, and nothing it
// exposes shows its hand-over order.
var eventsAtHandOver = map[Kind]bool{Mongopool: true}

// stormResult is what one storm gave.
type stormResult struct {
	wall     time.Duration
	flush    time.Duration // from the last return of a connection until its events were all delivered
	peak     int
	created  int
	waits    latencies
	returned order   // by the order in which the calls returned
	handed   order   // by the order of the CheckedOut events
	eventRet float64 // pairs whose CheckedOut events and returns came in opposite orders
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
	holders := make([]atomic.Int64, maxConnID) // each connection's uses, counted by its holders
	var arrivals, returns atomic.Int64
	var parked, done sync.WaitGroup
	release := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		parked.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			co := &cos[i]
			parked.Done()
			<-release
			t := time.Now()
			co.arrived = int(arrivals.Add(1) - 1)
			c, err := p.Get(ctx)
			co.returned = int(returns.Add(1) - 1)
			co.wait = time.Since(t)
			if err != nil {
				errs <- err
				return
			}
			if id := p.ID(c); id > 0 && id < maxConnID {
				co.use = useKey(id, holders[id].Add(1))
			} else {
				errs <- fmt.Errorf("bench: connection id %d out of range", id)
			}
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
	if err := p.Flush(ctx); err != nil {
		return stormResult{}, fmt.Errorf("bench: waiting for the events: %w", err)
	}
	flush := time.Since(t0) - wall

	handed, err := rec.handOver(cos)
	if err != nil {
		return stormResult{}, err
	}
	arrived, rets := make([]int, n), make([]int, n)
	waits := make([]time.Duration, n)
	for i, c := range cos {
		arrived[i], rets[i], waits[i] = c.arrived, c.returned, c.wait
	}
	res := stormResult{wall: wall, flush: flush, waits: summarize(waits)}
	if res.returned, err = orderOf(arrived, rets); err != nil {
		return res, err
	}
	if res.handed, err = orderOf(arrived, handed); err != nil {
		return res, err
	}
	if res.eventRet, _, err = fifo(handed, rets); err != nil {
		return res, err
	}
	rec.mu.Lock()
	res.peak, res.created = rec.peak, rec.created
	rec.mu.Unlock()
	return res, nil
}

// orderFigs renders o's figures, named after how the service was ordered.
func orderFigs(how string, o order) []Fig {
	return []Fig{
		{"out of order, " + how, fmt.Sprintf("%.4f%%", 100*o.inverted)},
		{"most overtaken, " + how, strconv.Itoa(o.overtaken)},
		{"largest shift, " + how, strconv.Itoa(o.shift)},
	}
}

// notObservable stands for a figure that a pool's events cannot give.
const notObservable = "n/a"

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
				r.returned = r.returned.worst(x.returned)
				r.handed = r.handed.worst(x.handed)
				r.eventRet = max(r.eventRet, x.eventRet)
				r.flush = max(r.flush, x.flush)
			}
			res[k] = r
			figs := []Fig{
				{"wall", fmtDur(r.wall)},
				{"peak establishing", strconv.Itoa(r.peak)},
				{"created", strconv.Itoa(r.created)},
				{"check-out wait", r.waits.String()},
			}
			figs = append(figs, orderFigs("as returned", r.returned)...)
			if eventsAtHandOver[k] {
				figs = append(figs, orderFigs("as handed over", r.handed)...)
				figs = append(figs, Fig{"events delivered after", fmtDur(r.flush)})
			} else {
				for _, f := range orderFigs("as handed over", r.handed) {
					figs = append(figs, Fig{f.Name, notObservable})
				}
			}
			s.row("4 storm", cas, k, figs...)
		}
		mp, off := res[Mongopool], res[Official]
		s.check("4 storm", fmt.Sprintf("maxConnecting %d: in flight <= %d, wall <= official, no check-out overtaken by more than 5 as handed over", mc, mc),
			fmt.Sprintf("peak %d; wall %s vs %s; most overtaken by %d as handed over, %d as returned (official, as returned: %d)",
				mp.peak, fmtDur(mp.wall), fmtDur(off.wall), mp.handed.overtaken, mp.returned.overtaken, off.returned.overtaken),
			mp.peak <= mc && mp.wall <= off.wall && mp.handed.overtaken <= 5)
		s.note("Shape 4, %s: the official pool's ConnectionCheckedOut events and its check-outs' returns came in "+
			"opposite orders for %.4f%% of the pairs (worst round), mongopool's for %.4f%%.", cas, 100*off.eventRet, 100*mp.eventRet)
	}
	s.note("Shape 4: each check-out takes a ticket just before it calls the pool (its arrival) and another as soon as " +
		"the call returns: \"as returned\" compares these two orders, the same way for every pool, and includes the " +
		"Go scheduler's reordering of the goroutines the pool wakes. \"As handed over\" compares the arrival order with " +
		"the order of the pool's ConnectionCheckedOut events (matched to the check-outs by connection and use, once all " +
		"were delivered): mongopool queues that event under its lock as it hands a connection over, so this is the " +
		"order its wait queue served. The official pool emits it on the check-out's goroutine once woken, which gives " +
		"the order its calls returned, not the order it handed connections over, which nothing it exposes shows: n/a. " +
		"Events delivered after: the longest time, over the rounds, mongopool's delivery goroutine took past the last " +
		"check-in to deliver the storm's events (the official pool delivers each inside the call that causes it).")
	return nil
}

// warmUpTime times, from the moment the pool is made ready, the establishment of
// minPoolSize connections on the server with slow hellos. A connection counts
// once the pool reports it ready (ConnectionReady), as of the moment its
// establishment ended on the goroutine that ran it (Config.Established), not
// the moment a delivery goroutine passed the event on.
func (s *Suite) warmUpTime(k Kind, tick time.Duration, limit time.Duration) (time.Duration, []time.Duration, error) {
	rec := newRecorder(0, s.WarmUpMin)
	cfg := Config{Addr: s.slow.Addr(), MaxPoolSize: s.WarmUpMin, MinPoolSize: s.WarmUpMin,
		Events: rec.event, Established: rec.establishedConn, MaintainInterval: tick}
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
	if rec.unmatched > 0 {
		return 0, nil, fmt.Errorf("bench: %d connections ready with no time of establishment", rec.unmatched)
	}
	// mongopool's events come in the order of its lock, which two
	// establishments that end at once may take in either order.
	at := slices.Clone(rec.readyAt[:s.WarmUpMin])
	slices.Sort(at)
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
