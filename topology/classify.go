package topology

import (
	"context"
	"errors"
	"net"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// ServiceError is implemented by an establishment error of a connection to
// a load-balanced deployment that failed after its hello, which told the
// connection's service: the rules clear that service's connections.
type ServiceError interface {
	error
	ServiceID() pool.ServiceID
}

// EstablishError returns the appError of err, an error that establishing a
// connection to the server at address met, as the pool reports it (a
// *pool.ConnectionError): before the hello's reply or during
// authentication, a network error, a timeout or a command error, with the
// connection's generation and its SystemOverloadedError label.
func establishError(address string, err error) appError {
	e := appError{Address: address, Phase: beforeHandshake, Err: err}
	var ce *pool.ConnectionError
	if errors.As(err, &ce) {
		e.Generation = ce.Generation
		if ce.DuringAuth {
			e.Phase = duringAuth
		}
	}
	var se ServiceError
	if errors.As(err, &se) {
		id := bson.ObjectID(se.ServiceID())
		e.ServiceID = &id
	}
	e.SystemOverloaded = pool.HasErrorLabel(err, pool.LabelSystemOverloaded)
	classify(&e, err)
	return e
}

// OperationError returns the appError of err, an error that an operation met
// on an established connection of generation gen (of the service svc in a
// load-balanced deployment, nil otherwise), which broke the connection when
// broken is true. It returns false when the rules have nothing to say of it:
// the caller's context ended, or the error is neither the server's reply nor
// one that broke the connection (a command the client could not encode).
func operationError(address string, gen uint64, svc *bson.ObjectID, broken bool, err error) (appError, bool) {
	if err == nil || errors.Is(err, context.Canceled) {
		return appError{}, false
	}
	var cmd *wire.CommandError
	if !broken && !errors.As(err, &cmd) {
		return appError{}, false
	}
	e := appError{Address: address, Phase: afterHandshake, Generation: gen, ServiceID: svc, Err: err}
	classify(&e, err)
	return e, true
}

// classify sets the kind of e from err, with a command error's code, message
// and topologyVersion.
func classify(e *appError, err error) {
	var cmd *wire.CommandError
	if errors.As(err, &cmd) {
		e.Kind = kindCommand
		e.Code, e.Message = cmd.Code, cmd.Message
		if r, ok := replyError(e.Address, cmd.Raw); ok {
			e.TopologyVersion = r.TopologyVersion
			e.SystemOverloaded = e.SystemOverloaded || r.SystemOverloaded
		}
		return
	}
	// Anything else broke the connection: a network error (io.EOF and
	// resets included), or a reply that broke the protocol; a timeout is
	// told apart.
	e.Kind = kindNetwork
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		e.Kind = kindTimeout
	}
}
