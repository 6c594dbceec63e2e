package cmapspec

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		expected, actual string
		diff             string // a part of the difference; "" if they match
	}{
		{`42`, `"x"`, ""},
		{`"42"`, `{"a": 1}`, ""},
		{`42`, `null`, "missing"},
		{`{"a": 42}`, `{}`, "x.a: missing, want any value"},
		{`{"a": 1}`, `{"a": 1, "b": 2}`, ""},
		{`{"a": 1}`, `{"a": "1"}`, "(string), want 1 (number)"},
		{`{"a": [1, {"b": true}]}`, `{"a": [1, {"b": true}, 3]}`, ""},
		{`{"a": [1, {"b": true}]}`, `{"a": [1, {"b": false}]}`, "x.a[1].b: got false, want true"},
		{`[1, 2]`, `[1]`, "x[1]: missing, want 2"},
		{`{"type": "A", "id": 1}`, `{"type": "B", "id": 2}`, "x.type"}, // type first
	} {
		d := Match("x", decode(t, tc.expected), decode(t, tc.actual), true)
		if tc.diff == "" && d != "" || tc.diff != "" && !strings.Contains(d, tc.diff) {
			t.Errorf("Match(%s, %s) = %q, want %q", tc.expected, tc.actual, d, tc.diff)
		}
	}
	if d := Match("x", 1.0, nil, false); d != "x: missing, want 1" {
		t.Errorf("Match of a missing value = %q", d)
	}
}

func TestMatchError(t *testing.T) {
	err := &pool.WaitQueueTimeoutError{Address: "h:1"}
	msg := err.Error()
	for _, tc := range []struct {
		expected string
		ok       bool
	}{
		{`{"type": "WaitQueueTimeoutError"}`, true},
		{`{"type": "WaitQueueTimeoutError", "address": "h:1"}`, true},
		{`{"type": "WaitQueueTimeoutError", "address": "h:2"}`, false},
		{`{"address": 42}`, true},
		{`{"type": "PoolClosedError"}`, false},
		{`{"type": "NoSuchError"}`, false},
		// MATCH compares strings for equality: the specification's message
		// (Message), not a prefix of it, nor Error's longer text.
		{`{"message": "Timed out while checking out a connection from connection pool"}`, true},
		{`{"message": ` + mustJSON(t, msg[:10]) + `}`, false},
		{`{"message": ` + mustJSON(t, msg) + `}`, false},
		{`{"message": "something else"}`, false},
	} {
		d := MatchError(decode(t, tc.expected).(map[string]any), err)
		if (d == "") != tc.ok {
			t.Errorf("MatchError(%s, %v) = %q, want a match: %v", tc.expected, err, d, tc.ok)
		}
	}
	// An error without a Message method is matched on its whole text.
	plain := &pool.ConnectionError{Address: "h:1", Err: errors.New("refused")}
	if d := MatchError(map[string]any{"message": plain.Error()}, plain); d != "" {
		t.Errorf("the whole message does not match: %s", d)
	}
	if d := MatchError(map[string]any{"message": plain.Error()[:12]}, plain); d == "" {
		t.Error("a prefix of the message matches")
	}
}

// The document of an event has only the fields the pool set: a duration,
// connection id, address or reason left at zero is absent, so that the
// placeholder 42 ("exists") does not pass for a value the pool never gave.
func TestEventDocLeavesOutUnsetFields(t *testing.T) {
	for _, tc := range []struct {
		event  pool.Event
		expect string
		ok     bool
	}{
		{pool.Event{Type: pool.ConnectionReady, Address: "h:1", ConnectionID: 3, Duration: time.Millisecond},
			`{"type": "ConnectionReady", "address": 42, "connectionId": 42, "duration": 42}`, true},
		{pool.Event{Type: pool.ConnectionReady, Address: "h:1", ConnectionID: 3},
			`{"type": "ConnectionReady", "duration": 42}`, false},
		{pool.Event{Type: pool.ConnectionCheckOutFailed, Address: "h:1", Reason: pool.ReasonTimeout},
			`{"type": "ConnectionCheckOutFailed", "duration": 42}`, false},
		{pool.Event{Type: pool.ConnectionCheckedOut, Address: "h:1", Duration: 1},
			`{"type": "ConnectionCheckedOut", "connectionId": 42}`, false},
		{pool.Event{Type: pool.PoolReady},
			`{"type": "ConnectionPoolReady", "address": 42}`, false},
		{pool.Event{Type: pool.ConnectionClosed, Address: "h:1", ConnectionID: 1},
			`{"type": "ConnectionClosed", "reason": 42}`, false},
		{pool.Event{Type: pool.PoolCleared, Address: "h:1"},
			`{"type": "ConnectionPoolCleared", "interruptInUseConnections": false}`, true},
	} {
		d := Match("event", decode(t, tc.expect), EventDoc(tc.event), true)
		if (d == "") != tc.ok {
			t.Errorf("%+v against %s: %q, want a match: %v", tc.event, tc.expect, d, tc.ok)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const integrationFile = `{
  "version": 1, "style": "integration", "description": "d",
  "runOn": [{"minServerVersion": "4.4.0"}, {"maxServerVersion": "3.6"}],
  "failPoint": {"configureFailPoint": "failCommand", "mode": "alwaysOn", "data": {"appName": "A"}},
  "poolOptions": {"maxPoolSize": 2, "appName": "A"},
  "operations": [{"name": "ready"}, {"name": "checkOut", "label": "c"}, {"name": "checkIn", "connection": "c"}],
  "events": [{"type": "ConnectionCreated"}],
  "ignore": ["ConnectionPoolCreated"]
}`

func TestParse(t *testing.T) {
	f, err := Parse([]byte(integrationFile))
	if err != nil {
		t.Fatal(err)
	}
	if f.Style != StyleIntegration || f.AppName != "A" || len(f.Options) != 1 || len(f.ops) != 3 || f.FailPoint == nil {
		t.Errorf("parsed %+v", f)
	}
	for version, want := range map[string]bool{
		"7.0.0": true, "4.4": true, "4.3.9": false, "3.6.0": true, "3.6.1": false, "2.0": true,
	} {
		if got, err := f.RunsOn(version); err != nil || got != want {
			t.Errorf("RunsOn(%s) = %v, %v, want %v", version, got, err, want)
		}
	}
	if _, err := f.RunsOn("seven"); err == nil {
		t.Error("RunsOn(seven): no error")
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		old, new string // a change of integrationFile
		err      string // a part of the error
	}{
		{`"style": "integration"`, `"style": "unit"`, "runOn and failPoint"},
		{`"style": "integration"`, `"style": "system"`, `unknown style "system"`},
		{`"version": 1`, `"version": 2`, "version 2"},
		{`"description": "d"`, `"descripton": "d"`, "unknown field"},
		{`"minServerVersion": "4.4.0"`, `"minServerVersion": "4.x"`, `"x" is not a number`},
		{`"minServerVersion"`, `"topology"`, "runOn[0]"},
		{`{"configureFailPoint": "failCommand", "mode"`, `{"mode": "off", "configureFailPoint": "failCommand", "m"`, "first field"},
		{`"mode": "alwaysOn", `, ``, "no mode"},
		{`"maxPoolSize": 2`, `"maxPoolSize": 2.5`, "maxPoolSize: not an integer"},
		{`"maxPoolSize": 2`, `"maxPoolSise": 2`, `unknown pool option "maxPoolSise"`},
		{`"maxPoolSize": 2, "appName": "A"`, `"maxPoolSize": 2, "appName": 1`, "appName is not"},
		{`"connection": "c"`, `"connection": "d"`, `no earlier checkOut has label "d"`},
		{`{"name": "ready"}`, `{"name": "prepare"}`, `unknown operation "prepare"`},
		{`{"name": "ready"}`, `{"name": "wait"}`, `missing field "ms"`},
		{`{"name": "ready"}`, `{"name": "wait", "ms": -1}`, `ms is negative`},
		{`{"name": "ready"}`, `{"name": "start", "target": "t", "thread": "u"}`, `on a thread is not supported`},
		{`"ignore": ["ConnectionPoolCreated"]`, `"ignore": ["PoolCreated"]`, `unknown event type "PoolCreated"`},
		{`"events": [{"type": "ConnectionCreated"}]`, `"events": [1]`, "events[0] is not an object"},
	} {
		data := strings.Replace(integrationFile, tc.old, tc.new, 1)
		if data == integrationFile {
			t.Fatalf("%q is not in the file", tc.old)
		}
		_, err := Parse([]byte(data))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s -> %s: error %v, want one containing %q", tc.old, tc.new, err, tc.err)
		}
	}
}

// The error of a thread no waitForThread propagated fails the test, unless
// it is a failed check-out (the file asserts its ConnectionCheckOutFailed
// event) or the runner's own (reported already).
func TestUnwaitedThreadErrors(t *testing.T) {
	failed := func(op string, err error, waited bool) *thread {
		return &thread{err: err, errOp: operation{name: op}, waited: waited}
	}
	threads := map[string]*thread{
		"checkIn refused":   failed("checkIn", pool.ErrNotCheckedOut, false),
		"check-out evicted": failed("checkOut", &pool.PoolClearedError{}, false),
		"waited for":        failed("checkIn", pool.ErrNotCheckedOut, true),
		"runner's fault":    failed("checkIn", runnerErrorf("no connection labelled"), false),
		"stopped":           failed("wait", errStopped, false),
		"no error":          failed("", nil, false),
	}
	got := unwaitedThreadErrors(threads)
	if len(got) != 1 || !strings.Contains(got[0], `"checkIn refused"`) {
		t.Fatalf("failures %q, want the refused check-in's only", got)
	}
}

type stubLink struct{}

func (stubLink) Close() error { return nil }
func (stubLink) Err() error   { return nil }

type stubConnector struct{}

func (stubConnector) Connect(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
	a.HelloDone(pool.ServiceID{})
	return stubLink{}, nil
}

// A check-out the pool never answers fails the operation with a runner error
// after the thread timeout, instead of hanging the test.
func TestCheckOutThatNeverEndsFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := pool.New("h:1", stubConnector{}, pool.WithMaxPoolSize(1), pool.WithMaintenanceInterval(-1))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Ready(); err != nil {
			t.Fatal(err)
		}
		x := &run{t: t, pool: p, stop: make(chan struct{}), threadTimeout: time.Second,
			labels: make(map[string]*pool.Conn)}
		if err := x.exec(operation{name: "checkOut", label: "a"}); err != nil {
			t.Fatalf("first checkOut: %v", err)
		}
		err = x.exec(operation{name: "checkOut"}) // maxPoolSize reached, no waitQueueTimeout
		var re *runnerError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "did not end within 1s") {
			t.Fatalf("second checkOut: %v, want a runner error saying it did not end", err)
		}
	})
}
