package redisstore_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

const namesakeLine = "another live process has this process's name"

// namesakeLife is one manager of the test, on a mock clock, with its log.
type namesakeLife struct {
	m   *manager.Manager
	clk *clock.Mock
	log *syncBuffer
}

func startNamesake(t *testing.T, st *redisstore.Store, name string) *namesakeLife {
	l := &namesakeLife{clk: clock.NewMock(), log: &syncBuffer{}}
	l.m = manager.Start(manager.Options{Name: name, Clock: l.clk, Resync: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(l.log, nil))})
	t.Cleanup(l.m.Stop)
	_, err := l.m.Register("svc", manager.Config{Store: st})
	require.NoError(t, err)
	l.m.Sync()
	return l
}

// resync moves the life's clock to its next Resync and waits for it.
func (l *namesakeLife) resync() {
	l.clk.Add(50 * time.Millisecond)
	l.m.Sync()
}

func (l *namesakeLife) warned() int { return strings.Count(l.log.String(), namesakeLine) }

// TestTwoLiveProcessesOfOneNameAreReported: two live managers of one name
// on a real redis-server are one reporter to a quorum and one opener to
// the fleet, which the store cannot tell apart; each finds the other
// within two of its announcements (one every five Resyncs) and logs it
// once, naming the field. A replica
// restarted under its name (the life before it stopped) is not taken for
// another.
func TestTwoLiveProcessesOfOneNameAreReported(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	st := redisstore.New(c, redisstore.Options{})

	t.Run("a restart is not a namesake", func(t *testing.T) {
		first := startNamesake(t, st, "replica")
		for range 12 {
			first.resync()
		}
		first.m.Stop()
		again := startNamesake(t, st, "replica")
		for range 12 {
			again.resync()
		}
		assert.Zero(t, first.warned()+again.warned(), "%s%s", first.log, again.log)
	})

	t.Run("two live ones are", func(t *testing.T) {
		a, b := startNamesake(t, st, "twin"), startNamesake(t, st, "twin")
		other := startNamesake(t, st, "other")
		for range 12 {
			a.resync()
			b.resync()
			other.resync()
		}
		for _, l := range []*namesakeLife{a, b} {
			assert.Equal(t, 1, l.warned(), "warnings: %s", l.log)
			assert.Contains(t, l.log.String(), "field=Name")
		}
		assert.Zero(t, other.warned(), "%s", other.log)
		left, err := c.PTTL(t.Context(), st.ProcessKey("twin")).Result()
		require.NoError(t, err)
		assert.Positive(t, left, "the announcement expires")
	})
}
