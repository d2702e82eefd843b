//! Hashes end to end: exact replies in RESP2 and RESP3, encodings at the thresholds,
//! HSCAN across a conversion, field expiry (lazy and active), and differential runs
//! against redis-server.

mod common;
use common::*;

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn basic_commands_both_protocols() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["HSET", "h", "a", "1", "b", "2"], ":2\r\n", ":2\r\n"),
            (&["HSET", "h", "a", "10", "c", "3"], ":1\r\n", ":1\r\n"),
            (&["HGET", "h", "a"], "$2\r\n10\r\n", "$2\r\n10\r\n"),
            (&["HGET", "h", "zz"], "$-1\r\n", "_\r\n"),
            (&["HGET", "nokey", "a"], "$-1\r\n", "_\r\n"),
            (
                &["HMGET", "h", "a", "zz"],
                "*2\r\n$2\r\n10\r\n$-1\r\n",
                "*2\r\n$2\r\n10\r\n_\r\n",
            ),
            (
                &["HGETALL", "h"],
                "*6\r\n$1\r\na\r\n$2\r\n10\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n",
                "%3\r\n$1\r\na\r\n$2\r\n10\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n",
            ),
            (&["HGETALL", "nokey"], "*0\r\n", "%0\r\n"),
            (
                &["HKEYS", "h"],
                "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
                "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
            ),
            (
                &["HVALS", "h"],
                "*3\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n",
                "*3\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n",
            ),
            (&["HLEN", "h"], ":3\r\n", ":3\r\n"),
            (&["HEXISTS", "h", "a"], ":1\r\n", ":1\r\n"),
            (&["HEXISTS", "h", "z"], ":0\r\n", ":0\r\n"),
            (&["HSTRLEN", "h", "a"], ":2\r\n", ":2\r\n"),
            (&["HSTRLEN", "h", "z"], ":0\r\n", ":0\r\n"),
            (&["HSETNX", "h", "a", "x"], ":0\r\n", ":0\r\n"),
            (&["HSETNX", "h", "d", "x"], ":1\r\n", ":1\r\n"),
            (&["HMSET", "h", "e", "5"], "+OK\r\n", "+OK\r\n"),
            (&["HDEL", "h", "d", "e", "zz"], ":2\r\n", ":2\r\n"),
            (&["HINCRBY", "h", "a", "5"], ":15\r\n", ":15\r\n"),
            (&["HINCRBY", "h", "n", "-5"], ":-5\r\n", ":-5\r\n"),
            (
                &["HINCRBY", "h", "a", "x"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["HSET", "h", "s", "abc"], ":1\r\n", ":1\r\n"),
            (
                &["HINCRBY", "h", "s", "1"],
                "-ERR hash value is not an integer\r\n",
                "-ERR hash value is not an integer\r\n",
            ),
            (
                &["HINCRBYFLOAT", "h", "s", "1"],
                "-ERR hash value is not a float\r\n",
                "-ERR hash value is not a float\r\n",
            ),
            (
                &["HINCRBYFLOAT", "h", "f", "1.5"],
                "$3\r\n1.5\r\n",
                "$3\r\n1.5\r\n",
            ),
            (
                &["HINCRBYFLOAT", "h", "f", "abc"],
                "-ERR value is not a valid float\r\n",
                "-ERR value is not a valid float\r\n",
            ),
            (
                &["HSET", "h", "big", "9223372036854775807"],
                ":1\r\n",
                ":1\r\n",
            ),
            (
                &["HINCRBY", "h", "big", "1"],
                "-ERR increment or decrement would overflow\r\n",
                "-ERR increment or decrement would overflow\r\n",
            ),
            (
                &["HSET", "h", "a"],
                "-ERR wrong number of arguments for 'hset' command\r\n",
                "-ERR wrong number of arguments for 'hset' command\r\n",
            ),
            (
                &["HMSET", "h", "a", "1", "b"],
                "-ERR wrong number of arguments for 'hmset' command\r\n",
                "-ERR wrong number of arguments for 'hmset' command\r\n",
            ),
            (&["SET", "str", "v"], "+OK\r\n", "+OK\r\n"),
            (&["HGET", "str", "a"], WRONGTYPE, WRONGTYPE),
            (&["HSET", "str", "a", "1"], WRONGTYPE, WRONGTYPE),
            (
                &["HINCRBYFLOAT", "str", "a", "inf"],
                "-ERR value is NaN or Infinity\r\n",
                "-ERR value is NaN or Infinity\r\n",
            ),
            (&["HSET", "one", "f", "v"], ":1\r\n", ":1\r\n"),
            (&["HDEL", "one", "f"], ":1\r\n", ":1\r\n"),
            (&["EXISTS", "one"], ":0\r\n", ":0\r\n"),
            (&["TYPE", "h"], "+hash\r\n", "+hash\r\n"),
        ],
    );
}

#[test]
fn hrandfield_and_hscan_shapes() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["HSET", "h", "a", "1"], ":1\r\n", ":1\r\n"),
            (&["HRANDFIELD", "h"], "$1\r\na\r\n", "$1\r\na\r\n"),
            (&["HRANDFIELD", "nokey"], "$-1\r\n", "_\r\n"),
            (&["HRANDFIELD", "nokey", "3"], "*0\r\n", "*0\r\n"),
            (&["HRANDFIELD", "h", "0"], "*0\r\n", "*0\r\n"),
            (&["HRANDFIELD", "h", "5", "WITHVALUES"], "*2\r\n$1\r\na\r\n$1\r\n1\r\n", "*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["HRANDFIELD", "h", "-2"], "*2\r\n$1\r\na\r\n$1\r\na\r\n", "*2\r\n$1\r\na\r\n$1\r\na\r\n"),
            (&["HRANDFIELD", "h", "1", "x"], "-ERR syntax error\r\n", "-ERR syntax error\r\n"),
            (
                &["HRANDFIELD", "h", "-9223372036854775808"],
                "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
                "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
            ),
            (&["HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"], "-ERR value is out of range\r\n", "-ERR value is out of range\r\n"),
            (&["HSCAN", "h", "0"], "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            (&["HSCAN", "h", "0", "NOVALUES"], "*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n", "*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n"),
            (&["HSCAN", "h", "0", "MATCH", "b*"], "*2\r\n$1\r\n0\r\n*0\r\n", "*2\r\n$1\r\n0\r\n*0\r\n"),
            (&["HSCAN", "h", "0", "COUNT", "0"], "-ERR syntax error\r\n", "-ERR syntax error\r\n"),
            (&["HSCAN", "h", "x"], "-ERR invalid cursor\r\n", "-ERR invalid cursor\r\n"),
            (&["HSCAN", "nokey", "0"], "*2\r\n$1\r\n0\r\n*0\r\n", "*2\r\n$1\r\n0\r\n*0\r\n"),
        ],
    );
    // Distinctness and repetition semantics on a hash table.
    let mut c = s.client();
    let fields: Vec<String> = (0..300).map(|i| format!("f{i}")).collect();
    for f in &fields {
        let _: () = redis::cmd("HSET")
            .arg("big")
            .arg(f)
            .arg("v")
            .query(&mut c)
            .unwrap();
    }
    for n in [1usize, 50, 150, 299, 300, 1000] {
        let got: Vec<String> = redis::cmd("HRANDFIELD")
            .arg("big")
            .arg(n)
            .query(&mut c)
            .unwrap();
        let set: std::collections::HashSet<_> = got.iter().collect();
        assert_eq!(got.len(), n.min(300));
        assert_eq!(set.len(), got.len(), "distinct for count {n}");
    }
    let got: Vec<String> = redis::cmd("HRANDFIELD")
        .arg("big")
        .arg(-1000)
        .query(&mut c)
        .unwrap();
    assert_eq!(got.len(), 1000);
}

fn encoding(c: &mut RawConn, key: &str) -> String {
    c.cmd(&["OBJECT", "ENCODING", key])
}

#[test]
fn encodings_convert_at_exact_thresholds() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    // Redis 7.4's built-in hash-max-listpack-entries is 512.
    for i in 0..512 {
        c.cmd(&["HSET", "h", &format!("f{i}"), "v"]);
    }
    assert_eq!(encoding(&mut c, "h"), "$8\r\nlistpack\r\n");
    c.cmd(&["HSET", "h", "f512", "v"]);
    assert_eq!(encoding(&mut c, "h"), "$9\r\nhashtable\r\n");
    // One-way.
    for i in 0..500 {
        c.cmd(&["HDEL", "h", &format!("f{i}")]);
    }
    assert_eq!(encoding(&mut c, "h"), "$9\r\nhashtable\r\n");

    // One HSET of more pairs than a listpack holds makes a table, new key or not, even
    // when repeated fields leave fewer (Redis 7.4 judges by the pairs given).
    let pairs: Vec<String> = (0..520)
        .flat_map(|i| [format!("f{}", i % 260), "v".to_string()])
        .collect();
    for key in ["fresh", "grown"] {
        if key == "grown" {
            c.cmd(&["HSET", key, "a", "b"]);
        }
        let mut hset = vec!["HSET", key];
        hset.extend(pairs.iter().map(String::as_str));
        assert_eq!(c.cmd(&hset), ":260\r\n");
        assert_eq!(encoding(&mut c, key), "$9\r\nhashtable\r\n", "{key}");
    }

    let v64 = "x".repeat(64);
    c.cmd(&["HSET", "v", "f", &v64]);
    c.cmd(&["HSET", "v", &v64, "y"]);
    assert_eq!(encoding(&mut c, "v"), "$8\r\nlistpack\r\n");
    c.cmd(&["HSET", "v", "g", &"x".repeat(65)]);
    assert_eq!(encoding(&mut c, "v"), "$9\r\nhashtable\r\n");
    c.cmd(&["HSET", "w", &"x".repeat(65), "1"]);
    assert_eq!(encoding(&mut c, "w"), "$9\r\nhashtable\r\n");

    // The thresholds follow the configuration.
    c.cmd(&["CONFIG", "SET", "hash-max-listpack-entries", "2"]);
    c.cmd(&["HSET", "small", "a", "1", "b", "2"]);
    assert_eq!(encoding(&mut c, "small"), "$8\r\nlistpack\r\n");
    c.cmd(&["HSET", "small", "c", "3"]);
    assert_eq!(encoding(&mut c, "small"), "$9\r\nhashtable\r\n");
}

#[test]
fn hscan_returns_every_field_across_a_conversion() {
    let s = TestServer::start();
    let mut c = s.client();
    for i in 0..100 {
        let _: () = redis::cmd("HSET")
            .arg("h")
            .arg(format!("f{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = 0u64;
    let mut step = 0;
    loop {
        let (next, items): (u64, Vec<String>) = redis::cmd("HSCAN")
            .arg("h")
            .arg(cursor)
            .arg("COUNT")
            .arg(5)
            .query(&mut c)
            .unwrap();
        for pair in items.chunks(2) {
            seen.insert(pair[0].clone());
        }
        step += 1;
        if step == 1 {
            // Grow the hash well past its table size in the middle of the iteration.
            for i in 100..2000 {
                let _: () = redis::cmd("HSET")
                    .arg("h")
                    .arg(format!("f{i}"))
                    .arg(i)
                    .query(&mut c)
                    .unwrap();
            }
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    for i in 0..100 {
        assert!(seen.contains(&format!("f{i}")), "f{i} missed");
    }
    // A listpack hash is returned whole, then converted: a new scan sees all.
    let mut c = s.raw(2);
    c.cmd(&["HSET", "lp", "a", "1"]);
    assert_eq!(
        c.cmd(&["HSCAN", "lp", "0"]),
        "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
}

#[test]
fn field_expiry_replies_and_errors() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (&["HSET", "h", "a", "1", "b", "2", "c", "3"], ":3\r\n"),
        (
            &["HEXPIRE", "h", "100", "FIELDS", "2", "a", "zz"],
            "*2\r\n:1\r\n:-2\r\n",
        ),
        (&["OBJECT", "ENCODING", "h"], "$10\r\nlistpackex\r\n"),
        (
            &["HTTL", "h", "FIELDS", "3", "a", "b", "zz"],
            "*3\r\n:100\r\n:-1\r\n:-2\r\n",
        ),
        (
            &["HEXPIRE", "h", "50", "GT", "FIELDS", "1", "a"],
            "*1\r\n:0\r\n",
        ),
        (
            &["HEXPIRE", "h", "150", "GT", "FIELDS", "1", "a"],
            "*1\r\n:1\r\n",
        ),
        (
            &["HEXPIRE", "h", "50", "GT", "FIELDS", "1", "b"],
            "*1\r\n:0\r\n",
        ),
        (
            &["HEXPIRE", "h", "50", "LT", "FIELDS", "2", "a", "b"],
            "*2\r\n:1\r\n:1\r\n",
        ),
        (
            &["HEXPIRE", "h", "60", "NX", "FIELDS", "2", "a", "c"],
            "*2\r\n:0\r\n:1\r\n",
        ),
        (&["HPERSIST", "h", "FIELDS", "1", "c"], "*1\r\n:1\r\n"),
        (
            &["HEXPIRE", "h", "60", "XX", "FIELDS", "2", "a", "c"],
            "*2\r\n:1\r\n:0\r\n",
        ),
        (
            &["HPERSIST", "h", "FIELDS", "3", "a", "c", "zz"],
            "*3\r\n:1\r\n:-1\r\n:-2\r\n",
        ),
        (
            &["HEXPIREAT", "h", "4102444800", "FIELDS", "1", "a"],
            "*1\r\n:1\r\n",
        ),
        (
            &["HEXPIRETIME", "h", "FIELDS", "2", "a", "c"],
            "*2\r\n:4102444800\r\n:-1\r\n",
        ),
        (
            &["HPEXPIRETIME", "h", "FIELDS", "1", "a"],
            "*1\r\n:4102444800000\r\n",
        ),
        (
            &["HPEXPIREAT", "h", "4102444800001", "FIELDS", "1", "a"],
            "*1\r\n:1\r\n",
        ),
        (
            &["HPEXPIRETIME", "h", "FIELDS", "1", "a"],
            "*1\r\n:4102444800001\r\n",
        ),
        (
            &["HEXPIRETIME", "h", "FIELDS", "1", "a"],
            "*1\r\n:4102444801\r\n",
        ),
        (&["HEXPIRE", "h", "0", "FIELDS", "1", "c"], "*1\r\n:2\r\n"),
        (&["HEXISTS", "h", "c"], ":0\r\n"),
        (&["HEXPIREAT", "h", "1", "FIELDS", "1", "b"], "*1\r\n:2\r\n"),
        (&["HSET", "h", "a", "new"], ":0\r\n"),
        (&["HTTL", "h", "FIELDS", "1", "a"], "*1\r\n:-1\r\n"),
        (
            &["HEXPIRE", "nokey", "10", "FIELDS", "2", "a", "b"],
            "*2\r\n:-2\r\n:-2\r\n",
        ),
        (&["HTTL", "nokey", "FIELDS", "1", "a"], "*1\r\n:-2\r\n"),
        (&["HPERSIST", "nokey", "FIELDS", "1", "a"], "*1\r\n:-2\r\n"),
        (
            &["HEXPIRE", "h", "-1", "FIELDS", "1", "a"],
            "-ERR invalid expire time, must be >= 0\r\n",
        ),
        (
            &["HEXPIRE", "h", "x", "FIELDS", "1", "a"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["HEXPIRE", "h", "99999999999999", "FIELDS", "1", "a"],
            "-ERR invalid expire time in 'hexpire' command\r\n",
        ),
        (
            &["HPEXPIREAT", "h", "70368744177664", "FIELDS", "1", "a"],
            "-ERR invalid expire time in 'hpexpireat' command\r\n",
        ),
        (
            &["HEXPIRE", "h", "10", "FIELDS", "0", "a"],
            "-ERR Parameter `numFields` should be greater than 0\r\n",
        ),
        (
            &["HEXPIRE", "h", "10", "FIELDS", "2", "a"],
            "-ERR The `numfields` parameter must match the number of arguments\r\n",
        ),
        (
            &["HEXPIRE", "h", "10", "NX", "2", "a"],
            "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
        ),
        (
            &["HTTL", "h", "FIELDZ", "1", "a"],
            "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
        ),
        (
            &["HTTL", "h", "FIELDS", "x", "a"],
            "-ERR Parameter `numFields` should be greater than 0\r\n",
        ),
        (
            &["HEXPIRE", "h", "10", "FIELDS", "1"],
            "-ERR wrong number of arguments for 'hexpire' command\r\n",
        ),
        (&["SET", "str", "v"], "+OK\r\n"),
        (&["HEXPIRE", "str", "10", "FIELDS", "1", "a"], WRONGTYPE),
        (&["HTTL", "str", "FIELDS", "1", "a"], WRONGTYPE),
        (&["HSET", "one", "f", "v"], ":1\r\n"),
        (&["HEXPIRE", "one", "0", "FIELDS", "1", "f"], "*1\r\n:2\r\n"),
        (&["EXISTS", "one"], ":0\r\n"),
    ]);
    let mut c3 = s.raw(3);
    assert_eq!(
        c3.cmd(&["HPTTL", "nokey", "FIELDS", "1", "a"]),
        "*1\r\n:-2\r\n"
    );
}

#[test]
fn fields_expire_lazily_and_actively() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    // Lazy: with active expiry off, an expired field is invisible and removed on access.
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    c.cmd(&["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(
        c.cmd(&["HPEXPIRE", "h", "50", "FIELDS", "1", "a"]),
        "*1\r\n:1\r\n"
    );
    std::thread::sleep(std::time::Duration::from_millis(120));
    assert_eq!(c.cmd(&["HGET", "h", "a"]), "$-1\r\n");
    assert_eq!(c.cmd(&["HLEN", "h"]), ":1\r\n");
    assert_eq!(c.cmd(&["HGETALL", "h"]), "*2\r\n$1\r\nb\r\n$1\r\n2\r\n");
    // The last field expiring deletes the key once it is read by name; HLEN counts
    // it until then (Redis 7.4).
    c.cmd(&["HPEXPIRE", "h", "50", "FIELDS", "1", "b"]);
    std::thread::sleep(std::time::Duration::from_millis(120));
    assert_eq!(c.cmd(&["HLEN", "h"]), ":1\r\n");
    assert_eq!(c.cmd(&["HGETALL", "h"]), "*0\r\n");
    assert_eq!(c.cmd(&["EXISTS", "h"]), ":1\r\n");
    assert_eq!(c.cmd(&["HGET", "h", "b"]), "$-1\r\n");
    assert_eq!(c.cmd(&["EXISTS", "h"]), ":0\r\n");

    // Active: keys are reclaimed without being touched (EXISTS does not read fields).
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    for i in 0..50 {
        let k = format!("k{i}");
        c.cmd(&["HSET", &k, "f", "v", "g", "w"]);
        c.cmd(&["HPEXPIRE", &k, "30", "FIELDS", "1", "f"]);
    }
    c.cmd(&["HSET", "gone", "f", "v"]);
    c.cmd(&["HPEXPIRE", "gone", "30", "FIELDS", "1", "f"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while c.cmd(&["EXISTS", "gone"]) != ":0\r\n" {
        assert!(
            std::time::Instant::now() < deadline,
            "active field expiry did not run"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The other hashes keep their persistent field.
    for i in 0..50 {
        assert_eq!(c.cmd(&["HKEYS", &format!("k{i}")]), "*1\r\n$1\r\ng\r\n");
    }
}

/// Deterministic batches compared byte for byte with redis-server (7.0: no field
/// expiry or NOVALUES there, so those stay in the tables above).
#[test]
fn same_as_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let batch: Vec<Vec<&str>> = [
        "HSET h a 1 b 2 c 3",
        "HSET h a 10 d 4",
        "HGET h a",
        "HMGET h a zz b",
        "HGETALL h",
        "HGETALL nokey",
        "HKEYS h",
        "HVALS h",
        "HLEN h",
        "HEXISTS h a",
        "HSTRLEN h a",
        "HSETNX h a 5",
        "HSETNX h e 5",
        "HDEL h a zz",
        "OBJECT ENCODING h",
        "HMSET h x 1 y 2",
        "HMSET h x",
        "HINCRBY h x 10",
        "HINCRBY h x -20",
        "HINCRBY h new 5",
        "HINCRBY h x abc",
        "HSET h s abc",
        "HINCRBY h s 1",
        "HINCRBYFLOAT h s 1",
        "HINCRBYFLOAT h x 1.5",
        "HINCRBYFLOAT h x 1e3",
        "HINCRBYFLOAT h x abc",
        "HINCRBYFLOAT h x inf",
        "HSET h big 9223372036854775807",
        "HINCRBY h big 1",
        "HINCRBYFLOAT h f2 0.1",
        "HINCRBYFLOAT h f2 0.2",
        "HSCAN h 0",
        "HSCAN h 0 MATCH x*",
        "HSCAN h 0 COUNT 0",
        "HSCAN h x",
        "HSCAN nokey 0",
        "HRANDFIELD nokey",
        "HRANDFIELD nokey 5",
        "HRANDFIELD h 0",
        "HRANDFIELD h x",
        "HRANDFIELD h 1 WITHVALUES x",
        "HRANDFIELD h 100 WITHVALUES",
        "SET str v",
        "HGET str a",
        "HSET str a 1",
        "HGETALL str",
        "HINCRBYFLOAT str a inf",
        "HINCRBYFLOAT str a 1",
        "HRANDFIELD str",
        "HSCAN str 0",
        "HDEL h a b c d e x y new s big f2",
        "EXISTS h",
        "HSET e f",
        "HDEL e",
        "TYPE h",
    ]
    .iter()
    .map(|l| l.split(' ').collect())
    .collect();
    let mut big: Vec<Vec<String>> = Vec::new();
    for i in 0..130 {
        big.push(vec![
            "HSET".into(),
            "lp".into(),
            format!("f{i}"),
            "v".repeat(i % 70),
        ]);
        big.push(vec!["OBJECT".into(), "ENCODING".into(), "lp".into()]);
    }
    let mut cmds: Vec<Vec<&str>> = batch;
    cmds.extend(big.iter().map(|v| v.iter().map(|s| s.as_str()).collect()));
    let refs: Vec<&[&str]> = cmds.iter().map(|v| v.as_slice()).collect();
    assert_same_as_redis(&s, &r, &refs);
}

/// Redis 7.4: HLEN and HRANDFIELD count fields that expired but are not reclaimed yet;
/// HGETALL, HKEYS, HVALS and HSCAN skip them without deleting them; HGET, HMGET,
/// HEXISTS and HSTRLEN delete each expired field they name.
#[test]
fn expired_fields_not_yet_reclaimed() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    for enc in ["small", "big"] {
        c.cmd(&["DEL", "h"]);
        c.cmd(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
        if enc == "big" {
            c.cmd(&["HSET", "h", "long", &"x".repeat(100)]);
            assert_eq!(c.cmd(&["OBJECT", "ENCODING", "h"]), "$9\r\nhashtable\r\n");
            c.cmd(&["HDEL", "h", "long"]);
        }
        c.cmd(&["HPEXPIRE", "h", "20", "FIELDS", "2", "a", "b"]);
        std::thread::sleep(std::time::Duration::from_millis(80));
        c.check(&[
            (&["HLEN", "h"], ":3\r\n"),
            (&["HGETALL", "h"], "*2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (&["HKEYS", "h"], "*1\r\n$1\r\nc\r\n"),
            (&["HVALS", "h"], "*1\r\n$1\r\n3\r\n"),
            (
                &["HSCAN", "h", "0", "COUNT", "100"],
                "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n",
            ),
            // Skipped, not deleted.
            (&["HLEN", "h"], ":3\r\n"),
            (&["HEXISTS", "h", "a"], ":0\r\n"),
            (&["HLEN", "h"], ":2\r\n"),
            (&["HSTRLEN", "h", "b"], ":0\r\n"),
            (&["HLEN", "h"], ":1\r\n"),
            (&["HGET", "h", "c"], "$1\r\n3\r\n"),
        ]);
        // HRANDFIELD deletes every due field first (Redis 7.4.1), so it never
        // returns one.
        c.cmd(&["HSET", "h", "d", "4"]);
        c.cmd(&["HPEXPIRE", "h", "20", "FIELDS", "1", "d"]);
        std::thread::sleep(std::time::Duration::from_millis(80));
        assert_eq!(c.cmd(&["HLEN", "h"]), ":2\r\n");
        assert_eq!(c.cmd(&["HRANDFIELD", "h", "10"]), "*1\r\n$1\r\nc\r\n");
        assert_eq!(c.cmd(&["HLEN", "h"]), ":1\r\n");
        // HSET and HDEL take the hash as it is: HSET overwrites a due field (an
        // update, its TTL dropped), HDEL counts one.
        for f in ["e", "f"] {
            c.cmd(&["HSET", "h", f, "5"]);
        }
        c.cmd(&["HPEXPIRE", "h", "20", "FIELDS", "2", "e", "f"]);
        std::thread::sleep(std::time::Duration::from_millis(80));
        c.check(&[
            (&["HSET", "h", "e", "6"], ":0\r\n"),
            (&["HTTL", "h", "FIELDS", "1", "e"], "*1\r\n:-1\r\n"),
            (&["HDEL", "h", "f"], ":1\r\n"),
            (&["HLEN", "h"], ":2\r\n"),
        ]);
    }
}

/// HINCRBY and HINCRBYFLOAT keep the field's TTL; on a due field they start from
/// zero (the field is deleted lazily first) and HEXPIRE leaves other due fields be.
#[test]
fn hincrby_keeps_field_ttl() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    c.check(&[
        (
            &["HSET", "h", "n", "10", "f", "1.5", "d", "7", "x", "0"],
            ":4\r\n",
        ),
        (
            &["HEXPIRE", "h", "1000", "FIELDS", "2", "n", "f"],
            "*2\r\n:1\r\n:1\r\n",
        ),
        (
            &["HPEXPIRE", "h", "20", "FIELDS", "2", "d", "x"],
            "*2\r\n:1\r\n:1\r\n",
        ),
    ]);
    let times = c.cmd(&["HPEXPIRETIME", "h", "FIELDS", "2", "n", "f"]);
    std::thread::sleep(std::time::Duration::from_millis(80));
    c.check(&[
        (&["HINCRBY", "h", "n", "2"], ":12\r\n"),
        (&["HINCRBYFLOAT", "h", "f", "1"], "$3\r\n2.5\r\n"),
        // HEXPIRE of one field leaves the other due field (x) in place.
        (
            &["HPEXPIRE", "h", "1000000", "FIELDS", "1", "n"],
            "*1\r\n:1\r\n",
        ),
        (&["HLEN", "h"], ":4\r\n"),
        // A due field counts from zero, with no TTL left.
        (&["HINCRBY", "h", "d", "1"], ":1\r\n"),
        (&["HTTL", "h", "FIELDS", "1", "d"], "*1\r\n:-1\r\n"),
        (&["HLEN", "h"], ":4\r\n"),
    ]);
    let after = c.cmd(&["HPEXPIRETIME", "h", "FIELDS", "2", "n", "f"]);
    assert_eq!(
        after.lines().nth(2),
        times.lines().nth(2),
        "f keeps its TTL"
    );
}

/// A hash moved under another name or database keeps expiring its fields actively:
/// nothing reads it, yet the field goes (HLEN does not reclaim fields).
#[test]
fn active_field_expiry_survives_rename_move_swapdb_copy_restore() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let setup = |c: &mut common::RawConn, key: &str| {
        c.cmd(&["HSET", key, "f", "1", "g", "2"]);
        assert_eq!(
            c.cmd(&["HPEXPIRE", key, "150", "FIELDS", "1", "f"]),
            "*1\r\n:1\r\n"
        );
    };
    let wait_len = |c: &mut common::RawConn, db: &str, key: &str| {
        c.cmd(&["SELECT", db]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while c.cmd(&["HLEN", key]) != ":1\r\n" {
            assert!(
                std::time::Instant::now() < deadline,
                "{key} in db {db} never lost its field"
            );
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        assert_eq!(c.cmd(&["HKEYS", key]), "*1\r\n$1\r\ng\r\n");
        c.cmd(&["SELECT", "0"]);
    };

    setup(&mut c, "r1");
    assert_eq!(c.cmd(&["RENAME", "r1", "r2"]), "+OK\r\n");
    setup(&mut c, "m");
    assert_eq!(c.cmd(&["MOVE", "m", "1"]), ":1\r\n");
    setup(&mut c, "c1");
    assert_eq!(c.cmd(&["COPY", "c1", "c2", "DB", "2"]), ":1\r\n");
    setup(&mut c, "s");
    assert_eq!(c.cmd(&["SWAPDB", "0", "3"]), "+OK\r\n");
    c.cmd(&["SELECT", "4"]);
    setup(&mut c, "d");
    {
        let mut conn = s.client();
        redis::cmd("SELECT").arg(4).query::<()>(&mut conn).unwrap();
        let d: Vec<u8> = redis::cmd("DUMP").arg("d").query(&mut conn).unwrap();
        redis::cmd("DEL").arg("d").query::<()>(&mut conn).unwrap();
        redis::cmd("RESTORE")
            .arg("d2")
            .arg(0)
            .arg(d)
            .query::<()>(&mut conn)
            .unwrap();
        redis::cmd("SELECT").arg(0).query::<()>(&mut conn).unwrap();
    }
    c.cmd(&["SELECT", "0"]);

    // SWAPDB moved db 0 (r2, c1) to 3 and the empty db 3 here.
    wait_len(&mut c, "3", "r2");
    wait_len(&mut c, "1", "m");
    wait_len(&mut c, "3", "c1");
    wait_len(&mut c, "2", "c2");
    wait_len(&mut c, "3", "s");
    wait_len(&mut c, "4", "d2");
}
