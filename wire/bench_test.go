package wire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// BenchmarkEncodeDecode encodes a small command into a reused buffer and
// decodes it back.
func BenchmarkEncodeDecode(b *testing.B) {
	for _, checksum := range []bool{false, true} {
		name := "plain"
		m := &wire.Msg{Body: doc(b, bson.D{{Key: "find", Value: "coll"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "$db", Value: "test"}})}
		if checksum {
			name, m.Flags = "checksum", wire.ChecksumPresent
		}
		b.Run(name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				buf, err = wire.AppendMsg(buf[:0], 1, 0, m)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := wire.DecodeMsg(buf); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

// BenchmarkCompress compresses and decompresses a 5000-document insert.
func BenchmarkCompress(b *testing.B) {
	orig := testMsg(b, 5000)
	for _, c := range []compressorCase{{"snappy", wire.CompressorSnappy, 0}, {"zlib-default", wire.CompressorZlib, -1}, {"zlib-1", wire.CompressorZlib, 1}, {"zstd", wire.CompressorZstd, 0}} {
		b.Run(c.name, func(b *testing.B) {
			var buf []byte
			b.SetBytes(int64(len(orig)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = wire.AppendCompressed(buf[:0], orig, c.id, c.level); err != nil {
					b.Fatal(err)
				}
				if _, err := wire.Decompress(buf, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
