// Package dashboard is a live web dashboard of mongopool's pools: an
// [http.Handler] a program mounts next to its own handlers to watch the pools
// it uses.
//
// The page shows a panel per pool, updated about four times a second: charts
// of the connections by state (idle, in use, being established), the
// check-outs waiting, the check-out wait's percentiles, the establishment
// time's percentiles and the events per second; the pool's options; and its
// recent events, newest first. Everything it needs (the page, its script, the
// chart library) is embedded in the binary: it works without a network.
//
//	d, err := dashboard.New()
//	...
//	defer d.Close()
//	p, err := mongopool.Open(ctx, uri, pool.WithEventHandler(d.EventHandler("main")))
//	...
//	err = d.Add("main", p.Pool())
//	http.Handle("/pools/", http.StripPrefix("/pools", d))
//
// A [Dashboard] serves, under the path it is mounted at:
//
//   - / the page;
//   - /events a stream of snapshots as server-sent events (text/event-stream),
//     one every interval (see [WithInterval]), until the client goes away;
//   - /snapshot one snapshot, as JSON;
//   - /metrics the pools' metrics in Prometheus' text format, from the
//     collector of the metrics/prometheus module;
//   - /static/ the page's script, style sheet and chart library.
//
// The figures come from [pool.Pool.Stats], read at each snapshot; the events
// from the handlers [Dashboard.EventHandler] returns, which a pool calls on
// the goroutine that delivers its events, in order, and which never wait, so
// that the pool's delivery does not fall behind: they count the event and
// hand it to the dashboard's goroutine through a bounded queue, or drop it
// from the list (and count the drop) when the queue is full.
//
// The dashboard has no authentication of its own: serve it on a loopback
// address, or behind the program's own.
//
// The package lives in a module of its own, so that the pool's module depends
// neither on it nor on the Prometheus client.
package dashboard
