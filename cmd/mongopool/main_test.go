package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/internal/embedded"
	"github.com/mongopool/mongopool/internal/leakcheck"
)

// TestMain fails the run if a goroutine outlives the tests: run's workers,
// progress line and clearer, the pool and the embedded FerretDB all have to
// be gone when run returns or the server is closed.
func TestMain(m *testing.M) { leakcheck.Main(m) }

func mustParse(t *testing.T, args ...string) config {
	t.Helper()
	var errOut bytes.Buffer
	c, err := parseFlags(args, &errOut)
	if err != nil {
		t.Fatalf("parseFlags(%q): %v\n%s", args, err, errOut.String())
	}
	return c
}

// The job against an embedded FerretDB: a second of inserts and finds, exit
// code 0, and the summary's counts agree.
func TestRunEmbedded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mustParse(t, "-duration", "1s", "-goroutines", "4", "-maxPoolSize", "2")
	var out, errOut bytes.Buffer
	code := run(ctx, c, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if ctx.Err() != nil {
		t.Errorf("the run of 1s did not end by itself: it lasted until the test's limit\n%s", out.String())
	}
	m := regexp.MustCompile(`(\d+) inserts, (\d+) finds`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no counts of inserts and finds in the output:\n%s", out.String())
	}
	inserts, _ := strconv.Atoi(m[1])
	finds, _ := strconv.Atoi(m[2])
	if inserts == 0 || finds == 0 {
		t.Errorf("%d inserts and %d finds, want some of each:\n%s", inserts, finds, out.String())
	}
	for _, want := range []string{"against the embedded FerretDB at 127.0.0.1:", "maxPoolSize 2", "ops/s", "stats, events and the workload's own counts agree"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr: %s", errOut.String())
	}
}

// With -clear-every and -interrupt: the pool is cleared (interrupting the
// connections in use) and readied again while the workload runs, and the
// summary's counts still agree, the failures the clears cause not counted as
// the server's.
func TestRunClearEvery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mustParse(t, "-duration", "1s", "-goroutines", "8", "-maxPoolSize", "3", "-clear-every", "50ms", "-interrupt")
	var out, errOut bytes.Buffer
	if code := run(ctx, c, &out, &errOut); code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	m := regexp.MustCompile(`ConnectionPoolCleared +(\d+)`).FindStringSubmatch(out.String())
	if m == nil || m[1] == "0" {
		t.Errorf("no clear counted:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "stats, events and the workload's own counts agree") {
		t.Errorf("the counts disagree:\n%s", out.String())
	}
}

// With -uri: the URI's pool options apply where no flag overrides them, and
// the demo's database is gone at the end.
func TestRunURI(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mustParse(t, "-uri", srv.URI()+"?maxPoolSize=3&minPoolSize=1", "-minPoolSize", "2",
		"-duration", "500ms", "-goroutines", "4")
	var out, errOut bytes.Buffer
	if code := run(ctx, c, &out, &errOut); code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "maxPoolSize 3, minPoolSize 2,") {
		t.Errorf("want maxPoolSize from the URI and minPoolSize from the flag:\n%s", out.String())
	}

	p, err := mongopool.Open(ctx, srv.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reply, err := p.RunCommand(ctx, "admin", bson.D{{Key: "listDatabases", Value: 1}, {Key: "nameOnly", Value: true}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(reply.String(), "mongopool_demo_") {
		t.Errorf("the demo's database is still there: %v", reply)
	}
}

// A server that is not there: a non-zero code at once, and one line that says
// what failed and where, without the password.
func TestRunUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mustParse(t, "-uri", "mongodb://bob:s3cr3tpw@"+addr+"/", "-duration", "1s")
	var out, errOut bytes.Buffer
	code := run(ctx, c, &out, &errOut)
	if code == 0 {
		t.Fatalf("exit code 0 for an unreachable server\nstdout:\n%s", out.String())
	}
	msg := errOut.String()
	// The refusal itself ended the attempt, not a time limit running out.
	if !strings.Contains(msg, "refused") {
		t.Errorf("message %q: want the refused connection as the cause", msg)
	}
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	if len(lines) != 1 || !strings.HasPrefix(msg, "mongopool: cannot connect to the server at "+addr) {
		t.Errorf("message %q: want one line that names the address", msg)
	}
	if strings.Contains(msg+out.String(), "s3cr3tpw") {
		t.Errorf("the password is in the output: %q", msg+out.String())
	}
	if !strings.Contains(msg, "mongodb://bob:xxxxx@"+addr) {
		t.Errorf("message %q: want the redacted URI", msg)
	}
}

// Flags that make no sense are refused before anything starts.
func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-goroutines", "0"},
		{"-duration", "0s"},
		{"-find-ratio", "1.5"},
		{"-clear-every", "-1s"},
		{"-interrupt"},
		{"extra"},
	} {
		var errOut bytes.Buffer
		if _, err := parseFlags(args, &errOut); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}
