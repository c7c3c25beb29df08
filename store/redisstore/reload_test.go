package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused"}}
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("redisstore: open %q: %w", "svc", context.Canceled), false},
		{errors.New("ERR unknown command 'FOO'"), false},
		{errors.New("NOSCRIPT No matching script"), false},
		{io.EOF, true},
		{io.ErrUnexpectedEOF, true},
		{syscall.ECONNREFUSED, true},
		{syscall.ECONNRESET, true},
		{refused, true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("redisstore: status of 3 breakers: %w", context.DeadlineExceeded), true},
		{errors.New("CLUSTERDOWN The cluster is down"), true},
		{errors.New("READONLY You can't write against a read only replica."), true},
		{errors.New("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{errors.New("MASTERDOWN Link with MASTER is down"), true},
		{errors.New("MOVED 3999 127.0.0.1:6381"), true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, unreachable(tt.err), "unreachable(%v)", tt.err)
	}
}

func TestReloaderRate(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var reloads int
	r := &reloader{reload: func() { reloads++ }}
	steps := []struct {
		at   time.Duration
		err  error
		want bool
	}{
		{0, errors.New("ERR wrong number of arguments"), false},
		{0, io.EOF, true},
		{time.Millisecond, io.EOF, false},
		{reloadEvery - time.Millisecond, syscall.ECONNREFUSED, false},
		{reloadEvery, syscall.ECONNREFUSED, true},
		{reloadEvery + 10*time.Millisecond, context.Canceled, false},
		{3 * reloadEvery, context.Canceled, false},
		{3 * reloadEvery, errors.New("CLUSTERDOWN The cluster is down"), true},
	}
	want := 0
	for i, s := range steps {
		got := r.after(s.err, t0.Add(s.at))
		if s.want {
			want++
		}
		assert.Equal(t, s.want, got, "step %d: after(%v) at t0+%v", i, s.err, s.at)
		assert.Equal(t, want, reloads, "step %d: reloads asked", i)
	}
	var none *reloader
	assert.False(t, none.after(io.EOF, t0), "a Store on a client other than a Cluster client reloads nothing")
}

// Of failures at one instant on many goroutines, one asks for a reload.
func TestReloaderConcurrent(t *testing.T) {
	var reloads atomic.Int64
	r := &reloader{reload: func() { reloads.Add(1) }}
	now := time.Unix(1_000_000, 0)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.after(io.EOF, now)
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(1), reloads.Load())
}
