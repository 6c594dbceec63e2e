package unified

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// object is a document of a test file read strictly: a key the runner does not
// know is an error, and so is a value of the wrong type. Its accessors record
// the first problem in err, so that a caller reads all it needs and checks
// once.
type object struct {
	where string // its place in the file, for messages: "test \"x\" operation 2"
	doc   bson.Raw
	err   error
}

// readObject reads v as an object whose keys are among known. unsupported
// lists keys that the format defines and the runner does not implement: their
// presence is an error that says so.
func readObject(where string, v bson.RawValue, known []string, unsupported ...string) *object {
	o := &object{where: where}
	doc, ok := v.DocumentOK()
	if !ok {
		o.err = fmt.Errorf("%s: want a document, got %s", where, show(v))
		return o
	}
	o.doc = doc
	elems, err := doc.Elements()
	if err != nil {
		o.err = fmt.Errorf("%s: %w", where, err)
		return o
	}
	for _, e := range elems {
		switch k := e.Key(); {
		case slices.Contains(unsupported, k):
			o.fail("the runner does not support %q", k)
		case !slices.Contains(known, k):
			o.fail("unknown field %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return o
}

func (o *object) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%s: %s", o.where, fmt.Sprintf(format, args...))
	}
}

// has reports whether the key is present.
func (o *object) has(key string) bool {
	if o.doc == nil {
		return false
	}
	_, err := o.doc.LookupErr(key)
	return err == nil
}

// value returns the key's value; required makes its absence an error.
func (o *object) value(key string, required bool) (bson.RawValue, bool) {
	if o.doc == nil {
		return bson.RawValue{}, false
	}
	v, err := o.doc.LookupErr(key)
	if err != nil {
		if required {
			o.fail("missing required field %q", key)
		}
		return bson.RawValue{}, false
	}
	return v, true
}

func (o *object) str(key string, required bool) string {
	v, ok := o.value(key, required)
	if !ok {
		return ""
	}
	s, ok := v.StringValueOK()
	if !ok {
		o.fail("%q: want a string, got %s", key, show(v))
	}
	return s
}

func (o *object) boolean(key string) (value, present bool) {
	v, ok := o.value(key, false)
	if !ok {
		return false, false
	}
	b, ok := v.BooleanOK()
	if !ok {
		o.fail("%q: want a boolean, got %s", key, show(v))
	}
	return b, true
}

func (o *object) document(key string, required bool) bson.Raw {
	v, ok := o.value(key, required)
	if !ok {
		return nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		o.fail("%q: want a document, got %s", key, show(v))
	}
	return d
}

func (o *object) array(key string, required bool) []bson.RawValue {
	v, ok := o.value(key, required)
	if !ok {
		return nil
	}
	a, ok := v.ArrayOK()
	if !ok {
		o.fail("%q: want an array, got %s", key, show(v))
		return nil
	}
	vals, err := a.Values()
	if err != nil {
		o.fail("%q: %v", key, err)
	}
	return vals
}

func (o *object) strings(key string) []string {
	var out []string
	for i, v := range o.array(key, false) {
		s, ok := v.StringValueOK()
		if !ok {
			o.fail("%q[%d]: want a string, got %s", key, i, show(v))
			continue
		}
		out = append(out, s)
	}
	return out
}

// integer reads an int or a long, or a double with an integral value (extended
// JSON parsers may give any of them for a small number).
func (o *object) integer(key string, required bool) (int64, bool) {
	v, ok := o.value(key, required)
	if !ok {
		return 0, false
	}
	var n int64
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		n = v.AsInt64()
	case bson.TypeDouble:
		f := v.Double()
		if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			o.fail("%q: want an integer, got %s", key, show(v))
			return 0, false
		}
		n = int64(f)
	default:
		o.fail("%q: want an integer, got %s", key, show(v))
		return 0, false
	}
	return n, true
}
