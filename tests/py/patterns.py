"""Application patterns written the way redis-py users write them, unchanged.

Run by tests/redis_py.rs against a Cinnabar server (and, when installed, against the
reference redis-server to keep these expectations honest) in RESP2 and RESP3:

    python3 tests/py/patterns.py PORT PROTOCOL

Each pattern is a function taking a fresh client on an empty server. Features newer
than the server under test (hash-field expiry is 7.4) are skipped by version.
"""

import sys
import threading
import time

import redis


PORT, PROTOCOL = 6379, 3


def connect(decode=True):
    """Another client of the server under test, as a second process would have."""
    return redis.Redis(port=PORT, protocol=PROTOCOL, decode_responses=decode)


def flat(reply):
    """redis-py shapes some replies differently per protocol (pairs vs flat lists)."""
    out = []
    for x in reply:
        out.extend(flat(x) if isinstance(x, (list, tuple)) else [x])
    return out


def version(r):
    return tuple(int(x) for x in r.info("server")["redis_version"].split(".")[:2])


# ---------------------------------------------------------------- strings, locks, ids


def cache_and_counters(r):
    r.set("page:/", "<html>", ex=60)
    assert r.get("page:/") == "<html>"
    assert 59 <= r.ttl("page:/") <= 60
    raw = connect(decode=False)
    raw.set("blob", b"\x00\xff\x01binary")
    assert raw.get("blob") == b"\x00\xff\x01binary"
    raw.close()
    assert r.incr("id:user") == 1
    assert r.incrby("id:user", 10) == 11
    assert r.incrbyfloat("price", 2.5) == 2.5
    assert r.mget("id:user", "missing") == ["11", None]
    assert r.setnx("once", "a") is True
    assert r.setnx("once", "b") is False
    assert r.getdel("once") == "a"
    assert r.strlen("page:/") == 6


def locks(r):
    unlock = r.register_script(
        "if redis.call('get', KEYS[1]) == ARGV[1] then "
        "return redis.call('del', KEYS[1]) else return 0 end"
    )
    assert r.set("lock:job", "owner-1", nx=True, px=30000) is True
    assert r.set("lock:job", "owner-2", nx=True, px=30000) is None
    assert unlock(keys=["lock:job"], args=["owner-2"]) == 0
    assert unlock(keys=["lock:job"], args=["owner-1"]) == 1
    assert r.exists("lock:job") == 0
    # redis-py's own Lock (Lua-backed, owner-checked, auto-expiring).
    lock = r.lock("resource", timeout=5, blocking_timeout=1)
    assert lock.acquire() is True
    assert r.lock("resource", timeout=5).acquire(blocking=False) is False
    assert lock.extend(5) is True
    lock.release()
    assert r.exists("resource") == 0


def owner_checked_unlock_with_watch(r):
    r.set("lock", "me")
    with r.pipeline() as p:
        p.watch("lock")
        assert p.get("lock") == "me"
        p.multi()
        p.delete("lock")
        assert p.execute() == [1]
    # A write by someone else between WATCH and EXEC aborts the transaction.
    r.set("lock", "me")
    other = connect()
    with r.pipeline() as p:
        p.watch("lock")
        other.set("lock", "thief")
        p.multi()
        p.delete("lock")
        try:
            p.execute()
            raise AssertionError("EXEC should have been aborted")
        except redis.WatchError:
            pass
    assert r.get("lock") == "thief"


def rate_limiters(r):
    # Fixed window with MULTI.
    for i in range(5):
        with r.pipeline() as p:
            p.incr("rl:user:1")
            p.expire("rl:user:1", 60)
            n, _ = p.execute()
        assert n == i + 1
    # Sliding window as a script.
    sliding = r.register_script(
        """
        local now = tonumber(ARGV[1])
        redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - tonumber(ARGV[2]))
        if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
            redis.call('ZADD', KEYS[1], now, ARGV[4])
            redis.call('PEXPIRE', KEYS[1], ARGV[2])
            return 1
        end
        return 0
        """
    )
    allowed = [sliding(keys=["sw"], args=[1000 + i, 1000, 3, "req%d" % i]) for i in range(5)]
    assert allowed == [1, 1, 1, 0, 0]
    # Token bucket in a script, using hash fields.
    bucket = r.register_script(
        """
        local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or ARGV[1])
        if tokens > 0 then
            redis.call('HSET', KEYS[1], 'tokens', tokens - 1)
            return tokens - 1
        end
        return -1
        """
    )
    assert [bucket(keys=["tb"], args=[2]) for _ in range(3)] == [1, 0, -1]


def bitmaps_and_hll(r):
    for day in (0, 3, 4):
        r.setbit("signin:u1:2026-11", day, 1)
    assert r.getbit("signin:u1:2026-11", 3) == 1
    assert r.bitcount("signin:u1:2026-11") == 3
    assert r.bitpos("signin:u1:2026-11", 1) == 0
    assert r.pfadd("uv:today", *["u%d" % i for i in range(1000)]) == 1
    assert 980 <= r.pfcount("uv:today") <= 1020


# ---------------------------------------------------------------- hashes and sets


def hashes(r):
    r.hset("user:1", mapping={"name": "ann", "age": 30, "city": "Oslo"})
    assert r.hgetall("user:1") == {"name": "ann", "age": "30", "city": "Oslo"}
    assert r.hmget("user:1", ["name", "nope"]) == ["ann", None]
    assert r.hincrby("user:1", "age", 1) == 31
    assert r.hincrbyfloat("user:1", "score", 1.5) == 1.5
    assert r.hsetnx("user:1", "name", "bob") == 0
    assert sorted(r.hkeys("user:1")) == ["age", "city", "name", "score"]
    assert r.hlen("user:1") == 4
    # Hash ID generator per namespace.
    assert [r.hincrby("ids", "orders", 1) for _ in range(3)] == [1, 2, 3]
    # HSCAN iterator.
    r.hset("big", mapping={"f%d" % i: i for i in range(1000)})
    assert dict(r.hscan_iter("big")) == {"f%d" % i: str(i) for i in range(1000)}
    assert r.object("encoding", "big") == "hashtable"
    assert r.object("encoding", "user:1") == "listpack"


def login_sessions(r):
    if version(r) < (7, 4):
        return
    r.hset("session:abc", mapping={"user": "1", "csrf": "t0k"})
    assert r.hexpire("session:abc", 60, "csrf") == [1]
    assert r.hpexpire("session:abc", 50, "user", "nope") == [1, -2]
    assert r.httl("session:abc", "csrf")[0] in (59, 60)
    time.sleep(0.2)
    assert r.hgetall("session:abc") == {"csrf": "t0k"}
    assert r.hpersist("session:abc", "csrf") == [1]
    assert r.httl("session:abc", "csrf") == [-1]


def sets(r):
    r.sadd("tags:post:1", "rust", "db", "redis")
    r.sadd("tags:post:2", "db", "python")
    assert r.sinter("tags:post:1", "tags:post:2") == {"db"}
    assert r.sunion("tags:post:1", "tags:post:2") == {"rust", "db", "redis", "python"}
    assert r.sismember("tags:post:1", "rust") == 1
    assert r.smismember("tags:post:1", ["rust", "go"]) == [1, 0]
    # Unique visitors.
    for u in ("a", "b", "a", "c"):
        r.sadd("uv", u)
    assert r.scard("uv") == 3
    # Lottery: draw without replacement.
    r.sadd("lottery", *range(1, 51))
    winners = r.spop("lottery", 3)
    assert len(set(winners)) == 3 and r.scard("lottery") == 47
    assert len(r.srandmember("lottery", -100)) == 100
    # Social graph: mutual follows and suggestions.
    r.sadd("following:ann", "bob", "cat", "dan")
    r.sadd("following:bob", "ann", "cat", "eve")
    r.sadd("followers:ann", "bob", "eve")
    assert r.sinter("following:ann", "followers:ann") == {"bob"}
    assert r.sdiff("following:bob", "following:ann") == {"ann", "eve"}
    assert r.sinterstore("common", ["following:ann", "following:bob"]) == 1
    assert r.sintercard(2, ["following:ann", "following:bob"]) == 1
    assert r.smove("following:ann", "following:bob", "dan") is True
    assert set(r.sscan_iter("following:bob")) == {"ann", "cat", "eve", "dan"}
    r.sadd("ints", 1, 2, 3)
    assert r.object("encoding", "ints") == "intset"


def sort_by_hash_fields(r):
    for uid, age in ((1, 30), (2, 20), (3, 40)):
        r.rpush("uids", uid)
        r.hset("u:%d" % uid, mapping={"age": age, "name": "n%d" % uid})
    assert r.sort("uids", by="u:*->age", get=["#", "u:*->name"]) == [
        "2", "n2", "1", "n1", "3", "n3"]
    assert r.sort("uids", desc=True, start=0, num=2) == ["3", "2"]


# ---------------------------------------------------------------- lists and queues


def queues(r):
    r.lpush("fifo", "a", "b", "c")
    assert r.rpop("fifo") == "a"
    r.rpush("stack", 1, 2, 3)
    assert r.rpop("stack") == "3"
    # Capped list (latest 3).
    for i in range(10):
        r.lpush("latest", i)
        r.ltrim("latest", 0, 2)
    assert r.lrange("latest", 0, -1) == ["9", "8", "7"]
    # Reliable queue with a processing list.
    r.rpush("jobs", "j1", "j2")
    assert r.lmove("jobs", "processing", "LEFT", "RIGHT") == "j1"
    assert r.lrem("processing", 1, "j1") == 1
    # Circular queue.
    r.rpush("ring", "x", "y", "z")
    assert [r.lmove("ring", "ring", "LEFT", "RIGHT") for _ in range(4)] == ["x", "y", "z", "x"]
    # Blocking consumer woken by a producer.
    def produce():
        time.sleep(0.1)
        connect().rpush("bq", "job")

    t = threading.Thread(target=produce)
    t.start()
    assert list(r.blpop(["bq"], timeout=5)) == ["bq", "job"]
    t.join()
    assert r.lpos("ring", "z") is not None


# ---------------------------------------------------------------- sorted sets


def leaderboards_and_timelines(r):
    r.zadd("board", {"ann": 10, "bob": 30, "cat": 20})
    assert r.zincrby("board", 15, "ann") == 25.0
    top = r.zrevrange("board", 0, 1, withscores=True)
    assert [list(p) for p in top] == [["bob", 30.0], ["ann", 25.0]]
    assert r.zrevrank("board", "ann") == 1
    assert r.zscore("board", "cat") == 20.0
    assert r.zcount("board", 20, "+inf") == 3
    # Votes.
    assert r.zadd("votes", {"post:1": 0}) == 1
    r.zincrby("votes", 1, "post:1")
    r.zincrby("votes", -1, "post:1")
    assert r.zscore("votes", "post:1") == 0.0
    # Timeline pagination by score.
    for i in range(20):
        r.zadd("timeline", {"msg%d" % i: 1000 + i})
    page = r.zrevrangebyscore("timeline", "+inf", "-inf", start=0, num=5)
    assert page == ["msg19", "msg18", "msg17", "msg16", "msg15"]
    assert r.zrange("timeline", 0, 2) == ["msg0", "msg1", "msg2"]
    # Autocomplete by prefix.
    r.zadd("names", {n: 0 for n in ("alpha", "alpine", "beta", "alps")})
    assert r.zrangebylex("names", "[alp", "[alp\xff") == ["alpha", "alpine", "alps"]
    # Delayed tasks: due ones by score.
    r.zadd("delayed", {"t1": 100, "t2": 200, "t3": 300})
    assert r.zrangebyscore("delayed", "-inf", 250) == ["t1", "t2"]
    assert r.zrem("delayed", "t1", "t2") == 2
    # Priority queue with a blocking pop.
    r.zadd("pq", {"low": 5, "high": 1})
    assert flat(r.zpopmin("pq")) == ["high", 1.0]
    got = r.bzpopmin("pq", timeout=1)
    assert list(got) == ["pq", "low", 5.0]
    assert r.bzpopmin("pq", timeout=0.1) is None
    assert r.zunionstore("u", {"board": 1, "votes": 2}) == 4


# ---------------------------------------------------------------- pub/sub and streams


def pubsub_fanout(r):
    ps = r.pubsub()
    ps.subscribe("room:1")
    ps.psubscribe("room:*")
    assert ps.get_message(timeout=1)["type"] == "subscribe"
    assert ps.get_message(timeout=1)["type"] == "psubscribe"
    assert r.publish("room:1", "hello") == 2
    got = [ps.get_message(timeout=1) for _ in range(2)]
    assert sorted(m["type"] for m in got) == ["message", "pmessage"]
    assert all(m["data"] == "hello" for m in got)
    assert [tuple(p) for p in r.pubsub_numsub("room:1")] == [("room:1", 1)]
    ps.close()


def stream_consumers(r):
    ids = [r.xadd("comments", {"user": "u%d" % i, "text": "hi"}) for i in range(5)]
    assert r.xlen("comments") == 5
    # Iterator over the history with XRANGE pages.
    seen, start = [], "-"
    while True:
        batch = r.xrange("comments", start, "+", count=2)
        if start != "-":
            batch = batch[1:]
        if not batch:
            break
        seen += [i for i, _ in batch]
        start = batch[-1][0]
    assert seen == ids
    # Reliable queue with a consumer group and acknowledgement.
    r.xgroup_create("comments", "workers", id="0")
    got = r.xreadgroup("workers", "w1", {"comments": ">"}, count=3)
    if isinstance(got, dict):
        entries = got["comments"][0]
    else:
        entries = got[0][1]
    assert [i for i, _ in entries] == ids[:3]
    assert r.xack("comments", "workers", *ids[:2]) == 2
    pending = r.xpending("comments", "workers")
    assert pending["pending"] == 1
    claimed = r.xautoclaim("comments", "workers", "w2", min_idle_time=0, count=10)
    assert claimed[1][0][0] == ids[2]
    # Live tail: XREAD BLOCK woken by a producer.
    def produce():
        time.sleep(0.1)
        connect().xadd("comments", {"user": "late"})

    t = threading.Thread(target=produce)
    t.start()
    live = r.xread({"comments": "$"}, block=5000)
    t.join()
    assert live


def keys_and_scan(r):
    for i in range(250):
        r.set("k:%d" % i, i)
    assert set(r.scan_iter("k:*", count=20)) == {"k:%d" % i for i in range(250)}
    assert r.expire("k:1", 100) is True
    assert r.type("k:1") == "string"
    assert r.rename("k:1", "renamed") is True
    assert r.dbsize() == 250


def functions(r):
    r.function_load(
        "#!lua name=mylib\n"
        "redis.register_function('bump', function(keys, args) "
        "return redis.call('incrby', keys[1], args[1]) end)",
        replace=True,
    )
    assert r.fcall("bump", 1, "fn:counter", 5) == 5
    assert r.fcall("bump", 1, "fn:counter", 5) == 10


PATTERNS = [
    cache_and_counters,
    locks,
    owner_checked_unlock_with_watch,
    rate_limiters,
    bitmaps_and_hll,
    hashes,
    login_sessions,
    sets,
    sort_by_hash_fields,
    queues,
    leaderboards_and_timelines,
    pubsub_fanout,
    stream_consumers,
    keys_and_scan,
    functions,
]


def main():
    global PORT, PROTOCOL
    PORT, PROTOCOL = int(sys.argv[1]), int(sys.argv[2])
    failed = 0
    for pattern in PATTERNS:
        r = connect()
        r.flushall()
        try:
            pattern(r)
            print("ok   %s" % pattern.__name__)
        except Exception as e:  # report every pattern, then fail
            failed += 1
            import traceback

            traceback.print_exc()
            print("FAIL %s: %r" % (pattern.__name__, e))
        finally:
            r.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
