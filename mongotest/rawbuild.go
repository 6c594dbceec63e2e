package mongotest

import (
	"encoding/binary"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The helpers below build BSON documents and values from raw values, as
// the server's results need (projections, updates, $group): the values are
// copied byte for byte, so that nothing is lost or converted on the way.

// docBuilder builds a BSON document. Its zero value is an empty document.
type docBuilder struct {
	b []byte
}

// append adds the element key: v.
func (d *docBuilder) append(key string, v bson.RawValue) {
	if d.b == nil {
		d.b = make([]byte, 4, 64)
	}
	d.b = append(d.b, byte(v.Type))
	d.b = append(d.b, key...)
	d.b = append(d.b, 0)
	d.b = append(d.b, v.Value...)
}

// doc returns the document built.
func (d *docBuilder) doc() bson.Raw {
	if d.b == nil {
		d.b = make([]byte, 4, 5)
	}
	out := append(d.b, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	d.b = nil
	return out
}

// docValue returns the document built as a value.
func (d *docBuilder) docValue() bson.RawValue {
	return bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: d.doc()}
}

// arrayValue returns vals as a BSON array value.
func arrayValue(vals []bson.RawValue) bson.RawValue {
	var d docBuilder
	for i, v := range vals {
		d.append(strconv.Itoa(i), v)
	}
	return bson.RawValue{Type: bson.TypeArray, Value: d.doc()}
}

// arrayValues returns the elements of the array v.
func arrayValues(v bson.RawValue) []bson.RawValue {
	vals, _ := bson.RawArray(v.Value).Values()
	return vals
}

// docValue wraps the document doc as a value.
func docValue(doc bson.Raw) bson.RawValue {
	return bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc}
}

func int32Value(i int32) bson.RawValue {
	return bson.RawValue{Type: bson.TypeInt32, Value: binary.LittleEndian.AppendUint32(nil, uint32(i))}
}

func int64Value(i int64) bson.RawValue {
	return bson.RawValue{Type: bson.TypeInt64, Value: binary.LittleEndian.AppendUint64(nil, uint64(i))}
}

func doubleValue(f float64) bson.RawValue {
	return bson.RawValue{Type: bson.TypeDouble, Value: binary.LittleEndian.AppendUint64(nil, math.Float64bits(f))}
}

func stringValue(s string) bson.RawValue {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(s)+1))
	b = append(b, s...)
	return bson.RawValue{Type: bson.TypeString, Value: append(b, 0)}
}

func objectIDValue(id bson.ObjectID) bson.RawValue {
	return bson.RawValue{Type: bson.TypeObjectID, Value: id[:]}
}

func dateValue(ms int64) bson.RawValue {
	return bson.RawValue{Type: bson.TypeDateTime, Value: binary.LittleEndian.AppendUint64(nil, uint64(ms))}
}

func timestampValue(t, i uint32) bson.RawValue {
	return bson.RawValue{Type: bson.TypeTimestamp, Value: binary.LittleEndian.AppendUint64(nil, uint64(t)<<32|uint64(i))}
}

// nullValue is BSON null.
var nullValue = bson.RawValue{Type: bson.TypeNull}

// intValue returns i as an int32 when it fits, else as an int64, as
// MongoDB's counts are.
func intValue(i int64) bson.RawValue {
	if i >= math.MinInt32 && i <= math.MaxInt32 {
		return int32Value(int32(i))
	}
	return int64Value(i)
}

// depth returns how deeply v nests documents and arrays (0 for a scalar),
// counting no further than limit+1, so that a hostile nesting costs no more
// than the limit.
func depth(v bson.RawValue, limit int) int {
	if v.Type != bson.TypeEmbeddedDocument && v.Type != bson.TypeArray {
		return 0
	}
	if limit < 0 {
		return 1
	}
	most := 0
	elems, _ := bson.Raw(v.Value).Elements()
	for _, e := range elems {
		if d := depth(e.Value(), limit-1); d > most {
			most = d
			if most > limit {
				break
			}
		}
	}
	return most + 1
}
