//! SORT and SORT_RO end to end over sets (lists and sorted sets plug in when their
//! types land), with BY/GET patterns on strings and hash fields, and a differential
//! run against redis-server.

mod common;
use common::*;

#[test]
fn sort_sets_both_protocols() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["SADD", "s", "5", "3", "10", "1"], ":4\r\n", ":4\r\n"),
            (
                &["SORT", "s"],
                "*4\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n5\r\n$2\r\n10\r\n",
                "*4\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n5\r\n$2\r\n10\r\n",
            ),
            (
                &["SORT", "s", "DESC", "LIMIT", "1", "2"],
                "*2\r\n$1\r\n5\r\n$1\r\n3\r\n",
                "*2\r\n$1\r\n5\r\n$1\r\n3\r\n",
            ),
            (
                &["SORT", "s", "ALPHA"],
                "*4\r\n$1\r\n1\r\n$2\r\n10\r\n$1\r\n3\r\n$1\r\n5\r\n",
                "*4\r\n$1\r\n1\r\n$2\r\n10\r\n$1\r\n3\r\n$1\r\n5\r\n",
            ),
            (&["SORT_RO", "s", "LIMIT", "10", "2"], "*0\r\n", "*0\r\n"),
            (
                &["MSET", "w_1", "4", "w_3", "3", "w_5", "2", "w_10", "1"],
                "+OK\r\n",
                "+OK\r\n",
            ),
            (
                &["SORT", "s", "BY", "w_*"],
                "*4\r\n$2\r\n10\r\n$1\r\n5\r\n$1\r\n3\r\n$1\r\n1\r\n",
                "*4\r\n$2\r\n10\r\n$1\r\n5\r\n$1\r\n3\r\n$1\r\n1\r\n",
            ),
            (&["HSET", "h_1", "f", "x1"], ":1\r\n", ":1\r\n"),
            (
                &[
                    "SORT", "s", "BY", "w_*", "GET", "h_*->f", "GET", "#", "LIMIT", "3", "1",
                ],
                "*2\r\n$2\r\nx1\r\n$1\r\n1\r\n",
                "*2\r\n$2\r\nx1\r\n$1\r\n1\r\n",
            ),
            (
                &["SORT", "s", "GET", "nope_*", "LIMIT", "0", "1"],
                "*1\r\n$-1\r\n",
                "*1\r\n_\r\n",
            ),
            (&["SET", "w_3", "abc"], "+OK\r\n", "+OK\r\n"),
            (
                &["SORT", "s", "BY", "w_*"],
                "-ERR One or more scores can't be converted into double\r\n",
                "-ERR One or more scores can't be converted into double\r\n",
            ),
            (&["SADD", "a", "b", "c"], ":2\r\n", ":2\r\n"),
            (
                &["SORT", "a"],
                "-ERR One or more scores can't be converted into double\r\n",
                "-ERR One or more scores can't be converted into double\r\n",
            ),
            (
                &["SORT", "a", "ALPHA", "DESC"],
                "*2\r\n$1\r\nc\r\n$1\r\nb\r\n",
                "*2\r\n$1\r\nc\r\n$1\r\nb\r\n",
            ),
            (&["SORT", "nokey"], "*0\r\n", "*0\r\n"),
            (&["SORT", "nokey", "STORE", "dst"], ":0\r\n", ":0\r\n"),
            (
                &["SORT_RO", "s", "STORE", "dst"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["SORT", "s", "LIMIT", "1"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["SORT", "s", "LIMIT", "a", "1"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["SET", "str", "x"], "+OK\r\n", "+OK\r\n"),
            (
                &["SORT", "str"],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
        ],
    );
}

#[test]
fn same_as_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let cmds: Vec<Vec<&str>> = [
        "SADD s 5 3 10 1 -2",
        "SORT s",
        "SORT s DESC",
        "SORT s LIMIT 1 2",
        "SORT s LIMIT 0 -1",
        "SORT s LIMIT -5 2",
        "SORT s LIMIT 10 2",
        "SORT s LIMIT 2 0",
        "SORT s ALPHA",
        "SORT s ALPHA DESC",
        "SORT_RO s DESC LIMIT 1 10",
        "SET w_5 1",
        "SET w_3 2",
        "SET w_10 0.5",
        "SET w_1 abc",
        "SORT s BY w_*",
        "SET w_1 3",
        "SET w_-2 -inf",
        "SORT s BY w_*",
        "SORT s BY w_* DESC",
        "SORT s BY w_* ALPHA",
        "SORT s BY nosort",
        "SORT s BY nosort GET #",
        "SET o_5 five",
        "SET o_3 three",
        "SORT s GET o_* GET #",
        "SORT s BY w_* GET o_* GET # LIMIT 0 2",
        "HSET h_5 f 9 g x",
        "HSET h_3 f 1 g y",
        "SORT s BY h_*->f",
        "SORT s BY h_*->f GET h_*->g GET # GET h_*->nope",
        "SORT s BY h_*-> GET #",
        "SORT s GET h_*->",
        "SORT nokey",
        "SORT nokey BY nosort",
        "SET str x",
        "SORT str",
        "SORT s foo",
        "SORT s LIMIT 1",
        "SORT s LIMIT a b",
        "SORT_RO s STORE d",
        "SORT s STORE",
        "SORT s BY",
        "SADD f 2 1 10",
        "SORT f ALPHA",
        "SORT f BY w_* ALPHA DESC",
        "SORT nokey STORE d2",
        "HSET notset a 1",
        "SORT notset",
        "SORT s BY w_* GET",
    ]
    .iter()
    .map(|l| l.split(' ').collect())
    .collect();
    let refs: Vec<&[&str]> = cmds.iter().map(|v| v.as_slice()).collect();
    assert_same_as_redis(&s, &r, &refs);
}

/// SORT over lists and sorted sets, with BY, GET, LIMIT, ALPHA, nosort and STORE into a
/// list: exact replies, and the same as redis-server when it is installed.
#[test]
fn sort_lists_and_zsets() {
    let s = TestServer::start();
    let rows: &[(&[&str], &str, &str)] = &[
        (&["RPUSH", "l", "3", "1", "2", "10"], ":4\r\n", ":4\r\n"),
        (&["SORT", "l"], "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n", "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n"),
        (&["SORT", "l", "ALPHA", "DESC", "LIMIT", "0", "2"], "*2\r\n$1\r\n3\r\n$1\r\n2\r\n", "*2\r\n$1\r\n3\r\n$1\r\n2\r\n"),
        (&["SORT", "l", "BY", "nosort"], "*4\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n$2\r\n10\r\n", "*4\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n$2\r\n10\r\n"),
        (&["MSET", "w_1", "30", "w_2", "20", "w_3", "10", "w_10", "0"], "+OK\r\n", "+OK\r\n"),
        (&["SORT", "l", "BY", "w_*", "GET", "#", "GET", "w_*"], "*8\r\n$2\r\n10\r\n$1\r\n0\r\n$1\r\n3\r\n$2\r\n10\r\n$1\r\n2\r\n$2\r\n20\r\n$1\r\n1\r\n$2\r\n30\r\n", "*8\r\n$2\r\n10\r\n$1\r\n0\r\n$1\r\n3\r\n$2\r\n10\r\n$1\r\n2\r\n$2\r\n20\r\n$1\r\n1\r\n$2\r\n30\r\n"),
        (&["SORT", "l", "STORE", "dst"], ":4\r\n", ":4\r\n"),
        (&["LRANGE", "dst", "0", "-1"], "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n", "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\n10\r\n"),
        (&["TYPE", "dst"], "+list\r\n", "+list\r\n"),
        (&["ZADD", "z", "1", "c", "2", "a", "3", "b"], ":3\r\n", ":3\r\n"),
        (&["OBJECT", "ENCODING", "z"], "$8\r\nlistpack\r\n", "$8\r\nlistpack\r\n"),
        // SORT converts a compact sorted set to a skiplist for good, SORT_RO too.
        (&["ZADD", "zro", "1", "7"], ":1\r\n", ":1\r\n"),
        (&["SORT_RO", "zro"], "*1\r\n$1\r\n7\r\n", "*1\r\n$1\r\n7\r\n"),
        (&["OBJECT", "ENCODING", "zro"], "$8\r\nskiplist\r\n", "$8\r\nskiplist\r\n"),
        (&["SORT", "z", "BY", "nosort", "DESC"], "*3\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nc\r\n", "*3\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nc\r\n"),
        (&["SORT", "z", "ALPHA"], "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
        (&["SORT", "z"], "-ERR One or more scores can't be converted into double\r\n", "-ERR One or more scores can't be converted into double\r\n"),
        (&["SORT_RO", "z", "ALPHA", "LIMIT", "1", "1"], "*1\r\n$1\r\nb\r\n", "*1\r\n$1\r\nb\r\n"),
        (&["OBJECT", "ENCODING", "z"], "$8\r\nskiplist\r\n", "$8\r\nskiplist\r\n"),
        (&["SORT", "nokey", "STORE", "dst"], ":0\r\n", ":0\r\n"),
        (&["EXISTS", "dst"], ":0\r\n", ":0\r\n"),
    ];
    check_both(&s, rows);
    if redis_server_available() {
        let r = RedisServer::start();
        let cmds: Vec<&[&str]> = rows.iter().map(|(c, _, _)| *c).collect();
        assert_same_as_redis(&s, &r, &cmds);
    }
}

#[test]
fn getkeys_finds_the_last_store_destination() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (
            &["COMMAND", "GETKEYS", "SORT", "abc", "STORE", "def"],
            "*2\r\n$3\r\nabc\r\n$3\r\ndef\r\n",
        ),
        (
            &["COMMAND", "GETKEYS", "SORT", "abc", "STORE", "invalid", "STORE", "stillbad", "STORE", "def"],
            "*2\r\n$3\r\nabc\r\n$3\r\ndef\r\n",
        ),
        // BY and GET patterns and LIMIT's numbers are skipped, as Redis's sortGetKeys.
        (
            &["COMMAND", "GETKEYS", "SORT", "abc", "BY", "store", "LIMIT", "0", "store", "GET", "store", "STORE", "dst"],
            "*2\r\n$3\r\nabc\r\n$3\r\ndst\r\n",
        ),
        (&["COMMAND", "GETKEYS", "SORT_RO", "abc"], "*1\r\n$3\r\nabc\r\n"),
        (
            &["COMMAND", "GETKEYSANDFLAGS", "SORT", "abc", "STORE", "def"],
            "*2\r\n*2\r\n$3\r\nabc\r\n*2\r\n+RO\r\n+access\r\n*2\r\n$3\r\ndef\r\n*2\r\n+OW\r\n+update\r\n",
        ),
    ]);
}
