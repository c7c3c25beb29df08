package httpbreaker_test

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/httpbreaker"
)

// bodyLedger wraps a real transport and keeps every response body it hands
// out, to check what the breaker's transport did with them.
type bodyLedger struct {
	mu     sync.Mutex
	bodies []*countingBody
}

func (l *bodyLedger) wrap(base http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if resp != nil {
			b := &countingBody{Reader: resp.Body}
			resp.Body = b
			l.mu.Lock()
			l.bodies = append(l.bodies, b)
			l.mu.Unlock()
		}
		return resp, err
	})
}

func (l *bodyLedger) last() *countingBody {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bodies[len(l.bodies)-1]
}

func TestResponseBodiesAreLeftToTheCaller(t *testing.T) {
	m, _ := newManager(t)
	up := newUpstream(t)
	ledger := &bodyLedger{}
	tr := newTransport(t, m, 3, time.Minute, httpbreaker.Options{Base: ledger.wrap(newBase(t))})
	c := &http.Client{Transport: tr}

	for i, q := range []string{"status=200", "status=404", "status=500", "status=503&retry=5", "status=500", "status=200"} {
		resp, err := c.Get(up.URL + "/?" + q)
		if i == 5 {
			require.ErrorIs(t, err, breaker.ErrOpen, "request %d (%s)", i, q)
			continue
		}
		require.NoError(t, err, "request %d (%s)", i, q)
		body := ledger.last()
		assert.Same(t, body, resp.Body, "request %d: the caller gets the body the wrapped transport returned", i)
		assert.Zero(t, body.read.Load(), "request %d: the transport read none of the body", i)
		assert.False(t, body.closed.Load(), "request %d: the transport did not close the body", i)

		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Contains(t, string(data), "status ", "request %d: the whole body is there", i)
		require.NoError(t, resp.Body.Close())
	}
	require.Len(t, ledger.bodies, 5, "the declined request produced no response")
	for i, b := range ledger.bodies {
		assert.True(t, b.closed.Load(), "body %d was closed by its caller", i)
	}
	st := breakerOf(t, m, up.key()).Stats()
	assert.Equal(t, uint64(2), st.Successes)
	assert.Equal(t, uint64(3), st.Failures)
}
