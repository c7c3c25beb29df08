module github.com/fusebox-go/fusebox/grpcbreaker

// The go line and the requirements are the oldest that give what this
// module uses, so that a module on Go 1.24 or 1.25 can use it (the newest
// grpc-go declares go 1.26): CI vets it outside the workspace with Go
// 1.24.0. grpc v1.63.0 is the oldest with grpc.NewClient; genproto's rpc
// (errdetails.RetryInfo) and protobuf are the versions it requires.
go 1.24

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/fusebox-go/fusebox v0.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240227224415-6ceb2ff114de
	google.golang.org/grpc v1.63.0
	google.golang.org/protobuf v1.33.0
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.21.0 // indirect
	golang.org/x/sys v0.17.0 // indirect
	golang.org/x/text v0.14.0 // indirect
)
