//! RDB snapshots end to end: SAVE/BGSAVE/LASTSAVE, save points, loading at startup,
//! SHUTDOWN SAVE/NOSAVE and SIGTERM, refusal of corrupt files, DEBUG RELOAD, and
//! interoperability with redis-server's own RDB files in both directions.

mod common;

use common::*;
use redis::Connection;

fn conn(port: u16) -> Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

fn populate(c: &mut Connection) {
    run(c, &["SET", "s:int", "42"]);
    run(c, &["SET", "s:str", "hello"]);
    run(c, &["SET", "s:long", &"long value ".repeat(20)]);
    run(c, &["SET", "s:ttl", "v", "EX", "10000"]);
    run(c, &["RPUSH", "l", "a", "b", "3", "-4"]);
    let mut big: Vec<String> = vec!["RPUSH".into(), "l:big".into()];
    big.extend((0..2000).map(|i| format!("item{i}")));
    run(c, &big.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    run(c, &["SADD", "set:i", "1", "2", "3"]);
    run(c, &["SADD", "set:s", "x", "y"]);
    run(c, &["ZADD", "z", "1", "a", "2.5", "b", "-inf", "c"]);
    run(c, &["HSET", "h", "f", "v", "n", "1"]);
    run(c, &["SELECT", "3"]);
    run(c, &["SET", "db3key", "in db 3"]);
    run(c, &["SELECT", "0"]);
}

#[test]
fn save_then_restart_restores_everything() {
    let dir = temp_dir("persist");
    let mut s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c = s.client();
    populate(&mut c);
    let before = image(&mut c);
    assert_ne!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    let t0: i64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
    assert_eq!(run(&mut c, &["SAVE"]), redis::Value::Okay);
    let t1: i64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
    assert!(t1 >= t0);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert!(dir.join("dump.rdb").exists());
    s.kill9();
    let s2 = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), before);
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bgsave_and_schedule() {
    let dir = temp_dir("persist");
    let mut s = TestServer::start_in(
        &dir,
        &[
            "--appendonly",
            "no",
            "--save",
            "",
            "--dbfilename",
            "snap.rdb",
        ],
    );
    let mut c = s.client();
    populate(&mut c);
    let before = image(&mut c);
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert!(r == "Background saving started", "{r}");
    // Writes after BGSAVE are not in the image.
    run(&mut c, &["SET", "after", "1"]);
    let e: redis::RedisResult<String> = redis::cmd("BGSAVE").arg("BOGUS").query(&mut c);
    assert!(e.unwrap_err().to_string().contains("syntax error"));
    wait_until(|| info_field(&mut c, "rdb_bgsave_in_progress") == "0");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1");
    assert!(dir.join("snap.rdb").exists());
    s.kill9();
    let s2 = TestServer::start_in(
        &dir,
        &[
            "--appendonly",
            "no",
            "--save",
            "",
            "--dbfilename",
            "snap.rdb",
        ],
    );
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), before);
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn save_points_trigger_background_saves() {
    let dir = temp_dir("persist");
    let mut s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", "1 1"]);
    let mut c = s.client();
    let r: String = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .query::<Vec<String>>(&mut c)
        .unwrap()
        .join(" ");
    assert_eq!(r, "save 1 1");
    run(&mut c, &["SET", "k", "v"]);
    wait_until(|| {
        dir.join("dump.rdb").exists() && info_field(&mut c, "rdb_changes_since_last_save") == "0"
    });
    s.kill9();
    let s2 = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c2 = s2.client();
    let v: String = redis::cmd("GET").arg("k").query(&mut c2).unwrap();
    assert_eq!(v, "v");
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn default_save_points_match_redis() {
    let s = TestServer::start();
    let mut c = s.client();
    let r: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, ["save", "3600 1 300 100 60 10000"]);
}

#[test]
fn shutdown_save_nosave_and_sigterm() {
    // SHUTDOWN SAVE saves even without save points.
    let dir = temp_dir("persist");
    let s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut raw = s.raw(2);
    raw.cmd(&["SET", "a", "1"]);
    raw.send(&["SHUTDOWN", "SAVE"]);
    wait_until(|| dir.join("dump.rdb").exists());
    drop(s);
    let s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    assert_eq!(s.raw(2).cmd(&["GET", "a"]), "$1\r\n1\r\n");
    // SHUTDOWN NOSAVE with save points configured does not save.
    let mut raw = s.raw(2);
    raw.cmd(&["SET", "a", "2"]);
    raw.cmd(&["CONFIG", "SET", "save", "3600 1"]);
    raw.send(&["SHUTDOWN", "NOSAVE"]);
    let mut s = s;
    wait_until(|| !s.is_running());
    drop(s);
    // SIGTERM with save points configured saves.
    let mut s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", "3600 1"]);
    assert_eq!(s.raw(2).cmd(&["GET", "a"]), "$1\r\n1\r\n");
    s.raw(2).cmd(&["SET", "a", "3"]);
    assert_eq!(s.terminate(), Some(0));
    drop(s);
    let s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    assert_eq!(s.raw(2).cmd(&["GET", "a"]), "$1\r\n3\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corrupt_or_truncated_files_are_refused() {
    let dir = temp_dir("persist");
    let s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c = s.client();
    populate(&mut c);
    run(&mut c, &["SAVE"]);
    drop(s);
    let good = std::fs::read(dir.join("dump.rdb")).unwrap();
    let mut flipped = good.clone();
    let mid = good.len() / 2;
    flipped[mid] ^= 0x01;
    for bad in [
        flipped,
        good[..good.len() - 9].to_vec(),
        good[..good.len() / 3].to_vec(),
    ] {
        std::fs::write(dir.join("dump.rdb"), &bad).unwrap();
        assert!(
            TestServer::try_start_in(&dir, &["--appendonly", "no", "--save", ""]).is_none(),
            "a damaged file must stop the server from starting"
        );
    }
    std::fs::write(dir.join("dump.rdb"), &good).unwrap();
    let s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    assert_eq!(s.raw(2).cmd(&["GET", "s:int"]), "$2\r\n42\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn debug_reload_keeps_the_data() {
    let s = TestServer::start_with(&["--save", ""]);
    let mut c = s.client();
    populate(&mut c);
    let before = image(&mut c);
    assert_eq!(run(&mut c, &["DEBUG", "RELOAD"]), redis::Value::Okay);
    assert_eq!(image(&mut c), before);
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("l:big")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "quicklist");
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("set:i")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "intset");
}

#[test]
fn rdb_files_interoperate_with_redis_server() {
    if !redis_server_available() {
        return;
    }
    let redis = RedisServer::start();
    let mut rc = conn(redis.port);
    populate(&mut rc);
    run(&mut rc, &["HSET", "h:big", "x", &"y".repeat(100)]);
    let theirs = image(&mut rc);
    run(&mut rc, &["SAVE"]);
    let rdir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut rc)
        .unwrap();
    let rdir = std::path::PathBuf::from(&rdir[1]);
    // Redis's file loads here with identical content.
    let dir = temp_dir("persist");
    std::fs::copy(rdir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c = s.client();
    assert_eq!(image(&mut c), theirs);
    // Ours loads into redis-server with identical content.
    run(&mut c, &["SET", "written-here", "yes"]);
    run(&mut c, &["SAVE"]);
    let ours = image(&mut c);
    std::fs::copy(dir.join("dump.rdb"), rdir.join("dump.rdb")).unwrap();
    assert_eq!(
        run(&mut rc, &["DEBUG", "RELOAD", "NOSAVE"]),
        redis::Value::Okay
    );
    assert_eq!(image(&mut rc), ours);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// FLUSHALL with save points configured saves the empty dataset at once, as Redis
/// does, and is still recorded in the AOF although that save reset the dirty counter.
#[test]
fn flushall_with_save_points_saves_at_once() {
    let dir = temp_dir("flushall-save");
    let args = ["--save", "3600 1", "--appendonly", "yes"];
    let mut s = TestServer::start_in(&dir, &args);
    let mut c = s.client();
    run(&mut c, &["SET", "k", "v"]);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1");
    let saves = info_field(&mut c, "rdb_saves");
    run(&mut c, &["FLUSHALL"]);
    // The save reset the counter (Redis's flushAllDataAndResetRDB).
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert_ne!(info_field(&mut c, "rdb_saves"), saves);
    run(&mut c, &["SET", "j", "w"]);
    s.kill9();
    // The AOF replays the FLUSHALL: only the later key is back.
    let s2 = TestServer::start_in(&dir, &args);
    let mut c2 = s2.client();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c2).unwrap();
    assert_eq!(keys, ["j"]);
    drop(s2);
    // And the RDB written by FLUSHALL is empty.
    let s3 = TestServer::start_in(&dir, &["--save", "", "--appendonly", "no"]);
    let mut c3 = s3.client();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c3).unwrap();
    assert_eq!(n, 0);
    drop(s3);
    let _ = std::fs::remove_dir_all(&dir);
}

/// FLUSHALL with save points writes the empty dataset and leaves no unsaved change
/// (Redis's flushAllDataAndResetRDB); FLUSHDB counts the keys it removed; both still
/// reach the AOF when there was nothing to remove.
#[test]
fn flushes_count_changes_as_redis() {
    let dir = temp_dir("flush-dirty");
    let s = TestServer::start_in(&dir, &["--appendonly", "yes", "--save", "3600 1 300 100"]);
    let mut c = s.raw(2);
    let changes = |c: &mut RawConn| -> String {
        let info = c.cmd(&["INFO", "persistence"]);
        info.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .unwrap()
            .to_string()
    };
    c.cmd(&["SET", "key", "value"]);
    assert_eq!(c.cmd(&["FLUSHALL"]), "+OK\r\n");
    assert_eq!(changes(&mut c), "0");
    // Inside a transaction too.
    c.cmd(&["SET", "x", "y"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["FLUSHALL"]);
    assert_eq!(c.cmd(&["EXEC"]), "*1\r\n+OK\r\n");
    assert_eq!(changes(&mut c), "0");
    c.cmd(&["MSET", "a", "1", "b", "2"]);
    assert_eq!(changes(&mut c), "2");
    assert_eq!(c.cmd(&["FLUSHDB"]), "+OK\r\n");
    assert_eq!(changes(&mut c), "4");
    assert_eq!(c.cmd(&["FLUSHDB"]), "+OK\r\n");
    assert_eq!(changes(&mut c), "4");
    let aof = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .unwrap();
    let text = String::from_utf8_lossy(&std::fs::read(aof).unwrap()).into_owned();
    assert_eq!(text.matches("FLUSHDB").count(), 2, "{text}");
    assert_eq!(text.matches("FLUSHALL").count(), 2, "{text}");
}

/// Keys whose TTL passed while the server was down: a master drops them as it loads
/// the file, a replica keeps them until its master's DELs arrive (Redis's rdbLoad
/// skips them only when it runs on a master), hidden from reads meanwhile.
#[test]
fn expired_keys_are_dropped_by_a_master_and_kept_by_a_replica() {
    let dir = temp_dir("persist");
    let s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    let at = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 300)
        .to_string();
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    assert_eq!(c.cmd(&["SET", "gone", "v", "PXAT", &at]), "+OK\r\n");
    assert_eq!(c.cmd(&["SET", "kept", "v"]), "+OK\r\n");
    assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    drop(s);
    // Past the TTL before either server loads the file.
    while c_now_ms() <= at.parse::<u128>().unwrap() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let no_master = free_port().to_string();
    let replica = TestServer::start_in(
        &dir,
        &[
            "--appendonly",
            "no",
            "--save",
            "",
            "--replicaof",
            "127.0.0.1",
            &no_master,
        ],
    );
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["DBSIZE"]), ":2\r\n");
    assert_eq!(r.cmd(&["GET", "gone"]), "$-1\r\n");
    drop(replica);
    let master = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut m = master.raw(2);
    assert_eq!(m.cmd(&["DBSIZE"]), ":1\r\n");
    let info = m.cmd(&["INFO", "keyspace"]);
    assert!(info.contains("db0:keys=1,expires=0"), "{info}");
    drop(master);
    let _ = std::fs::remove_dir_all(&dir);
}

fn c_now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// A value whose LZF compression used to write one byte past its buffer: incompressible
/// bytes that fill it to the end, then a repeat (`util::lzf`). The snapshot writer
/// panicked on it, so every BGSAVE and full sync of a dataset holding it failed, and a
/// compressed list node holding it crashed the server. Now it is stored as it is.
#[test]
fn a_value_that_overran_the_lzf_buffer_saves_and_reloads() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..200)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect();
    let mut value = noise[..160].to_vec();
    value.extend_from_slice(&noise[1..6]);
    let dir = temp_dir("lzf-edge");
    let s = TestServer::start_in(
        &dir,
        &[
            "--appendonly",
            "no",
            "--save",
            "",
            "--list-compress-depth",
            "1",
        ],
    );
    let mut c = s.client();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg(&value)
        .query(&mut c)
        .unwrap();
    // Interior nodes of a list compressed at depth 1 hold it too.
    for _ in 0..4 {
        let mut rpush = redis::cmd("RPUSH");
        rpush.arg("l");
        for _ in 0..200 {
            rpush.arg(&value);
        }
        let _: i64 = rpush.query(&mut c).unwrap();
    }
    assert_eq!(run(&mut c, &["SAVE"]), redis::Value::Okay);
    assert_eq!(run(&mut c, &["DEBUG", "RELOAD"]), redis::Value::Okay);
    let got: Vec<u8> = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(got, value);
    let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
        .arg("l")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(items.len(), 800);
    assert!(items.iter().all(|i| *i == value));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SAVE writes its image to the file a chunk at a time (never whole in memory): an
/// image of several chunks, compressible and incompressible values, keys with TTLs,
/// in two databases, loads back whole. The file is RDB version 10 unless a hash has
/// field TTLs (12): a hash whose field TTL was removed leaves a stale hint behind,
/// which must not make the file 12.
#[test]
fn a_save_of_many_chunks_loads_back_and_states_the_version_it_needs() {
    let dir = temp_dir("persist");
    let version = |dir: &std::path::Path| {
        let bytes = std::fs::read(dir.join("dump.rdb")).unwrap();
        String::from_utf8(bytes[..9].to_vec()).unwrap()
    };
    let mut s = TestServer::start_in(
        &dir,
        &[
            "--appendonly",
            "no",
            "--save",
            "",
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut c = s.client();
    run(&mut c, &["DEBUG", "POPULATE", "30000", "key", "100"]);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..3000 {
        let noise: String = (0..400)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'!' + (x % 90) as u8)
            })
            .collect();
        run(
            &mut c,
            &["SET", &format!("noise:{i}"), &noise, "EX", "100000"],
        );
    }
    run(&mut c, &["SELECT", "5"]);
    run(&mut c, &["HSET", "h", "f", "v", "g", "w"]);
    run(&mut c, &["HEXPIRE", "h", "100000", "FIELDS", "1", "f"]);
    run(&mut c, &["HPERSIST", "h", "FIELDS", "1", "f"]);
    run(&mut c, &["SELECT", "0"]);
    let digest = |c: &mut redis::Connection| run(c, &["DEBUG", "DIGEST"]);
    assert_eq!(run(&mut c, &["SAVE"]), redis::Value::Okay);
    let size = std::fs::metadata(dir.join("dump.rdb")).unwrap().len();
    assert!(size > 2 << 20, "an image of several chunks: {size} bytes");
    assert_eq!(version(&dir), "REDIS0010");
    // A live field TTL needs version 12.
    run(&mut c, &["SELECT", "5"]);
    run(&mut c, &["HEXPIRE", "h", "100000", "FIELDS", "1", "g"]);
    run(&mut c, &["SELECT", "0"]);
    let saved = digest(&mut c);
    assert_eq!(run(&mut c, &["SAVE"]), redis::Value::Okay);
    assert_eq!(version(&dir), "REDIS0012");
    s.kill9();
    let s2 = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c2 = s2.client();
    assert_eq!(digest(&mut c2), saved);
    assert_eq!(run(&mut c2, &["DBSIZE"]), redis::Value::Int(33_000));
    run(&mut c2, &["SELECT", "5"]);
    let ttl: Vec<i64> = redis::cmd("HTTL")
        .arg("h")
        .arg("FIELDS")
        .arg("2")
        .arg("f")
        .arg("g")
        .query(&mut c2)
        .unwrap();
    assert_eq!(ttl[0], -1);
    assert!(ttl[1] > 0);
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}
