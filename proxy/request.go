package proxy

import (
	"encoding/binary"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// request is what the proxy reads of a command's body to route it, in one
// pass over its top-level fields. Its slices alias the body.
type request struct {
	body bson.Raw
	name string // the first key: the command's name (interned, see commandName)
	db   []byte

	readPref   []byte // the $readPreference document, nil when absent
	lsid       []byte // the lsid document, nil when absent
	txnNumber  int64
	hasTxn     bool
	autocommit bool // present (false): a command of a transaction
	startTxn   bool

	maxTimeOff  int // offset of maxTimeMS's value in body, 0 when absent
	maxTimeType bsoncore.Type
	maxTimeMS   int64

	// firstOff is the offset of the first field's value (the getMore's
	// cursor id), firstType its type.
	firstOff  int
	firstType bsoncore.Type

	pipeline []byte // an aggregate's pipeline array
	tailable bool
	await    bool
}

// knownNames are the command names the proxy routes by, so that naming a
// request costs no allocation for them.
var knownNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{
		"hello", "isMaster", "ismaster", "ping", "getMore", "killCursors", "find", "aggregate", "count",
		"distinct", "listCollections", "listIndexes", "listDatabases", "insert", "update", "delete",
		"findAndModify", "commitTransaction", "abortTransaction", "endSessions", "saslStart",
		"saslContinue", "authenticate", "getnonce", "logout", "buildInfo", "buildinfo", "dbStats",
		"collStats", "explain", "create", "drop", "createIndexes", "dropIndexes", "killSessions",
		"mapReduce", "bulkWrite", "dropDatabase", "renameCollection", "startSession", "proxyStatus", "proxyPause", "proxyResume",
		"proxyReconnect",
	} {
		m[n] = n
	}
	return m
}()

// commandName returns key as a string, without allocating for the names
// the proxy knows.
func commandName(key []byte) string {
	if n, ok := knownNames[string(key)]; ok {
		return n
	}
	return string(key)
}

// parseRequest reads body, a command document that DecodeMsg validated.
func parseRequest(body bson.Raw) (request, error) {
	r := request{body: body}
	if len(body) < 5 {
		return r, fmt.Errorf("the command document is empty")
	}
	rest := body[4 : len(body)-1]
	first := true
	for len(rest) > 0 {
		start := len(body) - 1 - len(rest)
		elem, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return r, fmt.Errorf("the command document is not valid BSON")
		}
		key := elem.KeyBytes()
		val := elem.Value()
		valOff := start + 1 + len(key) + 1
		if first {
			r.name, r.firstOff, r.firstType = commandName(key), valOff, val.Type
			first = false
		}
		switch string(key) {
		case "$db":
			if s, ok := val.StringValueOK(); ok {
				r.db = body[valOff+4 : valOff+4+len(s)]
			}
		case "$readPreference":
			if d, ok := val.DocumentOK(); ok {
				r.readPref = d
			}
		case "lsid":
			if d, ok := val.DocumentOK(); ok {
				r.lsid = d
			}
		case "txnNumber":
			if n, ok := val.AsInt64OK(); ok {
				r.txnNumber, r.hasTxn = n, true
			}
		case "autocommit":
			r.autocommit = true
		case "startTransaction":
			r.startTxn = val.Type == bsoncore.TypeBoolean && val.Boolean()
		case "maxTimeMS":
			if n, ok := val.AsInt64OK(); ok {
				r.maxTimeOff, r.maxTimeType, r.maxTimeMS = valOff, val.Type, n
			}
		case "pipeline":
			if a, ok := val.ArrayOK(); ok {
				r.pipeline = a
			}
		case "tailable":
			r.tailable = val.Type == bsoncore.TypeBoolean && val.Boolean()
		case "awaitData":
			r.await = val.Type == bsoncore.TypeBoolean && val.Boolean()
		}
		rest = next
	}
	if first {
		return r, fmt.Errorf("the command document is empty")
	}
	return r, nil
}

// setMaxTime writes ms over the request's maxTimeMS, in its own type.
func (r *request) setMaxTime(ms int64) {
	v := r.body[r.maxTimeOff:]
	switch r.maxTimeType {
	case bsoncore.TypeInt32:
		binary.LittleEndian.PutUint32(v, uint32(int32(ms)))
	case bsoncore.TypeInt64:
		binary.LittleEndian.PutUint64(v, uint64(ms))
	case bsoncore.TypeDouble:
		binary.LittleEndian.PutUint64(v, math.Float64bits(float64(ms)))
	}
}

// pipelineHas reports whether the aggregate's pipeline has a stage named
// inTxn reports whether r is a command of a multi-document transaction:
// one with autocommit: false, or the transaction's commit or abort, with
// its session.
func (r *request) inTxn() bool {
	return r.lsid != nil && (r.autocommit || r.name == "commitTransaction" || r.name == "abortTransaction")
}

// stage (first keys of its documents), only the first stage when first.
func (r *request) pipelineHas(stage string, firstOnly bool) bool {
	rest := r.pipeline
	if len(rest) < 5 {
		return false
	}
	rest = rest[4 : len(rest)-1]
	for len(rest) > 0 {
		elem, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return false
		}
		if d, ok := elem.Value().DocumentOK(); ok && len(d) > 5 {
			if e, _, ok := bsoncore.ReadElement(d[4 : len(d)-1]); ok && string(e.KeyBytes()) == stage {
				return true
			}
		}
		if firstOnly {
			return false
		}
		rest = next
	}
	return false
}

// cursorIDOffset returns the offset, in reply, of the int64 value of
// cursor.id, or 0 when the reply has none.
func cursorIDOffset(reply bson.Raw) int {
	off, ok := fieldOffset(reply, 0, "cursor", bsoncore.TypeEmbeddedDocument)
	if !ok {
		return 0
	}
	idOff, ok := fieldOffset(reply, off, "id", bsoncore.TypeInt64)
	if !ok {
		return 0
	}
	return idOff
}

// fieldOffset finds the field key of type t in the document that starts at
// off in doc, and returns the offset of its value.
func fieldOffset(doc []byte, off int, key string, t bsoncore.Type) (int, bool) {
	if off+5 > len(doc) {
		return 0, false
	}
	n := int(int32(binary.LittleEndian.Uint32(doc[off:])))
	if n < 5 || off+n > len(doc) {
		return 0, false
	}
	end := off + n - 1
	rest := doc[off+4 : end]
	for len(rest) > 0 {
		start := end - len(rest)
		elem, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return 0, false
		}
		k := elem.KeyBytes()
		if string(k) == key {
			if elem.Value().Type != t {
				return 0, false
			}
			return start + 1 + len(k) + 1, true
		}
		rest = next
	}
	return 0, false
}

func getInt64(b []byte, off int) int64 { return int64(binary.LittleEndian.Uint64(b[off:])) }

func putInt64(b []byte, off int, v int64) { binary.LittleEndian.PutUint64(b[off:], uint64(v)) }
