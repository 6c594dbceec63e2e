package proxy_test

import (
	"math"
	"testing"
	"time"
)

// raceBuild is set when the tests run with the race detector.
var raceBuild bool

// TestRelayAllocations: a find relayed through the proxy costs the process
// at most 2 allocations more than the same find sent to the server
// directly: the reply, which must outlive the upstream connection's
// check-in, and what the server's side of another client costs. The hop
// cost 13 when each attempt made its own deadline context and watched the
// client connection's context, and each message was decoded into a new
// Msg.
func TestRelayAllocations(t *testing.T) {
	directAddr, addr, find := findByID(t)
	// The fewest of several measures: the process's background work (the
	// monitors', the pools' maintenance) allocates too, in proportion to
	// the time a measure takes, which a loaded machine stretches.
	allocs := func(addr string) float64 {
		c := dialRaw(t, addr)
		c.nc.SetDeadline(time.Now().Add(time.Minute))
		c.roundTrip(find) // the connections made
		fewest := math.Inf(1)
		for range 5 {
			fewest = min(fewest, testing.AllocsPerRun(200, func() { c.roundTrip(find) }))
		}
		return fewest
	}
	direct := allocs(directAddr)
	through := allocs(addr)
	most := 2.0
	if raceBuild {
		// The race detector's sync.Pool drops a share of what it is given,
		// at random, in the server as in the proxy: the counts move by one.
		most++
	}
	if hop := through - direct; hop > most {
		t.Errorf("a relayed find: %v allocations, %v direct: the hop costs %v, want %v at most", through, direct, hop, most)
	}
	t.Logf("a find: %v allocations direct, %v through the proxy", direct, through)
}
