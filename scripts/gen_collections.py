#!/usr/bin/env python3
"""Writes RESP commands to stdout that build N small collections, for memory checks:
   gen_collections.py lists|hashes|sets|zsets N [E]
   (E elements each: default 10 for lists, 5 for hashes, sets and zsets; zsets are
   `ZADD zs:N 1 a 2 b 3 c 4 d 5 e`, as in bench.sh's small-zset check)"""
import sys

kind, n = sys.argv[1], int(sys.argv[2])
e = int(sys.argv[3]) if len(sys.argv) > 3 else (10 if kind == "lists" else 5)
out = sys.stdout.buffer


def cmd(*args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


buf = []
for i in range(n):
    if kind == "lists":
        buf.append(cmd("RPUSH", f"list:{i}", *[f"item-{j}" for j in range(e)]))
    elif kind == "hashes":
        buf.append(cmd("HSET", f"hash:{i}", *sum(([f"field{j}", f"value{j}"] for j in range(e)), [])))
    elif kind == "sets":
        buf.append(cmd("SADD", f"set:{i}", *[f"member-{j}" for j in range(e)]))
    elif kind == "zsets":
        buf.append(cmd("ZADD", f"zs:{i}", *sum(([str(j + 1), chr(ord("a") + j)] for j in range(e)), [])))
    else:
        sys.exit(f"unknown kind {kind}")
    if len(buf) >= 10000:
        out.write(b"".join(buf))
        buf = []
out.write(b"".join(buf))
