package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// logLine is a line of the event log as a reader decodes it.
type logLine struct {
	Time           string           `json:"time"`
	Elapsed        *float64         `json:"elapsed"`
	Type           string           `json:"type"`
	Pool           string           `json:"pool"`
	ConnectionID   int64            `json:"connectionId"`
	Duration       string           `json:"duration"`
	DurationNs     int64            `json:"durationNs"`
	Reason         string           `json:"reason"`
	Error          string           `json:"error"`
	InterruptInUse *bool            `json:"interruptInUseConnections"`
	Options        map[string]int64 `json:"options"`
}

// readEventLog decodes every line of an event log, failing the test on one
// that is not a JSON object of a known event with its time, and returns
// the lines and their counts by type.
func readEventLog(t *testing.T, log string) ([]logLine, map[string]int64) {
	t.Helper()
	known := map[string]bool{}
	for _, typ := range eventTypes {
		known[typ.String()] = true
	}
	var lines []logLine
	counts := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l logLine
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %d of the event log: %v: %q", len(lines)+1, err, sc.Text())
		}
		if _, err := time.Parse(time.RFC3339Nano, l.Time); err != nil || l.Elapsed == nil || !known[l.Type] || l.Pool == "" {
			t.Fatalf("line %d of the event log lacks its time, elapsed, pool or a known type: %q", len(lines)+1, sc.Text())
		}
		lines = append(lines, l)
		counts[l.Type]++
	}
	if len(lines) == 0 {
		t.Fatal("the event log is empty")
	}
	return lines, counts
}

// checkEventCounts checks the counts of an event log against the summary's
// "events" section.
func checkEventCounts(t *testing.T, report string, counts map[string]int64) {
	t.Helper()
	for _, typ := range eventTypes {
		m := regexp.MustCompile(`(?m)^  ` + typ.String() + ` +(\d+)$`).FindStringSubmatch(report)
		if m == nil {
			t.Fatalf("no count of %v in the summary:\n%s", typ, report)
		}
		if n, _ := strconv.ParseInt(m[1], 10, 64); n != counts[typ.String()] {
			t.Errorf("%v: %d in the summary, %d lines in the event log", typ, n, counts[typ.String()])
		}
	}
}

// -events FILE writes every pool event as a JSON line: as many of each type
// as the summary counts, with the fields each type carries, and nothing of
// the connection string's secrets.
func TestEventsFile(t *testing.T) {
	srv := startTestServer(t)
	if err := srv.AddUser("admin", "bob", "s3cr3tpw"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	code, stdout, stderr := runOnce(t, "-uri", "mongodb://bob:s3cr3tpw@"+srv.Addr()+"/", "-scenario", "clear", "-clear-every", "30ms",
		"-duration", "400ms", "-goroutines", "4", "-maxPoolSize", "2", "-events", path)
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cr3tpw") {
		t.Error("the password is in the event log")
	}
	lines, counts := readEventLog(t, string(b))
	checkEventCounts(t, stdout, counts)
	var interrupting, plain int
	for _, l := range lines {
		if l.Pool != srv.Addr() {
			t.Errorf("event %s of pool %q, want %s", l.Type, l.Pool, srv.Addr())
		}
		switch l.Type {
		case "ConnectionCheckedOut", "ConnectionReady":
			d, err := time.ParseDuration(l.Duration)
			if l.ConnectionID == 0 || err != nil || l.DurationNs <= 0 || int64(d) != l.DurationNs {
				t.Errorf("%s without its connection or duration: %+v", l.Type, l)
			}
		case "ConnectionPoolCleared":
			switch {
			case l.InterruptInUse == nil:
				t.Errorf("ConnectionPoolCleared without interruptInUseConnections: %+v", l)
			case *l.InterruptInUse:
				interrupting++
			default:
				plain++
			}
		case "ConnectionPoolCreated":
			if l.Options["maxPoolSize"] != 2 {
				t.Errorf("ConnectionPoolCreated without its options: %+v", l)
			}
		case "ConnectionClosed":
			if l.Reason == "" {
				t.Errorf("ConnectionClosed without its reason: %+v", l)
			}
		}
	}
	if interrupting == 0 || plain == 0 {
		t.Errorf("clears: %d with interruptInUseConnections, %d without: want both", interrupting, plain)
	}
}

// -events - writes the events to standard output, and nothing else: the
// report goes to standard error.
func TestEventsStdout(t *testing.T) {
	srv := startTestServer(t)
	code, stdout, stderr := runOnce(t, "-uri", srv.URI(), "-duration", "200ms", "-goroutines", "2", "-events", "-")
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	_, counts := readEventLog(t, stdout)
	checkEventCounts(t, stderr, counts)
	if !strings.Contains(stderr, "\noperations ") {
		t.Errorf("no report on standard error:\n%s", stderr)
	}
}

// A file that cannot be written: exit code 1 at once, saying why.
func TestEventsUnwritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "events.jsonl")
	code, stdout, stderr := runOnce(t, "-scenario", "storm", "-goroutines", "1", "-events", path)
	if code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if line := verdict(t, stderr); !strings.Contains(line, "cannot write the events") || !strings.Contains(line, path) {
		t.Errorf("verdict %q: want the file and why", line)
	}
}
