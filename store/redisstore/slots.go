package redisstore

import (
	"strconv"
	"strings"
	"sync"
)

// slots is the number of hash slots of a Redis Cluster.
const slots = 16384

// keySlot returns the hash slot of key, by the Cluster's rule: the CRC16
// of the key's hash tag (what lies between its first '{' and the first '}'
// after it, if that is not empty), or of the whole key, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % slots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, no reflection, initial value
// 0), the checksum a Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c ^= uint16(s[i]) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
	}
	return c
}

// slotTags holds, for each slot, the hash tag of its shard channel: the
// smallest non-negative integer, written in decimal, whose CRC16 falls in
// the slot. The rule is part of the protocol (every process of a fleet
// must name a slot's channel alike), so it never changes.
var slotTags = sync.OnceValue(func() *[slots]uint32 {
	var tags [slots]uint32
	var found [slots]bool
	left := slots
	var buf []byte
	for n := uint32(0); left > 0; n++ {
		buf = strconv.AppendUint(buf[:0], uint64(n), 10)
		s := int(crc16(string(buf))) % slots
		if !found[s] {
			found[s], tags[s] = true, n
			left--
		}
	}
	return &tags
})

// slotChannel returns the shard channel of slot under prefix:
// "prefix:changes:{tag}", whose tag hashes to slot, so that a script
// running in that slot may publish on it.
func slotChannel(prefix string, slot int) string {
	return prefix + ":changes:{" + strconv.FormatUint(uint64(slotTags()[slot]), 10) + "}"
}
