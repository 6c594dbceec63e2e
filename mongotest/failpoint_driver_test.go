package mongotest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The tests below check that the official driver sees each effect of the
// failCommand fail point as it would against mongod. The fail points are
// set over the wire, as spec test runners set them, by a client of its own
// application name.

// connectApp connects the driver to srv with the application name app and
// without retries, which would hide the effects; the client is
// disconnected when the test ends.
func connectApp(t *testing.T, srv *mongotest.Server, app string, more ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	opts := options.Client().ApplyURI(srv.URI()).SetAppName(app).
		SetRetryReads(false).SetRetryWrites(false).
		SetServerSelectionTimeout(testTimeout)
	return connectWith(t, append([]*options.ClientOptions{opts}, more...)...)
}

// setFailPoint runs configureFailPoint through client, and returns the
// count of the reply.
func setFailPoint(t *testing.T, client *mongo.Client, mode any, data bson.D) int64 {
	t.Helper()
	var reply struct {
		Count int64 `bson:"count"`
	}
	err := client.Database("admin").RunCommand(ctx(t), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: mode},
		{Key: "data", Value: data},
	}).Decode(&reply)
	if err != nil {
		t.Fatalf("configureFailPoint: %v", err)
	}
	return reply.Count
}

// ping runs ping through client.
func ping(t *testing.T, client *mongo.Client) error {
	t.Helper()
	return client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "ping", Value: 1}}).Err()
}

func TestDriverFailPointCloseConnection(t *testing.T) {
	srv := start(t)
	admin := connectApp(t, srv, "admin")
	app := connectApp(t, srv, "app")
	coll := app.Database("x").Collection("c")
	c := ctx(t)
	if _, err := coll.InsertOne(c, bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	setFailPoint(t, admin, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"find"}},
		{Key: "closeConnection", Value: true},
	})
	err := coll.FindOne(c, bson.D{}).Err()
	if !mongo.IsNetworkError(err) {
		t.Fatalf("find with closeConnection: %v; want a network error", err)
	}
	// times: 1 is used up: the next find succeeds.
	if err := coll.FindOne(c, bson.D{}).Err(); err != nil {
		t.Errorf("the second find: %v", err)
	}
}

func TestDriverFailPointErrorCodeAndLabels(t *testing.T) {
	srv := start(t)
	admin := connectApp(t, srv, "admin")
	app := connectApp(t, srv, "app")
	setFailPoint(t, admin, "alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}},
		{Key: "errorCode", Value: 1234},
		{Key: "errorLabels", Value: bson.A{"SystemOverloadedError", "RetryableError"}},
	})
	err := ping(t, app)
	var se mongo.ServerError
	if !errors.As(err, &se) {
		t.Fatalf("ping: %v (%T); want a mongo.ServerError", err, err)
	}
	if !se.HasErrorCode(1234) || !se.HasErrorLabel("SystemOverloadedError") || !se.HasErrorLabel("RetryableError") ||
		!strings.Contains(err.Error(), "Failing command via 'failCommand' failpoint") {
		t.Errorf("ping: %v; want code 1234 with both labels", err)
	}
	if mongo.IsNetworkError(err) {
		t.Errorf("ping: %v is a network error", err)
	}
}

func TestDriverFailPointBlock(t *testing.T) {
	const block = 100 * time.Millisecond
	srv := start(t)
	admin := connectApp(t, srv, "admin")
	app := connectApp(t, srv, "app")
	if err := ping(t, app); err != nil { // a connection ready in the pool
		t.Fatal(err)
	}
	setFailPoint(t, admin, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}},
		{Key: "blockConnection", Value: true},
		{Key: "blockTimeMS", Value: block.Milliseconds()},
	})
	start := time.Now()
	if err := ping(t, app); err != nil {
		t.Fatalf("the blocked ping: %v; want it to succeed", err)
	}
	// A lower bound that the server guarantees.
	if d := time.Since(start); d < block {
		t.Errorf("the blocked ping took %v, less than blockTimeMS %v", d, block)
	}
}

func TestDriverFailPointTimesAndSkip(t *testing.T) {
	srv := start(t)
	admin := connectApp(t, srv, "admin")
	app := connectApp(t, srv, "app")
	data := bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: 2}}
	outcomes := func(n int) string {
		var b strings.Builder
		for range n {
			err := ping(t, app)
			var se mongo.ServerError
			switch {
			case err == nil:
				b.WriteByte('.')
			case errors.As(err, &se) && se.HasErrorCode(2):
				b.WriteByte('x')
			default:
				t.Fatalf("ping: %v", err)
			}
		}
		return b.String()
	}
	setFailPoint(t, admin, bson.D{{Key: "times", Value: 2}}, data)
	if got := outcomes(4); got != "xx.." {
		t.Errorf("{times: 2}: pings %s, want xx..", got)
	}
	setFailPoint(t, admin, bson.D{{Key: "skip", Value: 2}}, data)
	if got := outcomes(4); got != "..xx" {
		t.Errorf("{skip: 2}: pings %s, want ..xx", got)
	}
	setFailPoint(t, admin, "off", nil)
	if got := outcomes(1); got != "." {
		t.Errorf("off: ping %s", got)
	}
}

func TestDriverFailPointAppName(t *testing.T) {
	srv := start(t)
	admin := connectApp(t, srv, "admin")
	a := connectApp(t, srv, "A")
	b := connectApp(t, srv, "B")
	setFailPoint(t, admin, "alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"ping"}},
		{Key: "errorCode", Value: 2},
		{Key: "appName", Value: "A"},
	})
	var se mongo.ServerError
	if err := ping(t, a); !errors.As(err, &se) || !se.HasErrorCode(2) {
		t.Errorf("ping of A: %v; want code 2", err)
	}
	if err := ping(t, b); err != nil {
		t.Errorf("ping of B: %v; the fail point is for A", err)
	}
	if err := ping(t, admin); err != nil {
		t.Errorf("ping of admin: %v", err)
	}
}

// TestDriverFailPointHello fails the handshake of one application's
// connections, as the CMAP and load-balancer spec tests do: that client
// cannot connect, the others can.
func TestDriverFailPointHello(t *testing.T) {
	srv := start(t)
	admin := connectApp(t, srv, "admin")
	setFailPoint(t, admin, "alwaysOn", bson.D{
		{Key: "failCommands", Value: bson.A{"isMaster", "hello"}},
		{Key: "errorCode", Value: 1234},
		{Key: "appName", Value: "victim"},
	})
	victim := connectApp(t, srv, "victim", options.Client().SetServerSelectionTimeout(500*time.Millisecond))
	err := ping(t, victim)
	if err == nil || !strings.Contains(err.Error(), "Failing command via 'failCommand' failpoint") {
		t.Fatalf("ping of victim: %v; want its handshake failed by the fail point", err)
	}
	t.Logf("ping of victim: %v", err)
	if n := srv.Stats().FailCommandFired; n == 0 {
		t.Error("the fail point never fired")
	}
	if err := ping(t, connectApp(t, srv, "other")); err != nil {
		t.Errorf("ping of another application: %v", err)
	}
}

// TestDriverFailPointBlockHello blocks the handshake of a connection: the
// driver sees a connect timeout, a network error.
func TestDriverFailPointBlockHello(t *testing.T) {
	srv := start(t)
	if err := srv.SetFailPoint(mongotest.FailPoint{
		Commands:  []string{"isMaster", "hello"},
		AppName:   "slow",
		BlockTime: time.Hour, // Close ends it
	}); err != nil {
		t.Fatal(err)
	}
	slow := connectApp(t, srv, "slow", options.Client().
		SetConnectTimeout(100*time.Millisecond).SetServerSelectionTimeout(500*time.Millisecond))
	err := ping(t, slow)
	if err == nil {
		t.Fatal("ping through a blocked handshake succeeded")
	}
	if !strings.Contains(err.Error(), "timeout") && !strings.Contains(err.Error(), "timed out") {
		t.Errorf("ping of slow: %v; want a timeout", err)
	}
	if n := srv.Stats().FailCommandFired; n == 0 {
		t.Errorf("ping: %v, but the fail point never fired", err)
	}
}

func TestDriverFailPointWriteConcernError(t *testing.T) {
	srv := start(t)
	admin := connectApp(t, srv, "admin")
	app := connectApp(t, srv, "app")
	setFailPoint(t, admin, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}},
		{Key: "writeConcernError", Value: bson.D{
			{Key: "code", Value: 64},
			{Key: "codeName", Value: "WriteConcernFailed"},
			{Key: "errmsg", Value: "waiting for replication timed out"},
			{Key: "errInfo", Value: bson.D{{Key: "wtimeout", Value: true}}},
		}},
		{Key: "errorLabels", Value: bson.A{"TestLabel"}},
	})
	coll := app.Database("x").Collection("c")
	c := ctx(t)
	_, err := coll.InsertOne(c, bson.D{{Key: "a", Value: 1}})
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteConcernError == nil {
		t.Fatalf("insert: %v (%T); want a WriteException with a WriteConcernError", err, err)
	}
	if we.WriteConcernError.Code != 64 || we.WriteConcernError.Message != "waiting for replication timed out" || !we.HasErrorLabel("TestLabel") {
		t.Errorf("insert: %+v; want code 64, its message and the label", we)
	}
	// The write happened: a write concern error is not a write error.
	if n, err := coll.EstimatedDocumentCount(c); err != nil || n != 1 {
		t.Errorf("EstimatedDocumentCount = %d, %v; want 1", n, err)
	}
	if _, err := coll.InsertOne(c, bson.D{{Key: "a", Value: 2}}); err != nil {
		t.Errorf("the second insert: %v", err)
	}
}

// TestDriverFailPointSASL closes the connection at saslContinue, as the
// logging and load-balancer spec tests do: authentication fails with a
// network error.
func TestDriverFailPointSASL(t *testing.T) {
	srv := start(t)
	if err := srv.AddUser("admin", "user", "pencil"); err != nil {
		t.Fatal(err)
	}
	admin := connectApp(t, srv, "admin")
	setFailPoint(t, admin, bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"saslContinue"}},
		{Key: "closeConnection", Value: true},
		{Key: "appName", Value: "auth"},
	})
	auth := options.Client().SetAuth(options.Credential{
		Username: "user", Password: "pencil", AuthMechanism: "SCRAM-SHA-256",
	})
	c := ctx(t)
	_, err := connectApp(t, srv, "auth", auth).ListDatabaseNames(c, bson.D{})
	if !mongo.IsNetworkError(err) {
		t.Fatalf("ListDatabaseNames: %v; want a network error during authentication", err)
	}
	if n := srv.Stats().FailCommandFired; n != 1 {
		t.Errorf("FailCommandFired = %d, want 1", n)
	}
	// times: 1 is used up. A new client, as the driver's pool of the first
	// one may still report the failure (its pool was cleared).
	if _, err := connectApp(t, srv, "auth", auth).ListDatabaseNames(c, bson.D{}); err != nil {
		t.Errorf("ListDatabaseNames of a new client: %v", err)
	}
}
