module github.com/mongopool/mongopool/cmd/mongotest

go 1.25.0

require (
	github.com/mongopool/mongopool v0.0.0
	go.mongodb.org/mongo-driver/v2 v2.10.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/xdg-go/scram v1.4.0 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace github.com/mongopool/mongopool => ../..
