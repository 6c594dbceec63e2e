// Package bench compares mongopool's connection pool with the official Go
// driver's pool and with jackc/puddle, in the same process, against the same
// servers: the shapes of issue 6, from a warm serial check-out to ping round
// trips against FerretDB. It lives in its own module so that the library
// never depends on what it is compared with.
//
// Run everything with `go run ./cmd/poolbench` (from this directory); the
// micro-benchmarks also run under `go test -bench .`. `go run
// ./cmd/topobench` measures the clients' topology machinery, and `go run
// ./cmd/proxybench` the pooling proxy, mongopool-proxy, against clients
// connected straight to the test server and against other proxies.
package bench
