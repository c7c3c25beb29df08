module github.com/fusebox-go/fusebox/store/redisstore

// The go line and the requirements are the oldest that give what this
// module uses, so that a module on Go 1.24 or 1.25 can use it (go-redis
// v9.23.0 and later declare go 1.26): CI vets it outside the workspace
// with Go 1.24.0. reload.go needs the typed error checks of go-redis
// v9.17.0 (IsMovedError, IsClusterDownError, ...); before v9.20.1 RESP3
// push messages whose header spans a read buffer are lost, and the Cluster
// watch tests fail; v9.20.1 brought a hang of PubSub.Receive on a short
// frame, fixed in v9.22.0. On v9.22.0 the test of a watch of 10,000
// names on a Cluster still hung once in three runs (never on v9.23.0,
// which the workspace tests): a fleet on a Cluster that can use Go 1.26
// should require v9.23.0.
go 1.24

require (
	github.com/fusebox-go/fusebox v0.1.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.30.0 // indirect
)
