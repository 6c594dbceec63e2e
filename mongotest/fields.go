package mongotest

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// genericFields are the fields every command may carry, as mongod's
// generic arguments: they never change what this server does but for the
// session fields (see sessions.go).
var genericFields = map[string]bool{
	"$db": true, "lsid": true, "txnNumber": true, "autocommit": true, "startTransaction": true,
	"stmtId": true, "stmtIds": true, "$clusterTime": true, "$readPreference": true, "readConcern": true,
	"writeConcern": true, "maxTimeMS": true, "comment": true, "apiVersion": true, "apiStrict": true,
	"apiDeprecationErrors": true, "$audit": true, "$client": true, "$configServerState": true,
	"$oplogQueryData": true, "$queryOptions": true, "$replData": true, "allowImplicitCollectionCreation": true,
	"clientOperationKey": true, "databaseVersion": true, "shardVersion": true, "encryptionInformation": true,
	"help": true, "mayBypassWriteBlocking": true, "maxTimeMSOpOnly": true, "readOnce": true,
	"txnRetryCounter": true, "usesDefaultMaxTimeMS": true, "versionContext": true, "$traceCtx": true,
	"rawData": true, "$readPreferenceMode": true,
}

// checkFields refuses a field of req's command that is neither the
// command's name, nor generic, nor one of allowed, as mongod refuses it:
// "BSON field 'find.foo' is an unknown field." (IDLUnknownField), so that a
// misspelt or unimplemented option is never ignored.
func checkFields(req *request, allowed ...string) error {
	return checkDocFields(req.body, req.name, true, allowed)
}

// checkDocFields is checkFields for doc, a command (the first field is its
// name) or one statement of it, named where in errors.
func checkDocFields(doc bson.Raw, where string, command bool, allowed []string) error {
	elems, err := doc.Elements()
	if err != nil {
		return errorf(codeBadValue, "invalid document: %v", err)
	}
	for i, e := range elems {
		k := e.Key()
		if (command && (i == 0 || genericFields[k])) || slices.Contains(allowed, k) {
			continue
		}
		return errorf(codeIDLUnknownField, "BSON field '%s.%s' is an unknown field.", where, k)
	}
	return nil
}

// checkCollation refuses a collation other than the simple one, which
// this package does not implement.
func checkCollation(doc bson.Raw) error {
	v, err := doc.LookupErr("collation")
	if err != nil {
		return nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return errorf(codeTypeMismatch, "BSON field 'collation' is the wrong type '%s', expected type 'object'", typeName(v.Type))
	}
	if locale, _ := d.Lookup("locale").StringValueOK(); len(d) > 5 && locale != "simple" {
		return errorf(codeBadValue, "mongotest does not implement collations other than the simple one: %s", formatDoc(d))
	}
	return nil
}
