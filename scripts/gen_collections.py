#!/usr/bin/env python3
"""Writes RESP commands to stdout that build N small collections, for memory checks:
   gen_collections.py lists|hashes|sets N   (10-element lists, 5-field hashes, 5-member sets)"""
import sys

kind, n = sys.argv[1], int(sys.argv[2])
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
        buf.append(cmd("RPUSH", f"list:{i}", *[f"item-{j}" for j in range(10)]))
    elif kind == "hashes":
        buf.append(cmd("HSET", f"hash:{i}", *sum(([f"field{j}", f"value{j}"] for j in range(5)), [])))
    elif kind == "sets":
        buf.append(cmd("SADD", f"set:{i}", *[f"member-{j}" for j in range(5)]))
    else:
        sys.exit(f"unknown kind {kind}")
    if len(buf) >= 10000:
        out.write(b"".join(buf))
        buf = []
out.write(b"".join(buf))
