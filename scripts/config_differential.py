#!/usr/bin/env python3
"""CONFIG SET of every parameter, with awkward values, against redis-server and
Cinnabar side by side; prints each parameter whose reply or CONFIG GET afterwards
differs, then restores both servers' values.

    scripts/config_differential.py REDIS_PORT CINNABAR_PORT [VALUE ...]

The parameters compared are those both servers list in CONFIG GET *, less the ones
that would cut the run short (requirepass, port, dir, maxmemory, save, ...). Where the
reference is older than 7.4 its own differences show too (loglevel `nothing`,
maxmemory-samples' 1..64): judge each against Redis 7.4's config.c before changing
anything.
"""

import sys

from differential import Conn

# Values that would lock the run out, move the servers or make them refuse writes.
SKIPPED = {b"requirepass", b"dir", b"port", b"bind", b"unixsocket", b"logfile", b"dbfilename",
           b"maxmemory", b"tls-port", b"cluster-enabled", b"masterauth", b"masteruser", b"aclfile",
           b"pidfile", b"appendonly", b"appenddirname", b"appendfilename", b"enable-debug-command",
           b"protected-mode", b"unixsocketperm", b"daemonize", b"supervised", b"maxclients",
           b"client-output-buffer-limit", b"replicaof", b"slaveof", b"bind-source-addr",
           b"oom-score-adj", b"oom-score-adj-values", b"maxmemory-clients",
           b"client-query-buffer-limit", b"proto-max-bulk-len", b"save", b"watchdog-period"}
VALUES = ["abc", "-1", "0", "1", "yes", "100mb", "", "2gb", "-5%", "50%", "1 2", "off",
          "9223372036854775808", "+5", "007", "-0", "2147483648", "4294967296", "1k", "1KB",
          " 1", "1 ", "1.5", "99999999999999999999", "18446744073709551615", "10000000000gb", "0%"]


def config(conn, pattern):
    kind, value = conn.cmd(["CONFIG", "GET", pattern])
    items = [x[1] for x in value]
    return dict(zip(items[0::2], items[1::2]))


def main():
    red, cin = Conn(int(sys.argv[1])), Conn(int(sys.argv[2]))
    values = sys.argv[3:] or VALUES
    before_red, before_cin = config(red, "*"), config(cin, "*")
    print("only the reference has:", b" ".join(sorted(set(before_red) - set(before_cin))).decode())
    print("only Cinnabar has:", b" ".join(sorted(set(before_cin) - set(before_red))).decode())
    differences = 0
    for name in sorted(set(before_red) & set(before_cin) - SKIPPED):
        if before_red[name] != before_cin[name]:
            print(f"default {name.decode()}: {before_red[name]} / {before_cin[name]}")
        for v in values:
            replies = [c.cmd(["CONFIG", "SET", name, v]) for c in (red, cin)]
            shown = [config(c, name.decode()) for c in (red, cin)]
            if replies[0] != replies[1] or shown[0] != shown[1]:
                differences += 1
                print(f"CONFIG SET {name.decode()} {v!r}\n    redis    {replies[0]} {shown[0]}"
                      f"\n    cinnabar {replies[1]} {shown[1]}")
            red.cmd(["CONFIG", "SET", name, before_red[name]])
            cin.cmd(["CONFIG", "SET", name, before_cin[name]])
    print(f"differences: {differences}")


if __name__ == "__main__":
    main()
