package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/dashboard"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// hangLimit bounds every wait but the clear's, so that a regression fails in
// seconds with a message.
const hangLimit = 20 * time.Second

// clearShownWithin is how soon a clear must be in the page's list of events:
// the page is updated about four times a second.
const clearShownWithin = time.Second

// poolName is the name of the test's pool on the dashboard.
const poolName = "main"

// chromium returns the path of the browser, or skips the test without one
// (fails it on CI, which installs it).
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is not on PATH (%v): CI installs Debian's chromium package before the tests", err)
		}
		t.Skipf("chromium is not on PATH (%v): install Debian's chromium package to run the browser tests", err)
	}
	return path
}

// A browser is a headless Chromium with one tab, and the messages its console
// received.
type browser struct {
	ctx context.Context // the tab's; a Run under it must have a deadline of its own

	mu       sync.Mutex
	messages []chromedp.ConsoleMessage // errors and exceptions
	marks    chan string               // the marks consoleErrors writes, as the console gets them
}

// markPrefix begins the messages consoleErrors writes to the console.
const markPrefix = "browsertest mark "

// startBrowser starts Chromium with a profile of its own; it is stopped when
// the test ends.
func startBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	b := &browser{ctx: ctx, marks: make(chan string, 1)}

	// Console starts the browser, and subscribes before any page loads.
	messages := chromedp.Console(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range messages {
			if err != nil {
				return // the browser stopped
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.messages = append(b.messages, m)
				b.mu.Unlock()
			}
			if strings.HasPrefix(m.Text, markPrefix) {
				select {
				case b.marks <- m.Text:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
		wg.Wait()
	})
	// The browser sends no message before a page: check that it started by
	// asking for its version.
	if _, err := b.run(chromedp.Evaluate[string]("navigator.userAgent")); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return b
}

// run runs an action in the tab, bounded by hangLimit.
func (b *browser) run(a chromedp.Action[string]) (string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, hangLimit)
	defer cancel()
	return chromedp.Run(ctx, a)
}

// consoleErrors returns the console's errors and exceptions so far: all of
// them, as it writes a mark to the console and waits for it to come after
// them.
func (b *browser) consoleErrors(t *testing.T) []string {
	t.Helper()
	mark := fmt.Sprintf("%s%d", markPrefix, time.Now().UnixNano())
	evaluate[any](t, b, fmt.Sprintf("console.info(%q)", mark))
	deadline := time.After(hangLimit)
	for got := ""; got != mark; {
		select {
		case got = <-b.marks:
		case <-deadline:
			t.Fatalf("the console's messages did not come within %v", hangLimit)
		}
	}
	return b.errors()
}

// errors returns the console's errors and exceptions received so far.
func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s []string
	for _, m := range b.messages {
		where := ""
		if m.URL != "" {
			where = fmt.Sprintf(" (%s:%d:%d)", m.URL, m.Line+1, m.Column+1)
		}
		s = append(s, m.String()+where)
	}
	return s
}

// evaluate evaluates a JavaScript expression in the tab into a value of type
// T, bounded by hangLimit.
func evaluate[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, hangLimit)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor waits until the JavaScript expression is true in the tab, and fails
// the test if it is not within limit.
func waitFor(t *testing.T, b *browser, what, expr string, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, limit+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingTimeout(limit))); err != nil {
		t.Fatalf("waiting %v for %s (%s): %v; console errors: %q", limit, what, expr, err, b.errors())
	}
}

// A fixture is a pool of the test server, on a dashboard served on
// 127.0.0.1, with workloads.
type fixture struct {
	server *mongotest.Server
	pool   *mongopool.Pool
	dash   *dashboard.Dashboard
	http   *httptest.Server
}

// newFixture starts the test server, a pool of it with the options of query
// (a connection string's) on the dashboard, and the dashboard's HTTP server;
// all stop when the test ends.
func newFixture(t *testing.T, query string) *fixture {
	t.Helper()
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	d, err := dashboard.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	p, err := mongopool.Open(ctx, srv.URI()+"?"+query, pool.WithEventHandler(d.EventHandler(poolName)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := d.Add(poolName, p.Pool()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d)
	// The dashboard is closed first (cleanups run last first): it ends the
	// page's stream, which the server's Close waits for.
	t.Cleanup(hs.Close)
	t.Cleanup(func() { d.Close() })
	return &fixture{server: srv, pool: p, dash: d, http: hs}
}

// work starts n goroutines that each run a ping after another, holding the
// connection for hold after it (to keep the pool busy); it returns the
// function that stops them and waits for them, which also runs when the test
// ends.
func (f *fixture) work(t *testing.T, n int, hold time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ping, err := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				// Errors are part of the show: a clear turns check-outs
				// away until the pool is ready again.
				err := f.pool.Do(ctx, func(c *connection.Conn) error {
					_, err := c.RoundTrip(ctx, ping)
					pause(ctx, hold)
					return err
				})
				if err != nil {
					// As an application would, rather than spin on
					// a paused pool.
					pause(ctx, 10*time.Millisecond)
				}
			}
		}()
	}
	stop = func() {
		cancel()
		wg.Wait()
	}
	t.Cleanup(stop)
	return stop
}

// pause waits for d, or for ctx to end: the pace of a workload.
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// artifactDir is where the tests write their screenshots: $MONGOPOOL_ARTIFACTS
// if set, or a temporary directory of the test.
func artifactDir(t *testing.T) string {
	if dir := os.Getenv("MONGOPOOL_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// screenshot writes a PNG of the whole page to path.
func screenshot(t *testing.T, b *browser, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, hangLimit)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestDashboardPage loads the dashboard in Chromium while a workload runs, and
// checks that the page raises no console error, that its charts receive data,
// and that a clear of the pool shows in its list of events within a second.
func TestDashboardPage(t *testing.T) {
	b := startBrowser(t, 1400, 1000)
	f := newFixture(t, "maxPoolSize=10&maxConnecting=4")

	if err := chromedp.Do(b.ctx, chromedp.Navigate(f.http.URL+"/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	state := "window.dashboardState"
	waitFor(t, b, "the stream connected", fmt.Sprintf(`%s && %s.connected && %s.pools[%q]`, state, state, state, poolName), hangLimit)
	// The workload starts once the page follows the pool, so that the
	// charts see its connections established.
	f.work(t, 8, time.Millisecond)
	waitFor(t, b, "12 snapshots charted, an establishment among them",
		fmt.Sprintf(`%s.pools[%q].samples >= 12 && %s.chartData(%q, "establish")[1].some((v) => v != null)`, state, poolName, state, poolName),
		hangLimit)

	// Each chart got data: some value of each series is a number, and the
	// ones the workload must move are above 0.
	for chart, series := range map[string][]string{
		"connections": {"idle", "in use", "pending", "maxPoolSize"},
		"waiting":     {"waiting"},
		"wait":        {"p50", "p90", "p99"},
		"establish":   {"p50", "p90", "p99"},
		"rates":       {"events/s", "check-outs/s"},
	} {
		data := evaluate[[][]*float64](t, b, fmt.Sprintf("%s.chartData(%q, %q)", state, poolName, chart))
		if len(data) != len(series)+1 {
			t.Errorf("chart %s: %d series, want the time and %v", chart, len(data), series)
			continue
		}
		if n := len(data[0]); n < 12 {
			t.Errorf("chart %s: %d points in time, want at least 12", chart, n)
		}
		for i, name := range series {
			var numbers, positive int
			for _, v := range data[i+1] {
				if v != nil {
					numbers++
					if *v > 0 {
						positive++
					}
				}
			}
			if numbers == 0 {
				t.Errorf("chart %s, series %s: no value", chart, name)
			}
			moved := map[string]bool{"connections/in use": true, "connections/maxPoolSize": true, "rates/events/s": true, "rates/check-outs/s": true, "wait/p99": true, "establish/p50": true}
			if moved[chart+"/"+name] && positive == 0 {
				t.Errorf("chart %s, series %s: never above 0 while the workload ran: %v", chart, name, data[i+1])
			}
		}
		// The chart drew as many points as it holds.
		points := evaluate[string](t, b, fmt.Sprintf(`document.querySelector('section[data-pool=%q] [data-chart=%q]').dataset.points`, poolName, chart))
		if points == "" || points == "0" {
			t.Errorf("chart %s: data-points %q", chart, points)
		}
	}

	// The options and the figures are on the page.
	text := evaluate[string](t, b, fmt.Sprintf(`document.querySelector('section[data-pool=%q]').innerText`, poolName))
	for _, want := range []string{"maxPoolSize", "10", "maxConnecting", "4", "ConnectionPoolReady", "ConnectionCreated", "events/s"} {
		if !strings.Contains(text, want) {
			t.Errorf("the pool's panel does not show %q:\n%s", want, text)
		}
	}

	// A clear shows in the list within a second.
	cleared := fmt.Sprintf(`document.querySelector('section[data-pool=%q] ol.events li[data-type="ConnectionPoolCleared"]') !== null`, poolName)
	if evaluate[bool](t, b, cleared) {
		t.Fatal("a clear is listed before the pool was cleared")
	}
	if err := f.pool.Pool().Clear(pool.ClearOptions{Cause: errors.New("cleared by the browser test")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, "the clear listed", cleared, clearShownWithin)

	screenshot(t, b, filepath.Join(artifactDir(t), "dashboard.png"))
	if errs := b.consoleErrors(t); len(errs) > 0 {
		t.Errorf("the page wrote %d errors to the console:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// TestStormScreenshot writes a screenshot of the dashboard during a storm to
// the file $MONGOPOOL_STORM_SCREENSHOT names, and is skipped without it: it
// takes half a minute, to fill the charts. The storm is 1000 goroutines
// checking out of a pool of maxPoolSize 20, between two calm spells of 5,
// with a clear in its middle.
func TestStormScreenshot(t *testing.T) {
	out := os.Getenv("MONGOPOOL_STORM_SCREENSHOT")
	if out == "" {
		t.Skip("MONGOPOOL_STORM_SCREENSHOT names no file to write the screenshot to")
	}
	b := startBrowser(t, 1400, 1000)
	f := newFixture(t, "maxPoolSize=20")
	if err := chromedp.Do(b.ctx, chromedp.Navigate(f.http.URL+"/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	waitFor(t, b, "the stream connected", fmt.Sprintf(`window.dashboardState && window.dashboardState.pools[%q]`, poolName), hangLimit)

	// The phases are for the eye: each lasts long enough for the charts to
	// show it.
	calm := f.work(t, 5, 2*time.Millisecond)
	time.Sleep(6 * time.Second)
	calm()
	storm := f.work(t, 1000, 2*time.Millisecond)
	time.Sleep(6 * time.Second)
	if err := f.pool.Pool().Clear(pool.ClearOptions{Cause: errors.New("a clear in the storm")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second)
	storm()
	f.work(t, 5, 2*time.Millisecond)
	time.Sleep(5 * time.Second)

	screenshot(t, b, out)
	if errs := b.consoleErrors(t); len(errs) > 0 {
		t.Errorf("the page wrote %d errors to the console:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}
