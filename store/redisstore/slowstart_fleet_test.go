package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// slowStartCalls is how many calls a helper makes at the midpoint of the
// fleet's slow start.
const slowStartCalls = 4000

// slowStartHelper is one process of TestFleetProcessesSlowStart: it shares
// the breaker "svc" (Consecutive{1}, open 500ms, cfg.SlowStart) through
// Redis. The "tripper" trips it with one failure; the "prober" takes the
// probe once the fleet is half-open and succeeds; every process then waits
// for the closing, sleeps to the midpoint of the slow start it follows,
// makes slowStartCalls calls at once, and prints how many went through
// and when its slow start ends.
func slowStartHelper(cfg helperConfig) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "helper %s: "+format+"\n", append([]any{cfg.Role}, args...)...)
		return 2
	}
	c := redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true})
	defer c.Close()
	m := manager.Start(manager.Options{Logger: quiet, Name: cfg.Name})
	defer m.Stop()
	b, err := m.Register("svc", manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: 500 * time.Millisecond, ProbeTimeout: 10 * time.Second},
		Store:     redisstore.New(c, redisstore.Options{}),
		SlowStart: cfg.SlowStart,
	})
	if err != nil {
		return fail("%v", err)
	}
	m.Sync()
	fmt.Println("ready")
	if _, err := fmt.Scanln(new(string)); err != nil {
		return fail("waiting for go: %v", err)
	}
	ctx := context.Background()
	wait := func(what string, cond func() bool) error {
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: not so within 20s (state %v)", what, b.State())
			}
		}
		return nil
	}
	if cfg.Role == "tripper" {
		p, err := b.Acquire(ctx)
		if err != nil {
			return fail("the tripping call: %v", err)
		}
		p.Release(errors.New("down"))
	}
	if err := wait("open", func() bool { return b.State() != breaker.Closed }); err != nil {
		return fail("%v", err)
	}
	if cfg.Role == "prober" {
		if err := wait("half_open", func() bool { return b.State() == breaker.HalfOpen }); err != nil {
			return fail("%v", err)
		}
		p, err := b.Acquire(ctx)
		if err != nil || !p.Probe() {
			return fail("the probe: %v, probe %v", err, p.Probe())
		}
		p.Release(nil)
	}
	if err := wait("closed", func() bool { return b.State() == breaker.Closed }); err != nil {
		return fail("%v", err)
	}
	s := b.Snapshot().SlowStart
	if s == nil {
		return fail("closed without a slow start")
	}
	time.Sleep(time.Until(s.Until.Add(-cfg.SlowStart / 2)))
	share := b.Stats().Admitted
	in := 0
	for range slowStartCalls {
		p, err := b.Acquire(ctx)
		if err == nil {
			in++
			p.Release(nil)
		}
	}
	fmt.Printf("until=%d admitted=%d share=%.3f\n", s.Until.UnixNano(), in, share)
	return 0
}

// TestFleetProcessesSlowStart: three OS processes share a breaker with a
// SlowStart of 4s through a real redis-server; halfway into the fleet's
// slow start each admits 50 % ± 10 points of its calls, whichever process
// probed, and their slow starts end within 100ms of each other: the
// store's, which every process follows.
func TestFleetProcessesSlowStart(t *testing.T) {
	srv := redistest.Start(t)
	const slow = 4 * time.Second
	for _, prober := range []int{0, 2} {
		t.Run(fmt.Sprintf("process %d probes", prober), func(t *testing.T) {
			require.NoError(t, redis.NewClient(&redis.Options{Addr: srv.Addr()}).FlushAll(context.Background()).Err())
			roles := []string{"tripper", "", ""}
			roles[prober] = "prober"
			if prober == 0 {
				roles[1] = "tripper"
			}
			var cmds []*exec.Cmd
			var outs []*syncBuffer
			var gos []io.WriteCloser
			for i, role := range roles {
				env := fmt.Sprintf(`{"redis":%q,"slow_start":%d,"role":%q,"name":"helper-%d"}`, srv.Addr(), slow, role, i)
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), helperEnv+"="+env)
				out := &syncBuffer{}
				cmd.Stdout, cmd.Stderr = out, out
				in, err := cmd.StdinPipe()
				require.NoError(t, err)
				require.NoError(t, cmd.Start())
				cmds, outs, gos = append(cmds, cmd), append(outs, out), append(gos, in)
			}
			for i, out := range outs {
				waitFor(t, 30*time.Second, fmt.Sprintf("helper %d is ready", i), func() bool { return strings.Contains(out.String(), "ready") })
			}
			for _, in := range gos {
				_, _ = io.WriteString(in, "go\n")
				in.Close()
			}
			var untils []int64
			for i, cmd := range cmds {
				err := cmd.Wait()
				out := strings.TrimSpace(strings.TrimPrefix(outs[i].String(), "ready\n"))
				t.Logf("process %d (%s): %s", i, roles[i], out)
				require.NoError(t, err, "process %d: %s", i, out)
				var until int64
				var in int
				var share float64
				_, err = fmt.Sscanf(out, "until=%d admitted=%d share=%g", &until, &in, &share)
				require.NoError(t, err, "process %d: %q", i, out)
				assert.InDelta(t, 0.5, float64(in)/slowStartCalls, 0.10, "process %d (%s) halfway into the fleet's slow start: %d of %d calls", i, roles[i], in, slowStartCalls)
				untils = append(untils, until)
			}
			for i, u := range untils {
				assert.InDelta(t, untils[0], u, float64(100*time.Millisecond), "process %d's slow start ends %v after process 0's", i, time.Duration(u-untils[0]))
			}
		})
	}
}
