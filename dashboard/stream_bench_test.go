//go:build unix

package dashboard_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/manager"
)

// BenchmarkStreamFlapping measures what each event stream receives while
// 100 of 1,000 breakers flap, each about 11 transitions a second (about
// 1,100 a second in all), on the real clock, with 1 and with 5 streams
// open: each iteration is one second of flapping. B/s/stream is the bytes
// each stream received per second, and cpu-ms/s the process's CPU time
// per second (the flapping itself included): the difference between 1 and
// 5 streams is what the extra streams cost the server.
func BenchmarkStreamFlapping(b *testing.B) {
	for _, streams := range []int{1, 5} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) { benchFlapping(b, streams) })
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchFlapping(b *testing.B, streams int) {
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
	got := make([]atomic.Int64, streams)
	for i := range streams {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
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
	// Every stream has its snapshot before the counts start.
	deadline := time.Now().Add(10 * time.Second)
	for i := range streams {
		for got[i].Load() == 0 {
			if time.Now().After(deadline) {
				b.Fatalf("stream %d received nothing within 10s", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i := range streams {
		got[i].Store(0)
	}
	start, cpu0 := time.Now(), cpuTime()
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
			// The load is a rate in real time: what is measured is the
			// stream's cost per second at 11 transitions a second.
			time.Sleep(time.Second / 11)
		}
	}
	secs := time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	b.StopTimer()
	var total int64
	for i := range streams {
		total += got[i].Load()
	}
	b.ReportMetric(float64(total)/float64(streams)/secs, "B/s/stream")
	b.ReportMetric(float64(cpu.Milliseconds())/secs, "cpu-ms/s")
}
