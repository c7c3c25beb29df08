package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/dashboard"
)

// BenchmarkStatus10000 measures GET /api/status of 10,000 quiet breakers.
func BenchmarkStatus10000(b *testing.B) {
	m, _, _ := fleet(b, 10000)
	h, err := dashboard.New(m, dashboard.Options{Refresh: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Get(srv.URL + "/api/status")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		b.ReportMetric(float64(n), "bytes/op")
	}
}
