package wire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// RoundTripper runs one command on one connection. It is the contract the
// handshake and auth packages use to talk to a server; the connection
// package implements it.
//
// RoundTrip sends cmd, a complete command document that already includes
// "$db", as the body of an OP_MSG (compressed when compression was
// negotiated and Compressible allows it), waits for the reply and returns
// the reply's body. It honours ctx's deadline and cancellation.
//
//   - Transport or protocol failure (I/O error, timeout, malformed reply):
//     a nil reply and the error. The connection is then unusable, unless
//     ctx ended only the decompression of a reply read whole.
//   - A command larger than the server's limits: a nil reply and a
//     *SizeLimitError, before anything is sent. The connection stays usable.
//   - The server replied with "ok" not 1: the reply AND the *CommandError
//     that CheckReply returns for it, so callers can both read the reply and
//     test the error (errors.As, HasErrorLabel).
//   - Success: the reply and a nil error.
//
// The returned reply belongs to the caller, who may keep it.
type RoundTripper interface {
	RoundTrip(ctx context.Context, cmd bson.Raw) (bson.Raw, error)
}
