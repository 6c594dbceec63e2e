package main

import (
	"context"
	"errors"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/mongotest"
)

// startReplicaSet starts an in-process replica set of three members, closed
// when the test ends.
func startReplicaSet(t *testing.T) *mongotest.ReplicaSet {
	t.Helper()
	rs, err := mongotest.StartReplicaSet("rs", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return rs
}

// checkDone checks the summary's "done" line (operations done = succeeded +
// failed) against the "operations" and "failed" lines, and returns the
// failed count.
func checkDone(t *testing.T, stdout string) (done, failed int) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^done +(\d+) operations = (\d+) succeeded \+ (\d+) failed$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no \"done\" line in the summary:\n%s", stdout)
	}
	done, _ = strconv.Atoi(m[1])
	ok, _ := strconv.Atoi(m[2])
	failed, _ = strconv.Atoi(m[3])
	if done != ok+failed {
		t.Errorf("done %d != %d succeeded + %d failed:\n%s", done, ok, failed, stdout)
	}
	if n := checkSums(t, stdout, "failed"); n != failed {
		t.Errorf("the \"failed\" line says %d, the \"done\" line %d:\n%s", n, failed, stdout)
	}
	if !strings.Contains(stdout, "operations   "+strconv.Itoa(ok)+" succeeded") {
		t.Errorf("the \"operations\" line does not say %d succeeded:\n%s", ok, stdout)
	}
	return done, failed
}

// poolLines returns the summary's per-server pool lines by address: "
// address  type  ...".
func poolLines(t *testing.T, stdout string) map[string]string {
	t.Helper()
	i := strings.Index(stdout, "\npools ")
	if i < 0 {
		t.Fatalf("no \"pools\" section in the summary:\n%s", stdout)
	}
	lines := map[string]string{}
	for line := range strings.Lines(stdout[i+1:][strings.Index(stdout[i+1:], "\n")+1:]) {
		if !strings.HasPrefix(line, "  127.0.0.1:") {
			break
		}
		f := strings.Fields(line)
		lines[f[0]] = strings.TrimSpace(line)
	}
	return lines
}

// The job on an in-process replica set of three members, with a step-down
// and an election halfway: every operation succeeds (the client retries the
// writes the step-down interrupts), the summary's counts add up, it names
// the member stepped down and the one elected, the new primary is the
// primary at the end, and the first write it acknowledged is timed.
func TestRunReplicaSet(t *testing.T) {
	code, stdout, stderr := runOnce(t, "-replset", "-duration", "2s", "-goroutines", "8")
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr: %s", stderr)
	}
	if done, failed := checkDone(t, stdout); failed != 0 || done == 0 {
		t.Errorf("%d operations done, %d failed: want some, none failed", done, failed)
	}
	m := regexp.MustCompile(`(?m)^failover +at [0-9.]+s: (127\.0\.0\.1:\d+) stepped down, (127\.0\.0\.1:\d+) elected; .*first write acknowledged by 127\.0\.0\.1:\d+ ([0-9.]+[µnm]?s) after the election`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no failover line that names both members and times the first write:\n%s", stdout)
	}
	old, elected := m[1], m[2]
	if old == elected {
		t.Fatalf("the member stepped down (%s) was elected again:\n%s", old, stdout)
	}
	if !regexp.MustCompile(`(?m)^topology +ReplicaSetWithPrimary, set rs, primary ` + regexp.QuoteMeta(elected) + `\b`).MatchString(stdout) {
		t.Errorf("the topology line does not name %s, the member elected, as the primary:\n%s", elected, stdout)
	}
	pools := poolLines(t, stdout)
	if len(pools) != 3 {
		t.Fatalf("%d pool lines, want one per member:\n%s", len(pools), stdout)
	}
	for addr, want := range map[string]string{elected: "RSPrimary", old: "RSSecondary"} {
		if f := strings.Fields(pools[addr]); len(f) < 2 || f[1] != want {
			t.Errorf("pool line of %s: %q, want type %s", addr, pools[addr], want)
		}
	}
	for addr, line := range pools {
		if !regexp.MustCompile(`checkouts [1-9]\d*`).MatchString(line) {
			t.Errorf("the pool of %s checked nothing out: %q", addr, line)
		}
	}
	// The live lines show the topology and each server's pool.
	if !regexp.MustCompile(`(?m)^ *[0-9.]+s +\d+ ops/s +ReplicaSet\w+`).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^  127\.0\.0\.1:\d+ +RS\w+ +in use \d+ idle \d+ waiting \d+ +checkouts \d+`).MatchString(stdout) {
		t.Errorf("no live lines with the topology type and the servers' pools:\n%s", stdout)
	}
	if strings.Contains(stdout, "MISMATCH") || !strings.Contains(stdout, "checks       ") {
		t.Errorf("the counts disagree:\n%s", stdout)
	}
}

// -uri with a replica set's connection string runs the workload through a
// client of the whole set: the summary shows the set, a pool per member, and
// the primaries the client saw when the set changes its primary under the
// run.
func TestRunReplicaSetURI(t *testing.T) {
	rs := startReplicaSet(t)
	oldPrimary := rs.Primary()
	old := slices.Index(rs.Members(), oldPrimary)
	next := (old + 1) % 3
	failedOver := make(chan error, 1)
	runEnded := make(chan struct{})
	go func() {
		// Once the run has written through the first primary, fail over.
		for oldPrimary.Stats().Commands["insert"] < 20 {
			select {
			case <-runEnded:
				failedOver <- errors.New("the run ended before 20 inserts reached the primary")
				return
			case <-time.After(time.Millisecond):
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rs.StepDown(ctx); err != nil {
			failedOver <- err
			return
		}
		failedOver <- rs.Elect(next)
	}()
	code, stdout, stderr := runOnce(t, "-uri", rs.URI(), "-duration", "1500ms", "-goroutines", "4")
	close(runEnded)
	if err := <-failedOver; err != nil {
		t.Fatalf("failing over: %v", err)
	}
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if _, failed := checkDone(t, stdout); failed != 0 {
		t.Errorf("%d operations failed", failed)
	}
	newAddr := rs.Members()[next].Addr()
	if !regexp.MustCompile(`(?m)^topology +ReplicaSetWithPrimary, set rs, primary ` + regexp.QuoteMeta(newAddr) + `\b`).MatchString(stdout) {
		t.Errorf("the topology line does not name %s, the new primary:\n%s", newAddr, stdout)
	}
	m := regexp.MustCompile(`(?m)^primaries +(.*)$`).FindStringSubmatch(stdout)
	if m == nil || !strings.HasPrefix(m[1], oldPrimary.Addr()+" from ") || !strings.Contains(m[1], ", "+newAddr+" from ") {
		t.Errorf("the primaries line does not list %s then %s:\n%s", oldPrimary.Addr(), newAddr, stdout)
	}
	if len(poolLines(t, stdout)) != 3 {
		t.Errorf("want a pool line per member:\n%s", stdout)
	}
	if strings.Contains(stdout, "MISMATCH") {
		t.Errorf("the counts disagree:\n%s", stdout)
	}
}

// Operations of the client path that fail (an error reply to every insert)
// fail the run: exit code 1, the failures counted by kind, and the counts
// still add up.
func TestRunReplicaSetFailures(t *testing.T) {
	rs := startReplicaSet(t)
	for _, m := range rs.Members() {
		if err := m.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, ErrorCode: 8}); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runOnce(t, "-uri", rs.URI(), "-duration", "300ms", "-goroutines", "2")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	line := verdict(t, stderr)
	if !regexp.MustCompile(`\d+ operations failed: \d+ server errors \(UnknownError \d+\)`).MatchString(line) {
		t.Errorf("verdict %q: want the inserts' errors counted", line)
	}
	if _, failed := checkDone(t, stdout); failed == 0 {
		t.Errorf("no failed operation counted:\n%s", stdout)
	}
	if strings.Contains(stdout, "MISMATCH") {
		t.Errorf("the counts disagree:\n%s", stdout)
	}
}

// A replica set whose members stop answering finds: the run still ends about
// -duration later, the finds under way count as failed, out of time, and
// the exit code says so.
func TestRunReplicaSetHangs(t *testing.T) {
	rs := startReplicaSet(t)
	for _, m := range rs.Members() {
		if _, err := m.InjectFault(mongotest.Fault{Kind: mongotest.FaultHang, Commands: []string{"find"}}); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runOnce(t, "-uri", rs.URI(), "-duration", "500ms", "-goroutines", "3", "-find-ratio", "1")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if line := verdict(t, stderr); !strings.Contains(line, "3 operations failed: 3 out of time") {
		t.Errorf("verdict %q: want the 3 hung finds out of time", line)
	}
	if _, failed := checkDone(t, stdout); failed != 3 {
		t.Errorf("%d failed, want 3:\n%s", failed, stdout)
	}
}

// -clear-every drives one pool: a deployment of several servers refuses it
// with a message that says why.
func TestRunReplicaSetRefusesClearEvery(t *testing.T) {
	rs := startReplicaSet(t)
	code, stdout, stderr := runOnce(t, "-uri", rs.URI(), "-duration", "100ms", "-clear-every", "10ms")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if line := verdict(t, stderr); !strings.Contains(line, "-clear-every") || !strings.Contains(line, "replica set") {
		t.Errorf("verdict %q: want why -clear-every does not apply", line)
	}
}

// A replica set none of whose members can be reached: exit code 1 after
// -duration at most, and one line that names the servers and says why,
// without the password.
func TestRunReplicaSetUnreachable(t *testing.T) {
	var addrs []string
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, l.Addr().String())
		l.Close() // nothing listens there any more
	}
	uri := "mongodb://bob:s3cr3tpw@" + strings.Join(addrs, ",") + "/?replicaSet=rs"
	code, stdout, stderr := runOnce(t, "-uri", uri, "-duration", "300ms")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	line := verdict(t, stderr)
	if !strings.HasPrefix(line, "mongopool: cannot reach mongodb://bob:xxxxx@"+strings.Join(addrs, ",")) {
		t.Errorf("verdict %q: want the redacted URI", line)
	}
	for _, a := range addrs {
		if !strings.Contains(line, a+" Unknown") || !strings.Contains(line, "refused") {
			t.Errorf("verdict %q: want %s and why it is unknown", line, a)
		}
	}
	if strings.Contains(stdout+stderr, "s3cr3tpw") {
		t.Errorf("the password is in the output: %q", stdout+stderr)
	}
}
