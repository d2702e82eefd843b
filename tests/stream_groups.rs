//! Consumer groups end to end: XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM,
//! XINFO GROUPS/CONSUMERS/STREAM FULL, blocking XREADGROUP, and a differential batch
//! against redis-server. Idle times are set with XCLAIM IDLE/TIME instead of sleeping.

mod common;

use common::*;

fn split(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn groups_batch_same_as_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let cmds: Vec<Vec<String>> = include_str!("data/stream_groups_batch.txt")
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
fn life_cycle_with_several_consumers() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for i in 1..=6 {
        c.cmd(&["XADD", "s", &format!("{i}-0"), "n", &i.to_string()]);
    }
    assert_eq!(c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]), "+OK\r\n");
    // Alice gets 1..2, Bob 3..5, Carol reads with NOACK (6 is not pending).
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "bob",
        "COUNT",
        "3",
        "STREAMS",
        "s",
        ">",
    ]);
    assert_eq!(
        c.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "carol",
            "NOACK",
            "STREAMS",
            "s",
            ">"
        ]),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n6-0\r\n*2\r\n$1\r\nn\r\n$1\r\n6\r\n"
    );
    assert_eq!(
        c.cmd(&["XPENDING", "s", "g"]),
        "*4\r\n:5\r\n$3\r\n1-0\r\n$3\r\n5-0\r\n*2\r\n*2\r\n$5\r\nalice\r\n$1\r\n2\r\n*2\r\n$3\r\nbob\r\n$1\r\n3\r\n"
    );
    // Nothing new for anyone: the null array reply.
    assert_eq!(
        c.cmd(&["XREADGROUP", "GROUP", "g", "dave", "STREAMS", "s", ">"]),
        "*-1\r\n"
    );
    // Alice's history re-delivers and counts deliveries.
    c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"]);
    let p = c.cmd(&["XPENDING", "s", "g", "-", "+", "10", "alice"]);
    assert!(
        p.starts_with("*2\r\n*4\r\n$3\r\n1-0\r\n$5\r\nalice\r\n:"),
        "{p}"
    );
    assert!(p.ends_with(":2\r\n"), "{p}");
    // Make Bob's 3-0 and 4-0 look idle for a minute, without sleeping.
    assert_eq!(
        c.cmd(&["XCLAIM", "s", "g", "bob", "0", "3-0", "4-0", "IDLE", "60000", "JUSTID"]),
        "*2\r\n$3\r\n3-0\r\n$3\r\n4-0\r\n"
    );
    // Only those are idle for at least 30 s.
    let p = c.cmd(&["XPENDING", "s", "g", "IDLE", "30000", "-", "+", "10"]);
    assert!(
        p.starts_with("*2\r\n*4\r\n$3\r\n3-0\r\n$3\r\nbob\r\n:"),
        "{p}"
    );
    // XCLAIM with a min-idle: 5-0 is fresh and is not claimed; 3-0 is.
    assert_eq!(
        c.cmd(&["XCLAIM", "s", "g", "erin", "30000", "3-0", "5-0"]),
        "*1\r\n*2\r\n$3\r\n3-0\r\n*2\r\n$1\r\nn\r\n$1\r\n3\r\n"
    );
    // XAUTOCLAIM picks the remaining idle one (4-0) and reports a deleted entry.
    c.cmd(&[
        "XCLAIM",
        "s",
        "g",
        "bob",
        "0",
        "5-0",
        "TIME",
        "1000",
        "RETRYCOUNT",
        "9",
        "JUSTID",
    ]);
    assert_eq!(c.cmd(&["XDEL", "s", "1-0"]), ":1\r\n");
    c.cmd(&[
        "XCLAIM", "s", "g", "alice", "0", "1-0", "IDLE", "60000", "JUSTID",
    ]);
    assert_eq!(
        c.cmd(&[
            "XAUTOCLAIM",
            "s",
            "g",
            "frank",
            "30000",
            "0",
            "COUNT",
            "10",
            "JUSTID"
        ]),
        "*3\r\n$3\r\n0-0\r\n*2\r\n$3\r\n4-0\r\n$3\r\n5-0\r\n*0\r\n"
    );
    let p = c.cmd(&["XPENDING", "s", "g", "5-0", "5-0", "1"]);
    assert!(
        p.ends_with(":9\r\n"),
        "JUSTID keeps the delivery count: {p}"
    );
    // XCLAIM of the deleted 1-0 removed it from the PEL instead of claiming it.
    assert_eq!(c.cmd(&["XPENDING", "s", "g", "1-0", "1-0", "1"]), "*0\r\n");
    assert_eq!(
        c.cmd(&["XACK", "s", "g", "2-0", "3-0", "4-0", "5-0", "9-0"]),
        ":4\r\n"
    );
    assert_eq!(
        c.cmd(&["XPENDING", "s", "g"]),
        "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n"
    );
    let consumers = c.cmd(&["XINFO", "CONSUMERS", "s", "g"]);
    for name in ["alice", "bob", "carol", "dave", "erin", "frank"] {
        assert!(consumers.contains(name), "{consumers}");
    }
    assert_eq!(
        c.cmd(&["XGROUP", "DELCONSUMER", "s", "g", "dave"]),
        ":0\r\n"
    );
    let groups = c.cmd(&["XINFO", "GROUPS", "s"]);
    assert_eq!(
        groups,
        "*1\r\n*12\r\n$4\r\nname\r\n$1\r\ng\r\n$9\r\nconsumers\r\n:5\r\n$7\r\npending\r\n:0\r\n$17\r\nlast-delivered-id\r\n$3\r\n6-0\r\n$12\r\nentries-read\r\n:6\r\n$3\r\nlag\r\n:0\r\n"
    );
}

#[test]
fn xautoclaim_deleted_entries_and_cursor() {
    let s = TestServer::start();
    let mut c = s.raw(3);
    for i in 1..=5 {
        c.cmd(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
    c.cmd(&["XDEL", "s", "2-0", "3-0"]);
    assert_eq!(
        c.cmd(&[
            "XAUTOCLAIM",
            "s",
            "g",
            "b",
            "0",
            "0",
            "COUNT",
            "3",
            "JUSTID"
        ]),
        "*3\r\n$3\r\n4-0\r\n*1\r\n$3\r\n1-0\r\n*2\r\n$3\r\n2-0\r\n$3\r\n3-0\r\n"
    );
    assert_eq!(
        c.cmd(&["XAUTOCLAIM", "s", "g", "b", "0", "4-0"]),
        "*3\r\n$3\r\n0-0\r\n*2\r\n*2\r\n$3\r\n4-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$3\r\n5-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*0\r\n"
    );
    // History of a consumer whose entry was deleted: the ID with a null entry.
    c.cmd(&["XDEL", "s", "4-0"]);
    assert_eq!(
        c.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "b",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            "0"
        ]),
        "%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "b",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            "1-0"
        ]),
        "%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n4-0\r\n_\r\n"
    );
}

#[test]
fn xinfo_stream_full_and_lag() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for i in 1..=3 {
        c.cmd(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "a",
        "COUNT",
        "1",
        "STREAMS",
        "s",
        ">",
    ]);
    let full = c.cmd(&["XINFO", "STREAM", "s", "FULL", "COUNT", "1"]);
    assert!(
        full.contains("$7\r\nentries\r\n*1\r\n*2\r\n$3\r\n1-0\r\n"),
        "{full}"
    );
    assert!(
        full.contains("$12\r\nentries-read\r\n:1\r\n$3\r\nlag\r\n:2\r\n$9\r\npel-count\r\n:1\r\n"),
        "{full}"
    );
    assert!(full.contains("$9\r\nseen-time\r\n:"), "{full}");
    // A tombstone after the group's position makes the lag unknown.
    c.cmd(&["XDEL", "s", "2-0"]);
    let groups = c.cmd(&["XINFO", "GROUPS", "s"]);
    assert!(groups.ends_with("$3\r\nlag\r\n$-1\r\n"), "{groups}");
    let mut c3 = s.raw(3);
    let groups = c3.cmd(&["XINFO", "GROUPS", "s"]);
    assert!(groups.starts_with("*1\r\n%6\r\n"), "{groups}");
    assert!(groups.ends_with("$3\r\nlag\r\n_\r\n"), "{groups}");
}

fn wait_blocked(c: &mut RawConn, n: usize) {
    for _ in 0..400 {
        if c.cmd(&["INFO", "clients"])
            .contains(&format!("blocked_clients:{n}\r\n"))
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("clients did not block");
}

#[test]
fn blocking_xreadgroup_served_in_order_and_errors_on_deletion() {
    let s = TestServer::start();
    let mut w = s.raw(2);
    w.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let mut a = s.raw(2);
    let mut b = s.raw(2);
    a.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "a",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    wait_blocked(&mut w, 1);
    b.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "b",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    wait_blocked(&mut w, 2);
    // One entry: the first blocked consumer gets it, the second keeps waiting.
    w.cmd(&["XADD", "s", "1", "f", "v"]);
    assert_eq!(
        a.read_reply(),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    wait_blocked(&mut w, 1);
    // Deleting the key wakes the group reader with NOGROUP.
    w.cmd(&["DEL", "s"]);
    assert_eq!(
        b.read_reply(),
        "-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n"
    );
    // Destroying the group does too; changing the type gives WRONGTYPE.
    w.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    a.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "a",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    wait_blocked(&mut w, 1);
    w.cmd(&["XGROUP", "DESTROY", "s", "g"]);
    assert!(a.read_reply().starts_with("-NOGROUP"));
    w.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
    a.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "a",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    wait_blocked(&mut w, 1);
    w.cmd(&["SET", "s", "x"]);
    assert!(a.read_reply().starts_with("-WRONGTYPE"));
    // Timeout.
    w.cmd(&["DEL", "s"]);
    w.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    assert_eq!(
        a.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "a",
            "BLOCK",
            "10",
            "STREAMS",
            "s",
            ">"
        ]),
        "*-1\r\n"
    );
}

#[test]
fn group_errors_resp3() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (
                &["XADD", "s", "1", "f", "v"],
                "$3\r\n1-0\r\n",
                "$3\r\n1-0\r\n",
            ),
            (&["XGROUP", "CREATE", "s", "g", "0"], "+OK\r\n", "+OK\r\n"),
            (
                &["XGROUP", "CREATE", "s", "g", "0"],
                "-BUSYGROUP Consumer Group name already exists\r\n",
                "-BUSYGROUP Consumer Group name already exists\r\n",
            ),
            (
                &["XGROUP", "SETID", "s", "x", "0"],
                "-NOGROUP No such consumer group 'x' for key name 's'\r\n",
                "-NOGROUP No such consumer group 'x' for key name 's'\r\n",
            ),
            (
                &["XPENDING", "s", "x"],
                "-NOGROUP No such key 's' or consumer group 'x'\r\n",
                "-NOGROUP No such key 's' or consumer group 'x'\r\n",
            ),
            (
                &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"],
                "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
                "%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
            ),
            (
                &["XPENDING", "s", "g"],
                "*4\r\n:1\r\n$3\r\n1-0\r\n$3\r\n1-0\r\n*1\r\n*2\r\n$1\r\nc\r\n$1\r\n1\r\n",
                "*4\r\n:1\r\n$3\r\n1-0\r\n$3\r\n1-0\r\n*1\r\n*2\r\n$1\r\nc\r\n$1\r\n1\r\n",
            ),
            (
                &["XCLAIM", "s", "g", "d", "0", "1-0", "FOO"],
                "-ERR Unrecognized XCLAIM option 'FOO'\r\n",
                "-ERR Unrecognized XCLAIM option 'FOO'\r\n",
            ),
            (
                &["XAUTOCLAIM", "s", "g", "d", "0", "0", "COUNT", "0"],
                "-ERR COUNT must be > 0\r\n",
                "-ERR COUNT must be > 0\r\n",
            ),
            (&["XACK", "s", "g", "1-0"], ":1\r\n", ":1\r\n"),
            (&["XGROUP", "DESTROY", "s", "g"], ":1\r\n", ":1\r\n"),
        ],
    );
}

/// XGROUP SETID answers NOGROUP for a missing group before it judges the ID, and
/// XTRIM judges its arguments before the key's type, as Redis does (both found by a
/// differential run against redis-server).
#[test]
fn errors_come_in_redis_order() {
    let s = TestServer::start();
    let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    check_both(
        &s,
        &[
            (
                &["XADD", "st", "1-1", "f", "v"],
                "$3\r\n1-1\r\n",
                "$3\r\n1-1\r\n",
            ),
            (
                &["XGROUP", "SETID", "st", "g1", "abc"],
                "-NOGROUP No such consumer group 'g1' for key name 'st'\r\n",
                "-NOGROUP No such consumer group 'g1' for key name 'st'\r\n",
            ),
            (&["XGROUP", "CREATE", "st", "g1", "0"], "+OK\r\n", "+OK\r\n"),
            (
                &["XGROUP", "SETID", "st", "g1", "abc"],
                "-ERR Invalid stream ID specified as stream command argument\r\n",
                "-ERR Invalid stream ID specified as stream command argument\r\n",
            ),
            (&["XGROUP", "SETID", "st", "g1", "$"], "+OK\r\n", "+OK\r\n"),
            (&["SET", "str", "x"], "+OK\r\n", "+OK\r\n"),
            (
                &["XTRIM", "str", "X", "~", "-5"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (&["XTRIM", "str", "MAXLEN", "1"], wrongtype, wrongtype),
            (
                &["XTRIM", "nope", "MAXLEN", "abc"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["XTRIM", "st", "MAXLEN", "0"], ":1\r\n", ":1\r\n"),
        ],
    );
}

/// XACK answers 0 for a missing key or group before it judges the IDs; XDEL looks
/// the key up (0, WRONGTYPE) before it judges its IDs (Redis's order).
#[test]
fn xack_and_xdel_look_at_the_key_first() {
    let s = TestServer::start();
    let bad_id = "-ERR Invalid stream ID specified as stream command argument\r\n";
    check_both(
        &s,
        &[
            (&["XACK", "nope", "g1", "1", "+"], ":0\r\n", ":0\r\n"),
            (
                &["XADD", "st", "1-1", "f", "v"],
                "$3\r\n1-1\r\n",
                "$3\r\n1-1\r\n",
            ),
            (&["XACK", "st", "g1", "abc"], ":0\r\n", ":0\r\n"),
            (&["XGROUP", "CREATE", "st", "g1", "0"], "+OK\r\n", "+OK\r\n"),
            (&["XACK", "st", "g1", "1-1", "abc"], bad_id, bad_id),
            (&["XDEL", "nope", "-", "abc"], ":0\r\n", ":0\r\n"),
            (&["SET", "str", "x"], "+OK\r\n", "+OK\r\n"),
            (
                &["XDEL", "str", "+"],
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
                "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            ),
            (&["XDEL", "st", "1-1", "abc"], bad_id, bad_id),
            (&["XLEN", "st"], ":1\r\n", ":1\r\n"),
            (&["XDEL", "st", "1-1", "5"], ":1\r\n", ":1\r\n"),
        ],
    );
}
