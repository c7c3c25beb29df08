#!/usr/bin/env bash
# The long versions of fusebox's reliability tests (docs/reliability.md):
# model-based fuzzing for minutes, the stress and fault-injection tests for
# a minute or two each, Redis restarted ten times under load, the
# replication soak for a minute, and the fleet soak for ten. CI runs the
# short versions on every change (the fleet soak for a minute); run this
# before a release, or after touching manager/, breaker/ or store/.
#
# Usage: scripts/long-tests.sh [fuzz time]     (default 3m; about 20 minutes in all)
#
# It needs redis-server on PATH. It prints the figures that
# docs/reliability.md quotes at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

fuzztime=${1:-3m}
export FUSEBOX_LONG=1        # the stress, fault and Redis restart tests run long
export FUSEBOX_SOAK=long     # the replication soak runs long
export FUSEBOX_REQUIRE_REDIS=1

step() { printf '\n=== %s\n' "$*"; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

step "fuzz FuzzBreakerModel for $fuzztime"
mkdir "$out/tally"
FUSEBOX_FUZZ_TALLY="$out/tally" go test ./manager -run '^$' -fuzz '^FuzzBreakerModel$' \
	-fuzztime "$fuzztime" -fuzzminimizetime 10s 2>&1 | tee "$out/fuzz.txt" | grep -v '^fuzz: elapsed' || true
grep -q '^ok' "$out/fuzz.txt" || { tail -40 "$out/fuzz.txt"; exit 1; }
tail -3 "$out/fuzz.txt" | grep '^fuzz: elapsed' || true

step "stress and fault injection, long, with the race detector"
go test -race -count=1 -v -timeout 30m \
	-run '^(TestStressInvariants|TestFaultRestartsUnderLoad|TestFaultRestartLimitUnderLoad|TestFaultSlowRecoverRealClock)$' ./manager >"$out/race.txt" 2>&1 ||
	{ grep -v '^=== ' "$out/race.txt" | tail -60; exit 1; }
grep -E '^(--- |ok)' "$out/race.txt"

step "stress without the race detector (the counters' plain adds), 1m"
FUSEBOX_LONG=1m go test -count=1 -v -timeout 30m -run '^TestStressInvariants$' ./manager >"$out/norace.txt" 2>&1 ||
	{ tail -60 "$out/norace.txt"; exit 1; }
grep -E '^(--- |ok)' "$out/norace.txt"

step "Redis restarted ten times under load"
go test -race -count=1 -v -timeout 30m -run '^TestRedisRestartsUnderLoad$' ./store/redisstore >"$out/redis.txt" 2>&1 ||
	{ grep -v '^=== ' "$out/redis.txt" | tail -60; exit 1; }
grep -E '^(--- |ok)' "$out/redis.txt"

step "replication soak (FUSEBOX_SOAK=long)"
go test -race -count=1 -v -timeout 30m -run 'Soak' ./replicate/... >"$out/soak.txt" 2>&1 ||
	{ tail -60 "$out/soak.txt"; exit 1; }
grep -E '^(--- |ok)' "$out/soak.txt"
grep -h 'seed\|writes' "$out/soak.txt" | sed 's/^ *//' || true

step "the fleet soak, 10 minutes of faults on a real Redis (FUSEBOX_SOAK_FLEET)"
FUSEBOX_SOAK_FLEET=1 FUSEBOX_SOAK=10m go test -race -count=1 -v -timeout 30m -run '^TestFleetSoak$' ./store/redisstore >"$out/fleet.txt" 2>&1 ||
	{ grep -v '^=== ' "$out/fleet.txt" | tail -80; exit 1; }
grep -E '^(--- |ok)' "$out/fleet.txt"

step "figures"
cat "$out"/tally/tally-* 2>/dev/null | awk '{n[$1] += $2} END {
	printf "fuzzing: %d scripts, %d operations, %d checks; %d scripts reached the restart limit, %d restarted\n",
		n["scripts"], n["ops"], n["checks"], n["halted"], n["restarted"] }'
grep -h 'FIGURES' "$out/race.txt" "$out/norace.txt" "$out/redis.txt" "$out/fleet.txt" | sed 's/^ *[a-z_]*\.go:[0-9]*: FIGURES /  /'
echo
echo "long tests passed"
