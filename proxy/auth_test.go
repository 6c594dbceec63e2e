package proxy_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/proxy"
)

// startAuthProxy starts a proxy that authenticates its clients as users,
// with upstreams (by name) beside its own client of uri.
func startAuthProxy(t *testing.T, uri string, users []proxy.User, upstreams map[string]string, cfg proxy.Config) (*proxy.Proxy, string) {
	t.Helper()
	us, err := proxy.NewUsers(users)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Users = us
	cfg.Upstreams = map[string]*mongopool.Client{}
	client, err := mongopool.NewClient(uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	for name, u := range upstreams {
		c, err := mongopool.NewClient(u, mongopool.WithSharedTopology(client))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cfg.Upstreams[name] = c
	}
	return startProxyOf(t, client, proxy.Mongos, cfg)
}

func mustDerive(t *testing.T, name, password, upstream string, mechs ...string) proxy.User {
	t.Helper()
	u, err := proxy.DeriveUser(name, "admin", password, upstream, mechs...)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestClientAuthentication(t *testing.T) {
	rs := startReplicaSet(t, 1)
	primary := rs.Primary()
	// The proxy's own credentials upstream: one per upstream pool.
	if err := primary.AddUser("admin", "proxyA", "pa"); err != nil {
		t.Fatal(err)
	}
	if err := primary.AddUser("admin", "proxyB", "pb"); err != nil {
		t.Fatal(err)
	}
	upA := "mongodb://proxyA:pa@" + primary.Addr() + "/?replicaSet=rs0"
	upB := "mongodb://proxyB:pb@" + primary.Addr() + "/?replicaSet=rs0"
	p, addr := startAuthProxy(t, upA, []proxy.User{
		mustDerive(t, "alice", "alice-pw", "", proxy.MechSCRAMSHA256),
		mustDerive(t, "bob", "bob-pw", "reports", proxy.MechSCRAMSHA1, proxy.MechSCRAMSHA256),
		mustDerive(t, "carol", "carol-pw", ""),
	}, map[string]string{"reports": upB}, proxy.Config{})
	ctx := testContext(t)

	for _, c := range []struct{ user, pw, mech string }{
		{"alice", "alice-pw", ""}, {"bob", "bob-pw", "SCRAM-SHA-1"}, {"bob", "bob-pw", "SCRAM-SHA-256"},
	} {
		uri := "mongodb://" + c.user + ":" + c.pw + "@" + addr + "/"
		if c.mech != "" {
			uri += "?authMechanism=" + c.mech
		}
		cl := driverClient(t, uri)
		if _, err := cl.Database("db").Collection("c").InsertOne(ctx, bson.D{{Key: "by", Value: c.user}}); err != nil {
			t.Fatalf("%s with %q: %v", c.user, c.mech, err)
		}
	}
	// A wrong password, an unknown user: Authentication failed.
	for _, uri := range []string{"mongodb://alice:wrong@" + addr + "/", "mongodb://nobody:x@" + addr + "/"} {
		cl, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(20 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		err = cl.Ping(ctx, nil)
		cl.Disconnect(ctx)
		if err == nil || !strings.Contains(err.Error(), "Authentication failed") {
			t.Fatalf("%s: %v, want Authentication failed", uri, err)
		}
	}
	// No credentials: the handshake, and nothing else.
	raw := dialRaw(t, addr)
	raw.roundTrip(mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}))
	reply := raw.roundTrip(mustMarshal(t, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "db"}}))
	if reply.Lookup("code").Int32() != 13 {
		t.Fatalf("find without authenticating: %v, want Unauthorized (13)", reply)
	}
	// saslSupportedMechs lists a user's mechanisms.
	reply = raw.roundTrip(mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "saslSupportedMechs", Value: "admin.bob"}, {Key: "$db", Value: "admin"}}))
	mechs, _ := reply.Lookup("saslSupportedMechs").Array().Values()
	if len(mechs) != 2 {
		t.Fatalf("saslSupportedMechs of bob: %v", mechs)
	}
	// Each upstream credential has its pool: alice's operations went
	// through proxyA's, bob's through proxyB's.
	for name, c := range map[string]*mongopool.Client{"alice's": upstreamOf(t, p, ""), "bob's": upstreamOf(t, p, "reports")} {
		used := int64(0)
		for _, pl := range c.Pools() {
			used += pl.Stats().CheckedOut
		}
		if used == 0 {
			t.Fatalf("%s upstream pool was never used", name)
		}
	}
	if st := p.Stats(); st.AuthFailures < 2 {
		t.Fatalf("%d failed authentications counted, want 2 or more", st.AuthFailures)
	}
}

// upstreamOf returns the proxy's client of the upstream name.
func upstreamOf(t *testing.T, p *proxy.Proxy, name string) *mongopool.Client {
	t.Helper()
	c := p.Upstream(name)
	if c == nil {
		t.Fatalf("no upstream %q", name)
	}
	return c
}

func TestCursorsBelongToTheirUser(t *testing.T) {
	rs := startReplicaSet(t, 1)
	_, addr := startAuthProxy(t, rs.URI(), []proxy.User{
		mustDerive(t, "alice", "a", ""), mustDerive(t, "eve", "e", ""),
	}, nil, proxy.Config{})
	ctx := testContext(t)
	alice := driverClient(t, "mongodb://alice:a@"+addr+"/")
	coll := alice.Database("db").Collection("c")
	var docs []any
	for i := range 10 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	eve := driverClient(t, "mongodb://eve:e@"+addr+"/")
	err = eve.Database("db").RunCommand(ctx, bson.D{{Key: "getMore", Value: cur.ID()}, {Key: "collection", Value: "c"}}).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(13) {
		t.Fatalf("eve's getMore of alice's cursor: %v, want Unauthorized (13)", err)
	}
	var killed bson.Raw
	killed, err = eve.Database("db").RunCommand(ctx, bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{cur.ID()}}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if nf, _ := killed.Lookup("cursorsNotFound").Array().Values(); len(nf) != 1 {
		t.Fatalf("eve's killCursors of alice's cursor: %v, want it not found", killed)
	}
	n := 0
	for cur.Next(ctx) {
		n++
	}
	if cur.Err() != nil || n != 10 {
		t.Fatalf("alice's cursor after eve's attempts: %d documents, %v", n, cur.Err())
	}
}

func TestFailedAuthenticationsRateLimited(t *testing.T) {
	rs := startReplicaSet(t, 1)
	_, addr := startAuthProxy(t, rs.URI(), []proxy.User{mustDerive(t, "alice", "a", ""), mustDerive(t, "bob", "b", "")}, nil, proxy.Config{MaxAuthFailures: 3})
	ctx := testContext(t)
	try := func(user, pw string) error {
		// One attempt: the raw SCRAM conversation a driver starts, with
		// the password checked by the proxy.
		cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + user + ":" + pw + "@" + addr + "/").
			SetServerSelectionTimeout(10 * time.Second).SetMaxPoolSize(1)) // a loaded machine may be slow to answer the monitor; a refusal comes at once
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Disconnect(ctx)
		return cl.Ping(ctx, nil)
	}
	// Wrong passwords for alice, until she is refused whatever she says.
	var err error
	for i := 0; i < 10; i++ {
		if err = try("alice", "wrong"); err != nil && strings.Contains(err.Error(), "too many failed authentications") {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "too many failed authentications") {
		t.Fatalf("after wrong passwords: %v, want the rate limit's error", err)
	}
	if err := try("alice", "a"); err == nil || !strings.Contains(err.Error(), "too many failed authentications") {
		t.Fatalf("alice's right password within the minute: %v, want the rate limit's error", err)
	}
	// Another user from the same address is not locked out.
	if err := try("bob", "b"); err != nil {
		t.Fatalf("bob from the same address: %v", err)
	}
}

func TestUsersFile(t *testing.T) {
	u := mustDerive(t, "alice", "pw", "", proxy.MechSCRAMSHA256, proxy.MechSCRAMSHA1)
	if string(u.SCRAMSHA256.StoredKey) == "" || len(u.SCRAMSHA1.ServerKey) != 20 {
		t.Fatalf("derived keys: %+v", u)
	}
	good := `{"users": [{"user": "app", "db": "admin", "scramSHA256": {"salt": "c2FsdHNhbHRzYWx0", "iterations": 15000, "storedKey": "` +
		strings.Repeat("A", 43) + `=", "serverKey": "` + strings.Repeat("B", 43) + `="}}, {"user": "CN=app,O=x", "x509": true}]}`
	us, err := proxy.ParseUsers([]byte(good))
	if err != nil || us.Len() != 2 {
		t.Fatalf("ParseUsers: %v", err)
	}
	for name, bad := range map[string]string{
		"no mechanism":      `{"users": [{"user": "app"}]}`,
		"no name":           `{"users": [{"scramSHA256": {}}]}`,
		"unknown field":     `{"users": [{"user": "app", "password": "cleartext"}]}`,
		"duplicate":         `{"users": [{"user": "CN=a", "x509": true}, {"user": "CN=a", "x509": true}]}`,
		"x509 not external": `{"users": [{"user": "CN=a", "db": "admin", "x509": true}]}`,
		"few iterations": `{"users": [{"user": "app", "scramSHA256": {"salt": "c2FsdHNhbHRzYWx0", "iterations": 100, "storedKey": "` +
			strings.Repeat("A", 43) + `=", "serverKey": "` + strings.Repeat("B", 43) + `="}}]}`,
		"not JSON": `users: []`,
	} {
		if _, err := proxy.ParseUsers([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "users file") {
			t.Errorf("%s: %v does not name the users file", name, err)
		}
	}
	// A user naming an upstream the proxy does not have is refused.
	rs := startReplicaSet(t, 1)
	client, err := mongopool.NewClient(rs.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	bad, _ := proxy.NewUsers([]proxy.User{mustDerive(t, "x", "y", "nowhere")})
	if _, err := proxy.New(client, proxy.Config{Users: bad}); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Fatalf("a user of an unknown upstream: %v", err)
	}
	_ = context.Background
}

// A failed authentication is logged with who and from where, never with
// a secret.
func TestFailedAuthenticationLogged(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log lockedLog
	logger := slog.New(slog.NewTextHandler(&log, nil))
	_, addr := startAuthProxy(t, rs.URI(), []proxy.User{mustDerive(t, "alice", "right-pw", "")}, nil, proxy.Config{Logger: logger})
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://alice:wrong-s3cret@" + addr + "/").SetServerSelectionTimeout(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Disconnect(context.Background())
	if err := cl.Ping(testContext(t), nil); err == nil {
		t.Fatal("a wrong password got in")
	}
	text := log.String()
	if !strings.Contains(text, "authentication failed") || !strings.Contains(text, "user=alice") || !strings.Contains(text, "remote=127.0.0.1:") {
		t.Fatalf("the log does not say who failed from where:\n%s", text)
	}
	for _, secret := range []string{"wrong-s3cret", "right-pw", "payload"} {
		if strings.Contains(text, secret) {
			t.Fatalf("the log holds %q:\n%s", secret, text)
		}
	}
}

// The commands mongod runs before authentication work through the proxy
// too: buildInfo (which shells send first), ping, endSessions.
func TestCommandsBeforeAuthentication(t *testing.T) {
	rs := startReplicaSet(t, 1)
	_, addr := startAuthProxy(t, rs.URI(), []proxy.User{mustDerive(t, "alice", "a", "")}, nil, proxy.Config{})
	c := dialRaw(t, addr)
	c.roundTrip(mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}))
	for _, cmd := range []bson.D{
		{{Key: "buildInfo", Value: 1}, {Key: "$db", Value: "admin"}},
		{{Key: "buildinfo", Value: 1}, {Key: "$db", Value: "admin"}},
		{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}},
		{{Key: "endSessions", Value: bson.A{}}, {Key: "$db", Value: "admin"}},
	} {
		if reply := c.roundTrip(mustMarshal(t, cmd)); reply.Lookup("ok").Double() != 1 {
			t.Fatalf("%v before authenticating: %v", cmd[0].Key, reply)
		}
	}
	for _, name := range []string{"find", "getMore", "killCursors", "proxyStatus", "listDatabases"} {
		var v any = "c"
		if name == "getMore" {
			v = int64(1)
		}
		if reply := c.roundTrip(mustMarshal(t, bson.D{{Key: name, Value: v}, {Key: "$db", Value: "admin"}})); reply.Lookup("code").Int32() != 13 {
			t.Fatalf("%s before authenticating: %v, want Unauthorized", name, reply)
		}
	}
}

// The server refusing the proxy's upstream credential is answered at once
// with AuthenticationFailed, saying that the proxy's credential was
// refused, and not held as a failed server is. A state change while
// authenticating ("interrupted at shutdown") is the server's: the operation
// is held, retried, and succeeds.
func TestUpstreamCredentialRefused(t *testing.T) {
	rs := startReplicaSet(t, 1)
	primary := rs.Primary()
	if err := primary.AddUser("admin", "proxyA", "pa"); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)

	p, addr := startProxy(t, "mongodb://proxyA:wrong@"+primary.Addr()+"/?replicaSet=rs0", proxy.Mongos, proxy.Config{})
	err := driverClient(t, "mongodb://"+addr+"/").Database("db").Collection("c").FindOne(ctx, bson.D{}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 18 || !strings.Contains(ce.Message, "refused the proxy's upstream credential") {
		t.Fatalf("a refused upstream credential: %v, want AuthenticationFailed naming the proxy's credential", err)
	}
	if st := p.Stats(); st.Held != 0 {
		t.Errorf("the operation was held %d times", st.Held)
	}

	// The fail point changes nothing of the server's state, which a
	// streaming monitor would wait a heartbeat to find the same: the
	// shortest heartbeat has the server found again within 500ms.
	p, addr = startProxy(t, "mongodb://proxyA:pa@"+primary.Addr()+"/?replicaSet=rs0&heartbeatFrequencyMS=500", proxy.Mongos, proxy.Config{})
	if err := primary.SetFailPoint(mongotest.FailPoint{Commands: []string{"saslContinue"}, ErrorCode: 11600, Times: 1}); err != nil {
		t.Fatal(err)
	}
	err = driverClient(t, "mongodb://"+addr+"/").Database("db").Collection("c").FindOne(ctx, bson.D{}).Err()
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("a state change while authenticating upstream: %v, want the operation held and retried", err)
	}
	if st := p.Stats(); st.Held == 0 || primary.Stats().FailCommandFired != 1 {
		t.Errorf("held %d times, the fail point fired %d times", st.Held, primary.Stats().FailCommandFired)
	}
	// An overloaded server's refusal is its state too.
	if err := primary.SetFailPoint(mongotest.FailPoint{Commands: []string{"saslContinue"}, ErrorCode: 462, Times: 1,
		ErrorLabels: []string{"SystemOverloadedError", "RetryableError"}}); err != nil {
		t.Fatal(err)
	}
	for _, pl := range upstreamOf(t, p, "").Pools() {
		pl.Clear(pool.ClearOptions{KeepReady: true}) // a new connection, which authenticates
	}
	err = driverClient(t, "mongodb://"+addr+"/").Database("db").Collection("c").FindOne(ctx, bson.D{}).Err()
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("an overloaded server while authenticating upstream: %v, want the operation retried", err)
	}
	if fired := primary.Stats().FailCommandFired; fired != 2 {
		t.Errorf("the fail point fired %d times in all, want 2", fired)
	}
}

// SetUpstreams replaces an upstream credential's client together with the
// users: connections authenticated after it are served by the new client;
// one authenticated before closes between operations, and its driver's next
// operation, retried on a new connection, is served by the new client too.
// Users that name an upstream the new set lacks are refused, and nothing
// changes. A client the proxy still holds that is closed under a connection
// answers its operations with a clear error, which no driver retries.
func TestSetUpstreams(t *testing.T) {
	rs := startReplicaSet(t, 1)
	primary := rs.Primary()
	for _, u := range []string{"proxyA", "proxyB"} {
		if err := primary.AddUser("admin", u, u+"-pw"); err != nil {
			t.Fatal(err)
		}
	}
	uri := func(user string) string {
		return "mongodb://" + user + ":" + user + "-pw@" + primary.Addr() + "/?replicaSet=rs0"
	}
	client, err := mongopool.NewClient(uri("proxyA"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	shared := func(user string) *mongopool.Client {
		c, err := mongopool.NewClient(uri(user), mongopool.WithSharedTopology(client))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	oldReports, newReports := shared("proxyA"), shared("proxyB")
	users, err := proxy.NewUsers([]proxy.User{mustDerive(t, "bob", "bob-pw", "reports")})
	if err != nil {
		t.Fatal(err)
	}
	p, addr := startProxyOf(t, client, proxy.Mongos, proxy.Config{Users: users, Upstreams: map[string]*mongopool.Client{"reports": oldReports}})
	ctx := testContext(t)
	checkedOut := func(c *mongopool.Client) (n int64) {
		for _, pl := range c.Pools() {
			n += pl.Stats().CheckedOut
		}
		return n
	}
	find := func(c *mongo.Client) error {
		err := c.Database("db").Collection("c").FindOne(ctx, bson.D{}).Err()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		return err
	}
	// servedBy runs a find on c and reports whether want served it, and
	// not the other.
	servedBy := func(c *mongo.Client, want, other *mongopool.Client) bool {
		t.Helper()
		w, o := checkedOut(want), checkedOut(other)
		if err := find(c); err != nil {
			t.Fatal(err)
		}
		return checkedOut(want) == w+1 && checkedOut(other) == o
	}
	before := driverClient(t, "mongodb://bob:bob-pw@"+addr+"/?maxPoolSize=1")
	if !servedBy(before, oldReports, newReports) {
		t.Fatal("bob's find was not served by the upstream his user names")
	}

	// A user of an upstream the new set lacks: refused.
	if err := p.SetUpstreams(map[string]*mongopool.Client{"other": newReports}, nil); err == nil || !strings.Contains(err.Error(), `"reports"`) {
		t.Fatalf("SetUpstreams without the users' upstream: %v", err)
	}
	if p.Upstream("reports") != oldReports || p.Upstream("other") != nil {
		t.Fatal("a refused SetUpstreams changed the upstreams")
	}

	if err := p.Pause("reports", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := p.SetUpstreams(map[string]*mongopool.Client{"reports": newReports}, users); err != nil {
		t.Fatal(err)
	}
	if n := p.PausedUpstreams(); n != 0 {
		t.Errorf("the pause of the client SetUpstreams removed goes on: %d paused", n)
	}
	if err := oldReports.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	after := driverClient(t, "mongodb://bob:bob-pw@"+addr+"/?maxPoolSize=1")
	if !servedBy(after, newReports, oldReports) {
		t.Error("a connection authenticated after SetUpstreams was not served by the new client")
	}
	if !servedBy(before, newReports, oldReports) {
		t.Error("the driver of a connection authenticated before SetUpstreams was not served by the new client")
	}

	// The client the proxy holds, closed under its connections.
	if err := newReports.Close(); err != nil {
		t.Fatal(err)
	}
	var ce mongo.CommandError
	if err := find(after); !errors.As(err, &ce) || ce.Code != 1 || !strings.Contains(ce.Message, "is closed") {
		t.Errorf("a closed client the proxy holds: %v, want InternalError saying so", err)
	}
}
