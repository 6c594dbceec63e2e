package pool

import (
	"errors"
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// Every event comes out of the delivery queue as it went in, whether its
// fields fit the packed form or it travels whole.
func TestQueuedEventsUnpackAsPacked(t *testing.T) {
	const addr = "db.example:27017"
	p := &Pool{address: addr}
	err := errors.New("broken pipe")
	events := []Event{
		{Type: ConnectionCheckOutStarted},
		{Type: ConnectionCheckedOut, ConnectionID: 7, Duration: 1234 * time.Nanosecond},
		{Type: ConnectionCheckedIn, ConnectionID: maxPackedConn},
		{Type: ConnectionCheckedIn, ConnectionID: maxPackedConn + 1},
		{Type: ConnectionCheckedIn, ConnectionID: -1},
		{Type: ConnectionClosed, ConnectionID: 3, Reason: ReasonIdle},
		{Type: ConnectionClosed, ConnectionID: 3, Reason: ReasonError, Err: err},
		{Type: ConnectionClosed, ConnectionID: 3, Reason: "a reason of a later version"},
		{Type: ConnectionCheckOutFailed, Reason: ReasonTimeout, Duration: time.Second, Err: err},
		{Type: PoolCleared, Interrupt: true},
		{Type: PoolCleared, ServiceID: ServiceID{1, 2, 3}},
		{Type: PoolCreated, Options: map[string]int64{"maxPoolSize": 10}},
		{Type: ConnectionLeakSuspected, ConnectionID: 9, CallSite: CallSite{stack: &callStack{pcs: []uintptr{1, 2}}}},
	}
	for _, e := range events {
		e.Address = addr
		q := pack(&e)
		if got := p.unpack(&q); !reflect.DeepEqual(got, e) {
			t.Errorf("%+v queued came out as %+v", e, got)
		}
	}
	if n := unsafe.Sizeof(queuedEvent{}); n > 24 {
		t.Errorf("a queued event takes %d bytes, want 24 at most: each is fetched by another processor", n)
	}
}
