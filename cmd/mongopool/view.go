package main

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mongopool/mongopool/pool"
)

// The live view: on a terminal, a block redrawn in place every
// liveInterval, with a line per pool. renderView draws it from a
// viewSnapshot; liveView keeps what a snapshot needs from one frame to the
// next (the pools' stats of about a second before, for the rates and the
// recent waits).

const (
	// liveInterval is how often the live view is redrawn.
	liveInterval = 250 * time.Millisecond
	// liveWindow is how far back the rates and the wait percentiles of the
	// live view look.
	liveWindow = time.Second
	// defaultWidth is the width assumed when the terminal does not tell.
	defaultWidth = 80
	// The connections bar takes what is left of the line, within these.
	minBar, maxBar = 8, 30
)

// viewPool is a pool as the view shows it.
type viewPool struct {
	addr string
	// typ is the type of the pool's server, for a client's pools; "" for
	// the single pool of a run without a client, which has no column for it.
	typ string
	// now is the pool now; then is the same pool about a window before (the
	// zero Stats when the pool is younger than that).
	now, then pool.Stats
}

// viewSnapshot is what one frame of the live view shows.
type viewSnapshot struct {
	title    string        // the scenario, or the workload
	elapsed  time.Duration // since the run began
	limit    time.Duration // -duration
	opsRate  float64       // operations finished per second, lately
	topology string        // the topology's type, for a client; "" otherwise
	window   time.Duration // between the pools' then and now
	pools    []viewPool
}

// viewColumns is the header of the pools' lines; poolColumns formats a line
// the same way.
const viewColumns = "%-21s %6s %5s %5s %6s %11s %8s %8s %8s %8s  %s"

// renderView draws the frame s for a terminal width columns wide (0: not
// known): a title line, the columns' header, then a line per pool. No line is
// longer than width, so that the block's height is its number of lines,
// which redrawing in place relies on.
func renderView(s viewSnapshot, width int) []string {
	if width <= 0 {
		width = defaultWidth
	}
	title := fmt.Sprintf("mongopool %s  %.1fs of %v  %.0f ops/s", s.title, s.elapsed.Seconds(), s.limit, s.opsRate)
	if s.topology != "" {
		title += "  topology " + s.topology
	}
	typeWidth := 0
	for _, p := range s.pools {
		if p.typ != "" {
			typeWidth = max(typeWidth, len(p.typ), len("type"))
		}
	}
	header := poolColumns(typeWidth, "pool", "type", "in use", "idle", "pend", "queue", "checkouts/s", "wait p50", "p90", "p99", "est p50", "connections")
	lines := []string{title, header}
	fixed := utf8.RuneCountInString(header) - len("connections")
	for _, p := range s.pools {
		now := p.now
		wait := histogramSince(now.CheckOutWait, p.then.CheckOutWait)
		rate := "-"
		if s.window > 0 {
			rate = fmt.Sprintf("%.0f", float64(now.CheckedOut-p.then.CheckedOut)/s.window.Seconds())
		}
		est := "-"
		if now.Establish.Count > 0 {
			est = shortDur(now.Establish.Quantile(0.5))
		}
		line := poolColumns(typeWidth, p.addr, p.typ,
			fmt.Sprint(now.InUse), fmt.Sprint(now.Available), fmt.Sprint(now.Pending), fmt.Sprint(now.Waiting), rate,
			quantile(wait, 0.5), quantile(wait, 0.9), quantile(wait, 0.99), est,
			connectionsBar(now, width-fixed))
		lines = append(lines, line)
	}
	for i, l := range lines {
		lines[i] = truncate(strings.TrimRight(l, " "), width)
	}
	return lines
}

// poolColumns lays out a line of the pools' table; the type column only
// when typeWidth is not 0.
func poolColumns(typeWidth int, addr, typ, inUse, idle, pending, queue, rate, p50, p90, p99, est, conns string) string {
	if typeWidth > 0 {
		addr = fmt.Sprintf("%-21s %-*s", addr, typeWidth, typ)
	}
	return fmt.Sprintf(viewColumns, addr, inUse, idle, pending, queue, rate, p50, p90, p99, est, conns)
}

// histogramSince returns the samples of now that were not in then: those of
// the window between two snapshots of a pool. A then that is not an earlier
// snapshot of the same pool (it has more samples) gives now whole.
func histogramSince(now, then pool.Histogram) pool.Histogram {
	if then.Count > now.Count {
		return now
	}
	d := pool.Histogram{Count: now.Count - then.Count, Sum: now.Sum - then.Sum}
	for i := range d.Counts {
		if then.Counts[i] > now.Counts[i] {
			return now
		}
		d.Counts[i] = now.Counts[i] - then.Counts[i]
	}
	return d
}

// quantile renders the q-quantile of h, "-" when h is empty.
func quantile(h pool.Histogram, q float64) string {
	if h.Count == 0 {
		return "-"
	}
	return shortDur(h.Quantile(q))
}

// connectionsBar draws the pool's connections in a bar of up to room
// columns, scaled to maxPoolSize: '#' in use, '=' idle, '+' being
// established, '.' room left; then their number, "12/100". Without
// maxPoolSize, the bar is the connections there are. With too little room,
// the number alone.
func connectionsBar(s pool.Stats, room int) string {
	limit, count := s.MaxPoolSize, fmt.Sprintf("%d/%d", s.Total, s.MaxPoolSize)
	if limit == 0 {
		limit, count = s.Total, fmt.Sprint(s.Total)
	}
	cells := min(room-len(count)-3, maxBar) // "[", "]" and a space
	if cells < minBar || limit <= 0 {
		return count
	}
	// Each part ends where the running total ends, rounded: the parts add
	// up to the bar, whatever the rounding.
	end := func(n int) int { return min(cells, (min(n, limit)*cells+limit/2)/limit) }
	inUse := end(s.InUse)
	idle := end(s.InUse+s.Available) - inUse
	pending := end(s.InUse+s.Available+s.Pending) - inUse - idle
	free := cells - inUse - idle - pending
	return "[" + strings.Repeat("#", inUse) + strings.Repeat("=", idle) + strings.Repeat("+", pending) +
		strings.Repeat(".", free) + "] " + count
}

// shortDur renders d with three significant digits at most, but for
// seconds past 999: "850µs", "1.25ms", "12.3s", "1000s".
func shortDur(d time.Duration) string {
	if d < time.Microsecond {
		return fmt.Sprintf("%dns", d)
	}
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Microsecond, "µs"}, {time.Millisecond, "ms"}, {time.Second, "s"}} {
		v := float64(d) / float64(u.unit)
		// Past 999.5 the value would round to 1000: the next unit says it
		// in fewer digits.
		if v < 999.5 {
			return fmt.Sprintf("%.3g%s", v, u.name)
		}
	}
	return fmt.Sprintf("%.0fs", d.Seconds())
}

// truncate cuts s to at most width runes.
func truncate(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width])
}

// liveView makes the frames of the live view from the pools as they are at
// each redraw.
type liveView struct {
	title    string
	limit    time.Duration
	topology func() string // the topology's type now; nil without a client
	// past holds each pool's recent snapshots, by address, oldest first,
	// back to about liveWindow ago.
	past map[string][]timedStats
}

// timedStats is a pool's snapshot and when it was taken.
type timedStats struct {
	at    time.Time
	stats pool.Stats
}

// frame returns the lines of the frame at now, for the pools as they are
// now.
func (v *liveView) frame(now time.Time, elapsed time.Duration, opsRate float64, pools []viewPool, width int) []string {
	if v.past == nil {
		v.past = map[string][]timedStats{}
	}
	s := viewSnapshot{title: v.title, elapsed: elapsed, limit: v.limit, opsRate: opsRate, pools: pools}
	if v.topology != nil {
		s.topology = v.topology()
	}
	seen := map[string]bool{}
	for i := range s.pools {
		p := &s.pools[i]
		seen[p.addr] = true
		hist := v.past[p.addr]
		// The oldest snapshot within the window is the one to compare to;
		// older ones are of no more use.
		for len(hist) > 1 && now.Sub(hist[1].at) >= liveWindow {
			hist = hist[1:]
		}
		if len(hist) > 0 && hist[0].stats.CheckedOut <= p.now.CheckedOut { // else another pool at the same address
			p.then = hist[0].stats
			s.window = max(s.window, now.Sub(hist[0].at))
		}
		v.past[p.addr] = append(hist, timedStats{now, p.now})
	}
	for addr := range v.past {
		if !seen[addr] {
			delete(v.past, addr)
		}
	}
	return renderView(s, width)
}
