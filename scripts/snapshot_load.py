#!/usr/bin/env python3
"""A snapshot under write load, side by side: duration, memory growth, PING latency.

    scripts/snapshot_load.py SERVER_BINARY PORT [bgsave|bgrewriteaof|fullsync] [KEYS]

Starts SERVER_BINARY (cinnabar, redis-server or valkey-server) with KEYS keys of 100
bytes (default 1,800,000) named as redis-benchmark names them, runs redis-benchmark SET
-P 16 with 20 clients over that same keyspace (so the dataset does not grow), then
starts the snapshot. Samples the PSS of the server and its children every 50 ms (on a
thread of its own) and a PING from another client every 10 ms. Prints the snapshot's
duration, the peak PSS growth over the PSS just before it (as a share of that PSS), and
the PING p99/max during the snapshot next to the same before it. `fullsync` starts a
replica of the same binary on PORT+1 and times its REPLICAOF until the link is up and
synced (the master's PSS and PINGs, as for the others); the master's
repl-diskless-sync-delay is set to 0 first, since its default 5 s wait for more
replicas is no part of the sync's own duration.

SERVER_ARGS adds directives to the server's command line (e.g. "--server-cpulist 0
--bgsave-cpulist 1"), REPLICA_ARGS to the replica's (e.g. both
"--dual-channel-replication-enabled yes" for a dual-channel full sync); LOAD_CPUS pins redis-benchmark and the PING client (taskset), so
that on a small machine the event loop can have a CPU of its own. LOAD replaces the
load's clients and pipeline ("-c 20 -P 16"): a lighter one (e.g. "-c 2 -P 4") lets a
replica on a 2-core machine keep up with its master once synced.
"""
import os, socket, subprocess, sys, tempfile, threading, time

binary, port = sys.argv[1], int(sys.argv[2])
kind = sys.argv[3] if len(sys.argv) > 3 else "bgsave"
keys = int(sys.argv[4]) if len(sys.argv) > 4 else 1_800_000
d = tempfile.mkdtemp()
aof = "yes" if kind == "bgrewriteaof" else "no"
# No automatic rewrite: the load grows the AOF fast enough to start one of its own.
srv = subprocess.Popen([binary, "--port", str(port), "--save", "", "--appendonly", aof,
                        "--auto-aof-rewrite-percentage", "0",
                        "--enable-debug-command", "yes", "--dir", d,
                        *os.environ.get("SERVER_ARGS", "").split()],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def cli(*a, at=None):
    return subprocess.run(["redis-cli", "-p", str(at or port), *a], capture_output=True,
                          text=True).stdout.strip()

def info(field, section="persistence", at=None):
    for line in cli("info", section, at=at).splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return ""

replica = None
if kind == "fullsync":
    rd = tempfile.mkdtemp()
    replica = subprocess.Popen([binary, "--port", str(port + 1), "--save", "", "--appendonly",
                                "no", "--dir", rd, *os.environ.get("REPLICA_ARGS", "").split()],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def in_progress():
    if kind == "fullsync":
        return not (info("master_link_status", "replication", port + 1) == "up"
                    and info("master_sync_in_progress", "replication", port + 1) == "0")
    busy = "aof_rewrite_in_progress" if kind == "bgrewriteaof" else "rdb_bgsave_in_progress"
    return info(busy) == "1"

def pss(pid):
    total = 0
    pids = [pid]
    try:
        pids += [int(p) for p in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            for line in open(f"/proc/{p}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total

time.sleep(0.5)
while cli("ping") != "PONG":
    time.sleep(0.1)
while kind != "fullsync" and in_progress():
    time.sleep(0.1)
# The keys redis-benchmark -r writes (`key:%012d`), so the load overwrites them and
# the dataset does not grow during the run (DEBUG POPULATE's `key:N` names would be
# other keys: the growth measured would be the load's new keys, not the snapshot's).
value = b"v" * 100
fill = subprocess.Popen(["redis-cli", "-p", str(port), "--pipe"], stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL)
for start in range(0, keys, 100_000):
    fill.stdin.write(b"".join(
        b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$100\r\n%s\r\n" % (i, value)
        for i in range(start, min(keys, start + 100_000))))
fill.stdin.close()
fill.wait()
if kind == "fullsync":
    cli("config", "set", "repl-diskless-sync-delay", "0")
load_cpus = os.environ.get("LOAD_CPUS")
if load_cpus:
    os.sched_setaffinity(0, {int(c) for c in load_cpus.split(",")})
load = os.environ.get("LOAD", "-c 20 -P 16").split()
bench = subprocess.Popen(["redis-benchmark", "-p", str(port), "-t", "set", "-n", "1000000000",
                          *load, "-r", str(keys), "-d", "100", "-q"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
lat = []  # (time, seconds)
stop = False

def pinger():
    s = socket.create_connection(("127.0.0.1", port))
    while not stop:
        t = time.time()
        s.sendall(b"PING\r\n")
        s.recv(64)
        lat.append((t, time.time() - t))
        time.sleep(0.01)

threading.Thread(target=pinger, daemon=True).start()
time.sleep(3)
base = pss(srv.pid)
t0 = time.time()
if kind == "fullsync":
    cli("replicaof", "127.0.0.1", str(port), at=port + 1)
else:
    cli(kind)
peak = base
sampling = True

def sampler():
    # A thread of its own: a replica busy loading answers `in_progress` late, and the
    # master's memory may peak meanwhile.
    global peak
    while sampling:
        peak = max(peak, pss(srv.pid))
        time.sleep(0.05)

pss_thread = threading.Thread(target=sampler, daemon=True)
pss_thread.start()
time.sleep(0.05)
LIMIT = 90  # seconds: a full sync the load keeps breaking never ends
while in_progress() and time.time() - t0 < LIMIT:
    time.sleep(0.05)
t1 = time.time()
finished = not in_progress()
sampling = False
pss_thread.join()
stop = True
bench.kill()
time.sleep(0.1)

def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] * 1000 if xs else 0

during = [l for t, l in lat if t0 <= t <= t1]
before = [l for t, l in lat if t0 - (t1 - t0) - 0.5 <= t < t0]
print(f"{os.path.basename(binary)} {kind}: {t1 - t0:.2f} s{'' if finished else ' (NOT FINISHED)'}, PSS {base / 1024:.0f} MB, "
      f"peak growth {(peak - base) * 100 / base:.1f}%, PING p99 {pct(during, 0.99):.2f} ms "
      f"(max {max(during, default=0) * 1000:.1f}) during, {pct(before, 0.99):.2f} ms "
      f"(max {max(before, default=0) * 1000:.1f}) before")
srv.kill()
srv.wait()
subprocess.run(["rm", "-rf", d])
if replica:
    replica.kill()
    replica.wait()
    subprocess.run(["rm", "-rf", rd])
