// Package redistest starts real redis-server processes for tests: each on a
// free loopback port, with no persistence, stopped when the test ends.
//
// A test that needs Redis calls Start. Where no redis-server is on PATH the
// test is skipped with a message saying how to install one, unless the
// environment variable FUSEBOX_REQUIRE_REDIS is set to 1 (as CI does), in
// which case it fails.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns a missing redis-server
// from a skip into a failure.
const RequireEnv = "FUSEBOX_REQUIRE_REDIS"

// Server is a redis-server process started for a test.
type Server struct {
	tb    testing.TB
	bin   string
	port  int
	dir   string
	extra []string // more arguments, such as --cluster-enabled yes
	conf  string   // a configuration file to start with, if any

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start starts a redis-server on a free loopback port and stops it when the
// test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return startWith(tb, "")
}

// Binary returns the path of redis-server, or skips the test (fails it,
// under FUSEBOX_REQUIRE_REDIS=1) when there is none.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server not found on PATH; install it (Debian: apt-get install -y redis-server) to run this test"
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s (%s=1 makes this a failure)", msg, RequireEnv)
		}
		tb.Skip(msg)
	}
	return bin
}

func startWith(tb testing.TB, conf string, extra ...string) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: Binary(tb), dir: tb.TempDir(), conf: conf, extra: extra}
	s.port = freePort(tb)
	for i := 0; i < 20 && s.clustered() && !free(s.port+10000); i++ {
		// A Cluster node also listens on its port + 10000 (the cluster
		// bus): another server may hold that one.
		s.port = freePort(tb)
	}
	s.start()
	tb.Cleanup(s.Kill)
	return s
}

// StartCluster starts a Redis Cluster of n masters (n >= 3), each on a free
// loopback port, and returns their addresses once the cluster reports
// itself healthy.
func StartCluster(tb testing.TB, n int) []string {
	tb.Helper()
	return StartClusterWithReplicas(tb, n, 0, 2*time.Second).Addrs()
}

// Cluster is a Redis Cluster started for a test: its servers, which a test
// may Kill or Pause one by one.
type Cluster struct {
	// Nodes are the cluster's servers, in the order they were given to
	// redis-cli --cluster create. Which of them are masters is the
	// cluster's business (ask a node: ROLE, CLUSTER NODES).
	Nodes []*Server
}

// StartClusterWithReplicas starts a Redis Cluster of masters masters (at
// least 3), each with replicas replicas, every node on a free loopback port
// with the given cluster-node-timeout (how long a node may be silent before
// the others count it failed, and so what a failover waits for). It returns
// once every node reports cluster_state:ok and knows every other node, and
// every replica is in sync with its master; the servers stop when the test
// ends.
func StartClusterWithReplicas(tb testing.TB, masters, replicas int, nodeTimeout time.Duration) *Cluster {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Binary(tb) // skips or fails the same way
		tb.Skip("redis-cli not found on PATH; it comes with redis-server (Debian: apt-get install -y redis-server)")
	}
	if masters < 3 || replicas < 0 {
		tb.Fatalf("redistest: a cluster needs at least 3 masters and no negative count of replicas, got %d and %d", masters, replicas)
	}
	timeout := strconv.FormatInt(nodeTimeout.Milliseconds(), 10)
	c := &Cluster{}
	for range masters * (1 + replicas) {
		c.Nodes = append(c.Nodes, startWith(tb, "", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", timeout))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	known := "cluster_known_nodes:" + strconv.Itoa(len(c.Nodes))
	healthy := func() bool {
		for _, s := range c.Nodes {
			info := cliOutput(cli, s, "cluster", "info")
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, known) {
				return false
			}
			repl := cliOutput(cli, s, "info", "replication")
			if strings.Contains(repl, "role:slave") && (!strings.Contains(repl, "master_link_status:up") || !strings.Contains(repl, "master_sync_in_progress:0")) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for !healthy() {
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: the cluster on %v did not become healthy, every replica in sync, within 30s", c.Addrs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// cliOutput runs a redis-cli command against s and returns its output,
// empty if it failed.
func cliOutput(cli string, s *Server, args ...string) string {
	out, err := exec.Command(cli, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.port)}, args...)...).Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// Addrs returns the host:port of every node, in the order of Nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Server returns the node listening on addr (host:port), or nil.
func (c *Cluster) Server(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// StartSentinel starts a Redis Sentinel watching master under the name
// "fusebox", and returns its address and the master's name, for a failover
// client.
func StartSentinel(tb testing.TB, master *Server) (addr, name string) {
	tb.Helper()
	name = "fusebox"
	conf := tb.TempDir() + "/sentinel.conf"
	host, port, _ := net.SplitHostPort(master.Addr())
	body := fmt.Sprintf("sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 1000\n", name, host, port, name)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s := startWith(tb, conf, "--sentinel")
	return s.Addr(), name
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

func (s *Server) start() {
	s.tb.Helper()
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--protected-mode", "no",
	)
	if s.conf == "" {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	args = append(args, s.extra...)
	cmd := exec.Command(s.bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.tb.Fatalf("redistest: %v", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("redistest: starting redis-server: %v", err)
	}
	ready := make(chan struct{})
	var logMu sync.Mutex
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			log.WriteString(line + "\n")
			logMu.Unlock()
			if !signalled && (strings.Contains(line, "Ready to accept connections") || strings.Contains(line, "+monitor master")) {
				signalled = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logMu.Lock()
		defer logMu.Unlock()
		s.tb.Fatalf("redistest: redis-server did not become ready on port %d:\n%s", s.port, log.String())
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
}

// Kill stops the server at once (SIGKILL) and waits for it to exit. It does
// nothing if the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Pause stops the server's process (SIGSTOP): it keeps its connections and
// its port but answers nothing, as a hung Redis does, until Resume. The
// test's cleanup resumes it.
func (s *Server) Pause() {
	s.tb.Helper()
	s.signal(syscall.SIGSTOP)
	s.tb.Cleanup(s.Resume)
}

// Resume lets a paused server go on (SIGCONT). It does nothing to a server
// that is not paused.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Restart starts the server again on the same port, empty, after Kill.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	s.start()
}

// clustered reports whether the server runs as a Cluster node.
func (s *Server) clustered() bool {
	for _, a := range s.extra {
		if a == "--cluster-enabled" {
			return true
		}
	}
	return false
}

// free reports whether port is free on loopback now.
func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// String describes the server.
func (s *Server) String() string { return fmt.Sprintf("redis-server on %s", s.Addr()) }
