package mongotest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The legacy opcodes, which drivers still use for the first hello of a
// connection unless they use the Stable API or a load balancer.
const (
	opReply wire.OpCode = 1    // OP_REPLY
	opQuery wire.OpCode = 2004 // OP_QUERY
)

// legacyQuery is the part of an OP_QUERY the server uses.
type legacyQuery struct {
	ns      string   // fullCollectionName, when it is not a command namespace
	db      string   // the database of fullCollectionName "db.$cmd"
	command bson.Raw // the query, unwrapped from $query if need be
}

// decodeQuery decodes an OP_QUERY (header included) and checks every
// length in it. A query on a namespace other than "db.$cmd" (a legacy find)
// is returned with ns set, for the caller to refuse. Errors match
// wire.ErrProtocol.
func decodeQuery(msg []byte) (*legacyQuery, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: mongotest: OP_QUERY: %s", wire.ErrProtocol, fmt.Sprintf(format, args...))
	}
	h, err := wire.ParseHeader(msg)
	if err != nil {
		return nil, err
	}
	if int64(h.MessageLength) != int64(len(msg)) {
		return nil, bad("messageLength %d but %d bytes", h.MessageLength, len(msg))
	}
	b := msg[wire.HeaderSize:]
	if len(b) < 4 {
		return nil, bad("no flags")
	}
	b = b[4:] // flags: secondaryOk and friends, irrelevant here
	nul := bytes.IndexByte(b, 0)
	if nul < 0 {
		return nil, bad("fullCollectionName is not NUL-terminated")
	}
	ns := string(b[:nul])
	b = b[nul+1:]
	if len(b) < 8 {
		return nil, bad("no numberToSkip and numberToReturn")
	}
	b = b[8:]
	doc, rest, err := readDoc(b)
	if err != nil {
		return nil, bad("query: %v", err)
	}
	if len(rest) > 0 { // returnFieldsSelector
		_, tail, err := readDoc(rest)
		if err != nil {
			return nil, bad("returnFieldsSelector: %v", err)
		}
		if len(tail) > 0 {
			return nil, bad("%d trailing bytes", len(tail))
		}
	}
	db, ok := strings.CutSuffix(ns, ".$cmd")
	if !ok || db == "" {
		return &legacyQuery{ns: ns, command: doc}, nil
	}
	// Drivers wrap the command as {$query: cmd, $readPreference: ...} when
	// they send a read preference.
	if name := commandName(doc); name == "$query" || name == "query" {
		if inner, ok := doc.Lookup(name).DocumentOK(); ok {
			doc = inner
		}
	}
	return &legacyQuery{db: db, command: doc}, nil
}

// readDoc reads the BSON document at the start of b and validates it.
func readDoc(b []byte) (doc bson.Raw, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("document length needs 4 bytes, %d remain", len(b))
	}
	n := int64(int32(binary.LittleEndian.Uint32(b)))
	if n < 5 || n > int64(len(b)) {
		return nil, nil, fmt.Errorf("document length %d with %d bytes remaining", n, len(b))
	}
	doc = bson.Raw(b[:n])
	if err := doc.Validate(); err != nil {
		return nil, nil, err
	}
	return doc, b[n:], nil
}

// appendReply appends an OP_REPLY carrying the single document doc.
func appendReply(dst []byte, requestID, responseTo int32, doc bson.Raw) []byte {
	const awaitCapable = 8 // responseFlags bit 3, which servers always set
	size := wire.HeaderSize + 4 + 8 + 4 + 4 + len(doc)
	dst = wire.AppendHeader(dst, wire.Header{MessageLength: int32(size), RequestID: requestID, ResponseTo: responseTo, OpCode: opReply})
	dst = binary.LittleEndian.AppendUint32(dst, awaitCapable)
	dst = binary.LittleEndian.AppendUint64(dst, 0) // cursorID
	dst = binary.LittleEndian.AppendUint32(dst, 0) // startingFrom
	dst = binary.LittleEndian.AppendUint32(dst, 1) // numberReturned
	return append(dst, doc...)
}
