package mongotest_test

import (
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestDriverCompression negotiates each compressor with the official
// driver and checks on the server that requests arrived compressed with it
// and that replies went back compressed with it.
func TestDriverCompression(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server []string // the server's compressors; nil for the default (all)
		client string   // the URI's compressors option
		want   string
	}{
		{"snappy", nil, "snappy", "snappy"},
		{"zlib", nil, "zlib", "zlib"},
		{"zstd", nil, "zstd", "zstd"},
		{"client order", nil, "zstd,snappy", "zstd"},
		{"server subset", []string{"zlib"}, "snappy,zlib", "zlib"},
		{"none in common", []string{"zstd"}, "snappy", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []mongotest.Option
			if tc.server != nil {
				opts = append(opts, mongotest.WithCompressors(tc.server...))
			}
			srv := start(t, opts...)
			client := connect(t, srv.URI()+"?compressors="+tc.client)
			c := ctx(t)
			if err := client.Ping(c, nil); err != nil {
				t.Fatalf("Ping: %v", err)
			}
			coll := client.Database("x").Collection("c")
			var docs []any
			for i := range 10 {
				docs = append(docs, bson.D{{Key: "i", Value: i}, {Key: "pad", Value: "compress me compress me compress me"}})
			}
			if _, err := coll.InsertMany(c, docs); err != nil {
				t.Fatalf("InsertMany: %v", err)
			}
			cur, err := coll.Find(c, bson.D{}, options.Find().SetBatchSize(3))
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			var got []bson.M
			if err := cur.All(c, &got); err != nil || len(got) != 10 {
				t.Fatalf("Find returned %d documents, %v", len(got), err)
			}

			st := srv.Stats()
			if tc.want == "" {
				if len(st.CompressedReceived) != 0 || len(st.CompressedSent) != 0 {
					t.Errorf("compressed without a common compressor: received %v, sent %v", st.CompressedReceived, st.CompressedSent)
				}
				return
			}
			// ping, insert, find and 3 getMores at least; the handshakes
			// and the monitor's hellos are never compressed.
			if st.CompressedReceived[tc.want] < 6 || len(st.CompressedReceived) != 1 {
				t.Errorf("compressed messages received: %v, want 6 or more with %s only", st.CompressedReceived, tc.want)
			}
			if st.CompressedSent[tc.want] != st.CompressedReceived[tc.want] || len(st.CompressedSent) != 1 {
				t.Errorf("compressed replies sent: %v, want one per compressed request (%v)", st.CompressedSent, st.CompressedReceived)
			}
		})
	}
}
