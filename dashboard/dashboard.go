package dashboard

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	prommetrics "github.com/mongopool/mongopool/metrics/prometheus"
	"github.com/mongopool/mongopool/pool"
)

// Limits of the options, and their defaults.
const (
	// DefaultInterval is the time between two frames of /events unless
	// WithInterval says otherwise, and MinInterval the least it may be.
	DefaultInterval = 250 * time.Millisecond
	MinInterval     = 10 * time.Millisecond
	// DefaultKept is how many events of each kind the dashboard keeps for
	// a pool unless WithEventsKept says otherwise, and MaxKept the most it
	// may keep.
	DefaultKept = 200
	MaxKept     = 1 << 14
	// MaxStreams is the most /events streams a dashboard serves at once; one
	// more is answered 503 Service Unavailable, so that clients left open
	// cannot pile up snapshots.
	MaxStreams = 64
	// MaxNameLen is the longest name of a pool or a source, in bytes.
	MaxNameLen = 100
)

// queueLen is how many events the handlers may queue for the dashboard's
// goroutine before they drop them from the list, and drainPause how long the
// goroutine lets them queue while they come: it keeps up with 800,000 events
// a second, far more than the pools of a program make but for a benchmark.
const (
	queueLen   = 4096
	drainPause = 5 * time.Millisecond
)

// pruneAfter is how long the events of a pool the dashboard does not show are
// kept, in case it is added (or comes back to a source).
const pruneAfter = 5 * time.Minute

//go:embed static
var static embed.FS

// An Option configures a Dashboard.
type Option func(*config) error

type config struct {
	interval time.Duration
	kept     int
}

// WithInterval sets how often /events sends a snapshot: DefaultInterval
// (four times a second) unless given; at least MinInterval.
func WithInterval(d time.Duration) Option {
	return func(c *config) error {
		if d < MinInterval {
			return fmt.Errorf("dashboard: interval %v is below the minimum of %v", d, MinInterval)
		}
		c.interval = d
		return nil
	}
}

// WithEventsKept sets how many recent events the dashboard keeps for each
// pool and kind of event: that many check-outs and check-ins, as many events
// of connections (and failed check-outs), and as many of the pool's own
// (created, ready, cleared, closed), so that a storm of check-outs, or of
// failures, does not push a clear out of the list.
// DefaultKept unless given; between 1 and MaxKept.
func WithEventsKept(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxKept {
			return fmt.Errorf("dashboard: %d events kept per pool is out of the range 1 to %d", n, MaxKept)
		}
		c.kept = n
		return nil
	}
}

// Dashboard is the web dashboard of a set of pools, and the [http.Handler]
// that serves it (see the package documentation for its paths). It is safe
// for concurrent use; pools and sources may be added and removed while it is
// being served.
//
// A Dashboard runs a goroutine that lists the events its handlers queue:
// [Dashboard.Close] stops it.
type Dashboard struct {
	cfg       config
	mux       *http.ServeMux
	collector *prommetrics.Collector

	queue   chan delivery
	done    chan struct{} // closed by Close
	drained chan struct{} // closed when drain returns
	closing sync.Once
	listed  atomic.Uint64 // the sequence number of the last event listed
	streams atomic.Int32  // /events streams being served

	feeds sync.Map // feedKey → *feed

	mu      sync.Mutex
	pools   []*entry // pools added with Add
	sources []*source
}

// An entry is a pool on the dashboard.
type entry struct {
	name    string // the name the dashboard shows, unique
	handler string // the name of the event handler whose events are the pool's
	pool    *pool.Pool

	mu    sync.Mutex
	marks marks
}

// A source is a changing set of pools, such as a client's.
type source struct {
	name  string
	pools func() []*pool.Pool
	// entries are the pools the source listed at its last look, by pool.
	entries map[*pool.Pool]*entry
}

// New returns a dashboard of no pool yet: add them with [Dashboard.Add] and
// [Dashboard.AddSource]. It returns an error naming the option given an
// invalid value.
func New(opts ...Option) (*Dashboard, error) {
	d := &Dashboard{
		cfg:       config{interval: DefaultInterval, kept: DefaultKept},
		collector: prommetrics.NewCollector(),
		queue:     make(chan delivery, queueLen),
		done:      make(chan struct{}),
		drained:   make(chan struct{}),
	}
	for _, o := range opts {
		if err := o(&d.cfg); err != nil {
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(d.collector); err != nil {
		return nil, fmt.Errorf("dashboard: registering the pools' collector: %w", err)
	}
	// The collector reads the pools that are on the dashboard now, sources
	// included: refresh before each scrape.
	gather := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		d.refresh(time.Now())
		return reg.Gather()
	})
	metrics := promhttp.HandlerFor(gather, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})

	assets, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	d.mux = http.NewServeMux()
	d.mux.HandleFunc("GET /{$}", d.servePage)
	d.mux.HandleFunc("GET /events", d.serveEvents)
	d.mux.HandleFunc("GET /snapshot", d.serveSnapshot)
	d.mux.Handle("GET /metrics", metrics)
	d.mux.Handle("GET /static/", http.StripPrefix("/static/", files(assets)))

	go d.drain()
	return d, nil
}

// ServeHTTP serves the page, /events, /snapshot, /metrics and /static/
// (see the package documentation). Mount the dashboard under a prefix with
// [http.StripPrefix], its pattern ending in a slash: the page refers to the
// rest by relative paths.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	// The page loads its own files only, and runs no inline script.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	d.mux.ServeHTTP(w, r)
}

// Close stops the dashboard's goroutine and ends the /events streams. The
// event handlers keep working after it, but list nothing: they count the
// events and drop them.
func (d *Dashboard) Close() error {
	d.closing.Do(func() { close(d.done) })
	<-d.drained
	return nil
}

// Add puts p on the dashboard under name, with the events of the handler
// [Dashboard.EventHandler] returned for name, if p was given one. Names are
// unique among the pools and sources of a dashboard; a name is printable, at
// most MaxNameLen bytes long, without a slash. Add fails on a pool already on
// the dashboard.
//
// The pool stays on the dashboard, closed or not, until [Dashboard.Remove].
func (d *Dashboard) Add(name string, p *pool.Pool) error {
	if p == nil {
		return errors.New("dashboard: Add of a nil pool")
	}
	if err := checkName(name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.nameFreeLocked(name); err != nil {
		return err
	}
	if e := d.entryOfLocked(p); e != nil {
		return fmt.Errorf("dashboard: the pool of %s is already on the dashboard, as %q", p.Address(), e.name)
	}
	if err := d.collector.Add(p, name); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	e := &entry{name: name, handler: name, pool: p}
	d.pools = append(d.pools, e)
	return nil
}

// AddSource puts on the dashboard the pools pools returns, as the set
// changes: the dashboard calls it at each snapshot (about four times a second
// while the page is open) and at each scrape of /metrics, so it must be quick
// and must not wait. A pool of the source is shown as name/address, with the
// events of the handler [Dashboard.EventHandler] returned for name. For the
// pools of a mongopool.Client, pass its Pools method. The rules of the names
// are those of [Dashboard.Add].
func (d *Dashboard) AddSource(name string, pools func() []*pool.Pool) error {
	if pools == nil {
		return errors.New("dashboard: AddSource of a nil function")
	}
	if err := checkName(name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.nameFreeLocked(name); err != nil {
		return err
	}
	s := &source{name: name, pools: pools, entries: map[*pool.Pool]*entry{}}
	d.sources = append(d.sources, s)
	return nil
}

// Remove takes the pool or the source of that name off the dashboard; it
// reports whether there was one. The events a handler of that name still
// delivers are kept for a while, in case it comes back.
func (d *Dashboard) Remove(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i := slices.IndexFunc(d.pools, func(e *entry) bool { return e.name == name }); i >= 0 {
		d.collector.Remove(d.pools[i].pool)
		d.pools = slices.Delete(d.pools, i, i+1)
		return true
	}
	if i := slices.IndexFunc(d.sources, func(s *source) bool { return s.name == name }); i >= 0 {
		for p := range d.sources[i].entries {
			d.collector.Remove(p)
		}
		d.sources = slices.Delete(d.sources, i, i+1)
		return true
	}
	return false
}

// checkName returns an error if name may not name a pool or a source.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("dashboard: a pool or source needs a name")
	case len(name) > MaxNameLen:
		return fmt.Errorf("dashboard: name %.20q... is %d bytes long, more than %d", name, len(name), MaxNameLen)
	case strings.Contains(name, "/"):
		return fmt.Errorf("dashboard: name %q has a slash, which separates a source's name from its pools' addresses", name)
	case strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("dashboard: name %q has a character that does not print", name)
	}
	return nil
}

func (d *Dashboard) nameFreeLocked(name string) error {
	if slices.ContainsFunc(d.pools, func(e *entry) bool { return e.name == name }) {
		return fmt.Errorf("dashboard: a pool named %q is already on the dashboard", name)
	}
	if slices.ContainsFunc(d.sources, func(s *source) bool { return s.name == name }) {
		return fmt.Errorf("dashboard: a source named %q is already on the dashboard", name)
	}
	return nil
}

// entryOfLocked returns the entry of p, added or from a source, or nil.
func (d *Dashboard) entryOfLocked(p *pool.Pool) *entry {
	for _, e := range d.pools {
		if e.pool == p {
			return e
		}
	}
	for _, s := range d.sources {
		if e := s.entries[p]; e != nil {
			return e
		}
	}
	return nil
}

// refresh looks at the sources' pools, puts the new ones on the dashboard and
// takes off those gone, and returns the entries to show, sorted by name.
func (d *Dashboard) refresh(now time.Time) []*entry {
	// The sources' functions run without the lock: they are the caller's,
	// and may take locks of their own.
	d.mu.Lock()
	srcs := slices.Clone(d.sources)
	d.mu.Unlock()
	listed := make([][]*pool.Pool, len(srcs))
	for i, s := range srcs {
		listed[i] = s.pools()
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	shown := slices.Clone(d.pools)
	for i, s := range srcs {
		if !slices.Contains(d.sources, s) {
			continue // removed meanwhile
		}
		cur := make(map[*pool.Pool]*entry, len(listed[i]))
		for _, p := range listed[i] {
			if p == nil || cur[p] != nil {
				continue
			}
			e := s.entries[p]
			if e == nil {
				if d.entryOfLocked(p) != nil {
					continue // on the dashboard already, under another name
				}
				e = &entry{name: s.name + "/" + p.Address(), handler: s.name, pool: p}
				// An error here is a name the collector has already (two
				// pools of one source to one address): the pool is shown,
				// and its metrics are the first one's.
				_ = d.collector.Add(p, e.name)
			}
			cur[p] = e
		}
		for p := range s.entries {
			if cur[p] == nil {
				d.collector.Remove(p)
			}
		}
		s.entries = cur
		for _, e := range cur {
			shown = append(shown, e)
		}
	}
	slices.SortFunc(shown, func(a, b *entry) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.pool.Address(), b.pool.Address()))
	})
	d.pruneLocked(shown, now)
	return shown
}

// pruneLocked forgets the events of the pools no longer shown, once they have
// been quiet for pruneAfter, so that a source whose pools come and go does not
// make the dashboard grow for ever.
func (d *Dashboard) pruneLocked(shown []*entry, now time.Time) {
	used := make(map[feedKey]bool, len(shown))
	for _, e := range shown {
		used[feedKey{e.handler, e.pool.Address()}] = true
	}
	d.feeds.Range(func(k, v any) bool {
		if used[k.(feedKey)] {
			return true
		}
		f := v.(*feed)
		f.mu.Lock()
		stale := now.Sub(f.lastSeen) > pruneAfter
		f.mu.Unlock()
		if stale {
			f.pruned.Store(true)
			d.feeds.CompareAndDelete(k, v)
		}
		return true
	})
}

// files serves the page's files, and not the lists of its directories.
// Browsers check them at each load: they are small, and change with the
// binary.
func files(assets fs.FS) http.Handler {
	fileServer := http.FileServerFS(assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
}
