module github.com/fusebox-go/fusebox/replicate/boltstore

// The go line and the requirements are the oldest that give what this
// module uses, so that a module on Go 1.24 or 1.25 can use it (bbolt
// v1.5.0 declares go 1.25): CI vets it outside the workspace with Go
// 1.24.0. bbolt v1.4.0 is the oldest with the package bbolt/errors, whose
// ErrTimeout Open matches.
go 1.24

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/fusebox-go/fusebox v0.1.0
	github.com/stretchr/testify v1.12.1
	go.etcd.io/bbolt v1.4.0
	go.uber.org/goleak v1.3.0
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.29.0 // indirect
)
