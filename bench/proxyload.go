package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// The proxy benchmark's load: client connections speaking the wire
// protocol themselves, without a driver, each a hello then a loop of finds
// by _id, one at a time, timing every round trip. A group of clients runs
// in the benchmark's process or, past what one process may hold open, in a
// worker process of its own (the benchmark's command run again, see
// RunLoadWorker).

// LoadSpec is what one group of clients does.
type LoadSpec struct {
	Addr    string // where the clients connect, host:port
	Clients int
	First   int // the group's first client among all, which spreads the keys
	Docs    int // the documents, _id 0 to Docs-1, that the finds look up
	// The clients start at the time Run is given, find for Warmup
	// unmeasured, then for Duration measured, and stop.
	Warmup    time.Duration
	Duration  time.Duration
	OpTimeout time.Duration // the bound of each round trip
}

// LoadResult is what a group measured: the finds that ended within the
// measured time, the latency of each, and the failures of the whole run
// (warm-up included: connections that failed to establish, round trips
// that failed or timed out, replies that were not the document asked for).
type LoadResult struct {
	Ops    int64
	Failed int64
	Errors []string // the first distinct errors, a few at most
	Hist   []uint64 // the measured round trips' latencies, see histBucket
}

// maxErrors is how many distinct error messages a result keeps.
const maxErrors = 5

func (r *LoadResult) merge(o LoadResult) {
	r.Ops += o.Ops
	r.Failed += o.Failed
	for _, e := range o.Errors {
		r.addError(e)
	}
	if len(r.Hist) < len(o.Hist) {
		r.Hist = append(r.Hist, make([]uint64, len(o.Hist)-len(r.Hist))...)
	}
	for i, n := range o.Hist {
		r.Hist[i] += n
	}
}

func (r *LoadResult) addError(e string) {
	if len(r.Errors) < maxErrors && !slices.Contains(r.Errors, e) {
		r.Errors = append(r.Errors, e)
	}
}

// The latency histogram: values in nanoseconds, exact below 256 ns, then
// 128 buckets per power of two (each under 0.8% wide), up to 2^40 ns.
const (
	histSub = 128
	histMax = int64(1) << 40
)

var histLen = histBucket(histMax) + 1

// histBucket returns the bucket of a latency of v ns.
func histBucket(v int64) int {
	v = min(max(v, 0), histMax)
	if v < 2*histSub {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 8 // v>>e is in [128, 256)
	return histSub*e + int(v>>e)
}

// histValue returns the middle of bucket i, in nanoseconds.
func histValue(i int) time.Duration {
	if i < 2*histSub {
		return time.Duration(i)
	}
	e := i/histSub - 1
	low := int64(i-histSub*e) << e
	return time.Duration(low + int64(1)<<e/2)
}

// histPercentile returns the p-th percentile (0 < p <= 100) of the
// latencies of h, or 0 if it has none.
func histPercentile(h []uint64, p float64) time.Duration {
	var total uint64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := uint64(float64(total)*p/100 + 0.5)
	rank = min(max(rank, 1), total)
	var seen uint64
	for i, n := range h {
		seen += n
		if seen >= rank {
			return histValue(i)
		}
	}
	return histValue(len(h) - 1)
}

// The bodies of the commands the clients send.
var helloBody = mustMarshal(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})

func findBody(key int) bson.Raw {
	return mustMarshal(bson.D{
		{Key: "find", Value: "bench"},
		{Key: "filter", Value: bson.D{{Key: "_id", Value: int32(key)}}},
		{Key: "limit", Value: int32(1)},
		{Key: "singleBatch", Value: true},
		{Key: "$db", Value: "bench"},
	})
}

func mustMarshal(d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// findBodies returns the find of each key, 0 to docs-1, made once and
// shared by every client.
func findBodies(docs int) []bson.Raw {
	out := make([]bson.Raw, max(docs, 1))
	for k := range out {
		out[k] = findBody(k)
	}
	return out
}

// wireConn is one client connection.
type wireConn struct {
	conn  net.Conn
	rd    *bufio.Reader
	buf   []byte
	msg   wire.Msg
	reqID int32
}

// dialWire connects to addr and says hello, within timeout.
func dialWire(addr string, timeout time.Duration) (*wireConn, error) {
	deadline := time.Now().Add(timeout)
	network := "tcp"
	if strings.HasSuffix(addr, ".sock") {
		network = "unix" // mongopool-proxy-unix
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	c := &wireConn{conn: conn, rd: bufio.NewReaderSize(conn, 1024)}
	reply, err := c.roundTrip(helloBody, deadline)
	if err == nil {
		err = wire.CheckReply(reply)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	return c, nil
}

// roundTrip sends a command and returns its reply's body, which stays valid
// until the next round trip.
func (c *wireConn) roundTrip(body bson.Raw, deadline time.Time) (bson.Raw, error) {
	c.reqID++
	c.msg.Body = body
	var err error
	if c.buf, err = wire.AppendMsg(c.buf[:0], c.reqID, 0, &c.msg); err != nil {
		return nil, err
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(c.buf); err != nil {
		return nil, err
	}
	msg, err := wire.ReadMessage(c.rd, 0)
	if err != nil {
		return nil, err
	}
	h, m, err := wire.DecodeReply(msg, 0)
	if err != nil {
		return nil, err
	}
	if h.ResponseTo != c.reqID {
		return nil, fmt.Errorf("reply to request %d, want %d", h.ResponseTo, c.reqID)
	}
	return m.Body, nil
}

func (c *wireConn) close() { c.conn.Close() }

// checkFind returns nil if reply is a find's successful reply whose first
// document has _id key.
func checkFind(reply bson.Raw, key int) error {
	if err := wire.CheckReply(reply); err != nil {
		return err
	}
	v, err := reply.LookupErr("cursor", "firstBatch", "0", "_id")
	if err != nil {
		return fmt.Errorf("find of _id %d: no document in the reply", key)
	}
	if id, ok := v.Int32OK(); !ok || int(id) != key {
		return fmt.Errorf("find of _id %d: got the document of _id %v", key, v)
	}
	return nil
}

// dialConcurrency bounds the connections established at once, which keeps
// the listen backlogs of the server and the proxies from overflowing.
const dialConcurrency = 64

// dialAll establishes n connections to addr, a handshake each; the ones
// that failed are nil, with their errors.
func dialAll(addr string, n int, timeout time.Duration) ([]*wireConn, []error) {
	conns := make([]*wireConn, n)
	errs := make([]error, n)
	sem := make(chan struct{}, dialConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			conns[i], errs[i] = dialWire(addr, timeout)
		}()
	}
	wg.Wait()
	return conns, errs
}

// loadGroup is a group of clients in this process.
type loadGroup struct {
	spec   LoadSpec
	bodies []bson.Raw
	conns  []*wireConn
	dialed LoadResult // the failures of the first connections
}

func newLoadGroup(spec LoadSpec) *loadGroup {
	return &loadGroup{spec: spec, bodies: findBodies(spec.Docs)}
}

// connect establishes the group's connections. One that fails counts as a
// failed operation, and its client tries again as it runs.
func (g *loadGroup) connect() (connected int) {
	var errs []error
	g.conns, errs = dialAll(g.spec.Addr, g.spec.Clients, g.opTimeout())
	for _, err := range errs {
		if err != nil {
			g.dialed.Failed++
			g.dialed.addError("connecting: " + err.Error())
		} else {
			connected++
		}
	}
	return connected
}

func (g *loadGroup) opTimeout() time.Duration {
	if g.spec.OpTimeout > 0 {
		return g.spec.OpTimeout
	}
	return 10 * time.Second
}

// histShards spreads the clients' latencies over several histograms, which
// they add to atomically.
const histShards = 8

// run runs the clients from start: warm-up, measured time, then they stop,
// each after its round trip in progress.
func (g *loadGroup) run(start time.Time) LoadResult {
	measure := start.Add(g.spec.Warmup)
	end := measure.Add(g.spec.Duration)
	timeout := g.opTimeout()
	var shards [histShards][]uint64
	for i := range shards {
		shards[i] = make([]uint64, histLen)
	}
	var ops, failed atomic.Int64
	var mu sync.Mutex
	result := LoadResult{Failed: g.dialed.Failed, Errors: g.dialed.Errors}
	noteError := func(err error) {
		mu.Lock()
		result.addError(err.Error())
		mu.Unlock()
	}
	time.Sleep(time.Until(start))
	var wg sync.WaitGroup
	for i := range g.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := g.spec.First + i
			hist := shards[client%histShards]
			key := (client * 7919) % len(g.bodies)
			var n, nfailed int64
			for {
				c := g.conns[i]
				if c == nil {
					var err error
					if c, err = dialWire(g.spec.Addr, timeout); err != nil {
						nfailed++
						noteError(fmt.Errorf("reconnecting: %w", err))
						if time.Now().Add(50 * time.Millisecond).After(end) {
							break
						}
						time.Sleep(50 * time.Millisecond)
						continue
					}
					g.conns[i] = c
				}
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				reply, err := c.roundTrip(g.bodies[key], t0.Add(timeout))
				if err == nil {
					err = checkFind(reply, key)
				}
				t1 := time.Now()
				if err != nil {
					nfailed++
					noteError(err)
					c.close()
					g.conns[i] = nil
					continue
				}
				if !t1.Before(measure) && t1.Before(end) {
					n++
					atomic.AddUint64(&hist[histBucket(int64(t1.Sub(t0)))], 1)
				}
				if key++; key == len(g.bodies) {
					key = 0
				}
			}
			ops.Add(n)
			failed.Add(nfailed)
		}()
	}
	wg.Wait()
	result.Ops = ops.Load()
	result.Failed += failed.Load()
	result.Hist = make([]uint64, histLen)
	for _, h := range shards {
		for i, n := range h {
			result.Hist[i] += n
		}
	}
	return result
}

func (g *loadGroup) close() {
	for _, c := range g.conns {
		if c != nil {
			c.close()
		}
	}
	g.conns = nil
}

// loader is a group of clients, here or in a worker process.
type loader interface {
	// connect establishes the clients' connections and returns how many
	// succeeded.
	connect() (int, error)
	// run runs the load from start (wall clock) and returns its figures.
	run(start time.Time) (LoadResult, error)
	// pid is the worker process's, or 0 for a group in this process.
	pid() int
	close() error
}

type localLoader struct{ g *loadGroup }

func (l localLoader) connect() (int, error)                   { return l.g.connect(), nil }
func (l localLoader) run(start time.Time) (LoadResult, error) { return l.g.run(start), nil }
func (l localLoader) pid() int                                { return 0 }
func (l localLoader) close() error                            { l.g.close(); return nil }

// The messages between the benchmark and a worker, JSON lines: the spec,
// answered by workerConnected once the clients are connected; then
// workerStart, answered by the LoadResult. Closing the worker's standard
// input closes its connections and ends it.
type workerConnected struct {
	Connected int
	Err       string
}

type workerStart struct{ Start int64 } // Unix nanoseconds

// RunLoadWorker runs a group of clients for a benchmark process that talks
// to it through in and out (a worker's standard input and output), and
// returns the exit code. The proxy benchmark's command runs it with the
// hidden flag -worker.
func RunLoadWorker(in io.Reader, out io.Writer) int {
	dec := json.NewDecoder(in)
	enc := json.NewEncoder(out)
	var spec LoadSpec
	if err := dec.Decode(&spec); err != nil {
		enc.Encode(workerConnected{Err: err.Error()})
		return 1
	}
	g := newLoadGroup(spec)
	defer g.close()
	if err := enc.Encode(workerConnected{Connected: g.connect()}); err != nil {
		return 1
	}
	var st workerStart
	if err := dec.Decode(&st); err != nil {
		return 1
	}
	if err := enc.Encode(g.run(time.Unix(0, st.Start))); err != nil {
		return 1
	}
	io.Copy(io.Discard, in) // until the benchmark closes the pipe
	return 0
}

// workerLoader is a group of clients in a worker process.
type workerLoader struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	enc    *json.Encoder
	dec    *json.Decoder
	spec   LoadSpec
	stderr lockedBuffer
}

// lockedBuffer keeps what a worker writes to its standard error, for the
// errors that tell of its end.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) < 4096 {
		b.buf = append(b.buf, p[:min(len(p), 4096-len(b.buf))]...)
	}
	return len(p), nil
}

// failed returns err, with what the worker wrote to its standard error.
func (w *workerLoader) failed(err error) error {
	w.stderr.mu.Lock()
	defer w.stderr.mu.Unlock()
	if len(w.stderr.buf) == 0 {
		return fmt.Errorf("a load worker: %w", err)
	}
	return fmt.Errorf("a load worker: %w; its standard error: %s", err, w.stderr.buf)
}

func startWorker(cmd *exec.Cmd, spec LoadSpec) (*workerLoader, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w := &workerLoader{cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin), dec: json.NewDecoder(stdout), spec: spec}
	cmd.Stderr = &w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a load worker: %w", err)
	}
	if err := w.enc.Encode(spec); err != nil {
		w.close()
		return nil, w.failed(err)
	}
	return w, nil
}

func (w *workerLoader) connect() (int, error) {
	var c workerConnected
	if err := w.dec.Decode(&c); err != nil {
		return 0, w.failed(err)
	}
	if c.Err != "" {
		return 0, fmt.Errorf("a load worker: %s", c.Err)
	}
	return c.Connected, nil
}

func (w *workerLoader) run(start time.Time) (LoadResult, error) {
	var r LoadResult
	if err := w.enc.Encode(workerStart{start.UnixNano()}); err != nil {
		return r, w.failed(err)
	}
	if err := w.dec.Decode(&r); err != nil {
		return r, w.failed(err)
	}
	return r, nil
}

func (w *workerLoader) pid() int { return w.cmd.Process.Pid }

func (w *workerLoader) close() error {
	w.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		w.cmd.Process.Kill()
		return errors.Join(errors.New("a load worker did not end within 10s of its input's end: killed"), <-done)
	}
}
