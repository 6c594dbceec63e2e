package proxy

import (
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/topology"
)

// cursorEntry is a cursor the proxy maps: its server and its id there,
// and who may use it: the clients of its upstream credential and user.
type cursorEntry struct {
	server   string
	id       int64
	longPoll bool // tailable awaitData, or a change stream
	up       *mongopool.Client
	owner    string // the user's "db.name"; "" without authentication
	ns       string // "db.collection", kept for a load balancer connection's cursors only
	hold     *held  // the connection a load-balanced upstream's cursor is on
}

// cursorShards spreads the cursor table over locks.
const cursorShards = 32

// cursorTable maps the cursor ids clients see to their servers' cursors.
// An entry unused for a timeout is forgotten (the servers' own idle cursor
// timeout), without a sweep: each shard keeps two generations of entries,
// turned over once per timeout, and a hit moves an entry to the current
// one, so every event costs O(1).
type cursorTable struct {
	timeout time.Duration
	shards  [cursorShards]cursorShard
}

type cursorShard struct {
	mu     sync.Mutex // protects following fields
	cur    map[int64]cursorEntry
	old    map[int64]cursorEntry
	turned time.Time // when cur began
	last   time.Time // the shard's last use
}

func newCursorTable(timeout time.Duration) *cursorTable {
	t := &cursorTable{timeout: timeout}
	now := time.Now()
	for i := range t.shards {
		t.shards[i].cur = map[int64]cursorEntry{}
		t.shards[i].turned, t.shards[i].last = now, now
	}
	return t
}

func (t *cursorTable) shard(id int64) *cursorShard {
	return &t.shards[uint64(id)%cursorShards]
}

// turnLocked starts a new generation when the current one is a timeout
// old: the old one's entries, unused for that long, are dropped; all of
// them when the shard was not used for a timeout.
func (s *cursorShard) turnLocked(timeout time.Duration) {
	now := time.Now()
	switch {
	case now.Sub(s.last) >= timeout:
		if len(s.cur)+len(s.old) > 0 {
			s.cur, s.old = map[int64]cursorEntry{}, nil
		}
		s.turned = now
	case now.Sub(s.turned) >= timeout:
		s.old, s.cur, s.turned = s.cur, make(map[int64]cursorEntry, len(s.cur)/2), now
	}
	s.last = now
}

// add maps a new proxy id to the cursor c, and returns it.
func (t *cursorTable) add(c cursorEntry) int64 {
	for {
		pid := newCursorID()
		s := t.shard(pid)
		s.mu.Lock()
		s.turnLocked(t.timeout)
		_, inCur := s.cur[pid]
		_, inOld := s.old[pid]
		if !inCur && !inOld {
			s.cur[pid] = c
			s.mu.Unlock()
			return pid
		}
		s.mu.Unlock()
	}
}

// get returns the cursor of proxy id pid.
func (t *cursorTable) get(pid int64) (cursorEntry, bool) {
	s := t.shard(pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turnLocked(t.timeout)
	if c, ok := s.cur[pid]; ok {
		return c, true
	}
	if c, ok := s.old[pid]; ok {
		delete(s.old, pid)
		s.cur[pid] = c
		return c, true
	}
	return cursorEntry{}, false
}

// remove forgets pid, and returns its cursor.
func (t *cursorTable) remove(pid int64) (cursorEntry, bool) {
	s := t.shard(pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cur[pid]
	if !ok {
		c, ok = s.old[pid]
	}
	delete(s.cur, pid)
	delete(s.old, pid)
	return c, ok
}

// len returns the number of cursors mapped (those about to be forgotten
// included).
func (t *cursorTable) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.cur) + len(s.old)
		s.mu.Unlock()
	}
	return n
}

// pinLifetime is how long an unused pin is kept: past the servers' default
// transaction lifetime (60 s), the transaction is aborted anyway.
const pinLifetime = 2 * time.Minute

// pin is a transaction pinned to a mongos.
type pin struct {
	txnNumber int64
	server    string
}

// pinTable maps sessions (their lsid documents) to the mongos their
// transaction is pinned to, with two generations as cursorTable.
type pinTable struct {
	mu     sync.Mutex // protects following fields
	cur    map[string]pin
	old    map[string]pin
	turned time.Time // when cur began
	last   time.Time // the table's last use
}

func newPinTable() *pinTable {
	now := time.Now()
	return &pinTable{cur: map[string]pin{}, turned: now, last: now}
}

// turnLocked is cursorShard.turnLocked's for pins.
func (t *pinTable) turnLocked() {
	now := time.Now()
	switch {
	case now.Sub(t.last) >= pinLifetime:
		if len(t.cur)+len(t.old) > 0 {
			t.cur, t.old = map[string]pin{}, nil
		}
		t.turned = now
	case now.Sub(t.turned) >= pinLifetime:
		t.old, t.cur, t.turned = t.cur, map[string]pin{}, now
	}
	t.last = now
}

func (t *pinTable) put(lsid []byte, txnNumber int64, server string) {
	t.mu.Lock()
	t.turnLocked()
	delete(t.old, string(lsid))
	t.cur[string(lsid)] = pin{txnNumber: txnNumber, server: server}
	t.mu.Unlock()
}

// get returns the server of the session's transaction txnNumber.
func (t *pinTable) get(lsid []byte, txnNumber int64) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.turnLocked()
	p, ok := t.cur[string(lsid)]
	if !ok {
		if p, ok = t.old[string(lsid)]; ok {
			delete(t.old, string(lsid))
			t.cur[string(lsid)] = p
		}
	}
	if !ok || p.txnNumber != txnNumber {
		return "", false
	}
	return p.server, true
}

func (t *pinTable) remove(lsid []byte) {
	t.mu.Lock()
	delete(t.cur, string(lsid))
	delete(t.old, string(lsid))
	t.mu.Unlock()
}

func (t *pinTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cur) + len(t.old)
}

// parseReadPref reads a $readPreference document: mode, tags,
// maxStalenessSeconds (-1 for none), hedge ignored.
func parseReadPref(doc []byte) (topology.ReadPref, error) {
	var rp topology.ReadPref
	elems, err := bson.Raw(doc).Elements()
	if err != nil {
		return rp, err
	}
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "mode":
			s, ok := v.StringValueOK()
			if !ok {
				return rp, fmt.Errorf("mode must be a string")
			}
			if rp.Mode, err = topology.ParseReadPrefMode(s); err != nil {
				return rp, err
			}
		case "tags":
			arr, ok := v.ArrayOK()
			if !ok {
				return rp, fmt.Errorf("tags must be an array of documents")
			}
			vals, _ := arr.Values()
			for _, tv := range vals {
				d, ok := tv.DocumentOK()
				if !ok {
					return rp, fmt.Errorf("tags must be an array of documents")
				}
				tes, _ := d.Elements()
				ts := topology.TagSet{}
				for _, te := range tes {
					s, ok := te.Value().StringValueOK()
					if !ok {
						return rp, fmt.Errorf("tag %q must be a string", te.Key())
					}
					ts = append(ts, topology.Tag{Name: te.Key(), Value: s})
				}
				rp.TagSets = append(rp.TagSets, ts)
			}
		case "maxStalenessSeconds":
			n, ok := v.AsInt64OK()
			if !ok {
				return rp, fmt.Errorf("maxStalenessSeconds must be a number")
			}
			if n >= 0 {
				rp.MaxStaleness, rp.HasMaxStaleness = time.Duration(n)*time.Second, true
			}
		}
	}
	return rp, rp.Validate()
}
