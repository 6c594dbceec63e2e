package mongopool

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/wire"
)

// The server discovery and monitoring specification's error codes that say
// the server's state changed under the client: "node is recovering" (the
// shutdown ones among them) and "not writable primary".
var (
	recoveringCodes         = []int32{11600, 11602, 13436, 189, 91}
	notWritablePrimaryCodes = []int32{10107, 13435, 10058}
	shutdownCodes           = []int32{11600, 91}
)

var writeConcernErrorKey = []byte("writeConcernError\x00")

// stateChange is a server's "not writable primary" or "node is recovering"
// error, from a command's reply or its write concern error.
type stateChange struct {
	code     int32
	shutdown bool                       // "node is shutting down": the pool is cleared
	version  *handshake.TopologyVersion // the reply's topologyVersion; nil if none
}

// stateChangeOf returns the state change that err (a command error) or the
// writeConcernError of reply (a successful command's reply) reports, if any.
// The code decides when there is one; the message only when there is none.
func stateChangeOf(err error, reply bson.Raw) (stateChange, bool) {
	if ce := commandError(err); ce != nil {
		if sc, ok := classifyStateChange(ce.Code, ce.Message); ok {
			sc.version = topologyVersionOf(ce.Raw)
			return sc, true
		}
		reply = ce.Raw
	}
	// Most replies have no writeConcernError: looking for its name first
	// keeps their path free of the lookup's allocation.
	if !bytes.Contains(reply, writeConcernErrorKey) {
		return stateChange{}, false
	}
	wce, ok := reply.Lookup("writeConcernError").DocumentOK()
	if !ok {
		return stateChange{}, false
	}
	code, _ := wce.Lookup("code").AsInt64OK()
	msg, _ := wce.Lookup("errmsg").StringValueOK()
	sc, ok := classifyStateChange(int32(code), msg)
	if ok {
		sc.version = topologyVersionOf(reply)
	}
	return sc, ok
}

// commandError returns the server's error that err is or wraps, if any. It
// is a function of its own so that a successful reply (err nil) does not pay
// for the target errors.As needs on the heap.
func commandError(err error) *wire.CommandError {
	if err == nil {
		return nil
	}
	var ce *wire.CommandError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

func classifyStateChange(code int32, msg string) (stateChange, bool) {
	if code != 0 {
		ok := slices.Contains(recoveringCodes, code) || slices.Contains(notWritablePrimaryCodes, code)
		return stateChange{code: code, shutdown: slices.Contains(shutdownCodes, code)}, ok
	}
	ok := strings.Contains(msg, "node is recovering") || strings.Contains(msg, "not master")
	return stateChange{}, ok
}

// topologyVersionOf reads the topologyVersion of a reply; nil if it has none
// or it is malformed.
func topologyVersionOf(reply bson.Raw) *handshake.TopologyVersion {
	doc, ok := reply.Lookup("topologyVersion").DocumentOK()
	if !ok {
		return nil
	}
	pid, ok := doc.Lookup("processId").ObjectIDOK()
	if !ok {
		return nil
	}
	counter, ok := doc.Lookup("counter").AsInt64OK()
	if !ok {
		return nil
	}
	return &handshake.TopologyVersion{ProcessID: pid, Counter: counter}
}

// staleVersion reports whether an error's topologyVersion is not newer than
// the server's current one: the error predates what the monitor saw last,
// and the specification ignores it. Without both versions nothing is stale.
func staleVersion(current, errVersion *handshake.TopologyVersion) bool {
	if current == nil || errVersion == nil {
		return false
	}
	return bytes.Equal(current.ProcessID[:], errVersion.ProcessID[:]) && errVersion.Counter <= current.Counter
}

// isTimeout reports whether err is a timeout: a socket deadline (net.Error)
// or a context's deadline. Network timeouts on an established connection do
// not mark the server Unknown (a slow operation is not a dead server).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}
