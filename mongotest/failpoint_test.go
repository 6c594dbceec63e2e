package mongotest_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// failCmd builds {configureFailPoint: "failCommand", mode, data} on admin.
func failCmd(mode any, data bson.D) bson.D {
	return cmd("admin",
		bson.E{Key: "configureFailPoint", Value: "failCommand"},
		bson.E{Key: "mode", Value: mode},
		bson.E{Key: "data", Value: data})
}

// configured checks that reply is configureFailPoint's success and returns
// its count.
func configured(t *testing.T, reply bson.Raw) int64 {
	t.Helper()
	checkOK(t, reply)
	n, ok := reply.Lookup("count").AsInt64OK()
	if !ok {
		t.Fatalf("configureFailPoint reply %s has no integer count", reply)
	}
	return n
}

var pingCmd = cmd("admin", bson.E{Key: "ping", Value: 1})

// TestFailPointConfigureErrors checks that a bad configureFailPoint fails
// with a clear error naming the problem, and leaves the fail point as it
// was.
func TestFailPointConfigureErrors(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	// A fail point that must survive every bad configuration below.
	configured(t, r.run(failCmd(bson.D{{Key: "skip", Value: 1000}},
		bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2}})))

	ping := bson.A{"ping"}
	fail := bson.E{Key: "errorCode", Value: 2}
	for _, tc := range []struct {
		name string
		cmd  bson.D
		code int32
		want string // in errmsg
	}{
		{"not admin", cmd("test", bson.E{Key: "configureFailPoint", Value: "failCommand"}, bson.E{Key: "mode", Value: "off"}),
			13, "configureFailPoint may only be run against the admin database"},
		{"name not a string", cmd("admin", bson.E{Key: "configureFailPoint", Value: 1}, bson.E{Key: "mode", Value: "off"}),
			14, "must be the name of a fail point"},
		{"unknown fail point", cmd("admin", bson.E{Key: "configureFailPoint", Value: "noSuchFailPoint"}, bson.E{Key: "mode", Value: "off"}),
			2, "noSuchFailPoint not found"},
		{"no mode", cmd("admin", bson.E{Key: "configureFailPoint", Value: "failCommand"}),
			20, "you must supply a 'mode'"},
		{"unknown mode", failCmd("sometimes", nil), 2, "unknown mode: sometimes"},
		{"mode of a wrong type", failCmd(5, nil), 14, "'mode' must be a string or an object"},
		{"mode with no known key", failCmd(bson.D{{Key: "often", Value: 1}}, nil), 2, "mode must be one of"},
		{"times not a number", failCmd(bson.D{{Key: "times", Value: "x"}}, nil), 14, "mode.times must be an integer"},
		{"times negative", failCmd(bson.D{{Key: "times", Value: -1}}, nil), 2, "'times' option to 'mode' must be positive"},
		{"times zero", failCmd(bson.D{{Key: "times", Value: 0}}, nil), 2, "use mode \"off\""},
		{"times too big", failCmd(bson.D{{Key: "times", Value: int64(1) << 31}}, nil), 2, "'times' option to 'mode' must be <="},
		{"skip with a fraction", failCmd(bson.D{{Key: "skip", Value: 1.5}}, nil), 2, "mode.skip must be an integer"},
		{"probability out of range", failCmd(bson.D{{Key: "activationProbability", Value: 2}}, nil), 2, "activationProbability must be between 0.0 and 1.0"},
		{"probability not a number", failCmd(bson.D{{Key: "activationProbability", Value: "half"}}, nil), 14, "activationProbability"},
		{"no data", cmd("admin", bson.E{Key: "configureFailPoint", Value: "failCommand"}, bson.E{Key: "mode", Value: "alwaysOn"}),
			2, "data is missing"},
		{"data not an object", failCmd("alwaysOn", nil), 14, "the 'data' field must be an object"},
		{"no failCommands", failCmd("alwaysOn", bson.D{fail}), 2, "data.failCommands is missing"},
		{"failCommands not an array", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: "ping"}, fail}), 14, "data.failCommands must be an array of strings"},
		{"failCommands empty", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{}}, fail}), 2, "data.failCommands is empty"},
		{"failCommands with a number", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"ping", 1}}, fail}), 14, "data.failCommands.1 must be a string"},
		{"no action", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: ping}, {Key: "closeConnection", Value: false}}), 2, "would do nothing"},
		{"blockConnection without blockTimeMS", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: ping}, {Key: "blockConnection", Value: true}}), 72, "blockTimeMS"},
		{"negative blockTimeMS", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: ping}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: -5}}), 72, "data.blockTimeMS must be from 0"},
		{"closeConnection not a boolean", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: ping}, {Key: "closeConnection", Value: "yes"}}), 14, "data.closeConnection must be a boolean"},
		{"errorCode not a number", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: ping}, {Key: "errorCode", Value: "x"}}), 14, "data.errorCode must be an integer"},
		{"errorCode zero", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: ping}, {Key: "errorCode", Value: 0}}), 2, "data.errorCode must be a positive error code"},
		{"errorLabels with a number", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: ping}, fail, {Key: "errorLabels", Value: bson.A{7}}}), 14, "data.errorLabels.0 must be a string"},
		{"writeConcernError not an object", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "writeConcernError", Value: 64}}), 14, "data.writeConcernError must be an object"},
		{"writeConcernError without code", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "writeConcernError", Value: bson.D{{Key: "errmsg", Value: "x"}}}}), 2, "data.writeConcernError.code is missing"},
		{"appName not a string", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: ping}, fail, {Key: "appName", Value: 1}}), 14, "data.appName must be a string"},
		{"unknown data field", failCmd("alwaysOn", bson.D{{Key: "failCommands", Value: ping}, fail, {Key: "threadName", Value: "x"}}), 2, "data.threadName is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := checkError(t, r.run(tc.cmd), tc.code, codeNameOf(tc.code))
			if !strings.Contains(msg, tc.want) {
				t.Errorf("errmsg %q does not say %q", msg, tc.want)
			}
		})
	}
	// The first fail point is still set: it lets 1000 pings pass.
	checkOK(t, r.run(pingCmd))
	if n := configured(t, r.run(failCmd("off", nil))); n != 0 {
		t.Errorf("count = %d, want 0: nothing fired", n)
	}
	if n := srv.Stats().FailCommandFired; n != 0 {
		t.Errorf("FailCommandFired = %d, want 0", n)
	}
}

// codeNameOf is the codeName of the codes TestFailPointConfigureErrors
// expects.
func codeNameOf(code int32) string {
	return map[int32]string{2: "BadValue", 13: "Unauthorized", 14: "TypeMismatch", 20: "IllegalOperation", 72: "InvalidOptions"}[code]
}

// TestFailPointErrorReply checks the reply of a command that errorCode
// fails, mongod's, and the count that configureFailPoint reports.
func TestFailPointErrorReply(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	n := configured(t, r.run(failCmd(bson.D{{Key: "times", Value: 2}}, bson.D{
		{Key: "failCommands", Value: bson.A{"ping", "configureFailPoint"}},
		{Key: "errorCode", Value: 1234},
		{Key: "errorLabels", Value: bson.A{"RetryableError", "SystemOverloadedError"}},
	})))
	if n != 0 {
		t.Errorf("count = %d before anything fired, want 0", n)
	}
	var got struct {
		OK          float64  `bson:"ok"`
		ErrMsg      string   `bson:"errmsg"`
		Code        int32    `bson:"code"`
		CodeName    string   `bson:"codeName"`
		ErrorLabels []string `bson:"errorLabels"`
	}
	if err := bson.Unmarshal(r.run(pingCmd), &got); err != nil {
		t.Fatal(err)
	}
	if got.OK != 0 || got.ErrMsg != "Failing command via 'failCommand' failpoint" || got.Code != 1234 ||
		got.CodeName != "Location1234" || !slices.Equal(got.ErrorLabels, []string{"RetryableError", "SystemOverloadedError"}) {
		t.Errorf("reply %+v", got)
	}

	// configureFailPoint is never failed, even when listed: this one
	// replaces the fail point (one fire left) and reports one fire.
	n = configured(t, r.run(failCmd("alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}},
		{Key: "errorCode", Value: 11600},
	})))
	if n != 1 {
		t.Errorf("count = %d after one fire, want 1", n)
	}
	msg := checkError(t, r.run(pingCmd), 11600, "InterruptedAtShutdown")
	if msg != "Failing command via 'failCommand' failpoint" {
		t.Errorf("errmsg %q", msg)
	}
	if reply := r.run(pingCmd); reply.Lookup("errorLabels").Type != 0 {
		t.Errorf("reply %s has errorLabels; the fail point set none", reply)
	}
	if n := configured(t, r.run(failCmd("off", nil))); n != 3 {
		t.Errorf("count = %d after three fires, want 3", n)
	}
	checkOK(t, r.run(pingCmd))
	if n := srv.Stats().FailCommandFired; n != 3 {
		t.Errorf("FailCommandFired = %d, want 3", n)
	}
}

// TestFailPointModes checks times, skip and activationProbability, and
// that a command not listed is never failed.
func TestFailPointModes(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	data := bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2}}
	buildInfo := cmd("admin", bson.E{Key: "buildInfo", Value: 1})
	// results runs n pings and returns "x" for each that failed, "." for
	// each that succeeded.
	results := func(n int) string {
		t.Helper()
		var b strings.Builder
		for range n {
			checkOK(t, r.run(buildInfo)) // not listed: never failed
			if wire.CheckReply(r.run(pingCmd)) != nil {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	for _, tc := range []struct {
		mode any
		want string
	}{
		{bson.D{{Key: "times", Value: 2}}, "xx..."},
		{bson.D{{Key: "times", Value: 2.0}}, "xx..."}, // a double, as from JSON
		{bson.D{{Key: "skip", Value: 2}}, "..xxx"},
		{bson.D{{Key: "skip", Value: 0}}, "xxxxx"},
		{"alwaysOn", "xxxxx"},
		{bson.D{{Key: "activationProbability", Value: 0}}, "....."},
		{bson.D{{Key: "activationProbability", Value: 1}}, "xxxxx"},
		// mongod takes times before skip.
		{bson.D{{Key: "skip", Value: 3}, {Key: "times", Value: 1}}, "x...."},
	} {
		configured(t, r.run(failCmd(tc.mode, data)))
		if got := results(5); got != tc.want {
			t.Errorf("mode %v: pings %s, want %s", tc.mode, got, tc.want)
		}
	}
	configured(t, r.run(failCmd("alwaysOn", data)))
	configured(t, r.run(failCmd("off", bson.D{{Key: "ignored", Value: true}}))) // off ignores data
	if got := results(2); got != ".." {
		t.Errorf("after mode off: pings %s", got)
	}
	configured(t, r.run(failCmd("alwaysOn", data)))
	srv.ClearFailPoints()
	if got := results(2); got != ".." {
		t.Errorf("after ClearFailPoints: pings %s", got)
	}
}

// TestFailPointCloseConnection checks that closeConnection closes the
// connection without a reply, for OP_MSG and for the legacy OP_QUERY
// hello, and that the alias ismaster matches isMaster.
func TestFailPointCloseConnection(t *testing.T) {
	srv := start(t)
	admin := dialRaw(t, srv)
	configured(t, admin.run(failCmd("alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"ping", "ismaster"}},
		{Key: "closeConnection", Value: true},
	})))
	r := dialRaw(t, srv)
	r.send(msg(t, 1, &wire.Msg{Body: marshal(t, pingCmd)}))
	r.expectClosed()

	r = dialRaw(t, srv)
	r.send(opQuery(2, "admin.$cmd", marshal(t, bson.D{{Key: "isMaster", Value: 1}})))
	r.expectClosed()

	// hello is another command than isMaster: not failed.
	checkOK(t, admin.run(cmd("admin", bson.E{Key: "hello", Value: 1})))
	if n := srv.Stats().FailCommandFired; n != 2 {
		t.Errorf("FailCommandFired = %d, want 2", n)
	}
}

// TestFailPointMoreToCome checks that a fail point applies to a command
// that wants no reply: closeConnection still closes the connection.
func TestFailPointMoreToCome(t *testing.T) {
	srv := start(t)
	admin := dialRaw(t, srv)
	configured(t, admin.run(failCmd("alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}},
		{Key: "closeConnection", Value: true},
	})))
	r := dialRaw(t, srv)
	ins := cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "a", Value: 1}}}})
	r.send(msg(t, 1, &wire.Msg{Flags: wire.MoreToCome, Body: marshal(t, ins)}))
	r.expectClosed()
}

// TestFailPointAppName checks that appName picks connections by the client
// metadata of their first hello, the hello itself included.
func TestFailPointAppName(t *testing.T) {
	srv := start(t)
	admin := dialRaw(t, srv)
	configured(t, admin.run(failCmd("alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"hello", "ping"}},
		{Key: "errorCode", Value: 2},
		{Key: "appName", Value: "A"},
	})))
	hello := func(app string) bson.D {
		d := cmd("admin", bson.E{Key: "hello", Value: 1})
		if app != "" {
			d = append(d, bson.E{Key: "client", Value: bson.D{
				{Key: "application", Value: bson.D{{Key: "name", Value: app}}},
				{Key: "driver", Value: bson.D{{Key: "name", Value: "raw"}, {Key: "version", Value: "0"}}},
			}})
		}
		return d
	}

	a := dialRaw(t, srv)
	checkError(t, a.run(hello("A")), 2, "BadValue") // the hello that names A
	checkError(t, a.run(hello("")), 2, "BadValue")  // later hellos: the connection's
	checkError(t, a.run(pingCmd), 2, "BadValue")

	b := dialRaw(t, srv)
	checkOK(t, b.run(hello("B")))
	checkOK(t, b.run(hello("A"))) // only the first metadata counts
	checkOK(t, b.run(pingCmd))

	none := dialRaw(t, srv) // no metadata at all
	checkOK(t, none.run(pingCmd))
	checkOK(t, admin.run(hello("")))
}

// TestFailPointNamespace checks data.namespace.
func TestFailPointNamespace(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	configured(t, r.run(failCmd("alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"find", "ping"}},
		{Key: "errorCode", Value: 2},
		{Key: "namespace", Value: "x.c"},
	})))
	checkError(t, r.run(cmd("x", bson.E{Key: "find", Value: "c"})), 2, "BadValue")
	checkOK(t, r.run(cmd("x", bson.E{Key: "find", Value: "d"})))
	checkOK(t, r.run(cmd("y", bson.E{Key: "find", Value: "c"})))
	checkOK(t, r.run(pingCmd)) // its namespace is "admin"
}

// TestFailPointWriteConcernError checks that writeConcernError lets a write
// run and adds the document and the errorLabels to its reply, and leaves
// the commands that take no write concern alone.
func TestFailPointWriteConcernError(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	wce := bson.D{{Key: "code", Value: 64}, {Key: "codeName", Value: "WriteConcernFailed"}, {Key: "errmsg", Value: "waiting for replication timed out"}}
	configured(t, r.run(failCmd(bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"find", "insert"}},
		{Key: "writeConcernError", Value: wce},
		{Key: "errorLabels", Value: bson.A{"RetryableWriteError"}},
	})))
	checkOK(t, r.run(cmd("x", bson.E{Key: "find", Value: "c"}))) // no write concern: not counted
	reply := r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "a", Value: 1}}}}))
	var got struct {
		OK                float64  `bson:"ok"`
		N                 int32    `bson:"n"`
		WriteConcernError bson.Raw `bson:"writeConcernError"`
		ErrorLabels       []string `bson:"errorLabels"`
	}
	if err := bson.Unmarshal(reply, &got); err != nil {
		t.Fatal(err)
	}
	if got.OK != 1 || got.N != 1 || !slices.Equal(got.ErrorLabels, []string{"RetryableWriteError"}) ||
		!bytes.Equal(got.WriteConcernError, marshal(t, wce)) {
		t.Errorf("reply %s", reply)
	}
	// times: 1 is used up.
	reply = r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "a", Value: 2}}}}))
	if reply.Lookup("writeConcernError").Type != 0 {
		t.Errorf("second insert: %s", reply)
	}
}

// TestFailPointAuth checks that the fail point applies to the
// authentication commands, that configureFailPoint needs no
// authentication (as in mongod), and that a command refused for lack of
// authentication does not reach the fail point.
func TestFailPointAuth(t *testing.T) {
	srv := start(t)
	if err := srv.AddUser("admin", "user", "pencil"); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, srv)
	configured(t, r.run(failCmd("alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"saslStart", "insert"}},
		{Key: "errorCode", Value: 18},
	})))
	checkError(t, r.run(cmd("admin", saslStartDoc("SCRAM-SHA-256", []byte("n,,n=user,r=abcdef"), false)...)), 18, "AuthenticationFailed")
	if n := srv.Stats().FailCommandFired; n != 1 {
		t.Errorf("FailCommandFired = %d after saslStart, want 1", n)
	}
	checkError(t, r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{}}})), 13, "Unauthorized")
	if n := srv.Stats().FailCommandFired; n != 1 {
		t.Errorf("FailCommandFired = %d after an unauthorized insert, want still 1", n)
	}
}

// TestFailPointTimesConcurrent checks that {times: n} fires exactly n
// times when many connections race for it.
func TestFailPointTimesConcurrent(t *testing.T) {
	const conns, times = 32, 5
	srv := start(t)
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"ping"}, ErrorCode: 2, Times: times}); err != nil {
		t.Fatal(err)
	}
	ncs := make([]net.Conn, conns)
	for i := range ncs {
		ncs[i] = dialRaw(t, srv).nc
	}
	req := msg(t, 1, &wire.Msg{Body: marshal(t, pingCmd)})
	deadline := time.Now().Add(testTimeout)
	results := make(chan error, conns) // nil: ok; a *wire.CommandError: failed
	var wg sync.WaitGroup
	for _, nc := range ncs {
		wg.Go(func() {
			nc.SetDeadline(deadline)
			if _, err := nc.Write(req); err != nil {
				results <- err
				return
			}
			raw, err := wire.ReadMessage(nc, 0)
			if err != nil {
				results <- err
				return
			}
			_, reply, err := wire.DecodeReply(raw, 0)
			if err != nil {
				results <- err
				return
			}
			results <- wire.CheckReply(reply.Body)
		})
	}
	wg.Wait()
	close(results)
	failed := 0
	for err := range results {
		var ce *wire.CommandError
		switch {
		case err == nil:
		case errors.As(err, &ce) && ce.Code == 2:
			failed++
		default:
			t.Errorf("ping: %v", err)
		}
	}
	if failed != times {
		t.Errorf("%d pings failed, want %d", failed, times)
	}
	if n := srv.Stats().FailCommandFired; n != times {
		t.Errorf("FailCommandFired = %d, want %d", n, times)
	}
}

// TestFailPointBlock checks that blockConnection delays the command, which
// then runs, and that closing the server ends a block at once.
func TestFailPointBlock(t *testing.T) {
	srv := start(t)
	c := ctx(t)
	r := dialRaw(t, srv)
	// A block that then runs the command.
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"ping"}, BlockTime: 50 * time.Millisecond, Times: 1}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	checkOK(t, r.run(pingCmd))
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("the blocked ping took %v, less than blockTimeMS 50", d)
	}

	// A block of an hour, which Close must end.
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"ping"}, BlockTime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	r.send(msg(t, 2, &wire.Msg{Body: marshal(t, pingCmd)}))
	if err := srv.WaitForFailPoint(c, 2); err != nil {
		t.Fatal(err)
	}
	closeAndCheck(t, srv) // within testTimeout, and no goroutine left
	r.expectClosed()
}

// TestWaitForFailPoint checks the waitForFailPoint command: it returns
// once the fail point fired enough, fails with MaxTimeMSExpired when it
// does not, and checks its arguments.
func TestWaitForFailPoint(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	wait := func(fields ...bson.E) bson.Raw {
		return r.run(cmd("admin", append([]bson.E{{Key: "waitForFailPoint", Value: "failCommand"}}, fields...)...))
	}
	times := func(n int) bson.E { return bson.E{Key: "timesEntered", Value: n} }
	maxTime := bson.E{Key: "maxTimeMS", Value: 10}

	checkOK(t, wait(times(0), maxTime))
	checkError(t, wait(times(1), maxTime), 50, "MaxTimeMSExpired") // nothing fires
	checkError(t, wait(maxTime), 2, "BadValue")
	checkError(t, wait(times(1)), 2, "BadValue")
	checkError(t, wait(times(1), bson.E{Key: "maxTimeMS", Value: 0}), 2, "BadValue")
	checkError(t, wait(times(1), bson.E{Key: "maxTimeMS", Value: "x"}), 14, "TypeMismatch")
	checkError(t, r.run(cmd("admin", bson.E{Key: "waitForFailPoint", Value: "other"}, times(0), maxTime)), 2, "BadValue")
	checkError(t, r.run(cmd("x", bson.E{Key: "waitForFailPoint", Value: "failCommand"}, times(0), maxTime)), 13, "Unauthorized")

	// A wait on one connection, woken by a fire on another.
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"ping"}, ErrorCode: 2}); err != nil {
		t.Fatal(err)
	}
	r.send(msg(t, 7, &wire.Msg{Body: marshal(t, cmd("admin",
		bson.E{Key: "waitForFailPoint", Value: "failCommand"}, times(2),
		bson.E{Key: "maxTimeMS", Value: int32(testTimeout / time.Millisecond)}))}))
	other := dialRaw(t, srv)
	checkError(t, other.run(pingCmd), 2, "BadValue")
	checkError(t, other.run(pingCmd), 2, "BadValue")
	raw := r.read()
	_, reply, err := wire.DecodeReply(raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkOK(t, reply.Body)

	// The Go form, with a context that ends first.
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	if err := srv.WaitForFailPoint(c, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitForFailPoint with a canceled context: %v", err)
	}
}

// TestSetFailPointErrors checks the errors of the Go API, which are the
// command's.
func TestSetFailPointErrors(t *testing.T) {
	srv := start(t)
	for _, tc := range []struct {
		fp   mongotest.FailPoint
		want string
	}{
		{mongotest.FailPoint{ErrorCode: 2}, "data.failCommands is empty"},
		{mongotest.FailPoint{Commands: []string{"ping"}}, "would do nothing"},
		{mongotest.FailPoint{Commands: []string{"ping"}, ErrorCode: 2, Times: 1, Skip: 1}, "both Times and Skip"},
		{mongotest.FailPoint{Commands: []string{"ping"}, ErrorCode: 2, Times: -1}, "'times' option to 'mode' must be positive"},
		{mongotest.FailPoint{Commands: []string{"ping"}, BlockTime: -time.Second}, "BlockTime is negative"},
		{mongotest.FailPoint{Commands: []string{"insert"}, WriteConcernError: bson.D{}}, "data.writeConcernError.code is missing"},
	} {
		err := srv.SetFailPoint(tc.fp)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "mongotest: SetFailPoint: ") {
			t.Errorf("SetFailPoint(%+v) = %v, want an error saying %q", tc.fp, err, tc.want)
		}
	}
}
