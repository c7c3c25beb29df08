package manager_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// checkEventChain checks that each breaker's events form one chain: each
// starts where the previous one ended, with the generation one more.
func checkEventChain(t *testing.T, events []manager.Event) map[string]int {
	t.Helper()
	type last struct {
		to  breaker.State
		gen uint64
	}
	lasts := map[string]last{}
	counts := map[string]int{}
	for i, e := range events {
		counts[e.Name]++
		if l, ok := lasts[e.Name]; ok {
			require.Equal(t, l.to, e.Transition.From, "event %d of %s (%v) does not start where the last ended", i, e.Name, e.Transition)
			require.Equal(t, l.gen+1, e.Gen, "event %d of %s (%v): generation", i, e.Name, e.Transition)
		} else {
			require.Equal(t, breaker.Closed, e.Transition.From, "first event of %s", e.Name)
		}
		lasts[e.Name] = last{e.Transition.To, e.Gen}
	}
	return counts
}

// Many goroutines call through a few breakers with a failing service while
// the clock moves. However their transitions interleave, each breaker's
// events form one chain in generation order, and the counters add up.
func TestStressEventsStayOrdered(t *testing.T) {
	m, mock := startMock(t)
	const nb = 3
	bs := make([]*manager.Breaker, nb)
	for i := range bs {
		bs[i] = register(t, m, fmt.Sprintf("b%d", i), manager.Config{
			Strategy: breaker.Consecutive{Failures: 2},
			Recover:  recover.BasicTimeout{Open: 10 * time.Millisecond, ProbeTimeout: 5 * time.Millisecond},
		})
	}
	events, unsubscribe := m.Subscribe(1 << 20)
	defer unsubscribe()

	const workers = 4
	var (
		wg       sync.WaitGroup
		started  atomic.Int64
		probes   atomic.Int64
		inFlight [nb]atomic.Int32
	)
	stop := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				b := r.IntN(nb)
				p, err := bs[b].Acquire(context.Background())
				if err != nil {
					runtime.Gosched() // let the clock move
					continue
				}
				started.Add(1)
				if p.Probe() {
					probes.Add(1)
					if n := inFlight[b].Add(1); n > 1 {
						t.Errorf("%d probes of %s in flight", n, bs[b].Name())
					}
				}
				o := []classify.Outcome{classify.Success, classify.Failure, classify.Failure, classify.Ignore}[r.IntN(4)]
				if p.Probe() {
					inFlight[b].Add(-1)
				}
				p.ReleaseOutcome(o)
			}
		}()
	}
	for range 300 {
		advance(m, mock, 3*time.Millisecond)
	}
	close(stop)
	wg.Wait()
	m.Sync()

	got := drain(events)
	counts := checkEventChain(t, got)
	var calls0 uint64
	for _, b := range bs {
		st := b.Stats()
		assert.Zero(t, st.DroppedEvents)
		assert.Positive(t, counts[b.Name()], "%s made transitions", b.Name())
		calls0 += st.Successes + st.Failures + st.Ignored
	}
	assert.Equal(t, uint64(started.Load()), calls0, "every admitted call was released and counted")
	assert.Positive(t, probes.Load())
	t.Logf("%d events, %d admitted calls, %d probes", len(got), started.Load(), probes.Load())
}

// Panics in Recover.Timeout while callers keep calling: the manager
// restarts without deadlock, and every breaker's events still form chains.
func TestStressRestartsUnderLoad(t *testing.T) {
	logs := &logBuffer{}
	m, mock, _ := superviseFixtureWithLogs(t, logs, manager.Options{MaxRestarts: 1 << 20})
	rec := &panicky{open: 5 * time.Millisecond}
	bad := register(t, m, "bad", manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Recover: rec})
	good := register(t, m, "good", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: 5 * time.Millisecond},
	})
	events, unsubscribe := m.Subscribe(1 << 20)
	defer unsubscribe()

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for {
				select {
				case <-stop:
					return
				default:
				}
				b := good
				if r.IntN(2) == 0 {
					b = bad
				}
				if p, err := b.Acquire(context.Background()); err == nil {
					p.Release([]error{nil, errBoom}[r.IntN(2)])
				}
				runtime.Gosched()
			}
		}()
	}
	for i := range 200 {
		rec.armed.Store(i%10 == 0)
		advance(m, mock, 2*time.Millisecond)
	}
	close(stop)
	wg.Wait()
	rec.armed.Store(false)
	m.Sync()
	select {
	case <-m.Done():
		t.Fatal("the manager stopped")
	default:
	}
	checkEventChain(t, drain(events))
	t.Logf("%d restarts", len(logs.find(t, msgRestarted)))
}
