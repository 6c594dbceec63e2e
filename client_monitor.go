package mongopool

import (
	"time"

	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/topology"
)

// monitorStarter returns how the client's topology starts the monitor of a
// server: on connections of their own, with the connection string's TLS,
// compressors, appName, connectTimeoutMS, heartbeatFrequencyMS and
// serverMonitoringMode, never authenticated.
func (c *Client) monitorStarter(cs *connstring.ConnString, minHeartbeat time.Duration) func(string, topology.MonitorHandler) topology.ServerMonitor {
	mode := topology.MonitoringMode(cs.ServerMonitoringMode)
	return func(address string, h topology.MonitorHandler) topology.ServerMonitor {
		cfg := c.conns.forAddress(address)
		cfg.Auth = nil
		return topology.StartMonitor(topology.MonitorConfig{
			Address:               address,
			Conn:                  cfg,
			HeartbeatFrequency:    c.heartbeat,
			MinHeartbeatFrequency: minHeartbeat,
			Mode:                  mode,
			Handler:               h,
		})
	}
}
