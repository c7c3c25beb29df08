package redisstore

import "github.com/redis/go-redis/v9"

// epochLua begins every script that reads a breaker's epoch: epoch(key)
// is the epoch, 0 when the key is absent, and an error reply naming the
// key when it holds anything but a whole number Lua counts exactly (up to
// 15 digits): one breaker's bad data fails that breaker's calls, never a
// status read of its store's other breakers, and a Reset repairs it
// (resetScript reads the epoch with pcall).
const epochLua = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local function epoch(k)
  local v = redis.call('GET', k)
  if not v then return 0 end
  if #v > 15 or not string.match(v, '^%d+$') then
    error({err = 'fusebox: bad data: the epoch key ' .. k .. ' holds ' .. string.format('%q', string.sub(v, 1, 40)) .. ', not an epoch (fusebox reset repairs it)'})
  end
  return tonumber(v)
end
local function since(k, e, period)
  local t = redis.call('TIME')
  redis.call('SET', k, e .. '\n' .. (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) .. '\n' .. period)
end
`

// script returns the script of body, which may call epoch and since
// (epochLua). since(key, epoch, period_ms) writes the since key, which
// every script that changes a breaker's state writes in the same step:
// "epoch\nat_ms\nperiod_ms", when (on Redis's clock) the epoch's state
// began, and the period or lease it began (0 for none), so that the
// command line can say since when a breaker is in its state.
func script(body string) *redis.Script { return redis.NewScript(epochLua + body) }

// Every script touches the keys of one breaker only, which share a hash tag,
// so each runs in one slot of a Redis Cluster. Times are remaining
// durations in milliseconds, read with PTTL or set with PX: Redis counts
// them down, not the replicas' clocks.

// failureScript counts failures of a consecutive policy (one, or those a
// process released while its last report was on its way) and sets the
// count's expiry in the same step. Under a quorum q above 1 it also counts
// the reporter's failures in the run (a hash that starts afresh with the
// run and expires with it), and sums the q-1 largest counts: what the
// quorum rule takes out of the run (rule.Largest, store.Policy.Trips).
//
// KEYS: failures, open, probe, epoch, reporters, opener. ARGV: ttl_ms,
// quorum, reporter, failures.
// Returns {count, reporters, epoch, open_pttl, probe_pttl, largest,
// opener}.
var failureScript = script(`
local k = tonumber(ARGV[4])
local n = redis.call('INCRBY', KEYS[1], k)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local r, top = 0, 0
local q = tonumber(ARGV[2])
if q > 1 then
  if n == k then
    redis.call('DEL', KEYS[5])
  end
  redis.call('HINCRBY', KEYS[5], ARGV[3], k)
  redis.call('PEXPIRE', KEYS[5], ARGV[1])
  local vals = redis.call('HVALS', KEYS[5])
  r = #vals
  local xs = {}
  for i = 1, #vals do xs[i] = tonumber(vals[i]) end
  table.sort(xs, function(a, b) return a > b end)
  for i = 1, math.min(q - 1, #xs) do top = top + xs[i] end
end
return {n, r, epoch(KEYS[4]), redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[3]), top, redis.call('GET', KEYS[6]) or ''}
`)

// windowScript adds failures to the current bucket of a window policy, and
// successes to the buckets they were counted in (by age, in buckets before
// the current one), bucketed by the server's clock, drops old buckets, and
// sums the window. Bucket i covers [i*width, (i+1)*width) milliseconds of
// Unix time, store.Policy's alignment (Register admits
// only whole milliseconds of width). The script only counts: whether the
// counts trip the breaker is decided in Go by the strategy's own rule
// (store.Policy.Trips), the one the local counter and the memory store use.
//
// Under a quorum q above 1 it keeps what each reporter reported (a hash:
// reporter -> "k:calls:failures[:prev_calls:prev_failures]", its counts in
// the span K of the window's length and in the one before, rule.Slide,
// the previous ones left out while both are zero; k is K's last decimal
// digit, which is enough: the hash expires two spans after its last
// report, and every report drops a reporter with nothing left in the
// window, so a record is read at most three spans after it was written,
// and one whose digit is not K's or K-1's is old), so that a reporter of
// a fleet of a thousand costs no more than 64 bytes of Redis's memory,
// adds this report, drops the reporters with nothing left in the window,
// counts those with failures in it, and sums the shares of the q-1 that
// reported the most failures (ties: calls), rule.Largest: what the quorum
// rule takes out of the window.
//
// KEYS: window, open, probe, epoch, reporters, opener. ARGV: width_ms,
// buckets, failures, quorum, reporter, then the successes of age 0, 1, ...
// Returns {calls, failures, reporters, epoch, open_pttl, probe_pttl,
// largest_calls, largest_failures, opener}.
var windowScript = script(`
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
for a = 0, math.min(#ARGV - 6, n - 1) do
  local s = tonumber(ARGV[6 + a])
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
local r, lc, lf = 0, 0, 0
local q = tonumber(ARGV[4])
if q > 1 then
  local span = math.floor(idx / n)
  local left = n - (idx - span * n) - 1
  -- A record's age in spans: 0 for the current span, 1 for the one
  -- before, anything else (older, or of a clock ahead) counts nothing.
  local function parse(rec)
    local k, cc, cf, pc, pf = string.match(rec, '^(%d):(%d+):(%d+):?(%d*):?(%d*)$')
    if not k then return -1, 0, 0, 0, 0 end
    return (span - tonumber(k)) % 10, tonumber(cc), tonumber(cf), tonumber(pc) or 0, tonumber(pf) or 0
  end
  local calls = fails
  for a = 6, #ARGV do calls = calls + tonumber(ARGV[a]) end
  if calls > 0 then
    local cc, cf, pc, pf = 0, 0, 0, 0
    local rec = redis.call('HGET', KEYS[5], ARGV[5])
    if rec then
      local age, cc0, cf0, pc0, pf0 = parse(rec)
      if age == 0 then
        cc, cf, pc, pf = cc0, cf0, pc0, pf0
      elseif age == 1 then
        pc, pf = cc0, cf0
      end
    end
    local v = string.format('%d:%d:%d', span % 10, cc + calls, cf + fails)
    if pc > 0 or pf > 0 then v = v .. string.format(':%d:%d', pc, pf) end
    redis.call('HSET', KEYS[5], ARGV[5], v)
    redis.call('PEXPIRE', KEYS[5], width * n * 2)
  end
  local all = redis.call('HGETALL', KEYS[5])
  local xs = {}
  for i = 1, #all, 2 do
    local age, cc, cf, pc, pf = parse(all[i + 1])
    local sc, sf = 0, 0
    if age == 0 then
      sc, sf = cc + math.floor(pc * left / n), cf + math.floor(pf * left / n)
    elseif age == 1 then
      sc, sf = math.floor(cc * left / n), math.floor(cf * left / n)
    end
    if sc == 0 and sf == 0 then
      redis.call('HDEL', KEYS[5], all[i])
    else
      if sf > 0 then r = r + 1 end
      xs[#xs + 1] = {sc, sf}
    end
  end
  table.sort(xs, function(a, b)
    if a[2] ~= b[2] then return a[2] > b[2] end
    return a[1] > b[1]
  end)
  for i = 1, math.min(q - 1, #xs) do
    lc, lf = lc + xs[i][1], lf + xs[i][2]
  end
end
return {c, f, r, epoch(KEYS[4]), redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[3]), lc, lf, redis.call('GET', KEYS[6]) or ''}
`)

// Every opening and closing advances the breaker's epoch (its own key,
// without expiry): odd while opened, even while closed. The scripts below
// act only in the epoch their caller decided in, so a late verdict or a
// late opening changes nothing, and every opening or closing deletes the
// probe lease, which so never outlives its epoch. A caller's epoch above
// the store's means the store lost its data (a restart, FLUSHALL): it is
// adopted.
//
// Who opened the breaker and why (store.Reason) is kept in the opener key
// for the opened epoch, as "epoch\nby\nwhy": the epoch says which opening
// it belongs to, so that a read of another epoch's status ignores it.
// Every opening sets it (or deletes it, without a reason); every closing
// and every forcing deletes it. Every script's reply that carries a status
// ends with the key's value ('' when absent), and an opening's message
// carries the reason: "opened|period_ms|epoch|length|reason name", the
// reason's length in bytes first, since a name may hold any character.

// openScript opens the breaker if it is still in the caller's closed epoch
// (or the store is behind it), for period, and announces it. A store
// behind the caller that is forced open (it lost its data, and an operator
// forced it since) stays forced: the forcing moves to the opened epoch
// above the caller's, announced, so that every process follows it.
//
// KEYS: open, probe, epoch, opener, since. ARGV: epoch, period_ms (0: the period
// is over already), channel, name, publish (the command that announces:
// PUBLISH or SPUBLISH; a shard channel is in the breaker's slot), reason
// ("by\nwhy", or empty for none).
// Returns {opened, epoch, open_pttl, probe_pttl, opener}. An open_pttl of
// -1 (a marker without expiry) is a forced opening, in every script's
// reply.
var openScript = script(`
local e = epoch(KEYS[3])
local c = tonumber(ARGV[1])
if c > e and c % 2 == 0 and e % 2 == 1 and redis.call('PTTL', KEYS[1]) == -1 then
  e = c + 1
  redis.call('SET', KEYS[3], e)
  redis.call('DEL', KEYS[2], KEYS[4])
  since(KEYS[5], e, 0)
  redis.call(ARGV[5], ARGV[3], 'forced|0|' .. e .. '|' .. ARGV[4])
  return {0, e, -1, 0, ''}
end
if c % 2 == 1 or c < e or (c == e and e % 2 == 1) then
  return {0, e, redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2]), redis.call('GET', KEYS[4]) or ''}
end
e = c + 1
redis.call('SET', KEYS[3], e)
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[2])
else
  redis.call('DEL', KEYS[1])
end
redis.call('DEL', KEYS[2])
local o = ''
if ARGV[6] ~= '' then
  o = e .. '\n' .. ARGV[6]
  redis.call('SET', KEYS[4], o)
else
  redis.call('DEL', KEYS[4])
end
since(KEYS[5], e, ARGV[2])
redis.call(ARGV[5], ARGV[3], 'opened|' .. ARGV[2] .. '|' .. e .. '|' .. #ARGV[6] .. '|' .. ARGV[6] .. ARGV[4])
return {1, e, tonumber(ARGV[2]), 0, o}
`)

// probeScript takes the probe lease (SET PX, the holder's token), if the
// breaker is in the caller's opened epoch, its open period is over and it
// is not forced open (an open marker without expiry, PTTL -1). A caller ahead of
// the store (which lost its data) re-seeds the epoch and holds the fleet
// open for one lease, so that a probe in flight from before the loss ends
// before another starts; a caller in a closed epoch ahead of the store
// makes it that closed epoch, with no open marker (which in a closed epoch
// would be a slow start nothing earned); and a forcing made since the loss
// stands, moved to the opened epoch above the caller's (store.Memory's
// rules, which the conformance test holds this script to).
//
// A lease taken is announced ("leased|lease_ms|epoch|name"), so that the
// other processes ask for none while it runs.
//
// KEYS: open, probe, epoch, opener, since. ARGV: token, lease_ms, epoch,
// channel, name, publish.
// Returns {won, epoch, open_pttl, probe_pttl, opener}.
// A marker or a lease with less than a millisecond left (PTTL 0) counts as
// expired.
var probeScript = script(`
local e = epoch(KEYS[3])
local c = tonumber(ARGV[3])
if c > e then
  redis.call('DEL', KEYS[2], KEYS[4])
  if e % 2 == 1 and redis.call('PTTL', KEYS[1]) == -1 then
    e = c + 1 + c % 2
    redis.call('SET', KEYS[3], e)
    since(KEYS[5], e, 0)
    redis.call(ARGV[6], ARGV[4], 'forced|0|' .. e .. '|' .. ARGV[5])
    return {0, e, -1, 0, ''}
  end
  redis.call('SET', KEYS[3], c)
  if c % 2 == 0 then
    redis.call('DEL', KEYS[1])
    since(KEYS[5], c, 0)
    return {0, c, 0, 0, ''}
  end
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[2])
  since(KEYS[5], c, ARGV[2])
  return {0, c, tonumber(ARGV[2]), 0, ''}
end
local o = redis.call('PTTL', KEYS[1])
local p = redis.call('PTTL', KEYS[2])
if c < e or e % 2 == 0 or o > 0 or o == -1 or p > 0 then
  return {0, e, o, p, redis.call('GET', KEYS[4]) or ''}
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
since(KEYS[5], e, ARGV[2])
redis.call(ARGV[6], ARGV[4], 'leased|' .. ARGV[2] .. '|' .. e .. '|' .. ARGV[5])
return {1, e, 0, tonumber(ARGV[2]), redis.call('GET', KEYS[4]) or ''}
`)

// resolveScript applies a probe's verdict if, and only if, the caller still
// holds the lease of its epoch. A success with a reopen_ms above zero
// starts the fleet's slow start: in a closed epoch, the open marker is the
// slow start, counted down by Redis as an open period is, and gone with it
// (every other script reads it as an opening only in an opened epoch).
//
// KEYS: probe, open, failures, window, epoch, reporters, opener, since.
// ARGV: token, verdict ("s", "f" or "i"), reopen_ms, channel, name, epoch,
// publish, reason (of a failure: "by\nwhy", or empty for none).
// Returns {applied, epoch, open_pttl, probe_pttl, opener}.
var resolveScript = script(`
local e = epoch(KEYS[5])
if e ~= tonumber(ARGV[6]) or redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0, e, redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[7]) or ''}
end
redis.call('DEL', KEYS[1])
if ARGV[2] == 's' then
  e = redis.call('INCR', KEYS[5])
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[7])
  if tonumber(ARGV[3]) > 0 then
    redis.call('SET', KEYS[2], 'slow', 'PX', ARGV[3])
  end
  since(KEYS[8], e, 0)
  redis.call(ARGV[7], ARGV[4], 'closed|' .. ARGV[3] .. '|' .. e .. '|' .. ARGV[5])
elseif ARGV[2] == 'f' then
  e = redis.call('INCRBY', KEYS[5], 2)
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
  if ARGV[8] ~= '' then
    redis.call('SET', KEYS[7], e .. '\n' .. ARGV[8])
  else
    redis.call('DEL', KEYS[7])
  end
  since(KEYS[8], e, ARGV[3])
  redis.call(ARGV[7], ARGV[4], 'opened|' .. ARGV[3] .. '|' .. e .. '|' .. #ARGV[8] .. '|' .. ARGV[8] .. ARGV[5])
else
  since(KEYS[8], e, 0)
  redis.call(ARGV[7], ARGV[4], 'released|0|' .. e .. '|' .. ARGV[5])
end
return {1, e, redis.call('PTTL', KEYS[2]), 0, redis.call('GET', KEYS[7]) or ''}
`)

// resetScript closes the breaker whatever its state, moving the epoch to the
// next closed one, and announces it. An epoch key holding bad data is
// taken for epoch 0: the reset repairs the breaker (its keys are
// overwritten or deleted, whatever their type).
//
// KEYS: open, probe, failures, window, epoch, reporters, opener, since.
// ARGV: channel, name, publish.
// Returns the epoch.
var resetScript = script(`
local ok, e = pcall(epoch, KEYS[5])
if not ok then e = 0 end
e = e + 2 - e % 2
redis.call('SET', KEYS[5], e)
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[7])
since(KEYS[8], e, 0)
redis.call(ARGV[3], ARGV[1], 'reset|0|' .. e .. '|' .. ARGV[2])
return e
`)

// forceScript forces the breaker open until a reset: the epoch moves to the
// next opened one (from an opened epoch too, which fences a probe in flight),
// the lease goes, and the open marker is set without expiry. A breaker
// already forced is left as it is.
//
// KEYS: open, probe, epoch, opener, since. ARGV: channel, name, publish.
// Returns {epoch, open_pttl, probe_pttl}.
var forceScript = script(`
local e = epoch(KEYS[3])
if e % 2 == 1 and redis.call('PTTL', KEYS[1]) == -1 then
  return {e, -1, 0}
end
e = e + 1 + e % 2
redis.call('SET', KEYS[3], e)
redis.call('SET', KEYS[1], 'forced')
redis.call('DEL', KEYS[2], KEYS[4])
since(KEYS[5], e, 0)
redis.call(ARGV[3], ARGV[1], 'forced|0|' .. e .. '|' .. ARGV[2])
return {e, -1, 0}
`)

// successScript ends the shared run of consecutive failures and its
// reporters, and returns the breaker's status.
//
// KEYS: failures, reporters, open, probe, epoch, opener.
// Returns {epoch, open_pttl, probe_pttl, opener}.
var successScript = script(`
redis.call('DEL', KEYS[1], KEYS[2])
return {epoch(KEYS[5]), redis.call('PTTL', KEYS[3]), redis.call('PTTL', KEYS[4]), redis.call('GET', KEYS[6]) or ''}
`)

// statusScript reads a breaker's status in one atomic step: a resolve
// cannot come between the reads of its keys.
//
// KEYS: epoch, open, probe, opener.
// Returns {epoch, open_pttl, probe_pttl, opener}: the lease and the
// opener of an opened epoch only (no closed epoch has either: every
// closing deletes them), so that a closed breaker, an idle fleet's, costs
// two reads.
var statusScript = script(`
local e = epoch(KEYS[1])
if e % 2 == 0 then return {e, redis.call('PTTL', KEYS[2]), -2, ''} end
return {e, redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[3]), redis.call('GET', KEYS[4]) or ''}
`)
