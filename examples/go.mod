module github.com/fusebox-go/fusebox/examples

// The examples are programs to read and run, which no module imports.
// Like the modules they show, they require the oldest releases that give
// what they use (go-redis v9.22.0, grpc-go v1.63.0, bbolt v1.4.0; see each
// module's go.mod for why), so that they build on Go 1.24 as the modules
// do: CI vets them outside the workspace with Go 1.24.0. In the workspace,
// go.work pins the newest releases, on which every test runs.
go 1.24

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/fusebox-go/fusebox v0.1.0
	github.com/fusebox-go/fusebox/grpcbreaker v0.1.0
	github.com/fusebox-go/fusebox/replicate/boltstore v0.1.0
	github.com/fusebox-go/fusebox/store/redisstore v0.1.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240227224415-6ceb2ff114de
	google.golang.org/grpc v1.63.0
	google.golang.org/protobuf v1.33.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.etcd.io/bbolt v1.4.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.21.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
	golang.org/x/text v0.14.0 // indirect
)
