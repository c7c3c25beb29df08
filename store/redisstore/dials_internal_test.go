package redisstore

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDialsExplain(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	refused := fmt.Errorf("dial tcp 127.0.0.1:1: connect: %w", syscall.ECONNREFUSED)
	deadline := fmt.Errorf("redisstore: status of 1 breakers: %w", context.DeadlineExceeded)
	other := errors.New("ERR unknown command")
	tests := []struct {
		name    string
		d       *dials
		err     error
		now     time.Time
		explain bool // the dial's error is added
	}{
		{"no hook (a client not of go-redis's)", nil, deadline, t0, false},
		{"no error", &dials{err: refused, at: t0}, nil, t0, false},
		{"an error of Redis's own", &dials{err: refused, at: t0}, other, t0, false},
		{"a deadline, no failed dial", &dials{}, deadline, t0, false},
		{"a deadline, the last dial failed just now", &dials{err: refused, at: t0}, deadline, t0, true},
		{"a cancellation, the last dial failed", &dials{err: refused, at: t0}, context.Canceled, t0.Add(time.Second), true},
		{"a deadline, the last dial failed dialFresh ago", &dials{err: refused, at: t0}, deadline, t0.Add(dialFresh), true},
		{"a deadline, the failed dial is older", &dials{err: refused, at: t0}, deadline, t0.Add(dialFresh + time.Millisecond), false},
		{"the error is the dial's already", &dials{err: context.DeadlineExceeded, at: t0}, deadline, t0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.d.explain(tt.err, tt.now)
			if !tt.explain {
				assert.Equal(t, tt.err, got)
				return
			}
			assert.ErrorIs(t, got, tt.err)
			assert.ErrorIs(t, got, syscall.ECONNREFUSED)
			assert.Equal(t, tt.err.Error()+" (the client cannot connect: "+refused.Error()+")", got.Error())
		})
	}
}
