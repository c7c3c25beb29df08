package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/eventlog"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// A breaker trips, waits out its open period, and a successful probe
// closes it: one line per transition.
func Example() {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()

	// A text handler without the record's own time, so that the output is
	// the same on every run; the transition's time is in "at".
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	l, err := eventlog.Start(m, eventlog.Options{Logger: logger})
	if err != nil {
		fmt.Println(err)
		return
	}

	b, err := m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: 30 * time.Second},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	b.Do(ctx, func(context.Context) error { return errors.New("connection refused") })
	mock.Add(30 * time.Second)
	m.Sync()
	b.Do(ctx, func(context.Context) error { return nil })
	m.Sync()
	l.Close() // writes what was delivered, then returns
	// Output:
	// level=WARN msg="fusebox: breaker state changed" breaker=payments from=closed to=open outcome=failure cause=trip at=2026-03-01T12:00:00.000Z err="connection refused"
	// level=INFO msg="fusebox: breaker state changed" breaker=payments from=open to=half_open outcome=none cause=timer at=2026-03-01T12:00:30.000Z
	// level=INFO msg="fusebox: breaker state changed" breaker=payments from=half_open to=probing outcome=none cause=probe at=2026-03-01T12:00:30.000Z
	// level=INFO msg="fusebox: breaker state changed" breaker=payments from=probing to=closed outcome=success cause=probe at=2026-03-01T12:00:30.000Z
}
