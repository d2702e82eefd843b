//! Keyspace notifications end to end: the notify-keyspace-events directive (parsing,
//! CONFIG GET formatting, errors), `__keyspace@N__:key` / `__keyevent@N__:event`
//! messages for each class, and `expired` events from lazy and active expiry.

mod common;
use common::*;

fn pmsg(channel: &str, msg: &str) -> String {
    format!(
        "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n${}\r\n{channel}\r\n${}\r\n{msg}\r\n",
        channel.len(),
        msg.len()
    )
}

fn setup(events: &str) -> (TestServer, RawConn, RawConn) {
    let s = TestServer::start_with(&["--notify-keyspace-events", events]);
    let mut sub = s.raw(2);
    sub.cmd(&["PSUBSCRIBE", "*"]);
    let w = s.raw(2);
    (s, sub, w)
}

#[test]
fn config_parsing_and_formatting() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let get = |c: &mut RawConn| c.cmd(&["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(
        get(&mut c),
        "*2\r\n$22\r\nnotify-keyspace-events\r\n$0\r\n\r\n"
    );
    for (set, shown) in [
        ("KEA", "AKE"),
        ("Kgx$lshzetdmn", "AKm"),
        ("Em", "Em"),
        ("AKEnm", "AKEm"),
        ("g$K", "g$K"),
        ("", ""),
    ] {
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "notify-keyspace-events", set]),
            "+OK\r\n"
        );
        assert_eq!(
            get(&mut c),
            format!(
                "*2\r\n$22\r\nnotify-keyspace-events\r\n${}\r\n{shown}\r\n",
                shown.len()
            )
        );
    }
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KQ"]),
        "-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n"
    );
}

#[test]
fn keyspace_and_keyevent_channels() {
    let (_s, mut sub, mut w) = setup("KEA");
    w.cmd(&["SET", "k", "v"]);
    assert_eq!(sub.read_reply(), pmsg("__keyspace@0__:k", "set"));
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:set", "k"));
    w.cmd(&["SELECT", "3"]);
    w.cmd(&["DEL", "k", "nothing"]);
    w.cmd(&["SET", "k", "v"]);
    assert_eq!(sub.read_reply(), pmsg("__keyspace@3__:k", "set"));
    assert_eq!(sub.read_reply(), pmsg("__keyevent@3__:set", "k"));
}

#[test]
fn each_class_filters_its_events() {
    // (enabled classes, commands, expected keyevent messages as (event, key))
    // (notify-keyspace-events flags, commands to run, expected (channel, message) pairs)
    type Case<'a> = (&'a str, Vec<Vec<&'a str>>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (
            "Eg",
            vec![
                vec!["SET", "a", "1"],
                vec!["EXPIRE", "a", "100"],
                vec!["PERSIST", "a"],
                vec!["RENAME", "a", "b"],
                vec!["DEL", "b"],
            ],
            vec![
                ("expire", "a"),
                ("persist", "a"),
                ("rename_from", "a"),
                ("rename_to", "b"),
                ("del", "b"),
            ],
        ),
        (
            "E$",
            vec![
                vec!["SET", "a", "1"],
                vec!["INCR", "a"],
                vec!["APPEND", "a", "x"],
                vec!["DEL", "a"],
                vec!["SETRANGE", "s", "0", "x"],
            ],
            vec![
                ("set", "a"),
                ("incrby", "a"),
                ("append", "a"),
                ("setrange", "s"),
            ],
        ),
        (
            "Em",
            vec![
                vec!["GET", "miss"],
                vec!["SET", "a", "1"],
                vec!["GET", "a"],
                vec!["EXISTS", "gone"],
            ],
            vec![("keymiss", "miss"), ("keymiss", "gone")],
        ),
        (
            "En$",
            vec![
                vec!["SET", "a", "1"],
                vec!["SET", "a", "2"],
                vec!["INCR", "c"],
            ],
            vec![
                ("new", "a"),
                ("set", "a"),
                ("set", "a"),
                ("new", "c"),
                ("incrby", "c"),
            ],
        ),
        (
            "Elshzt",
            vec![vec!["SET", "a", "1"], vec!["DEL", "a"]],
            vec![],
        ),
    ];
    for (classes, cmds, want) in cases {
        let (_s, mut sub, mut w) = setup(classes);
        for c in &cmds {
            w.cmd(c);
        }
        // A marker published last proves nothing else was delivered before it.
        w.cmd(&["PUBLISH", "marker", "end"]);
        for (event, key) in &want {
            assert_eq!(
                sub.read_reply(),
                pmsg(&format!("__keyevent@0__:{event}"), key),
                "classes {classes}"
            );
        }
        assert_eq!(sub.read_reply(), pmsg("marker", "end"), "classes {classes}");
    }
}

#[test]
fn keyspace_only_and_keyevent_only() {
    let (_s, mut sub, mut w) = setup("K$");
    w.cmd(&["SET", "k", "v"]);
    w.cmd(&["PUBLISH", "marker", "end"]);
    assert_eq!(sub.read_reply(), pmsg("__keyspace@0__:k", "set"));
    assert_eq!(sub.read_reply(), pmsg("marker", "end"));
    // Neither K nor E: nothing at all.
    w.cmd(&["CONFIG", "SET", "notify-keyspace-events", "$"]);
    w.cmd(&["SET", "k", "v"]);
    w.cmd(&["PUBLISH", "marker", "end"]);
    assert_eq!(sub.read_reply(), pmsg("marker", "end"));
}

#[test]
fn expired_events_lazy_and_active() {
    let (_s, mut sub, mut w) = setup("Ex");
    // Active expiry: nobody touches the key.
    w.cmd(&["SET", "a", "1", "PX", "50"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:expired", "a"));
    // Lazy expiry on access, raised before the command's own events.
    w.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    w.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ex$"]);
    w.cmd(&["SET", "b", "1", "PX", "20"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:set", "b"));
    std::thread::sleep(std::time::Duration::from_millis(60));
    w.cmd(&["SET", "b", "2", "NX"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:expired", "b"));
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:set", "b"));
}

#[test]
fn resp3_subscriber_gets_push_frames() {
    let s = TestServer::start_with(&["--notify-keyspace-events", "E$"]);
    let mut sub = s.raw(3);
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:set"]);
    // Its own write: the reply comes first, then the push.
    assert_eq!(sub.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(
        sub.read_reply(),
        ">3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:set\r\n$1\r\nk\r\n"
    );
}

#[test]
fn field_ttl_in_the_past_notifies_hdel_once() {
    let (_s, mut sub, mut w) = setup("Khg");
    w.cmd(&["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(sub.read_reply(), pmsg("__keyspace@0__:h", "hset"));
    w.cmd(&["HPEXPIRE", "h", "0", "FIELDS", "1", "a"]);
    assert_eq!(sub.read_reply(), pmsg("__keyspace@0__:h", "hdel"));
    w.cmd(&["HPEXPIRE", "h", "999999", "FIELDS", "1", "b"]);
    assert_eq!(sub.read_reply(), pmsg("__keyspace@0__:h", "hexpire"));
    // The last field going deletes the key: hdel, then del.
    w.cmd(&["HPEXPIRE", "h", "0", "FIELDS", "1", "b"]);
    assert_eq!(sub.read_reply(), pmsg("__keyspace@0__:h", "hdel"));
    assert_eq!(sub.read_reply(), pmsg("__keyspace@0__:h", "del"));
}

#[test]
fn lowering_maxmemory_evicts_without_waiting_for_a_command() {
    let (_s, mut sub, mut w) = setup("Ee");
    w.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    w.cmd(&["SET", "foo", "bar"]);
    w.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:evicted", "foo"));
    w.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
}

/// Every command that creates a key raises `new` (class n) first, as Redis's dbAdd:
/// HSET and its family, SADD and SMOVE, SETBIT, PFADD and PFMERGE, COPY and MOVE
/// (in the destination database) among them; a write to an existing key does not.
#[test]
fn every_key_creation_raises_new_before_its_own_event() {
    let (_s, mut sub, mut w) = setup("En");
    w.cmd(&["SET", "src", "v"]);
    w.cmd(&["SADD", "set", "a"]);
    w.cmd(&["PFADD", "hll", "a"]);
    // Their own `new` events, before the cases below.
    for key in ["src", "set", "hll"] {
        assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:new", key));
    }
    let creating: &[(&[&str], &str, &str)] = &[
        (&["HSET", "h1", "f", "v"], "h1", "0"),
        (&["HMSET", "h2", "f", "v"], "h2", "0"),
        (&["HSETNX", "h3", "f", "v"], "h3", "0"),
        (&["HINCRBY", "h4", "f", "1"], "h4", "0"),
        (&["HINCRBYFLOAT", "h5", "f", "1.5"], "h5", "0"),
        (&["SADD", "s1", "a"], "s1", "0"),
        (&["SMOVE", "set", "s2", "a"], "s2", "0"),
        (&["SETBIT", "b1", "3", "1"], "b1", "0"),
        (&["PFADD", "hll2", "a"], "hll2", "0"),
        (&["PFMERGE", "hll3", "hll"], "hll3", "0"),
        (&["COPY", "src", "cp"], "cp", "0"),
        (&["MOVE", "src", "1"], "src", "1"),
    ];
    for (cmd, key, db) in creating {
        w.cmd(cmd);
        assert_eq!(
            sub.read_reply(),
            pmsg(&format!("__keyevent@{db}__:new"), key),
            "{cmd:?}"
        );
    }
    // Writes to existing keys: no `new`. A last creation proves nothing came between.
    for cmd in [
        &["HSET", "h1", "g", "v"][..],
        &["SADD", "s1", "b"],
        &["SETBIT", "b1", "4", "1"],
        &["PFADD", "hll2", "b"],
    ] {
        w.cmd(cmd);
    }
    w.cmd(&["SET", "last", "v"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:new", "last"));
}

/// COPY raises `copy_to` and MOVE `move_from` then `move_to`, each in its own database,
/// after the destination's `new` (Redis's copyCommand and moveCommand).
#[test]
fn copy_and_move_name_both_ends() {
    let (_s, mut sub, mut w) = setup("Eng");
    w.cmd(&["SET", "k", "v"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:new", "k"));
    w.cmd(&["COPY", "k", "c", "DB", "2"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@2__:new", "c"));
    assert_eq!(sub.read_reply(), pmsg("__keyevent@2__:copy_to", "c"));
    w.cmd(&["COPY", "k", "c", "DB", "2", "REPLACE"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@2__:new", "c"));
    assert_eq!(sub.read_reply(), pmsg("__keyevent@2__:copy_to", "c"));
    w.cmd(&["MOVE", "k", "3"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@3__:new", "k"));
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:move_from", "k"));
    assert_eq!(sub.read_reply(), pmsg("__keyevent@3__:move_to", "k"));
    // Nothing copied or moved: no event. A last one proves nothing came between.
    w.cmd(&["COPY", "missing", "c2"]);
    w.cmd(&["MOVE", "missing", "3"]);
    w.cmd(&["SET", "last", "v"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:new", "last"));
}

/// SET with an absolute time already past stores the key as given, as Redis does:
/// `set` and `expire`, the key counted until a lookup (or the active cycle) removes it
/// with `expired` — no `del` (found by a differential run against redis-server).
#[test]
fn set_with_a_past_time_expires_the_key_later() {
    let (_s, mut sub, mut w) = setup("Eg$x");
    // In one transaction no active expiry runs between the two commands.
    w.cmd(&["MULTI"]);
    w.cmd(&["SET", "k", "v", "PXAT", "1"]);
    w.cmd(&["DBSIZE"]);
    assert_eq!(w.cmd(&["EXEC"]), "*2\r\n+OK\r\n:1\r\n");
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:set", "k"));
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:expire", "k"));
    assert_eq!(w.cmd(&["GET", "k"]), "$-1\r\n");
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:expired", "k"));
    assert_eq!(w.cmd(&["DBSIZE"]), ":0\r\n");
    w.cmd(&["SET", "last", "v"]);
    assert_eq!(sub.read_reply(), pmsg("__keyevent@0__:set", "last"));
}
