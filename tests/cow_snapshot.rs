//! Forkless BGSAVE and AOF rewrite by key-level copy-on-write (persistence/cow.rs):
//! the file holds the dataset of the instant the snapshot began, while clients keep
//! changing, deleting, creating, expiring, renaming, moving and flushing keys and
//! swapping databases between walker slices. `DEBUG SNAPSHOT-MANUAL 1` stops the
//! walker from moving by itself, and `DEBUG SNAPSHOT-STEP n` walks n buckets, so
//! the interleaving of writes and walk is deterministic.

mod common;

use common::*;
use redis::Connection;

const ARGS: &[&str] = &["--appendonly", "no", "--save", ""];

fn cmd(c: &mut Connection, args: &[&str]) -> redis::Value {
    run(c, args)
}

/// Keys of every type and encoding, some with a TTL, in databases 0, 2 and 5.
fn populate(c: &mut Connection, n: usize) {
    for db in [0, 2, 5] {
        cmd(c, &["SELECT", &db.to_string()]);
        for i in 0..n {
            let k = format!("k{i}");
            match i % 8 {
                0 => cmd(c, &["SET", &k, &i.to_string()]),
                1 => cmd(c, &["SET", &k, &format!("v{i}")]),
                2 => cmd(c, &["SET", &k, &"long value ".repeat(10), "EX", "100000"]),
                3 => cmd(c, &["RPUSH", &k, "a", "b", &i.to_string()]),
                4 => cmd(c, &["SADD", &k, "x", "y", &i.to_string()]),
                5 => cmd(c, &["ZADD", &k, "1", "a", "2.5", &format!("m{i}")]),
                6 => cmd(c, &["HSET", &k, "f", "v", "n", &i.to_string()]),
                _ => cmd(c, &["SET", &k, &format!("t{i}"), "PX", "100000000"]),
            };
        }
    }
    cmd(c, &["SELECT", "0"]);
}

fn step(c: &mut Connection, buckets: usize) -> bool {
    let busy: i64 = redis::cmd("DEBUG")
        .arg("SNAPSHOT-STEP")
        .arg(buckets)
        .query(c)
        .unwrap();
    busy == 1
}

/// Drives the walker to the end, and waits for the writer.
fn finish(c: &mut Connection) {
    while step(c, 16) {}
    wait_until(|| info_field(c, "rdb_bgsave_in_progress") == "0");
}

/// Sends a command whose failure (WRONGTYPE, no such key) is fine: it changes nothing.
fn try_cmd(c: &mut Connection, args: &[&str]) {
    let _: redis::RedisResult<redis::Value> = redis::cmd(args[0]).arg(&args[1..]).query(c);
}

/// Writes of every kind against key `i` of the current database.
fn mutate(c: &mut Connection, i: usize, round: usize) {
    let k = format!("k{i}");
    let cmd = try_cmd;
    match (i + round) % 14 {
        0 => cmd(c, &["SET", &k, "overwritten"]),
        1 => cmd(c, &["DEL", &k]),
        2 => cmd(c, &["APPEND", &k, "+"]),
        3 => cmd(c, &["INCR", &format!("k{}", i - i % 8)]),
        4 => cmd(c, &["LPUSH", &format!("k{}", i - i % 8 + 3), "new"]),
        5 => cmd(c, &["SADD", &format!("k{}", i - i % 8 + 4), "new"]),
        6 => cmd(c, &["ZADD", &format!("k{}", i - i % 8 + 5), "9", "new"]),
        7 => cmd(c, &["HSET", &format!("k{}", i - i % 8 + 6), "f", "new"]),
        8 => cmd(c, &["EXPIRE", &k, "5000"]),
        9 => cmd(c, &["PERSIST", &format!("k{}", i - i % 8 + 2)]),
        10 => cmd(
            c,
            &[
                "RENAME",
                &format!("k{}", i - i % 8 + 1),
                &format!("renamed{i}"),
            ],
        ),
        11 => cmd(c, &["MOVE", &k, "9"]),
        12 => cmd(c, &["SET", &format!("created{i}"), "new key"]),
        _ => cmd(c, &["GETDEL", &k]),
    };
}

fn restart(s: &mut TestServer, dir: &std::path::Path) -> TestServer {
    s.kill9();
    TestServer::start_in(dir, ARGS)
}

#[test]
fn bgsave_is_point_in_time_under_writes_rehash_and_flush() {
    let dir = temp_dir("cow");
    let mut s = TestServer::start_in(&dir, ARGS);
    let mut c = s.client();
    populate(&mut c, 400);
    // Keys that expire during the snapshot: saved with their expiry, gone on load.
    cmd(&mut c, &["SET", "short", "x", "PX", "30"]);
    let mut expected = image(&mut c);
    expected.retain(|l| !l.starts_with("0 short "));
    cmd(&mut c, &["DEBUG", "SNAPSHOT-MANUAL", "1"]);
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving started");
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "1");
    // Redis's answers while an RDB save runs.
    for args in [&["BGSAVE"][..], &["BGSAVE", "SCHEDULE"], &["SAVE"]] {
        let e = redis::cmd(args[0])
            .arg(&args[1..])
            .query::<String>(&mut c)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("Background save already in progress"),
            "{args:?}: {e}"
        );
    }
    let mut round = 0;
    let mut busy = true;
    while busy {
        for db in ["0", "2"] {
            cmd(&mut c, &["SELECT", db]);
            for j in 0..6 {
                let i = (round * 37 + j * 53) % 400;
                mutate(&mut c, i, round);
            }
        }
        cmd(&mut c, &["SELECT", "0"]);
        match round {
            3 => {
                // Growth mid-walk: the table doubles (incremental rehash) twice.
                let mut mset = vec!["MSET".to_string()];
                for i in 0..3000 {
                    mset.push(format!("grow{i}"));
                    mset.push("g".into());
                }
                run(&mut c, &mset.iter().map(|s| s.as_str()).collect::<Vec<_>>());
            }
            6 => {
                // Shrink mid-walk: drop the growth again; the cron shrinks.
                for i in 0..3000 {
                    cmd(&mut c, &["UNLINK", &format!("grow{i}")]);
                }
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            8 => {
                cmd(&mut c, &["SWAPDB", "0", "2"]);
            }
            10 => {
                cmd(&mut c, &["SELECT", "5"]);
                cmd(&mut c, &["FLUSHDB"]);
                cmd(&mut c, &["SET", "after-flush", "1"]);
                cmd(&mut c, &["SELECT", "0"]);
            }
            12 => {
                cmd(&mut c, &["SWAPDB", "0", "2"]);
                cmd(&mut c, &["GET", "short"]);
            }
            _ => {}
        }
        busy = step(&mut c, 2);
        round += 1;
    }
    assert!(round > 20, "the walk should span many slices ({round})");
    wait_until(|| info_field(&mut c, "rdb_bgsave_in_progress") == "0");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    let cow: u64 = info_field(&mut c, "rdb_last_cow_size").parse().unwrap();
    assert!(
        cow > 0,
        "keys changed before the walker reached them were copied"
    );
    let after = image(&mut c);
    assert_ne!(after, expected);
    let mut s2 = restart(&mut s, &dir);
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), expected);
    // The same file loads into redis-server 7.0 with the same contents.
    if redis_server_available() {
        let redis = RedisServer::start();
        let mut rc = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port))
            .unwrap()
            .get_connection()
            .unwrap();
        let rdir: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("dir")
            .query(&mut rc)
            .unwrap();
        std::fs::copy(
            dir.join("dump.rdb"),
            std::path::Path::new(&rdir[1]).join("dump.rdb"),
        )
        .unwrap();
        assert_eq!(
            run(&mut rc, &["DEBUG", "RELOAD", "NOSAVE"]),
            redis::Value::Okay
        );
        assert_eq!(image(&mut rc), expected);
    }
    s2.kill9();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn flushall_kills_bgsave_and_a_new_one_follows() {
    let dir = temp_dir("cow");
    let mut s = TestServer::start_in(&dir, ARGS);
    let mut c = s.client();
    populate(&mut c, 300);
    cmd(&mut c, &["DEBUG", "SNAPSHOT-MANUAL", "1"]);
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving started");
    step(&mut c, 4);
    // FLUSHALL kills the save (as Redis kills its child): not an error.
    cmd(&mut c, &["FLUSHALL"]);
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "0");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert!(!dir.join("dump.rdb").exists());
    cmd(&mut c, &["SET", "after", "1"]);
    cmd(&mut c, &["RPUSH", "list", "a", "b"]);
    let expected = image(&mut c);
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving started");
    cmd(&mut c, &["SET", "later", "1"]);
    finish(&mut c);
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    let s2 = restart(&mut s, &dir);
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), expected);
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bgsave_runs_by_itself_and_debug_reload_waits_for_it() {
    let dir = temp_dir("cow");
    let mut s = TestServer::start_in(&dir, ARGS);
    let mut c = s.client();
    cmd(&mut c, &["DEBUG", "POPULATE", "20000"]);
    populate(&mut c, 100);
    let expected = image(&mut c);
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving started");
    wait_until(|| info_field(&mut c, "rdb_bgsave_in_progress") == "0");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    // DEBUG RELOAD while a BGSAVE is in progress finishes it first.
    cmd(&mut c, &["DEBUG", "SNAPSHOT-MANUAL", "1"]);
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving started");
    cmd(&mut c, &["DEL", "k1"]);
    assert_eq!(run(&mut c, &["DEBUG", "RELOAD"]), redis::Value::Okay);
    let mut now = expected.clone();
    now.retain(|l| !l.starts_with("0 k1 "));
    assert_eq!(image(&mut c), now);
    let s2 = restart(&mut s, &dir);
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), now);
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn aof_rewrite_uses_the_incremental_snapshot() {
    let dir = temp_dir("cow");
    let args = &["--appendonly", "yes", "--save", ""];
    let mut s = TestServer::start_in(&dir, args);
    let mut c = s.client();
    populate(&mut c, 200);
    cmd(&mut c, &["DEBUG", "SNAPSHOT-MANUAL", "1"]);
    let r: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    assert_eq!(r, "Background append only file rewriting started");
    // An AOF rewrite is "another child": BGSAVE refuses unless scheduled.
    let e = redis::cmd("BGSAVE").query::<String>(&mut c).unwrap_err();
    assert!(e
        .to_string()
        .contains("Another child process is active (AOF?)"));
    let r: String = redis::cmd("BGSAVE").arg("SCHEDULE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving scheduled");
    let mut round = 0;
    let mut busy = true;
    while busy {
        for j in 0..5 {
            mutate(&mut c, (round * 31 + j * 17) % 200, round);
        }
        if round == 5 {
            cmd(&mut c, &["SWAPDB", "0", "5"]);
        }
        busy = step(&mut c, 2);
        round += 1;
        if !busy {
            // The scheduled BGSAVE starts once the rewrite is done: walk it too.
            cmd(&mut c, &["DEBUG", "SNAPSHOT-MANUAL", "0"]);
        }
    }
    wait_until(|| {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
        info.contains("aof_rewrite_in_progress:0") && info.contains("rdb_bgsave_in_progress:0")
    });
    let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
    assert!(info.contains("aof_last_bgrewrite_status:ok"), "{info}");
    let expected = image(&mut c);
    // Restart with AOF on, so the rewritten AOF (new base + incremental file) is what
    // loads: the scheduled BGSAVE's RDB is an image of an earlier instant.
    s.kill9();
    let s2 = TestServer::start_in(&dir, args);
    let mut c2 = s2.client();
    assert_eq!(image(&mut c2), expected);
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every type and encoding, 7.4 hash field TTLs included (listpackex and hashtable),
/// so the writer meets a hash that needs RDB version 12.
fn populate_all_encodings(c: &mut Connection) {
    let big: Vec<String> = (0..300).map(|i| format!("member-{i}")).collect();
    cmd(c, &["SET", "int", "12345"]);
    cmd(c, &["SET", "emb", "short"]);
    cmd(c, &["SET", "raw", &"x".repeat(100)]);
    cmd(c, &["RPUSH", "list-small", "a", "b"]);
    cmd(c, &["SADD", "set-int", "1", "2", "3"]);
    cmd(c, &["SADD", "set-small", "a", "b"]);
    cmd(c, &["ZADD", "zset-small", "1", "a", "2", "b"]);
    cmd(c, &["HSET", "hash-small", "f", "v"]);
    cmd(c, &["HSET", "hash-ttl-small", "f1", "v1", "f2", "v2"]);
    cmd(
        c,
        &["HEXPIRE", "hash-ttl-small", "100000", "FIELDS", "1", "f1"],
    );
    cmd(c, &["XADD", "stream", "1-1", "f", "v"]);
    cmd(c, &["XGROUP", "CREATE", "stream", "g", "0"]);
    for (i, m) in big.iter().enumerate() {
        let score = i.to_string();
        cmd(c, &["RPUSH", "list-big", m]);
        cmd(c, &["SADD", "set-big", m]);
        cmd(c, &["ZADD", "zset-big", &score, m]);
        cmd(c, &["HSET", "hash-big", m, &score]);
        cmd(c, &["HSET", "hash-ttl-big", m, &score]);
    }
    cmd(
        c,
        &[
            "HPEXPIRE",
            "hash-ttl-big",
            "90000000",
            "FIELDS",
            "2",
            "member-1",
            "member-7",
        ],
    );
}

/// Field TTLs of the hashes that have them, for comparing images.
fn field_ttls(c: &mut Connection) -> Vec<redis::Value> {
    let a = cmd(
        c,
        &["HPEXPIRETIME", "hash-ttl-small", "FIELDS", "2", "f1", "f2"],
    );
    let b = cmd(
        c,
        &[
            "HPEXPIRETIME",
            "hash-ttl-big",
            "FIELDS",
            "3",
            "member-1",
            "member-7",
            "member-2",
        ],
    );
    vec![a, b]
}

#[test]
fn snapshots_aof_rewrite_and_full_sync_keep_field_ttls() {
    let dir = temp_dir("cow-fields");
    let mut s = TestServer::start_in(&dir, ARGS);
    let mut c = s.client();
    populate_all_encodings(&mut c);
    let expected = (image(&mut c), field_ttls(&mut c));

    // BGSAVE, then a restart from the RDB.
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving started");
    wait_until(|| info_field(&mut c, "rdb_bgsave_in_progress") == "0");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    s.kill9();
    let mut s = restart(&mut s, &dir);
    let mut c = s.client();
    assert_eq!((image(&mut c), field_ttls(&mut c)), expected);

    // An AOF rewrite's base, then a restart from the AOF.
    cmd(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    wait_until(|| info_field(&mut c, "aof_rewrite_in_progress") == "0");
    let r: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    assert_eq!(r, "Background append only file rewriting started");
    wait_until(|| info_field(&mut c, "aof_rewrite_in_progress") == "0");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    s.kill9();
    let s = TestServer::start_in(&dir, &["--appendonly", "yes", "--save", ""]);
    let mut c = s.client();
    assert_eq!((image(&mut c), field_ttls(&mut c)), expected);

    // A full sync.
    let port = s.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.client();
    wait_until(|| {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
        info.contains("master_link_status:up")
    });
    assert_eq!((image(&mut r), field_ttls(&mut r)), expected);
    drop(replica);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
