package redisstore

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/internal/redistest"
)

func TestCRC16(t *testing.T) {
	// The check value of CRC-16/XMODEM, which the Cluster specification
	// gives too.
	assert.Equal(t, uint16(0x31c3), crc16("123456789"))
	assert.Equal(t, uint16(0), crc16(""))
}

// keySlot and every slot's shard channel agree with CLUSTER KEYSLOT of a
// real server: the slot a script runs in is the slot of its channel.
func TestSlotsAgreeWithTheServer(t *testing.T) {
	addrs := redistest.StartCluster(t, 3)
	c := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer c.Close()
	ctx := context.Background()
	s := New(c, Options{Prefix: "p"})
	keys := []string{"", "a", "{", "}", "{}", "{}x", "x{}", "{a}", "a{b}c", "a{b", "a}b", "{a}{b}", "{{a}}", "p:{a}b}:open", "été", strings.Repeat("n", 1000)}
	for _, name := range []string{"svc", "a}b", "a{b", "{x}", "", "été", "x:y}:z"} {
		keys = append(keys, s.Key(name, "epoch"), s.ShardChannel(name))
	}
	for _, k := range keys {
		want, err := c.ClusterKeySlot(ctx, k).Result()
		require.NoError(t, err, "CLUSTER KEYSLOT %q", k)
		assert.Equal(t, int(want), keySlot(k), "the slot of %q", k)
	}
	for _, name := range []string{"svc", "a}b", "a{b", "x:y}:z"} {
		assert.Equal(t, keySlot(s.Key(name, "epoch")), keySlot(s.ShardChannel(name)), "breaker %q and its shard channel %s", name, s.ShardChannel(name))
	}

	pipe := c.Pipeline()
	cmds := make([]*redis.IntCmd, slots)
	for slot := range slots {
		cmds[slot] = pipe.ClusterKeySlot(ctx, slotChannel("fusebox", slot))
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	wrong := 0
	for slot, cmd := range cmds {
		if int(cmd.Val()) != slot {
			wrong++
		}
	}
	assert.Zero(t, wrong, "slots whose shard channel the server puts in another slot")
	assert.Equal(t, "fusebox:changes:{0}", slotChannel("fusebox", keySlot("0")), "the tag of a slot is the smallest integer that hashes to it")
}
