package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

const (
	// replsetName and replsetMembers are the in-process replica set of
	// -replset.
	replsetName    = "rs"
	replsetMembers = 3
	// maxPrimaries bounds the primaries the summary lists: a deployment that
	// changes its primary more often than that in one run has its first
	// ones listed, and the others counted.
	maxPrimaries = 16
)

// runClient is run's path for a deployment of several servers: the workload
// goes through a mongopool.Client, which keeps a pool per server; the
// progress and the summary show the topology and each pool. With rs (the
// -replset set), the primary steps down halfway through the run and another
// member is elected. It returns the exit code, as run does.
func runClient(ctx, running context.Context, start time.Time, c config, cs *connstring.ConnString, uri, where string,
	rs *mongotest.ReplicaSet, o *output) int {
	out, fail := o.out, o.fail
	monitor := &eventMonitor{start: start, log: o.events, byAddress: true}
	topo := &topologyWatch{start: start, log: o.events}
	cmds := &commandWatch{}
	poolOpts := append(c.poolOptions(cs), pool.WithEventHandler(monitor.handle))
	if o.web != nil {
		poolOpts = append(poolOpts, o.web.handler(webClient))
	}
	opts := []mongopool.ClientOption{
		mongopool.WithPoolOptions(poolOpts...),
		mongopool.WithTopologyEventHandler(topo.handle),
		mongopool.WithCommandEventHandler(cmds.handle(topo)),
	}
	openCtx, cancelOpen := context.WithTimeout(running, openLimit)
	defer cancelOpen()
	began := time.Now()
	client, err := mongopool.Connect(openCtx, uri, opts...)
	if err != nil {
		printWarnings(out, cs.Warnings) // they may say why
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // without Connect's "cannot reach the deployment of <uri>", said below
		}
		switch {
		case ctx.Err() != nil:
			return fail("interrupted while connecting to %s", where)
		case running.Err() != nil:
			return fail("cannot reach %s within -duration (%v): %v", where, time.Since(began).Round(time.Millisecond), err)
		}
		return fail("cannot reach %s: %v", where, err)
	}
	cancelOpen()
	closed := false
	defer func() {
		if !closed {
			client.Close()
		}
	}()
	topo.attach(client.Topology())
	if o.web != nil {
		if err := o.web.d.AddSource(webClient, client.Pools); err != nil {
			return fail("cannot show the pools on the dashboard: %v", err)
		}
	}

	db := "mongopool_demo_" + randomHex(4)
	out.println(fmt.Sprintf("mongopool: %d goroutines for %v against %s: %.0f%% finds (readPreference %s), %.0f%% inserts into %s.%s",
		c.goroutines, c.duration, where, 100*c.findRatio, readPrefName(cs), 100*(1-c.findRatio), db, collection))
	printWarnings(out, client.Warnings())
	// The pools' events come on goroutines of their own: the PoolCreated
	// whose options this line shows may not have come yet.
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	client.Flush(fctx)
	fcancel()
	out.println("pools: " + monitor.options() + " (one per server)")

	w := &workload{client: client, db: db, goroutines: c.goroutines, findRatio: c.findRatio}
	opCtx, cancelOps := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelOps()

	var bg sync.WaitGroup
	progress := &watcher{out: out, w: w,
		plain: func(elapsed time.Duration, rate float64) []string {
			topo.refresh()
			return clientProgressLines(elapsed, rate, topo.Description(), topo.live())
		}}
	if o.live {
		title := "workload"
		if c.scenario != "" {
			title = c.scenario
		}
		progress.live = &liveView{title: title, limit: c.duration, topology: func() string { return topo.Description().Type.String() }}
	}
	if o.events != nil {
		progress.onTick = o.events.flush
	}
	bg.Go(func() { observe(running, topo.viewPools, progress) })
	var fo *failover
	if rs != nil {
		fo = &failover{start: start}
		bg.Go(func() { fo.run(running, opCtx, rs, cmds, out) })
	}
	elapsed := drive(running, opCtx, cancelOps, w)
	bg.Wait()

	dropCtx, cancelDrop := context.WithTimeout(context.WithoutCancel(ctx), cleanupLimit)
	dropErr := w.admin(dropCtx, db, bson.D{{Key: "dropDatabase", Value: 1}})
	cancelDrop()

	// The pools as the run ended, then their final counts once closed.
	topo.refresh()
	end := topo.Description()
	pools := topo.seen()
	before := statsOf(pools)
	closed = true
	closeErr := client.Close()
	// The closing events reach the handlers after Close: the summary
	// counts them all.
	flushErr := flushEvents(client.Flush, poolsOf(pools)...)
	took := time.Since(start)
	if ctx.Err() != nil {
		out.println("mongopool: interrupted")
	}
	s := summarizeClient(w, monitor, topo, cmds, fo, end, before, statsOf(pools), elapsed, readPrefName(cs))
	s.took, s.failures = timingLine(took, c.duration, c.grace, s.failures)
	if dropErr != nil {
		s.failures = append(s.failures, fmt.Sprintf("could not drop the database %s: %s", db, briefError(dropErr)))
	}
	if closeErr != nil {
		s.failures = append(s.failures, "closing the client: "+closeErr.Error())
	}
	if flushErr != nil {
		s.failures = append(s.failures, flushErr.Error())
	}
	if o.events != nil {
		if err := o.events.close(); err != nil {
			s.failures = append(s.failures, err.Error())
		}
	}
	s.print(out)
	if len(s.failures) > 0 {
		return fail("%s", strings.Join(s.failures, "; "))
	}
	return 0
}

// readPrefName is the read preference of the connection string's reads.
func readPrefName(cs *connstring.ConnString) string {
	return cmp.Or(cs.ReadPreference, "primary")
}

// topologyWatch follows the client's topology: it keeps every pool the
// client made (so that their counts can be read once the client is closed),
// and the primaries the client saw, from the SDAM events.
type topologyWatch struct {
	start time.Time
	log   *eventLog // nil without -events
	topo  atomic.Pointer[topology.Topology]

	mu        sync.Mutex
	pools     []seenPool // in the order first seen
	primaries []primarySeen
	more      int    // primaries seen beyond maxPrimaries
	primary   string // the primary now, "" when none is known
	// ackWanted is set while the latest primary has acknowledged no insert
	// yet: only then do the command events take the lock.
	ackWanted atomic.Bool
}

// seenPool is a pool of the client's, and its server's address.
type seenPool struct {
	addr string
	p    *pool.Pool
}

// primarySeen is a primary the client saw, when it saw it (from the start
// of the run), and when it acknowledged its first insert after that.
type primarySeen struct {
	addr      string
	seen, ack time.Time
	hasAck    bool
}

func (t *topologyWatch) attach(topo *topology.Topology) {
	t.topo.Store(topo)
	t.refresh()
}

func (t *topologyWatch) handle(e topology.Event) {
	ch, ok := e.(*topology.TopologyDescriptionChanged)
	if !ok {
		return
	}
	now := time.Now()
	primary := primaryOf(ch.New)
	t.mu.Lock()
	if primary != "" && primary != t.primary {
		if len(t.primaries) < maxPrimaries {
			t.primaries = append(t.primaries, primarySeen{addr: primary, seen: now})
			t.ackWanted.Store(true)
		} else {
			t.more++
		}
	}
	t.primary = primary
	t.mu.Unlock()
	if t.log != nil {
		t.log.topologyChanged(now, ch.New.Summary())
	}
	// The pools of servers just found exist now: keep them, before a
	// removal of their server could close them unseen.
	t.refresh()
}

// acked notes an insert acknowledged by the server at address: the first
// one by the latest primary the client saw.
func (t *topologyWatch) acked(address string, at time.Time) {
	if !t.ackWanted.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.primaries); n > 0 && t.primaries[n-1].addr == address && !t.primaries[n-1].hasAck {
		t.primaries[n-1].ack, t.primaries[n-1].hasAck = at, true
		t.ackWanted.Store(false)
	}
}

func primaryOf(d topology.Description) string {
	for _, sd := range d.Servers() {
		if sd.Type == topology.RSPrimary {
			return sd.Address
		}
	}
	return ""
}

// refresh adds the pools of the topology's servers that it does not have
// yet.
func (t *topologyWatch) refresh() {
	topo := t.topo.Load()
	if topo == nil {
		return
	}
	for _, sd := range topo.Description().Servers() {
		s, ok := topo.Server(sd.Address)
		if !ok || s.Pool() == nil {
			continue
		}
		p := s.Pool()
		t.mu.Lock()
		if !slices.ContainsFunc(t.pools, func(sp seenPool) bool { return sp.p == p }) {
			t.pools = append(t.pools, seenPool{sd.Address, p})
		}
		t.mu.Unlock()
	}
}

// Description returns the topology's description now.
func (t *topologyWatch) Description() topology.Description { return t.topo.Load().Description() }

// poolStats is a pool's snapshot, with its server's address.
type poolStats struct {
	addr  string
	stats pool.Stats
}

// seen returns the pools seen so far, sorted by address (then in the order
// seen).
func (t *topologyWatch) seen() []seenPool {
	t.mu.Lock()
	pools := slices.Clone(t.pools)
	t.mu.Unlock()
	slices.SortStableFunc(pools, func(a, b seenPool) int { return strings.Compare(a.addr, b.addr) })
	return pools
}

// poolsOf returns the pools of seen, in the same order.
func poolsOf(seen []seenPool) []*pool.Pool {
	out := make([]*pool.Pool, len(seen))
	for i, sp := range seen {
		out[i] = sp.p
	}
	return out
}

// statsOf returns the Stats of each pool, in the same order.
func statsOf(pools []seenPool) []poolStats {
	out := make([]poolStats, len(pools))
	for i, sp := range pools {
		out[i] = poolStats{sp.addr, sp.p.Stats()}
	}
	return out
}

// commandWatch counts the client's commands from its command monitoring
// events, and catches the first insert acknowledged by a server it is told
// to watch (the member -replset elects).
type commandWatch struct {
	started, succeeded, failed atomic.Int64

	mu       sync.Mutex
	failures map[string]int64 // failed commands by codeName

	watched atomic.Pointer[string]
	ackOnce sync.Once
	ack     atomic.Pointer[time.Time]
}

func (w *commandWatch) handle(topo *topologyWatch) func(mongopool.CommandEvent) {
	return func(e mongopool.CommandEvent) {
		switch e.Type {
		case mongopool.CommandStarted:
			w.started.Add(1)
		case mongopool.CommandSucceeded:
			w.succeeded.Add(1)
			if e.Name == "insert" {
				now := time.Now()
				if a := w.watched.Load(); a != nil && *a == e.Address {
					w.ackOnce.Do(func() { w.ack.Store(&now) })
				}
				topo.acked(e.Address, now)
			}
		case mongopool.CommandFailed:
			w.failed.Add(1)
			w.mu.Lock()
			if w.failures == nil {
				w.failures = map[string]int64{}
			}
			countName(w.failures, failureName(e.Failure))
			w.mu.Unlock()
		}
	}
}

// failureName names a failed command's error: its codeName, or what kind of
// error it is.
func failureName(err error) string {
	var cmdErr *wire.CommandError
	switch {
	case errors.As(err, &cmdErr) && cmdErr.CodeName != "":
		return cmdErr.CodeName
	case errors.As(err, &cmdErr):
		return fmt.Sprintf("code %d", cmdErr.Code)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "network error"
}

// failover is -replset's scenario: halfway through the run, the primary
// steps down and the next member is elected.
type failover struct {
	start time.Time

	mu       sync.Mutex
	happened bool
	at       time.Time // of the election
	old, new string    // addresses
	err      error
}

// run waits for the middle of the run, then steps the primary down and
// elects the next member. opCtx bounds the step-down, which waits for the
// writes under way on the primary to end.
func (f *failover) run(running, opCtx context.Context, rs *mongotest.ReplicaSet, cmds *commandWatch, out *console) {
	deadline, ok := running.Deadline()
	if !ok {
		return
	}
	mid := time.NewTimer(time.Until(deadline) / 2)
	defer mid.Stop()
	select {
	case <-running.Done():
		return
	case <-mid.C:
	}
	members := rs.Members()
	old := slices.Index(members, rs.Primary())
	if old < 0 {
		f.fail(errors.New("the replica set has no primary to step down"))
		return
	}
	next := (old + 1) % len(members)
	ctx, cancel := context.WithTimeout(opCtx, drainLimit)
	err := rs.StepDown(ctx)
	cancel()
	if err != nil {
		f.fail(fmt.Errorf("step-down of %s: %w", members[old].Addr(), err))
		return
	}
	addr := members[next].Addr()
	cmds.watched.Store(&addr)
	at := time.Now()
	if err := rs.Elect(next); err != nil {
		f.fail(fmt.Errorf("election of %s: %w", addr, err))
		return
	}
	f.mu.Lock()
	f.happened, f.at, f.old, f.new = true, at, members[old].Addr(), addr
	f.mu.Unlock()
	out.println(fmt.Sprintf("mongopool: at %.2fs: %s stepped down, %s elected", at.Sub(f.start).Seconds(), members[old].Addr(), addr))
}

func (f *failover) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// viewPools returns the latest pool seen at each address, with the type
// of its server, for the live view.
func (t *topologyWatch) viewPools() []viewPool {
	t.refresh()
	d := t.Description()
	stats := t.live()
	pools := make([]viewPool, 0, len(stats))
	for addr, st := range stats {
		typ := "-"
		if sd, ok := d.Server(addr); ok {
			typ = sd.Type.String()
		}
		pools = append(pools, viewPool{addr: addr, typ: typ, now: st})
	}
	slices.SortFunc(pools, func(a, b viewPool) int { return strings.Compare(a.addr, b.addr) })
	return pools
}

// live returns the Stats of the latest pool seen at each address.
func (t *topologyWatch) live() map[string]pool.Stats {
	t.mu.Lock()
	pools := slices.Clone(t.pools)
	t.mu.Unlock()
	m := make(map[string]pool.Stats, len(pools))
	for _, sp := range pools {
		m[sp.addr] = sp.p.Stats() // a later pool at the same address replaces an earlier one
	}
	return m
}

// clientProgressLines renders the plain progress lines of a client: the
// rate, the topology's type and the totals of the pools, then a line per
// server.
func clientProgressLines(elapsed time.Duration, opsPerSec float64, d topology.Description, stats map[string]pool.Stats) []string {
	servers := d.Servers()
	slices.SortFunc(servers, func(a, b topology.ServerDescription) int { return strings.Compare(a.Address, b.Address) })
	var checkouts int64
	var waiting int
	lines := make([]string, 1, 1+len(servers))
	for _, sd := range servers {
		st, ok := stats[sd.Address]
		if !ok {
			lines = append(lines, fmt.Sprintf("  %-21s %-12s no pool", sd.Address, sd.Type))
			continue
		}
		checkouts += st.CheckedOut
		waiting += st.Waiting
		lines = append(lines, fmt.Sprintf("  %-21s %-12s in use %d idle %d waiting %d  checkouts %d",
			sd.Address, sd.Type, st.InUse, st.Available, st.Waiting, st.CheckedOut))
	}
	lines[0] = fmt.Sprintf("%4.1fs %6.0f ops/s  %s  checkouts %d  waiting %d",
		elapsed.Seconds(), opsPerSec, d.Type, checkouts, waiting)
	return lines
}

// clientSummary is the end-of-run report of the client path: what the
// workload saw, the topology at the end, the failover, the commands, each
// server's pool, and the cross-checks between them.
type clientSummary struct {
	results, admin *results
	started        int64
	monitor        *eventMonitor
	topo           *topologyWatch
	cmds           *commandWatch
	fo             *failover
	end            topology.Description
	before, final  []poolStats // as the run ended, and after Close
	elapsed        time.Duration
	readPref       string
	took           string // the line on how long the run lasted
	problems       []string
	notes          []string
	failures       []string
}

func summarizeClient(w *workload, m *eventMonitor, topo *topologyWatch, cmds *commandWatch, fo *failover,
	end topology.Description, before, final []poolStats, elapsed time.Duration, readPref string) *clientSummary {
	s := &clientSummary{
		results: &w.results, admin: &w.adminResults, started: w.ops.Load(), monitor: m, topo: topo, cmds: cmds,
		fo: fo, end: end, before: before, final: final, elapsed: elapsed, readPref: readPref,
	}
	s.crossCheck()
	r := s.results
	if len(s.problems) > 0 {
		s.failures = append(s.failures, fmt.Sprintf("%d of the summary's cross-checks failed (MISMATCH above)", len(s.problems)))
	}
	if n := r.unexplained(); n > 0 {
		s.failures = append(s.failures, fmt.Sprintf("%d operations failed: %s", n, r.kinds(0, numKinds, false)))
	}
	// A secondary may not have a document just inserted yet: a miss is a
	// failure only where the finds read from the primary, or from the
	// in-process set, whose replication is instantaneous.
	if r.notFound > 0 && (readPref == "primary" || fo != nil) {
		s.failures = append(s.failures, fmt.Sprintf("%d finds did not find a document the workload had inserted", r.notFound))
	}
	if r.ok() == 0 {
		s.failures = append(s.failures, "no operation succeeded")
	}
	if fo != nil {
		fo.mu.Lock()
		switch {
		case fo.err != nil:
			s.failures = append(s.failures, "the failover failed: "+fo.err.Error())
		case fo.happened && cmds.ack.Load() == nil && w.findRatio < 1:
			// (With -find-ratio 1 the workload writes nothing after its
			// first inserts: there is no write to time.)
			s.failures = append(s.failures, fmt.Sprintf("no write was acknowledged by %s, the primary elected", fo.new))
		}
		fo.mu.Unlock()
	}
	return s
}

func (s *clientSummary) print(out *console) {
	r, a := s.results, s.admin
	lines := []string{
		"",
		fmt.Sprintf("operations   %d succeeded in %v: %.0f ops/s; %d inserts, %d finds by _id of a document inserted before",
			r.ok(), s.elapsed.Round(time.Millisecond), perSecond(r.ok(), s.elapsed), r.inserts, r.finds),
	}
	if r.notFound > 0 {
		lines = append(lines, fmt.Sprintf("             %d of the finds did not find their document (readPreference %s)", r.notFound, s.readPref))
	}
	if r.failed == 0 {
		lines = append(lines, fmt.Sprintf("failed       no operation of %d", r.started))
	} else {
		lines = append(lines, fmt.Sprintf("failed       %d of %d operations: %s", r.failed, r.started, r.kinds(0, numKinds, true)))
		if r.byKind[tooLate] > 0 {
			lines = append(lines, fmt.Sprintf("             out of time: still running %v after the end of the run, canceled", drainLimit))
		}
		lines = append(lines, fmt.Sprintf("             last failed operation (%v): %s", r.lastOpKind, briefError(r.lastOpErr)))
	}
	lines = append(lines, fmt.Sprintf("done         %d operations = %d succeeded + %d failed", r.started, r.ok(), r.failed))
	if a.ok() == a.started {
		lines = append(lines, "cleanup      dropped the demo's database")
	} else {
		lines = append(lines, "cleanup      could not drop the demo's database (the line at the end says why)")
	}
	lines = append(lines, s.topologyLines()...)
	lines = append(lines, s.commandLine())
	lines = append(lines, s.poolLines()...)
	lines = append(lines,
		"latency      (measured by the workload, successful operations only)",
		latencyLine("operation", &r.operation, "Client.Read or Client.Write: server selection, check-out, round trips, retries"),
		"events       (of all the pools)",
	)
	for _, t := range eventTypes {
		lines = append(lines, fmt.Sprintf("  %-26s %d", t, s.monitor.count(t)))
	}
	if s.took != "" {
		lines = append(lines, s.took)
	}
	for _, n := range s.notes {
		lines = append(lines, "note         "+n)
	}
	if len(s.problems) == 0 {
		lines = append(lines, "checks       pools' stats, their events, the commands and the workload's own counts agree")
	}
	for _, p := range s.problems {
		lines = append(lines, "MISMATCH     "+p)
	}
	for _, l := range lines {
		out.println(l)
	}
}

// topologyLines are the topology at the end of the run, the primaries the
// client saw, and -replset's failover.
func (s *clientSummary) topologyLines() []string {
	d := s.end
	head := fmt.Sprintf("topology     %s", d.Type)
	if d.SetName != "" {
		head += ", set " + d.SetName
	}
	if p := primaryOf(d); p != "" {
		head += ", primary " + p
	} else if d.Type == topology.ReplicaSetNoPrimary {
		head += ", no primary"
	}
	servers := d.Servers()
	slices.SortFunc(servers, func(a, b topology.ServerDescription) int { return strings.Compare(a.Address, b.Address) })
	parts := make([]string, len(servers))
	for i, sd := range servers {
		parts[i] = sd.Address + " " + sd.Type.String()
	}
	lines := []string{fmt.Sprintf("%s; %d servers: %s", head, len(servers), strings.Join(parts, ", "))}

	t := s.topo
	t.mu.Lock()
	if len(t.primaries) > 0 {
		parts := make([]string, len(t.primaries))
		for i, p := range t.primaries {
			parts[i] = fmt.Sprintf("%s from %.2fs", p.addr, p.seen.Sub(t.start).Seconds())
			if i > 0 && p.hasAck {
				parts[i] += fmt.Sprintf(" (first write acknowledged %v after)", roundDur(p.ack.Sub(p.seen)))
			}
		}
		line := "primaries    " + strings.Join(parts, ", ")
		if t.more > 0 {
			line += fmt.Sprintf(", and %d more", t.more)
		}
		lines = append(lines, line)
	}
	t.mu.Unlock()

	if fo := s.fo; fo != nil {
		fo.mu.Lock()
		switch {
		case fo.err != nil:
			lines = append(lines, "failover     failed: "+fo.err.Error())
		case !fo.happened:
			lines = append(lines, "failover     none: the run ended before its middle")
		default:
			line := fmt.Sprintf("failover     at %.2fs: %s stepped down, %s elected; ", fo.at.Sub(fo.start).Seconds(), fo.old, fo.new)
			if seen, ok := s.seenAfter(fo.new, fo.at); ok {
				line += fmt.Sprintf("the client saw it as primary %v after the election, ", roundDur(seen.Sub(fo.at)))
			}
			if ack := s.cmds.ack.Load(); ack != nil {
				line += fmt.Sprintf("first write acknowledged by %s %v after the election", fo.new, roundDur(ack.Sub(fo.at)))
			} else {
				line += "no write acknowledged by " + fo.new
			}
			line += fmt.Sprintf("; %d operations failed", s.results.failed)
			lines = append(lines, line)
		}
		fo.mu.Unlock()
	}
	return lines
}

// seenAfter returns when the client first saw addr as the primary at or
// after t.
func (s *clientSummary) seenAfter(addr string, t time.Time) (time.Time, bool) {
	s.topo.mu.Lock()
	defer s.topo.mu.Unlock()
	for _, p := range s.topo.primaries {
		if p.addr == addr && !p.seen.Before(t) {
			return p.seen, true
		}
	}
	return time.Time{}, false
}

// commandLine counts the commands the client sent, the workload's and its
// own (the first ping, the drop, the end of the sessions), by outcome: a
// failed command may have been retried into a successful operation.
func (s *clientSummary) commandLine() string {
	c := s.cmds
	line := fmt.Sprintf("commands     %d sent: %d succeeded, %d failed", c.started.Load(), c.succeeded.Load(), c.failed.Load())
	c.mu.Lock()
	if len(c.failures) > 0 {
		line += " (" + sortedCounts(c.failures) + "); the client retries the operations it may"
	}
	c.mu.Unlock()
	return line
}

// poolLines are a line per pool: its server's type at the end, its
// check-outs, its connections as the run ended (before Close), what it
// created and closed, and its clears.
func (s *clientSummary) poolLines() []string {
	lines := []string{"pools        one per server: check-outs and connections since created; in use, idle and waiting as the run ended"}
	for i, f := range s.final {
		st, now := f.stats, s.before[i].stats
		typ := "-"
		if sd, ok := s.end.Server(f.addr); ok {
			typ = sd.Type.String()
		}
		lines = append(lines, fmt.Sprintf("  %-21s %-12s checkouts %d (%d failed, %d waited)  in use %d idle %d waiting %d  created %d, closed %d%s  clears %d",
			f.addr, typ, st.CheckedOut, st.CheckOutFailed, st.WaitCount,
			now.InUse, now.Available, now.Waiting, st.Created, st.Closed, closeReasons(st), st.Clears))
	}
	return lines
}

// closeReasons renders the reasons of a pool's closed connections, those
// that closed any: " (2 stale, 8 poolClosed)".
func closeReasons(st pool.Stats) string {
	var parts []string
	for _, r := range []struct {
		n    int64
		name string
	}{{st.ClosedStale, "stale"}, {st.ClosedIdle, "idle"}, {st.ClosedError, "error"}, {st.ClosedPoolClosed, "poolClosed"}} {
		if r.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", r.n, r.name))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// crossCheck compares figures that must agree once the client is closed:
// each pool's Stats against its events, the commands' events with one
// another, and the workload's own counts.
func (s *clientSummary) crossCheck() {
	r, a, ev, cmds := s.results, s.admin, s.monitor, s.cmds
	type check struct {
		what      string
		got, want int64
	}
	checks := []check{
		{"operations started vs the progress counter", r.started, s.started},
		{"operations started vs succeeded + failed", r.started, r.ok() + r.failed},
		{"failed operations vs their count by kind", r.failed, r.kindsTotal()},
		{"the job's own commands: started vs succeeded + failed", a.started, a.ok() + a.failed},
		{"the job's own commands: failed vs their count by kind", a.failed, a.kindsTotal()},
		{"CommandStarted events vs CommandSucceeded + CommandFailed", cmds.started.Load(), cmds.succeeded.Load() + cmds.failed.Load()},
	}
	byAddr := map[string]int{}
	for _, f := range s.final {
		byAddr[f.addr]++
	}
	var checkedOut int64
	seenAll := true
	for _, f := range s.final {
		st := f.stats
		checkedOut += st.CheckedOut
		if byAddr[f.addr] > 1 || ev.countAt(f.addr, pool.PoolCreated) != 1 {
			// Several pools at one address (its server left the topology
			// and came back): the events cannot be told apart by pool.
			seenAll = false
			s.notes = append(s.notes, fmt.Sprintf("%s had %d pools (%d seen): its events are not checked pool by pool",
				f.addr, ev.countAt(f.addr, pool.PoolCreated), byAddr[f.addr]))
			continue
		}
		at := func(t pool.EventType) int64 { return ev.countAt(f.addr, t) }
		checks = append(checks,
			check{f.addr + ": ConnectionCheckedOut events vs Stats.CheckedOut", at(pool.ConnectionCheckedOut), st.CheckedOut},
			check{f.addr + ": ConnectionCheckedIn events vs Stats.CheckedIn", at(pool.ConnectionCheckedIn), st.CheckedIn},
			check{f.addr + ": Stats.CheckedIn vs Stats.CheckedOut", st.CheckedIn, st.CheckedOut},
			check{f.addr + ": ConnectionCheckOutFailed events vs Stats.CheckOutFailed", at(pool.ConnectionCheckOutFailed), st.CheckOutFailed},
			check{f.addr + ": ConnectionCheckOutStarted events vs check-outs", at(pool.ConnectionCheckOutStarted), st.CheckedOut + st.CheckOutFailed},
			check{f.addr + ": ConnectionCreated events vs Stats.Created", at(pool.ConnectionCreated), st.Created},
			check{f.addr + ": ConnectionClosed events vs Stats.Closed", at(pool.ConnectionClosed), st.Closed},
			check{f.addr + ": Stats.Closed vs Stats.Created after Close", st.Closed, st.Created},
			check{f.addr + ": Stats.Total after Close", int64(st.Total), 0},
			check{f.addr + ": ConnectionPoolClosed events", at(pool.PoolClosed), 1},
		)
		s.problems = append(s.problems, clearChecks(f.addr+": ", false, at(pool.PoolCleared), at(pool.PoolReady), st.Clears)...)
		if st.State != "closed" {
			s.problems = append(s.problems, fmt.Sprintf("%s: pool state after Close: %q", f.addr, st.State))
		}
		if st.EventsDropped > 0 {
			s.problems = append(s.problems, droppedProblem(f.addr, st.EventsDropped))
		}
	}
	if n := ev.count(pool.PoolCreated); n != int64(len(s.final)) {
		seenAll = false
		s.notes = append(s.notes, fmt.Sprintf("%d pools were created, %d seen: the others came and went between two looks", n, len(s.final)))
	}
	for _, c := range checks {
		if c.got != c.want {
			s.problems = append(s.problems, fmt.Sprintf("%s: %d, expected %d", c.what, c.got, c.want))
		}
	}
	// Every successful operation checked a connection out of a pool, once
	// or more (a retry checks out another).
	if ok := r.ok() + a.ok(); seenAll && checkedOut < ok {
		s.problems = append(s.problems, fmt.Sprintf("the pools' check-outs (%d) are fewer than the successful operations (%d)", checkedOut, ok))
	}
}
