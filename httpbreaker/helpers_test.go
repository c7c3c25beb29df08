package httpbreaker_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/httpbreaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is a whole second, so that HTTP dates (second precision) are exact.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newManager starts a manager on a mock clock set to t0.
func newManager(t *testing.T) (*manager.Manager, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(t0)
	m := manager.Start(manager.Options{Clock: mock})
	t.Cleanup(m.Stop)
	return m, mock
}

// newBase returns a real http.Transport whose idle connections are closed
// when the test ends, so that no connection goroutine outlives it.
func newBase(t *testing.T) *http.Transport {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// newTransport returns a Transport over a fresh http.Transport whose
// breakers trip on the failures-th failure in a row and stay open for open.
func newTransport(t *testing.T, m *manager.Manager, failures int, open time.Duration, opts httpbreaker.Options) *httpbreaker.Transport {
	t.Helper()
	if opts.Base == nil {
		opts.Base = newBase(t)
	}
	if opts.Config == nil {
		opts.Config = func(string) manager.Config {
			return manager.Config{
				Strategy: breaker.Consecutive{Failures: failures},
				Recover:  recover.BasicTimeout{Open: open},
			}
		}
	}
	tr, err := httpbreaker.New(m, opts)
	require.NoError(t, err)
	return tr
}

// upstream is a real HTTP server on loopback. It answers with the status in
// the query's "status" parameter (200 if none) and, if "retry" is given, a
// Retry-After header with that value. It counts the requests that reached it.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		status := http.StatusOK
		if s := r.URL.Query().Get("status"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				http.Error(w, "bad status", http.StatusBadRequest)
				return
			}
			status = n
		}
		if ra := r.URL.Query().Get("retry"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(status)
		io.WriteString(w, "status "+strconv.Itoa(status))
	}))
	t.Cleanup(u.Close)
	return u
}

// newServer starts a server with handler h, closed when the test ends.
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// key is the breaker name HostKey gives the upstream's requests.
func (u *upstream) key() string { return u.Listener.Addr().String() }

// do sends GET path through c and returns the status, after reading and
// closing the body as a caller should.
func do(t *testing.T, c *http.Client, url string) (int, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	_, rerr := io.Copy(io.Discard, resp.Body)
	require.NoError(t, rerr, "reading the body of %s", url)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode, nil
}

// breakerOf returns the breaker the manager registered under name.
func breakerOf(t *testing.T, m *manager.Manager, name string) *manager.Breaker {
	t.Helper()
	b, ok := m.Breaker(name)
	require.True(t, ok, "breaker %q is registered", name)
	return b
}

// roundTripFunc is a RoundTripper made of a function, for wrapping a real
// transport in tests.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
