package proxy

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Codes of the errors the proxy answers itself, MongoDB's.
const (
	codeInternalError                 = 1
	codeBadValue                      = 2
	codeHostUnreachable               = 6
	codeFailedToParse                 = 9
	codeTypeMismatch                  = 14
	codeAuthenticationFailed          = 18
	codeCursorNotFound                = 43
	codeMaxTimeMSExpired              = 50
	codeNetworkTimeout                = 89
	codeInvalidOptions                = 72
	codeFailedToSatisfyReadPref       = 133
	codeClientMetadataCannotBeMutated = 186
	codeUnsupportedOpQuery            = 352
	codeOverloaded                    = 462 // IngressRequestRateLimitExceeded
	codeShutdownInProgress            = 91
	codeBSONObjectTooLarge            = 10334
)

var codeNames = map[int32]string{
	codeUnauthorized:                  "Unauthorized",
	codeProtocolError:                 "ProtocolError",
	codeMechanismUnavailable:          "MechanismUnavailable",
	codeInternalError:                 "InternalError",
	codeBadValue:                      "BadValue",
	codeHostUnreachable:               "HostUnreachable",
	codeFailedToParse:                 "FailedToParse",
	codeTypeMismatch:                  "TypeMismatch",
	codeAuthenticationFailed:          "AuthenticationFailed",
	codeCursorNotFound:                "CursorNotFound",
	codeMaxTimeMSExpired:              "MaxTimeMSExpired",
	codeNetworkTimeout:                "NetworkTimeout",
	codeInvalidOptions:                "InvalidOptions",
	codeFailedToSatisfyReadPref:       "FailedToSatisfyReadPreference",
	codeClientMetadataCannotBeMutated: "ClientMetadataCannotBeMutated",
	codeUnsupportedOpQuery:            "UnsupportedOpQueryCommand",
	codeOverloaded:                    "IngressRequestRateLimitExceeded",
	codeShutdownInProgress:            "ShutdownInProgress",
	codeBSONObjectTooLarge:            "BSONObjectTooLarge",
}

// Error labels of the specifications.
const (
	labelRetryableWrite   = "RetryableWriteError"
	labelTransientTxn     = "TransientTransactionError"
	labelUnknownCommit    = "UnknownTransactionCommitResult"
	labelSystemOverloaded = "SystemOverloadedError"
	labelRetryable        = "RetryableError"
)

// errorReply returns {ok: 0, errmsg, code, codeName, errorLabels} in dst.
func errorReply(dst []byte, code int32, msg string, labels ...string) bson.Raw {
	idx, doc := bsoncore.AppendDocumentStart(dst[:0])
	doc = bsoncore.AppendDoubleElement(doc, "ok", 0)
	doc = bsoncore.AppendStringElement(doc, "errmsg", msg)
	doc = bsoncore.AppendInt32Element(doc, "code", code)
	if name, ok := codeNames[code]; ok {
		doc = bsoncore.AppendStringElement(doc, "codeName", name)
	}
	if len(labels) > 0 {
		aidx, arr := bsoncore.AppendArrayElementStart(doc, "errorLabels")
		doc = arr
		for i, l := range labels {
			doc = bsoncore.AppendStringElement(doc, arrayKey(i), l)
		}
		doc, _ = bsoncore.AppendArrayEnd(doc, aidx)
	}
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc
}

var arrayKeys = func() []string {
	k := make([]string, 64)
	for i := range k {
		k[i] = strconv.Itoa(i)
	}
	return k
}()

// arrayKey returns the key of element i of a BSON array.
func arrayKey(i int) string {
	if i < len(arrayKeys) {
		return arrayKeys[i]
	}
	return strconv.Itoa(i)
}

// okReply is {ok: 1}.
var okReply = func() bson.Raw {
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendDoubleElement(doc, "ok", 1)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc
}()
