package guides_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/stretchr/testify/assert"
)

// readmeUsage runs the usage example of README.md, then calls through the
// breaker five times more; charge stands for the user's call to a service. It
// returns the last call's error and the breaker's stats.
func readmeUsage(ctx context.Context, charge func(context.Context) error) (st manager.Stats, last error) {
	last = func() error {
		m := manager.Start(manager.Options{})
		defer m.Stop()

		b, err := m.Register("payments", manager.Config{
			Strategy: breaker.Consecutive{Failures: 5},
			Recover:  recover.Exponential{Initial: time.Second, Max: time.Minute},
		})
		if err != nil {
			return err
		}

		err = b.Do(ctx, func(ctx context.Context) error {
			return charge(ctx) // your call to the payments service
		})
		if errors.Is(err, breaker.ErrOpen) {
			// Declined at once, without calling the service: the breaker is open.
		}

		// Five calls more, for the test.
		for range 5 {
			err = b.Do(ctx, charge)
		}
		st = b.Stats()
		return err
	}()
	return st, last
}

func TestReadmeUsage(t *testing.T) {
	errDown := errors.New("payments is down")
	calls := 0
	st, err := readmeUsage(context.Background(), func(context.Context) error {
		calls++
		return errDown
	})
	assert.ErrorIs(t, err, breaker.ErrOpen, "the sixth call is declined")
	assert.Equal(t, 5, calls, "the fifth failure in a row trips the breaker")
	assert.Equal(t, uint64(1), st.Declined)
	assert.Equal(t, breaker.Open, st.State)

	calls = 0
	st, err = readmeUsage(context.Background(), func(context.Context) error {
		calls++
		return nil
	})
	assert.NoError(t, err)
	assert.Equal(t, 6, calls)
	assert.Equal(t, uint64(6), st.Successes)
}
