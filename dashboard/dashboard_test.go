package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/dashboard"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("service down")

func fail(context.Context) error    { return errDown }
func succeed(context.Context) error { return nil }

type fixture struct {
	mock *clock.Mock
	m    *manager.Manager
	pay  *manager.Breaker
	h    *dashboard.Handler
	srv  *httptest.Server
}

// setup starts a manager on a mock clock with a breaker "payments" that
// trips on the second failure in a row and stays open 10s, and serves a
// dashboard of it.
func setup(t *testing.T, opts dashboard.Options) *fixture {
	t.Helper()
	f := &fixture{mock: clock.NewMock()}
	f.mock.Set(time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC))
	f.m = manager.Start(manager.Options{Clock: f.mock})
	t.Cleanup(f.m.Stop)
	var err error
	f.pay, err = f.m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: 10 * time.Second},
	})
	require.NoError(t, err)
	f.h, err = dashboard.New(f.m, opts)
	require.NoError(t, err)
	f.srv = httptest.NewServer(f.h)
	// Cleanups run last first: Close ends the event streams, so that the
	// server does not wait for them.
	t.Cleanup(f.srv.Close)
	t.Cleanup(f.h.Close)
	return f
}

func (f *fixture) get(t *testing.T, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(f.srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

func (f *fixture) status(t *testing.T) dashboard.Status {
	t.Helper()
	resp, body := f.get(t, "/api/status")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var st dashboard.Status
	require.NoError(t, json.Unmarshal(body, &st), "%s", body)
	return st
}

func TestStatusJSON(t *testing.T) {
	f := setup(t, dashboard.Options{Title: "checkout"})
	ctx, t0 := context.Background(), f.mock.Now()
	_, err := f.m.Register("search", manager.Config{})
	require.NoError(t, err)

	require.NoError(t, f.pay.Do(ctx, succeed))
	require.ErrorIs(t, f.pay.Do(ctx, fail), errDown)
	f.mock.Add(time.Second)
	require.ErrorIs(t, f.pay.Do(ctx, fail), errDown) // trips at t0+1s
	require.ErrorIs(t, f.pay.Do(ctx, succeed), breaker.ErrOpen)
	f.mock.Add(10 * time.Second)
	f.m.Sync() // open -> half_open at t0+11s
	f.mock.Add(time.Second)
	f.m.Sync()

	resp, body := f.get(t, "/api/status")
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
	var st dashboard.Status
	require.NoError(t, json.Unmarshal(body, &st), "%s", body)

	assert.Equal(t, "checkout", st.Title)
	assert.False(t, st.Actions)
	assert.True(t, st.Now.Equal(t0.Add(12*time.Second)), "now %v", st.Now)
	require.Len(t, st.Breakers, 2)
	pay, search := st.Breakers[0], st.Breakers[1]
	assert.Equal(t, "payments", pay.Name)
	assert.Equal(t, "half_open", pay.State)
	assert.True(t, pay.Since.Equal(t0.Add(11*time.Second)), "since %v", pay.Since)
	assert.Equal(t, uint64(4), pay.Calls)
	assert.Equal(t, uint64(1), pay.Successes)
	assert.Equal(t, uint64(2), pay.Failures)
	assert.Equal(t, uint64(0), pay.Ignored)
	assert.Equal(t, uint64(1), pay.Declined)
	assert.Equal(t, uint64(0), pay.MissedTransitions)
	assert.Equal(t, "service down", pay.Cause, "why it opened, while half-open too")
	assert.Empty(t, pay.OpenedBy, "a breaker kept in its process")
	assert.Equal(t, f.m.Name(), st.Process)
	require.Len(t, pay.Transitions, 2)
	assert.Equal(t, dashboard.TransitionRecord{From: "closed", To: "open", At: pay.Transitions[0].At, Cause: "trip", Outcome: "failure", Err: "service down"}, pay.Transitions[0])
	assert.True(t, pay.Transitions[0].At.Equal(t0.Add(time.Second)))
	assert.Equal(t, dashboard.TransitionRecord{From: "open", To: "half_open", At: pay.Transitions[1].At, Cause: "timer"}, pay.Transitions[1])
	assert.True(t, pay.Transitions[1].At.Equal(t0.Add(11*time.Second)))

	assert.Equal(t, "search", search.Name)
	assert.Equal(t, "closed", search.State)
	assert.Empty(t, search.Transitions)
	assert.NotContains(t, string(body[strings.Index(string(body), `"search"`):]), `"transitions"`, "an empty timeline and zero counters are left out")
	assert.NotContains(t, string(body), `"until"`, "no breaker has an open period")
}

// A breaker's name may come from outside; JSON carries it escaped and the
// page never carries it at all (the script adds it as text).
func TestNamesAreEscaped(t *testing.T) {
	const evil = `<script>alert(1)</script>"&'`
	f := setup(t, dashboard.Options{Title: `<b onmouseover="alert(2)">shop</b>`})
	_, err := f.m.Register(evil, manager.Config{})
	require.NoError(t, err)

	_, body := f.get(t, "/api/status")
	assert.NotContains(t, string(body), "<script>")
	assert.Contains(t, string(body), `\u003cscript\u003ealert(1)\u003c/script\u003e\"\u0026'`)
	var st dashboard.Status
	require.NoError(t, json.Unmarshal(body, &st))
	assert.Equal(t, evil, st.Breakers[1].Name, "the name survives the round trip")

	resp, page := f.get(t, "/")
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.NotContains(t, string(page), "alert(1)")
	assert.NotContains(t, string(page), "<b ")
	assert.Contains(t, string(page), "&lt;b onmouseover=&#34;alert(2)&#34;&gt;shop&lt;/b&gt;")
	// The only scripts are the page's own file, and the policy forbids any
	// other.
	assert.Equal(t, []string{`<script src="static/app.js" defer>`}, regexp.MustCompile(`<script[^>]*>`).FindAllString(string(page), -1))
	csp := resp.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "script-src 'self'")
	assert.NotContains(t, csp, "unsafe-inline")
	// The script adds data as text only.
	_, js := f.get(t, "/static/app.js")
	assert.Contains(t, string(js), "textContent")
	assert.NotRegexp(t, `innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(`, string(js))
}

func TestPageIsSelfContained(t *testing.T) {
	f := setup(t, dashboard.Options{})
	_, page := f.get(t, "/")
	for _, ref := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(page), -1) {
		u, err := url.Parse(ref[1])
		require.NoError(t, err)
		assert.False(t, u.IsAbs() || u.Host != "", "%q points elsewhere", ref[1])
		if strings.HasPrefix(ref[1], "static/") {
			resp, _ := f.get(t, "/"+ref[1])
			assert.Equal(t, http.StatusOK, resp.StatusCode, ref[1])
		}
	}
	_, css := f.get(t, "/static/style.css")
	assert.NotContains(t, string(css), "url(", "the style sheet fetches nothing")
	assert.NotContains(t, string(css), "@import")
}

// sse reads the events of a text/event-stream.
type sse struct {
	r     *bufio.Reader
	resp  *http.Response
	seq   uint64
	now   time.Time
	byID  map[int]*dashboard.BreakerStatus
	names map[int]string
	why   map[string]string // each breaker's why, by name
	bytes int               // data received
}

func openEvents(t *testing.T, ctx context.Context, f *fixture) *sse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/api/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return &sse{r: bufio.NewReader(resp.Body), resp: resp, why: map[string]string{}}
}

// next returns the status the stream shows after its next message: a
// snapshot replaces what it showed, a delta updates the breakers it holds.
func (s *sse) next(t *testing.T) dashboard.Status {
	t.Helper()
	var event, data string
	for {
		line, err := s.r.ReadString('\n')
		require.NoError(t, err)
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		case line == "" && (event == "snapshot" || event == "delta"):
			s.apply(t, event, data)
			s.bytes += len(data)
			return s.status()
		case line == "":
			event, data = "", ""
		}
	}
}

// wireMessage is a stream message as the package doc describes it.
type wireMessage struct {
	Seq     uint64            `json:"seq"`
	Now     int64             `json:"now"`
	Title   string            `json:"title"`
	Actions bool              `json:"actions"`
	Halted  bool              `json:"halted"`
	Names   [][2]any          `json:"names"`
	Gone    []int             `json:"gone"`
	B       []json.RawMessage `json:"b"`
}

var wireStates = []string{"closed", "open", "half_open", "probing"}
var wireOutcomes = []string{"", "success", "failure", "ignore"}

func (s *sse) apply(t *testing.T, event, data string) {
	t.Helper()
	var msg wireMessage
	require.NoError(t, json.Unmarshal([]byte(data), &msg), "%s", data)
	if event == "snapshot" {
		s.byID, s.names = map[int]*dashboard.BreakerStatus{}, map[int]string{}
	} else {
		require.Equal(t, s.seq+1, msg.Seq, "delta after seq %d", s.seq)
	}
	s.seq = msg.Seq
	now := time.UnixMilli(msg.Now).UTC()
	s.now = now
	for _, n := range msg.Names {
		id, name := int(n[0].(float64)), n[1].(string)
		s.names[id] = name
		s.byID[id] = &dashboard.BreakerStatus{Name: name}
	}
	for _, id := range msg.Gone {
		delete(s.byID, id)
	}
	rel := func(v any) time.Time {
		if v == nil {
			return time.Time{}
		}
		return now.Add(time.Duration(v.(float64)) * time.Millisecond)
	}
	for _, raw := range msg.B {
		var r []any
		require.NoError(t, json.Unmarshal(raw, &r))
		require.Len(t, r, 22, "%s", raw)
		b := s.byID[int(r[0].(float64))]
		require.NotNil(t, b, "record of an unknown breaker: %s", raw)
		n := func(i int) uint64 { return uint64(r[i].(float64)) }
		b.State, b.Since, b.Until = wireStates[int(r[1].(float64))], rel(r[2]), rel(r[3])
		b.Forced, b.StoreDown, b.DryRun = n(4)&1 != 0, n(4)&4 != 0, n(4)&8 != 0
		b.Calls, b.Successes, b.Failures, b.Ignored = n(5), n(6), n(7), n(8)
		b.Declined, b.Stale, b.DroppedEvents, b.MissedTransitions, b.SlowCalls = n(9), n(10), n(11), n(12), n(13)
		b.CallRate, b.FailureRate = r[14].(float64)/100, r[15].(float64)/1000
		b.Processes = int64(r[16].(float64))
		b.WouldDecline = n(17)
		s.why[b.Name] = r[18].(string)
		b.Admitted, b.SlowStartUntil = r[20].(float64), rel(r[21])
		for _, tr := range r[19].([]any) {
			tr := tr.([]any)
			rec := dashboard.TransitionRecord{
				From: wireStates[int(tr[0].(float64))], To: wireStates[int(tr[1].(float64))],
				At: rel(tr[2]), Cause: tr[3].(string), Outcome: wireOutcomes[int(tr[4].(float64))],
			}
			if len(tr) > 5 {
				rec.Err = tr[5].(string)
			}
			b.Transitions = append(b.Transitions, rec)
		}
	}
}

func (s *sse) status() dashboard.Status {
	st := dashboard.Status{Now: s.now}
	ids := make([]int, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		st.Breakers = append(st.Breakers, *s.byID[id])
	}
	return st
}

func TestEventsArriveAfterTransition(t *testing.T) {
	// No refresh while the test runs: the second event is due to the trip.
	f := setup(t, dashboard.Options{Refresh: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := openEvents(t, ctx, f)

	first := s.next(t)
	require.Len(t, first.Breakers, 1)
	assert.Equal(t, "closed", first.Breakers[0].State)

	require.ErrorIs(t, f.pay.Do(ctx, fail), errDown)
	require.ErrorIs(t, f.pay.Do(ctx, fail), errDown)
	st := s.next(t)
	assert.Equal(t, "open", st.Breakers[0].State)
	assert.Equal(t, uint64(2), st.Breakers[0].Failures)
	require.Len(t, st.Breakers[0].Transitions, 1)
	assert.Equal(t, "trip", st.Breakers[0].Transitions[0].Cause)

	f.mock.Add(10 * time.Second)
	f.m.Sync()
	st = s.next(t)
	assert.Equal(t, "half_open", st.Breakers[0].State)
	assert.Len(t, st.Breakers[0].Transitions, 2)
}

func TestEventsRefreshCounters(t *testing.T) {
	f := setup(t, dashboard.Options{Refresh: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := openEvents(t, ctx, f)
	assert.Equal(t, uint64(0), s.next(t).Breakers[0].Successes)
	require.NoError(t, f.pay.Do(ctx, succeed)) // no transition: only the refresh shows it
	for {
		if s.next(t).Breakers[0].Successes == 1 {
			return
		}
	}
}

// A stream ends when its client goes away; Close, which waits for the
// streams, then returns, and goleak finds nothing left.
func TestEventsEndWhenClientGoes(t *testing.T) {
	f := setup(t, dashboard.Options{Refresh: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	s := openEvents(t, ctx, f)
	s.next(t)
	cancel()
	_, err := io.Copy(io.Discard, s.resp.Body)
	require.Error(t, err)
	f.h.Close()
}

// Close ends open streams: the client sees the end of the body.
func TestEventsEndOnClose(t *testing.T) {
	f := setup(t, dashboard.Options{Refresh: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := openEvents(t, ctx, f)
	s.next(t)
	f.h.Close()
	f.h.Close()
	_, err := io.Copy(io.Discard, s.resp.Body)
	require.NoError(t, err, "the stream ends cleanly")

	resp, _ := f.get(t, "/api/status")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	resp, _ = f.get(t, "/api/events")
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

func post(t *testing.T, f *fixture, path, name string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(url.Values{"breaker": {name}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestActionsAbsentWithoutOption(t *testing.T) {
	f := setup(t, dashboard.Options{Token: "ignored-without-actions"})
	token := http.Header{dashboard.TokenHeader: {"ignored-without-actions"}}
	for _, path := range []string{"/api/force-open", "/api/reset"} {
		code, _ := post(t, f, path, "payments", token)
		assert.Equal(t, http.StatusNotFound, code, path)
	}
	assert.Equal(t, breaker.Closed, f.pay.State())
	assert.False(t, f.status(t).Actions)
	_, page := f.get(t, "/")
	assert.NotContains(t, string(page), "fusebox-token")
	assert.NotContains(t, string(page), "ignored-without-actions")
}

func TestActionsNeedPOSTSameOriginAndToken(t *testing.T) {
	f := setup(t, dashboard.Options{Actions: true, Token: "s3cret"})
	good := http.Header{dashboard.TokenHeader: {"s3cret"}}
	assert.True(t, f.status(t).Actions)

	for _, path := range []string{"/api/force-open", "/api/reset"} {
		for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
			req, err := http.NewRequest(method, f.srv.URL+path+"?breaker=payments", nil)
			require.NoError(t, err)
			req.Header.Set(dashboard.TokenHeader, "s3cret")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", method, path)
			assert.Equal(t, "POST", resp.Header.Get("Allow"), "%s %s", method, path)
		}
	}

	refused := []struct {
		name   string
		header http.Header
		want   int
	}{
		{"no token", http.Header{}, http.StatusForbidden},
		{"wrong token", http.Header{dashboard.TokenHeader: {"guess"}}, http.StatusForbidden},
		{"cross-site fetch", http.Header{dashboard.TokenHeader: {"s3cret"}, "Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{"other origin", http.Header{dashboard.TokenHeader: {"s3cret"}, "Origin": {"https://evil.example"}}, http.StatusForbidden},
	}
	for _, c := range refused {
		code, body := post(t, f, "/api/force-open", "payments", c.header)
		assert.Equal(t, c.want, code, "%s: %s", c.name, body)
		assert.Equal(t, breaker.Closed, f.pay.State(), c.name)
	}

	code, body := post(t, f, "/api/force-open", "nobody", good)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `no breaker named "nobody"`)

	sameOrigin := http.Header{dashboard.TokenHeader: {"s3cret"}, "Sec-Fetch-Site": {"same-origin"}, "Origin": {f.srv.URL}}
	code, body = post(t, f, "/api/force-open", "payments", sameOrigin)
	require.Equal(t, http.StatusNoContent, code, body)
	assert.Equal(t, breaker.Open, f.pay.State())
	assert.True(t, f.pay.Stats().Forced)

	code, body = post(t, f, "/api/reset", "payments", good)
	require.Equal(t, http.StatusNoContent, code, body)
	assert.Equal(t, breaker.Closed, f.pay.State())

	f.m.Sync()
	tr := f.status(t).Breakers[0].Transitions
	require.Len(t, tr, 2)
	assert.Equal(t, "force_open", tr[0].Cause)
	assert.Equal(t, "reset", tr[1].Cause)
}

// Without Options.Token, the page carries a random token, and the actions
// take only that one.
func TestActionsRandomToken(t *testing.T) {
	f := setup(t, dashboard.Options{Actions: true})
	_, page := f.get(t, "/")
	m := regexp.MustCompile(`<meta name="fusebox-token" content="([0-9a-f]{32})">`).FindStringSubmatch(string(page))
	require.NotNil(t, m, "%s", page)
	other := setup(t, dashboard.Options{Actions: true})
	_, otherPage := other.get(t, "/")
	assert.NotContains(t, string(otherPage), m[1], "each handler has its own token")

	code, _ := post(t, f, "/api/force-open", "payments", http.Header{dashboard.TokenHeader: {""}})
	assert.Equal(t, http.StatusForbidden, code)
	code, body := post(t, f, "/api/force-open", "payments", http.Header{dashboard.TokenHeader: {m[1]}})
	assert.Equal(t, http.StatusNoContent, code, body)
	assert.Equal(t, breaker.Open, f.pay.State())
}

func TestHistoryIsBounded(t *testing.T) {
	f := setup(t, dashboard.Options{History: 3})
	for i := range 5 {
		f.mock.Add(time.Second)
		require.NoError(t, f.pay.ForceOpen(), "round %d", i)
		f.mock.Add(time.Second)
		require.NoError(t, f.pay.Reset(), "round %d", i)
	}
	f.m.Sync()
	tr := f.status(t).Breakers[0].Transitions
	require.Len(t, tr, 3)
	start := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	var got []string
	for _, r := range tr {
		got = append(got, fmt.Sprintf("%s->%s@%v", r.From, r.To, r.At.Sub(start)))
	}
	assert.Equal(t, []string{"open->closed@8s", "closed->open@9s", "open->closed@10s"}, got)
}

func TestNewRejectsBadOptions(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	_, err := dashboard.New(nil, dashboard.Options{})
	assert.ErrorContains(t, err, "manager is nil")
	for _, c := range []struct {
		opts  dashboard.Options
		field string
	}{
		{dashboard.Options{History: -1}, "Options.History"},
		{dashboard.Options{History: dashboard.MaxHistory + 1}, "Options.History"},
		{dashboard.Options{Refresh: -time.Second}, "Options.Refresh"},
		{dashboard.Options{Refresh: time.Millisecond}, "Options.Refresh"},
		{dashboard.Options{EventBuffer: math.MaxInt}, "Options.EventBuffer"},
	} {
		_, err := dashboard.New(m, c.opts)
		assert.ErrorContains(t, err, c.field, "%+v", c.opts)
	}
}
