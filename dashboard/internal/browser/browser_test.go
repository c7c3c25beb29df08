package browser_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/dashboard/internal/browser/headless"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireChromium returns the browser's path. Without one the test skips,
// or fails when FUSEBOX_REQUIRE_CHROMIUM=1 (as in CI).
func requireChromium(t *testing.T) string {
	t.Helper()
	exe, err := headless.Find()
	if err != nil {
		if os.Getenv("FUSEBOX_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("FUSEBOX_REQUIRE_CHROMIUM=1: %v", err)
		}
		t.Skipf("skipping the browser test: %v", err)
	}
	return exe
}

// startBrowser starts Chromium and closes it when the test ends. Call it
// after starting the servers, so that the browser goes first and the
// servers do not wait for its event streams.
func startBrowser(t *testing.T) *headless.Browser {
	t.Helper()
	exe := requireChromium(t)
	br, err := headless.Start(context.Background(), headless.Options{ExecPath: exe, UserDataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(br.Close)
	return br
}

// card is what the page shows for one breaker, read from the DOM.
type card struct {
	Name     string            `json:"name"`
	State    string            `json:"state"`
	Pill     string            `json:"pill"`
	Colour   string            `json:"colour"`
	Counters map[string]string `json:"counters"`
	Log      []string          `json:"log"`
	Buttons  []string          `json:"buttons"`
	// Forced is whether the "forced" badge is visible.
	Forced bool `json:"forced"`
	// Why is the line that says why the breaker opened, if visible;
	// WhyWidth and CardWidth are its width and its card's, in pixels.
	Why       string  `json:"why"`
	WhyWidth  float64 `json:"whyWidth"`
	CardWidth float64 `json:"cardWidth"`
	// DryRun is whether the "dry run" badge is visible.
	DryRun bool `json:"dryRun"`
	// ActionsVisible is whether the card's buttons are inside it, not cut
	// off by its fixed height.
	ActionsVisible bool `json:"actionsVisible"`
}

const readCards = `JSON.stringify(Array.from(document.querySelectorAll('#breakers .card:not([hidden])')).map((c) => ({
	name: c.querySelector('.name').textContent,
	state: c.dataset.state,
	pill: c.querySelector('.pill.state').textContent,
	colour: getComputedStyle(c.querySelector('.pill.state')).backgroundColor,
	counters: Object.fromEntries(Array.from(c.querySelectorAll('dd[data-counter]')).map((d) => [d.dataset.counter, d.textContent])),
	log: Array.from(c.querySelectorAll('.log li')).map((li) => li.textContent),
	buttons: Array.from(c.querySelectorAll('button')).map((b) => b.textContent),
	forced: c.querySelector('.pill.forced').checkVisibility(),
	why: c.querySelector('.why').checkVisibility() ? c.querySelector('.why').textContent : '',
	whyWidth: c.querySelector('.why').getBoundingClientRect().width,
	cardWidth: c.getBoundingClientRect().width,
	dryRun: c.querySelector('.pill.dry').checkVisibility(),
	actionsVisible: !c.querySelector('.actions') || c.querySelector('.actions').getBoundingClientRect().bottom <= c.getBoundingClientRect().bottom,
})))`

func cards(t *testing.T, br *headless.Browser) map[string]card {
	t.Helper()
	raw, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](readCards))
	require.NoError(t, err)
	var list []card
	require.NoError(t, json.Unmarshal([]byte(raw), &list), raw)
	out := make(map[string]card, len(list))
	for _, c := range list {
		out[c.Name] = c
	}
	return out
}

// waitFor polls a JavaScript condition in the page, for at most 10s.
func waitFor(t *testing.T, br *headless.Browser, cond string) {
	t.Helper()
	_, err := chromedp.Run(br.Ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "waiting for %s", cond)
}

func stateOf(name string) string {
	b, _ := json.Marshal(name)
	return `(Array.from(document.querySelectorAll('#breakers .card')).find((c) => c.querySelector('.name').textContent === ` +
		string(b) + `) || {dataset: {}}).dataset.state`
}

func TestBrowserShowsLiveBreakers(t *testing.T) {
	f := setup(t, dashboard.Options{Actions: true, Title: "checkout"})
	br := startBrowser(t)
	const evilScript = `<script>alert(1)</script>`
	const evilImg = `<img src=x onerror="alert(2)">`
	for _, name := range []string{evilScript, evilImg} {
		_, err := f.m.Register(name, manager.Config{})
		require.NoError(t, err)
	}
	ctx := context.Background()
	for range 3 {
		require.NoError(t, f.pay.Do(ctx, succeed))
	}
	require.ErrorIs(t, f.pay.Do(ctx, fail), errDown)

	require.NoError(t, chromedp.Do(br.Ctx, chromedp.Navigate(f.srv.URL+"/")))
	waitFor(t, br, `Number(document.body.dataset.updates) >= 1`)
	title, err := chromedp.Run(br.Ctx, chromedp.Title())
	require.NoError(t, err)
	assert.Equal(t, "checkout", title)

	got := cards(t, br)
	require.Len(t, got, 3)
	pay := got["payments"]
	assert.Equal(t, "closed", pay.State)
	assert.Equal(t, "closed", pay.Pill)
	assert.Equal(t, "rgb(22, 163, 74)", pay.Colour, "closed is green")
	assert.Equal(t, map[string]string{"calls": "4", "successes": "3", "failures": "1", "declined": "0"}, pay.Counters)
	assert.Equal(t, []string{"Force open", "Reset"}, pay.Buttons)
	assert.False(t, pay.Forced, "no forced badge")
	assert.Empty(t, pay.Why, "closed: no why")

	// The page updates itself when the breaker trips: no reload.
	_, err = chromedp.Run(br.Ctx, chromedp.Evaluate[any](`window.notReloaded = true`))
	require.NoError(t, err)
	require.ErrorIs(t, f.pay.Do(ctx, fail), errDown)
	require.Equal(t, breaker.Open, f.pay.State())
	waitFor(t, br, stateOf("payments")+` === 'open'`)
	pay = cards(t, br)["payments"]
	assert.Equal(t, "open", pay.Pill)
	assert.Equal(t, "rgb(220, 38, 38)", pay.Colour, "open is red")
	assert.Equal(t, "2", pay.Counters["failures"])
	require.NotEmpty(t, pay.Log)
	assert.Contains(t, pay.Log[0], "closed→open")
	assert.Contains(t, pay.Log[0], "trip · failure")
	assert.Equal(t, "service down", pay.Why, "the card says why it opened")
	assert.LessOrEqual(t, pay.WhyWidth, pay.CardWidth, "the why line stays in its card")
	assert.True(t, pay.ActionsVisible, "the buttons still fit in the card")
	assert.False(t, pay.DryRun)
	still, err := chromedp.Run(br.Ctx, chromedp.Evaluate[bool](`window.notReloaded === true`))
	require.NoError(t, err)
	assert.True(t, still, "the page was not reloaded")

	// Forced open by hand: the badge shows.
	require.NoError(t, f.pay.ForceOpen())
	waitFor(t, br, `Array.from(document.querySelectorAll('.pill.forced')).some((p) => p.checkVisibility())`)
	assert.True(t, cards(t, br)["payments"].Forced)

	// The Reset button closes the breaker through the POST action, and the
	// page shows it.
	_, err = chromedp.Run(br.Ctx, chromedp.Evaluate[any](`Array.from(document.querySelectorAll('#breakers .card'))
		.find((c) => c.querySelector('.name').textContent === 'payments').querySelector('button.reset').click()`))
	require.NoError(t, err)
	waitFor(t, br, stateOf("payments")+` === 'closed'`)
	assert.Equal(t, breaker.Closed, f.pay.State())
	assert.False(t, cards(t, br)["payments"].Forced, "the badge goes with the reset")

	// Names are text: shown as written, with no element made from them and
	// no dialog opened.
	got = cards(t, br)
	assert.Equal(t, evilScript, got[evilScript].Name)
	assert.Equal(t, evilImg, got[evilImg].Name)
	counts, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]int](`[document.scripts.length, document.images.length, document.querySelectorAll('[onerror]').length]`))
	require.NoError(t, err)
	assert.Equal(t, []int{1, 0, 0}, counts, "scripts, images, elements with onerror")
	assert.Empty(t, br.Dialogs(), "no alert or other dialog")
	assert.Empty(t, br.Errors(), "no script error, blocked resource or failed request")
}

// Without Options.Actions the page has no buttons at all.
func TestBrowserHasNoButtonsWithoutActions(t *testing.T) {
	f := setup(t, dashboard.Options{})
	br := startBrowser(t)
	require.NoError(t, chromedp.Do(br.Ctx, chromedp.Navigate(f.srv.URL+"/")))
	waitFor(t, br, `Number(document.body.dataset.updates) >= 1`)
	pay := cards(t, br)["payments"]
	assert.Equal(t, "closed", pay.State)
	assert.Empty(t, pay.Buttons)
	n, err := chromedp.Run(br.Ctx, chromedp.Evaluate[int](`document.querySelectorAll('button').length`))
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	assert.Empty(t, br.Errors())
}

// The page works mounted under a path prefix, as the package doc shows.
func TestBrowserUnderPrefix(t *testing.T) {
	f := setup(t, dashboard.Options{})
	srv := httptest.NewServer(newPrefixMux(f.h))
	t.Cleanup(srv.Close)
	t.Cleanup(f.h.Close) // ends the page's stream before srv.Close waits for it
	br := startBrowser(t)
	require.NoError(t, chromedp.Do(br.Ctx, chromedp.Navigate(srv.URL+"/fusebox")))
	waitFor(t, br, `Number(document.body.dataset.updates) >= 1`)
	assert.Equal(t, "closed", cards(t, br)["payments"].State)
	loc, err := chromedp.Run(br.Ctx, chromedp.Location())
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(loc, "/fusebox/"), loc)
	assert.Empty(t, br.Errors())
}

// scale registers n breakers, trips every hundredth and forces one open,
// and returns the page's numbers once it shows them: the summary counts,
// the cards in the DOM, and the time a filter took in the page.
func TestBrowserAtScale(t *testing.T) {
	for _, n := range []int{1000, 10000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := setup(t, dashboard.Options{Refresh: time.Hour})
			for i := range n {
				b, err := f.m.Register(fmt.Sprintf("upstream-%05d.example", i), manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
				require.NoError(t, err)
				if i%100 == 0 {
					require.ErrorIs(t, b.Do(context.Background(), fail), errDown)
				}
			}
			f.m.Sync()
			br := startBrowser(t)
			start := time.Now()
			require.NoError(t, chromedp.Do(br.Ctx, chromedp.Navigate(f.srv.URL+"/")))
			waitFor(t, br, `Number(document.body.dataset.updates) >= 1 && document.querySelectorAll('#breakers .card').length > 0`)
			t.Logf("%d breakers: first render %v after navigating", n, time.Since(start).Round(time.Millisecond))

			// Open breakers come first, and the summary counts every state.
			first, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`document.querySelector('#breakers .card:not([hidden])').dataset.state`))
			require.NoError(t, err)
			assert.Equal(t, "open", first)
			counts, err := chromedp.Run(br.Ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(document.querySelectorAll('#summary .sum[data-state]')).map((s) => [s.dataset.state, s.querySelector('.n').textContent]))`))
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"open": fmt.Sprint(n / 100), "closed": fmt.Sprint(n + 1 - n/100), "probing": "0", "half_open": "0"}, counts)
			// Only what is on screen is rendered.
			rendered, err := chromedp.Run(br.Ctx, chromedp.Evaluate[int](`document.querySelectorAll('#breakers .card:not([hidden])').length`))
			require.NoError(t, err)
			assert.Less(t, rendered, 60, "cards in the DOM for %d breakers", n)

			// A search by name applies at once.
			_, err = chromedp.Run(br.Ctx, chromedp.Evaluate[any](`(() => { const s = document.getElementById('search'); s.value = '00042'; s.dispatchEvent(new Event('input')); })()`))
			require.NoError(t, err)
			waitFor(t, br, `document.querySelectorAll('#breakers .card:not([hidden])').length === 1`)
			filterMs, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`document.body.dataset.filterMs`))
			require.NoError(t, err)
			t.Logf("%d breakers: filter by name took %s ms in the page", n, filterMs)
			got := cards(t, br)
			visible := 0
			for name := range got {
				if name == "upstream-00042.example" {
					visible++
				}
			}
			assert.Equal(t, 1, visible)
			// And by state.
			_, err = chromedp.Run(br.Ctx, chromedp.Evaluate[any](`(() => { document.getElementById('search').value = ''; const s = document.getElementById('state-filter'); s.value = 'open'; s.dispatchEvent(new Event('change')); })()`))
			require.NoError(t, err)
			waitFor(t, br, `document.getElementById('shown').textContent === '`+fmt.Sprint(n/100)+` of `+fmt.Sprint(n+1)+` breakers'`)
			assert.Empty(t, br.Errors())
		})
	}
}

// While the stream is down the page dims its values and says so; when it
// is back, a new snapshot brings them up to date.
func TestBrowserDimsWhileDisconnected(t *testing.T) {
	f := setup(t, dashboard.Options{})
	br := startBrowser(t)
	require.NoError(t, chromedp.Do(br.Ctx, chromedp.Navigate(f.srv.URL+"/")))
	waitFor(t, br, `Number(document.body.dataset.updates) >= 1 && !document.body.classList.contains('stale')`)
	f.srv.CloseClientConnections() // the stream drops; the page retries after 2s
	waitFor(t, br, `document.body.classList.contains('stale') && document.getElementById('conn-text').textContent.startsWith('disconnected')`)
	opacity, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('main')).opacity`))
	require.NoError(t, err)
	assert.NotEqual(t, "1", opacity, "values are dimmed")
	require.NoError(t, f.pay.ForceOpen())
	waitFor(t, br, `!document.body.classList.contains('stale') && `+stateOf("payments")+` === 'open'`)
}

// With 100 of 1,000 breakers flapping (about 1,100 transitions a second),
// the page's main thread stays mostly idle: the share of wall time spent
// in tasks is logged, not asserted, since it depends on the machine.
func TestBrowserMainThreadWhileFlapping(t *testing.T) {
	f := setup(t, dashboard.Options{})
	var flappers []*manager.Breaker
	for i := range 1000 {
		b, err := f.m.Register(fmt.Sprintf("upstream-%05d.example", i), manager.Config{})
		require.NoError(t, err)
		if i%10 == 0 {
			flappers = append(flappers, b)
		}
	}
	br := startBrowser(t)
	require.NoError(t, chromedp.Do(br.Ctx, chromedp.Navigate(f.srv.URL+"/")))
	waitFor(t, br, `Number(document.body.dataset.updates) >= 1`)
	_, err := chromedp.Call(br.Ctx, performance.Enable, performance.EnableParams{})
	require.NoError(t, err)
	taskTime := func() float64 {
		res, err := chromedp.Call(br.Ctx, performance.GetMetrics, cdp.Empty{})
		require.NoError(t, err)
		for _, m := range res.Metrics {
			if m.Name == "TaskDuration" {
				return m.Value
			}
		}
		t.Fatal("no TaskDuration metric")
		return 0
	}
	before, start := taskTime(), time.Now()
	for round := 0; time.Since(start) < 3*time.Second; round++ {
		for _, b := range flappers {
			if round%2 == 0 {
				_ = b.ForceOpen()
			} else {
				_ = b.Reset()
			}
		}
		// A rate in real time: the page's cost is measured per second
		// at 11 transitions a second.
		time.Sleep(time.Second / 11)
	}
	busy := (taskTime() - before) / time.Since(start).Seconds()
	t.Logf("main thread busy %.1f%% of the time with 100 of 1,000 breakers flapping", busy*100)
	assert.Empty(t, br.Errors())
}
