package wire

import (
	"math"
	"sync"
	"testing"
)

func TestNextRequestIDWraps(t *testing.T) {
	lastRequestID.Store(math.MaxInt32 - 1)
	if id := NextRequestID(); id != math.MaxInt32 {
		t.Fatalf("got %d", id)
	}
	if id := NextRequestID(); id != 1 {
		t.Fatalf("after MaxInt32: got %d, want 1", id)
	}
}

func TestNextRequestIDConcurrent(t *testing.T) {
	const goroutines, each = 8, 1000
	var mu sync.Mutex
	seen := make(map[int32]bool)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			ids := make([]int32, each)
			for i := range ids {
				ids[i] = NextRequestID()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if id <= 0 || seen[id] {
					t.Errorf("id %d repeated or not positive", id)
				}
				seen[id] = true
			}
		})
	}
	wg.Wait()
}
