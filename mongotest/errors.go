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
}

// cmdError is a command's failure, which becomes the reply
// {ok: 0, errmsg, code, codeName}.
type cmdError struct {
	code int32
	msg  string
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
func errorReply(e *cmdError) bson.Raw {
	return mustMarshal(bson.D{
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: e.msg},
		{Key: "code", Value: e.code},
		{Key: "codeName", Value: codeName(e.code)},
	})
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
