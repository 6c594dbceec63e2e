package mongotest

import (
	"cmp"
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// value encodes v as a BSON value.
func value(t *testing.T, v any) bson.RawValue {
	t.Helper()
	b, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
	if err != nil {
		t.Fatal(err)
	}
	return bson.Raw(b).Lookup("v")
}

func TestCompareValues(t *testing.T) {
	dec := func(s string) bson.Decimal128 {
		d, err := bson.ParseDecimal128(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// Each row is in ascending order; values in one group are equal.
	ordered := [][]any{
		{bson.MinKey{}},
		{bson.Undefined{}},
		{nil},
		{math.NaN(), dec("NaN")},
		{math.Inf(-1), dec("-Infinity")},
		{int64(math.MinInt64)},
		{-1.5, dec("-1.5")},
		{int32(-1), int64(-1), -1.0},
		{0.0, math.Copysign(0, -1), int32(0), dec("0.00")},
		{dec("0.1")}, // the decimal 0.1 is less than the double nearest to it
		{0.1},
		{int32(1), int64(1), 1.0, dec("1.0")},
		{int64(1<<53 + 1)}, // not a double: must not equal 2^53 after rounding
		{float64(1 << 54)},
		{int64(math.MaxInt64)},
		{math.Inf(1), dec("Infinity")},
		{""},
		{"a", bson.Symbol("a")},
		{"b"},
		{bson.D{}},
		{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 1.0}}},
		{bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}},
		{bson.D{{Key: "b", Value: 0}}},
		{bson.D{{Key: "a", Value: "x"}}}, // the type of a field counts before its name
		{bson.A{}},
		{bson.A{1, 2}, bson.A{1.0, int64(2)}},
		{bson.A{1, 2, 3}},
		{bson.A{2}},
		{bson.Binary{Subtype: 5, Data: []byte{9}}},
		{bson.Binary{Subtype: 0, Data: []byte{1, 2}}},
		{bson.ObjectID{}},
		{bson.ObjectID{1}},
		{false},
		{true},
		{bson.DateTime(-1)},
		{bson.DateTime(0)},
		{bson.Timestamp{T: 1, I: 5}},
		{bson.Timestamp{T: 2, I: 0}},
		{bson.Regex{Pattern: "a"}},
		{bson.Regex{Pattern: "a", Options: "i"}},
		{bson.MaxKey{}},
	}
	var groups [][]bson.RawValue
	for _, row := range ordered {
		var g []bson.RawValue
		for _, v := range row {
			g = append(g, value(t, v))
		}
		groups = append(groups, g)
	}
	for i, gi := range groups {
		for j, gj := range groups {
			for _, a := range gi {
				for _, b := range gj {
					want := cmp.Compare(i, j)
					if got := compareValues(a, b); got != want {
						t.Errorf("compareValues(%v, %v) = %d, want %d", a, b, got, want)
					}
					if eq := valueKey(a) == valueKey(b); eq != (want == 0) {
						t.Errorf("valueKey(%v) == valueKey(%v) is %v, want %v", a, b, eq, want == 0)
					}
				}
			}
		}
	}
}
