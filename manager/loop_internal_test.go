package manager

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
	"github.com/fusebox-go/fusebox/recover"
)

// loopless returns a manager whose goroutine is not running: the test
// drives handle, runDue and arm itself.
func loopless(t *testing.T) (*Manager, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	m := newManager(Options{Clock: mock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() {
		m.shutdown()
		close(m.done)
	})
	return m, mock
}

// serveOne handles one request of the loop that is not running, so that a
// test can call the exported method that sends it.
func serveOne[R any](c chan R, handle func(R)) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		handle(<-c)
	}()
	return func() { <-done }
}

// registerLoopless registers a local breaker, which needs no loop: it is
// inserted on the caller's goroutine.
func registerLoopless(t *testing.T, m *Manager, name string, cfg Config) *Breaker {
	t.Helper()
	require.Nil(t, cfg.Store, "a shared breaker needs the loop")
	b, err := m.Register(name, cfg)
	require.NoError(t, err)
	return b
}

func subscribeLoopless(m *Manager, buffer int) <-chan Event {
	wait := serveOne(m.subscribec, m.subscribe)
	ch, _ := m.Subscribe(buffer)
	wait()
	return ch
}

func drainEvents(ch <-chan Event) []Event {
	var evs []Event
	for {
		select {
		case e := <-ch:
			evs = append(evs, e)
		default:
			return evs
		}
	}
}

// cycle makes a breaker go closed -> open -> half_open -> probing -> closed
// through its machine, as callers and timers would, and returns the steps
// without giving them to the manager.
func cycle(t *testing.T, b *Breaker, start time.Time) []machine.Step {
	t.Helper()
	gen := b.mach.Snapshot().Gen
	s1, ok := b.mach.Trip(gen, classify.Failure, nil, start)
	require.True(t, ok)
	s2, ok := b.mach.Expire(s1.Gen, start.Add(time.Second))
	require.True(t, ok)
	tk, s3, oerr := b.mach.Acquire(start.Add(2 * time.Second))
	require.Nil(t, oerr)
	require.True(t, tk.Probe)
	s4, r := b.mach.EndProbe(tk, classify.Success, nil, start.Add(3*time.Second))
	require.Equal(t, machine.Counted, r)
	return []machine.Step{s1, s2, s3, s4}
}

func transitions(evs []Event) []breaker.Transition {
	var ts []breaker.Transition
	for _, e := range evs {
		ts = append(ts, e.Transition)
	}
	return ts
}

var fullCycle = []breaker.Transition{
	{From: breaker.Closed, To: breaker.Open},
	{From: breaker.Open, To: breaker.HalfOpen},
	{From: breaker.HalfOpen, To: breaker.Probing},
	{From: breaker.Probing, To: breaker.Closed},
}

// Steps that reach the manager out of generation order wait until the
// missing ones arrive, and come out in order.
func TestHandleOrdersSteps(t *testing.T) {
	for _, order := range [][]int{
		{0, 1, 2, 3},
		{3, 2, 1, 0},
		{1, 0, 3, 2},
		{2, 3, 0, 1},
		{1, 3, 2, 0},
	} {
		m, mock := loopless(t)
		b := registerLoopless(t, m, "b", Config{
			Strategy: breaker.Consecutive{Failures: 1},
			Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: 5 * time.Second},
		})
		events := subscribeLoopless(m, 16)
		start := mock.Now()
		steps := cycle(t, b, start)

		var got []Event
		seen := map[int]bool{}
		for _, k := range order {
			m.handle(b, steps[k])
			seen[k] = true
			// Out so far: every step before the first one still missing.
			prefix := 0
			for prefix < len(steps) && seen[prefix] {
				prefix++
			}
			got = append(got, drainEvents(events)...)
			require.Len(t, got, prefix, "order %v: events after step %d", order, k)
			assert.Len(t, m.early[b], len(seen)-prefix, "order %v: steps waiting after step %d", order, k)
		}
		assert.Equal(t, fullCycle, transitions(got), "order %v", order)
		for i, e := range got {
			assert.Equal(t, steps[i].Gen, e.Gen, "order %v: event %d", order, i)
			assert.Equal(t, steps[i].At, e.At, "order %v: event %d", order, i)
			assert.Equal(t, steps[i].Cause, e.Cause, "order %v: event %d", order, i)
			assert.Equal(t, "b", e.Name)
		}
		assert.Nil(t, m.early[b], "order %v: nothing left waiting", order)
		assert.Equal(t, steps[3].Gen+1, b.nextGen)

		// The two steps that start a timer pushed one deadline each.
		require.Len(t, m.timers, 2, "order %v", order)
		var ats []time.Time
		for len(m.timers) > 0 {
			ats = append(ats, m.timers.pop().at)
		}
		assert.Equal(t, []time.Time{start.Add(time.Second), start.Add(2*time.Second + 5*time.Second)}, ats,
			"order %v: the open period counts from the trip, the probe timeout from the probe", order)

		// A step seen again, or one from before, changes nothing.
		m.handle(b, steps[1])
		assert.Empty(t, drainEvents(events), "order %v: a repeated step", order)
		assert.Nil(t, m.early[b])
	}
}

// Each breaker's steps are ordered on their own: one breaker waiting for a
// missing step does not hold back another's.
func TestHandleOrdersPerBreaker(t *testing.T) {
	m, mock := loopless(t)
	cfg := Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Second}}
	a := registerLoopless(t, m, "a", cfg)
	b := registerLoopless(t, m, "b", cfg)
	events := subscribeLoopless(m, 16)
	sa := cycle(t, a, mock.Now())
	sb := cycle(t, b, mock.Now())

	m.handle(a, sa[1])
	m.handle(b, sb[0])
	m.handle(b, sb[1])
	m.handle(a, sa[2])
	evs := drainEvents(events)
	require.Len(t, evs, 2)
	assert.Equal(t, []string{"b", "b"}, []string{evs[0].Name, evs[1].Name})
	m.handle(a, sa[0])
	evs = drainEvents(events)
	require.Len(t, evs, 3)
	assert.Equal(t, fullCycle[:3], transitions(evs))
	for _, e := range evs {
		assert.Equal(t, "a", e.Name)
	}
}

// The loop's drainNotes hands notes to handle in the order they were sent;
// steps sent out of order still come out in order.
func TestDrainNotesOutOfOrder(t *testing.T) {
	m, mock := loopless(t)
	b := registerLoopless(t, m, "b", Config{Strategy: breaker.Consecutive{Failures: 1}})
	events := subscribeLoopless(m, 16)
	steps := cycle(t, b, mock.Now())
	for _, k := range []int{2, 0, 3, 1} {
		m.notify(b, steps[k])
	}
	m.drainNotes()
	assert.Equal(t, fullCycle, transitions(drainEvents(events)))
	assert.Zero(t, len(m.notes))
}

// runDue expires exactly the deadlines due at the clock's time, in order,
// and skips those whose generation has passed.
func TestRunDue(t *testing.T) {
	m, mock := loopless(t)
	a := registerLoopless(t, m, "a", Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: 2 * time.Second}})
	b := registerLoopless(t, m, "b", Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Second}})
	c := registerLoopless(t, m, "c", Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Second}})
	events := subscribeLoopless(m, 16)
	now := mock.Now()
	for _, br := range []*Breaker{a, b, c} {
		s, ok := br.mach.Trip(br.mach.Snapshot().Gen, classify.Failure, nil, now)
		require.True(t, ok)
		m.handle(br, s)
	}
	// c is reset by hand: its deadline is stale.
	s, ok := c.mach.Reset(now, breaker.CauseReset)
	require.True(t, ok)
	m.handle(c, s)
	drainEvents(events)

	mock.Add(999 * time.Millisecond)
	m.runDue()
	assert.Empty(t, drainEvents(events), "nothing is due at 999ms")
	assert.Len(t, m.timers, 3)

	mock.Add(time.Millisecond)
	m.runDue()
	evs := drainEvents(events)
	require.Len(t, evs, 1, "b's deadline; c's was stale")
	assert.Equal(t, "b", evs[0].Name)
	assert.Equal(t, breaker.CauseTimer, evs[0].Cause)
	assert.Equal(t, now.Add(time.Second), evs[0].At, "a timer's transition happens at its deadline")
	assert.Equal(t, breaker.Closed, c.State())
	assert.Len(t, m.timers, 1)

	mock.Add(5 * time.Second) // late: the transition still carries the deadline
	m.runDue()
	evs = drainEvents(events)
	require.Len(t, evs, 1)
	assert.Equal(t, "a", evs[0].Name)
	assert.Equal(t, now.Add(2*time.Second), evs[0].At)
	assert.Empty(t, m.timers)
}

// arm sets the one clock timer for the earliest deadline, and disarms it
// when the heap is empty.
func TestArm(t *testing.T) {
	m, mock := loopless(t)
	m.arm()
	assert.False(t, m.armed)
	assert.Nil(t, m.timer, "no timer while nothing is due")

	now := mock.Now()
	m.timers.push(deadline{at: now.Add(3 * time.Second)})
	m.timers.push(deadline{at: now.Add(time.Second)})
	m.arm()
	require.NotNil(t, m.timer)
	assert.True(t, m.armed)
	assert.Equal(t, now.Add(time.Second), m.armedAt)

	mock.Add(999 * time.Millisecond)
	select {
	case <-m.timer.C:
		t.Fatal("the timer fired early")
	default:
	}
	mock.Add(time.Millisecond)
	select {
	case <-m.timer.C:
	default:
		t.Fatal("the timer did not fire at the earliest deadline")
	}
	m.armed = false // as the loop does on a tick
	m.timers.pop()
	m.arm()
	assert.Equal(t, now.Add(3*time.Second), m.armedAt)

	m.timers = m.timers[:0]
	m.arm()
	assert.False(t, m.armed)
	mock.Add(time.Hour)
	select {
	case <-m.timer.C:
		t.Fatal("a disarmed timer fired")
	default:
	}
}

// After a burst of deadlines has run, the heap gives its memory back.
func TestRunDueShrinksTheHeap(t *testing.T) {
	m, mock := loopless(t)
	b := registerLoopless(t, m, "b", Config{})
	now := mock.Now()
	for i := range 5000 {
		// Generation 0 never matches: every deadline is stale.
		m.timers.push(deadline{at: now.Add(time.Duration(i+1) * time.Microsecond), b: b})
	}
	m.timers.push(deadline{at: now.Add(time.Hour), b: b})
	big := cap(m.timers)
	mock.Add(time.Second)
	m.runDue()
	require.Len(t, m.timers, 1)
	assert.Less(t, cap(m.timers), big/4, "the heap's backing array shrinks")
	assert.Equal(t, now.Add(time.Hour), m.timers[0].at)
	assert.Equal(t, breaker.Closed, b.State())
}
