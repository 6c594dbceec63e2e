package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// eventLog writes events as JSON lines (-events), one object a line, for
// tools such as jq. A pool event has the fields its type carries (see
// eventRecord); a client's run adds a line at each change of the topology.
// It writes nothing secret: the pools' events carry addresses and errors,
// never a connection string.
type eventLog struct {
	start time.Time
	path  string // the file, "-" for standard output

	mu     sync.Mutex
	w      *bufio.Writer
	f      *os.File // nil for standard output
	err    error    // the first write error
	closed bool     // by close: later events are not written
	lines  int64
}

// eventRecord is one line of the event log.
type eventRecord struct {
	Time    string  `json:"time"`    // RFC 3339, with nanoseconds
	Elapsed float64 `json:"elapsed"` // seconds since the run began
	Type    string  `json:"type"`    // the event's name, as the specification has it
	// Pool is the address of the pool's server.
	Pool         string `json:"pool,omitempty"`
	ConnectionID int64  `json:"connectionId,omitempty"`
	// Duration, of ConnectionReady, ConnectionCheckedOut and
	// ConnectionCheckOutFailed: as Go prints it, and in nanoseconds.
	Duration   string `json:"duration,omitempty"`
	DurationNs int64  `json:"durationNs,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Error      string `json:"error,omitempty"`
	// InterruptInUse is the interruptInUseConnections of a
	// ConnectionPoolCleared event.
	InterruptInUse *bool            `json:"interruptInUseConnections,omitempty"`
	ServiceID      string           `json:"serviceId,omitempty"`
	Options        map[string]int64 `json:"options,omitempty"`
	// Topology is the new description of a TopologyDescriptionChanged
	// line.
	Topology string `json:"topology,omitempty"`
}

// openEventLog creates the event log at path ("-": stdout), truncating a
// file that is there.
func openEventLog(path string, stdout io.Writer, start time.Time) (*eventLog, error) {
	l := &eventLog{start: start, path: path}
	if path == "-" {
		l.w = bufio.NewWriterSize(stdout, 64<<10)
		return l, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	l.f, l.w = f, bufio.NewWriterSize(f, 64<<10)
	return l, nil
}

// poolEvent writes e.
func (l *eventLog) poolEvent(e pool.Event) {
	now := time.Now()
	r := eventRecord{Type: e.Type.String(), Pool: e.Address, ConnectionID: e.ConnectionID, Reason: e.Reason}
	if e.Duration > 0 {
		r.Duration, r.DurationNs = e.Duration.String(), int64(e.Duration)
	}
	if e.Err != nil {
		r.Error = e.Err.Error()
	}
	switch e.Type {
	case pool.PoolCleared:
		r.InterruptInUse = &e.Interrupt
	case pool.PoolCreated:
		r.Options = e.Options
	}
	if !e.ServiceID.IsZero() {
		r.ServiceID = e.ServiceID.String()
	}
	l.write(now, &r)
}

// topologyChanged writes a change of the topology to the description
// summary.
func (l *eventLog) topologyChanged(at time.Time, summary string) {
	l.write(at, &eventRecord{Type: "TopologyDescriptionChanged", Topology: summary})
}

func (l *eventLog) write(at time.Time, r *eventRecord) {
	r.Time = at.Format(time.RFC3339Nano)
	r.Elapsed = at.Sub(l.start).Seconds()
	b, err := json.Marshal(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || l.closed {
		return
	}
	if err == nil {
		b = append(b, '\n')
		_, err = l.w.Write(b)
	}
	if err != nil {
		l.err = err
		return
	}
	l.lines++
}

// flush writes out what is buffered, so that a reader of the file sees the
// events within a second or so.
func (l *eventLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && !l.closed {
		l.err = l.w.Flush()
	}
}

// close flushes the log and closes its file. It returns the first error of
// a write, naming the file. Closing it again does nothing.
func (l *eventLog) close() error {
	l.flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.err
	if l.f != nil {
		if cerr := l.f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("writing the events to %s: %w", l.name(), err)
	}
	return nil
}

func (l *eventLog) name() string {
	if l.path == "-" {
		return "standard output"
	}
	return l.path
}
