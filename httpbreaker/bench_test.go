package httpbreaker_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/fusebox-go/fusebox/httpbreaker"
	"github.com/fusebox-go/fusebox/manager"
)

// benchTransport returns a Transport over a RoundTripper that answers at
// once from memory, so that the benchmarks measure the breaker's share of a
// round trip and not the network's.
func benchTransport(b *testing.B) *httpbreaker.Transport {
	b.Helper()
	m := manager.Start(manager.Options{})
	b.Cleanup(m.Stop)
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	t, err := httpbreaker.New(m, httpbreaker.Options{
		Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil }),
	})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

func benchRequests(b *testing.B, hosts int) []*http.Request {
	b.Helper()
	reqs := make([]*http.Request, hosts)
	for i := range reqs {
		r, err := http.NewRequest(http.MethodGet, "http://upstream-"+strconv.Itoa(i)+".test:8080/items", nil)
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = r
	}
	return reqs
}

// BenchmarkRoundTrip is the overhead of the breaker on one request to a
// known host: the key, the cache lookup, Acquire, Classify and Release.
func BenchmarkRoundTrip(b *testing.B) {
	t := benchTransport(b)
	req := benchRequests(b, 1)[0]
	b.ReportAllocs()
	for b.Loop() {
		resp, err := t.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
	}
}

// BenchmarkRoundTripParallel is BenchmarkRoundTrip from every P at once,
// spread over 64 hosts.
func BenchmarkRoundTripParallel(b *testing.B) {
	t := benchTransport(b)
	reqs := benchRequests(b, 64)
	for _, r := range reqs {
		if _, err := t.RoundTrip(r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := t.RoundTrip(reqs[i%len(reqs)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkHostKey is the default key of a request whose URL needs no
// rewriting, and of one that does.
func BenchmarkHostKey(b *testing.B) {
	for _, u := range []string{"http://127.0.0.1:8080/x", "https://API.example.com/x"} {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.SplitN(u, ":", 2)[0], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				httpbreaker.HostKey(req)
			}
		})
	}
}

// BenchmarkLoopback is a whole request to an httptest server on loopback,
// with and without the breaker, to put its share in proportion.
func BenchmarkLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	b.Cleanup(srv.Close)
	m := manager.Start(manager.Options{})
	b.Cleanup(m.Stop)
	base := &http.Transport{}
	b.Cleanup(base.CloseIdleConnections)
	t, err := httpbreaker.New(m, httpbreaker.Options{Base: base})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{{"base", base}, {"breaker", t}} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: c.rt}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
