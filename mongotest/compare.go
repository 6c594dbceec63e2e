package mongotest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"math/big"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file holds MongoDB's comparison of BSON values, which queries,
// sorts, indexes, $min/$max and distinct share: values of different types
// compare by the rank of their type, numbers compare by value whatever
// their type (int32, int64, double, decimal128), strings by their bytes
// (the simple collation), documents and arrays field by field.

// typeClass is the rank of a BSON type in MongoDB's comparison order; types
// of one class (the numbers; strings and symbols) compare by value.
func typeClass(t bson.Type) int {
	switch t {
	case bson.TypeMinKey:
		return 1
	case 0, bson.TypeUndefined: // 0: a missing value, as a sort sees it
		return 2
	case bson.TypeNull:
		return 3
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return 4
	case bson.TypeString, bson.TypeSymbol:
		return 5
	case bson.TypeEmbeddedDocument:
		return 6
	case bson.TypeArray:
		return 7
	case bson.TypeBinary:
		return 8
	case bson.TypeObjectID:
		return 9
	case bson.TypeBoolean:
		return 10
	case bson.TypeDateTime:
		return 11
	case bson.TypeTimestamp:
		return 12
	case bson.TypeRegex:
		return 13
	case bson.TypeDBPointer:
		return 14
	case bson.TypeJavaScript:
		return 15
	case bson.TypeCodeWithScope:
		return 16
	case bson.TypeMaxKey:
		return 17
	}
	return 18 // not a BSON type: Validate refuses such documents
}

const numberClass = 4

// compareValues returns -1, 0 or 1 as a sorts before, with or after b in
// MongoDB's order.
func compareValues(a, b bson.RawValue) int {
	ca, cb := typeClass(a.Type), typeClass(b.Type)
	if ca != cb {
		return cmp.Compare(ca, cb)
	}
	switch ca {
	case numberClass:
		return compareNumbers(a, b)
	case 5: // strings and symbols
		return strings.Compare(stringOf(a), stringOf(b))
	case 6, 7:
		return compareDocs(a.Value, b.Value, a.Type == bson.TypeEmbeddedDocument)
	case 8: // binary: length, then subtype, then bytes
		la, lb := len(a.Value), len(b.Value)
		if la != lb {
			return cmp.Compare(la, lb)
		}
		return bytes.Compare(safeFrom(a.Value, 4), safeFrom(b.Value, 4))
	case 10: // false < true
		ba, _ := a.BooleanOK()
		bb, _ := b.BooleanOK()
		return cmp.Compare(boolInt(ba), boolInt(bb))
	case 11:
		da, _ := a.DateTimeOK()
		db, _ := b.DateTimeOK()
		return cmp.Compare(da, db)
	case 12: // timestamps compare as unsigned (time, increment)
		ta, ia, _ := a.TimestampOK()
		tb, ib, _ := b.TimestampOK()
		if ta != tb {
			return cmp.Compare(ta, tb)
		}
		return cmp.Compare(ia, ib)
	case 13:
		pa, oa, _ := a.RegexOK()
		pb, ob, _ := b.RegexOK()
		if c := strings.Compare(pa, pb); c != 0 {
			return c
		}
		return strings.Compare(oa, ob)
	case 1, 2, 3, 17: // MinKey, undefined and missing, null, MaxKey
		return 0
	}
	return bytes.Compare(a.Value, b.Value) // ObjectId, DBPointer, code
}

// compareDocs compares the documents (or arrays) a and b element by
// element: the type class, then (for documents) the field name, then the
// value; the shorter one sorts first when one is a prefix of the other.
func compareDocs(a, b []byte, names bool) int {
	ea, _ := bson.Raw(a).Elements()
	eb, _ := bson.Raw(b).Elements()
	for i := 0; i < len(ea) && i < len(eb); i++ {
		va, vb := ea[i].Value(), eb[i].Value()
		if c := cmp.Compare(typeClass(va.Type), typeClass(vb.Type)); c != 0 {
			return c
		}
		if names {
			if c := strings.Compare(ea[i].Key(), eb[i].Key()); c != 0 {
				return c
			}
		}
		if c := compareValues(va, vb); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(ea), len(eb))
}

// compareNumbers compares two numbers of any BSON numeric type exactly. NaN
// sorts before every other number and equals itself, as in MongoDB; the
// range operators of queries treat it apart (see comparePred).
func compareNumbers(a, b bson.RawValue) int {
	ia, aInt := intOf(a)
	ib, bInt := intOf(b)
	if aInt && bInt {
		return cmp.Compare(ia, ib)
	}
	if a.Type == bson.TypeDecimal128 || b.Type == bson.TypeDecimal128 {
		return compareExact(a, b)
	}
	fa, fb := floatOf(a), floatOf(b)
	switch {
	case math.IsNaN(fa) || math.IsNaN(fb):
		return cmp.Compare(boolInt(!math.IsNaN(fa)), boolInt(!math.IsNaN(fb)))
	case aInt:
		return -compareFloatInt(fb, ia)
	case bInt:
		return compareFloatInt(fa, ib)
	}
	return cmpFloat(fa, fb)
}

// compareFloatInt compares the double f with the integer i exactly (a
// conversion of i to a double may round).
func compareFloatInt(f float64, i int64) int {
	switch {
	case f < -(1 << 63):
		return -1
	case f >= 1<<63:
		return 1
	}
	t := math.Trunc(f)
	if c := cmp.Compare(int64(t), i); c != 0 {
		return c
	}
	return cmpFloat(f, t) // the fraction decides
}

// compareExact compares numbers of which at least one is a decimal128,
// through exact rationals; NaN sorts first, infinities at the ends.
func compareExact(a, b bson.RawValue) int {
	ra, sa := ratOf(a)
	rb, sb := ratOf(b)
	if sa != 0 || sb != 0 || ra == nil || rb == nil {
		return cmp.Compare(sa, sb) // specials: -2 NaN, -1 -Inf, 0 finite, 1 +Inf
	}
	return ra.Cmp(rb)
}

// ratOf returns the exact value of the number v, or a special: -2 for NaN,
// -1 for -Infinity, 1 for +Infinity (the finite numbers rank 0 among them).
func ratOf(v bson.RawValue) (*big.Rat, int) {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		i, _ := v.AsInt64OK()
		return new(big.Rat).SetInt64(i), 0
	case bson.TypeDouble:
		f := v.Double()
		switch {
		case math.IsNaN(f):
			return nil, -2
		case math.IsInf(f, -1):
			return nil, -1
		case math.IsInf(f, 1):
			return nil, 1
		}
		return new(big.Rat).SetFloat64(f), 0
	case bson.TypeDecimal128:
		d := v.Decimal128()
		switch {
		case d.IsNaN():
			return nil, -2
		case d.IsInf() < 0:
			return nil, -1
		case d.IsInf() > 0:
			return nil, 1
		}
		bi, exp, err := d.BigInt()
		if err != nil {
			return nil, -2
		}
		r := new(big.Rat).SetInt(bi)
		if exp != 0 {
			p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
			if exp > 0 {
				r.Mul(r, new(big.Rat).SetInt(p))
			} else {
				r.Quo(r, new(big.Rat).SetInt(p))
			}
		}
		return r, 0
	}
	return nil, -2
}

// intOf returns v as an integer when it is an int32 or int64.
func intOf(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32()), true
	case bson.TypeInt64:
		return v.Int64(), true
	}
	return 0, false
}

// floatOf returns the number v as a double (rounded for a long integer or
// a decimal).
func floatOf(v bson.RawValue) float64 {
	switch v.Type {
	case bson.TypeDouble:
		return v.Double()
	case bson.TypeInt32:
		return float64(v.Int32())
	case bson.TypeInt64:
		return float64(v.Int64())
	case bson.TypeDecimal128:
		f, err := strconv.ParseFloat(v.Decimal128().String(), 64)
		if err != nil {
			return math.NaN()
		}
		return f
	}
	return math.NaN()
}

// isNumber reports whether v is of a numeric BSON type.
func isNumber(v bson.RawValue) bool { return typeClass(v.Type) == numberClass }

// stringOf returns the string of a string or symbol value.
func stringOf(v bson.RawValue) string {
	if s, ok := v.StringValueOK(); ok {
		return s
	}
	s, _ := v.SymbolOK()
	return s
}

// equalValues reports whether MongoDB considers a and b equal.
func equalValues(a, b bson.RawValue) bool { return compareValues(a, b) == 0 }

// valueKey returns a string that is the same for two values exactly when
// compareValues finds them equal: numbers of any type with one value share
// a key, and so do documents whose fields are equal that way. It keys the
// indexes, $group, $addToSet and distinct.
func valueKey(v bson.RawValue) string {
	return string(appendKey(nil, v))
}

// appendKey appends the key of v (see valueKey) to dst. Every part that
// varies in length is length-prefixed, so that no two values share a key
// by accident.
func appendKey(dst []byte, v bson.RawValue) []byte {
	class := typeClass(v.Type)
	dst = append(dst, byte(class))
	switch class {
	case numberClass:
		return appendString(dst, numberKey(v))
	case 5:
		return appendString(dst, stringOf(v))
	case 6, 7:
		elems, _ := bson.Raw(v.Value).Elements()
		for _, e := range elems {
			dst = append(dst, 1) // another element follows
			if class == 6 {
				dst = appendString(dst, e.Key())
			}
			dst = appendKey(dst, e.Value())
		}
		return append(dst, 0)
	case 1, 2, 3, 17:
		return dst
	case 10:
		b, _ := v.BooleanOK()
		return append(dst, byte(boolInt(b)))
	}
	return appendString(dst, string(v.Value))
}

// appendString appends s with its length.
func appendString(dst []byte, s string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// numberKey is the part of valueKey for a number: one string per value,
// whatever the type that holds it.
func numberKey(v bson.RawValue) string {
	if i, ok := intOf(v); ok {
		return strconv.FormatInt(i, 10)
	}
	if v.Type == bson.TypeDouble {
		f := v.Double()
		switch {
		case math.IsNaN(f):
			return "NaN"
		case f == math.Trunc(f) && math.Abs(f) < 1<<63:
			return strconv.FormatInt(int64(f), 10) // -0 too
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	// A decimal: as an integer or a double when it equals one exactly, so
	// that it shares their key.
	r, special := ratOf(v)
	switch special {
	case -2:
		return "NaN"
	case -1:
		return strconv.FormatFloat(math.Inf(-1), 'g', -1, 64)
	case 1:
		return strconv.FormatFloat(math.Inf(1), 'g', -1, 64)
	}
	if r.IsInt() && r.Num().IsInt64() {
		return strconv.FormatInt(r.Num().Int64(), 10)
	}
	if f, exact := r.Float64(); exact {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return "d" + r.String()
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// safeFrom returns b[i:], or nil if b is shorter.
func safeFrom(b []byte, i int) []byte {
	if len(b) < i {
		return nil
	}
	return b[i:]
}
