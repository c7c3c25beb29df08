package boltstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/replicate"
	"github.com/fusebox-go/fusebox/replicate/boltstore"
	"github.com/fusebox-go/fusebox/replicate/replicatetest"
)

// childEnv names the bolt file a re-executed test binary writes to as the
// writer process of TestKillWriter.
const childEnv = "FUSEBOX_BOLTSTORE_KILL_CHILD"

// killWriters is how many goroutines of the writer process write at once,
// so that the writes killed in flight are in shared commits.
const killWriters = 16

// TestKillWriter runs a writer process (this test binary, re-executed)
// whose 16 goroutines write through a Replicator to a bolt primary and
// print each write that returned; it kills the process with SIGKILL while
// writes are in flight, reopens the file and checks every acknowledged
// write: a Put is there with its value, a Delete left the key absent, and
// a write the replica did not take still has its pending mark. Three
// rounds on the same file, each with fresh keys.
func TestKillWriter(t *testing.T) {
	if path := os.Getenv(childEnv); path != "" {
		writeUntilKilled(path)
		return
	}
	if testing.Short() {
		t.Skip("runs a writer process three times")
	}
	path := filepath.Join(t.TempDir(), "primary.db")
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range 3 {
		acks := runAndKill(t, path, 50+rng.IntN(400))
		checkAcks(t, path, round, acks)
	}
}

// ack is one write the writer process saw return without error.
type ack struct {
	op         string // "put" or "del"
	key        string
	replicated bool
}

// runAndKill starts the writer process on path, kills it once it has
// acknowledged after writes, and returns every write it acknowledged.
func runAndKill(t *testing.T, path string, after int) []ack {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	var acks []ack
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || (f[0] != "put" && f[0] != "del") {
			continue // the test framework's own lines
		}
		acks = append(acks, ack{op: f[0], key: f[1], replicated: f[2] == "1"})
		if !killed && len(acks) >= after {
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			killed = true // the lines already in the pipe are read on
		}
	}
	require.NoError(t, sc.Err())
	err = cmd.Wait()
	require.True(t, killed, "the writer process ended by itself after %d writes: %v", len(acks), err)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the writer process died of SIGKILL: %v", err)
	return acks
}

// checkAcks reopens the file and checks every acknowledged write.
func checkAcks(t *testing.T, path string, round int, acks []ack) {
	t.Helper()
	ctx := context.Background()
	s, err := boltstore.Open(path)
	require.NoError(t, err, "round %d: the file opens after the kill", round)
	defer func() { require.NoError(t, s.Close()) }()

	last := map[string]ack{}
	for _, a := range acks {
		last[a.key] = a // one goroutine writes each key: acks come in its order
	}
	for key, a := range last {
		e, err := s.Lookup(ctx, key)
		require.NoError(t, err)
		n, _ := strconv.Atoi(strings.TrimPrefix(key, "k"))
		switch {
		case a.op == "del":
			assert.False(t, e.Found, "round %d: %s: an acknowledged delete", round, key)
		case deletes(n) && !e.Found:
			// the delete that followed was in flight when the process died
		default:
			assert.True(t, e.Found, "round %d: %s: an acknowledged put", round, key)
			assert.Equal(t, key, string(e.Value), "round %d: %s: its value", round, key)
		}
		if !a.replicated {
			assert.True(t, e.Pending(), "round %d: %s: a write the replica did not take keeps its pending mark", round, key)
		}
	}
	all, err := s.PendingKeys(ctx, "", 1<<20)
	require.NoError(t, err)
	assert.Equal(t, len(all), s.PendingCount(), "round %d: the pending count matches the marks", round)
	t.Logf("round %d: %d writes acknowledged before the kill, all there; %d keys pending", round, len(acks), len(all))
}

// deletes reports whether the writer process deletes key n after putting
// it.
func deletes(n int) bool { return n%4 == 1 }

// flakyReplica takes every write except those of keys whose number is a
// multiple of 3, which it refuses: those stay pending.
type flakyReplica struct{}

var errRefused = errors.New("refused")

func (flakyReplica) Put(_ context.Context, key string, _ []byte) error { return refuse(key) }
func (flakyReplica) Delete(_ context.Context, key string) error        { return refuse(key) }

func refuse(key string) error {
	if n, _ := strconv.Atoi(strings.TrimPrefix(key, "k")); n%3 == 0 {
		return errRefused
	}
	return nil
}

// writeUntilKilled is the writer process: killWriters goroutines write
// fresh keys through a Replicator until the process is killed, printing
// "put|del key replicated" after each write that returned nil.
func writeUntilKilled(path string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "writer process:", err)
		os.Exit(2)
	}
	s, err := boltstore.Open(path)
	if err != nil {
		fail(err)
	}
	m := manager.Start(manager.Options{})
	b, err := m.Register("replica", manager.Config{Strategy: breaker.Consecutive{Failures: 1 << 30}})
	if err != nil {
		fail(err)
	}
	r, err := replicate.New(s, flakyReplica{}, b, replicate.Options{})
	if err != nil {
		fail(err)
	}
	// Keys fresh in each round: a round starts past every key on file.
	base := 0
	for {
		if _, ok, _ := s.Get(context.Background(), fmt.Sprintf("k%d", base)); !ok {
			if e, _ := s.Lookup(context.Background(), fmt.Sprintf("k%d", base)); !e.Pending() {
				break
			}
		}
		base += 1 << 16
	}
	var mu sync.Mutex
	say := func(op, key string, res replicate.Result) {
		rep := "0"
		if res.Replicated {
			rep = "1"
		}
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Fprintf(os.Stdout, "%s %s %s\n", op, key, rep); err != nil {
			fail(err)
		}
	}
	ctx := context.Background()
	for w := range killWriters {
		go func() {
			for n := base + w; ; n += killWriters {
				key := fmt.Sprintf("k%d", n)
				res, err := r.Put(ctx, key, []byte(key))
				if err != nil {
					fail(err)
				}
				say("put", key, res)
				if deletes(n) {
					if res, err = r.Delete(ctx, key); err != nil {
						fail(err)
					}
					say("del", key, res)
				}
			}
		}()
	}
	select {} // until killed
}

// rebuildChildEnv names the primary and the replica's log
// ("primary,log") of the rebuilding process of TestKillRebuild.
const rebuildChildEnv = "FUSEBOX_BOLTSTORE_REBUILD_CHILD"

// rebuildTotal is how many keys the primary of TestKillRebuild holds.
const rebuildTotal = 1000

func rebuildKeyName(i int) string { return fmt.Sprintf("k%04d", i) }

// logReplica is a replica kept in a file that outlives the process: each
// write appends a line ("put key value" or "del key"), in one write call.
type logReplica struct {
	mu sync.Mutex
	f  *os.File
}

func (l *logReplica) Put(_ context.Context, key string, value []byte) error {
	return l.append("put " + key + " " + string(value))
}

func (l *logReplica) Delete(_ context.Context, key string) error { return l.append("del " + key) }

func (l *logReplica) append(line string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.WriteString(line + "\n"); err != nil {
		return err
	}
	_, err := fmt.Fprintln(os.Stdout, "sent")
	return err
}

// TestKillRebuild rebuilds an empty replica from a bolt primary of 1000
// keys in a process (this test binary, re-executed) that is killed with
// SIGKILL part way; the replica is a file that outlives it. The primary
// reopened after the kill records the rebuild as unfinished, after the
// last key it recorded; a Rebuild in this process sends only the keys
// after that one, and the replica ends up holding what the primary holds.
func TestKillRebuild(t *testing.T) {
	if env := os.Getenv(rebuildChildEnv); env != "" {
		primary, log, _ := strings.Cut(env, ",")
		rebuildUntilKilled(primary, log)
		return
	}
	if testing.Short() {
		t.Skip("runs a rebuilding process")
	}
	ctx := context.Background()
	dir := t.TempDir()
	path, logPath := filepath.Join(dir, "primary.db"), filepath.Join(dir, "replica.log")
	s, err := boltstore.Open(path)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range killWriters { // concurrent writers: group commits
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < rebuildTotal; i += killWriters {
				k := rebuildKeyName(i)
				assert.NoError(t, s.Put(ctx, k, []byte(k)))
				e, err := s.Lookup(ctx, k)
				assert.NoError(t, err)
				_, err = s.Confirm(ctx, k, e.Seq) // replicated once, then the replica lost it all
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	require.Zero(t, s.PendingCount())
	require.NoError(t, s.Close())

	cmd := exec.Command(os.Args[0], "-test.run=^TestKillRebuild$", "-test.count=1")
	cmd.Env = append(os.Environ(), rebuildChildEnv+"="+path+","+logPath)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	const killAfter = 400
	sent := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == "sent" {
			if sent++; sent == killAfter {
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			}
		}
	}
	err = cmd.Wait()
	require.GreaterOrEqual(t, sent, killAfter, "the rebuilding process ended before the kill: %v", err)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "killed")

	// The replica as the killed process left it.
	replica := replicatetest.NewReplica()
	logged, err := os.ReadFile(logPath)
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(logged)), "\n") {
		f := strings.Fields(line)
		require.Len(t, f, 3, "log line %q", line)
		require.NoError(t, replica.Put(ctx, f[1], []byte(f[2])))
	}

	s, err = boltstore.Open(path)
	require.NoError(t, err)
	p, err := s.RebuildProgress(ctx)
	require.NoError(t, err)
	require.True(t, p.Running, "the reopened primary knows the rebuild is unfinished")
	// Progress is recorded every 128 keys, durably before the next key
	// is sent: 400 sends mean k0383's record is on disk.
	require.GreaterOrEqual(t, p.After, rebuildKeyName(383))
	t.Logf("killed after %d keys sent; the primary records the rebuild after %s", sent, p.After)

	var calls atomic.Int64
	m := manager.Start(manager.Options{})
	defer m.Stop()
	b, err := m.Register("replica", manager.Config{})
	require.NoError(t, err)
	r, err := replicate.New(s, countingReplica{replica, &calls}, b, replicate.Options{CatchUpPause: time.Microsecond})
	require.NoError(t, err)
	require.NoError(t, r.Rebuild(ctx), "the rebuild resumed")
	require.NoError(t, r.Close())

	after := 0
	for i := range rebuildTotal {
		if rebuildKeyName(i) > p.After {
			after++
		}
	}
	assert.Equal(t, int64(after), calls.Load(), "the resumed rebuild sent only the keys after %s", p.After)
	assert.Len(t, replica.Snapshot(), rebuildTotal)
	for i := range rebuildTotal {
		v, ok := replica.Get(rebuildKeyName(i))
		assert.True(t, ok && string(v) == rebuildKeyName(i), "%s on the replica", rebuildKeyName(i))
	}
	p, err = s.RebuildProgress(ctx)
	require.NoError(t, err)
	assert.Equal(t, replicate.Progress{}, p)
	require.NoError(t, s.Close())
}

// countingReplica counts the writes it passes on.
type countingReplica struct {
	*replicatetest.Replica
	calls *atomic.Int64
}

func (c countingReplica) Put(ctx context.Context, key string, value []byte) error {
	c.calls.Add(1)
	return c.Replica.Put(ctx, key, value)
}

func (c countingReplica) Delete(ctx context.Context, key string) error {
	c.calls.Add(1)
	return c.Replica.Delete(ctx, key)
}

// rebuildUntilKilled is the rebuilding process: a Rebuild of the replica
// in the file at log from the primary at path.
func rebuildUntilKilled(path, log string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "rebuilding process:", err)
		os.Exit(2)
	}
	f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fail(err)
	}
	s, err := boltstore.Open(path)
	if err != nil {
		fail(err)
	}
	m := manager.Start(manager.Options{})
	b, err := m.Register("replica", manager.Config{})
	if err != nil {
		fail(err)
	}
	r, err := replicate.New(s, &logReplica{f: f}, b, replicate.Options{CatchUpPause: 200 * time.Microsecond})
	if err != nil {
		fail(err)
	}
	if err := r.Rebuild(context.Background()); err != nil {
		fail(err)
	}
	fail(errors.New("the rebuild finished before the kill"))
}
