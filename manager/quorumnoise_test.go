package manager_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

var errNoise = errors.New("an ordinary failure")

// noisyFleet plays rounds of calls on five managers sharing a breaker
// with a quorum of 2: the bad replicas fail every one of their badCalls
// calls a round, the others make one call a round, which fails once in 50
// rounds, each at its own phase (replica i first at round 2i, before its
// successes dilute the window). It returns whether the store ever said
// the fleet was open, and, per replica, whether it ever left the closed
// state, and whether it ever opened alone.
func noisyFleet(t *testing.T, strat breaker.Strategy, bad []bool, badCalls, rounds int) (fleetOpened bool, left, alone []bool) {
	t.Helper()
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	ms, bs := fleet(t, len(bad), mock, mem, manager.Config{
		Strategy: strat,
		Recover:  recover.BasicTimeout{Open: time.Second},
		Quorum:   2,
	})
	left, alone = make([]bool, len(bad)), make([]bool, len(bad))
	subs := make([]<-chan manager.Event, len(ms))
	for i, m := range ms {
		ch, cancel := m.Subscribe(1 << 16)
		t.Cleanup(cancel)
		subs[i] = ch
	}
	syncAll(ms)
	call := func(b *manager.Breaker, fails bool) {
		p, err := b.Acquire(context.Background())
		if err != nil {
			return
		}
		if fails {
			p.Release(errNoise)
		} else {
			p.ReleaseOutcome(classify.Success)
		}
	}
	for r := range rounds {
		for i, b := range bs {
			if bad[i] {
				for range badCalls {
					call(b, true)
				}
				continue
			}
			call(b, (r+50-2*i)%50 == 0) // replica i fails first at round 2i
		}
		mock.Add(100 * time.Millisecond)
		syncAll(ms)
		for i, ch := range subs {
			for _, e := range drain(ch) {
				if e.Transition.From == breaker.Closed && e.Transition.To != breaker.Closed {
					left[i] = true
				}
				if e.Cause == breaker.CauseAlone {
					alone[i] = true
				}
			}
		}
		if sharedStatus(t, mem).Opened() {
			fleetOpened = true
		}
	}
	return fleetOpened, left, alone
}

// One bad replica among healthy ones whose calls fail now and then: over
// 2,000 rounds the bad one opens alone, and no healthy replica ever
// leaves the closed state; two bad replicas open the fleet.
func TestSharedQuorumHoldsAgainstNoise(t *testing.T) {
	for _, c := range []struct {
		name     string
		strat    breaker.Strategy
		badCalls int
	}{
		{"consecutive", breaker.Consecutive{Failures: 5}, 3},
		{"window", breaker.TimeWindow{Rate: .5, Period: 10 * time.Second, MinCalls: 20}, 10},
	} {
		t.Run(c.name+"/one bad replica", func(t *testing.T) {
			opened, left, alone := noisyFleet(t, c.strat, []bool{true, false, false, false, false}, c.badCalls, 2000)
			assert.True(t, alone[0], "the bad replica opens alone")
			assert.False(t, opened, "the store opened the fleet")
			for i := 1; i < len(left); i++ {
				assert.False(t, left[i], "healthy replica %d left the closed state", i)
			}
		})
		t.Run(c.name+"/two bad replicas", func(t *testing.T) {
			opened, left, _ := noisyFleet(t, c.strat, []bool{true, true, false, false, false}, c.badCalls, 200)
			assert.True(t, opened, "the store opened the fleet")
			for i := 2; i < len(left); i++ {
				assert.True(t, left[i], "healthy replica %d follows the fleet's opening", i)
			}
		})
	}
}
