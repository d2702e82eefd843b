//! The application patterns Cinnabar exists for, written the way users write them
//! with the `redis` crate: caches, locks, ID generators, counters, queues, leaderboards,
//! sessions, rate limiters, fan-out, stream consumers, unique counters, sign-in
//! bitmaps and nearby search.

mod common;
use common::*;
use redis::Commands;
use std::time::Duration;

#[test]
fn cache_lock_and_id_generator() {
    let s = TestServer::start();
    let mut c = s.client();
    // Cache with TTL.
    let _: () = redis::cmd("SET")
        .arg("page:/")
        .arg("<html>")
        .arg("EX")
        .arg(60)
        .query(&mut c)
        .unwrap();
    let page: Option<String> = c.get("page:/").unwrap();
    assert_eq!(page.as_deref(), Some("<html>"));
    let ttl: i64 = c.ttl("page:/").unwrap();
    assert!((59..=60).contains(&ttl));
    // Auto-expiring lock, owner-checked release with a script.
    let token = "owner-1";
    let got: Option<String> = redis::cmd("SET")
        .arg("lock:job")
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(30000)
        .query(&mut c)
        .unwrap();
    assert_eq!(got.as_deref(), Some("OK"));
    let again: Option<String> = redis::cmd("SET")
        .arg("lock:job")
        .arg("other")
        .arg("NX")
        .arg("PX")
        .arg(30000)
        .query(&mut c)
        .unwrap();
    assert_eq!(again, None);
    let unlock = redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    );
    let wrong: i64 = unlock
        .key("lock:job")
        .arg("intruder")
        .invoke(&mut c)
        .unwrap();
    assert_eq!(wrong, 0);
    let released: i64 = unlock.key("lock:job").arg(token).invoke(&mut c).unwrap();
    assert_eq!(released, 1);
    // ID generator: INCR, with a reserved starting point set only once.
    let reserved: bool = c.set_nx("ids:user", 10_000).unwrap();
    assert!(reserved);
    let not_again: bool = c.set_nx("ids:user", 5).unwrap();
    assert!(!not_again);
    let id: i64 = c.incr("ids:user", 1).unwrap();
    assert_eq!(id, 10_001);
}

#[test]
fn queues_and_stacks() {
    let s = TestServer::start();
    let mut c = s.client();
    // FIFO queue with a blocking consumer on another connection.
    let mut consumer = s.client();
    let worker = std::thread::spawn(move || {
        let job: Option<(String, String)> = redis::cmd("BRPOP")
            .arg("jobs")
            .arg(5)
            .query(&mut consumer)
            .unwrap();
        job
    });
    std::thread::sleep(Duration::from_millis(100));
    let _: i64 = c.lpush("jobs", "job-1").unwrap();
    assert_eq!(
        worker.join().unwrap(),
        Some(("jobs".into(), "job-1".into()))
    );
    // Capped queue: keep the last 3 entries.
    for i in 0..10 {
        let _: i64 = c.lpush("recent", i).unwrap();
        let _: () = c.ltrim("recent", 0, 2).unwrap();
    }
    let recent: Vec<i64> = c.lrange("recent", 0, -1).unwrap();
    assert_eq!(recent, vec![9, 8, 7]);
    // Circular queue: rotate with LMOVE to itself.
    let _: i64 = c.rpush("ring", &["a", "b", "c"]).unwrap();
    let head: String = redis::cmd("LMOVE")
        .arg("ring")
        .arg("ring")
        .arg("LEFT")
        .arg("RIGHT")
        .query(&mut c)
        .unwrap();
    assert_eq!(head, "a");
    let ring: Vec<String> = c.lrange("ring", 0, -1).unwrap();
    assert_eq!(ring, vec!["b", "c", "a"]);
    // Stack.
    let _: i64 = c.lpush("stack", &[1, 2, 3]).unwrap();
    let top: Option<i64> = c.lpop("stack", None).unwrap();
    assert_eq!(top, Some(3));
    // Priority queue with a blocking worker.
    let _: i64 = c
        .zadd_multiple("tasks", &[(5, "low"), (1, "urgent")])
        .unwrap();
    let next: (String, String, f64) = redis::cmd("BZPOPMIN")
        .arg("tasks")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!((next.1.as_str(), next.2), ("urgent", 1.0));
}

#[test]
fn leaderboard_tags_sessions_rate_limiter() {
    let s = TestServer::start();
    let mut c = s.client();
    // Leaderboard.
    for (player, score) in [("ann", 30), ("bob", 50), ("cid", 40)] {
        let _: f64 = c.zincr("board", player, score).unwrap();
    }
    let top: Vec<(String, f64)> = c.zrevrange_withscores("board", 0, 1).unwrap();
    assert_eq!(top, vec![("bob".into(), 50.0), ("cid".into(), 40.0)]);
    let rank: Option<i64> = c.zrevrank("board", "ann").unwrap();
    assert_eq!(rank, Some(2));
    // Tags and social relations.
    let _: i64 = c.sadd("follows:ann", &["bob", "cid", "dan"]).unwrap();
    let _: i64 = c.sadd("follows:bob", &["cid", "dan", "eve"]).unwrap();
    let mut common: Vec<String> = c.sinter(&["follows:ann", "follows:bob"]).unwrap();
    common.sort();
    assert_eq!(common, vec!["cid", "dan"]);
    // Login session as a hash with a lifetime.
    let _: () = c
        .hset_multiple("session:42", &[("user", "ann"), ("role", "admin")])
        .unwrap();
    let _: bool = c.expire("session:42", 3600).unwrap();
    let user: String = c.hget("session:42", "user").unwrap();
    assert_eq!(user, "ann");
    // Fixed-window rate limiter in a transaction.
    let mut allowed = 0;
    for _ in 0..7 {
        let (count,): (i64,) = redis::pipe()
            .atomic()
            .incr("rate:ann", 1)
            .expire("rate:ann", 60)
            .ignore()
            .query(&mut c)
            .unwrap();
        if count <= 5 {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 5);
    // Owner-checked update with WATCH.
    let _: () = c.set("balance", 100).unwrap();
    let _: () = redis::cmd("WATCH").arg("balance").query(&mut c).unwrap();
    let mut other = s.client();
    let _: () = other.set("balance", 90).unwrap();
    let r: Option<(i64,)> = redis::pipe()
        .atomic()
        .decr("balance", 10)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, None, "a watched key changed: EXEC fails");
}

#[test]
fn pubsub_streams_hll_bitmaps_geo() {
    let s = TestServer::start();
    let mut c = s.client();
    // Fan-out over pub/sub.
    let mut sub_conn = s.client();
    let mut pubsub = sub_conn.as_pubsub();
    pubsub.subscribe("room:1").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let receivers: i64 = c.publish("room:1", "hello").unwrap();
    assert_eq!(receivers, 1);
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "hello");
    drop(pubsub);
    // Stream consumer group: deliver, acknowledge.
    let _: String = redis::cmd("XADD")
        .arg("events")
        .arg("*")
        .arg("kind")
        .arg("signup")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("events")
        .arg("workers")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let reply: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("workers")
        .arg("w1")
        .arg("COUNT")
        .arg(10)
        .arg("STREAMS")
        .arg("events")
        .arg(">")
        .query(&mut c)
        .unwrap();
    let text = format!("{reply:?}");
    assert!(text.contains("signup"), "{text}");
    // XPENDING summary: count, smallest ID, greatest ID, per-consumer counts.
    type PendingSummary = (i64, Option<String>, Option<String>, Vec<(String, String)>);
    let pending: PendingSummary = redis::cmd("XPENDING")
        .arg("events")
        .arg("workers")
        .query(&mut c)
        .unwrap();
    assert_eq!(pending.0, 1);
    // Unique visitors with HyperLogLog.
    for i in 0..1000 {
        let _: bool = c.pfadd("visitors", format!("user{}", i % 250)).unwrap();
    }
    let uniques: i64 = c.pfcount("visitors").unwrap();
    assert!((240..=260).contains(&uniques), "{uniques}");
    // Daily sign-in bitmap.
    for day in [0, 3, 4, 9] {
        let _: bool = c.setbit("signin:ann", day, true).unwrap();
    }
    let days: i64 = redis::cmd("BITCOUNT")
        .arg("signin:ann")
        .query(&mut c)
        .unwrap();
    assert_eq!(days, 4);
    // Nearby search.
    let _: i64 = redis::cmd("GEOADD")
        .arg("shops")
        .arg(13.361389)
        .arg(38.115556)
        .arg("palermo")
        .arg(15.087269)
        .arg(37.502669)
        .arg("catania")
        .query(&mut c)
        .unwrap();
    let near: Vec<String> = redis::cmd("GEOSEARCH")
        .arg("shops")
        .arg("FROMLONLAT")
        .arg(15)
        .arg(37)
        .arg("BYRADIUS")
        .arg(100)
        .arg("km")
        .arg("ASC")
        .query(&mut c)
        .unwrap();
    assert_eq!(near, vec!["catania"]);
}
