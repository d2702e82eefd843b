//! Sets end to end: exact replies in RESP2 and RESP3, the three encodings at their
//! thresholds, SSCAN across a conversion, random-pick semantics, and differential
//! runs against redis-server.

mod common;
use common::*;
use std::collections::HashSet;

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn basic_commands_both_protocols() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["SADD", "s", "3", "1", "2"], ":3\r\n", ":3\r\n"),
            (&["SADD", "s", "2", "4"], ":1\r\n", ":1\r\n"),
            (
                &["SMEMBERS", "s"],
                "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n",
                "~4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n",
            ),
            (&["SMEMBERS", "nokey"], "*0\r\n", "~0\r\n"),
            (&["SCARD", "s"], ":4\r\n", ":4\r\n"),
            (&["SISMEMBER", "s", "1"], ":1\r\n", ":1\r\n"),
            (&["SISMEMBER", "s", "x"], ":0\r\n", ":0\r\n"),
            (
                &["SMISMEMBER", "s", "1", "x"],
                "*2\r\n:1\r\n:0\r\n",
                "*2\r\n:1\r\n:0\r\n",
            ),
            (&["SREM", "s", "4", "x"], ":1\r\n", ":1\r\n"),
            (&["SADD", "t", "b", "a", "2"], ":3\r\n", ":3\r\n"),
            (
                &["SMEMBERS", "t"],
                "*3\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\n2\r\n",
                "~3\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\n2\r\n",
            ),
            (
                &["SINTER", "s", "t"],
                "*1\r\n$1\r\n2\r\n",
                "~1\r\n$1\r\n2\r\n",
            ),
            (&["SINTER", "s", "nokey"], "*0\r\n", "~0\r\n"),
            (
                &["SUNION", "s", "nokey"],
                "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n",
                "~3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n",
            ),
            (
                &["SDIFF", "s", "t"],
                "*2\r\n$1\r\n1\r\n$1\r\n3\r\n",
                "~2\r\n$1\r\n1\r\n$1\r\n3\r\n",
            ),
            (&["SDIFF", "nokey", "s"], "*0\r\n", "~0\r\n"),
            (&["SINTERSTORE", "d", "s", "t"], ":1\r\n", ":1\r\n"),
            (
                &["OBJECT", "ENCODING", "d"],
                "$6\r\nintset\r\n",
                "$6\r\nintset\r\n",
            ),
            (&["SUNIONSTORE", "d", "s", "t"], ":5\r\n", ":5\r\n"),
            (
                &["OBJECT", "ENCODING", "d"],
                "$8\r\nlistpack\r\n",
                "$8\r\nlistpack\r\n",
            ),
            (&["SDIFFSTORE", "d", "s", "t"], ":2\r\n", ":2\r\n"),
            (&["SINTERSTORE", "d", "s", "nokey"], ":0\r\n", ":0\r\n"),
            (&["EXISTS", "d"], ":0\r\n", ":0\r\n"),
            (&["SINTERCARD", "2", "s", "t"], ":1\r\n", ":1\r\n"),
            (&["SINTERCARD", "1", "s", "LIMIT", "2"], ":2\r\n", ":2\r\n"),
            (&["SINTERCARD", "1", "s", "LIMIT", "0"], ":3\r\n", ":3\r\n"),
            (
                &["SINTERCARD", "0", "s"],
                "-ERR numkeys should be greater than 0\r\n",
                "-ERR numkeys should be greater than 0\r\n",
            ),
            (
                &["SINTERCARD", "3", "s"],
                "-ERR Number of keys can't be greater than number of args\r\n",
                "-ERR Number of keys can't be greater than number of args\r\n",
            ),
            (
                &["SINTERCARD", "1", "s", "LIMIT", "-1"],
                "-ERR LIMIT can't be negative\r\n",
                "-ERR LIMIT can't be negative\r\n",
            ),
            (
                &["SINTERCARD", "1", "s", "FOO"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (&["SMOVE", "s", "m", "1"], ":1\r\n", ":1\r\n"),
            (&["SMOVE", "s", "m", "1"], ":0\r\n", ":0\r\n"),
            (&["SMOVE", "s", "s", "2"], ":1\r\n", ":1\r\n"),
            (&["SMOVE", "nokey", "m", "1"], ":0\r\n", ":0\r\n"),
            (&["SMEMBERS", "m"], "*1\r\n$1\r\n1\r\n", "~1\r\n$1\r\n1\r\n"),
            (&["SET", "str", "v"], "+OK\r\n", "+OK\r\n"),
            (&["SMOVE", "s", "str", "2"], WRONGTYPE, WRONGTYPE),
            (&["SMOVE", "str", "s", "2"], WRONGTYPE, WRONGTYPE),
            (&["SINTER", "nokey", "str"], WRONGTYPE, WRONGTYPE),
            (&["SADD", "str", "a"], WRONGTYPE, WRONGTYPE),
            (&["SUNIONSTORE", "d", "s", "str"], WRONGTYPE, WRONGTYPE),
            (&["SPOP", "nokey"], "$-1\r\n", "_\r\n"),
            (&["SPOP", "nokey", "3"], "*0\r\n", "~0\r\n"),
            (
                &["SPOP", "s", "-1"],
                "-ERR value is out of range, must be positive\r\n",
                "-ERR value is out of range, must be positive\r\n",
            ),
            (&["SPOP", "s", "0"], "*0\r\n", "~0\r\n"),
            (&["SRANDMEMBER", "nokey"], "$-1\r\n", "_\r\n"),
            (&["SRANDMEMBER", "nokey", "3"], "*0\r\n", "*0\r\n"),
            (
                &["SRANDMEMBER", "s", "x"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["SADD", "one", "x"], ":1\r\n", ":1\r\n"),
            (
                &["SRANDMEMBER", "one", "-3"],
                "*3\r\n$1\r\nx\r\n$1\r\nx\r\n$1\r\nx\r\n",
                "*3\r\n$1\r\nx\r\n$1\r\nx\r\n$1\r\nx\r\n",
            ),
            (
                &["SRANDMEMBER", "one", "5"],
                "*1\r\n$1\r\nx\r\n",
                "*1\r\n$1\r\nx\r\n",
            ),
            (
                &["SPOP", "one", "5"],
                "*1\r\n$1\r\nx\r\n",
                "~1\r\n$1\r\nx\r\n",
            ),
            (&["EXISTS", "one"], ":0\r\n", ":0\r\n"),
            (&["SADD", "two", "y"], ":1\r\n", ":1\r\n"),
            (&["SPOP", "two"], "$1\r\ny\r\n", "$1\r\ny\r\n"),
            (&["EXISTS", "two"], ":0\r\n", ":0\r\n"),
            (
                &["SSCAN", "s", "0"],
                "*2\r\n$1\r\n0\r\n*2\r\n$1\r\n2\r\n$1\r\n3\r\n",
                "*2\r\n$1\r\n0\r\n*2\r\n$1\r\n2\r\n$1\r\n3\r\n",
            ),
            (
                &["SSCAN", "s", "0", "MATCH", "3"],
                "*2\r\n$1\r\n0\r\n*1\r\n$1\r\n3\r\n",
                "*2\r\n$1\r\n0\r\n*1\r\n$1\r\n3\r\n",
            ),
            (
                &["SSCAN", "s", "0", "NOVALUES"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["SSCAN", "s", "0", "COUNT", "0"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["SSCAN", "nokey", "0"],
                "*2\r\n$1\r\n0\r\n*0\r\n",
                "*2\r\n$1\r\n0\r\n*0\r\n",
            ),
            (&["TYPE", "s"], "+set\r\n", "+set\r\n"),
        ],
    );
}

fn encoding(c: &mut RawConn, key: &str) -> String {
    c.cmd(&["OBJECT", "ENCODING", key])
}

#[test]
fn encodings_convert_at_exact_thresholds() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for i in 0..512 {
        c.cmd(&["SADD", "i", &i.to_string()]);
    }
    assert_eq!(encoding(&mut c, "i"), "$6\r\nintset\r\n");
    c.cmd(&["SADD", "i", "512"]);
    assert_eq!(encoding(&mut c, "i"), "$9\r\nhashtable\r\n");

    for i in 0..128 {
        c.cmd(&["SADD", "l", &format!("m{i}")]);
    }
    assert_eq!(encoding(&mut c, "l"), "$8\r\nlistpack\r\n");
    c.cmd(&["SADD", "l", "m128"]);
    assert_eq!(encoding(&mut c, "l"), "$9\r\nhashtable\r\n");

    c.cmd(&["SADD", "v", &"x".repeat(64)]);
    assert_eq!(encoding(&mut c, "v"), "$8\r\nlistpack\r\n");
    c.cmd(&["SADD", "v", &"x".repeat(65)]);
    assert_eq!(encoding(&mut c, "v"), "$9\r\nhashtable\r\n");

    // intset → listpack on a string member; a big intset goes straight to a table.
    c.cmd(&["SADD", "il", "1", "2"]);
    c.cmd(&["SADD", "il", "a"]);
    assert_eq!(encoding(&mut c, "il"), "$8\r\nlistpack\r\n");
    for i in 0..200 {
        c.cmd(&["SADD", "it", &i.to_string()]);
    }
    c.cmd(&["SADD", "it", "a"]);
    assert_eq!(encoding(&mut c, "it"), "$9\r\nhashtable\r\n");
    // The SADD argument count decides the encoding up front, as in Redis 7.2+.
    let mut args = vec!["SADD", "many"];
    let members: Vec<String> = (0..129).map(|i| format!("m{i}")).collect();
    args.extend(members.iter().map(|m| m.as_str()));
    c.cmd(&args);
    assert_eq!(encoding(&mut c, "many"), "$9\r\nhashtable\r\n");
    // One-way.
    for m in &members[..120] {
        c.cmd(&["SREM", "many", m]);
    }
    assert_eq!(encoding(&mut c, "many"), "$9\r\nhashtable\r\n");

    c.cmd(&["CONFIG", "SET", "set-max-intset-entries", "2"]);
    c.cmd(&["SADD", "small", "1", "2"]);
    assert_eq!(encoding(&mut c, "small"), "$6\r\nintset\r\n");
    c.cmd(&["SADD", "small", "3"]);
    assert_eq!(encoding(&mut c, "small"), "$9\r\nhashtable\r\n");
}

#[test]
fn sscan_returns_every_member_across_a_conversion() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = redis::cmd("SADD")
        .arg("s")
        .arg((0..200).map(|i| format!("m{i}")).collect::<Vec<_>>())
        .query(&mut c)
        .unwrap();
    let mut seen = HashSet::new();
    let mut cursor = 0u64;
    let mut step = 0;
    loop {
        let (next, items): (u64, Vec<String>) = redis::cmd("SSCAN")
            .arg("s")
            .arg(cursor)
            .arg("COUNT")
            .arg(7)
            .query(&mut c)
            .unwrap();
        seen.extend(items);
        step += 1;
        if step == 2 {
            let _: () = redis::cmd("SADD")
                .arg("s")
                .arg((200..3000).map(|i| format!("m{i}")).collect::<Vec<_>>())
                .query(&mut c)
                .unwrap();
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    for i in 0..200 {
        assert!(seen.contains(&format!("m{i}")), "m{i} missed");
    }
}

#[test]
fn random_picks() {
    let s = TestServer::start();
    let mut c = s.client();
    for (key, members) in [
        ("ints", (0..100).map(|i| i.to_string()).collect::<Vec<_>>()),
        ("pack", (0..100).map(|i| format!("m{i}")).collect()),
        ("table", (0..400).map(|i| format!("m{i}")).collect()),
    ] {
        let _: () = redis::cmd("SADD")
            .arg(key)
            .arg(&members)
            .query(&mut c)
            .unwrap();
        let all: HashSet<String> = members.iter().cloned().collect();
        for n in [1usize, 10, 60, 99, 100, 500] {
            let got: Vec<String> = redis::cmd("SRANDMEMBER")
                .arg(key)
                .arg(n)
                .query(&mut c)
                .unwrap();
            let distinct: HashSet<String> = got.iter().cloned().collect();
            assert_eq!(got.len(), n.min(members.len()), "{key} {n}");
            assert_eq!(distinct.len(), got.len(), "{key} {n} distinct");
            assert!(distinct.is_subset(&all));
        }
        let got: Vec<String> = redis::cmd("SRANDMEMBER")
            .arg(key)
            .arg(-700)
            .query(&mut c)
            .unwrap();
        assert_eq!(got.len(), 700);
        // SPOP with a count removes what it returns.
        let popped: Vec<String> = redis::cmd("SPOP").arg(key).arg(30).query(&mut c).unwrap();
        let left: HashSet<String> = redis::cmd("SMEMBERS").arg(key).query(&mut c).unwrap();
        assert_eq!(popped.len(), 30);
        assert_eq!(left.len(), members.len() - 30);
        assert!(popped.iter().all(|p| !left.contains(p) && all.contains(p)));
    }
}

/// Deterministic batches compared with redis-server 7.0. Its sets have no listpack
/// encoding (7.2+), so these batches use integer sets (intset in both) and
/// order-independent replies.
#[test]
fn same_as_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let cmds: Vec<Vec<&str>> = [
        "SADD s 5 3 1 2 -7",
        "SADD s 2 4",
        "OBJECT ENCODING s",
        "SMEMBERS s",
        "SCARD s",
        "SISMEMBER s 1",
        "SISMEMBER s x",
        "SMISMEMBER s 1 9 x",
        "SREM s 1 zz",
        "SMEMBERS s",
        "SREM nokey a",
        "SADD t 2 3 4 10",
        "SINTER s t",
        "SINTER s nokey",
        "SUNION s t",
        "SDIFF s t",
        "SDIFF t s",
        "SINTERSTORE d s t",
        "SMEMBERS d",
        "OBJECT ENCODING d",
        "SUNIONSTORE d s t",
        "SMEMBERS d",
        "SDIFFSTORE d s t",
        "SMEMBERS d",
        "SINTERSTORE d s nokey",
        "EXISTS d",
        "SINTERCARD 2 s t",
        "SINTERCARD 2 s t LIMIT 1",
        "SINTERCARD 0 s",
        "SINTERCARD 3 s t",
        "SINTERCARD 1 s LIMIT -1",
        "SINTERCARD 1 s LIMIT x",
        "SINTERCARD 1 s foo",
        "SINTERCARD x s",
        "SMOVE s t 3",
        "SMOVE s newset 2",
        "SMEMBERS newset",
        "SMOVE s s 5",
        "SMOVE nokey t 1",
        "SET str v",
        "SMOVE s str 5",
        "SMOVE str s 1",
        "SINTER s str",
        "SINTER nokey str",
        "SUNIONSTORE d str",
        "SPOP nokey",
        "SPOP nokey 3",
        "SPOP str",
        "SPOP s -1",
        "SPOP s 0",
        "SRANDMEMBER nokey",
        "SRANDMEMBER nokey 3",
        "SRANDMEMBER s 0",
        "SRANDMEMBER s x",
        "SRANDMEMBER s -9223372036854775808",
        "SRANDMEMBER s 100",
        "SSCAN s 0",
        "SSCAN s 0 MATCH 5*",
        "SSCAN s 0 COUNT 0",
        "SSCAN s 0 NOVALUES",
        "SSCAN nokey 0",
        "SADD one 1",
        "SPOP one",
        "EXISTS one",
        "SADD two 1 2",
        "SPOP two 5",
        "EXISTS two",
        "SADD e",
        "TYPE s",
    ]
    .iter()
    .map(|l| l.split(' ').collect())
    .collect();
    let mut big: Vec<Vec<String>> = Vec::new();
    for i in 508..516 {
        let mut v = vec!["SADD".to_string(), format!("n{i}")];
        v.extend((0..i).map(|x| x.to_string()));
        big.push(v);
        big.push(vec!["OBJECT".into(), "ENCODING".into(), format!("n{i}")]);
        big.push(vec!["SCARD".into(), format!("n{i}")]);
    }
    let mut all = cmds;
    all.extend(big.iter().map(|v| v.iter().map(|s| s.as_str()).collect()));
    let refs: Vec<&[&str]> = all.iter().map(|v| v.as_slice()).collect();
    assert_same_as_redis(&s, &r, &refs);
}

/// SMOVE of a member the destination already has changes only the source: a
/// transaction watching the destination still runs.
#[test]
fn smove_onto_an_existing_member_leaves_the_destination_watch_alone() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let mut other = s.raw(2);
    c.cmd(&["SADD", "src{t}", "a", "b"]);
    c.cmd(&["SADD", "dst{t}", "a"]);
    assert_eq!(c.cmd(&["WATCH", "dst{t}"]), "+OK\r\n");
    c.cmd(&["MULTI"]);
    assert_eq!(c.cmd(&["SADD", "dst{t}", "c"]), "+QUEUED\r\n");
    assert_eq!(other.cmd(&["SMOVE", "src{t}", "dst{t}", "a"]), ":1\r\n");
    assert_eq!(c.cmd(&["EXEC"]), "*1\r\n:1\r\n");
    assert_eq!(c.cmd(&["SCARD", "dst{t}"]), ":2\r\n");
    // A real addition does touch it.
    c.cmd(&["WATCH", "dst{t}"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["SADD", "dst{t}", "d"]);
    assert_eq!(other.cmd(&["SMOVE", "src{t}", "dst{t}", "b"]), ":1\r\n");
    assert_eq!(c.cmd(&["EXEC"]), "*-1\r\n");
}

/// DEBUG HTSTATS / HTSTATS-KEY in Redis's text: empty database, a big set's table,
/// and the error for values without a hash table.
#[test]
fn debug_htstats_reports_tables() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let empty = "[Dictionary HT]\nHash table 0 stats (main hash table):\nNo stats available for empty dictionaries\n[Expires HT]\nHash table 0 stats (main hash table):\nNo stats available for empty dictionaries\n";
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS", "0"]),
        format!("${}\r\n{empty}\r\n", empty.len())
    );
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS", "99"]),
        "-ERR Out of range database\r\n"
    );
    c.cmd(&["SADD", "small", "a"]);
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS-KEY", "small"]),
        "-ERR The value stored at the specified key is not represented using an hash table\r\n"
    );
    assert_eq!(
        c.cmd(&["DEBUG", "HTSTATS-KEY", "nokey"]),
        "-ERR no such key\r\n"
    );
    let members: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "big"];
    sadd.extend(members.iter().map(|m| m.as_str()));
    c.cmd(&sadd);
    let stats = c.cmd(&["DEBUG", "HTSTATS-KEY", "big", "full"]);
    assert!(
        stats.contains("Hash table 0 stats (main hash table):\n table size: "),
        "{stats}"
    );
    assert!(stats.contains(" different slots: "), "{stats}");
    // Elements over both arrays while resizing, else all in the main one.
    let counted: usize = stats
        .lines()
        .filter_map(|l| l.strip_prefix(" number of elements: "))
        .map(|n| n.parse::<usize>().unwrap())
        .sum();
    assert_eq!(counted, 1000, "{stats}");
}
