package fleet_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/internal/machine"
	"github.com/fusebox-go/fusebox/store"
)

// The step's tests are scripts under testdata: each is a sequence of
// commands (messages to the step, and what happens to the breaker's
// machine meanwhile), each followed by "----" and what it changed: the
// fields of the State, the machine's transition (a real machine.Machine,
// changed by fleet.Apply as the manager changes it), and the actions. A
// script whose output changed fails; `go test ./internal/fleet -run
// TestScripts -rewrite` writes what the code does now, for review as a
// diff.
//
// Commands (times are offsets from t0; "err" makes a reply an error;
// status arguments are epoch=N open=D probe=D forced):
//
//	init [consecutive=N | window=RATE/PERIOD/BUCKETS/MINCALLS] [fallback=local|open|closed] [quorum=N] [dryrun]
//	tick D                    the time moves on by D
//	asked N                   the hub has started N status reads
//	machine trip|expire|probe|force|reset|halt
//	                          the machine moves on its own (a caller's trip, a timer, ...)
//	outcome GEN success|failure|ignore [localtrip]
//	recorded GEN [failure [n=N]] [localtrip] [calls=N] [failures=N] [processes=N] [largest=C/F] [err] STATUS
//	probewon GEN TOKEN
//	probereply GEN TOKEN EPOCH FOR [won] [canceled] [err] STATUS
//	probeended GEN success|failure|ignore
//	verdictreply GEN success|failure|ignore [applied] [err] STATUS
//	applied [period=D]        the loop applied the machine's last step
//	leasedecided D
//	reconfigured consecutive=N | window=...
//	decided [won] [err] STATUS
//	manual force|reset
//	manualreply [force] [err] STATUS
//	failed
//	answered SEQ
//	heard [seq=N] STATUS
//	halfopen                  a caller asks to end the open period (HalfOpen)
//	halfopenreply [applied] [err] STATUS
var rewrite = flag.Bool("rewrite", false, "rewrite the step's scripts with what the code does now")

var errDown = errors.New("connection refused")

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

// script is the driver of one script: the step's state, a real machine,
// the time and the hub's count of status reads.
type script struct {
	t     *testing.T
	s     fleet.State
	m     *machine.Machine
	now   time.Time
	asked uint64
	last  machine.Step // the machine's last step, for applied
	where string       // the script and command being run, for messages
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	d := &script{t: t}
	d.init(nil)
	blocks := strings.Split(string(data), "\n\n")
	failed := false
	for i, blk := range blocks {
		blk = strings.Trim(blk, "\n")
		if blk == "" {
			continue
		}
		cmd, want, _ := strings.Cut(blk, "\n----")
		want = strings.Trim(want, "\n")
		// Comment lines go before the command.
		var lines []string
		for _, l := range strings.Split(cmd, "\n") {
			if !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		d.where = fmt.Sprintf("%s, command %q", path, strings.Join(lines, " "))
		got := strings.TrimRight(d.run(strings.Join(lines, " ")), "\n")
		if i > 0 {
			out.WriteString("\n")
		}
		out.WriteString(cmd + "\n----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
		if got != want && !*rewrite {
			failed = true
			t.Errorf("%s, command %q:\ngot:\n%s\nwant:\n%s", path, strings.Join(lines, " "), got, want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if failed {
		t.Log("regenerate with: go test ./internal/fleet -run TestScripts -rewrite, and review the diff")
	}
}

// args are a command's words: positional ones, flags and key=value pairs.
type args struct {
	t    *testing.T
	pos  []string
	kv   map[string]string
	used map[string]bool
}

func parse(t *testing.T, words []string) *args {
	a := &args{t: t, kv: map[string]string{}, used: map[string]bool{}}
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok {
			a.kv[k] = v
		} else if isFlag(w) {
			a.kv[w] = ""
		} else {
			a.pos = append(a.pos, w)
		}
	}
	return a
}

func isFlag(w string) bool {
	switch w {
	case "failure", "success", "ignore", "localtrip", "ends", "err", "won", "canceled", "applied", "forced", "force", "reset", "dryrun":
		return true
	}
	return false
}

func (a *args) has(k string) bool { _, ok := a.kv[k]; return ok }

func (a *args) int(k string) int64 {
	v, ok := a.kv[k]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		a.t.Fatalf("%s=%s: %v", k, v, err)
	}
	return n
}

func (a *args) dur(k string) time.Duration {
	v, ok := a.kv[k]
	if !ok {
		return 0
	}
	return mustDur(a.t, v)
}

func mustDur(t *testing.T, v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("duration %q: %v", v, err)
	}
	return d
}

func (a *args) posInt(i int) uint64 {
	if i >= len(a.pos) {
		a.t.Fatalf("missing argument %d in %v", i, a.pos)
	}
	n, err := strconv.ParseUint(a.pos[i], 10, 64)
	if err != nil {
		a.t.Fatalf("argument %q: %v", a.pos[i], err)
	}
	return n
}

func (a *args) outcome() classify.Outcome {
	switch {
	case a.has("failure"):
		return classify.Failure
	case a.has("success"):
		return classify.Success
	case a.has("ignore"):
		return classify.Ignore
	}
	a.t.Fatal("no outcome")
	return 0
}

func (a *args) err() error {
	if a.has("err") {
		return errDown
	}
	return nil
}

func (a *args) status() store.Status {
	return store.Status{Epoch: uint64(a.int("epoch")), Open: a.dur("open"), Probe: a.dur("probe"), Forced: a.has("forced"), Reason: store.Reason{By: a.kv["by"]}}
}

func (a *args) policy() (store.Policy, breaker.Strategy) {
	if w, ok := a.kv["window"]; ok {
		f := strings.Split(w, "/")
		if len(f) != 4 {
			a.t.Fatalf("window=%s: want RATE/PERIOD/BUCKETS/MINCALLS", w)
		}
		rate, _ := strconv.ParseFloat(f[0], 64)
		buckets, _ := strconv.Atoi(f[2])
		minCalls, _ := strconv.Atoi(f[3])
		p := store.Policy{Rate: rate, Period: mustDur(a.t, f[1]), Buckets: buckets, MinCalls: minCalls}
		return p, breaker.TimeWindow{Rate: rate, Period: p.Period, Buckets: buckets, MinCalls: minCalls}
	}
	n := 3
	if v, ok := a.kv["consecutive"]; ok {
		n, _ = strconv.Atoi(v)
	}
	return store.Policy{Failures: n}, breaker.Consecutive{Failures: n}
}

func (d *script) init(a *args) {
	if a == nil {
		a = parse(d.t, nil)
	}
	p, strat := a.policy()
	p.Quorum = int(a.int("quorum"))
	p.Reporter = a.kv["name"] // the process's name: its Lag
	fb := store.FallbackLocal
	switch a.kv["fallback"] {
	case "open":
		fb = store.FailOpen
	case "closed":
		fb = store.FailClosed
	}
	d.now = t0
	m, err := machine.NewMachine("svc", strat, d.now)
	if err != nil {
		d.t.Fatal(err)
	}
	d.s, d.m, d.asked, d.last = fleet.State{Policy: p, Fallback: fb, DryRun: a.has("dryrun")}, m, 0, machine.Step{}
}

func (d *script) view() fleet.View {
	s := d.m.Snapshot()
	return fleet.View{State: s.State, Gen: s.Gen, Until: s.Until, Forced: s.Forced, Halted: s.Halted, Asked: d.asked, Opener: s.Opener()}
}

// run runs one command and returns what it changed.
func (d *script) run(line string) string {
	words := strings.Fields(line)
	if len(words) == 0 {
		return ""
	}
	a := parse(d.t, words[1:])
	var msg fleet.Msg
	switch words[0] {
	case "init":
		d.init(a)
		return ""
	case "tick":
		d.now = d.now.Add(mustDur(d.t, a.pos[0]))
		return ""
	case "asked":
		d.asked = a.posInt(0)
		return ""
	case "machine":
		return d.machine(words[1])
	case "outcome":
		msg = fleet.Outcome{Gen: a.posInt(0), Outcome: a.outcome(), LocalTrip: a.has("localtrip")}
	case "recorded":
		v := store.Verdict{Calls: a.int("calls"), Failures: a.int("failures"), Processes: a.int("processes"), Status: a.status()}
		if l, ok := a.kv["largest"]; ok {
			c, f, _ := strings.Cut(l, "/")
			v.LargestCalls, _ = strconv.ParseInt(c, 10, 64)
			v.LargestFailures, _ = strconv.ParseInt(f, 10, 64)
		}
		n := a.int("n")
		if _, ok := a.kv["n"]; !ok && a.has("failure") {
			n = 1 // a failure report reports one failure at least
		}
		msg = fleet.Recorded{Gen: a.posInt(0), Failure: a.has("failure"), Failures: n, LocalTrip: a.has("localtrip"), Ends: a.has("ends"), Verdict: v, Err: a.err(), At: d.now}
	case "awaited":
		msg = fleet.Awaited{Gen: a.posInt(0)}
	case "probewon":
		msg = fleet.ProbeWon{Gen: a.posInt(0), Token: a.pos[1]}
	case "probereply":
		// The lease as it was asked for: at the instant the state's
		// Acquiring lease says, unless late=D says the reply arrives D
		// after the asking.
		l := fleet.Lease{Gen: a.posInt(0), Token: a.pos[1], Epoch: a.posInt(2), For: mustDur(d.t, a.pos[3]), Asked: d.now}
		if d.s.Probe.Kind == fleet.ProbeAcquiring && d.s.Probe.Lease.Gen == l.Gen {
			l.Asked = d.s.Probe.Lease.Asked
		}
		if late := a.dur("late"); late > 0 {
			l.Asked = d.now.Add(-late)
		}
		msg = fleet.ProbeReply{Lease: l, Won: a.has("won"), Status: a.status(), Err: a.err(), Canceled: a.has("canceled"), At: d.now}
	case "probeended":
		msg = fleet.ProbeEnded{Gen: a.posInt(0), Outcome: a.outcome()}
	case "verdictreply":
		msg = fleet.VerdictReply{Gen: a.posInt(0), Outcome: a.outcome(), Applied: a.has("applied"), Status: a.status(), Err: a.err(), At: d.now}
	case "applied":
		// As the loop does: the period's timer first, then the step.
		s := d.last
		if p := a.dur("period"); p > 0 {
			d.m.SetUntil(s.Gen, s.At.Add(p))
		}
		msg = fleet.Applied{Transition: s.Transition, Gen: s.Gen, Cause: s.Cause, At: s.At, Period: a.dur("period")}
	case "leasedecided":
		msg = fleet.LeaseDecided{Lease: mustDur(d.t, a.pos[0])}
	case "reconfigured":
		p, _ := a.policy()
		p.Quorum = int(a.int("quorum"))
		msg = fleet.Reconfigured{Policy: p}
	case "decided":
		msg = fleet.Decided{Won: a.has("won"), Status: a.status(), Err: a.err(), At: d.now}
	case "manual":
		msg = fleet.Manual{Force: a.has("force")}
	case "manualreply":
		msg = fleet.ManualReply{Force: a.has("force"), Status: a.status(), Err: a.err()}
	case "failed":
		msg = fleet.Failed{Err: errDown}
	case "answered":
		msg = fleet.Answered{Seq: a.posInt(0)}
	case "heard":
		msg = fleet.Heard{Status: a.status(), At: d.now, Seq: uint64(a.int("seq"))}
	case "halfopen":
		msg = fleet.HalfOpenAsked{}
	case "halfopenreply":
		msg = fleet.HalfOpenReply{Applied: a.has("applied"), Status: a.status(), Err: a.err(), At: d.now}
	default:
		d.t.Fatalf("unknown command %q", words[0])
	}
	var out strings.Builder
	d.step(msg, &out, "")
	return out.String()
}

// step feeds msg to Step as the manager does: the change applied to the
// machine (decided again if the machine moved meanwhile), then the
// statuses left for after it.
func (d *script) step(msg fleet.Msg, out *strings.Builder, prefix string) {
	before := d.s
	for {
		snap := d.m.Snapshot()
		next, a := fleet.Step(d.s, d.view(), d.now, msg)
		step, made, moved, stale := fleet.Apply(d.m, a.Change, snap, nil, d.now)
		if moved {
			continue
		}
		d.s = next
		if err := next.Check(d.view()); err != nil {
			d.t.Errorf("%s: after %T%+v the state breaks an invariant: %v\nstate: %+v", d.where, msg, msg, err, next)
		}
		diffState(out, prefix, before, next)
		if a.Change != nil {
			fmt.Fprintf(out, "%schange: %s\n", prefix, render(a.Change))
		}
		if made {
			d.last = step
			fmt.Fprintf(out, "%smachine: %s -> %s gen %d (%s)\n", prefix, step.From, step.To, step.Gen, step.Cause)
		}
		if stale {
			fmt.Fprintf(out, "%smachine: stale\n", prefix)
		}
		if a.Call != nil {
			fmt.Fprintf(out, "%scall: %s\n", prefix, render(a.Call))
		}
		if a.Folded {
			fmt.Fprintf(out, "%scaller: folded, waits for the report on its way\n", prefix)
		}
		if a.Stale {
			fmt.Fprintf(out, "%scaller: stale\n", prefix)
		}
		if a.Dropped > 0 {
			fmt.Fprintf(out, "%sdropped: %d folded failures of an ended generation\n", prefix, a.Dropped)
		}
		if a.Probe != (fleet.ProbeAnswer{}) {
			fmt.Fprintf(out, "%sprobe: %s\n", prefix, render(a.Probe))
		}
		for _, e := range a.Loop {
			fmt.Fprintf(out, "%sloop: %s\n", prefix, render(e))
		}
		for _, h := range a.Then {
			fmt.Fprintf(out, "%sthen: heard %s\n", prefix, render(h.Status))
			d.step(h, out, prefix+"  ")
		}
		return
	}
}

func (d *script) machine(what string) string {
	s := d.m.Snapshot()
	var step machine.Step
	var ok bool
	switch what {
	case "trip":
		step, ok = d.m.Trip(s.Gen, classify.Failure, errDown, d.now)
	case "expire":
		step, ok = d.m.Expire(s.Gen, d.now)
	case "probe":
		var t machine.Ticket
		t, step, _ = d.m.Acquire(d.now)
		ok = t.Probe
	case "force":
		step, ok = d.m.ForceOpen(d.now)
	case "reset":
		step, ok = d.m.Reset(d.now, breaker.CauseReset)
	case "halt":
		d.m.Halt()
		return "machine: halted\n"
	default:
		d.t.Fatalf("machine %s: unknown", what)
	}
	if !ok {
		return "machine: no step\n"
	}
	d.last = step
	return fmt.Sprintf("machine: %s -> %s gen %d (%s)\n", step.From, step.To, step.Gen, step.Cause)
}

// diffState writes the fields of the state that changed.
func diffState(out *strings.Builder, prefix string, a, b fleet.State) {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		x, y := render(va.Field(i).Interface()), render(vb.Field(i).Interface())
		if x != y {
			fmt.Fprintf(out, "%sstate: %s %s -> %s\n", prefix, va.Type().Field(i).Name, x, y)
		}
	}
}

// render formats v for a script: instants as offsets from t0, types without
// their package, zero fields left out but an epoch, a generation and a
// phase's kind (Epoch=0 is an epoch, and a reader must see it).
func render(v any) string {
	return showValue(reflect.ValueOf(v))
}

func showValue(v reflect.Value) string {
	if !v.IsValid() {
		return "nil"
	}
	switch x := v.Interface().(type) {
	case time.Time:
		if x.IsZero() {
			return "0"
		}
		return "t0+" + x.Sub(t0).String()
	case time.Duration, breaker.State, classify.Outcome:
		return fmt.Sprint(x)
	case error:
		return strconv.Quote(x.Error())
	case store.Fallback:
		return strconv.Itoa(int(x))
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "nil"
		}
		return showValue(v.Elem())
	case reflect.Struct:
		var parts []string
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			if f := v.Field(i); v.Type().Field(i).IsExported() && (!f.IsZero() || name == "Epoch" || name == "Gen" || name == "Kind") {
				parts = append(parts, v.Type().Field(i).Name+"="+showValue(f))
			}
		}
		return strings.TrimPrefix(v.Type().String(), "fleet.") + "{" + strings.Join(parts, " ") + "}"
	case reflect.Slice:
		var parts []string
		for i := range v.Len() {
			parts = append(parts, showValue(v.Index(i)))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprint(v.Interface())
}
