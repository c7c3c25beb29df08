package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"sort"
	"strings"
	"time"
)

// compareResult is what one scenario shows, computed from what the
// service and the children reported (analyseScenario).
type compareResult struct {
	// opened says whether any child's breaker opened; before and after
	// count the calls that reached the failing service before the
	// fleet's first opening and from it on (trial calls included).
	opened        bool
	before, after int
	// lateOpens is the openings in any process more than half an open
	// period after the service recovered, when no call failed any more.
	lateOpens int
	// periodEnds is how many period ends had trial calls, across the
	// fleet: the trials within half an open period of a period end's
	// first are that end's. trialsMean, trialsMin and trialsMax are the
	// trial calls per end.
	periodEnds           int
	trialsMean           float64
	trialsMin, trialsMax int
	// perSecond is the calls the service saw in each second after it
	// recovered; offered is what the fleet asks for in a second.
	perSecond []int
	offered   float64
	// goodTrial is how long after the service recovered the first trial
	// call that it answered began (-1: none did), and halfBack how long
	// after it the first 50ms began in which the service saw at least
	// half as many calls as in 50ms of the healthy window (-1: never).
	goodTrial, halfBack time.Duration
	// sentPerCall and ranPerCall are the Redis commands per call through
	// a breaker in the healthy window: what the breakers' clients sent,
	// and what Redis ran (the commands scripts call inside included).
	sentPerCall, ranPerCall float64
	// The healthy calls: through the breaker, direct, and the breaker's
	// own part of a call through it, at p50 and p99.
	through, direct, own [2]time.Duration
	timed                int // healthy calls timed
}

// analyseScenario reads a scenario's reports.
func analyseScenario(s scenario) compareResult {
	var r compareResult
	first := int64(math.MaxInt64)
	for _, at := range s.opens {
		first = min(first, at)
	}
	r.opened = len(s.opens) > 0
	for _, at := range s.opens {
		if at > s.failUntil+s.open.Nanoseconds()/2 {
			r.lateOpens++
		}
	}
	for _, a := range s.arrivals {
		if !a.failed {
			continue
		}
		if a.at < first {
			r.before++
		} else {
			r.after++
		}
	}

	trials := append([]trialCall(nil), s.trials...)
	sort.Slice(trials, func(i, j int) bool { return trials[i].at < trials[j].at })
	gap := s.open.Nanoseconds() / 2
	var start int64
	n, total := 0, 0
	end := func() {
		if n == 0 {
			return
		}
		r.periodEnds++
		total += n
		if r.trialsMin == 0 || n < r.trialsMin {
			r.trialsMin = n
		}
		r.trialsMax = max(r.trialsMax, n)
	}
	for _, t := range trials {
		if n > 0 && t.at-start <= gap {
			n++
			continue
		}
		end()
		start, n = t.at, 1
	}
	end()
	if r.periodEnds > 0 {
		r.trialsMean = float64(total) / float64(r.periodEnds)
	}

	seconds := int(s.after / time.Second)
	r.perSecond = make([]int, seconds)
	for _, a := range s.arrivals {
		if d := a.at - s.failUntil; d >= 0 && d < int64(seconds)*int64(time.Second) {
			r.perSecond[d/int64(time.Second)]++
		}
	}
	r.goodTrial, r.halfBack = -1, -1
	for _, t := range trials {
		if t.ok && t.at >= s.failUntil {
			r.goodTrial = time.Duration(t.at - s.failUntil)
			break
		}
	}
	if s.windowCalls > 0 && s.window > 0 {
		half := float64(s.windowCalls) * float64(chartBucket) / float64(s.window) / 2
		for i, c := range timeline(s.arrivals, s.failUntil, s.failUntil+s.after.Nanoseconds(), chartBucket) {
			if float64(c) >= half {
				r.halfBack = time.Duration(i) * chartBucket
				break
			}
		}
	}
	if s.pace > 0 {
		r.offered = float64(s.processes) * float64(time.Second) / float64(s.pace)
	}

	if s.windowCalls > 0 {
		r.sentPerCall = float64(s.stats.Sent) / float64(s.windowCalls)
		r.ranPerCall = float64(s.ran) / float64(s.windowCalls)
	}
	ds := func(ns []int64) [2]time.Duration {
		d := make([]time.Duration, len(ns))
		for i, v := range ns {
			d[i] = time.Duration(v)
		}
		return [2]time.Duration{percentile(d, 0.5), percentile(d, 0.99)}
	}
	r.through, r.direct, r.own = ds(s.stats.Through), ds(s.stats.Direct), ds(s.stats.Own)
	r.timed = len(s.stats.Through)
	return r
}

// timeline counts the calls the service saw in buckets of width, from
// from to to (Unix nanoseconds).
func timeline(arrivals []arrival, from, to int64, width time.Duration) []int {
	w := width.Nanoseconds()
	if w <= 0 || to <= from {
		return nil
	}
	out := make([]int, (to-from+w-1)/w)
	for _, a := range arrivals {
		if a.at >= from && a.at < to {
			out[(a.at-from)/w]++
		}
	}
	return out
}

// compareReport is the side-by-side part of docs/fleet.md and its chart.
type compareReport struct {
	opts    compareOptions
	runs    []scenario
	env     environment
	started time.Time
	elapsed time.Duration
	// loadBefore and loadAfter are the machine's load averages
	// (/proc/loadavg), empty where it has none.
	loadBefore, loadAfter string
}

// loadAverage reads the 1, 5 and 15 minute load averages, or "".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], ", ")
}

// compareDescription says what each breaker is, as the table's second
// column.
var compareDescription = map[string]string{
	libFusebox:       "`manager.Config` without a Store, per process",
	libFuseboxShared: "`manager.Config{Store: redisstore.New(client, redisstore.Options{})}`",
	libFuseboxSlow:   "the same, with `SlowStart: 5 * time.Second`: the fleet's traffic comes back over 5s",
	libGobreaker:     "`gobreaker.NewCircuitBreaker`, per process",
	libGobreakerDist: "`gobreaker.NewDistributedCircuitBreaker` on a Redis `SharedDataStore`",
	libFailsafe:      "`circuitbreaker.NewBuilder` run by `failsafe.With(cb)`, per process",
}

func (r compareReport) markdown() string {
	var b strings.Builder
	o := r.opts
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("Measured at fusebox commit `%s` (the code measured, %s, last changed at `%s`), %s, in %v in all, every breaker in the same run:\n\n",
		r.env.commit, strings.Join(measuredCode, ", "), r.env.code, r.started.UTC().Format("2006-01-02 15:04 MST"), r.elapsed.Round(time.Second))
	p("```\ncd bench && %s\n```\n\n", o.command)
	p("| | |\n|---|---|\n")
	p("| machine | %s, %d logical cores, shared with other work; the service, the children and Redis on it |\n", r.env.cpu, r.env.cores)
	p("| Go | %s |\n", r.env.goVersion)
	p("| Redis | redis-server %s on loopback, started empty for each shared breaker's run |\n", r.env.redis)
	p("| the service | HTTP on loopback, in the parent process; each child calls it once every %v through its breaker, one call at a time |\n", o.pace)
	p("| every breaker | 5 failures in a row open it for %v; then one trial call closes it or opens it again |\n", o.open)
	p("| each run | %v healthy, then %v measured healthy (with a direct call beside each call through the breaker), then the service fails for %v, then %v more |\n\n",
		o.warm, o.healthy, o.fail, o.after)
	p("*reached the failing service*: calls through a breaker that the service answered while it failed, before the first opening in any process and from it on, trial calls included; ")
	p("*trial calls per period end*: trial calls (in the half-open state) across the fleet, those within half an open period of each other counted as one period end's: the mean, the fewest and most, and how many period ends; ")
	p("*each second after recovery*: calls through a breaker that the service saw in each of the first %d seconds after it recovered (the fleet asks for the figure in the header); ", int(o.after/time.Second))
	p("*back after recovery*: how long after the service recovered the first trial call it answered began, and the first 50ms began in which the service saw at least half as many calls through the breakers as in 50ms of the healthy window; ")
	p("*Redis commands per healthy call*: commands the breakers' Redis clients sent in the healthy window, per call through a breaker, and in brackets those Redis ran (INFO commandstats, the commands scripts call inside included); ")
	p("*store errors*: store calls that failed (fusebox: `Stats().StoreErrors`; the gobreaker store: an error of the breaker's call that was neither the service's nor a refusal), over the whole run, and those of them before the healthy window, while the children started; ")
	p("*added latency*: the breaker's own part of a healthy call through it, at p50 and p99: the call through the breaker less the time inside the service call it wraps, which is what the same call made directly takes; ")
	p("*a healthy call*: p50 / p99 of the calls through the breaker, and of the direct calls made beside them (each child alternates which goes first), on a machine whose other work shows in the p99s.\n\n")
	if r.loadBefore != "" {
		p("The machine's load average (1, 5, 15 minutes) was %s before the run and %s after it.\n\n", r.loadBefore, r.loadAfter)
	}
	for _, n := range o.processes {
		offered := float64(n) * float64(time.Second) / float64(o.pace)
		p("**%d processes** (the fleet asks for %s calls a second):\n\n", n, num(offered))
		p("| breaker | reached the failing service: before / after the first opening | trial calls per period end: mean (fewest–most), period ends | each second after recovery: 1st, 2nd, … | back after recovery: a good trial, half the calls | Redis commands per healthy call: sent (run) | added latency p50 / p99 | a healthy call p50 / p99: through the breaker; direct |\n")
		p("|---|--:|---|---|---|--:|---|---|\n")
		for _, s := range r.runs {
			if s.processes != n {
				continue
			}
			if s.failed != "" {
				p("| %s | failed: %s | | | | | | |\n", s.lib, strings.ReplaceAll(s.failed, "|", "/"))
				continue
			}
			res := analyseScenario(s)
			reached := fmt.Sprintf("%s / – (no breaker opened)", thousands(int64(res.before)))
			if res.opened {
				reached = fmt.Sprintf("%s / **%s**", thousands(int64(res.before)), thousands(int64(res.after)))
			}
			trials := "none"
			if res.periodEnds > 0 {
				trials = fmt.Sprintf("**%s** (%d–%d), %d ends", num(res.trialsMean), res.trialsMin, res.trialsMax, res.periodEnds)
			}
			secs := make([]string, len(res.perSecond))
			for i, c := range res.perSecond {
				secs[i] = thousands(int64(c))
			}
			cmds := "–"
			if libShared(s.lib) {
				cmds = fmt.Sprintf("%s (%s)", num(res.sentPerCall), num(res.ranPerCall))
			}
			added, direct := "not measured", "not measured"
			if res.timed > 0 {
				added = fmt.Sprintf("**%s** / **%s**", dur(res.own[0]), dur(res.own[1]))
				direct = fmt.Sprintf("%s / %s; %s / %s", dur(res.through[0]), dur(res.through[1]), dur(res.direct[0]), dur(res.direct[1]))
			}
			name := s.lib
			if s.stats.StoreErrors > 0 {
				name += fmt.Sprintf(" (%s store errors, %s of them before the healthy window)", thousands(s.stats.StoreErrors), thousands(s.stats.StoreErrorsEarly))
			}
			if res.lateOpens > 0 {
				name += fmt.Sprintf(" (%d openings after the recovery)", res.lateOpens)
			}
			back := func(d time.Duration) string {
				if d < 0 {
					return "never"
				}
				return dur(d)
			}
			p("| %s | %s | %s | %s | %s, %s | %s | %s | %s |\n", name, reached, trials, strings.Join(secs, ", "), back(res.goodTrial), back(res.halfBack), cmds, added, direct)
		}
		p("\n")
	}
	p("The breakers, as each child builds them:\n\n")
	p("| breaker | built with |\n|---|---|\n")
	for _, lib := range o.libs {
		p("| %s | %s |\n", lib, compareDescription[lib])
	}
	if o.svg != "" {
		p("\n![Calls through a breaker that reached the service, every 50 ms, for each breaker](%s)\n", filepathBase(o.svg))
	}
	return b.String()
}

func filepathBase(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// compareStyle is each breaker's line in the chart: a hue per library,
// the shared breakers solid, the per-process ones dashed.
var compareStyle = map[string]struct{ color, dash string }{
	libFusebox:       {"#1b9e77", "6,3"},
	libFuseboxShared: {"#1b9e77", ""},
	libFuseboxSlow:   {"#66a61e", ""},
	libGobreaker:     {"#d95f02", "6,3"},
	libGobreakerDist: {"#d95f02", ""},
	libFailsafe:      {"#6a51a3", "2,2"},
}

// chartBucket is the width of the chart's buckets.
const chartBucket = 50 * time.Millisecond

// chart draws, for each number of processes, the calls through a breaker
// that the service saw in each 50 ms, one line a breaker, from half a
// second before the service failed to the end of the run, on a log scale
// (log10 of 1 + calls, so that no call is the axis).
func (r compareReport) chart() []byte {
	const (
		width  = 980
		left   = 70
		right  = 20
		panelH = 260
		gapH   = 60
		top    = 70
	)
	o := r.opts
	lead := 500 * time.Millisecond
	span := lead + o.fail + o.after
	nb := int(span / chartBucket)
	plotW := float64(width - left - right)
	x := func(i float64) float64 { return left + i/float64(nb)*plotW }

	// The scale: up to the largest bucket of any run.
	peak := 1
	lines := map[int]map[string][]int{}
	for _, s := range r.runs {
		if s.failed != "" {
			continue
		}
		tl := timeline(s.arrivals, s.failFrom-lead.Nanoseconds(), s.failFrom-lead.Nanoseconds()+int64(nb)*chartBucket.Nanoseconds(), chartBucket)
		if lines[s.processes] == nil {
			lines[s.processes] = map[string][]int{}
		}
		lines[s.processes][s.lib] = tl
		for _, v := range tl {
			peak = max(peak, v)
		}
	}
	decades := math.Ceil(math.Log10(float64(peak + 1)))
	height := top + len(o.processes)*(panelH+gapH) + 10

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="10" y="22" font-size="15" font-weight="bold">Calls reaching the service every %v, each process calling every %v (log scale)</text>`+"\n", chartBucket, o.pace)
	lx := 10.0
	for _, lib := range o.libs {
		st := compareStyle[lib]
		p(`<line x1="%.0f" y1="42" x2="%.0f" y2="42" stroke="%s" stroke-width="2.5" stroke-dasharray="%s"/>`, lx, lx+28, st.color, st.dash)
		p(`<text x="%.0f" y="46">%s</text>`+"\n", lx+34, html.EscapeString(lib))
		lx += 34 + 7.2*float64(len(lib)) + 24
	}
	for pi, n := range o.processes {
		y0 := float64(top + pi*(panelH+gapH) + 20)
		y := func(v int) float64 {
			return y0 + panelH - math.Log10(float64(v+1))/decades*panelH
		}
		p(`<text x="%d" y="%.0f" font-weight="bold">%d processes</text>`+"\n", left, y0-8, n)
		// The failure, shaded.
		fx0, fx1 := x(float64(lead/chartBucket)), x(float64((lead+o.fail)/chartBucket))
		p(`<rect x="%.1f" y="%.0f" width="%.1f" height="%d" fill="#fde0dd"/>`+"\n", fx0, y0, fx1-fx0, panelH)
		p(`<text x="%.1f" y="%.0f" fill="#a50f15" text-anchor="middle">the service fails</text>`+"\n", (fx0+fx1)/2, y0+14)
		// The axes and their ticks.
		p(`<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#444"/>`+"\n", left, y0, left, y0+panelH)
		p(`<line x1="%d" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#444"/>`+"\n", left, y0+panelH, float64(width-right), y0+panelH)
		ticks := []int{0}
		for d := 0.0; d <= decades; d++ {
			ticks = append(ticks, int(math.Pow(10, d)))
		}
		for _, v := range ticks {
			yy := y(v)
			p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/>`, left, yy, width-right, yy)
			p(`<text x="%d" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", left-6, yy+4, thousands(int64(v)))
		}
		for t := -lead; t <= o.fail+o.after; t += time.Second / 2 {
			if t%time.Second != 0 && t != -lead {
				continue
			}
			xx := x(float64((t + lead) / chartBucket))
			p(`<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#444"/>`, xx, y0+panelH, xx, y0+panelH+4)
			p(`<text x="%.1f" y="%.0f" text-anchor="middle" fill="#444">%s s</text>`+"\n", xx, y0+panelH+17, trimFloat(t.Seconds()))
		}
		p(`<text x="%.0f" y="%.0f" text-anchor="middle" fill="#444">time since the service began to fail</text>`+"\n", left+plotW/2, y0+panelH+33)
		p(`<text x="14" y="%.0f" transform="rotate(-90 14 %.0f)" text-anchor="middle" fill="#444">calls / %v</text>`+"\n", y0+panelH/2, y0+panelH/2, chartBucket)
		for _, lib := range o.libs {
			tl, ok := lines[n][lib]
			if !ok {
				continue
			}
			st := compareStyle[lib]
			var pts []string
			for i, v := range tl {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(i)+0.5), y(v)))
			}
			p(`<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s" stroke-opacity="0.85" points="%s"/>`+"\n", st.color, st.dash, strings.Join(pts, " "))
		}
	}
	p("</svg>\n")
	return []byte(b.String())
}
