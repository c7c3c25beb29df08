module github.com/fusebox-go/fusebox/metrics/prommetrics

// The go line and the requirements are the oldest that give what this
// module uses, so that a module on Go 1.24 or 1.25 can use it (the newest
// client_golang declares go 1.26): CI vets it outside the workspace with
// Go 1.24.0. The collector needs little of client_golang; the tests need
// expfmt.NewFormat, which came in prometheus/common v0.48.0, and
// client_golang v1.19.0 is the oldest whose promlint builds with it.
go 1.24

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/fusebox-go/fusebox v0.1.0
	github.com/prometheus/client_golang v1.19.0
	github.com/prometheus/client_model v0.5.0
	github.com/prometheus/common v0.48.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.2.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/prometheus/procfs v0.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.16.0 // indirect
	google.golang.org/protobuf v1.32.0 // indirect
)
