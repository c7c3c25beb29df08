package main

import (
	"fmt"
	"slices"
	"strings"
)

// minRuns is how many runs a median needs before a target is judged.
const minRuns = 5

// Library names, as in the benchmarks' lib= keys.
const (
	libFusebox          = "fusebox"
	libGobreaker        = "gobreaker"
	libGobreakerTwoStep = "gobreaker-twostep"
	libFailsafeCB       = "failsafe-standalone"
)

// ratio is fusebox's median ns/op over another library's in one case.
type ratio struct {
	of, to string // the libraries
	value  float64
	n      int // the fewer samples of the two
}

// The references of the ratios: gobreaker's faster path, gobreaker's
// Execute alone (the wrapper, for the Do case), and failsafe-go's
// standalone path.
var (
	gobreakerPaths = []string{libGobreaker, libGobreakerTwoStep}
	gobreakerExec  = []string{libGobreaker}
	failsafeCB     = []string{libFailsafeCB}
)

// fuseboxOver returns fusebox's ns/op over that of the fastest of refs in
// case g.
func (r *results) fuseboxOver(g string, refs []string) (ratio, bool) {
	fb, ok := r.stat(g+"/lib="+libFusebox, "ns/op")
	if !ok {
		return ratio{}, false
	}
	best, bestLib := stat{}, ""
	for _, gr := range r.groups() {
		if gr.name != g {
			continue
		}
		for _, lib := range gr.libs {
			if !slices.Contains(refs, lib) {
				continue
			}
			s, ok := r.stat(g+"/lib="+lib, "ns/op")
			if ok && s.median > 0 && (bestLib == "" || s.median < best.median) {
				best, bestLib = s, lib
			}
		}
	}
	if bestLib == "" {
		return ratio{}, false
	}
	return ratio{of: libFusebox, to: bestLib, value: fb.median / best.median, n: min(fb.n, best.n)}, true
}

// verdict is one target's line in the report.
type verdict struct {
	target   string
	measured string
	result   string
}

func judge(pass bool, n int) string {
	res := "FAIL"
	if pass {
		res = "pass"
	}
	if n < minRuns {
		res += fmt.Sprintf(" (indicative: n=%d, fewer than %d runs)", n, minRuns)
	}
	return res
}

const notRun = "n/a: not measured in this run"

// targets checks the targets the benchmarks are held to.
func (r *results) targets() []verdict {
	var out []verdict
	ratioTarget := func(g string, refs []string, limit float64, what string) {
		v := verdict{target: fmt.Sprintf("%s: at most %.2f of %s", what, limit, refName(refs))}
		if rt, ok := r.fuseboxOver(g, refs); ok {
			v.measured = fmt.Sprintf("%.3f (of %s)", rt.value, rt.to)
			v.result = judge(rt.value <= limit, rt.n)
		} else {
			v.measured, v.result = "", notRun
		}
		out = append(out, v)
	}
	for _, mode := range []string{"serial", "parallel"} {
		ratioTarget("Closed/consecutive/"+mode, gobreakerPaths, 0.10, "closed success, consecutive, "+mode)
		ratioTarget("Closed/consecutive/"+mode, failsafeCB, 0.5, "closed success, consecutive, "+mode)
	}
	ratioTarget("Closed/failurerate/parallel", gobreakerPaths, 0.25, "closed success, failure rate over 100, parallel")
	for _, mode := range []string{"serial", "parallel"} {
		ratioTarget("Declined/"+mode, gobreakerPaths, 0.10, "declined by an open breaker, "+mode)
	}
	for _, mode := range []string{"serial", "parallel"} {
		ratioTarget("Do/"+mode, gobreakerExec, 0.15, "Do around return nil, "+mode)
	}

	// No allocation on any hot path.
	allocs := verdict{target: "fusebox allocates nothing: 0 allocs/op in every side-by-side case"}
	var bad []string
	checked, n := 0, 1<<30
	for _, g := range r.groups() {
		s, ok := r.stat(g.name+"/lib="+libFusebox, "allocs/op")
		if !ok {
			continue
		}
		checked++
		n = min(n, s.n)
		if s.median != 0 {
			bad = append(bad, fmt.Sprintf("%s: %g", g.name, s.median))
		}
	}
	switch {
	case checked == 0:
		allocs.result = notRun
	case len(bad) == 0:
		allocs.measured = fmt.Sprintf("0 in all %d cases", checked)
		allocs.result = judge(true, n)
	default:
		allocs.measured = strings.Join(bad, "; ")
		allocs.result = judge(false, n)
	}
	out = append(out, allocs)

	// Heap per breaker, at every size measured.
	for _, t := range []struct {
		policy string
		limit  float64
	}{{"consecutive", 512}, {"failurerate", 1024}} {
		v := verdict{target: fmt.Sprintf("heap per registered breaker, %s: at most %g B", policyTitle(t.policy), t.limit)}
		worst, worstAt, n := -1.0, 0, 1<<30
		for _, row := range r.scaleRows() {
			if row.policy != t.policy {
				continue
			}
			if s, ok := r.stat(row.name, "B/breaker"); ok {
				n = min(n, s.n)
				if s.median > worst {
					worst, worstAt = s.median, row.breakers
				}
			}
		}
		if worst < 0 {
			v.result = notRun
		} else {
			v.measured = fmt.Sprintf("%.0f B (the most, at %s breakers)", worst, thousands(worstAt))
			v.result = judge(worst <= t.limit, n)
		}
		out = append(out, v)
	}

	// The manager scales: time per transition at 100,000 breakers at most
	// twice that at 1,000.
	for _, policy := range []string{"consecutive", "failurerate"} {
		v := verdict{target: fmt.Sprintf("time per transition at 100,000 breakers, %s: at most 2x that at 1,000", policyTitle(policy))}
		small, ok1 := r.stat(fmt.Sprintf("Scale/policy=%s/breakers=1000", policy), "ns/transition")
		large, ok2 := r.stat(fmt.Sprintf("Scale/policy=%s/breakers=100000", policy), "ns/transition")
		if !ok1 || !ok2 || small.median == 0 {
			v.result = notRun
		} else {
			x := large.median / small.median
			v.measured = fmt.Sprintf("%.2fx (%.0f ns at 100,000; %.0f ns at 1,000)", x, large.median, small.median)
			v.result = judge(x <= 2, min(small.n, large.n))
		}
		out = append(out, v)
	}
	return out
}

// refName names what a ratio target compares against.
func refName(refs []string) string {
	switch {
	case slices.Equal(refs, gobreakerPaths):
		return "gobreaker's ns/op (the faster of Execute and the two-step path)"
	case slices.Equal(refs, gobreakerExec):
		return "gobreaker's Execute"
	case slices.Equal(refs, failsafeCB):
		return "failsafe-go's standalone path"
	}
	return strings.Join(refs, " or ")
}

func policyTitle(p string) string {
	if p == "failurerate" {
		return "failure rate over 100 calls"
	}
	return p
}

// thousands formats n with commas: 100000 is "100,000".
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
