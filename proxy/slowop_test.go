package proxy_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/proxy"
)

// lockedLog is a text log that tests read while the proxy writes it.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

// String returns the log so far.
func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// lines returns the lines that contain s.
func (l *lockedLog) lines(s string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// An operation slower than SlowOperation is logged with what, whose and
// where; a quick one is not; a burst of slow ones is logged 10 a second,
// and all of them counted.
func TestSlowOperationLog(t *testing.T) {
	rs := startReplicaSet(t, 1)
	var log lockedLog
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{
		SlowOperation: 250 * time.Millisecond, // well above a quick operation on a loaded machine
		Logger:        slog.New(slog.NewTextHandler(&log, nil)),
	})
	ctx := testContext(t)
	c := driverClient(t, "mongodb://"+addr+"/?appName=reports&maxPoolSize=40")
	coll := c.Database("db").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := log.lines("slow operation"); len(got) != 0 {
		t.Fatalf("a quick insert was logged as slow: %q", got)
	}

	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, Times: 1, BlockTime: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := coll.FindOne(ctx, bson.D{}).Err(); err != nil {
		t.Fatal(err)
	}
	got := log.lines("slow operation")
	if len(got) != 1 {
		t.Fatalf("%d slow operation lines for one slow find: %q", len(got), got)
	}
	for _, want := range []string{"level=WARN", "app=reports", "command=find", "db=db", "server=" + rs.Primary().Addr(), "outcome=ok", "remote=127.0.0.1:"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("the slow operation's line has no %s: %s", want, got[0])
		}
	}

	// A burst: 30 slow counts at once.
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"count"}, Times: 30, BlockTime: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for range 30 {
		wg.Go(func() {
			errs <- c.Database("db").RunCommand(ctx, bson.D{{Key: "count", Value: "c"}}).Err()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && err != mongo.ErrNoDocuments {
			t.Fatal(err)
		}
	}
	if n := p.Stats().SlowOperations; n < 31 {
		t.Errorf("Stats().SlowOperations = %d, want 31 or more", n)
	}
	// Ten a second: the burst's replies come within a second or two, even
	// on a loaded machine.
	if n := len(log.lines("command=count")); n < 1 || n > 20 {
		t.Errorf("%d of 30 slow counts in a burst logged, want 1 to 20", n)
	}
}
