//! `aof-use-rdb-preamble no` (a rewrite's base written as RESP commands, `.base.aof`)
//! and `aof-timestamp-enabled` (`#TS:` annotations): the files have Redis's shape,
//! reload to the same dataset here, and load in redis-server.

mod common;

use std::process::{Command, Stdio};

use common::*;
use redis::Connection;

const RESP_BASE: &[&str] = &[
    "--save",
    "",
    "--appendonly",
    "yes",
    "--aof-use-rdb-preamble",
    "no",
    "--aof-timestamp-enabled",
    "yes",
    "--enable-debug-command",
    "yes",
];

/// Every type and the metadata a RESP base must rebuild; `field_ttls` adds what only
/// Redis 7.4 loads (hash field expiry).
fn populate(c: &mut Connection, field_ttls: bool) {
    run(c, &["SET", "str", "hello"]);
    run(c, &["SET", "int", "-42"]);
    run(c, &["SET", "ttl", "v", "PX", "100000000"]);
    let big: Vec<String> = (0..150).map(|i| format!("e{i}")).collect();
    let mut rpush = vec!["RPUSH", "list"];
    rpush.extend(big.iter().map(|s| s.as_str()));
    run(c, &rpush);
    let mut sadd = vec!["SADD", "set"];
    sadd.extend(big.iter().map(|s| s.as_str()));
    run(c, &sadd);
    run(c, &["SADD", "intset", "1", "2", "3"]);
    run(
        c,
        &[
            "ZADD", "zset", "0.1", "a", "-inf", "b", "1e300", "c", "3", "d",
        ],
    );
    run(c, &["HSET", "hash", "f", "v", "g", "w"]);
    if field_ttls {
        run(c, &["HSET", "hfe", "f", "v", "g", "w"]);
        run(c, &["HPEXPIRE", "hfe", "100000000", "FIELDS", "1", "f"]);
    }
    run(c, &["XADD", "stream", "1-1", "a", "1"]);
    run(c, &["XADD", "stream", "2-1", "b", "2"]);
    run(c, &["XADD", "stream", "3-1", "c", "3"]);
    run(c, &["XDEL", "stream", "3-1"]);
    run(c, &["XGROUP", "CREATE", "stream", "g1", "0"]);
    run(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "stream",
            ">",
        ],
    );
    run(c, &["XGROUP", "CREATECONSUMER", "stream", "g1", "bob"]);
    run(c, &["XGROUP", "CREATE", "stream", "g2", "$"]);
    run(c, &["XADD", "empty", "MAXLEN", "0", "5-5", "x", "y"]);
    run(c, &["SELECT", "7"]);
    run(c, &["SET", "in7", "x"]);
    run(c, &["SELECT", "0"]);
    run(
        c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=mylib\nredis.register_function('one', function() return 1 end)",
        ],
    );
}

/// What must survive a reload beyond the keys' values.
fn metadata(c: &mut Connection) -> Vec<String> {
    let mut out = vec![format!("{:?}", run(c, &["DEBUG", "DIGEST"]))];
    for args in [
        &["XINFO", "STREAM", "stream", "FULL"][..],
        &["XINFO", "STREAM", "empty"],
        &["PEXPIRETIME", "ttl"],
        &["FCALL", "one", "0"],
    ] {
        let mut v = format!("{:?}", run(c, args));
        // Consumers' seen/active times are the reload's, in Redis too.
        if args[1] == "STREAM" && args.len() == 4 {
            v = v.split("seen-time").next().unwrap().to_string();
        }
        out.push(v);
    }
    out
}

fn rewrite(c: &mut Connection) {
    let r: String = redis::cmd("BGREWRITEAOF").query(c).unwrap();
    assert_eq!(r, "Background append only file rewriting started");
    wait_until(|| info_field(c, "aof_rewrite_in_progress") == "0");
    assert_eq!(info_field(c, "aof_last_bgrewrite_status"), "ok");
}

fn manifest(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap()
}

#[test]
fn resp_base_and_timestamps_have_redis_shape_and_reload_exactly() {
    let dir = temp_dir("aof-resp");
    let mut s = TestServer::start_in(&dir, RESP_BASE);
    let mut c = s.client();
    // The first base, written at startup, is RESP too (an empty dataset: just the
    // rewrite's timestamp).
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let base1 =
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.1.base.aof")).unwrap();
    assert!(
        base1.starts_with("#TS:") && base1.ends_with("\r\n") && base1.lines().count() == 1,
        "{base1:?}"
    );
    populate(&mut c, true);
    let incr =
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap();
    assert!(incr.starts_with("#TS:"), "{:?}", &incr[..40]);
    rewrite(&mut c);
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.2.base.aof seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
    );
    let base =
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.2.base.aof")).unwrap();
    assert!(base.starts_with("#TS:"));
    // Redis's shapes: libraries first, then SELECT; variadic commands of at most 64
    // elements (150 list items: 64 + 64 + 22); stream metadata after its XADDs.
    let after_ts = &base[base.find("\r\n").unwrap() + 2..];
    assert!(after_ts.starts_with("*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n"));
    assert!(base.contains("*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"));
    assert!(base.contains("*66\r\n$5\r\nRPUSH\r\n$4\r\nlist\r\n"));
    assert!(base.contains("*24\r\n$5\r\nRPUSH\r\n$4\r\nlist\r\n"));
    assert!(base.contains("*7\r\n$6\r\nXSETID\r\n$6\r\nstream\r\n$3\r\n3-1\r\n$12\r\nENTRIESADDED\r\n$1\r\n3\r\n$12\r\nMAXDELETEDID\r\n$3\r\n3-1\r\n"));
    assert!(base.contains(
        "*5\r\n$6\r\nXGROUP\r\n$14\r\nCREATECONSUMER\r\n$6\r\nstream\r\n$2\r\ng1\r\n$3\r\nbob\r\n"
    ));
    assert!(base
        .contains("*7\r\n$4\r\nXADD\r\n$5\r\nempty\r\n$6\r\nMAXLEN\r\n$1\r\n0\r\n$3\r\n0-1\r\n"));
    assert!(base.contains("*6\r\n$10\r\nHPEXPIREAT\r\n$3\r\nhfe\r\n"));
    assert!(base.contains("*3\r\n$9\r\nPEXPIREAT\r\n$3\r\nttl\r\n"));
    assert!(base.contains("*2\r\n$6\r\nSELECT\r\n$1\r\n7\r\n"));
    run(&mut c, &["SET", "after", "rewrite"]);
    let before = image(&mut c);
    let meta = metadata(&mut c);
    let field_ttls = format!(
        "{:?}",
        run(&mut c, &["HPEXPIRETIME", "hfe", "FIELDS", "2", "f", "g"])
    );
    // DEBUG LOADAOF, then a restart, rebuild the same dataset from the RESP base.
    run(&mut c, &["DEBUG", "LOADAOF"]);
    assert_eq!(image(&mut c), before);
    assert_eq!(metadata(&mut c), meta);
    let mut raw = s.raw(2);
    raw.send(&["SHUTDOWN"]);
    wait_until(|| !s.is_running());
    let s2 = TestServer::start_in(&dir, RESP_BASE);
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), before);
    assert_eq!(metadata(&mut c2), meta);
    assert_eq!(
        format!(
            "{:?}",
            run(&mut c2, &["HPEXPIRETIME", "hfe", "FIELDS", "2", "f", "g"])
        ),
        field_ttls
    );
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_server_loads_a_resp_base_written_here() {
    if !redis_server_available() {
        return;
    }
    let dir = temp_dir("aof-resp-redis");
    let mut s = TestServer::start_in(&dir, RESP_BASE);
    let mut c = s.client();
    populate(&mut c, false);
    rewrite(&mut c);
    let ours = image(&mut c);
    // Redis 7.0 digests zset scores as %.17g, 7.4 (and Cinnabar) as the shortest form:
    // every other key's digest must match.
    let digest_keys = [
        "DEBUG",
        "DIGEST-VALUE",
        "str",
        "int",
        "ttl",
        "list",
        "set",
        "intset",
        "hash",
        "stream",
        "empty",
    ];
    let digest = run(&mut c, &digest_keys);
    let groups = run(&mut c, &["XINFO", "GROUPS", "stream"]);
    let mut raw = s.raw(2);
    raw.send(&["SHUTDOWN"]);
    wait_until(|| !s.is_running());

    let port = free_port();
    let mut child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "yes", "--enable-debug-command", "yes"])
        .args(["--dir", &dir.display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server");
    let url = format!("redis://127.0.0.1:{port}/");
    let mut rc = None;
    wait_until(|| {
        rc = redis::Client::open(url.as_str())
            .unwrap()
            .get_connection()
            .ok();
        rc.as_mut()
            .is_some_and(|c| redis::cmd("PING").query::<String>(c).is_ok())
    });
    let mut rc = rc.unwrap();
    // Redis 7.0 replies scores as %.17g: the zset is compared by value below.
    let no_zset = |img: Vec<String>| -> Vec<String> {
        img.into_iter()
            .filter(|l| !l.starts_with("0 zset "))
            .collect()
    };
    assert_eq!(no_zset(image(&mut rc)), no_zset(ours));
    for (m, score) in [
        ("a", 0.1),
        ("b", f64::NEG_INFINITY),
        ("c", 1e300),
        ("d", 3.0),
    ] {
        let got: f64 = redis::cmd("ZSCORE")
            .arg("zset")
            .arg(m)
            .query(&mut rc)
            .unwrap();
        assert_eq!(got, score);
    }
    assert_eq!(run(&mut rc, &digest_keys), digest);
    assert_eq!(run(&mut rc, &["XINFO", "GROUPS", "stream"]), groups);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn timestamps_turned_on_with_config_set() {
    let dir = temp_dir("aof-ts-config");
    let s = TestServer::start_in(&dir, &["--save", "", "--appendonly", "yes"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["SET", "before", "1"]), "+OK\r\n");
    let incr = dir.join("appendonlydir/appendonly.aof.1.incr.aof");
    assert!(!std::fs::read_to_string(&incr).unwrap().contains("#TS:"));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "aof-timestamp-enabled", "yes"]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["SET", "after", "1"]), "+OK\r\n");
    let text = std::fs::read_to_string(&incr).unwrap();
    let ts = text.find("#TS:").expect("an annotation");
    assert!(ts > text.find("before").unwrap() && ts < text.find("after").unwrap());
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
