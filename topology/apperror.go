package topology

import (
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/wire"
)

// errorKind is the kind of an error met while talking to a server.
type errorKind uint8

// The kinds of errors the rules tell apart.
const (
	// kindNetwork: the connection failed (reset, closed, refused, a reply
	// that broke the protocol), other than by a timeout.
	kindNetwork errorKind = iota
	// kindTimeout: a network timeout.
	kindTimeout
	// kindCommand: the server answered with an error (ok: 0, or a
	// writeConcernError), or refused a step of the handshake.
	kindCommand
)

// errorPhase is when, in a connection's life, an error happened.
type errorPhase uint8

// The phases of a connection that the rules tell apart.
const (
	// beforeHandshake: while establishing the connection, up to and
	// including the reply to its hello (the tests'
	// "beforeHandshakeCompletes").
	beforeHandshake errorPhase = iota
	// DuringAuth: while authenticating, after the hello.
	duringAuth
	// afterHandshake: on an established connection, in an application's
	// operation (the tests' "afterHandshakeCompletes").
	afterHandshake
)

// appError is an error that an application's operation met on a server,
// with what the rules of the specification's "Error handling" need to know
// of it.
type appError struct {
	// Address is the server's address.
	Address string
	// Kind is the kind of error; Phase when it happened.
	Kind  errorKind
	Phase errorPhase
	// Generation is the generation of the connection; for an error before
	// the connection was made, the pool's generation when making it began.
	Generation uint64
	// ServiceID is the serviceId of the connection in a load-balanced
	// topology (nil before the hello told it, and outside one).
	ServiceID *bson.ObjectID
	// Code and Message are the code and errmsg of a kindCommand error (code 0
	// when absent), or of its writeConcernError.
	Code    int32
	Message string
	// TopologyVersion is the topologyVersion of a kindCommand error's reply; nil
	// when absent.
	TopologyVersion *handshake.TopologyVersion
	// SystemOverloaded is true when the error carries the
	// SystemOverloadedError label: the server may be overloaded, not
	// unavailable (the pool adds it to network errors up to the hello).
	SystemOverloaded bool
	// Err is the error itself, kept in the Unknown server's description.
	Err error
}

// decision is what to do about an error, decided by Description.decideAppError
// and Description.decideCheckError. Its zero value is "ignore it".
type decision struct {
	// MarkUnknown is set when the server's description is to be replaced
	// by Server (of type ServerUnknown), through Description.Apply.
	MarkUnknown bool
	Server      ServerDescription
	// Clear is set when the server's pool is to be cleared (only the
	// connections of ServiceID in a load-balanced topology), together with
	// marking it Unknown; InterruptInUse when the connections in use are to
	// be interrupted too.
	Clear          bool
	InterruptInUse bool
	ServiceID      *bson.ObjectID
	// RequestCheck is set when the server's monitor is to check it as soon
	// as it may (minHeartbeatFrequencyMS after the last check).
	RequestCheck bool
	// CancelCheck is set when the monitor's check in progress, if any, is to
	// be canceled and its connection closed: its outcome would be stale.
	CancelCheck bool
	// CheckAgainNow is set, after a failed check, when the monitor is to
	// check again at once instead of waiting: a network error on a server
	// that was known may be a one-off (the "retry once" rule).
	CheckAgainNow bool
	// OwnPoolOnly is set when only the pool whose connection met the
	// error is to be cleared, the server left as it is: a PoolSet's
	// credential refused (see PoolSet).
	OwnPoolOnly bool
	// Reason says why the error was ignored; "" when it was not.
	Reason string
}

// The error codes of the specification's "not writable primary" and "node
// is recovering" errors, the shutdown ones among them.
var (
	recoveringCodes         = []int32{11600, 11602, 13436, 189, 91}
	notWritablePrimaryCodes = []int32{10107, 13435, 10058}
	shutdownCodes           = []int32{11600, 91}
)

// isRecovering reports a "node is recovering" error: by its code when it has
// one, by its message otherwise.
func isRecovering(code int32, msg string) bool {
	if code != 0 {
		return slices.Contains(recoveringCodes, code)
	}
	return strings.Contains(msg, "not master or secondary") || strings.Contains(msg, "node is recovering")
}

// isNotWritablePrimary reports a "not writable primary" error: by its code
// when it has one, by its message otherwise.
func isNotWritablePrimary(code int32, msg string) bool {
	if code != 0 {
		return slices.Contains(notWritablePrimaryCodes, code)
	}
	return !isRecovering(0, msg) && strings.Contains(msg, "not master")
}

// isStateChange reports whether a command error of this code and message
// (code 0 when it has none) says that the server's state changed under the
// client: "not writable primary" or "node is recovering". The code decides
// when there is one; the message only when there is none.
func isStateChange(code int32, msg string) bool {
	return isRecovering(code, msg) || isNotWritablePrimary(code, msg)
}

// isShutdown reports whether the code is a "node is shutting down" one.
func isShutdown(code int32) bool { return code != 0 && slices.Contains(shutdownCodes, code) }

// decideAppError decides what to do about the application error e, given the
// current generation of the server's pool (of e.ServiceID's connections in
// a load-balanced topology), by the rules of the specification's "Error
// handling" and of the load balancer specification:
//
//   - an error of a server not in the topology, or from a connection older
//     than the pool's generation, is stale: ignored;
//   - a state change error ("not writable primary", "node is recovering")
//     whose topologyVersion is not newer than the server's is stale too;
//     otherwise the server is marked Unknown (with the error's
//     topologyVersion) and checked as soon as possible, and its pool is
//     cleared if the node is shutting down;
//   - a network error or timeout up to the hello's reply changes nothing
//     (the pool backs off instead), a timeout after the handshake neither
//     (a slow operation is not a dead server), and an error that carries the
//     SystemOverloadedError label neither;
//   - any other network error or timeout, and any other error while
//     authenticating, marks the server Unknown, clears its pool and cancels
//     the monitor's check in progress;
//   - any other command error after the handshake changes nothing.
//
// In a LoadBalanced topology nothing is marked Unknown nor checked: errors
// up to the hello's reply are ignored, and where the rules clear the pool,
// only the connections of e.ServiceID are cleared (nothing without one).
func (d Description) decideAppError(poolGeneration uint64, e appError) decision {
	cur, ok := d.servers.Get(e.Address)
	switch {
	case !ok:
		return decision{Reason: "the server is not in the topology"}
	case e.Generation < poolGeneration:
		return decision{Reason: "stale: the connection is older than the pool's generation"}
	}
	lb := d.Type == LoadBalanced
	if lb && e.Phase == beforeHandshake {
		return decision{Reason: "load-balanced: errors up to the hello's reply are ignored"}
	}
	if e.Kind == kindCommand && isStateChange(e.Code, e.Message) {
		if compareTopologyVersion(cur.TopologyVersion, e.TopologyVersion) >= 0 {
			return decision{Reason: "stale: the error's topologyVersion is not newer than the server's"}
		}
		shutdown := isShutdown(e.Code)
		if lb {
			if !shutdown || e.ServiceID == nil {
				return decision{Reason: "load-balanced: the server is not marked Unknown"}
			}
			return decision{Clear: true, ServiceID: e.ServiceID}
		}
		u := unknownServer(e.Address, e.Err)
		u.TopologyVersion = e.TopologyVersion
		return decision{MarkUnknown: true, Server: u, Clear: shutdown, RequestCheck: true}
	}
	network := e.Kind == kindNetwork || e.Kind == kindTimeout
	switch {
	case !network && e.Phase == afterHandshake:
		return decision{Reason: "a command error that is not a state change"}
	case e.SystemOverloaded:
		return decision{Reason: "backpressure: the error carries the SystemOverloadedError label"}
	case network && e.Phase == beforeHandshake:
		return decision{Reason: "a network error up to the hello's reply changes nothing"}
	case e.Kind == kindTimeout && e.Phase == afterHandshake:
		return decision{Reason: "a timeout after the handshake may be a slow operation"}
	}
	if lb {
		if e.ServiceID == nil {
			return decision{Reason: "load-balanced: no serviceId to clear"}
		}
		return decision{Clear: true, ServiceID: e.ServiceID}
	}
	return decision{MarkUnknown: true, Server: unknownServer(e.Address, e.Err), Clear: true, CancelCheck: true}
}

// decideCheckError decides what to do when the monitor's check of the server at
// address failed with err, of kind kindNetwork, kindTimeout or
// kindCommand (an ok: 0 reply, or one newServerDescription refused), by
// the rules of the server monitoring specification: the server is marked
// Unknown and its pool cleared, interrupting the connections in use after a
// timeout; after a network error (a timeout included) on a server that was
// known, the monitor checks again at once. A server not in the topology, or
// in a LoadBalanced one (never monitored), is left alone.
func (d Description) decideCheckError(address string, kind errorKind, err error) decision {
	cur, ok := d.servers.Get(address)
	switch {
	case !ok:
		return decision{Reason: "the server is not in the topology"}
	case d.Type == LoadBalanced:
		return decision{Reason: "load-balanced: the server is not monitored"}
	}
	network := kind == kindNetwork || kind == kindTimeout
	return decision{
		MarkUnknown:    true,
		Server:         unknownServer(address, err),
		Clear:          true,
		InterruptInUse: kind == kindTimeout,
		CheckAgainNow:  network && cur.Type.known(),
	}
}

// ReplyError returns the error that a command's reply carries for the
// rules: its own when ok is not 1, or else its writeConcernError's, with
// the reply's topologyVersion and whether it has the SystemOverloadedError
// label. The errors of writeErrors do not count. It returns false for a
// reply without such an error, and for one too malformed to tell.
func replyError(address string, reply bson.Raw) (appError, bool) {
	f, err := readFields(reply, replyErrorFields)
	if err != nil {
		return appError{}, false
	}
	ce, failed, err := commandErrorOf(f)
	if err != nil {
		return appError{}, false
	}
	var wce bson.Raw
	if !failed {
		var ok bool
		if wce, ok = f["writeConcernError"].DocumentOK(); !ok {
			return appError{}, false
		}
		wf, err := readFields(wce, replyErrorFields)
		if err != nil {
			return appError{}, false
		}
		ce = &wire.CommandError{}
		ce.Code, _ = boundedInt32(wf["code"])
		ce.CodeName = boundedString(wf["codeName"], maxNameLen)
		ce.Message = boundedString(wf["errmsg"], maxErrmsgLen)
	}
	e := appError{Address: address, Kind: kindCommand, Code: ce.Code, Message: ce.Message, Err: ce}
	if !failed {
		e.Err = fmt.Errorf("write concern error: %w", ce)
	}
	if v, ok := f["topologyVersion"]; ok {
		e.TopologyVersion, _ = parseTopologyVersion(v)
	} else if !failed {
		// Some servers put it in the writeConcernError.
		if v, err := wce.LookupErr("topologyVersion"); err == nil {
			e.TopologyVersion, _ = parseTopologyVersion(v)
		}
	}
	e.SystemOverloaded = hasLabel(f["errorLabels"], "SystemOverloadedError")
	return e, true
}

var replyErrorFields = map[string]bool{
	"ok": true, "errmsg": true, "code": true, "codeName": true,
	"writeConcernError": true, "topologyVersion": true, "errorLabels": true,
}

// hasLabel reports whether the errorLabels array v holds label.
func hasLabel(v bson.RawValue, label string) bool {
	arr, ok := v.ArrayOK()
	if !ok {
		return false
	}
	found := false
	_ = eachValue(bson.Raw(arr), func(_ int, e bson.RawValue) error {
		if s, ok := e.StringValueOK(); ok && s == label {
			found = true
		}
		return nil
	})
	return found
}
