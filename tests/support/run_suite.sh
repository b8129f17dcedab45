#!/usr/bin/env bash
# The whole suite as `make test` runs it: three pytest processes side by side, split by marker:
#   - `cluster`: the three-broker KRaft cluster tests (their own cluster; broker faults and SASL_SSL),
#   - `kafka and not cluster`: the tests that use the session's single broker,
#   - `not kafka`: the rest (CPU-bound, no broker).
# The first two spend most of their time waiting on brokers, workers and fault timers (alone, the
# backlog and Kafka-path tests keep 2 cores ~50 % busy), so they overlap with the CPU-bound third.
# On a 2-core machine the broker tests took 32 minutes in one session beside the rest (21 minutes);
# as two sessions 26 and 20 minutes beside the rest (27). Each is a complete pytest session with
# its own temporary directories; the cluster and the single broker use different ports. The
# broker sessions' output is printed when all are done; the exit status is non-zero when any
# session failed. Each session prints its 15 slowest steps.
#
# Usage: bash tests/support/run_suite.sh PYTHON [pytest arguments...]
set -uo pipefail
py=${1:?usage: run_suite.sh PYTHON [pytest arguments...]}
shift
cluster_log=$(mktemp -t hivestream-cluster-tests.XXXXXX)
kafka_log=$(mktemp -t hivestream-kafka-tests.XXXXXX)
"$py" -m pytest -p no:cacheprovider -m cluster --durations=15 "$@" > "$cluster_log" 2>&1 &
cluster=$!
"$py" -m pytest -p no:cacheprovider -m "kafka and not cluster" --durations=15 "$@" > "$kafka_log" 2>&1 &
kafka=$!
trap 'kill "$cluster" "$kafka" 2>/dev/null; rm -f "$cluster_log" "$kafka_log"' EXIT
"$py" -m pytest -p no:cacheprovider -m "not kafka" --durations=15 "$@"
rest=$?
wait "$kafka"
broker=$?
wait "$cluster"
three=$?
echo
echo "---- the tests that need the single Kafka broker (pytest -m 'kafka and not cluster') ----"
cat "$kafka_log"
echo
echo "---- the tests that need the three-broker cluster (pytest -m cluster) ----"
cat "$cluster_log"
echo "---- pytest -m 'not kafka': exit $rest; pytest -m 'kafka and not cluster': exit $broker; pytest -m cluster: exit $three ----"
[ "$rest" -eq 0 ] && [ "$broker" -eq 0 ] && [ "$three" -eq 0 ]
