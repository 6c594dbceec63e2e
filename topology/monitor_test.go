package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
)

// fakeServer is a MongoDB server as far as a monitor can tell: it answers
// hello and legacy hello, waits on awaitable ones as a 4.4+ server does,
// and streams their replies when the request allows exhaust. Connections
// come through its dial method (net.Pipe, whose I/O and deadlines follow a
// synctest bubble's clock) or its listen method (TCP on loopback). The test
// sets its state and faults under mu, and reads what it received.
type fakeServer struct {
	t  testing.TB
	wg sync.WaitGroup

	mu sync.Mutex
	// The reply: a standalone of these wire versions, with helloOk when
	// helloOK, with a topologyVersion (processID, counter) when
	// streamable, and extra fields.
	processID  bson.ObjectID
	counter    int64
	streamable bool
	helloOK    bool
	maxWire    int32
	extra      bson.D
	// noExhaust makes the server answer awaitable hellos one at a time,
	// never setting moreToCome.
	noExhaust bool
	// eager makes the server answer awaitable hellos at once, as if
	// maxAwaitTimeMS were 0.
	eager bool
	// down refuses new connections.
	down bool
	// delay, if not nil, is how long the server takes to answer a request
	// that is not awaited.
	delay func(r fakeRequest) time.Duration
	// fault, if not nil, says what goes wrong with the k-th reply (from 0)
	// to the request r.
	fault func(r fakeRequest, k int) fakeFault
	// changed is closed, and replaced, when the counter changes.
	changed chan struct{}
	conns   []*fakeConn
}

// fakeConn is what the server knows of one connection.
type fakeConn struct {
	requests []fakeRequest // under the server's mu
	closed   chan struct{} // closed once the server is done with it
}

// fakeRequest is one request a fakeServer received.
type fakeRequest struct {
	conn    int // the connection, in the order of connecting, from 0
	n       int // the request's place on its connection, from 0
	at      time.Time
	name    string // the command
	flags   wire.Flag
	body    bson.Raw
	awaited bool // an awaitable hello: topologyVersion and maxAwaitTimeMS
}

// fakeFault is what goes wrong with a reply.
type fakeFault int

const (
	noFault       fakeFault = iota
	faultClose              // the connection is closed instead
	faultHang               // no reply comes, ever
	faultShutdown           // ok: 0, ShutdownInProgress
)

func newFakeServer(t testing.TB) *fakeServer {
	return &fakeServer{t: t, processID: bson.NewObjectID(), helloOK: true, maxWire: 21, changed: make(chan struct{})}
}

// set changes the server's state under its lock.
func (f *fakeServer) set(change func(f *fakeServer)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// bump increments the topologyVersion's counter: a significant change,
// which awaitable hellos answer at once.
func (f *fakeServer) bump() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counter++
	close(f.changed)
	f.changed = make(chan struct{})
}

// requests returns the requests received, on every connection, in the
// order of connections.
func (f *fakeServer) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []fakeRequest
	for _, c := range f.conns {
		all = append(all, c.requests...)
	}
	return all
}

// connections returns how many connections were made.
func (f *fakeServer) connections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// isClosed reports whether the server is done with connection i.
func (f *fakeServer) isClosed(i int) bool {
	f.mu.Lock()
	if i >= len(f.conns) {
		f.mu.Unlock()
		f.t.Errorf("fake server: no connection %d, only %d", i, len(f.conns))
		return false
	}
	c := f.conns[i]
	f.mu.Unlock()
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// dial is a connection.Config.DialContext.
func (f *fakeServer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return nil, errors.New("connection refused")
	}
	client, server := net.Pipe()
	if !f.accept(server) {
		client.Close()
		return nil, errors.New("too many connections")
	}
	return client, nil
}

// listen serves TCP connections on loopback until the returned function is
// called, which waits for everything to end.
func (f *fakeServer) listen() (addr string, stop func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	f.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.accept(c)
		}
	})
	return l.Addr().String(), func() { l.Close(); f.wg.Wait() }
}

// Bounds on what a fakeServer serves: a monitor that goes beyond them is
// looping (which, in a bubble whose clock then never moves, would hang the
// test rather than fail it).
const (
	maxFakeConns   = 100
	maxFakeReplies = 1000 // on one connection
)

// accept serves c, and reports false (closing c) when the server has served
// too many connections.
func (f *fakeServer) accept(c net.Conn) bool {
	f.mu.Lock()
	if len(f.conns) >= maxFakeConns {
		f.mu.Unlock()
		c.Close()
		f.t.Errorf("fake server: more than %d connections", maxFakeConns)
		return false
	}
	fc := &fakeConn{closed: make(chan struct{})}
	id := len(f.conns)
	f.conns = append(f.conns, fc)
	f.mu.Unlock()
	f.wg.Go(func() { f.serve(id, fc, c) })
	return true
}

// inbound is a request as read.
type inbound struct {
	h wire.Header
	m *wire.Msg
}

func (f *fakeServer) serve(id int, fc *fakeConn, c net.Conn) {
	reqs := make(chan inbound)
	quit := make(chan struct{})
	gone := make(chan struct{}) // the client closed the connection
	f.wg.Go(func() {
		defer close(gone)
		for {
			raw, err := wire.ReadMessage(c, 0)
			if err != nil {
				return
			}
			h, m, err := wire.DecodeReply(raw, 0)
			if err != nil {
				f.t.Errorf("fake server: a request that is not one: %v", err)
				return
			}
			select {
			case reqs <- inbound{h, m}:
			case <-quit:
				return
			}
		}
	})
	defer func() {
		close(quit)
		c.Close()
		close(fc.closed)
	}()
	var nextID int32 = 1000
	send := func(responseTo int32, flags wire.Flag, body bson.Raw) (int32, bool) {
		if nextID-1000 >= maxFakeReplies {
			f.t.Errorf("fake server: more than %d replies on a connection", maxFakeReplies)
			return 0, false
		}
		nextID++
		out, err := wire.AppendMsg(nil, nextID, responseTo, &wire.Msg{Flags: flags, Body: body})
		if err != nil {
			f.t.Error(err)
			return 0, false
		}
		_, err = c.Write(out)
		return nextID, err == nil
	}
	// sleep waits d, and reports false if the client went first.
	sleep := func(d time.Duration) bool {
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-gone:
			return false
		}
	}
	for n := 0; ; n++ {
		var in inbound
		select {
		case in = <-reqs:
		case <-gone:
			return
		}
		r := fakeRequest{conn: id, n: n, at: time.Now(), flags: in.m.Flags, body: in.m.Body}
		if e, err := in.m.Body.IndexErr(0); err == nil {
			r.name = e.Key()
		}
		tv, hasTV := in.m.Body.Lookup("topologyVersion").DocumentOK()
		maxAwait, hasAwait := in.m.Body.Lookup("maxAwaitTimeMS").AsInt64OK()
		r.awaited = hasTV && hasAwait
		f.mu.Lock()
		fc.requests = append(fc.requests, r)
		delay, fault := f.delay, f.fault
		f.mu.Unlock()
		faultOf := func(k int) fakeFault {
			if fault == nil {
				return noFault
			}
			return fault(r, k)
		}

		if !r.awaited {
			if delay != nil && !sleep(delay(r)) {
				return
			}
			body, ok := f.faulted(faultOf(0), f.reply(), gone)
			if !ok {
				return
			}
			if _, ok := send(in.h.RequestID, 0, body); !ok {
				return
			}
			continue
		}

		// An awaitable hello: a reply when the counter goes past the
		// request's, or after maxAwaitTimeMS; more of them while the
		// server streams.
		seen := tv.Lookup("counter").Int64()
		if pid, ok := tv.Lookup("processId").ObjectIDOK(); !ok || pid != f.processID {
			seen = -1 // another process: answer at once
		}
		prev := in.h.RequestID
		for k := 0; ; k++ {
			if !f.await(seen, time.Duration(maxAwait)*time.Millisecond, gone) {
				return
			}
			body := f.reply()
			f.mu.Lock()
			seen = f.counter
			stream := in.m.Flags&wire.ExhaustAllowed != 0 && !f.noExhaust
			f.mu.Unlock()
			flags := wire.Flag(0)
			if stream {
				flags = wire.MoreToCome
			}
			fault := faultOf(k)
			body, ok := f.faulted(fault, body, gone)
			if !ok {
				return
			}
			if fault == faultShutdown {
				flags = 0 // an error ends the stream
			}
			id, ok := send(prev, flags, body)
			if !ok {
				return
			}
			if flags == 0 {
				break
			}
			prev = id
		}
	}
}

// faulted applies fault to body, a reply about to be sent: ok is false when
// no reply is to be sent (the connection is closed, or left without reply
// until the client goes); a shutdown sends the ShutdownInProgress error
// instead of body.
func (f *fakeServer) faulted(fault fakeFault, body bson.Raw, gone <-chan struct{}) (reply bson.Raw, ok bool) {
	switch fault {
	case faultClose:
		return nil, false
	case faultHang:
		<-gone
		return nil, false
	case faultShutdown:
		return shutdownReply(f.topologyVersion()), true
	}
	return body, true
}

// await waits until the counter is past seen, or for d, and reports false
// if the client went first.
func (f *fakeServer) await(seen int64, d time.Duration, gone chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		f.mu.Lock()
		counter, changed, eager := f.counter, f.changed, f.eager
		f.mu.Unlock()
		if counter > seen || eager {
			return true
		}
		select {
		case <-changed:
		case <-t.C:
			return true
		case <-gone:
			return false
		}
	}
}

func (f *fakeServer) topologyVersion() bson.D {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bson.D{{Key: "processId", Value: f.processID}, {Key: "counter", Value: f.counter}}
}

// reply is the server's hello reply as it stands.
func (f *fakeServer) reply() bson.Raw {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "minWireVersion", Value: int32(0)}, {Key: "maxWireVersion", Value: f.maxWire}}
	if f.helloOK {
		d = append(d, bson.E{Key: "helloOk", Value: true})
	}
	if f.streamable {
		d = append(d, bson.E{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: f.processID}, {Key: "counter", Value: f.counter}}})
	}
	d = append(d, f.extra...)
	return mustMarshal(append(d, bson.E{Key: "ok", Value: 1.0}))
}

func shutdownReply(tv bson.D) bson.Raw {
	return mustMarshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "code", Value: int32(91)}, {Key: "codeName", Value: "ShutdownInProgress"}, {Key: "errmsg", Value: "the server is shutting down"}, {Key: "topologyVersion", Value: tv}})
}

func mustMarshal(d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// testAddress is the address of the fake server the monitors check.
const testAddress = "db.example:27017"

// recorder is a monitorHandler that records what a monitor reports, with
// when (since the recorder was made), and fails the test if two calls
// overlap.
type recorder struct {
	t       testing.TB
	t0      time.Time
	busy    atomic.Bool
	mu      sync.Mutex
	records []string
	// outcomes are the outcomes reported, in order.
	outcomes []checkOutcome
	events   []Event
	// checked, if not nil, answers Checked.
	checked func(checkOutcome) bool
	// onEvent, if not nil, is called with each event, after it is recorded.
	onEvent func(Event)
	// monitor is the monitor reporting, set once StartMonitor has returned
	// it, which then closes started.
	monitor *monitor
	started chan struct{}
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{t: t, t0: time.Now(), started: make(chan struct{})}
}

// startedMonitor returns the monitor reporting, waiting until StartMonitor
// has returned it: the monitor reports its first ServerHeartbeatStarted on
// its own goroutine, perhaps before.
func (r *recorder) startedMonitor() *monitor {
	<-r.started
	return r.monitor
}

func (r *recorder) enter() {
	if !r.busy.CompareAndSwap(false, true) {
		r.t.Error("the monitor called its handler twice at once")
	}
}

func (r *recorder) handler() monitorHandler {
	return monitorHandler{
		Checked: func(o checkOutcome) bool {
			r.enter()
			r.mu.Lock()
			r.outcomes = append(r.outcomes, o)
			r.records = append(r.records, r.outcomeLine(o))
			checked := r.checked
			r.mu.Unlock()
			r.busy.Store(false)
			if checked != nil {
				return checked(o)
			}
			return false
		},
		Event: func(e Event) {
			r.enter()
			r.mu.Lock()
			r.events = append(r.events, e)
			r.records = append(r.records, r.eventLine(e))
			onEvent := r.onEvent
			r.mu.Unlock()
			r.busy.Store(false)
			if onEvent != nil {
				onEvent(e)
			}
		},
	}
}

func (r *recorder) since() time.Duration { return time.Since(r.t0) }

func (r *recorder) outcomeLine(o checkOutcome) string {
	if o.Err != nil {
		return fmt.Sprintf("%v error %s", r.since(), kindName(o.Kind))
	}
	s := fmt.Sprintf("%v ok %v rtt %v min %v", r.since(), o.Server.Type, o.Server.RoundTripTime, o.Server.MinRoundTripTime)
	if tv := o.Server.TopologyVersion; tv != nil {
		s += fmt.Sprintf(" tv %d", tv.Counter)
	}
	return s
}

func (r *recorder) eventLine(e Event) string {
	awaited := func(a bool) string {
		if a {
			return " awaited"
		}
		return ""
	}
	switch e := e.(type) {
	case *ServerHeartbeatStarted:
		return fmt.Sprintf("%v started%s", r.since(), awaited(e.Awaited))
	case *ServerHeartbeatSucceeded:
		return fmt.Sprintf("%v succeeded%s in %v", r.since(), awaited(e.Awaited), e.Duration)
	case *ServerHeartbeatFailed:
		s := fmt.Sprintf("%v failed%s in %v", r.since(), awaited(e.Awaited), e.Duration)
		if errors.Is(e.Failure, errCheckCanceled) {
			s += " canceled"
		}
		return s
	}
	return fmt.Sprintf("%v unexpected event %T", r.since(), e)
}

func kindName(k errorKind) string {
	switch k {
	case kindNetwork:
		return "network"
	case kindTimeout:
		return "timeout"
	case kindCommand:
		return "command"
	}
	return fmt.Sprintf("kind %d", k)
}

// lines returns what was recorded, each line starting with its time.
func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.records)
}

// linesWith returns the recorded lines that contain word.
func (r *recorder) linesWith(word string) []string {
	var out []string
	for _, l := range r.lines() {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return out
}

func (r *recorder) lastOutcome() checkOutcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.outcomes) == 0 {
		r.t.Fatal("no outcome reported")
	}
	return r.outcomes[len(r.outcomes)-1]
}

// wantLines fails the test unless got is want.
func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("got:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// startTestMonitor starts a monitor of f in the calling synctest bubble, with
// a heartbeat of 10 s unless cfg says otherwise, once setup (if any) has set
// up the recorder. When the test ends, the monitor is closed and the
// server's goroutines waited for; in the bubble this cleanup runs before the
// bubble waits for its goroutines.
func startTestMonitor(t *testing.T, f *fakeServer, cfg monitorConfig, setup ...func(r *recorder)) (m *monitor, r *recorder) {
	r = newRecorder(t)
	for _, s := range setup {
		s(r)
	}
	cfg.Address = testAddress
	cfg.Conn.DialContext = f.dial
	if cfg.HeartbeatFrequency == 0 {
		cfg.HeartbeatFrequency = 10 * time.Second
	}
	cfg.Handler = r.handler()
	m = startMonitor(cfg)
	r.monitor = m
	close(r.started)
	t.Cleanup(func() { m.Close(); f.wg.Wait() })
	return m, r
}

// sleepUntil sleeps until d after the recorder started, then waits for the
// bubble to settle.
func sleepUntil(r *recorder, d time.Duration) {
	time.Sleep(d - r.since())
	synctest.Wait()
}

// delays returns a fakeServer delay that takes d[i] for the i-th request
// not awaited, in the order they come, and 0 after.
func delays(d ...time.Duration) func(fakeRequest) time.Duration {
	var mu sync.Mutex
	i := 0
	return func(fakeRequest) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if i >= len(d) {
			return 0
		}
		i++
		return d[i-1]
	}
}

// rttHelloDelay returns a fakeServer delay of rtt for the RTT goroutine's
// hellos (those after the handshake on connection 1, the RTT goroutine's
// while the monitor streams) and of other for every other request not
// awaited.
func rttHelloDelay(rtt, other time.Duration) func(fakeRequest) time.Duration {
	return func(q fakeRequest) time.Duration {
		if q.conn == 1 && q.n > 0 {
			return rtt
		}
		return other
	}
}

// faultWhere returns a fakeServer fault: fault for the k-th reply to a
// request q when where(q, k) holds, no fault otherwise.
func faultWhere(fault fakeFault, where func(q fakeRequest, k int) bool) func(fakeRequest, int) fakeFault {
	return func(q fakeRequest, k int) fakeFault {
		if where(q, k) {
			return fault
		}
		return noFault
	}
}

// topologyStub applies outcomes as the topology does: a Single topology of
// the one server, decideCheckError for failures.
type topologyStub struct {
	mu sync.Mutex
	d  Description
}

func newTopologyStub(t testing.TB) *topologyStub {
	d, err := newDescription(Settings{Seeds: []string{testAddress}, DirectConnection: true})
	if err != nil {
		t.Fatal(err)
	}
	return &topologyStub{d: d}
}

func (ts *topologyStub) checked(o checkOutcome) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if o.Err != nil {
		dec := ts.d.decideCheckError(testAddress, o.Kind, o.Err)
		if dec.MarkUnknown {
			ts.d = ts.d.apply(dec.Server).Description
		}
		return dec.CheckAgainNow
	}
	ts.d = ts.d.apply(o.Server).Description
	return false
}

func (ts *topologyStub) description() Description {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.d
}

// TestMonitorPolls: in poll mode, even against a server that could stream,
// the monitor checks every heartbeat counted from the end of the previous
// check (however long the handler takes), on one connection: the handshake first, then a hello (the server
// said helloOk) that is not awaitable. Each check's duration is a sample:
// the description has their moving average and, from the second, their
// minimum. The first ServerHeartbeatStarted comes before the connection.
func TestMonitorPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) {
			f.streamable = true
			f.delay = delays(100*time.Millisecond, 200*time.Millisecond, 300*time.Millisecond)
		})
		connsAtStart := -1
		_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringPoll}, func(r *recorder) {
			// The handler takes a second of the bubble's time; the
			// heartbeat still counts from the end of the check.
			r.checked = func(checkOutcome) bool { time.Sleep(time.Second); return false }
			r.onEvent = func(e Event) {
				if _, ok := e.(*ServerHeartbeatStarted); ok && connsAtStart < 0 {
					connsAtStart = f.connections()
				}
			}
		})
		sleepUntil(r, 25*time.Second)
		wantLines(t, r.lines(),
			"0s started",
			"100ms succeeded in 100ms",
			"100ms ok Standalone rtt 100ms min 0s tv 0",
			"10.1s started",
			"10.3s succeeded in 200ms",
			"10.3s ok Standalone rtt 120ms min 100ms tv 0",
			"20.3s started",
			"20.6s succeeded in 300ms",
			"20.6s ok Standalone rtt 156ms min 100ms tv 0",
		)
		if connsAtStart != 0 {
			t.Errorf("%d connections when the first check started, want 0", connsAtStart)
		}
		reqs := f.requests()
		var names []string
		for _, q := range reqs {
			names = append(names, q.name)
			if q.conn != 0 || q.awaited || q.flags != 0 {
				t.Errorf("request %+v: want all on connection 0, none awaited, no flags", q)
			}
		}
		wantLines(t, names, "isMaster", "hello", "hello")
		if len(reqs) < 2 {
			t.FailNow()
		}
		if ok, _ := reqs[1].body.Lookup("helloOk").BooleanOK(); !ok {
			t.Errorf("the polling hello %v has no helloOk: true", reqs[1].body)
		}
		if db, _ := reqs[1].body.Lookup("$db").StringValueOK(); db != "admin" {
			t.Errorf("the polling hello %v is not on admin", reqs[1].body)
		}
	})
}

// TestMonitorLegacyHello: a server that did not say helloOk is checked with
// the legacy hello, which still carries helloOk: true; in streaming too.
func TestMonitorLegacyHello(t *testing.T) {
	for _, mode := range []MonitoringMode{MonitoringPoll, MonitoringStream} {
		t.Run(string(mode), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeServer(t)
				f.set(func(f *fakeServer) { f.helloOK, f.streamable = false, true })
				_, r := startTestMonitor(t, f, monitorConfig{Mode: mode})
				sleepUntil(r, 10*time.Second+time.Millisecond)
				reqs := f.requests()
				if len(reqs) < 2 {
					t.Fatalf("%d requests", len(reqs))
				}
				for _, q := range reqs {
					if q.name != "isMaster" {
						t.Errorf("request %q on connection %d, want isMaster", q.name, q.conn)
					}
					if q.n > 0 {
						if ok, _ := q.body.Lookup("helloOk").BooleanOK(); !ok {
							t.Errorf("request %v has no helloOk: true", q.body)
						}
					}
				}
			})
		})
	}
}

// TestMonitorStreams: the handshake, then one awaitable hello with the
// exhaustAllowed flag, the topologyVersion of the handshake's reply and
// maxAwaitTimeMS of the heartbeat; the server's replies (at a change, or
// after maxAwaitTimeMS) are read one after the other as awaited checks. Their
// durations are not samples: the RTT goroutine's hellos, every heartbeat on
// a connection of their own, are.
func TestMonitorStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) {
			f.streamable = true
			f.delay = rttHelloDelay(300*time.Millisecond, 100*time.Millisecond)
		})
		_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream})
		sleepUntil(r, 3*time.Second)
		f.bump()
		sleepUntil(r, 15*time.Second)
		wantLines(t, r.lines(),
			"0s started",
			"100ms succeeded in 100ms",
			"100ms ok Standalone rtt 100ms min 0s tv 0",
			"100ms started awaited",
			"3s succeeded awaited in 2.9s",
			"3s ok Standalone rtt 100ms min 100ms tv 1",
			"3s started awaited",
			"13s succeeded awaited in 10s",
			"13s ok Standalone rtt 140ms min 100ms tv 1",
			"13s started awaited",
		)
		var got []string
		for _, q := range f.requests() {
			got = append(got, fmt.Sprintf("%d %s %v awaited=%v", q.conn, q.name, q.at.Sub(r.t0), q.awaited))
		}
		wantLines(t, got,
			"0 isMaster 0s awaited=false",
			"0 hello 100ms awaited=true",
			"1 isMaster 100ms awaited=false",
			"1 hello 10.2s awaited=false",
		)
		reqs := f.requests()
		if len(reqs) != 4 {
			t.FailNow()
		}
		await := reqs[1]
		if await.flags != wire.ExhaustAllowed {
			t.Errorf("the awaitable hello's flags are %v, want exhaustAllowed", await.flags)
		}
		if ms, _ := await.body.Lookup("maxAwaitTimeMS").AsInt64OK(); ms != 10000 {
			t.Errorf("maxAwaitTimeMS %d, want 10000", ms)
		}
		tv := await.body.Lookup("topologyVersion").Document()
		if pid, _ := tv.Lookup("processId").ObjectIDOK(); pid != f.processID || tv.Lookup("counter").Int64() != 0 {
			t.Errorf("topologyVersion %v, want the handshake's", tv)
		}
		rtt := reqs[3]
		if rtt.flags != 0 || rtt.body.Lookup("topologyVersion").Type != 0 {
			t.Errorf("the RTT hello %v (flags %v) is not a plain one", rtt.body, rtt.flags)
		}
	})
}

// TestMonitorAwaitsWithoutExhaust: a server that answers an awaitable hello
// without moreToCome gets the next one, with the new topologyVersion, at
// once.
func TestMonitorAwaitsWithoutExhaust(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) { f.streamable, f.noExhaust = true, true })
		_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream})
		sleepUntil(r, 2*time.Second)
		f.bump()
		sleepUntil(r, 5*time.Second)
		wantLines(t, r.linesWith("succeeded"),
			"0s succeeded in 0s",
			"2s succeeded awaited in 2s",
		)
		var counters []int64
		for _, q := range f.requests() {
			if q.conn == 0 && q.awaited {
				counters = append(counters, q.body.Lookup("topologyVersion", "counter").Int64())
			}
		}
		if !slices.Equal(counters, []int64{0, 1}) {
			t.Errorf("the awaitable hellos carried the counters %v, want [0 1]", counters)
		}
	})
}

// TestMonitoringModes: which protocol each serverMonitoringMode uses, with
// and without a FaaS platform's environment, against servers that can
// stream or not. Streaming means awaitable hellos and a second connection
// for the RTT; polling, one connection and none awaited.
func TestMonitoringModes(t *testing.T) {
	aws := map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}
	tests := []struct {
		name       string
		mode       MonitoringMode
		env        map[string]string
		streamable bool
		stream     bool
	}{
		{"auto", MonitoringAuto, nil, true, true},
		{"empty is auto", "", nil, true, true},
		{"unknown is auto", "sometimes", nil, true, true},
		{"auto on AWS Lambda", MonitoringAuto, aws, true, false},
		{"auto on AWS Lambda by its execution env", MonitoringAuto, map[string]string{"AWS_EXECUTION_ENV": "AWS_Lambda_java8"}, true, false},
		{"auto on Azure Functions", MonitoringAuto, map[string]string{"FUNCTIONS_WORKER_RUNTIME": "node"}, true, false},
		{"auto on GCP", MonitoringAuto, map[string]string{"K_SERVICE": "svc"}, true, false},
		{"auto on Vercel and AWS", MonitoringAuto, map[string]string{"VERCEL": "1", "AWS_LAMBDA_RUNTIME_API": "x"}, true, false},
		{"auto on two platforms is on none", MonitoringAuto, map[string]string{"FUNCTIONS_WORKER_RUNTIME": "node", "K_SERVICE": "svc"}, true, true},
		{"auto, other AWS", MonitoringAuto, map[string]string{"AWS_EXECUTION_ENV": "AWS_ECS_FARGATE"}, true, true},
		{"stream on AWS Lambda", MonitoringStream, aws, true, true},
		{"stream, server too old", MonitoringStream, nil, false, false},
		{"poll", MonitoringPoll, nil, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeServer(t)
				f.set(func(f *fakeServer) { f.streamable = tc.streamable })
				var cfg monitorConfig
				cfg.Mode = tc.mode
				cfg.Conn.Handshake.Env.Getenv = func(k string) string { return tc.env[k] }
				cfg.Conn.Handshake.Env.FileExists = func(string) bool { return false }
				cfg.Conn.Handshake.Env.ReadFile = func(string) ([]byte, error) { return nil, os.ErrNotExist }
				_, r := startTestMonitor(t, f, cfg)
				sleepUntil(r, 10*time.Second+time.Millisecond)
				awaited := false
				for _, q := range f.requests() {
					awaited = awaited || q.awaited
				}
				wantConns := 1
				if tc.stream {
					wantConns = 2
				}
				if awaited != tc.stream || f.connections() != wantConns {
					t.Errorf("awaitable hellos: %v, connections: %d; want %v, %d", awaited, f.connections(), tc.stream, wantConns)
				}
			})
		})
	}
}

// TestMonitorRequestCheck: a request wakes a waiting monitor, but not before
// minHeartbeatFrequency after the last check ended; requests while a check
// is in progress are ignored; several while waiting make one check.
func TestMonitorRequestCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) {
			f.delay = func(q fakeRequest) time.Duration {
				if q.n == 3 {
					return 2 * time.Second
				}
				return 0
			}
		})
		m, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringPoll})
		sleepUntil(r, 100*time.Millisecond)
		m.RequestCheck() // 100 ms after the last check: at 500 ms
		sleepUntil(r, 5*time.Second)
		m.RequestCheck() // at once
		sleepUntil(r, 16*time.Second)
		m.RequestCheck() // during the check of 15 s, which ends at 17 s: ignored
		sleepUntil(r, 30*time.Second)
		m.RequestCheck()
		m.RequestCheck()
		m.RequestCheck()
		sleepUntil(r, 35*time.Second)
		wantLines(t, r.linesWith("started"),
			"0s started",
			"500ms started",
			"5s started",
			"15s started",
			"27s started",
			"30s started",
		)
	})
}

// TestMonitorRetryOnce: a check of a known server that fails with a network
// error is followed at once by another, on a new connection (the topology
// says so, by decideCheckError); when that one fails too, the server being
// Unknown now, the next waits for the heartbeat. The failures forget the
// round trip times.
func TestMonitorRetryOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) {
			f.delay = func(q fakeRequest) time.Duration {
				switch q.conn {
				case 0:
					return 100 * time.Millisecond
				case 2:
					return 300 * time.Millisecond
				}
				return 0
			}
			f.fault = faultWhere(faultClose, func(q fakeRequest, _ int) bool { return q.conn == 0 && q.n == 1 || q.conn == 1 })
		})
		ts := newTopologyStub(t)
		_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringPoll}, func(r *recorder) { r.checked = ts.checked })
		sleepUntil(r, 25*time.Second)
		wantLines(t, r.lines(),
			"0s started",
			"100ms succeeded in 100ms",
			"100ms ok Standalone rtt 100ms min 0s",
			"10.1s started",
			"10.2s failed in 100ms",
			"10.2s error network",
			"10.2s started",
			"10.2s failed in 0s",
			"10.2s error network",
			"20.2s started",
			"20.5s succeeded in 300ms",
			"20.5s ok Standalone rtt 300ms min 0s",
		)
		if f.connections() != 3 || !f.isClosed(0) || !f.isClosed(1) {
			t.Errorf("%d connections; the first two closed: %v, %v", f.connections(), f.isClosed(0), f.isClosed(1))
		}
		if sd, _ := ts.description().Server(testAddress); sd.Type != Standalone {
			t.Errorf("the server is %v after the last check", sd.Type)
		}
	})
}

// TestMonitorCheckErrors: how each way a check fails is reported: its kind,
// when, the connection closed, and the next check made on a new connection.
func TestMonitorCheckErrors(t *testing.T) {
	manyHosts := make(bson.A, 300)
	for i := range manyHosts {
		manyHosts[i] = fmt.Sprintf("h%d:27017", i)
	}
	tests := []struct {
		name string
		// which request fails, and how
		conn, n int
		fault   fakeFault
		set     func(f *fakeServer) // a change of the server at 5 s
		kind    string
		at      time.Duration
		is      error // the error wraps it, when not nil
		code    int32 // the error is a *CommandError of this code, when not 0
	}{
		{name: "closed", conn: 0, n: 1, fault: faultClose, kind: "network", at: 10 * time.Second},
		{name: "no reply", conn: 0, n: 1, fault: faultHang, kind: "timeout", at: 12 * time.Second, is: context.DeadlineExceeded},
		{name: "shutting down", conn: 0, n: 1, fault: faultShutdown, kind: "command", at: 10 * time.Second, code: 91},
		{name: "reply beyond bounds", conn: -1, set: func(f *fakeServer) { f.extra = bson.D{{Key: "hosts", Value: manyHosts}} }, kind: "command", at: 10 * time.Second, is: ErrInvalidReply},
		{name: "refused", conn: -1, set: func(f *fakeServer) { f.down = true }, kind: "network", at: 10 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeServer(t)
				f.set(func(f *fakeServer) {
					f.fault = faultWhere(tc.fault, func(q fakeRequest, _ int) bool { return q.conn == tc.conn && q.n == tc.n })
				})
				m, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringPoll, Conn: connection.Config{ConnectTimeout: 2 * time.Second}})
				if tc.set != nil {
					sleepUntil(r, 5*time.Second)
					f.set(tc.set)
					m.CancelCheck() // the next check makes a new connection

				}
				sleepUntil(r, 15*time.Second)
				want := fmt.Sprintf("%v error %s", tc.at, tc.kind)
				if got := r.linesWith("error"); len(got) != 1 || got[0] != want {
					t.Fatalf("errors reported: %q, want %q", got, want)
				}
				o := r.lastOutcome()
				if tc.is != nil && !errors.Is(o.Err, tc.is) {
					t.Errorf("error %v does not wrap %v", o.Err, tc.is)
				}
				var ce *wire.CommandError
				if tc.code != 0 && (!errors.As(o.Err, &ce) || ce.Code != tc.code) {
					t.Errorf("error %v, want a CommandError of code %d", o.Err, tc.code)
				}
				if o.Server.Type != ServerUnknown || o.Server.Error != o.Err || !strings.Contains(o.Err.Error(), testAddress) {
					t.Errorf("outcome %+v: want an Unknown server with the error, which names the server", o)
				}
				for i := range f.connections() {
					if !f.isClosed(i) {
						t.Errorf("connection %d is still open after the failure", i)
					}
				}
				// The next check is a handshake on a new connection.
				f.set(func(f *fakeServer) { f.down, f.extra = false, nil })
				before := f.connections()
				sleepUntil(r, tc.at+10*time.Second+time.Millisecond)
				if f.connections() != before+1 {
					t.Errorf("%d connections after the next check, want %d", f.connections(), before+1)
				}
				if got := r.lastOutcome(); got.Err != nil {
					t.Errorf("the next check: %v", got.Err)
				}
			})
		})
	}
}

// TestMonitorHandshakeErrors: a check that makes a connection fails as the
// handshake does, and the next check tries again.
func TestMonitorHandshakeErrors(t *testing.T) {
	tests := []struct {
		name  string
		fault fakeFault
		kind  string
		at    time.Duration
	}{
		{"closed", faultClose, "network", 0},
		{"no reply", faultHang, "timeout", 2 * time.Second},
		{"shutting down", faultShutdown, "command", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeServer(t)
				f.set(func(f *fakeServer) {
					f.fault = faultWhere(tc.fault, func(q fakeRequest, _ int) bool { return q.conn == 0 })
				})
				_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream, Conn: connection.Config{ConnectTimeout: 2 * time.Second}})
				sleepUntil(r, tc.at+10*time.Second)
				wantLines(t, r.lines(),
					"0s started",
					fmt.Sprintf("%v failed in %v", tc.at, tc.at),
					fmt.Sprintf("%v error %s", tc.at, tc.kind),
					fmt.Sprintf("%v started", tc.at+10*time.Second),
					fmt.Sprintf("%v succeeded in 0s", tc.at+10*time.Second),
					fmt.Sprintf("%v ok Standalone rtt 0s min 0s", tc.at+10*time.Second),
				)
			})
		})
	}
}

// TestMonitorAwaitTimeout: an awaited reply may take the heartbeat, so its
// read times out after connectTimeoutMS plus the heartbeat, the first one
// and a streamed one alike; with connectTimeoutMS 0 it never does.
func TestMonitorAwaitTimeout(t *testing.T) {
	for _, k := range []int{0, 1} {
		t.Run(fmt.Sprintf("reply %d", k), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeServer(t)
				f.set(func(f *fakeServer) {
					f.streamable = true
					f.fault = faultWhere(faultHang, func(q fakeRequest, i int) bool { return q.conn == 0 && q.awaited && i == k })
				})
				_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream, Conn: connection.Config{ConnectTimeout: 2 * time.Second}})
				at := time.Duration(k)*10*time.Second + 12*time.Second
				sleepUntil(r, at+time.Millisecond)
				want := []string{fmt.Sprintf("%v failed awaited in 12s", at), fmt.Sprintf("%v error timeout", at)}
				got := r.lines()
				if i := slices.Index(got, want[0]); i < 0 || i+1 >= len(got) || got[i+1] != want[1] {
					t.Errorf("got:\n\t%s\nwant among them:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
				}
				if n := len(r.linesWith("failed")); n != 1 {
					t.Errorf("%d failures, want 1", n)
				}
			})
		})
	}
	t.Run("no connectTimeoutMS", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFakeServer(t)
			f.set(func(f *fakeServer) {
				f.streamable = true
				f.fault = faultWhere(faultHang, func(q fakeRequest, _ int) bool { return q.awaited })
			})
			_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream})
			sleepUntil(r, time.Hour)
			if got := r.linesWith("failed"); len(got) != 0 {
				t.Errorf("failures without connectTimeoutMS: %q", got)
			}
		})
	})
}

// TestMonitorCancelCheck: CancelCheck during an awaited read closes the
// connection; the check's outcome is not reported (its heartbeat fails with
// errCheckCanceled), the round trip times are forgotten, and the next check,
// when asked for, waits for minHeartbeatFrequency and makes a new connection.
func TestMonitorCancelCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) {
			f.streamable = true
			f.delay = func(q fakeRequest) time.Duration {
				if q.conn == 2 {
					return 400 * time.Millisecond
				}
				return 100 * time.Millisecond
			}
		})
		m, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream})
		sleepUntil(r, 5*time.Second)
		m.CancelCheck()
		synctest.Wait()
		if !f.isClosed(0) {
			t.Error("the monitoring connection is open after CancelCheck")
		}
		if f.isClosed(1) {
			t.Error("CancelCheck closed the RTT connection")
		}
		sleepUntil(r, 5100*time.Millisecond)
		m.RequestCheck()
		sleepUntil(r, 7*time.Second)
		wantLines(t, r.lines(),
			"0s started",
			"100ms succeeded in 100ms",
			"100ms ok Standalone rtt 100ms min 0s tv 0",
			"100ms started awaited",
			"5s failed awaited in 4.9s canceled",
			"5.5s started",
			"5.9s succeeded in 400ms",
			"5.9s ok Standalone rtt 400ms min 0s tv 0",
			"5.9s started awaited",
		)
	})
}

// TestMonitorRequestAfterCancel: a check asked for at once after
// CancelCheck, before the canceled check has ended, is not ignored as one
// asked for during a check would be: the canceled check serves no one (its
// outcome is not reported), so the request is for the next, which comes
// minHeartbeatFrequency after the canceled one ends rather than a
// heartbeat later. A client does just that after a network error: the
// error cancels the streaming check, and the next server selection asks
// for one.
func TestMonitorRequestAfterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) { f.streamable = true })
		m, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream})
		sleepUntil(r, 5*time.Second)
		m.CancelCheck()
		m.RequestCheck() // the canceled check may not have ended yet
		sleepUntil(r, 6*time.Second)
		wantLines(t, r.lines(),
			"0s started",
			"0s succeeded in 0s",
			"0s ok Standalone rtt 0s min 0s tv 0",
			"0s started awaited",
			"5s failed awaited in 5s canceled",
			"5.5s started",
			"5.5s succeeded in 0s",
			"5.5s ok Standalone rtt 0s min 0s tv 0",
			"5.5s started awaited",
		)
	})
}

// TestMonitorCancelCheckPolling: CancelCheck of a poll that waits for its
// reply, and CancelCheck between checks, which closes the connection the
// next check would have used and forgets the round trip times.
func TestMonitorCancelCheckPolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) {
			f.delay = func(q fakeRequest) time.Duration {
				return [...]time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond}[q.conn]
			}
			f.fault = faultWhere(faultHang, func(q fakeRequest, _ int) bool { return q.conn == 0 && q.n == 1 })
		})
		m, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringPoll})
		sleepUntil(r, 11*time.Second)
		m.CancelCheck() // the check of 10 s waits for its reply
		sleepUntil(r, 25*time.Second)
		m.CancelCheck() // between the checks of 21 s and 31.1 s
		synctest.Wait()
		if !f.isClosed(1) {
			t.Error("CancelCheck between checks left the connection open")
		}
		sleepUntil(r, 32*time.Second)
		wantLines(t, r.lines(),
			"0s started",
			"0s succeeded in 0s",
			"0s ok Standalone rtt 0s min 0s",
			"10s started",
			"11s failed in 1s canceled",
			"21s started",
			"21.1s succeeded in 100ms",
			"21.1s ok Standalone rtt 100ms min 0s",
			// The samples were forgotten at the second CancelCheck.
			"31.1s started",
			"31.4s succeeded in 300ms",
			"31.4s ok Standalone rtt 300ms min 0s",
		)
		if f.connections() != 3 {
			t.Errorf("%d connections, want 3", f.connections())
		}
	})
}

// TestMonitorCloseFromHandler: Close called from the handler, on the
// monitor's own goroutine, returns, and nothing is reported after it.
func TestMonitorCloseFromHandler(t *testing.T) {
	for _, from := range []string{"Checked", "Succeeded", "Started"} {
		t.Run(from, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeServer(t)
				// The handshake takes 1 ms of the bubble's time.
				f.set(func(f *fakeServer) { f.streamable, f.delay = true, delays(time.Millisecond) })
				var closed atomic.Bool
				_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream}, func(r *recorder) {
					if from == "Checked" {
						r.checked = func(checkOutcome) bool { r.startedMonitor().Close(); closed.Store(true); return true }
						return
					}
					r.onEvent = func(e Event) {
						_, started := e.(*ServerHeartbeatStarted)
						_, succeeded := e.(*ServerHeartbeatSucceeded)
						if from == "Started" && started || from == "Succeeded" && succeeded {
							r.startedMonitor().Close()
							closed.Store(true)
						}
					}
				})
				sleepUntil(r, time.Minute)
				if !closed.Load() {
					t.Fatal("Close from the handler did not return")
				}
				want := []string{"0s started"}
				switch from {
				case "Succeeded":
					want = append(want, "1ms succeeded in 1ms")
				case "Checked":
					want = append(want, "1ms succeeded in 1ms", "1ms ok Standalone rtt 1ms min 0s tv 0")
				}
				wantLines(t, r.lines(), want...)
				for i := range f.connections() {
					if !f.isClosed(i) {
						t.Errorf("connection %d is open after Close", i)
					}
				}
			})
		})
	}
}

// TestMonitorCloseInterruptsAwait: Close during an awaited read returns at
// once, without waiting for the server's reply, with both connections
// closed and nothing reported after it. RequestCheck and CancelCheck do
// nothing after Close, and Close can be called again.
func TestMonitorCloseInterruptsAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) { f.streamable = true })
		m, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream})
		sleepUntil(r, 5*time.Second)
		before := len(r.lines())
		start := time.Now()
		m.Close()
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v of the bubble's time", d)
		}
		synctest.Wait()
		if f.connections() != 2 || !f.isClosed(0) || !f.isClosed(1) {
			t.Errorf("%d connections, closed: %v %v", f.connections(), f.isClosed(0), f.isClosed(1))
		}
		m.RequestCheck()
		m.CancelCheck()
		m.Close()
		sleepUntil(r, time.Minute)
		if got := r.lines(); len(got) != before {
			t.Errorf("reported after Close: %q", got[before:])
		}
	})
}

// TestMonitorIncompatibleServer: a server whose wire versions are out of
// range is found by the check (the topology becomes incompatible, the check
// has not failed); as the handshake refuses the connection, each check makes
// a new one, every heartbeat, even in streaming mode.
func TestMonitorIncompatibleServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) { f.maxWire, f.streamable = 5, true })
		ts := newTopologyStub(t)
		_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream}, func(r *recorder) { r.checked = ts.checked })
		sleepUntil(r, 15*time.Second)
		wantLines(t, r.linesWith("ok"),
			"0s ok Standalone rtt 0s min 0s tv 0",
			"10s ok Standalone rtt 0s min 0s tv 0",
		)
		if o := r.lastOutcome(); o.Server.MaxWireVersion != 5 {
			t.Errorf("maxWireVersion %d", o.Server.MaxWireVersion)
		}
		if d := ts.description(); d.Compatible() || !errors.Is(d.CompatibilityError, handshake.ErrIncompatible) {
			t.Errorf("the topology's compatibility error: %v", d.CompatibilityError)
		}
		if f.connections() != 2 {
			t.Errorf("%d connections, want one per check", f.connections())
		}
	})
}

// TestMonitorConfig: the monitor's connection never authenticates, nor asks
// for SASL mechanisms, whatever the configuration says, and the heartbeat
// (the awaitable hello's maxAwaitTimeMS) is never below
// minHeartbeatFrequency.
func TestMonitorConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) { f.streamable = true })
		var cfg monitorConfig
		cfg.Mode = MonitoringStream
		cfg.Conn.Handshake.SaslSupportedMechs = "admin.user"
		cfg.Conn.Handshake.AppName = "monitored"
		cfg.Conn.Address = "elsewhere:1"
		cfg.HeartbeatFrequency = time.Millisecond
		_, r := startTestMonitor(t, f, cfg)
		sleepUntil(r, 1200*time.Millisecond)
		wantLines(t, r.linesWith("succeeded"), "0s succeeded in 0s", "500ms succeeded awaited in 500ms", "1s succeeded awaited in 500ms")
		reqs := f.requests()
		if len(reqs) < 2 {
			t.FailNow()
		}
		hs := reqs[0].body
		if hs.Lookup("saslSupportedMechs").Type != 0 || hs.Lookup("speculativeAuthenticate").Type != 0 {
			t.Errorf("the monitor's handshake asks for authentication: %v", hs)
		}
		if name, _ := hs.Lookup("client", "application", "name").StringValueOK(); name != "monitored" {
			t.Errorf("the handshake's appName is %q", name)
		}
		if ms, _ := reqs[1].body.Lookup("maxAwaitTimeMS").AsInt64OK(); ms != 500 {
			t.Errorf("maxAwaitTimeMS %d, want minHeartbeatFrequency's 500", ms)
		}
	})
}

// TestMonitorOverTCP: a streaming monitor against the fake server on
// loopback: the handshake, then a change of the server's state streamed to
// it.
func TestMonitorOverTCP(t *testing.T) {
	f := newFakeServer(t)
	f.set(func(f *fakeServer) { f.streamable = true })
	addr, stopServer := f.listen()
	defer stopServer()
	outcomes := make(chan checkOutcome, 16)
	m := startMonitor(monitorConfig{
		Address: addr,
		Conn:    connection.Config{ConnectTimeout: 10 * time.Second},
		Mode:    MonitoringStream,
		Handler: monitorHandler{Checked: func(o checkOutcome) bool {
			select {
			case outcomes <- o:
			default:
			}
			return false
		}},
	})
	defer m.Close()
	next := func() checkOutcome {
		t.Helper()
		select {
		case o := <-outcomes:
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			return o
		case <-time.After(10 * time.Second):
			t.Fatal("no outcome within 10 s")
		}
		return checkOutcome{}
	}
	if o := next(); o.Server.TopologyVersion == nil || o.Server.TopologyVersion.Counter != 0 {
		t.Fatalf("first check: %+v", o.Server)
	}
	f.bump()
	if o := next(); o.Server.TopologyVersion == nil || o.Server.TopologyVersion.Counter != 1 || o.Server.Type != Standalone {
		t.Fatalf("after the change: %+v", o.Server)
	}
}

// reported is an outcome, with whether its check was awaited.
type reported struct {
	checkOutcome
	awaited bool
}

// startReporting starts a monitor of address that sends what it reports to
// the returned channel, and a function that waits for the next report
// matching want, failing the test after 10 s.
func startReporting(t *testing.T, cfg monitorConfig) (*monitor, func(what string, want func(reported) bool) reported) {
	ch := make(chan reported, 256)
	awaited := false // of the last heartbeat: the monitor's goroutine only
	cfg.Handler = monitorHandler{
		Event: func(e Event) {
			switch e := e.(type) {
			case *ServerHeartbeatSucceeded:
				awaited = e.Awaited
			case *ServerHeartbeatFailed:
				awaited = e.Awaited
			}
		},
		Checked: func(o checkOutcome) bool {
			select {
			case ch <- reported{o, awaited}:
			default:
				t.Error("reports not read")
			}
			return false
		},
	}
	m := startMonitor(cfg)
	deadline := time.NewTimer(10 * time.Second)
	t.Cleanup(func() { deadline.Stop() })
	return m, func(what string, want func(reported) bool) reported {
		t.Helper()
		for {
			select {
			case r := <-ch:
				if want(r) {
					return r
				}
			case <-deadline.C:
				t.Fatalf("no report of %s within 10 s", what)
			}
		}
	}
}

// TestMonitorStreamsFromReplicaSet: against the test server's replica set,
// the primary's monitor streams: with a heartbeat of an hour, a step-down
// and an election reach it as awaited replies, and stopping the member
// fails the check with a network error.
func TestMonitorStreamsFromReplicaSet(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs0", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	addr := rs.Members()[0].Addr()
	m, next := startReporting(t, monitorConfig{
		Address:            addr,
		Conn:               connection.Config{ConnectTimeout: 10 * time.Second},
		Mode:               MonitoringStream,
		HeartbeatFrequency: time.Hour,
	})
	defer m.Close()
	first := next("the handshake", func(reported) bool { return true })
	if first.Err != nil || first.Server.Type != RSPrimary || first.Server.TopologyVersion == nil || first.awaited {
		t.Fatalf("first check: %+v, awaited %v", first.Server, first.awaited)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rs.StepDown(ctx); err != nil {
		t.Fatal(err)
	}
	r := next("the step-down", func(r reported) bool { return r.Err != nil || r.Server.Type != RSPrimary })
	if r.Err != nil || r.Server.Type != RSSecondary || !r.awaited {
		t.Fatalf("after the step-down: %v %+v, awaited %v", r.Err, r.Server, r.awaited)
	}
	if err := rs.Elect(0); err != nil {
		t.Fatal(err)
	}
	r = next("the election", func(r reported) bool { return r.Err != nil || r.Server.Type == RSPrimary })
	if r.Err != nil || !r.awaited {
		t.Fatalf("after the election: %v, awaited %v", r.Err, r.awaited)
	}
	if err := rs.Stop(0); err != nil {
		t.Fatal(err)
	}
	r = next("the stop", func(r reported) bool { return r.Err != nil })
	if r.Kind != kindNetwork || r.Server.Type != ServerUnknown {
		t.Fatalf("after the stop: %v (%s)", r.Err, kindName(r.Kind))
	}
}

// TestMonitorPollsStandalone: a standalone of MongoDB 4.2 (maxWireVersion
// 8) reports no topologyVersion, so the monitor polls; a check asked for
// comes once minHeartbeatFrequency (1 ms here) has passed, not after the
// heartbeat.
func TestMonitorPollsStandalone(t *testing.T) {
	srv, err := mongotest.Start(mongotest.WithWireVersions(0, 8))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	m, next := startReporting(t, monitorConfig{
		Address:               srv.Addr(),
		Mode:                  MonitoringAuto,
		HeartbeatFrequency:    time.Hour,
		MinHeartbeatFrequency: time.Millisecond,
	})
	defer m.Close()
	first := next("the handshake", func(reported) bool { return true })
	if first.Err != nil || first.Server.Type != Standalone || first.Server.TopologyVersion != nil {
		t.Fatalf("first check: %v %+v", first.Err, first.Server)
	}
	m.RequestCheck()
	r := next("the check asked for", func(reported) bool { return true })
	if r.Err != nil || r.Server.Type != Standalone || r.awaited {
		t.Fatalf("second check: %v %+v, awaited %v", r.Err, r.Server, r.awaited)
	}
	if st := srv.Stats(); st.ConnectionsAccepted != 1 {
		t.Errorf("%d connections, want the monitor's one", st.ConnectionsAccepted)
	}
}

// TestMonitorStreamsStandalone: a standalone of MongoDB 4.4 or later
// reports a topologyVersion, so the monitor in auto mode streams its
// hellos: the check after the handshake is an awaited one, which the
// server answers after maxAwaitTimeMS (the heartbeat frequency).
func TestMonitorStreamsStandalone(t *testing.T) {
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	m, next := startReporting(t, monitorConfig{
		Address:               srv.Addr(),
		Mode:                  MonitoringAuto,
		HeartbeatFrequency:    100 * time.Millisecond,
		MinHeartbeatFrequency: time.Millisecond,
	})
	defer m.Close()
	first := next("the handshake", func(reported) bool { return true })
	if first.Err != nil || first.Server.Type != Standalone || first.Server.TopologyVersion == nil {
		t.Fatalf("first check: %v %+v", first.Err, first.Server)
	}
	r := next("an awaited check", func(r reported) bool { return r.awaited })
	if r.Err != nil || r.Server.Type != Standalone || *r.Server.TopologyVersion != *first.Server.TopologyVersion {
		t.Fatalf("awaited check: %v %+v", r.Err, r.Server)
	}
	if st := srv.Stats(); st.AwaitableHellos == 0 {
		t.Errorf("stats %+v: no awaitable hello", st)
	}
}

// TestMonitorHandshakeRefusesReply: a hello reply that the description would
// take but the handshake refuses (a limit of the wrong type) fails the check
// as a command error: the server answered, wrongly.
func TestMonitorHandshakeRefusesReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) { f.extra = bson.D{{Key: "maxBsonObjectSize", Value: "large"}} })
		_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringPoll})
		sleepUntil(r, time.Second)
		wantLines(t, r.lines(), "0s started", "0s failed in 0s", "0s error command")
		if o := r.lastOutcome(); !errors.Is(o.Err, handshake.ErrInvalidReply) {
			t.Errorf("error %v, want the handshake's ErrInvalidReply", o.Err)
		}
	})
}

// TestMonitorPacesEagerStream: a server that answers awaitable hellos at
// once with nothing changed, streaming or not, would make the monitor spin;
// its replies are taken one per minHeartbeatFrequency. A change is still
// taken, at the next of these turns, and the changes after it at once.
func TestMonitorPacesEagerStream(t *testing.T) {
	for _, exhaust := range []bool{true, false} {
		t.Run(fmt.Sprintf("exhaust %v", exhaust), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeServer(t)
				f.set(func(f *fakeServer) { f.streamable, f.eager, f.noExhaust = true, true, !exhaust })
				_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream})
				sleepUntil(r, 1200*time.Millisecond)
				f.set(func(f *fakeServer) { f.eager = false })
				f.bump()
				sleepUntil(r, 1600*time.Millisecond)
				f.bump()
				sleepUntil(r, 3*time.Second)
				want := []string{
					"0s ok Standalone rtt 0s min 0s tv 0",
					"0s ok Standalone rtt 0s min 0s tv 0",
					"500ms ok Standalone rtt 0s min 0s tv 0",
					"1s ok Standalone rtt 0s min 0s tv 0",
				}
				if exhaust {
					// The reply the server sent at 1 s, then the changes,
					// which are not paced.
					want = append(want, "1.5s ok Standalone rtt 0s min 0s tv 0", "2s ok Standalone rtt 0s min 0s tv 1", "2s ok Standalone rtt 0s min 0s tv 2")
				} else {
					want = append(want, "1.5s ok Standalone rtt 0s min 0s tv 1", "1.6s ok Standalone rtt 0s min 0s tv 2")
				}
				wantLines(t, r.linesWith("ok"), want...)
			})
		})
	}
}

// TestMonitorRetryNotPaced: the retry of a failed check is not delayed by
// the pace of the eager stream before it.
func TestMonitorRetryNotPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) { f.streamable, f.eager, f.noExhaust = true, true, true })
		ts := newTopologyStub(t)
		_, r := startTestMonitor(t, f, monitorConfig{Mode: MonitoringStream}, func(r *recorder) { r.checked = ts.checked })
		sleepUntil(r, 1200*time.Millisecond)
		f.set(func(f *fakeServer) {
			f.fault = faultWhere(faultClose, func(q fakeRequest, _ int) bool { return q.conn == 0 && q.awaited })
		})
		sleepUntil(r, 3*time.Second)
		got := r.lines()
		i := slices.Index(got, "1.5s error network")
		if i < 0 || i+1 >= len(got) || got[i+1] != "1.5s started" {
			t.Errorf("want the failure at 1.5 s retried at once; got:\n\t%s", strings.Join(got, "\n\t"))
		}
	})
}
