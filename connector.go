package mongopool

import (
	"context"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// Connector establishes real connections for a pool: it adapts
// connection.Dial to pool.Connector, reporting the end of the hello (and the
// serviceId of a load-balanced server) to the pool.
type Connector struct {
	cfg connection.Config
}

// NewConnector returns a Connector that establishes connections as cfg says.
func NewConnector(cfg connection.Config) *Connector {
	return &Connector{cfg: cfg}
}

// Connect implements pool.Connector. The pool's Link is a *connection.Conn.
func (c *Connector) Connect(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
	var svc pool.ServiceID
	conn, err := connection.Dial(ctx, &c.cfg, connection.Hooks{
		HelloDone: func(d *handshake.Description) {
			if d.HasServiceID {
				svc = d.ServiceID
			}
			a.HelloDone(svc)
		},
	})
	if err != nil {
		if !svc.IsZero() {
			// Past the hello of a load-balanced connection: the service is
			// what SDAM error handling clears.
			return nil, &serviceError{service: svc, err: err}
		}
		return nil, err
	}
	return conn, nil
}

// serviceError is an establishment error of a load-balanced connection that
// failed after its hello: it names the service whose connections the SDAM
// error rules clear. It wraps the error unchanged otherwise.
type serviceError struct {
	service pool.ServiceID
	err     error
}

func (e *serviceError) Error() string { return e.err.Error() }
func (e *serviceError) Unwrap() error { return e.err }

var _ topology.ServiceError = (*serviceError)(nil)

// ServiceID returns the service whose connections the error clears (see
// topology.ServiceError).
func (e *serviceError) ServiceID() pool.ServiceID { return e.service }
