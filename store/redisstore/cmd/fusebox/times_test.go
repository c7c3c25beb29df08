package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// assertTimeOfDay checks that s, a time of day as list and show print it
// ("15:04:05", local time, today), is want to the second.
func assertTimeOfDay(t *testing.T, s string, want time.Time, what string) {
	t.Helper()
	got, err := time.ParseInLocation("15:04:05", s, time.Local)
	if !assert.NoError(t, err, "%s: %q is a time of day", what, s) {
		return
	}
	want = want.Local()
	got = time.Date(want.Year(), want.Month(), want.Day(), got.Hour(), got.Minute(), got.Second(), 0, time.Local)
	assert.WithinDuration(t, want.Truncate(time.Second), got, 1500*time.Millisecond, "%s: %s", what, s)
}

// What list, show and -json say of when a breaker entered its state and
// when its open period ends: the end, from the open marker's time left
// on the store's clock; the start, from the since key when the store
// keeps one for the breaker's epoch (the test writes it itself, as the
// scripts would), and "-" (absent in JSON) when it keeps none, or one of
// another epoch.
func TestTimes(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := newClientFor(t, srv.Addr())
	p := startNamedPeer(t, newClient(srv.Addr()), "web-0", "payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Minute},
	})
	p.trip(t)
	now := time.Now()

	// No since key (a store that keeps none, or a breaker opened before
	// it did): the period's end alone.
	require.NoError(t, admin.Del(ctx, "fusebox:{payments}:since").Err())
	r := fusebox("-redis", srv.Addr(), "list")
	require.Equal(t, 0, r.code, "list: %s", r.stderr)
	f := row(r.stdout, "payments")
	require.NotNil(t, f, "a line for payments in\n%s", r.stdout)
	assert.Equal(t, "-", f[3], "since: the store keeps no time")
	assertTimeOfDay(t, f[5], now.Add(time.Minute), "the period ends a minute after the trip")
	r = fusebox("-redis", srv.Addr(), "show", "payments")
	assert.Regexp(t, `(?m)^since +-$`, r.stdout)

	// The since key of the epoch: when it opened.
	opened := now.Add(-3 * time.Second).Truncate(time.Millisecond)
	require.NoError(t, admin.Set(ctx, "fusebox:{payments}:since", fmt.Sprintf("1\n%d\n60000", opened.UnixMilli()), 0).Err())
	r = fusebox("-redis", srv.Addr(), "list")
	f = row(r.stdout, "payments")
	require.NotNil(t, f, "a line for payments in\n%s", r.stdout)
	assertTimeOfDay(t, f[3], opened, "since")
	r = fusebox("-redis", srv.Addr(), "show", "payments")
	m := regexp.MustCompile(`(?m)^since +(\d\d:\d\d:\d\d) \((\d(\.\d)?s) ago\)$`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, "since, with how long ago, in\n%s", r.stdout)
	assertTimeOfDay(t, m[1], opened, "show's since")
	r = fusebox("-redis", srv.Addr(), "-json", "show", "payments")
	var o breakerObject
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &o), "one JSON object: %s", r.stdout)
	since, err := time.Parse(time.RFC3339, o.Since)
	require.NoError(t, err, "since is RFC 3339: %q", o.Since)
	assert.True(t, opened.Equal(since), "since %v, want %v", since, opened)
	end, err := time.Parse(time.RFC3339, o.PeriodEnds)
	require.NoError(t, err, "period_ends is RFC 3339: %q", o.PeriodEnds)
	assert.WithinDuration(t, now.Add(time.Minute), end, time.Second, "period_ends")

	// A since key of an older epoch says nothing of this one.
	require.NoError(t, admin.Set(ctx, "fusebox:{payments}:since", fmt.Sprintf("0\n%d\n0", opened.UnixMilli()), 0).Err())
	r = fusebox("-redis", srv.Addr(), "-json", "show", "payments")
	o = breakerObject{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &o), "one JSON object: %s", r.stdout)
	assert.Empty(t, o.Since, "a since of epoch 0 in epoch 1")

	// Forced open: no period ends it.
	require.NoError(t, p.b.ForceOpen())
	r = fusebox("-redis", srv.Addr(), "show", "payments")
	assert.Regexp(t, `(?m)^period ends +until reset$`, r.stdout)
	r = fusebox("-redis", srv.Addr(), "-json", "show", "payments")
	o = breakerObject{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &o), "one JSON object: %s", r.stdout)
	assert.Empty(t, o.PeriodEnds, "forced open: no period_ends")
}

// A half-open breaker has been so since its period ended: the since key's
// instant plus the period it began.
func TestTimesHalfOpen(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	p := startNamedPeer(t, newClient(srv.Addr()), "web-0", "payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: 100 * time.Millisecond, ProbeTimeout: time.Minute},
	})
	p.trip(t)
	opened := time.Now().Truncate(time.Millisecond)
	require.NoError(t, newClientFor(t, srv.Addr()).Set(ctx, "fusebox:{payments}:since", fmt.Sprintf("1\n%d\n100", opened.UnixMilli()), 0).Err())
	var o breakerObject
	waitFor(t, 5*time.Second, "the period ends", func() bool {
		r := fusebox("-redis", srv.Addr(), "-json", "show", "payments")
		o = breakerObject{}
		return json.Unmarshal([]byte(r.stdout), &o) == nil && o.State == "half_open"
	})
	since, err := time.Parse(time.RFC3339, o.Since)
	require.NoError(t, err, "since is RFC 3339: %q", o.Since)
	assert.True(t, opened.Add(100*time.Millisecond).Equal(since), "since %v, want the period's end %v", since, opened.Add(100*time.Millisecond))
	assert.Empty(t, o.PeriodEnds, "half-open: no period runs")
}

// A since key that does not parse costs the breaker its since, not the
// list: the other breakers, and its other fields, read as usual.
func TestTimesJunk(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := newClientFor(t, srv.Addr())
	p := startNamedPeer(t, newClient(srv.Addr()), "web-0", "payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Minute},
	})
	p.trip(t)
	for _, junk := range []string{"junk", "1\nx\n0", "1\n-5\n0", "1\n2"} {
		require.NoError(t, admin.Set(ctx, "fusebox:{payments}:since", junk, 0).Err())
		r := fusebox("-redis", srv.Addr(), "list")
		require.Equal(t, 0, r.code, "list with a since of %q: %s", junk, r.stderr)
		f := row(r.stdout, "payments")
		require.NotNil(t, f, "a line for payments in\n%s", r.stdout)
		assert.Equal(t, []string{"payments", "open", "1", "-"}, f[:4], "a since of %q reads as none", junk)
	}
}
