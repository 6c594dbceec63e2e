package pool

import (
	"slices"
	"testing"
)

// tickets pops every waiter of q and returns their tickets, oldest first.
func tickets(q *waitQueue) []uint64 {
	var out []uint64
	for w := q.popFront(); w != nil; w = q.popFront() {
		out = append(out, w.ticket)
	}
	return out
}

func TestWaitQueuePushFollowsTickets(t *testing.T) {
	push := func(q *waitQueue, ts ...uint64) {
		for _, tk := range ts {
			q.push(&waiter{ticket: tk})
		}
	}
	cases := []struct {
		name string
		fill func(q *waitQueue)
		want []uint64
	}{
		{"in order", func(q *waitQueue) { push(q, 1, 2, 3) }, []uint64{1, 2, 3}},
		{"late arrivals move ahead", func(q *waitQueue) { push(q, 1, 4, 2, 5, 3) }, []uint64{1, 2, 3, 4, 5}},
		{"unticketed ones stay where they came", func(q *waitQueue) { push(q, 5, 0, 3, 6, 4) }, []uint64{5, 0, 3, 4, 6}},
		{"into head, after a swap", func(q *waitQueue) {
			push(q, 1, 2, 4, 6)
			if w := q.popFront(); w.ticket != 1 { // head is now 2, 4, 6; tail empty
				t.Fatalf("popped %d first, want 1", w.ticket)
			}
			push(q, 5, 3)
		}, []uint64{2, 3, 4, 5, 6}},
		{"across head and tail", func(q *waitQueue) {
			push(q, 1, 3, 7)
			q.popFront() // head 3, 7
			push(q, 8, 9, 2)
		}, []uint64{2, 3, 7, 8, 9}},
	}
	for _, c := range cases {
		var q waitQueue
		c.fill(&q)
		if n := q.len(); n != len(c.want) {
			t.Errorf("%s: len %d, want %d", c.name, n, len(c.want))
		}
		if got := tickets(&q); !slices.Equal(got, c.want) {
			t.Errorf("%s: served %v, want %v", c.name, got, c.want)
		}
	}
}
