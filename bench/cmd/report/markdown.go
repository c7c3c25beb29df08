package main

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// caseTitle turns a case's benchmark name, such as
// Closed/failurerate/parallel, into words for a table.
func caseTitle(g string) string {
	parts := strings.Split(g, "/")
	var words []string
	for i, p := range parts {
		switch {
		case i == 0 && p == "Closed":
			words = append(words, "closed")
		case i == 0 && p == "Declined":
			words = append(words, "declined (open)")
		case i == 0 && p == "Do":
			words = append(words, "Do(return nil)")
		case i == 0 && p == "Random":
			words = append(words, "random of 10,000")
		case p == "failurerate":
			words = append(words, "failure rate/100")
		default:
			words = append(words, p)
		}
	}
	return strings.Join(words, ", ")
}

// baselineTitle describes each operation of BenchmarkBaseline.
var baselineTitle = map[string]string{
	"atomic-add":  "atomic add (`atomic.Uint64.Add`, a LOCK-prefixed instruction on amd64)",
	"atomic-load": "atomic load",
	"mutex":       "uncontended `sync.Mutex` Lock and Unlock",
	"time-now":    "`time.Now()`",
}

// libPath says which API of a library a column measures.
var libPath = map[string]string{
	"fusebox":             "`Breaker.Acquire` + `Permit.Release` (`Breaker.Do` in the Do case)",
	"gobreaker":           "`CircuitBreaker[any].Execute`",
	"gobreaker-twostep":   "`TwoStepCircuitBreaker[any].Allow` + `done`",
	"failsafe":            "`failsafe.With(cb)`, built once, then `Run`",
	"failsafe-standalone": "`cb.TryAcquirePermit()` + `cb.RecordSuccess()`",
}

// ns formats a duration in nanoseconds with three significant digits or
// so.
func ns(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func num(v float64) string { return fmt.Sprintf("%g", v) }

func pct(s stat) string {
	if s.n < 2 {
		return "–"
	}
	return fmt.Sprintf("±%.0f%%", s.spread*100)
}

func (r *results) cell(name, unit string, format func(float64) string) string {
	if s, ok := r.stat(name, unit); ok {
		return format(s.median)
	}
	return "–"
}

// report renders docs/benchmarks.md.
func report(r *results, m machine, s session, svgLink string) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("# Benchmarks\n\n")
	p("fusebox measured side by side with [sony/gobreaker](https://github.com/sony/gobreaker) v2 and\n")
	p("[failsafe-go](https://github.com/failsafe-go/failsafe-go), each configured for the same policy, and\n")
	p("fusebox's manager measured with up to 100,000 breakers. This page is written by\n")
	p("`bench/cmd/report`: run `bash bench/run.sh` to measure again; do not edit it by hand.\n\n")

	p("## Machine and command\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %s |\n", m.cpu)
	p("| cores | %d logical (GOMAXPROCS %d in the benchmarks) |\n", m.cores, r.procs)
	p("| memory | %s |\n", m.memory)
	p("| Go | %s |\n", m.goVer)
	p("| OS | %s |\n", m.os)
	p("| fusebox | %s |\n", m.commit)
	p("| date | %s, %s in all |\n", s.started.Format(time.DateTime+" MST"), s.elapsed)
	p("| runs | %d of each benchmark; the suite runs in full once per round, so the runs of one benchmark are spread over the whole time |\n", s.count)
	p("| load average (1, 5, 15 min) | %s before, %s after |\n\n", s.loadBefore, s.loadAfter)
	if base := r.baselines(); len(base) > 0 {
		p("What the machine's basic operations cost in the same run (`BenchmarkBaseline`, median\n")
		p("ns/op): the side-by-side numbers are built from these.\n\n")
		p("| operation | ns/op |\n|---|--:|\n")
		for _, op := range base {
			p("| %s | %s |\n", baselineTitle[op.op], r.cell(op.name, "ns/op", ns))
		}
		p("\n")
	}
	p("The command:\n\n```\n%s\n```\n\n", s.command)
	p("It compiles the suite once in `bench/` (`go test -c`) and runs it once per round:\n\n```\n%s\n```\n\n", s.roundCmd)
	p("Every number below is the median of the runs; *spread* is the largest distance of a run from\n")
	p("the median. The machine is shared with other work, so a spread of more than a few percent\n")
	p("means a run was disturbed; the medians resist that, the spread says how much there was. The\n")
	p("raw output of every round is kept, uncommitted, in `bench/results/latest.txt`; benchstat reads\n")
	p("it:\n\n")
	p("```\ngo run golang.org/x/perf/cmd/benchstat@latest -col /lib bench/results/latest.txt\n```\n\n")

	p("## Targets\n\n")
	p("Ratios are fusebox's median ns/op over the other library's, in the same run. A target is\n")
	p("judged on medians of at least %d runs; with fewer, the result is marked indicative.\n\n", minRuns)
	p("| target | measured | result |\n|---|---|---|\n")
	for _, v := range r.targets() {
		res := v.result
		if strings.HasPrefix(res, "FAIL") {
			res = "**" + res + "**"
		}
		p("| %s | %s | %s |\n", v.target, v.measured, res)
	}
	p("\n")

	p("## Side by side\n\n")
	p("![ns/op per case and library, log scale](%s)\n\n", svgLink)
	p("| case | library | ns/op | spread | B/op | allocs/op |\n|---|---|--:|--:|--:|--:|\n")
	for _, g := range r.groups() {
		for i, lib := range g.libs {
			name := g.name + "/lib=" + lib
			title := ""
			if i == 0 {
				title = caseTitle(g.name)
			}
			spread := "–"
			if st, ok := r.stat(name, "ns/op"); ok {
				spread = pct(st)
			}
			p("| %s | %s | %s | %s | %s | %s |\n", title, lib, r.cell(name, "ns/op", ns), spread,
				r.cell(name, "B/op", num), r.cell(name, "allocs/op", num))
		}
	}
	p("\n")

	p("### fusebox's ratios\n\n")
	p("fusebox's ns/op over the other library's, per case: below 1 is faster. gobreaker's column\n")
	p("takes the faster of its two paths in each case (Execute alone in the Do case).\n\n")
	p("| case | fusebox ns/op | gobreaker ns/op (path) | fusebox ÷ gobreaker | failsafe standalone ns/op | fusebox ÷ failsafe standalone |\n")
	p("|---|--:|--:|--:|--:|--:|\n")
	for _, g := range r.groups() {
		fb := r.cell(g.name+"/lib="+libFusebox, "ns/op", ns)
		gbCell, gbRatio := "–", "–"
		refs := gobreakerPaths
		if strings.HasPrefix(g.name, "Do/") {
			refs = gobreakerExec
		}
		if rt, ok := r.fuseboxOver(g.name, refs); ok {
			gbCell = r.cell(g.name+"/lib="+rt.to, "ns/op", ns) + " (" + rt.to + ")"
			gbRatio = fmt.Sprintf("%.3f", rt.value)
		}
		fsCell, fsRatio := "–", "–"
		if rt, ok := r.fuseboxOver(g.name, failsafeCB); ok {
			fsCell = r.cell(g.name+"/lib="+rt.to, "ns/op", ns)
			fsRatio = fmt.Sprintf("%.3f", rt.value)
		}
		p("| %s | %s | %s | %s | %s | %s |\n", caseTitle(g.name), fb, gbCell, gbRatio, fsCell, fsRatio)
	}
	p("\n")

	p("## Scale\n\n")
	p("fusebox alone: one manager with *n* breakers registered. Each iteration trips every breaker,\n")
	p("steps the clock past the open period and calls `Sync`, then lets one probe through each and\n")
	p("closes it: 4*n* transitions. *ns/transition* is the wall time of that cycle over its 4*n*\n")
	p("transitions, callers and manager together (the manager's goroutine runs on another core\n")
	p("while the caller makes the calls; the time ends when `Sync` returns). *ns/expiry* is the\n")
	p("manager's own time for a timer transition: the `Sync` that ends the open periods, over *n*,\n")
	p("while the caller only waits. *B/breaker* is the live heap after registering the breakers less\n")
	p("the live heap before (after a full GC each time), over *n*; *after cycles* is the same once the\n")
	p("deadline heap has reached its steady size.\n\n")
	p("| policy | breakers | ns/transition | ns/expiry | B/breaker | B/breaker after cycles | one cycle |\n")
	p("|---|--:|--:|--:|--:|--:|--:|\n")
	for _, row := range r.scaleRows() {
		cycle := "–"
		if st, ok := r.stat(row.name, "ns/op"); ok {
			cycle = time.Duration(st.median).Round(10 * time.Microsecond).String()
		}
		p("| %s | %s | %s | %s | %s | %s | %s |\n", policyTitle(row.policy), thousands(row.breakers),
			r.cell(row.name, "ns/transition", ns), r.cell(row.name, "ns/expiry", ns),
			r.cell(row.name, "B/breaker", func(v float64) string { return fmt.Sprintf("%.0f", v) }),
			r.cell(row.name, "B/breaker-cycled", func(v float64) string { return fmt.Sprintf("%.0f", v) }),
			cycle)
	}
	p("\n")

	p("## What is measured\n\n")
	p("Each case runs on one goroutine (*serial*) and with `b.RunParallel` on every P (*parallel*),\n")
	p("with `b.ReportAllocs`. Every loop checks each call's result, so that a breaker in the wrong\n")
	p("state fails the benchmark instead of giving a number. The paths:\n\n")
	p("| library | path |\n|---|---|\n")
	for _, lib := range r.libs() {
		path := libPath[lib]
		if path == "" {
			path = "see bench/sidebyside_test.go"
		}
		p("| %s | %s |\n", lib, path)
	}
	p("\n")
	p("The cases:\n\n")
	p("- **closed**: a call that succeeds through a closed breaker.\n")
	p("  - *consecutive*: trips on the 5th failure in a row. fusebox `breaker.Consecutive{Failures: 5}`;\n")
	p("    gobreaker `ReadyToTrip` returning `ConsecutiveFailures >= 5`; failsafe-go\n")
	p("    `WithFailureThreshold(5)`.\n")
	p("  - *failure rate/100*: trips when half of the last 100 calls failed. fusebox\n")
	p("    `breaker.FailureRate{Rate: 0.5, Window: 100}` (no trip before 100 calls); failsafe-go\n")
	p("    `WithFailureThresholdRatio(50, 100)`, also a count-based window of the last 100 executions,\n")
	p("    but one that trips as soon as 50 failed, before 100 were made (its `WithFailureRateThreshold`\n")
	p("    is time-based). gobreaker has no count-based window: its `Counts` cover every call since\n")
	p("    the breaker last changed state (with `Interval` zero, as here, they are never cleared while\n")
	p("    closed), or a time-based rolling window (`Interval` with `BucketPeriod`). Its closest\n")
	p("    equivalent, used here, is `ReadyToTrip` returning `Requests >= 100 && TotalFailures >=\n")
	p("    0.5*Requests`: a failure share of one half over every call since the breaker closed, once\n")
	p("    100 were made. It is not a window of the last 100 calls: it never forgets a call while\n")
	p("    closed, so after 100 successes it takes 100 failures to trip where fusebox and failsafe-go\n")
	p("    take 50 (`bench/policy_test.go` checks this). It is also gobreaker's cheapest\n")
	p("    configuration for a success (no `ReadyToTrip` call, no bucket to roll), so the comparison\n")
	p("    does not flatter fusebox. fusebox's window of a healthy breaker is read-only: a success\n")
	p("    into a full window with no failure writes nothing, which this case measures; a window that\n")
	p("    holds failures costs an atomic write per call.\n")
	p("- **declined (open)**: a call refused by a breaker tripped open by 5 failures. The open\n")
	p("  period is an hour in every library (fusebox `recover.BasicTimeout{Open: time.Hour}`,\n")
	p("  gobreaker `Timeout`, failsafe-go `WithDelay`), and one successful probe closes each\n")
	p("  (gobreaker's `MaxRequests` 1, failsafe-go's `WithSuccessThreshold(1)`).\n")
	p("- **Do(return nil)**: each library's wrapper around a function that returns nil:\n")
	p("  fusebox `Breaker.Do`, gobreaker `Execute`, failsafe-go's executor `Run`.\n")
	p("- **random of 10,000**: a successful call through one of 10,000 closed breakers\n")
	p("  (consecutive policy) picked at random, to show what each library costs once its breaker is\n")
	p("  no longer in the caches. The 65,536 indices are drawn from a fixed seed before the timed\n")
	p("  loop; each parallel goroutine starts at its own place in them.\n\n")
	p("failsafe-go's executor is built once per breaker (`failsafe.With(cb)`) and reused; building it\n")
	p("for every call adds its allocation to each. The scale benchmark trips each breaker with one\n")
	p("call (`Consecutive{Failures: 1}`, `FailureRate{Rate: 0.5, Window: 100, MinCalls: 1}`; the size\n")
	p("of a breaker does not depend on these numbers), and moves time with a mock clock that steps\n")
	p("`Now` without sleeping: the manager handles every deadline due at `Now()` when `Sync` asks.\n")
	p("One untimed cycle runs first, so that the deadline heap has its steady size. Each probe is\n")
	p("released as soon as it is taken, racing the manager as it records the probe's deadline.\n\n")

	if s.tenants != "" {
		p("## Many breakers\n\n")
		p("fusebox's manager and `manager.Group` beside gobreaker and failsafe-go breakers kept in a\n")
		p("`map[string]*CB`, at 1,000 to 1,000,000 breakers (see [many breakers](many-breakers.md)).\n")
		p("`bench/cmd/tenants` measures it, in rounds of its own; this is its saved output\n")
		p("(`bench/tenants.md`), not a measure of this run:\n\n")
		p("%s\n\n", strings.TrimSpace(s.tenants))
	}
	p("## Other benchmarks of the main module\n\n")
	if len(s.extras) == 0 {
		p("Not run this time (`-extras=false`, or the report was written from saved output).\n\n")
	}
	for _, e := range s.extras {
		p("### `%s`\n\n", e.pkg)
		if e.output == "" {
			p("%s\n\n", e.note)
			continue
		}
		p("```\n%s\n```\n\n", e.cmd)
		if e.note != "" {
			p("%s\n\n", e.note)
		}
		p("```\n%s\n```\n\n", e.output)
	}
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n')
}
