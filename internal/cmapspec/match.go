package cmapspec

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// The event types of the specification, by their test names.
var (
	eventTypes = []pool.EventType{
		pool.PoolCreated, pool.PoolReady, pool.PoolCleared, pool.PoolClosed,
		pool.ConnectionCreated, pool.ConnectionReady, pool.ConnectionClosed,
		pool.ConnectionCheckOutStarted, pool.ConnectionCheckOutFailed,
		pool.ConnectionCheckedOut, pool.ConnectionCheckedIn,
	}
	eventNames = func() map[string]bool {
		m := make(map[string]bool)
		for _, t := range eventTypes {
			m[t.String()] = true
		}
		return m
	}()
)

// EventDoc returns e as the JSON document the spec tests match against, with
// only the fields the specification gives events of its type, and of those
// only the ones the pool set: an address, connection id, duration, reason or
// service id the pool left at its zero value is absent (the pool never sets
// a duration of 0, nor a connection id of 0), so that the tests' "exists"
// checks (the placeholder 42) fail for a value the pool did not give.
// Numbers are float64, as encoding/json decodes the expected documents.
func EventDoc(e pool.Event) map[string]any {
	doc := map[string]any{"type": e.Type.String()}
	set := func(key string, v any, isSet bool) {
		if isSet {
			doc[key] = v
		}
	}
	set("address", e.Address, e.Address != "")
	switch e.Type {
	case pool.PoolCreated:
		if e.Options != nil {
			opts := make(map[string]any, len(e.Options))
			for k, v := range e.Options {
				opts[k] = float64(v)
			}
			doc["options"] = opts
		}
	case pool.PoolCleared:
		doc["interruptInUseConnections"] = e.Interrupt
		set("serviceId", e.ServiceID.String(), !e.ServiceID.IsZero())
	case pool.ConnectionCreated, pool.ConnectionReady, pool.ConnectionClosed,
		pool.ConnectionCheckedOut, pool.ConnectionCheckedIn:
		set("connectionId", float64(e.ConnectionID), e.ConnectionID != 0)
	}
	switch e.Type {
	case pool.ConnectionReady, pool.ConnectionCheckedOut, pool.ConnectionCheckOutFailed:
		set("duration", float64(e.Duration)/float64(time.Millisecond), e.Duration != 0)
	}
	switch e.Type {
	case pool.ConnectionClosed, pool.ConnectionCheckOutFailed:
		set("reason", e.Reason, e.Reason != "")
	}
	return doc
}

// Match asserts that actual MATCHES expected, as the README of the format
// defines it: expected is a subset of actual, 42 and "42" mean "any value
// that exists". exists says whether actual exists at all. It returns a
// description of the first difference, "" if they match; path names the
// value in the description.
func Match(path string, expected, actual any, exists bool) string {
	if expected == float64(42) || expected == "42" {
		if !exists || actual == nil {
			return path + ": missing, want any value"
		}
		return ""
	}
	if !exists {
		return fmt.Sprintf("%s: missing, want %v", path, expected)
	}
	if jsonType(expected) != jsonType(actual) {
		return fmt.Sprintf("%s: got %v (%s), want %v (%s)", path, actual, jsonType(actual), expected, jsonType(expected))
	}
	switch exp := expected.(type) {
	case []any:
		act := actual.([]any)
		for i, v := range exp {
			var a any
			if i < len(act) {
				a = act[i]
			}
			if d := Match(fmt.Sprintf("%s[%d]", path, i), v, a, i < len(act)); d != "" {
				return d
			}
		}
	case map[string]any:
		act := actual.(map[string]any)
		keys := make([]string, 0, len(exp))
		for k := range exp {
			keys = append(keys, k)
		}
		// "type" first: a wrong type explains the other differences.
		slices.SortFunc(keys, func(a, b string) int {
			switch {
			case a == b:
				return 0
			case a == "type":
				return -1
			case b == "type":
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, k := range keys {
			a, ok := act[k]
			if d := Match(path+"."+k, exp[k], a, ok); d != "" {
				return d
			}
		}
	default:
		if expected != actual {
			return fmt.Sprintf("%s: got %v, want %v", path, actual, expected)
		}
	}
	return ""
}

// jsonType names the JSON type of a value as encoding/json decodes it.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("Go %T", v)
}

// errorKind is an error type the spec tests name, by the Go name of the
// pool's type for it.
type errorKind struct {
	name  string
	match func(error) (address string, ok bool)
}

// errorKindOf describes the pool's error type *T, named after T, found in an
// error chain with errors.As.
func errorKindOf[T any, E interface {
	*T
	error
}](address func(E) string) errorKind {
	return errorKind{
		name: reflect.TypeFor[T]().Name(),
		match: func(err error) (string, bool) {
			var e E
			if errors.As(err, &e) {
				return address(e), true
			}
			return "", false
		},
	}
}

var errorKinds = func() map[string]errorKind {
	m := make(map[string]errorKind)
	for _, k := range []errorKind{
		errorKindOf(func(e *pool.PoolClosedError) string { return e.Address }),
		errorKindOf(func(e *pool.PoolClearedError) string { return e.Address }),
		errorKindOf(func(e *pool.WaitQueueTimeoutError) string { return e.Address }),
		errorKindOf(func(e *pool.ConnectionError) string { return e.Address }),
	} {
		m[k.name] = k
	}
	return m
}()

// MatchError asserts that err MATCHES the expected error of a test file. It
// returns a description of the first difference, "" if it matches.
func MatchError(expected map[string]any, err error) string {
	address, hasAddress := "", false
	if exp, ok := expected["type"]; ok && exp != float64(42) && exp != "42" {
		name, ok := exp.(string)
		if !ok {
			return fmt.Sprintf("error.type is not a string: %v", exp)
		}
		k, ok := errorKinds[name]
		if !ok {
			return fmt.Sprintf("error.type %q: the runner knows no such error type", name)
		}
		if address, hasAddress = k.match(err); !hasAddress {
			return fmt.Sprintf("error.type: got %T (%v), want %s", err, err, name)
		}
	} else if _, ok := expected["address"]; ok {
		for _, k := range errorKinds {
			if address, hasAddress = k.match(err); hasAddress {
				break
			}
		}
	}
	if exp, ok := expected["message"]; ok && exp != float64(42) && exp != "42" {
		msg, ok := exp.(string)
		if !ok {
			return fmt.Sprintf("error.message is not a string: %v", exp)
		}
		// The pool's errors add details to the specification's message
		// (the address, the limits that ended a wait...) in Error; the
		// message the test names is what their Message method returns.
		actual := err.Error()
		var m interface{ Message() string }
		if errors.As(err, &m) {
			actual = m.Message()
		}
		if actual != msg {
			return fmt.Sprintf("error.message: got %q, want %q", actual, msg)
		}
	}
	if exp, ok := expected["address"]; ok {
		var actual any
		if hasAddress {
			actual = address
		}
		if d := Match("error.address", exp, actual, hasAddress); d != "" {
			return d
		}
	}
	return ""
}
