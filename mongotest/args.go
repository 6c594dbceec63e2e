package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The helpers below read a command's arguments, failing as MongoDB does
// (BadValue, TypeMismatch, InvalidNamespace) on a wrong type.

// collectionArg returns the collection a command names in its first field,
// such as find: "c".
func collectionArg(req *request) (string, error) {
	v := req.body.Lookup(req.name)
	coll, ok := v.StringValueOK()
	if !ok {
		return "", errorf(codeInvalidNamespace, "collection name has invalid type %s", v.Type)
	}
	if coll == "" {
		return "", errorf(codeInvalidNamespace, "Invalid namespace specified '%s.'", req.db)
	}
	return coll, nil
}

// intArg returns the integer field key of cmd (int32, int64 or a double),
// def if it is absent.
func intArg(cmd bson.Raw, key string, def int64) (int64, error) {
	v, err := cmd.LookupErr(key)
	if err != nil {
		return def, nil
	}
	i, ok := v.AsInt64OK()
	if !ok {
		return 0, errorf(codeTypeMismatch, "BSON field '%s' is the wrong type '%s', expected a number", key, v.Type)
	}
	return i, nil
}

// nonNegativeArg is intArg for fields that cannot be negative.
func nonNegativeArg(cmd bson.Raw, key string, def int64) (int64, error) {
	i, err := intArg(cmd, key, def)
	if err == nil && i < 0 {
		return 0, errorf(codeBadValue, "%s value must be non-negative, but received: %d", key, i)
	}
	return i, err
}

// boolArg returns the boolean field key of cmd, def if it is absent.
func boolArg(cmd bson.Raw, key string, def bool) (bool, error) {
	v, err := cmd.LookupErr(key)
	if err != nil {
		return def, nil
	}
	if b, ok := boolValue(v); ok {
		return b, nil
	}
	return false, errorf(codeTypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'bool'", key, v.Type)
}

// boolValue reads a boolean, or a number as MongoDB takes one: true unless
// it is zero (so 0.5 is true).
func boolValue(v bson.RawValue) (b, ok bool) {
	if b, ok := v.BooleanOK(); ok {
		return b, true
	}
	if f, ok := v.AsFloat64OK(); ok {
		return f != 0, true
	}
	return false, false
}

// docArg returns the document field key of cmd, an empty document if it is
// absent.
func docArg(cmd bson.Raw, key string) (bson.Raw, error) {
	v, err := cmd.LookupErr(key)
	if err != nil {
		return emptyDoc, nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'object'", key, v.Type)
	}
	return d, nil
}

// emptyDoc is the empty BSON document.
var emptyDoc = bson.Raw{5, 0, 0, 0, 0}

// docsArg returns the documents of the array argument key (insert's
// documents, delete's deletes), taken from the document sequence of that
// name or from the body, but not both.
func docsArg(req *request, key string) ([]bson.Raw, error) {
	v, err := req.body.LookupErr(key)
	inBody := err == nil
	for _, s := range req.seqs {
		if s.Identifier == key {
			if inBody {
				return nil, errorf(codeBadValue, "duplicate field '%s': it is both in the command and in a document sequence", key)
			}
			return s.Documents, nil
		}
	}
	if !inBody {
		return nil, errorf(codeBadValue, "BSON field '%s.%s' is missing but a required field", req.name, key)
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'", req.name, key, v.Type)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, errorf(codeBadValue, "invalid array '%s': %v", key, err)
	}
	docs := make([]bson.Raw, 0, len(vals))
	for i, e := range vals {
		d, ok := e.DocumentOK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field '%s.%s.%d' is the wrong type '%s', expected type 'object'", req.name, key, i, e.Type)
		}
		docs = append(docs, d)
	}
	return docs, nil
}
