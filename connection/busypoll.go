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

// Socket returns nc's socket as p polls it, made once per connection so
// that its waits allocate nothing: nil, whose Wait returns at once, for a
// connection without a socket, a pipe say. A TLS connection's socket is
// polled: its bytes are records, and polling sees them come. Bytes its TLS
// layer read already are not seen, which costs at most a wait of the
// budget, and is rare: a driver sends a message a record, and a wait is
// for the first byte of a message.
func (p *BusyPoller) Socket(nc net.Conn) *PolledSocket {
	if p == nil {
		return nil
	}
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &PolledSocket{p: p, rc: rc}
	s.pollFn = s.poll
	return s
}

// PolledSocket is a connection's socket as a BusyPoller polls it (see
// BusyPoller.Socket). Its waits are its connection's reader's: one at a
// time.
type PolledSocket struct {
	p      *BusyPoller
	rc     syscall.RawConn
	pollFn func(fd uintptr) bool // s.poll, bound once
	// The wait under way: how many other replies may be awaited, and
	// when it gives up.
	others int32
	end    time.Time
}

// Wait polls the socket until it is readable (bytes, the end of the
// stream, or an error to read), for up to the budget, when no reply is
// awaited on the connections that share the BusyPoller, none was awaited
// beside another in the last 10ms, and no other goroutine polls; it
// returns at once otherwise, and as soon as a reply is awaited: that
// reply's goroutine, or the server's, may need the CPU. It never reads:
// the caller reads next, as it would have without Wait.
func (s *PolledSocket) Wait() { s.wait(0) }

// waitReply is Wait for a connection of the BusyPoller's own, between
// enter and exit: its own reply does not count.
func (s *PolledSocket) waitReply() { s.wait(1) }

// mayPoll reports whether a wait would poll now, were others replies
// awaited: false is sure while the machine is busy, and a true may turn
// false by the wait.
func (p *BusyPoller) mayPoll(others int32) bool {
	if p == nil {
		return false
	}
	return p.budget.Load() > 0 && p.active.Load() <= others && !p.spinning.Load() &&
		time.Now().UnixNano()-p.crowded.Load() >= int64(quietTime)
}

// WouldPoll reports whether a wait for a socket would poll now (see
// PolledSocket.Wait): false is sure while the machine is busy, and a true
// may turn false by the wait. A caller that would rather not delay a write
// while waits poll, as the write's delay would count against the poll's
// budget, asks it first.
func (p *BusyPoller) WouldPoll() bool { return p.mayPoll(0) }

// mayPoll is the BusyPoller's mayPoll; false without one.
func (s *PolledSocket) mayPoll(others int32) bool {
	if s == nil {
		return false
	}
	return s.p.mayPoll(others)
}

// WouldPoll reports whether Wait would poll now: a caller with a write to
// make before the wait need make it only then. False is sure while the
// machine is busy; a true may turn false by the wait.
func (s *PolledSocket) WouldPoll() bool { return s.mayPoll(0) }

// wait is Wait while others awaited replies, the caller's own excluded.
func (s *PolledSocket) wait(others int32) {
	if s == nil {
		return
	}
	p := s.p
	budget := time.Duration(p.budget.Load())
	if budget <= 0 || p.active.Load() > others {
		return
	}
	now := time.Now()
	if now.UnixNano()-p.crowded.Load() < int64(quietTime) {
		return
	}
	if !p.spinning.CompareAndSwap(false, true) {
		return
	}
	defer p.spinning.Store(false)
	p.polls.Add(1)
	s.others, s.end = others, now.Add(budget)
	// poll runs with the descriptor held: it cannot be closed and reused
	// under the poll.
	s.rc.Read(s.pollFn)
}

// poll is the wait's function for the socket's read: it polls until the
// socket is readable, the budget is spent or other replies are awaited.
// It always reports done, so that the caller's own read, not RawConn's,
// waits for the socket once polling gives up.
func (s *PolledSocket) poll(fd uintptr) bool {
	p := s.p
	for i := 1; ; i++ {
		if readable(fd) {
			p.hits.Add(1)
			return true
		}
		// Every few polls: the clock, and whether other replies are
		// awaited.
		if i%8 == 0 && (p.active.Load() > s.others || time.Now().After(s.end)) {
			return true
		}
	}
}
