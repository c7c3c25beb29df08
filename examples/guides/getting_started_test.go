package guides_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The code of docs/getting-started.md. Each function holds one or more of
// its snippets; the tests below check that each does what the guide says.

type Order struct{ SKU string }

// gsFirstBreaker starts a manager, registers a breaker and calls through it
// six times.
func gsFirstBreaker(ctx context.Context, order Order, charge func(context.Context, Order) error) error {
	m := manager.Start(manager.Options{})
	defer m.Stop()

	b, err := m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 5}, // trip on the 5th failure in a row
		Recover:  recover.Exponential{Initial: time.Second, Max: time.Minute, Jitter: 0.2},
	})
	if err != nil {
		return err
	}

	for range 6 {
		err = b.Do(ctx, func(ctx context.Context) error {
			return charge(ctx, order)
		})
		var open *breaker.OpenError
		switch {
		case errors.As(err, &open):
			// Declined at once: charge was not called. open.Until, unless
			// it is zero, is when the breaker lets a trial call through.
			log.Printf("payments declined the call (%v): %v", open.State, err)
		case err != nil:
			// charge failed (the breaker counted it), or the manager has stopped (manager.ErrStopped).
		}
	}
	return err
}

func gsCall(ctx context.Context, b *manager.Breaker, order Order, quote func(context.Context, string) (int, error)) (int, error) {
	price, err := manager.Call(ctx, b, func(ctx context.Context) (int, error) {
		return quote(ctx, order.SKU)
	})
	return price, err
}

func gsAcquire(ctx context.Context, b *manager.Breaker, w io.Writer, stream func(context.Context, io.Writer) error) error {
	p, err := b.Acquire(ctx)
	if err != nil {
		return err // a *breaker.OpenError, ctx.Err() or manager.ErrStopped
	}
	err = stream(ctx, w)
	p.Release(err) // exactly once
	return err
}

var ErrCardDeclined = errors.New("payments: card declined")

func gsClassify(m *manager.Manager) (*manager.Breaker, error) {
	b, err := m.Register("payments", manager.Config{
		// A declined card is the caller's problem, not the service's.
		Classify: classify.IgnoreErrors(nil, ErrCardDeclined),
	})
	return b, err
}

func gsSlowCall(m *manager.Manager) (*manager.Breaker, error) {
	b, err := m.Register("replica", manager.Config{
		// The replica answers in 50ms when it is well; 800ms is a sick replica.
		SlowCall: 800 * time.Millisecond,
	})
	return b, err
}

func gsWatch(m *manager.Manager, b *manager.Breaker) (unsubscribe func()) {
	st := b.Stats()
	log.Printf("%s is %v: %d calls, %d declined", st.Name, st.State, st.Calls, st.Declined)

	events, unsubscribe := m.Subscribe(64)
	go func() {
		for ev := range events {
			log.Printf("breaker %v", ev) // "breaker payments: closed->open (trip)"
			if ev.Err != nil {
				log.Printf("breaker %s opened because: %v", ev.Name, ev.Err)
			}
		}
	}()
	return unsubscribe
}

func gsDryRun(m *manager.Manager) (*manager.Breaker, manager.Config, error) {
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 5},
		DryRun:   true, // watch first: it declines no call
	}
	b, err := m.Register("payments", cfg)
	return b, cfg, err
}

func gsDryRunOff(b *manager.Breaker, cfg manager.Config) error {
	cfg.DryRun = false
	if err := b.Reconfigure(cfg); err != nil {
		return err
	}
	return nil
}

func gsByHand(b *manager.Breaker) error {
	if err := b.ForceOpen(); err != nil { // declines every call until Reset
		return err
	}
	// ... the service is being migrated ...
	if err := b.Reset(); err != nil { // closed again, with its counts cleared
		return err
	}
	return nil
}

func gsHalfOpen(b *manager.Breaker) error {
	if err := b.HalfOpen(); err != nil { // the breaker is not open: closed, half-open, probing or forced
		return err
	}
	// the next call is the probe: its success closes the breaker (with the
	// slow start, if Config.SlowStart is set), its failure opens it again
	return nil
}

func gsReconfigure(b *manager.Breaker) error {
	err := b.Reconfigure(manager.Config{
		Strategy: breaker.Consecutive{Failures: 10}, // counts from a fresh window
		Recover:  recover.BasicTimeout{Open: time.Minute},
	})
	if err != nil {
		return err // names the breaker and the field, as Register's errors do
	}
	return nil
}

func gsRemove(m *manager.Manager) {
	if m.Remove("tenant-42") {
		// Gone: a call through the old handle gets manager.ErrRemoved,
		// and m.Register("tenant-42", ...) makes a new breaker.
		log.Print("tenant-42 removed")
	}
}

// logLines collects what the standard logger prints, line by line.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// captureLog sends the standard logger's output to a logLines for the rest
// of the test.
func captureLog(t *testing.T) *logLines {
	l := new(logLines)
	flags := log.Flags()
	log.SetOutput(l)
	log.SetFlags(0)
	t.Cleanup(func() {
		log.SetOutput(os.Stderr)
		log.SetFlags(flags)
	})
	return l
}

func TestGettingStartedFirstBreaker(t *testing.T) {
	logged := captureLog(t)
	errDown := errors.New("payments is down")
	calls := 0
	err := gsFirstBreaker(context.Background(), Order{SKU: "sku-1"}, func(context.Context, Order) error {
		calls++
		return errDown
	})
	assert.ErrorIs(t, err, breaker.ErrOpen, "the sixth call is declined")
	assert.Equal(t, 5, calls, "charge runs for the first five calls only")
	lines := logged.get()
	if assert.Len(t, lines, 1) {
		assert.Regexp(t, `^payments declined the call \(open\): fusebox: breaker "payments" is open( until \S+)?, opened by: payments is down$`, lines[0])
	}
}

func TestGettingStartedCall(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	b, err := m.Register("quotes", manager.Config{})
	require.NoError(t, err)
	quote := func(_ context.Context, sku string) (int, error) { return len(sku) * 100, nil }

	price, err := gsCall(context.Background(), b, Order{SKU: "sku-1"}, quote)
	assert.NoError(t, err)
	assert.Equal(t, 500, price)

	require.NoError(t, b.ForceOpen())
	price, err = gsCall(context.Background(), b, Order{SKU: "sku-1"}, quote)
	assert.ErrorIs(t, err, breaker.ErrOpen)
	assert.Zero(t, price, "a declined Call returns the zero value")
}

func TestGettingStartedAcquire(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	b, err := m.Register("feed", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	require.NoError(t, err)
	errCut := errors.New("stream cut")
	var out strings.Builder

	err = gsAcquire(context.Background(), b, &out, func(_ context.Context, w io.Writer) error {
		_, err := io.WriteString(w, "event 1\n")
		return err
	})
	assert.NoError(t, err)
	assert.Equal(t, "event 1\n", out.String())

	err = gsAcquire(context.Background(), b, &out, func(context.Context, io.Writer) error { return errCut })
	assert.ErrorIs(t, err, errCut)
	assert.Equal(t, breaker.Open, b.State(), "the released failure trips a Consecutive{Failures: 1}")

	err = gsAcquire(context.Background(), b, &out, func(context.Context, io.Writer) error {
		t.Error("stream called through an open breaker")
		return nil
	})
	assert.ErrorIs(t, err, breaker.ErrOpen)

	m.Stop()
	err = gsAcquire(context.Background(), b, &out, func(context.Context, io.Writer) error { return nil })
	assert.ErrorIs(t, err, manager.ErrStopped)
}

func TestGettingStartedClassify(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	b, err := gsClassify(m)
	require.NoError(t, err)
	for range 10 {
		_ = b.Do(context.Background(), func(context.Context) error {
			return fmt.Errorf("charge order 7: %w", ErrCardDeclined)
		})
	}
	st := b.Stats()
	assert.Equal(t, breaker.Closed, st.State, "ignored errors never trip the breaker")
	assert.Equal(t, uint64(10), st.Ignored)
	assert.Zero(t, st.Failures)
}

func TestGettingStartedSlowCall(t *testing.T) {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, err := gsSlowCall(m)
	require.NoError(t, err)
	call := func(took time.Duration) {
		_ = b.Do(context.Background(), func(context.Context) error {
			mock.Add(took)
			return nil
		})
	}
	call(799 * time.Millisecond)
	assert.Equal(t, uint64(1), b.Stats().Successes, "799ms is not slow")
	for range 5 {
		call(800 * time.Millisecond)
	}
	m.Sync()
	st := b.Stats()
	assert.Equal(t, breaker.Open, st.State, "five slow calls in a row trip the default strategy")
	assert.Equal(t, uint64(5), st.SlowCalls)
	assert.Equal(t, uint64(5), st.Failures)
}

func TestGettingStartedWatch(t *testing.T) {
	logged := captureLog(t)
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{Recover: recover.BasicTimeout{Open: time.Second}})
	require.NoError(t, err)

	// Three calls fail, then the breaker is opened and closed by hand.
	for range 3 {
		_ = b.Do(context.Background(), func(context.Context) error { return errors.New("boom") })
	}
	unsubscribe := gsWatch(m, b)
	require.NoError(t, gsByHand(b))
	m.Sync()
	unsubscribe()

	want := []string{
		"payments is closed: 3 calls, 0 declined",
		"breaker payments: closed->open (force_open)",
		"breaker payments: open->closed (reset)",
	}
	// The logging goroutine prints the events it received after the
	// subscription ended too; wait for it, within a bound.
	assert.Eventually(t, func() bool { return len(logged.get()) >= len(want) }, 5*time.Second, time.Millisecond)
	assert.Equal(t, want, logged.get())
}

// The event of an opening says why it opened.
func TestGettingStartedWatchWhy(t *testing.T) {
	logged := captureLog(t)
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{Strategy: breaker.Consecutive{Failures: 2}})
	require.NoError(t, err)
	unsubscribe := gsWatch(m, b)
	for range 2 {
		_ = b.Do(context.Background(), func(context.Context) error { return errors.New("dial tcp: connection refused") })
	}
	m.Sync()
	unsubscribe()
	want := []string{
		"payments is closed: 0 calls, 0 declined",
		"breaker payments: closed->open (trip)",
		"breaker payments opened because: dial tcp: connection refused",
	}
	assert.Eventually(t, func() bool { return len(logged.get()) >= len(want) }, 5*time.Second, time.Millisecond)
	assert.Equal(t, want, logged.get())
}

// A dry run opens and declines nothing; turned off, it declines.
func TestGettingStartedDryRun(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	b, cfg, err := gsDryRun(m)
	require.NoError(t, err)
	fail := func(context.Context) error { return errors.New("boom") }
	for range 8 {
		assert.NotErrorIs(t, b.Do(context.Background(), fail), breaker.ErrOpen, "a dry run declines no call")
	}
	m.Sync()
	st := b.Stats()
	assert.Equal(t, breaker.Open, st.State, "it opened on the fifth failure")
	assert.Equal(t, uint64(3), st.WouldDecline)
	require.NoError(t, gsDryRunOff(b, cfg))
	assert.ErrorIs(t, b.Do(context.Background(), fail), breaker.ErrOpen, "out of the dry run, it declines")
}

// TestGettingStartedConfig checks the configurations and the error message
// the guide shows.
func TestGettingStartedConfig(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	for name, strategy := range map[string]breaker.Strategy{
		"rate":   breaker.FailureRate{Rate: 0.5, Window: 100},
		"window": breaker.TimeWindow{Rate: 0.5, Period: time.Minute, MinCalls: 20},
	} {
		_, err := m.Register(name, manager.Config{Strategy: strategy})
		assert.NoError(t, err, "%#v", strategy)
	}

	_, err := m.Register("payments", manager.Config{Strategy: breaker.Consecutive{}})
	assert.EqualError(t, err, `fusebox: register breaker "payments": Config.Strategy: breaker.Consecutive.Failures must be at least 1, got 0`)
	_, err = m.Register("rate", manager.Config{})
	assert.ErrorIs(t, err, manager.ErrDuplicate)
	_, err = m.Register("", manager.Config{})
	assert.Error(t, err)
}

// TestGettingStartedStore registers the shared breakers of the guide's
// table: two managers of one process on one memory store.
func TestGettingStartedStore(t *testing.T) {
	mock := clock.NewMock()
	shared := store.NewMemory(mock)
	var bs [2]*manager.Breaker
	for i := range bs {
		m := manager.Start(manager.Options{Clock: mock})
		defer m.Stop()
		b, err := m.Register("payments", manager.Config{
			Strategy: breaker.Consecutive{Failures: 2},
			Store:    shared,
			Fallback: store.FailClosed,
		})
		require.NoError(t, err)
		bs[i] = b
	}
	fail := func(context.Context) error { return errors.New("down") }
	_ = bs[0].Do(context.Background(), fail)
	_ = bs[1].Do(context.Background(), fail) // the second failure, counted in the store
	assert.Equal(t, breaker.Open, bs[1].State(), "the shared count trips the breaker")
	assert.Eventually(t, func() bool { return bs[0].State() == breaker.Open }, 5*time.Second, time.Millisecond,
		"the other manager follows the store")
}

// TestGettingStartedReconfigure checks what the guide says of Reconfigure:
// a fresh window with the new strategy, the new open period, the same
// errors as Register's.
func TestGettingStartedReconfigure(t *testing.T) {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{})
	require.NoError(t, err)
	boom := func(context.Context) error { return errors.New("boom") }
	for range 4 {
		_ = b.Do(context.Background(), boom)
	}
	require.NoError(t, gsReconfigure(b))
	for range 9 {
		_ = b.Do(context.Background(), boom)
	}
	assert.Equal(t, breaker.Closed, b.State(), "9 failures of 10 in the fresh window; the 4 before do not count")
	_ = b.Do(context.Background(), boom)
	assert.Equal(t, breaker.Open, b.State())
	m.Sync()
	assert.Equal(t, mock.Now().Add(time.Minute), b.Snapshot().Until, "the new Recover's open period")

	err = b.Reconfigure(manager.Config{Strategy: breaker.Consecutive{}})
	assert.EqualError(t, err, `fusebox: reconfigure breaker "payments": Config.Strategy: breaker.Consecutive.Failures must be at least 1, got 0`)
}

// TestGettingStartedRemove checks what the guide says of Remove.
func TestGettingStartedRemove(t *testing.T) {
	logged := captureLog(t)
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	events, unsubscribe := m.Subscribe(8)
	defer unsubscribe()
	old, err := m.Register("tenant-42", manager.Config{})
	require.NoError(t, err)
	gsRemove(m)
	gsRemove(m) // not registered any more: nothing logged
	assert.Equal(t, []string{"tenant-42 removed"}, logged.get())
	assert.ErrorIs(t, old.Do(context.Background(), func(context.Context) error { return nil }), manager.ErrRemoved)
	assert.True(t, old.Stats().Removed)
	assert.Equal(t, breaker.Closed, old.State())
	m.Sync()
	ev := <-events
	assert.Equal(t, manager.EventRemoved, ev.Kind)
	b, err := m.Register("tenant-42", manager.Config{})
	require.NoError(t, err)
	assert.Zero(t, b.Stats().Calls)
}

func gsSlowStart(m *manager.Manager) (*manager.Breaker, error) {
	b, err := m.Register("db", manager.Config{
		// After a recovery: 10 % of the calls 1s later, 50 % after 5s, all after 10s.
		SlowStart: 10 * time.Second,
	})
	return b, err
}

// The slow start snippets of getting-started and recover.md register as
// they say.
func TestSlowStartSnippets(t *testing.T) {
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := gsSlowStart(m)
	require.NoError(t, err)
	assert.Equal(t, breaker.Closed, b.State())
	_, err = m.Register("recovering", rcSlowStart())
	require.NoError(t, err)
}

// The guide's HalfOpen: an open breaker turns half-open, and its next call
// is the probe; a closed one refuses, saying so.
func TestGettingStartedHalfOpen(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	require.NoError(t, err)
	require.ErrorContains(t, gsHalfOpen(b), "closed", "a closed breaker has no open period to end")
	_ = b.Do(context.Background(), func(context.Context) error { return errors.New("boom") })
	require.NoError(t, gsHalfOpen(b))
	p, err := b.Acquire(context.Background())
	require.NoError(t, err)
	assert.True(t, p.Probe(), "the next call is the probe")
	p.Release(nil)
	m.Sync()
	assert.Equal(t, breaker.Closed, b.State())
}
