package proxy_test

import (
	"testing"
	"time"
)

// TestRelayAllocations: a find relayed through the proxy costs the process
// at most 2 allocations more than the same find sent to the server
// directly: the reply, which must outlive the upstream connection's
// check-in, and what the server's side of another client costs. The hop
// cost 13 when each attempt made its own deadline context and watched the
// client connection's context, and each message was decoded into a new
// Msg.
func TestRelayAllocations(t *testing.T) {
	directAddr, addr, find := findByID(t)
	allocs := func(addr string) float64 {
		c := dialRaw(t, addr)
		c.nc.SetDeadline(time.Now().Add(time.Minute))
		c.roundTrip(find) // the connections made
		return testing.AllocsPerRun(1000, func() { c.roundTrip(find) })
	}
	direct := allocs(directAddr)
	through := allocs(addr)
	if hop := through - direct; hop > 2 {
		t.Errorf("a relayed find: %v allocations, %v direct: the hop costs %v, want 2 at most", through, direct, hop)
	}
	t.Logf("a find: %v allocations direct, %v through the proxy", direct, through)
}
