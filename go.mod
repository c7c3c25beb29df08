module github.com/fusebox-go/fusebox

go 1.24

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)
