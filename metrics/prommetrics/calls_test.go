package prommetrics_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/metrics/prommetrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// "Calls" means one thing wherever fusebox shows it: every call that asked
// for a permit and finished, declined ones included. Stats.Calls, the
// collector's calls_total and the dashboard's status agree; released
// calls, by outcome, are released_calls_total.
func TestCallsAreStatsCalls(t *testing.T) {
	_, m, b, _, reg := setup(t, prommetrics.Options{})
	ctx := context.Background()
	require.NoError(t, b.Do(ctx, succeed))
	require.NoError(t, b.Do(ctx, succeed))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, b.Do(ctx, func(context.Context) error { return canceled.Err() }), context.Canceled) // ignored
	require.ErrorIs(t, b.Do(ctx, fail), errDown)
	require.ErrorIs(t, b.Do(ctx, fail), errDown) // trips
	for range 3 {
		require.ErrorIs(t, b.Do(ctx, succeed), breaker.ErrOpen)
	}
	m.Sync()
	st := b.Stats()
	require.Equal(t, uint64(8), st.Calls, "2 successes, 1 ignored, 2 failures, 3 declined")

	assert.Equal(t, float64(st.Calls), sum(t, reg, "fusebox_breaker_calls_total"), "calls_total")
	assert.Equal(t, float64(st.Successes+st.Failures+st.Ignored), sum(t, reg, "fusebox_breaker_released_calls_total"),
		"released_calls_total over its outcomes")
	assert.Equal(t, float64(st.Declined), sum(t, reg, "fusebox_breaker_declined_calls_total"), "declined_calls_total")
	assert.Equal(t, sum(t, reg, "fusebox_breaker_calls_total"),
		sum(t, reg, "fusebox_breaker_released_calls_total")+sum(t, reg, "fusebox_breaker_declined_calls_total"),
		"calls are the released ones and the declined ones")

	h, err := dashboard.New(m, dashboard.Options{})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/api/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var status dashboard.Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&status))
	require.Len(t, status.Breakers, 1)
	assert.Equal(t, st.Calls, status.Breakers[0].Calls, "the dashboard's calls")
}

// sum returns the sum of every series of the counter family name.
func sum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			total := 0.0
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
			return total
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
