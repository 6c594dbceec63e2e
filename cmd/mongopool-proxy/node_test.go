package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/internal/nodejs"
	"github.com/mongopool/mongopool/mongotest"
)

// nodeTimeout bounds the Node.js tests: a quarter of a minute or so when
// they pass, and each of their own waits is bounded well below it.
const nodeTimeout = 2 * time.Minute

// nodePackages is the directory of the npm packages the tests use: those
// of the mongotest command's Node.js tests (the official driver and
// mongosh), installed there once by npm ci --ignore-scripts.
var nodePackages = filepath.Join("..", "mongotest", "nodetest")

// TestNode runs the Node.js tests of nodetest/ (node --test) against the
// proxy, with clients it was not written with: the official Node.js driver
// and mongosh, as pinned in ../mongotest/nodetest/package-lock.json. The
// proxies run here, in-process, in front of mongotest commands built from
// ../mongotest: a replica set of three (proxies A and B, side by side; C,
// whose upstream connections are compressed with snappy) and a sharded
// cluster of two mongoses and two shards (proxy D); proxy E, in front of
// the replica set too, authenticates its clients (-users: SCRAM users and
// an X.509 one) over TLS; proxy F listens on a Unix socket; proxy G is in
// front of a load balancer (a mongos behind one, loadBalanced=true). The tests get their URIs, the control endpoints'
// URLs, the users' passwords and the TLS files from the environment.
//
// Without Node.js 20.19 or later, or without the npm packages, it is
// skipped, unless CI=true: CI installs them, and their absence there is a
// failure.
func TestNode(t *testing.T) {
	node := nodejs.OrSkip(t, nodePackages)
	files, err := filepath.Glob(filepath.Join("nodetest", "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no nodetest/*.test.mjs (%v)", err)
	}
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	packages, err := filepath.Abs(nodePackages)
	if err != nil {
		t.Fatal(err)
	}

	bin := buildMongotest(t)
	// The replica set is a MongoDB 8.0 (MongoClient.bulkWrite's bulkWrite
	// command), the sharded cluster a 7.0.
	rs := startMongotest(t, bin, "-replset", "3", "-mongodb-version", "8.0")
	sc := startMongotest(t, bin, "-mongos", "2", "-shards", "2")

	var logs syncBuffer
	proxy := func(name, upstream string, listeners ...string) (mongos, lb []string) {
		t.Helper()
		args := []string{"-upstream", upstream, "-shutdown-timeout", "5s"}
		for _, l := range listeners {
			args = append(args, l, "127.0.0.1:0")
		}
		mongos, lb, _ = startCommandLogging(t, &prefixWriter{prefix: "proxy " + name + ": ", w: &logs}, args...)
		return mongos, lb
	}
	a, aLB := proxy("A", rs.uri, "-listen", "-listen-lb")
	b, _ := proxy("B", rs.uri, "-listen")
	c, _ := proxy("C", withOption(rs.uri, "compressors", "snappy"), "-listen")
	d, _ := proxy("D", sc.uri, "-listen")
	// Proxy F listens on a Unix socket only.
	sock := filepath.Join(t.TempDir(), "f.sock")
	f, _, _ := startCommandLogging(t, &prefixWriter{prefix: "proxy F: ", w: &logs}, "-upstream", rs.uri, "-shutdown-timeout", "5s", "-listen", sock)
	// Proxy E authenticates its clients, over TLS only.
	authn := startAuthProxy(t, rs.uri, &prefixWriter{prefix: "proxy E: ", w: &logs})
	// Proxy G is in front of a load balancer's mongos (a test server in
	// this process), its upstream URI with loadBalanced=true.
	lbs, err := mongotest.Start(mongotest.WithLoadBalanced(bson.NewObjectID()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lbs.Close() })
	g, _ := proxy("G", lbs.URI()+"?loadBalanced=true", "-listen")

	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	// One file at a time: the step-down of one would otherwise come in the
	// middle of another's, and the counts of the control endpoint's /stats
	// that some tests take would count the others' operations.
	args := append([]string{"--test", "--test-reporter=spec", "--test-concurrency=1"}, files...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = "nodetest"
	cmd.Env = append(os.Environ(),
		"NODE_PACKAGES="+packages,
		"PROXY_URI=mongodb://"+a[0]+"/",
		"PROXY2_URI=mongodb://"+b[0]+"/",
		"PROXY_LB_URI=mongodb://"+aLB[0]+"/?loadBalanced=true",
		"PROXY_SNAPPY_URI=mongodb://"+c[0]+"/",
		"PROXY_SHARDED_URI=mongodb://"+d[0]+"/",
		"PROXY_LBUP_URI=mongodb://"+g[0]+"/",
		"PROXY_UNIX_URI=mongodb://"+url.PathEscape(f[0])+"/",
		"MONGOTEST_CONTROL="+rs.control,
		"MONGOTEST_SHARDED_CONTROL="+sc.control,
		"PROXY_AUTH_URI=mongodb://"+authn.addr+"/",
		"PROXY_AUTH_USERS="+authn.passwordsJSON(t),
		"PROXY_TLS_CA_FILE="+authn.pki.CAFile,
		"PROXY_TLS_CLIENT_FILE="+authn.pki.ClientFile,
		"NO_COLOR=1",
	)
	// node and everything it starts (a process per test file, mongosh) are
	// one process group: a timeout kills them all, and what is left at the
	// end is seen.
	nodejs.SetProcessGroup(cmd)
	cmd.Cancel = func() error { return nodejs.KillProcessGroup(cmd) }
	cmd.WaitDelay = 10 * time.Second
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	start := time.Now()
	err = cmd.Run()
	t.Logf("node %s (%v):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), output.String())
	if ctx.Err() != nil {
		t.Errorf("the Node.js tests took longer than %v", nodeTimeout)
	}
	if err != nil {
		t.Errorf("node --test: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for nodejs.ProcessGroupAlive(cmd) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if nodejs.ProcessGroupAlive(cmd) {
		t.Errorf("processes of the Node.js tests are left after 10 s; killed")
		nodejs.KillProcessGroup(cmd)
	}

	// An honest count: tests ran, and passed.
	counts := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^ℹ (tests|pass|fail|skipped) (\d+)$`).FindAllStringSubmatch(output.String(), -1) {
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	if counts["pass"] == 0 || counts["fail"] != 0 {
		t.Errorf("node --test: %d tests, %d passed, %d failed", counts["tests"], counts["pass"], counts["fail"])
	}
	if t.Failed() {
		t.Logf("the proxies' logs:\n%s", logs.String())
	}
	t.Logf("Node.js: %d tests, %d passed, %d skipped", counts["tests"], counts["pass"], counts["skipped"])
}

// buildMongotest builds the mongotest command (../mongotest, a module of
// its own) into a temporary directory, and returns its path.
func buildMongotest(t *testing.T) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Fatalf("the go command, to build mongotest: %v", err)
		}
	}
	bin := filepath.Join(t.TempDir(), "mongotest")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "mongotest")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building mongotest: %v\n%s", err, out)
	}
	return bin
}

// mongotestCmd is a running mongotest command.
type mongotestCmd struct {
	uri, control string
}

// startMongotest runs the mongotest command bin with args until the test
// ends, and waits until it prints its connection string and control URL.
// It runs with -exit-on-eof: the end of its standard input, at the test's
// end, stops it (as a crash of the test would).
func startMongotest(t *testing.T, bin string, args ...string) *mongotestCmd {
	t.Helper()
	cmd := exec.Command(bin, append(args, "-exit-on-eof")...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		// Wait only once stdout is read: it closes the pipe.
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		go func() {
			for range lines {
			}
		}()
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("mongotest %q: %v; stderr:\n%s", args, err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("mongotest %q did not stop within 30 s of the end of its input; killed", args)
		}
	})
	m := &mongotestCmd{}
	deadline := time.After(30 * time.Second)
	for m.uri == "" || m.control == "" {
		select {
		case line, ok := <-lines:
			switch {
			case !ok:
				t.Fatalf("mongotest %q ended before printing its URI and control URL; stderr:\n%s", args, stderr.String())
			case m.uri == "":
				m.uri = line
			case strings.HasPrefix(line, "control: "):
				m.control = strings.TrimPrefix(line, "control: ")
			}
		case <-deadline:
			t.Fatalf("mongotest %q printed no URI and control URL in 30 s; stderr:\n%s", args, stderr.String())
		}
	}
	return m
}

// withOption returns the connection string uri with the option name=value.
func withOption(uri, name, value string) string {
	sep := "?"
	if strings.Contains(uri, "?") {
		sep = "&"
	} else if !strings.HasSuffix(uri, "/") {
		sep = "/?"
	}
	return uri + sep + name + "=" + url.QueryEscape(value)
}

// syncBuffer is a bytes.Buffer written by several goroutines.
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

// prefixWriter writes each line with a prefix: the log of one of several
// proxies in one buffer.
type prefixWriter struct {
	prefix string
	w      io.Writer
	mu     sync.Mutex
	part   []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.part = append(p.part, b...)
	for {
		i := bytes.IndexByte(p.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := io.WriteString(p.w, p.prefix+string(p.part[:i+1])); err != nil {
			return 0, err
		}
		p.part = p.part[i+1:]
	}
}
