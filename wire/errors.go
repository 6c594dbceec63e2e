package wire

import (
	"errors"
	"fmt"
)

// ErrProtocol matches (with errors.Is) every error this package returns
// because received bytes break the wire protocol: a bad length, a checksum
// mismatch, malformed sections or BSON, an unknown opcode or compressor, a
// reply without "ok", and so on. After such an error the byte stream can no
// longer be trusted and the connection should be closed.
var ErrProtocol = errors.New("wire: protocol error")

// protocolError is the concrete type behind ErrProtocol. Its message names the
// problem ("wire: OP_MSG: ...") rather than repeating "protocol error".
type protocolError struct{ err error }

func (e *protocolError) Error() string        { return "wire: " + e.err.Error() }
func (e *protocolError) Unwrap() error        { return e.err }
func (e *protocolError) Is(target error) bool { return target == ErrProtocol }

// protoErrorf builds a protocol error. The format may use %w to keep a cause.
func protoErrorf(format string, args ...any) error {
	return &protocolError{err: fmt.Errorf(format, args...)}
}
