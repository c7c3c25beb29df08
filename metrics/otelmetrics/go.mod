module github.com/fusebox-go/fusebox/metrics/otelmetrics

// The go line and the requirements are the oldest that give what this
// module uses, so that a module on Go 1.24 or 1.25 can use it (the newest
// OpenTelemetry SDK declares go 1.26): CI vets it outside the workspace
// with Go 1.24.0. The exporter needs only the metric API; its tests need
// the SDK's sdk/metric, stable since v1.19.0, and the Prometheus exporter
// of that release, v0.42.0 (which brings client_golang v1.16.0).
go 1.24

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/fusebox-go/fusebox v0.1.0
	github.com/prometheus/client_golang v1.16.0
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/otel v1.19.0
	go.opentelemetry.io/otel/exporters/prometheus v0.42.0
	go.opentelemetry.io/otel/metric v1.19.0
	go.opentelemetry.io/otel/sdk/metric v1.19.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.2.0 // indirect
	github.com/go-logr/logr v1.2.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/golang/protobuf v1.5.3 // indirect
	github.com/matttproud/golang_protobuf_extensions v1.0.4 // indirect
	github.com/prometheus/client_model v0.4.0 // indirect
	github.com/prometheus/common v0.42.0 // indirect
	github.com/prometheus/procfs v0.10.1 // indirect
	go.opentelemetry.io/otel/sdk v1.19.0 // indirect
	go.opentelemetry.io/otel/trace v1.19.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.12.0 // indirect
	google.golang.org/protobuf v1.31.0 // indirect
)
