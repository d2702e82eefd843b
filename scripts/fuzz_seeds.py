#!/usr/bin/env python3
"""Regenerates the fuzz seed corpora in fuzz/corpus/ from a running Cinnabar.

    scripts/fuzz_seeds.py PORT DIR

PORT: a cinnabar started with `--port PORT --dir DIR --appendonly yes --save ""`
(DIR is its working directory). Every seed is made here: DUMP payloads and RDB files
of each type and encoding, the AOF directory after a rewrite, requests, Lua library
inputs and cluster bus messages. Each seed starts with the target's flag byte (see
fuzz/src/lib.rs).
"""

import hashlib
import os
import socket
import struct
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus")


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.s.recv(65536)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b":"):
            return rest
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def __call__(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self._read()


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def populate(r):
    """One key of each type and encoding; returns their names."""
    r("CONFIG", "SET", "list-compress-depth", "1")
    r("CONFIG", "SET", "list-max-listpack-size", "4")
    r("SET", "str:int", "12345")
    r("SET", "str:emb", "hello")
    r("SET", "str:raw", "x" * 100)
    r("SET", "str:lzf", "abcd" * 40)
    r("SET", "str:exp", "v", "PX", "100000000")
    r("RPUSH", "list:lp", "a", "1", "bb")
    r("RPUSH", "list:ql", *["item%d" % i for i in range(20)])
    r("RPUSH", "list:plain", "y" * 9000)
    r("SADD", "set:int", 1, 2, 3, -7)
    r("SADD", "set:lp", "a", "b", "c")
    r("SADD", "set:ht", *["m%d" % i for i in range(200)])
    r("ZADD", "zset:lp", 1, "a", 2.5, "b", "-inf", "c")
    r("ZADD", "zset:sl", *sum([[i * 0.5, "z%d" % i] for i in range(200)], []))
    r("HSET", "hash:lp", "f1", "v1", "f2", "22")
    r("HSET", "hash:ht", *sum([["f%d" % i, "v%d" % i] for i in range(200)], []))
    r("HSET", "hash:ttl", "a", "1", "b", "2")
    r("HPEXPIRE", "hash:ttl", "100000000", "FIELDS", "1", "a")
    r("HSET", "hash:ttlht", *sum([["f%d" % i, "v"] for i in range(200)], []))
    r("HPEXPIRE", "hash:ttlht", "100000000", "FIELDS", "2", "f1", "f2")
    r("XADD", "stream:s", "1-1", "a", "1")
    r("XADD", "stream:s", "2-1", "a", "2", "b", "x")
    r("XADD", "stream:s", "3-0", "c", "3")
    r("XGROUP", "CREATE", "stream:s", "g1", "0")
    r("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "2", "STREAMS", "stream:s", ">")
    r("XDEL", "stream:s", "2-1")
    r("XADD", "stream:empty", "5-5", "k", "v")
    r("XDEL", "stream:empty", "5-5")
    r("PFADD", "hll:sparse", "a", "b", "c")
    r("PFADD", "hll:dense", *["e%d" % i for i in range(3000)])
    r("FUNCTION", "LOAD", "REPLACE",
      "#!lua name=seedlib\nredis.register_function('seedf', function() return 1 end)")
    return sorted(k.decode() for k in r("KEYS", "*"))


def wait_bg(r, field):
    for _ in range(200):
        info = r("INFO", "persistence").decode()
        if field + ":0" in info:
            return
        time.sleep(0.05)
    raise RuntimeError(field + " did not finish")


def main():
    port, workdir = int(sys.argv[1]), sys.argv[2]
    r = Conn(port)
    r("FLUSHALL")
    keys = populate(r)
    for k in keys:
        p = r("DUMP", k)
        name = k.replace(":", "_")
        put("restore_dump", name, b"\x03" + p)
        put("restore_value", name, b"\x02" + p)
    # One small file per key (small seeds mutate best), then the whole dataset.
    dumps = {k: r("DUMP", k) for k in keys}
    for k in keys:
        r("FLUSHALL")
        r("RESTORE", k, "0", dumps[k])
        r("SAVE")
        with open(os.path.join(workdir, "dump.rdb"), "rb") as f:
            put("rdb_file", k.replace(":", "_") + ".rdb", b"\x02" + f.read())
    r("FLUSHALL")
    populate(r)
    r("SELECT", "3")
    r("SET", "db3", "x", "EX", "1000")
    r("SELECT", "0")
    r("SAVE")
    with open(os.path.join(workdir, "dump.rdb"), "rb") as f:
        put("rdb_file", "all.rdb", b"\x02" + f.read())

    # AOF: a rewrite leaves an RDB base; the commands after it go to the incr file.
    r("BGREWRITEAOF")
    wait_bg(r, "aof_rewrite_in_progress")
    r("SET", "after", "rewrite")
    r("MULTI")
    r("INCR", "counter")
    r("LPUSH", "l", "a", "b")
    r("EXEC")
    r("PEXPIREAT", "after", "99999999999999")
    r("XADD", "st", "*", "f", "v")
    r("ZINCRBY", "zz", "1.5", "m")
    r("SETRANGE", "sr", "10", "abc")
    time.sleep(1.2)
    aofdir = os.path.join(workdir, "appendonlydir")
    base = incr = b""
    for name in sorted(os.listdir(aofdir)):
        with open(os.path.join(aofdir, name), "rb") as f:
            data = f.read()
        if name.endswith(".manifest"):
            put("aof_manifest", "manifest", data)
        elif ".base." in name:
            base = data
        elif ".incr." in name:
            incr = data
    put("aof_file", "incr.aof", incr)
    put("aof_file", "base-preamble.aof", base)
    put("aof_file", "preamble-and-commands.aof", base + incr)
    put("aof_file", "annotated.aof", b"#TS:1700000000\r\n" + incr[:400])
    put("aof_manifest", "multi",
        b"file appendonly.aof.5.base.rdb seq 5 type b\n"
        b"file appendonly.aof.1.incr.aof seq 1 type h\n"
        b"file appendonly.aof.6.incr.aof seq 6 type i\n"
        b"file appendonly.aof.7.incr.aof seq 7 type i\n")
    put("aof_manifest", "quoted",
        b'file "with space.aof" seq 2 type i\r\n# comment\nfile plain seq 1 type b\n')

    # RESP requests (flag byte 0: authenticated, default limits, 1-byte pieces).
    put("resp_request", "multibulk", b"\x00*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n")
    put("resp_request", "pipeline",
        b"\x14*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*0\r\n*-1\r\n")
    put("resp_request", "inline",
        b"\x08SET k \"a\\x41\\n b\" 'it''s'\r\nPING\n\r\n   \n")
    put("resp_request", "bad", b"\x01*12\r\n$3\r\nSET\r\n")
    put("resp_request", "bigbulk", b"\x06*1\r\n$100\r\n" + b"z" * 100 + b"\r\n")
    put("resp_request", "zero-and-neg", b"\x00*2\r\n$0\r\n\r\n$-1\r\n")

    # Lua libraries: the flag's low bits pick the library; for struct a NUL
    # separates the format from the data.
    lua = [
        (0, b'{"a":[1,2.5,-3e10,true,false,null],"b":{"c":"\\u00e9\\n"},"d":[]}'),
        (0, b'[[[["deep"]]], 1e308, -0, "\\ud83d\\ude00"]'),
        (0, b"  123 "),
    ]
    for i, (which, data) in enumerate(lua):
        put("lua_libs", "cjson%d" % i, bytes([which]) + data)
    packed = r("EVAL", "return cmsgpack.pack({1,2,{a='b'}}, 'str', 3.5, -1, 2^40, true, nil, "
               "string.rep('x', 300), {[1]=1,[3]=3})", "0")
    put("lua_libs", "msgpack0", b"\x01" + packed)
    packed = r("EVAL", "return cmsgpack.pack(-70000, 65536, 1e300, {}, "
               "{x={y={z={}}}}, string.rep('y', 40))", "0")
    put("lua_libs", "msgpack1", b"\x01" + packed)
    for i, fmt in enumerate([b"<i4>h!8bBc3s", b">lLdfc0xI8", b"=hHiI", b"!4c10i7"]):
        data = r("EVAL", "local f = ARGV[1] local ok, v = pcall(struct.pack, f, 1, 2, 3, 'abc', 5) "
                 "if ok then return v end return ''", "0", fmt)
        put("lua_libs", "struct%d" % i, b"\x02" + fmt + b"\x00" + data)
    put("lua_libs", "struct-values", b"\x02<i2hbc4\x001,2,3,abcd")
    put("lua_libs", "bit0", b"\x03" + bytes(range(1, 17)))
    put("lua_libs", "bit1", b"\x03\xff\xff\xff\xff\x00\x00\x00\x01\x80" + b"\x00" * 15)

    # Cluster bus messages, laid out as the wire format (network byte order).
    def header(typ, count=0, exts=0, mflags=0, body=b""):
        h = bytearray(2256)
        h[0:4] = b"RCmb"
        h[8:10] = struct.pack(">H", 1)
        h[10:12] = struct.pack(">H", 7000)
        h[12:14] = struct.pack(">H", typ)
        h[14:16] = struct.pack(">H", count)
        h[16:24] = struct.pack(">Q", 3)
        h[24:32] = struct.pack(">Q", 2)
        h[32:40] = struct.pack(">Q", 99)
        h[40:80] = hashlib.sha1(b"sender").hexdigest().encode()
        h[80:80 + 4] = b"\xff\xff\x00\x01"
        h[2168:2168 + 9] = b"127.0.0.1"
        h[2214:2216] = struct.pack(">H", exts)
        h[2248:2250] = struct.pack(">H", 17000)
        h[2250:2252] = struct.pack(">H", 1)
        h[2253] = mflags
        msg = bytes(h) + body
        return msg[:4] + struct.pack(">I", len(msg)) + msg[8:]

    def gossip(name, port):
        g = bytearray(104)
        g[0:40] = hashlib.sha1(name).hexdigest().encode()
        g[40:48] = struct.pack(">II", 1, 2)
        g[48:48 + 8] = b"10.0.0.1"
        g[94:102] = struct.pack(">HHHH", port, port + 10000, 2, 0)
        return bytes(g)

    def ext(typ, payload):
        padded = payload + b"\x00" * (-len(payload) % 8)
        return struct.pack(">IHH", 8 + len(padded), typ, 0) + padded

    exts = (ext(0, b"host.example\x00") + ext(1, b"node-a\x00")
            + ext(2, hashlib.sha1(b"gone").hexdigest().encode() + struct.pack(">Q", 60))
            + ext(3, hashlib.sha1(b"shard").hexdigest().encode()))
    ping = header(0, 2, 4, 4, gossip(b"n1", 7001) + gossip(b"n2", 7002) + exts)
    fail = header(3, body=hashlib.sha1(b"failing").hexdigest().encode())
    publish = header(4, body=struct.pack(">II", 4, 5) + b"chanhello")
    update = header(7, body=struct.pack(">Q", 9) + hashlib.sha1(b"u").hexdigest().encode()
                    + b"\x0f" * 2048)
    mfstart = header(8)
    for name, msg in [("ping", ping), ("fail", fail), ("publish", publish),
                      ("update", update), ("mfstart", mfstart)]:
        put("cluster_message", name, b"\x00" + msg)
        put("cluster_message", name + "-alone", b"\x00" + msg[8:])
    put("cluster_message", "stream", b"\x00" + fail + publish + mfstart)


if __name__ == "__main__":
    main()
