package mongopool

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// WriteError is the failure of one statement of a write: an entry of its
// reply's writeErrors.
type WriteError struct {
	// Index is the statement's place in the command's documents, updates
	// or deletes, from 0.
	Index int
	Code  int32
	// CodeName is empty when the server gave none.
	CodeName string
	Message  string
	// Info is the entry's errInfo (why a document failed validation, for
	// one), nil when absent.
	Info bson.Raw
}

// Error describes the statement's failure with its code.
func (e *WriteError) Error() string {
	return fmt.Sprintf("statement %d: %s (code %d)", e.Index, e.Message, e.Code)
}

// WriteErrors is the error Write returns when the reply lists writeErrors:
// the statements they name failed. An ordered write stops at its first
// failure; an unordered one runs the others. Reply has the counts of what
// was done (n, nModified, upserted).
type WriteErrors struct {
	Errors []WriteError
	// WriteConcernError is the reply's writeConcernError, when it has one
	// too; Unwrap returns it.
	WriteConcernError *WriteConcernError
	// Reply is the whole reply.
	Reply bson.Raw
}

// Error describes the first failed statement, and says how many more
// failed.
func (e *WriteErrors) Error() string {
	var b strings.Builder
	b.WriteString("write errors: ")
	if len(e.Errors) > 0 {
		b.WriteString(e.Errors[0].Error())
	}
	if n := len(e.Errors) - 1; n > 0 {
		fmt.Fprintf(&b, ", and %d more", n)
	}
	if e.WriteConcernError != nil {
		b.WriteString("; ")
		b.WriteString(e.WriteConcernError.Error())
	}
	return b.String()
}

// Unwrap returns the write concern error, if the reply has one.
func (e *WriteErrors) Unwrap() error {
	if e.WriteConcernError == nil {
		return nil
	}
	return e.WriteConcernError
}

// maxWriteErrors bounds the entries a WriteErrors keeps of a reply: a reply
// of 100,000 failed statements is described by its first ones, and Reply
// has them all.
const maxWriteErrors = 1000

// writeErrorsKey is the name of a reply's writeErrors field as it appears in
// the BSON: looking for it first keeps the path of most replies free of
// parsing.
var writeErrorsKey = []byte("writeErrors\x00")

// writeErrorsOf returns the error of a successful reply that lists
// writeErrors, with its writeConcernError wce if not nil.
func writeErrorsOf(reply bson.Raw, wce *WriteConcernError) (*WriteErrors, bool) {
	if !bytes.Contains(reply, writeErrorsKey) {
		return nil, false
	}
	arr, ok := reply.Lookup("writeErrors").ArrayOK()
	if !ok {
		return nil, false
	}
	vals, err := arr.Values()
	if err != nil || len(vals) == 0 {
		return nil, false
	}
	e := &WriteErrors{WriteConcernError: wce, Reply: reply}
	for _, v := range vals[:min(len(vals), maxWriteErrors)] {
		d, ok := v.DocumentOK()
		if !ok {
			continue
		}
		var we WriteError
		if i, ok := d.Lookup("index").AsInt64OK(); ok && i >= 0 && i <= math.MaxInt32 {
			we.Index = int(i)
		}
		if code, ok := d.Lookup("code").AsInt64OK(); ok && code >= math.MinInt32 && code <= math.MaxInt32 {
			we.Code = int32(code)
		}
		we.CodeName, _ = d.Lookup("codeName").StringValueOK()
		we.Message, _ = d.Lookup("errmsg").StringValueOK()
		we.Info, _ = d.Lookup("errInfo").DocumentOK()
		e.Errors = append(e.Errors, we)
	}
	return e, len(e.Errors) > 0
}
