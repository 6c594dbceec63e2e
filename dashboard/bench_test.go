package dashboard_test

import (
	"context"
	"testing"

	"github.com/mongopool/mongopool/dashboard"
	"github.com/mongopool/mongopool/internal/pooltest"
	"github.com/mongopool/mongopool/pool"
)

// BenchmarkCheckOutCheckIn measures what the dashboard's event handler adds
// to a check-out and check-in (three events) on one goroutine, against a pool
// without a handler and one with a handler that does nothing. (At millions of
// events a second the dashboard's queue is full, and the handler drops most
// of them from the list: a benchmark's pace, not a program's.)
func BenchmarkCheckOutCheckIn(b *testing.B) {
	d, err := dashboard.New()
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct {
		name string
		opts []pool.Option
	}{
		{"none", nil},
		{"noop", []pool.Option{pool.WithEventHandler(func(pool.Event) {})}},
		{"dashboard", []pool.Option{pool.WithEventHandler(d.EventHandler("bench"))}},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := append([]pool.Option{pool.WithMaintenanceInterval(-1)}, c.opts...)
			p, err := pool.New("bench.example:27017", &pooltest.Connector{}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			p.Ready()
			ctx := context.Background()
			for b.Loop() {
				conn, err := p.CheckOut(ctx)
				if err != nil {
					b.Fatal(err)
				}
				p.CheckIn(conn)
			}
			if st := p.Stats(); st.CheckOutFailed != 0 {
				b.Errorf("%d check-outs failed", st.CheckOutFailed)
			}
		})
	}
}
