package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs the test binary as a child of the fleet when the parent
// started it so (TestFleetSmoke starts children from os.Executable, which
// is this binary), and the tests otherwise.
func TestMain(m *testing.M) {
	if raw, ok := os.LookupEnv(childEnv); ok {
		if err := childMain(raw); err != nil {
			os.Stderr.WriteString("fleet child: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	if raw, ok := os.LookupEnv(compareChildEnv); ok {
		if err := compareChildMain(raw); err != nil {
			os.Stderr.WriteString("fleet compare child: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

const infoText = "# Stats\r\n" +
	"total_commands_processed:120\r\n" +
	"total_net_input_bytes:5000\r\n" +
	"# CPU\r\n" +
	"used_cpu_sys:1.500000\r\n" +
	"used_cpu_user:2.250000\r\n" +
	"# Memory\r\n" +
	"used_memory:1000000\r\n" +
	"mem_clients_normal:20000\r\n" +
	"used_memory_scripts:400\r\n" +
	"# Keyspace\r\n" +
	"db0:keys=30,expires=20,avg_ttl=1000\r\n" +
	"# Commandstats\r\n" +
	"cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_evalsha:calls=10,usec=100,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_pttl:calls=100,usec=50,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_client|setinfo:calls=3,usec=3,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n"

func TestParseInfo(t *testing.T) {
	inf := parseInfo(infoText, time.Time{})
	checks := []struct {
		what      string
		got, want float64
	}{
		{"commands (INFO left out)", float64(inf.commands()), 113},
		{"keys", float64(inf.keys()), 30},
		{"cpu", inf.cpu(), 3.75},
		{"data memory", inf.dataMemory(), 1000000 - 20000 - 400},
		{"net in", inf.float("total_net_input_bytes"), 5000},
		{"pttl calls", float64(inf.calls["pttl"]), 100},
		{"client|setinfo calls", float64(inf.calls["client|setinfo"]), 3},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s of the INFO text: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestLoadOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := parseInfo(infoText, t0)
	b := parseInfo(strings.NewReplacer(
		"cmdstat_pttl:calls=100", "cmdstat_pttl:calls=300",
		"cmdstat_info:calls=7", "cmdstat_info:calls=9",
		"used_cpu_user:2.250000", "used_cpu_user:2.750000",
	).Replace(infoText), t0.Add(2*time.Second))
	sa := childStats{Sent: map[string]int64{"pttl": 100, "lease": 4}, CPU: 1}
	sb := childStats{Sent: map[string]int64{"pttl": 300, "lease": 4, "get": 10}, CPU: 2}
	l := loadOf(a, b, sa, sb)
	checks := []struct {
		what      string
		got, want float64
	}{
		{"seconds", l.seconds, 2},
		{"run/s (INFO left out)", l.run, 100},
		{"run pttl/s", l.runBy["pttl"], 100},
		{"sent/s", l.sentTotal(), 105},
		{"sent lease/s (no change)", l.sent["lease"], 0},
		{"Redis cpu", l.cpu, 0.25},
		{"manager cpu", l.managerCPU, 0.5},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestKindOf(t *testing.T) {
	key := func(field string) string { return "fusebox:{b00001}:" + field }
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"get", key("epoch")}, "get"},
		{[]any{"PTTL", key("open")}, "pttl"},
		{[]any{"del", key("failures"), key("reporters")}, "success"},
		{[]any{"del", "other"}, "del"},
		// The scripts as they were before the quorum, and after.
		{[]any{"evalsha", "abc", 4, key("failures"), key("open"), key("probe"), key("epoch"), 60000}, "failure"},
		{[]any{"evalsha", "abc", 5, key("failures"), key("open"), key("probe"), key("epoch"), key("reporters"), 60000, 1, "r1"}, "failure"},
		{[]any{"eval", "script", 4, key("failures"), key("open"), key("probe"), key("epoch"), 60000}, "failure (load)"},
		{[]any{"evalsha", "abc", 3, key("open"), key("probe"), key("epoch"), 2, 1000, "fusebox:changes", "b00001"}, "open"},
		{[]any{"evalsha", "abc", 3, key("open"), key("probe"), key("epoch"), "token", 1000, 3}, "lease"},
		{[]any{"evalsha", "abc", 3, key("open"), key("probe"), key("epoch"), "fusebox:changes", "b00001"}, "force"},
		// Since sharded pub/sub, the opening and the forcing name the
		// command that announces them.
		{[]any{"evalsha", "abc", 3, key("open"), key("probe"), key("epoch"), 2, 1000, "fusebox:changes", "b00001", "PUBLISH"}, "open"},
		{[]any{"evalsha", "abc", 3, key("open"), key("probe"), key("epoch"), 2, 0, "fusebox:{b00001}:changes", "b00001", "SPUBLISH"}, "open"},
		{[]any{"evalsha", "abc", 3, key("open"), key("probe"), key("epoch"), "fusebox:changes", "b00001", "PUBLISH"}, "force"},
		// Since the opener is kept, and leases are announced.
		{[]any{"evalsha", "abc", 4, key("open"), key("probe"), key("epoch"), key("opener"), 2, 1000, "fusebox:changes", "b00001", "PUBLISH", "web-1\nboom"}, "open"},
		{[]any{"evalsha", "abc", 4, key("open"), key("probe"), key("epoch"), key("opener"), 2, 1000, "fusebox:changes", "b00001", "PUBLISH", ""}, "open"},
		{[]any{"evalsha", "abc", 4, key("open"), key("probe"), key("epoch"), key("opener"), "token", 1000, 3, "fusebox:changes", "b00001", "SPUBLISH"}, "lease"},
		{[]any{"evalsha", "abc", 4, key("open"), key("probe"), key("epoch"), key("opener"), "fusebox:changes", "b00001", "PUBLISH"}, "force"},
		{[]any{"evalsha", "abc", 5, key("probe"), key("open"), key("failures"), key("window"), key("epoch"), "token", "s", 1000, "fusebox:changes", "b00001", 3}, "verdict"},
		{[]any{"evalsha", "abc", 5, key("open"), key("probe"), key("failures"), key("window"), key("epoch"), "fusebox:changes", "b00001"}, "reset"},
		{[]any{"evalsha", "abc", 6, key("open"), key("probe"), key("failures"), key("window"), key("epoch"), key("reporters"), "fusebox:changes", "b00001"}, "reset"},
		{[]any{"evalsha", "abc", 4, key("window"), key("open"), key("probe"), key("epoch"), 100, 10, 1, 3, 4}, "window"},
		{[]any{"evalsha", "abc", 2, key("open"), key("sweep"), 1}, "script(open,sweep)"},
		{[]any{"evalsha", "abc", "x"}, "evalsha"},
		{nil, "?"},
	}
	for _, c := range cases {
		if got := kindOf(c.args); got != c.want {
			t.Errorf("kindOf(%v) = %q, want %q", c.args, got, c.want)
		}
	}
}

func TestAnalyse(t *testing.T) {
	const s = int64(time.Second)
	fail := func(b int, at int64) serviceCall { return serviceCall{breaker: b, at: at} }
	trial := func(b int, at int64, ok bool) serviceCall {
		return serviceCall{breaker: b, probe: true, ok: ok, at: at}
	}
	cases := []struct {
		name                 string
		calls                []serviceCall
		periodEnds, min, max int
		before               []int
		leaked               int
	}{
		{
			name:       "one breaker: opened by 5 failures, a failed trial, a good one",
			calls:      []serviceCall{fail(0, 1), fail(0, 2), fail(0, 3), fail(0, 4), fail(0, 5), trial(0, s, false), trial(0, 2*s, true)},
			periodEnds: 2, min: 1, max: 1, before: []int{5},
		},
		{
			name:       "two trials at one period end, reported out of order",
			calls:      []serviceCall{trial(0, 2*s+10, true), fail(0, 1), trial(0, s, false), trial(0, s+100, false)},
			periodEnds: 2, min: 1, max: 2, before: []int{1},
		},
		{
			name:       "a call let through after the first trial leaks",
			calls:      []serviceCall{fail(0, 1), trial(0, s, false), fail(0, s+5), trial(0, 2*s, true)},
			periodEnds: 2, min: 1, max: 1, before: []int{1}, leaked: 1,
		},
		{
			name:       "two breakers",
			calls:      []serviceCall{fail(1, 1), fail(0, 1), fail(0, 2), trial(1, s, true), trial(0, s, true)},
			periodEnds: 2, min: 1, max: 1, before: []int{2, 1},
		},
		{
			name:   "no trial yet",
			calls:  []serviceCall{fail(0, 1), fail(0, 2)},
			before: []int{2},
		},
	}
	for _, c := range cases {
		r := analyse(c.calls, 2, time.Second/2)
		if r.periodEnds != c.periodEnds || r.trialsMin != c.min || r.trialsMax != c.max || r.leaked != c.leaked || !equalInts(r.before, c.before) {
			t.Errorf("%s: got %d ends, trials %d-%d, before %v, leaked %d; want %d ends, trials %d-%d, before %v, leaked %d",
				c.name, r.periodEnds, r.trialsMin, r.trialsMax, r.before, r.leaked, c.periodEnds, c.min, c.max, c.before, c.leaked)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPropagationAndPercentile(t *testing.T) {
	var p propagation
	p.add(1000, []int64{1500, 3000}, 0)
	p.add(2000, []int64{2100}, 1)
	p.add(3000, nil, 0)
	if p.trips != 3 || p.missing != 1 || len(p.all) != 3 || len(p.slowest) != 2 {
		t.Fatalf("three trips: got %+v", p)
	}
	if got := percentile(p.slowest, 1); got != 2000 {
		t.Errorf("slowest of the trips: got %v, want 2µs", got)
	}
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 3}, {0.99, 5}, {1, 5}} {
		if got := percentile(ds, c.q); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", ds, c.q, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing: got %v, want 0", got)
	}
}

func TestNum(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0"}, {1.234, "1.23"}, {12.34, "12.3"}, {123.4, "123"}, {1234.5, "1,230"}, {299_987, "300,000"}, {-60, "-60"}} {
		if got := num(c.v); got != c.want {
			t.Errorf("num(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestSpliced(t *testing.T) {
	doc := "# Title\n\nbefore\n\n" + beginMarker("measured") + "\nold\n" + endMarker("measured") + "\n\nbetween\n\n" +
		beginMarker("memory") + "\nold memory\n" + endMarker("memory") + "\n\nafter\n"
	got, err := spliced(doc, "memory", "new memory\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nbefore\n\n" + beginMarker("measured") + "\nold\n" + endMarker("measured") + "\n\nbetween\n\n" +
		beginMarker("memory") + "\n\nnew memory\n\n" + endMarker("memory") + "\n\nafter\n"
	if got != want {
		t.Errorf("spliced the memory part:\n%s\nwant:\n%s", got, want)
	}
	if _, err := spliced("no markers", "measured", "x"); err == nil {
		t.Error("spliced into a text without markers: no error")
	}
}

// requireRedis skips the test where no redis-server is on PATH, unless
// FUSEBOX_REQUIRE_REDIS=1 (as CI sets) makes that a failure.
func requireRedis(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		msg := "redis-server not found on PATH; install it (Debian: apt-get install -y redis-server) to run this test"
		if os.Getenv("FUSEBOX_REQUIRE_REDIS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// A small fleet, two managers in one child process and 40 breakers,
// through every phase with short times: the harness still measures what
// it says against the manager and the store as they are.
func TestFleetSmoke(t *testing.T) {
	requireRedis(t)
	if testing.Short() {
		t.Skip("starts a redis-server and a child process for a few seconds")
	}
	o, err := parseFlags([]string{"-managers", "2", "-breakers", "40", "-window", "300ms", "-fail", "300ms", "-open", "300ms", "-trips", "3", "-resync", "100ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defer func(d time.Duration) { settleHold = d }(settleHold)
	settleHold = 500 * time.Millisecond // no status read of 40 breakers leaves a buffer worth waiting for

	m, err := memoryOf(ctx, o, 40, io.Discard)
	if err != nil {
		t.Fatalf("memory: %v", err)
	}
	if m.keys[memQuiet] != 0 || m.keys[memCounted] != 1 || m.keys[memOpen] < 2 || m.bytes[memCounted] <= 0 {
		t.Errorf("memory of 40 breakers: %+v; want no key while quiet, one while counting, more while open", m)
	}

	r, err := measure(ctx, o, 2, 40, io.Discard)
	if err != nil {
		t.Fatalf("2 managers x 40 breakers: %v", err)
	}
	if r.processes != 1 || len(r.register) != 2 {
		t.Errorf("processes %d, register times %v: want one process, two managers", r.processes, r.register)
	}
	if r.idle.run <= 0 || r.idle.sentTotal() <= 0 {
		t.Errorf("idle: sent %v/s, run %v/s; want some resync", r.idle.sentTotal(), r.idle.run)
	}
	if r.prop.trips != 3 || r.prop.missing != 0 || len(r.prop.slowest) != 3 {
		t.Errorf("openings: %+v; want 3 trips, each reported by the other manager", r.prop)
	}
	for _, f := range []struct {
		name string
		r    faultResult
	}{{"one fails", r.one}, {"10% fail", r.tenth}} {
		if f.r.tripped != f.r.breakers || f.r.periodEnds < f.r.breakers || f.r.trialsMin != 1 || f.r.trialsMax != 1 || f.r.leaked != 0 || f.r.notClosed != 0 {
			t.Errorf("%s: %+v; want every breaker tripped, one trial at each period end, none leaked, all closed at the end", f.name, f.r)
		}
	}
	text := report{opts: o, results: []result{r}}.markdown() + report{opts: o, memory: []memory{m}}.memoryMarkdown()
	for _, want := range []string{"#### Load on Redis", "| breakers | closed, never opened |", "#### Openings, trials, registering", "| 2 | 40 | idle |"} {
		if !strings.Contains(text, want) {
			t.Errorf("the report has no %q:\n%s", want, text)
		}
	}
}
