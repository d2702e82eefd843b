//! Sorted sets end to end: exact replies in RESP2 and RESP3, encoding conversion at the
//! thresholds, and differential runs against redis-server.

mod common;
use common::*;

/// Splits a command line on spaces, honouring double quotes (for empty and spaced args).
fn split(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut any) = (false, false);
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            _ => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[test]
fn add_score_and_options() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["ZADD", "z", "1", "a", "2", "b"], ":2\r\n", ":2\r\n"),
            (
                &["ZADD", "z", "CH", "5", "a", "2", "b", "3", "c"],
                ":2\r\n",
                ":2\r\n",
            ),
            (&["ZSCORE", "z", "a"], "$1\r\n5\r\n", ",5\r\n"),
            (&["ZSCORE", "z", "nope"], "$-1\r\n", "_\r\n"),
            (&["ZADD", "z", "NX", "9", "a", "1", "d"], ":1\r\n", ":1\r\n"),
            (&["ZADD", "z", "XX", "9", "a", "1", "e"], ":0\r\n", ":0\r\n"),
            (
                &["ZADD", "z", "XX", "CH", "8", "a", "1", "e"],
                ":1\r\n",
                ":1\r\n",
            ),
            (
                &["ZADD", "z", "GT", "CH", "1", "a", "4", "b"],
                ":1\r\n",
                ":1\r\n",
            ),
            (
                &["ZADD", "z", "LT", "CH", "100", "a", "0", "b"],
                ":1\r\n",
                ":1\r\n",
            ),
            (
                &["ZADD", "z", "INCR", "1.5", "a"],
                "$3\r\n9.5\r\n",
                ",9.5\r\n",
            ),
            (&["ZADD", "z", "NX", "INCR", "1", "a"], "$-1\r\n", "_\r\n"),
            (&["ZADD", "z", "GT", "INCR", "-1", "a"], "$-1\r\n", "_\r\n"),
            (
                &["ZADD", "nokey", "XX", "INCR", "1", "a"],
                "$-1\r\n",
                "_\r\n",
            ),
            (&["EXISTS", "nokey"], ":0\r\n", ":0\r\n"),
            (&["ZINCRBY", "z", "0.5", "a"], "$2\r\n10\r\n", ",10\r\n"),
            (
                &["ZINCRBY", "z", "x", "a"],
                "-ERR value is not a valid float\r\n",
                "-ERR value is not a valid float\r\n",
            ),
            (
                &["ZADD", "z", "NX", "XX", "1", "a"],
                "-ERR XX and NX options at the same time are not compatible\r\n",
                "-ERR XX and NX options at the same time are not compatible\r\n",
            ),
            (
                &["ZADD", "z", "GT", "LT", "1", "a"],
                "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
                "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
            ),
            (
                &["ZADD", "z", "INCR", "1", "a", "1", "b"],
                "-ERR INCR option supports a single increment-element pair\r\n",
                "-ERR INCR option supports a single increment-element pair\r\n",
            ),
            (
                &["ZADD", "z", "1", "a", "2"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["ZADD", "z", "nan", "a"],
                "-ERR value is not a valid float\r\n",
                "-ERR value is not a valid float\r\n",
            ),
            (
                &["ZADD", "z", "1"],
                "-ERR wrong number of arguments for 'zadd' command\r\n",
                "-ERR wrong number of arguments for 'zadd' command\r\n",
            ),
            (&["ZADD", "i", "inf", "a"], ":1\r\n", ":1\r\n"),
            (
                &["ZINCRBY", "i", "-inf", "a"],
                "-ERR resulting score is not a number (NaN)\r\n",
                "-ERR resulting score is not a number (NaN)\r\n",
            ),
            (&["ZSCORE", "i", "a"], "$3\r\ninf\r\n", ",inf\r\n"),
            (
                &["ZMSCORE", "z", "a", "nope"],
                "*2\r\n$2\r\n10\r\n$-1\r\n",
                "*2\r\n,10\r\n_\r\n",
            ),
            (&["ZCARD", "z"], ":4\r\n", ":4\r\n"),
            (&["ZREM", "z", "a", "b", "nope"], ":2\r\n", ":2\r\n"),
            (&["ZREM", "z", "c", "d"], ":2\r\n", ":2\r\n"),
            (&["EXISTS", "z"], ":0\r\n", ":0\r\n"),
            (&["SET", "s", "x"], "+OK\r\n", "+OK\r\n"),
            (
                &["ZADD", "s", "1", "a"],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
            (
                &["ZCARD", "s"],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
            (&["TYPE", "i"], "+zset\r\n", "+zset\r\n"),
        ],
    );
}

#[test]
fn rank_with_score() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (
                &["ZADD", "z", "1", "a", "2.5", "b", "3", "c"],
                ":3\r\n",
                ":3\r\n",
            ),
            (&["ZRANK", "z", "b"], ":1\r\n", ":1\r\n"),
            (&["ZREVRANK", "z", "b"], ":1\r\n", ":1\r\n"),
            (&["ZREVRANK", "z", "c"], ":0\r\n", ":0\r\n"),
            (
                &["ZRANK", "z", "b", "WITHSCORE"],
                "*2\r\n:1\r\n$3\r\n2.5\r\n",
                "*2\r\n:1\r\n,2.5\r\n",
            ),
            (
                &["ZREVRANK", "z", "a", "withscore"],
                "*2\r\n:2\r\n$1\r\n1\r\n",
                "*2\r\n:2\r\n,1\r\n",
            ),
            (&["ZRANK", "z", "nope"], "$-1\r\n", "_\r\n"),
            (&["ZRANK", "z", "nope", "WITHSCORE"], "*-1\r\n", "_\r\n"),
            (&["ZRANK", "nokey", "a", "WITHSCORE"], "*-1\r\n", "_\r\n"),
            (
                &["ZRANK", "z", "a", "foo"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["ZRANK", "z", "a", "withscore", "x"],
                "-ERR wrong number of arguments for 'zrank' command\r\n",
                "-ERR wrong number of arguments for 'zrank' command\r\n",
            ),
        ],
    );
}

#[test]
fn ranges_and_pops_reply_shapes() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["ZADD", "z", "1", "a", "2", "b", "3", "c"], ":3\r\n", ":3\r\n"),
            (&["ZRANGE", "z", "0", "1", "WITHSCORES"], "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n", "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n"),
            (&["ZRANGE", "z", "(1", "+inf", "BYSCORE", "LIMIT", "1", "5"], "*1\r\n$1\r\nc\r\n", "*1\r\n$1\r\nc\r\n"),
            (&["ZRANGE", "z", "[c", "-", "BYLEX", "REV"], "*3\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n", "*3\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"),
            (&["ZRANGE", "z", "0", "1", "LIMIT", "0", "1"], "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n", "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n"),
            (&["ZRANGE", "z", "a", "b", "BYSCORE"], "-ERR min or max is not a float\r\n", "-ERR min or max is not a float\r\n"),
            (&["ZRANGE", "z", "a", "b", "BYLEX"], "-ERR min or max not valid string range item\r\n", "-ERR min or max not valid string range item\r\n"),
            (&["ZPOPMIN", "z"], "*2\r\n$1\r\na\r\n$1\r\n1\r\n", "*2\r\n$1\r\na\r\n,1\r\n"),
            (&["ZPOPMAX", "z", "1"], "*2\r\n$1\r\nc\r\n$1\r\n3\r\n", "*1\r\n*2\r\n$1\r\nc\r\n,3\r\n"),
            (&["ZMPOP", "1", "z", "MIN", "COUNT", "5"], "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n", "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n,2\r\n"),
            (&["EXISTS", "z"], ":0\r\n", ":0\r\n"),
            (&["ZMPOP", "1", "z", "MIN"], "*-1\r\n", "_\r\n"),
            (&["ZPOPMIN", "z"], "*0\r\n", "*0\r\n"),
            (&["ZADD", "one", "7", "m"], ":1\r\n", ":1\r\n"),
            (&["ZRANDMEMBER", "one"], "$1\r\nm\r\n", "$1\r\nm\r\n"),
            (&["ZRANDMEMBER", "one", "-2", "WITHSCORES"], "*4\r\n$1\r\nm\r\n$1\r\n7\r\n$1\r\nm\r\n$1\r\n7\r\n", "*2\r\n*2\r\n$1\r\nm\r\n,7\r\n*2\r\n$1\r\nm\r\n,7\r\n"),
            (&["ZRANDMEMBER", "one", "5"], "*1\r\n$1\r\nm\r\n", "*1\r\n$1\r\nm\r\n"),
            (&["ZRANDMEMBER", "nokey"], "$-1\r\n", "_\r\n"),
            (&["ZSCAN", "one", "0"], "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nm\r\n$1\r\n7\r\n", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nm\r\n$1\r\n7\r\n"),
        ],
    );
}

#[test]
fn encoding_conversion_at_thresholds() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for i in 0..128 {
        c.cmd(&["ZADD", "z", &i.to_string(), &format!("m{i}")]);
    }
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "z"]), "$8\r\nlistpack\r\n");
    c.cmd(&["ZADD", "z", "200", "m200"]);
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "z"]), "$8\r\nskiplist\r\n");
    assert_eq!(c.cmd(&["ZCARD", "z"]), ":129\r\n");
    assert_eq!(c.cmd(&["ZRANK", "z", "m100"]), ":100\r\n");
    // Removing members does not convert back in place.
    c.cmd(&["ZREMRANGEBYRANK", "z", "0", "-3"]);
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "z"]), "$8\r\nskiplist\r\n");
    // A stored result picks its encoding from its size.
    assert_eq!(c.cmd(&["ZUNIONSTORE", "u", "1", "z"]), ":2\r\n");
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "u"]), "$8\r\nlistpack\r\n");
    let long = "x".repeat(65);
    c.cmd(&["ZADD", "v", "1", &"y".repeat(64)]);
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "v"]), "$8\r\nlistpack\r\n");
    c.cmd(&["ZADD", "v", "1", &long]);
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "v"]), "$8\r\nskiplist\r\n");
    // One ZADD of more pairs than a listpack holds makes a skiplist, new key or not,
    // even when repeated members leave fewer (Redis 7.4's size hint).
    let pairs: Vec<String> = (0..130)
        .flat_map(|i| [i.to_string(), format!("m{}", i % 65)])
        .collect();
    let mut zadd = vec!["ZADD", "hinted"];
    zadd.extend(pairs.iter().map(String::as_str));
    assert_eq!(c.cmd(&zadd), ":65\r\n");
    assert_eq!(
        c.cmd(&["OBJECT", "ENCODING", "hinted"]),
        "$8\r\nskiplist\r\n"
    );
    c.cmd(&["ZADD", "small", "1", "a"]);
    zadd[1] = "small";
    assert_eq!(c.cmd(&zadd), ":65\r\n");
    assert_eq!(c.cmd(&["ZCARD", "small"]), ":66\r\n");
    assert_eq!(
        c.cmd(&["OBJECT", "ENCODING", "small"]),
        "$8\r\nskiplist\r\n"
    );
    // -0 is 0 in listpack, -0 in skiplist (as Redis).
    c.cmd(&["ZADD", "nz", "-0", "a"]);
    assert_eq!(c.cmd(&["ZSCORE", "nz", "a"]), "$1\r\n0\r\n");
    c.cmd(&["ZADD", "v", "-0", "a"]);
    assert_eq!(c.cmd(&["ZSCORE", "v", "a"]), "$2\r\n-0\r\n");
    // ZSCAN over a big set returns every member exactly once.
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    let mut conn = s.client();
    for i in 0..1000 {
        c.cmd(&["ZADD", "big", &i.to_string(), &format!("m{i}")]);
    }
    loop {
        let (next, items): (String, Vec<String>) = redis::cmd("ZSCAN")
            .arg("big")
            .arg(&cursor)
            .arg("COUNT")
            .arg(50)
            .query(&mut conn)
            .unwrap();
        for pair in items.chunks(2) {
            assert!(seen.insert(pair[0].clone()), "duplicate {}", pair[0]);
        }
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 1000);
}

#[test]
fn same_as_redis_listpack_and_skiplist() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let batch: Vec<Vec<String>> = include_str!("data/zsets_batch.txt")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(split)
        .collect();
    for entries in ["128", "0"] {
        let mut cmds: Vec<Vec<String>> = vec![split(&format!(
            "config set zset-max-listpack-entries {entries}"
        ))];
        cmds.extend(
            batch
                .iter()
                .filter(|c| {
                    // Hash-ordered replies differ by design in the big encoding.
                    entries == "128" || !c[0].eq_ignore_ascii_case("zscan")
                })
                .cloned(),
        );
        let refs: Vec<Vec<&str>> = cmds
            .iter()
            .map(|c| c.iter().map(String::as_str).collect())
            .collect();
        let slices: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
        assert_same_as_redis(&s, &r, &slices);
    }
}

#[test]
fn random_big_sets_same_as_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let mut rng = fastrand::Rng::with_seed(7);
    let mut cmds: Vec<Vec<String>> = Vec::new();
    for _ in 0..600 {
        let m = format!("m{}", rng.u32(0..300));
        let sc = format!("{}", rng.i32(-50..50) as f64 / 4.0);
        let c = match rng.u8(0..10) {
            0..=3 => vec!["ZADD".into(), "z".into(), sc, m],
            4 => vec!["ZREM".into(), "z".into(), m],
            5 => vec!["ZRANK".into(), "z".into(), m],
            6 => vec![
                "ZRANGEBYSCORE".into(),
                "z".into(),
                format!("({sc}"),
                "+inf".into(),
                "LIMIT".into(),
                "2".into(),
                "5".into(),
                "WITHSCORES".into(),
            ],
            7 => vec![
                "ZREVRANGE".into(),
                "z".into(),
                rng.i32(-200..200).to_string(),
                rng.i32(-200..200).to_string(),
            ],
            8 => vec!["ZCOUNT".into(), "z".into(), sc, "+inf".into()],
            _ => vec!["ZINCRBY".into(), "z".into(), sc, m],
        };
        cmds.push(c);
    }
    cmds.push(vec![
        "ZRANGE".into(),
        "z".into(),
        "0".into(),
        "-1".into(),
        "WITHSCORES".into(),
    ]);
    cmds.push(vec![
        "ZREMRANGEBYSCORE".into(),
        "z".into(),
        "-3".into(),
        "(4".into(),
    ]);
    cmds.push(vec!["ZPOPMAX".into(), "z".into(), "7".into()]);
    cmds.push(vec![
        "ZRANGE".into(),
        "z".into(),
        "0".into(),
        "-1".into(),
        "WITHSCORES".into(),
    ]);
    let refs: Vec<Vec<&str>> = cmds
        .iter()
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    let slices: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
    assert_same_as_redis(&s, &r, &slices);
}

/// Plain sets are inputs to ZUNION/ZINTER/ZDIFF with score 1.
#[test]
fn set_inputs_score_one() {
    let s = TestServer::start();
    let rows: &[(&[&str], &str, &str)] = &[
        (&["SADD", "s", "a", "b"], ":2\r\n", ":2\r\n"),
        (&["ZADD", "z", "5", "a", "7", "c"], ":2\r\n", ":2\r\n"),
        (
            &["ZUNION", "2", "s", "z", "WITHSCORES"],
            "*6\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n6\r\n$1\r\nc\r\n$1\r\n7\r\n",
            "*3\r\n*2\r\n$1\r\nb\r\n,1\r\n*2\r\n$1\r\na\r\n,6\r\n*2\r\n$1\r\nc\r\n,7\r\n",
        ),
        (
            &["ZINTERSTORE", "d", "2", "s", "z", "WEIGHTS", "10", "1"],
            ":1\r\n",
            ":1\r\n",
        ),
        (&["ZSCORE", "d", "a"], "$2\r\n15\r\n", ",15\r\n"),
        (
            &["ZDIFF", "2", "s", "z"],
            "*1\r\n$1\r\nb\r\n",
            "*1\r\n$1\r\nb\r\n",
        ),
        (&["SET", "str", "x"], "+OK\r\n", "+OK\r\n"),
        (
            &["ZUNION", "2", "s", "str"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
    ];
    check_both(&s, rows);
    if redis_server_available() {
        let r = RedisServer::start();
        let cmds: Vec<&[&str]> = rows.iter().map(|(c, _, _)| *c).collect();
        assert_same_as_redis(&s, &r, &cmds);
    }
}

/// Scores print as Redis 7.4 does: the shortest text that reads back to the same
/// double (`3.14`, `0.1`, `1e+300`), in RESP2 bulk strings and RESP3 doubles alike;
/// ZSCAN of a skiplist-encoded zset keeps `%.17g` (Redis's `ld2string`), while a
/// listpack's ZSCAN shows the shortest form it stores.
#[test]
fn double_replies_follow_redis_7_4() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (
                &[
                    "ZADD", "zd", "3.14", "b", "1e300", "c", "0.1", "a", "-1.5e-7", "d",
                ],
                ":4\r\n",
                ":4\r\n",
            ),
            (&["ZSCORE", "zd", "b"], "$4\r\n3.14\r\n", ",3.14\r\n"),
            (&["ZSCORE", "zd", "c"], "$6\r\n1e+300\r\n", ",1e+300\r\n"),
            (&["ZSCORE", "zd", "d"], "$7\r\n-1.5e-7\r\n", ",-1.5e-7\r\n"),
            (
                &["ZMSCORE", "zd", "a", "x"],
                "*2\r\n$3\r\n0.1\r\n$-1\r\n",
                "*2\r\n,0.1\r\n_\r\n",
            ),
            (
                &["ZRANGE", "zd", "0", "1", "WITHSCORES"],
                "*4\r\n$1\r\nd\r\n$7\r\n-1.5e-7\r\n$1\r\na\r\n$3\r\n0.1\r\n",
                "*2\r\n*2\r\n$1\r\nd\r\n,-1.5e-7\r\n*2\r\n$1\r\na\r\n,0.1\r\n",
            ),
            (
                &["ZINCRBY", "zd", "0.2", "a"],
                "$19\r\n0.30000000000000004\r\n",
                ",0.30000000000000004\r\n",
            ),
            (
                &["ZADD", "zd", "INCR", "1e-7", "b"],
                "$9\r\n3.1400001\r\n",
                ",3.1400001\r\n",
            ),
            (
                &["ZADD", "zd", "123456789012345680000", "e"],
                ":1\r\n",
                ":1\r\n",
            ),
            (
                &["ZSCORE", "zd", "e"],
                "$21\r\n123456789012345680000\r\n",
                ",123456789012345680000\r\n",
            ),
            (
                &["ZADD", "zd", "-inf", "f", "4611686018427387904", "g"],
                ":2\r\n",
                ":2\r\n",
            ),
            (&["ZSCORE", "zd", "f"], "$4\r\n-inf\r\n", ",-inf\r\n"),
            (
                &["ZSCORE", "zd", "g"],
                "$19\r\n4611686018427387904\r\n",
                ",4611686018427387904\r\n",
            ),
            (
                &["ZADD", "zd", "12345.678901234567", "h"],
                ":1\r\n",
                ":1\r\n",
            ),
            (
                &["ZSCORE", "zd", "h"],
                "$21\r\n1.2345678901234567e+4\r\n",
                ",1.2345678901234567e+4\r\n",
            ),
            (&["ZADD", "lp", "0.1", "m"], ":1\r\n", ":1\r\n"),
            (
                &["ZSCAN", "lp", "0"],
                "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nm\r\n$3\r\n0.1\r\n",
                "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nm\r\n$3\r\n0.1\r\n",
            ),
            (
                &["CONFIG", "SET", "zset-max-listpack-entries", "0"],
                "+OK\r\n",
                "+OK\r\n",
            ),
            (&["ZADD", "sk", "0.1", "m"], ":1\r\n", ":1\r\n"),
            (
                &["OBJECT", "ENCODING", "sk"],
                "$8\r\nskiplist\r\n",
                "$8\r\nskiplist\r\n",
            ),
            (&["ZSCORE", "sk", "m"], "$3\r\n0.1\r\n", ",0.1\r\n"),
            (
                &["ZSCAN", "sk", "0"],
                "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nm\r\n$19\r\n0.10000000000000001\r\n",
                "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nm\r\n$19\r\n0.10000000000000001\r\n",
            ),
            (&["ZADD", "sk", "-0", "z"], ":1\r\n", ":1\r\n"),
            (&["ZSCORE", "sk", "z"], "$2\r\n-0\r\n", ",-0\r\n"),
            (
                &["CONFIG", "SET", "zset-max-listpack-entries", "128"],
                "+OK\r\n",
                "+OK\r\n",
            ),
            // INCRBYFLOAT keeps its long-double rules.
            (
                &["INCRBYFLOAT", "f", "0.1"],
                "$3\r\n0.1\r\n",
                "$3\r\n0.1\r\n",
            ),
            (
                &["INCRBYFLOAT", "f", "1e20"],
                "$21\r\n100000000000000000000\r\n",
                "$21\r\n100000000000000000000\r\n",
            ),
        ],
    );
}

/// ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD read every input key
/// (WRONGTYPE) before they parse the options that follow the keys, as Redis does.
#[test]
fn set_operations_check_key_types_before_options() {
    let s = TestServer::start();
    let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    check_both(
        &s,
        &[
            (&["SET", "str", "x"], "+OK\r\n", "+OK\r\n"),
            (&["ZADD", "z", "1", "a"], ":1\r\n", ":1\r\n"),
            (&["ZINTER", "1", "str", "extra"], wrongtype, wrongtype),
            (
                &["ZUNION", "2", "z", "str", "AGGREGATE", "X"],
                wrongtype,
                wrongtype,
            ),
            (
                &["ZDIFF", "1", "str", "WITHSCORES", "junk"],
                wrongtype,
                wrongtype,
            ),
            (
                &["ZUNIONSTORE", "d", "2", "z", "str", "WEIGHTS", "1", "abc"],
                wrongtype,
                wrongtype,
            ),
            (
                &["ZINTERSTORE", "d", "1", "str", "AGGREGATE", "MIN"],
                wrongtype,
                wrongtype,
            ),
            (
                &["ZDIFFSTORE", "d", "2", "str", "z", "WEIGHTS", "1", "1"],
                wrongtype,
                wrongtype,
            ),
            (
                &["ZINTERCARD", "2", "z", "str", "LIMIT", "-1"],
                wrongtype,
                wrongtype,
            ),
            // With inputs of the right type the options are judged.
            (
                &["ZINTER", "1", "z", "extra"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["ZUNIONSTORE", "d", "1", "z", "WEIGHTS", "abc"],
                "-ERR weight value is not a float\r\n",
                "-ERR weight value is not a float\r\n",
            ),
            (
                &["ZDIFFSTORE", "d", "1", "z", "WEIGHTS", "1"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["ZINTERCARD", "1", "z", "LIMIT", "-1"],
                "-ERR LIMIT can't be negative\r\n",
                "-ERR LIMIT can't be negative\r\n",
            ),
            (&["EXISTS", "d"], ":0\r\n", ":0\r\n"),
        ],
    );
}
