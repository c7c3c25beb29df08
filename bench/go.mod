module github.com/fusebox-go/fusebox/bench

go 1.24

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/fusebox-go/fusebox v0.1.0
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/goleak v1.3.0
)

require github.com/bits-and-blooms/bitset v1.24.4 // indirect
