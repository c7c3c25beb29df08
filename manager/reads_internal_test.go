package manager

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNextChunk(t *testing.T) {
	const timeout = 400 * time.Millisecond
	ms := time.Millisecond
	for _, c := range []struct {
		chunk, n int
		took     time.Duration
		failed   bool
		want     int
	}{
		{64, 64, 10 * ms, false, 128},                             // full and fast: doubles
		{64, 64, 49 * ms, false, 128},                             // under an eighth of the deadline
		{64, 64, 50 * ms, false, 64},                              // an eighth: stays
		{64, 64, 200 * ms, false, 64},                             // half: stays
		{64, 64, 201 * ms, false, 32},                             // over half: halves
		{64, 10, ms, false, 64},                                   // fast, but the queue had fewer: no evidence to grow on
		{64, 64, ms, true, 32},                                    // failed fast (refused): halves
		{64, 10, timeout, true, 32},                               // failed at the deadline
		{maxReadChunk, maxReadChunk, ms, false, maxReadChunk},     // never past the largest
		{minReadChunk, minReadChunk, timeout, true, minReadChunk}, // never under the smallest
		{minReadChunk + 1, 5, timeout, true, minReadChunk},
		{3 * minReadChunk, 3 * minReadChunk, 0, false, 6 * minReadChunk},
	} {
		t.Run(fmt.Sprintf("%d/%d/%v/%v", c.chunk, c.n, c.took, c.failed), func(t *testing.T) {
			assert.Equal(t, c.want, nextChunk(c.chunk, c.n, c.took, timeout, c.failed))
		})
	}
}

func TestReadPause(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		fails    int
		lo, hi   time.Duration // r = 0 and r -> 1
		midpoint time.Duration // r = 0.5
	}{
		{1, 25 * ms, 50 * ms, 37500 * time.Microsecond},
		{2, 50 * ms, 100 * ms, 75 * ms},
		{3, 100 * ms, 200 * ms, 150 * ms},
		{7, 1600 * ms, 3200 * ms, 2400 * ms},
		{8, maxReadPause / 2, maxReadPause, 3750 * ms}, // 6.4s, capped
		{16, maxReadPause / 2, maxReadPause, 3750 * ms},
		{1 << 20, maxReadPause / 2, maxReadPause, 3750 * ms},
	} {
		t.Run(fmt.Sprint(c.fails), func(t *testing.T) {
			assert.Equal(t, c.lo, readPause(c.fails, 0))
			assert.Equal(t, c.midpoint, readPause(c.fails, 0.5))
			hi := readPause(c.fails, 0.999999999)
			assert.True(t, hi <= c.hi && hi > c.hi-ms, "%v, want just under %v", hi, c.hi)
		})
	}
}
