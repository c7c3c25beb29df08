// Command report runs fusebox's side-by-side and scale benchmarks several
// times, takes the median of each measure, and writes docs/benchmarks.md and
// docs/benchmarks.svg: the machine, the command, the results of every
// library in every case, fusebox's ratios to the other libraries, the
// targets with a pass or a fail, the scale table, and the benchmarks of the
// main module's replicate and store packages when they exist.
//
// Run it from the bench module (run.sh does):
//
//	go run ./cmd/report [-count 6] [-benchtime 1s] [-bench regexp]
//
// The suite is compiled once and run -count times in full, one sample of
// each benchmark per round, so that a burst of load from another process
// spoils one sample of a few benchmarks rather than every sample of one.
// Every raw line is kept in results/latest.txt, ready for benchstat.
//
// With -from FILE it runs nothing and writes the report from the raw output
// in FILE (the extra sections then say they were not run).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// tenantsPath is where the output of cmd/tenants is kept, in the bench
// module: the report quotes it as it is, since a run at a million
// breakers takes longer than a round of the suite.
const tenantsPath = "tenants.md"

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	count     int
	benchtime string
	bench     string
	mdPath    string
	svgPath   string
	rawPath   string
	mainDir   string
	from      string
	extras    bool
}

// session is what the report says of how it was made.
type session struct {
	command    string // how the report was made, as a user would type it
	roundCmd   string // the command of each round
	count      int
	started    time.Time
	elapsed    time.Duration
	loadBefore string
	loadAfter  string
	extras     []extra
	tenants    string // the saved output of cmd/tenants (tenantsPath), if any
}

// extra is the output of the benchmarks of one package of the main module.
type extra struct {
	pkg    string // ./replicate/...
	cmd    string
	output string
	note   string // why there is no output, or how the command failed
}

func run(args []string, log io.Writer) error {
	var c config
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(log)
	fs.IntVar(&c.count, "count", 6, "rounds of the whole suite: samples per benchmark (benchstat wants at least 6)")
	fs.StringVar(&c.benchtime, "benchtime", "1s", "-benchtime of each benchmark")
	fs.StringVar(&c.bench, "bench", ".", "-bench regexp: which benchmarks")
	fs.StringVar(&c.mdPath, "md", "../docs/benchmarks.md", "the report to write")
	fs.StringVar(&c.svgPath, "svg", "../docs/benchmarks.svg", "the chart to write")
	fs.StringVar(&c.rawPath, "raw", "results/latest.txt", "where to keep the raw output of every round")
	fs.StringVar(&c.mainDir, "main", "..", "the root of the fusebox module, for the replicate and store benchmarks")
	fs.StringVar(&c.from, "from", "", "write the report from this raw output instead of running the benchmarks")
	fs.BoolVar(&c.extras, "extras", true, "run the benchmarks of the main module's replicate and store packages")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.count < 1 {
		return fmt.Errorf("-count must be at least 1, got %d", c.count)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if c.count < 6 {
		fmt.Fprintf(log, "report: -count %d is fewer than the 6 runs benchstat wants; the targets will be marked indicative\n", c.count)
	}

	s := session{command: commandLine(args), started: time.Now().UTC(), loadBefore: loadAverage()}
	res := newResults()
	if c.from != "" {
		raw, err := os.ReadFile(c.from)
		if err != nil {
			return err
		}
		if err := res.parse(bytes.NewReader(raw)); err != nil {
			return err
		}
		s = savedSession(res.meta, c.from)
		c.extras = false
	} else {
		raw, cmd, err := rounds(c, log)
		if err != nil {
			return err
		}
		s.roundCmd = cmd
		if err := res.parse(bytes.NewReader(raw)); err != nil {
			return err
		}
		s.elapsed = time.Since(s.started).Round(time.Second)
		s.loadAfter = loadAverage()
		if err := writeFile(c.rawPath, append(s.header(), raw...)); err != nil {
			return err
		}
		fmt.Fprintf(log, "report: raw output in %s\n", c.rawPath)
	}
	if len(res.order) == 0 {
		return errors.New("no benchmark results found")
	}
	for _, n := range res.samples {
		for _, vs := range n {
			s.count = max(s.count, len(vs))
		}
	}
	if c.extras {
		for _, pkg := range []string{"replicate", "store"} {
			s.extras = append(s.extras, runExtra(c.mainDir, pkg, log))
		}
	}

	if t, err := os.ReadFile(tenantsPath); err == nil {
		s.tenants = string(t)
	}
	m := describe(c.mainDir, res)
	svg := chart(res)
	md := report(res, m, s, relPath(filepath.Dir(c.mdPath), c.svgPath))
	if err := writeFile(c.svgPath, svg); err != nil {
		return err
	}
	if err := writeFile(c.mdPath, md); err != nil {
		return err
	}
	fmt.Fprintf(log, "report: wrote %s and %s\n", c.mdPath, c.svgPath)
	for _, v := range res.targets() {
		fmt.Fprintf(log, "  %-6s %s: %s\n", strings.Fields(v.result)[0], v.target, v.measured)
	}
	return nil
}

// header is what the raw output keeps of the session, as report-KEY: value
// lines, so that a report written later from it (-from) says how the
// numbers were made. benchstat takes such lines as configuration.
func (s session) header() []byte {
	var b bytes.Buffer
	for _, kv := range [][2]string{
		{"command", s.command},
		{"round", s.roundCmd},
		{"started", s.started.Format(time.RFC3339)},
		{"elapsed", s.elapsed.String()},
		{"load-before", s.loadBefore},
		{"load-after", s.loadAfter},
	} {
		fmt.Fprintf(&b, "report-%s: %s\n", kv[0], kv[1])
	}
	return b.Bytes()
}

// savedSession is the session recorded at the top of saved raw output.
func savedSession(meta map[string]string, from string) session {
	s := session{
		command:    meta["command"],
		roundCmd:   meta["round"],
		loadBefore: meta["load-before"],
		loadAfter:  meta["load-after"],
	}
	s.started, _ = time.Parse(time.RFC3339, meta["started"])
	s.elapsed, _ = time.ParseDuration(meta["elapsed"])
	if s.command == "" {
		s.command = "unknown: " + from + " does not say"
	}
	s.command += "  # report written later from " + from
	return s
}

// rounds compiles the suite once and runs it c.count times. It returns
// the output of every round and the command of one round.
func rounds(c config, log io.Writer) ([]byte, string, error) {
	dir, err := os.MkdirTemp("", "fusebox-bench-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bench.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Stdout, build.Stderr = log, log
	if err := build.Run(); err != nil {
		return nil, "", fmt.Errorf("go test -c: %w", err)
	}
	args := []string{
		"-test.run", "^$", "-test.bench", c.bench, "-test.benchmem",
		"-test.count", "1", "-test.benchtime", c.benchtime, "-test.timeout", "60m",
	}
	shown := "bench.test " + strings.Join(quoteArgs(args), " ")
	var all bytes.Buffer
	for i := 1; i <= c.count; i++ {
		t0 := time.Now()
		fmt.Fprintf(log, "report: round %d of %d (load average %s)\n", i, c.count, loadAverage())
		cmd := exec.Command(bin, args...)
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = log
		err := cmd.Run()
		all.Write(out.Bytes())
		if err != nil {
			log.Write(out.Bytes())
			return nil, "", fmt.Errorf("round %d: %w", i, err)
		}
		fmt.Fprintf(log, "report: round %d took %s\n", i, time.Since(t0).Round(time.Second))
	}
	return all.Bytes(), shown, nil
}

// runExtra runs the benchmarks of one package tree of the main module, if
// it exists and has any.
func runExtra(mainDir, pkg string, log io.Writer) extra {
	e := extra{pkg: "./" + pkg + "/..."}
	e.cmd = "go test -run '^$' -bench . -benchmem " + e.pkg
	if !hasBenchmarks(filepath.Join(mainDir, pkg)) {
		e.note = "No benchmarks in " + e.pkg + " yet."
		return e
	}
	fmt.Fprintf(log, "report: %s (in %s)\n", e.cmd, mainDir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", ".", "-benchmem", e.pkg)
	cmd.Dir = mainDir
	out, err := cmd.CombinedOutput()
	e.output = strings.TrimRight(string(out), "\n")
	if err != nil {
		e.note = fmt.Sprintf("The command failed (%v); its output is below as it was.", err)
	}
	return e
}

// hasBenchmarks reports whether a _test.go file under dir declares a
// benchmark.
func hasBenchmarks(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || found {
			return nil
		}
		if d.IsDir() && path != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte("\nfunc Benchmark")) {
				found = true
			}
		}
		return nil
	})
	return found
}

// commandLine is how the report was asked for: run.sh sets
// BENCH_REPORT_COMMAND to its own command line.
func commandLine(args []string) string {
	if c := os.Getenv("BENCH_REPORT_COMMAND"); c != "" {
		return c
	}
	return strings.Join(append([]string{"cd bench && go run ./cmd/report"}, quoteArgs(args)...), " ")
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " $^*?|&;()<>'\"\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// relPath is target as seen from dir, for a link in the report.
func relPath(dir, target string) string {
	if rel, err := filepath.Rel(dir, target); err == nil {
		return filepath.ToSlash(rel)
	}
	return filepath.ToSlash(target)
}
