//! Strings and numbers, end to end: exact replies in RESP2 and RESP3.

mod common;
use common::*;

#[test]
fn get_set_and_options() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["SET", "k", "v"], "+OK\r\n", "+OK\r\n"),
            (&["GET", "k"], "$1\r\nv\r\n", "$1\r\nv\r\n"),
            (&["GET", "missing"], "$-1\r\n", "_\r\n"),
            (&["SET", "k", "v2", "NX"], "$-1\r\n", "_\r\n"),
            (
                &["SET", "k", "v2", "XX", "GET"],
                "$1\r\nv\r\n",
                "$1\r\nv\r\n",
            ),
            (
                &["SET", "k", "v3", "NX", "GET"],
                "$2\r\nv2\r\n",
                "$2\r\nv2\r\n",
            ),
            (&["SET", "new", "x", "NX", "GET"], "$-1\r\n", "_\r\n"),
            (&["GET", "new"], "$1\r\nx\r\n", "$1\r\nx\r\n"),
            (
                &["SET", "k", "v", "NX", "XX"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["SET", "k", "v", "EX", "10", "PX", "100"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["SET", "k", "v", "EX", "0"],
                "-ERR invalid expire time in 'set' command\r\n",
                "-ERR invalid expire time in 'set' command\r\n",
            ),
            (
                &["SET", "k", "v", "EX", "abc"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                &["SET", "k", "v", "KEEPTTL", "EX", "1"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["SET", "k", "v", "EX", "9223372036854775807"],
                "-ERR invalid expire time in 'set' command\r\n",
                "-ERR invalid expire time in 'set' command\r\n",
            ),
            (&["SET", "k", "v", "EXAT", "1"], "+OK\r\n", "+OK\r\n"),
            (&["EXISTS", "k"], ":0\r\n", ":0\r\n"),
            (
                &["SET"],
                "-ERR wrong number of arguments for 'set' command\r\n",
                "-ERR wrong number of arguments for 'set' command\r\n",
            ),
            (&["SETNX", "a", "1"], ":1\r\n", ":1\r\n"),
            (&["SETNX", "a", "2"], ":0\r\n", ":0\r\n"),
            (&["GETSET", "a", "3"], "$1\r\n1\r\n", "$1\r\n1\r\n"),
            (&["GETDEL", "a"], "$1\r\n3\r\n", "$1\r\n3\r\n"),
            (&["GETDEL", "a"], "$-1\r\n", "_\r\n"),
            (
                &["SETEX", "e", "0", "v"],
                "-ERR invalid expire time in 'setex' command\r\n",
                "-ERR invalid expire time in 'setex' command\r\n",
            ),
            (&["PSETEX", "e", "100000", "v"], "+OK\r\n", "+OK\r\n"),
            (&["GETEX", "e", "PERSIST"], "$1\r\nv\r\n", "$1\r\nv\r\n"),
            (&["TTL", "e"], ":-1\r\n", ":-1\r\n"),
            (&["GETEX", "e", "EX", "100"], "$1\r\nv\r\n", "$1\r\nv\r\n"),
            (&["TTL", "e"], ":100\r\n", ":100\r\n"),
            (
                &["GETEX", "e", "EX", "0"],
                "-ERR invalid expire time in 'getex' command\r\n",
                "-ERR invalid expire time in 'getex' command\r\n",
            ),
            (
                &["GETEX", "e", "PERSIST", "EX", "1"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["MSET", "a", "1", "b"],
                "-ERR wrong number of arguments for 'mset' command\r\n",
                "-ERR wrong number of arguments for 'mset' command\r\n",
            ),
            (&["MSET", "a", "1", "b", "2"], "+OK\r\n", "+OK\r\n"),
            (
                &["MGET", "a", "nope", "b"],
                "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n",
                "*3\r\n$1\r\n1\r\n_\r\n$1\r\n2\r\n",
            ),
            (&["MSETNX", "a", "9", "zz", "9"], ":0\r\n", ":0\r\n"),
            (&["MSETNX", "y", "9", "zz", "9"], ":1\r\n", ":1\r\n"),
        ],
    );
}

#[test]
fn counters_and_encodings() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["INCR", "n"], ":1\r\n", ":1\r\n"),
            (&["INCRBY", "n", "41"], ":42\r\n", ":42\r\n"),
            (&["DECR", "n"], ":41\r\n", ":41\r\n"),
            (&["DECRBY", "n", "-1"], ":42\r\n", ":42\r\n"),
            (
                &["OBJECT", "ENCODING", "n"],
                "$3\r\nint\r\n",
                "$3\r\nint\r\n",
            ),
            (&["SET", "n", "9223372036854775807"], "+OK\r\n", "+OK\r\n"),
            (
                &["INCR", "n"],
                "-ERR increment or decrement would overflow\r\n",
                "-ERR increment or decrement would overflow\r\n",
            ),
            (
                &["DECRBY", "n", "-9223372036854775808"],
                "-ERR decrement would overflow\r\n",
                "-ERR decrement would overflow\r\n",
            ),
            (&["SET", "s", "0012"], "+OK\r\n", "+OK\r\n"),
            (
                &["INCR", "s"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                &["OBJECT", "ENCODING", "s"],
                "$6\r\nembstr\r\n",
                "$6\r\nembstr\r\n",
            ),
            (&["SET", "f", "10.5"], "+OK\r\n", "+OK\r\n"),
            (
                &["INCRBYFLOAT", "f", "0.1"],
                "$4\r\n10.6\r\n",
                "$4\r\n10.6\r\n",
            ),
            (
                &["INCRBYFLOAT", "g", "0.1"],
                "$3\r\n0.1\r\n",
                "$3\r\n0.1\r\n",
            ),
            (
                &["INCRBYFLOAT", "g", "0.2"],
                "$3\r\n0.3\r\n",
                "$3\r\n0.3\r\n",
            ),
            (&["SET", "h", "5.0e3"], "+OK\r\n", "+OK\r\n"),
            (
                &["INCRBYFLOAT", "h", "0"],
                "$4\r\n5000\r\n",
                "$4\r\n5000\r\n",
            ),
            (
                &["INCRBYFLOAT", "h", "abc"],
                "-ERR value is not a valid float\r\n",
                "-ERR value is not a valid float\r\n",
            ),
            (
                &["INCRBYFLOAT", "h", "inf"],
                "-ERR increment would produce NaN or Infinity\r\n",
                "-ERR increment would produce NaN or Infinity\r\n",
            ),
            (&["SET", "big", "1e20"], "+OK\r\n", "+OK\r\n"),
            (
                &["INCRBYFLOAT", "big", "0.1"],
                "$21\r\n100000000000000000000\r\n",
                "$21\r\n100000000000000000000\r\n",
            ),
        ],
    );
}

#[test]
fn ranges_append_and_lcs() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["APPEND", "s", "Hello"], ":5\r\n", ":5\r\n"),
            (&["APPEND", "s", " World"], ":11\r\n", ":11\r\n"),
            (&["OBJECT", "ENCODING", "s"], "$3\r\nraw\r\n", "$3\r\nraw\r\n"),
            (&["STRLEN", "s"], ":11\r\n", ":11\r\n"),
            (&["GETRANGE", "s", "0", "4"], "$5\r\nHello\r\n", "$5\r\nHello\r\n"),
            (&["GETRANGE", "s", "-5", "-1"], "$5\r\nWorld\r\n", "$5\r\nWorld\r\n"),
            (&["GETRANGE", "s", "5", "1"], "$0\r\n\r\n", "$0\r\n\r\n"),
            (&["SUBSTR", "s", "0", "-100"], "$1\r\nH\r\n", "$1\r\nH\r\n"),
            (&["SETRANGE", "s", "6", "Redis"], ":11\r\n", ":11\r\n"),
            (&["GET", "s"], "$11\r\nHello Redis\r\n", "$11\r\nHello Redis\r\n"),
            (&["SETRANGE", "z", "3", "x"], ":4\r\n", ":4\r\n"),
            (&["GET", "z"], "$4\r\n\x00\x00\x00x\r\n", "$4\r\n\x00\x00\x00x\r\n"),
            (&["SETRANGE", "z", "-1", "x"], "-ERR offset is out of range\r\n", "-ERR offset is out of range\r\n"),
            (&["SETRANGE", "z", "536870911", "xy"], "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n", "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"),
            (&["SETRANGE", "nokey", "0", ""], ":0\r\n", ":0\r\n"),
            (&["EXISTS", "nokey"], ":0\r\n", ":0\r\n"),
            (&["SET", "i", "123"], "+OK\r\n", "+OK\r\n"),
            (&["SETRANGE", "i", "0", ""], ":3\r\n", ":3\r\n"),
            (&["APPEND", "i", "4"], ":4\r\n", ":4\r\n"),
            (&["GET", "i"], "$4\r\n1234\r\n", "$4\r\n1234\r\n"),
            (&["MSET", "k1", "ohmytext", "k2", "mynewtext"], "+OK\r\n", "+OK\r\n"),
            (&["LCS", "k1", "k2"], "$6\r\nmytext\r\n", "$6\r\nmytext\r\n"),
            (&["LCS", "k1", "k2", "LEN"], ":6\r\n", ":6\r\n"),
            (&["LCS", "k1", "k2", "LEN", "IDX"], "-ERR If you want both the length and indexes, please just use IDX.\r\n", "-ERR If you want both the length and indexes, please just use IDX.\r\n"),
            (
                &["LCS", "k1", "k2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"],
                "*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n",
                "%2\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n",
            ),
        ],
    );
}

#[test]
fn redis_crate_round_trip() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = redis::cmd("SET")
        .arg("bin")
        .arg(&b"\x00\xff\r\n"[..])
        .query(&mut c)
        .unwrap();
    let v: Vec<u8> = redis::cmd("GET").arg("bin").query(&mut c).unwrap();
    assert_eq!(v, b"\x00\xff\r\n");
    let mut c3 = s.client3();
    let n: i64 = redis::cmd("INCRBY")
        .arg("ctr")
        .arg(5)
        .query(&mut c3)
        .unwrap();
    assert_eq!(n, 5);
}

/// GETEX checks its options' syntax, then the key (nil when missing, WRONGTYPE),
/// and only then the expiry's value, as Redis does.
#[test]
fn getex_checks_the_key_before_the_expiry_value() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["GETEX", "nope", "PX", "0"], "$-1\r\n", "_\r\n"),
            (&["GETEX", "nope", "EX", "abc"], "$-1\r\n", "_\r\n"),
            (
                &["GETEX", "nope", "EX"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["GETEX", "nope", "EX", "1", "PX", "1"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (&["RPUSH", "l", "a"], ":1\r\n", ":1\r\n"),
            (
                &["GETEX", "l", "EX", "-1"],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
            (&["SET", "s", "v"], "+OK\r\n", "+OK\r\n"),
            (
                &["GETEX", "s", "PX", "0"],
                "-ERR invalid expire time in 'getex' command\r\n",
                "-ERR invalid expire time in 'getex' command\r\n",
            ),
            (
                &["GETEX", "s", "EX", "1.5"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["TTL", "s"], ":-1\r\n", ":-1\r\n"),
            (&["GETEX", "s", "EX", "100"], "$1\r\nv\r\n", "$1\r\nv\r\n"),
            (&["TTL", "s"], ":100\r\n", ":100\r\n"),
        ],
    );
}

/// APPEND to a missing key stores the value as SET would (int, embstr, raw), as
/// Redis's APPEND does; appending to an existing string makes it raw.
#[test]
fn append_to_a_missing_key_encodes_like_set() {
    let s = TestServer::start();
    let long = "x".repeat(50);
    check_both(
        &s,
        &[
            (&["APPEND", "a", "b"], ":1\r\n", ":1\r\n"),
            (
                &["OBJECT", "ENCODING", "a"],
                "$6\r\nembstr\r\n",
                "$6\r\nembstr\r\n",
            ),
            (&["APPEND", "n", "123"], ":3\r\n", ":3\r\n"),
            (
                &["OBJECT", "ENCODING", "n"],
                "$3\r\nint\r\n",
                "$3\r\nint\r\n",
            ),
            (&["APPEND", "l", &long], ":50\r\n", ":50\r\n"),
            (
                &["OBJECT", "ENCODING", "l"],
                "$3\r\nraw\r\n",
                "$3\r\nraw\r\n",
            ),
            (&["APPEND", "a", "c"], ":2\r\n", ":2\r\n"),
            (
                &["OBJECT", "ENCODING", "a"],
                "$3\r\nraw\r\n",
                "$3\r\nraw\r\n",
            ),
            (&["GET", "a"], "$2\r\nbc\r\n", "$2\r\nbc\r\n"),
            (&["SETRANGE", "r", "0", "5"], ":1\r\n", ":1\r\n"),
            (
                &["OBJECT", "ENCODING", "r"],
                "$3\r\nraw\r\n",
                "$3\r\nraw\r\n",
            ),
        ],
    );
}

/// Values at every boundary of the stored encodings (integer, embedded string up to 44
/// bytes, raw string) and of the reply kept inline (44 bytes), each read back by GET,
/// GETDEL, SET ... GET, GETEX and a script, then overwritten by each other kind.
#[test]
fn values_of_every_encoding_read_back_and_overwrite_exactly() {
    let s = TestServer::start();
    let values: Vec<String> = vec![
        "".into(),
        "0".into(),
        "-9223372036854775808".into(),
        "9223372036854775807".into(),
        "9223372036854775808".into(),
        "007".into(),
        "x".repeat(44),
        "y".repeat(45),
        "z".repeat(5000),
    ];
    let bulk = |v: &str| format!("${}\r\n{v}\r\n", v.len());
    for proto in [2u8, 3] {
        let mut c = s.raw(proto);
        for v in &values {
            assert_eq!(c.cmd(&["SET", "k", v]), "+OK\r\n");
            assert_eq!(c.cmd(&["GET", "k"]), bulk(v), "GET {v:?}");
            assert_eq!(
                c.cmd(&["EVAL", "return redis.call('get', KEYS[1])", "1", "k"]),
                bulk(v)
            );
            assert_eq!(c.cmd(&["GETEX", "k", "PERSIST"]), bulk(v));
            for next in &values {
                assert_eq!(
                    c.cmd(&["SET", "k", next, "GET"]),
                    bulk(v),
                    "{v:?} then {next:?}"
                );
                assert_eq!(c.cmd(&["SET", "k", v]), "+OK\r\n");
            }
            assert_eq!(c.cmd(&["STRLEN", "k"]), format!(":{}\r\n", v.len()));
            assert_eq!(c.cmd(&["GETDEL", "k"]), bulk(v));
            assert_eq!(c.cmd(&["EXISTS", "k"]), ":0\r\n");
        }
        // MSET and APPEND store as SET does; inside MULTI the replies are the same.
        assert_eq!(c.cmd(&["MSET", "a", "12", "b", &"w".repeat(44)]), "+OK\r\n");
        assert_eq!(c.cmd(&["APPEND", "c", "-5"]), ":2\r\n");
        assert_eq!(c.cmd(&["MULTI"]), "+OK\r\n");
        for k in ["a", "b", "c"] {
            assert_eq!(c.cmd(&["GET", k]), "+QUEUED\r\n");
        }
        assert_eq!(
            c.cmd(&["EXEC"]),
            format!("*3\r\n$2\r\n12\r\n{}$2\r\n-5\r\n", bulk(&"w".repeat(44)))
        );
        assert_eq!(c.cmd(&["OBJECT", "ENCODING", "a"]), bulk("int"));
        assert_eq!(c.cmd(&["OBJECT", "ENCODING", "b"]), bulk("embstr"));
        assert_eq!(c.cmd(&["FLUSHALL"]), "+OK\r\n");
    }
}
