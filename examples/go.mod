module github.com/fusebox-go/fusebox/examples

// The examples are programs to read and run, which no module imports:
// they require the newest releases of go-redis, grpc-go and bbolt (some
// declare go 1.26). In the workspace the newest requirement of any module
// wins, so the tests of the store, gRPC and bbolt modules run on those;
// the modules themselves require the oldest that give what they use (see
// their go.mod), on which CI vets each outside the workspace.
go 1.26.0

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/fusebox-go/fusebox v0.1.0
	github.com/fusebox-go/fusebox/grpcbreaker v0.1.0
	github.com/fusebox-go/fusebox/replicate/boltstore v0.1.0
	github.com/fusebox-go/fusebox/store/redisstore v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
