package pool_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// logRecord is one log record as the pool wrote it.
type logRecord struct {
	Level   slog.Level
	Message string
	Attrs   map[string]slog.Value
	Dups    []string // keys that appeared more than once
}

func (r logRecord) String() string {
	keys := slices.Sorted(maps.Keys(r.Attrs))
	s := fmt.Sprintf("%v %q", r.Level, r.Message)
	for _, k := range keys {
		s += fmt.Sprintf(" %s=%v", k, r.Attrs[k])
	}
	return s
}

// logSink is where every handler derived from one logHandler records.
type logSink struct {
	mu      sync.Mutex
	pools   []*pool.Pool // whose events records waits for: see watch
	records []logRecord
	handles atomic.Int64 // calls to Handle
	enabled atomic.Int64 // calls to Enabled
}

// logHandler is a slog.Handler that captures records for the tests.
type logHandler struct {
	sink   *logSink
	level  slog.Level
	attrs  []slog.Attr
	prefix string // group prefix of later attributes
}

func newLogHandler(level slog.Level) *logHandler {
	return &logHandler{sink: &logSink{}, level: level}
}

func (h *logHandler) Enabled(_ context.Context, l slog.Level) bool {
	h.sink.enabled.Add(1)
	return l >= h.level
}

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	h.sink.handles.Add(1)
	rec := logRecord{Level: r.Level, Message: r.Message, Attrs: map[string]slog.Value{}}
	add := func(a slog.Attr) {
		if _, dup := rec.Attrs[a.Key]; dup {
			rec.Dups = append(rec.Dups, a.Key)
		}
		rec.Attrs[a.Key] = a.Value.Resolve()
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(func(a slog.Attr) bool {
		a.Key = h.prefix + a.Key
		add(a)
		return true
	})
	h.sink.mu.Lock()
	h.sink.records = append(h.sink.records, rec)
	h.sink.mu.Unlock()
	return nil
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = slices.Clone(h.attrs)
	for _, a := range as {
		a.Key = h.prefix + a.Key
		h2.attrs = append(h2.attrs, a)
	}
	return &h2
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	h2 := *h
	h2.prefix = h.prefix + name + "."
	return &h2
}

func (h *logHandler) records() []logRecord {
	h.sink.mu.Lock()
	pools := slices.Clone(h.sink.pools)
	h.sink.mu.Unlock()
	for _, p := range pools {
		if err := flush(p); err != nil {
			panic("the pool's log records were not written within 10s: " + err.Error())
		}
	}
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	return slices.Clone(h.sink.records)
}

// watch makes records wait for p's records: they are written on the
// goroutine that delivers its events, a moment after what the test did.
func (h *logHandler) watch(p *pool.Pool) *pool.Pool {
	h.sink.mu.Lock()
	h.sink.pools = append(h.sink.pools, p)
	h.sink.mu.Unlock()
	return p
}

func (h *logHandler) messages() []string {
	var out []string
	for _, r := range h.records() {
		out = append(out, r.Message)
	}
	return out
}

// The specification's eleven log messages and the keys each must have besides
// component (and serverHost/serverPort, the common fields, listed in each row
// for completeness). The reason-dependent "error" key, the options of the pool
// created message and the serviceId of the cleared message are added per
// record by checkLogRecord.
var logSpecTable = []struct {
	message string
	keys    []string
}{
	{"Connection pool created", []string{"serverHost", "serverPort"}},
	{"Connection pool ready", []string{"serverHost", "serverPort"}},
	{"Connection pool cleared", []string{"serverHost", "serverPort"}},
	{"Connection pool closed", []string{"serverHost", "serverPort"}},
	{"Connection created", []string{"serverHost", "serverPort", "driverConnectionId"}},
	{"Connection ready", []string{"serverHost", "serverPort", "driverConnectionId", "durationMS"}},
	{"Connection closed", []string{"serverHost", "serverPort", "driverConnectionId", "reason"}},
	{"Connection checkout started", []string{"serverHost", "serverPort"}},
	{"Connection checkout failed", []string{"serverHost", "serverPort", "reason", "durationMS"}},
	{"Connection checked out", []string{"serverHost", "serverPort", "driverConnectionId", "durationMS"}},
	{"Connection checked in", []string{"serverHost", "serverPort", "driverConnectionId"}},
}

// The specification's reason strings.
const (
	logReasonStale       = "Connection became stale because the pool was cleared"
	logReasonIdle        = "Connection has been available but unused for longer than the configured max idle time"
	logReasonError       = "An error occurred while using the connection"
	logReasonPoolClosed  = "Connection pool was closed"
	logReasonTimeout     = "Wait queue timeout elapsed without a connection becoming available"
	logReasonConnError   = "An error occurred while trying to establish a new connection"
	logMsgClosed         = "Connection closed"
	logMsgCheckoutFailed = "Connection checkout failed"
	logMsgPoolCreated    = "Connection pool created"
	logMsgPoolCleared    = "Connection pool cleared"
)

// logReasons lists the reasons each message may carry; true marks the
// reasons whose record must carry the "error" key.
var logReasons = map[string]map[string]bool{
	logMsgClosed: {
		logReasonStale:      false,
		logReasonIdle:       false,
		logReasonError:      true,
		logReasonPoolClosed: false,
	},
	logMsgCheckoutFailed: {
		logReasonTimeout:    false,
		logReasonConnError:  true,
		logReasonPoolClosed: false,
	},
}

// logExpect is what a pool's records must show beyond the table.
type logExpect struct {
	host      string
	port      int              // 0: no serverPort key
	options   map[string]int64 // the pool created message's options
	serviceID string           // the cleared message's serviceId; "" for none
}

// checkLogRecord compares one record with the specification's table.
func checkLogRecord(t *testing.T, r logRecord, x logExpect) {
	t.Helper()
	if r.Level != slog.LevelDebug {
		t.Errorf("%v: level %v, want Debug", r, r.Level)
	}
	if c, ok := r.Attrs["component"]; !ok || c.Kind() != slog.KindString || c.String() != "connection" {
		t.Errorf("%v: component = %v, want \"connection\"", r, c)
	}
	if len(r.Dups) > 0 {
		t.Errorf("%v: duplicate keys %v", r, r.Dups)
	}
	i := slices.IndexFunc(logSpecTable, func(s struct {
		message string
		keys    []string
	}) bool {
		return s.message == r.Message
	})
	if i < 0 {
		t.Errorf("%v: message is none of the specification's", r)
		return
	}
	want := map[string]bool{"component": true}
	for _, k := range logSpecTable[i].keys {
		want[k] = true
	}
	if x.port == 0 {
		delete(want, "serverPort")
	}
	switch r.Message {
	case logMsgPoolCreated:
		for k := range x.options {
			want[k] = true
		}
	case logMsgPoolCleared:
		if x.serviceID != "" {
			want["serviceId"] = true
		}
	case logMsgClosed, logMsgCheckoutFailed:
		reason := r.Attrs["reason"]
		withErr, ok := logReasons[r.Message][reason.String()]
		if reason.Kind() != slog.KindString || !ok {
			t.Errorf("%v: reason %q is none of the specification's for %q", r, reason, r.Message)
		}
		if withErr {
			want["error"] = true
		}
	}
	for k := range want {
		if _, ok := r.Attrs[k]; !ok {
			t.Errorf("%v: missing key %q", r, k)
		}
	}
	for k := range r.Attrs {
		if !want[k] {
			t.Errorf("%v: unexpected key %q", r, k)
		}
	}

	for k, v := range r.Attrs {
		switch k {
		case "serverHost":
			if v.Kind() != slog.KindString || v.String() != x.host {
				t.Errorf("%v: serverHost = %v (%v), want string %q", r, v, v.Kind(), x.host)
			}
		case "serverPort":
			if v.Kind() != slog.KindInt64 || v.Int64() != int64(x.port) {
				t.Errorf("%v: serverPort = %v (%v), want int %d", r, v, v.Kind(), x.port)
			}
		case "driverConnectionId":
			if v.Kind() != slog.KindInt64 || v.Int64() <= 0 {
				t.Errorf("%v: driverConnectionId = %v (%v), want a positive int64", r, v, v.Kind())
			}
		case "durationMS":
			if v.Kind() != slog.KindFloat64 || v.Float64() < 0 {
				t.Errorf("%v: durationMS = %v (%v), want a non-negative float64", r, v, v.Kind())
			}
		case "error":
			if err, ok := v.Any().(error); !ok || err == nil {
				t.Errorf("%v: error = %v (%T), want an error", r, v, v.Any())
			}
		case "serviceId":
			if v.Kind() != slog.KindString || v.String() != x.serviceID {
				t.Errorf("%v: serviceId = %v, want %q", r, v, x.serviceID)
			}
		case "maxIdleTimeMS", "minPoolSize", "maxPoolSize", "maxConnecting", "waitQueueTimeoutMS":
			if v.Kind() != slog.KindInt64 || v.Int64() != x.options[k] {
				t.Errorf("%v: %s = %v (%v), want int %d", r, k, v, v.Kind(), x.options[k])
			}
		}
	}
}

// logLabel names a record by its message and, if any, its reason.
func logLabel(r logRecord) string {
	if reason, ok := r.Attrs["reason"]; ok {
		return r.Message + ": " + reason.String()
	}
	return r.Message
}

var errLogTest = errors.New("log test: network error")

// logScenario drives a pool through one story.
type logScenario struct {
	name      string
	connector func() *fakeConnector
	opts      []pool.Option
	options   map[string]int64 // the spec options that opts set
	lb        bool
	serviceID string // the cleared message's serviceId in load-balanced mode
	// clearOnEstablishError clears the pool when an establishment fails, as
	// the topology layer does (SDAM).
	clearOnEstablishError bool
	run                   func(t *testing.T, p *pool.Pool, f *fakeConnector)
	// wantOrder, if set, is the exact sequence of messages.
	wantOrder []string
	// want lists records (logLabel) that must appear.
	want []string
}

var logScenarios = []logScenario{
	{
		// The specification's first logging test: a command, then close.
		name: "command then close",
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			for range 2 {
				c := mustCheckOut(t, p)
				must(t, p.CheckIn(c))
			}
			closePool(t, p)
		},
		wantOrder: []string{
			"Connection pool created",
			"Connection pool ready",
			"Connection checkout started",
			"Connection created",
			"Connection ready",
			"Connection checked out",
			"Connection checked in",
			"Connection checkout started",
			"Connection checked out",
			"Connection checked in",
			"Connection closed",
			"Connection pool closed",
		},
		want: []string{"Connection closed: " + logReasonPoolClosed},
	},
	{
		// The specification's second logging test: the establishment fails
		// and the topology layer clears the pool.
		name:                  "establishment fails, pool cleared",
		connector:             func() *fakeConnector { return &fakeConnector{FailBeforeHello: errLogTest} },
		clearOnEstablishError: true,
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			if _, err := checkOut(t, context.Background(), p); err == nil {
				t.Fatal("check-out succeeded with a failing connector")
			}
		},
		wantOrder: []string{
			"Connection pool created",
			"Connection pool ready",
			"Connection checkout started",
			"Connection created",
			"Connection pool cleared",
			"Connection closed",
			"Connection checkout failed",
			"Connection pool closed",
		},
		want: []string{
			"Connection closed: " + logReasonError,
			"Connection checkout failed: " + logReasonConnError,
		},
	},
	{
		name: "options set by the user",
		opts: []pool.Option{
			pool.WithMaxIdleTime(90 * time.Second), pool.WithMinPoolSize(1), pool.WithMaxPoolSize(7),
			pool.WithMaxConnecting(3), pool.WithWaitQueueTimeout(2500 * time.Millisecond),
		},
		options: map[string]int64{
			"maxIdleTimeMS": 90000, "minPoolSize": 1, "maxPoolSize": 7, "maxConnecting": 3, "waitQueueTimeoutMS": 2500,
		},
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			must(t, p.CheckIn(c))
			synctest.Wait() // minPoolSize
		},
	},
	{
		name: "stale: checked in after a clear",
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			must(t, p.Clear(pool.ClearOptions{Cause: errLogTest}))
			must(t, p.CheckIn(c))
		},
		want: []string{"Connection pool cleared", "Connection closed: " + logReasonStale},
	},
	{
		name: "stale: idle connection closed by the maintenance after a clear",
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			must(t, p.CheckIn(c))
			must(t, p.Clear(pool.ClearOptions{}))
			synctest.Wait()
		},
		want: []string{"Connection pool cleared", "Connection closed: " + logReasonStale},
	},
	{
		name:    "idle: found by a check-out",
		opts:    []pool.Option{pool.WithMaxIdleTime(10 * time.Millisecond), pool.WithMaintenanceInterval(-1)},
		options: map[string]int64{"maxIdleTimeMS": 10},
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			must(t, p.CheckIn(c))
			time.Sleep(20 * time.Millisecond)
			c = mustCheckOut(t, p)
			must(t, p.CheckIn(c))
		},
		want: []string{"Connection closed: " + logReasonIdle},
	},
	{
		name:    "idle: found by the maintenance",
		opts:    []pool.Option{pool.WithMaxIdleTime(10 * time.Millisecond)},
		options: map[string]int64{"maxIdleTimeMS": 10},
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			must(t, p.CheckIn(c))
			time.Sleep(1500 * time.Millisecond)
			synctest.Wait()
		},
		want: []string{"Connection closed: " + logReasonIdle},
	},
	{
		name: "error: link failed while checked out",
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			c.Link().(*fakeLink).fail(errLogTest)
			must(t, p.CheckIn(c))
		},
		want: []string{"Connection closed: " + logReasonError},
	},
	{
		name: "error: idle link failed, found by a check-out",
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			must(t, p.CheckIn(c))
			c.Link().(*fakeLink).fail(errLogTest)
			c = mustCheckOut(t, p)
			must(t, p.CheckIn(c))
		},
		want: []string{"Connection closed: " + logReasonError},
	},
	{
		name:      "error: establishment failed after the hello",
		connector: func() *fakeConnector { return &fakeConnector{FailAfterHello: errLogTest} },
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			if _, err := checkOut(t, context.Background(), p); err == nil {
				t.Fatal("check-out succeeded with a failing connector")
			}
		},
		want: []string{
			"Connection closed: " + logReasonError,
			"Connection checkout failed: " + logReasonConnError,
		},
	},
	{
		name: "poolClosed: idle connection closed by Close, check-out after Close",
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			must(t, p.CheckIn(c))
			closePool(t, p)
			if _, err := checkOut(t, context.Background(), p); !errors.Is(err, pool.ErrPoolClosed) {
				t.Fatalf("check-out after Close: %v, want ErrPoolClosed", err)
			}
		},
		want: []string{
			"Connection closed: " + logReasonPoolClosed,
			"Connection checkout failed: " + logReasonPoolClosed,
			"Connection pool closed",
		},
	},
	{
		name: "poolClosed: checked-out connection checked in after Close",
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			closePool(t, p)
			must(t, p.CheckIn(c))
		},
		want: []string{"Connection closed: " + logReasonPoolClosed},
	},
	{
		name:    "timeout: waitQueueTimeoutMS with maxPoolSize 1",
		opts:    []pool.Option{pool.WithMaxPoolSize(1), pool.WithWaitQueueTimeout(10 * time.Millisecond)},
		options: map[string]int64{"maxPoolSize": 1, "waitQueueTimeoutMS": 10},
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			if _, err := checkOut(t, context.Background(), p); !errors.Is(err, pool.ErrWaitQueueTimeout) {
				t.Fatalf("second check-out: %v, want ErrWaitQueueTimeout", err)
			}
			must(t, p.CheckIn(c))
		},
		want: []string{"Connection checkout failed: " + logReasonTimeout},
	},
	{
		name:    "timeout: context deadline",
		opts:    []pool.Option{pool.WithMaxPoolSize(1)},
		options: map[string]int64{"maxPoolSize": 1},
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			if _, err := checkOut(t, ctx, p); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("second check-out: %v, want DeadlineExceeded", err)
			}
			must(t, p.CheckIn(c))
		},
		want: []string{"Connection checkout failed: " + logReasonTimeout},
	},
	{
		name: "connectionError: check-out from a paused pool",
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			if _, err := checkOut(t, context.Background(), p); !errors.Is(err, pool.ErrPoolCleared) {
				t.Fatalf("check-out from a paused pool: %v, want ErrPoolCleared", err)
			}
		},
		want: []string{"Connection checkout failed: " + logReasonConnError},
	},
	{
		name: "load-balanced: clear for a service",
		connector: func() *fakeConnector {
			return &fakeConnector{ServiceID: func(int64) pool.ServiceID { return logServiceID }}
		},
		opts:      []pool.Option{pool.WithLoadBalanced(true)},
		lb:        true,
		serviceID: "651f2a0001020304050607ab",
		run: func(t *testing.T, p *pool.Pool, f *fakeConnector) {
			mustReady(t, p)
			c := mustCheckOut(t, p)
			must(t, p.Clear(pool.ClearOptions{ServiceID: logServiceID}))
			must(t, p.CheckIn(c))
		},
		want: []string{"Connection pool cleared", "Connection closed: " + logReasonStale},
	},
}

var logServiceID = pool.ServiceID{0x65, 0x1f, 0x2a, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0xab}

// TestLogMessagesMatchSpecification drives pools through stories that produce
// every message and every reason of the specification and compares every
// record with the specification's tables.
func TestLogMessagesMatchSpecification(t *testing.T) {
	const address = "localhost:27018"
	seen := map[string]bool{}
	for _, sc := range logScenarios {
		t.Run(sc.name, func(t *testing.T) {
			var records []logRecord
			synctest.Test(t, func(t *testing.T) {
				f := &fakeConnector{}
				if sc.connector != nil {
					f = sc.connector()
				}
				h := newLogHandler(slog.LevelDebug)
				var p *pool.Pool
				opts := append([]pool.Option{pool.WithLogger(slog.New(h))}, sc.opts...)
				if sc.clearOnEstablishError {
					opts = append(opts, pool.WithEstablishErrorHandler(func(err error) {
						p.Clear(pool.ClearOptions{Cause: err})
					}))
				}
				var err error
				p, err = pool.New(address, f, opts...)
				must(t, err)
				h.watch(p)
				defer p.Close()
				sc.run(t, p, f)
				closePool(t, p)
				records = h.records()
			})

			x := logExpect{host: "localhost", port: 27018, options: sc.options}
			if sc.lb {
				x.serviceID = sc.serviceID
			}
			if x.options == nil {
				x.options = map[string]int64{}
			}
			labels := map[string]bool{}
			for _, r := range records {
				checkLogRecord(t, r, x)
				labels[logLabel(r)] = true
				seen[logLabel(r)] = true
			}
			for _, w := range sc.want {
				if !labels[w] {
					t.Errorf("no record %q; got:\n%s", w, logDump(records))
				}
			}
			if sc.wantOrder != nil {
				var got []string
				for _, r := range records {
					got = append(got, r.Message)
				}
				if !slices.Equal(got, sc.wantOrder) {
					t.Errorf("messages:\n  got  %q\n  want %q", got, sc.wantOrder)
				}
			}
		})
	}

	// Every message and every reason was produced and checked.
	if t.Failed() {
		return
	}
	for _, s := range logSpecTable {
		if s.message == logMsgClosed || s.message == logMsgCheckoutFailed {
			for reason := range logReasons[s.message] {
				if !seen[s.message+": "+reason] {
					t.Errorf("no scenario produced %q with reason %q", s.message, reason)
				}
			}
			continue
		}
		if !seen[s.message] {
			t.Errorf("no scenario produced %q", s.message)
		}
	}
}

func logDump(rs []logRecord) string {
	s := ""
	for _, r := range rs {
		s += "  " + r.String() + "\n"
	}
	return s
}

// logCreated returns the pool created record of a new pool for address with
// opts, closing the pool at once.
func logCreated(t *testing.T, address string, opts ...pool.Option) (logRecord, []logRecord) {
	t.Helper()
	h := newLogHandler(slog.LevelDebug)
	p, err := pool.New(address, &fakeConnector{}, append([]pool.Option{pool.WithLogger(slog.New(h))}, opts...)...)
	must(t, err)
	h.watch(p)
	closePool(t, p)
	rs := h.records()
	if len(rs) == 0 || rs[0].Message != logMsgPoolCreated {
		t.Fatalf("first record is not %q:\n%s", logMsgPoolCreated, logDump(rs))
	}
	return rs[0], rs
}

// TestLogPoolCreatedOptions: the pool created message has exactly the options
// the user set, in the specification's units.
func TestLogPoolCreatedOptions(t *testing.T) {
	cases := []struct {
		name string
		opts []pool.Option
		want map[string]int64
	}{
		{"none", nil, map[string]int64{}},
		{"all", []pool.Option{
			pool.WithMaxIdleTime(1500 * time.Millisecond), pool.WithMinPoolSize(2), pool.WithMaxPoolSize(20),
			pool.WithMaxConnecting(4), pool.WithWaitQueueTimeout(3 * time.Second),
		}, map[string]int64{"maxIdleTimeMS": 1500, "minPoolSize": 2, "maxPoolSize": 20, "maxConnecting": 4, "waitQueueTimeoutMS": 3000}},
		{"maxPoolSize only", []pool.Option{pool.WithMaxPoolSize(5)}, map[string]int64{"maxPoolSize": 5}},
		{"defaults given explicitly", []pool.Option{pool.WithMaxPoolSize(100), pool.WithMinPoolSize(0), pool.WithMaxConnecting(2)},
			map[string]int64{"maxPoolSize": 100, "minPoolSize": 0, "maxConnecting": 2}},
		{"zero times", []pool.Option{pool.WithMaxIdleTime(0), pool.WithWaitQueueTimeout(0)},
			map[string]int64{"maxIdleTimeMS": 0, "waitQueueTimeoutMS": 0}},
		{"unlimited pool", []pool.Option{pool.WithMaxPoolSize(0), pool.WithMinPoolSize(3)},
			map[string]int64{"maxPoolSize": 0, "minPoolSize": 3}},
		{"options that are not logged", []pool.Option{
			pool.WithTimeout(time.Second), pool.WithConnectTimeout(time.Second), pool.WithMaintenanceInterval(-1),
			pool.WithLoadBalanced(false),
		}, map[string]int64{}},
		{"last value wins", []pool.Option{pool.WithMaxConnecting(3), pool.WithMaxConnecting(5)}, map[string]int64{"maxConnecting": 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, all := logCreated(t, "localhost:27017", tc.opts...)
				for _, rec := range all {
					checkLogRecord(t, rec, logExpect{host: "localhost", port: 27017, options: tc.want})
				}
				for _, k := range []string{"maxIdleTimeMS", "minPoolSize", "maxPoolSize", "maxConnecting", "waitQueueTimeoutMS", "waitQueueSize", "waitQueueMultiple"} {
					v, got := r.Attrs[k]
					w, want := tc.want[k]
					switch {
					case got != want:
						t.Errorf("%s present = %v, want %v (record %v)", k, got, want, r)
					case got && (v.Kind() != slog.KindInt64 || v.Int64() != w):
						t.Errorf("%s = %v, want %d", k, v, w)
					}
				}
			})
		})
	}
}

// TestLogPoolClearedServiceID: the cleared message names the service in
// load-balanced mode only.
func TestLogPoolClearedServiceID(t *testing.T) {
	t.Run("load-balanced", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newLogHandler(slog.LevelDebug)
			f := &fakeConnector{ServiceID: func(int64) pool.ServiceID { return logServiceID }}
			p, err := pool.New("localhost:27017", f, pool.WithLogger(slog.New(h)), pool.WithLoadBalanced(true))
			must(t, err)
			h.watch(p)
			defer p.Close()
			mustReady(t, p)
			c := mustCheckOut(t, p)
			must(t, p.CheckIn(c))
			must(t, p.Clear(pool.ClearOptions{ServiceID: logServiceID}))
			// A service the pool has no connection to is cleared as well.
			other := pool.ServiceID{11: 1}
			must(t, p.Clear(pool.ClearOptions{ServiceID: other}))
			closePool(t, p)

			var ids []string
			for _, r := range h.records() {
				if r.Message != logMsgPoolCleared {
					continue
				}
				v, ok := r.Attrs["serviceId"]
				if !ok {
					t.Errorf("%v: no serviceId in load-balanced mode", r)
					continue
				}
				s := v.String()
				if b, err := hex.DecodeString(s); v.Kind() != slog.KindString || len(s) != 24 || err != nil || len(b) != 12 {
					t.Errorf("%v: serviceId %q is not 24 hex digits", r, s)
				}
				ids = append(ids, s)
			}
			if want := []string{"651f2a0001020304050607ab", "000000000000000000000001"}; !slices.Equal(ids, want) {
				t.Errorf("cleared serviceIds = %q, want %q", ids, want)
			}
		})
	})
	t.Run("not load-balanced", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newLogHandler(slog.LevelDebug)
			p, err := pool.New("localhost:27017", &fakeConnector{}, pool.WithLogger(slog.New(h)))
			must(t, err)
			h.watch(p)
			defer p.Close()
			mustReady(t, p)
			must(t, p.Clear(pool.ClearOptions{Cause: errLogTest, InterruptInUse: true}))
			closePool(t, p)
			n := 0
			for _, r := range h.records() {
				checkLogRecord(t, r, logExpect{host: "localhost", port: 27017, options: map[string]int64{}})
				if r.Message == logMsgPoolCleared {
					n++
					if _, ok := r.Attrs["serviceId"]; ok {
						t.Errorf("%v: serviceId outside load-balanced mode", r)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d cleared messages, want 1", n)
			}
		})
	})
}

// TestLogServerHostAndPort: serverHost and serverPort from the pool's
// address; no serverPort for a Unix domain socket.
func TestLogServerHostAndPort(t *testing.T) {
	cases := []struct {
		address string
		host    string
		port    int // 0: no serverPort key
	}{
		{"localhost:27018", "localhost", 27018},
		{"localhost", "localhost", 27017},
		{"[::1]:27017", "::1", 27017},
		{"[::1]:27019", "::1", 27019},
		{"[::1]", "::1", 27017},
		{"192.0.2.7:30000", "192.0.2.7", 30000},
		{"db.example.com", "db.example.com", 27017},
		{"/tmp/mongodb-27017.sock", "/tmp/mongodb-27017.sock", 0},
	}
	for _, tc := range cases {
		t.Run(tc.address, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newLogHandler(slog.LevelDebug)
				p, err := pool.New(tc.address, &fakeConnector{}, pool.WithLogger(slog.New(h)))
				must(t, err)
				h.watch(p)
				defer p.Close()
				mustReady(t, p)
				c := mustCheckOut(t, p)
				must(t, p.CheckIn(c))
				closePool(t, p)
				rs := h.records()
				if len(rs) == 0 {
					t.Fatal("no records")
				}
				for _, r := range rs {
					checkLogRecord(t, r, logExpect{host: tc.host, port: tc.port, options: map[string]int64{}})
					if _, ok := r.Attrs["serverPort"]; tc.port == 0 && ok {
						t.Errorf("%v: serverPort for a Unix domain socket", r)
					}
				}
			})
		})
	}
}

// TestLogDisabledForDebug: a logger whose handler is not enabled for Debug
// gets nothing.
func TestLogDisabledForDebug(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLogHandler(slog.LevelInfo)
		f := &fakeConnector{}
		p, err := pool.New("localhost:27017", f, pool.WithLogger(slog.New(h)),
			pool.WithMaxPoolSize(1), pool.WithWaitQueueTimeout(time.Millisecond), pool.WithMaxIdleTime(time.Millisecond))
		must(t, err)
		h.watch(p)
		defer p.Close()
		checkOut(t, context.Background(), p) // paused: fails
		mustReady(t, p)
		c := mustCheckOut(t, p)
		checkOut(t, context.Background(), p) // times out
		c.Link().(*fakeLink).fail(errLogTest)
		must(t, p.CheckIn(c))
		c = mustCheckOut(t, p)
		must(t, p.CheckIn(c))
		time.Sleep(10 * time.Millisecond)
		must(t, p.Clear(pool.ClearOptions{}))
		synctest.Wait()
		f.set(func(f *fakeConnector) { f.FailBeforeHello = errLogTest })
		mustReady(t, p)
		checkOut(t, context.Background(), p) // establishment fails
		closePool(t, p)
		checkOut(t, context.Background(), p) // closed

		if n := h.sink.handles.Load(); n != 0 {
			t.Errorf("Handle called %d times", n)
		}
		if rs := h.records(); len(rs) != 0 {
			t.Errorf("records written:\n%s", logDump(rs))
		}
		if h.sink.enabled.Load() == 0 {
			t.Errorf("Enabled never asked: the test did not exercise the logger")
		}
	})
}
