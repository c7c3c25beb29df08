package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// A subscriber sees every transition of every breaker, in the order they
// happened, with the outcome and cause and the time on the manager's clock.
func TestSubscribeEveryTransitionInOrder(t *testing.T) {
	m, mock := startMock(t)
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: 500 * time.Millisecond},
	}
	a := register(t, m, "a", cfg)
	b := register(t, m, "b", cfg)
	events, unsubscribe := m.Subscribe(100)
	defer unsubscribe()
	t0 := mock.Now()

	fail(t, b, 1) // b trips first, at 0
	advance(m, mock, 100*time.Millisecond)
	fail(t, a, 1)                   // a trips at 100ms
	advance(m, mock, 2*time.Second) // both open periods end: b at 1s, a at 1.1s
	probe(t, a).Release(nil)        // a: probe succeeds at 2.1s
	pb := probe(t, b)               // b: probe at 2.1s ...
	pb.ReleaseOutcome(classify.Ignore)
	pb = probe(t, b)
	advance(m, mock, 500*time.Millisecond) // ... runs out of time at 2.6s
	pb.Release(nil)                        // late: no event
	probe(t, b).Release(errBoom)           // b: probe fails at 2.6s
	require.NoError(t, a.ForceOpen())
	require.NoError(t, a.Reset())
	m.Sync()

	C, O, H, P := breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing
	F, S, I := classify.Failure, classify.Success, classify.Ignore
	ms := time.Millisecond
	want := []ev{
		{"b", C, O, F, breaker.CauseTrip, 0},
		{"a", C, O, F, breaker.CauseTrip, 100 * ms},
		{"b", O, H, 0, breaker.CauseTimer, 1000 * ms},
		{"a", O, H, 0, breaker.CauseTimer, 1100 * ms},
		{"a", H, P, 0, breaker.CauseProbe, 2100 * ms},
		{"a", P, C, S, breaker.CauseProbe, 2100 * ms},
		{"b", H, P, 0, breaker.CauseProbe, 2100 * ms},
		{"b", P, H, I, breaker.CauseProbe, 2100 * ms},
		{"b", H, P, 0, breaker.CauseProbe, 2100 * ms},
		{"b", P, H, 0, breaker.CauseTimer, 2600 * ms},
		{"b", H, P, 0, breaker.CauseProbe, 2600 * ms},
		{"b", P, O, F, breaker.CauseProbe, 2600 * ms},
		{"a", C, O, 0, breaker.CauseForceOpen, 2600 * ms},
		{"a", O, C, 0, breaker.CauseReset, 2600 * ms},
	}
	got := drain(events)
	assert.Equal(t, want, evsOf(got, t0))

	// Each breaker's events carry its generation, one more each time.
	last := map[string]uint64{}
	for _, e := range got {
		if g, ok := last[e.Name]; ok {
			assert.Equal(t, g+1, e.Gen, "generation of %s's event %v", e.Name, e.Transition)
		}
		last[e.Name] = e.Gen
	}
	assert.Zero(t, a.Stats().DroppedEvents)
	assert.Zero(t, b.Stats().DroppedEvents)
}

// A subscriber sees only what happens after it subscribed.
func TestSubscribeStartsNow(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	fail(t, b, 1)
	m.Sync()
	events, unsubscribe := m.Subscribe(8)
	defer unsubscribe()
	require.NoError(t, b.Reset())
	m.Sync()
	got := drain(events)
	require.Len(t, got, 1)
	assert.Equal(t, breaker.Transition{From: breaker.Open, To: breaker.Closed}, got[0].Transition)
}

// A subscriber that does not read loses the events its buffer cannot hold,
// and neither the manager nor any caller waits for it.
func TestSlowSubscriberDropsAndNeverBlocks(t *testing.T) {
	m, mock := startMock(t)
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
	}
	a := register(t, m, "a", cfg)
	b := register(t, m, "b", cfg)
	slow, unsubSlow := m.Subscribe(2)
	defer unsubSlow()
	fast, unsubFast := m.Subscribe(1000)
	defer unsubFast()

	// Each round is four transitions per breaker: trip, timer, probe,
	// success.
	const rounds = 50
	for range rounds {
		for _, br := range []*manager.Breaker{a, b} {
			fail(t, br, 1)
		}
		advance(m, mock, time.Second)
		for _, br := range []*manager.Breaker{a, b} {
			probe(t, br).Release(nil)
		}
		m.Sync()
	}
	all := drain(fast)
	require.Len(t, all, 2*4*rounds, "the fast subscriber gets everything")
	kept := drain(slow)
	require.Len(t, kept, 2, "the slow subscriber keeps what its buffer holds")
	assert.Equal(t, all[:2], kept, "and those are the first events")

	dropped := a.Stats().DroppedEvents + b.Stats().DroppedEvents
	assert.Equal(t, uint64(2*4*rounds-2), dropped)
	assert.Equal(t, uint64(4*rounds-1), a.Stats().DroppedEvents, "a's first event was kept")
	assert.Equal(t, uint64(4*rounds-1), b.Stats().DroppedEvents, "b's first event was kept")
}

// A buffer below 1 means 64 events.
func TestSubscribeDefaultBuffer(t *testing.T) {
	const defaultBuffer = 64
	for _, buffer := range []int{0, -5} {
		m, _ := startMock(t)
		b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
		events, unsubscribe := m.Subscribe(buffer)
		n := defaultBuffer + 10
		for range n / 2 {
			fail(t, b, 1)
			require.NoError(t, b.Reset())
		}
		m.Sync()
		assert.Len(t, drain(events), defaultBuffer, "Subscribe(%d)", buffer)
		assert.Equal(t, uint64(n-defaultBuffer), b.Stats().DroppedEvents, "Subscribe(%d)", buffer)
		unsubscribe()
	}
}

// Stop closes every subscription's channel; unsubscribing afterwards does
// nothing, and subscribing afterwards gives a closed channel.
func TestStopClosesSubscriptions(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	e1, unsub1 := m.Subscribe(4)
	e2, unsub2 := m.Subscribe(4)
	fail(t, b, 1)
	m.Stop()
	for _, ch := range []<-chan manager.Event{e1, e2} {
		got := 0
		for range ch { // ends because the channel is closed
			got++
		}
		assert.Equal(t, 1, got, "the event sent before Stop stays readable")
	}
	unsub1()
	unsub2()
	unsub1()

	e3, unsub3 := m.Subscribe(4)
	requireClosed(t, e3, "Subscribe after Stop")
	unsub3()
}

// Subscribing and unsubscribing while a breaker changes state loses
// nothing a subscription is owed: each of the subscriptions a goroutine
// makes and ends while a caller trips and probes the breaker receives every
// transition made after Subscribe returned, in order, each starting where
// the one before ended and a generation further, until it unsubscribes,
// and none is dropped.
func TestSubscribeWhileBusy(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "busy", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Millisecond},
	})
	type subscription struct {
		from uint64 // the generation when Subscribe returned
		got  []manager.Event
	}
	var subs []subscription
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			events, unsubscribe := m.Subscribe(1024)
			s := subscription{from: b.Snapshot().Gen}
		hold: // a few of the transitions, then unsubscribe
			for len(s.got) < 3 {
				select {
				case e := <-events:
					s.got = append(s.got, e)
				case <-stop:
					break hold
				}
			}
			unsubscribe()
			s.got = append(s.got, drain(events)...)
			subs = append(subs, s)
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	for range 200 {
		if p, err := b.Acquire(context.Background()); err == nil {
			p.Release(errBoom)
		}
		advance(m, mock, time.Millisecond)
	}
	close(stop)
	<-done

	events := 0
	for i, s := range subs {
		for j, e := range s.got {
			require.Equal(t, manager.EventTransition, e.Kind, "subscription %d, event %d", i, j)
			assert.Zero(t, e.Missed, "subscription %d, event %d: missed events", i, j)
			if j == 0 {
				assert.LessOrEqual(t, e.Gen, s.from+1, "subscription %d made at gen %d: its first event %v (gen %d) misses the transitions before it", i, s.from, e.Transition, e.Gen)
				continue
			}
			prev := s.got[j-1]
			assert.Equal(t, prev.Gen+1, e.Gen, "subscription %d, event %d: generations", i, j)
			assert.Equal(t, prev.Transition.To, e.Transition.From, "subscription %d, event %d: starts where the one before ended", i, j)
		}
		events += len(s.got)
	}
	t.Logf("%d subscriptions, %d events", len(subs), events)
	assert.Greater(t, len(subs), 10, "subscriptions made while busy")
	assert.Greater(t, events, 200, "events received by them")
	assert.Zero(t, b.Stats().DroppedEvents)
}
