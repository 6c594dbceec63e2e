package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"

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
