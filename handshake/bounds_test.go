package handshake

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/internal/testkit"
	"github.com/mongopool/mongopool/wire"
)

// TestParseClampsLimits checks that limits above MongoDB's own are lowered
// to them, and that smaller ones are kept.
func TestParseClampsLimits(t *testing.T) {
	for _, v := range []any{int32(math.MaxInt32), int64(math.MaxInt64), float64(1 << 40)} {
		d, err := Parse(okReply(t,
			bson.E{Key: "maxBsonObjectSize", Value: v},
			bson.E{Key: "maxMessageSizeBytes", Value: v},
			bson.E{Key: "maxWriteBatchSize", Value: v},
		), Options{})
		if err != nil {
			t.Fatalf("%T(%v): %v", v, v, err)
		}
		if d.MaxBSONObjectSize != 16777216 || d.MaxMessageSizeBytes != 48000000 || d.MaxWriteBatchSize != 100000 {
			t.Errorf("%T(%v): limits %d/%d/%d, want MongoDB's 16777216/48000000/100000",
				v, v, d.MaxBSONObjectSize, d.MaxMessageSizeBytes, d.MaxWriteBatchSize)
		}
	}
	// An inconsistent announcement is still refused, whatever the clamping
	// would make of it.
	_, err := Parse(okReply(t,
		bson.E{Key: "maxBsonObjectSize", Value: int32(100 << 20)},
		bson.E{Key: "maxMessageSizeBytes", Value: int32(60 << 20)},
	), Options{})
	if !errors.Is(err, ErrInvalidReply) || !strings.Contains(err.Error(), "smaller than maxBsonObjectSize") {
		t.Errorf("maxMessageSizeBytes below maxBsonObjectSize: %v", err)
	}
}

// TestParseBoundsWhatItKeeps feeds replies of 6 to 14 MB, under MaxReplySize,
// with half a million entries in the arrays Parse reads or half a million
// top-level fields, and checks that Parse allocates far less than the
// reply's size.
func TestParseBoundsWhatItKeeps(t *testing.T) {
	const n = 500_000
	mechs := testkit.HugeArrayHello("saslSupportedMechs", n, func(i int) string {
		return "SCRAM-SHA-" + strconv.Itoa(i%1000)
	})
	compression := testkit.HugeArrayHello("compression", n, func(i int) string {
		if i == n-1 {
			return "zstd" // the last one is ours
		}
		return "lz" + strconv.Itoa(i%1000)
	})
	di, fields := bsoncore.AppendDocumentStart(nil)
	for i := range n {
		fields = bsoncore.AppendInt32Element(fields, "f"+strconv.Itoa(i), int32(i))
	}
	fields = bsoncore.AppendInt32Element(fields, "maxWireVersion", 21)
	fields = bsoncore.AppendDoubleElement(fields, "ok", 1)
	fields, _ = bsoncore.AppendDocumentEnd(fields, di)
	labels := func() bson.Raw {
		idx, arr := bsoncore.AppendArrayStart(nil)
		for i := range n {
			arr = bsoncore.AppendStringElement(arr, strconv.Itoa(i), "RetryableError")
		}
		arr, _ = bsoncore.AppendArrayEnd(arr, idx)
		di, doc := bsoncore.AppendDocumentStart(nil)
		doc = bsoncore.AppendDoubleElement(doc, "ok", 0)
		doc = bsoncore.AppendStringElement(doc, "errmsg", "overloaded")
		doc = bsoncore.AppendArrayElement(doc, "errorLabels", arr)
		doc, _ = bsoncore.AppendDocumentEnd(doc, di)
		return bson.Raw(doc)
	}()

	for _, r := range []bson.Raw{mechs, compression, bson.Raw(fields), labels} {
		if len(r) > MaxReplySize {
			t.Fatalf("test reply of %d bytes is above MaxReplySize", len(r))
		}
	}
	const budget = 1 << 20 // a few small slices and maps, nothing per entry
	t.Run("saslSupportedMechs", func(t *testing.T) {
		var d *Description
		var err error
		got := testkit.Allocated(func() { d, err = Parse(mechs, Options{}) })
		if err != nil {
			t.Fatal(err)
		}
		if len(d.SaslSupportedMechs) == 0 || len(d.SaslSupportedMechs) > maxSaslMechs || d.SaslSupportedMechs[0] != "SCRAM-SHA-0" {
			t.Errorf("kept %d mechanisms, want 1 to %d starting with the first", len(d.SaslSupportedMechs), maxSaslMechs)
		}
		t.Logf("%d-byte reply: %d bytes allocated", len(mechs), got)
		if got > budget {
			t.Errorf("Parse allocated %d bytes for a %d-byte reply", got, len(mechs))
		}
	})
	t.Run("compression", func(t *testing.T) {
		var d *Description
		var err error
		got := testkit.Allocated(func() { d, err = Parse(compression, Options{Compressors: []string{"zstd"}}) })
		if err != nil || d.Compressor != "zstd" {
			t.Fatalf("compressor %q, %v; want zstd, found at the end of the list", d.Compressor, err)
		}
		t.Logf("%d-byte reply: %d bytes allocated", len(compression), got)
		if got > budget {
			t.Errorf("Parse allocated %d bytes for a %d-byte reply", got, len(compression))
		}
	})
	t.Run("top-level fields", func(t *testing.T) {
		var err error
		got := testkit.Allocated(func() { _, err = Parse(bson.Raw(fields), Options{}) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d-byte reply: %d bytes allocated", len(fields), got)
		if got > budget {
			t.Errorf("Parse allocated %d bytes for a %d-byte reply", got, len(fields))
		}
	})
	t.Run("errorLabels", func(t *testing.T) {
		var err error
		got := testkit.Allocated(func() { _, err = Parse(labels, Options{}) })
		var ce *wire.CommandError
		if !errors.As(err, &ce) || !ce.HasErrorLabel("RetryableError") {
			t.Fatalf("err %v, want a *wire.CommandError with the label", err)
		}
		t.Logf("%d-byte reply: %d bytes allocated", len(labels), got)
		if got > budget {
			t.Errorf("Parse allocated %d bytes for a %d-byte reply", got, len(labels))
		}
	})
}

// TestParseRefusesOversized checks the bounds on the reply and on the
// strings Parse copies.
func TestParseRefusesOversized(t *testing.T) {
	long := strings.Repeat("x", maxStringLen+1)
	tests := []struct {
		desc  string
		reply bson.Raw
		want  string
	}{
		{"reply", okReply(t, bson.E{Key: "pad", Value: strings.Repeat("x", MaxReplySize)}),
			fmt.Sprintf("exceeds the %d bytes a hello reply may have", MaxReplySize)},
		{"setName", okReply(t, bson.E{Key: "setName", Value: long}), fmt.Sprintf("setName of %d bytes is longer than %d", len(long), maxStringLen)},
		{"msg", okReply(t, bson.E{Key: "msg", Value: long}), fmt.Sprintf("msg of %d bytes", len(long))},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := Parse(tt.reply, Options{})
			if !errors.Is(err, ErrInvalidReply) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalidReply mentioning %q", err, tt.want)
			}
		})
	}
	// At the bounds, everything is accepted.
	withPad := func(n int) bson.Raw {
		return okReply(t, bson.E{Key: "setName", Value: long[1:]}, bson.E{Key: "msg", Value: long[1:]}, bson.E{Key: "pad", Value: strings.Repeat("x", n)})
	}
	atBound := withPad(0)
	atBound = withPad(MaxReplySize - len(atBound))
	if len(atBound) != MaxReplySize {
		t.Fatalf("test reply of %d bytes, want %d", len(atBound), MaxReplySize)
	}
	if d, err := Parse(atBound, Options{}); err != nil || d.SetName != long[1:] {
		t.Errorf("reply at the bounds: %v", err)
	}
	// Mechanism names longer than SASL allows are skipped, like non-strings.
	d, err := Parse(okReply(t, bson.E{Key: "saslSupportedMechs", Value: bson.A{strings.Repeat("M", 21), "SCRAM-SHA-256", strings.Repeat("N", 20)}}), Options{})
	if err != nil || strings.Join(d.SaslSupportedMechs, ",") != "SCRAM-SHA-256,"+strings.Repeat("N", 20) {
		t.Errorf("saslSupportedMechs %q, %v", d.SaslSupportedMechs, err)
	}
}
