module github.com/fusebox-go/fusebox/bench

// Measurement only, imported by no module: it requires the newest releases
// of fusebox's dependencies and of the peer libraries it compares
// (go-redis v9.23.0 declares go 1.26).
go 1.26.0

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/fusebox-go/fusebox v0.1.0
	github.com/fusebox-go/fusebox/store/redisstore v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
