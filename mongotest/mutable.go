package mongotest

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// mval is a value of a document being changed by an update: raw bytes
// until a change reaches into it, then a document (doc) or an array (arr,
// with isArr) of values of its own. Encoding copies the untouched parts
// byte for byte.
type mval struct {
	raw   bson.RawValue
	doc   *mdoc
	arr   []*mval
	isArr bool
}

// mdoc is a document being changed: its fields, in order.
type mdoc struct {
	fields []mfield
}

type mfield struct {
	key string
	val *mval
}

// newMdoc returns doc as a document to change.
func newMdoc(doc bson.Raw) *mdoc {
	elems, _ := doc.Elements()
	d := &mdoc{fields: make([]mfield, 0, len(elems))}
	for _, e := range elems {
		d.fields = append(d.fields, mfield{e.Key(), &mval{raw: e.Value()}})
	}
	return d
}

// asDoc returns v as a document to change, if it is one.
func (v *mval) asDoc() (*mdoc, bool) {
	if v.doc != nil {
		return v.doc, true
	}
	if v.isArr || v.raw.Type != bson.TypeEmbeddedDocument {
		return nil, false
	}
	v.doc = newMdoc(v.raw.Document())
	v.raw = bson.RawValue{}
	return v.doc, true
}

// asArray reports whether v is an array and, if it is, makes its elements
// changeable (v.arr).
func (v *mval) asArray() bool {
	if v.isArr {
		return true
	}
	if v.doc != nil || v.raw.Type != bson.TypeArray {
		return false
	}
	vals := arrayValues(v.raw)
	v.arr = make([]*mval, len(vals))
	for i, e := range vals {
		v.arr[i] = &mval{raw: e}
	}
	v.isArr, v.raw = true, bson.RawValue{}
	return true
}

// set replaces v with the raw value r.
func (v *mval) set(r bson.RawValue) { *v = mval{raw: r} }

// value encodes v.
func (v *mval) value() bson.RawValue {
	switch {
	case v.doc != nil:
		return docValue(v.doc.encode())
	case v.isArr:
		vals := make([]bson.RawValue, len(v.arr))
		for i, e := range v.arr {
			vals[i] = e.value()
		}
		return arrayValue(vals)
	}
	return v.raw
}

// encode encodes d.
func (d *mdoc) encode() bson.Raw {
	var b docBuilder
	for _, f := range d.fields {
		b.append(f.key, f.val.value())
	}
	return b.doc()
}

// get returns the field key, or nil.
func (d *mdoc) get(key string) *mval {
	for _, f := range d.fields {
		if f.key == key {
			return f.val
		}
	}
	return nil
}

// put sets the field key to v, in place if it exists, else at the end.
func (d *mdoc) put(key string, v *mval) {
	for i, f := range d.fields {
		if f.key == key {
			d.fields[i].val = v
			return
		}
	}
	d.fields = append(d.fields, mfield{key, v})
}

// remove removes the field key and reports whether it existed.
func (d *mdoc) remove(key string) bool {
	for i, f := range d.fields {
		if f.key == key {
			d.fields = append(d.fields[:i], d.fields[i+1:]...)
			return true
		}
	}
	return false
}

// moveFirst moves the field key, if any, to the front, where MongoDB keeps
// _id.
func (d *mdoc) moveFirst(key string) {
	for i, f := range d.fields {
		if f.key == key {
			copy(d.fields[1:i+1], d.fields[:i])
			d.fields[0] = f
			return
		}
	}
}

// maxArrayPadding bounds the nulls a $set past the end of an array may
// add, as in MongoDB.
const maxArrayPadding = 1500000

// lookup returns the value at path under root (a document), or nil if the
// path reaches nothing.
func lookup(root *mval, path []string) *mval {
	cur := root
	for _, p := range path {
		switch d, ok := cur.asDoc(); {
		case ok:
			if cur = d.get(p); cur == nil {
				return nil
			}
		case cur.asArray():
			i, ok := arrayIndex(p)
			if !ok || i >= len(cur.arr) {
				return nil
			}
			cur = cur.arr[i]
		default:
			return nil
		}
	}
	return cur
}

// pathError is MongoDB's PathNotViable: the path goes through a value that
// cannot hold the next field.
func pathError(field, key string, v *mval) error {
	return errorf(codePathNotViable, "Cannot create field '%s' in element {%s: %s}", field, key, formatValue(v.value()))
}

// setPath sets the value at path under root (a document) to r, creating
// the documents on the way, and padding arrays with nulls up to a numeric
// index, as MongoDB's $set does.
func setPath(root *mval, path []string, r bson.RawValue) error {
	cur, key := root, ""
	for i, p := range path {
		last := i == len(path)-1
		var next *mval
		switch d, ok := cur.asDoc(); {
		case ok:
			next = d.get(p)
			if next == nil {
				next = &mval{}
				if !last {
					next.doc = &mdoc{}
				}
				d.put(p, next)
			}
		case cur.asArray():
			idx, ok := arrayIndex(p)
			if !ok {
				return pathError(p, key, cur)
			}
			if idx >= len(cur.arr) {
				if idx-len(cur.arr) > maxArrayPadding {
					return errorf(codeBadValue, "can't backfill more than %d elements", maxArrayPadding)
				}
				for len(cur.arr) < idx {
					cur.arr = append(cur.arr, &mval{raw: nullValue})
				}
				next = &mval{}
				if !last {
					next.doc = &mdoc{}
				}
				cur.arr = append(cur.arr, next)
			} else {
				next = cur.arr[idx]
			}
		default:
			return pathError(p, key, cur)
		}
		if last {
			next.set(r)
			return nil
		}
		cur, key = next, p
	}
	return nil
}

// unsetPath removes the field at path under root; an array element becomes
// null, as MongoDB's $unset does. It reports whether there was a value.
func unsetPath(root *mval, path []string) bool {
	parent := lookup(root, path[:len(path)-1])
	if parent == nil {
		return false
	}
	last := path[len(path)-1]
	if d, ok := parent.asDoc(); ok {
		return d.remove(last)
	}
	if parent.asArray() {
		if i, ok := arrayIndex(last); ok && i < len(parent.arr) {
			parent.arr[i].set(nullValue)
			return true
		}
	}
	return false
}

// elementsOf returns the elements of the array v as raw values.
func elementsOf(v *mval) []bson.RawValue {
	if v.isArr {
		out := make([]bson.RawValue, len(v.arr))
		for i, e := range v.arr {
			out[i] = e.value()
		}
		return out
	}
	return arrayValues(v.raw)
}

// typeName returns MongoDB's name of the type of v, as its messages give
// it.
func typeName(t bson.Type) string {
	for name, tt := range typeAliases {
		if tt == t {
			return name
		}
	}
	return "type " + strconv.Itoa(int(t))
}
