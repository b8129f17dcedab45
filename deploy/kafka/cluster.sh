#!/usr/bin/env bash
# Run a local three-node Apache Kafka cluster (KRaft; every node a broker and a controller, three
# voters) on 127.0.0.1 from the same Maven Central jars as kafka.sh, with the installed JDK.
# Each node listens for PLAINTEXT and for SASL_SSL (SCRAM-SHA-512; a CA and broker certificates
# made with openssl at first start); topics get three replicas, min.insync.replicas=2.
#
# Usage: cluster.sh fetch|start|stop|status|wait|kill NODE|stop-node NODE|start-node NODE|bootstrap [sasl]
#
#   start             fetch the jars if needed; at first start make the CA, certificates, SCRAM user,
#                     cluster id and storage; start the nodes that are not running; wait until healthy.
#                     Prints the PLAINTEXT bootstrap on stdout, the client.properties path on stderr.
#   wait              until all three brokers are registered and no partition is under-replicated
#   stop              SIGTERM to every node (SIGKILL after the stop timeout)
#   status            one line per node; exit 0 when all three run, 3 otherwise
#   kill NODE         SIGKILL node 1, 2 or 3 (a crash: no controlled shutdown)
#   stop-node NODE    SIGTERM one node (controlled shutdown), SIGKILL after the stop timeout
#   start-node NODE   start one node and wait until it is registered again
#   bootstrap [sasl]  print the PLAINTEXT (or SASL_SSL) bootstrap servers
#
# Ports (base B = HIVESTREAM_CLUSTER_PORT, default 19192): node N (1..3) has PLAINTEXT on B+N-1,
# SASL_SSL on B+10+N-1 and its controller on B+20+N-1. Defaults: 19192-19194, 19202-19204,
# 19212-19214 (kafka.sh's single broker is on 19092/19093).
#
# Environment:
#   HIVESTREAM_CLUSTER_HOME      state dir: CA and certificates, client.properties, one dir per node
#                                (default: <this dir>/.cluster-state)
#   HIVESTREAM_CLUSTER_PORT      base port (see above; default 19192)
#   HIVESTREAM_CLUSTER_USER      SCRAM-SHA-512 user made at first start (default: hivestream)
#   HIVESTREAM_CLUSTER_PASSWORD  its password at first start (default: 32 random hex digits);
#                                kept in <state>/client.properties (mode 600), never printed
#   HIVESTREAM_CLUSTER_HEAP      JVM heap options per node (default: -Xms128m -Xmx384m)
#   HIVESTREAM_KAFKA_JVM_OPTS    more JVM options for every node, split at spaces as Kafka's KAFKA_OPTS (default: none; the test suite
#                                uses -XX:TieredStopAtLevel=1, see tests/support/kafka_broker.py)
#   HIVESTREAM_KAFKA_JARS        where the broker jars are (default: <this dir>/.cache/kafka-<version>)
#   HIVESTREAM_CLUSTER_WAIT_TIMEOUT  seconds `start`/`wait`/`start-node` wait (default: 120)
#   HIVESTREAM_CLUSTER_STOP_TIMEOUT  seconds a stop waits before SIGKILL (default: 30)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_NAME=cluster.sh
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"   # KAFKA_VERSION, JARS_DIR, cmd_fetch, tool, port_open, write_log4j

NODES=(1 2 3)
STATE_DIR="${HIVESTREAM_CLUSTER_HOME:-$SCRIPT_DIR/.cluster-state}"
BASE_PORT="${HIVESTREAM_CLUSTER_PORT:-19192}"
SCRAM_USER="${HIVESTREAM_CLUSTER_USER:-hivestream}"
HEAP_OPTS="${HIVESTREAM_CLUSTER_HEAP:--Xms128m -Xmx384m}"
JVM_OPTS="${HIVESTREAM_KAFKA_JVM_OPTS:-}"
WAIT_TIMEOUT="${HIVESTREAM_CLUSTER_WAIT_TIMEOUT:-120}"
STOP_TIMEOUT="${HIVESTREAM_CLUSTER_STOP_TIMEOUT:-30}"

[[ "$BASE_PORT" =~ ^[0-9]+$ ]] && ((BASE_PORT >= 1024 && BASE_PORT + 22 <= 65535)) \
    || die "HIVESTREAM_CLUSTER_PORT must be a port from 1024 to 65513 (got '$BASE_PORT')"

TLS_DIR="$STATE_DIR/tls"
CA_PEM="$TLS_DIR/ca.pem"
CLIENT_PROPERTIES="$STATE_DIR/client.properties"
CLUSTER_ID_FILE="$STATE_DIR/cluster.id"
LOG4J_CONFIG="$STATE_DIR/log4j2.xml"
TOOLS_LOG4J_CONFIG="$STATE_DIR/tools-log4j2.xml"

plain_port() { echo $((BASE_PORT + $1 - 1)); }
sasl_port() { echo $((BASE_PORT + 10 + $1 - 1)); }
controller_port() { echo $((BASE_PORT + 20 + $1 - 1)); }
node_dir() { echo "$STATE_DIR/node-$1"; }
node_config() { echo "$(node_dir "$1")/server.properties"; }
node_pid_file() { echo "$(node_dir "$1")/kafka.pid"; }
node_log() { echo "$(node_dir "$1")/logs/server.log"; }

join_ports() {  # join_ports <port function>: 127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3
    local n out=""
    for n in "${NODES[@]}"; do out+="${out:+,}127.0.0.1:$("$1" "$n")"; done
    echo "$out"
}
PLAIN_BOOTSTRAP="$(join_ports plain_port)"
SASL_BOOTSTRAP="$(join_ports sasl_port)"

check_node() {
    [[ "${1:-}" =~ ^[123]$ ]] || die "NODE must be 1, 2 or 3 (got '${1:-}')"
}

read_pid() { local f; f="$(node_pid_file "$1")"; [[ -f "$f" ]] && cat "$f" || true; }

# True if node $1's pid file names a live process that is this state dir's node $1.
is_running() {
    local pid; pid="$(read_pid "$1")"
    [[ -n "$pid" ]] && alive "$pid" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "kafka.Kafka $(node_config "$1")"
}

# ---------------------------------------------------------------- first start: TLS, SCRAM, id
make_tls() {
    [[ -f "$CA_PEM" ]] && return 0
    command -v openssl >/dev/null || die "openssl not found (needed once to make the cluster's CA and certificates)"
    local tmp n
    mkdir -p "$STATE_DIR"
    tmp="$(mktemp -d "$STATE_DIR/tls.tmp.XXXXXX")"
    chmod 700 "$tmp"
    log "making a CA and broker certificates in $TLS_DIR (openssl)"
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout "$tmp/ca.key" -out "$tmp/ca.pem" \
        -subj "/CN=hivestream local cluster CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        >"$tmp/openssl.log" 2>&1 || { cat "$tmp/openssl.log" >&2; rm -rf "$tmp"; die "openssl could not make the CA"; }
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
        "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >"$tmp/broker.ext"
    for n in "${NODES[@]}"; do
        # Kafka's PEM key store (KIP-651): an unencrypted PKCS#8 key, then the certificate chain.
        if ! { openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$tmp/node-$n.key" -out "$tmp/node-$n.csr" \
                   -subj "/CN=hivestream-broker-$n" \
               && openssl x509 -req -sha256 -days 3650 -in "$tmp/node-$n.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" \
                   -CAcreateserial -extfile "$tmp/broker.ext" -out "$tmp/node-$n.crt" \
               && openssl pkcs8 -topk8 -nocrypt -in "$tmp/node-$n.key" -out "$tmp/node-$n.keystore.pem"; } \
               >>"$tmp/openssl.log" 2>&1; then
            cat "$tmp/openssl.log" >&2; rm -rf "$tmp"; die "openssl could not make the certificate of node $n"
        fi
        cat "$tmp/node-$n.crt" "$tmp/ca.pem" >>"$tmp/node-$n.keystore.pem"
        rm -f "$tmp/node-$n.key" "$tmp/node-$n.csr" "$tmp/node-$n.crt"
    done
    rm -f "$tmp/broker.ext" "$tmp/openssl.log" "$tmp/ca.srl"
    chmod 600 "$tmp"/*.key "$tmp"/*.keystore.pem
    chmod 644 "$tmp/ca.pem"
    rm -rf "$TLS_DIR"
    mv "$tmp" "$TLS_DIR"
}

# The SCRAM password: HIVESTREAM_CLUSTER_PASSWORD or a random one at first start; afterwards the
# one in client.properties (SCRAM credentials are written into the storage when it is formatted).
scram_password() {
    if [[ -f "$CLIENT_PROPERTIES" ]]; then
        sed -n 's/^sasl\.jaas\.config=.* password="\([^"]*\)";$/\1/p' "$CLIENT_PROPERTIES"
    elif [[ -n "${HIVESTREAM_CLUSTER_PASSWORD:-}" ]]; then
        echo "$HIVESTREAM_CLUSTER_PASSWORD"
    else
        od -An -N16 -tx1 /dev/urandom | tr -d ' \n'
    fi
}

write_client_properties() {
    local password="$1" tmp
    tmp="$(mktemp "$STATE_DIR/client.properties.XXXXXX")"
    chmod 600 "$tmp"
    cat >"$tmp" <<EOF
# Kafka client configuration (Java-client form) for the local cluster's SASL_SSL listeners.
# Generated by deploy/kafka/cluster.sh at first start; holds the SCRAM password: keep it private.
bootstrap.servers=$SASL_BOOTSTRAP
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$SCRAM_USER" password="$password";
ssl.truststore.type=PEM
ssl.truststore.location=$CA_PEM
EOF
    mv -f "$tmp" "$CLIENT_PROPERTIES"
}

# ---------------------------------------------------------------- per-node configuration
write_node_config() {
    local n="$1" dir voters="" m
    dir="$(node_dir "$n")"
    mkdir -p "$dir/data" "$dir/logs"
    for m in "${NODES[@]}"; do voters+="${voters:+,}$m@127.0.0.1:$(controller_port "$m")"; done
    cat >"$(node_config "$n")" <<EOF
# Generated by cluster.sh on each start; edit the template in cluster.sh instead.
# Node $n of 3: KRaft combined broker+controller, static three-voter quorum.
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(plain_port "$n"),SASL_SSL://127.0.0.1:$(sasl_port "$n"),CONTROLLER://127.0.0.1:$(controller_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(plain_port "$n"),SASL_SSL://127.0.0.1:$(sasl_port "$n")
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$TLS_DIR/node-$n.keystore.pem
log.dirs=$dir/data
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
auto.create.topics.enable=false
offsets.topic.replication.factor=3
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=6
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
log.retention.hours=24
EOF
}

format_node() {
    local n="$1" dir out
    dir="$(node_dir "$n")"
    [[ -f "$dir/data/meta.properties" ]] && return 0
    local cluster_id password
    cluster_id="$(cat "$CLUSTER_ID_FILE")"
    password="$(scram_password)"
    log "formatting node $n (cluster id $cluster_id, SCRAM-SHA-512 user $SCRAM_USER)"
    out="$dir/logs/format.out"
    tool kafka.tools.StorageTool format -t "$cluster_id" -c "$(node_config "$n")" \
        --add-scram "SCRAM-SHA-512=[name=$SCRAM_USER,password=$password]" >"$out" 2>&1 \
        || { sed "s/$password/<password>/g" "$out" >&2; die "storage format of node $n failed"; }
}

first_start() {
    mkdir -p "$STATE_DIR"
    make_tls
    if [[ ! -f "$CLUSTER_ID_FILE" ]]; then
        [[ "$SCRAM_USER" =~ ^[A-Za-z0-9._-]+$ ]] || die "HIVESTREAM_CLUSTER_USER may hold only letters, digits, '.', '_' and '-'"
        local password; password="$(scram_password)"
        [[ "$password" =~ ^[A-Za-z0-9._~+/-]{8,}$ ]] \
            || die "HIVESTREAM_CLUSTER_PASSWORD must be 8 or more letters, digits or ._~+/- (it goes into a JAAS line)"
        write_client_properties "$password"
        random_cluster_id >"$CLUSTER_ID_FILE"
    fi
    [[ -f "$CLIENT_PROPERTIES" ]] || die "$CLIENT_PROPERTIES is missing (the SCRAM password is in it): remove $STATE_DIR to start afresh"
}

launch_node() {
    local n="$1" p log_dir pid_file
    if is_running "$n"; then
        log "node $n already running (pid $(read_pid "$n"))"
        return 0
    fi
    for p in "$(plain_port "$n")" "$(sasl_port "$n")" "$(controller_port "$n")"; do
        port_open "$p" && die "port $p on 127.0.0.1 is already in use (set HIVESTREAM_CLUSTER_PORT)"
    done
    write_node_config "$n"
    format_node "$n"
    log_dir="$(node_dir "$n")/logs"
    pid_file="$(node_pid_file "$n")"
    [[ -f "$log_dir/server.log" ]] && mv -f "$log_dir/server.log" "$log_dir/server.log.1"
    log "starting node $n: PLAINTEXT 127.0.0.1:$(plain_port "$n"), SASL_SSL 127.0.0.1:$(sasl_port "$n"), controller :$(controller_port "$n")"
    rm -f "$pid_file"
    # Detached as in kafka.sh: own session, no inherited stdio, the pid file written by the shell
    # that then execs java.
    # shellcheck disable=SC2016,SC2086
    setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pid_file" \
        java $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 $JVM_OPTS -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$LOG4J_CONFIG" -Dkafka.logs.dir="$log_dir" \
        -cp "$JARS_DIR/*" kafka.Kafka "$(node_config "$n")" \
        </dev/null >"$log_dir/console.out" 2>&1 &
    local i
    for i in $(seq 50); do [[ -s "$pid_file" ]] && break; sleep 0.1; done
    [[ -s "$pid_file" ]] || die "node $n did not start; see $log_dir/console.out"
}

# ---------------------------------------------------------------- health
# Dies when a node that has a pid file has exited (it crashed while we waited).
check_alive() {
    local n
    for n in "$@"; do
        if [[ -f "$(node_pid_file "$n")" ]] && ! is_running "$n"; then
            tail -n 30 "$(node_log "$n")" "$(node_dir "$n")/logs/console.out" >&2 2>/dev/null || true
            die "node $n exited; see $(node_log "$n")"
        fi
    done
}

# registered_ids <bootstrap>: the ids of the brokers the cluster metadata lists (registered, unfenced).
registered_ids() {
    tool 30 org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$1" 2>/dev/null \
        | sed -n 's/^127\.0\.0\.1:[0-9]* (id: \([0-9]*\) .*/\1/p' | sort -u | tr '\n' ' ' || true
}

# wait_registered <node...>: until each node answers on its own PLAINTEXT port and is listed.
wait_registered() {
    local deadline=$((SECONDS + WAIT_TIMEOUT)) n missing
    while ((SECONDS < deadline)); do
        check_alive "$@"
        missing=""
        for n in "$@"; do
            if ! port_open "$(plain_port "$n")" || ! grep -qs "Kafka Server started" "$(node_log "$n")" \
                    || [[ " $(registered_ids "127.0.0.1:$(plain_port "$n")") " != *" $n "* ]]; then
                missing+=" $n"
            fi
        done
        [[ -z "$missing" ]] && return 0
        sleep 1
    done
    die "node(s)$missing not registered after ${WAIT_TIMEOUT}s; see $(node_log "${missing# }")"
}

cmd_wait() {
    local deadline=$((SECONDS + WAIT_TIMEOUT)) ids urp
    while ((SECONDS < deadline)); do
        check_alive "${NODES[@]}"
        ids="$(registered_ids "$PLAIN_BOOTSTRAP")"
        if [[ "$ids" == "1 2 3 " ]]; then
            # Every replica back in its ISR: TopicCommand lists no under-replicated partition.
            if urp="$(tool 60 org.apache.kafka.tools.TopicCommand --bootstrap-server "$PLAIN_BOOTSTRAP" \
                        --describe --under-replicated-partitions 2>&1)" && [[ -z "$urp" ]]; then
                log "healthy: 3 brokers, no under-replicated partition (PLAINTEXT $PLAIN_BOOTSTRAP, SASL_SSL $SASL_BOOTSTRAP)"
                log "client configuration (SASL_SSL, SCRAM-SHA-512): $CLIENT_PROPERTIES"
                echo "$PLAIN_BOOTSTRAP"
                return 0
            fi
        fi
        sleep 1
    done
    die "cluster not healthy after ${WAIT_TIMEOUT}s (brokers registered: ${ids:-none}${urp:+; under-replicated: $(head -n 3 <<<"$urp")})"
}

# ---------------------------------------------------------------- commands
cmd_start() {
    command -v java >/dev/null || die "java not found (a JDK 17+ runs the brokers)"
    jars_present || cmd_fetch
    first_start
    write_log4j "$LOG4J_CONFIG" "$TOOLS_LOG4J_CONFIG"
    local n started=() pids=()
    for n in "${NODES[@]}"; do
        is_running "$n" && continue
        started+=("$n")
        write_node_config "$n"
        format_node "$n" &   # the three format JVMs side by side
        pids+=($!)
    done
    for n in "${pids[@]}"; do wait "$n" || exit 1; done
    for n in "${started[@]}"; do launch_node "$n"; done
    if ! (wait_registered "${NODES[@]}" && cmd_wait); then   # subshell: die exits it
        log "start failed: stopping the nodes it launched"
        for n in "${started[@]}"; do stop_node "$n" TERM; done
        exit 1
    fi
}

cmd_start_node() {
    check_node "$1"
    [[ -f "$CLUSTER_ID_FILE" ]] || die "no cluster in $STATE_DIR yet: run \`cluster.sh start\` first"
    write_log4j "$LOG4J_CONFIG" "$TOOLS_LOG4J_CONFIG"
    launch_node "$1"
    wait_registered "$1"
    log "node $1 registered (127.0.0.1:$(plain_port "$1"))"
}

# stop_node <node> TERM|KILL
stop_node() {
    local n="$1" sig="$2" pid
    pid="$(read_pid "$n")"
    if [[ -z "$pid" ]] || ! is_running "$n"; then
        rm -f "$(node_pid_file "$n")"
        log "node $n not running"
        return 0
    fi
    log "node $n: SIG$sig to pid $pid"
    kill "-$sig" "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
    if alive "$pid"; then
        log "node $n still alive after ${STOP_TIMEOUT}s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        while alive "$pid"; do sleep 0.2; done
    fi
    rm -f "$(node_pid_file "$n")"
}

cmd_stop() {
    # All at once: a node stopped last would otherwise wait for a controller quorum that is gone.
    local n pids=()
    for n in "${NODES[@]}"; do
        stop_node "$n" TERM &
        pids+=($!)
    done
    wait "${pids[@]}"
    log "stopped"
}

cmd_status() {
    local n all=0 health
    for n in "${NODES[@]}"; do
        if is_running "$n"; then
            health="not answering"
            port_open "$(plain_port "$n")" && health="accepting connections"
            echo "node $n: running, pid $(read_pid "$n"), PLAINTEXT 127.0.0.1:$(plain_port "$n"), SASL_SSL 127.0.0.1:$(sasl_port "$n") ($health)"
        else
            echo "node $n: stopped"
            all=3
        fi
    done
    echo "state $STATE_DIR; client configuration $CLIENT_PROPERTIES"
    return "$all"
}

case "${1:-}" in
    fetch)      cmd_fetch ;;
    start)      cmd_start ;;
    wait)       cmd_wait ;;
    stop)       cmd_stop ;;
    status)     cmd_status ;;
    kill)       check_node "${2:-}"; stop_node "$2" KILL ;;
    stop-node)  check_node "${2:-}"; stop_node "$2" TERM ;;
    start-node) cmd_start_node "${2:-}" ;;
    bootstrap)  if [[ "${2:-}" == sasl ]]; then echo "$SASL_BOOTSTRAP"; else echo "$PLAIN_BOOTSTRAP"; fi ;;
    *) echo "usage: $(basename "$0") fetch|start|stop|status|wait|kill NODE|stop-node NODE|start-node NODE|bootstrap [sasl]" >&2; exit 2 ;;
esac
