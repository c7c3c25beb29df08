package boltstore

import "time"

// Commits returns how many transactions s has committed: each one a disk
// sync.
func Commits(s *Store) uint64 { return s.commits.Load() }

// SetOpenTimeout makes Open wait d for a held file's lock instead of
// OpenTimeout, until the returned function restores it.
func SetOpenTimeout(d time.Duration) (restore func()) {
	old := openTimeout
	openTimeout = d
	return func() { openTimeout = old }
}
