package httpbreaker_test

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/httpbreaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

func TestRetryAfterKeepsTheBreakerOpen(t *testing.T) {
	date := func(d time.Duration) string { return t0.Add(d).Format(http.TimeFormat) }
	cases := []struct {
		name  string
		query string // of the request that trips the breaker
		opts  httpbreaker.Options
		open  time.Duration // how long the breaker must stay open
	}{
		{"503 with seconds", "status=503&retry=120", httpbreaker.Options{}, 120 * time.Second},
		{"429 with seconds", "status=429&retry=45", httpbreaker.Options{}, 45 * time.Second},
		{"503 with an HTTP date", "status=503&retry=" + url.QueryEscape(date(90*time.Second)), httpbreaker.Options{}, 90 * time.Second},
		{"a hint shorter than the policy", "status=503&retry=3", httpbreaker.Options{}, 10 * time.Second},
		{"a date in the past", "status=503&retry=" + url.QueryEscape(date(-time.Hour)), httpbreaker.Options{}, 10 * time.Second},
		{"a malformed header", "status=503&retry=soon", httpbreaker.Options{}, 10 * time.Second},
		{"no header", "status=503", httpbreaker.Options{}, 10 * time.Second},
		{"500 is not asked to wait", "status=500&retry=120", httpbreaker.Options{}, 10 * time.Second},
		{"capped", "status=503&retry=3600", httpbreaker.Options{MaxRetryAfter: 30 * time.Second}, 30 * time.Second},
		{"capped by default", "status=503&retry=86400", httpbreaker.Options{}, httpbreaker.DefaultMaxRetryAfter},
		{"turned off", "status=503&retry=120", httpbreaker.Options{IgnoreRetryAfter: true}, 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, mock := newManager(t)
			up := newUpstream(t)
			c := &http.Client{Transport: newTransport(t, m, 1, 10*time.Second, tc.opts)}

			_, err := do(t, c, up.URL+"/?"+tc.query)
			require.NoError(t, err)
			m.Sync()
			b := breakerOf(t, m, up.key())
			require.Equal(t, breaker.Open, b.State())
			assert.Equal(t, t0.Add(tc.open), b.Snapshot().Until, "the open period ends %v after the trip", tc.open)

			mock.Add(tc.open - time.Millisecond)
			m.Sync()
			assert.Equal(t, breaker.Open, b.State(), "still open 1ms before %v", tc.open)
			_, err = do(t, c, up.URL)
			assert.ErrorIs(t, err, breaker.ErrOpen)

			mock.Add(time.Millisecond)
			m.Sync()
			assert.Equal(t, breaker.HalfOpen, b.State(), "half open after %v", tc.open)
			assert.Equal(t, int64(1), up.hits.Load())
		})
	}
}

func TestRetryAfterOnAFailedProbe(t *testing.T) {
	m, mock := newManager(t)
	up := newUpstream(t)
	c := &http.Client{Transport: newTransport(t, m, 1, 10*time.Second, httpbreaker.Options{})}

	_, err := do(t, c, up.URL+"/?status=500")
	require.NoError(t, err)
	mock.Add(10 * time.Second)
	m.Sync()
	b := breakerOf(t, m, up.key())
	require.Equal(t, breaker.HalfOpen, b.State())

	_, err = do(t, c, up.URL+"/?status=429&retry=60")
	require.NoError(t, err)
	m.Sync()
	require.Equal(t, breaker.Open, b.State(), "the probe failed")
	assert.Equal(t, mock.Now().Add(60*time.Second), b.Snapshot().Until)
	mock.Add(59 * time.Second)
	m.Sync()
	assert.Equal(t, breaker.Open, b.State())
	mock.Add(time.Second)
	m.Sync()
	assert.Equal(t, breaker.HalfOpen, b.State())
}

func TestRetryAfterIsForgottenAfterASuccess(t *testing.T) {
	m, mock := newManager(t)
	up := newUpstream(t)
	c := &http.Client{Transport: newTransport(t, m, 2, 10*time.Second, httpbreaker.Options{})}

	for _, q := range []string{"status=503&retry=120", "status=200", "status=500", "status=500"} {
		_, err := do(t, c, up.URL+"/?"+q)
		require.NoError(t, err, q)
	}
	m.Sync()
	b := breakerOf(t, m, up.key())
	require.Equal(t, breaker.Open, b.State())
	assert.Equal(t, t0.Add(10*time.Second), b.Snapshot().Until, "the success in between cleared the hint")
	mock.Add(10 * time.Second)
	m.Sync()
	assert.Equal(t, breaker.HalfOpen, b.State())
}

// Only the response that opens the breaker sets the open period: a hint
// from an earlier 503 does not outlive the response that carried it.
func TestRetryAfterOfTheOpeningResponseOnly(t *testing.T) {
	m, mock := newManager(t)
	up := newUpstream(t)
	c := &http.Client{Transport: newTransport(t, m, 2, 10*time.Second, httpbreaker.Options{})}

	_, err := do(t, c, up.URL+"/?status=503&retry=30")
	require.NoError(t, err)
	mock.Add(5 * time.Second)
	_, err = do(t, c, up.URL+"/?status=500")
	require.NoError(t, err)
	m.Sync()
	b := breakerOf(t, m, up.key())
	require.Equal(t, breaker.Open, b.State())
	assert.Equal(t, mock.Now().Add(10*time.Second), b.Snapshot().Until, "the 500 that tripped the breaker asked for nothing")
}

// The response that opened the breaker is the declined requests' cause,
// and a breaker registered by hand gets its hint in recover.Context.Err.
func TestRetryAfterReachesThePolicyAndTheCause(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	var hint time.Duration
	_, err := m.Register(up.key(), manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover: recover.Func(nil, func(c recover.Context, _ struct{}) (time.Duration, struct{}) {
			if c.Transition.To == breaker.Open {
				var h recover.Hint
				if errors.As(c.Err, &h) {
					hint = h.RetryAfter()
				}
			}
			return time.Minute, struct{}{}
		}),
	})
	require.NoError(t, err)
	c := &http.Client{Transport: newTransport(t, m, 1, 10*time.Second, httpbreaker.Options{})}
	_, err = do(t, c, up.URL+"/?status=503&retry=42")
	require.NoError(t, err)
	m.Sync()
	assert.Equal(t, 42*time.Second, hint)

	_, err = do(t, c, up.URL)
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	var se *httpbreaker.StatusError
	require.ErrorAs(t, oe.Cause, &se)
	assert.Equal(t, http.StatusServiceUnavailable, se.StatusCode)
	assert.Equal(t, 42*time.Second, se.Wait)
	assert.Contains(t, err.Error(), "opened by: httpbreaker: the upstream answered 503 Service Unavailable (Retry-After: 42s)")
}

func TestRetryAfterParsing(t *testing.T) {
	now := t0
	cases := []struct {
		status int
		header string
		want   time.Duration
		ok     bool
	}{
		{503, "120", 120 * time.Second, true},
		{429, " 7 ", 7 * time.Second, true},
		{503, "0", 0, false},
		{503, "-5", 0, false},
		{503, "1.5", 0, false},
		{503, "", 0, false},
		{503, "soon", 0, false},
		{503, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{503, now.Add(90 * time.Second).Format(time.RFC850), 90 * time.Second, true},
		{503, now.Add(90 * time.Second).Format(time.ANSIC), 90 * time.Second, true},
		{503, now.Format(http.TimeFormat), 0, false},
		{503, now.Add(-time.Minute).Format(http.TimeFormat), 0, false},
		{503, "99999999999999999999999", 100 * 365 * 24 * time.Hour, true},
		{500, "120", 0, false},
		{200, "120", 0, false},
	}
	for _, tc := range cases {
		resp := &http.Response{StatusCode: tc.status, Header: http.Header{"Retry-After": {tc.header}}}
		got, ok := httpbreaker.RetryAfter(resp, now)
		assert.Equal(t, tc.ok, ok, "status %d, Retry-After %q", tc.status, tc.header)
		assert.Equal(t, tc.want, got, "status %d, Retry-After %q", tc.status, tc.header)
	}
	_, ok := httpbreaker.RetryAfter(nil, now)
	assert.False(t, ok, "a nil response")
}
