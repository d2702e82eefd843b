//! DUMP and RESTORE: Redis's serialization byte format in both directions (payloads
//! from redis-server restore here and ours restore there), option handling and errors.

mod common;

use common::*;
use redis::Connection;

fn redis_conn(port: u16) -> Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&[u8]]) -> T {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(args[0])))
}

/// Commands that build one key of every type and encoding.
fn populate(c: &mut Connection) -> Vec<String> {
    let mut keys = Vec::new();
    let mut run = |args: Vec<String>| {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        let _: redis::Value = q(c, &a);
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    run(s(&["SET", "str:int", "12345"]));
    run(s(&["SET", "str:bigint", "-9223372036854775808"]));
    run(s(&["SET", "str:emb", "hello world"]));
    run(s(&["SET", "str:raw", &"abc".repeat(40)]));
    run(s(&["SET", "str:bin", "\u{1}\u{0}\u{ff}"]));
    keys.extend(s(&[
        "str:int",
        "str:bigint",
        "str:emb",
        "str:raw",
        "str:bin",
    ]));
    run(s(&[
        "RPUSH",
        "list:small",
        "a",
        "1",
        "-70000",
        "5000000000",
        "",
        "zz",
    ]));
    let mut big = vec!["RPUSH".to_string(), "list:big".into()];
    big.extend((0..1000).map(|i| format!("element-{i}-{}", "x".repeat(i % 50))));
    run(big);
    keys.extend(s(&["list:small", "list:big"]));
    run(s(&[
        "SADD",
        "set:int",
        "1",
        "2",
        "-3",
        "100000",
        "9999999999",
    ]));
    run(s(&["SADD", "set:small", "a", "b", "1"]));
    let mut big = vec!["SADD".to_string(), "set:big".into()];
    big.extend((0..600).map(|i| format!("m{i}")));
    run(big);
    keys.extend(s(&["set:int", "set:small", "set:big"]));
    run(s(&[
        "ZADD",
        "zset:small",
        "1",
        "a",
        "2.5",
        "b",
        "-inf",
        "c",
        "1e300",
        "d",
        "0",
        "e",
    ]));
    let mut big = vec!["ZADD".to_string(), "zset:big".into()];
    for i in 0..300 {
        big.push(format!("{}", i as f64 / 7.0));
        big.push(format!("member{i}"));
    }
    run(big);
    keys.extend(s(&["zset:small", "zset:big"]));
    run(s(&[
        "HSET",
        "hash:small",
        "f1",
        "v1",
        "f2",
        "123",
        "f3",
        "",
    ]));
    let mut big = vec!["HSET".to_string(), "hash:big".into()];
    // More than Redis's built-in hash-max-listpack-entries (512, not redis.conf's 128).
    for i in 0..600 {
        big.push(format!("field{i}"));
        big.push(format!("value{i}"));
    }
    run(big);
    run(s(&["HSET", "hash:longval", "f", &"v".repeat(100)]));
    keys.extend(s(&["hash:small", "hash:big", "hash:longval"]));
    keys
}

/// A value's contents through commands, in a canonical order.
fn contents(c: &mut Connection, key: &str) -> Vec<Vec<u8>> {
    let k = key.as_bytes();
    let t: String = q(c, &[b"TYPE", k]);
    let mut v: Vec<Vec<u8>> = match t.as_str() {
        "string" => vec![q(c, &[b"GET", k])],
        "list" => return q(c, &[b"LRANGE", k, b"0", b"-1"]),
        "set" => q(c, &[b"SMEMBERS", k]),
        "zset" => {
            // Scores compared as Redis 7.4 prints them (redis-server 7.0 uses %.17g).
            let flat: Vec<Vec<u8>> = q(c, &[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"]);
            return flat
                .chunks(2)
                .flat_map(|p| {
                    let score = cinnabar::util::numeric::parse_f64(&p[1])
                        .map(|v| cinnabar::util::numeric::format_f64(v).into_bytes())
                        .unwrap_or_else(|| p[1].clone());
                    [p[0].clone(), score]
                })
                .collect();
        }
        "hash" => {
            let flat: Vec<Vec<u8>> = q(c, &[b"HGETALL", k]);
            let mut pairs: Vec<Vec<u8>> = flat
                .chunks(2)
                .map(|p| [p[0].clone(), b"=".to_vec(), p[1].clone()].concat())
                .collect();
            pairs.sort();
            return pairs;
        }
        other => panic!("unexpected type {other}"),
    };
    v.sort();
    v
}

#[test]
fn payloads_cross_between_redis_and_cinnabar() {
    if !redis_server_available() {
        return;
    }
    let server = TestServer::start();
    let redis = RedisServer::start();
    let mut ours = server.client();
    let mut theirs = redis_conn(redis.port);
    let keys = populate(&mut theirs);
    for key in &keys {
        let k = key.as_bytes();
        // Redis → Cinnabar.
        let payload: Vec<u8> = q(&mut theirs, &[b"DUMP", k]);
        let r: String = q(&mut ours, &[b"RESTORE", k, b"0", &payload]);
        assert_eq!(r, "OK", "{key}");
        assert_eq!(
            contents(&mut ours, key),
            contents(&mut theirs, key),
            "{key}"
        );
        let enc_ours: String = q(&mut ours, &[b"OBJECT", b"ENCODING", k]);
        let enc_theirs: String = q(&mut theirs, &[b"OBJECT", b"ENCODING", k]);
        // The reference is Redis 7.0, which predates listpack lists and sets (7.2).
        if !key.starts_with("list") && !key.starts_with("set") {
            assert_eq!(enc_ours, enc_theirs, "encoding of {key}");
        }
        // Cinnabar → Redis, under another name.
        let back: Vec<u8> = q(&mut ours, &[b"DUMP", k]);
        let copy = format!("{key}:copy");
        let r: String = q(&mut theirs, &[b"RESTORE", copy.as_bytes(), b"0", &back]);
        assert_eq!(r, "OK", "{key}");
        assert_eq!(
            contents(&mut theirs, &copy),
            contents(&mut theirs, key),
            "{key}"
        );
        let enc_copy: String = q(&mut theirs, &[b"OBJECT", b"ENCODING", copy.as_bytes()]);
        assert_eq!(enc_copy, enc_theirs, "encoding of {key} restored in redis");
    }
    // Identical strings serialize to identical bytes.
    for key in ["str:int", "str:emb", "str:raw", "str:bigint"] {
        let a: Vec<u8> = q(&mut ours, &[b"DUMP", key.as_bytes()]);
        let b: Vec<u8> = q(&mut theirs, &[b"DUMP", key.as_bytes()]);
        assert_eq!(a, b, "{key}");
    }
}

#[test]
fn restore_options_and_errors_match_redis() {
    if !redis_server_available() {
        return;
    }
    let server = TestServer::start();
    let redis = RedisServer::start();
    assert_same_as_redis(
        &server,
        &redis,
        &[
            &["DUMP", "nokey"],
            &["SET", "k", "v"],
            &["RESTORE", "k", "0", "garbage"],
            &["RESTORE", "k2", "0", "garbage"],
            &["RESTORE", "k2", "-1", "garbage"],
            &["RESTORE", "k2", "abc", "garbage"],
            &["RESTORE", "k2", "0", "garbage", "BOGUS"],
            &["RESTORE", "k2", "0", "garbage", "IDLETIME"],
            &["RESTORE", "k2", "0", "garbage", "IDLETIME", "-1"],
            &["RESTORE", "k2", "0", "garbage", "IDLETIME", "x"],
            &["RESTORE", "k2", "0", "garbage", "FREQ", "256"],
            &[
                "RESTORE", "k2", "0", "garbage", "FREQ", "1", "IDLETIME", "1",
            ],
            &[
                "RESTORE", "k2", "0", "garbage", "IDLETIME", "1", "FREQ", "1",
            ],
            &["RESTORE", "k", "0", "garbage", "REPLACE"],
            &["RESTORE"],
        ],
    );
}

#[test]
fn restore_ttl_replace_and_idletime() {
    let server = TestServer::start();
    let mut c = server.client();
    let _: () = redis::cmd("RPUSH")
        .arg("src")
        .arg(&["a", "b", "c"])
        .query(&mut c)
        .unwrap();
    let p: Vec<u8> = redis::cmd("DUMP").arg("src").query(&mut c).unwrap();
    let e: redis::RedisResult<String> = redis::cmd("RESTORE")
        .arg("src")
        .arg(0)
        .arg(&p)
        .query(&mut c);
    assert_eq!(
        e.unwrap_err().to_string(),
        "\"BUSYKEY\": Target key name already exists."
    );
    let r: String = redis::cmd("RESTORE")
        .arg("src")
        .arg(0)
        .arg(&p)
        .arg("REPLACE")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, "OK");
    let r: String = redis::cmd("RESTORE")
        .arg("t")
        .arg(100_000)
        .arg(&p)
        .arg("IDLETIME")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, "OK");
    let ttl: i64 = redis::cmd("PTTL").arg("t").query(&mut c).unwrap();
    assert!(ttl > 90_000 && ttl <= 100_000, "{ttl}");
    let idle: i64 = redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg("t")
        .query(&mut c)
        .unwrap();
    assert!(idle >= 999, "{idle}");
    // An absolute TTL in the past creates nothing, and with REPLACE deletes the target.
    let r: String = redis::cmd("RESTORE")
        .arg("src")
        .arg(1)
        .arg(&p)
        .arg("ABSTTL")
        .arg("REPLACE")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, "OK");
    let n: i64 = redis::cmd("EXISTS").arg("src").query(&mut c).unwrap();
    assert_eq!(n, 0);
    let at: i64 = 4_000_000_000_000;
    let r: String = redis::cmd("RESTORE")
        .arg("abs")
        .arg(at)
        .arg(&p)
        .arg("ABSTTL")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, "OK");
    let got: i64 = redis::cmd("PEXPIRETIME").arg("abs").query(&mut c).unwrap();
    assert_eq!(got, at);
    let l: Vec<String> = redis::cmd("LRANGE")
        .arg("abs")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(l, ["a", "b", "c"]);
    // A corrupted payload is refused.
    let mut bad = p.clone();
    bad[2] ^= 0xFF;
    let e: redis::RedisResult<String> = redis::cmd("RESTORE")
        .arg("x")
        .arg(0)
        .arg(&bad)
        .query(&mut c);
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("DUMP payload version or checksum are wrong"));
}

#[test]
fn hash_field_ttls_survive_dump_restore() {
    let server = TestServer::start();
    let mut c = server.client();
    let _: i64 = redis::cmd("HSET")
        .arg("h")
        .arg(&["a", "1", "b", "2"])
        .query(&mut c)
        .unwrap();
    let _: Vec<i64> = redis::cmd("HPEXPIREAT")
        .arg("h")
        .arg(4_000_000_000_000i64)
        .arg("FIELDS")
        .arg(1)
        .arg("a")
        .query(&mut c)
        .unwrap();
    let p: Vec<u8> = redis::cmd("DUMP").arg("h").query(&mut c).unwrap();
    let _: String = redis::cmd("RESTORE")
        .arg("h2")
        .arg(0)
        .arg(&p)
        .query(&mut c)
        .unwrap();
    let t: Vec<i64> = redis::cmd("HPEXPIRETIME")
        .arg("h2")
        .arg("FIELDS")
        .arg(2)
        .arg("a")
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert_eq!(t, [4_000_000_000_000, -1]);
}
