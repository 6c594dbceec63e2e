package dashboard_test

import (
	"context"
	"log"
	"net/http"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/dashboard"
	"github.com/mongopool/mongopool/pool"
)

// A program mounts the dashboard of its pool under /pools/ of its own HTTP
// server.
func Example() {
	ctx := context.Background()
	d, err := dashboard.New()
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	p, err := mongopool.Open(ctx, "mongodb://localhost:27017/?maxPoolSize=20",
		pool.WithEventHandler(d.EventHandler("main")))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	if err := d.Add("main", p.Pool()); err != nil {
		log.Fatal(err)
	}
	http.Handle("/pools/", http.StripPrefix("/pools", d))
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", nil))
}

// The pools of a client, one per server, come and go with its topology: the
// dashboard follows them.
func ExampleDashboard_AddSource() {
	ctx := context.Background()
	d, err := dashboard.New()
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	c, err := mongopool.Connect(ctx, "mongodb://a.example,b.example/?replicaSet=rs0",
		mongopool.WithPoolOptions(pool.WithEventHandler(d.EventHandler("rs0"))))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := d.AddSource("rs0", c.Pools); err != nil {
		log.Fatal(err)
	}
	http.Handle("/pools/", http.StripPrefix("/pools", d))
}
