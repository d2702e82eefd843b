#!/usr/bin/env bash
# The event loop's own user-space instructions per request, counted by callgrind per
# thread (repeatable, unlike CPU times on a machine whose cores the benchmark shares).
#
#   scripts/main_thread_instr.sh [SERVER_BINARY] [-- EXTRA_SERVER_ARGS...]
#
# Runs the server (default target/release/cinnabar) under callgrind with
# --separate-threads=yes, drives redis-benchmark SET then GET (50 clients, 20,000
# requests each, 100,000 keys) unpipelined and at -P 16, stops it with SIGTERM and
# prints the main thread's instructions per request, less an idle run's. The I/O
# threads' own counts are printed too. EXTRA_SERVER_ARGS go to the server, e.g.
# `-- --io-threads 2 --io-threads-always-active yes`. KEEP=DIR keeps the loaded run's
# callgrind files there (cg.out-01 is the main thread's) for callgrind_annotate.
#
# Under valgrind the threads take turns on one CPU, so each loop turn carries few
# requests: the figure includes the per-turn bookkeeping a busy loop shares among many.
set -u
bin=${1:-target/release/cinnabar}
# Absolute, but not resolved: redis-server is a link whose name chooses what it runs.
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
shift || true
[ "${1:-}" = "--" ] && shift
extra=("$@")
REQUESTS=${REQUESTS:-20000}
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
run() { # $1 = load? ; prints "main workers" instructions
    local p d pid
    p=$(port); d=$(mktemp -d)
    (cd "$d" && exec valgrind --tool=callgrind --separate-threads=yes \
        --callgrind-out-file="$d/cg.out" "$bin" --port "$p" --save "" --appendonly no \
        --dir "$d" "${extra[@]}") >"$d/log" 2>&1 &
    pid=$!
    local up=
    for _ in $(seq 600); do
        [ "$(timeout 2 redis-cli -p "$p" ping 2>/dev/null)" = PONG ] && up=1 && break
        sleep 0.1
    done
    [ -n "$up" ] || { echo "server did not start: $(tail -3 "$d/log")" >&2; kill "$pid"; exit 1; }
    if [ "$1" = load ]; then
        for P in 1 16; do
            timeout 900 redis-benchmark -p "$p" -t set,get -n "$REQUESTS" -c 50 -r 100000 -P "$P" -q \
                >/dev/null 2>&1
        done
    else
        for _ in $(seq 10); do timeout 2 redis-cli -p "$p" ping >/dev/null; done
    fi
    kill -TERM "$pid"; wait "$pid" 2>/dev/null
    local main=0 workers=0 f n
    for f in "$d"/cg.out-*; do
        n=$(grep -m1 '^summary:' "$f" | awk '{print $2}')
        case "$f" in *-01) main=$n ;; *) workers=$((workers + n)) ;; esac
    done
    echo "$main $workers"
    if [ -n "${KEEP:-}" ] && [ "$1" = load ]; then cp "$d"/cg.out-* "$KEEP"/; fi
    rm -rf "$d"
}
read -r idle_main idle_workers < <(run idle)
read -r busy_main busy_workers < <(run load)
python3 - "$idle_main" "$busy_main" "$idle_workers" "$busy_workers" "$REQUESTS" <<'EOF'
import sys
im, bm, iw, bw, n = map(int, sys.argv[1:])
reqs = 4 * n
print(f"main thread instructions/request={(bm - im) / reqs:.0f}")
print(f"I/O threads instructions/request={(bw - iw) / reqs:.0f}")
EOF
