package pool

import (
	"net"
	"strconv"
	"strings"
)

// defaultPort is MongoDB's port, which the log messages name when the address
// gives none.
const defaultPort = 27017

// splitAddress returns the serverHost and serverPort of the log messages: a
// Unix socket path has no port (0), a host without a port has 27017.
func splitAddress(address string) (host string, port int) {
	if strings.HasSuffix(address, ".sock") || strings.HasPrefix(address, "/") {
		return address, 0
	}
	h, ps, err := net.SplitHostPort(address)
	if err != nil {
		return strings.Trim(address, "[]"), defaultPort
	}
	if n, err := strconv.Atoi(ps); err == nil && n > 0 && n < 65536 {
		return h, n
	}
	return h, defaultPort
}
