package manager_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// crashScenarios are uses of the manager that must not bring the process
// down: each runs in a process of its own, where a panic on a goroutine
// nobody can recover (the manager's) or an exhausted memory would end the
// process rather than fail a test. Each returns an error if the library
// misbehaved without crashing.
var crashScenarios = map[string]func() error{
	"huge windows": func() error {
		m := manager.Start(manager.Options{Logger: quietLogger})
		defer m.Stop()
		for _, w := range []int{math.MaxInt, 1 << 40, 1<<20 + 1} {
			if _, err := m.Register(fmt.Sprint("w", w), manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: w}}); err == nil {
				return fmt.Errorf("Window %d accepted", w)
			}
		}
		_, err := m.Register("buckets", manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: time.Hour, Buckets: math.MaxInt, MinCalls: 1}})
		if err == nil {
			return fmt.Errorf("Buckets MaxInt accepted")
		}
		return nil
	},
	"hostile names": func() error {
		m := manager.Start(manager.Options{Logger: quietLogger})
		defer m.Stop()
		for _, name := range []string{"", strings.Repeat("x", 1<<20), "a\nb", "\x00", "\xff"} {
			if _, err := m.Register(name, manager.Config{}); err == nil {
				return fmt.Errorf("name %.20q accepted", name)
			}
		}
		return nil
	},
	"panicking callbacks": func() error {
		for _, opts := range []manager.Options{{}, {RestartOne: true}, {FailOpen: true}} {
			opts.Logger = quietLogger
			m := manager.Start(opts)
			var bs []*manager.Breaker
			for i := range 4 {
				b, err := m.Register(fmt.Sprint("p", i), manager.Config{
					Strategy: breaker.Consecutive{Failures: 1},
					Recover: recover.Func(
						func() (int, error) {
							if i == 3 {
								panic("init")
							}
							return 0, nil
						},
						func(recover.Context, int) (time.Duration, int) { panic("timeout") }),
				})
				if i == 3 {
					if err == nil {
						return fmt.Errorf("a panicking Init registered")
					}
					continue
				}
				if err != nil {
					return err
				}
				bs = append(bs, b)
			}
			for range 20 {
				for _, b := range bs {
					_ = b.Do(context.Background(), func(context.Context) error { return errBoom })
				}
				m.Sync()
			}
			<-m.Done() // halted
			m.Stop()
		}
		return nil
	},
	"panicking strategies": func() error {
		m := manager.Start(manager.Options{Logger: quietLogger})
		defer m.Stop()
		for _, s := range []breaker.Strategy{panicStrategy{}, (*ptrStrategy)(nil)} {
			if _, err := m.Register(fmt.Sprintf("%T", s), manager.Config{Strategy: s}); err == nil {
				return fmt.Errorf("%T accepted", s)
			}
		}
		return nil
	},
	"nil function and context": func() error {
		m := manager.Start(manager.Options{Logger: quietLogger})
		defer m.Stop()
		b, err := m.Register("nils", manager.Config{})
		if err != nil {
			return err
		}
		var nilCtx context.Context
		if b.Do(context.Background(), nil) == nil || b.Do(nilCtx, func(context.Context) error { return nil }) == nil {
			return fmt.Errorf("Do accepted a nil")
		}
		if _, err := b.Acquire(nilCtx); err == nil {
			return fmt.Errorf("Acquire accepted a nil context")
		}
		return nil
	},
	"panicking logger": func() error {
		m := manager.Start(manager.Options{Logger: slog.New(panicHandler{}), MaxRestarts: -1, Watchdog: -1})
		defer m.Stop()
		b, err := m.Register("p", manager.Config{
			Strategy: breaker.Consecutive{Failures: 1},
			Recover:  recover.Func[int](nil, func(recover.Context, int) (time.Duration, int) { panic("timeout") }),
		})
		if err != nil {
			return err
		}
		for range 10 {
			_ = b.Do(context.Background(), func(context.Context) error { return errBoom })
			m.Sync()
		}
		return nil
	},
	"blocking callback and Stop": func() error {
		m := manager.Start(manager.Options{Logger: quietLogger, Watchdog: 10 * time.Millisecond})
		block := make(chan struct{})
		b, err := m.Register("block", manager.Config{
			Strategy: breaker.Consecutive{Failures: 1},
			Recover: recover.Func[int](nil, func(recover.Context, int) (time.Duration, int) {
				<-block
				return time.Second, 0
			}),
		})
		if err != nil {
			return err
		}
		_ = b.Do(context.Background(), func(context.Context) error { return errBoom })
		m.Stop()
		close(block)
		return nil
	},
	"far-future clock": func() error {
		mock := clock.NewMock()
		mock.Set(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC))
		m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger})
		defer m.Stop()
		b, err := m.Register("far", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: math.MaxInt64}})
		if err != nil {
			return err
		}
		_ = b.Do(context.Background(), func(context.Context) error { return errBoom })
		m.Sync()
		mock.Add(200 * 365 * 24 * time.Hour)
		m.Sync()
		if b.State() != breaker.Open {
			return fmt.Errorf("state %v, want open", b.State())
		}
		return nil
	},
}

// envCrashScenario names the scenario a child process runs.
const envCrashScenario = "FUSEBOX_CRASH_SCENARIO"

// Each scenario of crashScenarios runs in a child process (this test
// binary, run again) and must end with the process alive and well.
func TestProcessSurvives(t *testing.T) {
	if name := os.Getenv(envCrashScenario); name != "" {
		err := crashScenarios[name]()
		if err != nil {
			fmt.Println("scenario failed:", err)
			os.Exit(3)
		}
		fmt.Println("scenario survived")
		os.Exit(0) // before goleak: a blocked callback's goroutine may still be ending
	}
	for name := range crashScenarios {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestProcessSurvives$", "-test.count=1")
			cmd.Env = append(os.Environ(), envCrashScenario+"="+name, "GOMEMLIMIT=512MiB")
			out, err := cmd.CombinedOutput()
			assert.NoError(t, err, "the process running %q did not end well:\n%s", name, out)
			assert.Contains(t, string(out), "scenario survived", "%s", out)
		})
	}
}
