package pool_test

import (
	"errors"
	"slices"
	"testing"
	"unsafe"

	"github.com/mongopool/mongopool/pool"
)

// A check-out that finds the idle connection's link broken closes it, does
// not count it as checked out, and goes on with a new connection. The
// maintenance is off: its run (the one Ready asks for, late on a busy
// machine) would close the broken connection before the check-out meets it.
func TestCheckOutDiscardsIdleBrokenLink(t *testing.T) {
	p, log := newPool(t, &fakeConnector{}, pool.WithMaintenanceInterval(-1))
	mustReady(t, p)
	c := mustCheckOut(t, p)
	mustCheckIn(t, p, c)
	broken := errors.New("connection reset by peer")
	c.Link().(*fakeLink).fail(broken)
	before := len(log.all())

	c2 := mustCheckOut(t, p)
	if c2.ID() == c.ID() {
		t.Fatalf("checked out connection %d again, whose link is broken", c.ID())
	}
	var got []string
	for _, e := range log.all()[before:] {
		got = append(got, e.Type.String())
		if e.Type == pool.ConnectionClosed && (e.ConnectionID != c.ID() || e.Reason != pool.ReasonError || e.Err != broken) {
			t.Errorf("closed event %+v, want connection %d closed with reason error and the link's error", e, c.ID())
		}
	}
	want := []string{"ConnectionCheckOutStarted", "ConnectionClosed", "ConnectionCreated", "ConnectionReady", "ConnectionCheckedOut"}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	s := p.Stats()
	checkCounts(t, s)
	if s.CheckedOut != 2 || s.ClosedError != 1 || s.InUse != 1 {
		t.Errorf("stats: %d checked out, %d closed for an error, %d in use; want 2, 1, 1", s.CheckedOut, s.ClosedError, s.InUse)
	}
	mustCheckIn(t, p, c2)
}

// An Event is copied to every handler: at 96 bytes (on 64-bit platforms) the
// compiler copies it with aligned moves, where a size that is not a multiple
// of 16 bytes makes it overlap them and stall, which costs the events'
// path a fifth of its time. A field added to Event must keep it so.
func TestEventSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the size is measured on 64-bit platforms")
	}
	if got := unsafe.Sizeof(pool.Event{}); got%16 != 0 {
		t.Errorf("an Event is %d bytes: keep it a multiple of 16 (reorder its fields)", got)
	}
}
