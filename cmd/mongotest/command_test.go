package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/leakcheck"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// These tests run the command as a test suite of another language would:
// built, started as a process, used through its connection string and its
// control endpoint, and stopped.

// binary is the command, built once by TestMain.
var binary string

// raceBuild says that the tests run under the race detector, and so is the
// command built (race_test.go): a race in the command fails it with exit
// code 66.
var raceBuild bool

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mongotest-cmd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if binary, err = build(dir); err != nil {
		fmt.Fprintf(os.Stderr, "building the command: %v\n", err)
	} else if code = m.Run(); code == 0 {
		// Every deployment, client and process the tests start, they stop.
		if left := leakcheck.Remaining(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "%d goroutines left after the tests:\n\n%s\n", len(left), strings.Join(left, "\n\n"))
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// build builds the command into dir.
func build(dir string) (string, error) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, "mongotest")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, append(args, ".")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v: %s", err, out)
	}
	return bin, nil
}

// command is a running mongotest command.
type command struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *syncBuffer
	uri     string // stdout's first line
	control string // stdout's "control: " line
	tlsDir  string // stdout's "tls-dir: " line, if any
	exited  chan struct{}
}

// syncBuffer is a bytes.Buffer for a process's output, read while written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startCommand starts the command with args and a pipe as its standard
// input, and waits until it has printed its connection string and control
// URL. It is killed when the test ends, if it still runs.
func startCommand(t *testing.T, args ...string) *command {
	t.Helper()
	c := launch(t, args...)
	lines := make(chan string, 16)
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	c.start()
	deadline := time.After(testTimeout)
	for c.uri == "" || c.control == "" {
		select {
		case line, ok := <-lines:
			switch {
			case !ok:
				c.wait()
				t.Fatalf("mongotest %q ended before printing its URI and control URL; stderr:\n%s", args, c.stderr)
			case c.uri == "":
				c.uri = line
			case strings.HasPrefix(line, "tls-dir: "):
				c.tlsDir = strings.TrimPrefix(line, "tls-dir: ")
			case strings.HasPrefix(line, "control: "):
				c.control = strings.TrimPrefix(line, "control: ")
			default:
				t.Fatalf("mongotest printed %q", line)
			}
		case <-deadline:
			t.Fatalf("mongotest %q printed no URI and control URL in %v; stderr:\n%s", args, testTimeout, c.stderr)
		}
	}
	// Nothing more comes on stdout: what does is reported when the test
	// ends (not from the goroutine, which may outlive the test).
	var mu sync.Mutex
	var extra []string
	go func() {
		for line := range lines {
			mu.Lock()
			extra = append(extra, line)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if len(extra) > 0 {
			t.Errorf("mongotest printed after its start: %q", extra)
		}
	})
	return c
}

// launch prepares the command with args, for startCommand or a test that
// reads its output itself; start starts it.
func launch(t *testing.T, args ...string) *command {
	c := &command{t: t, stderr: &syncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(binary, args...)
	// A race-enabled program sleeps a second at its exit, for the races of
	// other goroutines to show: the exit code tells of them, and the tests
	// wait for no sleep.
	c.cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	c.cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *command) start() {
	c.t.Helper()
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		c.cmd.Wait()
		close(c.exited)
	}()
	c.t.Cleanup(func() {
		select {
		case <-c.exited:
			return
		default:
		}
		c.cmd.Process.Kill()
		select {
		case <-c.exited:
		case <-time.After(testTimeout):
			c.t.Errorf("mongotest (pid %d) did not end when killed", c.cmd.Process.Pid)
		}
		c.stdin.Close()
	})
}

// wait waits for the command to end and returns its exit code.
func (c *command) wait() int {
	c.t.Helper()
	select {
	case <-c.exited:
		return c.cmd.ProcessState.ExitCode()
	case <-time.After(testTimeout):
		c.t.Fatalf("mongotest did not end in %v; stderr:\n%s", testTimeout, c.stderr)
		return -1
	}
}

// stopWith sends sig and checks that the command ends with 0 and says so.
func (c *command) stopWith(sig os.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
	c.checkCleanExit()
}

func (c *command) checkCleanExit() {
	c.t.Helper()
	if code := c.wait(); code != 0 {
		c.t.Fatalf("mongotest exited with %d; stderr:\n%s", code, c.stderr)
	}
	if !strings.HasSuffix(c.stderr.String(), "mongotest: stopped\n") {
		c.t.Errorf("stderr does not end with the stop:\n%s", c.stderr)
	}
}

// waitForFile waits for path to exist, polling: a test of another
// language waits so for -uri-file.
func waitForFile(t *testing.T, path string) []byte {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			return data
		}
		if !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkGone checks that the command removed path at its end.
func checkGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is left after the stop (%v)", path, err)
	}
}

// ctx returns a context of the test, bounded by testTimeout.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return c
}

func TestCommandStandalone(t *testing.T) {
	dir := t.TempDir()
	uriFile := filepath.Join(dir, "uri")
	// A file from an earlier run is removed before anything else, so that
	// it is never read for the new one.
	if err := os.WriteFile(uriFile, []byte("mongodb://stale/"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startCommand(t, "-uri-file", uriFile)
	uri := string(waitForFile(t, uriFile))
	if uri != c.uri || !strings.HasPrefix(uri, "mongodb://127.0.0.1:") || strings.Contains(uri, "replicaSet") {
		t.Fatalf("-uri-file holds %q, stdout's first line is %q", uri, c.uri)
	}
	if !strings.HasPrefix(c.control, "http://127.0.0.1:") {
		t.Errorf("control URL %q is not on 127.0.0.1", c.control)
	}

	client := connect(t, uri)
	coll := client.Database("app").Collection("things")
	if _, err := coll.InsertMany(ctx(t), []any{bson.D{{Key: "n", Value: 1}}, bson.D{{Key: "n", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx(t), bson.D{{Key: "n", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "tag", Value: "b"}}}}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		N   int    `bson:"n"`
		Tag string `bson:"tag"`
	}
	if err := coll.FindOne(ctx(t), bson.D{{Key: "tag", Value: "b"}}).Decode(&got); err != nil || got.N != 2 {
		t.Fatalf("findOne: %+v, %v", got, err)
	}
	st := mustCall(t, "GET", c.control+"/status", "")
	if st["topology"] != "standalone" || st["uri"] != uri {
		t.Errorf("/status: %v", st)
	}

	disconnect(t, client)
	c.stopWith(syscall.SIGTERM)
	checkGone(t, uriFile)
}

func TestCommandReplicaSet(t *testing.T) {
	infoFile := filepath.Join(t.TempDir(), "info.json")
	c := startCommand(t, "-replset", "3", "-name", "set1", "-info-file", infoFile)
	var in info
	if err := json.Unmarshal(waitForFile(t, infoFile), &in); err != nil {
		t.Fatal(err)
	}
	if in.URI != c.uri || in.Control != c.control || in.Topology != "replicaSet" || in.SetName != "set1" ||
		len(in.Hosts) != 3 || in.PID != c.cmd.Process.Pid {
		t.Errorf("-info-file: %+v; stdout: %q, %q", in, c.uri, c.control)
	}
	if want := "mongodb://" + strings.Join(in.Hosts, ",") + "/?replicaSet=set1"; c.uri != want {
		t.Errorf("URI %q, want %q", c.uri, want)
	}

	var mu sync.Mutex
	var inserts []string // "started", "failed", "succeeded" of each insert
	monitor := &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.CommandName == "insert" {
				mu.Lock()
				inserts = append(inserts, "started")
				mu.Unlock()
			}
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			if e.CommandName == "insert" {
				mu.Lock()
				inserts = append(inserts, "succeeded")
				mu.Unlock()
			}
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			if e.CommandName == "insert" {
				mu.Lock()
				inserts = append(inserts, "failed")
				mu.Unlock()
			}
		},
	}
	client := connect(t, c.uri, options.Client().SetMonitor(monitor))
	coll := client.Database("app").Collection("orders")
	if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	me := func() string {
		t.Helper()
		var hello struct{ Me string }
		err := client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "hello", Value: 1}},
			options.RunCmd().SetReadPreference(readpref.Primary())).Decode(&hello)
		if err != nil {
			t.Fatal(err)
		}
		return hello.Me
	}
	if m := me(); m != in.Hosts[0] {
		t.Fatalf("the driver's primary is %s, want member 0, %s", m, in.Hosts[0])
	}

	// A step-down elects member 1; the driver finds it, and writes there.
	r := mustCall(t, "POST", c.control+"/stepdown", "")
	if r["oldPrimary"] != 0.0 || r["primary"] != 1.0 {
		t.Fatalf("/stepdown: %v", r)
	}
	if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatalf("insert after the step-down: %v", err)
	}
	if m := me(); m != in.Hosts[1] {
		t.Errorf("after /stepdown, the driver's primary is %s, want member 1, %s", m, in.Hosts[1])
	}
	stats := mustCall(t, "GET", c.control+"/stats?member=1", "")["stats"].(map[string]any)
	if n, _ := stats["commands"].(map[string]any)["insert"].(float64); n < 1 {
		t.Errorf("member 1 saw %v inserts, want the one after the step-down", n)
	}
	if n, err := coll.CountDocuments(ctx(t), bson.D{}); err != nil || n != 2 {
		t.Errorf("count: %d, %v; want both inserts", n, err)
	}

	// A retryable write: the fail point fails the first try with a
	// retriable error, the driver retries, once, and succeeds.
	mu.Lock()
	inserts = nil
	mu.Unlock()
	r = mustCall(t, "POST", c.control+"/failpoint",
		`{"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {"failCommands": ["insert"], "errorCode": 189}}`)
	if r["member"] != 1.0 {
		t.Errorf("/failpoint went to member %v, want the primary, 1", r["member"])
	}
	if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatalf("a retryable insert with a fail point on its first try: %v", err)
	}
	mu.Lock()
	got := strings.Join(inserts, ",")
	mu.Unlock()
	if got != "started,failed,started,succeeded" {
		t.Errorf("the insert's commands: %s, want a failure and a retry", got)
	}

	disconnect(t, client)
	c.stopWith(os.Interrupt)
	checkGone(t, infoFile)
}

func TestCommandTLSUsersCompression(t *testing.T) {
	infoFile := filepath.Join(t.TempDir(), "info.json")
	c := startCommand(t, "-tls", "-user", "alice:p@ss:w/rd", "-user", "bob:pw", "-compressors", "zlib,zstd", "-info-file", infoFile)
	if c.tlsDir == "" {
		t.Fatal("no tls-dir line on stdout")
	}
	var in info
	if err := json.Unmarshal(waitForFile(t, infoFile), &in); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(c.tlsDir, "ca.pem")
	if in.TLS == nil || in.TLS.Dir != c.tlsDir || in.TLS.CAFile != ca || in.TLS.ClientFile != filepath.Join(c.tlsDir, "client.pem") {
		t.Errorf("-info-file's tls: %+v", in.TLS)
	}
	if len(in.Users) != 2 || strings.Join(in.Compressors, ",") != "zlib,zstd" {
		t.Errorf("-info-file: users %v, compressors %v", in.Users, in.Compressors)
	}
	want := "mongodb://alice:p%40ss%3Aw%2Frd@" + in.Hosts[0] + "/?authSource=admin&tls=true&tlsCAFile=" + ca
	if c.uri != want {
		t.Errorf("URI %q, want %q", c.uri, want)
	}

	// The URI as printed: TLS, alice's credentials; the client asks for
	// zlib, which the server takes.
	client := connect(t, c.uri, options.Client().SetCompressors([]string{"zlib"}))
	if _, err := client.Database("app").Collection("c").InsertOne(ctx(t), bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	st := mustCall(t, "GET", c.control+"/stats?member=0", "")["stats"].(map[string]any)
	if n, _ := st["compressedReceived"].(map[string]any)["zlib"].(float64); n < 1 {
		t.Errorf("the server received %v zlib messages, want some: %v", n, st["compressedReceived"])
	}
	if n, _ := st["authentications"].(map[string]any)["SCRAM-SHA-256"].(float64); n < 1 {
		t.Errorf("authentications: %v", st["authentications"])
	}

	// bob, the second user, exists too; a client without credentials may
	// not write.
	bob := connect(t, "mongodb://bob:pw@"+in.Hosts[0]+"/?authSource=admin&tls=true&tlsCAFile="+ca)
	if err := bob.Database("admin").RunCommand(ctx(t), bson.D{{Key: "listDatabases", Value: 1}}).Err(); err != nil {
		t.Errorf("bob: %v", err)
	}
	anon := connect(t, "mongodb://"+in.Hosts[0]+"/?tls=true&tlsCAFile="+ca)
	_, err := anon.Database("app").Collection("c").InsertOne(ctx(t), bson.D{{Key: "x", Value: 2}})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 13 {
		t.Errorf("an insert without credentials: %v, want Unauthorized (13)", err)
	}

	for _, cl := range []*mongo.Client{client, bob, anon} {
		disconnect(t, cl)
	}
	c.stopWith(syscall.SIGTERM)
	if _, err := os.Stat(c.tlsDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary TLS directory is left (%v)", err)
	}
}

// TestCommandGivenTLS runs the command with a certificate of its own, with
// -tls-cert, -tls-key and -tls-ca: those -tls-dir keeps, from a run before.
func TestCommandGivenTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls") // made by the command
	first := startCommand(t, "-tls-dir", dir)
	if first.tlsDir != dir {
		t.Errorf("tls-dir %q, want %q", first.tlsDir, dir)
	}
	first.stopWith(syscall.SIGTERM)
	server, ca := filepath.Join(dir, "server.pem"), filepath.Join(dir, "ca.pem")
	for _, f := range []string{server, ca, filepath.Join(dir, "client.pem")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("-tls-dir keeps its files: %v", err)
		}
	}

	c := startCommand(t, "-tls-cert", server, "-tls-key", server, "-tls-ca", ca)
	if c.tlsDir != "" || !strings.HasSuffix(c.uri, "/?tls=true&tlsCAFile="+ca) {
		t.Errorf("URI %q, tls-dir %q", c.uri, c.tlsDir)
	}
	// The client certificate signed by the CA is taken.
	client := connect(t, c.uri+"&tlsCertificateKeyFile="+filepath.Join(dir, "client.pem"))
	if err := client.Ping(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	disconnect(t, client)
	c.stopWith(syscall.SIGTERM)
}

// freePorts returns the first of n consecutive free ports of 127.0.0.1,
// and another free one: held while they are looked for, free when it
// returns, for a command to be told them.
func freePorts(t *testing.T, n int) (base, other int) {
	t.Helper()
	var lns []net.Listener
	for p := 20000 + os.Getpid()%20000; p+n <= 60000 && base == 0; p += 7 {
		var run []net.Listener
		for i := range n {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+i))
			if err != nil {
				break
			}
			run = append(run, ln)
		}
		if len(run) == n {
			base, lns = p, run
		} else {
			for _, ln := range run {
				ln.Close()
			}
		}
	}
	if base == 0 {
		t.Fatalf("no %d consecutive free ports", n)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other = ln.Addr().(*net.TCPAddr).Port
	for _, ln := range append(lns, ln) {
		ln.Close()
	}
	return base, other
}

func TestCommandPorts(t *testing.T) {
	// A run of three consecutive ports for the members, and one for the
	// control endpoint.
	base, ctlPort := freePorts(t, 3)

	c := startCommand(t, "-replset", "3", "-port", strconv.Itoa(base), "-control-port", strconv.Itoa(ctlPort))
	want := fmt.Sprintf("mongodb://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/?replicaSet=rs0", base, base+1, base+2)
	if c.uri != want {
		t.Errorf("URI %q, want %q", c.uri, want)
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", ctlPort); c.control != want {
		t.Errorf("control %q, want %q", c.control, want)
	}
	// A member stopped and restarted keeps its port.
	mustCall(t, "POST", c.control+"/stop?member=2", "")
	mustCall(t, "POST", c.control+"/restart?member=2", "")
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", base+2), testTimeout)
	if err != nil {
		t.Fatalf("member 2 after its restart: %v", err)
	}
	conn.Close()

	// A second command on the same ports fails at its start, with 1.
	second := launch(t, "-port", strconv.Itoa(base+1))
	second.start()
	if code := second.wait(); code != 1 || !strings.Contains(second.stderr.String(), "address already in use") {
		t.Errorf("on a port in use: exit %d, stderr %q", code, second.stderr)
	}
	c.stopWith(syscall.SIGTERM)
}

// TestCommandShardedPorts checks the ports of -port for a sharded
// cluster: the mongoses' first, then each shard's members'.
func TestCommandShardedPorts(t *testing.T) {
	base, ctlPort := freePorts(t, 6)
	c := startCommand(t, "-mongos", "2", "-shards", "2", "-shard-members", "2", "-port", strconv.Itoa(base), "-control-port", strconv.Itoa(ctlPort))
	host := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", base+i) }
	if want := "mongodb://" + host(0) + "," + host(1) + "/"; c.uri != want {
		t.Errorf("URI %q, want %q", c.uri, want)
	}
	st := mustCall(t, "GET", c.control+"/status", "")
	for k, sh := range st["shards"].([]any) {
		for i, m := range sh.(map[string]any)["members"].([]any) {
			if got, want := m.(map[string]any)["host"], host(2+2*k+i); got != want {
				t.Errorf("shard %d member %d on %v, want %s", k, i, got, want)
			}
		}
	}
	// A mongos stopped and restarted keeps its port.
	mustCall(t, "POST", c.control+"/mongos/stop?member=1", "")
	mustCall(t, "POST", c.control+"/mongos/restart?member=1", "")
	conn, err := net.DialTimeout("tcp", host(1), testTimeout)
	if err != nil {
		t.Fatalf("mongos 1 after its restart: %v", err)
	}
	conn.Close()
	c.stopWith(syscall.SIGTERM)
}

func TestCommandExitOnEOF(t *testing.T) {
	c := startCommand(t, "-replset", "2", "-exit-on-eof")
	// What a parent writes is ignored; the end is what counts.
	if _, err := io.WriteString(c.stdin, "anything\n"); err != nil {
		t.Fatal(err)
	}
	if p := primaryOf(t, c.control); p != 0 {
		t.Errorf("primary %d", p)
	}
	c.stdin.Close()
	c.checkCleanExit()
	if !strings.Contains(c.stderr.String(), "stopping on the end of standard input") {
		t.Errorf("stderr:\n%s", c.stderr)
	}

	// Without the flag, the end of stdin does not stop it.
	d := startCommand(t)
	d.stdin.Close()
	if p := mustCall(t, "GET", d.control+"/status", ""); p["topology"] != "standalone" {
		t.Errorf("/status: %v", p)
	}
	select {
	case <-d.exited:
		t.Fatalf("the command ended at the end of stdin without -exit-on-eof; stderr:\n%s", d.stderr)
	default:
	}
	d.stopWith(syscall.SIGTERM)
}

func TestCommandShutdownEndpoint(t *testing.T) {
	uriFile := filepath.Join(t.TempDir(), "uri")
	c := startCommand(t, "-replset", "1", "-uri-file", uriFile)
	client := connect(t, c.uri)
	if err := client.Ping(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	disconnect(t, client)
	mustCall(t, "POST", c.control+"/shutdown", "")
	c.checkCleanExit()
	checkGone(t, uriFile)
}

func TestCommandFailures(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-replset", "x"}, 2, `invalid value "x" for flag -replset`},
		{[]string{"-mongos", "2", "-shards", "3", "-replset", "3"}, 2, "a replica set or a sharded cluster, not both"},
		{[]string{"-tls-cert", "/nonexistent.pem", "-tls-key", "/nonexistent.pem"}, 1, "-tls-cert, -tls-key: open /nonexistent.pem"},
		{[]string{"-uri-file", "/nonexistent/dir/uri"}, 1, "/nonexistent/dir: no such directory"},
		{[]string{"-h"}, 0, "Usage: mongotest [flags]"},
	}
	for _, tc := range cases {
		c := launch(t, tc.args...)
		var stdout syncBuffer
		c.cmd.Stdout = &stdout
		c.start()
		code := c.wait()
		if code != tc.code || !strings.Contains(c.stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant %d and %q", tc.args, code, c.stderr, tc.code, tc.want)
		}
		if stdout.String() != "" {
			t.Errorf("%q: printed %q on stdout", tc.args, stdout.String())
		}
	}
}

func TestCommandShardedCluster(t *testing.T) {
	infoFile := filepath.Join(t.TempDir(), "info.json")
	c := startCommand(t, "-mongos", "2", "-shards", "2", "-shard-members", "3", "-info-file", infoFile)
	var in info
	if err := json.Unmarshal(waitForFile(t, infoFile), &in); err != nil {
		t.Fatal(err)
	}
	if in.URI != c.uri || in.Topology != "sharded" || in.SetName != "" || len(in.Mongoses) != 2 ||
		strings.Join(in.Hosts, ",") != strings.Join(in.Mongoses, ",") || len(in.Shards) != 2 {
		t.Fatalf("-info-file: %+v", in)
	}
	for k, sh := range in.Shards {
		if sh.Name != fmt.Sprintf("shard%d", k) || len(sh.Hosts) != 3 {
			t.Errorf("-info-file's shard %d: %+v", k, sh)
		}
	}
	// The connection string lists the mongoses, and names no replica set.
	if want := "mongodb://" + strings.Join(in.Mongoses, ",") + "/"; c.uri != want {
		t.Errorf("URI %q, want %q", c.uri, want)
	}

	// Two databases on different shards, as /shardof places them.
	shardOf := func(db string) int { return c2i(t, mustCall(t, "GET", c.control+"/shardof?db="+db, "")["shard"]) }
	dbA, dbB := "app", ""
	for i := range 100 {
		if name := fmt.Sprintf("app%d", i); shardOf(name) != shardOf(dbA) {
			dbB = name
			break
		}
	}
	if dbB == "" {
		t.Fatal("no database on the other shard")
	}

	kinds := newServerKinds()
	client := connect(t, c.uri, options.Client().SetHeartbeatInterval(500*time.Millisecond).SetServerMonitor(kinds.monitor()))
	// CRUD through the mongoses, on both shards.
	for _, db := range []string{dbA, dbB} {
		coll := client.Database(db).Collection("things")
		if _, err := coll.InsertMany(ctx(t), []any{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: 2}}}); err != nil {
			t.Fatalf("InsertMany into %s: %v", db, err)
		}
		if r, err := coll.UpdateOne(ctx(t), bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "db", Value: db}}}}); err != nil || r.ModifiedCount != 1 {
			t.Fatalf("UpdateOne in %s: %+v, %v", db, r, err)
		}
		var got struct{ DB string }
		if err := coll.FindOne(ctx(t), bson.D{{Key: "n", Value: 2}}).Decode(&got); err != nil || got.DB != db {
			t.Fatalf("FindOne in %s: %+v, %v", db, got, err)
		}
		if r, err := coll.DeleteOne(ctx(t), bson.D{{Key: "_id", Value: 1}}); err != nil || r.DeletedCount != 1 {
			t.Fatalf("DeleteOne in %s: %+v, %v", db, r, err)
		}
	}
	// Each database's writes went to its shard's primary only.
	inserts := func(k, member int) float64 {
		st := mustCall(t, "GET", fmt.Sprintf("%s/stats?shard=%d&member=%d", c.control, k, member), "")["stats"].(map[string]any)
		n, _ := st["commands"].(map[string]any)["insert"].(float64)
		return n
	}
	for _, k := range []int{shardOf(dbA), shardOf(dbB)} {
		if n := inserts(k, 0); n != 1 {
			t.Errorf("the primary of shard %d took %v inserts, want 1 (its database's)", k, n)
		}
	}

	// A step-down of dbA's shard through the endpoint: the next member is
	// elected, and a write to dbA succeeds there.
	k := shardOf(dbA)
	r := mustCall(t, "POST", fmt.Sprintf("%s/stepdown?shard=%d", c.control, k), "")
	if r["oldPrimary"] != 0.0 || r["primary"] != 1.0 || r["primaryHost"] != in.Shards[k].Hosts[1] {
		t.Fatalf("/stepdown?shard=%d: %v", k, r)
	}
	coll := client.Database(dbA).Collection("things")
	if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatalf("an insert after the shard's step-down: %v", err)
	}
	if n := inserts(k, 1); n != 1 {
		t.Errorf("the new primary of shard %d took %v inserts, want 1", k, n)
	}
	if n, err := coll.CountDocuments(ctx(t), bson.D{}); err != nil || n != 2 {
		t.Errorf("CountDocuments in %s: %d, %v; want 2", dbA, n, err)
	}

	// Mongos 0 stops through the endpoint: its port refuses connections,
	// and once the client's monitor has seen it down (in half a second:
	// the heartbeat), the client goes on through mongos 1. (Before, a
	// write may go to mongos 0: on a pooled connection, its network error
	// is retried on mongos 1; on a new one, the refused dial fails it, as
	// the driver retries no error of a connection's checkout but a
	// cleared pool's.)
	if r := mustCall(t, "POST", c.control+"/mongos/stop?member=0", ""); r["host"] != in.Mongoses[0] {
		t.Errorf("/mongos/stop?member=0: %v", r)
	}
	if conn, err := net.DialTimeout("tcp", in.Mongoses[0], testTimeout); err == nil {
		conn.Close()
		t.Fatalf("the stopped mongos %s takes connections", in.Mongoses[0])
	}
	kinds.waitFor(t, in.Mongoses[0], "Unknown")
	before := mustCall(t, "GET", c.control+"/mongos/stats?member=1", "")["stats"].(map[string]any)["commands"].(map[string]any)["insert"]
	for i := 10; i < 20; i++ {
		if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatalf("insert %d with mongos 0 stopped: %v", i, err)
		}
	}
	after := mustCall(t, "GET", c.control+"/mongos/stats?member=1", "")["stats"].(map[string]any)["commands"].(map[string]any)["insert"]
	if b, _ := before.(float64); after.(float64)-b < 10 {
		t.Errorf("mongos 1 took %v inserts, then %v: want the 10 made with mongos 0 stopped", before, after)
	}

	// It restarts on its port, and serves.
	mustCall(t, "POST", c.control+"/mongos/restart?member=0", "")
	if st := mustCall(t, "GET", c.control+"/status", "")["mongoses"].([]any)[0].(map[string]any)["state"]; st != "RUNNING" {
		t.Errorf("mongos 0 after /mongos/restart: %v", st)
	}
	m0 := connect(t, "mongodb://"+in.Mongoses[0]+"/")
	if n, err := m0.Database(dbA).Collection("things").CountDocuments(ctx(t), bson.D{}); err != nil || n != 12 {
		t.Errorf("CountDocuments through the restarted mongos: %d, %v; want 12", n, err)
	}

	disconnect(t, client)
	disconnect(t, m0)
	c.stopWith(syscall.SIGTERM)
	checkGone(t, infoFile)
	if !strings.Contains(c.stderr.String(), "mongotest: a sharded cluster of 2 mongoses and 2 shards of 3 members: mongoses on "+strings.Join(in.Mongoses, ", ")) {
		t.Errorf("stderr does not describe the cluster:\n%s", c.stderr)
	}
}

// serverKinds follows what a client's monitor says of each server (its
// kind: Mongos, RSPrimary, Unknown, ...), for a test that waits until the
// client has seen a change.
type serverKinds struct {
	mu      sync.Mutex
	kinds   map[string]string // by address
	changed chan struct{}     // closed at the next change
}

func newServerKinds() *serverKinds {
	return &serverKinds{kinds: map[string]string{}, changed: make(chan struct{})}
}

func (k *serverKinds) monitor() *event.ServerMonitor {
	return &event.ServerMonitor{
		ServerDescriptionChanged: func(e *event.ServerDescriptionChangedEvent) {
			k.mu.Lock()
			defer k.mu.Unlock()
			k.kinds[e.Address.String()] = e.NewDescription.Kind
			close(k.changed)
			k.changed = make(chan struct{})
		},
	}
}

// waitFor waits until the monitor says that the server at addr is of kind.
func (k *serverKinds) waitFor(t *testing.T, addr, kind string) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		k.mu.Lock()
		got, changed := k.kinds[addr], k.changed
		k.mu.Unlock()
		if got == kind {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("the client never saw %s %s; it says %q", addr, kind, got)
		}
	}
}
