package dashboard

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/mongopool/mongopool/pool"
)

// The windows of the rates and percentiles: the check-out waits and the
// events over the last second, which follows a storm as it happens; the
// establishments over the last ten, as they are much rarer.
const (
	rateWindow      = time.Second
	establishWindow = 10 * time.Second
)

// markEvery is the least time between two marks of a pool, and markCount how
// many are kept: enough to reach establishWindow back when snapshots are
// taken at DefaultInterval or less often.
const (
	markEvery = 200 * time.Millisecond
	markCount = 64
)

// maxErrorLen is the longest error message an event carries on the page, in
// bytes: an error may quote a server's reply.
const maxErrorLen = 300

// streamEventsLimit is the most events of each list of a pool that one frame
// of /events carries: the newest.
const streamEventsLimit = 100

// snapshot is the JSON of /snapshot and of each frame of /events.
type snapshot struct {
	Time       int64          `json:"time"`       // Unix milliseconds
	IntervalMS float64        `json:"intervalMs"` // between two frames of /events
	Pools      []poolSnapshot `json:"pools"`      // sorted by name
}

// poolSnapshot is one pool of a snapshot.
type poolSnapshot struct {
	Name       string `json:"name"`
	Address    string `json:"address"`
	State      string `json:"state"` // paused, ready or closed
	Generation uint64 `json:"generation"`

	Idle    int `json:"idle"`
	InUse   int `json:"inUse"`
	Pending int `json:"pending"`
	Total   int `json:"total"`
	Waiting int `json:"waiting"`

	// Wait is the check-out wait over the last second; Establish the
	// establishment time over the last ten seconds; the AllTime ones
	// since the pool was created.
	Wait             percentiles `json:"wait"`
	Establish        percentiles `json:"establish"`
	WaitAllTime      percentiles `json:"waitAllTime"`
	EstablishAllTime percentiles `json:"establishAllTime"`

	// The rates over the last second; null in the first snapshot, and
	// EventsPerSecond also when no event handler of the pool's name saw
	// an event of the pool.
	EventsPerSecond    *float64 `json:"eventsPerSecond"`
	CheckOutsPerSecond *float64 `json:"checkOutsPerSecond"`

	Options []option `json:"options"`
	Totals  totals   `json:"totals"`

	// Listening reports whether an event handler of the pool's name saw
	// its events; EventCounts counts them by type since then, and
	// DroppedEvents those left out of the lists.
	Listening     bool             `json:"listening"`
	EventCounts   map[string]int64 `json:"eventCounts,omitempty"`
	DroppedEvents int64            `json:"droppedEvents"`
	// The recent events, newest first, in three lists: the pool's own
	// (created, ready, cleared, closed), those of check-outs (started,
	// checked out, checked in), and the others (of connections, failed
	// check-outs, leaks).
	PoolEvents []event `json:"poolEvents"`
	Events     []event `json:"events"`
	CheckOuts  []event `json:"checkOuts"`
}

// percentiles summarises a distribution of durations, in milliseconds; the
// percentiles are null when there is no sample.
type percentiles struct {
	Samples uint64   `json:"samples"`
	P50     *float64 `json:"p50"`
	P90     *float64 `json:"p90"`
	P99     *float64 `json:"p99"`
	Mean    *float64 `json:"mean"`
}

// option is one of the pool's options as the page shows it, read from the
// pool at each snapshot (a Reconfigure shows at once).
type option struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// totals are the pool's running totals.
type totals struct {
	Created         int64 `json:"created"`
	Closed          int64 `json:"closed"`
	EstablishFailed int64 `json:"establishFailed"`
	CheckedOut      int64 `json:"checkedOut"`
	CheckOutFailed  int64 `json:"checkOutFailed"`
	Timeouts        int64 `json:"timeouts"`
	Clears          int64 `json:"clears"`
	Leaks           int64 `json:"leaks"`
}

// event is an event as the page lists it.
type event struct {
	Seq          uint64  `json:"seq"`  // the order in which the dashboard received it
	Time         int64   `json:"time"` // Unix milliseconds
	Type         string  `json:"type"`
	ConnectionID int64   `json:"connectionId,omitempty"`
	DurationMS   float64 `json:"durationMs,omitempty"`
	Reason       string  `json:"reason,omitempty"`
	Error        string  `json:"error,omitempty"`
	Interrupt    bool    `json:"interruptInUse,omitempty"`
	ServiceID    string  `json:"serviceId,omitempty"`
}

// A mark is what the dashboard remembers of a pool at a snapshot, to compute
// the rates and windowed percentiles of the next ones.
type mark struct {
	at        time.Time
	checkOuts int64 // successful and failed
	events    int64
	wait      pool.Histogram
	establish pool.Histogram
}

// marks are a pool's last markCount marks.
type marks struct {
	buf  [markCount]mark
	n    int // marks in buf
	next int // where the next one goes
}

// base returns the newest mark at least age old, or the oldest one if none
// is; false when there is none at all.
func (m *marks) base(now time.Time, age time.Duration) (mark, bool) {
	if m.n == 0 {
		return mark{}, false
	}
	for i := 1; i <= m.n; i++ {
		mk := m.buf[(m.next-i+markCount)%markCount]
		if now.Sub(mk.at) >= age || i == m.n {
			return mk, true
		}
	}
	panic("unreachable")
}

// push adds mk unless the newest mark is less than markEvery old.
func (m *marks) push(mk mark) {
	if m.n > 0 && mk.at.Sub(m.buf[(m.next-1+markCount)%markCount].at) < markEvery {
		return
	}
	m.buf[m.next] = mk
	m.next = (m.next + 1) % markCount
	m.n = min(m.n+1, markCount)
}

// snapshot takes a snapshot of the pools on the dashboard. Its lists carry
// the events received after the one numbered after, at most limit of each
// (all that are kept if limit is 0); it also returns the number of the last
// event it could have listed, the after of the next snapshot of a stream.
func (d *Dashboard) snapshot(now time.Time, after uint64, limit int) (snapshot, uint64) {
	// Every event numbered upTo or less is in its ring by now; later ones
	// wait for the next snapshot, so that a stream lists each event once.
	upTo := d.listed.Load()
	if limit <= 0 {
		limit = d.cfg.kept
	}
	entries := d.refresh(now)
	s := snapshot{
		Time:       now.UnixMilli(),
		IntervalMS: ms(d.cfg.interval),
		Pools:      make([]poolSnapshot, 0, len(entries)),
	}
	for _, e := range entries {
		s.Pools = append(s.Pools, d.poolSnapshot(e, now, after, upTo, limit))
	}
	return s, upTo
}

// poolSnapshot takes the snapshot of one pool: its Stats now, its events
// (as snapshot lists them), and the rates and windowed percentiles against
// its marks, to which it adds one.
func (d *Dashboard) poolSnapshot(e *entry, now time.Time, after, upTo uint64, limit int) poolSnapshot {
	st := e.pool.Stats()
	f := d.lookupFeed(e.handler, st.Address)
	ps := poolSnapshot{
		Name:             e.name,
		Address:          st.Address,
		State:            st.State,
		Generation:       st.Generation,
		Idle:             st.Available,
		InUse:            st.InUse,
		Pending:          st.Pending,
		Total:            st.Total,
		Waiting:          st.Waiting,
		WaitAllTime:      summarise(st.CheckOutWait),
		EstablishAllTime: summarise(st.Establish),
		Totals: totals{
			Created:         st.Created,
			Closed:          st.Closed,
			EstablishFailed: st.EstablishFailed,
			CheckedOut:      st.CheckedOut,
			CheckOutFailed:  st.CheckOutFailed,
			Timeouts:        st.Timeouts,
			Clears:          st.Clears,
			Leaks:           st.Leaks,
		},
		PoolEvents: []event{},
		Events:     []event{},
		CheckOuts:  []event{},
	}

	cur := mark{at: now, checkOuts: st.CheckedOut + st.CheckOutFailed, wait: st.CheckOutWait, establish: st.Establish}
	if f != nil {
		cur.events = f.total()
		ps.Listening = true
		ps.DroppedEvents = f.dropped.Load()
		ps.EventCounts = make(map[string]int64)
		for t := range f.counts {
			if n := f.counts[t].Load(); n > 0 {
				ps.EventCounts[pool.EventType(t).String()] = n
			}
		}
		var recs [kinds][]record
		f.mu.Lock()
		for k := range recs {
			recs[k] = f.rings[k].newest(nil, after, upTo, limit)
		}
		f.mu.Unlock()
		ps.PoolEvents = events(ps.PoolEvents, recs[kindPool])
		ps.Events = events(ps.Events, recs[kindConnection])
		ps.CheckOuts = events(ps.CheckOuts, recs[kindCheckOut])
	}
	ps.Options = options(st)

	e.mu.Lock()
	lastSecond, ok := e.marks.base(now, rateWindow)
	lastTen, _ := e.marks.base(now, establishWindow)
	e.marks.push(cur)
	e.mu.Unlock()
	if ok {
		ps.Wait = summarise(since(cur.wait, lastSecond.wait))
		ps.Establish = summarise(since(cur.establish, lastTen.establish))
		if dt := now.Sub(lastSecond.at).Seconds(); dt > 0 {
			ps.CheckOutsPerSecond = ptr(float64(max(0, cur.checkOuts-lastSecond.checkOuts)) / dt)
			if f != nil {
				ps.EventsPerSecond = ptr(float64(max(0, cur.events-lastSecond.events)) / dt)
			}
		}
	} else {
		ps.Wait = summarise(pool.Histogram{})
		ps.Establish = summarise(pool.Histogram{})
	}
	return ps
}

// since returns the samples of h that are not in the earlier snapshot old.
func since(h, old pool.Histogram) pool.Histogram {
	if old.Count > h.Count {
		return h // not an earlier snapshot of the same pool
	}
	d := pool.Histogram{Count: h.Count - old.Count, Sum: h.Sum - old.Sum}
	for i := range d.Counts {
		if old.Counts[i] > h.Counts[i] {
			return h
		}
		d.Counts[i] = h.Counts[i] - old.Counts[i]
	}
	return d
}

func summarise(h pool.Histogram) percentiles {
	p := percentiles{Samples: h.Count}
	if h.Count > 0 {
		p.P50 = ptr(ms(h.Quantile(0.50)))
		p.P90 = ptr(ms(h.Quantile(0.90)))
		p.P99 = ptr(ms(h.Quantile(0.99)))
		p.Mean = ptr(ms(h.Mean()))
	}
	return p
}

// options returns the pool's options as its Stats give them now.
func options(st pool.Stats) []option {
	limit := func(n int) string {
		if n == 0 {
			return "no limit"
		}
		return strconv.Itoa(n)
	}
	duration := func(d time.Duration) string {
		if d == 0 {
			return "no limit"
		}
		return d.String()
	}
	return []option{
		{Name: "maxPoolSize", Value: limit(st.MaxPoolSize)},
		{Name: "minPoolSize", Value: strconv.Itoa(st.MinPoolSize)},
		{Name: "maxConnecting", Value: strconv.Itoa(st.MaxConnecting)},
		{Name: "maxIdleTimeMS", Value: duration(st.MaxIdleTime)},
		{Name: "waitQueueTimeoutMS", Value: duration(st.WaitQueueTimeout)},
		{Name: "maxLifetime", Value: duration(st.MaxLifetime)},
	}
}

// events appends the records to dst as the page lists them.
func events(dst []event, recs []record) []event {
	for i := range recs {
		r := &recs[i]
		ev := event{
			Seq:          r.seq,
			Time:         r.at.UnixMilli(),
			Type:         r.ev.Type.String(),
			ConnectionID: r.ev.ConnectionID,
			DurationMS:   ms(r.ev.Duration),
			Reason:       r.ev.Reason,
			Interrupt:    r.ev.Interrupt,
		}
		if r.ev.Err != nil {
			ev.Error = truncate(r.ev.Err.Error(), maxErrorLen)
		}
		if !r.ev.ServiceID.IsZero() {
			ev.ServiceID = r.ev.ServiceID.String()
		}
		dst = append(dst, ev)
	}
	return dst
}

// truncate cuts s to at most n bytes, on a character boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ptr[T any](v T) *T { return &v }
