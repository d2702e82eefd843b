#!/usr/bin/env python3
"""MIGRATE of one big key, and what other clients of the source see meanwhile.

    scripts/big_migrate.py SOURCE_BINARY TARGET_BINARY [TYPE] [MEMBERS]

TYPE is hash (default), zset, set or list; MEMBERS defaults to 1,000,000. Both
servers are started on free loopback ports and stopped at the end. While MIGRATE
runs, another connection PINGs the source in a loop; the script prints MIGRATE's
duration, the worst PING round trip, and checks the key arrived whole.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, workdir):
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL, stderr=None if os.environ.get("SHOW_STDERR") else subprocess.DEVNULL)
    r = redis.Redis(port=port)
    for _ in range(200):
        try:
            r.ping()
            return proc, port, r
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit(f"{binary} did not start")


def load(r, kind, n):
    p = r.pipeline(transaction=False)
    for i in range(n):
        if kind == "hash":
            p.hset("big", f"field:{i}", f"value:{i}")
        elif kind == "zset":
            p.zadd("big", {f"member:{i}": i * 1.5})
        elif kind == "set":
            p.sadd("big", f"member:{i}")
        else:
            p.rpush("big", f"element:{i}")
        if i % 10000 == 9999:
            p.execute()
    p.execute()


def count(r, kind):
    return {"hash": r.hlen, "zset": r.zcard, "set": r.scard, "list": r.llen}[kind]("big")


def main():
    source_bin, target_bin = sys.argv[1], sys.argv[2]
    kind = sys.argv[3] if len(sys.argv) > 3 else "hash"
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 1_000_000
    work = tempfile.mkdtemp()
    procs = []
    try:
        for d in ("s", "t"):
            os.makedirs(os.path.join(work, d))
        sp, sport, src = start(source_bin, os.path.join(work, "s"))
        procs.append(sp)
        tp, tport, dst = start(target_bin, os.path.join(work, "t"))
        procs.append(tp)
        load(src, kind, n)
        stop = threading.Event()
        worst = [0.0]

        def pinger():
            c = redis.Redis(port=sport)
            while not stop.is_set():
                t = time.perf_counter()
                c.ping()
                worst[0] = max(worst[0], time.perf_counter() - t)

        th = threading.Thread(target=pinger)
        th.start()
        time.sleep(0.2)
        t = time.perf_counter()
        reply = src.execute_command("MIGRATE", "127.0.0.1", tport, "big", 0, 60000)
        took = time.perf_counter() - t
        time.sleep(0.2)
        stop.set()
        th.join()
        ok = count(dst, kind) == n and not src.exists("big")
        print(f"{os.path.basename(source_bin)} -> {os.path.basename(target_bin)} {kind} {n}: "
              f"MIGRATE {reply!r} in {took * 1000:.0f} ms, worst PING {worst[0] * 1000:.1f} ms, "
              f"{'arrived whole' if ok else 'MISMATCH'}")
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
