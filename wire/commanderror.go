package wire

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// CommandError is a command's failure as the server reports it: a reply
// whose "ok" is not 1.
type CommandError struct {
	// Code is the reply's "code", 0 if absent.
	Code int32
	// CodeName is the reply's "codeName", such as "AuthenticationFailed".
	CodeName string
	// Message is the reply's "errmsg".
	Message string
	// Labels are the reply's "errorLabels", such as "RetryableWriteError":
	// its first 32 string entries.
	Labels []string
	// Raw is the whole reply, for the fields not copied here (such as
	// topologyVersion). It aliases the message the reply was decoded from.
	Raw bson.Raw
}

// Error formats the error as "(CodeName) message (code N)", leaving out the
// parts the server did not send.
func (e *CommandError) Error() string {
	var b strings.Builder
	b.WriteString("server error: ")
	if e.CodeName != "" {
		b.WriteString("(" + e.CodeName + ") ")
	}
	if e.Message != "" {
		b.WriteString(e.Message)
	} else {
		b.WriteString("command failed")
	}
	if e.Code != 0 {
		b.WriteString(" (code " + strconv.Itoa(int(e.Code)) + ")")
	}
	return b.String()
}

// HasErrorLabel reports whether the server put label in the reply's
// errorLabels. The pool package recognises errors by this method.
func (e *CommandError) HasErrorLabel(label string) bool {
	return slices.Contains(e.Labels, label)
}

// CheckReply checks a command's reply document. It returns nil when "ok" is
// 1, a *CommandError when "ok" is anything else, and an error matching
// ErrProtocol when the reply has no "ok" or an "ok" that is not a double,
// int32, int64 or boolean.
//
// Only "ok" decides: a reply with ok 1 that reports writeErrors or a
// writeConcernError returns nil, and those are the caller's to inspect.
func CheckReply(reply bson.Raw) error {
	v, err := reply.LookupErr("ok")
	if err != nil {
		if errors.Is(err, bsoncore.ErrElementNotFound) {
			return protoErrorf("reply has no \"ok\" field")
		}
		return protoErrorf("reply is not a valid BSON document: %w", err)
	}
	var ok bool
	switch v.Type {
	case bson.TypeDouble:
		f, _ := v.DoubleOK()
		ok = f == 1
	case bson.TypeInt32:
		i, _ := v.Int32OK()
		ok = i == 1
	case bson.TypeInt64:
		i, _ := v.Int64OK()
		ok = i == 1
	case bson.TypeBoolean:
		ok, _ = v.BooleanOK()
	default:
		return protoErrorf("reply's \"ok\" is a BSON %v; expected a double, int32, int64 or boolean", v.Type)
	}
	if ok {
		return nil
	}
	return newCommandError(reply)
}

// newCommandError reads the error fields of a failed reply. Fields of the
// wrong type are left empty rather than failing: the failure is what matters.
func newCommandError(reply bson.Raw) *CommandError {
	e := &CommandError{Raw: reply}
	if c, ok := reply.Lookup("code").AsInt64OK(); ok && c >= -1<<31 && c < 1<<31 {
		e.Code = int32(c)
	}
	e.CodeName, _ = reply.Lookup("codeName").StringValueOK()
	e.Message, _ = reply.Lookup("errmsg").StringValueOK()
	if labels, ok := reply.Lookup("errorLabels").ArrayOK(); ok && len(labels) >= 5 {
		// Walked in place rather than with Values, which would allocate for
		// every entry of a hostile array of millions.
		for rest := labels[4 : len(labels)-1]; len(rest) > 0 && len(e.Labels) < maxErrorLabels; {
			elem, next, ok := bsoncore.ReadElement(rest)
			if !ok {
				break
			}
			rest = next
			if s, ok := elem.Value().StringValueOK(); ok {
				e.Labels = append(e.Labels, s)
			}
		}
	}
	return e
}

// maxErrorLabels is how many errorLabels a CommandError keeps: the first
// ones. MongoDB defines about ten labels and attaches two or three.
const maxErrorLabels = 32
