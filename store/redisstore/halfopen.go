package redisstore

import (
	"context"

	"github.com/fusebox-go/fusebox/store"
)

// halfOpenScript ends the open period of the caller's opened epoch, if
// the breaker is still in it, open (an open marker with time left), not
// forced (a marker without expiry) and with no lease held: the epoch
// moves to the next opened one, as a failed probe's reopening moves it,
// the open marker goes (the period is over), the opener's reason is kept
// for the new epoch, and the change is announced as an opening of that
// epoch with a period of zero, which every process follows into
// half_open (older ones too: it is an opening they know).
//
// KEYS: open, probe, epoch, opener, since. ARGV: epoch, channel, name,
// publish.
// Returns {applied, epoch, open_pttl, probe_pttl, opener}.
var halfOpenScript = script(`
local e = epoch(KEYS[3])
local o = redis.call('PTTL', KEYS[1])
local p = redis.call('PTTL', KEYS[2])
local op = redis.call('GET', KEYS[4]) or ''
if tonumber(ARGV[1]) ~= e or e % 2 == 0 or o <= 0 or p > 0 then
  return {0, e, o, p, op}
end
local why = ''
local prefix = e .. '\n'
if string.sub(op, 1, #prefix) == prefix then
  why = string.sub(op, #prefix + 1)
end
e = e + 2
redis.call('SET', KEYS[3], e)
redis.call('DEL', KEYS[1], KEYS[2])
local kept = ''
if why ~= '' then
  kept = e .. '\n' .. why
  redis.call('SET', KEYS[4], kept)
else
  redis.call('DEL', KEYS[4])
end
since(KEYS[5], e, 0)
redis.call(ARGV[4], ARGV[2], 'opened|0|' .. e .. '|' .. #why .. '|' .. why .. ARGV[3])
return {1, e, 0, 0, kept}
`)

// HalfOpen implements store.HalfOpener: one script, which announces the
// change it makes.
func (s *Store) HalfOpen(ctx context.Context, name string, epoch uint64) (store.Status, bool, error) {
	if s.err != nil {
		return store.Status{}, false, s.err
	}
	cmd, channel, err := s.announce(ctx, name)
	if err != nil {
		return store.Status{}, false, wrap("half-open", name, err)
	}
	keys := []string{s.Key(name, "open"), s.Key(name, "probe"), s.Key(name, "epoch"), s.Key(name, "opener"), s.Key(name, "since")}
	r, err := halfOpenScript.Run(ctx, s.client, keys, epoch, channel, name, cmd).Result()
	if err != nil {
		return store.Status{}, false, s.fail("half-open", name, err)
	}
	v, opener, err := reply(r, 4)
	if err != nil {
		return store.Status{}, false, err
	}
	return statusWith(v[1:], opener), v[0] == 1, nil
}
