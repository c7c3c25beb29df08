package main

import (
	"bufio"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// results holds every sample of every benchmark read from go test output,
// with the header lines that describe the machine.
type results struct {
	cpu, goos, goarch, pkg string
	procs                  int               // GOMAXPROCS, from the -N suffix of the names
	meta                   map[string]string // report-KEY: value lines, which the report writes at the top of the raw output
	order                  []string
	samples                map[string]map[string][]float64 // name, unit: one value per run
}

func newResults() *results {
	return &results{samples: make(map[string]map[string][]float64), meta: make(map[string]string)}
}

// benchLine is one result line: the name with its -GOMAXPROCS suffix, the
// iterations, then value and unit pairs.
var benchLine = regexp.MustCompile(`^Benchmark(\S+)\s+(\d+)\s+(.+)$`)

var procsSuffix = regexp.MustCompile(`-(\d+)$`)

// parse reads go test -bench output and adds its samples. Lines that are
// not benchmark results or known headers are skipped, so the output of
// several runs, with their PASS and ok lines, can be read in one go.
func (r *results) parse(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "Benchmark") {
			switch k {
			case "cpu":
				r.cpu = v
			case "goos":
				r.goos = v
			case "goarch":
				r.goarch = v
			case "pkg":
				r.pkg = v
			default:
				if key, ok := strings.CutPrefix(k, "report-"); ok {
					r.meta[key] = v
				}
			}
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[1]
		if p := procsSuffix.FindStringSubmatch(name); p != nil {
			name = strings.TrimSuffix(name, p[0])
			r.procs, _ = strconv.Atoi(p[1])
		}
		fields := strings.Fields(m[3])
		if len(fields)%2 != 0 {
			continue
		}
		units, ok := r.samples[name]
		if !ok {
			units = make(map[string][]float64)
			r.samples[name] = units
			r.order = append(r.order, name)
		}
		for i := 0; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			units[fields[i+1]] = append(units[fields[i+1]], v)
		}
	}
	return sc.Err()
}

// stat is the median of a benchmark's samples in one unit, how far the
// samples stray from it, and how many there are.
type stat struct {
	median float64
	spread float64 // the largest distance of a sample from the median, as a fraction of it
	n      int
}

func (r *results) stat(name, unit string) (stat, bool) {
	vs := r.samples[name][unit]
	if len(vs) == 0 {
		return stat{}, false
	}
	med := median(vs)
	var dev float64
	for _, v := range vs {
		dev = max(dev, abs(v-med))
	}
	s := stat{median: med, n: len(vs)}
	if med != 0 {
		s.spread = dev / med
	}
	return s, true
}

// median returns the median of vs, the mean of the middle two for an even
// count. vs is not modified.
func median(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// group is one side-by-side case: the benchmarks named prefix/lib=name.
type group struct {
	name string   // for example Closed/consecutive/serial
	libs []string // in the order they ran
}

// groups returns the side-by-side cases, in the order they ran.
func (r *results) groups() []group {
	var gs []group
	index := make(map[string]int)
	for _, name := range r.order {
		prefix, lib, ok := strings.Cut(name, "/lib=")
		if !ok {
			continue
		}
		i, seen := index[prefix]
		if !seen {
			i = len(gs)
			index[prefix] = i
			gs = append(gs, group{name: prefix})
		}
		gs[i].libs = append(gs[i].libs, lib)
	}
	return gs
}

// libs returns every library of the side-by-side cases, in the order they
// first ran.
func (r *results) libs() []string {
	var out []string
	seen := make(map[string]bool)
	for _, g := range r.groups() {
		for _, l := range g.libs {
			if !seen[l] {
				seen[l] = true
				out = append(out, l)
			}
		}
	}
	return out
}

// scaleRow is one BenchmarkScale result: Scale/policy=P/breakers=N.
type scaleRow struct {
	name     string
	policy   string
	breakers int
}

func (r *results) scaleRows() []scaleRow {
	var rows []scaleRow
	for _, name := range r.order {
		rest, ok := strings.CutPrefix(name, "Scale/")
		if !ok {
			continue
		}
		row := scaleRow{name: name}
		for _, part := range strings.Split(rest, "/") {
			k, v, _ := strings.Cut(part, "=")
			switch k {
			case "policy":
				row.policy = v
			case "breakers":
				row.breakers, _ = strconv.Atoi(v)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// baseline is one BenchmarkBaseline result: Baseline/op=NAME.
type baseline struct{ name, op string }

func (r *results) baselines() []baseline {
	var out []baseline
	for _, name := range r.order {
		if op, ok := strings.CutPrefix(name, "Baseline/op="); ok {
			out = append(out, baseline{name: name, op: op})
		}
	}
	return out
}
