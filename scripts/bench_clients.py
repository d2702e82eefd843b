#!/usr/bin/env python3
"""Load generators for scripts/bench.sh that redis-benchmark does not provide.

  bench_clients.py subs PORT N CHANNEL
      N connections subscribed to CHANNEL that drain their sockets until killed
      (prints "ready" once every subscription is confirmed).
  bench_clients.py multi PORT TX CLIENTS DEPTH
      CLIENTS connections each sending DEPTH transactions per write
      (MULTI, 10 x SET, EXEC) until TX transactions are done; prints tx/s.
"""
import selectors
import socket
import sys
import time


def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def subs(port, n, channel):
    sel = selectors.DefaultSelector()
    frame = cmd(b"SUBSCRIBE", channel)
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(frame)
        got = b""
        while got.count(b"\r\n") < 5:
            got += s.recv(4096)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            try:
                if not key.fileobj.recv(1 << 20):
                    sel.unregister(key.fileobj)
            except BlockingIOError:
                pass


def multi(port, total, clients, depth):
    tx = cmd(b"MULTI")
    for i in range(10):
        tx += cmd(b"SET", b"key:%d" % i, b"xxxxxxxxxxxxxxxx")
    tx += cmd(b"EXEC")
    # +OK, 10 x +QUEUED, then *10 and ten +OK.
    reply_len = 5 + 10 * 9 + 5 + 10 * 5
    batch = tx * depth
    sel = selectors.DefaultSelector()
    state = {}
    for _ in range(clients):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sel.register(s, selectors.EVENT_READ)
        state[s] = [total // clients, 0]  # transactions left to send, bytes awaited
    start = time.perf_counter()
    for s, st in state.items():
        st[0] -= depth
        st[1] = reply_len * depth
        s.sendall(batch)
    active = len(state)
    while active:
        for key, _ in sel.select():
            s = key.fileobj
            st = state[s]
            st[1] -= len(s.recv(1 << 20))
            if st[1] > 0:
                continue
            if st[0] <= 0:
                sel.unregister(s)
                active -= 1
                continue
            st[0] -= depth
            st[1] = reply_len * depth
            s.sendall(batch)
    elapsed = time.perf_counter() - start
    print(f"{(total // clients // depth) * depth * clients / elapsed:.0f}")


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "subs":
        subs(port, int(sys.argv[3]), sys.argv[4].encode())
    else:
        multi(port, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
