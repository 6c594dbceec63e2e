package connstring

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"strings"

	"github.com/mongopool/mongopool/internal/redact"
)

// redactedText replaces a secret.
const redactedText = redact.Text

// secretFields are the fields of ConnString that are never shown.
var secretFields = map[string]bool{
	"Password":                      true,
	"TLSCertificateKeyFilePassword": true,
	"ProxyPassword":                 true,
}

// publicProperties are the authMechanismProperties whose values are not
// secrets. Any other one (AWS_SESSION_TOKEN, a misspelled name) is.
var publicProperties = map[string]bool{
	"SERVICE_NAME": true, "CANONICALIZE_HOST_NAME": true, "SERVICE_REALM": true, "SERVICE_HOST": true,
	"ENVIRONMENT": true, "TOKEN_RESOURCE": true,
}

// Redacted returns the connection string as given, with "xxxxx" in place of
// the password of the user information, the values of
// tlsCertificateKeyFilePassword and proxyPassword, an
// authMechanismProperties with a property other than the public ones
// (SERVICE_NAME, CANONICALIZE_HOST_NAME, SERVICE_REALM, SERVICE_HOST,
// ENVIRONMENT, TOKEN_RESOURCE), such as AWS_SESSION_TOKEN, and the value of
// every unknown option (which may be a misspelled secret option, such as
// "pasword="). When the connection string has no user information but an
// "@" after its host list, everything from the first colon of the host list
// up to that "@" is replaced too, in case it is a password with an unescaped
// "/" or "?".
func (c ConnString) Redacted() string {
	if len(c.redact) == 0 {
		return c.raw
	}
	return redact.Spans(c.raw, c.redact)
}

// String returns Redacted().
func (c ConnString) String() string { return c.Redacted() }

// GoString returns a Go-like representation of the exported fields, secrets
// redacted; unset fields are left out. Pointers are shown as their values.
func (c ConnString) GoString() string { return "connstring.ConnString{" + c.fields(true) + "}" }

// LogValue makes log/slog log the redacted connection string.
func (c ConnString) LogValue() slog.Value { return slog.StringValue(c.Redacted()) }

// MarshalJSON encodes the redacted connection string, as a JSON string.
func (c ConnString) MarshalJSON() ([]byte, error) { return json.Marshal(c.Redacted()) }

// Format implements fmt.Formatter, so that no verb shows a secret: %v and %s
// print Redacted(), %q quotes it, %+v prints the set fields with secrets
// redacted, %#v prints GoString().
func (c ConnString) Format(f fmt.State, verb rune) {
	switch verb {
	case 'v':
		switch {
		case f.Flag('#'):
			io.WriteString(f, c.GoString())
		case f.Flag('+'):
			io.WriteString(f, "{"+c.fields(false)+"}")
		default:
			io.WriteString(f, c.Redacted())
		}
	case 's':
		io.WriteString(f, c.Redacted())
	case 'q':
		io.WriteString(f, strconv.Quote(c.Redacted()))
	default:
		fmt.Fprintf(f, "%%!%c(connstring.ConnString=%s)", verb, c.Redacted())
	}
}

// fields renders the exported, non-zero fields, pointers dereferenced and
// secrets redacted, as "Name:value" separated by spaces, or, with goSyntax,
// as "Name:%#v" separated by commas.
//
// When the connection string may hold a password that was not
// percent-encoded in its hosts, database or options (see suspect), no field
// is shown, only the redacted connection string.
func (c ConnString) fields(goSyntax bool) string {
	if c.suspect {
		return "Redacted:" + strconv.Quote(c.Redacted()) + " (fields withheld: the user information may not be percent-encoded)"
	}
	v := reflect.ValueOf(c)
	t := v.Type()
	var parts []string
	for i := 0; i < t.NumField(); i++ {
		ft := t.Field(i)
		if !ft.IsExported() {
			continue
		}
		fv := v.Field(i)
		if fv.IsZero() {
			continue
		}
		var val any
		switch {
		case secretFields[ft.Name]:
			val = redactedText
		case ft.Name == "AuthMechanismProperties":
			props := make(map[string]string, len(c.AuthMechanismProperties))
			for k, p := range c.AuthMechanismProperties {
				if !publicProperties[k] {
					p = redactedText
				}
				props[k] = p
			}
			val = props
		case fv.Kind() == reflect.Pointer:
			val = fv.Elem().Interface()
		default:
			val = fv.Interface()
		}
		if goSyntax {
			parts = append(parts, fmt.Sprintf("%s:%#v", ft.Name, val))
		} else {
			parts = append(parts, fmt.Sprintf("%s:%v", ft.Name, val))
		}
	}
	if goSyntax {
		return strings.Join(parts, ", ")
	}
	return strings.Join(parts, " ")
}
