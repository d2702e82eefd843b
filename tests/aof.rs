//! The append-only file: multi-part layout, exact replay of rewritten commands,
//! truncated tails, BGREWRITEAOF, loading an AOF directory written by redis-server,
//! and a kill -9 crash test with `appendfsync always`.

mod common;

use std::io::Write;
use std::time::Duration;

use common::*;
use redis::Connection;

const AOF_ALWAYS: &[&str] = &[
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
];

fn writes(c: &mut Connection) {
    run(c, &["SET", "plain", "v"]);
    run(c, &["SET", "ex", "v", "EX", "1000"]);
    run(c, &["SETEX", "setex", "1000", "v"]);
    run(c, &["SET", "e", "v"]);
    run(c, &["EXPIRE", "e", "500"]);
    run(c, &["SET", "gone", "v"]);
    run(c, &["EXPIRE", "gone", "-1"]);
    run(c, &["SET", "f", "10.5"]);
    run(c, &["INCRBYFLOAT", "f", "0.1"]);
    run(c, &["SADD", "s", "a", "b", "c", "d", "e"]);
    run(c, &["SPOP", "s"]);
    run(c, &["SPOP", "s", "2"]);
    run(c, &["RPUSH", "l", "1", "2", "3"]);
    run(c, &["BLPOP", "l", "0"]);
    run(c, &["ZADD", "z", "1", "a", "2", "b"]);
    run(c, &["ZPOPMIN", "z"]);
    run(c, &["HSET", "h", "f", "v", "g", "w"]);
    run(c, &["HEXPIRE", "h", "1000", "FIELDS", "1", "f"]);
    run(c, &["MULTI"]);
    run(c, &["INCR", "counter"]);
    run(c, &["INCR", "counter"]);
    run(c, &["EXEC"]);
    run(
        c,
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], 'fromlua') redis.call('SADD', KEYS[2], 'x') return 1",
            "2",
            "lua1",
            "lua2",
        ],
    );
    run(c, &["SELECT", "5"]);
    run(c, &["SET", "in5", "x"]);
    run(c, &["SELECT", "0"]);
    let p: Vec<u8> = redis::cmd("DUMP").arg("l").query(c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(100_000)
        .arg(p)
        .query(c)
        .unwrap();
    run(c, &["SET", "short", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(5));
    let _: Option<String> = redis::cmd("GET").arg("short").query(c).unwrap();
}

#[test]
fn aof_replays_exactly_after_a_crash() {
    let dir = temp_dir("aof");
    let mut s = TestServer::start_in(&dir, AOF_ALWAYS);
    let mut c = s.client();
    writes(&mut c);
    let before = image(&mut c);
    assert_eq!(info_field(&mut c, "aof_enabled"), "1");
    s.kill9();
    let ad = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(ad.join("appendonly.aof.manifest")).unwrap();
    assert_eq!(
        manifest,
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let incr =
        String::from_utf8_lossy(&std::fs::read(ad.join("appendonly.aof.1.incr.aof")).unwrap())
            .into_owned();
    assert!(
        incr.contains("PEXPIREAT"),
        "relative expiries are written as absolute"
    );
    assert!(incr.contains("SREM"), "SPOP is written as SREM");
    assert!(
        !incr.contains("EVAL"),
        "scripts are written as their effects"
    );
    assert!(incr.contains("MULTI"));
    let s2 = TestServer::start_in(&dir, AOF_ALWAYS);
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), before);
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn truncated_tail_is_cut_or_refused() {
    let dir = temp_dir("aof");
    let mut s = TestServer::start_in(&dir, AOF_ALWAYS);
    let mut c = s.client();
    run(&mut c, &["SET", "a", "1"]);
    run(&mut c, &["SET", "b", "2"]);
    s.kill9();
    let incr = dir.join("appendonlydir/appendonly.aof.1.incr.aof");
    let good_len = std::fs::metadata(&incr).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&incr)
        .unwrap();
    f.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1").unwrap();
    drop(f);
    // aof-load-truncated no: refused.
    let mut strict = AOF_ALWAYS.to_vec();
    strict.extend(["--aof-load-truncated", "no"]);
    assert!(TestServer::try_start_in(&dir, &strict).is_none());
    // Default: the torn command is cut and the rest loads.
    let s = TestServer::start_in(&dir, AOF_ALWAYS);
    let mut c = s.client();
    let img = image(&mut c);
    assert_eq!(img.len(), 2, "{img:?}");
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), good_len);
    run(&mut c, &["SET", "c", "3"]);
    drop(s);
    let s = TestServer::start_in(&dir, AOF_ALWAYS);
    let mut c = s.client();
    let v: String = redis::cmd("GET").arg("c").query(&mut c).unwrap();
    assert_eq!(v, "3");
    // Garbage in the middle is refused whatever aof-load-truncated says.
    drop(s);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&incr)
        .unwrap();
    f.write_all(b"garbage\r\n*1\r\n$4\r\nPING\r\n").unwrap();
    drop(f);
    assert!(TestServer::try_start_in(&dir, AOF_ALWAYS).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bgrewriteaof_compacts_and_keeps_everything() {
    let dir = temp_dir("aof");
    let args = ["--save", "", "--appendonly", "yes"];
    let mut s = TestServer::start_in(&dir, &args);
    let mut c = s.client();
    for i in 0..200 {
        run(&mut c, &["INCR", "n"]);
        run(&mut c, &["RPUSH", "l", &i.to_string()]);
    }
    let r: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    assert_eq!(r, "Background append only file rewriting started");
    run(&mut c, &["SET", "after", "rewrite"]);
    wait_until(|| info_field(&mut c, "aof_rewrite_in_progress") == "0");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    run(&mut c, &["SET", "after2", "x"]);
    let before = image(&mut c);
    // SHUTDOWN flushes and syncs the AOF (no RDB: save points are off).
    let mut raw = s.raw(2);
    raw.send(&["SHUTDOWN"]);
    wait_until(|| !s.is_running());
    let ad = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(ad.join("appendonly.aof.manifest")).unwrap();
    assert_eq!(
        manifest,
        "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
    );
    assert!(!ad.join("appendonly.aof.1.incr.aof").exists());
    let s2 = TestServer::start_in(&dir, &args);
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), before);
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn aof_directory_written_by_redis_loads_here() {
    if !redis_server_available() {
        return;
    }
    let redis = RedisServer::start();
    let mut rc = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port))
        .unwrap()
        .get_connection()
        .unwrap();
    run(&mut rc, &["SET", "in-base", "1"]);
    run(&mut rc, &["RPUSH", "list", "a", "b"]);
    run(&mut rc, &["CONFIG", "SET", "appendfsync", "always"]);
    run(&mut rc, &["CONFIG", "SET", "appendonly", "yes"]);
    wait_until(|| {
        info_field(&mut rc, "aof_rewrite_in_progress") == "0"
            && info_field(&mut rc, "aof_rewrite_scheduled") == "0"
    });
    run(&mut rc, &["SET", "in-incr", "2", "EX", "1000"]);
    run(&mut rc, &["HSET", "h", "f", "v"]);
    run(&mut rc, &["SELECT", "2"]);
    run(&mut rc, &["SADD", "s", "x", "y"]);
    run(&mut rc, &["SELECT", "0"]);
    let theirs = image(&mut rc);
    let rdir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut rc)
        .unwrap();
    let src = std::path::PathBuf::from(&rdir[1]).join("appendonlydir");
    let dir = temp_dir("aof");
    let dst = dir.join("appendonlydir");
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    let s = TestServer::start_in(&dir, &["--save", "", "--appendonly", "yes"]);
    let mut c = s.client();
    assert_eq!(image(&mut c), theirs);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// kill -9 while clients write with `appendfsync always`: every acknowledged write is
/// present after restart. Bounded: a few cycles of a fraction of a second each.
#[test]
fn no_acknowledged_write_is_lost_by_kill_9() {
    crash_cycles("aof-crash", AOF_ALWAYS, 6);
}

/// With `everysec` a process crash loses nothing either: a turn's writes reach the
/// file (the kernel) before its replies are sent; only the fsync, which bounds what
/// an operating-system crash can lose to about a second, is deferred.
#[test]
fn everysec_loses_nothing_acknowledged_on_a_process_crash() {
    let args = [
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
    ];
    crash_cycles("aof-crash-everysec", &args, 4);
}

/// `CINNABAR_CRASH_CYCLES=N` runs a longer campaign than CI's.
fn crash_cycles(name: &str, args: &[&str], cycles: usize) {
    let cycles = std::env::var("CINNABAR_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cycles);
    let dir = temp_dir(name);
    let mut acked_total = 0u64;
    let mut lost_total = 0u64;
    let mut expected: Vec<(String, u64)> = Vec::new();
    for cycle in 0..cycles {
        let mut s = TestServer::start_in(&dir, args);
        let mut c = s.client();
        // Everything acknowledged in earlier cycles is still here.
        for (k, v) in &expected {
            let got: Option<u64> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
            if got != Some(*v) {
                lost_total += 1;
            }
        }
        let port = s.port;
        let writers: Vec<_> = (0..3)
            .map(|w| {
                std::thread::spawn(move || {
                    let mut acked = Vec::new();
                    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    else {
                        return acked;
                    };
                    let Ok(mut c) = client.get_connection() else {
                        return acked;
                    };
                    for i in 0.. {
                        let k = format!("c{cycle}:w{w}:{i}");
                        let r: redis::RedisResult<()> =
                            redis::cmd("SET").arg(&k).arg(i).query(&mut c);
                        if r.is_err() {
                            break;
                        }
                        acked.push((k, i as u64));
                    }
                    acked
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(150 + 50 * cycle as u64));
        s.kill9();
        for w in writers {
            let acked = w.join().unwrap();
            acked_total += acked.len() as u64;
            expected.extend(acked);
        }
    }
    let s = TestServer::start_in(&dir, args);
    let mut c = s.client();
    for (k, v) in &expected {
        let got: Option<u64> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
        if got != Some(*v) {
            lost_total += 1;
        }
    }
    eprintln!(
        "crash test {args:?}: {cycles} kill -9 cycles, {acked_total} acknowledged writes, {lost_total} lost"
    );
    assert!(acked_total > 0);
    assert_eq!(lost_total, 0);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// XADD with an auto-generated ID is logged with the ID it got, so a replayed stream has
/// the same entries and IDs.
#[test]
fn stream_ids_replay_exactly() {
    let dir = temp_dir("aof-stream");
    let mut s = TestServer::start_in(&dir, AOF_ALWAYS);
    let mut c = s.raw(2);
    c.cmd(&["XADD", "s", "*", "f", "1"]);
    c.cmd(&["XADD", "s", "MAXLEN", "~", "100", "*", "f", "2"]);
    c.cmd(&["XADD", "s", "NOMKSTREAM", "12345-*", "f", "3"]);
    let before = c.cmd(&["XRANGE", "s", "-", "+"]);
    assert!(
        before.starts_with("*2\r\n") || before.starts_with("*3\r\n"),
        "{before}"
    );
    s.kill9();
    let s2 = TestServer::start_in(&dir, AOF_ALWAYS);
    assert_eq!(s2.raw(2).cmd(&["XRANGE", "s", "-", "+"]), before);
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// CONFIG SET appendonly yes|no at runtime, as Redis's startAppendOnly/stopAppendOnly:
/// turning it on writes the current dataset as a fresh base (discarding a stale AOF
/// left in the directory), later writes go to the new incremental file, and a
/// restart with AOF on reproduces everything.
#[test]
fn appendonly_turned_on_and_off_at_runtime() {
    let dir = temp_dir("aof-runtime");
    let off = ["--save", "", "--appendonly", "no"];
    let on = ["--save", "", "--appendonly", "yes"];
    let mut s = TestServer::start_in(&dir, &off);
    let mut c = s.client();
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    run(&mut c, &["SET", "before", "1"]);
    run(&mut c, &["RPUSH", "l", "a", "b"]);
    let mut raw = s.raw(2);
    assert_eq!(raw.cmd(&["CONFIG", "SET", "appendonly", "yes"]), "+OK\r\n");
    assert_eq!(
        raw.cmd(&["CONFIG", "GET", "appendonly"]),
        "*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n"
    );
    assert_eq!(info_field(&mut c, "aof_enabled"), "1");
    // Idempotent, as in Redis.
    assert_eq!(raw.cmd(&["CONFIG", "SET", "appendonly", "yes"]), "+OK\r\n");
    run(&mut c, &["INCR", "counter"]);
    run(&mut c, &["RPUSH", "l", "c"]);
    wait_until(|| info_field(&mut c, "aof_rewrite_in_progress") == "0");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    run(&mut c, &["INCR", "counter"]);
    let ad = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(ad.join("appendonly.aof.manifest")).unwrap();
    // Numbered from 1, as Redis (integration/aof-multi-part "AOF enable will create
    // manifest file").
    assert_eq!(
        manifest,
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    assert!(!ad.join("temp-appendonly.aof.incr").exists());

    // Off: writes after it are not logged; what was logged is synced.
    assert_eq!(raw.cmd(&["CONFIG", "SET", "appendonly", "no"]), "+OK\r\n");
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    let logged = image(&mut c);
    run(&mut c, &["SET", "unlogged", "x"]);
    s.kill9();
    let s2 = TestServer::start_in(&dir, &on);
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), logged);
    let counter: String = redis::cmd("GET").arg("counter").query(&mut c2).unwrap();
    assert_eq!(counter, "2");
    drop(s2);

    // On again over that (now stale for a server started without AOF) directory:
    // the new base is this server's dataset, and the old files are gone.
    let s3 = TestServer::start_in(&dir, &off);
    let mut c3 = s3.client();
    run(&mut c3, &["SET", "only", "this"]);
    let mut raw3 = s3.raw(2);
    assert_eq!(raw3.cmd(&["CONFIG", "SET", "appendonly", "yes"]), "+OK\r\n");
    wait_until(|| info_field(&mut c3, "aof_rewrite_in_progress") == "0");
    run(&mut c3, &["SET", "after", "on"]);
    let expected = image(&mut c3);
    let manifest = std::fs::read_to_string(ad.join("appendonly.aof.manifest")).unwrap();
    assert_eq!(
        manifest,
        "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
    );
    assert!(!ad.join("appendonly.aof.1.base.rdb").exists());
    assert!(!ad.join("appendonly.aof.1.incr.aof").exists());
    let mut s3 = s3;
    s3.kill9();
    let s4 = TestServer::start_in(&dir, &on);
    let mut c4 = s4.client();
    assert_eq!(image(&mut c4), expected);
    drop(s4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// AOF turned on while a BGSAVE runs: the rewrite is scheduled behind it; a SHUTDOWN
/// before it ever started still leaves a complete AOF (written synchronously).
#[test]
fn appendonly_on_during_bgsave_then_shutdown_keeps_everything() {
    let dir = temp_dir("aof-runtime-bgsave");
    let mut s = TestServer::start_in(
        &dir,
        &[
            "--save",
            "",
            "--appendonly",
            "no",
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut c = s.client();
    for i in 0..50 {
        run(&mut c, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    let mut raw = s.raw(2);
    assert_eq!(raw.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "1"]), ":0\r\n");
    assert_eq!(raw.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    assert_eq!(raw.cmd(&["CONFIG", "SET", "appendonly", "yes"]), "+OK\r\n");
    assert_eq!(info_field(&mut c, "aof_rewrite_scheduled"), "1");
    run(&mut c, &["SET", "during", "x"]);
    run(&mut c, &["INCR", "k1"]);
    let expected = image(&mut c);
    raw.send(&["SHUTDOWN", "NOSAVE"]);
    wait_until(|| !s.is_running());
    let s2 = TestServer::start_in(&dir, &["--save", "", "--appendonly", "yes"]);
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), expected);
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Redis 7 wraps what EXEC or a script ran in MULTI/EXEC only when it wrote more than
/// one command; the SELECT that opens a stream does not count as one.
#[test]
fn a_single_write_of_a_transaction_is_not_wrapped() {
    let dir = temp_dir("aof-multi");
    let s = TestServer::start_in(&dir, &["--appendonly", "yes", "--save", ""]);
    let mut c = s.raw(2);
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "foo", "bar"]);
    c.cmd(&["GET", "foo"]);
    assert_eq!(c.cmd(&["EXEC"]), "*2\r\n+OK\r\n$3\r\nbar\r\n");
    c.cmd(&["EVAL", "redis.call('set', 'a', '1'); return 1", "0"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", "x", "1"]);
    c.cmd(&["SET", "y", "2"]);
    c.cmd(&["EXEC"]);
    let incr =
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap();
    let want = "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$3\r\nfoo\r\n$3\r\nbar\r\n\
                *3\r\n$3\r\nset\r\n$1\r\na\r\n$1\r\n1\r\n\
                *1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$1\r\ny\r\n$1\r\n2\r\n*1\r\n$4\r\nEXEC\r\n";
    assert_eq!(incr, want);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The AOF's commands split into argument lists (RESP arrays of bulk strings).
fn aof_commands(text: &str) -> Vec<Vec<String>> {
    let mut lines = text.split("\r\n");
    let mut out = Vec::new();
    while let Some(head) = lines.next() {
        let Some(n) = head.strip_prefix('*') else {
            continue;
        };
        let n: usize = n.parse().unwrap();
        let mut args = Vec::new();
        for _ in 0..n {
            lines.next();
            args.push(lines.next().unwrap().to_string());
        }
        out.push(args);
    }
    out
}

/// Redis 7's propagation of expiries: SET/SETEX/PSETEX with a relative time as
/// `SET k v PXAT ms`, GETEX as PEXPIREAT/PERSIST/DEL, RESTORE with ABSTTL; and a read
/// command that lazily expired a key is not propagated, only the DEL.
#[test]
fn expiries_are_propagated_as_absolute_times() {
    let dir = temp_dir("aof-ttl");
    let s = TestServer::start_in(&dir, &["--appendonly", "yes", "--save", ""]);
    let mut c = s.raw(2);
    c.cmd(&["SET", "a", "1", "EX", "100"]);
    c.cmd(&["SET", "b", "1", "PXAT", "99999999999999"]);
    c.cmd(&["SETEX", "c", "100", "1"]);
    c.cmd(&["PSETEX", "d", "100000", "1"]);
    c.cmd(&["GETEX", "a", "PX", "5000"]);
    c.cmd(&["GETEX", "a", "PERSIST"]);
    c.cmd(&["GETEX", "a"]);
    let mut rc = s.client();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("c").query(&mut rc).unwrap();
    let ok: String = redis::cmd("RESTORE")
        .arg("e")
        .arg(100000)
        .arg(payload)
        .query(&mut rc)
        .unwrap();
    assert_eq!(ok, "OK");
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    c.cmd(&["SET", "gone", "1", "PX", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(c.cmd(&["GET", "gone"]), "$-1\r\n");
    let incr = std::fs::read(dir.join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap();
    let cmds = aof_commands(&String::from_utf8_lossy(&incr));
    let shape: Vec<String> = cmds
        .iter()
        .map(|a| {
            a.iter()
                .enumerate()
                .map(|(i, x)| {
                    if x.len() == 13 && x.bytes().all(|b| b.is_ascii_digit()) {
                        "<ms>"
                    } else if i == 3 && a[0] == "RESTORE" {
                        "<payload>"
                    } else {
                        x
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        shape,
        [
            "SELECT 0",
            "SET a 1 PXAT <ms>",
            "SET b 1 PXAT 99999999999999",
            "SET c 1 PXAT <ms>",
            "SET d 1 PXAT <ms>",
            "PEXPIREAT a <ms>",
            "PERSIST a",
            "RESTORE e <ms> <payload> ABSTTL",
            "SET gone 1 PXAT <ms>",
            "DEL gone",
        ]
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// DEBUG LOADAOF rebuilds the dataset from the AOF files, TTLs included.
#[test]
fn debug_loadaof_reloads_the_dataset_from_the_aof() {
    let dir = temp_dir("aof-loadaof");
    let s = TestServer::start_in(&dir, &["--appendonly", "yes", "--save", ""]);
    let mut c = s.raw(2);
    c.cmd(&["SET", "foo", "bar", "EX", "100"]);
    c.cmd(&["SET", "foo", "bar2", "KEEPTTL"]);
    c.cmd(&["SET", "p", "v", "EX", "100"]);
    c.cmd(&["GETEX", "p", "PERSIST"]);
    c.cmd(&["RPUSH", "l", "a", "b"]);
    let before = c.cmd(&["DEBUG", "DIGEST"]);
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), "+OK\r\n");
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), before);
    assert_eq!(c.cmd(&["GET", "foo"]), "$4\r\nbar2\r\n");
    assert_ne!(c.cmd(&["TTL", "foo"]), ":-1\r\n");
    assert_eq!(c.cmd(&["TTL", "p"]), ":-1\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SCAN deletes the expired keys it meets; each goes out as its own DEL.
#[test]
fn scan_deletes_expired_keys_it_meets() {
    let dir = temp_dir("aof-scan");
    let s = TestServer::start_in(&dir, &["--appendonly", "yes", "--save", ""]);
    let mut c = s.raw(2);
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    c.cmd(&["SET", "foo1", "x", "PX", "1"]);
    c.cmd(&["SET", "foo2", "x", "PX", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(c.cmd(&["SCAN", "0"]), "*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(c.cmd(&["DBSIZE"]), ":0\r\n");
    let incr = std::fs::read(dir.join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap();
    let mut shape: Vec<String> = aof_commands(&String::from_utf8_lossy(&incr))
        .into_iter()
        .map(|a| a.join(" "))
        .filter(|l| l.starts_with("DEL"))
        .collect();
    shape.sort();
    assert_eq!(shape, ["DEL foo1", "DEL foo2"]);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bgrewriteaof_with_the_aof_off_writes_a_base_debug_loadaof_reads() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    c.cmd(&["SET", "x", "10"]);
    c.cmd(&["EXPIRE", "x", "1000"]);
    c.cmd(&["RPUSH", "l", "a", "b", "c"]);
    let digest = c.cmd(&["DEBUG", "DIGEST"]);
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    let mut i = s.raw(2);
    wait_until(|| {
        i.cmd(&["INFO", "persistence"])
            .contains("aof_rewrite_in_progress:0\r\n")
    });
    let info = i.cmd(&["INFO", "persistence"]);
    assert!(
        info.contains("aof_enabled:0\r\n") && info.contains("aof_rewrites:1\r\n"),
        "{info}"
    );
    // Nothing is logged while the AOF is off: a later write is not in the files.
    c.cmd(&["SET", "later", "1"]);
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), "+OK\r\n");
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(c.cmd(&["EXISTS", "later"]), ":0\r\n");
    let ttl = c.cmd(&["TTL", "x"]);
    assert!(ttl == ":1000\r\n" || ttl == ":999\r\n", "{ttl}");
    // A second rewrite replaces the first base.
    c.cmd(&["BGREWRITEAOF"]);
    wait_until(|| {
        i.cmd(&["INFO", "persistence"])
            .contains("aof_rewrites:2\r\n")
    });
    let files: Vec<String> = std::fs::read_dir(s.dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files.contains(&"appendonly.aof.manifest".to_string()));
}

#[test]
fn timestamp_annotations_are_skipped_on_load() {
    let dir = temp_dir("aof-annotations");
    let aofdir = dir.join("appendonlydir");
    std::fs::create_dir_all(&aofdir).unwrap();
    let set = |k: &str| format!("*3\r\n$3\r\nset\r\n${}\r\n{k}\r\n$1\r\nv\r\n", k.len());
    let body = format!(
        "#TS:1628217470\r\n{}#TS:1628217471\r\n#TS:1628217472\r\n{}#TS:1628217473\r\n",
        set("foo1"),
        set("foo2")
    );
    std::fs::write(aofdir.join("appendonly.aof.1.incr.aof"), body).unwrap();
    std::fs::write(
        aofdir.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    let s = TestServer::start_in(&dir, &["--appendonly", "yes"]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["MGET", "foo1", "foo2"]),
        "*2\r\n$1\r\nv\r\n$1\r\nv\r\n"
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clients_get_loading_while_a_replayed_script_is_busy() {
    let dir = temp_dir("aof-busy-load");
    let aofdir = dir.join("appendonlydir");
    std::fs::create_dir_all(&aofdir).unwrap();
    let script =
        "redis.call('set',KEYS[1],'y'); for i=1,3000000 do redis.call('ping') end return 'ok'";
    let cmd = ["eval", script, "1", "x"];
    let mut body = format!("*{}\r\n", cmd.len());
    for a in cmd {
        body.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    std::fs::write(aofdir.join("appendonly.aof.1.incr.aof"), body).unwrap();
    std::fs::write(
        aofdir.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    let s = TestServer::start_in(
        &dir,
        &["--appendonly", "yes", "--busy-reply-threshold", "1"],
    );
    let mut c = s.raw(2);
    // DEBUG LOADAOF replays the slow script; meanwhile other clients are answered.
    c.send(&["DEBUG", "LOADAOF"]);
    let mut other = s.raw(2);
    let mut seen = String::new();
    wait_until(|| {
        seen = other.cmd(&["PING"]);
        seen != "+PONG\r\n"
    });
    assert_eq!(seen, "-LOADING Redis is loading the dataset in memory\r\n");
    assert_eq!(c.read_reply(), "+OK\r\n");
    assert_eq!(other.cmd(&["GET", "x"]), "$1\r\ny\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Keys do not expire while the AOF replays: a write after a PEXPIREAT in the past
/// finds the key as it was when it ran (and the key, expired, is gone once loaded).
#[test]
fn replay_does_not_expire_keys_midway() {
    let dir = temp_dir("aof");
    let ad = dir.join("appendonlydir");
    std::fs::create_dir_all(&ad).unwrap();
    std::fs::write(
        ad.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    let mut log = Vec::new();
    for cmd in [
        &["RPUSH", "list", "foo"][..],
        &["PEXPIREAT", "list", "1000"],
        &["RPUSH", "list", "bar"],
        &["SET", "other", "v"],
    ] {
        log.extend_from_slice(format!("*{}\r\n", cmd.len()).as_bytes());
        for a in cmd {
            log.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    std::fs::write(ad.join("appendonly.aof.1.incr.aof"), log).unwrap();
    let s = TestServer::start_in(&dir, &["--save", "", "--appendonly", "yes"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["LLEN", "list"]), ":0\r\n");
    assert_eq!(c.cmd(&["EXISTS", "list"]), ":0\r\n");
    assert_eq!(c.cmd(&["GET", "other"]), "$1\r\nv\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An old-style single-file AOF whose value happens to read like a manifest line
/// (integration/aof "old style resp AOF - has data in the same format as manifest") is
/// loaded as an AOF, and upgraded to the multi-part layout.
#[test]
fn old_style_aof_holding_manifest_like_data_loads() {
    let dir = temp_dir("aof-oldstyle");
    let line = "file appendonly.aof.2.base.rdb seq 2 type b";
    let mut text = String::new();
    for args in [vec!["set", "file", "file"], vec!["set", line, line]] {
        text.push_str(&format!("*{}\r\n", args.len()));
        for a in args {
            text.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
    }
    std::fs::write(dir.join("appendonly.aof"), text).unwrap();
    let s = TestServer::start_in(&dir, &["--save", "", "--appendonly", "yes"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["GET", "file"]), "$4\r\nfile\r\n");
    assert_eq!(
        c.cmd(&["GET", line]),
        format!("${}\r\n{line}\r\n", line.len())
    );
    assert!(dir.join("appendonlydir/appendonly.aof.manifest").exists());
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// BGREWRITEAOF with the AOF off while a BGSAVE runs is scheduled behind it, as with
/// the AOF on (unit/aofrw "BGREWRITEAOF is delayed if BGSAVE is in progress").
#[test]
fn bgrewriteaof_with_the_aof_off_waits_for_a_bgsave() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "500000"]);
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        "+Background append only file rewriting scheduled\r\n"
    );
    let info = c.cmd(&["INFO", "persistence"]);
    assert!(info.contains("aof_rewrite_scheduled:1\r\n"), "{info}");
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    wait_until(|| {
        let info = c.cmd(&["INFO", "persistence"]);
        info.contains("aof_rewrite_scheduled:0\r\n") && info.contains("aof_rewrites:1\r\n")
    });
    // While one runs, another is refused.
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        "-ERR Background append only file rewriting already in progress\r\n"
    );
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
}

/// A server with `appendonly` as given, logging notices to `server.log` in its
/// directory: the directory, the log's path and the server.
fn start_logged(
    tag: &str,
    appendonly: &str,
) -> (std::path::PathBuf, std::path::PathBuf, TestServer) {
    let dir = temp_dir(tag);
    let log = dir.join("server.log");
    let args = [
        "--save",
        "",
        "--appendonly",
        appendonly,
        "--loglevel",
        "notice",
        "--logfile",
    ];
    let mut args: Vec<&str> = args.to_vec();
    let path = log.to_str().unwrap().to_string();
    args.push(&path);
    let s = TestServer::start_in(&dir, &args);
    (dir, log, s)
}

/// Turning the AOF off during a rewrite cancels the rewrite and says so in the words
/// of Redis's log (unit/aofrw "Turning off AOF kills the background writing child").
#[test]
fn turning_aof_off_cancels_a_rewrite_in_progress() {
    let (dir, log, s) = start_logged("aof-off-kill", "yes");
    let mut c = s.raw(2);
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "appendonly", "no"]), "+OK\r\n");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("Killing running AOF rewrite child"), "{text}");
    let info = c.cmd(&["INFO", "persistence"]);
    assert!(info.contains("aof_rewrite_in_progress:0\r\n"), "{info}");
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Inside MULTI/EXEC a rewrite is only scheduled, and starts once the transaction is
/// done (unit/multi "MULTI with BGREWRITEAOF", "MULTI with config set appendonly");
/// every background snapshot counts in INFO's total_forks.
#[test]
fn rewrites_asked_inside_exec_start_after_it() {
    let (dir, log, s) = start_logged("aof-multi", "no");
    let mut c = s.raw(2);
    let forks = |c: &mut RawConn| -> u64 { c.info_field("stats", "total_forks").parse().unwrap() };
    assert_eq!(forks(&mut c), 0);
    for (i, (cmd, reply)) in [
        (
            vec!["BGREWRITEAOF"],
            "+Background append only file rewriting scheduled\r\n",
        ),
        (vec!["CONFIG", "SET", "appendonly", "yes"], "+OK\r\n"),
    ]
    .into_iter()
    .enumerate()
    {
        c.cmd(&["MULTI"]);
        c.cmd(&["SET", "foo", "bar"]);
        c.cmd(&cmd);
        assert_eq!(c.cmd(&["EXEC"]), format!("*2\r\n+OK\r\n{reply}"));
        wait_until(|| forks(&mut c) == i as u64 + 1);
        wait_until(|| {
            let info = c.cmd(&["INFO", "persistence"]);
            info.contains("aof_rewrite_in_progress:0\r\n")
                && info.contains("aof_rewrite_scheduled:0\r\n")
        });
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("AOF was enabled during a transaction. An AOF background was scheduled to start when possible."),
        "{text}"
    );
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
    assert_eq!(forks(&mut c), 0);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `appendonly yes` at the start of a server that loaded an RDB file: the dataset
/// becomes the AOF's first base, written to its file a chunk at a time (an image of
/// several chunks here), as an RDB image or as RESP commands. INFO's aof_base_size is
/// that file's size, and the base alone restores everything after a kill -9.
#[test]
fn the_first_base_of_a_loaded_dataset_is_written_whole_in_either_format() {
    for preamble in ["yes", "no"] {
        let dir = temp_dir("aof-first-base");
        let mut s = TestServer::start_in(
            &dir,
            &[
                "--save",
                "",
                "--appendonly",
                "no",
                "--enable-debug-command",
                "yes",
            ],
        );
        let mut c = s.client();
        run(&mut c, &["DEBUG", "POPULATE", "100000", "key", "60"]);
        run(&mut c, &["SELECT", "2"]);
        run(&mut c, &["RPUSH", "list", "a", "b", "c"]);
        run(&mut c, &["SET", "ttl", "v", "EX", "100000"]);
        let digest = run(&mut c, &["DEBUG", "DIGEST"]);
        run(&mut c, &["SAVE"]);
        s.kill9();
        let args = [
            "--save",
            "",
            "--appendonly",
            "yes",
            "--aof-use-rdb-preamble",
            preamble,
        ];
        let mut s = TestServer::start_in(&dir, &args);
        let mut c = s.client();
        let ext = if preamble == "yes" { "rdb" } else { "aof" };
        let base = dir.join(format!("appendonlydir/appendonly.aof.1.base.{ext}"));
        let size = std::fs::metadata(&base).unwrap().len();
        assert!(size > 2 << 20, "{preamble}: {size} bytes");
        assert_eq!(info_field(&mut c, "aof_base_size"), size.to_string());
        s.kill9();
        std::fs::remove_file(dir.join("dump.rdb")).unwrap();
        let s = TestServer::start_in(&dir, &args);
        let mut c = s.client();
        assert_eq!(run(&mut c, &["DEBUG", "DIGEST"]), digest, "{preamble}");
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
