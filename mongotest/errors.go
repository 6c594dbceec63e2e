package mongotest

import (
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The MongoDB error codes the server replies with.
const (
	codeInternalError               = 1
	codeBadValue                    = 2
	codeInvalidLength               = 16
	codeUnauthorized                = 13
	codeTypeMismatch                = 14
	codeProtocolError               = 17
	codeAuthenticationFailed        = 18
	codeCursorNotFound              = 43
	codeCommandNotFound             = 59
	codeInvalidNamespace            = 73
	codeMechanismUnavailable        = 334
	codeUnsupportedOpQueryCommand   = 352
	codeLoadBalancerSupportMismatch = 354
	codeDuplicateKey                = 11000
	codeMissingDB                   = 40571 // OP_MSG without $db

	codeFailedToParse                   = 9
	codeOverflow                        = 15
	codeNamespaceNotFound               = 26
	codeIndexNotFound                   = 27
	codePathNotViable                   = 28
	codeConflictingUpdateOperators      = 40
	codeNamespaceExists                 = 48
	codeDollarPrefixedFieldName         = 52
	codeInvalidIDField                  = 53
	codeNotSingleValueField             = 54
	codeEmptyFieldName                  = 56
	codeImmutableField                  = 66
	codeCannotCreateIndex               = 67
	codeIndexOptionsConflict            = 85
	codeIndexKeySpecsConflict           = 86
	codeInvalidPipelineOperator         = 168
	codeCannotIndexParallelArrays       = 171
	codeInvalidIndexSpecificationOption = 197
	codeTransactionTooOld               = 225
	codeTooManyLogicalSessions          = 261
	codeBSONObjectTooLarge              = 10334
	codeNotARetryableWriteCommand       = 50768
	codeIDLFieldMissing                 = 40414
	codeIDLUnknownField                 = 40415

	// Codes mongod has no name for (codeName "Location<code>").
	codeSortKeyOrdering    = 15975
	codeSortNoKeys         = 15976
	codeLimitNotPositive   = 15958
	codeUnknownGroupOp     = 15952
	codeGroupFieldDotted   = 40235
	codeStageOneField      = 40323
	codeUnrecognizedStage  = 40324
	codeBadRegexOption     = 51108
	codeSkipNegative       = 5107200
	codeCountFieldEmpty    = 40156
	codeCountFieldDollar   = 40158
	codeCountFieldDotted   = 40160
	codeGroupIDRequired    = 15955
	codeProjectionEmpty    = 51272
	codeInclusionInExclude = 31253
	codeExclusionInInclude = 31254
	codePathCollision      = 31250
	codeFieldPathDollar    = 16410
	codeUndefinedVariable  = 17276
	codeNewRootNotObject   = 40228
	codeUnwindPath         = 28818
	codePositionalNoMatch  = 51246
)

// codeNames are the codeName of each code, as MongoDB names them.
var codeNames = map[int32]string{
	codeInternalError:               "InternalError",
	codeBadValue:                    "BadValue",
	codeInvalidLength:               "InvalidLength",
	codeUnauthorized:                "Unauthorized",
	codeTypeMismatch:                "TypeMismatch",
	codeProtocolError:               "ProtocolError",
	codeAuthenticationFailed:        "AuthenticationFailed",
	codeCursorNotFound:              "CursorNotFound",
	codeCommandNotFound:             "CommandNotFound",
	codeInvalidNamespace:            "InvalidNamespace",
	codeMechanismUnavailable:        "MechanismUnavailable",
	codeUnsupportedOpQueryCommand:   "UnsupportedOpQueryCommand",
	codeLoadBalancerSupportMismatch: "LoadBalancerSupportMismatch",
	codeDuplicateKey:                "DuplicateKey",
	codeMissingDB:                   "Location40571",

	codeFailedToParse:                      "FailedToParse",
	codeOverflow:                           "Overflow",
	codeNamespaceNotFound:                  "NamespaceNotFound",
	codeIndexNotFound:                      "IndexNotFound",
	codePathNotViable:                      "PathNotViable",
	codeConflictingUpdateOperators:         "ConflictingUpdateOperators",
	codeNamespaceExists:                    "NamespaceExists",
	codeDollarPrefixedFieldName:            "DollarPrefixedFieldName",
	codeInvalidIDField:                     "InvalidIdField",
	codeNotSingleValueField:                "NotSingleValueField",
	codeEmptyFieldName:                     "EmptyFieldName",
	codeImmutableField:                     "ImmutableField",
	codeCannotCreateIndex:                  "CannotCreateIndex",
	codeIndexOptionsConflict:               "IndexOptionsConflict",
	codeIndexKeySpecsConflict:              "IndexKeySpecsConflict",
	codeInvalidPipelineOperator:            "InvalidPipelineOperator",
	codeCannotIndexParallelArrays:          "CannotIndexParallelArrays",
	codeInvalidIndexSpecificationOption:    "InvalidIndexSpecificationOption",
	codeTransactionTooOld:                  "TransactionTooOld",
	codeTooManyLogicalSessions:             "TooManyLogicalSessions",
	codeBSONObjectTooLarge:                 "BSONObjectTooLarge",
	codeNotARetryableWriteCommand:          "NotARetryableWriteCommand",
	codeIDLUnknownField:                    "IDLUnknownField",
	codeTransactionCommitted:               "TransactionCommitted",
	codeOperationNotSupportedInTransaction: "OperationNotSupportedInTransaction",
}

// cmdError is a command's failure, which becomes the reply
// {ok: 0, errmsg, code, codeName}.
type cmdError struct {
	code int32
	msg  string
	// extra are more fields of the reply, such as a duplicate key error's
	// keyPattern and keyValue.
	extra bson.D
	// wait, on a write outside transactions that met a lock, is the
	// transaction to wait for before the write runs again (errLocked).
	wait *transaction
}

// errorf returns a command failure with code and a formatted errmsg.
func errorf(code int32, format string, args ...any) *cmdError {
	return &cmdError{code: code, msg: fmt.Sprintf(format, args...)}
}

func (e *cmdError) Error() string {
	return fmt.Sprintf("%s (%s, code %d)", e.msg, codeName(e.code), e.code)
}

// asCmdError returns err as a *cmdError, wrapping any other error as an
// InternalError.
func asCmdError(err error) *cmdError {
	var ce *cmdError
	if errors.As(err, &ce) {
		return ce
	}
	return errorf(codeInternalError, "%v", err)
}

// codeName returns MongoDB's name for code.
func codeName(code int32) string {
	if n, ok := codeNames[code]; ok {
		return n
	}
	return fmt.Sprintf("Location%d", code)
}

// errorReply encodes the reply document of a failed command.
// labels are its errorLabels, if any; tail are fields that follow them
// (the topologyVersion of a state change error).
func errorReply(e *cmdError, labels []string, tail ...bson.E) bson.Raw {
	d := bson.D{
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: e.msg},
		{Key: "code", Value: e.code},
		{Key: "codeName", Value: codeName(e.code)},
	}
	d = append(d, e.extra...)
	if len(labels) > 0 {
		d = append(d, bson.E{Key: "errorLabels", Value: labels})
	}
	return mustMarshal(append(d, tail...))
}

// authFailed is the failure of every authentication attempt, which says no
// more than MongoDB does.
func authFailed() *cmdError {
	return errorf(codeAuthenticationFailed, "Authentication failed.")
}

// mustMarshal encodes a document built by the server itself, which always
// encodes; a failure is a bug in this package.
func mustMarshal(d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("mongotest: encoding a reply: %v", err))
	}
	return b
}
