package boltstore

// Commits returns how many transactions s has committed: each one a disk
// sync.
func Commits(s *Store) uint64 { return s.commits.Load() }
