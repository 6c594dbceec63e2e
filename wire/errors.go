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

// CommandOverhead is the room, in bytes, that MongoDB allows a command
// document beyond maxBsonObjectSize for the command's own fields, so that a
// document of the maximum size can still be inserted or updated: a command
// may be maxBsonObjectSize + 16 KiB (the server's BSONObjMaxInternalSize).
const CommandOverhead = 16 * 1024

// SizeLimitError reports a command refused before it was sent, because it
// exceeds a limit the server announced in its handshake. Nothing was
// written: the connection is unharmed and can run the next command.
type SizeLimitError struct {
	// Limit names the limit exceeded: "maxBsonObjectSize" (for the command
	// document) or "maxMessageSizeBytes" (for the whole message).
	Limit string
	// Size is the size, in bytes, of the document or message.
	Size int
	// Max is the largest size the limit allows: maxMessageSizeBytes, or
	// maxBsonObjectSize + CommandOverhead for a command document.
	Max int
}

// Error names the limit, the size and the maximum, such as "wire: command
// document of 16793601 bytes exceeds the 16793600 bytes maxBsonObjectSize
// allows (16777216 + 16384 for the command's own fields); it was not sent".
func (e *SizeLimitError) Error() string {
	if e.Limit == "maxBsonObjectSize" {
		return fmt.Sprintf("wire: command document of %d bytes exceeds the %d bytes maxBsonObjectSize allows (%d + %d for the command's own fields); it was not sent",
			e.Size, e.Max, e.Max-CommandOverhead, CommandOverhead)
	}
	return fmt.Sprintf("wire: message of %d bytes exceeds the %d bytes %s allows; it was not sent", e.Size, e.Max, e.Limit)
}
