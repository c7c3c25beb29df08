module github.com/fusebox-go/fusebox/dashboard/internal/browser

// Test tooling of the dashboard, which no other module can import: it
// requires the newest chromedp, whose releases since v0.20.0 declare go
// 1.25. CI vets it outside the workspace with Go 1.25.0.
go 1.25

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/fusebox-go/fusebox v0.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
