#!/usr/bin/env bash
# Cluster measurements, Cinnabar beside redis-server on the same machine:
#  1. throughput: `redis-benchmark --cluster` against three masters of each kind;
#  2. failover time: a master killed with SIGKILL, measured until its replica accepts
#     a write to one of the dead master's slots (three masters, one replica each).
# Usage: scripts/cluster_bench.sh [throughput|failover|all]
# Environment: CINNABAR (target/release/cinnabar), REDIS (redis-server), BASE (first
# client port, 7300; bus ports are BASE+100+i), REQUESTS (200000), PIPELINE (16),
# CLIENTS (50), RUNS (3 failovers per kind), NODE_TIMEOUT (2000 ms).
set -u
CINNABAR=$(realpath "${CINNABAR:-target/release/cinnabar}")
REDIS=${REDIS:-redis-server}
BASE=${BASE:-7300}
REQUESTS=${REQUESTS:-200000}
PIPELINE=${PIPELINE:-16}
CLIENTS=${CLIENTS:-50}
RUNS=${RUNS:-3}
NODE_TIMEOUT=${NODE_TIMEOUT:-2000}
what=${1:-all}
work=$(mktemp -d)
pids=()

stop_all() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    sleep 0.5
    pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT

now_ms() { date +%s%3N; }

# start_nodes BINARY COUNT: nodes on BASE.. in fresh directories.
start_nodes() {
    local bin=$1 count=$2 i port dir
    for ((i = 0; i < count; i++)); do
        port=$((BASE + i))
        dir="$work/$(basename "$bin")-$port-$RANDOM"
        mkdir -p "$dir"
        "$bin" --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
            --cluster-port $((BASE + 100 + i)) --cluster-node-timeout "$NODE_TIMEOUT" \
            --cluster-config-file nodes.conf --appendonly no --save "" \
            --logfile "$dir/log" --dir "$dir" &
        pids+=($!)
        disown $!
    done
    for ((i = 0; i < count; i++)); do
        port=$((BASE + i))
        for _ in $(seq 100); do
            [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
            sleep 0.05
        done
    done
}

# create COUNT REPLICAS: redis-cli --cluster create, then wait for cluster_state:ok.
create() {
    local count=$1 replicas=$2 addrs=() i
    for ((i = 0; i < count; i++)); do addrs+=("127.0.0.1:$((BASE + i))"); done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" --cluster-yes \
        >/dev/null 2>&1 || { echo "cluster create failed" >&2; return 1; }
    for ((i = 0; i < count; i++)); do
        for _ in $(seq 400); do
            redis-cli -p $((BASE + i)) cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
            sleep 0.05
        done
    done
}

throughput() {
    local bin=$1
    start_nodes "$bin" 3
    create 3 0 || return
    redis-benchmark --cluster -p "$BASE" -t set,get -n "$REQUESTS" -P "$PIPELINE" \
        -c "$CLIENTS" -r 100000 -q 2>/dev/null | tr '\r' '\n' | grep 'requests per second' |
        sed "s|^|$(basename "$bin") |"
    stop_all
}

# One failover: prints the milliseconds from SIGKILL to the first write accepted by
# the promoted replica.
failover_once() {
    local bin=$1 master=$BASE mid rport key i t0 t1 line
    start_nodes "$bin" 6
    create 6 1 || return
    mid=$(redis-cli -p "$master" cluster myid)
    # The replica of the first master, once every node knows the roles.
    for _ in $(seq 200); do
        line=$(redis-cli -p "$master" cluster nodes | grep " slave $mid " | head -1)
        [ -n "$line" ] && break
        sleep 0.05
    done
    rport=$(echo "$line" | awk '{print $2}' | sed 's/@.*//; s/.*://')
    for _ in $(seq 200); do
        redis-cli -p "$rport" info replication | grep -q 'master_link_status:up' && break
        sleep 0.05
    done
    for ((i = 0; i < 1000; i++)); do
        [ "$(redis-cli -p "$master" set "k$i" v 2>/dev/null)" = OK ] && key="k$i" && break
    done
    sleep 1
    kill -9 "${pids[0]}"
    t0=$(now_ms)
    while [ "$(redis-cli -p "$rport" set "$key" w 2>/dev/null)" != OK ]; do
        sleep 0.01
        (($(now_ms) - t0 > 60000)) && { echo "no failover within 60 s" >&2; break; }
    done
    t1=$(now_ms)
    echo "$(basename "$bin") failover_ms=$((t1 - t0))"
    stop_all
}

if [ "$what" = throughput ] || [ "$what" = all ]; then
    throughput "$CINNABAR"
    throughput "$(command -v "$REDIS")"
fi
if [ "$what" = failover ] || [ "$what" = all ]; then
    for ((r = 0; r < RUNS; r++)); do
        failover_once "$CINNABAR"
        failover_once "$(command -v "$REDIS")"
    done
fi
