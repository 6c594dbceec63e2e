package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/wire"
)

// MonitoringMode is the serverMonitoringMode option: the protocol a Monitor
// checks its server with.
type MonitoringMode string

// The modes of the server monitoring specification. Any other value,
// the empty one included, counts as MonitoringAuto.
const (
	// MonitoringAuto streams, unless the client runs on a FaaS platform
	// (detected as the handshake's client.env is: AWS Lambda, Azure
	// Functions, Google Cloud Functions, Vercel), where it polls.
	MonitoringAuto MonitoringMode = "auto"
	// MonitoringStream streams when the server can (it reports a
	// topologyVersion), and polls otherwise.
	MonitoringStream MonitoringMode = "stream"
	// MonitoringPoll polls: a hello every heartbeat.
	MonitoringPoll MonitoringMode = "poll"
)

// monitorMinHeartbeat is the specification's minHeartbeatFrequencyMS: the
// least time from the end of a check to the start of one that was asked for.
const monitorMinHeartbeat = 500 * time.Millisecond

// errCheckCanceled is the Failure of the ServerHeartbeatFailed event of a
// check that CancelCheck canceled: its outcome is not reported.
var errCheckCanceled = errors.New("the check was canceled")

// monitorConfig says how a Monitor checks its server.
type monitorConfig struct {
	// Address is the server's address as the topology knows it: the one
	// the monitor connects to, and the one of its descriptions and events.
	Address string
	// Conn says how to connect: TLS, the hello's options (appName,
	// compressors, the environment FaaS detection reads), the zlib level,
	// the dial function. ConnectTimeout is connectTimeoutMS: it bounds
	// establishing a connection and each hello's reply (plus
	// HeartbeatFrequency for an awaited one); 0 means no limit. Address,
	// Auth and SocketTimeout are ignored: the monitor connects to Address,
	// never authenticates, and times its reads itself; so are the
	// handshake's LoadBalanced, SaslSupportedMechs and
	// SpeculativeAuthenticate.
	Conn connection.Config
	// HeartbeatFrequency is heartbeatFrequencyMS: the time between checks,
	// and the maxAwaitTimeMS of the streaming protocol.
	// DefaultHeartbeatFrequency when zero; never below
	// MinHeartbeatFrequency.
	HeartbeatFrequency time.Duration
	// MinHeartbeatFrequency is minHeartbeatFrequencyMS, 500 ms when zero.
	// The specification does not let clients change it; tests do.
	MinHeartbeatFrequency time.Duration
	// Mode is serverMonitoringMode.
	Mode MonitoringMode
	// Handler receives the outcome of each check and the heartbeat events,
	// from the monitor's goroutine, one call at a time, never under a lock
	// of the monitor's: it may call the Monitor back. After a failed
	// check, Checked returning true starts the next check at once (the
	// "retry once" rule that Description.decideCheckError decides);
	// after a successful one its result is ignored.
	Handler monitorHandler
}

// Monitor is the monitor of one server, as the server monitoring
// specification describes it for multi-threaded clients: a goroutine that
// checks the server on a connection of its own (never a pool's, and without
// authentication) and reports each check's outcome.
//
// A check on a new connection is its handshake; then, when the mode allows
// and the server reports a topologyVersion (MongoDB 4.4 and later), the
// monitor streams: it sends an awaitable hello (topologyVersion,
// maxAwaitTimeMS set to the heartbeat) with the exhaustAllowed flag and
// reads the replies the server sends as its state changes, or every
// heartbeat, each one a check, the next one read at once. (A server that
// answers at once with nothing changed, failing to wait, is read no faster
// than once per minHeartbeatFrequency.) A second goroutine then measures
// the round trip time with a hello every heartbeat on a connection of its
// own. Otherwise the monitor polls: a hello every heartbeat on the same
// connection, whose duration is the round trip time sample. A failed check
// closes the connection and forgets the round trip times; the next check,
// on a new connection, waits for the heartbeat unless the handler asks for
// it at once.
//
// A successful check's ServerDescription has for RoundTripTime the moving
// average of the samples and for MinRoundTripTime their minimum (see roundTrips).
type monitor struct {
	address        string
	conn           connection.Config // the monitor's: no authentication, no socket timeout
	connectTimeout time.Duration
	heartbeat      time.Duration
	minHeartbeat   time.Duration
	streaming      bool // the mode lets the monitor stream
	handler        monitorHandler
	rtt            rttStats

	ctx    context.Context // ends on Close: stops the goroutines and their I/O
	cancel context.CancelFunc
	wake   chan struct{} // a check was asked for; buffered
	done   chan struct{} // closed when the monitor's goroutines have ended

	mu sync.Mutex // protects the following fields
	// closed is set by Close.
	closed bool
	// checking is true while a check is in progress: a request for a check
	// is ignored then, as the specification wants, unless the check was
	// canceled (see RequestCheck).
	checking bool
	// epoch counts the cancellations (CancelCheck, Close): a check that
	// began in another epoch is stale, and its outcome not reported.
	epoch uint64
	// checkEpoch is the epoch the check in progress began in.
	checkEpoch uint64
	// current is the monitoring connection; nil when there is none.
	current *connection.Conn
	// cancelCheck interrupts the check in progress, if any.
	cancelCheck context.CancelFunc
	// rttDone is closed when the RTT goroutine ends; nil until it starts.
	rttDone chan struct{}

	// connID is the monitor's number for its monitoring connection, the
	// one of the heartbeat events: each handshake counts a new one. Only
	// the monitor's goroutine uses it.
	connID int64
}

var _ serverMonitor = (*monitor)(nil)

// startMonitor starts the monitor of the server cfg describes. Its first
// check begins at once.
func startMonitor(cfg monitorConfig) *monitor {
	c := cfg.Conn
	c.Address = cfg.Address
	c.Auth = nil
	c.SocketTimeout = 0
	c.Handshake.LoadBalanced = false
	c.Handshake.SaslSupportedMechs = ""
	c.Handshake.SpeculativeAuthenticate = nil
	minHeartbeat := cfg.MinHeartbeatFrequency
	if minHeartbeat <= 0 {
		minHeartbeat = monitorMinHeartbeat
	}
	heartbeat := cfg.HeartbeatFrequency
	if heartbeat <= 0 {
		heartbeat = DefaultHeartbeatFrequency
	}
	heartbeat = max(heartbeat, minHeartbeat)
	var streaming bool
	switch cfg.Mode {
	case MonitoringStream:
		streaming = true
	case MonitoringPoll:
		streaming = false
	default:
		streaming = !onFaaS(c.Handshake.Env.Getenv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &monitor{
		address:        cfg.Address,
		conn:           c,
		connectTimeout: max(c.ConnectTimeout, 0),
		heartbeat:      heartbeat,
		minHeartbeat:   minHeartbeat,
		streaming:      streaming,
		handler:        cfg.Handler,
		ctx:            ctx,
		cancel:         cancel,
		wake:           make(chan struct{}, 1),
		done:           make(chan struct{}),
	}
	go m.run()
	return m
}

// onFaaS reports whether the environment getenv reads (the process's when
// nil) is a FaaS platform's, by the rules of the handshake's client.env:
// exactly one platform detected, Vercel taking precedence over AWS Lambda.
func onFaaS(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	return handshake.FaaSName(getenv) != ""
}

// RequestCheck asks for a check as soon as the monitor may: at once if the
// last check ended minHeartbeatFrequency ago or more, then otherwise. It is
// ignored while a check is in progress (a streaming monitor is always
// checking: it hears of changes as they happen), and after Close. A check
// that CancelCheck canceled is no longer in progress, though it may not
// have ended yet: its outcome serves no one, so a request then is for the
// next check. It does not block.
func (m *monitor) RequestCheck() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || (m.checking && m.checkEpoch == m.epoch) {
		return
	}
	select {
	case m.wake <- struct{}{}:
	default: // a request is already pending
	}
}

// CancelCheck cancels the check in progress, if any, and closes the
// monitoring connection, as the specification wants when the server is
// marked Unknown after a network error: the check's outcome, stale, is not
// reported (unless its report has begun), and the round trip times are
// forgotten. The next check comes after the heartbeat, or when asked for,
// on a new connection. It does not wait for the check to end.
func (m *monitor) CancelCheck() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.epoch++
	c, cancel := m.current, m.cancelCheck
	m.current = nil
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if c != nil {
		c.Close()
	}
	m.rtt.reset()
}

// Close stops the monitor: the check in progress is interrupted, the
// connections closed, and nothing is reported any more. It does not wait:
// Done is closed once the monitor's goroutines have ended.
func (m *monitor) Close() {
	m.mu.Lock()
	var c *connection.Conn
	if !m.closed {
		m.closed = true
		m.epoch++
		c = m.current
		m.current = nil
	}
	m.mu.Unlock()
	m.cancel()
	if c != nil {
		c.Close()
	}
}

// Done returns a channel closed once the monitor's goroutines have ended,
// after Close.
func (m *monitor) Done() <-chan struct{} { return m.done }

// run is the monitor's goroutine: a check, then the wait for the next one,
// unless the next one is to start at once. It ends once Close was called,
// after the RTT goroutine it may have started.
func (m *monitor) run() {
	defer close(m.done)
	defer func() {
		m.mu.Lock()
		c, rttDone := m.current, m.rttDone
		m.current = nil
		m.mu.Unlock()
		if c != nil {
			c.Close()
		}
		if rttDone != nil {
			<-rttDone // it ends with m.ctx, which ended
		}
	}()
	var st checkState
	for now := true; ; {
		if !now && !m.wait(st.lastEnd) {
			return
		}
		if now && st.pace > 0 && !m.sleep(st.pace) {
			return
		}
		var ok bool
		if now, ok = m.check(&st); !ok {
			return
		}
	}
}

// checkState is what one check leaves for the next.
type checkState struct {
	// topologyVersion is that of the last successful check; nil after a
	// failure, and for a server that does not report one.
	topologyVersion *handshake.TopologyVersion
	// helloOK is true when the server supports the hello command (it said
	// helloOk); the legacy hello is used otherwise.
	helloOK bool
	// lastEnd is when the last check ended.
	lastEnd time.Time
	// pace is how long to wait before the next check of a stream that does
	// not wait (see check); 0 for none.
	pace time.Duration
}

// sleep waits d, and returns false if the monitor is closed first.
func (m *monitor) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-m.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// wait waits for the next check: a heartbeat after last, or a request,
// but not before minHeartbeatFrequency after last. It returns false when the
// monitor is closed.
func (m *monitor) wait(last time.Time) bool {
	t := time.NewTimer(m.heartbeat - time.Since(last))
	defer t.Stop()
	select {
	case <-m.ctx.Done():
		return false
	case <-t.C:
	case <-m.wake:
	}
	if rest := m.minHeartbeat - time.Since(last); rest > 0 {
		return m.sleep(rest)
	}
	return true
}

// checkStep is what a check does.
type checkStep uint8

const (
	stepHandshake checkStep = iota // a new connection: its handshake is the check
	stepPoll                       // a hello on the connection
	stepAwait                      // an awaitable hello, with exhaustAllowed
	stepStreamed                   // the next reply of the server's stream
)

// checkResult is what a step got: the hello's reply, or the error.
type checkResult struct {
	reply bson.Raw
	// sample is the round trip time the step measured, valid when
	// hasSample: the handshake's hello, and a polling hello.
	sample    time.Duration
	hasSample bool
	// err is why the step failed. With a reply, it is why the handshake
	// refused it.
	err error
}

// check runs one check and reports it. It returns whether the next check is
// to start at once, and ok false when the monitor is closed.
func (m *monitor) check(st *checkState) (now, ok bool) {
	st.pace = 0 // run has waited it out
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return false, false
	}
	m.checking = true
	select {
	case <-m.wake: // this check serves the requests made before it
	default:
	}
	epoch := m.epoch
	m.checkEpoch = epoch
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	m.cancelCheck = cancel
	conn := m.current
	m.mu.Unlock()

	step := stepPoll
	switch {
	case conn == nil:
		step = stepHandshake
	case conn.MoreToCome():
		step = stepStreamed
	case m.streaming && st.topologyVersion != nil:
		step = stepAwait
	}
	awaited := step == stepAwait || step == stepStreamed
	if step == stepHandshake {
		m.connID++ // the number of the connection the handshake makes
	}
	connID := m.connID
	m.event(&ServerHeartbeatStarted{Address: m.address, Awaited: awaited, ConnectionID: connID, ServerConnectionID: serverConnectionID(conn, nil)})
	start := time.Now()
	var res checkResult
	if step == stepHandshake {
		res, conn = m.handshake(ctx, epoch)
	} else {
		res = m.hello(ctx, conn, step, st)
	}
	end := time.Now()
	duration := end.Sub(start)
	serverConnID := serverConnectionID(conn, res.reply)

	o := m.outcome(res, end)
	if o.Err != nil {
		if conn != nil {
			m.drop(conn)
			conn = nil
		}
		m.rtt.reset()
		st.topologyVersion = nil
	}
	st.lastEnd = end

	m.mu.Lock()
	m.checking = false
	m.cancelCheck = nil
	closed, stale := m.closed, m.epoch != epoch
	m.mu.Unlock()
	switch {
	case closed:
		return false, false
	case stale:
		// CancelCheck closed the connection; the server was marked
		// Unknown without this check.
		st.topologyVersion = nil
		m.event(&ServerHeartbeatFailed{Address: m.address, Duration: duration, Failure: errCheckCanceled, Awaited: awaited,
			ConnectionID: connID, ServerConnectionID: serverConnID})
		return false, true
	case o.Err != nil:
		m.event(&ServerHeartbeatFailed{Address: m.address, Duration: duration, Failure: o.Err, Awaited: awaited,
			ConnectionID: connID, ServerConnectionID: serverConnID})
		return m.report(o, epoch), true
	}
	m.event(&ServerHeartbeatSucceeded{Address: m.address, Duration: duration, Reply: res.reply, Awaited: awaited,
		ConnectionID: connID, ServerConnectionID: serverConnID})
	// A server that answers an awaitable hello at once, with nothing
	// changed, is not waiting as the protocol wants (up to
	// maxAwaitTimeMS, for a change): its replies are taken no faster than
	// one per minHeartbeatFrequency, rather than as fast as it sends them.
	if awaited && duration < m.minHeartbeat && sameVersion(st.topologyVersion, o.Server.TopologyVersion) {
		st.pace = m.minHeartbeat - duration
	}
	st.topologyVersion, st.helloOK = o.Server.TopologyVersion, o.Server.HelloOK
	m.report(o, epoch)
	// The streaming protocol: the next reply, or the next awaitable
	// hello, at once. A server that cannot stream, or a check that left
	// no connection to stream on, waits for the heartbeat.
	if m.streaming && conn != nil && (st.topologyVersion != nil || conn.MoreToCome()) {
		m.startRTT()
		return true, true
	}
	return false, true
}

// sameVersion reports whether a and b are the same topologyVersion.
func sameVersion(a, b *handshake.TopologyVersion) bool {
	return a != nil && b != nil && *a == *b
}

// outcome makes the outcome of a check that ended at end from what its step
// got.
func (m *monitor) outcome(res checkResult, end time.Time) checkOutcome {
	if res.reply == nil {
		return m.failed(res.err, checkErrorKind(res.err))
	}
	sd := newServerDescription(m.address, res.reply, 0, end)
	if sd.Type == ServerUnknown && sd.Error != nil {
		// ok: 0, or a reply beyond the bounds of what is kept.
		return m.failed(sd.Error, kindCommand)
	}
	if res.err != nil {
		// The handshake refused a reply the description accepts.
		return m.failed(res.err, kindCommand)
	}
	if res.hasSample {
		m.rtt.add(res.sample)
	}
	sd.RoundTripTime, sd.MinRoundTripTime, sd.HasRoundTripTime = m.rtt.get()
	return checkOutcome{Server: sd}
}

func (m *monitor) failed(err error, kind errorKind) checkOutcome {
	err = fmt.Errorf("the check of %s failed: %w", m.address, err)
	return checkOutcome{Server: unknownServer(m.address, err), Err: err, Kind: kind}
}

// checkErrorKind tells a timeout from another network error.
func checkErrorKind(err error) errorKind {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return kindTimeout
	}
	return kindNetwork
}

// handshake makes a new monitoring connection: its handshake is the check.
// It returns the connection, nil when none was made, or when the check was
// canceled meanwhile.
func (m *monitor) handshake(ctx context.Context, epoch uint64) (checkResult, *connection.Conn) {
	var res checkResult
	hooks := connection.Hooks{HelloReply: func(reply bson.Raw, rtt time.Duration) {
		res.reply, res.sample, res.hasSample = reply, rtt, true
	}}
	c, err := connection.Dial(ctx, &m.conn, hooks)
	if err != nil {
		if res.reply != nil && errors.Is(err, handshake.ErrIncompatible) {
			// The server answered: its wire versions make the topology
			// incompatible, not the check failed. The connection is
			// closed; the next check makes another.
			return res, nil
		}
		res.err = err
		return res, nil
	}
	if res.reply == nil {
		c.Close()
		return checkResult{err: errors.New("the handshake succeeded without a reply")}, nil
	}
	m.mu.Lock()
	if m.closed || m.epoch != epoch {
		m.mu.Unlock()
		c.Close()
		return checkResult{err: errCheckCanceled}, nil
	}
	m.current = c
	m.mu.Unlock()
	return res, c
}

// hello runs a step on the monitoring connection c: a polling hello, an
// awaitable hello, or the read of the next streamed reply. The read's
// timeout is connectTimeoutMS, plus the heartbeat when the server may wait
// that long before replying.
func (m *monitor) hello(ctx context.Context, c *connection.Conn, step checkStep, st *checkState) checkResult {
	timeout := m.connectTimeout
	if timeout > 0 && step != stepPoll {
		timeout += m.heartbeat
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var reply bson.Raw
	var err error
	start := time.Now()
	switch step {
	case stepStreamed:
		reply, err = c.ReadMore(ctx)
	case stepAwait:
		var cmd bson.Raw
		if cmd, err = helloCommand(st.helloOK, st.topologyVersion, m.heartbeat); err == nil {
			reply, err = c.RoundTripExhaust(ctx, cmd)
		}
	default:
		var cmd bson.Raw
		if cmd, err = helloCommand(st.helloOK, nil, 0); err == nil {
			reply, err = c.RoundTrip(ctx, cmd)
		}
	}
	d := time.Since(start)
	var ce *wire.CommandError
	if err != nil && (reply == nil || !errors.As(err, &ce)) {
		return checkResult{err: err}
	}
	// An error reply (ok: 0) makes a description of its own error.
	return checkResult{reply: reply, sample: d, hasSample: step == stepPoll}
}

// helloCommand returns the monitor's hello: the hello command when the
// server supports it, the legacy hello otherwise, and an awaitable one when
// tv is not nil.
func helloCommand(helloOK bool, tv *handshake.TopologyVersion, maxAwait time.Duration) (bson.Raw, error) {
	name := "isMaster"
	if helloOK {
		name = "hello"
	}
	cmd := bson.D{{Key: name, Value: int32(1)}, {Key: "helloOk", Value: true}}
	if tv != nil {
		cmd = append(cmd,
			bson.E{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: bson.ObjectID(tv.ProcessID)}, {Key: "counter", Value: tv.Counter}}},
			bson.E{Key: "maxAwaitTimeMS", Value: maxAwait.Milliseconds()})
	}
	return bson.Marshal(append(cmd, bson.E{Key: "$db", Value: "admin"}))
}

// serverConnectionID returns the server's id for the monitoring connection:
// the connectionId of reply, or else the one c's handshake got; 0 when
// neither tells it.
func serverConnectionID(c *connection.Conn, reply bson.Raw) int64 {
	if len(reply) > 0 {
		if id, ok := reply.Lookup("connectionId").AsInt64OK(); ok && id > 0 {
			return id
		}
	}
	if c != nil {
		if d := c.Description(); d != nil && d.HasConnectionID && d.ConnectionID > 0 {
			return d.ConnectionID
		}
	}
	return 0
}

// drop closes the monitoring connection c.
func (m *monitor) drop(c *connection.Conn) {
	m.mu.Lock()
	if m.current == c {
		m.current = nil
	}
	m.mu.Unlock()
	c.Close()
}

// startRTT starts the RTT goroutine, once: the streaming protocol measures
// round trip times on a connection of their own.
func (m *monitor) startRTT() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.rttDone != nil {
		return
	}
	done := make(chan struct{})
	m.rttDone = done
	r := &rttMonitor{conn: m.conn, heartbeat: m.heartbeat, timeout: m.connectTimeout, stats: &m.rtt}
	go func() {
		defer close(done)
		r.run(m.ctx)
	}()
}

// event hands a heartbeat event to the Handler.
func (m *monitor) event(e Event) {
	if m.handler.Event != nil {
		m.handler.Event(e)
	}
}

// report hands the outcome of a check to the Handler, unless the monitor is
// closed (by the Handler itself, maybe, when it received the check's
// heartbeat event), and returns its answer.
func (m *monitor) report(o checkOutcome, epoch uint64) bool {
	if m.handler.Checked == nil || m.isClosed() {
		return false
	}
	o.monitor, o.epoch = m, epoch
	return m.handler.Checked(o)
}

// markStale makes the check under way, if any, stale: its outcome is not
// applied. CancelCheck does it too, and more (it closes the connection);
// markStale only counts, so that it can be called under the topology's lock.
func (m *monitor) markStale() {
	m.mu.Lock()
	m.epoch++
	m.mu.Unlock()
}

// staleSince reports whether the monitor was canceled or closed after the
// check of epoch began.
func (m *monitor) staleSince(epoch uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed || m.epoch != epoch
}

func (m *monitor) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
