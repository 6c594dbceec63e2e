package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// proxyDaemon is a running mongopool-proxy command.
type proxyDaemon struct {
	listen string // its mongos listener's address
	admin  string // its admin listener's
}

// buildProxyDaemon builds the proxy's daemon (../../cmd/mongopool-proxy, a
// module of its own) into a temporary directory, and returns its path.
func buildProxyDaemon(t *testing.T) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Fatalf("the go command, to build mongopool-proxy: %v", err)
		}
	}
	bin := filepath.Join(t.TempDir(), "mongopool-proxy")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "cmd", "mongopool-proxy")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building mongopool-proxy: %v\n%s", err, out)
	}
	return bin
}

// startProxyDaemon runs the daemon bin with args, an admin listener and a
// mongos listener on free ports of 127.0.0.1, until the test ends, when it
// is drained (an interrupt) and must exit with 0.
func startProxyDaemon(t *testing.T, bin string, args ...string) *proxyDaemon {
	t.Helper()
	args = append([]string{"-admin", "127.0.0.1:0", "-listen", "127.0.0.1:0", "-shutdown-timeout", "5s"}, args...)
	cmd := exec.Command(bin, args...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads any more
			}
		}
		// Wait only once stdout is read: it closes the pipe.
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		// The drain: SIGINT, as the command's documentation says.
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			cmd.Process.Kill()
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("mongopool-proxy %q: %v; its log:\n%s", args, err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("mongopool-proxy %q did not stop within 30 s of an interrupt; killed. Its log:\n%s", args, stderr.String())
		}
	})
	d := &proxyDaemon{}
	deadline := time.After(hangLimit)
	for d.listen == "" || d.admin == "" {
		select {
		case line := <-lines:
			if a, ok := strings.CutPrefix(line, "admin on http://"); ok {
				d.admin, _, _ = strings.Cut(a, "/")
			}
			if a, ok := strings.CutPrefix(line, "listening on "); ok {
				d.listen = a
			}
		case err := <-exited:
			exited <- err
			t.Fatalf("mongopool-proxy %q exited before listening: %v; its log:\n%s", args, err, stderr.String())
		case <-deadline:
			t.Fatalf("mongopool-proxy %q printed no listening addresses within %v; its log:\n%s", args, hangLimit, stderr.String())
		}
	}
	return d
}

// lockedBuffer is a bytes.Buffer that a process writes while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// readPrefs are the read preferences of proxyWork's reads, in turn.
var readPrefs = []*readpref.ReadPref{readpref.Primary(), readpref.SecondaryPreferred(), readpref.Nearest()}

// proxyWork starts n goroutines that each insert and read back through the
// proxy at addr, one operation after another, until the test ends.
func proxyWork(t *testing.T, addr string, n int) {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").SetAppName("browsertest"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	coll := c.Database("browsertest").Collection("work")
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ctx.Err() == nil; j++ {
				// Reads from the secondaries too, so that every
				// upstream pool is used.
				_, err := coll.InsertOne(ctx, bson.D{{Key: "worker", Value: i}, {Key: "n", Value: j}})
				if err == nil {
					err = coll.Database().Collection("work", options.Collection().SetReadPreference(readPrefs[j%len(readPrefs)])).
						FindOne(ctx, bson.D{{Key: "worker", Value: i}}).Err()
				}
				if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
					pause(ctx, 10*time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		dctx, dcancel := context.WithTimeout(context.Background(), hangLimit)
		defer dcancel()
		c.Disconnect(dctx)
	})
}

// upstreamPool is how the daemon's dashboard names a pool of its upstream
// client: the source "upstream" and the server's address.
var upstreamPool = regexp.MustCompile(`^upstream/127\.0\.0\.1:\d+$`)

// TestProxyDaemonDashboard runs the proxy's daemon (mongopool-proxy, built
// from ../../cmd/mongopool-proxy) in front of its in-process test replica
// set, with traffic through it, and loads its admin listener's /dashboard/
// in Chromium: a panel per upstream pool ("upstream/127.0.0.1:PORT", the
// set's three members), each with its charts receiving data, and no console
// error.
func TestProxyDaemonDashboard(t *testing.T) {
	b := startBrowser(t, 1400, 1000)
	d := startProxyDaemon(t, buildProxyDaemon(t))
	proxyWork(t, d.listen, 4)

	if err := chromedp.Do(b.ctx, chromedp.Navigate("http://"+d.admin+"/dashboard/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	state := "window.dashboardState"
	waitFor(t, b, "the stream connected, with three pools",
		fmt.Sprintf(`%s && %s.connected && Object.keys(%s.pools).length === 3`, state, state, state), hangLimit)
	pools := evaluate[[]string](t, b, fmt.Sprintf("Object.keys(%s.pools).sort()", state))
	for _, name := range pools {
		if !upstreamPool.MatchString(name) {
			t.Errorf("a pool named %q on the dashboard, want upstream/127.0.0.1:PORT", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	waitFor(t, b, "12 snapshots charted of each pool",
		fmt.Sprintf(`Object.values(%s.pools).every((p) => p.samples >= 12)`, state), hangLimit)

	// Each pool has its panel, with its name and its charts drawn.
	sections := evaluate[[]string](t, b, `[...document.querySelectorAll('section[data-pool]')].map((s) => s.dataset.pool).sort()`)
	if !slices.Equal(sections, pools) {
		t.Errorf("the page's panels are %q, want the pools %q", sections, pools)
	}
	checkOuts := 0.0
	for _, name := range pools {
		panel := fmt.Sprintf(`document.querySelector('section[data-pool=%q]')`, name)
		if text := evaluate[string](t, b, panel+".innerText"); !strings.Contains(text, name) || !strings.Contains(text, "maxPoolSize") {
			t.Errorf("the panel of %s does not show its name and options:\n%s", name, text)
		}
		for _, chart := range []string{"connections", "waiting", "wait", "establish", "rates"} {
			points := evaluate[string](t, b, fmt.Sprintf(`%s.querySelector('[data-chart=%q]').dataset.points`, panel, chart))
			if points == "" || points == "0" {
				t.Errorf("%s: chart %s drew no point (data-points %q)", name, chart, points)
			}
			if canvas := evaluate[bool](t, b, fmt.Sprintf(`%s.querySelector('[data-chart=%q] canvas') !== null`, panel, chart)); !canvas {
				t.Errorf("%s: chart %s has no canvas", name, chart)
			}
		}
		// rates: [time, events/s, check-outs/s].
		rates := evaluate[[][]*float64](t, b, fmt.Sprintf("%s.chartData(%q, 'rates')", state, name))
		if len(rates) != 3 {
			t.Fatalf("%s: the rates chart has %d series, want 3", name, len(rates))
		}
		for _, v := range rates[2] {
			if v != nil {
				checkOuts = max(checkOuts, *v)
			}
		}
	}
	if checkOuts == 0 {
		t.Error("no pool's check-outs/s was ever above 0 while the traffic ran")
	}

	screenshot(t, b, filepath.Join(artifactDir(t), "proxy-dashboard.png"))
	if errs := b.consoleErrors(t); len(errs) > 0 {
		t.Errorf("the page wrote %d errors to the console:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// TestProxyDaemonDashboardEvents checks that the daemon's dashboard lists
// the events of its upstream pools (ConnectionCreated for the connections
// its traffic makes), as the page does for a pool whose events reach the
// dashboard's EventHandler.
func TestProxyDaemonDashboardEvents(t *testing.T) {
	b := startBrowser(t, 1400, 1000)
	d := startProxyDaemon(t, buildProxyDaemon(t))
	proxyWork(t, d.listen, 4)
	if err := chromedp.Do(b.ctx, chromedp.Navigate("http://"+d.admin+"/dashboard/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	waitFor(t, b, "the three pools charted",
		`window.dashboardState && Object.keys(window.dashboardState.pools).length === 3 && Object.values(window.dashboardState.pools).every((p) => p.samples >= 4)`, hangLimit)
	for _, text := range evaluate[[]string](t, b, `[...document.querySelectorAll('section[data-pool]')].map((s) => s.innerText)`) {
		if strings.Contains(text, "No event handler") {
			t.Errorf("a pool's panel says its events are not followed:\n%s", text)
		}
	}
	waitFor(t, b, "a connection's creation listed",
		`document.querySelector('section[data-pool] ol.events li[data-type="ConnectionCreated"]') !== null`, hangLimit)
}
