package httpbreaker_test

import (
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/httpbreaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// proxied returns a client whose requests, whatever host they name, go to
// one real loopback server acting as their HTTP proxy, over its kept-alive
// connections: a test can name as many hosts as it likes without opening a
// connection per host. The server answers 503 for hosts whose name starts
// with "down", 200 for the others.
func proxied(t *testing.T, m *manager.Manager, opts httpbreaker.Options) *http.Client {
	t.Helper()
	proxy := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Host, "down") {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	u, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	base := newBase(t)
	base.Proxy = http.ProxyURL(u)
	opts.Base = base
	tr, err := httpbreaker.New(m, opts)
	require.NoError(t, err)
	return &http.Client{Transport: tr}
}

func heapAfterGC() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestHostsBoundedByDefault sends requests to 100,000 distinct hosts through
// a Transport with the default options: the manager never holds more than
// DefaultMaxBreakers breakers, and the heap stays where it was once the
// cap was first reached. The wrapped RoundTripper answers at once, without
// a network: the claim is about the Transport's bookkeeping, and 100,000
// loopback round trips would only add time (the other tests of this file
// go through a real server).
func TestHostsBoundedByDefault(t *testing.T) {
	m, _ := newManager(t)
	tr, err := httpbreaker.New(m, httpbreaker.Options{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})})
	require.NoError(t, err)
	const hosts = 100_000
	var base int64
	for i := range hosts {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://h%d.example/", i), nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err, "host %d", i)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		if i%1000 == 999 {
			n := len(m.Breakers())
			require.LessOrEqual(t, n, httpbreaker.DefaultMaxBreakers, "after %d hosts", i+1)
		}
		if i == 2*httpbreaker.DefaultMaxBreakers {
			base = heapAfterGC()
		}
	}
	grown := heapAfterGC() - base
	t.Logf("breakers: %d; heap growth from host %d to host %d: %+d B", len(m.Breakers()), 2*httpbreaker.DefaultMaxBreakers, hosts, grown)
	// A breaker kept costs about 1 KiB: keeping the 98,000 hosts since
	// would be about 100 MB.
	assert.Less(t, grown, int64(2<<20), "the heap grew by %d B", grown)
	assert.GreaterOrEqual(t, len(m.Breakers()), httpbreaker.DefaultMaxBreakers*15/16-1, "evicting keeps the cap nearly full")
}

func TestHostsIdleRemoved(t *testing.T) {
	m, mock := newManager(t)
	c := proxied(t, m, httpbreaker.Options{IdleTimeout: time.Minute, MaxBreakers: -1})
	get := func(host string) {
		t.Helper()
		_, err := do(t, c, "http://"+host+"/")
		require.NoError(t, err, host)
	}
	get("a.example")
	get("b.example")
	old := breakerOf(t, m, "b.example:80")

	mock.Add(40 * time.Second)
	get("a.example") // b idle 40s: kept
	breakerOf(t, m, "b.example:80")

	mock.Add(30 * time.Second)
	get("a.example") // b idle 70s: the sweep due now removes it
	_, ok := m.Breaker("b.example:80")
	assert.False(t, ok, "idle for more than IdleTimeout: removed")
	breakerOf(t, m, "a.example:80")
	assert.True(t, old.Stats().Removed)

	get("b.example")
	b := breakerOf(t, m, "b.example:80")
	assert.NotSame(t, old, b, "a request to b again registers a fresh breaker")
}

// An open breaker of an upstream that still gets requests is the last to
// go: new hosts push out the closed breakers, however recently used, and
// the open one stays open, declining requests, until it is idle.
func TestHostsOpenBreakerOfLiveUpstreamGoesLast(t *testing.T) {
	m, mock := newManager(t)
	c := proxied(t, m, httpbreaker.Options{
		MaxBreakers: 4,
		IdleTimeout: time.Hour,
		Config: func(string) manager.Config {
			return manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: 10 * time.Hour}}
		},
	})
	status, err := do(t, c, "http://down.example/")
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, status)
	down := breakerOf(t, m, "down.example:80")
	require.Equal(t, breaker.Open, down.State())

	for i := range 100 {
		mock.Add(time.Second)
		_, err := do(t, c, fmt.Sprintf("http://h%d.example/", i))
		require.NoError(t, err)
		if i%10 == 0 {
			mock.Add(time.Second)
			_, err := c.Get("http://down.example/")
			require.ErrorIs(t, err, breaker.ErrOpen, "request %d: the upstream is still protected", i)
		}
		require.LessOrEqual(t, len(m.Breakers()), 4)
		b, ok := m.Breaker("down.example:80")
		require.True(t, ok, "after host %d the open breaker is still kept", i)
		require.Same(t, down, b)
	}

	// Once no request asks for it, it is idle like any other.
	for i := range 4 {
		mock.Add(20 * time.Minute)
		_, err := do(t, c, fmt.Sprintf("http://late%d.example/", i))
		require.NoError(t, err)
	}
	_, ok := m.Breaker("down.example:80")
	assert.False(t, ok, "idle for an hour: removed")
	assert.True(t, down.Stats().Removed)
}

// A breaker removed by hand is replaced by a fresh one at the next request,
// which does not see ErrRemoved.
func TestHostsRemovedByHand(t *testing.T) {
	m, _ := newManager(t)
	c := proxied(t, m, httpbreaker.Options{})
	_, err := do(t, c, "http://a.example/")
	require.NoError(t, err)
	old := breakerOf(t, m, "a.example:80")
	require.True(t, m.Remove("a.example:80"))
	status, err := do(t, c, "http://a.example/")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.NotSame(t, old, breakerOf(t, m, "a.example:80"))
}

// A breaker the Transport found registered is never removed by it: only
// forgotten, and found again.
func TestHostsLeaveForeignBreakers(t *testing.T) {
	m, mock := newManager(t)
	mine, err := m.Register("mine.example:80", manager.Config{})
	require.NoError(t, err)
	c := proxied(t, m, httpbreaker.Options{MaxBreakers: 2, IdleTimeout: time.Minute})
	_, err = do(t, c, "http://mine.example/")
	require.NoError(t, err)
	for i := range 10 {
		mock.Add(time.Minute)
		_, err := do(t, c, fmt.Sprintf("http://h%d.example/", i))
		require.NoError(t, err)
	}
	b, ok := m.Breaker("mine.example:80")
	require.True(t, ok, "a breaker registered by hand stays")
	assert.Same(t, mine, b)
	_, err = do(t, c, "http://mine.example/")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), mine.Stats().Calls, "the Transport found it again")
}

func TestHostsUnbounded(t *testing.T) {
	m, mock := newManager(t)
	c := proxied(t, m, httpbreaker.Options{MaxBreakers: -1, IdleTimeout: -1})
	const n = httpbreaker.DefaultMaxBreakers + 100
	for i := range n {
		_, err := do(t, c, fmt.Sprintf("http://h%d.example/", i))
		require.NoError(t, err)
	}
	mock.Add(24 * time.Hour)
	_, err := do(t, c, "http://h0.example/")
	require.NoError(t, err)
	assert.Len(t, m.Breakers(), n, "no cap, no idle removal")
}

// BenchmarkRoundTripBounds is BenchmarkRoundTrip with the default bounds
// and without any, as a peer: what recording each request's use costs.
func BenchmarkRoundTripBounds(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts httpbreaker.Options
	}{
		{"default", httpbreaker.Options{}},
		{"unbounded", httpbreaker.Options{MaxBreakers: -1, IdleTimeout: -1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := manager.Start(manager.Options{})
			defer m.Stop()
			resp := &http.Response{StatusCode: 200, Body: http.NoBody}
			bc.opts.Base = roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
			tr, err := httpbreaker.New(m, bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			req := benchRequests(b, 1)[0]
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tr.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRoundTripNewHost is a request to a host never seen before, with
// the default bounds, once the cap is reached: a registration, and a share
// of an eviction.
func BenchmarkRoundTripNewHost(b *testing.B) {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	tr, err := httpbreaker.New(m, httpbreaker.Options{
		Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil }),
	})
	if err != nil {
		b.Fatal(err)
	}
	reqs := benchRequests(b, 4*httpbreaker.DefaultMaxBreakers)
	for _, r := range reqs[:httpbreaker.DefaultMaxBreakers] {
		if _, err := tr.RoundTrip(r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := httpbreaker.DefaultMaxBreakers
	for b.Loop() {
		if _, err := tr.RoundTrip(reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
