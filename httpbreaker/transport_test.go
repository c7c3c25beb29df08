package httpbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/httpbreaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

func TestNewRejectsBadInput(t *testing.T) {
	_, err := httpbreaker.New(nil, httpbreaker.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "manager is nil")

	m, _ := newManager(t)
	_, err = httpbreaker.New(m, httpbreaker.Options{MaxRetryAfter: -time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Options.MaxRetryAfter")
	assert.Contains(t, err.Error(), "-1s")
}

func TestStatuses(t *testing.T) {
	cases := []struct {
		status int
		want   classify.Outcome
	}{
		{200, classify.Success},
		{201, classify.Success},
		{204, classify.Success},
		{304, classify.Success},
		{400, classify.Success},
		{401, classify.Success},
		{404, classify.Success},
		{408, classify.Failure},
		{409, classify.Success},
		{429, classify.Failure},
		{500, classify.Failure},
		{501, classify.Failure},
		{502, classify.Failure},
		{503, classify.Failure},
		{504, classify.Failure},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			m, _ := newManager(t)
			up := newUpstream(t)
			c := &http.Client{Transport: newTransport(t, m, 1, time.Minute, httpbreaker.Options{})}

			got, err := do(t, c, fmt.Sprintf("%s/?status=%d", up.URL, tc.status))
			require.NoError(t, err)
			assert.Equal(t, tc.status, got, "the status reaches the caller unchanged")

			st := breakerOf(t, m, up.key()).Stats()
			switch tc.want {
			case classify.Success:
				assert.Equal(t, uint64(1), st.Successes, "status %d is a success", tc.status)
				assert.Equal(t, breaker.Closed, st.State, "status %d leaves the breaker closed", tc.status)
			case classify.Failure:
				assert.Equal(t, uint64(1), st.Failures, "status %d is a failure", tc.status)
				assert.Equal(t, breaker.Open, st.State, "status %d trips a breaker tripping on 1 failure", tc.status)
			}
		})
	}
}

func TestDeclinedRequestDoesNotTouchTheNetwork(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	c := &http.Client{Transport: newTransport(t, m, 2, time.Minute, httpbreaker.Options{})}

	for range 2 {
		status, err := do(t, c, up.URL+"/?status=500")
		require.NoError(t, err)
		require.Equal(t, 500, status)
	}
	m.Sync()
	require.Equal(t, breaker.Open, breakerOf(t, m, up.key()).State())
	require.Equal(t, int64(2), up.hits.Load())

	for i := range 5 {
		body := &countingBody{Reader: strings.NewReader("payload")}
		req, err := http.NewRequest(http.MethodPost, up.URL+"/", body)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.Error(t, err, "request %d", i)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, breaker.ErrOpen, "request %d", i)
		var uerr *url.Error
		assert.ErrorAs(t, err, &uerr, "http.Client wraps the error")
		var oerr *breaker.OpenError
		if assert.ErrorAs(t, err, &oerr) {
			assert.Equal(t, up.key(), oerr.Name)
			assert.Equal(t, t0.Add(time.Minute), oerr.Until)
		}
		assert.True(t, body.closed.Load(), "request %d: the request body of a declined request is closed", i)
		assert.Zero(t, body.read.Load(), "request %d: the request body of a declined request is not read", i)
	}
	assert.Equal(t, int64(2), up.hits.Load(), "declined requests never reach the server")
	assert.Equal(t, uint64(5), breakerOf(t, m, up.key()).Stats().Declined)
}

func TestProbeAndRecovery(t *testing.T) {
	m, mock := newManager(t)
	up := newUpstream(t)
	c := &http.Client{Transport: newTransport(t, m, 1, 10*time.Second, httpbreaker.Options{})}

	_, err := do(t, c, up.URL+"/?status=502")
	require.NoError(t, err)
	b := breakerOf(t, m, up.key())
	require.Equal(t, breaker.Open, b.State())

	mock.Add(10 * time.Second)
	m.Sync()
	require.Equal(t, breaker.HalfOpen, b.State())

	// The probe fails: open again, without another request reaching it.
	_, err = do(t, c, up.URL+"/?status=503")
	require.NoError(t, err)
	assert.Equal(t, breaker.Open, b.State())
	_, err = do(t, c, up.URL+"/")
	assert.ErrorIs(t, err, breaker.ErrOpen)
	assert.Equal(t, int64(2), up.hits.Load())

	mock.Add(10 * time.Second)
	m.Sync()
	status, err := do(t, c, up.URL+"/")
	require.NoError(t, err)
	assert.Equal(t, 200, status)
	assert.Equal(t, breaker.Closed, b.State(), "a successful probe closes the breaker")
	assert.Equal(t, int64(3), up.hits.Load())
}

func TestTransportErrorIsAFailure(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		m, _ := newManager(t)
		up := newUpstream(t)
		target, key := up.URL, up.key()
		up.Close() // nothing listens on the port any more

		c := &http.Client{Transport: newTransport(t, m, 1, time.Minute, httpbreaker.Options{})}
		_, err := do(t, c, target)
		require.Error(t, err)
		assert.NotErrorIs(t, err, breaker.ErrOpen, "the first request was sent")
		var operr *net.OpError
		assert.ErrorAs(t, err, &operr, "the dial error reaches the caller unchanged")

		b := breakerOf(t, m, key)
		assert.Equal(t, uint64(1), b.Stats().Failures)
		assert.Equal(t, breaker.Open, b.State())
	})
	t.Run("connection closed before a response", func(t *testing.T) {
		m, _ := newManager(t)
		var hits atomic.Int64
		srv := newHijackServer(t, &hits)
		c := &http.Client{Transport: newTransport(t, m, 1, time.Minute, httpbreaker.Options{})}
		_, err := do(t, c, srv.URL)
		require.Error(t, err)
		assert.Equal(t, int64(1), hits.Load())
		b := breakerOf(t, m, srv.Listener.Addr().String())
		assert.Equal(t, uint64(1), b.Stats().Failures)
		assert.Equal(t, breaker.Open, b.State())
	})
}

func TestCancelledRequestIsIgnored(t *testing.T) {
	causes := []struct {
		name   string
		cancel func(context.Context) (context.Context, func())
	}{
		{"cancel", func(ctx context.Context) (context.Context, func()) {
			return context.WithCancel(ctx)
		}},
		{"cancel with a cause", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(ctx)
			return ctx, func() { cancel(errors.New("the user went away")) }
		}},
	}
	for _, tc := range causes {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newManager(t)
			srv, entered := newBlockingServer(t)
			c := &http.Client{Transport: newTransport(t, m, 1, time.Minute, httpbreaker.Options{})}

			ctx, cancel := tc.cancel(context.Background())
			go func() {
				<-entered
				cancel()
			}()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			require.NoError(t, err)
			resp, err := c.Do(req)
			require.Error(t, err)
			assert.Nil(t, resp)

			b := breakerOf(t, m, srv.Listener.Addr().String())
			st := b.Stats()
			assert.Equal(t, uint64(1), st.Ignored, "a cancelled request is ignored")
			assert.Zero(t, st.Failures)
			assert.Equal(t, breaker.Closed, st.State, "a breaker tripping on 1 failure stays closed")
		})
	}
}

func TestDeadlineExceededIsAFailure(t *testing.T) {
	t.Run("context deadline", func(t *testing.T) {
		m, _ := newManager(t)
		srv, _ := newBlockingServer(t)
		c := &http.Client{Transport: newTransport(t, m, 1, time.Minute, httpbreaker.Options{})}

		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		_, err = c.Do(req)
		require.ErrorIs(t, err, context.DeadlineExceeded)

		b := breakerOf(t, m, srv.Listener.Addr().String())
		assert.Equal(t, uint64(1), b.Stats().Failures)
		assert.Equal(t, breaker.Open, b.State())
	})
	t.Run("client timeout", func(t *testing.T) {
		m, _ := newManager(t)
		srv, _ := newBlockingServer(t)
		c := &http.Client{
			Transport: newTransport(t, m, 1, time.Minute, httpbreaker.Options{}),
			Timeout:   50 * time.Millisecond,
		}
		_, err := c.Get(srv.URL)
		require.Error(t, err)
		var uerr *url.Error
		require.ErrorAs(t, err, &uerr)
		assert.True(t, uerr.Timeout(), "the client reports a timeout: %v", err)

		b := breakerOf(t, m, srv.Listener.Addr().String())
		assert.Equal(t, uint64(1), b.Stats().Failures)
		assert.Equal(t, breaker.Open, b.State())
	})
}

func TestHostsAreIsolated(t *testing.T) {
	m, _ := newManager(t)
	bad, good := newUpstream(t), newUpstream(t)
	c := &http.Client{Transport: newTransport(t, m, 3, time.Minute, httpbreaker.Options{})}

	for i := range 10 {
		_, err := do(t, c, bad.URL+"/?status=500")
		if i < 3 {
			require.NoError(t, err, "request %d to the failing host is sent", i)
		} else {
			require.ErrorIs(t, err, breaker.ErrOpen, "request %d to the failing host is declined", i)
		}
		status, err := do(t, c, good.URL+"/")
		require.NoError(t, err, "request %d to the healthy host", i)
		require.Equal(t, 200, status)
	}
	assert.Equal(t, int64(3), bad.hits.Load())
	assert.Equal(t, int64(10), good.hits.Load())
	assert.Equal(t, breaker.Open, breakerOf(t, m, bad.key()).State())
	assert.Equal(t, breaker.Closed, breakerOf(t, m, good.key()).State())
	assert.Len(t, m.Breakers(), 2)
}

func TestCustomKeyAndClassifier(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	route := func(r *http.Request) string { return "upstream " + r.URL.Path }
	var configured []string
	var mu sync.Mutex
	tr, err := httpbreaker.New(m, httpbreaker.Options{
		Base: newBase(t),
		Key:  route,
		Config: func(key string) manager.Config {
			mu.Lock()
			configured = append(configured, key)
			mu.Unlock()
			return manager.Config{Strategy: breaker.Consecutive{Failures: 1}}
		},
		// 501 Not Implemented says nothing about the upstream's health.
		Classify: func(resp *http.Response, err error) classify.Outcome {
			if err == nil && resp.StatusCode == http.StatusNotImplemented {
				return classify.Ignore
			}
			return httpbreaker.Classify(resp, err)
		},
	})
	require.NoError(t, err)
	c := &http.Client{Transport: tr}

	_, err = do(t, c, up.URL+"/search?status=501")
	require.NoError(t, err)
	assert.Equal(t, breaker.Closed, breakerOf(t, m, "upstream /search").State(), "501 is ignored")
	_, err = do(t, c, up.URL+"/search?status=500")
	require.NoError(t, err)
	assert.Equal(t, breaker.Open, breakerOf(t, m, "upstream /search").State())

	status, err := do(t, c, up.URL+"/items")
	require.NoError(t, err, "another route of the same host has its own breaker")
	assert.Equal(t, 200, status)
	assert.Equal(t, []string{"upstream /search", "upstream /items"}, configured)
}

func TestEmptyKeyIsAnError(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	tr := newTransport(t, m, 1, time.Minute, httpbreaker.Options{Key: func(*http.Request) string { return "" }})
	body := &countingBody{Reader: strings.NewReader("x")}
	req, err := http.NewRequest(http.MethodPut, up.URL+"/things", body)
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "empty key")
	assert.Contains(t, err.Error(), "PUT "+up.URL+"/things")
	assert.True(t, body.closed.Load(), "the request body is closed on error")
	assert.Zero(t, up.hits.Load())
	assert.Empty(t, m.Breakers())
}

func TestInvalidConfigIsReportedAndRetried(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	var calls atomic.Int64
	tr, err := httpbreaker.New(m, httpbreaker.Options{
		Base: newBase(t),
		Config: func(string) manager.Config {
			calls.Add(1)
			return manager.Config{Strategy: breaker.Consecutive{Failures: 0}}
		},
	})
	require.NoError(t, err)
	c := &http.Client{Transport: tr}
	for i := range 2 {
		_, err := do(t, c, up.URL)
		require.Error(t, err, "request %d", i)
		assert.Contains(t, err.Error(), up.key(), "the error names the breaker")
		assert.Contains(t, err.Error(), "breaker.Consecutive.Failures", "the error names the field")
	}
	assert.Equal(t, int64(2), calls.Load(), "a failed registration is not cached")
	assert.Zero(t, up.hits.Load())
}

func TestConcurrentFirstUseRegistersOneBreaker(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	var configs atomic.Int64
	tr, err := httpbreaker.New(m, httpbreaker.Options{
		Base: newBase(t),
		Config: func(string) manager.Config {
			configs.Add(1)
			return manager.Config{}
		},
	})
	require.NoError(t, err)
	c := &http.Client{Transport: tr}

	const n = 16
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := c.Get(up.URL)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, int64(1), configs.Load(), "the config function is asked once")
	assert.Len(t, m.Breakers(), 1)
	assert.Equal(t, uint64(n), breakerOf(t, m, up.key()).Stats().Successes)
	assert.Equal(t, int64(n), up.hits.Load())
}

func TestTransportsSharingAManagerShareBreakers(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	a := &http.Client{Transport: newTransport(t, m, 2, time.Minute, httpbreaker.Options{})}
	b := &http.Client{Transport: newTransport(t, m, 2, time.Minute, httpbreaker.Options{})}

	// Both register the key at once: one wins, the other gets ErrDuplicate
	// from the manager and uses the winner's breaker.
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range []*http.Client{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := c.Get(up.URL + "/?status=500")
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Len(t, m.Breakers(), 1)
	require.Equal(t, breaker.Open, breakerOf(t, m, up.key()).State(), "two failures through two transports trip one breaker")

	for _, c := range []*http.Client{a, b} {
		_, err := do(t, c, up.URL)
		assert.ErrorIs(t, err, breaker.ErrOpen)
	}
	assert.Equal(t, int64(2), up.hits.Load())
}

func TestPreregisteredBreakerIsUsed(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	pre, err := m.Register(up.key(), manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	require.NoError(t, err)
	var configs atomic.Int64
	tr, err := httpbreaker.New(m, httpbreaker.Options{
		Base:   newBase(t),
		Config: func(string) manager.Config { configs.Add(1); return manager.Config{} },
	})
	require.NoError(t, err)
	c := &http.Client{Transport: tr}

	_, err = do(t, c, up.URL+"/?status=500")
	require.NoError(t, err)
	assert.Equal(t, breaker.Open, pre.State(), "the breaker registered by hand trips on its own strategy")
	_, err = do(t, c, up.URL)
	assert.ErrorIs(t, err, breaker.ErrOpen)
	assert.Equal(t, int64(1), up.hits.Load())
}

func TestStoppedManager(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	c := &http.Client{Transport: newTransport(t, m, 1, time.Minute, httpbreaker.Options{})}
	_, err := do(t, c, up.URL)
	require.NoError(t, err)
	other := newUpstream(t)

	m.Stop()
	_, err = do(t, c, up.URL)
	assert.ErrorIs(t, err, manager.ErrStopped, "a registered breaker")
	_, err = do(t, c, other.URL)
	assert.ErrorIs(t, err, manager.ErrStopped, "a breaker still to register")
	assert.Equal(t, int64(1), up.hits.Load())
	assert.Zero(t, other.hits.Load())
}

func TestPanicInBaseCountsAsFailure(t *testing.T) {
	m, _ := newManager(t)
	tr := newTransport(t, m, 1, time.Minute, httpbreaker.Options{
		Base: roundTripFunc(func(*http.Request) (*http.Response, error) { panic("broken transport") }),
	})
	req, err := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
	require.NoError(t, err)
	assert.PanicsWithValue(t, "broken transport", func() { tr.RoundTrip(req) })
	b := breakerOf(t, m, "upstream.test:80")
	assert.Equal(t, uint64(1), b.Stats().Failures)
	assert.Equal(t, breaker.Open, b.State())
}

// A Config that sets Classify is refused, with an error that names the
// breaker and the field, rather than registered with a Classify the
// Transport would never call.
func TestConfigClassifyIsRejected(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	c := &http.Client{Transport: newTransport(t, m, 1, time.Minute, httpbreaker.Options{
		Config: func(string) manager.Config {
			return manager.Config{Classify: func(error) classify.Outcome { return classify.Ignore }}
		},
	})}
	_, err := do(t, c, up.URL)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `breaker "`+up.key()+`": Config.Classify is not used by a Transport`)
	assert.Zero(t, up.hits.Load(), "nothing was sent")
	_, ok := m.Breaker(up.key())
	assert.False(t, ok, "nothing was registered")
}

// A Classifier that panics releases the request as a failure: a probe does
// not keep its slot until the probe timeout.
func TestPanickingClassifierReleasesTheProbe(t *testing.T) {
	m, mock := newManager(t)
	var panics atomic.Bool
	tr := newTransport(t, m, 1, time.Second, httpbreaker.Options{
		// Responses made up on the spot: the panic leaves no body to close.
		Base: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{}, Body: http.NoBody}, nil
		}),
		Config: func(string) manager.Config {
			return manager.Config{
				Strategy: breaker.Consecutive{Failures: 1},
				Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Hour},
			}
		},
		Classify: func(resp *http.Response, err error) classify.Outcome {
			if panics.Load() {
				panic("classifier")
			}
			return httpbreaker.Classify(resp, err)
		},
	})
	req, err := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	require.NoError(t, err)
	mock.Add(time.Second)
	m.Sync()
	b := breakerOf(t, m, "upstream.test:80")
	require.Equal(t, breaker.HalfOpen, b.State())

	panics.Store(true)
	assert.PanicsWithValue(t, "classifier", func() { tr.RoundTrip(req) })
	m.Sync()
	assert.Equal(t, breaker.Open, b.State(), "the probe was released as a failure")
	assert.EqualValues(t, 2, b.Stats().Failures)
}

func TestDefaultConfig(t *testing.T) {
	m, mock := newManager(t)
	up := newUpstream(t)
	tr, err := httpbreaker.New(m, httpbreaker.Options{Base: newBase(t)})
	require.NoError(t, err)
	c := &http.Client{Transport: tr}

	for i := range 5 {
		_, err := do(t, c, up.URL+"/?status=500")
		require.NoError(t, err, "request %d", i)
	}
	m.Sync()
	b := breakerOf(t, m, up.key())
	require.Equal(t, breaker.Open, b.State(), "the fifth failure in a row trips")
	until := b.Snapshot().Until
	assert.False(t, until.Before(t0.Add(4*time.Second)), "open at least 4s (5s less 20%% jitter): until %v", until)
	assert.False(t, until.After(t0.Add(5*time.Second)), "open at most 5s: until %v", until)
	mock.Add(5 * time.Second)
	m.Sync()
	assert.Equal(t, breaker.HalfOpen, b.State())
}

// newBlockingServer returns a server whose handler signals entered and then
// waits until the client goes away.
func newBlockingServer(t *testing.T) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	entered := make(chan struct{}, 1)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	return srv, entered
}

// newHijackServer returns a server that closes every connection without
// answering.
func newHijackServer(t *testing.T, hits *atomic.Int64) *httptest.Server {
	t.Helper()
	return newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		conn.Close()
	}))
}

// countingBody is a request or response body that counts what is done to
// it.
type countingBody struct {
	io.Reader
	read   atomic.Int64 // bytes read
	closed atomic.Bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error {
	b.closed.Store(true)
	if c, ok := b.Reader.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
