package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// console is standard output shared by the progress line, the event printer
// and the summary. It is buffered (printing every event unbuffered would slow
// the pool down more than it shows) and flushed by the progress ticker.
type console struct {
	mu      sync.Mutex
	w       *bufio.Writer
	tty     bool // a terminal: the progress line refreshes in place
	lineLen int  // length of the progress line on screen, 0 if none
	// blockLines is the number of lines of the progress block on screen (a
	// client's: a line per server), 0 if none.
	blockLines int
}

func newConsole(w io.Writer) *console {
	tty := false
	if f, ok := w.(*os.File); ok {
		fi, err := f.Stat()
		tty = err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	return &console{w: bufio.NewWriterSize(w, 64<<10), tty: tty}
}

// println prints a line, first ending the progress line if one is showing.
func (c *console) println(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endStatusLocked()
	c.w.WriteString(s)
	c.w.WriteByte('\n')
}

// status shows s as the refreshing progress line and flushes.
func (c *console) status(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pad := max(c.lineLen-len(s), 0)
	fmt.Fprintf(c.w, "\r%s%s", s, strings.Repeat(" ", pad))
	c.lineLen = len(s)
	c.w.Flush()
}

// statusBlock shows lines as the refreshing progress block, in place of the
// previous one, and flushes. It moves the cursor with ANSI escapes: a
// terminal only.
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
	if c.lineLen > 0 || c.blockLines > 0 {
		c.w.WriteByte('\n')
		c.lineLen, c.blockLines = 0, 0
	}
}

func (c *console) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endStatusLocked()
	c.w.Flush()
}

// progress reports the workload while it runs: on a terminal one line
// refreshed in place several times a second, otherwise (or when every event
// is printed) a plain line per second.
func progress(ctx context.Context, out *console, p *pool.Pool, w *workload, inPlace bool) {
	progressLoop(ctx, out, w, inPlace, func(elapsed time.Duration, rate float64) []string {
		return []string{progressLine(elapsed, rate, p.Stats())}
	})
}

// progressLoop prints the lines that render returns, from the time since
// the start and the operations per second since the last time: every 250 ms
// in place on a terminal (a single line as a status line, several as a
// block), otherwise every second as plain lines.
func progressLoop(ctx context.Context, out *console, w *workload, inPlace bool, render func(elapsed time.Duration, rate float64) []string) {
	every := time.Second
	if inPlace {
		every = 250 * time.Millisecond
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
			ops := w.ops.Load()
			rate := float64(ops-lastOps) / now.Sub(last).Seconds()
			last, lastOps = now, ops
			lines := render(now.Sub(start), rate)
			switch {
			case inPlace && len(lines) == 1:
				out.status(lines[0])
			case inPlace:
				out.statusBlock(lines)
			default:
				for _, l := range lines {
					out.println(l)
				}
				out.flush()
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
