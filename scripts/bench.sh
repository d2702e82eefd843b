#!/usr/bin/env bash
# Side-by-side throughput and memory: Cinnabar vs redis-server on this machine.
#
#   scripts/bench.sh            # SET GET INCR MSET at -P 1 and -P 16, then memory
#   ROUNDS=3 REQUESTS=500000 scripts/bench.sh
#   TESTS=lpush,rpush,lpop,rpop,lrange_100,hset,sadd,spop scripts/bench.sh
#   BENCH_COLLECTIONS=1 scripts/bench.sh   # also memory for 1M small lists/hashes/sets
#
# Needs redis-benchmark (Debian's redis-tools); runs Redis too when redis-server is
# installed. The two servers are benchmarked alternately, round by round, and the
# script prints each one's median req/s and the Cinnabar/Redis ratio.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-200000}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set,get,incr,mset}
command -v redis-benchmark >/dev/null || { echo "redis-benchmark not found (apt-get install redis-tools)"; exit 1; }
cargo build --release --quiet

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }
# FLUSHALL, then wait until background freeing is over so the baseline is honest.
flush_wait() {
    redis-cli -p "$1" flushall >/dev/null
    for _ in $(seq 200); do
        redis-cli -p "$1" info memory | grep -q '^lazyfree_pending_objects:0' && break
        sleep 0.05
    done
    sleep 0.5
}

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

cport=$(free_port)
mkdir -p "$work/c" && ./target/release/cinnabar --port "$cport" --dir "$work/c" --enable-debug-command yes --loglevel warning >/dev/null &
pids+=($!)
wait_port "$cport"
servers=("cinnabar:$cport")
if command -v redis-server >/dev/null; then
    rport=$(free_port)
    mkdir -p "$work/r" && redis-server --port "$rport" --dir "$work/r" --save '' --appendonly no --enable-debug-command yes --loglevel warning >/dev/null &
    pids+=($!)
    wait_port "$rport"
    servers+=("redis:$rport")
fi

declare -A results
for P in 1 16; do
    for round in $(seq "$ROUNDS"); do
        for s in "${servers[@]}"; do
            name=${s%%:*}; port=${s##*:}
            redis-benchmark -p "$port" -t "$TESTS" -n "$REQUESTS" -c "$CLIENTS" -r 1000000 -d 16 -P "$P" --csv 2>/dev/null \
                | tail -n +2 | tr -d '"' | while IFS=, read -r test rps _; do echo "$name $P ${test// /_} $rps"; done >> "$work/raw"
        done
    done
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR) print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf "%-22s %4s %14s %14s %8s\n" test P cinnabar redis ratio
for P in 1 16; do
    for test in $(awk -v p="$P" '$2==p {print $3}' "$work/raw" | sort -u); do
        c=$(awk -v p="$P" -v t="$test" '$1=="cinnabar" && $2==p && $3==t {print $4}' "$work/raw" | median)
        r=$(awk -v p="$P" -v t="$test" '$1=="redis" && $2==p && $3==t {print $4}' "$work/raw" | median)
        if [ -n "$r" ]; then ratio=$(python3 -c "print(f'{$c/$r:.2f}')"); else r="-"; ratio="-"; fi
        printf "%-22s %4s %14s %14s %8s\n" "$test" "$P" "$c" "$r" "$ratio"
    done
done

echo
echo "memory: DEBUG POPULATE 1000000 (key:N -> value:N)"
printf "%-10s %16s %16s %14s %14s\n" server used_memory used_rss bytes/key rss/key
for s in "${servers[@]}"; do
    name=${s%%:*}; port=${s##*:}
    flush_wait "$port"
    base=$(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
    base_rss=$(redis-cli -p "$port" info memory | awk -F: '/^used_memory_rss:/ {print $2}' | tr -d '\r')
    redis-cli -p "$port" debug populate 1000000 >/dev/null
    used=$(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
    rss=$(redis-cli -p "$port" info memory | awk -F: '/^used_memory_rss:/ {print $2}' | tr -d '\r')
    printf "%-10s %16s %16s %14s %14s\n" "$name" "$used" "$rss" $(( (used - base) / 1000000 )) $(( (rss - base_rss) / 1000000 ))
done

if [ "${BENCH_COLLECTIONS:-0}" = 1 ]; then
    echo
    echo "memory: 1M small collections (lists of 10, hashes of 5 fields, sets of 5 members)"
    printf "%-10s %-8s %16s %12s\n" server kind used_delta bytes/key
    for kind in lists hashes sets; do
        python3 scripts/gen_collections.py "$kind" 1000000 > "$work/$kind.resp"
        for s in "${servers[@]}"; do
            name=${s%%:*}; port=${s##*:}
            flush_wait "$port"
            base=$(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
            redis-cli -p "$port" --pipe < "$work/$kind.resp" >/dev/null
            used=$(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
            printf "%-10s %-8s %16s %12s\n" "$name" "$kind" $((used - base)) $(( (used - base) / 1000000 ))
        done
    done
fi
