//! Streams through every persistence path: SAVE + restart, DEBUG RELOAD, DUMP/RESTORE,
//! AOF rewrite (RDB preamble) + restart, and AOF replay of consumer-group commands;
//! and, when redis-server is installed, RDB files and DUMP payloads crossing between
//! Redis and Cinnabar in both directions. The state compared is XINFO STREAM FULL,
//! XRANGE, XINFO GROUPS/CONSUMERS and XPENDING (summary and extended), with only the
//! clock-dependent fields masked (idle times; active times, which RDB type 19 does
//! not carry).

mod common;

use common::*;
use redis::{Connection, Value};

fn conn(port: u16) -> Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

const MASKED: &[&str] = &["idle", "inactive", "active-time"];
/// Replaying XCLAIM/XGROUP CREATECONSUMER from an AOF stamps consumers with the
/// replay time, in Redis as here: seen times are compared only through RDB paths.
const MASKED_AOF: &[&str] = &["idle", "inactive", "active-time", "seen-time"];
/// Dropped when comparing with redis-server 7.0: fields only 7.4 reports, and the
/// radix-tree sizes, which depend on how each server splits entries into nodes.
const VERSION_ONLY: &[&str] = &[
    "active-time",
    "inactive",
    "radix-tree-keys",
    "radix-tree-nodes",
];

/// Renders a reply canonically, masking clock-dependent fields of flat key/value
/// arrays; `drop_version_only` removes fields 7.0 and 7.4 do not share.
fn render_masked(v: &Value, drop_version_only: bool, masked: &[&str], out: &mut String) {
    match v {
        Value::Array(items) => {
            let is_kv = items.len() % 2 == 0
                && items.len() >= 2
                && items.iter().step_by(2).all(|k| {
                    matches!(k, Value::BulkString(b) if b.iter().all(|c| c.is_ascii_lowercase() || *c == b'-'))
                });
            out.push('[');
            if is_kv {
                for pair in items.chunks(2) {
                    let Value::BulkString(k) = &pair[0] else {
                        unreachable!()
                    };
                    let k = String::from_utf8_lossy(k).to_string();
                    if drop_version_only && VERSION_ONLY.contains(&k.as_str()) {
                        continue;
                    }
                    out.push_str(&k);
                    out.push('=');
                    if masked.contains(&k.as_str()) {
                        out.push('*');
                    } else {
                        render_masked(&pair[1], drop_version_only, masked, out);
                    }
                    out.push(' ');
                }
            } else {
                for x in items {
                    render_masked(x, drop_version_only, masked, out);
                    out.push(' ');
                }
            }
            out.push(']');
        }
        Value::BulkString(b) => out.push_str(&format!("{:?}", String::from_utf8_lossy(b))),
        Value::Int(n) => out.push_str(&n.to_string()),
        Value::Nil => out.push_str("nil"),
        other => out.push_str(&format!("{other:?}")),
    }
}

/// Asserts equality, showing only the neighbourhood of the first difference.
#[track_caller]
fn same(got: &str, want: &str) {
    if got != want {
        let at = got
            .bytes()
            .zip(want.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        let lo = at.saturating_sub(300);
        let win = |s: &str| s.get(lo..(at + 200).min(s.len())).unwrap_or("").to_string();
        panic!("differs at {at}:\n got: {}\nwant: {}", win(got), win(want));
    }
}

fn q(c: &mut Connection, args: &[&str]) -> Value {
    run(c, args)
}

/// Everything observable about the streams of db 0, canonically.
fn state(c: &mut Connection, cross_version: bool) -> String {
    state_masked(c, cross_version, MASKED)
}

fn state_masked(c: &mut Connection, cross_version: bool, masked: &[&str]) -> String {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    keys.sort();
    let mut out = String::new();
    for k in keys {
        out += &format!("== {k}\n");
        let mut show = |c: &mut Connection, args: &[&str], mask_pending_idle: bool| {
            let v = q(c, args);
            let v = if mask_pending_idle {
                // XPENDING extended: [id, consumer, idle, count] per entry.
                match v {
                    Value::Array(es) => Value::Array(
                        es.into_iter()
                            .map(|e| match e {
                                Value::Array(mut f) if f.len() == 4 => {
                                    f[2] = Value::Nil;
                                    Value::Array(f)
                                }
                                o => o,
                            })
                            .collect(),
                    ),
                    o => o,
                }
            } else {
                v
            };
            let mut s = String::new();
            render_masked(&v, cross_version, masked, &mut s);
            out += &format!("{args:?} -> {s}\n");
        };
        show(c, &["XINFO", "STREAM", &k, "FULL"], false);
        show(c, &["XRANGE", &k, "-", "+"], false);
        show(c, &["XREVRANGE", &k, "+", "-", "COUNT", "2"], false);
        show(c, &["XLEN", &k], false);
        show(c, &["XINFO", "GROUPS", &k], false);
        let groups = q(c, &["XINFO", "GROUPS", &k]);
        let Value::Array(groups) = groups else {
            panic!()
        };
        for g in groups {
            let Value::Array(f) = g else { panic!() };
            let Value::BulkString(name) = &f[1] else {
                panic!()
            };
            let name = String::from_utf8_lossy(name).to_string();
            show(c, &["XINFO", "CONSUMERS", &k, &name], false);
            show(c, &["XPENDING", &k, &name], false);
            show(c, &["XPENDING", &k, &name, "-", "+", "1000"], true);
        }
    }
    out
}

/// Streams with several nodes, tombstones, trims, an empty stream, groups with PELs,
/// claimed entries, acknowledged entries, idle consumers and an unknown read counter.
fn populate(c: &mut Connection) {
    for i in 1..=250 {
        let v = i.to_string();
        if i % 7 == 0 {
            q(
                c,
                &["XADD", "big", &format!("{i}-1"), "other", &v, "x", "y"],
            );
        } else {
            q(
                c,
                &[
                    "XADD",
                    "big",
                    &format!("{i}-1"),
                    "f",
                    &v,
                    "g",
                    "12345678901234567890123",
                ],
            );
        }
    }
    q(c, &["XDEL", "big", "1-1", "5-1", "120-1", "250-1"]);
    q(c, &["XTRIM", "big", "MAXLEN", "230"]);
    q(c, &["XGROUP", "CREATE", "big", "g1", "0"]);
    q(c, &["XGROUP", "CREATE", "big", "g2", "$"]);
    q(
        c,
        &["XGROUP", "CREATE", "big", "g3", "100-1", "ENTRIESREAD", "7"],
    );
    q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "5",
            "STREAMS",
            "big",
            ">",
        ],
    );
    q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "COUNT",
            "3",
            "STREAMS",
            "big",
            ">",
        ],
    );
    q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g3",
            "bob",
            "COUNT",
            "2",
            "STREAMS",
            "big",
            ">",
        ],
    );
    q(c, &["XACK", "big", "g1", "30-1"]);
    q(
        c,
        &[
            "XCLAIM",
            "big",
            "g1",
            "carol",
            "0",
            "25-1",
            "26-1",
            "RETRYCOUNT",
            "5",
        ],
    );
    q(c, &["XGROUP", "CREATECONSUMER", "big", "g2", "dave"]);
    q(c, &["XADD", "empty", "1-1", "a", "b"]);
    q(c, &["XDEL", "empty", "1-1"]);
    q(c, &["XGROUP", "CREATE", "empty", "g", "$"]);
    q(c, &["XADD", "small", "5-5", "name", "value"]);
    q(
        c,
        &[
            "XSETID",
            "small",
            "9-9",
            "ENTRIESADDED",
            "12",
            "MAXDELETEDID",
            "3-3",
        ],
    );
}

fn temp(tag: &str) -> std::path::PathBuf {
    temp_dir(tag)
}

#[test]
fn save_and_restart() {
    let dir = temp("stream-rdb");
    let s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c = s.client();
    populate(&mut c);
    let before = state(&mut c, false);
    q(&mut c, &["BGSAVE"]);
    wait_until(|| {
        info_field(&mut c, "rdb_bgsave_in_progress") == "0"
            && info_field(&mut c, "rdb_changes_since_last_save") == "0"
    });
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    drop(s);
    let s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c = s.client();
    same(&state(&mut c, false), &before);
    // The reloaded stream keeps working: new IDs follow the saved last ID.
    let id: String = redis::cmd("XADD")
        .arg("small")
        .arg("*")
        .arg("a")
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert!(
        id.split('-').next().unwrap().parse::<u64>().unwrap() > 9,
        "{id}"
    );
    // SHUTDOWN SAVE also writes streams.
    let s2 = {
        let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<Value>(&mut c);
        drop(s);
        TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""])
    };
    let mut c = s2.client();
    assert_eq!(q(&mut c, &["XLEN", "small"]), Value::Int(2));
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn debug_reload_and_dump_restore() {
    let s = TestServer::start_with(&["--save", ""]);
    let mut c = s.client();
    populate(&mut c);
    let before = state(&mut c, false);
    assert_eq!(q(&mut c, &["DEBUG", "RELOAD"]), Value::Okay);
    same(&state(&mut c, false), &before);
    for k in ["big", "empty", "small"] {
        let p: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut c).unwrap();
        q(&mut c, &["DEL", k]);
        let r: Value = redis::cmd("RESTORE")
            .arg(k)
            .arg(0)
            .arg(&p)
            .query(&mut c)
            .unwrap();
        assert_eq!(r, Value::Okay);
    }
    same(&state(&mut c, false), &before);
    // A corrupted payload is refused (with a valid checksum, so the decoder runs).
    let p: Vec<u8> = redis::cmd("DUMP").arg("big").query(&mut c).unwrap();
    let e = redis::cmd("RESTORE")
        .arg("x")
        .arg(0)
        .arg(&p[..p.len() / 2])
        .query::<Value>(&mut c);
    assert!(e.is_err());
}

#[test]
fn aof_rewrite_and_restart() {
    let dir = temp("stream-aof");
    let args = &[
        "--appendonly",
        "yes",
        "--save",
        "",
        "--appendfsync",
        "always",
    ];
    let s = TestServer::start_in(&dir, args);
    let mut c = s.client();
    populate(&mut c);
    let before = state(&mut c, false);
    let r: Value = q(&mut c, &["BGREWRITEAOF"]);
    assert!(matches!(r, Value::SimpleString(_) | Value::Okay), "{r:?}");
    wait_until(|| info_field(&mut c, "aof_rewrite_in_progress") == "0");
    // Commands after the rewrite land in the new incremental file.
    q(&mut c, &["XADD", "big", "300-1", "f", "after"]);
    q(&mut c, &["XACK", "big", "g1", "19-1"]);
    consumer_group_traffic(&mut c);
    let after = state_masked(&mut c, false, MASKED_AOF);
    assert_ne!(after, before);
    drop(s);
    let s = TestServer::start_in(&dir, args);
    let mut c = s.client();
    same(&state_masked(&mut c, false, MASKED_AOF), &after);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads, claims and acknowledgements whose verbatim replay would not recreate the
/// same PELs: new consumers, NOACK, XCLAIM with LASTID only,
/// XAUTOCLAIM over deleted entries, multi-stream reads.
fn consumer_group_traffic(c: &mut Connection) {
    q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "erin",
            "COUNT",
            "2",
            "STREAMS",
            "big",
            ">",
        ],
    );
    // (No history re-read here: as in Redis, its new delivery time and count are not
    // propagated, so replay would not reproduce them.)
    q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g3",
            "frank",
            "NOACK",
            "COUNT",
            "3",
            "STREAMS",
            "big",
            ">",
        ],
    );
    q(
        c,
        &["XREADGROUP", "GROUP", "g", "gina", "STREAMS", "empty", ">"],
    );
    q(
        c,
        &[
            "XCLAIM", "big", "g1", "harry", "0", "21-1", "IDLE", "5000", "JUSTID",
        ],
    );
    q(
        c,
        &["XCLAIM", "big", "g2", "ivy", "0", "1-1", "LASTID", "260-1"],
    );
    q(c, &["XDEL", "big", "22-1", "23-1"]);
    q(
        c,
        &["XAUTOCLAIM", "big", "g1", "jack", "0", "0", "COUNT", "4"],
    );
    q(c, &["XADD", "small", "10-1", "x", "y"]);
    q(c, &["XGROUP", "CREATE", "small", "sg", "0"]);
    q(
        c,
        &["XREADGROUP", "GROUP", "sg", "kim", "STREAMS", "small", ">"],
    );
}

/// The AOF alone (no rewrite): replaying the propagated XCLAIM / XGROUP SETID /
/// CREATECONSUMER commands recreates PELs, counters and consumers exactly.
#[test]
fn aof_replay_recreates_group_state() {
    let dir = temp("stream-aof-replay");
    let args = &[
        "--appendonly",
        "yes",
        "--save",
        "",
        "--appendfsync",
        "always",
    ];
    let s = TestServer::start_in(&dir, args);
    let mut c = s.client();
    populate(&mut c);
    consumer_group_traffic(&mut c);
    let before = state_masked(&mut c, false, MASKED_AOF);
    drop(s);
    let s = TestServer::start_in(&dir, args);
    let mut c = s.client();
    same(&state_masked(&mut c, false, MASKED_AOF), &before);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

fn redis_dir(rc: &mut Connection) -> std::path::PathBuf {
    let d: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(rc)
        .unwrap();
    std::path::PathBuf::from(&d[1])
}

#[test]
fn rdb_files_cross_with_redis_server() {
    if !redis_server_available() {
        return;
    }
    let redis = RedisServer::start();
    let mut rc = conn(redis.port);
    populate(&mut rc);
    let theirs = state(&mut rc, true);
    assert_eq!(q(&mut rc, &["SAVE"]), Value::Okay);
    let rdir = redis_dir(&mut rc);
    // Redis's file loads here with the same streams, groups, PELs and consumers.
    let dir = temp("stream-interop");
    std::fs::copy(rdir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c = s.client();
    same(&state(&mut c, true), &theirs);
    // Ours loads into redis-server.
    q(&mut c, &["XADD", "written-here", "1-1", "k", "v"]);
    q(&mut c, &["XGROUP", "CREATE", "written-here", "g", "0"]);
    q(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "zed",
            "STREAMS",
            "written-here",
            ">",
        ],
    );
    assert_eq!(q(&mut c, &["SAVE"]), Value::Okay);
    let ours = state(&mut c, true);
    std::fs::copy(dir.join("dump.rdb"), rdir.join("dump.rdb")).unwrap();
    assert_eq!(q(&mut rc, &["DEBUG", "RELOAD", "NOSAVE"]), Value::Okay);
    same(&state(&mut rc, true), &ours);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dump_payloads_cross_with_redis_server() {
    if !redis_server_available() {
        return;
    }
    let redis = RedisServer::start();
    let mut rc = conn(redis.port);
    let s = TestServer::start_with(&["--save", ""]);
    let mut c = s.client();
    populate(&mut rc);
    let theirs = state(&mut rc, true);
    for k in ["big", "empty", "small"] {
        let p: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut rc).unwrap();
        let r: Value = redis::cmd("RESTORE")
            .arg(k)
            .arg(0)
            .arg(&p)
            .query(&mut c)
            .unwrap();
        assert_eq!(r, Value::Okay);
    }
    same(&state(&mut c, true), &theirs);
    q(&mut rc, &["FLUSHALL"]);
    q(
        &mut c,
        &["XREADGROUP", "GROUP", "g2", "frank", "STREAMS", "big", "0"],
    );
    let ours = state(&mut c, true);
    for k in ["big", "empty", "small"] {
        let p: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut c).unwrap();
        let r: Value = redis::cmd("RESTORE")
            .arg(k)
            .arg(0)
            .arg(&p)
            .query(&mut rc)
            .unwrap();
        assert_eq!(r, Value::Okay);
    }
    same(&state(&mut rc, true), &ours);
}
