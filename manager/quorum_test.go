package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// With a quorum of 2, one replica's failures open that replica alone (its
// own period, its own probe, nothing in the store), and the fleet opens
// once the failures that reach the threshold come from two replicas.
func TestSharedQuorumAgainstOneBadReplica(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	ms, bs := fleet(t, 3, mock, mem, manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: time.Second},
		Quorum:   2,
	})
	syncAll(ms)
	events, cancel := ms[0].Subscribe(16)
	defer cancel()

	// Replica 0's network is broken: its own calls fail.
	fail(t, bs[0], 3)
	syncAll(ms)
	require.Equal(t, breaker.Open, bs[0].State(), "the bad replica protects itself")
	assert.Equal(t, breaker.Closed, bs[1].State(), "the others keep calling")
	assert.Equal(t, breaker.Closed, bs[2].State())
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	assert.False(t, st[0].Opened(), "nothing reached the store's state: %+v", st[0])
	assert.Equal(t, int64(1), bs[0].Stats().Processes, "the fleet's count comes from one process")
	var ev manager.Event
	for _, e := range drain(events) {
		if e.Transition.To == breaker.Open {
			ev = e
		}
	}
	assert.Equal(t, breaker.CauseAlone, ev.Cause, "the transition says it opened alone")

	// Its period ends: it probes on its own, with no lease of the fleet's.
	advance(ms[0], mock, time.Second)
	syncAll(ms)
	require.Equal(t, breaker.HalfOpen, bs[0].State())
	p := probe(t, bs[0])
	p.Release(nil)
	syncAll(ms)
	assert.Equal(t, breaker.Closed, bs[0].State(), "its own probe closed it")

	// The run of failures the bad replica left in the store goes on: one
	// failure of another replica makes it 4, from two replicas, but 1
	// without the bad replica's: nothing opens.
	fail(t, bs[1], 1)
	syncAll(ms)
	for i, b := range bs {
		assert.Equal(t, breaker.Closed, b.State(), "replica %d: an ordinary failure does not complete the bad replica's quorum", i)
	}
	assert.Equal(t, int64(2), bs[1].Stats().Processes)
	// Replica 1 fails as much as the bad one: 3 without the largest, and
	// the fleet opens.
	fail(t, bs[1], 2)
	syncAll(ms)
	for i, b := range bs {
		assert.Equal(t, breaker.Open, b.State(), "replica %d follows the fleet", i)
	}
}

// The local count decides a replica's opening alone, the shared one the
// fleet's: two replicas whose own failures reach the threshold open the
// fleet, the first of them alone until the second does.
func TestSharedQuorumOfTwoFailingReplicas(t *testing.T) {
	mock := clock.NewMock()
	ms, bs := fleet(t, 2, mock, store.NewMemory(mock), manager.Config{Strategy: breaker.Consecutive{Failures: 4}, Quorum: 2})
	syncAll(ms)
	fail(t, bs[0], 3)
	fail(t, bs[1], 3)
	syncAll(ms)
	assert.Equal(t, breaker.Closed, bs[0].State(), "6 failures, 3 without the largest share")
	assert.Equal(t, breaker.Closed, bs[1].State())
	fail(t, bs[0], 1)
	syncAll(ms)
	assert.Equal(t, breaker.Open, bs[0].State(), "its own count reached 4: it opens alone")
	assert.Equal(t, breaker.Closed, bs[1].State(), "the fleet is short of its quorum")
	fail(t, bs[1], 1)
	syncAll(ms)
	assert.Equal(t, breaker.Open, bs[0].State())
	assert.Equal(t, breaker.Open, bs[1].State(), "4 without the largest share: the fleet opens")
}

// Reconfigure of a shared breaker may change its thresholds: the store's
// count goes on, judged by the new threshold in this process. A change of
// the store's layout is refused, naming the field.
func TestSharedReconfigureThresholds(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	ms, bs := fleet(t, 2, mock, mem, manager.Config{Strategy: breaker.Consecutive{Failures: 5}})
	syncAll(ms)
	fail(t, bs[0], 2)
	require.NoError(t, bs[1].Reconfigure(manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: mem}))
	fail(t, bs[1], 1)
	syncAll(ms)
	assert.Equal(t, breaker.Open, bs[1].State(), "the shared run of 3 reaches the new threshold")
	assert.Equal(t, breaker.Open, bs[0].State(), "the fleet follows, whatever its own threshold")

	window := manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, MinCalls: 4}, Store: mem}
	m := ms[0]
	w, err := m.Register("window", window)
	require.NoError(t, err)
	cases := []struct {
		cfg   manager.Config
		field string
	}{
		{manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: 20 * time.Second, MinCalls: 4}, Store: mem}, "Config.Strategy.Period"},
		{manager.Config{Strategy: breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, Buckets: 5, MinCalls: 4}, Store: mem}, "Config.Strategy.Buckets"},
		{manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: mem}, "Config.Strategy"},
	}
	for _, c := range cases {
		err := w.Reconfigure(c.cfg)
		require.Error(t, err, "%+v", c.cfg.Strategy)
		assert.Contains(t, err.Error(), `fusebox: reconfigure breaker "window": `+c.field+": cannot change")
	}
	assert.NoError(t, w.Reconfigure(manager.Config{Strategy: breaker.TimeWindow{Rate: 0.8, Period: 10 * time.Second, MinCalls: 10}, Store: mem, Quorum: 3}),
		"Rate, MinCalls and Quorum may change")
}

// A negative quorum is an error naming the breaker and the field.
func TestQuorumValidated(t *testing.T) {
	m, _ := startMock(t)
	_, err := m.Register("svc", manager.Config{Quorum: -1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `fusebox: register breaker "svc": Config.Quorum: must not be negative, got -1`)
}

// A Quorum larger than the processes that fail is said, once, at the
// first moment it can be known: the fleet's failures reach the threshold,
// and the quorum refuses the opening because fewer processes reported
// them. A warning event (EventQuorumShort) and a log line name the
// breaker and the field.
func TestSharedQuorumShortIsSaid(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	var logs logBuffer
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: recover.BasicTimeout{Open: time.Second}, Quorum: 3, Store: mem}
	var ms []*manager.Manager
	var bs []*manager.Breaker
	for i := range 2 { // two processes: a Quorum of 3 can never be met
		m := manager.Start(manager.Options{Clock: mock, Logger: logs.logger(), Resync: time.Hour, Name: []string{"web-1", "web-2"}[i]})
		t.Cleanup(m.Stop)
		ms, bs = append(ms, m), append(bs, register(t, m, "svc", cfg))
	}
	events, cancel := ms[0].Subscribe(16)
	defer cancel()
	syncAll(ms)
	fail(t, bs[0], 3)
	fail(t, bs[1], 3)
	syncAll(ms)
	for i, b := range bs {
		assert.Equal(t, breaker.Open, b.State(), "process %d opened alone", i)
	}
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	require.False(t, st[0].Opened(), "the fleet cannot open")

	var short []manager.Event
	for _, e := range drain(events) {
		if e.Kind == manager.EventQuorumShort {
			short = append(short, e)
		}
	}
	require.Len(t, short, 1, "one warning event")
	assert.Equal(t, "svc", short[0].Name)
	require.Error(t, short[0].Err)
	assert.Contains(t, short[0].Err.Error(), "Quorum")
	lines := logs.find(t, "fusebox: the fleet's failures reach the threshold from fewer processes than Config.Quorum")
	require.NotEmpty(t, lines, "a log line")
	assert.Equal(t, "svc", lines[0]["breaker"])
	assert.Equal(t, "Quorum", lines[0]["field"])

	// Said once per breaker, not at every failure.
	advance(ms[0], mock, time.Second)
	syncAll(ms)
	p := probe(t, bs[0])
	p.Release(nil)
	syncAll(ms)
	fail(t, bs[0], 3)
	syncAll(ms)
	for _, e := range drain(events) {
		assert.NotEqual(t, manager.EventQuorumShort, e.Kind, "said once")
	}
}
