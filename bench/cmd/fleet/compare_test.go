package main

import (
	stdbytes "bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAnalyseScenario(t *testing.T) {
	const ms = int64(time.Millisecond)
	t0 := int64(1_000_000) * ms // the service fails from t0 for 2s
	s := scenario{
		lib: libFusebox, processes: 4, pace: 10 * time.Millisecond, open: 200 * time.Millisecond, after: 3 * time.Second,
		failFrom: t0, failUntil: t0 + 2000*ms,
		opens: []int64{t0 + 60*ms, t0 + 50*ms, t0 + 70*ms, t0 + 2050*ms, t0 + 2101*ms},
		trials: []trialCall{
			// reported out of order; three at the first period end
			{t0 + 260*ms, false}, {t0 + 250*ms, false}, {t0 + 330*ms, false},
			{t0 + 460*ms, false},
			{t0 + 2050*ms, true}, {t0 + 2060*ms, true},
		},
		windowCalls: 400, window: 2 * time.Second, ran: 100,
		stats: childStatsCompare{
			Sent:    50,
			Through: []int64{110, 120, 130, 140},
			Direct:  []int64{100, 100, 110, 120},
			Own:     []int64{3, 1, 2, 4},
		},
	}
	for _, at := range []int64{-5 * ms, 10 * ms, 20 * ms, 50 * ms, 250 * ms, 1999 * ms} {
		s.arrivals = append(s.arrivals, arrival{at: t0 + at, failed: at >= 0 && at < 2000*ms})
	}
	for _, at := range []int64{2000 * ms, 2999 * ms, 3000 * ms, 4999 * ms, 5000 * ms} {
		s.arrivals = append(s.arrivals, arrival{at: t0 + at})
	}
	r := analyseScenario(s)
	checks := []struct {
		what      string
		got, want any
	}{
		{"opened", r.opened, true},
		{"openings more than 100ms after the recovery", r.lateOpens, 1},
		{"before the first opening (at 50ms)", r.before, 2},
		{"from the first opening on", r.after, 3},
		{"period ends", r.periodEnds, 3},
		{"trials per end, fewest", r.trialsMin, 1},
		{"trials per end, most", r.trialsMax, 3},
		{"trials per end, mean", r.trialsMean, 2.0},
		{"each second after recovery", r.perSecond, []int{2, 1, 1}},
		{"offered", r.offered, 400.0},
		{"sent per call", r.sentPerCall, 0.125},
		{"ran per call", r.ranPerCall, 0.25},
		{"through p50", r.through[0], time.Duration(120)},
		{"direct p99", r.direct[1], time.Duration(120)},
		{"own p50, p99", r.own, [2]time.Duration{2, 4}},
		{"timed", r.timed, 4},
		{"the first good trial after recovery", r.goodTrial, 50 * time.Millisecond},
		// 400 calls in 2s are 10 in 50ms; no 50ms after recovery has
		// the 5 that are half of them
		{"half the calls back", r.halfBack, time.Duration(-1)},
	}
	for _, c := range checks {
		if !equalAny(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}

	s.opens = nil
	if r := analyseScenario(s); r.opened || r.before != 5 || r.after != 0 {
		t.Errorf("no opening: opened %v, before %d, after %d; want every failing call before", r.opened, r.before, r.after)
	}
}

func equalAny(a, b any) bool {
	as, aok := a.([]int)
	bs, bok := b.([]int)
	if aok && bok {
		return equalInts(as, bs)
	}
	return a == b
}

func TestTimeline(t *testing.T) {
	arr := []arrival{{at: 5}, {at: 99}, {at: 100}, {at: 250}, {at: 300}, {at: -1}}
	got := timeline(arr, 0, 300, 100*time.Nanosecond)
	if !equalInts(got, []int{2, 1, 1}) {
		t.Errorf("timeline of %v over [0, 300) in 100ns: got %v, want [2 1 1]", arr, got)
	}
	if got := timeline(arr, 300, 300, time.Nanosecond); got != nil {
		t.Errorf("an empty span: got %v, want nil", got)
	}
}

func TestParseCompareFlags(t *testing.T) {
	o, err := parseCompareFlags([]string{"-processes", "2,3", "-libs", "fusebox,failsafe-go", "-doc", "../docs/fleet.md"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !equalInts(o.processes, []int{2, 3}) || len(o.libs) != 2 || o.svg != filepath.Join("../docs", "fleet-compare.svg") {
		t.Errorf("got processes %v, libs %q, svg %q", o.processes, o.libs, o.svg)
	}
	if want := "go run ./cmd/fleet compare -doc ../docs/fleet.md -libs fusebox,failsafe-go -processes 2,3"; o.command != want {
		t.Errorf("command: got %q, want %q", o.command, want)
	}
	for _, bad := range [][]string{
		{"-libs", "hystrix"},
		{"-processes", "0"},
		{"-after", "500ms"},
		{"-every", "0s"},
		{"extra"},
	} {
		if _, err := parseCompareFlags(bad, io.Discard); err == nil {
			t.Errorf("flags %q: no error", bad)
		}
	}
}

// madeUp is a report of two made-up scenarios at 2 processes.
func madeUp() compareReport {
	o := compareOptions{
		processes: []int{2}, libs: []string{libFusebox, libGobreakerDist},
		pace: 10 * time.Millisecond, open: 200 * time.Millisecond, fail: time.Second, after: 2 * time.Second,
		warm: time.Second, healthy: time.Second, svg: "fleet-compare.svg", command: "go run ./cmd/fleet compare",
	}
	const ms = int64(time.Millisecond)
	t0 := int64(1_000_000) * ms
	run := func(lib string) scenario {
		s := scenario{lib: lib, processes: 2, pace: o.pace, open: o.open, after: o.after, failFrom: t0, failUntil: t0 + 1000*ms,
			opens: []int64{t0 + 40*ms}, trials: []trialCall{{t0 + 240*ms, false}, {t0 + 1040*ms, true}},
			windowCalls: 200, window: time.Second, ran: 900, stats: childStatsCompare{Sent: 800, Through: []int64{2e5}, Direct: []int64{1e5}, Own: []int64{1e5}}}
		for at := -500 * ms; at < 3000*ms; at += 10 * ms {
			s.arrivals = append(s.arrivals, arrival{at: t0 + at, failed: at >= 0 && at < 1000*ms})
		}
		return s
	}
	return compareReport{opts: o, runs: []scenario{run(libFusebox), run(libGobreakerDist), {lib: "x", processes: 2, failed: "a | b"}}}
}

func TestCompareMarkdown(t *testing.T) {
	text := madeUp().markdown()
	for _, want := range []string{
		"**2 processes** (the fleet asks for 200 calls a second)",
		"| fusebox | 4 / **96** | **1** (1–1), 2 ends | 100, 100 | 40 ms, 0 µs | – | **100 µs** / **100 µs** | 200 µs / 200 µs; 100 µs / 100 µs |",
		"| gobreaker DistributedCircuitBreaker | 4 / **96** | **1** (1–1), 2 ends | 100, 100 | 40 ms, 0 µs | 4 (4.5) |",
		"| x | failed: a / b |",
		"(fleet-compare.svg)",
		"cd bench && go run ./cmd/fleet compare\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the table has no %q:\n%s", want, text)
		}
	}
}

func TestCompareChart(t *testing.T) {
	svg := madeUp().chart()
	d := xml.NewDecoder(stdbytes.NewReader(svg))
	lines := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
			for _, a := range se.Attr {
				if a.Name.Local == "points" && strings.Count(a.Value, ",") != 70 {
					t.Errorf("a line of %d points, want 70 (3.5s in 50ms buckets)", strings.Count(a.Value, ","))
				}
			}
		}
	}
	if lines != 2 {
		t.Errorf("%d lines, want one for each breaker measured (2)", lines)
	}
}

// TestCompareSmoke runs every breaker in 2 processes for a few seconds
// each, on a real redis-server and the loopback service.
func TestCompareSmoke(t *testing.T) {
	requireRedis(t)
	if testing.Short() {
		t.Skip("starts a redis-server and child processes for about 30s")
	}
	dir := t.TempDir()
	doc := filepath.Join(dir, "fleet.md")
	if err := os.WriteFile(doc, []byte("before\n"+beginMarker("compare")+"\nold\n"+endMarker("compare")+"\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-processes", "2", "-fail", "1s", "-after", "1s", "-warm", "200ms", "-healthy", "500ms", "-doc", doc}
	var out stdbytes.Buffer
	if err := runCompare(context.Background(), args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.Contains(text, "failed:") || strings.Contains(text, "no breaker opened") || strings.Contains(text, "not measured") {
		t.Errorf("a breaker was not measured:\n%s", text)
	}
	for _, lib := range compareLibs {
		if !strings.Contains(text, "| "+lib+" | ") {
			t.Errorf("no row for %s:\n%s", lib, text)
		}
	}
	got, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), "before\n") || !strings.HasSuffix(string(got), "after\n") || strings.Contains(string(got), "old") || !strings.Contains(string(got), "**2 processes**") {
		t.Errorf("the guide as written:\n%s", got)
	}
	if svg, err := os.ReadFile(filepath.Join(dir, "fleet-compare.svg")); err != nil || strings.Count(string(svg), "<polyline") != len(compareLibs) {
		t.Errorf("the chart: %v, %d lines; want one a breaker", err, strings.Count(string(svg), "<polyline"))
	}
}
