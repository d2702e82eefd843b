#!/usr/bin/env python3
"""Holds N simultaneous client connections against a running server, each doing real
commands, and measures what they cost.

    scripts/many_clients.py --port P --pid PID [--clients 10000] [--rounds 5]

Phases, each checked reply by reply (exact bytes):
  1. connect N clients, each sends PING; the accept rate is N / time until every
     client has read +PONG;
  2. ROUNDS rounds in which every client sends SET, INCR, GET, APPEND, GET on keys of
     its own (all clients at once, one pipeline each) and checks every reply;
  3. once the server's cron has freed idle query buffers (3 s), the server's RSS
     growth over the baseline divided by N (bytes per idle connection);
  4. PING round trips on one connection while all N are connected (p50/p99/max);
  5. one more connection, past maxclients, must read exactly
     `-ERR max number of clients reached` and then the end of the stream.
It works against redis-server too (for comparison). One process, one epoll loop:
modest in CPU. Exits non-zero on any wrong reply.
"""
import argparse
import os
import resource
import selectors
import socket
import sys
import time


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def bulk(v):
    v = v if isinstance(v, bytes) else str(v).encode()
    return b"$%d\r\n%s\r\n" % (len(v), v)


class Client:
    __slots__ = ("sock", "want", "got")

    def __init__(self, sock):
        self.sock = sock
        self.want = b""
        self.got = b""


def exchange(sel, clients, requests, expected, timeout=120.0):
    """Sends each client its request bytes, then reads until each has exactly its
    expected reply bytes. Returns the number of wrong replies."""
    for c, req, exp in zip(clients, requests, expected):
        c.want = exp
        c.got = b""
        c.sock.sendall(req)
        sel.register(c.sock, selectors.EVENT_READ, c)
    waiting = len(clients)
    bad = 0
    deadline = time.monotonic() + timeout
    while waiting:
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out with {waiting} clients still waiting")
        for key, _ in sel.select(timeout=1.0):
            c = key.data
            data = c.sock.recv(65536)
            if not data:
                raise RuntimeError("server closed a client connection")
            c.got += data
            if len(c.got) >= len(c.want):
                if c.got != c.want:
                    bad += 1
                    if bad <= 5:
                        print(f"wrong reply: {c.got!r} != {c.want!r}", file=sys.stderr)
                sel.unregister(c.sock)
                waiting -= 1
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True, help="server pid (for RSS)")
    ap.add_argument("--clients", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pings", type=int, default=2000)
    ap.add_argument("--no-refusal", action="store_true", help="skip the maxclients+1 check")
    a = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = a.clients + 64
    if soft < need:
        if hard < need:
            sys.exit(f"open-files hard limit {hard} < {need} needed for {a.clients} clients")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))

    sel = selectors.DefaultSelector()
    base_rss = rss_bytes(a.pid)
    clients = []
    t0 = time.monotonic()
    for _ in range(a.clients):
        s = socket.create_connection(("127.0.0.1", a.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        clients.append(Client(s))
    t_connected = time.monotonic() - t0
    bad = exchange(sel, clients, [resp("PING")] * len(clients), [b"+PONG\r\n"] * len(clients))
    t_served = time.monotonic() - t0
    print(f"clients: {a.clients}")
    print(f"connect: {t_connected:.2f}s, all served PING: {t_served:.2f}s, "
          f"accept rate: {a.clients / t_served:.0f} conn/s")

    pid_tag = os.getpid()
    t0 = time.monotonic()
    for r in range(1, a.rounds + 1):
        reqs, exps = [], []
        for i, _ in enumerate(clients):
            k, ctr = f"mc:{pid_tag}:{i}", f"mc:{pid_tag}:{i}:n"
            val = f"v{r}-{i}"
            reqs.append(resp("SET", k, val) + resp("INCR", ctr) + resp("GET", k)
                        + resp("APPEND", k, "x") + resp("GET", ctr))
            exps.append(b"+OK\r\n" + b":%d\r\n" % r + bulk(val)
                        + b":%d\r\n" % (len(val) + 1) + bulk(r))
        bad += exchange(sel, clients, reqs, exps)
    dt = time.monotonic() - t0
    ops = a.rounds * 5 * len(clients)
    print(f"rounds: {a.rounds}, commands: {ops}, {ops / dt:.0f} cmd/s, wrong replies: {bad}")

    time.sleep(3.0)
    per_conn = (rss_bytes(a.pid) - base_rss) / a.clients
    print(f"server RSS per idle connection: {per_conn / 1024:.1f} KiB "
          f"(baseline {base_rss / 1048576:.1f} MiB)")

    probe = clients[0].sock
    lat = []
    for _ in range(a.pings):
        t = time.perf_counter()
        probe.sendall(b"*1\r\n$4\r\nPING\r\n")
        got = b""
        while len(got) < 7:
            got += probe.recv(64)
        lat.append(time.perf_counter() - t)
        if got != b"+PONG\r\n":
            bad += 1
    lat.sort()
    us = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e6
    print(f"PING with {a.clients} connected: p50 {us(0.5):.0f} us, p99 {us(0.99):.0f} us, "
          f"max {lat[-1] * 1e6:.0f} us")

    if not a.no_refusal:
        extra = socket.create_connection(("127.0.0.1", a.port))
        extra.settimeout(10)
        text = b""
        while True:
            d = extra.recv(4096)
            if not d:
                break
            text += d
        ok = text == b"-ERR max number of clients reached\r\n"
        print(f"client {a.clients + 1}: {text!r} ({'ok' if ok else 'WRONG'})")
        bad += 0 if ok else 1

    for c in clients:
        c.sock.close()
    print("FAIL" if bad else "OK")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
