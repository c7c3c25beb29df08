package redisstore

import "github.com/redis/go-redis/v9"

// Every script touches the keys of one breaker only, which share a hash tag,
// so each runs in one slot of a Redis Cluster. Times are remaining
// durations in milliseconds, read with PTTL or set with PX: Redis counts
// them down, not the replicas' clocks.

// failureScript counts one failure of a consecutive policy and sets the
// count's expiry in the same step.
//
// KEYS: failures, open. ARGV: ttl_ms. Returns {count, open_pttl}.
var failureScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {n, redis.call('PTTL', KEYS[2])}
`)

// windowScript adds failures to the current bucket of a window policy, and
// successes to the buckets they were counted in (by age, in buckets before
// the current one), bucketed by the server's clock, drops old buckets, and
// sums the window. Bucket i covers [i*width, (i+1)*width) milliseconds of
// Unix time, breaker.TimeWindow.Bucket's alignment (store.PolicyOf admits
// only whole milliseconds of width). The script only counts: whether the
// counts trip the breaker is decided in Go by the strategy's own rule
// (store.Policy.Trips), the one the local counter and the memory store use.
//
// KEYS: window, open. ARGV: width_ms, buckets, failures, then the successes
// of age 0, 1, ... Returns {calls, failures, open_pttl}.
var windowScript = redis.NewScript(`
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local width = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local idx = math.floor(now / width)
local fails = tonumber(ARGV[3])
local touched = false
if fails > 0 then
  redis.call('HINCRBY', KEYS[1], string.format('c%d', idx), fails)
  redis.call('HINCRBY', KEYS[1], string.format('f%d', idx), fails)
  touched = true
end
for a = 0, math.min(#ARGV - 4, n - 1) do
  local s = tonumber(ARGV[4 + a])
  if s > 0 then
    redis.call('HINCRBY', KEYS[1], string.format('c%d', idx - a), s)
    touched = true
  end
end
if touched then
  redis.call('PEXPIRE', KEYS[1], width * n * 2)
end
local c, f = 0, 0
for i = idx - n + 1, idx do
  c = c + tonumber(redis.call('HGET', KEYS[1], string.format('c%d', i)) or 0)
  f = f + tonumber(redis.call('HGET', KEYS[1], string.format('f%d', i)) or 0)
end
for i = idx - 2 * n, idx - n do
  redis.call('HDEL', KEYS[1], string.format('c%d', i), string.format('f%d', i))
end
return {c, f, redis.call('PTTL', KEYS[2])}
`)

// openScript sets the open marker only if it is absent, so the first
// opener's period stands, and announces it.
//
// KEYS: open. ARGV: period_ms, channel, name.
// Returns {1, period_ms} if this call opened, else {0, open_pttl}.
//
// A marker with less than a millisecond left (PTTL 0) counts as expired.
var openScript = redis.NewScript(`
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then
    return {0, left}
  end
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
redis.call('PUBLISH', ARGV[2], 'opened|' .. ARGV[1] .. '|' .. ARGV[3])
return {1, tonumber(ARGV[1])}
`)

// probeScript takes the probe lease with SET NX PX, unless the breaker is
// still open.
//
// KEYS: open, probe. ARGV: token, lease_ms.
// Returns {won, open_pttl, probe_pttl}.
// A lease with less than a millisecond left counts as expired.
var probeScript = redis.NewScript(`
local o = redis.call('PTTL', KEYS[1])
if o > 0 then
  return {0, o, redis.call('PTTL', KEYS[2])}
end
if not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local left = redis.call('PTTL', KEYS[2])
  if left > 0 then
    return {0, 0, left}
  end
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
end
return {1, 0, tonumber(ARGV[2])}
`)

// resolveScript applies a probe's verdict if, and only if, the caller still
// holds the lease.
//
// KEYS: probe, open, failures, window.
// ARGV: token, verdict ("s", "f" or "i"), reopen_ms, channel, name.
// Returns 1 if the lease was held, else 0.
var resolveScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[2] == 's' then
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
  redis.call('PUBLISH', ARGV[4], 'closed|0|' .. ARGV[5])
elseif ARGV[2] == 'f' then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
  redis.call('PUBLISH', ARGV[4], 'opened|' .. ARGV[3] .. '|' .. ARGV[5])
else
  redis.call('PUBLISH', ARGV[4], 'released|0|' .. ARGV[5])
end
return 1
`)
