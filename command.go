package mongopool

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// field is one field a client adds to a command before sending it.
type field struct {
	key string
	val bsoncore.Value
}

// withFields returns cmd (a valid document) with fields appended, each
// unless cmd has it already: what the caller set wins.
func withFields(cmd bson.Raw, fields ...field) bson.Raw {
	out := make([]byte, 0, len(cmd)+64)
	out = append(out, cmd[:len(cmd)-1]...) // without the terminating 0
	for _, f := range fields {
		if _, err := cmd.LookupErr(f.key); err == nil {
			continue
		}
		out = bsoncore.AppendValueElement(out, f.key, f.val)
	}
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

func int64Value(v int64) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, v)}
}

func docValue(d bson.Raw) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: d}
}
