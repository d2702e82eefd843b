//! Generic key commands end to end: exact replies in RESP2 and RESP3, expiry
//! behaviour (lazy and active), iteration, and a differential batch against
//! redis-server when it is installed.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn existence_deletion_and_types() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (
                &["MSET", "a", "1", "b", "2", "c", "3"],
                "+OK\r\n",
                "+OK\r\n",
            ),
            (&["EXISTS", "a", "a", "nope", "b"], ":3\r\n", ":3\r\n"),
            (&["TYPE", "a"], "+string\r\n", "+string\r\n"),
            (&["TYPE", "nope"], "+none\r\n", "+none\r\n"),
            (&["DEL", "a", "nope", "a"], ":1\r\n", ":1\r\n"),
            (&["UNLINK", "b", "c"], ":2\r\n", ":2\r\n"),
            (&["DBSIZE"], ":0\r\n", ":0\r\n"),
            (&["TOUCH", "x", "y"], ":0\r\n", ":0\r\n"),
            (
                &["DEL"],
                "-ERR wrong number of arguments for 'del' command\r\n",
                "-ERR wrong number of arguments for 'del' command\r\n",
            ),
        ],
    );
}

#[test]
fn rename_copy_move_swapdb() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (
                &["RENAME", "nope", "x"],
                "-ERR no such key\r\n",
                "-ERR no such key\r\n",
            ),
            (&["SET", "a", "1", "EX", "100"], "+OK\r\n", "+OK\r\n"),
            (&["RENAME", "a", "a"], "+OK\r\n", "+OK\r\n"),
            (&["RENAME", "a", "b"], "+OK\r\n", "+OK\r\n"),
            (&["TTL", "b"], ":100\r\n", ":100\r\n"),
            (&["SET", "c", "x"], "+OK\r\n", "+OK\r\n"),
            (&["RENAMENX", "b", "c"], ":0\r\n", ":0\r\n"),
            (&["RENAMENX", "b", "d"], ":1\r\n", ":1\r\n"),
            (
                &["COPY", "d", "d"],
                "-ERR source and destination objects are the same\r\n",
                "-ERR source and destination objects are the same\r\n",
            ),
            (&["COPY", "d", "c"], ":0\r\n", ":0\r\n"),
            (&["COPY", "d", "c", "REPLACE"], ":1\r\n", ":1\r\n"),
            (&["GET", "c"], "$1\r\n1\r\n", "$1\r\n1\r\n"),
            (
                &["COPY", "d", "e", "DB", "100"],
                "-ERR DB index is out of range\r\n",
                "-ERR DB index is out of range\r\n",
            ),
            (&["COPY", "d", "d", "DB", "1"], ":1\r\n", ":1\r\n"),
            (
                &["COPY", "d", "e", "FOO"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["MOVE", "d", "0"],
                "-ERR source and destination objects are the same\r\n",
                "-ERR source and destination objects are the same\r\n",
            ),
            (&["MOVE", "d", "1"], ":0\r\n", ":0\r\n"),
            (&["MOVE", "c", "1"], ":1\r\n", ":1\r\n"),
            (
                &["MOVE", "c", "x"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["SWAPDB", "0", "1"], "+OK\r\n", "+OK\r\n"),
            (&["GET", "c"], "$1\r\n1\r\n", "$1\r\n1\r\n"),
            (
                &["SWAPDB", "x", "1"],
                "-ERR invalid first DB index\r\n",
                "-ERR invalid first DB index\r\n",
            ),
            (
                &["SWAPDB", "0", "x"],
                "-ERR invalid second DB index\r\n",
                "-ERR invalid second DB index\r\n",
            ),
            (
                &["SWAPDB", "0", "16"],
                "-ERR DB index is out of range\r\n",
                "-ERR DB index is out of range\r\n",
            ),
            (&["SELECT", "1"], "+OK\r\n", "+OK\r\n"),
            (&["EXISTS", "d"], ":1\r\n", ":1\r\n"),
            (&["SELECT", "0"], "+OK\r\n", "+OK\r\n"),
        ],
    );
}

#[test]
fn expire_options_and_ttls() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["SET", "k", "v"], "+OK\r\n", "+OK\r\n"),
            (&["TTL", "k"], ":-1\r\n", ":-1\r\n"),
            (&["PTTL", "nope"], ":-2\r\n", ":-2\r\n"),
            (&["EXPIRETIME", "k"], ":-1\r\n", ":-1\r\n"),
            (&["EXPIRE", "k", "100", "XX"], ":0\r\n", ":0\r\n"),
            (&["EXPIRE", "k", "100", "GT"], ":0\r\n", ":0\r\n"),
            (&["EXPIRE", "k", "100", "LT"], ":1\r\n", ":1\r\n"),
            (&["EXPIRE", "k", "200", "NX"], ":0\r\n", ":0\r\n"),
            (&["EXPIRE", "k", "50", "GT"], ":0\r\n", ":0\r\n"),
            (&["EXPIRE", "k", "200", "GT"], ":1\r\n", ":1\r\n"),
            (&["TTL", "k"], ":200\r\n", ":200\r\n"),
            (
                &["EXPIRE", "k", "1", "NX", "XX"],
                "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
                "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
            ),
            (
                &["EXPIRE", "k", "1", "GT", "LT"],
                "-ERR GT and LT options at the same time are not compatible\r\n",
                "-ERR GT and LT options at the same time are not compatible\r\n",
            ),
            (
                &["EXPIRE", "k", "1", "FOO"],
                "-ERR Unsupported option FOO\r\n",
                "-ERR Unsupported option FOO\r\n",
            ),
            (
                &["EXPIRE", "k", "9223372036854775807"],
                "-ERR invalid expire time in 'expire' command\r\n",
                "-ERR invalid expire time in 'expire' command\r\n",
            ),
            (
                &["EXPIRE", "k", "x"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["EXPIREAT", "k", "4102444800"], ":1\r\n", ":1\r\n"),
            (&["EXPIRETIME", "k"], ":4102444800\r\n", ":4102444800\r\n"),
            (
                &["PEXPIRETIME", "k"],
                ":4102444800000\r\n",
                ":4102444800000\r\n",
            ),
            (&["PERSIST", "k"], ":1\r\n", ":1\r\n"),
            (&["PERSIST", "k"], ":0\r\n", ":0\r\n"),
            (&["PEXPIRE", "k", "-1"], ":1\r\n", ":1\r\n"),
            (&["EXISTS", "k"], ":0\r\n", ":0\r\n"),
            (&["EXPIRE", "nope", "10"], ":0\r\n", ":0\r\n"),
        ],
    );
}

#[test]
fn lazy_and_active_expiry() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["SET", "lazy", "v", "PX", "50"]);
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(c.cmd(&["GET", "lazy"]), "$-1\r\n");

    // Active expiry: keys nobody touches disappear on their own.
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    for i in 0..2000 {
        c.send(&["SET", &format!("k{i}"), "v", "PX", "20"]);
    }
    for _ in 0..2000 {
        c.read_reply();
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        c.cmd(&["DBSIZE"]),
        ":2000\r\n",
        "nothing expires while active expiry is off"
    );
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    let mut size = String::new();
    for _ in 0..200 {
        size = c.cmd(&["DBSIZE"]);
        if size == ":0\r\n" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(size, ":0\r\n");
    let info = c.cmd(&["INFO", "stats"]);
    assert!(info.contains("expired_keys:2001\r\n"), "{info}");
}

#[test]
fn keys_scan_randomkey() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["RANDOMKEY"]), "$-1\r\n");
    assert_eq!(
        c.cmd(&["MSET", "user:1", "a", "user:2", "b", "other", "c", "u[x]", "d"]),
        "+OK\r\n"
    );
    let r = c.cmd(&["RANDOMKEY"]);
    assert!(r.starts_with('$') && r != "$-1\r\n");
    let mut keys = c.cmd(&["KEYS", "user:*"]);
    assert!(keys.starts_with("*2\r\n"), "{keys}");
    keys = c.cmd(&["KEYS", "u\\[x\\]"]);
    assert_eq!(keys, "*1\r\n$4\r\nu[x]\r\n");
    assert_eq!(c.cmd(&["SCAN", "x"]), "-ERR invalid cursor\r\n");
    assert_eq!(c.cmd(&["SCAN", "0", "COUNT", "0"]), "-ERR syntax error\r\n");
    assert_eq!(c.cmd(&["SCAN", "0", "MATCH"]), "-ERR syntax error\r\n");
    assert_eq!(
        c.cmd(&["SCAN", "0", "TYPE", "list"]),
        "*2\r\n$1\r\n0\r\n*0\r\n"
    );

    // SCAN returns every key present for the whole iteration, while the table grows.
    let mut r = s.client();
    let _: () = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(5000)
        .arg("stable")
        .query(&mut r)
        .unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut cursor: u64 = 0;
    let mut round = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(50)
            .query(&mut r)
            .unwrap();
        seen.extend(batch);
        if round < 40 {
            let _: () = redis::cmd("DEBUG")
                .arg("POPULATE")
                .arg(200)
                .arg(format!("grow{round}"))
                .query(&mut r)
                .unwrap();
        }
        round += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    for i in 0..5000 {
        assert!(
            seen.contains(&format!("stable:{i}")),
            "SCAN missed stable:{i}"
        );
    }
}

#[test]
fn object_subcommands() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["SET", "n", "123"], "+OK\r\n", "+OK\r\n"),
            // The idle time is read in the transaction that writes the key: its commands
            // share one clock, so a second boundary between them cannot make it 1.
            (&["MULTI"], "+OK\r\n", "+OK\r\n"),
            (&["SET", "s", "hello"], "+QUEUED\r\n", "+QUEUED\r\n"),
            (&["OBJECT", "IDLETIME", "s"], "+QUEUED\r\n", "+QUEUED\r\n"),
            (&["EXEC"], "*2\r\n+OK\r\n:0\r\n", "*2\r\n+OK\r\n:0\r\n"),
            (&["OBJECT", "ENCODING", "n"], "$3\r\nint\r\n", "$3\r\nint\r\n"),
            (&["OBJECT", "ENCODING", "s"], "$6\r\nembstr\r\n", "$6\r\nembstr\r\n"),
            (&["OBJECT", "ENCODING", "nope"], "$-1\r\n", "_\r\n"),
            (&["OBJECT", "REFCOUNT", "n"], ":2147483647\r\n", ":2147483647\r\n"),
            (&["OBJECT", "REFCOUNT", "s"], ":1\r\n", ":1\r\n"),
            (&["OBJECT", "FREQ", "s"], "-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n", "-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n"),
            (&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"], "+OK\r\n", "+OK\r\n"),
            (&["SET", "f", "x"], "+OK\r\n", "+OK\r\n"),
            (&["OBJECT", "FREQ", "f"], ":5\r\n", ":5\r\n"),
            (&["OBJECT", "IDLETIME", "f"], "-ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n", "-ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n"),
            (&["CONFIG", "SET", "maxmemory-policy", "noeviction"], "+OK\r\n", "+OK\r\n"),
            // Small integers stay shared under a maxmemory unless the policy is LRU/LFU.
            (&["CONFIG", "SET", "maxmemory", "1gb"], "+OK\r\n", "+OK\r\n"),
            (&["OBJECT", "REFCOUNT", "n"], ":2147483647\r\n", ":2147483647\r\n"),
            (&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"], "+OK\r\n", "+OK\r\n"),
            (&["OBJECT", "REFCOUNT", "n"], ":2147483647\r\n", ":2147483647\r\n"),
            (&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"], "+OK\r\n", "+OK\r\n"),
            (&["OBJECT", "REFCOUNT", "n"], ":1\r\n", ":1\r\n"),
            (&["CONFIG", "SET", "maxmemory-policy", "noeviction"], "+OK\r\n", "+OK\r\n"),
            (&["CONFIG", "SET", "maxmemory", "0"], "+OK\r\n", "+OK\r\n"),
            (&["OBJECT", "FOO", "s"], "-ERR unknown subcommand 'FOO'. Try OBJECT HELP.\r\n", "-ERR unknown subcommand 'FOO'. Try OBJECT HELP.\r\n"),
            (&["OBJECT", "ENCODING"], "-ERR wrong number of arguments for 'object|encoding' command\r\n", "-ERR wrong number of arguments for 'object|encoding' command\r\n"),
        ],
    );
}

/// Redis answers in a fixed order: EXPIRE's options before its time, a missing key
/// before OBJECT FREQ/IDLETIME look at the policy. EXPIRETIME rounds to the nearest
/// second, as TTL does (found by a differential run against redis-server).
#[test]
fn error_order_and_expiretime_rounding() {
    let s = TestServer::start();
    let freq_err = "-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n";
    let idle_err = "-ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n";
    check_both(
        &s,
        &[
            (&["SET", "k", "v"], "+OK\r\n", "+OK\r\n"),
            (
                &["EXPIRE", "k", "abc", "NX", "XX"],
                "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
                "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
            ),
            (
                &["PEXPIRE", "k", "1.5", "GT", "LT"],
                "-ERR GT and LT options at the same time are not compatible\r\n",
                "-ERR GT and LT options at the same time are not compatible\r\n",
            ),
            (
                &["EXPIRE", "k", "abc", "FOO"],
                "-ERR Unsupported option FOO\r\n",
                "-ERR Unsupported option FOO\r\n",
            ),
            (
                &["EXPIRE", "k", "abc", "NX"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["PEXPIREAT", "k", "33000000000600"], ":1\r\n", ":1\r\n"),
            (&["EXPIRETIME", "k"], ":33000000001\r\n", ":33000000001\r\n"),
            (&["PEXPIREAT", "k", "33000000000499"], ":1\r\n", ":1\r\n"),
            (&["EXPIRETIME", "k"], ":33000000000\r\n", ":33000000000\r\n"),
            (
                &["PEXPIRETIME", "k"],
                ":33000000000499\r\n",
                ":33000000000499\r\n",
            ),
            // The latest time there is rounds without overflowing.
            (
                &["PEXPIREAT", "k", "9223372036854775807"],
                ":1\r\n",
                ":1\r\n",
            ),
            (
                &["EXPIRETIME", "k"],
                ":9223372036854776\r\n",
                ":9223372036854776\r\n",
            ),
            (&["PEXPIREAT", "k", "33000000000499"], ":1\r\n", ":1\r\n"),
            (&["OBJECT", "FREQ", "nope"], "$-1\r\n", "_\r\n"),
            (&["OBJECT", "FREQ", "k"], freq_err, freq_err),
            (
                &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
                "+OK\r\n",
                "+OK\r\n",
            ),
            (&["OBJECT", "IDLETIME", "nope"], "$-1\r\n", "_\r\n"),
            (&["OBJECT", "IDLETIME", "k"], idle_err, idle_err),
            (
                &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
                "+OK\r\n",
                "+OK\r\n",
            ),
        ],
    );
}

/// The same commands against redis-server give byte-identical replies.
#[test]
fn differential_against_redis() {
    if !redis_server_available() {
        return;
    }
    let ours = TestServer::start();
    let theirs = RedisServer::start();
    let cmds: &[&[&str]] = &[
        &["SET", "a", "1"],
        &["SET", "b", "hello world"],
        &["SET", "c", "3.5"],
        &["INCR", "a"],
        &["INCRBY", "a", "-10"],
        &["INCRBYFLOAT", "c", "1.25"],
        &["INCRBYFLOAT", "c", "-0.000001"],
        &["INCRBYFLOAT", "c", "1e10"],
        &["APPEND", "b", "!"],
        &["GETRANGE", "b", "-3", "-1"],
        &["GETRANGE", "b", "100", "200"],
        &["SETRANGE", "b", "20", "x"],
        &["GET", "b"],
        &["STRLEN", "b"],
        &["MGET", "a", "b", "zz"],
        &["SET", "a", "x", "XX", "GET"],
        &["SET", "q", "x", "NX", "GET"],
        &["SET", "q", "y", "EX", "100", "PX", "1"],
        &["SET", "q", "y", "KEEPTTL", "GET"],
        &["GETEX", "q", "PX", "5000"],
        &["PTTL", "nope"],
        &["OBJECT", "ENCODING", "a"],
        &["OBJECT", "ENCODING", "b"],
        &["OBJECT", "ENCODING", "c"],
        &["LCS", "a", "b"],
        &["LCS", "b", "q", "IDX"],
        &["EXISTS", "a", "b", "a"],
        &["TYPE", "b"],
        &["RENAME", "a", "z"],
        &["RENAMENX", "z", "b"],
        &["COPY", "z", "zz"],
        &["MOVE", "zz", "3"],
        &["EXPIRE", "z", "100", "GT"],
        &["EXPIRE", "z", "100", "LT"],
        &["EXPIRE", "z", "abc"],
        &["DEL", "z", "zz", "q"],
        &["GET"],
        &["NOSUCHCMD", "a", "b"],
        &["SCAN", "0", "COUNT", "0"],
        &["SELECT", "99"],
        &["ECHO", "hi"],
        &["PING", "x"],
        &["PING", "x", "y"],
        &["MSETNX", "n1", "1", "n2", "2"],
        &["DECRBY", "n1", "9223372036854775807"],
        &["DECRBY", "n1", "10"],
        &["SETNX", "n1", "5"],
        &["GETDEL", "n2"],
        &["DBSIZE"],
        &["OBJECT", "HELP"],
        &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"],
        // COMMAND GETKEYS GET: arity -3 in Redis 7.4 (7.0: -4), tests/keyspecs.rs.
        &["COMMAND", "GETKEYS", "NOPE", "x"],
        &["CLIENT", "NOPE"],
        &["CONFIG", "GET"],
        &["CONFIG", "SET", "maxclients"],
        &["CONFIG", "SET", "nope", "1"],
        &["CONFIG", "SET", "databases", "5"],
        &["CONFIG", "SET", "maxmemory", "10x"],
        &["SWAPDB", "0", "0"],
        &["FLUSHDB", "ASYNC"],
        &["FLUSHALL", "BOGUS"],
    ];
    assert_same_as_redis(&ours, &theirs, cmds);
}
