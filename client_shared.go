package mongopool

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/topology"
)

// joinTopology makes c's pools a PoolSet of the topology of cfg.shared (see
// WithSharedTopology), once c's connection string is found to name the same
// deployment, with the same topology options, as that client's.
func (c *Client) joinTopology(cfg clientConfig, settings topology.Settings, newPool topology.NewPoolFunc) error {
	base := cfg.shared
	switch {
	case base.closed.Load():
		return errors.New("mongopool: WithSharedTopology: the client whose topology to share is closed")
	case cfg.single:
		return errors.New("mongopool: WithSharedTopology: a Pool has a topology of its own")
	case cfg.events != nil:
		return errors.New("mongopool: WithSharedTopology and WithTopologyEventHandler: the topology's events go to the handler of the client that made it")
	}
	if err := sameDeployment(base.cs, c.cs, base.settings, settings); err != nil {
		return fmt.Errorf("mongopool: WithSharedTopology: %s and %s: %w", base.cs.Redacted(), c.cs.Redacted(), err)
	}
	set, err := base.topo.AddPoolSet(newPool)
	if err != nil {
		return fmt.Errorf("mongopool: WithSharedTopology: %w", err)
	}
	c.topo, c.set, c.settings = base.topo, set, base.settings
	return nil
}

// sameDeployment returns why two connection strings' topologies differ, if
// they do: the deployment they name, or an option that the topology, not the
// client, applies. An option the second leaves out is the first's.
func sameDeployment(a, b *connstring.ConnString, sa, sb topology.Settings) error {
	seeds := func(cs *connstring.ConnString, s topology.Settings) string {
		if cs.Scheme == connstring.SchemeMongoDBSRV {
			return "mongodb+srv://" + cs.SRVHost
		}
		h := slices.Clone(s.Seeds)
		slices.Sort(h)
		return strings.Join(h, ",")
	}
	if x, y := seeds(a, sa), seeds(b, sb); x != y {
		return fmt.Errorf("the hosts differ (%s, %s)", x, y)
	}
	switch {
	case sa.ReplicaSet != sb.ReplicaSet:
		return fmt.Errorf("replicaSet differs (%q, %q)", sa.ReplicaSet, sb.ReplicaSet)
	case sa.DirectConnection != sb.DirectConnection:
		return fmt.Errorf("directConnection differs (%v, %v)", sa.DirectConnection, sb.DirectConnection)
	case sa.LoadBalanced != sb.LoadBalanced:
		return fmt.Errorf("loadBalanced differs (%v, %v)", sa.LoadBalanced, sb.LoadBalanced)
	case b.ServerMonitoringMode != "" && b.ServerMonitoringMode != a.ServerMonitoringMode:
		return fmt.Errorf("serverMonitoringMode differs (%q, %q)", a.ServerMonitoringMode, b.ServerMonitoringMode)
	}
	for _, d := range []struct {
		name string
		a, b *time.Duration
		def  time.Duration
	}{
		{"heartbeatFrequencyMS", a.HeartbeatFrequency, b.HeartbeatFrequency, topology.DefaultHeartbeatFrequency},
		{"serverSelectionTimeoutMS", a.ServerSelectionTimeout, b.ServerSelectionTimeout, topology.DefaultServerSelectionTimeout},
	} {
		if d.b != nil && *d.b != durationOr(d.a, d.def) {
			return fmt.Errorf("%s differs (%v, %v)", d.name, durationOr(d.a, d.def), *d.b)
		}
	}
	return nil
}

// setPoolMissing is the error of a check-out from a server of which the
// client's PoolSet has no pool: the set or the topology is closed, or the
// pool could not be made.
func (c *Client) setPoolMissing(s *topology.Server) error {
	err := c.set.Err()
	if err == nil {
		err = errors.New("the server left the topology")
	}
	return fmt.Errorf("mongopool: no pool of %s: %w", s.Address(), err)
}
