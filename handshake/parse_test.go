package handshake

import (
	"errors"
	"math"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

func raw(t testing.TB, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// okReply is a minimal valid reply with extra fields appended.
func okReply(t testing.TB, extra ...bson.E) bson.Raw {
	d := bson.D{
		{Key: "isWritablePrimary", Value: true},
		{Key: "minWireVersion", Value: int32(0)},
		{Key: "maxWireVersion", Value: int32(21)},
	}
	// Let extra override the defaults above.
	for _, e := range extra {
		replaced := false
		for i := range d {
			if d[i].Key == e.Key {
				d[i] = e
				replaced = true
			}
		}
		if !replaced {
			d = append(d, e)
		}
	}
	d = append(d, bson.E{Key: "ok", Value: 1.0})
	return raw(t, d)
}

func TestParseDefaults(t *testing.T) {
	d, err := Parse(okReply(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.MaxBSONObjectSize != 16*1024*1024 || d.MaxMessageSizeBytes != 48000000 || d.MaxWriteBatchSize != 100000 {
		t.Errorf("limits = %d/%d/%d, want the defaults", d.MaxBSONObjectSize, d.MaxMessageSizeBytes, d.MaxWriteBatchSize)
	}
	if !d.IsWritablePrimary || d.MaxWireVersion != 21 || d.HasConnectionID || d.HasServiceID || d.Compressor != "" ||
		d.SaslSupportedMechs != nil || d.SpeculativeAuthenticate != nil || d.TopologyVersion != nil {
		t.Errorf("unexpected description %+v", d)
	}
}

func TestParseFields(t *testing.T) {
	oid := bson.NewObjectID()
	pid := bson.NewObjectID()
	spec := raw(t, bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: false}})
	d, err := Parse(okReply(t,
		bson.E{Key: "ismaster", Value: true},
		bson.E{Key: "isWritablePrimary", Value: false},
		bson.E{Key: "helloOk", Value: true},
		bson.E{Key: "msg", Value: "isdbgrid"},
		bson.E{Key: "maxBsonObjectSize", Value: int32(1 << 20)},
		bson.E{Key: "maxMessageSizeBytes", Value: int64(2 << 20)},
		bson.E{Key: "maxWriteBatchSize", Value: 1000.0},
		bson.E{Key: "connectionId", Value: int64(1) << 40},
		bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(30)},
		bson.E{Key: "serviceId", Value: oid},
		bson.E{Key: "saslSupportedMechs", Value: bson.A{"SCRAM-SHA-256", int32(7), "MONGODB-FUTURE"}},
		bson.E{Key: "speculativeAuthenticate", Value: spec},
		bson.E{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: pid}, {Key: "counter", Value: int64(5)}}},
		bson.E{Key: "setName", Value: "rs0"},
		bson.E{Key: "arbiterOnly", Value: true},
	), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !d.IsWritablePrimary || !d.HelloOK || !d.IsMongos() {
		t.Errorf("hints: %+v", d)
	}
	if d.MaxBSONObjectSize != 1<<20 || d.MaxMessageSizeBytes != 2<<20 || d.MaxWriteBatchSize != 1000 {
		t.Errorf("limits = %d/%d/%d", d.MaxBSONObjectSize, d.MaxMessageSizeBytes, d.MaxWriteBatchSize)
	}
	if !d.HasConnectionID || d.ConnectionID != 1<<40 {
		t.Errorf("connectionId = %d/%v", d.ConnectionID, d.HasConnectionID)
	}
	if !d.HasLogicalSessionTimeout || d.LogicalSessionTimeoutMinutes != 30 {
		t.Errorf("logicalSessionTimeoutMinutes = %d/%v", d.LogicalSessionTimeoutMinutes, d.HasLogicalSessionTimeout)
	}
	if !d.HasServiceID || d.ServiceID != oid {
		t.Errorf("serviceId = %x/%v", d.ServiceID, d.HasServiceID)
	}
	if got := strings.Join(d.SaslSupportedMechs, ","); got != "SCRAM-SHA-256,MONGODB-FUTURE" {
		t.Errorf("saslSupportedMechs = %s (unknown kept, non-strings skipped)", got)
	}
	if string(d.SpeculativeAuthenticate) != string(spec) {
		t.Errorf("speculativeAuthenticate = %s", d.SpeculativeAuthenticate)
	}
	if d.TopologyVersion == nil || d.TopologyVersion.ProcessID != pid || d.TopologyVersion.Counter != 5 {
		t.Errorf("topologyVersion = %+v", d.TopologyVersion)
	}
	if !d.IsArbiter() {
		t.Error("IsArbiter false for arbiterOnly with setName")
	}
}

func TestParseConnectionIDTypes(t *testing.T) {
	for _, v := range []any{int32(42), int64(42), 42.0} {
		d, err := Parse(okReply(t, bson.E{Key: "connectionId", Value: v}), Options{})
		if err != nil || d.ConnectionID != 42 || !d.HasConnectionID {
			t.Errorf("connectionId %T: %+v, %v", v, d, err)
		}
	}
}

func TestParseServerError(t *testing.T) {
	r := raw(t, bson.D{
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: "not now"},
		{Key: "code", Value: int32(462)},
		{Key: "codeName", Value: "IngressRequestRateLimitExceeded"},
		{Key: "errorLabels", Value: bson.A{"SystemOverloadedError", "RetryableError"}},
	})
	_, err := Parse(r, Options{})
	var ce *wire.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *wire.CommandError", err)
	}
	if ce.Code != 462 || ce.CodeName != "IngressRequestRateLimitExceeded" || ce.Message != "not now" ||
		!ce.HasErrorLabel("SystemOverloadedError") || ce.HasErrorLabel("x") {
		t.Errorf("CommandError = %+v", ce)
	}
	if !strings.Contains(err.Error(), "not now") || !strings.Contains(err.Error(), "462") ||
		!strings.Contains(err.Error(), "hello failed") {
		t.Errorf("message %q", err)
	}
}

// TestParseOKValues checks that ok is read as wire.CheckReply reads it: only
// 1 (of any numeric type) or true succeeds.
func TestParseOKValues(t *testing.T) {
	for _, v := range []any{1.0, int32(1), int64(1), true} {
		if _, err := Parse(okReply(t, bson.E{Key: "ok", Value: v}), Options{}); err != nil {
			t.Errorf("ok %T(%v): %v", v, v, err)
		}
	}
	for _, v := range []any{0.0, int32(0), int64(0), false, 2.0, math.NaN()} {
		_, err := Parse(raw(t, bson.D{{Key: "maxWireVersion", Value: int32(21)}, {Key: "ok", Value: v}}), Options{})
		var ce *wire.CommandError
		if !errors.As(err, &ce) || errors.Is(err, ErrInvalidReply) {
			t.Errorf("ok %T(%v): err = %v, want a *wire.CommandError", v, v, err)
		}
	}
	dec, _ := bson.ParseDecimal128("1")
	if _, err := Parse(raw(t, bson.D{{Key: "ok", Value: dec}}), Options{}); !errors.Is(err, ErrInvalidReply) {
		t.Errorf("decimal ok: err = %v, want ErrInvalidReply", err)
	}
}

func TestParseWireVersions(t *testing.T) {
	opts := Options{Address: "example.com:27017"}
	tests := []struct {
		min, max int32
		want     string // "" for compatible
	}{
		{0, 7, "Server at example.com:27017 reports wire version 7, but this version of mongopool requires at least 8 (MongoDB 4.2)."},
		{0, 8, ""},
		{0, 25, ""},
		{0, 99, ""},
		{25, 30, ""},
		{26, 30, "Server at example.com:27017 requires wire version 26, but this version of mongopool only supports up to 25."},
	}
	for _, tt := range tests {
		_, err := Parse(okReply(t, bson.E{Key: "minWireVersion", Value: tt.min}, bson.E{Key: "maxWireVersion", Value: tt.max}), opts)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%d-%d: %v", tt.min, tt.max, err)
			}
			continue
		}
		if err == nil || err.Error() != tt.want || !errors.Is(err, ErrIncompatible) {
			t.Errorf("%d-%d: err = %v, want %q", tt.min, tt.max, err, tt.want)
		}
	}
	// A reply without wire versions is from a server too old (defaults 0).
	r := raw(t, bson.D{{Key: "ok", Value: int32(1)}})
	if _, err := Parse(r, Options{}); !errors.Is(err, ErrIncompatible) ||
		err.Error() != "Server reports wire version 0, but this version of mongopool requires at least 8 (MongoDB 4.2)." {
		t.Errorf("no wire versions: err = %v", err)
	}
}

func TestParseLoadBalanced(t *testing.T) {
	lb := Options{LoadBalanced: true}
	_, err := Parse(okReply(t), lb)
	if !errors.Is(err, ErrLoadBalancingUnsupported) ||
		err.Error() != "Driver attempted to initialize in load balancing mode, but the server does not support this mode." {
		t.Errorf("LB without serviceId: err = %v", err)
	}
	oid := bson.NewObjectID()
	d, err := Parse(okReply(t, bson.E{Key: "serviceId", Value: oid}), lb)
	if err != nil || !d.HasServiceID || d.ServiceID != oid {
		t.Errorf("LB with serviceId: %+v, %v", d, err)
	}
	if _, err := Parse(okReply(t, bson.E{Key: "serviceId", Value: "abc"}), lb); !errors.Is(err, ErrInvalidReply) {
		t.Errorf("string serviceId: err = %v", err)
	}
	// Not load-balanced: a serviceId is kept but not required.
	if d, err := Parse(okReply(t), Options{}); err != nil || d.HasServiceID {
		t.Errorf("non-LB: %+v, %v", d, err)
	}
}

func TestParseCompression(t *testing.T) {
	tests := []struct {
		ours   []string
		theirs any // nil: no compression field
		want   string
	}{
		{[]string{"zstd", "zlib"}, bson.A{"zlib", "zstd"}, "zstd"},
		{[]string{"snappy", "zlib"}, bson.A{"zlib"}, "zlib"},
		{[]string{"snappy"}, bson.A{"zlib"}, ""},
		{[]string{"snappy"}, nil, ""},
		{nil, bson.A{"zlib"}, ""},
		{[]string{"lz4", "zlib"}, bson.A{"lz4", "zlib"}, "zlib"}, // unknown to us: never chosen
	}
	for _, tt := range tests {
		var extra []bson.E
		if tt.theirs != nil {
			extra = append(extra, bson.E{Key: "compression", Value: tt.theirs})
		}
		d, err := Parse(okReply(t, extra...), Options{Compressors: tt.ours})
		if err != nil || d.Compressor != tt.want {
			t.Errorf("ours %v theirs %v: %q, %v; want %q", tt.ours, tt.theirs, d.Compressor, err, tt.want)
		}
	}
}

func TestParseHostile(t *testing.T) {
	oid := bson.NewObjectID()
	tests := []struct {
		desc  string
		reply bson.Raw
		want  string // substring of the error
	}{
		{"empty", nil, "malformed"},
		{"garbage", bson.Raw("\x05\x00\x00"), "malformed"},
		{"truncated", okReply(t)[:20], "malformed"},
		{"no ok", raw(t, bson.D{{Key: "maxWireVersion", Value: int32(21)}}), "no ok field"},
		{"string ok", raw(t, bson.D{{Key: "ok", Value: "1"}}), "ok is a string"},
		{"negative maxBsonObjectSize", okReply(t, bson.E{Key: "maxBsonObjectSize", Value: int32(-1)}), "maxBsonObjectSize is -1"},
		{"zero maxMessageSizeBytes", okReply(t, bson.E{Key: "maxMessageSizeBytes", Value: int32(0)}), "maxMessageSizeBytes is 0"},
		{"fractional size", okReply(t, bson.E{Key: "maxBsonObjectSize", Value: 1.5}), "not an integer"},
		{"NaN size", okReply(t, bson.E{Key: "maxBsonObjectSize", Value: math.NaN()}), "not an integer"},
		{"string size", okReply(t, bson.E{Key: "maxBsonObjectSize", Value: "16MB"}), "maxBsonObjectSize is a string"},
		{"message smaller than object", okReply(t, bson.E{Key: "maxMessageSizeBytes", Value: int32(1000)}), "smaller than maxBsonObjectSize"},
		{"negative wire version", okReply(t, bson.E{Key: "minWireVersion", Value: int32(-3)}), "minWireVersion is -3"},
		{"min above max", okReply(t, bson.E{Key: "minWireVersion", Value: int32(22)}), "greater than maxWireVersion"},
		{"double wire version", okReply(t, bson.E{Key: "maxWireVersion", Value: 1e300}), "maxWireVersion"},
		{"infinite connectionId", okReply(t, bson.E{Key: "connectionId", Value: math.Inf(1)}), "connectionId"},
		{"bool connectionId", okReply(t, bson.E{Key: "connectionId", Value: true}), "connectionId is a boolean"},
		{"string session timeout", okReply(t, bson.E{Key: "logicalSessionTimeoutMinutes", Value: "30"}), "logicalSessionTimeoutMinutes is a string"},
		{"string compression", okReply(t, bson.E{Key: "compression", Value: "zlib"}), "compression: a string"},
		{"int in compression", okReply(t, bson.E{Key: "compression", Value: bson.A{int32(1)}}), "entry 0 is a 32-bit integer"},
		{"string mechs", okReply(t, bson.E{Key: "saslSupportedMechs", Value: "SCRAM-SHA-1"}), "saslSupportedMechs is a string"},
		{"array speculativeAuthenticate", okReply(t, bson.E{Key: "speculativeAuthenticate", Value: bson.A{}}), "speculativeAuthenticate is a array"},
		{"string isWritablePrimary", okReply(t, bson.E{Key: "isWritablePrimary", Value: "yes"}), "isWritablePrimary is a string"},
		{"int msg", okReply(t, bson.E{Key: "msg", Value: int32(1)}), "msg is a 32-bit integer"},
		{"topologyVersion without processId", okReply(t, bson.E{Key: "topologyVersion", Value: bson.D{{Key: "counter", Value: int64(1)}}}), "processId"},
		{"topologyVersion string counter", okReply(t, bson.E{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: oid}, {Key: "counter", Value: "1"}}}), "counter"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			d, err := Parse(tt.reply, Options{})
			if err == nil {
				t.Fatalf("accepted: %+v", d)
			}
			if !errors.Is(err, ErrInvalidReply) {
				t.Errorf("err %v is not ErrInvalidReply", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestCommandParseRoundTrip(t *testing.T) {
	// The command itself is a well-formed document that Parse would
	// reject only for its content, never by panicking.
	cmd, err := Command(Options{AppName: "x", Env: fakeEnv(nil, nil, "")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(cmd, Options{}); err == nil {
		t.Error("Parse accepted a hello command as a reply")
	}
}
