module github.com/fusebox-go/fusebox/bench

// Measurement only, imported by no module. It requires the oldest go-redis
// the store module supports (v9.22.0), so that it builds on Go 1.24 as the
// modules do (CI vets it outside the workspace with Go 1.24.0); in the
// workspace, go.work pins the newest releases, and the benchmarks run on
// those. The peer libraries are at the releases the comparisons quote.
go 1.24

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/fusebox-go/fusebox v0.1.0
	github.com/fusebox-go/fusebox/store/redisstore v0.1.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)
