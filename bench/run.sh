#!/usr/bin/env bash
# Runs the side-by-side and scale benchmarks and writes docs/benchmarks.md
# and docs/benchmarks.svg. Arguments go to the report command, for example:
#
#   bash bench/run.sh                      # 6 rounds, 1s per benchmark
#   bash bench/run.sh -count 10 -benchtime 2s
#   bash bench/run.sh -bench 'Closed|Declined' -count 6
#
# Each round runs the whole suite once, so the runs of one benchmark are
# spread over the whole time; a full run takes about count x 2 minutes.
set -euo pipefail
cd "$(dirname "$0")"
quoted=""
if [ $# -gt 0 ]; then printf -v quoted ' %q' "$@"; fi
export BENCH_REPORT_COMMAND="bash bench/run.sh$quoted"
exec go run ./cmd/report "$@"
