package connection_test

import (
	"context"
	"testing"
	"time"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/mongotest"
)

// BenchmarkRoundTrip runs ping on one connection to the test server, without
// compression and with each compressor, and with busy polling.
func BenchmarkRoundTrip(b *testing.B) {
	for _, compressor := range []string{"none", "snappy", "zlib", "zstd", "busy-poll"} {
		b.Run(compressor, func(b *testing.B) {
			srv, err := mongotest.Start()
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			cfg := &connection.Config{Address: srv.Addr()}
			if compressor == "busy-poll" {
				cfg.BusyPoller, compressor = connection.NewBusyPoller(50*time.Microsecond), "none"
			}
			if compressor != "none" {
				cfg.Handshake = handshake.Options{Compressors: []string{compressor}}
			}
			ctx := context.Background()
			c, err := connection.Dial(ctx, cfg, connection.Hooks{})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if got := c.Description().Compressor; compressor != "none" && got != compressor {
				b.Fatalf("negotiated %q", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.RoundTrip(ctx, ping); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
