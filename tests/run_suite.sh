#!/usr/bin/env bash
# The whole suite as `make test` runs it: two pytest processes side by side, the tests marked
# `kafka` (a real broker or cluster; most of their time is spent waiting on brokers, workers and
# fault timers) and the rest (CPU-bound). A third session for the `cluster` tests was tried: on
# 2 cores the three sessions took 27, 26 and 20 minutes side by side (load ~10) and two timing
# tests of the broker session failed, so the cluster tests stay in the `kafka` session. Each is a complete pytest session with its own
# temporary directories; only the `kafka` session starts a broker. The `kafka` session's output
# is printed when both are done; the exit status is non-zero when either session failed.
#
# Usage: bash tests/run_suite.sh PYTHON [pytest arguments...]
set -uo pipefail
py=${1:?usage: run_suite.sh PYTHON [pytest arguments...]}
shift
log=$(mktemp -t hivestream-kafka-tests.XXXXXX)
"$py" -m pytest -p no:cacheprovider -m kafka "$@" > "$log" 2>&1 &
kafka=$!
trap 'kill "$kafka" 2>/dev/null; rm -f "$log"' EXIT
"$py" -m pytest -p no:cacheprovider -m "not kafka" "$@"
rest=$?
wait "$kafka"
broker=$?
echo
echo "---- the tests that need a Kafka broker (pytest -m kafka) ----"
cat "$log"
echo "---- pytest -m 'not kafka': exit $rest; pytest -m kafka: exit $broker ----"
[ "$rest" -eq 0 ] && [ "$broker" -eq 0 ]
