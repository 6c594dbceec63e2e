package mongopool_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// Reconfigure changes every pool of a client, those made after it too, and
// refuses a change without making any.
func TestClientReconfigure(t *testing.T) {
	rs := startReplicaSet(t, 3)
	c, err := mongopool.NewClient(rs.URI() + "&maxPoolSize=10")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Made at once: the pools come with the servers' discovery, before or
	// after it.
	if err := c.Reconfigure(pool.WithMaxPoolSize(7)); err != nil {
		t.Fatal(err)
	}
	waitTopology(t, c, "three members", hasTypes(map[topology.ServerType]int{topology.RSPrimary: 1, topology.RSSecondary: 2}))
	waitFor(t, func() string { return fmt.Sprintf("3 pools: %d", len(c.Pools())) }, func() bool { return len(c.Pools()) == 3 })
	for _, p := range c.Pools() {
		if s := p.Stats(); s.MaxPoolSize != 7 {
			t.Errorf("pool %s: maxPoolSize %d, want 7", s.Address, s.MaxPoolSize)
		}
	}
	// The pools made: each changes.
	if err := c.Reconfigure(pool.WithMaxPoolSize(9)); err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Pools() {
		if s := p.Stats(); s.MaxPoolSize != 9 {
			t.Errorf("pool %s: maxPoolSize %d after a second Reconfigure, want 9", s.Address, s.MaxPoolSize)
		}
	}
	for _, tc := range []struct {
		opt    pool.Option
		option string
	}{
		{pool.WithMinPoolSize(10), "minPoolSize"},
		{pool.WithTimeout(time.Second), "timeoutMS"},
	} {
		var oe *pool.OptionError
		if err := c.Reconfigure(pool.WithMaxConnecting(5), tc.opt); !errors.As(err, &oe) || oe.Option != tc.option {
			t.Errorf("Reconfigure: %v, want an *OptionError naming %s", err, tc.option)
		}
	}
	for _, p := range c.Pools() {
		if s := p.Stats(); s.MinPoolSize != 0 || s.MaxConnecting != 2 {
			t.Errorf("pool %s changed by a refused Reconfigure: minPoolSize %d, maxConnecting %d", s.Address, s.MinPoolSize, s.MaxConnecting)
		}
	}
	c.Close()
	if n := len(c.Pools()); n != 0 {
		t.Errorf("%d pools after Close", n)
	}
	if err := c.Reconfigure(pool.WithMaxPoolSize(3)); err == nil {
		t.Error("Reconfigure of a closed client succeeded")
	}
}
