package topology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mongopool/mongopool/connstring"
)

// Defaults of the SRVPolling fields left at zero.
const (
	// DefaultRescanSRVInterval is rescanSRVIntervalMS: 60 s, the least the
	// specification allows, and what it requires when the records' TTLs
	// are not known, as they are not through a connstring.Resolver (nor
	// net.Resolver).
	DefaultRescanSRVInterval = 60 * time.Second
	// DefaultSRVLookupTimeout bounds the look-up of each rescan.
	DefaultSRVLookupTimeout = 10 * time.Second
)

// maxLoggedSRVRecords is the most records left out by a rescan that its log
// message names.
const maxLoggedSRVRecords = 10

// SRVPolling is how StartSRVPolling rescans the SRV records of a
// mongodb+srv connection string.
type SRVPolling struct {
	// Resolver looks the records up: the one the connection string was
	// resolved with.
	Resolver connstring.Resolver
	// Host is the connection string's host name (connstring's SRVHost):
	// its records are looked up, and their targets must be in its domain.
	Host string
	// ServiceName is srvServiceName; "mongodb" when empty.
	ServiceName string
	// SRVMaxHosts is srvMaxHosts: the most servers the rescans fill the
	// topology up to; 0 for no limit.
	SRVMaxHosts int
	// HeartbeatFrequency is heartbeatFrequencyMS, the interval of the
	// rescans while they find no host; DefaultHeartbeatFrequency when zero.
	HeartbeatFrequency time.Duration
	// Interval is rescanSRVIntervalMS; DefaultRescanSRVInterval when zero.
	// The specification does not let clients shorten it; tests do.
	Interval time.Duration
	// Timeout bounds each look-up; DefaultSRVLookupTimeout when zero.
	Timeout time.Duration
}

// StartSRVPolling starts rescanning the SRV records of a mongodb+srv
// connection string's host, on a goroutine of its own, as the "Polling SRV
// Records for mongos Discovery" specification asks of a client made from
// one: what a rescan finds is applied as Description.applySRV says, as the
// monitors' checks are applied (under the topology's lock, the events,
// monitors started and servers removed carried out in order after it).
//
// The first rescan comes p.Interval after the call (which is to be made at
// the end of the initial discovery: right after New), and each next one
// p.Interval after the end of the one before; or p.HeartbeatFrequency after
// the end of one that found no host (its look-up failed, or found no
// record, or none that passed verification), which leaves the topology as
// it is. The Config's Logger receives, at level Warn, why a rescan found no
// host, and the records a rescan left out (a target outside the host's
// domain, or no port).
//
// Only an Unknown or a Sharded topology is rescanned: StartSRVPolling does
// nothing for another one (load-balanced, with directConnection, or a
// replica set named by the settings), and the rescans stop for good once
// the topology is found to be of another type, such as a replica set.
// Closing the topology stops them, and ends the look-up under way. Call it
// once per topology; it fails with ErrClosed once the topology is closed.
func (t *Topology) StartSRVPolling(p SRVPolling) error {
	switch {
	case p.Resolver == nil:
		return errors.New("topology: SRVPolling.Resolver is nil")
	case p.Host == "":
		return errors.New("topology: SRVPolling.Host is empty: the rescans look up the records of the connection string's host")
	case p.SRVMaxHosts < 0:
		return fmt.Errorf("topology: SRVPolling.SRVMaxHosts is %d: srvMaxHosts is 0 (no limit) or more", p.SRVMaxHosts)
	case p.Interval < 0:
		return fmt.Errorf("topology: SRVPolling.Interval is %v: it cannot be negative", p.Interval)
	case p.HeartbeatFrequency < 0:
		return fmt.Errorf("topology: SRVPolling.HeartbeatFrequency is %v: it cannot be negative", p.HeartbeatFrequency)
	case p.Timeout < 0:
		return fmt.Errorf("topology: SRVPolling.Timeout is %v: it cannot be negative", p.Timeout)
	}
	if p.ServiceName == "" {
		p.ServiceName = "mongodb"
	}
	if p.HeartbeatFrequency == 0 {
		p.HeartbeatFrequency = DefaultHeartbeatFrequency
	}
	if p.Interval == 0 {
		p.Interval = DefaultRescanSRVInterval
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultSRVLookupTimeout
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if srvPollable(t.desc.Type) {
		t.wg.Add(1) // under the lock, before Close can wait
		go t.pollSRV(p)
	}
	return nil
}

// srvPollable reports whether a topology of type tt is rescanned.
func srvPollable(tt TopologyType) bool { return tt == TopologyUnknown || tt == Sharded }

// pollSRV rescans the SRV records until the topology is closed, or of a
// type that is not rescanned.
func (t *Topology) pollSRV(p SRVPolling) {
	defer t.wg.Done()
	timer := time.NewTimer(p.Interval)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-t.ctx.Done():
			return
		}
		if !srvPollable(t.Description().Type) {
			return
		}
		hosts, err := t.rescanSRV(p)
		if t.ctx.Err() != nil {
			return
		}
		next := p.Interval
		if err != nil {
			t.logSRV(p, "SRV rescan found no host; the topology is left as it is, and the records looked up again after heartbeatFrequencyMS",
				slog.String("failure", err.Error()))
			next = p.HeartbeatFrequency
		} else if !t.applySRV(hosts, p.SRVMaxHosts) {
			return
		}
		timer.Reset(next)
	}
}

// rescanSRV looks the SRV records up, and returns the addresses of those
// that pass verification; an error when there is none.
func (t *Topology) rescanSRV(p SRVPolling) ([]string, error) {
	ctx, cancel := context.WithTimeout(t.ctx, p.Timeout)
	defer cancel()
	name := "_" + p.ServiceName + "._tcp." + p.Host
	_, records, err := p.Resolver.LookupSRV(ctx, p.ServiceName, "tcp", p.Host)
	if err != nil {
		return nil, fmt.Errorf("SRV look-up of %s failed: %w", name, err)
	}
	valid, rejected := srvAddresses(p.Host, records)
	if len(rejected) > 0 {
		// One message per rescan, naming a bounded number of records:
		// a hostile answer cannot flood the log.
		shown := rejected[:min(len(rejected), maxLoggedSRVRecords)]
		t.logSRV(p, "SRV rescan left out records that are not in the domain of the connection string's host, or have no port",
			slog.String("records", strings.Join(shown, ", ")), slog.Int("count", len(rejected)))
	}
	switch {
	case len(records) == 0:
		return nil, fmt.Errorf("SRV look-up of %s returned no record", name)
	case len(valid) == 0:
		return nil, fmt.Errorf("SRV look-up of %s returned no record in the domain of %s", name, p.Host)
	}
	return valid, nil
}

// applySRV applies the hosts a rescan found. It reports false when the
// rescans are to stop: the topology is closed, or of a type that is not
// rescanned.
func (t *Topology) applySRV(hosts []string, srvMaxHosts int) bool {
	var fx effects
	t.mu.Lock()
	if t.closed || !srvPollable(t.desc.Type) {
		t.unlock(&fx)
		return false
	}
	u := t.desc.applySRV(hosts, srvMaxHosts, nil)
	if u.Applied {
		t.applyUpdateLocked(u, &fx)
	}
	t.unlock(&fx)
	return true
}

// logSRV logs a rescan's trouble at level Warn, if the topology has a
// logger.
func (t *Topology) logSRV(p SRVPolling, msg string, attrs ...slog.Attr) {
	l := t.cfg.Logger
	if l == nil {
		return
	}
	r := slog.NewRecord(time.Now(), slog.LevelWarn, msg, 0)
	r.AddAttrs(slog.String("component", componentTopology), slog.String("topologyId", t.id.Hex()),
		slog.String("srvHost", p.Host))
	r.AddAttrs(attrs...)
	t.queueRecord(context.Background(), r)
}
