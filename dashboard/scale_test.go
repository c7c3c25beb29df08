package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A page served under another name (DNS rebinding: evil.example resolving
// to the dashboard's address) gets nothing, not even the token; the
// address it is served on, localhost and the names in Options.Hosts do.
func TestHostChecked(t *testing.T) {
	f := setup(t, dashboard.Options{Actions: true, Token: "secret"})
	get := func(host string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, f.srv.URL+"/", nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	served := strings.TrimPrefix(f.srv.URL, "http://")
	for _, host := range []string{served, "localhost", "localhost:1234"} {
		code, body := get(host)
		assert.Equal(t, http.StatusOK, code, "Host %q", host)
		assert.Contains(t, body, "secret", "Host %q gets the page", host)
	}
	for _, host := range []string{"evil.example", "evil.example:" + strings.Split(served, ":")[1], "10.1.2.3"} {
		code, body := get(host)
		assert.Equal(t, http.StatusMisdirectedRequest, code, "Host %q", host)
		assert.NotContains(t, body, "secret", "Host %q", host)
	}
	// A rebinding page's POST, with its own Origin and the token it could
	// not get anyway, changes nothing.
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/api/force-open?breaker=payments", nil)
	require.NoError(t, err)
	req.Host, req.Header["Origin"] = "evil.example", []string{"http://evil.example"}
	req.Header.Set(dashboard.TokenHeader, "secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
	assert.Equal(t, breaker.Closed, f.pay.State())

	g := setup(t, dashboard.Options{Hosts: []string{"breakers.internal"}})
	req, err = http.NewRequest(http.MethodGet, g.srv.URL+"/api/status", nil)
	require.NoError(t, err)
	for host, want := range map[string]int{"breakers.internal": 200, "breakers.internal:443": 200, served: 421, "localhost": 421} {
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, "Host %q with Options.Hosts", host)
	}
}

// Event streams beyond Options.MaxStreams get 503; one that ends frees
// its place.
func TestMaxStreams(t *testing.T) {
	f := setup(t, dashboard.Options{MaxStreams: 2, Refresh: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := openEvents(t, ctx, f)
	a.next(t)
	bctx, bcancel := context.WithCancel(ctx)
	b := openEvents(t, bctx, f)
	b.next(t)
	resp, _ := f.get(t, "/api/events")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	bcancel()
	_, _ = io.Copy(io.Discard, b.resp.Body)
	require.Eventually(t, func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/api/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 5*time.Millisecond, "a place is free again")
}

// fleet registers n breakers named like per-host breakers.
func fleet(t testing.TB, n int) (*manager.Manager, *clock.Mock, []*manager.Breaker) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC))
	m := manager.Start(manager.Options{Clock: mock})
	t.Cleanup(m.Stop)
	bs := make([]*manager.Breaker, n)
	for i := range bs {
		var err error
		bs[i], err = m.Register(fmt.Sprintf("upstream-%05d.example", i), manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
		require.NoError(t, err)
	}
	return m, mock, bs
}

// At 10,000 quiet breakers the page's first snapshot and /api/status each
// stay under 1 MB: sizes are deterministic for fixed names and state.
func TestSizesAt10000(t *testing.T) {
	m, _, _ := fleet(t, 10000)
	h, err := dashboard.New(m, dashboard.Options{Refresh: time.Hour})
	require.NoError(t, err)
	f := &fixture{m: m, h: h, srv: httptestServer(t, h)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := openEvents(t, ctx, f)
	st := s.next(t)
	require.Len(t, st.Breakers, 10000)
	_, body := f.get(t, "/api/status")
	t.Logf("first snapshot %d bytes, /api/status %d bytes", s.bytes, len(body))
	assert.LessOrEqual(t, s.bytes, 1<<20, "snapshot of 10,000 breakers")
	assert.LessOrEqual(t, len(body), 1<<20, "/api/status of 10,000 breakers")
}

// A delta carries only the breakers that changed, encoded once for every
// stream: two streams get the same bytes, and a change of one breaker out
// of 1,000 is a message of a few hundred bytes.
func TestDeltaHoldsOnlyChanges(t *testing.T) {
	m, _, bs := fleet(t, 1000)
	h, err := dashboard.New(m, dashboard.Options{Refresh: time.Hour})
	require.NoError(t, err)
	f := &fixture{m: m, h: h, srv: httptestServer(t, h)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := openEvents(t, ctx, f), openEvents(t, ctx, f)
	a.next(t)
	b.next(t)
	a.bytes, b.bytes = 0, 0
	release := func(br *manager.Breaker, err error) {
		p, aerr := br.Acquire(ctx)
		require.NoError(t, aerr)
		p.Release(err)
	}
	release(bs[7], errDown) // trips
	m.Sync()
	sa, sb := a.next(t), b.next(t)
	assert.Equal(t, "open", sa.Breakers[7].State)
	assert.Equal(t, sa, sb)
	assert.Equal(t, a.bytes, b.bytes)
	assert.Less(t, a.bytes, 400, "a delta of one breaker")
}

// httptestServer serves h until the test ends; h closes first, so that
// the server does not wait for its streams.
func httptestServer(t *testing.T, h *dashboard.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	return srv
}

// A removed breaker's card goes: the stream says it is gone, and the
// status no longer lists it.
func TestRemovedBreakerGoes(t *testing.T) {
	f := setup(t, dashboard.Options{Refresh: time.Hour})
	_, err := f.m.Register("search", manager.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := openEvents(t, ctx, f)
	require.Len(t, s.next(t).Breakers, 2)
	require.True(t, f.m.Remove("payments"))
	f.m.Sync()
	st := s.next(t)
	require.Len(t, st.Breakers, 1)
	assert.Equal(t, "search", st.Breakers[0].Name)
	status := f.status(t)
	require.Len(t, status.Breakers, 1)
	assert.Equal(t, "search", status.Breakers[0].Name)
}
