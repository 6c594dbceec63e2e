package mongopool_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/auth"
	"github.com/mongopool/mongopool/pool"
)

// The prose tests 1-5 of the CMAP specification's tests
// (README-cmap-tests.md). A "MongoClient" here is what mongopool.Open
// returns: a client of one endpoint that owns exactly one pool.

// The specification's five pool options (ConnectionPoolOptions), set to values
// that differ from every default, as Open's options and as URI options.
var (
	proseOptionValues = map[string]int64{
		"maxPoolSize":        7,
		"minPoolSize":        2,
		"maxIdleTimeMS":      60000,
		"maxConnecting":      3,
		"waitQueueTimeoutMS": 250,
	}
	proseOptions = []pool.Option{
		pool.WithMaxPoolSize(7),
		pool.WithMinPoolSize(2),
		pool.WithMaxIdleTime(60 * time.Second),
		pool.WithMaxConnecting(3),
		pool.WithWaitQueueTimeout(250 * time.Millisecond),
	}
	proseURIOptions = "?maxPoolSize=7&minPoolSize=2&maxIdleTimeMS=60000&maxConnecting=3&waitQueueTimeoutMS=250"
)

// proseCheckOptions checks that the pool a client created got the five
// options: the PoolCreated event lists them with their values, and the
// pool's limits are those.
func proseCheckOptions(t *testing.T, events *e2eEventLog, p *mongopool.Pool) {
	t.Helper()
	created := events.filter(func(e pool.Event) bool { return e.Type == pool.PoolCreated })
	if len(created) != 1 {
		t.Fatalf("%d PoolCreated events, want 1 (one pool per client)", len(created))
	}
	if !maps.Equal(created[0].Options, proseOptionValues) {
		t.Fatalf("PoolCreated options %v, want %v", created[0].Options, proseOptionValues)
	}
	if st := p.Stats(); st.MaxPoolSize != 7 || st.MinPoolSize != 2 || st.MaxConnecting != 3 {
		t.Fatalf("pool limits %+v, want maxPoolSize 7, minPoolSize 2, maxConnecting 3", st)
	}
}

// proseCheckBehaviour checks that the options are in force, not only recorded:
// minPoolSize fills the pool in the background (two ConnectionReady events
// after the first readyBefore), and a check-out beyond maxPoolSize ends at
// waitQueueTimeoutMS, whose error names both.
func proseCheckBehaviour(t *testing.T, events *e2eEventLog, p *mongopool.Pool, readyBefore int) {
	t.Helper()
	ctx := ctx(t)
	events.waitN(ctx, t, "the 2 connections of minPoolSize=2", readyBefore+2, proseIsReady)
	var held []*pool.Conn
	defer func() {
		for _, c := range held {
			p.Pool().CheckIn(c)
		}
	}()
	for range 7 {
		c, err := p.Pool().CheckOut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	_, err := p.Pool().CheckOut(ctx)
	var wqt *pool.WaitQueueTimeoutError
	if !errors.As(err, &wqt) || wqt.Limit != "waitQueueTimeoutMS" || wqt.MaxPoolSize != 7 || wqt.MaxConnecting != 3 {
		t.Fatalf("check-out from a full pool: %v, want a wait queue timeout of waitQueueTimeoutMS with maxPoolSize 7", err)
	}
}

// Prose test 1: all ConnectionPoolOptions can be given at the client level,
// as options of Open.
func TestProseCMAP1OptionsAtClientLevel(t *testing.T) {
	s := server(t)
	events := newE2EEventLog()
	p := openCtx(t, ctx(t), s.URI(), append(slices.Clone(proseOptions), pool.WithEventHandler(events.handler))...)
	events.attach(p)
	proseCheckOptions(t, events, p)
	proseCheckBehaviour(t, events, p, 0)
}

// Prose test 2: all ConnectionPoolOptions are the same for all the pools a
// client creates. Open's client has one pool, made when Open runs and never
// replaced (a clear keeps the pool and its options), so the requirement
// reads: the options given to Open are the options of that one pool, before
// and after a clear; and clients opened with the same options get pools with
// the same options.
func TestProseCMAP2SameOptionsForAllPools(t *testing.T) {
	var clients []*mongopool.Pool
	var logs []*e2eEventLog
	for range 2 {
		s := server(t)
		events := newE2EEventLog()
		p := openCtx(t, ctx(t), s.URI(), append(slices.Clone(proseOptions), pool.WithEventHandler(events.handler))...)
		events.attach(p)
		clients, logs = append(clients, p), append(logs, events)
	}
	for i, p := range clients {
		proseCheckOptions(t, logs[i], p)
	}

	// After a clear, the pool refills to the same minPoolSize and has the
	// same limits.
	p, events := clients[0], logs[0]
	readyBefore := len(events.filter(proseIsReady))
	if err := p.Pool().Clear(pool.ClearOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Pool().Ready(); err != nil {
		t.Fatal(err)
	}
	proseCheckOptions(t, events, p) // still one PoolCreated: the same pool
	proseCheckBehaviour(t, events, p, readyBefore)
}

// proseIsReady matches ConnectionReady events.
func proseIsReady(e pool.Event) bool { return e.Type == pool.ConnectionReady }

// Prose test 3: every ConnectionPoolOption can be given in the URI, under
// its specification name, and reaches the pool.
func TestProseCMAP3OptionsInURI(t *testing.T) {
	s := server(t)
	events := newE2EEventLog()
	logs := &proseLogHandler{}
	p := openCtx(t, ctx(t), s.URI()+proseURIOptions, pool.WithEventHandler(events.handler), pool.WithLogger(slog.New(logs)))
	if w := p.Warnings(); len(w) != 0 {
		t.Fatalf("warnings %q: the URI's pool options were not all understood", w)
	}
	proseCheckOptions(t, events, p)
	// The "Connection pool created" log message lists them too.
	created := logs.withMessage("Connection pool created")
	if len(created) != 1 {
		t.Fatalf("%d pool-created log messages, want 1", len(created))
	}
	for k, v := range proseOptionValues {
		if got, ok := created[0][k]; !ok || got.Int64() != v {
			t.Errorf("pool-created log message: %s = %v, want %d", k, got, v)
		}
	}
	proseCheckBehaviour(t, events, p, 0)
}

// Prose test 4: a user subscribes to the pool's events the Go way, with a
// function given to Open (pool.WithEventHandler), and to its log messages
// with a *slog.Logger (pool.WithLogger).
func TestProseCMAP4SubscribeToEvents(t *testing.T) {
	s := server(t)
	events := newE2EEventLog()
	logs := &proseLogHandler{}
	p, err := mongopool.Open(ctx(t), s.URI(), pool.WithEventHandler(events.handler), pool.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() }) // for an early failure; Close is idempotent
	if _, err := p.RunCommand(ctx(t), "admin", ping); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// The handler and the logger hear of the closing after Close returns:
	// Flush waits for them to have it.
	if err := p.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// Open's ping, ours and Close's endSessions (which ends the pings'
	// implicit session) each check the one connection out and in; Close
	// closes it and the pool.
	want := []pool.EventType{
		pool.PoolCreated, pool.PoolReady,
		pool.ConnectionCheckOutStarted, pool.ConnectionCreated, pool.ConnectionReady, pool.ConnectionCheckedOut, pool.ConnectionCheckedIn,
		pool.ConnectionCheckOutStarted, pool.ConnectionCheckedOut, pool.ConnectionCheckedIn,
		pool.ConnectionCheckOutStarted, pool.ConnectionCheckedOut, pool.ConnectionCheckedIn,
		pool.ConnectionClosed, pool.PoolClosed,
	}
	got := events.all()
	var gotTypes []pool.EventType
	for _, e := range got {
		gotTypes = append(gotTypes, e.Type)
		if e.Address != s.Addr() {
			t.Errorf("%v event with address %q, want %q", e.Type, e.Address, s.Addr())
		}
	}
	if !slices.Equal(gotTypes, want) {
		t.Fatalf("events %v, want %v", gotTypes, want)
	}
	if closed := got[len(got)-2]; closed.Reason != pool.ReasonPoolClosed || closed.ConnectionID != 1 {
		t.Fatalf("ConnectionClosed %+v, want connection 1 closed with reason poolClosed", closed)
	}
	// The same story in the log, message for message, each with the
	// component and the server's address.
	var msgs []string
	for _, r := range logs.all() {
		msgs = append(msgs, r.message)
		if r.attrs["component"].String() != "connection" {
			t.Errorf("log message %q without component=connection: %v", r.message, r.attrs)
		}
		host, port, _ := net.SplitHostPort(s.Addr())
		if r.attrs["serverHost"].String() != host || r.attrs["serverPort"].String() != port {
			t.Errorf("log message %q with serverHost %v serverPort %v, want %s %s", r.message, r.attrs["serverHost"], r.attrs["serverPort"], host, port)
		}
	}
	wantMsgs := []string{
		"Connection pool created", "Connection pool ready",
		"Connection checkout started", "Connection created", "Connection ready", "Connection checked out", "Connection checked in",
		"Connection checkout started", "Connection checked out", "Connection checked in",
		"Connection checkout started", "Connection checked out", "Connection checked in",
		"Connection closed", "Connection pool closed",
	}
	if !slices.Equal(msgs, wantMsgs) {
		t.Fatalf("log messages %q, want %q", msgs, wantMsgs)
	}
}

// Prose test 5: a check-out that fails because setting the connection up
// failed emits ConnectionCheckOutFailed with reason "connectionError",
// whether the set-up failed on the network or in authentication. The pool is
// a bare one, with the real connector: a client's monitor would meet the
// refused connection first, and keep the pool from trying.
func TestProseCMAP5CheckOutFailsOnConnectionError(t *testing.T) {
	var limits caseLimits
	wrongPassword := func(t *testing.T) string {
		return "mongodb://alice:wrong@" + aliceServer(t, "right-password").Addr() + "/"
	}
	for _, tc := range []struct {
		name       string
		uri        func(*testing.T) string
		duringAuth bool
	}{
		{"connection refused", refusedURI, false},
		{"authentication fails", wrongPassword, true},
	} {
		limits.run(t, tc.name, func(t *testing.T) {
			events := newE2EEventLog()
			p := barePool(t, tc.uri(t), pool.WithEventHandler(events.handler))
			events.attach(p)
			err := checkOutOnce(limits.ctx(t), p)
			var cerr *pool.ConnectionError
			if !errors.As(err, &cerr) || cerr.DuringAuth != tc.duringAuth {
				t.Fatalf("check-out: %v, want a *pool.ConnectionError (during authentication: %v)", err, tc.duringAuth)
			}
			if tc.duringAuth {
				var ae *auth.Error
				if !errors.As(err, &ae) {
					t.Fatalf("check-out: %v, want an *auth.Error inside", err)
				}
			}
			failed := events.filter(func(e pool.Event) bool { return e.Type == pool.ConnectionCheckOutFailed })
			if len(failed) != 1 {
				t.Fatalf("ConnectionCheckOutFailed events %+v, want 1", failed)
			}
			f := failed[0]
			if f.Reason != "connectionError" { // the specification's string, not only the constant
				t.Fatalf("ConnectionCheckOutFailed reason %q, want connectionError", f.Reason)
			}
			var ferr *pool.ConnectionError
			if !errors.As(f.Err, &ferr) || ferr.ConnectionID != cerr.ConnectionID {
				t.Fatalf("ConnectionCheckOutFailed error %v, want the establishment's error %v", f.Err, cerr)
			}
			// The connection that failed was closed with reason "error".
			closed := events.filter(e2eClosedConn(cerr.ConnectionID))
			if len(closed) != 1 || closed[0].Reason != pool.ReasonError {
				t.Fatalf("ConnectionClosed events for connection %d: %+v, want one with reason error", cerr.ConnectionID, closed)
			}
		})
	}
}

// proseLogHandler is a slog.Handler that keeps every record, with its
// attributes by key.
type proseLogHandler struct {
	mu      sync.Mutex
	records []proseLogRecord
}

// proseLogRecord is one log record as a proseLogHandler kept it.
type proseLogRecord struct {
	level   slog.Level
	message string
	attrs   map[string]slog.Value
}

func (h *proseLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *proseLogHandler) Handle(_ context.Context, r slog.Record) error {
	rec := proseLogRecord{level: r.Level, message: r.Message, attrs: map[string]slog.Value{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, rec)
	h.mu.Unlock()
	return nil
}

// WithAttrs shares the records with h: the pool's messages all end up in
// one place.
func (h *proseLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &proseLogShared{h: h, attrs: attrs}
}

func (h *proseLogHandler) WithGroup(string) slog.Handler { return h }

func (h *proseLogHandler) all() []proseLogRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.records)
}

// withMessage returns the attributes of the records with message msg.
func (h *proseLogHandler) withMessage(msg string) []map[string]slog.Value {
	var out []map[string]slog.Value
	for _, r := range h.all() {
		if r.message == msg {
			out = append(out, r.attrs)
		}
	}
	return out
}

// proseLogShared is a proseLogHandler with attributes added by WithAttrs.
type proseLogShared struct {
	h     *proseLogHandler
	attrs []slog.Attr
}

func (s *proseLogShared) Enabled(context.Context, slog.Level) bool { return true }

func (s *proseLogShared) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(s.attrs...)
	return s.h.Handle(ctx, r)
}

func (s *proseLogShared) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &proseLogShared{h: s.h, attrs: append(slices.Clone(s.attrs), attrs...)}
}

func (s *proseLogShared) WithGroup(string) slog.Handler { return s }
