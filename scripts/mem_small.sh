#!/usr/bin/env bash
# Memory per key of 1M small collections, Cinnabar vs redis-server side by side:
# used_memory delta per key after loading, with redis-cli --pipe, N keys of
#   zsets   ZADD zs:N 1 a 2 b 3 c 4 d 5 e
#   hashes  HSET hash:N field0 value0 ... (5 fields)
#   sets    SADD set:N member-0 ... (5 members)
#   lists   RPUSH list:N item-0 ... (5 elements)
#
#   scripts/mem_small.sh                 # all four kinds, 1M keys each
#   KINDS="zsets" KEYS_N=100000 scripts/mem_small.sh
#
# Uses target/release/cinnabar as built (run `cargo build --release` first) and
# ports CPORT/RPORT (default 7191/7131).
set -euo pipefail
cd "$(dirname "$0")/.."

KINDS=${KINDS:-zsets hashes sets lists}
KEYS_N=${KEYS_N:-1000000}
CPORT=${CPORT:-7191}
RPORT=${RPORT:-7131}
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

mem() { redis-cli -p "$1" info memory | awk -F: -v f="$2" '$1==f {print $2}' | tr -d '\r'; }
wait_up() { for _ in $(seq 100); do [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return; sleep 0.1; done; echo "server on $1 did not start"; exit 1; }

target/release/cinnabar --port "$CPORT" --save '' --appendonly no --loglevel warning >/dev/null &
pids+=($!)
servers=("cinnabar:$CPORT")
if command -v redis-server >/dev/null; then
    redis-server --port "$RPORT" --save '' --appendonly no --loglevel warning >/dev/null &
    pids+=($!)
    servers+=("redis:$RPORT")
fi
for s in "${servers[@]}"; do wait_up "${s##*:}"; done

printf "%-10s %-8s %16s %10s\n" server kind used_delta bytes/key
for kind in $KINDS; do
    python3 scripts/gen_collections.py "$kind" "$KEYS_N" 5 > "$work/$kind.resp"
    for s in "${servers[@]}"; do
        name=${s%%:*}; port=${s##*:}
        redis-cli -p "$port" flushall sync >/dev/null
        # FLUSHALL may free the old table in the background: wait until it is gone.
        for _ in $(seq 600); do
            [ "$(mem "$port" lazyfree_pending_objects)" = 0 ] && break
            sleep 0.1
        done
        sleep 0.5
        base=$(mem "$port" used_memory)
        redis-cli -p "$port" --pipe < "$work/$kind.resp" >/dev/null
        used=$(mem "$port" used_memory)
        printf "%-10s %-8s %16s %10s\n" "$name" "$kind" $((used - base)) \
            "$(python3 -c "print(f'{($used - $base) / $KEYS_N:.1f}')")"
    done
done
