package unified

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Match checks actual against expected by the rules of the format's
// "Evaluating Matches": documents match key by key in any order, a root-level
// document (root true) may have keys that expected has not and a nested one
// may not, arrays match element by element and have the same length, numbers
// (int, long, double) match when their values are equal, and the special
// operators $$exists, $$type, $$unsetOrMatches, $$lte, $$matchAsDocument,
// $$matchAsRoot and $$matchesHexBytes apply. The error says where the values
// differ; an expectation the runner cannot evaluate (an unknown operator,
// $$matchesEntity, or $$sessionLsid, which needs a test's entities) is an
// error as well.
func Match(expected, actual bson.RawValue, root bool) error {
	return (*matcher)(nil).match(expected, actual, root)
}

// matcher evaluates matches in a test, whose entities it resolves for
// $$sessionLsid; a nil matcher has no entities.
type matcher struct {
	// lsid returns the logical session id of the session entity name.
	lsid func(name string) (bson.Raw, error)
}

// match is Match, with the test's entities.
func (m *matcher) match(expected, actual bson.RawValue, root bool) error {
	return m.matchValue("", expected, actual, true, root)
}

// matchValue matches one value; present is false when actual is missing (a
// key the actual document does not have), which only some operators accept.
func (m *matcher) matchValue(path string, exp, act bson.RawValue, present, root bool) error {
	if name, arg, ok := operator(exp); ok {
		return m.applyOperator(path, name, arg, act, present, root)
	}
	if !present {
		return fmt.Errorf("%s: missing, want %s", where(path), show(exp))
	}
	switch exp.Type {
	case bson.TypeEmbeddedDocument:
		a, ok := act.DocumentOK()
		if !ok {
			return fmt.Errorf("%s: got %s %s, want a document %s", where(path), typeName(act.Type), show(act), show(exp))
		}
		return m.matchDocument(path, exp.Document(), a, root)
	case bson.TypeArray:
		a, ok := act.ArrayOK()
		if !ok {
			return fmt.Errorf("%s: got %s %s, want an array %s", where(path), typeName(act.Type), show(act), show(exp))
		}
		return m.matchArray(path, exp.Array(), a, false)
	}
	return matchScalar(path, exp, act)
}

// matchDocument matches the keys of exp in act; root allows act extra keys.
func (m *matcher) matchDocument(path string, exp, act bson.Raw, root bool) error {
	elems, err := exp.Elements()
	if err != nil {
		return fmt.Errorf("%s: malformed expected document: %w", where(path), err)
	}
	want := make(map[string]bool, len(elems))
	for _, e := range elems {
		key := e.Key()
		want[key] = true
		a, err := act.LookupErr(key)
		if err := m.matchValue(join(path, key), e.Value(), a, err == nil, false); err != nil {
			return err
		}
	}
	if root {
		return nil
	}
	got, err := act.Elements()
	if err != nil {
		return fmt.Errorf("%s: malformed document: %w", where(path), err)
	}
	for _, e := range got {
		if !want[e.Key()] {
			return fmt.Errorf("%s: unexpected key %q (%s) in a nested document, which must match exactly", where(path), e.Key(), show(e.Value()))
		}
	}
	return nil
}

// matchArray matches arrays of the same length element by element. rootElems
// says that the elements are root-level documents: the documents of an
// iterable result, such as listDatabases's.
func (m *matcher) matchArray(path string, exp, act bson.RawArray, rootElems bool) error {
	ev, err := exp.Values()
	if err != nil {
		return fmt.Errorf("%s: malformed expected array: %w", where(path), err)
	}
	av, err := act.Values()
	if err != nil {
		return fmt.Errorf("%s: malformed array: %w", where(path), err)
	}
	if len(ev) != len(av) {
		return fmt.Errorf("%s: %d elements %s, want %d: %s", where(path), len(av), show(bson.RawValue{Type: bson.TypeArray, Value: act}), len(ev), show(bson.RawValue{Type: bson.TypeArray, Value: exp}))
	}
	for i := range ev {
		if err := m.matchValue(fmt.Sprintf("%s[%d]", path, i), ev[i], av[i], true, rootElems); err != nil {
			return err
		}
	}
	return nil
}

// matchScalar compares values that are neither documents nor arrays: numbers
// by value, anything else by type and bytes.
func matchScalar(path string, exp, act bson.RawValue) error {
	if isNumber(exp.Type) && isNumber(act.Type) {
		if numbersEqual(exp, act) {
			return nil
		}
		return fmt.Errorf("%s: got %s, want %s", where(path), show(act), show(exp))
	}
	if exp.Type != act.Type {
		return fmt.Errorf("%s: got %s %s, want %s %s", where(path), typeName(act.Type), show(act), typeName(exp.Type), show(exp))
	}
	if !bytes.Equal(exp.Value, act.Value) {
		return fmt.Errorf("%s: got %s, want %s", where(path), show(act), show(exp))
	}
	return nil
}

// isNumber reports the types that compare flexibly: Decimal128 does not.
func isNumber(t bson.Type) bool {
	return t == bson.TypeInt32 || t == bson.TypeInt64 || t == bson.TypeDouble
}

func numbersEqual(a, b bson.RawValue) bool {
	if a.Type != bson.TypeDouble && b.Type != bson.TypeDouble {
		return a.AsInt64() == b.AsInt64() // exact for any two integers
	}
	return a.AsFloat64() == b.AsFloat64()
}

// operator returns the special operator of v: a document whose first and only
// key starts with "$$".
func operator(v bson.RawValue) (name string, arg bson.RawValue, ok bool) {
	doc, isDoc := v.DocumentOK()
	if !isDoc {
		return "", bson.RawValue{}, false
	}
	elems, err := doc.Elements()
	if err != nil || len(elems) != 1 || !strings.HasPrefix(elems[0].Key(), "$$") {
		return "", bson.RawValue{}, false
	}
	return elems[0].Key(), elems[0].Value(), true
}

// applyOperator evaluates a special operator against actual.
func (m *matcher) applyOperator(path, name string, arg, act bson.RawValue, present, root bool) error {
	switch name {
	case "$$exists":
		want, ok := arg.BooleanOK()
		if !ok {
			return fmt.Errorf("%s: $$exists takes a boolean, not %s", where(path), show(arg))
		}
		if want && !present {
			return fmt.Errorf("%s: missing, want it to exist", where(path))
		}
		if !want && present {
			return fmt.Errorf("%s: got %s, want it absent", where(path), show(act))
		}
		return nil
	case "$$type":
		types, err := typeSet(arg)
		if err != nil {
			return fmt.Errorf("%s: %w", where(path), err)
		}
		if !present {
			return fmt.Errorf("%s: missing, want a value of type %s", where(path), show(arg))
		}
		if !slices.Contains(types, act.Type) {
			return fmt.Errorf("%s: got %s %s, want type %s", where(path), typeName(act.Type), show(act), show(arg))
		}
		return nil
	case "$$unsetOrMatches":
		if !present {
			return nil
		}
		// It does not change whether actual is a root-level document.
		return m.matchValue(path, arg, act, true, root)
	case "$$lte":
		if !isNumber(arg.Type) {
			return fmt.Errorf("%s: $$lte takes a number, not %s", where(path), show(arg))
		}
		if !present {
			return fmt.Errorf("%s: missing, want a number <= %s", where(path), show(arg))
		}
		if !isNumber(act.Type) {
			return fmt.Errorf("%s: got %s %s, want a number <= %s", where(path), typeName(act.Type), show(act), show(arg))
		}
		if lessOrEqual(act, arg) {
			return nil
		}
		return fmt.Errorf("%s: got %s, want <= %s", where(path), show(act), show(arg))
	case "$$matchAsDocument":
		if !present {
			return fmt.Errorf("%s: missing, want an extended JSON document", where(path))
		}
		s, ok := act.StringValueOK()
		if !ok {
			return fmt.Errorf("%s: got %s %s, want an extended JSON string", where(path), typeName(act.Type), show(act))
		}
		var doc bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(s), false, &doc); err != nil {
			return fmt.Errorf("%s: %q is not an extended JSON document: %w", where(path), s, err)
		}
		// Not a root-level document, unless arg says so with $$matchAsRoot.
		return m.matchValue(path, arg, docValue(doc), true, false)
	case "$$matchAsRoot":
		want, ok := arg.DocumentOK()
		if !ok {
			return fmt.Errorf("%s: $$matchAsRoot takes a document, not %s", where(path), show(arg))
		}
		if !present {
			return fmt.Errorf("%s: missing, want a document", where(path))
		}
		got, ok := act.DocumentOK()
		if !ok {
			return fmt.Errorf("%s: got %s %s, want a document", where(path), typeName(act.Type), show(act))
		}
		return m.matchDocument(path, want, got, true)
	case "$$matchesHexBytes":
		h, ok := arg.StringValueOK()
		if !ok {
			return fmt.Errorf("%s: $$matchesHexBytes takes a string, not %s", where(path), show(arg))
		}
		want, err := hex.DecodeString(h)
		if err != nil {
			return fmt.Errorf("%s: $$matchesHexBytes: malformed hex string %q: %w", where(path), h, err)
		}
		if !present {
			return fmt.Errorf("%s: missing, want bytes %s", where(path), h)
		}
		var got []byte
		if s, ok := act.StringValueOK(); ok {
			got = []byte(s)
		} else if _, b, ok := act.BinaryOK(); ok {
			got = b
		} else {
			return fmt.Errorf("%s: got %s %s, want bytes %s", where(path), typeName(act.Type), show(act), h)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s: got bytes %x, want %s", where(path), got, strings.ToLower(h))
		}
		return nil
	case "$$sessionLsid":
		id, ok := arg.StringValueOK()
		if !ok {
			return fmt.Errorf("%s: $$sessionLsid takes a session entity's name, not %s", where(path), show(arg))
		}
		if m == nil || m.lsid == nil {
			return fmt.Errorf("%s: $$sessionLsid: no entities to find the session %q in", where(path), id)
		}
		lsid, err := m.lsid(id)
		if err != nil {
			return fmt.Errorf("%s: $$sessionLsid: %w", where(path), err)
		}
		if !present {
			return fmt.Errorf("%s: missing, want the lsid of the session %q", where(path), id)
		}
		got, ok := act.DocumentOK()
		if !ok || !sameDocument(got, lsid) {
			return fmt.Errorf("%s: got %s, want the lsid of the session %q, %s", where(path), show(act), id, show(docValue(lsid)))
		}
		return nil
	case "$$matchesEntity":
		return fmt.Errorf("%s: the runner does not support the operator %s (it saves no BSON values as entities)", where(path), name)
	case "$$placeholder":
		return fmt.Errorf("%s: $$placeholder in an expected value: the runner has nothing to replace it with", where(path))
	}
	return fmt.Errorf("%s: unknown special operator %s", where(path), name)
}

func lessOrEqual(a, b bson.RawValue) bool {
	if a.Type != bson.TypeDouble && b.Type != bson.TypeDouble {
		return a.AsInt64() <= b.AsInt64()
	}
	x, y := a.AsFloat64(), b.AsFloat64()
	return x <= y && !math.IsNaN(x)
}

// typeNames are the $type names of the query language, as $$type takes them.
var typeNames = map[string][]bson.Type{
	"double":              {bson.TypeDouble},
	"string":              {bson.TypeString},
	"object":              {bson.TypeEmbeddedDocument},
	"array":               {bson.TypeArray},
	"binData":             {bson.TypeBinary},
	"undefined":           {bson.TypeUndefined},
	"objectId":            {bson.TypeObjectID},
	"bool":                {bson.TypeBoolean},
	"date":                {bson.TypeDateTime},
	"null":                {bson.TypeNull},
	"regex":               {bson.TypeRegex},
	"dbPointer":           {bson.TypeDBPointer},
	"javascript":          {bson.TypeJavaScript},
	"symbol":              {bson.TypeSymbol},
	"javascriptWithScope": {bson.TypeCodeWithScope},
	"int":                 {bson.TypeInt32},
	"timestamp":           {bson.TypeTimestamp},
	"long":                {bson.TypeInt64},
	"decimal":             {bson.TypeDecimal128},
	"minKey":              {bson.TypeMinKey},
	"maxKey":              {bson.TypeMaxKey},
	"number":              {bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128},
}

// typeSet returns the types a $$type argument names.
func typeSet(arg bson.RawValue) ([]bson.Type, error) {
	var names []string
	if s, ok := arg.StringValueOK(); ok {
		names = []string{s}
	} else if a, ok := arg.ArrayOK(); ok {
		vals, err := a.Values()
		if err != nil || len(vals) == 0 {
			return nil, fmt.Errorf("$$type: malformed or empty list of types %s", show(arg))
		}
		for _, v := range vals {
			s, ok := v.StringValueOK()
			if !ok {
				return nil, fmt.Errorf("$$type: the list %s has a non-string", show(arg))
			}
			names = append(names, s)
		}
	} else {
		return nil, fmt.Errorf("$$type takes a type name or a list of them, not %s", show(arg))
	}
	var out []bson.Type
	for _, n := range names {
		ts, ok := typeNames[n]
		if !ok {
			return nil, fmt.Errorf("$$type: unknown type name %q", n)
		}
		out = append(out, ts...)
	}
	return out, nil
}

// typeName returns the $type name of t, for messages.
func typeName(t bson.Type) string {
	for name, ts := range typeNames {
		if len(ts) == 1 && ts[0] == t {
			return name
		}
	}
	return t.String()
}

// show writes v as relaxed extended JSON, for messages.
func show(v bson.RawValue) string {
	out, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil || len(out) < 7 {
		return v.String()
	}
	return string(out[5 : len(out)-1]) // {"v":...}
}

func docValue(d bson.Raw) bson.RawValue {
	return bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: d}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return "value"
	}
	return path
}
