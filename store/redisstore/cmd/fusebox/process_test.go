package main

import (
	"bufio"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/redistest"
	"github.com/fusebox-go/fusebox/manager"
)

// build builds the command into a temporary directory and returns the
// binary's path.
func build(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build the binary with")
	}
	bin := filepath.Join(t.TempDir(), "fusebox")
	out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// exitCode runs the binary to its end and returns its exit status and
// stderr.
func exitCode(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), stderr.String()
	}
	require.NoError(t, err, "running %s %q", bin, args)
	return 0, stderr.String()
}

// The built binary, run as a process of its own, exits 0, 1 and 2 as the
// usage says, and a watch ends with 0 on SIGINT and on SIGTERM.
func TestProcess(t *testing.T) {
	srv := redistest.Start(t)
	bin := build(t)
	p := startPeer(t, newClient(srv.Addr()), "payments", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	p.trip(t)

	code, stderr := exitCode(t, bin, "-redis", srv.Addr(), "list")
	assert.Equal(t, 0, code, "list: %s", stderr)
	code, stderr = exitCode(t, bin, "-redis", srv.Addr(), "show", "paymnts")
	assert.Equal(t, 1, code, "show of an unknown breaker")
	assert.Contains(t, stderr, `no such breaker "paymnts"`)
	code, stderr = exitCode(t, bin, "-redis", srv.Addr(), "lsit")
	assert.Equal(t, 2, code, "an unknown command")
	assert.Contains(t, stderr, "Usage: fusebox")
	code, _ = exitCode(t, bin, "-h")
	assert.Equal(t, 0, code, "-h")

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := exec.Command(bin, "-redis", srv.Addr(), "watch")
		errs, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		line, err := bufio.NewReader(errs).ReadString('\n')
		require.NoError(t, err)
		require.Contains(t, line, "watching fusebox:changes", "the watch says it is subscribed")
		require.NoError(t, cmd.Process.Signal(sig))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			assert.NoError(t, err, "exit of a watch ended by %v", sig)
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("a watch did not end within 10s of %v", sig)
		}
	}
}
