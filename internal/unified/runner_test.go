package unified

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/internal/leakcheck"
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
	return runTest(t, f, f.tests[0])
}

// closeTest creates an observed client and closes it: its messages are
// exactly pool created, pool ready, pool closed (no connection, no session).
func closeTest(extra, expect string) string {
	return `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t",
		"operations": [
			{"name": "createEntities", "object": "testRunner", "arguments": {"entities": [
				{"client": {"id": "client", "observeLogMessages": {"connection": "debug"}` + extra + `}}]}},
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
		{"unsupported uriOption", closeTest(`, "uriOptions": {"readPreference": "secondary"}`, exact), "readPreference"},
		{"unsupported client field", closeTest(`, "observeEvents": ["poolCreatedEvent"]`, exact), `does not support "observeEvents"`},
		{"unknown client field", closeTest(`, "observeLogs": {}`, exact), `unknown field "observeLogs"`},
		{"unknown log component", closeTest("", `{"client": "client", "messages": [{"level": "debug", "component": "pool", "data": {}}]}`), `unknown log component "pool"`},
		{"unknown level", closeTest("", `{"client": "client", "messages": [{"level": "verbose", "component": "connection", "data": {}}]}`), `unknown log level "verbose"`},
		{"requirement not met", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t",
			"runOnRequirements": [{"auth": false}], "operations": []}]}`, "skip:"},
		{"file requirement not met", `{"description": "f", "schemaVersion": "1.13", "runOnRequirements": [{"minServerVersion": "99"}],
			"tests": [{"description": "t", "operations": []}]}`, "skip:"},
		{"requirements met", `{"description": "f", "schemaVersion": "1.13", "runOnRequirements": [{"topologies": ["single"], "serverless": "forbid"}],
			"tests": [{"description": "t", "runOnRequirements": [{"auth": true, "minServerVersion": "4.0"}], "operations": []}]}`, ""},
		{"skipReason", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t", "skipReason": "why", "operations": []}]}`, "skip:"},
		{"unsupported test field", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t", "operations": [], "expectEvents": []}]}`, `does not support "expectEvents"`},
		{"unsupported file field", `{"description": "f", "schemaVersion": "1.13", "initialData": [], "tests": [{"description": "t", "operations": []}]}`, `does not support "initialData"`},
		{"newer schema", `{"description": "f", "schemaVersion": "1.99", "tests": [{"description": "t", "operations": []}]}`, "schemaVersion 1.99 is not supported"},
		{"unknown special operation", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t", "operations": [
			{"name": "assertSessionPinned", "object": "testRunner", "arguments": {}}]}]}`, `unknown special operation "assertSessionPinned"`},
		{"unknown entity type", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"session": {"id": "s", "client": "c"}}],
			"tests": [{"description": "t", "operations": []}]}`, `does not support "session"`},
		{"duplicate entity", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}, {"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": []}]}`, `an entity named "c" already exists`},
		{"missing entity", `{"description": "f", "schemaVersion": "1.13", "tests": [{"description": "t", "operations": [
			{"name": "listDatabases", "object": "client0"}]}]}`, `no entity named "client0"`},
		{"unknown argument", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [{"name": "listDatabases", "object": "c", "arguments": {"fliter": {}}}]}]}`, `unknown field "fliter"`},
		{"an error expected, none came", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [{"name": "listDatabases", "object": "c", "expectError": {"isError": true}}]}]}`, "want an error"},
		{"expectResult", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [{"name": "listDatabases", "object": "c", "expectResult": []}]}]}`, ""},
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
		{"retryable error with retryReads on", `{"description": "f", "schemaVersion": "1.13", "createEntities": [{"client": {"id": "c"}}],
			"tests": [{"description": "t", "operations": [
				{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {"failCommands": ["listDatabases"], "closeConnection": true}}}},
				{"name": "listDatabases", "object": "c", "expectError": {"isClientError": true}}]}]}`, "a driver would retry it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runJSON(t, tc.js)
			var skip *skipError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want a pass, got %v", err)
			case strings.HasPrefix(tc.want, "skip:"):
				if !errors.As(err, &skip) {
					t.Fatalf("want a skip, got %v", err)
				}
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
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
