package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
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

// idleBreakers is how many shared breakers the idle tests register.
const idleBreakers = 10_000

// registerMany registers n shared breakers named prefix0, prefix1, ... on
// m and st.
func registerMany(t testing.TB, m *manager.Manager, st *redisstore.Store, prefix string, n int) []*manager.Breaker {
	t.Helper()
	bs := make([]*manager.Breaker, n)
	for i := range bs {
		b, err := m.Register(fmt.Sprintf("%s%d", prefix, i), manager.Config{
			Strategy: breaker.Consecutive{Failures: 5},
			Recover:  recover.BasicTimeout{Open: time.Minute},
			Store:    st,
		})
		require.NoError(t, err)
		bs[i] = b
	}
	return bs
}

// An idle manager with 10,000 shared breakers sends Redis at most 50
// commands a second: the watch carries changes, and each Resync reads a
// few breakers only, in turn.
func TestFleetIdleCostsLittle(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	st := redisstore.New(c, redisstore.Options{})
	m := manager.Start(manager.Options{Logger: quiet, Resync: 100 * time.Millisecond})
	defer m.Stop()
	registerMany(t, m, st, "idle-", idleBreakers)
	m.Sync()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()

	// Over 50 Resyncs, so that one Resync more or less in the window
	// (where its ends fall between two) moves the figure by 2%; per the
	// time that really passed, which a loaded machine stretches.
	const window = 5 * time.Second
	before, t0 := serverCommandsBy(t, admin), time.Now()
	time.Sleep(window) // the manager idles for this long
	after, elapsed := serverCommandsBy(t, admin), time.Since(t0)
	var n int64
	by := map[string]int64{}
	for cmd, k := range after {
		if d := k - before[cmd]; d > 0 {
			by[cmd] = d
			n += d
		}
	}
	// Each Resync reads 16 breakers (a status script each): the sweeps
	// in the window are its scripts over 16. A loaded machine delays a Resync
	// and the loop runs it late, so one more may fall at each end of the
	// window than its length holds: two sweeps are allowed over the
	// window's share, and the cost is judged a sweep.
	resyncs := float64(elapsed) / float64(100*time.Millisecond)
	sweeps := float64(by["evalsha"]+by["eval"]) / 16
	perResync := float64(n) / max(sweeps, 1)
	perSecond := perResync // at the default Resync of a second
	t.Logf("%d commands in %v with a Resync of 100ms (%v): %.1f sweeps in %.1f Resyncs, %.1f commands a sweep, so %.1f a second at the default Resync of 1s, for %d breakers", n, elapsed.Round(time.Millisecond), by, sweeps, resyncs, perResync, perSecond, idleBreakers)
	assert.LessOrEqual(t, perSecond, 50.0, "commands a second of an idle manager at the default Resync")
	assert.LessOrEqual(t, sweeps, resyncs+2, "sweeps, one a Resync")
	assert.Positive(t, n, "each Resync still asks the store something: it must notice the store is gone")
}

// cutProxy is a loopback TCP proxy in front of a redis-server whose
// connections can be cut, as a network that drops them: the watch's
// subscription among them.
type cutProxy struct {
	l     net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startCutProxy(t *testing.T, to string) *cutProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{l: l, to: to}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() string { return p.l.Addr().String() }

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.to)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); pipe(out, in) }()
		go func() { defer p.wg.Done(); pipe(in, out) }()
	}
}

func pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

// cut closes every connection through the proxy.
func (p *cutProxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// A manager whose connections to Redis were cut misses the changes made
// meanwhile; once its watch subscribes again it reads every breaker, and
// follows a change it missed within 3 Resyncs of that (the slow sweep
// would take ten minutes to reach it), with 10,000 breakers on the store
// and the default Resync. (The read of 10,000 breakers takes 100 to 600ms
// on a loopback Redis, as loaded as the machine is; under the race
// detector beside two CPU burners the change was followed 0.5 to 1s after
// the subscription, once past Resync + 100ms, the bound this test had.)
func TestFleetMissedChangeLearntOnResubscribe(t *testing.T) {
	srv := redistest.Start(t)
	proxy := startCutProxy(t, srv.Addr())
	const resync = time.Second // the manager's default
	// The watcher reaches Redis through the proxy; the actor directly.
	wc := redis.NewClient(&redis.Options{Addr: proxy.addr(), ContextTimeoutEnabled: true})
	defer wc.Close()
	watcher := manager.Start(manager.Options{Logger: quiet, Resync: resync})
	defer watcher.Stop()
	ws := registerMany(t, watcher, redisstore.New(wc, redisstore.Options{}), "cut-", idleBreakers)
	ac := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer ac.Close()
	actor := manager.Start(manager.Options{Logger: quiet, Resync: time.Hour})
	defer actor.Stop()
	target := idleBreakers - 7
	ab, err := actor.Register(fmt.Sprintf("cut-%d", target), manager.Config{Store: redisstore.New(ac, redisstore.Options{})})
	require.NoError(t, err)
	watcher.Sync()
	actor.Sync()

	// Subscriptions seen by Redis tell when the watcher subscribed again:
	// the actor's, and the watcher's while it is connected.
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	subscribers := func() int64 {
		n, err := admin.PubSubNumSub(context.Background(), "fusebox:changes").Result()
		require.NoError(t, err)
		return n["fusebox:changes"]
	}
	waitFor(t, 5*time.Second, "both subscribed", func() bool { return subscribers() == 2 })

	// Cut the watcher off, and change the breaker while it is.
	// (The cut makes every breaker of the watcher fall back, and come
	// back: the loop below skips the others' events, which a buffer of
	// this size holds.)
	events, unsubscribe := watcher.Subscribe(1 << 16)
	defer unsubscribe()
	proxy.cut()
	waitFor(t, 5*time.Second, "the watcher's subscription is gone", func() bool { return subscribers() == 1 })
	require.NoError(t, ab.ForceOpen())
	waitFor(t, 10*time.Second, "the watcher subscribed again", func() bool { return subscribers() == 2 })
	again := time.Now()
	var followed time.Time
	deadline := again.Add(2 * time.Second)
	for followed.IsZero() && time.Now().Before(deadline) {
		select {
		case e := <-events:
			if e.Name == ab.Name() && e.Transition.To == breaker.Open {
				followed = time.Now()
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
	require.False(t, followed.IsZero(), "the watcher never followed the forcing it missed: %v", ws[target].State())
	took := followed.Sub(again)
	t.Logf("the missed forcing was followed %v after the watch subscribed again (Resync %v)", took.Round(time.Millisecond), resync)
	// Learnt from the reads of the subscription, not from the slow sweep,
	// which reads 16 breakers a Resync and would reach this one after
	// ten minutes: on a quiet machine within 100ms, under the race
	// detector beside two CPU burners in 0.5 to 1s.
	sweep := time.Duration(target/16) * resync
	assert.LessOrEqual(t, took, 3*resync, "learnt from the subscription's reads, not from the sweep (which would take %v)", sweep)
	assert.True(t, ws[target].Snapshot().Forced)
	for i, b := range ws {
		if i != target && !strings.HasPrefix(b.State().String(), "closed") {
			t.Errorf("%s is %v; only %s changed", b.Name(), b.State(), ab.Name())
		}
	}
}

// BenchmarkRegisterShared measures Register of a shared breaker on Redis,
// which does not wait for the store: 10,000 of them in a loop, per op.
func BenchmarkRegisterShared(b *testing.B) {
	srv := redistest.Start(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	st := redisstore.New(c, redisstore.Options{})
	b.ReportAllocs()
	round := 0
	for b.Loop() {
		b.StopTimer()
		m := manager.Start(manager.Options{Logger: quiet})
		b.StartTimer()
		registerMany(b, m, st, fmt.Sprintf("reg-%d-", round), idleBreakers)
		b.StopTimer()
		m.Sync()
		m.Stop()
		round++
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/idleBreakers, "ns/register")
}
