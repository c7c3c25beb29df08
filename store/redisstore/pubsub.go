package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pubsub says where a Store announces the changes of its breakers, and
// where its watch hears them. Every process of a fleet must announce and
// hear alike: PubsubAuto decides the same way for every process on the
// same servers.
type Pubsub uint8

const (
	// PubsubAuto, the zero value, is PubsubSharded on a Cluster client
	// whose masters all run Redis 7 or later, and PubsubClassic otherwise
	// (a single server, Sentinel, an older Cluster). The Store finds out
	// once, with INFO server on every master, at its first call that needs
	// to know; a failure to find out fails that call, and the next one
	// asks again.
	PubsubAuto Pubsub = iota
	// PubsubClassic announces every change on one channel,
	// "prefix:changes", with PUBLISH. A Cluster broadcasts each message
	// over its bus to every node, masters and replicas. Pin it while a
	// fleet on a Cluster moves from a version of fusebox that knows only
	// this channel, and drop the pin once every process runs this one.
	PubsubClassic
	// PubsubSharded announces each change on the shard channel of its
	// breaker's slot with SPUBLISH (Redis 7): the message reaches only the
	// master of that slot and its replicas. It needs a Cluster client.
	PubsubSharded
)

// String returns "auto", "classic" or "sharded".
func (p Pubsub) String() string {
	switch p {
	case PubsubAuto:
		return "auto"
	case PubsubClassic:
		return "classic"
	case PubsubSharded:
		return "sharded"
	}
	return "pubsub(" + strconv.Itoa(int(p)) + ")"
}

// What a Store found of its servers' pub/sub, in Store.found.
const (
	unknown int32 = iota
	classic
	sharded
)

// Sharded reports whether the Store announces changes on shard channels
// (ShardChannel) rather than on the classic channel (Channel), finding out
// from the servers if Options.Pubsub is PubsubAuto and it has not yet.
func (s *Store) Sharded(ctx context.Context) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	switch s.found.Load() {
	case classic:
		return false, nil
	case sharded:
		return true, nil
	}
	ok, err := s.detect(ctx)
	if err != nil {
		s.reload.after(err, time.Now())
		return false, fmt.Errorf("redisstore: find whether the cluster's masters have sharded pub/sub (Redis 7): %w", err)
	}
	if ok {
		s.found.Store(sharded)
	} else {
		s.found.Store(classic)
	}
	return ok, nil
}

// detect reports whether every master of the Cluster runs Redis 7 or
// later. Concurrent first calls may each ask; they find the same.
func (s *Store) detect(ctx context.Context) (bool, error) {
	cc := s.client.(*redis.ClusterClient) // New settled every other case
	var old atomic.Bool
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		if major(info) < 7 {
			old.Store(true)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return !old.Load(), nil
}

// major returns the major version in the reply of INFO server, or 0.
func major(info string) int {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			m, _, _ := strings.Cut(v, ".")
			n, _ := strconv.Atoi(m)
			return n
		}
	}
	return 0
}

// ShardChannel returns the shard channel on which the changes of breaker
// name are announced when the Store announces on shard channels: the
// channel of the breaker's slot, "prefix:changes:{tag}", whose tag is the
// smallest non-negative integer, in decimal, that hashes to that slot.
// Every breaker of a slot shares it. It is for inspection and tests.
func (s *Store) ShardChannel(name string) string {
	return slotChannel(s.prefix, keySlot(s.Key(name, "epoch")))
}

// announce returns the command a script announces a change of breaker
// name with, and its channel.
func (s *Store) announce(ctx context.Context, name string) (cmd, channel string, err error) {
	sh, err := s.Sharded(ctx)
	if err != nil {
		return "", "", err
	}
	if sh {
		return "SPUBLISH", s.ShardChannel(name), nil
	}
	return "PUBLISH", s.channel, nil
}
