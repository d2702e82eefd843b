//! Lists end to end: exact replies in RESP2 and RESP3, encodings, and a differential
//! run against redis-server when it is installed.

mod common;
use common::*;

#[test]
fn push_pop_and_lengths() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["LPUSH", "l", "a", "b", "c"], ":3\r\n", ":3\r\n"),
            (&["RPUSH", "l", "1", "2"], ":5\r\n", ":5\r\n"),
            (
                &["LRANGE", "l", "0", "-1"],
                "*5\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\n2\r\n",
                "*5\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\n2\r\n",
            ),
            (&["LPUSHX", "nokey", "a"], ":0\r\n", ":0\r\n"),
            (&["RPUSHX", "nokey", "a"], ":0\r\n", ":0\r\n"),
            (&["EXISTS", "nokey"], ":0\r\n", ":0\r\n"),
            (&["LPUSHX", "l", "x", "y"], ":7\r\n", ":7\r\n"),
            (&["RPUSHX", "l", "z"], ":8\r\n", ":8\r\n"),
            (&["LLEN", "l"], ":8\r\n", ":8\r\n"),
            (&["LLEN", "nokey"], ":0\r\n", ":0\r\n"),
            (&["LPOP", "l"], "$1\r\ny\r\n", "$1\r\ny\r\n"),
            (&["RPOP", "l"], "$1\r\nz\r\n", "$1\r\nz\r\n"),
            (
                &["LPOP", "l", "2"],
                "*2\r\n$1\r\nx\r\n$1\r\nc\r\n",
                "*2\r\n$1\r\nx\r\n$1\r\nc\r\n",
            ),
            (
                &["RPOP", "l", "2"],
                "*2\r\n$1\r\n2\r\n$1\r\n1\r\n",
                "*2\r\n$1\r\n2\r\n$1\r\n1\r\n",
            ),
            (&["LPOP", "l", "0"], "*0\r\n", "*0\r\n"),
            (
                &["LPOP", "l", "-1"],
                "-ERR value is out of range, must be positive\r\n",
                "-ERR value is out of range, must be positive\r\n",
            ),
            (
                &["LPOP", "l", "x"],
                "-ERR value is out of range, must be positive\r\n",
                "-ERR value is out of range, must be positive\r\n",
            ),
            (
                &["LPOP", "l", "1", "2"],
                "-ERR wrong number of arguments for 'lpop' command\r\n",
                "-ERR wrong number of arguments for 'lpop' command\r\n",
            ),
            (
                &["RPOP", "l", "10"],
                "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
                "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            ),
            (&["EXISTS", "l"], ":0\r\n", ":0\r\n"),
            (&["LPOP", "l"], "$-1\r\n", "_\r\n"),
            (&["LPOP", "l", "1"], "*-1\r\n", "_\r\n"),
            (&["LPOP", "l", "0"], "*-1\r\n", "_\r\n"),
            (&["SET", "s", "v"], "+OK\r\n", "+OK\r\n"),
            (
                &["LPUSH", "s", "a"],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
            (
                &["LPOP", "s", "0"],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
            (
                &["LLEN", "s"],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
            (&["TYPE", "s"], "+string\r\n", "+string\r\n"),
            (&["RPUSH", "t", "1"], ":1\r\n", ":1\r\n"),
            (&["TYPE", "t"], "+list\r\n", "+list\r\n"),
        ],
    );
}

#[test]
fn positional_commands() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["RPUSH", "l", "a", "b", "c", "b"], ":4\r\n", ":4\r\n"),
            (&["LINDEX", "l", "1"], "$1\r\nb\r\n", "$1\r\nb\r\n"),
            (&["LINDEX", "l", "-1"], "$1\r\nb\r\n", "$1\r\nb\r\n"),
            (&["LINDEX", "l", "9"], "$-1\r\n", "_\r\n"),
            (&["LINDEX", "nokey", "x"], "$-1\r\n", "_\r\n"),
            (&["LINDEX", "l", "x"], "-ERR value is not an integer or out of range\r\n", "-ERR value is not an integer or out of range\r\n"),
            (&["LSET", "nokey", "0", "x"], "-ERR no such key\r\n", "-ERR no such key\r\n"),
            (&["LSET", "l", "9", "x"], "-ERR index out of range\r\n", "-ERR index out of range\r\n"),
            (&["LSET", "l", "-1", "B"], "+OK\r\n", "+OK\r\n"),
            (&["LINSERT", "l", "BEFORE", "b", "X"], ":5\r\n", ":5\r\n"),
            (&["LINSERT", "l", "after", "B", "Y"], ":6\r\n", ":6\r\n"),
            (&["LINSERT", "l", "AFTER", "nope", "Y"], ":-1\r\n", ":-1\r\n"),
            (&["LINSERT", "nokey", "AFTER", "a", "Y"], ":0\r\n", ":0\r\n"),
            (&["LINSERT", "l", "MIDDLE", "a", "Y"], "-ERR syntax error\r\n", "-ERR syntax error\r\n"),
            (&["LRANGE", "l", "0", "-1"], "*6\r\n$1\r\na\r\n$1\r\nX\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nB\r\n$1\r\nY\r\n", "*6\r\n$1\r\na\r\n$1\r\nX\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nB\r\n$1\r\nY\r\n"),
            (&["LRANGE", "l", "-2", "100"], "*2\r\n$1\r\nB\r\n$1\r\nY\r\n", "*2\r\n$1\r\nB\r\n$1\r\nY\r\n"),
            (&["LRANGE", "l", "4", "2"], "*0\r\n", "*0\r\n"),
            (&["LRANGE", "nokey", "0", "-1"], "*0\r\n", "*0\r\n"),
            (&["LREM", "l", "0", "Y"], ":1\r\n", ":1\r\n"),
            (&["LREM", "l", "x", "Y"], "-ERR value is not an integer or out of range\r\n", "-ERR value is not an integer or out of range\r\n"),
            (&["LTRIM", "l", "1", "-2"], "+OK\r\n", "+OK\r\n"),
            (&["LRANGE", "l", "0", "-1"], "*3\r\n$1\r\nX\r\n$1\r\nb\r\n$1\r\nc\r\n", "*3\r\n$1\r\nX\r\n$1\r\nb\r\n$1\r\nc\r\n"),
            (&["LTRIM", "l", "5", "1"], "+OK\r\n", "+OK\r\n"),
            (&["EXISTS", "l"], ":0\r\n", ":0\r\n"),
            (&["RPUSH", "p", "a", "b", "a", "b", "a", "b"], ":6\r\n", ":6\r\n"),
            (&["LPOS", "p", "b"], ":1\r\n", ":1\r\n"),
            (&["LPOS", "p", "b", "RANK", "-1"], ":5\r\n", ":5\r\n"),
            (&["LPOS", "p", "a", "COUNT", "0"], "*3\r\n:0\r\n:2\r\n:4\r\n", "*3\r\n:0\r\n:2\r\n:4\r\n"),
            (&["LPOS", "p", "a", "COUNT", "2", "RANK", "2"], "*2\r\n:2\r\n:4\r\n", "*2\r\n:2\r\n:4\r\n"),
            (&["LPOS", "p", "b", "RANK", "-2", "MAXLEN", "3"], ":3\r\n", ":3\r\n"),
            (&["LPOS", "p", "z"], "$-1\r\n", "_\r\n"),
            (&["LPOS", "p", "z", "COUNT", "0"], "*0\r\n", "*0\r\n"),
            (&["LPOS", "nokey", "z"], "$-1\r\n", "_\r\n"),
            (&["LPOS", "p", "a", "RANK", "0"], "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n", "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n"),
            (&["LPOS", "p", "a", "RANK", "-9223372036854775808"], "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n", "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"),
            (&["LPOS", "p", "a", "COUNT", "-1"], "-ERR COUNT can't be negative\r\n", "-ERR COUNT can't be negative\r\n"),
            (&["LPOS", "p", "a", "MAXLEN", "x"], "-ERR MAXLEN can't be negative\r\n", "-ERR MAXLEN can't be negative\r\n"),
            (&["LPOS", "p", "a", "COUNT"], "-ERR syntax error\r\n", "-ERR syntax error\r\n"),
        ],
    );
}

#[test]
fn moves_and_mpop() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["RPUSH", "m", "a", "b", "c"], ":3\r\n", ":3\r\n"),
            (
                &["LMOVE", "m", "m", "LEFT", "RIGHT"],
                "$1\r\na\r\n",
                "$1\r\na\r\n",
            ),
            (
                &["LMOVE", "m", "n", "RIGHT", "LEFT"],
                "$1\r\na\r\n",
                "$1\r\na\r\n",
            ),
            (
                &["LMOVE", "m", "n", "UP", "LEFT"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (&["LMOVE", "nokey", "n", "LEFT", "LEFT"], "$-1\r\n", "_\r\n"),
            (&["RPOPLPUSH", "m", "n"], "$1\r\nc\r\n", "$1\r\nc\r\n"),
            (&["RPOPLPUSH", "m", "n"], "$1\r\nb\r\n", "$1\r\nb\r\n"),
            (&["EXISTS", "m"], ":0\r\n", ":0\r\n"),
            (&["RPUSH", "one", "x"], ":1\r\n", ":1\r\n"),
            (
                &["LMOVE", "one", "one", "LEFT", "LEFT"],
                "$1\r\nx\r\n",
                "$1\r\nx\r\n",
            ),
            (&["LLEN", "one"], ":1\r\n", ":1\r\n"),
            (
                &["LMPOP", "2", "nokey", "n", "RIGHT", "COUNT", "2"],
                "*2\r\n$1\r\nn\r\n*2\r\n$1\r\na\r\n$1\r\nc\r\n",
                "*2\r\n$1\r\nn\r\n*2\r\n$1\r\na\r\n$1\r\nc\r\n",
            ),
            (
                &["LMPOP", "1", "n", "LEFT"],
                "*2\r\n$1\r\nn\r\n*1\r\n$1\r\nb\r\n",
                "*2\r\n$1\r\nn\r\n*1\r\n$1\r\nb\r\n",
            ),
            (&["LMPOP", "1", "n", "LEFT"], "*-1\r\n", "_\r\n"),
            (
                &["LMPOP", "0", "n", "LEFT"],
                "-ERR numkeys should be greater than 0\r\n",
                "-ERR numkeys should be greater than 0\r\n",
            ),
            (
                &["LMPOP", "1", "n", "LEFT", "COUNT", "0"],
                "-ERR count should be greater than 0\r\n",
                "-ERR count should be greater than 0\r\n",
            ),
            (
                &["LMPOP", "2", "n", "LEFT"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["LMPOP", "1", "n", "LEFT", "COUNT", "1", "COUNT", "1"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["COMMAND", "GETKEYS", "LMPOP", "2", "a", "b", "LEFT"],
                "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
                "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            ),
        ],
    );
}

#[test]
fn encodings_and_memory() {
    let s = TestServer::start_with(&["--list-max-listpack-size", "4"]);
    check_both(
        &s,
        &[
            (&["RPUSH", "l", "1", "2", "3"], ":3\r\n", ":3\r\n"),
            (
                &["OBJECT", "ENCODING", "l"],
                "$8\r\nlistpack\r\n",
                "$8\r\nlistpack\r\n",
            ),
            (&["RPUSH", "l", "4", "5"], ":5\r\n", ":5\r\n"),
            (
                &["OBJECT", "ENCODING", "l"],
                "$9\r\nquicklist\r\n",
                "$9\r\nquicklist\r\n",
            ),
            (
                &["LPOP", "l", "4"],
                "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n",
                "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n",
            ),
            (
                &["OBJECT", "ENCODING", "l"],
                "$8\r\nlistpack\r\n",
                "$8\r\nlistpack\r\n",
            ),
        ],
    );
    let mut c = s.raw(2);
    c.cmd(&["CONFIG", "SET", "list-max-listpack-size", "-2"]);
    let big = "x".repeat(10000);
    c.cmd(&["RPUSH", "big", "a"]);
    let small = c.cmd(&["MEMORY", "USAGE", "big"]);
    c.cmd(&["RPUSH", "big", &big]);
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "big"]), "$9\r\nquicklist\r\n");
    let usage = c.cmd(&["MEMORY", "USAGE", "big"]);
    let n: i64 = usage[1..usage.len() - 2].parse().unwrap();
    let m: i64 = small[1..small.len() - 2].parse().unwrap();
    assert!(n > m + 10000, "{n} vs {m}");
    assert_eq!(c.cmd(&["LINDEX", "big", "1"]).len(), 10000 + 10);
}

#[test]
fn keyspace_notifications_and_dirty() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["RPUSH", "l", "a"]);
    // An emptied list deletes its key, whatever emptied it.
    for cmd in [
        &["LPOP", "l"][..],
        &["RPUSH", "l", "a"],
        &["LREM", "l", "0", "a"],
        &["RPUSH", "l", "a"],
        &["LTRIM", "l", "1", "0"],
        &["RPUSH", "l", "a"],
        &["LMPOP", "1", "l", "LEFT"],
    ] {
        c.cmd(cmd);
    }
    assert_eq!(c.cmd(&["EXISTS", "l"]), ":0\r\n");
}

#[test]
fn large_lists_walk_nodes() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut args: Vec<String> = vec!["RPUSH".into(), "big".into()];
    for i in 0..5000 {
        args.push(format!("element-{i}"));
    }
    let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    assert_eq!(c.cmd(&refs), ":5000\r\n");
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "big"]), "$9\r\nquicklist\r\n");
    assert_eq!(c.cmd(&["LINDEX", "big", "2500"]), "$12\r\nelement-2500\r\n");
    assert_eq!(c.cmd(&["LSET", "big", "2500", "X"]), "+OK\r\n");
    assert_eq!(c.cmd(&["LINSERT", "big", "BEFORE", "X", "Y"]), ":5001\r\n");
    assert_eq!(
        c.cmd(&["LRANGE", "big", "2500", "2501"]),
        "*2\r\n$1\r\nY\r\n$1\r\nX\r\n"
    );
    assert_eq!(c.cmd(&["LPOS", "big", "element-4999"]), ":5000\r\n");
    assert_eq!(c.cmd(&["LTRIM", "big", "100", "-101"]), "+OK\r\n");
    assert_eq!(c.cmd(&["LLEN", "big"]), ":4801\r\n");
    assert_eq!(c.cmd(&["LINDEX", "big", "0"]), "$11\r\nelement-100\r\n");
}

/// The same commands against redis-server give byte-identical replies (encodings
/// excluded: redis-server 7.0 reports `quicklist` for small lists, 7.4 `listpack`).
#[test]
fn same_as_redis() {
    if !redis_server_available() {
        eprintln!("redis-server not installed: skipping");
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    assert_same_as_redis(
        &s,
        &r,
        &[
            &["FLUSHALL"],
            &[
                "RPUSH", "l", "a", "b", "c", "1", "2", "3", "-5", "100000", "c",
            ],
            &["LRANGE", "l", "0", "-1"],
            &["LRANGE", "l", "-100", "100"],
            &["LRANGE", "l", "5", "2"],
            &["LRANGE", "l", "x", "1"],
            &["LINDEX", "l", "3"],
            &["LINDEX", "l", "-1"],
            &["LINDEX", "l", "100"],
            &["LINDEX", "l", "x"],
            &["LINDEX", "nokey", "x"],
            &["LSET", "nokey", "0", "x"],
            &["LSET", "l", "100", "x"],
            &["LSET", "l", "x", "x"],
            &["LSET", "l", "-1", "zz"],
            &["LINSERT", "l", "BEFORE", "c", "X"],
            &["LINSERT", "l", "AFTER", "nope", "X"],
            &["LINSERT", "l", "MIDDLE", "c", "X"],
            &["LINSERT", "nokey", "AFTER", "c", "X"],
            &["LREM", "l", "0", "c"],
            &["LREM", "l", "x", "c"],
            &["LREM", "nokey", "1", "c"],
            &["LPOS", "l", "b"],
            &["LPOS", "l", "b", "RANK", "0"],
            &["LPOS", "l", "b", "RANK", "-1"],
            &["LPOS", "l", "b", "RANK", "x"],
            &["LPOS", "l", "b", "COUNT", "-1"],
            &["LPOS", "l", "b", "COUNT", "x"],
            &["LPOS", "l", "b", "MAXLEN", "-1"],
            &["LPOS", "l", "b", "MAXLEN", "x"],
            &["LPOS", "l", "b", "FOO"],
            &["LPOS", "l", "b", "COUNT"],
            &["LPOS", "nokey", "b"],
            &["LPOS", "nokey", "b", "COUNT", "0"],
            &["RPUSH", "p", "a", "b", "a", "b", "a", "b"],
            &["LPOS", "p", "a", "COUNT", "0"],
            &["LPOS", "p", "a", "COUNT", "2", "RANK", "2"],
            &["LPOS", "p", "b", "RANK", "-1", "COUNT", "0"],
            &["LPOS", "p", "b", "RANK", "-2", "MAXLEN", "3"],
            &["LPOS", "p", "a", "MAXLEN", "1", "COUNT", "0"],
            &["LPOP", "p", "0"],
            &["LPOP", "p", "-1"],
            &["LPOP", "p", "x"],
            &["LPOP", "p", "2"],
            &["RPOP", "p", "2"],
            &["LPOP", "p", "1", "2"],
            &["LPOP", "nokey", "0"],
            &["LPOP", "nokey", "2"],
            &["LPOP", "nokey"],
            &["RPOP", "p"],
            &["RPOP", "p"],
            &["EXISTS", "p"],
            &["SET", "s", "x"],
            &["LPUSH", "s", "a"],
            &["LPOP", "s", "0"],
            &["LLEN", "s"],
            &["LLEN", "nokey"],
            &["LLEN", "l"],
            &["LPUSHX", "nokey", "a"],
            &["RPUSHX", "l", "z"],
            &["LTRIM", "l", "1", "-2"],
            &["LRANGE", "l", "0", "-1"],
            &["LTRIM", "l", "x", "1"],
            &["LTRIM", "l", "5", "1"],
            &["EXISTS", "l"],
            &["LTRIM", "nokey", "0", "1"],
            &["RPUSH", "m", "a", "b", "c"],
            &["LMOVE", "m", "m", "LEFT", "RIGHT"],
            &["LRANGE", "m", "0", "-1"],
            &["LMOVE", "m", "n", "RIGHT", "LEFT"],
            &["LMOVE", "m", "n", "UP", "LEFT"],
            &["LMOVE", "m", "s", "LEFT", "LEFT"],
            &["LMOVE", "nokey", "n", "LEFT", "LEFT"],
            &["RPOPLPUSH", "m", "n"],
            &["RPOPLPUSH", "m", "n"],
            &["EXISTS", "m"],
            &["LRANGE", "n", "0", "-1"],
            &["LMPOP", "0", "n", "LEFT"],
            &["LMPOP", "x", "n", "LEFT"],
            &["LMPOP", "2", "n", "LEFT"],
            &["LMPOP", "1", "n", "MIDDLE"],
            &["LMPOP", "1", "n", "LEFT", "COUNT", "0"],
            &["LMPOP", "1", "n", "LEFT", "COUNT", "x"],
            &["LMPOP", "1", "n", "LEFT", "COUNT", "1", "COUNT", "1"],
            &["LMPOP", "2", "nokey", "n", "RIGHT", "COUNT", "10"],
            &["LMPOP", "2", "nokey", "n", "RIGHT", "COUNT", "10"],
            &["LMPOP", "1", "s", "LEFT"],
            &["BLPOP", "nokey", "-1"],
            &["BLPOP", "nokey", "x"],
            &["BLPOP", "nokey", "-inf"],
            &["BLPOP", "nokey", "nan"],
            &["BLMPOP", "-1", "1", "nokey", "LEFT"],
            &["BLMPOP", "0", "0", "nokey", "LEFT"],
            &["BLMOVE", "a", "b", "LEFT", "LEFT", "-1"],
            &["BLMOVE", "a", "b", "X", "LEFT", "-1"],
            &["BRPOPLPUSH", "a", "b", "x"],
            &["RPUSH", "q", "1", "2"],
            &["BLPOP", "q", "0"],
            &["BRPOP", "s", "q", "0"],
            &["BLPOP", "s", "0"],
            &["BLMPOP", "0", "1", "q", "RIGHT", "COUNT", "5"],
        ],
    );
}

/// Popped elements of every listpack encoding (small and large integers, strings up to
/// and past the inline reply's 44 bytes) come back as the bytes pushed.
#[test]
fn popped_elements_of_every_encoding_come_back_exactly() {
    let s = TestServer::start();
    let elems: Vec<String> = vec![
        "0".into(),
        "-1".into(),
        "127".into(),
        "-9223372036854775808".into(),
        "9223372036854775807".into(),
        "12345678901234567890".into(),
        "".into(),
        "a".repeat(44),
        "b".repeat(45),
        "c".repeat(3000),
    ];
    let bulk = |v: &str| format!("${}\r\n{v}\r\n", v.len());
    for proto in [2u8, 3] {
        let mut c = s.raw(proto);
        let mut args = vec!["RPUSH", "l"];
        args.extend(elems.iter().map(String::as_str));
        assert_eq!(c.cmd(&args), format!(":{}\r\n", elems.len()));
        // LPOP and RPOP in turn: the front from the head, the back from the tail.
        let (mut front, mut back) = (0, elems.len());
        for turn in 0..elems.len() {
            if turn % 2 == 0 {
                assert_eq!(c.cmd(&["LPOP", "l"]), bulk(&elems[front]), "LPOP {front}");
                front += 1;
            } else {
                back -= 1;
                assert_eq!(c.cmd(&["RPOP", "l"]), bulk(&elems[back]), "RPOP {back}");
            }
        }
        assert_eq!(c.cmd(&["EXISTS", "l"]), ":0\r\n");
    }
}
