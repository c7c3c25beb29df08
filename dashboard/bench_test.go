package dashboard_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/manager"
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

// BenchmarkStreamFlapping measures what one event stream receives while
// 100 of 1,000 breakers flap, each about 11 transitions a second (about
// 1,100 a second in all), on the real clock: each iteration is one second
// of flapping, with three streams open; B/s/stream is the bytes each
// received per second.
func BenchmarkStreamFlapping(b *testing.B) {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	var flappers []*manager.Breaker
	for i := range 1000 {
		br, err := m.Register(fmt.Sprintf("upstream-%05d.example", i), manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
		if err != nil {
			b.Fatal(err)
		}
		if i%10 == 0 {
			flappers = append(flappers, br)
		}
	}
	h, err := dashboard.New(m, dashboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const streams = 3
	var got [streams]atomic.Int64
	for i := range streams {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		if _, err := r.ReadString('}'); err != nil { // the snapshot's start
			b.Fatal(err)
		}
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := r.Read(buf)
				got[i].Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // the rest of the snapshots
	for i := range streams {
		got[i].Store(0)
	}
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		// 11 transitions a second per flapper: trip and reset, 5.5 times.
		end := time.Now().Add(time.Second)
		for round := 0; time.Now().Before(end); round++ {
			for _, br := range flappers {
				if round%2 == 0 {
					_ = br.ForceOpen()
				} else {
					_ = br.Reset()
				}
			}
			time.Sleep(time.Second / 11)
		}
	}
	secs := time.Since(start).Seconds()
	b.StopTimer()
	var total int64
	for i := range streams {
		total += got[i].Load()
	}
	b.ReportMetric(float64(total)/streams/secs, "B/s/stream")
}
