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
	"github.com/mongopool/mongopool/mongotest"
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
	// The cause, not the whole topology a server selection error describes.
	if strings.Contains(msg, "topology:") || strings.Contains(msg, "server selection") {
		t.Errorf("message %q: want the cause alone", msg)
	}
	if strings.Contains(msg+out.String(), "s3cr3tpw") {
		t.Errorf("the password is in the output: %q", msg+out.String())
	}
	if !strings.Contains(msg, "mongodb://bob:xxxxx@"+addr) {
		t.Errorf("message %q: want the redacted URI", msg)
	}
}

// A server that accepts connections and never answers: the run waits for
// it until -duration, no longer, and says so in one line, with the
// address.
func TestRunSilentServer(t *testing.T) {
	srv := startTestServer(t)
	if _, err := srv.InjectFault(mongotest.Fault{Kind: mongotest.FaultSilentAccept}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runOnce(t, "-uri", srv.URI(), "-duration", "300ms")
	if code != 1 {
		t.Errorf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	line := verdict(t, stderr)
	if !strings.HasPrefix(line, "mongopool: the server at "+srv.Addr()+" ") || !strings.Contains(line, "not ready within -duration") ||
		!strings.Contains(line, "no reply to the first check") || strings.Contains(line, "topology:") {
		t.Errorf("verdict %q: want the address, the time limit and the server's silence, in short", line)
	}
}

// A server that goes away during the run (the connection closed at every
// find, and every check of the monitor failing after it): the operations
// wait for the monitor to find the server again, and, the time up, fail as
// having selected no server. They never reached the pool, so the summary
// counts them apart from the failed check-outs, and its counts agree.
func TestRunServerGone(t *testing.T) {
	srv := startTestServer(t)
	// The monitor's handshake and the pool's first one go through (the
	// monitor polls, on one connection), then every handshake and every
	// check fails.
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"find", "hello", "isMaster"}, Skip: 2, CloseConnection: true}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runOnce(t, "-uri", srv.URI()+"?serverMonitoringMode=poll", "-duration", "200ms", "-goroutines", "2", "-find-ratio", "1")
	if code != 1 {
		t.Errorf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	line := verdict(t, stderr)
	if !strings.Contains(line, "no server selected") || !strings.Contains(line, "could not drop the database mongopool_demo_") ||
		!strings.Contains(line, srv.Addr()) || strings.Contains(line, "topology:") {
		t.Errorf("verdict %q: want the operations and the drop that selected no server, the address, in short", line)
	}
	if n := checkSums(t, stdout, "failed"); n == 0 {
		t.Errorf("no failed operation in the summary:\n%s", stdout)
	}
	checkSums(t, stdout, "checkouts")
	if !regexp.MustCompile(`attempts .* \+ \d+ selected no server`).MatchString(stdout) ||
		!strings.Contains(stdout, "attempts never reached the pool") {
		t.Errorf("the summary does not count the attempts that selected no server apart:\n%s", stdout)
	}
	if strings.Contains(stdout, "MISMATCH") {
		t.Errorf("the counts disagree:\n%s", stdout)
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
		{"-replset", "-uri", "mongodb://127.0.0.1"},
		{"-replset", "-clear-every", "1s"},
	} {
		var errOut bytes.Buffer
		if _, err := parseFlags(args, &errOut); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}

// startTestServer starts the in-process test server, closed when the test
// ends.
func startTestServer(t *testing.T) *mongotest.Server {
	t.Helper()
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// runOnce runs the job with args under a generous limit of the test's own,
// and fails the test if run did not end by itself before it: a run that
// overstays -duration fails the test rather than hang it. (A run that
// ignores its context altogether is given up on a little later.)
func runOnce(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	c := mustParse(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		code = run(ctx, c, &out, &errOut)
	}()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("run %q did not return, even after its context ended", args)
	}
	if ctx.Err() != nil {
		t.Fatalf("run %q did not end by itself: it lasted until the test's limit\nstdout:\n%s\nstderr:\n%s", args, out.String(), errOut.String())
	}
	return code, out.String(), errOut.String()
}

// verdict returns the one line run printed on stderr, failing the test if
// there is not exactly one.
func verdict(t *testing.T, stderr string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if stderr == "" || len(lines) != 1 || !strings.HasPrefix(lines[0], "mongopool: ") {
		t.Fatalf("stderr %q: want one line that says what failed", stderr)
	}
	return lines[0]
}

// checkSums checks that the summary's line that starts with label (such as
// "failed") splits its total into kinds that add up to it: "label  N ...:
// n1 kind, n2 kind (details), ...". It returns the total.
func checkSums(t *testing.T, stdout, label string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + label + ` +(?:(\d+) [^:\n]*: (.*)|no .*)$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no %q line in the summary:\n%s", label, stdout)
	}
	if m[1] == "" {
		return 0
	}
	total, _ := strconv.Atoi(m[1])
	items := regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(m[2], "")
	sum := 0
	for item := range strings.SplitSeq(items, ", ") {
		n, err := strconv.Atoi(strings.Fields(item + " x")[0])
		if err != nil {
			t.Fatalf("%q line: item %q has no count:\n%s", label, item, stdout)
		}
		sum += n
	}
	if sum != total {
		t.Errorf("%q line: the kinds add up to %d, the total is %d:\n%s", label, sum, total, stdout)
	}
	return total
}

// A server that stops answering: the finds hang. The run still ends about
// -duration later (the operations under way are canceled after a short
// grace), counts every one that hung as failed, and says so with a non-zero
// exit code and one line at the end.
func TestRunServerHangs(t *testing.T) {
	srv := startTestServer(t)
	if _, err := srv.InjectFault(mongotest.Fault{Kind: mongotest.FaultHang, Commands: []string{"find"}}); err != nil {
		t.Fatal(err)
	}
	// Each worker's first operation is an insert (a find needs a document);
	// all the next ones are finds, which hang.
	code, stdout, stderr := runOnce(t, "-uri", srv.URI(), "-duration", "500ms", "-goroutines", "3", "-find-ratio", "1")
	if code != 1 {
		t.Errorf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	line := verdict(t, stderr)
	if !strings.Contains(line, "3 operations failed") {
		t.Errorf("verdict %q: want the 3 hung finds counted as failed", line)
	}
	if n := checkSums(t, stdout, "failed"); n != 3 {
		t.Errorf("%d failed operations in the summary, want 3:\n%s", n, stdout)
	}
	if !strings.Contains(stdout, "3 out of time") {
		t.Errorf("the summary does not say the finds ran out of time:\n%s", stdout)
	}
	checkSums(t, stdout, "checkouts")
	if strings.Contains(stdout, "MISMATCH") {
		t.Errorf("the counts disagree:\n%s", stdout)
	}
}

// A final dropDatabase that fails (an error reply, no reply at all, or no
// connection for it) fails the run: exit code 1, the reason in the one line
// at the end, and the summary's counts still add up, the drop's failed
// check-out counted with its kind.
func TestRunDropFails(t *testing.T) {
	for _, tc := range []struct {
		name       string
		inject     func(*mongotest.Server) error
		args       []string
		want       string // in the verdict, after "could not drop the database"
		wantFailed int    // failed operations of the workload
		wantKind   string // of the failed check-outs, "" for none
	}{
		{"error reply", func(s *mongotest.Server) error {
			return s.SetFailPoint(mongotest.FailPoint{Commands: []string{"dropDatabase"}, ErrorCode: 8})
		}, []string{"-goroutines", "2"}, "UnknownError", 0, ""},
		{"no reply", func(s *mongotest.Server) error {
			_, err := s.InjectFault(mongotest.Fault{Kind: mongotest.FaultHang, Commands: []string{"dropDatabase"}})
			return err
		}, []string{"-goroutines", "2"}, "deadline exceeded", 0, ""},
		// The one connection hangs in a find until the end; the drop needs
		// a new one, which the server accepts and never answers: its
		// handshake runs out of -connectTimeout. The connections before
		// it are answered: the monitor's (polling, so that it makes no
		// other) and the pool's first (see silentThirdConnection).
		{"no connection", func(s *mongotest.Server) error {
			_, err := s.InjectFault(mongotest.Fault{Kind: mongotest.FaultHang, Commands: []string{"find"}})
			return err
		}, []string{"-goroutines", "1", "-maxPoolSize", "1", "-find-ratio", "1", "-connectTimeout", "300ms"}, "", 1, "1 connection error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startTestServer(t)
			if err := tc.inject(srv); err != nil {
				t.Fatal(err)
			}
			if tc.name == "no connection" {
				silentThirdConnection(t, srv)
			}
			code, stdout, stderr := runOnce(t, append([]string{"-uri", srv.URI() + "?serverMonitoringMode=poll", "-duration", "200ms"}, tc.args...)...)
			if code != 1 {
				t.Errorf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			line := verdict(t, stderr)
			if !strings.Contains(line, "could not drop the database mongopool_demo_") || !strings.Contains(line, tc.want) {
				t.Errorf("verdict %q: want the failed drop and its error (%s)", line, tc.want)
			}
			if n := checkSums(t, stdout, "failed"); n != tc.wantFailed {
				t.Errorf("%d failed operations of the workload, want %d:\n%s", n, tc.wantFailed, stdout)
			}
			n := checkSums(t, stdout, "checkouts")
			if tc.wantKind == "" && n != 0 || tc.wantKind != "" && (n != 1 || !strings.Contains(stdout, tc.wantKind)) {
				t.Errorf("%d failed check-outs, want %q:\n%s", n, tc.wantKind, stdout)
			}
			if strings.Contains(stdout, "MISMATCH") {
				t.Errorf("the counts disagree:\n%s", stdout)
			}
		})
	}
}

// silentThirdConnection makes srv accept its third connection and never
// answer on it, once the first two (a monitor's and a pool's) are made. A
// fail point on the handshake's hello would not do: a monitor may check
// again (a selection asks it to, the specification lets it), and a check's
// hello would meet the fail point first.
func silentThirdConnection(t *testing.T, srv *mongotest.Server) {
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		deadline := time.Now().Add(10 * time.Second)
		for srv.Stats().ConnectionsAccepted < 2 {
			if time.Now().After(deadline) {
				t.Error("the first two connections did not come within 10s")
				return
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := srv.InjectFault(mongotest.Fault{Kind: mongotest.FaultSilentAccept, Times: 1}); err != nil {
			t.Error(err)
		}
	}()
}

// The connection string's warnings (an unknown option, a value out of range)
// are printed before the workload starts, one per line.
func TestRunWarnings(t *testing.T) {
	srv := startTestServer(t)
	code, stdout, stderr := runOnce(t, "-uri", srv.URI()+"?noSuchOption=1&maxConnecting=0", "-duration", "100ms", "-goroutines", "1")
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	end := strings.Index(stdout, "\noperations ")
	if end < 0 {
		t.Fatalf("no summary:\n%s", stdout)
	}
	for _, option := range []string{"noSuchOption", "maxConnecting"} {
		found := false
		for line := range strings.Lines(stdout[:end]) {
			if strings.HasPrefix(line, "mongopool: warning: ") && strings.Contains(line, option) {
				found = true
			}
		}
		if !found {
			t.Errorf("no warning line about %s before the summary:\n%s", option, stdout)
		}
	}
}
