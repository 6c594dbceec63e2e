package auth

import (
	"encoding/base64"

	"go.mongodb.org/mongo-driver/v2/bson"
)

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
