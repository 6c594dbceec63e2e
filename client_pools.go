package mongopool

import (
	"errors"
	"slices"

	"github.com/mongopool/mongopool/pool"
)

// Pools returns the client's pools now: one per data-bearing server found so
// far, in the order they were made, closed ones left out. Servers come and
// go with the deployment, and so do their pools: call Pools again rather
// than keep its result (a metrics collector or a dashboard asks at each
// scrape).
func (c *Client) Pools() []*pool.Pool {
	c.poolsMu.Lock()
	defer c.poolsMu.Unlock()
	c.pools = slices.DeleteFunc(c.pools, poolClosed)
	return slices.Clone(c.pools)
}

// Reconfigure changes the limits of every pool of the client, and of the
// pools it makes later for new servers: the options pool.Pool.Reconfigure
// takes (maxPoolSize, minPoolSize, maxConnecting, maxIdleTimeMS,
// waitQueueTimeoutMS), with the same effects. The client's pools share their
// options, so the first pool's answer is every pool's: when it refuses the
// change (another option, a minPoolSize above the maxPoolSize), no pool
// changes. Before any server was found, only the options themselves are
// checked.
func (c *Client) Reconfigure(opts ...pool.Option) error {
	if c.closed.Load() {
		return errors.New("mongopool: Reconfigure of a closed client")
	}
	c.poolsMu.Lock()
	defer c.poolsMu.Unlock()
	c.pools = slices.DeleteFunc(c.pools, poolClosed)
	if len(c.pools) == 0 {
		// A pool of no use but to check the options: unlimited, so that
		// only the options given can disagree with one another.
		probe, err := pool.New("reconfigure.invalid:1", pool.ConnectorFunc(nil), pool.WithMaxPoolSize(0), pool.WithMaintenanceInterval(-1))
		if err != nil {
			return err
		}
		err = probe.Reconfigure(opts...)
		probe.Close()
		if err != nil {
			return err
		}
	}
	for _, p := range c.pools {
		if err := p.Reconfigure(opts...); err != nil && !errors.Is(err, pool.ErrPoolClosed) {
			return err
		}
	}
	c.reconf = append(c.reconf, opts...)
	return nil
}

func poolClosed(p *pool.Pool) bool { return p.Stats().State == "closed" }
