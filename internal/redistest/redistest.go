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
	s.start()
	tb.Cleanup(s.Kill)
	return s
}

// StartCluster starts a Redis Cluster of n masters (n >= 3), each on a free
// loopback port, and returns their addresses once the cluster reports
// itself healthy.
func StartCluster(tb testing.TB, n int) []string {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Binary(tb) // skips or fails the same way
		tb.Skip("redis-cli not found on PATH; it comes with redis-server (Debian: apt-get install -y redis-server)")
	}
	var addrs []string
	for range n {
		s := startWith(tb, "", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok := true
		for _, a := range addrs {
			host, port, _ := net.SplitHostPort(a)
			out, err := exec.Command(cli, "-h", host, "-p", port, "cluster", "info").Output()
			if err != nil || !strings.Contains(string(out), "cluster_state:ok") {
				ok = false
				break
			}
		}
		if ok {
			return addrs
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: the cluster on %v did not become healthy within 15s", addrs)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
