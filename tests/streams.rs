//! Streams end to end: XADD/XLEN/XRANGE/XREVRANGE/XDEL/XTRIM/XREAD/XSETID in RESP2
//! and RESP3, blocking XREAD with several clients, keyspace integration (TYPE, OBJECT
//! ENCODING, COPY, MEMORY USAGE), notifications, and a differential batch against
//! redis-server.

mod common;

use common::*;

fn split(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

/// Runs a batch file of commands against Cinnabar and redis-server, both protocols.
pub fn same_as_redis_batch(text: &str) {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let cmds: Vec<Vec<String>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(split)
        .collect();
    let refs: Vec<Vec<&str>> = cmds
        .iter()
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    let slices: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
    assert_same_as_redis(&s, &r, &slices);
}

#[test]
fn streams_batch_same_as_redis() {
    same_as_redis_batch(include_str!("data/streams_batch.txt"));
}

#[test]
fn xadd_xrange_replies() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["XADD", "s", "1-1", "a", "1"], "$3\r\n1-1\r\n", "$3\r\n1-1\r\n"),
            (&["XADD", "s", "1-*", "b", "2"], "$3\r\n1-2\r\n", "$3\r\n1-2\r\n"),
            (
                &["XADD", "s", "1-2", "b", "2"],
                "-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n",
                "-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n",
            ),
            (
                &["XADD", "s", "0-0", "b", "2"],
                "-ERR The ID specified in XADD must be greater than 0-0\r\n",
                "-ERR The ID specified in XADD must be greater than 0-0\r\n",
            ),
            (
                &["XADD", "s", "1-1", "b"],
                "-ERR wrong number of arguments for 'xadd' command\r\n",
                "-ERR wrong number of arguments for 'xadd' command\r\n",
            ),
            (&["XADD", "n", "NOMKSTREAM", "*", "a", "1"], "$-1\r\n", "_\r\n"),
            (&["XLEN", "s"], ":2\r\n", ":2\r\n"),
            (
                &["XRANGE", "s", "-", "+", "COUNT", "1"],
                "*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
                "*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
            ),
            (
                &["XREVRANGE", "s", "+", "(1-1"],
                "*1\r\n*2\r\n$3\r\n1-2\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
                "*1\r\n*2\r\n$3\r\n1-2\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
            ),
            (&["XRANGE", "nokey", "-", "+"], "*0\r\n", "*0\r\n"),
            (
                &["XREAD", "STREAMS", "s", "1-1"],
                "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-2\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
                "%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-2\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
            ),
            (
                &["XREAD", "STREAMS", "s", "+"],
                "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-2\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
                "%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-2\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
            ),
            (&["XREAD", "STREAMS", "s", "$"], "*-1\r\n", "_\r\n"),
            (&["XREAD", "BLOCK", "-1", "STREAMS", "s", "$"], "-ERR timeout is negative\r\n", "-ERR timeout is negative\r\n"),
            (&["XDEL", "s", "1-1"], ":1\r\n", ":1\r\n"),
            (&["XTRIM", "s", "MAXLEN", "0"], ":1\r\n", ":1\r\n"),
            (&["EXISTS", "s"], ":1\r\n", ":1\r\n"),
            (&["TYPE", "s"], "+stream\r\n", "+stream\r\n"),
            // Redis 7.2+: the last ID may not go below the largest deleted ID.
            (
                &["XSETID", "s", "1-0"],
                "-ERR The ID specified in XSETID is smaller than current max_deleted_entry_id\r\n",
                "-ERR The ID specified in XSETID is smaller than current max_deleted_entry_id\r\n",
            ),
            (&["OBJECT", "ENCODING", "s"], "$6\r\nstream\r\n", "$6\r\nstream\r\n"),
            (&["COPY", "s", "s2"], ":1\r\n", ":1\r\n"),
            (
                &["XINFO", "STREAM", "s2"],
                "*20\r\n$6\r\nlength\r\n:0\r\n$15\r\nradix-tree-keys\r\n:0\r\n$16\r\nradix-tree-nodes\r\n:1\r\n$17\r\nlast-generated-id\r\n$3\r\n1-2\r\n$20\r\nmax-deleted-entry-id\r\n$3\r\n1-1\r\n$13\r\nentries-added\r\n:2\r\n$23\r\nrecorded-first-entry-id\r\n$3\r\n0-0\r\n$6\r\ngroups\r\n:0\r\n$11\r\nfirst-entry\r\n$-1\r\n$10\r\nlast-entry\r\n$-1\r\n",
                "%10\r\n$6\r\nlength\r\n:0\r\n$15\r\nradix-tree-keys\r\n:0\r\n$16\r\nradix-tree-nodes\r\n:1\r\n$17\r\nlast-generated-id\r\n$3\r\n1-2\r\n$20\r\nmax-deleted-entry-id\r\n$3\r\n1-1\r\n$13\r\nentries-added\r\n:2\r\n$23\r\nrecorded-first-entry-id\r\n$3\r\n0-0\r\n$6\r\ngroups\r\n:0\r\n$11\r\nfirst-entry\r\n_\r\n$10\r\nlast-entry\r\n_\r\n",
            ),
        ],
    );
}

#[test]
fn memory_usage_and_copy_are_independent() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for i in 1..=500 {
        c.cmd(&["XADD", "s", &format!("{i}-0"), "field", "value"]);
    }
    let mem = c.cmd(&["MEMORY", "USAGE", "s"]);
    let n: i64 = mem.trim_start_matches(':').trim().parse().unwrap();
    // Compact blocks: a few bytes per entry, not a heap node per entry.
    assert!(n > 1000 && n < 500 * 40, "memory usage {n}");
    assert_eq!(c.cmd(&["COPY", "s", "t"]), ":1\r\n");
    assert_eq!(c.cmd(&["XDEL", "t", "1-0"]), ":1\r\n");
    assert_eq!(c.cmd(&["XLEN", "s"]), ":500\r\n");
    assert_eq!(c.cmd(&["XLEN", "t"]), ":499\r\n");
}

#[test]
fn node_limits_are_config_directives() {
    let s = TestServer::start_with(&["--stream-node-max-entries", "10"]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "stream-node-max-entries"]),
        "*2\r\n$23\r\nstream-node-max-entries\r\n$2\r\n10\r\n"
    );
    for i in 1..=25 {
        c.cmd(&["XADD", "s", &format!("{i}"), "f", "v"]);
    }
    // Approximate trims only drop whole nodes of 10 entries.
    assert_eq!(c.cmd(&["XTRIM", "s", "MAXLEN", "~", "12"]), ":10\r\n");
    assert_eq!(c.cmd(&["XLEN", "s"]), ":15\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "stream-node-max-bytes", "100"]),
        "+OK\r\n"
    );
}

#[test]
fn xread_block_woken_by_xadd_with_dollar_resolved_at_block_time() {
    let s = TestServer::start();
    let mut a = s.raw(2);
    let mut b = s.raw(3);
    let mut w = s.raw(2);
    w.cmd(&["XADD", "s", "1", "old", "1"]);
    a.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    b.send(&[
        "XREAD", "COUNT", "5", "BLOCK", "0", "STREAMS", "other", "s", "0", "$",
    ]);
    // Wait until both are blocked.
    for _ in 0..200 {
        let info = w.cmd(&["INFO", "clients"]);
        if info.contains("blocked_clients:2") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(w.cmd(&["XADD", "s", "2", "new", "2"]), "$3\r\n2-0\r\n");
    let want = "*2\r\n$3\r\n2-0\r\n*2\r\n$3\r\nnew\r\n$1\r\n2\r\n";
    assert_eq!(
        a.read_reply(),
        format!("*1\r\n*2\r\n$1\r\ns\r\n*1\r\n{want}")
    );
    assert_eq!(b.read_reply(), format!("%1\r\n$1\r\ns\r\n*1\r\n{want}"));
}

#[test]
fn xread_block_timeout_unblock_and_multi() {
    let s = TestServer::start();
    let mut a = s.raw(2);
    let mut w = s.raw(2);
    assert_eq!(
        a.cmd(&["XREAD", "BLOCK", "20", "STREAMS", "s", "$"]),
        "*-1\r\n"
    );
    let id = a.cmd(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim().to_string();
    a.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    let mut unblocked = false;
    for _ in 0..200 {
        if w.cmd(&["CLIENT", "UNBLOCK", &id]) == ":1\r\n" {
            unblocked = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(unblocked);
    assert_eq!(a.read_reply(), "*-1\r\n");
    // Inside MULTI, XREAD BLOCK answers at once.
    a.cmd(&["MULTI"]);
    a.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    assert_eq!(a.cmd(&["EXEC"]), "*1\r\n*-1\r\n");
    // A DEL + XADD of another type does not wake XREAD; a later XADD does.
    a.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "0"]);
    for _ in 0..200 {
        if w.cmd(&["INFO", "clients"]).contains("blocked_clients:1") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    w.cmd(&["LPUSH", "s", "x"]);
    w.cmd(&["DEL", "s"]);
    w.cmd(&["XADD", "s", "5", "f", "v"]);
    assert_eq!(
        a.read_reply(),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n5-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
}

#[test]
fn keyspace_notifications() {
    let s = TestServer::start();
    let mut sub = s.raw(2);
    let mut c = s.raw(2);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Et"]);
    sub.cmd(&[
        "SUBSCRIBE",
        "__keyevent@0__:xadd",
        "__keyevent@0__:xtrim",
        "__keyevent@0__:xdel",
        "__keyevent@0__:xgroup-create",
        "__keyevent@0__:xsetid",
        "__keyevent@0__:xgroup-createconsumer",
        "__keyevent@0__:xgroup-delconsumer",
        "__keyevent@0__:xgroup-destroy",
        "__keyevent@0__:xgroup-setid",
    ]);
    for _ in 0..8 {
        sub.read_reply();
    }
    c.cmd(&["XADD", "s", "MAXLEN", "1", "1", "a", "1"]);
    c.cmd(&["XADD", "s", "MAXLEN", "1", "2", "a", "1"]);
    c.cmd(&["XDEL", "s", "2"]);
    c.cmd(&["XSETID", "s", "5"]);
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
    c.cmd(&["XGROUP", "CREATECONSUMER", "s", "g", "c"]);
    c.cmd(&["XGROUP", "SETID", "s", "g", "0"]);
    c.cmd(&["XGROUP", "DELCONSUMER", "s", "g", "c"]);
    c.cmd(&["XGROUP", "DESTROY", "s", "g"]);
    let mut events = Vec::new();
    for _ in 0..10 {
        let r = sub.read_reply();
        let ev = r.split("\r\n").nth(4).unwrap().to_string();
        events.push(ev.trim_start_matches("__keyevent@0__:").to_string());
    }
    assert_eq!(
        events,
        [
            "xadd",
            "xadd",
            "xtrim",
            "xdel",
            "xsetid",
            "xgroup-create",
            "xgroup-createconsumer",
            "xgroup-setid",
            "xgroup-delconsumer",
            "xgroup-destroy"
        ]
    );
}

/// XRANGE/XREVRANGE/XREAD replies are encoded straight from the blocks: the same
/// bytes as Redis across block boundaries, deleted entries, entries whose fields
/// differ from their block's master, COUNT, exclusive bounds, and through a script
/// (which decodes the encoded reply back into Lua tables).
#[test]
fn encoded_range_replies_same_as_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let mut cmds: Vec<Vec<String>> = vec![vec![
        "CONFIG".into(),
        "SET".into(),
        "stream-node-max-entries".into(),
        "7".into(),
    ]];
    for i in 1..=60u32 {
        let mut c: Vec<String> = vec!["XADD".into(), "s".into(), format!("{}-{}", i / 3, i % 3)];
        match i % 5 {
            0 => c.extend(["a", "x", "b", "y"].map(String::from)),
            1 => c.extend(["other".to_string(), format!("v{i}")]),
            _ => c.extend(["field".to_string(), format!("{i}")]),
        }
        cmds.push(c);
    }
    for id in ["2-1", "3-0", "3-1", "3-2", "4-0", "10-2", "19-0"] {
        cmds.push(vec!["XDEL".into(), "s".into(), id.into()]);
    }
    let q = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for c in [
        q(&["XRANGE", "s", "-", "+"]),
        q(&["XREVRANGE", "s", "+", "-"]),
        q(&["XRANGE", "s", "3", "9", "COUNT", "5"]),
        q(&["XRANGE", "s", "(2-2", "(11-0"]),
        q(&["XREVRANGE", "s", "(15", "2-1", "COUNT", "11"]),
        q(&["XREVRANGE", "s", "3-2", "3-0"]),
        q(&["XRANGE", "s", "3-0", "3-2"]),
        q(&["XRANGE", "s", "100", "+"]),
        q(&["XRANGE", "s", "-", "+", "COUNT", "0"]),
        q(&["XRANGE", "missing", "-", "+"]),
        q(&["XREAD", "COUNT", "4", "STREAMS", "s", "missing", "5-1", "0"]),
        q(&["XREAD", "STREAMS", "s", "18-0"]),
        q(&[
            "EVAL",
            "return redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 6)",
            "1",
            "s",
        ]),
        q(&[
            "EVAL",
            "return redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 3)",
            "1",
            "s",
        ]),
        q(&[
            "EVAL",
            "return #redis.call('XRANGE', KEYS[1], '-', '+')",
            "1",
            "s",
        ]),
        q(&["XGROUP", "CREATE", "s", "g", "0"]),
        q(&["XREADGROUP", "GROUP", "g", "c1", "COUNT", "3", "STREAMS", "s", ">"]),
        q(&[
            "EVAL",
            "return redis.call('XREADGROUP', 'GROUP', 'g', 'c2', 'COUNT', 4, 'STREAMS', KEYS[1], '>')",
            "1",
            "s",
        ]),
        q(&["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"]),
        q(&["XACK", "s", "g", "0-1", "0-2", "1-0", "9-9", "1-1"]),
        q(&["XACK", "s", "g", "0-1", "bad"]),
        q(&["XPENDING", "s", "g"]),
        q(&["XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "s", "0"]),
    ] {
        cmds.push(c);
    }
    let refs: Vec<Vec<&str>> = cmds
        .iter()
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    let slices: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
    assert_same_as_redis(&s, &r, &slices);
}
