package proxy

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestQueueContext: an attempt's context ends at its deadline once
// something waits on it, and at its parent's end; reused for the next
// attempt, it starts afresh, and no timer of an earlier attempt ends it.
func TestQueueContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		var q queueContext

		// An attempt that nothing waits on: no deadline is seen.
		q.reset(parent, time.Now().Add(time.Second))
		if d, ok := q.Deadline(); !ok || !d.Equal(time.Now().Add(time.Second)) {
			t.Errorf("Deadline() = %v, %v", d, ok)
		}
		time.Sleep(2 * time.Second)
		if err := q.Err(); err != nil {
			t.Errorf("Err() = %v before anything waited", err)
		}
		q.release()

		// An attempt that waits: its channel closes at the deadline.
		q.reset(parent, time.Now().Add(time.Second))
		done := q.Done()
		if q.Done() != done {
			t.Error("Done returns another channel the second time")
		}
		time.Sleep(999 * time.Millisecond)
		if isClosed(done) || q.Err() != nil {
			t.Fatal("the context ended before its deadline")
		}
		<-done
		if err := q.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err() = %v at the deadline, want DeadlineExceeded", err)
		}
		q.release()

		// An attempt released before its deadline, then another that
		// waits longer: the first one's timer does not end the second.
		q.reset(parent, time.Now().Add(time.Second))
		q.Done()
		q.release()
		q.reset(parent, time.Now().Add(3*time.Second))
		if q.Err() != nil {
			t.Errorf("Err() = %v after reset", q.Err())
		}
		done = q.Done()
		q.expire() // as a timer of the first that fired as it was released
		time.Sleep(2 * time.Second)
		if isClosed(done) {
			t.Fatal("a released attempt's timer ended the next attempt")
		}
		<-done
		q.release()

		// A deadline already gone when waited on: ended at once.
		q.reset(parent, time.Now().Add(-time.Second))
		if !isClosed(q.Done()) || !errors.Is(q.Err(), context.DeadlineExceeded) {
			t.Error("a context past its deadline did not end at the first Done")
		}
		q.release()

		// The parent's end, as Close brings it: the attempt waiting ends,
		// and so does any to come, at once.
		q.reset(parent, time.Now().Add(time.Hour))
		done = q.Done()
		cancel()
		q.parentEnded()
		if !isClosed(done) || !errors.Is(q.Err(), context.Canceled) {
			t.Errorf("after the parent's end: closed %v, Err() = %v", isClosed(done), q.Err())
		}
		q.release()
		q.reset(parent, time.Now().Add(time.Hour))
		if !isClosed(q.Done()) {
			t.Error("an attempt after the parent's end waits")
		}
		q.release()
	})
}
