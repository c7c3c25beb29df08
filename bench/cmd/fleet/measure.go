package main

import (
	"math"
	"sort"
	"time"
)

// What the parent computes from what Redis and the children told it. All
// of it is pure, so that fleet_test.go can check it on made-up readings.

// load is what Redis did over a measured window.
type load struct {
	seconds float64
	// sent is the commands a second the managers' clients sent, by kind
	// (kindOf): a pipeline counts each of its commands, a script one.
	sent map[string]float64
	// run is the commands a second Redis ran (INFO excluded), the
	// commands the scripts call inside included, and runBy the same by
	// command.
	run   float64
	runBy map[string]float64
	// cpu is Redis's CPU seconds a second, system and user: 1 is one core
	// kept busy.
	cpu           float64
	netIn, netOut float64 // bytes a second
	// managerCPU is the children's CPU seconds a second, every process
	// together: the managers', and while a fault runs the callers'.
	managerCPU float64
}

// loadOf is the load between two readings of INFO and of the children's
// counts.
func loadOf(a, b info, sa, sb childStats) load {
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return load{}
	}
	l := load{seconds: secs, sent: map[string]float64{}, runBy: map[string]float64{}}
	for k, v := range sb.Sent {
		if d := v - sa.Sent[k]; d > 0 {
			l.sent[k] = float64(d) / secs
		}
	}
	for k, v := range b.calls {
		if d := v - a.calls[k]; d > 0 && k != "info" {
			l.runBy[k] = float64(d) / secs
		}
	}
	l.run = float64(b.commands()-a.commands()) / secs
	l.cpu = (b.cpu() - a.cpu()) / secs
	l.managerCPU = (sb.CPU - sa.CPU) / secs
	l.netIn = (b.float("total_net_input_bytes") - a.float("total_net_input_bytes")) / secs
	l.netOut = (b.float("total_net_output_bytes") - a.float("total_net_output_bytes")) / secs
	return l
}

// sentTotal is every command a second the managers sent.
func (l load) sentTotal() float64 {
	var n float64
	for _, v := range l.sent {
		n += v
	}
	return n
}

// serviceCall is a call that reached the service while it failed, or a
// trial call (a probe), as a child reported it.
type serviceCall struct {
	breaker int
	probe   bool  // the permit was a probe: a trial call
	ok      bool  // the service answered (it no longer failed)
	at      int64 // when the permit was granted, Unix nanoseconds on the child's clock
}

// faultResult is what a fault script showed.
type faultResult struct {
	breakers int // the breakers whose service failed
	// tripped is how many of them saw calls reach the failing service.
	tripped int
	// periodEnds is how many open periods ended with a trial, over every
	// breaker, and trialsMin, trialsMax the fewest and most trial calls
	// the fleet made at one.
	periodEnds           int
	trialsMin, trialsMax int
	// before has, for each tripped breaker, how many calls that were not
	// trials reached the failing service before its first trial: the
	// calls that opened it, and those let through by processes the
	// opening had not reached yet.
	before []int
	// leaked is how many calls that were not trials reached the failing
	// service after the breaker's first trial: calls an opened fleet let
	// through.
	leaked int
	// notClosed is how many (manager, breaker) pairs of the script were
	// not closed when it ended.
	notClosed int
	load      load
}

// analyse reads the calls of a fault run. The trials of one period end
// are those within gap of its first trial: the open period (BasicTimeout's
// Open) parts two ends, so any gap below it tells them apart.
func analyse(calls []serviceCall, breakers int, gap time.Duration) faultResult {
	r := faultResult{breakers: breakers}
	by := map[int][]serviceCall{}
	for _, c := range calls {
		by[c.breaker] = append(by[c.breaker], c)
	}
	ids := make([]int, 0, len(by))
	for id := range by {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		cs := by[id]
		sort.Slice(cs, func(i, j int) bool { return cs[i].at < cs[j].at })
		r.tripped++
		first := int64(math.MaxInt64)
		var start int64
		trials := 0
		end := func() {
			if trials == 0 {
				return
			}
			r.periodEnds++
			if r.trialsMin == 0 || trials < r.trialsMin {
				r.trialsMin = trials
			}
			r.trialsMax = max(r.trialsMax, trials)
		}
		for _, c := range cs {
			if !c.probe {
				continue
			}
			first = min(first, c.at)
			if trials > 0 && c.at-start <= gap.Nanoseconds() {
				trials++
				continue
			}
			end()
			start, trials = c.at, 1
		}
		end()
		before := 0
		for _, c := range cs {
			switch {
			case c.probe:
			case c.at < first:
				before++
			default:
				r.leaked++
			}
		}
		r.before = append(r.before, before)
	}
	return r
}

// propagation is how long openings took to reach the other managers.
type propagation struct {
	trips int
	// slowest has, for each trip, how long after the tripping manager's
	// transition the last other manager turned open; all has every other
	// manager's delay.
	slowest, all []time.Duration
	// missing counts other managers that did not report the opening
	// within the bound.
	missing int
}

// add records one trip: the tripper's instant and the others'.
func (p *propagation) add(tripper int64, others []int64, missing int) {
	p.trips++
	p.missing += missing
	if len(others) == 0 {
		return
	}
	var slowest time.Duration
	for _, at := range others {
		d := time.Duration(at - tripper)
		p.all = append(p.all, d)
		slowest = max(slowest, d)
	}
	p.slowest = append(p.slowest, slowest)
}

// percentile returns the q-th quantile (0..1) of ds by nearest rank, or 0
// for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// memState is a state whose Redis memory per breaker is measured.
type memState int

const (
	memQuiet   memState = iota // closed, never opened: registered, no call failed
	memCounted                 // closed, counting a failure
	memOpen                    // opened by 5 failures
	memClosed                  // closed again after an opening (by Reset)
	memStates
)

// memory is what breakers in each state add to Redis's memory.
type memory struct {
	breakers int    // registered
	measured int    // put in each state but memQuiet
	failed   string // why it was not measured
	bytes    [memStates]float64
	keys     [memStates]float64 // memQuiet: over every breaker
	// clients is how many more connections Redis had while the states
	// were measured than before: each adds memory of its own.
	clients float64
}

// perBreaker divides what a reading adds to a base reading among n
// breakers: bytes of data memory (dataMemory) and keys.
func perBreaker(base, now info, n int) (bytes, keys float64) {
	if n <= 0 {
		return 0, 0
	}
	return (now.dataMemory() - base.dataMemory()) / float64(n), float64(now.keys()-base.keys()) / float64(n)
}
