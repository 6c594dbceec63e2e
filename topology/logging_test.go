package topology

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
)

// logRecord is one log logRecord as a test sees it: its level, its message and
// its attributes by key.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

// has reports whether the logRecord has the attribute key.
func (r logRecord) has(key string) bool { _, ok := r.attrs[key]; return ok }

func (r logRecord) str(key string) string { return r.attrs[key].String() }

// logRecorder is a slog.Handler that keeps the records at or above min.
type logRecorder struct {
	min slog.Level
	// onRecord, if not nil, sees each record as it is handled.
	onRecord func(logRecord)
	// topo, if set, is flushed by take: its records are written on its
	// delivery goroutine.
	topo *Topology

	mu      sync.Mutex
	records []logRecord
	handled int // calls of Handle, records kept or not
}

func newLogRecorder(min slog.Level) (*logRecorder, *slog.Logger) {
	r := &logRecorder{min: min}
	return r, slog.New(r)
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.min }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler           { return r }
func (r *logRecorder) WithGroup(string) slog.Handler                { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	x := logRecord{level: rec.Level, msg: rec.Message, attrs: map[string]slog.Value{}}
	rec.Attrs(func(a slog.Attr) bool { x.attrs[a.Key] = a.Value.Resolve(); return true })
	if r.onRecord != nil {
		r.onRecord(x)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handled++
	r.records = append(r.records, x)
	return nil
}

func (r *logRecorder) take() []logRecord {
	if r.topo != nil {
		// The records are written by the topology's delivery goroutine.
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.topo.Flush(c); err != nil {
			panic("the topology's log records were not written within 10s: " + err.Error())
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.records
	r.records = nil
	return out
}

func (r *logRecorder) messages() []string {
	var out []string
	for _, x := range r.take() {
		out = append(out, x.msg)
	}
	return out
}

// wantAttrs checks that rec has exactly the attributes keys, component
// "topology" or "serverSelection" among them.
func wantAttrs(t *testing.T, rec logRecord, keys ...string) {
	t.Helper()
	var got []string
	for k := range rec.attrs {
		got = append(got, k)
	}
	want := append([]string(nil), keys...)
	if len(got) != len(want) {
		t.Errorf("%q: attributes %v, want %v", rec.msg, sortedKeys(rec.attrs), want)
		return
	}
	for _, k := range want {
		if !rec.has(k) {
			t.Errorf("%q: attributes %v, want %v", rec.msg, sortedKeys(rec.attrs), want)
			return
		}
	}
}

func sortedKeys(m map[string]slog.Value) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestLogEventMessages: each SDAM event but ServerDescriptionChanged (which
// the specification leaves out as redundant) is one Debug message of
// component "topology", with the specification's message and fields: the
// topology's id everywhere, the server's host and port for the server
// messages, the monitoring connection's ids, awaited, the duration in
// milliseconds, the reply as relaxed extended JSON, the failure.
func TestLogEventMessages(t *testing.T) {
	id := bson.NewObjectID()
	prev, err := newDescription(Settings{Seeds: []string{"a.example:27018"}})
	if err != nil {
		t.Fatal(err)
	}
	next := prev.apply(newServerDescription("a.example:27018", hello(t, bson.D{{Key: "isWritablePrimary", Value: true},
		{Key: "minWireVersion", Value: 0}, {Key: "maxWireVersion", Value: 21}}), time.Millisecond, time.Now())).Description
	reply := hello(t, bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "connectionId", Value: int32(7)}, {Key: "ok", Value: 1.0}})
	failure := errors.New("the check of a.example:27018 failed: connection refused")

	rec, l := newLogRecorder(slog.LevelDebug)
	for _, e := range []Event{
		&TopologyOpening{TopologyID: id},
		&TopologyDescriptionChanged{TopologyID: id, Previous: prev, New: next},
		&ServerOpening{TopologyID: id, Address: "a.example:27018"},
		&ServerDescriptionChanged{TopologyID: id, Address: "a.example:27018"},
		&ServerHeartbeatStarted{Address: "a.example:27018", ConnectionID: 3},
		&ServerHeartbeatSucceeded{Address: "a.example:27018", ConnectionID: 3, ServerConnectionID: 7, Duration: 1500 * time.Microsecond, Reply: reply, Awaited: true},
		&ServerHeartbeatFailed{Address: "a.example:27018", ConnectionID: 3, ServerConnectionID: 7, Duration: 2 * time.Millisecond, Failure: failure},
		&ServerClosed{TopologyID: id, Address: "a.example:27018"},
		&TopologyClosed{TopologyID: id},
	} {
		logEvent(l, id, e)
	}
	got := rec.take()
	wantMsgs := []string{
		"Starting topology monitoring", "Topology description changed", "Starting server monitoring",
		"Server heartbeat started", "Server heartbeat succeeded", "Server heartbeat failed",
		"Stopped server monitoring", "Stopped topology monitoring",
	}
	if len(got) != len(wantMsgs) {
		var msgs []string
		for _, r := range got {
			msgs = append(msgs, r.msg)
		}
		t.Fatalf("messages %q, want %q", msgs, wantMsgs)
	}
	for i, r := range got {
		if r.msg != wantMsgs[i] || r.level != slog.LevelDebug || r.str("component") != "topology" {
			t.Errorf("[%d] %v %q component %q, want DEBUG %q component topology", i, r.level, r.msg, r.str("component"), wantMsgs[i])
		}
		if r.str("topologyId") != id.Hex() {
			t.Errorf("[%d] %q: topologyId %q, want %q", i, r.msg, r.str("topologyId"), id.Hex())
		}
	}
	wantAttrs(t, got[0], "component", "topologyId")
	wantAttrs(t, got[1], "component", "topologyId", "previousDescription", "newDescription")
	if p, n := got[1].str("previousDescription"), got[1].str("newDescription"); p != prev.Summary() || n != next.Summary() || p == n {
		t.Errorf("descriptions %q -> %q, want %q -> %q", p, n, prev.Summary(), next.Summary())
	}
	for _, i := range []int{2, 6} {
		wantAttrs(t, got[i], "component", "topologyId", "serverHost", "serverPort")
	}
	wantAttrs(t, got[3], "component", "topologyId", "serverHost", "serverPort", "driverConnectionId", "awaited")
	wantAttrs(t, got[4], "component", "topologyId", "serverHost", "serverPort", "driverConnectionId", "serverConnectionId", "awaited", "durationMS", "reply")
	wantAttrs(t, got[5], "component", "topologyId", "serverHost", "serverPort", "driverConnectionId", "serverConnectionId", "awaited", "durationMS", "failure")
	for _, i := range []int{2, 3, 4, 5, 6} {
		if h, p := got[i].attrs["serverHost"], got[i].attrs["serverPort"]; h.String() != "a.example" || p.Kind() != slog.KindInt64 || p.Int64() != 27018 {
			t.Errorf("%q: serverHost %v serverPort %v, want a.example 27018", got[i].msg, h, p)
		}
	}
	for _, i := range []int{3, 4, 5} {
		if v := got[i].attrs["driverConnectionId"]; v.Kind() != slog.KindInt64 || v.Int64() != 3 {
			t.Errorf("%q: driverConnectionId %v, want 3", got[i].msg, v)
		}
	}
	for _, i := range []int{4, 5} {
		if v := got[i].attrs["serverConnectionId"]; v.Kind() != slog.KindInt64 || v.Int64() != 7 {
			t.Errorf("%q: serverConnectionId %v, want 7", got[i].msg, v)
		}
	}
	if a := got[3].attrs["awaited"]; a.Kind() != slog.KindBool || a.Bool() {
		t.Errorf("started: awaited %v, want false", a)
	}
	if a := got[4].attrs["awaited"]; a.Kind() != slog.KindBool || !a.Bool() {
		t.Errorf("succeeded: awaited %v, want true", a)
	}
	if d := got[4].attrs["durationMS"]; d.Kind() != slog.KindFloat64 || d.Float64() != 1.5 {
		t.Errorf("succeeded: durationMS %v, want 1.5", d)
	}
	if d := got[5].attrs["durationMS"]; d.Kind() != slog.KindFloat64 || d.Float64() != 2 {
		t.Errorf("failed: durationMS %v, want 2", d)
	}
	wantReply, err := bson.MarshalExtJSON(reply, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := got[4].str("reply"); r != string(wantReply) {
		t.Errorf("reply %s, want %s", r, wantReply)
	}
	if f := got[5].attrs["failure"]; f.Kind() != slog.KindString || f.String() != failure.Error() {
		t.Errorf("failure %v, want %q", f, failure.Error())
	}
}

// TestLogEventOmitsUnknownIDs: a heartbeat before the server said its id
// for the connection (the first one's start) has no serverConnectionId, and
// a Unix socket has no serverPort; a host without a port has 27017.
func TestLogEventOmitsUnknownIDs(t *testing.T) {
	id := bson.NewObjectID()
	rec, l := newLogRecorder(slog.LevelDebug)
	logEvent(l, id, &ServerHeartbeatStarted{Address: "/tmp/mongodb-27017.sock", ConnectionID: 1})
	logEvent(l, id, &ServerOpening{TopologyID: id, Address: "b.example"})
	got := rec.take()
	if len(got) != 2 {
		t.Fatalf("%d messages, want 2", len(got))
	}
	wantAttrs(t, got[0], "component", "topologyId", "serverHost", "driverConnectionId", "awaited")
	if h := got[0].str("serverHost"); h != "/tmp/mongodb-27017.sock" {
		t.Errorf("serverHost %q, want the socket's path", h)
	}
	if h, p := got[1].str("serverHost"), got[1].attrs["serverPort"]; h != "b.example" || p.Int64() != 27017 {
		t.Errorf("serverHost %q serverPort %v, want b.example 27017", h, p)
	}
}

// TestLogEventTruncatesReply: the reply is cut at the logging
// specification's default maximum document length, 1000 bytes, at a
// character's boundary, with "..." after it; MONGODB_LOG_MAX_DOCUMENT_LENGTH
// changes the length, and an invalid value is ignored.
func TestLogEventTruncatesReply(t *testing.T) {
	long := strings.Repeat("é", 2000) // two bytes each: a cut may fall inside one
	reply := hello(t, bson.D{{Key: "ok", Value: 1.0}, {Key: "pad", Value: long}})
	full, err := bson.MarshalExtJSON(reply, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  string
		want int // bytes of the reply before "...", at most
	}{{"", 1000}, {"not a number", 1000}, {"-5", 1000}, {"101", 101}} {
		t.Run("env="+c.env, func(t *testing.T) {
			t.Setenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH", c.env)
			rec, l := newLogRecorder(slog.LevelDebug)
			logEvent(l, bson.NewObjectID(), &ServerHeartbeatSucceeded{Address: "a:1", Reply: reply})
			got := rec.take()
			if len(got) != 1 {
				t.Fatalf("%d messages, want 1", len(got))
			}
			r := got[0].str("reply")
			body, ok := strings.CutSuffix(r, "...")
			if !ok || len(body) > c.want || len(body) < c.want-1 || !strings.HasPrefix(string(full), body) || !utf8.ValidString(r) {
				t.Errorf("reply of %d bytes %q..., want the first %d bytes (or one less, at a character's boundary) of %d, then ...", len(r), r[:min(len(r), 40)], c.want, len(full))
			}
		})
	}
	t.Run("short", func(t *testing.T) {
		rec, l := newLogRecorder(slog.LevelDebug)
		short := hello(t, bson.D{{Key: "ok", Value: 1.0}})
		logEvent(l, bson.NewObjectID(), &ServerHeartbeatSucceeded{Address: "a:1", Reply: short})
		want, _ := bson.MarshalExtJSON(short, false, false)
		if got := rec.take(); len(got) != 1 || got[0].str("reply") != string(want) {
			t.Errorf("got %v, want the whole reply %s", got, want)
		}
	})
}

// TestLogEventBuildsNothingUnheard: for a logger whose handler does not
// take Debug records, the SDAM messages are not even built: no call of
// Handle, no allocation (a heartbeat's reply is not turned into JSON).
func TestLogEventBuildsNothingUnheard(t *testing.T) {
	rec, l := newLogRecorder(slog.LevelInfo)
	id := bson.NewObjectID()
	opening := &TopologyOpening{TopologyID: id}
	heartbeat := &ServerHeartbeatSucceeded{Address: "a:1", Reply: hello(t, bson.D{{Key: "ok", Value: 1.0}})}
	if n := testing.AllocsPerRun(100, func() {
		logEvent(l, id, opening)
		logEvent(l, id, heartbeat)
	}); n != 0 {
		t.Errorf("%v allocations per message nobody reads, want none", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.handled != 0 {
		t.Errorf("%d records handled by a logger at Info, want none", rec.handled)
	}
}

// newLoggedTopology is a Topology of fake monitors and pools (see harness)
// with a logger and the selection timeout given.
func newLoggedTopology(t testing.TB, s Settings, timeout time.Duration, l *slog.Logger) (*Topology, func(address string) *fakeMonitor) {
	t.Helper()
	var mu sync.Mutex
	monitors := map[string]*fakeMonitor{}
	topo, err := New(Config{
		Settings:               s,
		ServerSelectionTimeout: timeout,
		MinHeartbeatFrequency:  time.Millisecond,
		NewPool: func(address string, establishFailed func(error)) (*pool.Pool, error) {
			return pool.New(address, connector{}, pool.WithMaintenanceInterval(-1), pool.WithEstablishErrorHandler(establishFailed))
		},
		startMonitor: func(address string, mh monitorHandler) serverMonitor {
			m := &fakeMonitor{address: address, h: mh}
			mu.Lock()
			monitors[address] = m
			mu.Unlock()
			return m
		},
		Logger: l,
	})
	if err != nil {
		t.Fatal(err)
	}
	if l != nil {
		if rec, ok := l.Handler().(*logRecorder); ok {
			rec.topo = topo
		}
	}
	t.Cleanup(func() { topo.Close() })
	return topo, func(address string) *fakeMonitor {
		mu.Lock()
		defer mu.Unlock()
		return monitors[address]
	}
}

// TestTopologyLogsLifecycle: a topology with a logger logs its opening,
// the description changes its checks make, its heartbeats and its closing,
// in the order of the events.
func TestTopologyLogsLifecycle(t *testing.T) {
	rec, l := newLogRecorder(slog.LevelDebug)
	topo, monitor := newLoggedTopology(t, Settings{Seeds: []string{"a:1"}}, time.Second, l)
	m := monitor("a:1")
	m.h.Event(&ServerHeartbeatStarted{Address: "a:1", ConnectionID: 1})
	m.h.Event(&ServerHeartbeatSucceeded{Address: "a:1", ConnectionID: 1, ServerConnectionID: 5, Reply: hello(t, bson.D{{Key: "ok", Value: 1.0}})})
	m.h.Checked(checkOutcome{Server: newServerDescription("a:1", hello(t, bson.D{{Key: "isWritablePrimary", Value: true},
		{Key: "minWireVersion", Value: 0}, {Key: "maxWireVersion", Value: 21}}), time.Millisecond, time.Now())})
	topo.Close()
	want := []string{
		"Starting topology monitoring", "Topology description changed", "Starting server monitoring",
		"Server heartbeat started", "Server heartbeat succeeded", "Topology description changed",
		"Stopped server monitoring", "Topology description changed", "Stopped topology monitoring",
	}
	if got := rec.messages(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// selectAll selects every known server.
func selectAll(d Description, dst []ServerDescription) ([]ServerDescription, error) {
	for _, sd := range d.Servers() {
		if sd.Type != ServerUnknown {
			dst = append(dst, sd)
		}
	}
	return dst, nil
}

// TestSelectServerLogs: a selection logs "Server selection started", then
// "Server selection succeeded" with the server's host and port; one that
// waits logs "Waiting for suitable server to become available" once, at
// Info, with the time left, then "Server selection failed" with why, which
// does not repeat the topology's description. Every message names the
// operation, its id, the selector and the topology's description.
func TestSelectServerLogs(t *testing.T) {
	crit := Criteria{ReadPref: ReadPref{Mode: ModeSecondaryPreferred, TagSets: []TagSet{{{Name: "dc", Value: "ny"}}}}}
	op := Operation{Name: "find", ID: 42, Criteria: &crit}

	rec, l := newLogRecorder(slog.LevelDebug)
	topo, monitor := newLoggedTopology(t, Settings{Seeds: []string{"a:1"}}, time.Hour, l)
	rec.take() // the SDAM messages of the opening
	// Nothing known yet: the selection waits, asking the monitor for
	// checks, until its context, which ends before the server selection
	// timeout, is canceled once the waiting is logged.
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// Should the waiting go unlogged, the selection still ends in seconds.
	stop := time.AfterFunc(10*time.Second, cancel)
	defer stop.Stop()
	rec.onRecord = func(r logRecord) {
		if strings.HasPrefix(r.msg, "Waiting") {
			cancel()
		}
	}
	_, err := topo.SelectServer(sctx, selectAll, op)
	got := rec.take()
	rec.onRecord = nil
	var se *SelectionError
	if !errors.As(err, &se) || !errors.Is(err, context.Canceled) {
		t.Fatalf("selection: %v, want the context's end", err)
	}
	var msgs []string
	for _, r := range got {
		msgs = append(msgs, r.msg)
	}
	if strings.Join(msgs, "|") != "Server selection started|Waiting for suitable server to become available|Server selection failed" {
		t.Fatalf("messages %q", msgs)
	}
	for _, r := range got {
		if r.str("component") != "serverSelection" || r.str("operation") != "find" || r.attrs["operationId"].Int64() != 42 ||
			r.str("selector") != crit.String() || !strings.HasPrefix(r.str("topologyDescription"), "Unknown") {
			t.Errorf("%q: component %q operation %q operationId %v selector %q topologyDescription %q", r.msg,
				r.str("component"), r.str("operation"), r.attrs["operationId"], r.str("selector"), r.str("topologyDescription"))
		}
	}
	if got[0].level != slog.LevelDebug || got[1].level != slog.LevelInfo || got[2].level != slog.LevelDebug {
		t.Errorf("levels %v %v %v, want DEBUG INFO DEBUG", got[0].level, got[1].level, got[2].level)
	}
	wantAttrs(t, got[1], "component", "operation", "operationId", "selector", "topologyDescription", "remainingTimeMS")
	// The context's deadline comes before the hour of the selection
	// timeout: the time left is the context's.
	if ms := got[1].attrs["remainingTimeMS"]; ms.Kind() != slog.KindInt64 || ms.Int64() <= (20*time.Minute).Milliseconds() || ms.Int64() > (30*time.Minute).Milliseconds() {
		t.Errorf("remainingTimeMS %v, want at most 30 minutes, the context's, and more than 20", ms)
	}
	wantAttrs(t, got[2], "component", "operation", "operationId", "selector", "topologyDescription", "failure")
	if f := got[2].str("failure"); !strings.Contains(f, "context canceled") || strings.Contains(f, "a:1") {
		t.Errorf("failure %q: want the context's end, without the topology's servers", f)
	}

	monitor("a:1").h.Checked(checkOutcome{Server: newServerDescription("a:1", hello(t, bson.D{{Key: "isWritablePrimary", Value: true},
		{Key: "minWireVersion", Value: 0}, {Key: "maxWireVersion", Value: 21}}), time.Millisecond, time.Now())})
	rec.take()
	s, err := topo.SelectServer(ctx(t), selectAll, op)
	if err != nil {
		t.Fatal(err)
	}
	s.Done()
	got = rec.take()
	if len(got) != 2 || got[0].msg != "Server selection started" || got[1].msg != "Server selection succeeded" {
		t.Fatalf("messages %v", got)
	}
	wantAttrs(t, got[1], "component", "operation", "operationId", "selector", "topologyDescription", "serverHost", "serverPort")
	if h, p := got[1].str("serverHost"), got[1].attrs["serverPort"]; h != "a" || p.Int64() != 1 {
		t.Errorf("serverHost %q serverPort %v, want a 1", h, p)
	}
}

// TestSelectServerLogsTimeout: a selection that the server selection
// timeout ends logs the timeout as its failure, without the topology's
// servers, which the message's topologyDescription has; it logs the
// waiting once, however many times it asks the monitors for checks (every
// millisecond here) meanwhile.
func TestSelectServerLogsTimeout(t *testing.T) {
	rec, l := newLogRecorder(slog.LevelDebug)
	topo, monitor := newLoggedTopology(t, Settings{Seeds: []string{"a:1"}}, 50*time.Millisecond, l)
	rec.take()
	_, err := topo.SelectServer(ctx(t), selectAll, Operation{Name: "insert"})
	var se *SelectionError
	if !errors.As(err, &se) || se.Timeout == 0 {
		t.Fatalf("selection: %v, want a timeout", err)
	}
	got := rec.take()
	if len(got) != 3 || got[1].msg != "Waiting for suitable server to become available" || got[2].msg != "Server selection failed" {
		var msgs []string
		for _, r := range got {
			msgs = append(msgs, r.msg)
		}
		requested, _, _ := monitor("a:1").counts()
		t.Fatalf("messages %q (after %d requests for a check), want started, waiting, failed", msgs, requested)
	}
	if f := got[2].str("failure"); !strings.Contains(f, "serverSelectionTimeoutMS (50ms)") || strings.Contains(f, "a:1") {
		t.Errorf("failure %q: want the timeout, without the topology's servers", f)
	}
	if d := got[2].str("topologyDescription"); !strings.Contains(d, "a:1") {
		t.Errorf("topologyDescription %q: want the servers", d)
	}
}

// TestSelectServerLogsFailures: a selector's error and a closed topology
// are failures at once, without waiting; a selection without an Operation
// names none (no operation, no operationId) and describes its selector as a
// custom one.
func TestSelectServerLogsFailures(t *testing.T) {
	rec, l := newLogRecorder(slog.LevelDebug)
	topo, _ := newLoggedTopology(t, Settings{Seeds: []string{"a:1"}}, time.Second, l)
	rec.take()
	bad := errors.New("no such read preference")
	_, err := topo.SelectServer(ctx(t), func(Description, []ServerDescription) ([]ServerDescription, error) { return nil, bad })
	if !errors.Is(err, bad) {
		t.Fatalf("selection: %v, want the selector's error", err)
	}
	got := rec.take()
	if len(got) != 2 || got[0].msg != "Server selection started" || got[1].msg != "Server selection failed" {
		t.Fatalf("messages %v", got)
	}
	wantAttrs(t, got[0], "component", "selector", "topologyDescription")
	if s := got[0].str("selector"); s != "custom selector" {
		t.Errorf("selector %q, want custom selector", s)
	}
	if f := got[1].str("failure"); f != bad.Error() {
		t.Errorf("failure %q, want %q", f, bad.Error())
	}
	topo.Close()
	rec.take()
	if _, err := topo.SelectServer(ctx(t), selectAll, Operation{Name: "insert"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("selection: %v, want ErrClosed", err)
	}
	got = rec.take()
	if len(got) != 2 || got[1].msg != "Server selection failed" || got[1].str("failure") != ErrClosed.Error() || got[1].has("operationId") {
		t.Errorf("messages %v: want started, then failed with ErrClosed, without operationId", got)
	}
}

// TestSelectServerLogsNothingUnheard: with a logger that takes no Debug
// records, a selection that does not wait builds no message: it allocates
// what it does without a logger.
func TestSelectServerLogsNothingUnheard(t *testing.T) {
	allocs := func(l *slog.Logger) float64 {
		topo, monitor := newLoggedTopology(t, Settings{Seeds: []string{"a:1"}}, time.Second, l)
		monitor("a:1").h.Checked(checkOutcome{Server: newServerDescription("a:1", hello(t, bson.D{{Key: "isWritablePrimary", Value: true},
			{Key: "minWireVersion", Value: 0}, {Key: "maxWireVersion", Value: 21}}), time.Millisecond, time.Now())})
		crit := Criteria{}
		op := Operation{Name: "find", ID: 1, Criteria: &crit}
		c := ctx(t)
		return testing.AllocsPerRun(100, func() {
			s, err := topo.SelectServer(c, selectAll, op)
			if err != nil {
				t.Fatal(err)
			}
			s.Done()
		})
	}
	without := allocs(nil)
	// At Info, only a selection that waits has something to say.
	for _, level := range []slog.Level{slog.LevelWarn, slog.LevelInfo} {
		rec, l := newLogRecorder(level)
		if with := allocs(l); with != without {
			t.Errorf("%v allocations per selection with a logger at %v, %v without a logger: want the same", with, level, without)
		}
		rec.mu.Lock()
		if rec.handled != 0 {
			t.Errorf("%d records handled by a logger at %v, want none", rec.handled, level)
		}
		rec.mu.Unlock()
	}
}

// TestMonitorHeartbeatConnectionIDs: a monitor's heartbeat events carry the
// id of its connection (1 for its first) and the server's id for it, once
// the handshake told it; a new connection after a failure has the next id.
func TestMonitorHeartbeatConnectionIDs(t *testing.T) {
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	events := make(chan Event, 64)
	m := startMonitor(monitorConfig{
		Address:               srv.Addr(),
		Conn:                  connection.Config{ConnectTimeout: 10 * time.Second},
		Mode:                  MonitoringPoll,
		HeartbeatFrequency:    time.Hour,
		MinHeartbeatFrequency: time.Millisecond,
		Handler: monitorHandler{
			Checked: func(checkOutcome) bool { return false },
			Event: func(e Event) {
				select {
				case events <- e:
				default:
				}
			},
		},
	})
	defer m.Close()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	next := func() Event {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-timeout.C:
			t.Fatal("no heartbeat event within 10s")
		}
		return nil
	}
	st, ok := next().(*ServerHeartbeatStarted)
	if !ok || st.ConnectionID != 1 || st.ServerConnectionID != 0 {
		t.Fatalf("first event %#v, want a start on connection 1, the server's id unknown", st)
	}
	sc, ok := next().(*ServerHeartbeatSucceeded)
	if !ok || sc.ConnectionID != 1 || sc.ServerConnectionID <= 0 {
		t.Fatalf("second event %#v, want a success on connection 1 with the server's id", sc)
	}
	serverID := sc.ServerConnectionID
	m.RequestCheck()
	st, ok = next().(*ServerHeartbeatStarted)
	if !ok || st.ConnectionID != 1 || st.ServerConnectionID != serverID {
		t.Fatalf("third event %#v, want a start on connection 1, server id %d", st, serverID)
	}
	if sc, ok := next().(*ServerHeartbeatSucceeded); !ok || sc.ConnectionID != 1 || sc.ServerConnectionID != serverID {
		t.Fatalf("fourth event %#v, want a success on connection 1, server id %d", sc, serverID)
	}
	// A failure closes the connection: the next check makes connection 2.
	remove, err := srv.InjectFault(mongotest.Fault{Kind: mongotest.FaultResetMidReply, Times: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	m.RequestCheck()
	if st, ok := next().(*ServerHeartbeatStarted); !ok || st.ConnectionID != 1 {
		t.Fatalf("fifth event %#v, want a start on connection 1", st)
	}
	if f, ok := next().(*ServerHeartbeatFailed); !ok || f.ConnectionID != 1 || f.ServerConnectionID != serverID {
		t.Fatalf("sixth event %#v, want a failure on connection 1, server id %d", f, serverID)
	}
	m.RequestCheck()
	if st, ok := next().(*ServerHeartbeatStarted); !ok || st.ConnectionID != 2 || st.ServerConnectionID != 0 {
		t.Fatalf("seventh event %#v, want a start on connection 2, the server's id unknown", st)
	}
	if sc, ok := next().(*ServerHeartbeatSucceeded); !ok || sc.ConnectionID != 2 || sc.ServerConnectionID <= 0 || sc.ServerConnectionID == serverID {
		t.Fatalf("eighth event %#v, want a success on connection 2 with a new server id", sc)
	}
}

// BenchmarkSelectServer: a selection that finds its server at once, with an
// Operation, without a logger, with one that takes neither Debug nor Info
// records, and with one that takes them all: the messages cost nothing
// unless they are written.
func BenchmarkSelectServer(b *testing.B) {
	crit := Criteria{}
	op := Operation{Name: "find", ID: 1, Criteria: &crit}
	for _, c := range []struct {
		name string
		l    *slog.Logger
	}{
		{"no-logger", nil},
		{"logger-at-warn", slog.New(&logRecorder{min: slog.LevelWarn})},
		{"logger-at-debug", slog.New(debugDiscard{})},
	} {
		b.Run(c.name, func(b *testing.B) {
			topo, monitor := newLoggedTopology(b, Settings{Seeds: []string{"a:1"}}, time.Second, c.l)
			monitor("a:1").h.Checked(checkOutcome{Server: newServerDescription("a:1", hello(b, bson.D{{Key: "isWritablePrimary", Value: true},
				{Key: "minWireVersion", Value: 0}, {Key: "maxWireVersion", Value: 21}}), time.Millisecond, time.Now())})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				s, err := topo.SelectServer(ctx, selectAll, op)
				if err != nil {
					b.Fatal(err)
				}
				s.Done()
			}
		})
	}
}

// debugDiscard takes every record and drops it.
type debugDiscard struct{}

func (debugDiscard) Enabled(context.Context, slog.Level) bool  { return true }
func (debugDiscard) Handle(context.Context, slog.Record) error { return nil }
func (d debugDiscard) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d debugDiscard) WithGroup(string) slog.Handler           { return d }
