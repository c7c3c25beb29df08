package boltstore_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/fusebox-go/fusebox/replicate/boltstore"
)

// holderEnv, set to a path, makes TestOpenHeldByAnotherProcess the
// process that holds that file: it opens it, says "open" and waits for
// its standard input to close.
const holderEnv = "FUSEBOX_BOLTSTORE_HOLDER"

// A file that another process has open is refused with an error that says
// so, and names the file, once the lock has not come free within the
// timeout: bbolt's own error says only "timeout".
func TestOpenHeldByAnotherProcess(t *testing.T) {
	if path := os.Getenv(holderEnv); path != "" {
		holdUntilStdinCloses(path)
		return
	}
	defer boltstore.SetOpenTimeout(50 * time.Millisecond)()
	path := filepath.Join(t.TempDir(), "primary.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenHeldByAnotherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), holderEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	running := true
	t.Cleanup(func() {
		if running { // the test failed before it ended the holder
			_ = stdin.Close()
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the holder process's first line")
	require.Equal(t, "open\n", line)

	_, err = boltstore.Open(path)
	assert.ErrorIs(t, err, bolterrors.ErrTimeout)
	if assert.Error(t, err, "a file another process holds") {
		assert.Contains(t, err.Error(), "the file is in use by another process")
		assert.Contains(t, err.Error(), path)
	}

	require.NoError(t, stdin.Close())
	running = false
	require.NoError(t, cmd.Wait(), "the holder process")
	open(t, path) // the file is free once the holder has closed it
}

// holdUntilStdinCloses is the holder process.
func holdUntilStdinCloses(path string) {
	s, err := boltstore.Open(path)
	if err != nil {
		panic(err)
	}
	os.Stdout.WriteString("open\n")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	if err := s.Close(); err != nil {
		panic(err)
	}
}

// bbolt's lock (flock) is per open file, so another Store of the same
// process is refused too, with the same error.
func TestOpenHeldByAnotherStore(t *testing.T) {
	defer boltstore.SetOpenTimeout(50 * time.Millisecond)()
	path := filepath.Join(t.TempDir(), "primary.db")
	open(t, path)
	_, err := boltstore.Open(path)
	assert.ErrorIs(t, err, bolterrors.ErrTimeout)
	if assert.Error(t, err, "a file another Store holds") {
		assert.Contains(t, err.Error(), "the file is in use by another process")
		assert.Contains(t, err.Error(), path)
	}
}
