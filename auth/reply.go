package auth

import (
	"encoding/base64"
	"fmt"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ServerError is an ok:0 reply to an authentication command. (A connection
// that turns ok:0 into its own error type makes that error the one wrapped
// instead.)
type ServerError struct {
	Code     int32
	CodeName string
	Message  string
	Labels   []string
}

func (e *ServerError) Error() string {
	var b strings.Builder
	b.WriteString("server error")
	if e.CodeName != "" || e.Code != 0 {
		fmt.Fprintf(&b, " (%s, code %d)", e.CodeName, e.Code)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// HasErrorLabel reports whether the reply carried the error label.
func (e *ServerError) HasErrorLabel(label string) bool {
	for _, l := range e.Labels {
		if l == label {
			return true
		}
	}
	return false
}

// checkOK returns nil for an ok:1 reply, a *ServerError for ok:0, and an
// error for a malformed reply.
func checkOK(reply bson.Raw) error {
	if err := reply.Validate(); err != nil {
		return fmt.Errorf("malformed reply: %w", err)
	}
	v, err := reply.LookupErr("ok")
	if err != nil {
		return fmt.Errorf("malformed reply: no ok field")
	}
	if b, isBool := v.BooleanOK(); isBool {
		if b {
			return nil
		}
	} else if f, isNum := v.AsFloat64OK(); isNum {
		if f != 0 && !math.IsNaN(f) {
			return nil
		}
	} else {
		return fmt.Errorf("malformed reply: ok is a %s", v.Type)
	}
	se := &ServerError{Message: "command failed"}
	if v, err := reply.LookupErr("code"); err == nil {
		if n, ok := v.AsInt64OK(); ok && n >= math.MinInt32 && n <= math.MaxInt32 {
			se.Code = int32(n)
		}
	}
	if v, err := reply.LookupErr("codeName"); err == nil {
		se.CodeName, _ = v.StringValueOK()
	}
	if v, err := reply.LookupErr("errmsg"); err == nil {
		if s, ok := v.StringValueOK(); ok {
			se.Message = s
		}
	}
	if v, err := reply.LookupErr("errorLabels"); err == nil {
		if arr, ok := v.ArrayOK(); ok && arr.Validate() == nil {
			vals, _ := arr.Values()
			for _, l := range vals {
				if s, ok := l.StringValueOK(); ok {
					se.Labels = append(se.Labels, s)
				}
			}
		}
	}
	return se
}

// saslReply is a reply to saslStart or saslContinue (or the speculative
// form of the former).
type saslReply struct {
	conversationID bson.RawValue
	done           bool
	payload        []byte
}

// parseSASLReply reads a SASL reply (to saslStart, saslContinue or the
// speculative saslStart).
func parseSASLReply(mech string, reply bson.Raw) (saslReply, error) {
	bad := func(format string, args ...any) (saslReply, error) {
		return saslReply{}, authErr(mech, "malformed SASL reply: "+format, args...)
	}
	if err := reply.Validate(); err != nil {
		return bad("%v", err)
	}
	var r saslReply
	id, err := reply.LookupErr("conversationId")
	if err != nil {
		return bad("no conversationId")
	}
	switch id.Type {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		r.conversationID = id
	default:
		return bad("conversationId is a %s", id.Type)
	}
	if v, err := reply.LookupErr("done"); err == nil {
		b, ok := v.BooleanOK()
		if !ok {
			return bad("done is a %s", v.Type)
		}
		r.done = b
	}
	if v, err := reply.LookupErr("payload"); err == nil {
		switch v.Type {
		case bson.TypeBinary:
			_, data, ok := v.BinaryOK()
			if !ok {
				return bad("unreadable payload")
			}
			r.payload = data
		case bson.TypeString:
			s, _ := v.StringValueOK()
			data, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return bad("payload is not base64")
			}
			r.payload = data
		default:
			return bad("payload is a %s", v.Type)
		}
	}
	return r, nil
}
