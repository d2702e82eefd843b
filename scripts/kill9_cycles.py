#!/usr/bin/env python3
"""Kills the server with SIGKILL under write load, restarts it on the same directory,
and checks that every acknowledged write survived. Prints the counts per mode.

    scripts/kill9_cycles.py --mode MODE [--cycles 100] [--port 44100] [--writers 4]

Modes:
  always    appendonly yes, appendfsync always: no acknowledged write may be lost.
  everysec  appendonly yes, appendfsync everysec: reports the most writes lost in a
            cycle (SIGKILL keeps the page cache, so this does not test power loss).
  rdb       appendonly no, save points plus random BGSAVEs; writes go in MULTI/EXEC, so
            the restarted data must be one consistent snapshot; reports writes lost.
  rewrite   as `always`, with a BGREWRITEAOF of a preloaded dataset under way when
            the kill comes.
  fullsync  as `always` on a master with a preloaded dataset while a replica does a
            full sync; the kill hits the replica or the master (alternately); after the
            restart the replica must catch up to the same DEBUG DIGEST.

Every writer owns its keys: counter `c:W` (INCR), list `l:W` (RPUSH of 1, 2, 3...),
string keys `k:W:N` (SET). After each restart, per writer: the counter is at least its
acknowledged INCRs and at most that plus the one in flight; the list is exactly 1..m
with m at least the acknowledged RPUSHes (plus at most the one in flight); every
acknowledged key holds its value. With `--check-aof` the AOF directory's manifest is
given to that redis-check-aof after each restart (`--check-rdb`: dump.rdb to
redis-check-rdb in rdb mode). Exits non-zero on any loss (in the
modes that promise none), a failed restart or a corrupt file.
"""
import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    """A minimal RESP2 client: no retries, so a failed command is never resent."""

    def __init__(self, port, timeout=30.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise ConnectionError("closed")
            self.buf += d
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            d = self.sock.recv(65536)
            if not d:
                raise ConnectionError("closed")
            self.buf += d
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ValueError(f"bad reply {line!r}")

    def send(self, *args):
        self.sock.sendall(resp(*args))

    def cmd(self, *args):
        self.send(*args)
        r = self.reply()
        if isinstance(r, RuntimeError):
            raise r
        return r


class Writer:
    """One connection's acknowledged state, kept across restarts."""

    def __init__(self, wid):
        self.wid = wid
        self.incr_acked = 0  # acknowledged INCRs (= the counter's expected value)
        self.push_acked = 0  # last acknowledged list element (1, 2, 3, ...)
        self.keys_acked = 0  # keys k:W:1..keys_acked acknowledged
        self.inflight = None  # what was sent without a reply: "incr", "push", "set", "multi"
        self.acks_this_cycle = 0

    def run(self, port, stop, transactional, errors):
        self.inflight = None
        self.acks_this_cycle = 0
        try:
            c = Conn(port, timeout=10)
        except OSError:
            return
        w = self.wid
        step = 0
        try:
            while not stop.is_set():
                if transactional:
                    n = self.keys_acked + 1
                    self.inflight = "multi"
                    c.send("MULTI")
                    c.send("INCR", f"c:{w}")
                    c.send("RPUSH", f"l:{w}", n)
                    c.send("SET", f"k:{w}:{n}", n)
                    c.send("EXEC")
                    replies = [c.reply() for _ in range(5)]
                    if replies[4] != [n, n, "OK"]:
                        errors.append(f"writer {w}: EXEC replied {replies!r}")
                        return
                    self.incr_acked = self.push_acked = self.keys_acked = n
                    self.inflight = None
                    self.acks_this_cycle += 3
                    continue
                kind = ("incr", "push", "set")[step % 3]
                step += 1
                self.inflight = kind
                if kind == "incr":
                    r = c.cmd("INCR", f"c:{w}")
                    if r != self.incr_acked + 1:
                        errors.append(f"writer {w}: INCR replied {r}, expected {self.incr_acked + 1}")
                        return
                    self.incr_acked = r
                elif kind == "push":
                    n = self.push_acked + 1
                    r = c.cmd("RPUSH", f"l:{w}", n)
                    if r != n:
                        errors.append(f"writer {w}: RPUSH replied {r}, expected {n}")
                        return
                    self.push_acked = n
                else:
                    n = self.keys_acked + 1
                    r = c.cmd("SET", f"k:{w}:{n}", n)
                    if r != "OK":
                        errors.append(f"writer {w}: SET replied {r!r}")
                        return
                    self.keys_acked = n
                self.inflight = None
                self.acks_this_cycle += 1
        except (OSError, ConnectionError):
            pass  # the kill
        except RuntimeError as e:
            errors.append(f"writer {w}: error reply {e}")
        finally:
            c.close()

    def verify(self, c, snapshot, errors):
        """Checks the restarted data against the acknowledged state; returns how many
        acknowledged writes are missing, and adopts what the server has (an in-flight
        write that was applied counts as done)."""
        w = self.wid
        lost = 0
        v = int(c.cmd("GET", f"c:{w}") or 0)
        hi = self.incr_acked + (1 if self.inflight in ("incr", "multi") else 0)
        if v > hi:
            errors.append(f"writer {w}: counter {v} above acknowledged+in-flight {hi}")
        lost += max(0, self.incr_acked - v)
        items = [int(x) for x in c.cmd("LRANGE", f"l:{w}", 0, -1)]
        m = len(items)
        if items != list(range(1, m + 1)):
            errors.append(f"writer {w}: list is not 1..{m}: {items[:5]}...{items[-5:]}")
        hi = self.push_acked + (1 if self.inflight in ("push", "multi") else 0)
        if m > hi:
            errors.append(f"writer {w}: list length {m} above acknowledged+in-flight {hi}")
        lost += max(0, self.push_acked - m)
        # Keys: every acknowledged one (or, after a snapshot, every one up to what it has).
        k_hi = self.keys_acked + (1 if self.inflight in ("set", "multi") else 0)
        present = 0
        for start in range(1, k_hi + 1, 1000):
            names = [f"k:{w}:{i}" for i in range(start, min(k_hi, start + 999) + 1)]
            vals = c.cmd("MGET", *names)
            for i, val in zip(range(start, start + len(names)), vals):
                if val is None:
                    continue
                if val != str(i).encode():
                    errors.append(f"writer {w}: k:{w}:{i} = {val!r}")
                if i != present + 1:
                    errors.append(f"writer {w}: keys have a gap before k:{w}:{i}")
                present = i
        lost += max(0, self.keys_acked - present)
        if snapshot:
            # A snapshot: one consistent point in time across the transaction's writes.
            if not (v == m == present):
                errors.append(f"writer {w}: snapshot not consistent: counter {v}, list {m}, keys {present}")
        self.incr_acked, self.push_acked, self.keys_acked = v, m, present
        self.inflight = None
        return lost


class PortTaken(Exception):
    pass


class Server:
    def __init__(self, binary, port, d, args, port_range):
        self.binary, self.port, self.dir, self.args = binary, port, d, args
        self.port_range = port_range
        self.proc = None
        self.starts = 0

    def start(self):
        # Ports here lie in the ephemeral range: a client socket's TIME_WAIT may hold
        # ours while the server is down, and then it moves to another port.
        for _ in range(20):
            try:
                return self._start()
            except PortTaken:
                self.port = random.randrange(self.port_range[0], self.port_range[1])
        raise RuntimeError("no free port")

    def _start(self):
        log_path = os.path.join(self.dir, "server.log")
        log_start = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--enable-debug-command", "yes", "--loglevel", "notice"] + self.args,
            stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        self.starts += 1
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                with open(log_path, "rb") as f:
                    f.seek(log_start)
                    if b"Address already in use" in f.read():
                        raise PortTaken()
                raise RuntimeError(f"server on {self.port} exited with {self.proc.returncode} "
                                   f"(see {self.dir}/server.log)")
            try:
                c = Conn(self.port, timeout=5)
                try:
                    if c.cmd("PING") == "PONG":
                        return
                except RuntimeError:
                    pass  # LOADING
                finally:
                    c.close()
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("server did not answer")

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def conn(self):
        return Conn(self.port)


def check_aof(tool, d, errors):
    aofdir = os.path.join(d, "appendonlydir")
    manifests = [f for f in os.listdir(aofdir) if f.endswith(".manifest")] if os.path.isdir(aofdir) else []
    if not manifests:
        errors.append("no AOF manifest")
        return
    r = subprocess.run([tool, os.path.join(aofdir, manifests[0])], capture_output=True, text=True)
    if r.returncode != 0 or "is valid" not in r.stdout:
        errors.append(f"redis-check-aof: {r.stdout.strip()[-300:]} {r.stderr.strip()[-300:]}")


def check_rdb(tool, d, errors):
    path = os.path.join(d, "dump.rdb")
    if not os.path.exists(path):
        return  # no save yet
    r = subprocess.run([tool, path], capture_output=True, text=True)
    if r.returncode != 0 or "RDB looks OK" not in r.stdout:
        errors.append(f"redis-check-rdb: {r.stdout.strip()[-300:]} {r.stderr.strip()[-300:]}")


def wait_synced(master, replica, timeout=20):
    deadline = time.monotonic() + timeout
    m, r = master.conn(), replica.conn()
    try:
        while time.monotonic() < deadline:
            info = r.cmd("INFO", "replication").decode()
            mo = m.cmd("INFO", "replication").decode()
            up = "master_link_status:up" in info
            roff = [l for l in info.split("\r\n") if l.startswith("slave_repl_offset:")]
            moff = [l for l in mo.split("\r\n") if l.startswith("master_repl_offset:")]
            if up and roff and moff and roff[0].split(":")[1] == moff[0].split(":")[1]:
                return m.cmd("DEBUG", "DIGEST") == r.cmd("DEBUG", "DIGEST")
            time.sleep(0.05)
        print("replica:", info.replace("\r\n", " "), "master:", mo.replace("\r\n", " "))
        return False
    finally:
        m.close()
        r.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True,
                    choices=["always", "everysec", "rdb", "rewrite", "fullsync"])
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--port", type=int, default=44100)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--server", default=os.path.join(HERE, "..", "target", "release", "cinnabar"))
    ap.add_argument("--dir", help="data directory (default: a fresh temporary one, removed)")
    ap.add_argument("--check-aof", metavar="REDIS_CHECK_AOF", help="validate the AOF after each restart")
    ap.add_argument("--check-rdb", metavar="REDIS_CHECK_RDB", help="validate dump.rdb after each restart (rdb mode)")
    ap.add_argument("--preload", type=int, default=200000,
                    help="keys loaded before rewrite/fullsync cycles (DEBUG POPULATE)")
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    rng = random.Random(a.seed)

    root = a.dir or tempfile.mkdtemp(prefix="kill9-")
    os.makedirs(root, exist_ok=True)
    mdir = os.path.join(root, "master")
    os.makedirs(mdir, exist_ok=True)
    aof = ["--appendonly", "yes", "--appendfsync", "everysec" if a.mode == "everysec" else "always"]
    if a.mode == "rdb":
        server_args = ["--appendonly", "no", "--save", "1 1 10 100"]
    else:
        server_args = aof + ["--save", ""]
    if a.mode == "fullsync":
        server_args += ["--repl-diskless-sync-delay", "0"]
    ports = (a.port, a.port + 400)
    master = Server(os.path.abspath(a.server), a.port, mdir, server_args, ports)
    replica = None
    master.start()
    if a.mode in ("rewrite", "fullsync") and a.preload:
        c = master.conn()
        c.cmd("DEBUG", "POPULATE", a.preload, "pre", 64)
        if a.mode == "rewrite":
            c.cmd("BGREWRITEAOF")
            while "aof_rewrite_in_progress:1" in c.cmd("INFO", "persistence").decode():
                time.sleep(0.05)
        c.close()
    if a.mode == "fullsync":
        rdir = os.path.join(root, "replica")
        os.makedirs(rdir, exist_ok=True)
        replica = Server(os.path.abspath(a.server), a.port + 1, rdir, aof + ["--save", ""], ports)

    writers = [Writer(w) for w in range(a.writers)]
    exact = a.mode in ("always", "rewrite", "fullsync")
    total_acks = total_lost = max_lost = 0
    errors = []
    cycles_done = 0
    for cycle in range(1, a.cycles + 1):
        stop = threading.Event()
        threads = [threading.Thread(target=w.run, args=(master.port, stop, a.mode == "rdb", errors))
                   for w in writers]
        for t in threads:
            t.start()
        victim = master
        if a.mode == "rewrite":
            time.sleep(rng.uniform(0.0, 0.1))
            c = master.conn()
            try:
                c.cmd("BGREWRITEAOF")
            except RuntimeError:
                pass  # one already scheduled
            c.close()
            time.sleep(rng.uniform(0.0, 1.0))
        elif a.mode == "fullsync":
            # A fresh full sync each cycle: the replica starts (or restarts) now.
            if replica.proc is None or replica.proc.poll() is not None:
                replica.start()
            c = replica.conn()
            c.cmd("REPLICAOF", "NO", "ONE")
            c.cmd("REPLICAOF", "127.0.0.1", master.port)
            c.close()
            victim = replica if cycle % 2 else master
            time.sleep(rng.uniform(0.0, 0.8))
        elif a.mode == "rdb":
            time.sleep(rng.uniform(0.0, 0.6))
            if rng.random() < 0.7:
                c = master.conn()
                try:
                    c.cmd("BGSAVE")
                except RuntimeError:
                    pass
                c.close()
            time.sleep(rng.uniform(0.0, 0.6))
        else:
            time.sleep(rng.uniform(0.05, 0.8))
        victim.kill9()
        stop.set()
        for t in threads:
            t.join()
        try:
            victim.start()
            if replica:
                c = replica.conn()
                c.cmd("REPLICAOF", "127.0.0.1", master.port)
                c.close()
        except RuntimeError as e:
            errors.append(f"cycle {cycle}: restart failed: {e}")
            break
        acks = sum(w.acks_this_cycle for w in writers)
        c = master.conn()
        lost = sum(w.verify(c, a.mode == "rdb", errors) for w in writers)
        c.close()
        if a.check_aof and a.mode != "rdb":
            check_aof(a.check_aof, mdir, errors)
        if a.check_rdb and a.mode == "rdb":
            check_rdb(a.check_rdb, mdir, errors)
        if a.mode == "fullsync" and not wait_synced(master, replica):
            errors.append(f"cycle {cycle}: replica did not reach the master's digest")
        total_acks += acks
        total_lost += lost
        max_lost = max(max_lost, lost)
        cycles_done = cycle
        print(f"cycle {cycle}: {acks} acknowledged writes, {lost} lost", flush=True)
        if errors:
            break
    master.kill9()
    if replica:
        replica.kill9()
    print(f"mode {a.mode}: cycles {cycles_done}, acknowledged writes {total_acks}, "
          f"lost {total_lost}, most lost in one cycle {max_lost}, restarts {master.starts - 1}"
          + (f" (replica starts {replica.starts})" if replica else ""))
    leftovers = sorted(f for f in os.listdir(mdir) if f.startswith("temp"))
    if leftovers:
        print(f"temporary files left in the data directory: {len(leftovers)}")
    for e in errors[:20]:
        print("ERROR:", e)
    if not a.dir:
        shutil.rmtree(root, ignore_errors=True)
    failed = errors or (exact and total_lost)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
