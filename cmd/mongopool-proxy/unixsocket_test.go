package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// unixURI is the connection string of the Unix socket at path.
func unixURI(path string) string { return "mongodb://" + url.PathEscape(path) + "/" }

// connectUnix connects the Go driver to the proxy at the socket path.
func connectUnix(t *testing.T, path string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(unixURI(path)).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	return c
}

// processID returns the topologyVersion processId of the proxy serving c:
// which process answered.
func processID(t *testing.T, ctx context.Context, c *mongo.Client) bson.ObjectID {
	t.Helper()
	var hello struct {
		Msg             string
		TopologyVersion struct{ ProcessID bson.ObjectID }
	}
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatal(err)
	}
	if hello.Msg != "isdbgrid" {
		t.Fatalf("hello says %q: not the proxy", hello.Msg)
	}
	return hello.TopologyVersion.ProcessID
}

func TestUnixSocketListener(t *testing.T) {
	rs := startRS(t)
	path := filepath.Join(t.TempDir(), "mongopool.sock")
	d := startDaemon(t, "-upstream", rs.URI(), "-listen", path, "-unix-socket-mode", "0770")
	if d.addr != path {
		t.Errorf("listening on %q, want %q", d.addr, path)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o770 {
		t.Errorf("%s: mode %v, want a socket with 0770", path, fi.Mode())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := connectUnix(t, path)
	coll := c.Database("db").Collection("unix")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("count = %d, %v; want 1", n, err)
	}
	// A client of the socket is on the proxy's host: without
	// authentication, it may pause and resume, as a loopback one.
	for _, cmd := range []bson.D{{{Key: "proxyPause", Value: ""}, {Key: "timeoutMS", Value: 60000}}, {{Key: "proxyResume", Value: ""}}} {
		if err := c.Database("admin").RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	c.Disconnect(ctx)
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the socket file is still there after the command stopped (%v)", err)
	}
}

func TestUnixSocketFileInTheWay(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file.sock")
	if err := os.WriteFile(file, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct {
		path, want string
	}{
		{file, "is not a socket"},
		{live, "another process listens on " + live + ": stop it, or give -reuse-port"},
	} {
		var stderr strings.Builder
		if code := run(context.Background(), []string{"-admin", "", "-listen", c.path}, io.Discard, &stderr); code == 0 {
			t.Errorf("-listen %s: exit 0, want an error", c.path)
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("-listen %s: stderr %q, want it to say %q", c.path, stderr.String(), c.want)
		}
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "data" {
		t.Errorf("the file in the way was touched: %q, %v", data, err)
	}
}

// A socket file that nobody serves, left by a crash, is replaced.
func TestUnixSocketStaleFile(t *testing.T) {
	rs := startRS(t)
	path := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	startDaemon(t, "-upstream", rs.URI(), "-listen", path)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := connectUnix(t, path).Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// A rolling restart on a Unix socket: the new process takes the path over
// (-reuse-port), the old one serves its connections until it stops, and
// leaves the path, now the new one's, in place.
func TestUnixSocketRollingRestart(t *testing.T) {
	rs := startRS(t)
	path := filepath.Join(t.TempDir(), "rolling.sock")
	args := []string{"-upstream", rs.URI(), "-listen", path, "-reuse-port"}
	old := startDaemon(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := connectUnix(t, path)
	oldID := processID(t, ctx, before)

	startDaemon(t, args...)
	after := connectUnix(t, path)
	if id := processID(t, ctx, after); id == oldID {
		t.Fatal("a new client reached the old process after the new one took the socket over")
	}
	if id := processID(t, ctx, before); id != oldID {
		t.Fatal("the old process's client moved")
	}
	before.Disconnect(ctx)
	if code := old.stop(); code != 0 {
		t.Fatalf("the old process: exit %d", code)
	}
	if err := after.Ping(ctx, nil); err != nil {
		t.Fatalf("the new process, after the old one stopped: %v", err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("the old process removed the new one's socket: %v", err)
	}
}
