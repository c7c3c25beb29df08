package browser_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("service down")

func fail(context.Context) error    { return errDown }
func succeed(context.Context) error { return nil }

type fixture struct {
	mock *clock.Mock
	m    *manager.Manager
	pay  *manager.Breaker
	h    *dashboard.Handler
	srv  *httptest.Server
}

// setup starts a manager on a mock clock with a breaker "payments" that
// trips on the second failure in a row and stays open 10s, and serves a
// dashboard of it.
func setup(t *testing.T, opts dashboard.Options) *fixture {
	t.Helper()
	f := &fixture{mock: clock.NewMock()}
	f.mock.Set(time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC))
	f.m = manager.Start(manager.Options{Clock: f.mock})
	t.Cleanup(f.m.Stop)
	var err error
	f.pay, err = f.m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: 10 * time.Second},
	})
	require.NoError(t, err)
	f.h, err = dashboard.New(f.m, opts)
	require.NoError(t, err)
	f.srv = httptest.NewServer(f.h)
	// Cleanups run last first: Close ends the event streams, so that the
	// server does not wait for them.
	t.Cleanup(f.srv.Close)
	t.Cleanup(f.h.Close)
	return f
}

// newPrefixMux serves h under /fusebox/, as a program that mounts the
// dashboard beside its own routes would.
func newPrefixMux(h http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/fusebox/", http.StripPrefix("/fusebox", h))
	return mux
}
