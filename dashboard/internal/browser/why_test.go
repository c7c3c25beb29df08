package browser_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// A card says why its breaker opened and who opened it, for a shared
// breaker another process of the fleet opened; the line fits its card,
// and so do the buttons under three transitions. A breaker in a dry run
// shows its badge and what it would have declined.
func TestBrowserSaysWhoOpenedAndWhy(t *testing.T) {
	f := setup(t, dashboard.Options{Actions: true})
	mem := store.NewMemory(f.mock)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: 10 * time.Second}, Store: mem}
	_, err := f.m.Register("inventory", cfg)
	require.NoError(t, err)
	web7 := manager.Start(manager.Options{Clock: f.mock, Name: "web-7"})
	t.Cleanup(web7.Stop)
	other, err := web7.Register("inventory", cfg)
	require.NoError(t, err)
	dry, err := f.m.Register("search", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, DryRun: true})
	require.NoError(t, err)
	sync := func() {
		for range 2 {
			web7.Sync()
			f.m.Sync()
		}
	}
	sync()

	ctx := context.Background()
	require.ErrorIs(t, other.Do(ctx, fail), errDown) // web-7 trips the fleet
	sync()
	f.mock.Add(10 * time.Second) // half-open
	sync()
	require.ErrorIs(t, other.Do(ctx, fail), errDown) // web-7's probe fails
	sync()
	require.ErrorIs(t, dry.Do(ctx, fail), errDown) // a dry run opens
	require.NoError(t, dry.Do(ctx, succeed))       // and lets the call through
	f.m.Sync()

	br := startBrowser(t)
	require.NoError(t, chromedp.Do(br.Ctx, chromedp.Navigate(f.srv.URL+"/")))
	waitFor(t, br, stateOf("inventory")+` === 'open'`)
	got := cards(t, br)
	inv := got["inventory"]
	assert.Equal(t, "opened by web-7: service down", inv.Why)
	assert.LessOrEqual(t, inv.WhyWidth, inv.CardWidth, "the why line stays in its card")
	require.Len(t, inv.Log, 3, "three transitions shown")
	assert.True(t, inv.ActionsVisible, "the buttons fit under the why line and three transitions")
	title, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('#breakers .card'))
		.find((c) => c.querySelector('.name').textContent === 'inventory').querySelector('.log li').title`))
	require.NoError(t, err)
	assert.Equal(t, "opened by web-7: service down", title, "the newest transition's tooltip says why")

	s := got["search"]
	assert.True(t, s.DryRun, "the dry run's badge")
	assert.Equal(t, "service down", s.Why)
	more, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('#breakers .card'))
		.find((c) => c.querySelector('.name').textContent === 'search').querySelector('.more').textContent`))
	require.NoError(t, err)
	assert.Contains(t, more, "1 would decline")
	assert.False(t, got["payments"].DryRun)
	process, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`document.getElementById('process').textContent`))
	require.NoError(t, err)
	assert.Equal(t, f.m.Name(), process, "the header names this process")
	assert.Empty(t, br.Errors(), "no script error")
}
