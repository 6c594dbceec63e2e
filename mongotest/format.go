package mongotest

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// formatValue writes v as mongod's error messages show values: "x" for a
// string, 1 for an integer, 1.0 for an integral double, { a: 1 } for a
// document, [ 1, 2 ] for an array, ObjectId('...') for an ObjectId.
func formatValue(v bson.RawValue) string {
	var sb strings.Builder
	writeValue(&sb, v, 0)
	if s := sb.String(); len(s) > maxFormatted {
		return s[:maxFormatted] + "..."
	}
	return sb.String()
}

// maxFormatted bounds a value shown in a message, which must stay short.
const maxFormatted = 1024

// formatDoc writes a document as formatValue does.
func formatDoc(doc bson.Raw) string { return formatValue(docValue(doc)) }

// maxFormatDepth bounds the nesting a message shows.
const maxFormatDepth = 20

func writeValue(sb *strings.Builder, v bson.RawValue, depth int) {
	switch v.Type {
	case bson.TypeString:
		sb.WriteString(strconv.Quote(v.StringValue()))
	case bson.TypeSymbol:
		sb.WriteString(strconv.Quote(v.Symbol()))
	case bson.TypeInt32, bson.TypeInt64:
		sb.WriteString(strconv.FormatInt(v.AsInt64(), 10))
	case bson.TypeDouble:
		f := v.Double()
		s := strconv.FormatFloat(f, 'g', 16, 64)
		if f == math.Trunc(f) && !math.IsInf(f, 0) && !strings.ContainsAny(s, "e.") {
			s += ".0"
		}
		sb.WriteString(s)
	case bson.TypeDecimal128:
		sb.WriteString(`NumberDecimal("` + v.Decimal128().String() + `")`)
	case bson.TypeBoolean:
		sb.WriteString(strconv.FormatBool(v.Boolean()))
	case bson.TypeNull:
		sb.WriteString("null")
	case bson.TypeUndefined:
		sb.WriteString("undefined")
	case bson.TypeObjectID:
		sb.WriteString("ObjectId('" + v.ObjectID().Hex() + "')")
	case bson.TypeDateTime:
		sb.WriteString("new Date(" + strconv.FormatInt(v.DateTime(), 10) + ")")
	case bson.TypeTimestamp:
		t, i := v.Timestamp()
		sb.WriteString("Timestamp(" + strconv.FormatUint(uint64(t), 10) + ", " + strconv.FormatUint(uint64(i), 10) + ")")
	case bson.TypeRegex:
		p, o := v.Regex()
		sb.WriteString("/" + p + "/" + o)
	case bson.TypeBinary:
		st, data := v.Binary()
		sb.WriteString("BinData(" + strconv.Itoa(int(st)) + ", " + strings.ToUpper(hex.EncodeToString(data)) + ")")
	case bson.TypeMinKey:
		sb.WriteString("MinKey")
	case bson.TypeMaxKey:
		sb.WriteString("MaxKey")
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		open, end := "{", "}"
		if v.Type == bson.TypeArray {
			open, end = "[", "]"
		}
		elems, _ := bson.Raw(v.Value).Elements()
		if len(elems) == 0 {
			sb.WriteString(open + end)
			return
		}
		if depth >= maxFormatDepth {
			sb.WriteString(open + " ... " + end)
			return
		}
		sb.WriteString(open + " ")
		for i, e := range elems {
			if i > 0 {
				sb.WriteString(", ")
			}
			if v.Type == bson.TypeEmbeddedDocument {
				sb.WriteString(e.Key() + ": ")
			}
			writeValue(sb, e.Value(), depth+1)
		}
		sb.WriteString(" " + end)
	default:
		sb.WriteString(v.String())
	}
}

// formatElement writes {key: value}, as mongod's messages show one field
// of a document.
func formatElement(key string, v bson.RawValue) string {
	return "{" + key + ": " + formatValue(v) + "}"
}
