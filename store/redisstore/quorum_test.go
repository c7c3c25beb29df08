package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

var errNoise = errors.New("an ordinary failure")

// noisyRedisFleet plays rounds of calls on five managers, each with its
// own client, sharing a breaker with a quorum of 2 on a real Redis: the
// bad replicas fail every one of their badCalls calls a round, the others
// make one call a round, which fails once in 50 rounds (replica i first
// at round 2i). It returns whether Redis ever said the fleet was open,
// and, per replica, whether it ever left the closed state, and whether it
// ever opened alone.
func noisyRedisFleet(t *testing.T, addr, name string, strat breaker.Strategy, bad []bool, badCalls, rounds int) (opened bool, left, alone []bool) {
	t.Helper()
	cfg := manager.Config{Strategy: strat, Recover: recover.BasicTimeout{Open: time.Second}, Quorum: 2}
	var peers []*peer
	var subs []<-chan manager.Event
	for range bad {
		p := startPeer(t, addr, name, cfg, manager.Options{})
		p.m.Sync()
		ch, cancel := p.m.Subscribe(1 << 16)
		t.Cleanup(cancel)
		peers, subs = append(peers, p), append(subs, ch)
	}
	left, alone = make([]bool, len(bad)), make([]bool, len(bad))
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
		for i, p := range peers {
			if bad[i] {
				for range badCalls {
					call(p.b, true)
				}
				continue
			}
			call(p.b, (r+50-2*i)%50 == 0)
		}
		time.Sleep(2 * time.Millisecond)
		if r%50 == 0 || r == rounds-1 {
			st, err := peers[0].st.Status(context.Background(), []string{name})
			require.NoError(t, err)
			opened = opened || st[0].Opened()
		}
	}
	for _, p := range peers {
		p.m.Sync()
	}
	for i, ch := range subs {
		for done := false; !done; {
			select {
			case e := <-ch:
				if e.Transition.From == breaker.Closed && e.Transition.To != breaker.Closed {
					left[i] = true
				}
				if e.Cause == breaker.CauseAlone {
					alone[i] = true
				}
			default:
				done = true
			}
		}
	}
	return opened, left, alone
}

// The quorum's noise scenarios on a real Redis: one bad replica among
// healthy ones whose calls fail now and then opens alone, and no healthy
// replica leaves the closed state over 2,000 rounds; two bad replicas
// open the fleet.
func TestFleetQuorumHoldsAgainstNoise(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range []struct {
		name     string
		strat    breaker.Strategy
		badCalls int
	}{
		{"consecutive", breaker.Consecutive{Failures: 5}, 3},
		{"window", breaker.TimeWindow{Rate: .5, Period: 10 * time.Second, MinCalls: 20}, 10},
	} {
		t.Run(c.name+"/one bad replica", func(t *testing.T) {
			opened, left, alone := noisyRedisFleet(t, srv.Addr(), fmt.Sprintf("one-%s", c.name), c.strat, []bool{true, false, false, false, false}, c.badCalls, 2000)
			assert.True(t, alone[0], "the bad replica opens alone")
			assert.False(t, opened, "Redis opened the fleet")
			for i := 1; i < len(left); i++ {
				assert.False(t, left[i], "healthy replica %d left the closed state", i)
			}
		})
		t.Run(c.name+"/two bad replicas", func(t *testing.T) {
			opened, left, _ := noisyRedisFleet(t, srv.Addr(), fmt.Sprintf("two-%s", c.name), c.strat, []bool{true, true, false, false, false}, c.badCalls, 200)
			assert.True(t, opened, "Redis opened the fleet")
			for i := 2; i < len(left); i++ {
				assert.True(t, left[i], "healthy replica %d follows the fleet's opening", i)
			}
		})
	}
}

// Under a quorum, Redis keeps each reporter's counts of a window as the
// memory store does, span after span: a reporter's counts slide from the
// current span into the previous one and out, one absent for spans is
// dropped, and the digit of the span a record carries wraps round every
// ten spans. A window of 200ms in two buckets (a span is 200ms): the same
// reports go to Redis and to a memory store on the real clock, at the
// middle of a bucket, and their verdicts must agree, for 24 spans.
func TestRedisWindowQuorumSlidesAsMemory(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv)
	const width = 100 * time.Millisecond
	p := store.Policy{Rate: 0.5, Period: 2 * width, Buckets: 2, MinCalls: 1 << 30, Quorum: 3}
	// Who reports in which bucket (buckets are numbered from the start):
	// a in most, b every third, c in runs with gaps of up to four spans.
	reports := func(bucket int) map[string][2]int64 { // reporter -> failures, successes
		out := map[string][2]int64{}
		if bucket%5 != 4 {
			out["a"] = [2]int64{int64(1 + bucket%3), int64(bucket % 4)}
		}
		if bucket%3 == 0 {
			out["b"] = [2]int64{2, 1}
		}
		if (bucket/4)%3 != 2 && bucket%9 != 8 {
			out["c"] = [2]int64{int64(bucket % 2), 3}
		}
		return out
	}
	attempt := func(try int) bool {
		name := fmt.Sprintf("slide-%d", try)
		rs := redisstore.New(c, redisstore.Options{})
		ms := store.NewMemory(nil)
		for bucket := range 48 {
			// The middle of the next bucket, on this host's clock, which
			// is the server's.
			now := time.Now()
			next := now.Truncate(width).Add(width + width/2)
			time.Sleep(time.Until(next))
			at := time.Now().UnixMilli() / width.Milliseconds()
			for _, who := range []string{"a", "b", "c"} {
				r, ok := reports(bucket)[who]
				if !ok {
					continue
				}
				q := p
				q.Reporter = who
				want, err := ms.RecordFailure(context.Background(), name, q, r[0], []int64{r[1]})
				require.NoError(t, err)
				got, err := rs.RecordFailure(context.Background(), name, q, r[0], []int64{r[1]})
				require.NoError(t, err)
				if time.Now().UnixMilli()/width.Milliseconds() != at {
					t.Logf("try %d: bucket %d took past its end; again, on another breaker", try, bucket)
					return false
				}
				require.Equal(t,
					[5]int64{want.Calls, want.Failures, want.Processes, want.LargestCalls, want.LargestFailures},
					[5]int64{got.Calls, got.Failures, got.Processes, got.LargestCalls, got.LargestFailures},
					"bucket %d, %s's report: calls, failures, processes, largest calls, largest failures", bucket, who)
			}
		}
		return true
	}
	for try := range 5 {
		if attempt(try) {
			return
		}
	}
	t.Fatal("no try played every bucket within it: the machine is too slow for this test")
}
