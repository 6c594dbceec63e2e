package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/mongopool/mongopool/internal/embedded"
	"github.com/mongopool/mongopool/mongotest"
)

// Suite runs the shapes against shared servers and collects their figures.
// The zero value is not usable: fill in the settings and call Start.
type Suite struct {
	// Timing of the measured runs of shapes 1, 2, 3, 6 and 7.
	Timing Timing
	// Rounds is how many times each of those runs is repeated, alternating
	// the pools; the median run counts. At least 1.
	Rounds int

	// StormGoroutines is shape 4's number of check-outs released at once
	// (1000 in the full run).
	StormGoroutines int
	// StormHold is how long each storm check-out holds its connection.
	StormHold time.Duration
	// Delay is how long the first reply of every new connection (its hello)
	// takes in shapes 4 and 5: a second test server holds every hello back
	// that long with a blockConnection fail point.
	Delay time.Duration
	// WarmUpMin is shape 5's minPoolSize (and maxPoolSize).
	WarmUpMin int
	// OfficialTick is the official pool's maintenance interval in shape 5's
	// default measurement; Long also runs it with its default 10 s interval.
	OfficialTick time.Duration
	Long         bool
	// LatencyOps is how many check-outs shape 3's latency pass times.
	LatencyOps int
	// PingGoroutines are shape 6's concurrency levels.
	PingGoroutines []int
	// Ferret adds FerretDB as a second server to shape 6.
	Ferret bool

	// Progress, if not nil, hears what is being measured.
	Progress io.Writer

	server *mongotest.Server
	slow   *mongotest.Server // its hellos take Delay
	ferret *embedded.Server

	Report Report
}

// Report is the suite's output: figures by shape and pool, and the issue's
// targets checked against them.
type Report struct {
	Rows   []Row
	Checks []Check
	Notes  []string
}

// Row is one pool's figures in one case of a shape.
type Row struct {
	Shape string
	Case  string
	Kind  Kind
	Figs  []Fig
}

// Fig is one named figure, formatted.
type Fig struct{ Name, Value string }

// Check is one target of the issue, with what was measured.
type Check struct {
	Shape  string
	Target string
	Got    string
	OK     bool
}

// Full returns the settings of the full run the issue describes.
func Full() *Suite {
	return &Suite{
		Timing:          Timing{Target: time.Second},
		Rounds:          3,
		StormGoroutines: 1000,
		StormHold:       time.Millisecond,
		Delay:           5 * time.Millisecond,
		WarmUpMin:       100,
		OfficialTick:    100 * time.Millisecond,
		LatencyOps:      64 * 1000,
		PingGoroutines:  []int{8, 64},
		Ferret:          true,
	}
}

// Smoke returns settings that run every shape once on a tiny scale, in
// seconds: for CI, to catch breakage, not to measure.
func Smoke() *Suite {
	return &Suite{
		Timing:          Timing{Fixed: 200},
		Rounds:          1,
		StormGoroutines: 40,
		StormHold:       time.Millisecond,
		Delay:           2 * time.Millisecond,
		WarmUpMin:       6,
		OfficialTick:    20 * time.Millisecond,
		LatencyOps:      640,
		PingGoroutines:  []int{8},
		Ferret:          true,
	}
}

// Start starts the test servers (one of them with slow hellos) and, if
// asked, FerretDB.
func (s *Suite) Start() error {
	if s.Rounds < 1 {
		s.Rounds = 1
	}
	var err error
	if s.server, err = mongotest.Start(); err != nil {
		return err
	}
	if s.slow, err = mongotest.Start(); err != nil {
		s.Close()
		return err
	}
	// The hello is the first command of every connection: blocking it
	// delays each establishment by Delay, and nothing else.
	err = s.slow.SetFailPoint(mongotest.FailPoint{Commands: []string{"hello", "isMaster", "ismaster"}, BlockTime: s.Delay})
	if err != nil {
		s.Close()
		return err
	}
	if s.Ferret {
		if s.ferret, err = embedded.Start(embedded.Options{}); err != nil {
			s.Close()
			return err
		}
	}
	return nil
}

// Close stops what Start started.
func (s *Suite) Close() {
	if s.ferret != nil {
		s.ferret.Close()
	}
	if s.slow != nil {
		s.slow.Close()
	}
	if s.server != nil {
		s.server.Close()
	}
}

// Run runs the shapes listed (all of 1-7 if none), in order.
func (s *Suite) Run(shapes ...int) error {
	if len(shapes) == 0 {
		shapes = []int{1, 2, 3, 4, 5, 6, 7}
	}
	for _, n := range shapes {
		var err error
		switch n {
		case 1:
			err = s.Serial()
		case 2:
			err = s.Parallel()
		case 3:
			err = s.Contended()
		case 4:
			err = s.Storm()
		case 5:
			err = s.WarmUp()
		case 6:
			err = s.EndToEnd()
		case 7:
			err = s.Monitoring()
		default:
			err = fmt.Errorf("bench: no shape %d (there are 1 to 7)", n)
		}
		if err != nil {
			return fmt.Errorf("shape %d: %w", n, err)
		}
	}
	return nil
}

func (s *Suite) progress(format string, args ...any) {
	if s.Progress != nil {
		fmt.Fprintf(s.Progress, format+"\n", args...)
	}
}

func (s *Suite) row(shape, cas string, k Kind, figs ...Fig) {
	s.Report.Rows = append(s.Report.Rows, Row{shape, cas, k, figs})
}

func (s *Suite) check(shape, target, got string, ok bool) {
	s.Report.Checks = append(s.Report.Checks, Check{shape, target, got, ok})
}

func (s *Suite) note(format string, args ...any) {
	s.Report.Notes = append(s.Report.Notes, fmt.Sprintf(format, args...))
}

func measureFigs(m Measure) []Fig {
	return []Fig{
		{"ns/op", fmt.Sprintf("%.0f", m.NsOp)},
		{"B/op", fmt.Sprintf("%.0f", m.BOp)},
		{"allocs/op", fmt.Sprintf("%.2f", m.AllocsOp)},
	}
}

// noAllocs is the "0 allocs/op" of the targets: testing.B truncates allocs/op
// to an integer; this is stricter and allows only the harness's own few
// allocations per run (goroutines, a WaitGroup) spread over the operations.
func noAllocs(m Measure) bool { return m.AllocsOp < 0.01 }

// workload builds the measured function for one pool.
type workload func(p Pool) func(n int) error

// compare measures w on each kind, each with a pool made by cfg and warmed
// with warm connections, Rounds times alternating the kinds, and returns the
// median run of each.
func (s *Suite) compare(kinds []Kind, cfg Config, warm int, w workload) (map[Kind]Measure, map[Kind]Pool, error) {
	pools := make(map[Kind]Pool, len(kinds))
	for _, k := range kinds {
		c := cfg
		c.Addr = s.server.Addr()
		p, err := NewPool(k, c)
		if err != nil {
			closePools(pools)
			return nil, nil, fmt.Errorf("%s: %w", k, err)
		}
		pools[k] = p
		if err := warmUp(p, warm); err != nil {
			closePools(pools)
			return nil, nil, fmt.Errorf("%s: warming: %w", k, err)
		}
	}
	ms, err := s.alternate(kinds, func(k Kind) func(n int) error { return flushed(pools[k], w(pools[k])) })
	if err != nil {
		closePools(pools)
		return nil, nil, err
	}
	return ms, pools, nil
}

// flushed is fn followed by the delivery of the events it caused, so that a
// measured run pays for all of its events with either pool: the official
// pool calls its handler inside the calls measured, mongopool on a goroutine
// of its own that may still be at work when the last call returns. Without
// an event handler or a logger there is nothing to wait for.
func flushed(p Pool, fn func(n int) error) func(n int) error {
	return func(n int) error {
		if err := fn(n); err != nil {
			return err
		}
		return p.Flush(context.Background())
	}
}

// alternate measures the work of each kind (work builds it) Rounds times,
// alternating the kinds round by round, and returns the median run of each.
func (s *Suite) alternate(kinds []Kind, work func(Kind) func(n int) error) (map[Kind]Measure, error) {
	runs := make(map[Kind][]Measure, len(kinds))
	for range s.Rounds {
		for _, k := range kinds {
			m, err := s.Timing.measure(work(k))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			runs[k] = append(runs[k], m)
		}
	}
	out := make(map[Kind]Measure, len(kinds))
	for k, ms := range runs {
		out[k] = median(ms)
	}
	return out, nil
}

// warmUp has p establish n connections and leaves them idle.
func warmUp(p Pool, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held := make([]any, 0, n)
	var err error
	for range n {
		var c any
		if c, err = p.Get(ctx); err != nil {
			break
		}
		held = append(held, c)
	}
	for _, c := range held {
		p.Put(c)
	}
	return err
}

// serial is shape 1's work: check out, check in, one goroutine.
func serial(p Pool) func(n int) error {
	ctx := context.Background()
	return func(n int) error {
		for range n {
			c, err := p.Get(ctx)
			if err != nil {
				return err
			}
			p.Put(c)
		}
		return nil
	}
}

// spread is the same work from g goroutines.
func spread(g int) workload {
	return func(p Pool) func(n int) error {
		ctx := context.Background()
		return func(n int) error {
			return parallel(n, g, func(_, count int) error {
				for range count {
					c, err := p.Get(ctx)
					if err != nil {
						return err
					}
					p.Put(c)
				}
				return nil
			})
		}
	}
}

var allKinds = []Kind{Mongopool, Official, Puddle}

// Serial is shape 1: serial check out + check in, connections established.
func (s *Suite) Serial() error {
	s.progress("shape 1: serial check out + check in")
	ms, pools, err := s.compare(allKinds, Config{MaxPoolSize: 100}, 1, serial)
	if err != nil {
		return err
	}
	closePools(pools)
	for _, k := range allKinds {
		s.row("1 serial", "warm, 1 goroutine", k, measureFigs(ms[k])...)
	}
	mp, off := ms[Mongopool], ms[Official]
	s.check("1 serial", "ns/op <= 1/8 of official, 0 allocs/op",
		fmt.Sprintf("%.0f vs %.0f ns/op (1/%.1f), %.2f allocs/op", mp.NsOp, off.NsOp, off.NsOp/mp.NsOp, mp.AllocsOp),
		mp.NsOp*8 <= off.NsOp && noAllocs(mp))
	return nil
}

func closePools(pools map[Kind]Pool) {
	for _, p := range pools {
		p.Close()
	}
}

// Parallel is shape 2: check out + check in from GOMAXPROCS and from 64
// goroutines, with enough connections for all.
func (s *Suite) Parallel() error {
	for _, g := range []int{runtime.GOMAXPROCS(0), 64} {
		cas := fmt.Sprintf("%d goroutines, maxPoolSize 100", g)
		s.progress("shape 2: parallel, %s", cas)
		ms, pools, err := s.compare(allKinds, Config{MaxPoolSize: 100}, g, spread(g))
		if err != nil {
			return err
		}
		closePools(pools)
		for _, k := range allKinds {
			s.row("2 parallel", cas, k, measureFigs(ms[k])...)
		}
		if g == 64 {
			mp, off := ms[Mongopool], ms[Official]
			s.check("2 parallel", "64 goroutines: ns/op <= 1/4 of official, 0 allocs/op",
				fmt.Sprintf("%.0f vs %.0f ns/op (1/%.1f), %.2f allocs/op", mp.NsOp, off.NsOp, off.NsOp/mp.NsOp, mp.AllocsOp),
				mp.NsOp*4 <= off.NsOp && noAllocs(mp))
		}
	}
	return nil
}

const contendedGoroutines = 64

// contendedResult is what shape 3's work gave: the measured runs, each
// check-out's wait, mongopool's allocations per check-out that waited, and
// the events it dropped.
type contendedResult struct {
	ms      map[Kind]Measure
	lats    map[Kind]latencies
	perWait float64
	dropped uint64
}

// contended measures shape 3's work (64 goroutines, maxPoolSize 4) for
// kinds, with cfg's monitoring, and times each check-out in a second pass.
func (s *Suite) contended(kinds []Kind, cfg Config) (contendedResult, error) {
	cfg.MaxPoolSize = 4
	ms, pools, err := s.compare(kinds, cfg, 4, spread(contendedGoroutines))
	if err != nil {
		return contendedResult{}, err
	}
	defer closePools(pools)

	// Allocations per blocked check-out, from one more run counted by the
	// pool itself.
	perWait := -1.0
	if mp, ok := pools[Mongopool].(*mongopoolPool); ok {
		before := mp.p.Stats().WaitCount
		m, err := run(ms[Mongopool].N, flushed(mp, spread(contendedGoroutines)(mp)))
		if err != nil {
			return contendedResult{}, err
		}
		if waits := mp.p.Stats().WaitCount - before; waits > 0 {
			perWait = float64(m.Allocs) / float64(waits)
		}
	}

	lats := make(map[Kind]latencies, len(kinds))
	for _, k := range kinds {
		l, err := checkOutLatencies(pools[k], s.LatencyOps, contendedGoroutines)
		if err != nil {
			return contendedResult{}, fmt.Errorf("%s: %w", k, err)
		}
		lats[k] = l
	}
	return contendedResult{ms, lats, perWait, eventsDropped(pools)}, nil
}

// eventsDropped returns the events mongopool's pool among pools dropped,
// its handlers having fallen too far behind: a measured run that dropped
// some did less work than its figures suggest. The official pool delivers
// every event inside the call that caused it, and drops none.
func eventsDropped(pools map[Kind]Pool) uint64 {
	if mp, ok := pools[Mongopool].(*mongopoolPool); ok {
		return mp.p.Stats().EventsDropped
	}
	return 0
}

// checkOutLatencies times each of n check-outs made by g goroutines.
func checkOutLatencies(p Pool, n, g int) (latencies, error) {
	ctx := context.Background()
	per := make([][]time.Duration, g)
	err := parallel(n, g, func(w, count int) error {
		ds := make([]time.Duration, 0, count)
		for range count {
			t := time.Now()
			c, err := p.Get(ctx)
			ds = append(ds, time.Since(t))
			if err != nil {
				return err
			}
			p.Put(c)
		}
		per[w] = ds
		return nil
	})
	var all []time.Duration
	for _, ds := range per {
		all = append(all, ds...)
	}
	return summarize(all), err
}

// Contended is shape 3: 64 goroutines share maxPoolSize 4.
func (s *Suite) Contended() error {
	s.progress("shape 3: contended, 64 goroutines, maxPoolSize 4")
	r, err := s.contended(allKinds, Config{})
	if err != nil {
		return err
	}
	ms, lats, perWait := r.ms, r.lats, r.perWait
	for _, k := range allKinds {
		figs := append(measureFigs(ms[k]), Fig{"check-out wait", lats[k].String()})
		if k == Mongopool {
			figs = append(figs, Fig{"allocs/blocked check-out", fmt.Sprintf("%.3f", perWait)})
		}
		s.row("3 contended", "64 goroutines, maxPoolSize 4", k, figs...)
	}
	mp, off := ms[Mongopool], ms[Official]
	s.check("3 contended", "ns/op <= 1/2 of official, p99 wait no worse, <= 1 alloc per blocked check-out",
		fmt.Sprintf("%.0f vs %.0f ns/op (1/%.1f); p99 %s vs %s; %.3f allocs/blocked check-out",
			mp.NsOp, off.NsOp, off.NsOp/mp.NsOp, fmtDur(lats[Mongopool].P99), fmtDur(lats[Official].P99), perWait),
		mp.NsOp*2 <= off.NsOp && lats[Mongopool].P99 <= lats[Official].P99 && perWait >= 0 && perWait <= 1)
	return nil
}

// Monitoring is shape 7: shapes 1 and 3 with a no-op event subscriber, and
// with debug logging formatted into io.Discard.
func (s *Suite) Monitoring() error {
	kinds := []Kind{Mongopool, Official}
	variants := []struct {
		name string
		cfg  Config
	}{
		{"events", Config{Events: func(Ev) {}}},
		{"debug log", Config{DebugLog: true}},
	}
	for _, v := range variants {
		s.progress("shape 7: serial with %s", v.name)
		cfg := v.cfg
		cfg.MaxPoolSize = 100
		ms, pools, err := s.compare(kinds, cfg, 1, serial)
		if err != nil {
			return err
		}
		dropped := eventsDropped(pools)
		closePools(pools)
		for _, k := range kinds {
			s.row("7 monitoring", "serial, "+v.name, k, append(measureFigs(ms[k]), droppedFig(k, dropped)...)...)
		}
		s.droppedNote("serial, "+v.name, dropped)
		s.progress("shape 7: contended with %s", v.name)
		c, err := s.contended(kinds, v.cfg)
		if err != nil {
			return err
		}
		for _, k := range kinds {
			figs := append(measureFigs(c.ms[k]), Fig{"check-out wait", c.lats[k].String()})
			s.row("7 monitoring", "contended, "+v.name, k, append(figs, droppedFig(k, c.dropped)...)...)
		}
		s.droppedNote("contended, "+v.name, c.dropped)
	}
	s.note("Shape 7: mongopool delivers its events and log records on a goroutine of its own; each measured run " +
		"ends when they have all been delivered (Flush), so that its figures include their cost, as the official " +
		"pool's include its handler's, called inside each check-out and check-in. Events dropped: those mongopool's " +
		"handler or logger never got, over the whole case (the official pool drops none).")
	return nil
}

// droppedNote says, when mongopool dropped events in a case of shape 7, that
// its figures there do not compare with the official pool's.
func (s *Suite) droppedNote(cas string, dropped uint64) {
	if dropped > 0 {
		s.note("Shape 7, %s: mongopool dropped %d events, which its handler or logger never got: its delivery "+
			"goroutine fell behind, and the pool went on without it. Its figures leave their delivery out; the "+
			"official pool's include the delivery of every event: they do not compare.", cas, dropped)
	}
}

// droppedFig is mongopool's count of events dropped, the official pool's
// figure being 0 by construction.
func droppedFig(k Kind, dropped uint64) []Fig {
	if k != Mongopool {
		return nil
	}
	return []Fig{{"events dropped", strconv.FormatUint(dropped, 10)}}
}

var errTimeout = errors.New("bench: timed out")
