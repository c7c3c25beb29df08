package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sample is go test output for two rounds, in the shape the suite prints.
const sample = `goos: linux
goarch: amd64
pkg: github.com/fusebox-go/fusebox/bench
cpu: Test CPU @ 1.00GHz
BenchmarkBaseline/op=atomic-add-2	1000	        14.0 ns/op
BenchmarkClosed/consecutive/serial/lib=fusebox-2         	1000	        10.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkClosed/consecutive/serial/lib=gobreaker-2       	1000	       200.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkClosed/consecutive/serial/lib=gobreaker-twostep-2	1000	       150.0 ns/op	      48 B/op	       1 allocs/op
BenchmarkClosed/consecutive/serial/lib=failsafe-standalone-2	1000	      40.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkDo/serial/lib=fusebox-2	1000	        30.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkDo/serial/lib=gobreaker-2	1000	       100.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkScale/policy=consecutive/breakers=1000-2 	3	 1000000 ns/op	 400.0 B/breaker	 500.0 ns/transition	 100.0 ns/expiry	 10 B/op	 1 allocs/op
BenchmarkScale/policy=consecutive/breakers=100000-2 	3	 1000000 ns/op	 390.0 B/breaker	 900.0 ns/transition	 100.0 ns/expiry	 10 B/op	 1 allocs/op
PASS
ok  	github.com/fusebox-go/fusebox/bench	1.0s
goos: linux
goarch: amd64
pkg: github.com/fusebox-go/fusebox/bench
cpu: Test CPU @ 1.00GHz
BenchmarkClosed/consecutive/serial/lib=fusebox-2         	1000	        12.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkClosed/consecutive/serial/lib=gobreaker-2       	1000	       220.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkClosed/consecutive/serial/lib=gobreaker-twostep-2	1000	       170.0 ns/op	      48 B/op	       1 allocs/op
BenchmarkClosed/consecutive/serial/lib=failsafe-standalone-2	1000	      44.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkDo/serial/lib=fusebox-2	1000	        20.0 ns/op	       0 B/op	       1 allocs/op
BenchmarkDo/serial/lib=gobreaker-2	1000	       100.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkScale/policy=consecutive/breakers=1000-2 	3	 1000000 ns/op	 400.0 B/breaker	 500.0 ns/transition	 100.0 ns/expiry	 10 B/op	 1 allocs/op
BenchmarkScale/policy=consecutive/breakers=100000-2 	3	 1000000 ns/op	 390.0 B/breaker	 1100.0 ns/transition	 100.0 ns/expiry	 10 B/op	 1 allocs/op
PASS
`

func parsed(t *testing.T, rounds int) *results {
	t.Helper()
	r := newResults()
	in := strings.Repeat(sample, rounds)
	if err := r.parse(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParse(t *testing.T) {
	r := parsed(t, 1)
	if r.cpu != "Test CPU @ 1.00GHz" || r.goos != "linux" || r.goarch != "amd64" || r.procs != 2 {
		t.Errorf("headers: cpu %q goos %q goarch %q procs %d", r.cpu, r.goos, r.goarch, r.procs)
	}
	if len(r.order) != 9 {
		t.Fatalf("read %d benchmarks, want 9: %q", len(r.order), r.order)
	}
	if r.order[1] != "Closed/consecutive/serial/lib=fusebox" {
		t.Errorf("second name %q: the Benchmark prefix and -2 suffix should be gone", r.order[1])
	}
	got := r.samples["Closed/consecutive/serial/lib=fusebox"]["ns/op"]
	if fmt.Sprint(got) != "[10 12]" {
		t.Errorf("fusebox ns/op samples = %v, want [10 12]", got)
	}
	if got := r.samples["Scale/policy=consecutive/breakers=100000"]["ns/transition"]; fmt.Sprint(got) != "[900 1100]" {
		t.Errorf("custom metric samples = %v, want [900 1100]", got)
	}
}

func TestMedianAndSpread(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}, {nil, 0}}
	for _, tt := range tests {
		in := append([]float64(nil), tt.in...)
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if fmt.Sprint(in) != fmt.Sprint(tt.in) {
			t.Errorf("median modified its input: %v became %v", in, tt.in)
		}
	}
	r := parsed(t, 1)
	s, ok := r.stat("Closed/consecutive/serial/lib=fusebox", "ns/op")
	if !ok || s.median != 11 || s.n != 2 || fmt.Sprintf("%.4f", s.spread) != "0.0909" {
		t.Errorf("stat = %+v, %v; want median 11, n 2, spread 1/11", s, ok)
	}
	if _, ok := r.stat("Closed/consecutive/serial/lib=nothing", "ns/op"); ok {
		t.Error("stat of a benchmark that did not run reported ok")
	}
}

func TestGroups(t *testing.T) {
	r := parsed(t, 1)
	gs := r.groups()
	if len(gs) != 2 || gs[0].name != "Closed/consecutive/serial" || gs[1].name != "Do/serial" {
		t.Fatalf("groups = %+v", gs)
	}
	if fmt.Sprint(gs[0].libs) != "[fusebox gobreaker gobreaker-twostep failsafe-standalone]" {
		t.Errorf("libs of %s = %v", gs[0].name, gs[0].libs)
	}
	rows := r.scaleRows()
	if len(rows) != 2 || rows[1].policy != "consecutive" || rows[1].breakers != 100000 {
		t.Errorf("scale rows = %+v", rows)
	}
}

func TestFuseboxOver(t *testing.T) {
	r := parsed(t, 1)
	rt, ok := r.fuseboxOver("Closed/consecutive/serial", gobreakerPaths)
	// fusebox 11 over the faster gobreaker path, the two-step at 160.
	if !ok || rt.to != "gobreaker-twostep" || fmt.Sprintf("%.4f", rt.value) != "0.0688" {
		t.Errorf("ratio to gobreaker = %+v, %v; want 11/160 of gobreaker-twostep", rt, ok)
	}
	rt, ok = r.fuseboxOver("Closed/consecutive/serial", gobreakerExec)
	if !ok || rt.to != "gobreaker" || rt.value != 11.0/210 {
		t.Errorf("ratio to gobreaker Execute = %+v, %v", rt, ok)
	}
	if _, ok := r.fuseboxOver("Declined/serial", gobreakerPaths); ok {
		t.Error("a ratio for a case that did not run")
	}
}

func verdictFor(t *testing.T, vs []verdict, prefix string) verdict {
	t.Helper()
	for _, v := range vs {
		if strings.HasPrefix(v.target, prefix) {
			return v
		}
	}
	t.Fatalf("no target starting %q", prefix)
	return verdict{}
}

func TestTargets(t *testing.T) {
	r := parsed(t, 3) // 6 runs of each
	vs := r.targets()
	check := func(prefix, result string) {
		t.Helper()
		if v := verdictFor(t, vs, prefix); v.result != result {
			t.Errorf("%s: result %q (measured %q), want %q", prefix, v.result, v.measured, result)
		}
	}
	// 11 / 160 = 0.069 <= 0.10.
	check("closed success, consecutive, serial: at most 0.10", "pass")
	// 11 / 42 = 0.26 <= 0.5.
	check("closed success, consecutive, serial: at most 0.50", "pass")
	check("closed success, consecutive, parallel: at most 0.10", notRun)
	// 25 / 100 = 0.25 > 0.15.
	check("Do around return nil, serial", "FAIL")
	// Do/serial allocates once in every other run: median 0.5.
	check("fusebox allocates nothing", "FAIL")
	check("heap per registered breaker, consecutive", "pass")
	check("heap per registered breaker, failure rate", notRun)
	// 1000 / 500 = 2.0: at the limit passes.
	check("time per transition at 100,000 breakers, consecutive", "pass")

	few := parsed(t, 1).targets()
	if v := verdictFor(t, few, "closed success, consecutive, serial: at most 0.10"); !strings.HasPrefix(v.result, "pass (indicative: n=2") {
		t.Errorf("with 2 runs the result should be marked indicative: %q", v.result)
	}
}

func TestChartIsWellFormed(t *testing.T) {
	r := parsed(t, 1)
	svg := chart(r)
	dec := xml.NewDecoder(bytes.NewReader(svg))
	bars := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, svg)
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "rect" {
			for _, a := range el.Attr {
				if a.Name.Local == "height" && a.Value == "11" {
					bars++
				}
			}
		}
	}
	if bars != 6 {
		t.Errorf("the chart has %d bars, want one per library and case: 6", bars)
	}
	for _, want := range []string{"closed, consecutive, serial", "gobreaker-twostep", "10 ns", "100 ns", "1 µs"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("the chart does not show %q", want)
		}
	}
}

func TestReport(t *testing.T) {
	r := parsed(t, 3)
	s := session{
		command: "bash bench/run.sh -count 6", roundCmd: "bench.test -test.bench .", count: 6,
		extras: []extra{
			{pkg: "./replicate/...", cmd: "go test -run '^$' -bench . -benchmem ./replicate/...",
				output: "BenchmarkPut-2   100   5000 ns/op\nPASS"},
			{pkg: "./store/...", note: "No benchmarks in ./store/... yet."},
		},
		tenants: "| at 1,000 breakers | gobreaker |\n|---|--:|\n| one hot breaker | 118 ns |\n",
	}
	md := string(report(r, machine{cpu: "Test CPU", cores: 2, goVer: "go1.26"}, s, "benchmarks.svg"))
	for _, want := range []string{
		"## Machine and command", "| CPU | Test CPU |", "bash bench/run.sh -count 6",
		"| atomic add (`atomic.Uint64.Add`, a LOCK-prefixed instruction on amd64) | 14.0 |",
		"## Targets", "| Do around return nil, serial: at most 0.15 of gobreaker's Execute | 0.250 (of gobreaker) | **FAIL** |",
		"## Side by side", "![ns/op per case and library, log scale](benchmarks.svg)",
		"| closed, consecutive, serial | fusebox | 11.0 | ±9% | 0 | 0 |",
		"| closed, consecutive, serial | 11.0 | 160 (gobreaker-twostep) | 0.069 | 42.0 | 0.262 |",
		"## Scale", "| consecutive | 100,000 | 1000 | 100 | 390 |",
		"### `./replicate/...`", "BenchmarkPut-2   100   5000 ns/op\nPASS",
		"### `./store/...`\n\nNo benchmarks in ./store/... yet.",
		"gobreaker has no count-based window",
		"## Many breakers", "(`bench/tenants.md`), not a measure of this run:\n\n| at 1,000 breakers | gobreaker |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if !strings.HasSuffix(md, "\n") || strings.HasSuffix(md, "\n\n") {
		t.Error("the report should end with exactly one newline")
	}
}

func TestRunFromSavedOutput(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.txt")
	header := "report-command: bash bench/run.sh -count 6\nreport-started: 2026-01-02T03:04:05Z\nreport-load-before: 0.50 0.40 0.30\n"
	if err := os.WriteFile(raw, []byte(header+sample), 0o644); err != nil {
		t.Fatal(err)
	}
	md, svg := filepath.Join(dir, "docs", "benchmarks.md"), filepath.Join(dir, "docs", "benchmarks.svg")
	var log bytes.Buffer
	if err := run([]string{"-from", raw, "-md", md, "-svg", svg, "-main", dir}, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"](benchmarks.svg)",
		"bash bench/run.sh -count 6  # report written later from " + raw,
		"| date | 2026-01-02 03:04:05 UTC",
		"| load average (1, 5, 15 min) | 0.50 0.40 0.30 before",
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the report lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(svg); err != nil {
		t.Errorf("no chart: %v", err)
	}

	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, []byte("PASS\n"), 0o644)
	if err := run([]string{"-from", empty, "-md", md, "-svg", svg}, &log); err == nil {
		t.Error("run with output holding no benchmark succeeded")
	}
	if err := run([]string{"-count", "0"}, &log); err == nil || !strings.Contains(err.Error(), "-count") {
		t.Errorf("run -count 0: err = %v, want one naming -count", err)
	}
}

func TestHasBenchmarks(t *testing.T) {
	dir := t.TempDir()
	if hasBenchmarks(filepath.Join(dir, "missing")) {
		t.Error("a missing folder has benchmarks")
	}
	pkg := filepath.Join(dir, "store", "memory")
	os.MkdirAll(pkg, 0o755)
	os.WriteFile(filepath.Join(pkg, "memory_test.go"), []byte("package memory\n\nfunc TestX(t *testing.T) {}\n"), 0o644)
	if hasBenchmarks(filepath.Join(dir, "store")) {
		t.Error("a folder with tests but no benchmark has benchmarks")
	}
	os.WriteFile(filepath.Join(pkg, "bench_test.go"), []byte("package memory\n\nfunc BenchmarkX(b *testing.B) {}\n"), 0o644)
	if !hasBenchmarks(filepath.Join(dir, "store")) {
		t.Error("a benchmark in a subfolder was not found")
	}
}

func TestFormatting(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[float64]string{0: "1 ns", 1: "10 ns", 3: "1 µs", 5: "100 µs", 6: "1 ms"} {
		if got := decade(d); got != want {
			t.Errorf("decade(%v) = %q, want %q", d, got, want)
		}
	}
	if got := caseTitle("Closed/failurerate/parallel"); got != "closed, failure rate/100, parallel" {
		t.Errorf("caseTitle = %q", got)
	}
	if got := quoteArgs([]string{"-bench", "A|B", "-count", "6"}); strings.Join(got, " ") != "-bench 'A|B' -count 6" {
		t.Errorf("quoteArgs = %q", got)
	}
}

func TestRunExtra(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a module")
	}
	dir := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/extra\n\ngo 1.22\n")
	write("replicate/r_test.go", "package replicate\n\nimport \"testing\"\n\nfunc BenchmarkPut(b *testing.B) {\n\tfor b.Loop() {\n\t}\n}\n")
	write("store/s_test.go", "package store\n\nimport \"testing\"\n\nfunc BenchmarkGet(b *testing.B) { undefined() }\n")
	var log bytes.Buffer

	e := runExtra(dir, "replicate", &log)
	if e.note != "" || !strings.Contains(e.output, "BenchmarkPut") || !strings.Contains(e.output, "ns/op") {
		t.Errorf("replicate: note %q, output:\n%s", e.note, e.output)
	}
	e = runExtra(dir, "store", &log)
	if !strings.Contains(e.note, "failed") || !strings.Contains(e.output, "undefined") {
		t.Errorf("store, which does not compile: note %q, output:\n%s", e.note, e.output)
	}
	e = runExtra(dir, "absent", &log)
	if e.output != "" || !strings.Contains(e.note, "No benchmarks in ./absent/...") {
		t.Errorf("absent: note %q, output %q", e.note, e.output)
	}
}
