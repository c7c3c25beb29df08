package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// ProcessKey returns the key under which the process named name announces
// itself (Announce), for inspection and tests.
func (s *Store) ProcessKey(name string) string { return s.prefix + ":process:{" + name + "}" }

// Announce records that the process named name is live, in its life life
// (a string of the manager's own, new at each start), for ttl, and returns
// the life that announced itself under that name last, within its ttl, or
// "" if none did. A manager announces itself every five Resyncs: a life other
// than its own, once it announced itself before, is another live process
// of its name (fusebox's manager logs it). One round trip of a GET and a
// SET; a process name's key expires ttl after its last announcement.
func (s *Store) Announce(ctx context.Context, name, life string, ttl time.Duration) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	k := s.ProcessKey(name)
	var get *redis.StringCmd
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, k)
		p.Set(ctx, k, life, max(ttl, time.Millisecond))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", s.fail("announce", name, err)
	}
	prev, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return prev, err
}
