package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/internal/testkit"
	"github.com/mongopool/mongopool/proxy"
)

// TestUpstreamCredentials runs the command with an -upstream-as credential
// beside -upstream's. Each user's operations reach the servers as its
// upstream credential: while the server lacks the -upstream-as credential,
// its users' operations fail with the server's refusal and the others' go
// on; once the server has it, they succeed. The credentials share one
// topology: one "Starting topology monitoring" in the debug log, one
// awaitable hello streaming. An -upstream-as that names another deployment
// keeps the command from starting, saying what differs.
func TestUpstreamCredentials(t *testing.T) {
	rs := startRS(t)
	primary := rs.Primary()
	if err := primary.AddUser("admin", "proxyA", "proxyA-pw"); err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(t.TempDir(), "users.json")
	writeFile(t, users, map[string]any{"users": []proxy.User{
		deriveWithCommand(t, "alice-pw", "alice"),
		deriveWithCommand(t, "bob-pw", "-upstream", "reports", "bob"),
	}})
	upstream := func(user string) string {
		return "mongodb://" + user + ":" + user + "-pw@" + primary.Addr() + "/?replicaSet=rs0"
	}
	logs := &syncBuffer{}
	mongos, _, _ := startCommandLogging(t, logs, "-upstream", upstream("proxyA"), "-upstream-as", "reports="+upstream("proxyB"),
		"-listen", "127.0.0.1:0", "-users", users, "-log-level", "debug")
	find := func(user string) error {
		_, err := connectAs(t, "mongodb://"+user+":"+user+"-pw@"+mongos[0]+"/?retryReads=false")
		if err == mongo.ErrNoDocuments {
			err = nil
		}
		return err
	}

	if err := find("bob"); err == nil || !strings.Contains(err.Error(), "Authentication failed") {
		t.Fatalf("bob while the server lacks proxyB: %v, want the server's refusal", err)
	}
	if err := find("alice"); err != nil {
		t.Fatalf("alice after bob's upstream credential was refused: %v", err)
	}
	if err := primary.AddUser("admin", "proxyB", "proxyB-pw"); err != nil {
		t.Fatal(err)
	}
	var err error
	testkit.WaitFor(t, "bob's find to succeed once the server has proxyB", func() bool { err = find("bob"); return err == nil })

	testkit.WaitFor(t, "one awaitable hello streaming", func() bool { return primary.Stats().HellosAwaiting == 1 })
	if got := strings.Count(logs.String(), "Starting topology monitoring"); got != 1 {
		t.Errorf("%d topologies opened, want 1 shared by the credentials", got)
	}
	if strings.Contains(logs.String(), `"newDescription":"{\"type\": \"Unknown\"`) {
		t.Errorf("a server was marked Unknown:\n%s", logs.String())
	}

	// Another deployment's hosts.
	var stderr strings.Builder
	code := run(context.Background(), []string{"-admin", "", "-listen", "127.0.0.1:0", "-upstream", upstream("proxyA"),
		"-upstream-as", "reports=mongodb://proxyB:proxyB-pw@127.0.0.1:1/?replicaSet=rs0"}, io.Discard, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "-upstream-as reports") || !strings.Contains(stderr.String(), "the hosts differ") {
		t.Errorf("an -upstream-as of another deployment: exit %d, %s", code, stderr.String())
	}
}

// TestReloadUpstreams reloads the config file's upstream credentials: a
// reload that changes one's URI replaces its client, and the users' next
// operations reach the servers with the new credential (here a wrong
// password, then a good one again); a reload that removes one that a user
// still names, or gives one an -upstream-as has, is refused, and the
// running configuration stays.
func TestReloadUpstreams(t *testing.T) {
	rs := startRS(t)
	primary := rs.Primary()
	for _, u := range []string{"proxyA", "proxyB"} {
		if err := primary.AddUser("admin", u, u+"-pw"); err != nil {
			t.Fatal(err)
		}
	}
	uri := func(user, password string) string {
		return "mongodb://" + user + ":" + password + "@" + primary.Addr() + "/?replicaSet=rs0"
	}
	dir := t.TempDir()
	users, config := filepath.Join(dir, "users.json"), filepath.Join(dir, "config.json")
	writeFile(t, users, map[string]any{"users": []proxy.User{deriveWithCommand(t, "bob-pw", "-upstream", "reports", "bob")}})
	writeFile(t, config, map[string]any{"upstreams": map[string]string{"reports": uri("proxyB", "proxyB-pw")}})
	d := startDaemon(t, "-upstream", uri("proxyA", "proxyA-pw"), "-upstream-as", "fixed="+uri("proxyA", "proxyA-pw"),
		"-listen", "127.0.0.1:0", "-users", users, "-config", config)
	bob, err := mongo.Connect(options.Client().ApplyURI("mongodb://bob:bob-pw@" + d.addr + "/").SetServerSelectionTimeout(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bob.Disconnect(context.Background()) })
	find := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := bob.Database("db").Collection("c").FindOne(ctx, bson.D{}).Err()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		return err
	}
	if err := find(); err != nil {
		t.Fatal(err)
	}

	writeFile(t, config, map[string]any{"upstreams": map[string]string{"reports": uri("proxyB", "wrong")}})
	if out := d.doReload(); out != "reloaded" {
		t.Fatalf("reload: %s", out)
	}
	if err := find(); err == nil || !strings.Contains(err.Error(), "refused the proxy's upstream credential") {
		t.Fatalf("after a reload gave reports a wrong password: %v", err)
	}
	writeFile(t, config, map[string]any{"upstreams": map[string]string{"reports": uri("proxyB", "proxyB-pw")}})
	if out := d.doReload(); out != "reloaded" {
		t.Fatalf("reload: %s", out)
	}
	if err := find(); err != nil {
		t.Fatalf("after a reload gave reports its password back: %v", err)
	}

	for _, c := range []struct {
		upstreams map[string]string
		want      string
	}{
		{map[string]string{}, `"reports"`},
		{map[string]string{"reports": uri("proxyB", "proxyB-pw"), "fixed": uri("proxyB", "proxyB-pw")}, "-upstream-as"},
		{map[string]string{"reports": "mongodb://proxyB:proxyB-pw@127.0.0.1:1/?replicaSet=rs0"}, "the hosts differ"},
	} {
		writeFile(t, config, map[string]any{"upstreams": c.upstreams})
		if out := d.doReload(); !strings.HasPrefix(out, "reload refused") || !strings.Contains(out, c.want) {
			t.Errorf("a reload of upstreams %v: %s, want it refused saying %s", c.upstreams, out, c.want)
		}
		if err := find(); err != nil {
			t.Fatalf("after a refused reload: %v", err)
		}
	}
	// The driver first, while the proxy answers its endSessions.
	if err := bob.Disconnect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// The admin listener's metrics show the pools of an upstream's client now:
// a reload that replaces or removes it changes what they show, under the
// same name.
func TestAdminFollowsUpstreamClients(t *testing.T) {
	rs := startRS(t)
	a, err := newAdmin()
	if err != nil {
		t.Fatal(err)
	}
	c, err := mongopool.Connect(t.Context(), rs.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, step := range []struct {
		c    *mongopool.Client
		want bool
	}{{c, true}, {nil, false}, {c, true}} {
		a.setUpstream("reports", step.c)
		n, err := testutil.GatherAndCount(registry(t, a), "mongopool_connections")
		if err != nil {
			t.Fatal(err)
		}
		if (n > 0) != step.want {
			t.Errorf("with client %p: %d series of the upstream's pools", step.c, n)
		}
	}
}

func registry(t *testing.T, a *adminServer) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(a.pools); err != nil {
		t.Fatal(err)
	}
	return reg
}
