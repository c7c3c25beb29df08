package manager_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// slowReads is a real store whose status reads take per for each breaker
// read and honour their deadline, as a Redis does that many processes ask
// at once: a read of many breakers runs out of time where a read of a few
// does not.
type slowReads struct {
	store.Store
	per time.Duration

	mu       sync.Mutex
	answered []int // the size of each read that answered
	failed   int   // reads whose deadline ran out
}

func (s *slowReads) Status(ctx context.Context, names []string) ([]store.Status, error) {
	t := time.NewTimer(time.Duration(len(names)) * s.per)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	if err := ctx.Err(); err != nil {
		// Its deadline ran out, before or as the read ended (when both
		// are ready, select picks either): the read does not answer.
		s.mu.Lock()
		s.failed++
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Lock()
	s.answered = append(s.answered, len(names))
	s.mu.Unlock()
	return s.Store.Status(ctx, names)
}

// A manager whose breakers all need reading at once (here, as they
// register) reads them in pieces that fit the store deadline: every
// breaker follows the fleet (open, forced by another process), none is
// left on its fallback, though reading them all in one read could never
// answer in time.
func TestSharedReadsFitTheDeadline(t *testing.T) {
	const n, timeout = 600, 20 * time.Millisecond
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%03d", i)
		_, err := mem.ForceOpen(context.Background(), names[i])
		require.NoError(t, err)
	}
	// One read of all 600 would take 240ms, twelve deadlines.
	st := &slowReads{Store: mem, per: 400 * time.Microsecond}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, StoreTimeout: timeout})
	t.Cleanup(m.Stop)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: st, Recover: recover.BasicTimeout{Open: time.Minute}}
	bs := make([]*manager.Breaker, n)
	for i, name := range names {
		bs[i] = register(t, m, name, cfg)
	}
	following := func() (open, down int) {
		for _, b := range bs {
			s := b.Stats()
			if s.StoreDown {
				down++
			}
			if s.State == breaker.Open && s.Forced {
				open++
			}
		}
		return open, down
	}
	rounds := 0
	for ; rounds < 50; rounds++ {
		m.Sync()
		if open, down := following(); open == n && down == 0 {
			break
		}
		mock.Add(5 * time.Second) // past any pause after a failed read
	}
	open, down := following()
	st.mu.Lock()
	defer st.mu.Unlock()
	t.Logf("%d rounds; %d reads answered, %d ran out of time; sizes answered %v", rounds, len(st.answered), st.failed, st.answered)
	require.Equal(t, n, open, "breakers following the forced fleet")
	require.Zero(t, down, "breakers on their fallback")
	biggest := 0
	for _, k := range st.answered {
		biggest = max(biggest, k)
	}
	assert.Less(t, biggest, int(timeout/st.per), "no read that answered was larger than what fits the deadline")
	assert.Less(t, len(st.answered), n/8, "breakers are read many at a time")
}

// refusedReads is a real store whose status reads are all refused at once,
// as by a Redis that has no room for them, while its watch works.
type refusedReads struct {
	store.Store
	mu    sync.Mutex
	reads int
}

var errNoRoom = errors.New("no room for reads (the test)")

func (r *refusedReads) Status(context.Context, []string) ([]store.Status, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	return nil, errNoRoom
}

func (r *refusedReads) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads
}

// A read that fails is not retried at once: the breakers it read fall back,
// and the next read, of half as many, waits a pause that doubles with each
// failure in a row (25-50ms after the first, 50-100ms after the second).
func TestSharedFailedReadPauses(t *testing.T) {
	mock := clock.NewMock()
	st := &refusedReads{Store: store.NewMemory(mock)}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger})
	t.Cleanup(m.Stop)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: st, Recover: recover.BasicTimeout{Open: time.Minute}}
	bs := make([]*manager.Breaker, 100)
	for i := range bs {
		bs[i] = register(t, m, fmt.Sprintf("svc-%03d", i), cfg)
	}
	// Each breaker a failed read read has a store error, and is on its
	// fallback: the errors add up to the sizes of the reads.
	errs := func() int {
		n := 0
		for _, b := range bs {
			s := b.Stats()
			n += int(s.StoreErrors)
			assert.Equal(t, s.StoreErrors > 0, s.StoreDown, "%s: on its fallback once a read of it failed", b.Name())
		}
		return n
	}
	m.Sync()
	// The first Register's turn of the loop read that one breaker; the
	// others registered while it was in flight, and wait.
	require.Equal(t, 1, st.count(), "reads after registering")
	assert.Equal(t, 1, errs(), "store errors")

	advance(m, mock, 24*time.Millisecond)
	assert.Equal(t, 1, st.count(), "reads within the first pause")
	advance(m, mock, 26*time.Millisecond) // 50ms
	assert.Equal(t, 2, st.count(), "reads once the first pause is over")
	assert.Equal(t, 1+32, errs(), "store errors after a read of 32")
	advance(m, mock, 24*time.Millisecond) // 74ms: the second read came at 25ms or later
	assert.Equal(t, 2, st.count(), "reads within the second pause")
	advance(m, mock, 76*time.Millisecond) // 150ms: it came at 50ms at the latest
	assert.Equal(t, 3, st.count(), "reads once the second pause is over")
	assert.Equal(t, 1+32+16, errs(), "store errors after a read of 16")
}

// gateRecover is a Recover whose first Timeout waits for its gate: it holds
// up the manager's loop, as a slow callback does.
type gateRecover struct {
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func (g *gateRecover) Init() (any, error) { return nil, nil }

func (g *gateRecover) Timeout(recover.Context, any) (time.Duration, any) {
	g.once.Do(func() {
		close(g.entered)
		<-g.gate
	})
	return time.Minute, nil
}

// Changes a hub had to drop, its loop being behind by more than it holds,
// are read again once the loop has caught up: a breaker follows the last
// change made while the loop was held, though that change was dropped.
func TestSharedDroppedChangesAreReadAgain(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Watchdog: time.Hour})
	t.Cleanup(m.Stop)
	x := register(t, m, "x", manager.Config{Strategy: breaker.Consecutive{Failures: 3}, Store: mem})
	g := &gateRecover{entered: make(chan struct{}), gate: make(chan struct{})}
	blocker := register(t, m, "blocker", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: g})
	m.Sync()

	fail(t, blocker, 1) // the loop asks blocker's Recover for its period, and waits
	<-g.entered
	// More changes than the hub holds (4,096) and the loop's channel
	// together, each a reset of x, then a forcing: the forcing is dropped.
	ctx := context.Background()
	for range 4096 + 1024 + 100 {
		_, err := mem.Reset(ctx, "x")
		require.NoError(t, err)
	}
	_, err := mem.ForceOpen(ctx, "x")
	require.NoError(t, err)
	close(g.gate)
	m.Sync()

	s := x.Stats()
	assert.Equal(t, breaker.Open, s.State, "x follows the forcing it did not hear")
	assert.True(t, s.Forced, "forced")
}
