package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// A mistyped force-open leaves its epoch in the store, which list shows
// for good; forget deletes every key of that name and nothing of any
// other breaker, not even of a name that starts like it.
func TestForget(t *testing.T) {
	srv := redistest.Start(t)
	ps := fleet(t, srv.Addr(), "payments", 2, manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: time.Minute},
	})
	ps[0].trip(t)
	for _, name := range []string{"paymnts", "paymnts}:x"} {
		r := fusebox("-redis", srv.Addr(), "force-open", name)
		require.Equal(t, 0, r.code, "force-open %q: %s", name, r.stderr)
	}
	r := fusebox("-redis", srv.Addr(), "reset", "paymnts")
	require.Equal(t, 0, r.code, "reset: %s", r.stderr)
	r = fusebox("-redis", srv.Addr(), "list")
	require.NotNil(t, row(r.stdout, "paymnts"), "a reset leaves the epoch, which list shows:\n%s", r.stdout)

	r = fusebox("-redis", srv.Addr(), "forget", "paymnts")
	require.Equal(t, 0, r.code, "forget: %s", r.stderr)
	assert.Equal(t, "forgot \"paymnts\": 2 keys deleted\n", r.stdout, "its epoch and since")
	assert.Empty(t, r.stderr)
	client := newClientFor(t, srv.Addr())
	left, err := client.Keys(context.Background(), "fusebox:{paymnts}:*").Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"fusebox:{paymnts}:x}:epoch", "fusebox:{paymnts}:x}:open", "fusebox:{paymnts}:x}:since"}, left, "the keys of paymnts are gone; those of paymnts}:x stay")

	r = fusebox("-redis", srv.Addr(), "list")
	require.Equal(t, 0, r.code, "list: %s", r.stderr)
	assert.Nil(t, row(r.stdout, "paymnts"), "list no longer shows paymnts:\n%s", r.stdout)
	assert.Equal(t, []string{"payments", "open"}, row(r.stdout, "payments")[:2], "the fleet's breaker is untouched:\n%s", r.stdout)
	assert.Equal(t, []string{"paymnts}:x", "forced"}, row(r.stdout, "paymnts}:x")[:2], "nor is paymnts}:x:\n%s", r.stdout)

	r = fusebox("-redis", srv.Addr(), "forget", "paymnts")
	assert.Equal(t, 1, r.code, "forget of a name the store holds nothing of")
	assert.Contains(t, r.stderr, `no such breaker "paymnts"`)

	r = fusebox("-redis", srv.Addr(), "-json", "forget", "paymnts}:x")
	require.Equal(t, 0, r.code, "forget: %s", r.stderr)
	assert.JSONEq(t, `{"name":"paymnts}:x","deleted":3}`, r.stdout, "a forced breaker: its epoch, its open marker and its since")
}
