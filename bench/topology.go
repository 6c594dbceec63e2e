package bench

// The topology scenarios: the clients' SDAM machinery (monitors, the
// topology's description, its events) rather than their pools, mongopool's
// Client beside the official driver's mongo.Client in the same run, one
// after the other with a garbage collection in between (or each in a
// process of its own: see Topo.Runner):
//
//  1. scale: thousands of seeds where nothing listens;
//  2. slow handler: an event handler that takes 1 ms per event, while the
//     members' hellos change about a thousand times a second, then a read
//     that meets one network error;
//  3. a handler that writes, synchronously, when the primary is lost;
//  4. server selection timing out among thousands of unreachable seeds.
//
// Every wait is bounded (TopoConfig.Timeout): a call that has not returned
// by then is reported as such and its goroutine abandoned, so that a run
// always ends.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/topology"
)

// The scenarios' names in the report.
const (
	topoScaleShape     = "1 scale"
	topoSlowShape      = "2 slow handler"
	topoWriteShape     = "3 handler writes on primary lost"
	topoSelectionShape = "4 selection timeout"
)

// TopoScenarios lists the scenarios' numbers.
var TopoScenarios = []int{1, 2, 3, 4}

// TopoConfig is the topology scenarios' settings.
type TopoConfig struct {
	// Timeout bounds every wait: a client's creation and closing, the
	// checks of all seeds, a drain, an operation without a deadline of its
	// own.
	Timeout time.Duration

	// Seeds are scenario 1's numbers of seeds, one case each.
	Seeds []int
	// Window is how long, at least, scenario 1 samples the heap after the
	// client's creation returned; Sample is the sampling period.
	Window time.Duration
	Sample time.Duration

	// Members is scenario 2's replica set size (the primary and the members
	// whose hellos change).
	Members int
	// HandlerDelay is how long scenario 2's event handler takes per
	// event (time.Sleep).
	HandlerDelay time.Duration
	// Load is how long scenario 2 changes the secondaries' hellos, one
	// change every ChangeEvery, in turn.
	Load        time.Duration
	ChangeEvery time.Duration
	// ReadTimeout is the deadline of scenario 2's read that meets a
	// network error.
	ReadTimeout time.Duration

	// HandlerWriteTimeout is the deadline of the write scenario 3's handler
	// runs; Before is the load before the step-down, ElectAfter the time
	// between the step-down and the election, After the load after the
	// handler returned.
	HandlerWriteTimeout time.Duration
	Before              time.Duration
	ElectAfter          time.Duration
	After               time.Duration

	// SelectionSeeds and SelectionTimeout are scenario 4's seeds and
	// serverSelectionTimeoutMS.
	SelectionSeeds   int
	SelectionTimeout time.Duration

	// HeapLimit, if positive, bounds scenario 1's heap in use: a run whose
	// heap passes it stops waiting there, and reports when it did. Isolated
	// says the run is in a process of its own that exits after it: such a
	// run does not close its client then, whose closing could only add to
	// the heap.
	HeapLimit int64
	Isolated  bool

	// HeartbeatFrequency, if not zero, is the heartbeatFrequencyMS of the
	// clients of scenarios 2 and 3 (the clients' default, 10 s, otherwise).
	// It bounds how long the official driver's Disconnect may wait for its
	// monitor's awaitable hello.
	HeartbeatFrequency time.Duration

	// Progress, if not nil, hears what is being measured.
	Progress io.Writer
}

// setURI returns the URI of replica set rs for scenarios 2 and 3.
func (cfg TopoConfig) setURI(rs *mongotest.ReplicaSet) string {
	if cfg.HeartbeatFrequency <= 0 {
		return rs.URI()
	}
	return fmt.Sprintf("%s&heartbeatFrequencyMS=%d", rs.URI(), cfg.HeartbeatFrequency.Milliseconds())
}

// FullTopology returns the settings of the full run.
func FullTopology() TopoConfig {
	return TopoConfig{
		Timeout:             30 * time.Second,
		Seeds:               []int{2000, 10000},
		Window:              3 * time.Second,
		Sample:              50 * time.Millisecond,
		Members:             4,
		HandlerDelay:        time.Millisecond,
		Load:                2500 * time.Millisecond,
		ChangeEvery:         time.Millisecond,
		ReadTimeout:         3 * time.Second,
		HandlerWriteTimeout: 10 * time.Second,
		Before:              200 * time.Millisecond,
		ElectAfter:          200 * time.Millisecond,
		After:               500 * time.Millisecond,
		SelectionSeeds:      2000,
		SelectionTimeout:    time.Second,
		HeapLimit:           4 << 30,
	}
}

// SmokeTopology returns settings that run every scenario once on a tiny
// scale, in seconds: to catch breakage, not to measure.
func SmokeTopology() TopoConfig {
	return TopoConfig{
		Timeout:             10 * time.Second,
		Seeds:               []int{50},
		Window:              100 * time.Millisecond,
		Sample:              20 * time.Millisecond,
		Members:             4,
		HandlerDelay:        time.Millisecond,
		Load:                100 * time.Millisecond,
		ChangeEvery:         time.Millisecond,
		ReadTimeout:         time.Second,
		HandlerWriteTimeout: time.Second,
		Before:              50 * time.Millisecond,
		ElectAfter:          50 * time.Millisecond,
		After:               50 * time.Millisecond,
		SelectionSeeds:      50,
		SelectionTimeout:    200 * time.Millisecond,
		HeartbeatFrequency:  500 * time.Millisecond,
	}
}

// Topo runs the topology scenarios and collects their figures.
type Topo struct {
	Config TopoConfig
	Report Report
	// Runner, if not nil, runs each client's run of a scenario instead of
	// RunOne in this process: in a child process, say (see
	// cmd/topobench), so that a client that never returns, or takes all
	// the memory, leaves the other runs alone. It gets what RunOne gets
	// and returns the figures.
	Runner func(scenario, seeds int, k Kind) ([]Fig, error)
}

// RunOne runs the client of kind k once in scenario (1 to 4) in this
// process, after a garbage collection, and returns its figures; seeds is
// scenario 1's number of seeds (ignored by the others).
func (t *Topo) RunOne(scenario, seeds int, k Kind) ([]Fig, error) {
	if t.Config.Timeout <= 0 {
		t.Config.Timeout = 30 * time.Second
	}
	settle()
	switch scenario {
	case 1:
		return t.scaleRun(k, seeds)
	case 2:
		return t.slowRun(k)
	case 3:
		return t.handlerWriteRun(k)
	case 4:
		return t.selectionRun(k)
	}
	return nil, fmt.Errorf("bench: no topology scenario %d (there are 1 to 4)", scenario)
}

// one runs one client's run, through Runner if set.
func (t *Topo) one(scenario, seeds int, k Kind) ([]Fig, error) {
	if t.Runner != nil {
		return t.Runner(scenario, seeds, k)
	}
	return t.RunOne(scenario, seeds, k)
}

// RunBound is how long, at the most, one client's run of a scenario takes
// when every wait of it lasts its whole bound: the bound of a Runner's
// child process.
func (cfg TopoConfig) RunBound() time.Duration {
	return 7*cfg.Timeout + cfg.Window + cfg.Load + cfg.ReadTimeout + cfg.HandlerWriteTimeout + handlerGrace + cfg.Before + cfg.ElectAfter + cfg.After + 10*time.Second
}

// NewTopo returns a run of the scenarios with the settings cfg.
func NewTopo(cfg TopoConfig) *Topo { return &Topo{Config: cfg} }

// Run runs the scenarios listed (all if none), in order. An error is a
// failure of the bench itself (a replica set that does not start); what the
// clients do, hangs and errors included, is in the report.
func (t *Topo) Run(scenarios ...int) error {
	if len(scenarios) == 0 {
		scenarios = TopoScenarios
	}
	if t.Config.Timeout <= 0 {
		t.Config.Timeout = 30 * time.Second
	}
	for _, n := range scenarios {
		var err error
		switch n {
		case 1:
			for _, seeds := range t.Config.Seeds {
				if err = t.Scale(seeds); err != nil {
					break
				}
			}
		case 2:
			err = t.SlowHandler()
		case 3:
			err = t.HandlerWrite()
		case 4:
			err = t.SelectionTimeout()
		default:
			err = fmt.Errorf("bench: no topology scenario %d (there are 1 to 4)", n)
		}
		if err != nil {
			return fmt.Errorf("scenario %d: %w", n, err)
		}
	}
	return nil
}

func (t *Topo) progress(format string, args ...any) {
	if t.Config.Progress != nil {
		fmt.Fprintf(t.Config.Progress, format+"\n", args...)
	}
}

func (t *Topo) row(shape, cas string, k Kind, figs ...Fig) {
	t.Report.Rows = append(t.Report.Rows, Row{shape, cas, k, figs})
}

func (t *Topo) note(format string, args ...any) {
	t.Report.Notes = append(t.Report.Notes, fmt.Sprintf(format, args...))
}

// topoKinds are the clients compared, in the order they run.
var topoKinds = []Kind{Mongopool, Official}

// settle collects the garbage of the run before, and gives the goroutines
// it stopped a moment to end, so that the next run starts afresh.
func settle() {
	runtime.GC()
	time.Sleep(100 * time.Millisecond)
	runtime.GC()
}

// within runs fn on a goroutine of its own and waits at most d for it. It
// returns how long fn took and true, or d and false if fn had not returned
// by then: its goroutine is abandoned, and done is closed whenever it
// returns.
func within(d time.Duration, fn func()) (took time.Duration, ok bool, done <-chan struct{}) {
	ch := make(chan struct{})
	start := time.Now()
	var elapsed time.Duration
	go func() {
		fn()
		elapsed = time.Since(start)
		close(ch)
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
		return elapsed, true, ch
	case <-timer.C:
		return d, false, ch
	}
}

// didNotReturn is the figure of a call that did not return in time.
func didNotReturn(d time.Duration) string {
	return fmt.Sprintf("did not return within %s", fmtDur(d))
}

// errSummary renders an error for a table: its type and the start of its
// message, on one line, without the column separator.
func errSummary(err error) string {
	if err == nil {
		return "ok"
	}
	msg := err.Error()
	if len(msg) > 100 {
		msg = msg[:100] + "…"
	}
	msg = strings.NewReplacer("|", "/", "\n", " ", "`", "'").Replace(msg)
	return fmt.Sprintf("%T: %s", err, msg)
}

// fmtMB prints bytes as mebibytes.
func fmtMB(b int64) string {
	mb := float64(b) / (1 << 20)
	if mb >= 100 || mb <= -100 {
		return fmt.Sprintf("%.0f MiB", mb)
	}
	return fmt.Sprintf("%.1f MiB", mb)
}

// The topology clients: a mongopool.Client or a mongo.Client, reduced to
// what the scenarios do, with the event hooks they listen with.

const (
	topoDB   = "bench"
	topoColl = "topology"
)

// topoHooks are what the scenarios hear of a client's SDAM events. Each
// event, whatever it is, then takes delay (time.Sleep): scenario 2's slow
// handler.
type topoHooks struct {
	delay atomic.Int64 // nanoseconds
	// failed hears the address of each failed check.
	failed func(addr string)
	// succeeded hears each successful check: the server's address and the
	// lastWrite.lastWriteDate of its reply (zero if it has none).
	succeeded func(addr string, lastWrite time.Time)
	// primaryLost hears a change of the topology's description from one
	// with a primary to one without.
	primaryLost func()
	events      atomic.Int64 // events heard, of any kind
}

func (h *topoHooks) slow() {
	if d := h.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
}

// mongopoolEvent is the topology event handler of a mongopool.Client.
func (h *topoHooks) mongopoolEvent(e topology.Event) {
	h.events.Add(1)
	switch e := e.(type) {
	case *topology.ServerHeartbeatFailed:
		if h.failed != nil {
			h.failed(e.Address)
		}
	case *topology.ServerHeartbeatSucceeded:
		if h.succeeded != nil {
			var lw time.Time
			if v, err := e.Reply.LookupErr("lastWrite", "lastWriteDate"); err == nil {
				if ms, ok := v.DateTimeOK(); ok {
					lw = time.UnixMilli(ms)
				}
			}
			h.succeeded(e.Address, lw)
		}
	case *topology.TopologyDescriptionChanged:
		if h.primaryLost != nil && e.Previous.Type == topology.ReplicaSetWithPrimary && e.New.Type != topology.ReplicaSetWithPrimary {
			h.primaryLost()
		}
	}
	h.slow()
}

// officialMonitor is the same handler for a mongo.Client: every callback
// of its ServerMonitor.
func (h *topoHooks) officialMonitor() *event.ServerMonitor {
	other := func() { h.events.Add(1); h.slow() }
	// The connection id of a heartbeat is "host:port[-n]".
	addrOf := func(id string) string { a, _, _ := strings.Cut(id, "["); return a }
	return &event.ServerMonitor{
		ServerDescriptionChanged: func(*event.ServerDescriptionChangedEvent) { other() },
		ServerOpening:            func(*event.ServerOpeningEvent) { other() },
		ServerClosed:             func(*event.ServerClosedEvent) { other() },
		TopologyDescriptionChanged: func(e *event.TopologyDescriptionChangedEvent) {
			if h.primaryLost != nil && e.PreviousDescription.Kind == "ReplicaSetWithPrimary" && e.NewDescription.Kind != "ReplicaSetWithPrimary" {
				h.events.Add(1)
				h.primaryLost()
				h.slow()
				return
			}
			other()
		},
		TopologyOpening:        func(*event.TopologyOpeningEvent) { other() },
		TopologyClosed:         func(*event.TopologyClosedEvent) { other() },
		ServerHeartbeatStarted: func(*event.ServerHeartbeatStartedEvent) { other() },
		ServerHeartbeatSucceeded: func(e *event.ServerHeartbeatSucceededEvent) {
			if h.succeeded != nil {
				h.succeeded(addrOf(e.ConnectionID), e.Reply.LastWriteTime)
			}
			other()
		},
		ServerHeartbeatFailed: func(e *event.ServerHeartbeatFailedEvent) {
			if h.failed != nil {
				h.failed(addrOf(e.ConnectionID))
			}
			other()
		},
	}
}

// topoClient is a client reduced to the scenarios' operations.
type topoClient interface {
	// find runs a find of one document by _id on the primary.
	find(ctx context.Context) error
	// insert inserts a document on the primary.
	insert(ctx context.Context, id int64) error
	// lastWrite returns the lastWrite.lastWriteDate of the primary's hello.
	lastWrite(ctx context.Context) (time.Time, error)
	close()
}

// newTopoClient makes a client of kind k of uri, with its defaults but
// those of uri, whose SDAM events go to h (none listens if h is nil), and
// that dials through dial if not nil. Neither client waits for the
// deployment.
func newTopoClient(k Kind, uri string, dial mapDialer, h *topoHooks) (topoClient, error) {
	switch k {
	case Mongopool:
		var opts []mongopool.ClientOption
		if h != nil {
			opts = append(opts, mongopool.WithTopologyEventHandler(h.mongopoolEvent))
		}
		if dial != nil {
			opts = append(opts, mongopool.WithDialer(dial.DialContext))
		}
		c, err := mongopool.NewClient(uri, opts...)
		if err != nil {
			return nil, err
		}
		return mongopoolTopo{c}, nil
	case Official:
		o := options.Client().ApplyURI(uri)
		if h != nil {
			o.SetServerMonitor(h.officialMonitor())
		}
		if dial != nil {
			o.SetDialer(dial)
		}
		c, err := mongo.Connect(o)
		if err != nil {
			return nil, err
		}
		return officialTopo{c, c.Database(topoDB).Collection(topoColl)}, nil
	}
	return nil, fmt.Errorf("bench: no client of kind %q", k)
}

type mongopoolTopo struct{ c *mongopool.Client }

func (m mongopoolTopo) find(ctx context.Context) error {
	_, err := m.c.Read(ctx, topoDB, bson.D{
		{Key: "find", Value: topoColl},
		{Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "limit", Value: 1},
		{Key: "singleBatch", Value: true},
	})
	return err
}

func (m mongopoolTopo) insert(ctx context.Context, id int64) error {
	return insertID(ctx, m.c, topoDB, topoColl, id)
}

func (m mongopoolTopo) lastWrite(ctx context.Context) (time.Time, error) {
	reply, err := m.c.Read(ctx, "admin", bson.D{{Key: "hello", Value: 1}})
	if err != nil {
		return time.Time{}, err
	}
	return lastWriteOf(reply)
}

func (m mongopoolTopo) close() { m.c.Close() }

type officialTopo struct {
	c    *mongo.Client
	coll *mongo.Collection
}

func (o officialTopo) find(ctx context.Context) error {
	err := o.coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	return err
}

func (o officialTopo) insert(ctx context.Context, id int64) error {
	_, err := o.coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}})
	return err
}

func (o officialTopo) lastWrite(ctx context.Context) (time.Time, error) {
	reply, err := o.c.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Raw()
	if err != nil {
		return time.Time{}, err
	}
	return lastWriteOf(reply)
}

func (o officialTopo) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o.c.Disconnect(ctx)
}

func lastWriteOf(reply bson.Raw) (time.Time, error) {
	v, err := reply.LookupErr("lastWrite", "lastWriteDate")
	if err != nil {
		return time.Time{}, fmt.Errorf("the hello reply has no lastWrite.lastWriteDate: %w", err)
	}
	ms, ok := v.DateTimeOK()
	if !ok {
		return time.Time{}, fmt.Errorf("lastWrite.lastWriteDate is a %s", v.Type)
	}
	return time.UnixMilli(ms), nil
}

// closeWithin closes c, waiting at most d: the figure of the close.
func closeWithin(c topoClient, d time.Duration) string {
	took, ok, _ := within(d, c.close)
	if !ok {
		return didNotReturn(d)
	}
	return fmtDur(took)
}

// openWithin makes a client as newTopoClient does, waiting at most d. A
// client that comes after d is closed when it comes.
func openWithin(k Kind, uri string, h *topoHooks, d time.Duration) (topoClient, time.Duration, bool, error) {
	var (
		c   topoClient
		err error
	)
	took, ok, done := within(d, func() { c, err = newTopoClient(k, uri, nil, h) })
	if !ok {
		go func() {
			<-done
			if err == nil {
				c.close()
			}
		}()
		return nil, took, false, nil
	}
	return c, took, true, err
}

// mapDialer dials the address its map gives for the one asked, if any.
type mapDialer map[string]string

func (m mapDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if a, ok := m[address]; ok {
		address = a
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// maxSeedURI is the longest connection string of addresses the scenarios
// give the clients: mongopool refuses longer ones (its connstring package's
// limit).
const maxSeedURI = 64 << 10

// seedList is a connection string of n seeds where nothing listens: hosts
// 127.1.1.1, 127.1.1.2, ... on a port free on every address, so that each
// connection is refused at once. When the addresses do not fit in
// maxSeedURI, the seeds are host names (h0, h1, ... in base 36, port
// 27017) that dial maps to them.
type seedList struct {
	uri      string
	dial     mapDialer // nil for addresses
	plainLen int       // the length of the URI of addresses
}

func refusedSeeds(n int, query string) (seedList, error) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return seedList{}, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("127.%d.%d.%d:%d", 1+i/(250*250), 1+i/250%250, 1+i%250, port)
	}
	l := seedList{uri: "mongodb://" + strings.Join(hosts, ",") + "/" + query}
	l.plainLen = len(l.uri)
	if len(l.uri) <= maxSeedURI {
		return l, nil
	}
	names := make([]string, n)
	l.dial = make(mapDialer, n)
	for i, a := range hosts {
		names[i] = "h" + strconv.FormatInt(int64(i), 36)
		l.dial[names[i]+":27017"] = a
	}
	l.uri = "mongodb://" + strings.Join(names, ",") + "/" + query
	return l, nil
}

// describe tells how the seeds are given, for a case's title.
func (l seedList) describe() string {
	if l.dial == nil {
		return "127.x.y.z, one port, refused at once"
	}
	return fmt.Sprintf("127.x.y.z, one port, refused at once; given as host names h0, h1, ... that the clients' dialer maps to them, as the URI of addresses (%d bytes) is over mongopool's limit of %d", l.plainLen, maxSeedURI)
}

// Scenario 1: scale.

// heapSampler samples the heap in use and the goroutines until stopped,
// keeping the peaks; over tells when the heap passed a limit.
type heapSampler struct {
	stop, done chan struct{}
	over       chan struct{} // closed when the heap in use passes limit
	overAt     time.Time
	peakHeap   int64
	peakG      int64
}

var heapMetrics = []string{
	"/memory/classes/heap/objects:bytes", // with the next, MemStats.HeapInuse
	"/memory/classes/heap/unused:bytes",
	"/sched/goroutines:goroutines",
}

// readHeap returns the heap in use (the bytes of the heap's spans in use:
// objects, live or not yet swept, and their spans' free room, as
// MemStats.HeapInuse) and the number of goroutines.
func readHeap() (heap, goroutines int64) {
	s := make([]metrics.Sample, len(heapMetrics))
	for i, n := range heapMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() + s[1].Value.Uint64()), int64(s[2].Value.Uint64())
}

// startSampler samples every period; limit, if positive, is the heap in
// use past which over is closed.
func startSampler(every time.Duration, limit int64) *heapSampler {
	hs := &heapSampler{stop: make(chan struct{}), done: make(chan struct{}), over: make(chan struct{})}
	hs.peakHeap, hs.peakG = readHeap()
	go func() {
		defer close(hs.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-hs.stop:
				return
			case <-tick.C:
				h, g := readHeap()
				hs.peakHeap, hs.peakG = max(hs.peakHeap, h), max(hs.peakG, g)
				if limit > 0 && h > limit && hs.overAt.IsZero() {
					hs.overAt = time.Now()
					close(hs.over)
				}
			}
		}
	}()
	return hs
}

// finish stops the sampler, with a last sample, and returns the peaks.
func (hs *heapSampler) finish() (heap, goroutines int64) {
	close(hs.stop)
	<-hs.done
	h, g := readHeap()
	return max(hs.peakHeap, h), max(hs.peakG, g)
}

// checkCounter counts the servers checked at least once (failed checks,
// by address) and tells when all of them have been.
type checkCounter struct {
	mu    sync.Mutex
	seen  map[string]bool
	want  int
	all   chan struct{}
	at    time.Time
	total int64
}

func newCheckCounter(want int) *checkCounter {
	return &checkCounter{seen: make(map[string]bool, want), want: want, all: make(chan struct{})}
}

func (c *checkCounter) failed(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total++
	if c.seen[addr] {
		return
	}
	c.seen[addr] = true
	if len(c.seen) == c.want {
		c.at = time.Now()
		close(c.all)
	}
}

func (c *checkCounter) counts() (distinct int, total int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen), c.total
}

// Scale is scenario 1 with n seeds where nothing listens: for each client,
// the time its creation takes, the heap just after and its peak while the
// monitors check every seed once, the time until they all have, and the
// time Close (Disconnect) takes.
func (t *Topo) Scale(n int) error {
	cfg := t.Config
	seeds, err := refusedSeeds(n, "")
	if err != nil {
		return err
	}
	cas := fmt.Sprintf("%d seeds where nothing listens (%s); heap in use above the level before the client, peak over at least %s after its creation returned",
		n, seeds.describe(), cfg.Window)
	if cfg.HeapLimit > 0 {
		cas += fmt.Sprintf(", a run stopped once it passes %s", fmtMB(cfg.HeapLimit))
	}
	for _, k := range topoKinds {
		t.progress("topology 1: scale, %d seeds, %s", n, k)
		figs, err := t.one(1, n, k)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		t.row(topoScaleShape, cas, k, figs...)
	}
	return nil
}

func (t *Topo) scaleRun(k Kind, n int) ([]Fig, error) {
	cfg := t.Config
	seeds, err := refusedSeeds(n, "")
	if err != nil {
		return nil, err
	}
	checks := newCheckCounter(n)
	h := &topoHooks{failed: checks.failed}
	base, baseG := readHeap()
	hs := startSampler(cfg.Sample, cfg.HeapLimit)
	start := time.Now()
	var (
		c       topoClient
		openErr error
		opened  = make(chan struct{})
	)
	go func() {
		c, openErr = newTopoClient(k, seeds.uri, seeds.dial, h)
		close(opened)
	}()
	over := func() string {
		return fmt.Sprintf("heap in use passed %s %s after the call", fmtMB(cfg.HeapLimit), fmtDur(hs.overAt.Sub(start)))
	}
	aborted := ""
	var returned time.Time
	heapAfterFig, openFig := "-", ""
	timer := time.NewTimer(cfg.Timeout)
	select {
	case <-opened:
		returned = time.Now()
		openFig = fmtDur(returned.Sub(start))
		heapAfter, _ := readHeap()
		heapAfterFig = fmtMB(heapAfter - base)
	case <-timer.C:
		openFig = didNotReturn(cfg.Timeout)
	case <-hs.over:
		openFig = fmt.Sprintf("had not returned after %s", fmtDur(time.Since(start)))
		aborted = over()
	}
	timer.Stop()
	if !returned.IsZero() && openErr != nil {
		hs.finish()
		return []Fig{{"create returned", errSummary(openErr)}}, nil
	}
	if returned.IsZero() && !cfg.Isolated {
		// Close the client if it ever comes.
		go func() {
			<-opened
			if openErr == nil {
				c.close()
			}
		}()
	}
	// Wait for every seed to be checked, and sample for Window at least.
	checked := ""
	if aborted == "" {
		timer := time.NewTimer(cfg.Timeout)
		select {
		case <-checks.all:
			checked = fmtDur(checks.at.Sub(start))
		case <-timer.C:
		case <-hs.over:
			aborted = over()
		}
		timer.Stop()
	}
	if checked == "" {
		d, _ := checks.counts()
		checked = fmt.Sprintf("> %s (%d of %d)", fmtDur(time.Since(start)), d, n)
	}
	if rest := cfg.Window - time.Since(returned); aborted == "" && !returned.IsZero() && rest > 0 {
		select {
		case <-time.After(rest):
		case <-hs.over:
			aborted = over()
		}
	}
	peak, peakG := hs.finish()
	distinct, total := checks.counts()
	closeFig := "-"
	switch {
	case returned.IsZero():
	case aborted != "" && cfg.Isolated:
		closeFig = "not tried"
	default:
		closeFig = closeWithin(c, cfg.Timeout)
	}
	figs := []Fig{
		{"create returned", openFig},
		{"heap after create", heapAfterFig},
		{"peak heap", fmtMB(peak - base)},
		{"peak goroutines", fmt.Sprint(peakG - baseG)},
		{"all seeds checked", checked},
		{"failed checks heard", fmt.Sprintf("%d (%d seeds)", total, distinct)},
		{"close", closeFig},
	}
	if aborted != "" {
		figs = append(figs, Fig{"stopped", aborted})
	}
	return figs, nil
}

// Scenario 2: slow handler.

// lagLoad changes the secondaries' hellos, one at a time in turn: change k
// (from 1) sets member m's lag to k ms (SetLag), which moves the member's
// topologyVersion on (its streaming hello replies at once) and makes its
// lastWrite.lastWriteDate the primary's less k ms. A check's reply thus
// names the change it reports, and the handler's delay is measured from
// the change.
type lagLoad struct {
	// base is the primary's lastWriteDate, which nothing moves; checks are
	// heard once active is set, after base.
	base    time.Time
	active  atomic.Bool
	members []string // addresses, by member index

	mu     sync.Mutex
	made   []time.Time       // made[k-1]: just before change k
	member []int             // member[k-1]: the member of change k
	heard  map[int]time.Time // first hearing of change k by the handler
	wrong  int               // checks naming a change not made, or of another member
}

func (l *lagLoad) succeeded(addr string, lw time.Time) {
	now := time.Now()
	if lw.IsZero() || !l.active.Load() {
		return
	}
	k := int(l.base.Sub(lw) / time.Millisecond)
	if k <= 0 {
		return // no lag: the primary, or before the load
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if k > len(l.made) || l.members[l.member[k-1]] != addr {
		l.wrong++
		return
	}
	if _, ok := l.heard[k]; !ok {
		l.heard[k] = now
	}
}

// run makes a change every every, on schedule (at once when behind it),
// for d, and returns the last change of each member.
func (l *lagLoad) run(rs *mongotest.ReplicaSet, secondaries []int, every, d time.Duration) (last map[int]int, err error) {
	last = map[int]int{}
	start := time.Now()
	for k := 1; ; k++ {
		// Change k is due at (k-1)*every: made then, or at once if late.
		due := time.Duration(k-1) * every
		if due >= d {
			break
		}
		if wait := time.Until(start.Add(due)); wait > 0 {
			time.Sleep(wait)
		}
		m := secondaries[(k-1)%len(secondaries)]
		l.mu.Lock()
		l.made = append(l.made, time.Now())
		l.member = append(l.member, m)
		l.mu.Unlock()
		if err := rs.SetLag(m, time.Duration(k)*time.Millisecond); err != nil {
			return last, err
		}
		last[m] = k
	}
	return last, nil
}

// SlowHandler is scenario 2: a replica set of Members members, a handler
// that takes HandlerDelay per event, Load of changing hellos; then how late
// the handler heard of the changes, how long it took to hear of the last
// ones after the load, and a read that meets one network error (a
// failCommand fail point closing the connection of the next find) with a
// deadline of ReadTimeout, at the end of the load.
func (t *Topo) SlowHandler() error {
	cfg := t.Config
	cas := fmt.Sprintf("%d members, handler sleeps %s per event, %s of changing hellos (SetLag on the %d secondaries in turn, one change every %s); then a find meeting one closeConnection, %s deadline",
		cfg.Members, cfg.HandlerDelay, cfg.Load, cfg.Members-1, cfg.ChangeEvery, cfg.ReadTimeout)
	for _, k := range topoKinds {
		t.progress("topology 2: slow handler, %s", k)
		figs, err := t.one(2, 0, k)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		t.row(topoSlowShape, cas, k, figs...)
	}
	t.note("Scenario 2: lateness is, for each change a check reported, from just before the change was made (SetLag) to the handler's first hearing of it (ServerHeartbeatSucceeded), so it includes the check's round trip; " +
		"drain is from the end of the load until the handler had heard of the last change of every member; events are all the SDAM events the handler took, during the load and the drain.")
	return nil
}

func (t *Topo) slowRun(k Kind) ([]Fig, error) {
	cfg := t.Config
	if cfg.Members < 2 {
		return nil, fmt.Errorf("%d members: at least 2, a primary and a member whose hello changes", cfg.Members)
	}
	rs, err := mongotest.StartReplicaSet("rs", cfg.Members)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	members := rs.Members()
	primary := slices.Index(members, rs.Primary())
	load := &lagLoad{heard: map[int]time.Time{}}
	var secondaries []int
	for i, m := range members {
		load.members = append(load.members, m.Addr())
		if i != primary {
			secondaries = append(secondaries, i)
		}
	}
	h := &topoHooks{succeeded: load.succeeded}
	c, _, ok, err := openWithin(k, cfg.setURI(rs), h, cfg.Timeout)
	if !ok {
		return []Fig{{"create", didNotReturn(cfg.Timeout)}}, nil
	}
	if err != nil {
		return []Fig{{"create", errSummary(err)}}, nil
	}
	closed := false
	closeFig := func() string {
		closed = true
		h.delay.Store(0) // the backlog, if any, goes at once
		return closeWithin(c, cfg.Timeout)
	}
	defer func() {
		if !closed {
			closeFig()
		}
	}()

	// Warm: a primary known, a connection to it, and the lastWriteDate
	// the changes are told by.
	warm, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	err = c.find(warm)
	if err == nil {
		load.base, err = c.lastWrite(warm)
	}
	cancel()
	if err != nil {
		return []Fig{{"warm-up", errSummary(err)}}, nil
	}
	load.active.Store(true)
	h.delay.Store(int64(cfg.HandlerDelay))
	eventsBefore := h.events.Load()

	last, err := load.run(rs, secondaries, cfg.ChangeEvery, cfg.Load)
	if err != nil {
		return nil, fmt.Errorf("the load: %w", err)
	}
	loadEnd := time.Now()

	// The read that meets one network error, at once.
	p := members[primary]
	fired := p.Stats().FailCommandFired
	if err := p.SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, CloseConnection: true, Times: 1}); err != nil {
		return nil, err
	}
	var readErr error
	readTook, readOK, _ := within(cfg.ReadTimeout+cfg.Timeout, func() {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.ReadTimeout)
		defer cancel()
		readErr = c.find(ctx)
	})
	readFig := fmt.Sprintf("%s, %s", fmtDur(readTook), errSummary(readErr))
	if !readOK {
		readFig = didNotReturn(cfg.ReadTimeout + cfg.Timeout)
	}
	firedFig := fmt.Sprint(p.Stats().FailCommandFired - fired)
	p.ClearFailPoints()

	// The drain: until the last change of every member was heard.
	drained := func() (time.Time, bool) {
		load.mu.Lock()
		defer load.mu.Unlock()
		var at time.Time
		for _, k := range last {
			heard, ok := load.heard[k]
			if !ok {
				return at, false
			}
			if heard.After(at) {
				at = heard
			}
		}
		return at, true
	}
	drainFig := ""
	for {
		if at, ok := drained(); ok {
			drainFig = fmtDur(max(at.Sub(loadEnd), 0))
			break
		}
		if time.Since(loadEnd) > cfg.Timeout {
			drainFig = fmt.Sprintf("> %s", fmtDur(cfg.Timeout))
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	events := h.events.Load() - eventsBefore

	load.mu.Lock()
	made := len(load.made)
	var late []time.Duration
	for k, at := range load.heard {
		late = append(late, at.Sub(load.made[k-1]))
	}
	wrong := load.wrong
	load.mu.Unlock()
	lat := summarize(late)
	figs := []Fig{
		{"changes made", fmt.Sprint(made)},
		{"changes heard", fmt.Sprint(len(late))},
		{"lateness p50", fmtDur(lat.P50)},
		{"lateness p99", fmtDur(lat.P99)},
		{"lateness max", fmtDur(lat.Max)},
		{"drain", drainFig},
		{"events", fmt.Sprint(events)},
		{"find with one network error", readFig},
		{"fail point fired", firedFig},
	}
	if wrong > 0 {
		figs = append(figs, Fig{"checks not matched", fmt.Sprint(wrong)})
	}
	figs = append(figs, Fig{"close", closeFig()})
	return figs, nil
}

// Scenario 3: a handler that writes when the primary is lost.

// handlerGrace is how long, past its write's deadline, scenario 3's handler
// waits for its write.
const handlerGrace = 500 * time.Millisecond

// HandlerWrite is scenario 3: a replica set of 3 members, a handler that,
// on the change of the topology's description that loses the primary, runs
// an insert with a deadline of HandlerWriteTimeout, synchronously; the
// primary steps down, and another member is elected ElectAfter later. A
// goroutine inserts in a loop the whole time. Figures: the handler's write
// (duration, outcome), the loop's writes and their greatest latency.
func (t *Topo) HandlerWrite() error {
	cfg := t.Config
	cas := fmt.Sprintf("3 members; on the description change that loses the primary, the handler inserts (%s deadline) synchronously; step-down, election %s later; one goroutine inserting in a loop throughout",
		cfg.HandlerWriteTimeout, cfg.ElectAfter)
	for _, k := range topoKinds {
		t.progress("topology 3: handler writes on primary lost, %s", k)
		figs, err := t.one(3, 0, k)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		t.row(topoWriteShape, cas, k, figs...)
	}
	t.note("Scenario 3: handler called is from the step-down to the handler hearing that the primary was lost; handler blocked, how long the handler kept the client waiting: it runs its write on a goroutine and waits for it, %s past the write's deadline at the most (the official driver calls this handler with its topology locked, and its write waits for that lock: without the limit it would wait for ever); "+
		"handler write, from the write's start to its return, whenever that came. The loop's writes have a deadline of %s each, and run from %s before the step-down until %s after the handler returned.",
		fmtDur(handlerGrace), fmtDur(cfg.Timeout), fmtDur(cfg.Before), fmtDur(cfg.After))
	return nil
}

func (t *Topo) handlerWriteRun(k Kind) ([]Fig, error) {
	cfg := t.Config
	rs, err := mongotest.StartReplicaSet("rs", 3)
	if err != nil {
		return nil, err
	}
	defer rs.Close()

	// The handler runs its write and waits for it, for the write's
	// deadline and handlerGrace at the most: a write that keeps to its
	// deadline is waited for to its end, one that does not (the official
	// driver's: it waits for the lock its caller holds while it calls the
	// handler) no longer blocks the client for ever. The write's duration
	// and outcome are kept whenever it returns.
	var (
		holder    atomic.Pointer[topoClient]
		armed     atomic.Bool
		once      sync.Once
		nextID    atomic.Int64
		calledAt  atomic.Pointer[time.Time]
		returned  time.Time             // when the handler returned
		handled   = make(chan struct{}) // closed when the handler returns
		written   = make(chan struct{}) // closed when its write returns
		gaveUp    bool                  // the handler returned before its write
		writeTook time.Duration
		writeErr  error
	)
	h := &topoHooks{primaryLost: func() {
		if !armed.Load() {
			return
		}
		once.Do(func() {
			now := time.Now()
			calledAt.Store(&now)
			c := *holder.Load()
			go func() {
				defer close(written)
				ctx, cancel := context.WithTimeout(context.Background(), cfg.HandlerWriteTimeout)
				defer cancel()
				start := time.Now()
				writeErr = c.insert(ctx, nextID.Add(1))
				writeTook = time.Since(start)
			}()
			timer := time.NewTimer(cfg.HandlerWriteTimeout + handlerGrace)
			select {
			case <-written:
			case <-timer.C:
				gaveUp = true
			}
			timer.Stop()
			returned = time.Now()
			close(handled)
		})
	}}
	c, _, ok, err := openWithin(k, cfg.setURI(rs), h, cfg.Timeout)
	if !ok {
		return []Fig{{"create", didNotReturn(cfg.Timeout)}}, nil
	}
	if err != nil {
		return []Fig{{"create", errSummary(err)}}, nil
	}
	holder.Store(&c)
	closed := false
	closeFig := func() string {
		closed = true
		armed.Store(false)
		return closeWithin(c, cfg.Timeout)
	}
	defer func() {
		if !closed {
			closeFig()
		}
	}()
	warm, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	err = c.insert(warm, nextID.Add(1))
	cancel()
	if err != nil {
		return []Fig{{"warm-up", errSummary(err)}}, nil
	}

	// The loop.
	var (
		stop     atomic.Bool
		mu       sync.Mutex
		lats     []time.Duration
		failed   int
		firstErr error
	)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for !stop.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
			start := time.Now()
			err := c.insert(ctx, nextID.Add(1))
			d := time.Since(start)
			cancel()
			mu.Lock()
			lats = append(lats, d)
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
			}
			mu.Unlock()
		}
	}()
	stopLoop := func() bool {
		stop.Store(true)
		select {
		case <-loopDone:
			return true
		case <-time.After(cfg.Timeout + time.Second):
			return false
		}
	}

	time.Sleep(cfg.Before)
	members := rs.Members()
	old := slices.Index(members, rs.Primary())
	next := (old + 1) % len(members)
	armed.Store(true)
	sctx, scancel := context.WithTimeout(context.Background(), cfg.Timeout)
	steppedDown := time.Now()
	err = rs.StepDown(sctx)
	scancel()
	if err != nil {
		stopLoop()
		return nil, fmt.Errorf("step-down: %w", err)
	}
	time.Sleep(cfg.ElectAfter)
	if err := rs.Elect(next); err != nil {
		stopLoop()
		return nil, fmt.Errorf("election of member %d: %w", next, err)
	}
	calledFig, blockedFig, writeFig, outcomeFig := "", "-", "-", "-"
	timer := time.NewTimer(cfg.Timeout)
	select {
	case <-handled:
		called := *calledAt.Load()
		calledFig = fmtDur(called.Sub(steppedDown))
		blockedFig = fmtDur(returned.Sub(called))
		// The write, if the handler gave up on it, may still come back.
		select {
		case <-written:
			writeFig, outcomeFig = fmtDur(writeTook), errSummary(writeErr)
		case <-timer.C:
			writeFig = fmt.Sprintf("did not return within %s of the call", fmtDur(time.Since(called)))
		}
		if gaveUp {
			writeFig += fmt.Sprintf(" (the handler gave up at %s)", fmtDur(cfg.HandlerWriteTimeout+handlerGrace))
		}
	case <-timer.C:
		// Not called, or not returned yet: a call from now on does
		// nothing.
		armed.Store(false)
		calledFig = fmt.Sprintf("not called within %s", fmtDur(cfg.Timeout))
		if at := calledAt.Load(); at != nil {
			calledFig = fmtDur(at.Sub(steppedDown))
			blockedFig = didNotReturn(time.Since(*at))
		}
	}
	timer.Stop()
	time.Sleep(cfg.After)
	loopStopped := stopLoop()

	mu.Lock()
	lat := summarize(slices.Clone(lats))
	n, nFailed, first := len(lats), failed, firstErr
	mu.Unlock()
	figs := []Fig{
		{"handler called", calledFig},
		{"handler blocked", blockedFig},
		{"handler write", writeFig},
		{"handler write outcome", outcomeFig},
		{"loop writes", fmt.Sprint(n)},
		{"loop failed", fmt.Sprint(nFailed)},
		{"loop max latency", fmtDur(lat.Max)},
		{"loop p50", fmtDur(lat.P50)},
	}
	if !loopStopped {
		figs = append(figs, Fig{"loop", "a write did not return"})
	}
	if first != nil {
		figs = append(figs, Fig{"loop first error", errSummary(first)})
	}
	figs = append(figs, Fig{"close", closeFig()})
	return figs, nil
}

// Scenario 4: selection timeout with many servers.

// SelectionTimeout is scenario 4: SelectionSeeds seeds where nothing
// listens, serverSelectionTimeoutMS SelectionTimeout; the time until a find
// fails, and its error.
func (t *Topo) SelectionTimeout() error {
	cfg := t.Config
	cas := fmt.Sprintf("%d seeds where nothing listens, serverSelectionTimeoutMS=%d, no event handler; a find (Read; FindOne) right after the client's creation, without a deadline of its own (bounded at %s)",
		cfg.SelectionSeeds, cfg.SelectionTimeout.Milliseconds(), fmtDur(cfg.Timeout))
	for _, k := range topoKinds {
		t.progress("topology 4: selection timeout, %d seeds, %s", cfg.SelectionSeeds, k)
		figs, err := t.one(4, cfg.SelectionSeeds, k)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		t.row(topoSelectionShape, cas, k, figs...)
	}
	return nil
}

func (t *Topo) selectionRun(k Kind) ([]Fig, error) {
	cfg := t.Config
	seeds, err := refusedSeeds(cfg.SelectionSeeds, fmt.Sprintf("?serverSelectionTimeoutMS=%d", cfg.SelectionTimeout.Milliseconds()))
	if err != nil {
		return nil, err
	}
	var (
		c       topoClient
		openErr error
	)
	took, ok, done := within(cfg.Timeout, func() { c, openErr = newTopoClient(k, seeds.uri, seeds.dial, nil) })
	if !ok {
		go func() {
			<-done
			if openErr == nil {
				c.close()
			}
		}()
		return []Fig{{"create returned", didNotReturn(cfg.Timeout)}}, nil
	}
	if openErr != nil {
		return []Fig{{"create returned", errSummary(openErr)}}, nil
	}
	var readErr error
	// The find's own bound comes from the client's selection timeout; the
	// context only keeps the bench from waiting for ever.
	readTook, readOK, _ := within(cfg.Timeout+time.Second, func() {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
		defer cancel()
		readErr = c.find(ctx)
	})
	failedFig, errFig := fmtDur(readTook), errSummary(readErr)
	switch {
	case !readOK:
		failedFig, errFig = didNotReturn(cfg.Timeout+time.Second), "-"
	case readErr == nil:
		failedFig = "succeeded in " + fmtDur(readTook)
	}
	return []Fig{
		{"create returned", fmtDur(took)},
		{"find failed after", failedFig},
		{"error", errFig},
		{"close", closeWithin(c, cfg.Timeout)},
	}, nil
}

// WriteTopology prints the report of the topology scenarios as Markdown: a
// table per scenario and case, a row per client, then the notes.
func WriteTopology(w io.Writer, r *Report) {
	writeCases(w, r.Rows, "Scenario", "client")
	writeNotes(w, r.Notes)
}
