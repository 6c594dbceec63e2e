package connection

import (
	"crypto/tls"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// BusyPoller polls sockets for a moment before a read would park its
// goroutine, while its callers are quiet.
//
// When a machine's CPUs are idle, the time from a reply's arrival to the
// goroutine that waits for it running again is mostly the wake-up of a
// sleeping CPU and of the runtime's sleeping threads: tens of microseconds
// on a virtual machine. A proxy, which relays a request and waits for the
// reply, pays that twice per operation. Polling the socket for a few tens
// of microseconds instead catches a prompt reply while the thread still
// runs. That costs CPU time which is idle only while few operations are in
// flight, so a BusyPoller polls only then, one goroutine at a time, and
// stops as soon as more operations start: under load it does nothing, and
// reads park as usual.
//
// Its methods are safe for concurrent use, and do nothing on a nil
// BusyPoller.
type BusyPoller struct {
	budget   atomic.Int64 // nanoseconds per wait; <= 0: never poll
	active   atomic.Int32 // replies awaited (enter to exit)
	spinning atomic.Bool  // one goroutine polls at a time
	// crowded is when two replies were last awaited at once (Unix
	// nanoseconds): for quietTime after, nothing polls.
	crowded atomic.Int64

	polls, hits atomic.Int64
}

// quietTime is how long after two replies were awaited at once a
// BusyPoller does not poll. Operations that overlap now and then mean
// several callers, whose goroutines, and the servers', share the CPUs
// that polling would hold: it pays only for one caller at a time.
const quietTime = 10 * time.Millisecond

// NewBusyPoller returns a BusyPoller whose waits poll for up to budget (at
// most MaxBusyPoll). Share one between the clients of a process (see the
// mongopool client's WithBusyPoller) and the process's own waits for its
// sockets (a proxy's for its clients' requests): it then polls while
// nothing else is awaited on any of their connections, and no two replies
// were awaited at once in the last 10ms, one goroutine at a time. On a
// machine or in a process limited to one CPU it never polls: the polling
// goroutine would hold the only one.
func NewBusyPoller(budget time.Duration) *BusyPoller {
	p := &BusyPoller{}
	p.SetBudget(budget)
	return p
}

// MaxBusyPoll is the longest budget: a wait longer than a sleeping CPU's
// wake-up saves nothing more, and while a wait polls, its socket's close
// and deadline take effect only when it ends.
const MaxBusyPoll = time.Millisecond

// SetBudget changes the longest a wait polls, at most MaxBusyPoll; 0 or
// less turns polling off.
func (p *BusyPoller) SetBudget(budget time.Duration) {
	if p == nil {
		return
	}
	budget = min(budget, MaxBusyPoll)
	if !pollSupported || runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 {
		budget = 0
	}
	p.budget.Store(int64(budget))
}

// Budget returns the longest a wait polls; 0 when it does not poll.
func (p *BusyPoller) Budget() time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(max(p.budget.Load(), 0))
}

// enter marks a reply awaited.
func (p *BusyPoller) enter() {
	if p != nil && p.active.Add(1) > 1 {
		// Under load every reply comes here: the time is written once a
		// millisecond at most, not by every one, so that the cores do
		// not pass its cache line around.
		now := time.Now().UnixNano()
		if now-p.crowded.Load() > int64(time.Millisecond) {
			p.crowded.Store(now)
		}
	}
}

// exit marks the end of a wait that enter marked.
func (p *BusyPoller) exit() {
	if p != nil {
		p.active.Add(-1)
	}
}

// Stats returns how many waits polled, and how many of them saw their
// socket become readable within the budget.
func (p *BusyPoller) Stats() (polls, hits int64) {
	if p == nil {
		return 0, 0
	}
	return p.polls.Load(), p.hits.Load()
}

// Wait polls nc until it is readable (bytes, the end of the stream, or an
// error to read), for up to the budget, when no reply is awaited on the
// connections that share the BusyPoller, none was awaited beside another
// in the last 10ms, no other goroutine polls, and nc is a socket it can
// poll (a TLS connection's is); it returns at once otherwise, and as soon as a reply is
// awaited: that reply's goroutine, or the server's, may need the CPU. It
// never reads from nc: the caller reads next, as it would have without
// Wait.
func (p *BusyPoller) Wait(nc net.Conn) {
	p.wait(nc, 0)
}

// wait is Wait while others awaited replies, the caller's own excluded.
func (p *BusyPoller) wait(nc net.Conn, others int32) {
	if p == nil {
		return
	}
	budget := time.Duration(p.budget.Load())
	if budget <= 0 || p.active.Load() > others {
		return
	}
	now := time.Now()
	if now.UnixNano()-p.crowded.Load() < int64(quietTime) {
		return
	}
	if tc, ok := nc.(*tls.Conn); ok {
		// Its socket's bytes are records: polling sees them come. Bytes
		// the TLS layer read already are not seen, which costs at most a
		// wait of the budget, and is rare: a driver sends one message a
		// record, and Wait is for the first byte of a message.
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return // a pipe, say
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	if !p.spinning.CompareAndSwap(false, true) {
		return
	}
	defer p.spinning.Store(false)
	p.polls.Add(1)
	end := now.Add(budget)
	// The function runs with the descriptor held: it cannot be closed and
	// reused under the poll. It always reports done, so that the caller's
	// own read, not RawConn's, waits for the socket once polling gives up.
	rc.Read(func(fd uintptr) bool {
		for i := 1; ; i++ {
			if readable(fd) {
				p.hits.Add(1)
				return true
			}
			// Every few polls: the clock, and whether other replies are
			// awaited.
			if i%8 == 0 && (p.active.Load() > others || time.Now().After(end)) {
				return true
			}
		}
	})
}

// waitReply is Wait for a connection of the BusyPoller's own, between
// enter and exit: its own reply does not count.
func (p *BusyPoller) waitReply(nc net.Conn) {
	p.wait(nc, 1)
}
