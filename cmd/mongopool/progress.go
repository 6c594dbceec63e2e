package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// console is the report's output, shared by the progress, the live view and
// the summary. It is buffered and flushed by the progress ticker.
type console struct {
	mu  sync.Mutex
	w   *bufio.Writer
	f   *os.File // the output, when it is a file (for its width)
	tty bool     // a terminal: the progress is redrawn in place
	// blockLines is the number of lines of the progress block on screen,
	// 0 if none.
	blockLines int
}

func newConsole(w io.Writer) *console {
	c := &console{w: bufio.NewWriterSize(w, 64<<10)}
	if f, ok := w.(*os.File); ok {
		c.f = f
		_, c.tty = terminalWidth(f)
	}
	return c
}

// width returns the terminal's width, 0 when not known.
func (c *console) width() int {
	if c.f == nil {
		return 0
	}
	w, _ := terminalWidth(c.f)
	return w
}

// println prints a line, first ending the progress block if one is showing.
func (c *console) println(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endStatusLocked()
	c.w.WriteString(s)
	c.w.WriteByte('\n')
}

// statusBlock shows lines as the refreshing progress block, in place of the
// previous one, and flushes. It moves the cursor with ANSI escapes: a
// terminal only. No line may be wider than the terminal.
func (c *console) statusBlock(lines []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blockLines > 1 {
		fmt.Fprintf(c.w, "\x1b[%dA", c.blockLines-1) // back to the block's first line
	}
	for i, l := range lines {
		if i > 0 {
			c.w.WriteByte('\n')
		}
		fmt.Fprintf(c.w, "\r%s\x1b[K", l) // the line, then erase what was left of the old one
	}
	c.w.WriteString("\x1b[J") // erase the old block's lines beyond the new one
	c.blockLines = len(lines)
	c.w.Flush()
}

func (c *console) endStatusLocked() {
	if c.blockLines > 0 {
		c.w.WriteByte('\n')
		c.blockLines = 0
	}
}

func (c *console) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endStatusLocked()
	c.w.Flush()
}

// poolSource returns the run's pools as they are now: the one pool, or a
// client's pool per server, sorted by address.
type poolSource func() []viewPool

// watcher shows the run's pools while the workload runs: the live view on a
// terminal, plain lines otherwise.
type watcher struct {
	out  *console
	w    *workload
	live *liveView // nil: plain lines
	// plain renders the plain lines from the time since the start and the
	// operations per second.
	plain func(elapsed time.Duration, rate float64) []string
	// onTick runs at each redraw (the event log's flush); may be nil.
	onTick func()
}

// observe watches the run's pools while the workload runs, until ctx ends:
// the progress on the console, from progress. pools gives the pools as they
// are at each look; an observer of another kind (a dashboard served over
// HTTP) would be started here, from the same pools, and stopped with ctx.
func observe(ctx context.Context, pools poolSource, progress *watcher) {
	progress.run(ctx, pools)
}

// run redraws the live view every liveInterval, or prints the plain lines
// every second, until ctx ends.
func (wt *watcher) run(ctx context.Context, pools poolSource) {
	every := time.Second
	if wt.live != nil {
		every = liveInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	start := time.Now()
	last, lastOps := start, int64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			ops := wt.w.ops.Load()
			rate := float64(ops-lastOps) / now.Sub(last).Seconds()
			last, lastOps = now, ops
			if wt.live != nil {
				wt.out.statusBlock(wt.live.frame(now, now.Sub(start), rate, pools(), wt.out.width()))
			} else {
				for _, l := range wt.plain(now.Sub(start), rate) {
					wt.out.println(l)
				}
				wt.out.flush()
			}
			if wt.onTick != nil {
				wt.onTick()
			}
		}
	}
}

// progressLine fits an 80-column terminal: the operations per second over
// the last interval, the check-outs so far, the check-outs waiting now, and
// the connections by state (idle + pending + in use = all of them), and the
// generation once a clear has made one.
func progressLine(elapsed time.Duration, opsPerSec float64, s pool.Stats) string {
	line := fmt.Sprintf("%4.1fs %6.0f ops/s  checkouts %d  waiting %d  conns idle %d pending %d in use %d",
		elapsed.Seconds(), opsPerSec, s.CheckedOut, s.Waiting, s.Available, s.Pending, s.InUse)
	if s.Generation > 0 {
		line += fmt.Sprintf("  gen %d", s.Generation)
	}
	return line
}
