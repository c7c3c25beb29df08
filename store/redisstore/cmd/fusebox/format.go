package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fusebox-go/fusebox/store"
	"github.com/fusebox-go/fusebox/store/redisstore"
)

// state names a breaker's state as the store holds it: "closed", "open",
// "half_open", "probing", or "forced" for a breaker forced open until a
// reset.
func state(b redisstore.Breaker) string {
	if b.Forced {
		return "forced"
	}
	return b.State().String()
}

// period says what is left of the breaker's open period.
func period(b redisstore.Breaker) string {
	switch {
	case b.Forced:
		return "until reset"
	case b.Open > 0:
		return human(b.Open)
	}
	return "-"
}

// timeOfDay writes t, an instant on the store's clock, in the local time
// zone: "15:04:05" on the day of now, "2006-01-02T15:04:05" on another
// day (no space, so that a table's columns stay words); "-" for the zero
// time.
func timeOfDay(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	t, now = t.Local(), now.Local()
	if t.YearDay() != now.YearDay() || t.Year() != now.Year() {
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("15:04:05")
}

// ends says when the open period ends, as a time of day: "until reset"
// for a forced breaker, "-" when no period runs.
func ends(b redisstore.Breaker) string {
	if b.Forced {
		return "until reset"
	}
	return timeOfDay(b.PeriodEnd(), b.At)
}

// since says since when the breaker is in its state, as a time of day,
// and how long ago: "18:02:11 (3m ago)"; "-" when the store does not say.
func since(b redisstore.Breaker) string {
	if b.Since.IsZero() {
		return "-"
	}
	return timeOfDay(b.Since, b.At) + " (" + human(max(b.At.Sub(b.Since), 0)) + " ago)"
}

// human rounds a duration to what a reader needs: milliseconds under a
// second, tenths of a second under a minute, seconds under an hour,
// minutes above.
func human(d time.Duration) string {
	var s string
	switch {
	case d < time.Second:
		s = d.Round(time.Millisecond).String()
	case d < time.Minute:
		s = d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		s = d.Round(time.Second).String()
	default:
		s = d.Round(time.Minute).String()
	}
	// "2m0s" and "1h30m0s" read better as "2m" and "1h30m".
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

// column is one column of list's table.
type column struct {
	header string
	value  func(redisstore.Breaker) string
}

// columns are list's columns, in order.
var columns = []column{
	{"NAME", func(b redisstore.Breaker) string { return b.Name }},
	{"STATE", state},
	{"EPOCH", func(b redisstore.Breaker) string { return strconv.FormatUint(b.Epoch, 10) }},
	{"SINCE", func(b redisstore.Breaker) string { return timeOfDay(b.Since, b.At) }},
	{"PERIOD LEFT", period},
	{"PERIOD ENDS", ends},
	{"PROBE HELD BY", func(b redisstore.Breaker) string { return dash(b.HolderName()) }},
	{"LEASE LEFT", func(b redisstore.Breaker) string {
		if b.Holder == "" {
			return "-"
		}
		return human(b.Probe)
	}},
	{"FAILURES", func(b redisstore.Breaker) string { return strconv.FormatInt(b.Failures, 10) }},
	{"CALLS", func(b redisstore.Breaker) string {
		if !b.Window {
			return "-"
		}
		return strconv.FormatInt(b.Calls, 10)
	}},
	{"PROCESSES", func(b redisstore.Breaker) string {
		if b.Processes == 0 {
			return "-"
		}
		return strconv.FormatInt(b.Processes, 10)
	}},
	// Last: the text is as long as the error it quotes.
	{"WHY", func(b redisstore.Breaker) string { return dash(b.Reason.String()) }},
}

// why says who opened the breaker and why, with the counts that tripped
// it while the store still holds them: "opened by web-7: dial tcp ...:
// connection refused (5 consecutive failures)"; "" if the store does not
// say.
func why(b redisstore.Breaker) string {
	s := b.Reason.String()
	if s == "" {
		return ""
	}
	switch {
	case b.Window && b.Calls > 0:
		s += fmt.Sprintf(" (%s in %s)", plural(b.Failures, "failure"), plural(b.Calls, "call"))
	case !b.Window && b.Failures > 0:
		s += " (" + plural(b.Failures, "consecutive failure") + ")"
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeTable writes list's table: a header line and a line per breaker,
// aligned; a line saying so when there is no breaker.
func writeTable(w io.Writer, bs []redisstore.Breaker) {
	if len(bs) == 0 {
		fmt.Fprintln(w, "no breaker has state in the store")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	cells := make([]string, len(columns))
	for i, c := range columns {
		cells[i] = c.header
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
	for _, b := range bs {
		for i, c := range columns {
			cells[i] = c.value(b)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// writeBreaker writes one breaker in full, a field a line; keys is the
// pattern of its keys, for redis-cli.
func writeBreaker(w io.Writer, b redisstore.Breaker, keys string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	probe := "none"
	if b.Holder != "" {
		probe = fmt.Sprintf("held by %s, %s left (ends %s)", b.HolderName(), human(b.Probe), timeOfDay(b.At.Add(b.Probe), b.At))
	}
	counts := "none"
	switch {
	case b.Window:
		counts = fmt.Sprintf("%s in %s (time window)", plural(b.Failures, "failure"), plural(b.Calls, "call"))
	case b.Failures > 0:
		counts = plural(b.Failures, "consecutive failure")
	}
	switch {
	case b.Processes == 1:
		counts += ", from 1 process"
	case b.Processes > 1:
		counts += fmt.Sprintf(", from %d processes", b.Processes)
	}
	slow := "none"
	if b.SlowStart > 0 {
		slow = human(b.SlowStart) + " left (after a recovery: the fleet admits a growing share of calls)"
	}
	if len(b.Reporters) > 0 {
		counts += ": " + strings.Join(b.Reporters, ", ")
	}
	for _, f := range [][2]string{
		{"name", b.Name},
		{"state", state(b)},
		{"epoch", strconv.FormatUint(b.Epoch, 10)},
		{"since", since(b)},
		{"period left", period(b)},
		{"period ends", ends(b)},
		{"slow start", slow},
		{"why", dash(why(b))},
		{"probe lease", probe},
		{"counts", counts},
		{"keys", keys},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", f[0], f[1])
	}
	tw.Flush()
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.FormatInt(n, 10) + " " + what + "s"
}

// breakerObject is a breaker in JSON: durations are milliseconds,
// instants RFC 3339 on the store's clock; calls is absent for a
// consecutive policy.
type breakerObject struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Epoch uint64 `json:"epoch"`
	// Since is when the breaker entered its state; absent when the store
	// does not say.
	Since string `json:"since,omitempty"`
	// OpenMS is what is left of the open period, and PeriodEnds when it
	// ends (the next trial); period_ends is absent when no period runs
	// (forced open too).
	OpenMS     int64  `json:"open_ms"`
	PeriodEnds string `json:"period_ends,omitempty"`
	Holder     string `json:"probe_holder,omitempty"`
	// HeldBy is the name of the process holding the probe lease
	// (manager.Options.Name); Holder is its token.
	HeldBy   string `json:"probe_held_by,omitempty"`
	ProbeMS  int64  `json:"probe_ms"`
	Window   bool   `json:"window"`
	Failures int64  `json:"failures"`
	Calls    *int64 `json:"calls,omitempty"`
	// SlowStartMS is what is left of the fleet's slow start after a
	// recovery; absent when none runs.
	SlowStartMS int64 `json:"slow_start_ms,omitempty"`
	// Processes is how many processes the failures came from, under a
	// quorum, and Reporters their names; absent without one.
	Processes int64    `json:"processes,omitempty"`
	Reporters []string `json:"reporters,omitempty"`
	// OpenedBy and Why say who opened the breaker (manager.Options.Name)
	// and the text of the error that opened it; absent while closed or
	// forced, or when the store does not say.
	OpenedBy string `json:"opened_by,omitempty"`
	Why      string `json:"why,omitempty"`
}

func breakerJSON(b redisstore.Breaker) breakerObject {
	o := breakerObject{
		Name: b.Name, State: state(b), Epoch: b.Epoch,
		OpenMS: b.Open.Milliseconds(), Holder: b.Holder, HeldBy: b.HolderName(), ProbeMS: b.Probe.Milliseconds(),
		Window: b.Window, Failures: b.Failures, Processes: b.Processes,
		SlowStartMS: b.SlowStart.Milliseconds(),
		OpenedBy:    b.Reason.By, Why: b.Reason.Why, Reporters: b.Reporters,
	}
	if b.Window {
		o.Calls = &b.Calls
	}
	o.Since, o.PeriodEnds = rfc3339(b.Since), rfc3339(b.PeriodEnd())
	return o
}

// rfc3339 writes t in UTC to the millisecond, or "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// changeObject is a change in JSON; at is when this process heard it;
// opened_by and why, for an opening, who opened the breaker and why.
type changeObject struct {
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	Name     string    `json:"name"`
	Epoch    uint64    `json:"epoch"`
	OpenMS   int64     `json:"open_ms"`
	OpenedBy string    `json:"opened_by,omitempty"`
	Why      string    `json:"why,omitempty"`
	// SlowStartMS is the slow start a closing began; absent for none.
	SlowStartMS int64 `json:"slow_start_ms,omitempty"`
	// ProbeMS is the lease a leased change took; absent for others.
	ProbeMS int64 `json:"probe_ms,omitempty"`
}

func changeJSON(at time.Time, c store.Change) changeObject {
	return changeObject{At: at, Kind: c.Kind.String(), Name: c.Name, Epoch: c.Epoch, OpenMS: c.Open.Milliseconds(), OpenedBy: c.Reason.By, Why: c.Reason.Why, SlowStartMS: c.SlowStart.Milliseconds(), ProbeMS: c.Probe.Milliseconds()}
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) {
	b, _ := json.Marshal(v) // the objects above always marshal
	w.Write(append(b, '\n'))
}

// A watch writes its lines as changes come, so it cannot align them with
// a tabwriter: its columns have fixed widths, and the name, of any length,
// comes last, followed, for an opening, by who opened it and why.
const changeFormat = "%-12s  %-8s  %-6s  %-11s  %s\n"

func writeChangeHeader(w io.Writer) {
	fmt.Fprintf(w, changeFormat, "TIME", "KIND", "EPOCH", "PERIOD", "NAME")
}

// writeChange writes one change, heard at at (local time, to the
// millisecond).
func writeChange(w io.Writer, at time.Time, c store.Change) {
	p := "-"
	switch {
	case c.Kind == store.Forced:
		p = "until reset"
	case c.Kind == store.Opened:
		p = human(c.Open)
	case c.Kind == store.Leased:
		p = "lease " + human(c.Probe)
	case c.SlowStart > 0:
		p = "slow " + human(c.SlowStart)
	}
	name := c.Name
	if r := c.Reason.String(); r != "" {
		name += "  (" + r + ")"
	}
	fmt.Fprintf(w, changeFormat, at.Format("15:04:05.000"), c.Kind, strconv.FormatUint(c.Epoch, 10), p, name)
}
