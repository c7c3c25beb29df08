// Customrecover shows how to write a recovery policy: a type that
// implements recover.Recover and keeps a state of its own, and the same
// thing written with recover.Func.
//
//	go run ./examples/customrecover
//
// It drives a breaker through trips, failed probes, a probe that runs out of
// time and a recovery on a mock clock, so that it prints the same thing on
// every run: each transition, and the duration the policy chose for it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	fbrecover "github.com/fusebox-go/fusebox/recover" // not recover: the name would hide the builtin recover()
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "customrecover:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	if err := linearDemo(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := funcDemo(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return badOptionsDemo(w)
}

// linearDemo runs the Linear policy through a breaker's whole cycle.
func linearDemo(w io.Writer) error {
	policy := Linear{Base: time.Second, Step: 2 * time.Second, Max: 6 * time.Second}
	fmt.Fprintf(w, "Linear{Base: %v, Step: %v, Max: %v}, tripping after 2 failures in a row\n", policy.Base, policy.Step, policy.Max)
	s, err := start(w, "inventory", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  policy,
	})
	if err != nil {
		return err
	}
	defer s.stop()

	s.say("two calls fail")
	s.calls(classify.Failure, classify.Failure)
	for range 3 {
		s.say("the open period ends; the next call is the probe, and fails")
		s.advanceToUntil()
		s.calls(classify.Failure)
	}
	// Linear counts failed probes only: a probe that runs out of time is not
	// one (the policy is not asked about {probing, half_open}), so the next
	// probe gets the same time.
	s.say("the open period ends; the probe hangs past its time")
	s.advanceToUntil()
	late := s.acquire()
	s.advanceToUntil()
	s.say("the late probe returns: it is stale and changes nothing")
	late.ReleaseOutcome(classify.Failure)
	s.show()
	s.say("the next call is the probe, and succeeds")
	s.calls(classify.Success)
	s.say("two calls fail again: the policy starts over from Base")
	s.calls(classify.Failure, classify.Failure)

	st := s.b.Stats()
	fmt.Fprintf(w, "stats: %d calls, %d succeeded, %d failed (%d of them stale), state %v\n",
		st.Calls, st.Successes, st.Failures, st.Stale, st.State)
	return nil
}

// funcDemo writes a policy with recover.Func: its state is the next open
// period, which doubles every time the breaker opens, while each probe may
// run 1s and leaves it as it is.
func funcDemo(w io.Writer) error {
	fmt.Fprintln(w, "recover.Func: Init returns 1s; Timeout returns (open, 2*open) as the breaker opens, (1s, open) for a probe")
	doubling := fbrecover.Func(
		func() (time.Duration, error) { return time.Second, nil },
		func(c fbrecover.Context, open time.Duration) (time.Duration, time.Duration) {
			if c.Transition.To != breaker.Open {
				return time.Second, open // a probe may run 1s; the open period stays
			}
			return open, 2 * open
		},
	)
	s, err := start(w, "search", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  doubling,
	})
	if err != nil {
		return err
	}
	defer s.stop()

	s.say("a call fails")
	s.calls(classify.Failure)
	s.say("the probe fails")
	s.advanceToUntil()
	s.calls(classify.Failure)
	s.say("the probe succeeds")
	s.advanceToUntil()
	s.calls(classify.Success)
	s.say("a call fails: the state was not reset by the recovery")
	s.calls(classify.Failure)
	return nil
}

// badOptionsDemo shows that Register reports invalid options, naming the
// breaker and the field.
func badOptionsDemo(w io.Writer) error {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	_, err := m.Register("billing", manager.Config{Recover: Linear{Base: time.Second, Max: time.Millisecond}})
	var cerr *breaker.ConfigError
	if !errors.As(err, &cerr) {
		return fmt.Errorf("want a *breaker.ConfigError for invalid options, got %v", err)
	}
	fmt.Fprintln(w, "invalid options:", err)
	return nil
}

// script drives one breaker on a mock clock and prints its transitions.
type script struct {
	w           io.Writer
	mock        *clock.Mock
	m           *manager.Manager
	b           *manager.Breaker
	events      <-chan manager.Event
	unsubscribe func()
	t0          time.Time
}

func start(w io.Writer, name string, cfg manager.Config) (*script, error) {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	b, err := m.Register(name, cfg)
	if err != nil {
		m.Stop()
		return nil, err
	}
	events, unsubscribe := m.Subscribe(16)
	return &script{w: w, mock: mock, m: m, b: b, events: events, unsubscribe: unsubscribe, t0: mock.Now()}, nil
}

func (s *script) stop() {
	s.unsubscribe()
	s.m.Stop()
}

func (s *script) say(what string) { fmt.Fprintf(s.w, "  -- %s\n", what) }

// calls makes one call per outcome, each acquired and released at once.
func (s *script) calls(outcomes ...classify.Outcome) {
	for _, o := range outcomes {
		p, err := s.b.Acquire(context.Background())
		if err != nil {
			fmt.Fprintf(s.w, "  declined: %v\n", err)
			continue
		}
		s.show()
		p.ReleaseOutcome(o)
		s.show()
	}
}

// acquire takes a permit and keeps it.
func (s *script) acquire() manager.Permit {
	p, err := s.b.Acquire(context.Background())
	if err != nil {
		fmt.Fprintf(s.w, "  declined: %v\n", err)
	}
	s.show()
	return p
}

// advanceToUntil moves the mock clock to the end of the current open period
// or probe time, so that its timer fires.
func (s *script) advanceToUntil() {
	snap := s.b.Snapshot()
	s.mock.Add(snap.Until.Sub(s.mock.Now()))
	s.show()
}

// show waits until the manager has handled everything so far, then prints
// the transitions it made and, for those that start a timer, the duration
// the policy chose.
func (s *script) show() {
	s.m.Sync()
	for {
		select {
		case ev := <-s.events:
			s.print(ev)
		default:
			return
		}
	}
}

func (s *script) print(ev manager.Event) {
	line := fmt.Sprintf("  %4v  %-21s %-6v", ev.At.Sub(s.t0), ev.Transition.From.String()+" -> "+ev.Transition.To.String(), ev.Cause)
	// Until is the end of the timer the policy's duration set. It belongs
	// to the newest transition only, which this one is when its Gen is the
	// breaker's.
	if snap := s.b.Snapshot(); snap.Gen == ev.Gen && !snap.Until.IsZero() {
		what := "open for"
		if ev.Transition.To == breaker.Probing {
			what = "the probe may run"
		}
		line += fmt.Sprintf("  %s %v", what, snap.Until.Sub(ev.At))
	}
	fmt.Fprintln(s.w, strings.TrimRight(line, " "))
}
