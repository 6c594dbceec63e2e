package mongotest

import (
	"fmt"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file holds what a program that runs servers for other processes
// (cmd/mongotest) needs beyond what Go tests use: known ports, and the fail
// point set from a command document that arrives from outside.

// WithPorts makes the server, or the members of a replica set in order,
// listen on these ports of 127.0.0.1 rather than on free ones, for
// programs that must be told where to connect before the server starts. A
// port 0, or a member beyond the ports given, takes a free port. A port
// that is taken makes Start or StartReplicaSet fail. On a Network (see
// WithNetwork) the ports are those of the Network, unless
// WithAdvertisedHosts gives the addresses.
func WithPorts(ports ...int) Option {
	return func(c *config) error {
		for _, p := range ports {
			if p < 0 || p > 65535 {
				return fmt.Errorf("mongotest: WithPorts: %d is not a port (0 to 65535)", p)
			}
		}
		c.ports = append([]int(nil), ports...)
		return nil
	}
}

// listenAddr is the address that server i (member i of a replica set, 0 for
// a standalone) listens on: 127.0.0.1, on its port of WithPorts or a free
// one.
func (c *config) listenAddr(i int) string {
	port := 0
	if i < len(c.ports) {
		port = c.ports[i]
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// ConfigureFailPoint sets the failCommand fail point from cmd, a document
// such as {configureFailPoint: "failCommand", mode: {times: 1}, data:
// {failCommands: ["insert"], errorCode: 91}}, exactly as the
// configureFailPoint command on admin does, mode "off" included. It returns
// the count the command replies (the times the fail point fired before),
// or the error the command would fail with.
func (s *Server) ConfigureFailPoint(cmd bson.Raw) (count int64, err error) {
	n, err := s.failPoints.configure(cmd)
	if err != nil {
		return 0, fmt.Errorf("mongotest: ConfigureFailPoint: %w", err)
	}
	return n, nil
}
