package handshake

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic, and what it
// accepts must satisfy the invariants the connection relies on.
func FuzzParse(f *testing.F) {
	oid := bson.NewObjectID()
	f.Add([]byte(okReply(f)), false)
	f.Add([]byte(okReply(f, bson.E{Key: "serviceId", Value: oid})), true)
	f.Add([]byte(okReply(f,
		bson.E{Key: "compression", Value: bson.A{"zlib", "zstd"}},
		bson.E{Key: "saslSupportedMechs", Value: bson.A{"SCRAM-SHA-1", "SCRAM-SHA-256"}},
		bson.E{Key: "speculativeAuthenticate", Value: bson.D{{Key: "conversationId", Value: int32(1)}}},
		bson.E{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: oid}, {Key: "counter", Value: int64(0)}}},
		bson.E{Key: "connectionId", Value: 7.0},
	)), false)
	f.Add([]byte(raw(f, bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "x"}, {Key: "errorLabels", Value: bson.A{"a"}}})), false)
	f.Add([]byte{}, false)
	many := bson.A{}
	for i := range 40 {
		many = append(many, "MECH-"+string(rune('A'+i%26)), int32(i))
	}
	many = append(many, "A-SASL-NAME-OF-21-BYT")
	f.Add([]byte(okReply(f,
		bson.E{Key: "saslSupportedMechs", Value: many},
		bson.E{Key: "compression", Value: bson.A{"lz4", "zstd", "snappy", "zstd"}},
		bson.E{Key: "maxBsonObjectSize", Value: int64(1) << 40},
		bson.E{Key: "maxMessageSizeBytes", Value: int64(1) << 41},
		bson.E{Key: "maxWriteBatchSize", Value: 1e10},
		bson.E{Key: "setName", Value: "rs0"},
	)), false)
	// An array whose keys are out of order, and a field repeated.
	f.Add([]byte(okReply(f, bson.E{Key: "compression", Value: bson.D{{Key: "1", Value: "zlib"}, {Key: "0", Value: "zstd"}}})), false)
	f.Add([]byte(raw(f, bson.D{{Key: "ok", Value: 1}, {Key: "maxWireVersion", Value: 21}, {Key: "maxWireVersion", Value: "x"}, {Key: "setName", Value: strings.Repeat("s", 1025)}})), false)

	f.Fuzz(func(t *testing.T, data []byte, lb bool) {
		opts := Options{LoadBalanced: lb, Compressors: []string{"zstd", "zlib", "snappy"}, Address: "h:1"}
		d, err := Parse(bson.Raw(data), opts)
		if err != nil {
			var ce *wire.CommandError
			if d != nil {
				t.Fatalf("description %+v with error %v", d, err)
			}
			if !errors.As(err, &ce) && !errors.Is(err, ErrInvalidReply) && !errors.Is(err, ErrIncompatible) &&
				!errors.Is(err, ErrLoadBalancingUnsupported) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if d.MaxBSONObjectSize <= 0 || d.MaxMessageSizeBytes < d.MaxBSONObjectSize || d.MaxWriteBatchSize <= 0 ||
			d.MaxBSONObjectSize > DefaultMaxBSONObjectSize || d.MaxMessageSizeBytes > DefaultMaxMessageSizeBytes || d.MaxWriteBatchSize > DefaultMaxWriteBatchSize {
			t.Fatalf("bad limits %+v", d)
		}
		if len(d.SaslSupportedMechs) > maxSaslMechs || len(d.SetName) > maxStringLen || len(d.Msg) > maxStringLen {
			t.Fatalf("kept too much: %d mechanisms, setName of %d bytes, msg of %d bytes", len(d.SaslSupportedMechs), len(d.SetName), len(d.Msg))
		}
		for _, m := range d.SaslSupportedMechs {
			if len(m) > maxMechNameLen {
				t.Fatalf("mechanism name of %d bytes kept", len(m))
			}
		}
		if (d.Compressor == "") != (len(d.Compressors) == 0) || len(d.Compressors) > 0 && d.Compressors[0] != d.Compressor {
			t.Fatalf("compressor %q, compressors %q", d.Compressor, d.Compressors)
		}
		if d.MinWireVersion < 0 || d.MinWireVersion > d.MaxWireVersion || d.MaxWireVersion < MinWireVersion || d.MinWireVersion > MaxWireVersion {
			t.Fatalf("bad wire versions %+v", d)
		}
		if lb && !d.HasServiceID {
			t.Fatal("load-balanced without serviceId")
		}
		switch d.Compressor {
		case "", "zstd", "zlib", "snappy":
		default:
			t.Fatalf("compressor %q", d.Compressor)
		}
		if d.SpeculativeAuthenticate != nil {
			if err := d.SpeculativeAuthenticate.Validate(); err != nil {
				t.Fatalf("invalid speculativeAuthenticate kept: %v", err)
			}
		}
	})
}
