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
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns a missing redis-server
// from a skip into a failure.
const RequireEnv = "FUSEBOX_REQUIRE_REDIS"

// Server is a redis-server process started for a test.
type Server struct {
	tb   testing.TB
	bin  string
	port int
	dir  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start starts a redis-server on a free loopback port and stops it when the
// test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server not found on PATH; install it (Debian: apt-get install -y redis-server) to run this test"
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s (%s=1 makes this a failure)", msg, RequireEnv)
		}
		tb.Skip(msg)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	s.port = freePort(tb)
	s.start()
	tb.Cleanup(s.Kill)
	return s
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

func (s *Server) start() {
	s.tb.Helper()
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--protected-mode", "no",
	)
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
			if !signalled && strings.Contains(line, "Ready to accept connections") {
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
