module github.com/mongopool/mongopool/cmd/mongopool-proxy

go 1.25.0

require (
	github.com/mongopool/mongopool v0.0.0
	github.com/mongopool/mongopool/dashboard v0.0.0
	github.com/mongopool/mongopool/metrics/prometheus v0.0.0
	github.com/prometheus/client_golang v1.19.1
	go.mongodb.org/mongo-driver/v2 v2.10.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dlclark/regexp2/v2 v2.13.0 // indirect
	github.com/dop251/goja v0.0.0-20260917113740-793a2a65c13b // indirect
	github.com/go-sourcemap/sourcemap v2.1.3+incompatible // indirect
	github.com/google/pprof v0.0.0-20230207041349-798e818bf904 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/prometheus/common v0.55.0 // indirect
	github.com/prometheus/procfs v0.15.1 // indirect
	github.com/xdg-go/scram v1.4.0 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	github.com/youmark/pkcs8 v0.0.0-20240726163527-a2c0da244d78 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace (
	github.com/mongopool/mongopool => ../..
	github.com/mongopool/mongopool/dashboard => ../../dashboard
	github.com/mongopool/mongopool/metrics/prometheus => ../../metrics/prometheus
)
