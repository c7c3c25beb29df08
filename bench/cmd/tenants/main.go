// Command tenants measures many breakers side by side: fusebox's manager,
// and sony/gobreaker (v2) and failsafe-go breakers kept in a
// map[string]*CB, as their users write it. At each size (1,000, 100,000
// and 1,000,000 breakers by default), with a Consecutive{Failures: 5}
// policy and 16-byte names, it measures:
//
//   - the heap each breaker takes, its registry included (the HeapAlloc
//     after a GC, less the one before, over the count);
//   - registering one: New and a map insert, Manager.Register, or
//     Group.Get of a new key (the "fusebox group" column);
//   - a successful call on a breaker picked at random, by handle and
//     looked up by name (a map lookup, Manager.Breaker, or Group.Get of a
//     key that exists);
//   - a successful call on one hot breaker;
//   - tripping 10 % of them, per trip (with Manager.Sync after the last);
//   - the heap each opened breaker adds;
//   - removing one (a map delete, Manager.Remove).
//
// Each round measures every library at every size, in an order that
// rotates from one round to the next; the table gives each measure's
// median over the rounds and fusebox's ratio to gobreaker, the median of
// the ratios within a round:
//
//	go run ./cmd/tenants [-n 1000,100000,1000000] [-rounds 3] [-calls 1000000]
//
// Its output, saved as tenants.md in the bench module, is quoted by the
// report (cmd/report) in docs/benchmarks.md:
//
//	go run ./cmd/tenants -rounds 3 > tenants.md
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// measure indexes the measures of a run.
type measure int

const (
	heapPer measure = iota
	register
	callHandle
	callName
	hot
	tripEach
	heapOpened
	removeOne
	measures
)

var measureNames = [measures]string{
	heapPer:    "heap per breaker, registry included",
	register:   "Register (New + map insert), each",
	callHandle: "a call on a random breaker, by handle",
	callName:   "the same, looked up by name",
	hot:        "one hot breaker",
	tripEach:   "trip 10 % of them (with Sync), per trip",
	heapOpened: "heap added by each opened breaker",
	removeOne:  "Remove one (against a map delete)",
}

// bytesMeasure reports whether m is a number of bytes, not nanoseconds.
func bytesMeasure(m measure) bool { return m == heapPer || m == heapOpened }

// result is one library's measures at one size in one round.
type result [measures]float64

// lib is one library as its users keep many breakers of it.
type lib interface {
	// register makes a breaker for each name and keeps it in the
	// library's registry.
	register(names []string)
	// handles fills the handles the by-handle calls use, in name order.
	handles(names []string)
	// callHandles makes one successful call on the breaker of each index.
	callHandles(idx []uint32)
	// callNames makes one successful call on the breaker of each index,
	// looked up by its name.
	callNames(names []string, idx []uint32)
	// hot makes n successful calls on the first breaker.
	hot(n int)
	// trip trips the breakers of the indices open, and waits for the
	// library to have handled it.
	trip(idx []int)
	// remove removes the breakers of the names.
	remove(names []string)
	// close frees what the library holds.
	close()
}

type libMaker struct {
	name string
	make func() lib
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tenants:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("tenants", flag.ContinueOnError)
	sizes := fs.String("n", "1000,100000,1000000", "the numbers of breakers, comma-separated")
	rounds := fs.Int("rounds", 3, "rounds, each measuring every library at every size")
	calls := fs.Int("calls", 1_000_000, "calls per call measure")
	removes := fs.Int("removes", 1000, "breakers removed per remove measure (at most a tenth of the size)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 10 {
			return fmt.Errorf("-n: %q is not a size of at least 10", s)
		}
		ns = append(ns, n)
	}
	if *rounds < 1 || *calls < 1 || *removes < 1 {
		return fmt.Errorf("-rounds, -calls and -removes must be positive")
	}
	libs := makers()
	// results[size][lib][round]
	results := make([][][]result, len(ns))
	for i := range results {
		results[i] = make([][]result, len(libs))
	}
	for r := 0; r < *rounds; r++ {
		for i, n := range ns {
			for k := range libs {
				j := (k + r) % len(libs)
				res := runOne(libs[j].make(), n, *calls, min(*removes, n/10))
				results[i][j] = append(results[i][j], res)
				fmt.Fprintf(os.Stderr, "round %d, n=%d, %s: done\n", r+1, n, libs[j].name)
			}
		}
	}
	fmt.Fprintf(out, "`go run ./cmd/tenants %s` in `bench/`: %s/%s, GOMAXPROCS %d, %d rounds, %d calls per call measure, medians over the rounds; a ratio is the median of the ratios within a round.\n",
		strings.Join(args, " "), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), *rounds, *calls)
	for i, n := range ns {
		writeTable(out, n, libs, results[i])
	}
	return nil
}

// runOne measures l at n breakers.
func runOne(l lib, n, calls, removes int) result {
	defer l.close()
	var res result
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%09d", i) // 16 bytes
	}
	rnd := rand.New(rand.NewPCG(uint64(n), 36))
	idx := make([]uint32, calls)
	for i := range idx {
		idx[i] = uint32(rnd.IntN(n))
	}

	before := heap()
	start := time.Now()
	l.register(names)
	res[register] = perOp(time.Since(start), n)
	res[heapPer] = float64(heap()-before) / float64(n)

	l.handles(names)
	start = time.Now()
	l.callHandles(idx)
	res[callHandle] = perOp(time.Since(start), calls)
	start = time.Now()
	l.callNames(names, idx)
	res[callName] = perOp(time.Since(start), calls)
	start = time.Now()
	l.hot(calls)
	res[hot] = perOp(time.Since(start), calls)

	var trips []int
	for i := 0; i < n; i += 10 {
		trips = append(trips, i)
	}
	before = heap()
	start = time.Now()
	l.trip(trips)
	res[tripEach] = perOp(time.Since(start), len(trips))
	res[heapOpened] = float64(heap()-before) / float64(len(trips))

	var gone []string
	for i := 1; i < n && len(gone) < removes; i += 10 {
		gone = append(gone, names[i])
	}
	start = time.Now()
	l.remove(gone)
	res[removeOne] = perOp(time.Since(start), len(gone))
	runtime.KeepAlive(names)
	return res
}

func perOp(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }

// heap is the heap in use after a collection.
func heap() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeTable writes the table of size n: every library's median, and the
// median ratio of every fusebox column to gobreaker within a round.
func writeTable(out io.Writer, n int, libs []libMaker, res [][]result) {
	fmt.Fprintf(out, "\n| at %s breakers |", thousands(n))
	sep := "|---|"
	for _, l := range libs {
		fmt.Fprintf(out, " %s |", l.name)
		sep += "--:|"
	}
	var ratios []int
	for j, l := range libs {
		if strings.HasPrefix(l.name, "fusebox") {
			fmt.Fprintf(out, " %s / gobreaker |", l.name)
			sep += "--:|"
			ratios = append(ratios, j)
		}
	}
	fmt.Fprintf(out, "\n%s\n", sep)
	for m := measure(0); m < measures; m++ {
		fmt.Fprintf(out, "| %s |", measureNames[m])
		for j := range libs {
			var v []float64
			for _, r := range res[j] {
				v = append(v, r[m])
			}
			fmt.Fprintf(out, " %s |", format(m, median(v)))
		}
		for _, j := range ratios {
			var v []float64
			for r := range res[j] {
				if g := res[0][r][m]; g > 0 {
					v = append(v, res[j][r][m]/g)
				}
			}
			if len(v) == 0 {
				fmt.Fprint(out, " |")
				continue
			}
			fmt.Fprintf(out, " %.2f |", median(v))
		}
		fmt.Fprintln(out)
	}
}

func format(m measure, v float64) string {
	if bytesMeasure(m) {
		return fmt.Sprintf("%.0f B", v)
	}
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f ms", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1f us", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.2f us", v/1e3)
	}
	return fmt.Sprintf("%.0f ns", v)
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
