module github.com/fusebox-go/fusebox/store/redisstore

// The go line and the requirements are the oldest that give what this
// module uses, so that a module on Go 1.24 or 1.25 can use it (the newest
// go-redis declares go 1.26): CI vets it outside the workspace with Go
// 1.24.0. go-redis v9.20.1 is the oldest with the typed error checks that
// reload.go calls (IsMovedError, IsClusterDownError, ... came in v9.17.0)
// and with the fix of RESP3 push messages lost when their header spans a
// read buffer (v9.20.1), without which a watch on a Cluster's shard
// channels misses changes (the Cluster tests fail on v9.20.0). The
// regression of v9.20.1 fixed in v9.22.0, a hang on a subscribe
// confirmation of a channel name of six bytes or fewer, cannot hit the
// store: its channels are "PREFIX:changes" and longer.
go 1.24

require (
	github.com/fusebox-go/fusebox v0.1.0
	github.com/redis/go-redis/v9 v9.20.1
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
