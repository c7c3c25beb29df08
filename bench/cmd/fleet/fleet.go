package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fleet is the child processes of one configuration, seen from the parent.
// Each child runs a few managers; their lines come to the parent through
// one goroutine per child, which files trial and failing calls and
// openings as they come and hands every other line to replies.
type fleet struct {
	children []*child
	replies  chan reply
	opens    chan opening

	mu    sync.Mutex
	calls []serviceCall // while a fault runs
}

// child is one child process.
type child struct {
	idx      int
	first    int // the fleet's index of its first manager
	managers int
	cmd      *exec.Cmd
	in       io.WriteCloser
	exited   chan struct{}
}

// reply is a line of a child other than a call or an opening; an "exit"
// reply says that the child's output ended.
type reply struct {
	child  int
	kind   string
	fields []string
}

// opening is a manager's report that a tripped breaker turned open in it,
// at an instant of its own wall clock.
type opening struct {
	manager int
	breaker int
	at      int64 // Unix nanoseconds
}

// startFleet starts the children: managers managers in all, at most
// perProcess to a process, each child running this program again with
// childEnv set.
func startFleet(cfg childConfig, managers, perProcess int, log io.Writer) (*fleet, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	f := &fleet{replies: make(chan reply, 1024), opens: make(chan opening, 4096)}
	for first := 0; first < managers; first += perProcess {
		c := cfg
		c.First, c.Managers = first, min(perProcess, managers-first)
		env, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		ch := &child{idx: len(f.children), first: c.First, managers: c.Managers, exited: make(chan struct{})}
		ch.cmd = exec.Command(self)
		ch.cmd.Env = append(os.Environ(), childEnv+"="+string(env))
		stdout, err := ch.cmd.StdoutPipe()
		if err != nil {
			f.kill()
			return nil, err
		}
		stderr, err := ch.cmd.StderrPipe()
		if err != nil {
			f.kill()
			return nil, err
		}
		if ch.in, err = ch.cmd.StdinPipe(); err != nil {
			f.kill()
			return nil, err
		}
		if err := ch.cmd.Start(); err != nil {
			f.kill()
			return nil, fmt.Errorf("starting a child: %w", err)
		}
		f.children = append(f.children, ch)
		go copyLines(log, stderr, fmt.Sprintf("  child %d: ", ch.idx), 20)
		go f.read(ch, stdout)
	}
	return f, nil
}

// read files the lines of child ch until its output ends.
func (f *fleet) read(ch *child, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "call":
			if c, ok := parseCall(fields); ok {
				f.mu.Lock()
				f.calls = append(f.calls, c)
				f.mu.Unlock()
				continue
			}
		case "open":
			if len(fields) == 4 {
				m, err1 := strconv.Atoi(fields[1])
				b, err2 := strconv.Atoi(fields[2])
				at, err3 := strconv.ParseInt(fields[3], 10, 64)
				if err1 == nil && err2 == nil && err3 == nil {
					f.opens <- opening{manager: m, breaker: b, at: at}
					continue
				}
			}
		}
		f.replies <- reply{child: ch.idx, kind: fields[0], fields: fields[1:]}
	}
	close(ch.exited)
	select { // for a collect under way; nobody may be listening
	case f.replies <- reply{child: ch.idx, kind: "exit"}:
	default:
	}
}

// parseCall reads "call BREAKER PROBE OK UNIXNANO".
func parseCall(fields []string) (serviceCall, bool) {
	if len(fields) != 5 {
		return serviceCall{}, false
	}
	b, err1 := strconv.Atoi(fields[1])
	at, err2 := strconv.ParseInt(fields[4], 10, 64)
	if err1 != nil || err2 != nil {
		return serviceCall{}, false
	}
	return serviceCall{breaker: b, probe: fields[2] == "1", ok: fields[3] == "1", at: at}, true
}

// send writes a command line to one child.
func (f *fleet) send(ch *child, format string, args ...any) error {
	if _, err := fmt.Fprintf(ch.in, format+"\n", args...); err != nil {
		return fmt.Errorf("child %d: %w", ch.idx, err)
	}
	return nil
}

// sendAll writes a command line to every child.
func (f *fleet) sendAll(format string, args ...any) error {
	for _, ch := range f.children {
		if err := f.send(ch, format, args...); err != nil {
			return err
		}
	}
	return nil
}

// collect waits for n replies of kind, within d, and returns them by
// child. A child that exits, or says something else, is an error.
func (f *fleet) collect(kind string, n int, d time.Duration) ([]reply, error) {
	timeout := time.After(d)
	var got []reply
	for len(got) < n {
		select {
		case r := <-f.replies:
			if r.kind != kind {
				return nil, fmt.Errorf("child %d: waiting for %q, got %q %s", r.child, kind, r.kind, strings.Join(r.fields, " "))
			}
			got = append(got, r)
		case <-timeout:
			return nil, fmt.Errorf("%d of %d children said %q within %v", len(got), n, kind, d)
		}
	}
	return got, nil
}

// takeCalls returns the calls filed since the last take.
func (f *fleet) takeCalls() []serviceCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// stats asks every child for its counts and sums them.
func (f *fleet) stats() (childStats, error) {
	if err := f.sendAll("stats"); err != nil {
		return childStats{}, err
	}
	rs, err := f.collect("stats", len(f.children), 30*time.Second)
	if err != nil {
		return childStats{}, err
	}
	sum := childStats{Sent: map[string]int64{}}
	for _, r := range rs {
		var s childStats
		if err := json.Unmarshal([]byte(strings.Join(r.fields, " ")), &s); err != nil {
			return childStats{}, fmt.Errorf("child %d: stats: %w", r.child, err)
		}
		for k, v := range s.Sent {
			sum.Sent[k] += v
		}
		sum.StoreErrors += s.StoreErrors
		sum.StoreDown += s.StoreDown
		sum.Dropped += s.Dropped
		sum.CPU += s.CPU
	}
	return sum, nil
}

// childOf returns the child that runs manager m.
func (f *fleet) childOf(m int) *child {
	for _, ch := range f.children {
		if m >= ch.first && m < ch.first+ch.managers {
			return ch
		}
	}
	return nil
}

// stop asks every child to quit and waits for each, within 15s, after
// which it kills those left.
func (f *fleet) stop() {
	for _, ch := range f.children {
		_ = f.send(ch, "quit")
		ch.in.Close()
	}
	deadline := time.After(15 * time.Second)
	for _, ch := range f.children {
		select {
		case <-ch.exited:
		case <-deadline:
		}
	}
	f.kill()
}

// kill kills every child still running and waits for it.
func (f *fleet) kill() {
	for _, ch := range f.children {
		if ch.cmd.Process != nil {
			_ = ch.cmd.Process.Kill()
			_ = ch.cmd.Wait()
		}
	}
}
