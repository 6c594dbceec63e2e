package mongopool

import (
	"context"
	"net"

	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/pool"
)

// NewWithDialer is New with the client's sockets made by dial: an in-memory
// network's, for the tests that run on synctest's fake clock.
func NewWithDialer(uri string, dial func(ctx context.Context, network, address string) (net.Conn, error), opts ...pool.Option) (*Pool, error) {
	return build(context.Background(), uri, opts, []ClientOption{WithDialer(dial)})
}

// PoolParts returns what a client of uri (one host) gives the pool of its
// server: the address, the Connector and the pool options of the connection
// string. The tests of what a pool does with real connections (the
// backpressure labels of establishment errors, the CMAP prose tests) make a
// bare pool.Pool of them, without the topology in front, whose monitor would
// meet the failure first.
func PoolParts(uri string) (address string, c *Connector, opts []pool.Option, err error) {
	cs, err := connstring.Parse(uri)
	if err != nil {
		return "", nil, nil, err
	}
	settings, err := newConnSettings(cs, nil, nil)
	if err != nil {
		return "", nil, nil, err
	}
	address = cs.Hosts[0]
	return address, NewConnector(settings.forAddress(address)), poolOptions(cs), nil
}
