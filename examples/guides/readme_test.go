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

// readmeUsage is the usage example of README.md; charge stands for the
// user's call to a service.
func readmeUsage(ctx context.Context, charge func(context.Context) error) (declined bool, err error) {
	m := manager.Start(manager.Options{})
	defer m.Stop()

	b, err := m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 5},
		Recover:  recover.Exponential{Initial: time.Second, Max: time.Minute},
	})
	if err != nil {
		return false, err
	}

	for range 6 {
		err = b.Do(ctx, func(ctx context.Context) error {
			return charge(ctx) // your call to the payments service
		})
		if errors.Is(err, breaker.ErrOpen) {
			// Declined at once, without calling the service: the breaker is open.
			declined = true
		}
	}
	return declined, err
}

func TestReadmeUsage(t *testing.T) {
	errDown := errors.New("payments is down")
	calls := 0
	declined, err := readmeUsage(context.Background(), func(context.Context) error {
		calls++
		return errDown
	})
	assert.True(t, declined, "the sixth call is declined")
	assert.ErrorIs(t, err, breaker.ErrOpen)
	assert.Equal(t, 5, calls, "the fifth failure in a row trips the breaker")

	calls = 0
	declined, err = readmeUsage(context.Background(), func(context.Context) error {
		calls++
		return nil
	})
	assert.False(t, declined)
	assert.NoError(t, err)
	assert.Equal(t, 6, calls)
}
