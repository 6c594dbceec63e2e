package goid_test

import (
	"testing"

	"github.com/mongopool/mongopool/internal/goid"
)

// The id is stable within a goroutine and differs between goroutines.
func TestCurrent(t *testing.T) {
	a, b := goid.Current(), goid.Current()
	if a == 0 || a != b {
		t.Fatalf("two reads on one goroutine: %d, %d", a, b)
	}
	const n = 8
	ids := make(chan uint64, n)
	for range n {
		go func() { ids <- goid.Current() }()
	}
	seen := map[uint64]bool{a: true}
	for range n {
		id := <-ids
		if seen[id] {
			t.Fatalf("id %d seen twice", id)
		}
		seen[id] = true
	}
}

func BenchmarkCurrent(b *testing.B) {
	for b.Loop() {
		goid.Current()
	}
}
