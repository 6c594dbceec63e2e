package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/proxy"
)

// daemon is the command run in-process with a reload channel, its
// standard output read line by line.
type daemon struct {
	t      *testing.T
	cancel context.CancelFunc
	reload chan struct{}
	lines  chan string
	done   chan int
	addr   string
	admin  string // host:port of the admin listener, when given one
}

// startDaemon runs the command with args (and no admin listener), and
// returns once it listens.
func startDaemon(t *testing.T, args ...string) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	d := &daemon{t: t, cancel: cancel, reload: make(chan struct{}, 1), lines: make(chan string, 100), done: make(chan int, 1)}
	go func() {
		code := runWith(ctx, append([]string{"-admin", ""}, args...), strings.NewReader(""), pw, io.Discard, d.reload)
		pw.Close()
		d.done <- code
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
	}()
	t.Cleanup(func() { d.stop() })
	line := d.next("listening on ")
	d.addr, _, _ = strings.Cut(strings.TrimPrefix(line, "listening on "), " ")
	return d
}

// next returns the next line of the output that starts with prefix.
func (d *daemon) next(prefix string) string {
	d.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				d.t.Fatalf("the command ended before printing %q", prefix)
			}
			if a, ok := strings.CutPrefix(line, "admin on http://"); ok {
				d.admin, _, _ = strings.Cut(a, "/")
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-deadline:
			d.t.Fatalf("no %q line within 30 s", prefix)
		}
	}
}

// doReload asks for a reload and returns its outcome line.
func (d *daemon) doReload() string {
	d.t.Helper()
	d.reload <- struct{}{}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line := <-d.lines:
			if strings.HasPrefix(line, "reload") {
				return line
			}
		case <-deadline:
			d.t.Fatal("no reload outcome within 30 s")
		}
	}
}

// stop drains the command and waits for it; it reports the exit status.
func (d *daemon) stop() int {
	d.cancel()
	go func() {
		for range d.lines {
		}
	}()
	select {
	case code := <-d.done:
		d.done <- code
		return code
	case <-time.After(40 * time.Second):
		d.t.Error("the command did not stop within 40 s")
		return -1
	}
}

func writeFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// deriveWithCommand runs the user subcommand and returns its entry.
func deriveWithCommand(t *testing.T, password string, args ...string) proxy.User {
	t.Helper()
	var out, errOut strings.Builder
	if code := runWith(context.Background(), append([]string{"user"}, args...), strings.NewReader(password+"\n"), &out, &errOut, nil); code != 0 {
		t.Fatalf("user %q: exit %d: %s", args, code, errOut.String())
	}
	if strings.Contains(out.String(), password) {
		t.Fatal("the entry holds the password")
	}
	var u proxy.User
	if err := json.Unmarshal([]byte(out.String()), &u); err != nil {
		t.Fatalf("the entry %q: %v", out.String(), err)
	}
	return u
}

func connectAs(t *testing.T, uri string) (*mongo.Client, error) {
	t.Helper()
	c, err := mongo.Connect(options.Client().SetServerSelectionTimeout(20 * time.Second).ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c, c.Database("db").Collection("c").FindOne(ctx, bson.D{}).Err()
}

func startRS(t *testing.T) *mongotest.ReplicaSet {
	t.Helper()
	rs, err := mongotest.StartReplicaSet("rs0", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return rs
}

func TestUsersAndReload(t *testing.T) {
	rs := startRS(t)
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	config := filepath.Join(dir, "config.json")
	alice := deriveWithCommand(t, "alice-pw", "alice")
	writeFile(t, users, map[string]any{"users": []proxy.User{alice}})
	writeFile(t, config, map[string]any{"maxClients": 100})
	// The rate limit of failed authentications (tested in package proxy)
	// out of the way of the failures this test makes on purpose.
	d := startDaemon(t, "-upstream", rs.URI(), "-listen", "127.0.0.1:0", "-users", users, "-config", config, "-max-auth-failures", "100000")

	if _, err := connectAs(t, "mongodb://alice:alice-pw@"+d.addr+"/"); err != nil && err != mongo.ErrNoDocuments {
		t.Fatalf("alice: %v", err)
	}
	if _, err := connectAs(t, "mongodb://bob:bob-pw@"+d.addr+"/"); err == nil || !strings.Contains(err.Error(), "Authentication failed") {
		t.Fatalf("bob before he is added: %v", err)
	}
	// Bob is added: after the reload he gets in.
	bob := deriveWithCommand(t, "bob-pw", "-mechanisms", "SCRAM-SHA-1,SCRAM-SHA-256", "bob")
	writeFile(t, users, map[string]any{"users": []proxy.User{alice, bob}})
	if out := d.doReload(); out != "reloaded" {
		t.Fatalf("reload: %s", out)
	}
	if _, err := connectAs(t, "mongodb://bob:bob-pw@"+d.addr+"/?authMechanism=SCRAM-SHA-1"); err != nil && err != mongo.ErrNoDocuments {
		t.Fatalf("bob after the reload: %v", err)
	}
	// A bad users file is refused, and the users stay as they were.
	if err := os.WriteFile(users, []byte(`{"users": [{"user": "mallory", "password": "cleartext"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := d.doReload(); !strings.HasPrefix(out, "reload refused") || !strings.Contains(out, "users") {
		t.Fatalf("reload of a bad users file: %s", out)
	}
	if _, err := connectAs(t, "mongodb://bob:bob-pw@"+d.addr+"/"); err != nil && err != mongo.ErrNoDocuments {
		t.Fatalf("bob after a refused reload: %v", err)
	}
	// The limits change with the config file: maxClients 1 refuses more.
	writeFile(t, users, map[string]any{"users": []proxy.User{alice, bob}})
	writeFile(t, config, map[string]any{"maxClients": 1})
	if out := d.doReload(); out != "reloaded" {
		t.Fatalf("reload: %s", out)
	}
	_, err := connectAs(t, "mongodb://alice:alice-pw@"+d.addr+"/")
	if err == nil || !strings.Contains(err.Error(), "too many client connections") {
		t.Fatalf("a client beyond maxClients 1: %v", err)
	}
	// A bad config file is refused.
	if err := os.WriteFile(config, []byte(`{"maxClients": -5, "queueTimeout": "soon"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := d.doReload(); !strings.HasPrefix(out, "reload refused") {
		t.Fatalf("reload of a bad config file: %s", out)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestTLSAndX509(t *testing.T) {
	rs := startRS(t)
	pki := testpki.New(t)
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	writeFile(t, users, map[string]any{"users": []proxy.User{
		deriveWithCommand(t, "pw", "app"),
		{Name: pki.ClientSubject, DB: "$external", X509: true},
	}})
	d := startDaemon(t, "-upstream", rs.URI(), "-listen", "127.0.0.1:0", "-users", users, "-max-auth-failures", "100000",
		"-tls-cert", pki.ServerCertFile, "-tls-key", pki.ServerKeyFile, "-tls-ca", pki.CAFile)
	tlsOpts := "tls=true&tlsCAFile=" + pki.CAFile
	if _, err := connectAs(t, "mongodb://app:pw@"+d.addr+"/?"+tlsOpts); err != nil && err != mongo.ErrNoDocuments {
		t.Fatalf("SCRAM over TLS: %v", err)
	}
	if _, err := connectAs(t, "mongodb://"+d.addr+"/?authMechanism=MONGODB-X509&"+tlsOpts+"&tlsCertificateKeyFile="+pki.ClientFile); err != nil && err != mongo.ErrNoDocuments {
		t.Fatalf("X.509: %v", err)
	}
	if _, err := connectAs(t, "mongodb://app:pw@"+d.addr+"/?serverSelectionTimeoutMS=3000"); err == nil {
		t.Fatal("a plain TCP client of a TLS listener got in")
	}
	// The certificate files are read again at a reload: a new PKI's
	// certificate serves the next handshakes, which the old CA rejects.
	next := testpki.New(t)
	for src, dst := range map[string]string{next.ServerCertFile: pki.ServerCertFile, next.ServerKeyFile: pki.ServerKeyFile, next.CAFile: pki.CAFile} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := testpki.New(t) // a CA the new certificate is not signed by
	if out := d.doReload(); out != "reloaded" {
		t.Fatalf("reload: %s", out)
	}
	if _, err := connectAs(t, "mongodb://app:pw@"+d.addr+"/?tls=true&tlsCAFile="+next.CAFile); err != nil && err != mongo.ErrNoDocuments {
		t.Fatalf("after the certificate reload, with the new CA: %v", err)
	}
	if _, err := connectAs(t, "mongodb://app:pw@"+d.addr+"/?tls=true&tlsCAFile="+old.CAFile); err == nil {
		t.Fatal("after the certificate reload, a client of another CA got in")
	}
}

func TestUserSubcommandErrors(t *testing.T) {
	for _, c := range []struct {
		stdin string
		args  []string
	}{{"", []string{"alice"}}, {"pw\n", nil}, {"pw\n", []string{"-mechanisms", "MD5", "alice"}}} {
		var errOut strings.Builder
		if code := runWith(context.Background(), append([]string{"user"}, c.args...), strings.NewReader(c.stdin), io.Discard, &errOut, nil); code == 0 {
			t.Errorf("user %q with %q on stdin: exit 0", c.args, c.stdin)
		}
	}
}

// A rolling restart: a second process takes the port over with
// SO_REUSEPORT, the first drains; a client under load loses no
// acknowledged write and stores none twice, and its operations go on
// through the new process. The drain's end closes connections the driver
// still has (its monitor's stream among them): the driver clears its pool,
// and an operation checking a connection out at that instant may fail with
// the clear's error even after its one retry (the Go driver's monitor
// updates the server's description and clears its pool while a selection
// may still see the description before; seen in about one run in ten).
// Such failures are allowed, as retryable errors, at most one per worker:
// any other error fails the test.
func TestRollingRestart(t *testing.T) {
	rs := startRS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := []string{"-upstream", rs.URI(), "-listen", addr, "-reuse-port", "-shutdown-timeout", "10s"}
	old := startDaemon(t, args...)
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	coll := client.Database("db").Collection("rolling")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var acked sync.Map
	var failed, done atomic.Int64
	var firstErr, otherErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%d-%d", w, i)
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					if !clearedOrNetwork(err) {
						otherErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				acked.Store(id, true)
				done.Add(1)
			}
		}()
	}
	waitOps := func(n int64) {
		for start := done.Load(); done.Load() < start+n; time.Sleep(5 * time.Millisecond) {
			if ctx.Err() != nil {
				t.Fatalf("no %d operations in time", n)
			}
		}
	}
	waitOps(200)
	next := startDaemon(t, args...) // the new process, on the same port
	waitOps(200)
	if code := old.stop(); code != 0 { // its drain
		t.Fatalf("the old process exited with %d", code)
	}
	waitOps(500) // all through the new one now
	close(stop)
	wg.Wait()
	if e := otherErr.Load(); e != nil {
		t.Fatalf("an operation failed in the rolling restart with an error other than a pool clear's or a network error: %v", e)
	}
	if f := failed.Load(); f > 8 {
		t.Fatalf("%d operations failed in the rolling restart, more than one per worker (first: %v)", f, firstErr.Load())
	}
	n := int64(0)
	acked.Range(func(_, _ any) bool { n++; return true })
	total, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil || total != n {
		t.Fatalf("%d documents for %d acknowledged inserts (%v)", total, n, err)
	}
	t.Logf("%d acknowledged inserts through a rolling restart, %d failed (first: %v)", n, failed.Load(), firstErr.Load())
	_ = next
}

// clearedOrNetwork reports whether err is a driver's pool clear or a
// network error: what a connection closed under the driver causes.
func clearedOrNetwork(err error) bool {
	return mongo.IsNetworkError(err) || strings.Contains(err.Error(), "connection pool for ") && strings.Contains(err.Error(), " was cleared")
}

func TestAdminPauseResume(t *testing.T) {
	rs := startRS(t)
	mongos, _, admin := startCommand(t, "-upstream", rs.URI(), "-listen", "127.0.0.1:0")
	post := func(path string) int {
		resp, err := http.Post("http://"+admin+path, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/pause?timeout=bad"); code != http.StatusBadRequest {
		t.Fatalf("a bad timeout: %d", code)
	}
	if code := post("/pause?timeout=30s"); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + mongos[0] + "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Database("db").Collection("c").InsertOne(context.Background(), bson.D{})
		done <- err
	}()
	// The insert waits in the proxy's queue, as its metrics show.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(httpGet(t, "http://"+admin+"/metrics"), "mongopool_proxy_queued_operations 1"); time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("an insert while paused ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the insert never queued")
		}
	}
	if code := post("/resume"); code != http.StatusOK {
		t.Fatalf("resume: %d", code)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the held insert: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held insert did not end after the resume")
	}
	if code := post("/reconnect?upstream=nope"); code != http.StatusBadRequest {
		t.Fatalf("reconnect of an unknown upstream: %d, want 400", code)
	}
	if code := post("/reconnect"); code != http.StatusOK {
		t.Fatalf("reconnect: %d", code)
	}
}

// Several certificates: the client's server name (SNI) picks one.
func TestTLSCertificateBySNI(t *testing.T) {
	rs := startRS(t)
	one, two := testpki.New(t, "one.test"), testpki.New(t, "two.test")
	d := startDaemon(t, "-upstream", rs.URI(), "-listen", "127.0.0.1:0",
		"-tls-cert", one.ServerCertFile, "-tls-key", one.ServerKeyFile, "-tls-cert", two.ServerCertFile, "-tls-key", two.ServerKeyFile)
	for _, c := range []struct {
		name string
		pki  *testpki.PKI
	}{{"one.test", one}, {"two.test", two}} {
		conn, err := tls.Dial("tcp", d.addr, &tls.Config{ServerName: c.name, RootCAs: c.pki.CAPool})
		if err != nil {
			t.Fatalf("TLS to %s: %v", c.name, err)
		}
		if got := conn.ConnectionState().PeerCertificates[0].DNSNames; len(got) == 0 || got[0] != c.name {
			t.Fatalf("the certificate for %s names %v", c.name, got)
		}
		conn.Close()
	}
}

// busyPollStatus returns the busyPoll part of proxyStatus.
func busyPollStatus(t *testing.T, ctx context.Context, c *mongo.Client) (budgetMicros, polls int64) {
	t.Helper()
	var st struct {
		BusyPoll struct{ BudgetMicros, Polls int64 }
	}
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "proxyStatus", Value: 1}}).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.BusyPoll.BudgetMicros, st.BusyPoll.Polls
}

// -config's busyPoll sets the budget over -busy-poll's, and a reload
// changes it: 0 stops polling, and a bad value is refused.
func TestBusyPollConfig(t *testing.T) {
	rs := startRS(t)
	config := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, config, map[string]any{"busyPoll": "0s"})
	d := startDaemon(t, "-upstream", rs.URI(), "-listen", "127.0.0.1:0", "-config", config)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + d.addr + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	pings := func() {
		for range 20 {
			if err := c.Ping(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if err := c.Database("db").RunCommand(ctx, bson.D{{Key: "count", Value: "c"}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	pings()
	if budget, polls := busyPollStatus(t, ctx, c); budget != 0 || polls != 0 {
		t.Errorf("with busyPoll 0s: budget %dµs, %d polls; want none", budget, polls)
	}

	writeFile(t, config, map[string]any{"busyPoll": "1ms"})
	if out := d.doReload(); out != "reloaded" {
		t.Fatalf("reload: %q", out)
	}
	budget, _ := busyPollStatus(t, ctx, c)
	if budget == 0 {
		t.Skip("this machine does not poll (one CPU, or not Linux)")
	}
	if budget != 1000 {
		t.Errorf("after a reload with busyPoll 1ms: budget %dµs", budget)
	}
	pings()
	if _, polls := busyPollStatus(t, ctx, c); polls == 0 {
		t.Error("no poll after busyPoll went to 1ms")
	}

	writeFile(t, config, map[string]any{"busyPoll": "5ms"})
	if out := d.doReload(); !strings.HasPrefix(out, "reload refused") || !strings.Contains(out, "busyPoll 5ms is out of [0, 1ms]") {
		t.Errorf("reload of busyPoll 5ms: %q, want it refused", out)
	}
	if budget, _ := busyPollStatus(t, ctx, c); budget != 1000 {
		t.Errorf("after a refused reload: budget %dµs, want 1000 still", budget)
	}
}

// The daemon in front of a load balancer: -upstream with loadBalanced=true
// is taken, and -max-pinned bounds the connections its cursors hold: a
// second cursor beyond it is refused with the retryable overload error
// that names the flag, and the first one's end makes room.
func TestLoadBalancedUpstreamDaemon(t *testing.T) {
	s, err := mongotest.Start(mongotest.WithLoadBalanced(bson.NewObjectID()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	direct, err := mongo.Connect(options.Client().ApplyURI(s.URI() + "?loadBalanced=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Disconnect(ctx)
	if _, err := direct.Database("db").Collection("c").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "-upstream", s.URI()+"?loadBalanced=true", "-listen", "127.0.0.1:0", "-max-pinned", "1")
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + d.addr + "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(ctx)
	db := c.Database("db")
	find := bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}
	first, err := db.RunCommand(ctx, find).Raw()
	if err != nil {
		t.Fatal(err)
	}
	err = db.RunCommand(ctx, find).Err()
	if err == nil || !strings.Contains(err.Error(), "max-pinned") {
		t.Fatalf("a second cursor with -max-pinned 1: %v, want the overload error naming the flag", err)
	}
	id := first.Lookup("cursor", "id").Int64()
	n := 1
	for id != 0 {
		reply, err := db.RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 1}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		id = reply.Lookup("cursor", "id").Int64()
		docs, _ := reply.Lookup("cursor", "nextBatch").Array().Values()
		n += len(docs)
	}
	if n != 3 {
		t.Fatalf("%d documents through the held connection, want 3", n)
	}
	if err := db.RunCommand(ctx, find).Err(); err != nil {
		t.Fatalf("a cursor once the first ended: %v", err)
	}
}
