//! COMMAND INFO key specs compared with redis-server's, command by command.

mod common;
use common::*;
use redis::Value;

fn names(c: &mut redis::Connection) -> Vec<String> {
    redis::cmd("COMMAND").arg("LIST").query(c).unwrap()
}

fn key_specs(c: &mut redis::Connection, name: &str) -> Vec<Value> {
    let v: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(name)
        .query(c)
        .unwrap();
    let Value::Array(outer) = v else {
        panic!("{v:?}")
    };
    let Value::Array(entry) = &outer[0] else {
        panic!("{name}: {outer:?}")
    };
    match &entry[8] {
        Value::Array(specs) => specs.clone(),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn key_specs_match_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let (mut ours, mut theirs) = (s.client(), r.client());
    let mut their_names = names(&mut theirs);
    their_names.sort();
    let our_names: std::collections::HashSet<String> = names(&mut ours).into_iter().collect();
    let mut mismatches = Vec::new();
    let mut compared = 0;
    for name in their_names.iter().filter(|n| our_names.contains(*n)) {
        let (a, b) = (key_specs(&mut ours, name), key_specs(&mut theirs, name));
        compared += 1;
        if a != b {
            mismatches.push(format!("{name}:\n  ours   {a:?}\n  redis  {b:?}"));
        }
    }
    assert!(compared > 200, "only {compared} commands in common");
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn getkeysandflags_per_key() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (
            &["COMMAND", "GETKEYSANDFLAGS", "LMOVE", "a", "b", "LEFT", "RIGHT"],
            "*2\r\n*2\r\n$1\r\na\r\n*3\r\n+RW\r\n+access\r\n+delete\r\n*2\r\n$1\r\nb\r\n*2\r\n+RW\r\n+insert\r\n",
        ),
        (
            &["COMMAND", "GETKEYSANDFLAGS", "SINTERSTORE", "d", "x", "y"],
            "*3\r\n*2\r\n$1\r\nd\r\n*2\r\n+RW\r\n+update\r\n*2\r\n$1\r\nx\r\n*2\r\n+RO\r\n+access\r\n*2\r\n$1\r\ny\r\n*2\r\n+RO\r\n+access\r\n",
        ),
        (
            &["COMMAND", "GETKEYSANDFLAGS", "HLEN", "h"],
            "*1\r\n*2\r\n$1\r\nh\r\n*1\r\n+RO\r\n",
        ),
        (
            &["COMMAND", "GETKEYSANDFLAGS", "ZUNIONSTORE", "d", "1", "x"],
            "*2\r\n*2\r\n$1\r\nd\r\n*2\r\n+OW\r\n+update\r\n*2\r\n$1\r\nx\r\n*2\r\n+RO\r\n+access\r\n",
        ),
    ]);
}

#[test]
fn getkeys_errors_and_resolved_flags_as_redis() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (
            &["COMMAND", "GETKEYSANDFLAGS", "SET", "k1", "v1"],
            "*1\r\n*2\r\n$2\r\nk1\r\n*2\r\n+OW\r\n+update\r\n",
        ),
        (
            &["COMMAND", "GETKEYSANDFLAGS", "SET", "k1", "v1", "get"],
            "*1\r\n*2\r\n$2\r\nk1\r\n*3\r\n+RW\r\n+access\r\n+update\r\n",
        ),
        (
            &[
                "COMMAND",
                "GETKEYSANDFLAGS",
                "BITFIELD",
                "b",
                "GET",
                "u8",
                "0",
            ],
            "*1\r\n*2\r\n$1\r\nb\r\n*2\r\n+RO\r\n+access\r\n",
        ),
        (
            &[
                "COMMAND",
                "GETKEYSANDFLAGS",
                "ZINTERSTORE",
                "zz",
                "1443677133621497600",
                "asdf",
            ],
            "-ERR Invalid arguments specified for command\r\n",
        ),
        (&["COMMAND", "GETKEYS", "EVAL", "return 1", "0"], "*0\r\n"),
        (
            &["COMMAND", "GETKEYS", "PING"],
            "-ERR The command has no key arguments\r\n",
        ),
        (
            &["COMMAND", "GETKEYS", "GET"],
            "-ERR Invalid number of arguments specified for command\r\n",
        ),
    ]);
}

/// COMMAND's flags are Redis 7.4's, in its order, with may_replicate and protected
/// hidden as there (unit/scripting's stale-replica tests rely on ECHO being STALE).
#[test]
fn command_flags_are_redis_ones_in_its_order() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let flags = |c: &mut RawConn, name: &str| -> String {
        let r = c.cmd(&["COMMAND", "INFO", name]);
        // *1 *10 $name :arity *N flags...
        let lines: Vec<&str> = r.split("\r\n").collect();
        let n: usize = lines[5][1..].parse().unwrap();
        (0..n)
            .map(|i| lines[6 + i].trim_start_matches('+'))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for (name, want) in [
        ("publish", "pubsub loading stale fast"),
        ("echo", "loading stale fast"),
        ("bgsave", "admin noscript no_async_loading"),
        ("sync", "admin noscript no_async_loading no_multi"),
        (
            "eval",
            "noscript stale skip_monitor no_mandatory_keys movablekeys",
        ),
        ("hexpire", "write denyoom fast"),
        ("debug", "admin noscript loading stale"),
    ] {
        assert_eq!(flags(&mut c, name), want, "{name}");
    }
}
