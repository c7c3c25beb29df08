package httpbreaker_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/httpbreaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// An upstream that answers 503 trips its breaker; later requests are
// declined without reaching it.
func Example() {
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer upstream.Close()

	m := manager.Start(manager.Options{})
	defer m.Stop()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	t, err := httpbreaker.New(m, httpbreaker.Options{
		Base: base,
		Config: func(key string) manager.Config {
			return manager.Config{
				Strategy: breaker.Consecutive{Failures: 3},
				Recover:  recover.BasicTimeout{Open: time.Minute},
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: t}

	for i := 1; i <= 5; i++ {
		resp, err := client.Get(upstream.URL + "/orders")
		switch {
		case errors.Is(err, breaker.ErrOpen):
			fmt.Printf("request %d: declined by the breaker\n", i)
		case err != nil:
			fmt.Printf("request %d: %v\n", i, err)
		default:
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			fmt.Printf("request %d: %s\n", i, resp.Status)
		}
	}
	fmt.Println("requests that reached the upstream:", hits.Load())
	// Output:
	// request 1: 503 Service Unavailable
	// request 2: 503 Service Unavailable
	// request 3: 503 Service Unavailable
	// request 4: declined by the breaker
	// request 5: declined by the breaker
	// requests that reached the upstream: 3
}

// Classify can be used on its own, or inside a Classifier that changes the
// verdict on some responses.
func ExampleClassify() {
	for _, code := range []int{200, 404, 429, 500, 503} {
		fmt.Println(code, httpbreaker.Classify(&http.Response{StatusCode: code}, nil))
	}

	// A client that calls an endpoint still being deployed does not want 501
	// Not Implemented to count against the upstream.
	var _ httpbreaker.Classifier = func(resp *http.Response, err error) classify.Outcome {
		if err == nil && resp.StatusCode == http.StatusNotImplemented {
			return classify.Ignore
		}
		return httpbreaker.Classify(resp, err)
	}
	// Output:
	// 200 success
	// 404 success
	// 429 failure
	// 500 failure
	// 503 failure
}

// A Key function that looks at the path gives each route its own breaker,
// so that one slow endpoint does not cut off the rest of the upstream.
func ExampleOptions_perRoute() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/reports/") {
			http.Error(w, "report engine down", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer upstream.Close()

	m := manager.Start(manager.Options{})
	defer m.Stop()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	t, err := httpbreaker.New(m, httpbreaker.Options{
		Base: base,
		Key: func(r *http.Request) string {
			// Route patterns, not raw paths: the set of keys must stay small.
			route := "other"
			if strings.HasPrefix(r.URL.Path, "/reports/") {
				route = "reports"
			}
			return httpbreaker.HostKey(r) + " " + route
		},
		Config: func(key string) manager.Config {
			return manager.Config{Strategy: breaker.Consecutive{Failures: 1}}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: t}

	for _, path := range []string{"/reports/7", "/reports/8", "/orders/1"} {
		resp, err := client.Get(upstream.URL + path)
		if err != nil {
			fmt.Println(path, "declined:", errors.Is(err, breaker.ErrOpen))
			continue
		}
		resp.Body.Close()
		fmt.Println(path, resp.Status)
	}
	// Output:
	// /reports/7 500 Internal Server Error
	// /reports/8 declined: true
	// /orders/1 200 OK
}

// RetryAfter reads the wait a 429 or 503 response asks for.
func ExampleRetryAfter() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Sun, 01 Mar 2026 12:05:00 GMT", "later"} {
		resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {v}}}
		d, ok := httpbreaker.RetryAfter(resp, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 5m0s true
	// 0s false
}
