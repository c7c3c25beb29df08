package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// part is one measured part of docs/fleet.md: the fleets ("measured") or
// the memory per breaker ("memory"). -doc replaces what lies between the
// part's markers and leaves the rest of the guide as it is.
type part struct {
	name, text string
}

func beginMarker(name string) string {
	return "<!-- fleet:" + name + ":begin (written by bench/cmd/fleet; do not edit by hand) -->"
}

func endMarker(name string) string { return "<!-- fleet:" + name + ":end -->" }

// environment is where the figures were measured.
type environment struct {
	commit    string // of the working tree, with -dirty for changes not committed
	code      string // the last commit that changed what is measured
	goVersion string
	redis     string
	cpu       string
	cores     int
}

func describe(ctx context.Context) environment {
	e := environment{
		commit:    output("git", "describe", "--always", "--dirty", "--abbrev=12"),
		goVersion: runtime.Version(),
		cpu:       cpuModel(),
		cores:     runtime.NumCPU(),
		redis:     "unknown",
	}
	if top := output("git", "rev-parse", "--show-toplevel"); top != "unknown" {
		e.code = output("git", append([]string{"-C", top, "log", "-1", "--format=%h", "--"}, measuredCode...)...)
	}
	if out := output("redis-server", "--version"); out != "unknown" {
		for _, f := range strings.Fields(out) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				e.redis = v
			}
		}
	}
	return e
}

// measuredCode is the folders whose code the figures measure.
var measuredCode = []string{"manager", "store", "internal", "breaker", "recover"}

func output(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if s := strings.TrimSpace(string(out)); err == nil && s != "" {
		return s
	}
	return "unknown"
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// report is the measured part of docs/fleet.md.
type report struct {
	opts    options
	results []result
	memory  []memory
	started time.Time
	elapsed time.Duration
	env     environment
}

func (r report) markdown() string {
	var b strings.Builder
	o := r.opts
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("Measured at fusebox commit `%s` (the code measured, %s, last changed at `%s`), %s, in %v in all:\n\n",
		r.env.commit, strings.Join(measuredCode, ", "), r.env.code, r.started.UTC().Format("2006-01-02 15:04 MST"), r.elapsed.Round(time.Second))
	p("```\ncd bench && %s\n```\n\n", o.command)
	p("| | |\n|---|---|\n")
	p("| machine | %s, %d logical cores, shared with other work |\n", r.env.cpu, r.env.cores)
	p("| Redis | redis-server %s on loopback, started empty for each configuration |\n", r.env.redis)
	p("| Go | %s |\n", r.env.goVersion)
	p("| managers | at most %d to a child process, each with its own go-redis client; `manager.Options{Resync: %s, StoreTimeout: %s}` |\n",
		o.perProcess, orDefault(o.resync, "default"), orDefault(o.timeout, "default"))
	p("| breakers | `manager.Config{Strategy: breaker.Consecutive{Failures: 5}, Store: redisstore.New(client, redisstore.Options{})}`; the tenth a fault script fails with `Recover: recover.BasicTimeout{Open: %v}` |\n", o.open)
	p("| phases | idle %v; %d openings timed; one breaker's service fails for %v; a tenth's fail for %v (each fault measured over %v) |\n\n",
		o.window, o.trips, o.fail, o.fail, o.fail+2*o.open+time.Second)

	p("#### Load on Redis\n\n")
	p("*sent*: commands the managers' clients sent (a pipeline counts each command, a script one), a second, in all and per manager; ")
	p("*run*: commands Redis ran (INFO commandstats, INFO excluded), the commands scripts call inside included; ")
	p("*Redis CPU*: used_cpu_sys + used_cpu_user a second, in %% of one core; *net*: bytes in and out a second; ")
	p("*manager CPU*: the child processes' CPU time a second, per manager, in %% of one core (while a fault runs, the calling goroutines' too).\n\n")
	p("| managers | breakers | phase | sent/s | per manager | run/s | Redis CPU | net in / out | manager CPU | sent, by kind (/s) | run, by command (/s) |\n")
	p("|--:|--:|---|--:|--:|--:|--:|--:|--:|---|---|\n")
	for _, res := range r.results {
		if res.skipped != "" {
			p("| %d | %s | – | %s | | | | | | | |\n", res.managers, num(float64(res.breakers)), res.skipped)
			continue
		}
		for _, ph := range []struct {
			name string
			l    load
		}{{"idle", res.idle}, {"one fails", res.one.load}, {"10% fail", res.tenth.load}} {
			l := ph.l
			p("| %d | %s | %s | %s | %s | %s | %s%% | %s / %s | %s%% | %s | %s |\n",
				res.managers, num(float64(res.breakers)), ph.name,
				num(l.sentTotal()), num(l.sentTotal()/float64(res.managers)), num(l.run),
				num(100*l.cpu), bytes(l.netIn), bytes(l.netOut), num(100*l.managerCPU/float64(res.managers)),
				kinds(l.sent), kinds(l.runBy))
		}
	}

	p("\n#### Openings, trials, registering\n\n")
	p("*opening reaches every other manager*: from the tripping manager's transition to open to the last other manager's, over %d trips, each manager stamping its own transition with the machine's wall clock; ", o.trips)
	p("*trials per period end*: trial calls the whole fleet made at the end of each open period (the fewest and the most; it must be 1), over the period ends of every failing breaker; ")
	p("*before*: calls that reached the failing service before its first trial, per failing breaker (mean, most): the 5 that open it, and those let through by managers the opening had not reached; ")
	p("*leaked*: calls that reached the failing service after its first trial without being trials; ")
	p("*register*: a manager's `Register` of every breaker, until `Sync` returns (median, slowest manager); ")
	p("*Redis memory per manager*: what the idle fleet added to used_memory over the empty server's, per manager (its connections: no breaker has a key yet); ")
	p("*store errors*: failed store calls over the whole run, every manager and breaker, and how many (manager, breaker) pairs were on their fallback at its end.\n\n")
	p("| managers | breakers | processes | opening reaches every other manager: p50 / p99 / max | one fails: period ends, trials per end, before, leaked | 10%% fail: period ends, trials per end, before, leaked | register | Redis memory per manager | store errors |\n")
	p("|--:|--:|--:|---|---|---|---|--:|--:|\n")
	for _, res := range r.results {
		if res.skipped != "" {
			continue
		}
		prop := "– (no other manager)"
		if res.prop.trips > 0 {
			prop = fmt.Sprintf("%s / %s / %s", dur(percentile(res.prop.slowest, 0.5)), dur(percentile(res.prop.slowest, 0.99)), dur(percentile(res.prop.slowest, 1)))
			if res.prop.missing > 0 {
				prop += fmt.Sprintf(" (%d reports missing)", res.prop.missing)
			}
		}
		p("| %d | %s | %d | %s | %s | %s | %s / %s | %s | %s |\n",
			res.managers, num(float64(res.breakers)), res.processes, prop,
			faultCell(res.one), faultCell(res.tenth),
			dur(percentile(res.register, 0.5)), dur(percentile(res.register, 1)), bytes(res.perManager), errorsCell(res.final))
	}
	p("\n#### Store calls of a failing breaker\n\n")
	p("What the managers' clients sent while a fault ran, by kind, over the breakers whose service failed or over their period ends: ")
	p("*failure*: the failure script (a failure in the closed state); *open*: the opening script; *success*: the report that ends a run of failures (a DEL of its count); ")
	p("*lease*: the probe's lease script; *verdict*: the probe's verdict script. ")
	p("Each counts the script's runs (EVALSHA); the first run of a script on a connection's server costs one EVAL more, counted apart as *(load)* in the load table.\n\n")
	p("| managers | breakers | phase | failing breakers | failure / breaker | open / breaker | success / breaker | period ends | lease / end | verdict / end |\n")
	p("|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, res := range r.results {
		if res.skipped != "" {
			continue
		}
		for _, ph := range []struct {
			name string
			f    faultResult
		}{{"one fails", res.one}, {"10% fail", res.tenth}} {
			f := ph.f
			per := func(kind string, n int) string {
				if n == 0 {
					return "–"
				}
				return num(f.load.sent[kind] * f.load.seconds / float64(n))
			}
			p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				res.managers, num(float64(res.breakers)), ph.name, num(float64(f.breakers)),
				per("failure", f.breakers), per("open", f.breakers), per("success", f.breakers),
				num(float64(f.periodEnds)), per("lease", f.periodEnds), per("verdict", f.periodEnds))
		}
	}
	return b.String()
}

func errorsCell(s childStats) string {
	if s.StoreDown == 0 {
		return thousands(int64(s.StoreErrors))
	}
	return fmt.Sprintf("%s (%s on fallback)", thousands(int64(s.StoreErrors)), thousands(int64(s.StoreDown)))
}

// memoryMarkdown is the memory part of docs/fleet.md.
func (r report) memoryMarkdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("Measured at fusebox commit `%s` (the code measured, %s, last changed at `%s`), %s, in %v, with redis-server %s:\n\n",
		r.env.commit, strings.Join(measuredCode, ", "), r.env.code, r.started.UTC().Format("2006-01-02 15:04 MST"), r.elapsed.Round(time.Second), r.env.redis)
	p("```\ncd bench && %s\n```\n\n", r.opts.command)
	p("On a fresh server, one manager with a Resync of an hour registers the breakers and puts three quarters of them in each state in turn, one breaker after another; ")
	p("each figure is used_memory less mem_clients_normal (the clients' buffers) and used_memory_scripts, grown over what it was before, divided by those breakers, with the keys each adds, ")
	p("each reading taken once Redis's memory had stopped changing for 2.5s. ")
	p("*new connections*: how many more connections Redis had by then than before, each of which adds some memory of its own to the figures. ")
	p("What the managers' connections take is in the fleet's tables (*Redis memory per manager*).\n\n")
	p("| breakers | closed, never opened | counting failures | open | closed after an opening | new connections |\n")
	p("|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range r.memory {
		if m.failed != "" {
			p("| %s | failed: %s | | | | |\n", num(float64(m.breakers)), m.failed)
			continue
		}
		p("| %s | %s |", num(float64(m.breakers)), keys(m.keys[memQuiet]))
		for s := memCounted; s < memStates; s++ {
			p(" %s B (%s) |", num(m.bytes[s]), keys(m.keys[s]))
		}
		p(" %s |\n", trimFloat(m.clients))
	}
	return b.String()
}

func faultCell(f faultResult) string {
	if f.tripped == 0 {
		return "no call reached the failing service"
	}
	mean, most := 0.0, 0
	for _, n := range f.before {
		mean += float64(n)
		most = max(most, n)
	}
	mean /= float64(len(f.before))
	trials := fmt.Sprintf("%d", f.trialsMin)
	if f.trialsMax != f.trialsMin {
		trials = fmt.Sprintf("%d–%d", f.trialsMin, f.trialsMax)
	}
	s := fmt.Sprintf("%d ends, %s, %.1f / %d, %d", f.periodEnds, trials, mean, most, f.leaked)
	if f.tripped < f.breakers {
		s += fmt.Sprintf(" (%d of %d breakers reached)", f.tripped, f.breakers)
	}
	if f.notClosed > 0 {
		s += fmt.Sprintf(" (%d not closed at the end)", f.notClosed)
	}
	return s
}

// kinds writes the busiest kinds of a per-second count, at most six.
func kinds(m map[string]float64) string {
	ks := sortedKinds(m)
	var parts []string
	for i, k := range ks {
		if i == 6 {
			parts = append(parts, "…")
			break
		}
		if m[k] < 0.05 {
			break
		}
		parts = append(parts, k+" "+num(m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// keys writes a number of keys per breaker.
func keys(n float64) string {
	if n == 1 {
		return "1 key"
	}
	return trimFloat(n) + " keys"
}

func orDefault(d time.Duration, def string) string {
	if d == 0 {
		return def
	}
	return d.String()
}

// num writes a figure with three significant digits, and thousands
// separators from 1,000.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a < 10:
		return trimFloat(math.Round(v*100) / 100)
	case a < 100:
		return trimFloat(math.Round(v*10) / 10)
	}
	digits := int(math.Floor(math.Log10(math.Abs(v)))) + 1
	scale := math.Pow(10, float64(digits-3))
	return thousands(int64(math.Round(v/scale) * scale))
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var parts []string
	for len(s) > 3 {
		parts = append([]string{s[len(s)-3:]}, parts...)
		s = s[:len(s)-3]
	}
	parts = append([]string{s}, parts...)
	out := strings.Join(parts, ",")
	if neg {
		out = "-" + out
	}
	return out
}

func bytes(v float64) string {
	switch {
	case v >= 1<<20:
		return num(v/(1<<20)) + " MiB"
	case v >= 1<<10:
		return num(v/(1<<10)) + " KiB"
	}
	return num(v) + " B"
}

// dur writes a duration with three significant digits.
func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return num(d.Seconds()) + " s"
	case d >= time.Millisecond:
		return num(float64(d)/float64(time.Millisecond)) + " ms"
	}
	return num(float64(d)/float64(time.Microsecond)) + " µs"
}

// splice writes each part into the file at path, between its markers.
func splice(path string, parts []part) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(old)
	for _, pt := range parts {
		if doc, err = spliced(doc, pt.name, pt.text); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// spliced returns doc with what lies between the markers of part name
// replaced by text.
func spliced(doc, name, text string) (string, error) {
	begin, end := beginMarker(name), endMarker(name)
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q markers", begin, end)
	}
	return doc[:i+len(begin)] + "\n\n" + strings.TrimSpace(text) + "\n\n" + doc[j:], nil
}
