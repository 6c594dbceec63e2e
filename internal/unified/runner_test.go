package unified

import (
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/internal/leakcheck"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
)

// TestMain fails the run if a goroutine outlives the tests: the runner has
// to close every pool, monitor and test server a test makes.
func TestMain(m *testing.M) { leakcheck.Main(m) }

// runJSON runs the only test of a file given as JSON.
func runJSON(t *testing.T, js string) error {
	t.Helper()
	f, err := loadFile([]byte(js))
	if err != nil {
		return err
	}
	if len(f.tests) != 1 {
		t.Fatalf("want one test, got %d", len(f.tests))
	}
	return runTest(t, f, f.tests[0], nil)
}

// runJSONWith runs the only test of a file given as JSON, with the run set
// up by setup, and returns the run, entities included.
func runJSONWith(t *testing.T, js string, setup func(*testRun)) (*testRun, error) {
	t.Helper()
	f, err := loadFile([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.tests) != 1 {
		t.Fatalf("want one test, got %d", len(f.tests))
	}
	r := newTestRun(t, f.tests[0])
	setup(r)
	return r, r.run(f, f.tests[0])
}

// closeTest creates an observed client, waits for its pool to be ready (the
// monitor found the server) and closes it: its messages are exactly pool
// created, pool ready, pool closed (no connection, no session).
func closeTest(extra, expect string) string {
	return `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t",
		"operations": [
			{"name": "createEntities", "object": "testRunner", "arguments": {"entities": [
				{"client": {"id": "client", "observeLogMessages": {"connection": "debug"}, "observeEvents": ["poolReadyEvent"]` + extra + `}}]}},
			{"name": "waitForEvent", "object": "testRunner", "arguments": {"client": "client", "event": {"poolReadyEvent": {}}, "count": 1}},
			{"name": "close", "object": "client"}],
		"expectLogMessages": [` + expect + `]}]}`
}

func logMsg(level, msg string) string {
	return `{"level": "` + level + `", "component": "connection", "data": {"message": "` + msg + `",
		"serverHost": {"$$type": "string"}, "serverPort": {"$$type": ["int", "long"]}}}`
}

var (
	msgCreated = logMsg("debug", "Connection pool created")
	msgReady   = logMsg("debug", "Connection pool ready")
	msgClosed  = logMsg("debug", "Connection pool closed")
)

// The runner passes what matches and fails, naming the problem, what does
// not or what it cannot run.
func TestRunner(t *testing.T) {
	exact := `{"client": "client", "messages": [` + msgCreated + `,` + msgReady + `,` + msgClosed + `]}`
	for _, tc := range []struct {
		name string
		js   string
		want string // "" for a pass, "skip:" prefix for a skip, else a substring of the error
	}{
		{"exact messages", closeTest("", exact), ""},
		{"an extra message", closeTest("", `{"client": "client", "messages": [`+msgCreated+`,`+msgReady+`]}`), "the extra ones"},
		{"a missing message", closeTest("", `{"client": "client", "messages": [`+msgCreated+`,`+msgReady+`,`+msgClosed+`,`+msgClosed+`]}`), "missing messages[3]"},
		{"out of order", closeTest("", `{"client": "client", "messages": [`+msgReady+`,`+msgCreated+`,`+msgClosed+`]}`), "messages[0] does not match"},
		{"wrong level", closeTest("", `{"client": "client", "messages": [`+logMsg("info", "Connection pool created")+`,`+msgReady+`,`+msgClosed+`]}`), "level debug, want info"},
		{"wrong data type", closeTest("", `{"client": "client", "messages": [{"level": "debug", "component": "connection", "data": {"message": "Connection pool created", "serverPort": {"$$type": "string"}}},`+msgReady+`,`+msgClosed+`]}`), "serverPort"},
		{"ignoreMessages", closeTest("", `{"client": "client", "messages": [`+msgCreated+`,`+msgClosed+`], "ignoreMessages": [`+msgReady+`]}`), ""},
		{"ignoreExtraMessages", closeTest("", `{"client": "client", "messages": [`+msgCreated+`], "ignoreExtraMessages": true}`), ""},
		{"observed at info: no debug messages", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t",
			"operations": [{"name": "createEntities", "object": "testRunner", "arguments": {"entities": [
				{"client": {"id": "client", "observeLogMessages": {"connection": "info"}}}]}},
				{"name": "listDatabases", "object": "client", "arguments": {"filter": {}}}],
			"expectLogMessages": [{"client": "client", "messages": []}]}]}`, ""},
		{"failureIsRedacted on a message without failure", closeTest("", `{"client": "client", "messages": [`+
			`{"level": "debug", "component": "connection", "failureIsRedacted": true, "data": {"message": "Connection pool created"}},`+msgReady+`,`+msgClosed+`]}`), "no failure"},
		{"unknown operation", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [{"name": "insertOne", "object": "c", "arguments": {"document": {}}}]}]}`, `unknown operation "insertOne"`},
		{"unsupported uriOption", closeTest(`, "uriOptions": {"tlsDisableOCSPEndpointCheck": true}`, exact), "tlsDisableOCSPEndpointCheck"},
		{"unsupported client field", closeTest(`, "awaitMinPoolSizeMS": 1000`, exact), `does not support "awaitMinPoolSizeMS"`},
		{"unknown client field", closeTest(`, "observeLogs": {}`, exact), `unknown field "observeLogs"`},
		{"unknown log component", closeTest("", `{"client": "client", "messages": [{"level": "debug", "component": "pool", "data": {}}]}`), `unknown log component "pool"`},
		{"unknown level", closeTest("", `{"client": "client", "messages": [{"level": "verbose", "component": "connection", "data": {}}]}`), `unknown log level "verbose"`},
		{"requirement not met", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t",
			"runOnRequirements": [{"maxServerVersion": "4.0"}], "operations": []}]}`, "skip:"},
		{"a deployment without authentication", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t",
			"runOnRequirements": [{"auth": false}], "operations": [
				{"name": "createEntities", "object": "testRunner", "arguments": {"entities": [{"client": {"id": "c"}}]}},
				{"name": "listDatabases", "object": "c"}]}]}`, ""},
		{"file requirement not met", `{"description": "f", "schemaVersion": "1.13", "runOnRequirements": [{"minServerVersion": "99"}],
			"tests": [{"description": "t", "operations": []}]}`, "skip:"},
		{"requirements met", `{"description": "f", "schemaVersion": "1.13", "runOnRequirements": [{"topologies": ["single"], "serverless": "forbid"}],
			"tests": [{"description": "t", "runOnRequirements": [{"auth": true, "minServerVersion": "4.0"}], "operations": []}]}`, ""},
		{"skipReason", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t", "skipReason": "why", "operations": []}]}`, "skip:"},
		{"unsupported test field", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t", "operations": [], "expectTracingMessages": {}}]}`, `does not support "expectTracingMessages"`},
		{"unknown file field", `{"description": "f", "schemaVersion": "1.13", "initialDocuments": [], "tests": [{"description": "t", "operations": []}]}`, `unknown field "initialDocuments"`},
		{"newer schema", `{"description": "f", "schemaVersion": "1.99", "tests": [{"description": "t", "operations": []}]}`, "schemaVersion 1.99 is not supported"},
		{"unknown special operation", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t", "operations": [
			{"name": "assertSessionPined", "object": "testRunner", "arguments": {}}]}]}`, `unknown special operation "assertSessionPined"`},
		{"an entity of a missing feature", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"bucket": {"id": "b", "database": "d"}}],
			"tests": [{"description": "t", "operations": []}]}`, "skip:createEntities[0]: the project has no GridFS"},
		{"a session of a missing client", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"session": {"id": "s", "client": "c"}}],
			"tests": [{"description": "t", "operations": []}]}`, `no entity named "c"`},
		{"an entity type the format has not", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"sesion": {"id": "s", "client": "c"}}],
			"tests": [{"description": "t", "operations": []}]}`, `unknown field "sesion"`},
		{"duplicate entity", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}, {"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": []}]}`, `an entity named "c" already exists`},
		{"missing entity", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t", "operations": [
			{"name": "listDatabases", "object": "client0"}]}]}`, `no entity named "client0"`},
		{"unknown argument", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [{"name": "listDatabases", "object": "c", "arguments": {"fliter": {}}}]}]}`, `unknown field "fliter"`},
		{"an error expected, none came", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [{"name": "listDatabases", "object": "c", "expectError": {"isError": true}}]}]}`, "want an error"},
		{"expectResult", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [{"name": "listDatabases", "object": "c",
				"expectResult": [{"name": "admin"}, {"name": "config"}, {"name": "local"}]}]}]}`, ""},
		{"expectResult mismatch", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [{"name": "listDatabases", "object": "c", "expectResult": [{"name": "admin"}]}]}]}`, "expectResult"},
		{"server error: not a client error", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [
				{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {"failCommands": ["listDatabases"], "errorCode": 2}}}},
				{"name": "listDatabases", "object": "c", "expectError": {"isClientError": true}}]}]}`, "want a client error"},
		{"server error: code and name", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [
				{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {"failCommands": ["listDatabases"], "errorCode": 2}}}},
				{"name": "listDatabases", "object": "c", "expectError": {"isClientError": false, "errorCode": 2, "errorContains": "FAILCOMMAND", "errorResponse": {"code": 2}, "errorLabelsOmit": ["RetryableError"]}}]}]}`, ""},
		{"a retryable error with retryReads on: the read is retried", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [
				{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {"failCommands": ["listDatabases"], "closeConnection": true}}}},
				{"name": "listDatabases", "object": "c", "expectResult": {"$$type": "array"}}]}]}`, ""},
		{"a retryable error with retryReads off: no retry", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c", "uriOptions": {"retryReads": false}}}],
			"tests": [{"description": "t", "operations": [
				{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {"failCommands": ["listDatabases"], "closeConnection": true}}}},
				{"name": "listDatabases", "object": "c", "expectError": {"isClientError": true}}]}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// checkOutcome checks a test's outcome against want: "" for a pass, "skip:"
// and a substring of the reason for a skip, else a substring of the error.
func checkOutcome(t *testing.T, err error, want string) {
	t.Helper()
	var skip *skipError
	switch {
	case want == "" && err != nil:
		t.Fatalf("want a pass, got %v", err)
	case strings.HasPrefix(want, "skip:"):
		if !errors.As(err, &skip) {
			t.Fatalf("want a skip, got %v", err)
		}
		if why := strings.TrimPrefix(want, "skip:"); !strings.Contains(skip.reason, why) {
			t.Fatalf("skipped for %q, want a reason with %q", skip.reason, why)
		}
	case want != "" && (err == nil || errors.As(err, &skip) || !strings.Contains(err.Error(), want)):
		t.Fatalf("got %v, want an error with %q", err, want)
	}
}

// The capture keeps the observed component at its level and above, maps
// slog levels to the specification's names, and drops what comes after stop.
func TestCapture(t *testing.T) {
	c, err := newCapture(ej(t, `{"connection": "info", "command": "off"}`).Document())
	if err != nil {
		t.Fatal(err)
	}
	l := slog.New(c.handler())
	if l.Enabled(t.Context(), slog.LevelDebug) || !l.Enabled(t.Context(), slog.LevelInfo) {
		t.Fatal("Enabled does not follow the observed level")
	}
	l.Info("kept", "component", "connection", "n", 3, "d", 1500*time.Microsecond, "err", errors.New("boom"))
	l.Warn("kept too", "component", "connection")
	l.With("component", "connection").WithGroup("g").Info("grouped", "x", true)
	l.Debug("too low", "component", "connection")
	l.Info("other component", "component", "command")
	l.Info("no component")
	c.stop()
	l.Error("after stop", "component", "connection")
	got, err := c.captured()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`info connection {"message":"kept","n":3,"d":1.5,"err":"boom"}`,
		`warn connection {"message":"kept too"}`,
		`info connection {"message":"grouped","g":{"x":true}}`,
	}
	if len(got) != len(want) {
		t.Fatalf("captured:\n%s", dumpLogs(got))
	}
	if typ := got[0].data.Lookup("n").Type; typ != bson.TypeInt64 {
		t.Errorf("an int attribute became a %s, want a long", typ)
	}
	for i, m := range got {
		if s := m.level + " " + m.component + " " + show(docValue(m.data)); s != want[i] {
			t.Errorf("[%d] %s, want %s", i, s, want[i])
		}
	}

	// A value the runner cannot represent is an error, not a silent miss.
	c2, _ := newCapture(ej(t, `{"connection": "debug"}`).Document())
	slog.New(c2.handler()).Debug("m", "component", "connection", "v", struct{}{})
	if _, err := c2.captured(); err == nil || !strings.Contains(err.Error(), `attribute "v"`) {
		t.Fatalf("captured: %v, want an error about v", err)
	}

	for _, bad := range []string{`{"pool": "debug"}`, `{"connection": "loud"}`, `{"connection": 1}`} {
		if _, err := newCapture(ej(t, bad).Document()); err == nil {
			t.Errorf("newCapture(%s) accepted", bad)
		}
	}
	for l, name := range map[slog.Level]string{slog.LevelDebug - 4: "trace", slog.LevelDebug: "debug", slog.LevelInfo: "info",
		slog.LevelInfo + 2: "notice", slog.LevelWarn: "warn", slog.LevelError: "error", slog.LevelError + 12: "emergency"} {
		if got := LevelName(l); got != name {
			t.Errorf("LevelName(%v) = %s, want %s", l, got, name)
		}
	}
}

// oneTest builds a file of one test from JSON fragments: top goes into the
// file's top level (after a comma), test into the test's.
func oneTest(top, test string) string {
	return `{"description": "f", "schemaVersion": "1.4"` + top + `, "tests": [{"description": "t"` + test + `}]}`
}

// The eleven CMAP event types, as observeEvents names them.
const allCMAP = `["poolCreatedEvent", "poolReadyEvent", "poolClearedEvent", "poolClosedEvent",
	"connectionCreatedEvent", "connectionReadyEvent", "connectionClosedEvent", "connectionCheckOutStartedEvent",
	"connectionCheckOutFailedEvent", "connectionCheckedOutEvent", "connectionCheckedInEvent"]`

// Entities and operations the tests below share: client c (observing what
// it is given), database d on it, collection coll in d.
func entities(clientExtra string) string {
	return `, "createEntities": [{"client": {"id": "c"` + clientExtra + `}},
		{"database": {"id": "d", "client": "c", "databaseName": "db"}},
		{"collection": {"id": "coll", "database": "d", "collectionName": "coll"}}]`
}

const (
	pingOp  = `{"name": "runCommand", "object": "d", "arguments": {"commandName": "ping", "command": {"ping": 1}}}`
	closeOp = `{"name": "close", "object": "c"}`
	// failNextPing makes the next ping close its connection: a network error
	// that clears the pool.
	failNextPing = `{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint":
		{"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {"failCommands": ["ping"], "closeConnection": true}}}}`
	failedPingOp = `{"name": "runCommand", "object": "d", "arguments": {"commandName": "ping", "command": {"ping": 1}},
		"expectError": {"isClientError": true}}`
)

// pingAndClose is the CMAP events of a ping on a new client, then its close:
// one connection made, the ping, the endSessions of close, the pool closed.
var pingAndClose = []string{
	`{"poolCreatedEvent": {}}`, `{"poolReadyEvent": {}}`,
	`{"connectionCheckOutStartedEvent": {}}`, `{"connectionCreatedEvent": {}}`, `{"connectionReadyEvent": {}}`,
	`{"connectionCheckedOutEvent": {}}`, `{"connectionCheckedInEvent": {}}`,
	// Close's endSessions, which ends the implicit session of the ping.
	`{"connectionCheckOutStartedEvent": {}}`, `{"connectionCheckedOutEvent": {}}`, `{"connectionCheckedInEvent": {}}`,
	`{"connectionClosedEvent": {"reason": "poolClosed"}}`, `{"poolClosedEvent": {}}`,
}

// cmapTest observes the CMAP events of client c, runs ops and expects events.
func cmapTest(observe, ops, expect string) string {
	return oneTest(entities(`, "observeEvents": `+observe), `, "operations": [`+ops+`], "expectEvents": [`+expect+`]`)
}

// expectCMAP is an expectedEventsForClient of c, of eventType cmap; extra
// goes into it (after a comma).
func expectCMAP(extra string, events ...string) string {
	return `{"client": "c", "eventType": "cmap", "events": [` + strings.Join(events, ", ") + `]` + extra + `}`
}

// The runner observes the CMAP events of its clients and matches them with
// expectEvents, waitForEvent and assertEventCount by the format's rules.
func TestRunnerEvents(t *testing.T) {
	n := len(pingAndClose)
	wrongReason := append(append([]string(nil), pingAndClose[:n-2]...), `{"connectionClosedEvent": {"reason": "stale"}}`, pingAndClose[n-1])
	cleared := func(ops string) string {
		return cmapTest(`["poolClearedEvent"]`, pingOp+`, `+failNextPing+`, `+failedPingOp+ops, expectCMAP(`, "ignoreExtraEvents": true`))
	}
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"all events in order", cmapTest(allCMAP, pingOp+", "+closeOp, expectCMAP("", pingAndClose...)), ""},
		{"a missing event", cmapTest(allCMAP, pingOp+", "+closeOp, expectCMAP("", append(pingAndClose, `{"poolClosedEvent": {}}`)...)), "missing events[12]"},
		{"an extra event", cmapTest(allCMAP, pingOp+", "+closeOp, expectCMAP("", pingAndClose[:n-1]...)), "the extra ones"},
		{"ignoreExtraEvents", cmapTest(allCMAP, pingOp+", "+closeOp, expectCMAP(`, "ignoreExtraEvents": true`, pingAndClose[:3]...)), ""},
		{"out of order", cmapTest(allCMAP, pingOp+", "+closeOp, expectCMAP("", append([]string{pingAndClose[1], pingAndClose[0]}, pingAndClose[2:]...)...)), "events[0] does not match"},
		{"a wrong reason", cmapTest(allCMAP, pingOp+", "+closeOp, expectCMAP("", wrongReason...)), `reason "poolClosed", want "stale"`},
		{"no events expected", cmapTest(allCMAP, pingOp, expectCMAP("")), "the extra ones"},
		{"only the observed types", cmapTest(`["connectionCheckedInEvent", "poolClosedEvent"]`, pingOp+", "+closeOp,
			expectCMAP("", `{"connectionCheckedInEvent": {}}`, `{"connectionCheckedInEvent": {}}`, `{"poolClosedEvent": {}}`)), ""},
		{"an unknown event type observed", cmapTest(`["poolCreated"]`, pingOp, expectCMAP("")), `unknown event type "poolCreated"`},
		{"an unknown event type expected", cmapTest(allCMAP, pingOp, expectCMAP("", `{"poolCreated": {}}`)), `unknown event type "poolCreated"`},
		{"an SDAM event observed", cmapTest(`["poolClearedEvent", "serverDescriptionChangedEvent"]`, pingOp, expectCMAP("")), ""},
		{"command events expected of a client that observes none", cmapTest(allCMAP, pingOp, `{"client": "c", "events": [{"commandStartedEvent": {"commandName": "ping"}}]}`),
			"missing events[0]"},
		{"an empty list of command events: the client observes none", cmapTest(allCMAP, pingOp, `{"client": "c", "eventType": "command", "events": []}`), ""},
		{"a command event in a cmap list", cmapTest(allCMAP, pingOp, expectCMAP("", `{"commandStartedEvent": {}}`)), "not a cmap event"},
		{"an unknown eventType", cmapTest(allCMAP, pingOp, `{"client": "c", "eventType": "pool", "events": []}`), `unknown eventType "pool"`},
		{"an assertion on an event that has none", cmapTest(allCMAP, pingOp, expectCMAP("", `{"poolCreatedEvent": {"address": "x"}}`)), `unknown field "address"`},
		{"expectEvents for a client that observes none", oneTest(entities(""), `, "operations": [`+pingOp+`], "expectEvents": [`+expectCMAP("")+`]`),
			`the client "c" observes no events`},
		{"ignoreCommandMonitoringEvents", cmapTest(`["poolClosedEvent"], "ignoreCommandMonitoringEvents": ["ping"]`, pingOp, expectCMAP("")), ""},
		{"poolClearedEvent fields", cleared(`, {"name": "waitForEvent", "object": "testRunner", "arguments": {"client": "c",
			"event": {"poolClearedEvent": {"hasServiceId": false, "interruptInUseConnections": false}}, "count": 1}},
			{"name": "assertEventCount", "object": "testRunner", "arguments": {"client": "c", "event": {"poolClearedEvent": {}}, "count": 1}}`), ""},
		{"assertEventCount: a count that differs", cleared(`, {"name": "waitForEvent", "object": "testRunner", "arguments": {"client": "c",
			"event": {"poolClearedEvent": {}}, "count": 1}},
			{"name": "assertEventCount", "object": "testRunner", "arguments": {"client": "c", "event": {"poolClearedEvent": {}}, "count": 2}}`),
			"1 matching events, want 2"},
		{"assertEventCount: fewer than observed", cleared(`, {"name": "waitForEvent", "object": "testRunner", "arguments": {"client": "c",
			"event": {"poolClearedEvent": {}}, "count": 1}},
			{"name": "assertEventCount", "object": "testRunner", "arguments": {"client": "c", "event": {"poolClearedEvent": {}}, "count": 0}}`),
			"1 matching events, want 0"},
		{"assertEventCount: interruptInUseConnections differs", cleared(`, {"name": "waitForEvent", "object": "testRunner", "arguments": {"client": "c",
			"event": {"poolClearedEvent": {}}, "count": 1}},
			{"name": "assertEventCount", "object": "testRunner", "arguments": {"client": "c", "event": {"poolClearedEvent": {"interruptInUseConnections": true}}, "count": 1}}`),
			"0 matching events, want 1"},
		{"assertEventCount: fields that differ", cleared(`, {"name": "waitForEvent", "object": "testRunner", "arguments": {"client": "c",
			"event": {"poolClearedEvent": {}}, "count": 1}},
			{"name": "assertEventCount", "object": "testRunner", "arguments": {"client": "c", "event": {"poolClearedEvent": {"hasServiceId": true}}, "count": 1}}`),
			"0 matching events, want 1"},
		{"assertEventCount of an event not observed", cmapTest(`["poolClearedEvent"]`, pingOp+`, {"name": "assertEventCount", "object": "testRunner",
			"arguments": {"client": "c", "event": {"connectionReadyEvent": {}}, "count": 0}}`, expectCMAP("")), "does not observe connectionReadyEvent"},
		{"waitForEvent of an SDAM event not observed", cmapTest(`["poolClearedEvent"]`, `{"name": "waitForEvent", "object": "testRunner",
			"arguments": {"client": "c", "event": {"serverDescriptionChangedEvent": {}}, "count": 1}}`, expectCMAP("")),
			"does not observe serverDescriptionChangedEvent"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// initialData puts three documents in db.coll.
const initialData = `, "initialData": [{"databaseName": "db", "collectionName": "coll", "documents": [{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}]}]`

// opsTest is a file of one test: entities c, d and coll, top in the file
// (after a comma), and the operations ops.
func opsTest(top, ops string) string {
	return oneTest(entities("")+top, `, "operations": [`+ops+`]`)
}

// findOp is a find on coll with the arguments args, expecting result.
func findOp(args, result string) string {
	return `{"name": "find", "object": "coll", "arguments": {` + args + `}, "expectResult": ` + result + `}`
}

// The runner runs the database and collection operations the tests use, with
// initialData loaded before each test.
func TestRunnerOperations(t *testing.T) {
	all := `[{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}]`
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"initialData and find", opsTest(initialData, findOp(`"filter": {}`, all)), ""},
		{"find: a result that differs", opsTest(initialData, findOp(`"filter": {}`, `[{"_id": 1}, {"_id": 2}]`)), "expectResult"},
		{"find: documents are root-level", opsTest(initialData, findOp(`"filter": {"x": "b"}`, `[{"_id": 2}]`)), ""},
		{"find: batches gathered with getMore", opsTest(initialData, findOp(`"filter": {}, "batchSize": 1`, all)), ""},
		{"find: limit", opsTest(initialData, findOp(`"filter": {}, "batchSize": 1, "limit": 2`, `[{"_id": 1}, {"_id": 2}]`)), ""},
		{"find: sort", opsTest(initialData, findOp(`"filter": {}, "sort": {"_id": -1}, "batchSize": 1`, `[{"_id": 3}, {"_id": 2}, {"_id": 1}]`)), ""},
		{"find: skip", opsTest(initialData, findOp(`"filter": {}, "skip": 1`, `[{"_id": 2}, {"_id": 3}]`)), ""},
		{"countDocuments", opsTest(initialData, `{"name": "countDocuments", "object": "coll", "arguments": {"filter": {}}, "expectResult": 3},
			{"name": "countDocuments", "object": "coll", "arguments": {"filter": {"x": "b"}}, "expectResult": 1},
			{"name": "countDocuments", "object": "coll", "arguments": {"filter": {}, "skip": 2}, "expectResult": 1},
			{"name": "countDocuments", "object": "coll", "arguments": {"filter": {}, "limit": 2}, "expectResult": 2},
			{"name": "countDocuments", "object": "coll", "arguments": {"filter": {"x": "z"}}, "expectResult": 0}`), ""},
		{"countDocuments: a count that differs", opsTest(initialData, `{"name": "countDocuments", "object": "coll", "arguments": {"filter": {}}, "expectResult": 2}`),
			"expectResult"},
		{"aggregate", opsTest(initialData, `{"name": "aggregate", "object": "coll", "arguments": {"pipeline": [{"$match": {}}, {"$sort": {"_id": -1}}], "batchSize": 1},
			"expectResult": [{"_id": 3}, {"_id": 2}, {"_id": 1}]},
			{"name": "aggregate", "object": "coll", "arguments": {"pipeline": [{"$match": {"x": "z"}}]}, "expectResult": []}`), ""},
		{"aggregate: a result that differs", opsTest(initialData, `{"name": "aggregate", "object": "coll", "arguments": {"pipeline": [{"$sort": {"_id": 1}}]},
			"expectResult": [{"_id": 3}, {"_id": 2}, {"_id": 1}]}`), "expectResult"},
		{"find: an unknown argument", opsTest(initialData, findOp(`"filter": {}, "hnit": "_id_"`, all)), `unknown field "hnit"`},
		{"insertOne", opsTest(initialData, `{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 4, "x": "d"}},
			"expectResult": {"$$unsetOrMatches": {"insertedId": {"$$unsetOrMatches": 4}}}}, `+
			findOp(`"filter": {"_id": 4}`, `[{"_id": 4, "x": "d"}]`)), ""},
		{"insertOne: an _id made by the client", opsTest(initialData, `{"name": "insertOne", "object": "coll", "arguments": {"document": {"x": "d"}}}, `+
			findOp(`"filter": {"x": "d"}`, `[{"_id": {"$$type": "objectId"}, "x": "d"}]`)), ""},
		{"insertOne: a duplicate key", opsTest(initialData, `{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 1}},
			"expectError": {"isClientError": false, "errorCode": 11000}}`), ""},
		{"insertOne: an unexpected write error", opsTest(initialData, `{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 1}}}`), "E11000"},
		{"insertMany", opsTest(initialData, `{"name": "insertMany", "object": "coll", "arguments": {"documents": [{"_id": 4}, {"_id": 5}]},
			"expectResult": {"$$unsetOrMatches": {"insertedIds": {"$$unsetOrMatches": {"0": 4, "1": 5}}}}}, `+
			findOp(`"filter": {}`, `[{"_id": 1}, {"_id": 2}, {"_id": 3}, {"_id": 4}, {"_id": 5}]`)), ""},
		{"insertMany: unordered", opsTest(initialData, `{"name": "insertMany", "object": "coll", "arguments": {"documents": [{"_id": 1}, {"_id": 5}], "ordered": false},
			"expectError": {"errorCode": 11000}}, `+findOp(`"filter": {"_id": 5}`, `[{"_id": 5}]`)), ""},
		{"a network error on a write, with retryWrites on: a driver does not retry writes on a single server", opsTest(initialData,
			`{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand",
				"mode": {"times": 1}, "data": {"failCommands": ["insert"], "closeConnection": true}}}},
			{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 4}}, "expectError": {"isClientError": true}}`), ""},
		{"a network error on a find, with retryReads on: the find is retried", opsTest(initialData,
			`{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand",
				"mode": {"times": 1}, "data": {"failCommands": ["find"], "closeConnection": true}}}}, `+findOp(`"filter": {}`, all)), ""},
		{"runCommand", opsTest("", `{"name": "runCommand", "object": "d", "arguments": {"commandName": "ping", "command": {"ping": 1},
			"readPreference": {"mode": "primary"}}, "expectResult": {"ok": 1}}`), ""},
		{"runCommand: commandName differs", opsTest("", `{"name": "runCommand", "object": "d", "arguments": {"commandName": "hello", "command": {"ping": 1}}}`),
			`commandName "hello"`},
		{"runCommand: a read preference other than primary", opsTest("", `{"name": "runCommand", "object": "d", "arguments": {"commandName": "ping", "command": {"ping": 1},
			"readPreference": {"mode": "secondary", "tagSets": [{"dc": "ny"}, {}], "maxStalenessSeconds": 90}}, "expectResult": {"ok": 1}}`), ""},
		{"runCommand: an invalid read preference", opsTest("", `{"name": "runCommand", "object": "d", "arguments": {"commandName": "ping", "command": {"ping": 1},
			"readPreference": {"mode": "primary", "tagSets": [{"dc": "ny"}]}}}`), "tag sets are not allowed with mode primary"},
		{"runCommand: hedge", opsTest("", `{"name": "runCommand", "object": "d", "arguments": {"commandName": "ping", "command": {"ping": 1},
			"readPreference": {"mode": "nearest", "hedge": {"enabled": true}}}}`), `does not support "hedge"`},
		{"runCommand: a command the test server does not have", opsTest("", `{"name": "runCommand", "object": "d", "arguments": {"commandName": "compact",
			"command": {"compact": "coll"}}}`), "skip:the test server does not implement the command compact"},
		{"runCommand: a session that does not exist", opsTest("", `{"name": "runCommand", "object": "d", "arguments": {"commandName": "ping", "command": {"ping": 1}, "session": "s"}}`),
			`no entity named "s"`},
		{"an unknown collection operation", opsTest("", `{"name": "findAndModify", "object": "coll", "arguments": {}}`),
			`unknown operation "findAndModify" for a collection`},
		{"an operation the runner refuses", opsTest("", `{"name": "mapReduce", "object": "coll", "arguments": {}}`),
			"skip:test \"t\" operation 0 (mapReduce on coll): the runner has no mapReduce operation"},
		{"updateOne", opsTest(initialData, `{"name": "updateOne", "object": "coll", "arguments": {"filter": {"_id": 1}, "update": {"$set": {"x": "z"}}},
			"expectResult": {"matchedCount": 1, "modifiedCount": 1, "upsertedCount": 0}}, `+findOp(`"filter": {"x": "z"}`, `[{"_id": 1}]`)), ""},
		{"updateMany", opsTest(initialData, `{"name": "updateMany", "object": "coll", "arguments": {"filter": {"_id": {"$gte": 2}}, "update": {"$set": {"y": 1}}},
			"expectResult": {"matchedCount": 2, "modifiedCount": 2, "upsertedCount": 0}}, `+findOp(`"filter": {"y": 1}`, `[{"_id": 2}, {"_id": 3}]`)), ""},
		{"replaceOne with upsert", opsTest(initialData, `{"name": "replaceOne", "object": "coll", "arguments": {"filter": {"_id": 9}, "replacement": {"x": "r"}, "upsert": true},
			"expectResult": {"matchedCount": 0, "modifiedCount": 0, "upsertedCount": 1, "upsertedId": 9}}, `+findOp(`"filter": {"_id": 9}`, `[{"_id": 9, "x": "r"}]`)), ""},
		{"replaceOne: a pipeline", opsTest(initialData, `{"name": "replaceOne", "object": "coll", "arguments": {"filter": {}, "replacement": [{"$set": {"x": 1}}]}}`),
			"replacement: want a document"},
		{"updateOne: a result that differs", opsTest(initialData, `{"name": "updateOne", "object": "coll", "arguments": {"filter": {"_id": 7}, "update": {"$set": {"x": "z"}}},
			"expectResult": {"matchedCount": 1}}`), "expectResult"},
		{"deleteOne and deleteMany", opsTest(initialData, `{"name": "deleteOne", "object": "coll", "arguments": {"filter": {}}, "expectResult": {"deletedCount": 1}},
			{"name": "deleteMany", "object": "coll", "arguments": {"filter": {}}, "expectResult": {"deletedCount": 2}}, `+findOp(`"filter": {}`, `[]`)), ""},
		{"a database of a missing client", oneTest(`, "createEntities": [{"database": {"id": "d", "client": "c", "databaseName": "db"}}]`, `, "operations": []`),
			`no entity named "c"`},
		{"a collection of a client", oneTest(`, "createEntities": [{"client": {"id": "c"}}, {"collection": {"id": "coll", "database": "c", "collectionName": "x"}}]`,
			`, "operations": []`), `"c" is a client, not a database`},
		{"collectionOptions", oneTest(`, "createEntities": [{"client": {"id": "c"}}, {"database": {"id": "d", "client": "c", "databaseName": "db"}},
			{"collection": {"id": "coll", "database": "d", "collectionName": "x", "collectionOptions": {"timeoutMS": 100}}}]`, `, "operations": []`),
			`does not support "timeoutMS"`},
		{"initialData: an empty collection is created", opsTest(`, "initialData": [{"databaseName": "db", "collectionName": "empty", "documents": []}]`,
			`{"name": "runCommand", "object": "d", "arguments": {"commandName": "listCollections", "command": {"listCollections": 1, "nameOnly": true}},
			"expectResult": {"cursor": {"$$matchAsRoot": {"firstBatch": [{"name": "empty", "type": "collection"}]}}}}`), ""},
		{"outcome", oneTest(entities("")+initialData, `, "operations": [{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 4}}}],
			"outcome": [{"databaseName": "db", "collectionName": "coll", "documents": [{"x": "a", "_id": 1}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}, {"_id": 4}]}]`), ""},
		{"outcome: a document missing", oneTest(entities("")+initialData, `, "operations": [],
			"outcome": [{"databaseName": "db", "collectionName": "coll", "documents": [{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}]}]`), "db.coll holds"},
		{"outcome: a field more", oneTest(entities("")+initialData, `, "operations": [],
			"outcome": [{"databaseName": "db", "collectionName": "coll", "documents": [{"_id": 1}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}]}]`), "db.coll holds"},
		{"outcome: a type that differs", oneTest(entities("")+initialData, `, "operations": [],
			"outcome": [{"databaseName": "db", "collectionName": "coll", "documents": [{"_id": {"$numberLong": "1"}, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}]}]`), "db.coll holds"},
		{"outcome: an empty collection", oneTest(entities(""), `, "operations": [],
			"outcome": [{"databaseName": "db", "collectionName": "none", "documents": []}]`), ""},
		{"wait", opsTest("", `{"name": "wait", "object": "testRunner", "arguments": {"ms": 1}}`), ""},
		{"wait without ms", opsTest("", `{"name": "wait", "object": "testRunner", "arguments": {}}`), `missing required field "ms"`},
		{"waitQueueSize", oneTest(`, "createEntities": [{"client": {"id": "c", "uriOptions": {"waitQueueSize": 10}}}]`, `, "operations": []`),
			"skip:uriOptions.waitQueueSize"},
		{"waitQueueMultiple", oneTest(`, "createEntities": [{"client": {"id": "c", "uriOptions": {"waitQueueMultiple": 2}}}]`, `, "operations": []`),
			"skip:uriOptions.waitQueueMultiple"},
		{"a failure wins over a skip", oneTest(`, "createEntities": [{"client": {"id": "c", "uriOptions": {"waitQueueSize": 10, "tlsDisableOCSPEndpointCheck": true}}}]`,
			`, "operations": []`), "tlsDisableOCSPEndpointCheck"},
		{"loadBalanced against a server that is not behind a load balancer", oneTest(`, "createEntities": [{"client": {"id": "c", "uriOptions": {"loadBalanced": true}}},
			{"database": {"id": "d", "client": "c", "databaseName": "db"}}]`, `, "operations": [{"name": "runCommand", "object": "d",
			"arguments": {"commandName": "ping", "command": {"ping": 1}}, "expectError":
			{"errorContains": "Driver attempted to initialize in load balancing mode, but the server does not support this mode"}}]`), ""},
		{"heartbeatFrequencyMS", oneTest(`, "createEntities": [{"client": {"id": "c", "uriOptions": {"heartbeatFrequencyMS": 500, "maxConnecting": 1}}}]`,
			`, "operations": []`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// threadOp runs op on a thread.
func threadOp(thread, op string) string {
	return `{"name": "runOnThread", "object": "testRunner", "arguments": {"thread": "` + thread + `", "operation": ` + op + `}}`
}

// waitForThread waits for a thread.
func waitForThread(thread string) string {
	return `{"name": "waitForThread", "object": "testRunner", "arguments": {"thread": "` + thread + `"}}`
}

// threads creates the thread entities t0 and t1.
const threads = `{"name": "createEntities", "object": "testRunner", "arguments": {"entities": [{"thread": {"id": "t0"}}, {"thread": {"id": "t1"}}]}}`

// Thread entities run operations concurrently; their failures fail the test.
func TestRunnerThreads(t *testing.T) {
	insert := func(id int) string {
		return `{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": ` + strconv.Itoa(id) + `}}}`
	}
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"operations on threads", opsTest(initialData, threads+", "+threadOp("t0", insert(4))+", "+threadOp("t0", insert(5))+", "+threadOp("t1", insert(6))+", "+
			waitForThread("t0")+", "+waitForThread("t1")+", "+findOp(`"filter": {"_id": 4}`, `[{"_id": 4}]`)+", "+
			findOp(`"filter": {"_id": 5}`, `[{"_id": 5}]`)+", "+findOp(`"filter": {"_id": 6}`, `[{"_id": 6}]`)), ""},
		{"a thread's failure", opsTest(initialData, threads+", "+threadOp("t0", insert(1))+", "+waitForThread("t0")), `thread "t0"`},
		{"a failure on a thread not waited for", opsTest(initialData, threads+", "+threadOp("t0", insert(1))), `thread "t0"`},
		{"an unknown thread", opsTest("", threadOp("t9", insert(4))), `no entity named "t9"`},
		{"waitForThread on a client", opsTest("", waitForThread("c")), `"c" is a client, not a thread`},
		{"a special operation on a thread", opsTest("", threads+", "+threadOp("t0", `{"name": "wait", "object": "testRunner", "arguments": {"ms": 1}}`)+", "+waitForThread("t0")),
			"runOnThread runs entity operations"},
		{"runOnThread after waitForThread", opsTest("", threads+", "+waitForThread("t0")+", "+threadOp("t0", insert(4))), `thread "t0" has been waited for`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// waitForEvent and waitForThread fail the test, with what they waited for,
// when it does not come in time.
func TestRunnerWaitTimeouts(t *testing.T) {
	short := func(r *testRun) { r.waitTimeout = 50 * time.Millisecond }
	_, err := runJSONWith(t, cmapTest(`["poolClearedEvent"]`, pingOp+`, {"name": "waitForEvent", "object": "testRunner",
		"arguments": {"client": "c", "event": {"poolClearedEvent": {}}, "count": 1}}`, expectCMAP("")), short)
	checkOutcome(t, err, "0 matching events after 50ms, want 1")

	// The insert blocks on the server for longer than the test: the
	// thread's operation is canceled when the test ends, and its goroutine
	// ends then (TestMain checks that none is left).
	block := `{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand",
		"mode": {"times": 1}, "data": {"failCommands": ["insert"], "blockConnection": true, "blockTimeMS": 60000}}}}`
	t.Run("waitForThread", func(t *testing.T) {
		_, err := runJSONWith(t, opsTest("", block+", "+threads+", "+
			threadOp("t0", `{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 1}}}`)+", "+waitForThread("t0")), short)
		checkOutcome(t, err, `thread "t0" did not finish its operations within 50ms`)
	})
	t.Run("a thread not waited for", func(t *testing.T) {
		_, err := runJSONWith(t, opsTest("", block+", "+threads+", "+
			threadOp("t0", `{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 1}}}`)), short)
		checkOutcome(t, err, `(not waited for by waitForThread): thread "t0" did not finish its operations within 50ms`)
	})
}

// storeEventsAsEntities keeps the listed events as documents in event list
// entities, with their name, the time they were observed and the fields of
// the CMAP specification.
func TestRunnerStoreEvents(t *testing.T) {
	store := `, "storeEventsAsEntities": [{"id": "out", "events": ["ConnectionCheckedOutEvent", "PoolCreatedEvent"]},
		{"id": "closed", "events": ["ConnectionClosedEvent", "PoolClearedEvent"]}], "uriOptions": {"maxPoolSize": 5}`
	before := time.Now()
	r, err := runJSONWith(t, oneTest(entities(store), `, "operations": [`+pingOp+", "+failNextPing+", "+failedPingOp+`]`), func(*testRun) {})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	want := map[string][]string{
		// The ping, the fail point (set through c), the ping that fails.
		"out": {`{"name":"PoolCreatedEvent","address":"A","options":{"maxPoolSize":5}}`,
			`{"name":"ConnectionCheckedOutEvent","address":"A","connectionId":1,"durationMS":"D"}`,
			`{"name":"ConnectionCheckedOutEvent","address":"A","connectionId":1,"durationMS":"D"}`,
			`{"name":"ConnectionCheckedOutEvent","address":"A","connectionId":1,"durationMS":"D"}`},
		"closed": {`{"name":"PoolClearedEvent","address":"A","interruptInUseConnections":false}`,
			`{"name":"ConnectionClosedEvent","address":"A","connectionId":1,"reason":"error"}`},
	}
	for id, docs := range want {
		l, err := entity[*eventList](r, "test", id)
		if err != nil {
			t.Fatal(err)
		}
		got := l.documents()
		if len(got) != len(docs) {
			t.Fatalf("%s: %d events, want %d: %v", id, len(got), len(docs), got)
		}
		for i, d := range got {
			at, ok := d.Lookup("observedAt").DoubleOK()
			if !ok || at < float64(before.UnixNano())/1e9-1e-3 || at > float64(after.UnixNano())/1e9+1e-3 {
				t.Errorf("%s[%d]: observedAt %v is not a time of the test, in seconds", id, i, d.Lookup("observedAt"))
			}
			// The values that vary are replaced by their type.
			elems, err := d.Elements()
			if err != nil {
				t.Fatal(err)
			}
			var m bson.D
			for _, e := range elems {
				switch v := e.Value(); {
				case e.Key() == "observedAt":
				case e.Key() == "address" && v.Type == bson.TypeString:
					m = append(m, bson.E{Key: "address", Value: "A"})
				case e.Key() == "durationMS" && v.Type == bson.TypeDouble && v.Double() > 0:
					m = append(m, bson.E{Key: "durationMS", Value: "D"})
				default:
					m = append(m, bson.E{Key: e.Key(), Value: v})
				}
			}
			js, _ := bson.MarshalExtJSON(m, false, false)
			if string(js) != docs[i] {
				t.Errorf("%s[%d] = %s, want %s", id, i, js, docs[i])
			}
		}
	}

	for _, tc := range []struct{ name, store, want string }{
		{"a name taken", `, "storeEventsAsEntities": [{"id": "c", "events": ["PoolCreatedEvent"]}]`, `an entity named "c" already exists`},
		{"the format's names", `, "storeEventsAsEntities": [{"id": "e", "events": ["poolCreatedEvent"]}]`, `unknown event type "poolCreatedEvent"`},
		{"no events", `, "storeEventsAsEntities": [{"id": "e", "events": []}]`, "empty events"},
		{"command events", `, "storeEventsAsEntities": [{"id": "e", "events": ["PoolCreatedEvent", "CommandStartedEvent"]}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkOutcome(t, runJSON(t, oneTest(`, "createEntities": [{"client": {"id": "c"`+tc.store+`}}]`, `, "operations": []`)), tc.want)
		})
	}
}

// The listeners stop when the operations end: what the clients emit after
// does not count.
func TestRunnerListenersStop(t *testing.T) {
	r, err := runJSONWith(t, cmapTest(`["poolClosedEvent"], "storeEventsAsEntities": [{"id": "list", "events": ["PoolClosedEvent"]}]`,
		pingOp, expectCMAP("")), func(*testRun) {})
	if err != nil {
		t.Fatal(err)
	}
	c, err := entity[*client](r, "test", "c")
	if err != nil {
		t.Fatal(err)
	}
	c.close(t.Context())
	// The closing events are delivered after close returns: once they
	// are, none was kept.
	if err := c.flush(t.Context(), flushTimeout); err != nil {
		t.Fatal(err)
	}
	if got := c.events.of("cmap"); len(got) != 0 {
		t.Errorf("observed after the operations:\n%s", dumpEvents(got))
	}
	l, err := entity[*eventList](r, "test", "list")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.documents(); len(got) != 0 {
		t.Errorf("stored after the operations: %v", got)
	}
}

// The closing events of a client come after Close returns: a flush of the
// closed client entity waits for them, and fails, naming the pool, when the
// handler holds them past the flush's time.
func TestFlushClosedClient(t *testing.T) {
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	release := make(chan struct{})
	var mu sync.Mutex
	var got []string
	held := func(e pool.Event) {
		if e.Type == pool.ConnectionClosed {
			<-release
		}
		mu.Lock()
		got = append(got, poolEventName(e.Type))
		mu.Unlock()
	}
	cl, err := mongopool.Connect(t.Context(), "mongodb://"+srv.Addr()+"/", mongopool.WithPoolOptions(pool.WithEventHandler(held)))
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	if _, err := cl.RunCommand(t.Context(), "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		close(release)
		cl.Close()
		t.Fatal(err)
	}
	c := &client{id: "c", cl: cl, changed: make(chan struct{}), sensitiveStarts: map[string]bool{}}
	c.close(t.Context())
	err = c.flush(t.Context(), 50*time.Millisecond)
	close(release)
	if err == nil {
		t.Fatal("flush with the closing events held succeeded, want its deadline's failure")
	}
	if err := c.flush(t.Context(), flushTimeout); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(got); n < 2 || !slices.Equal(got[n-2:], []string{"connectionClosedEvent", "poolClosedEvent"}) {
		t.Fatalf("delivered after the flush: %v; want the connection and the pool closed last", got)
	}
}
