//! Diskless full resynchronizations from a Cinnabar master (`repl-diskless-sync yes`):
//! the copy-on-write snapshot's image is streamed to the replicas as it is produced,
//! framed `$EOF:<mark>` … mark, and the stream follows once the replica ACKs.

mod common;

use common::*;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A master logging at `notice` into its directory's `master.log`.
fn logging_master(tag: &str) -> (TestServer, PathBuf) {
    let dir = temp_dir(tag);
    let log = dir.join("master.log");
    let master = TestServer::start_in(
        &dir,
        &["--logfile", log.to_str().unwrap(), "--loglevel", "notice"],
    );
    (master, log)
}

fn log_has(log: &Path, line: &str) -> bool {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(line)
}

/// Reads a full resynchronization's start off a raw replica socket: `+FULLRESYNC`,
/// `$EOF:<mark>`, then the image's first bytes.
fn read_stream_start(s: &mut std::net::TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(5).any(|w| w == b"REDIS") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    got
}

fn raw_replica(port: u16) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"REPLCONF capa eof capa psync2\r\n").unwrap();
    // PSYNC with a reply still pending is refused, as by Redis.
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    s.write_all(b"PSYNC ? -1\r\n").unwrap();
    s
}

#[test]
fn streamed_image_holds_the_instant_and_writes_made_meanwhile_follow() {
    let (master, log) = logging_master("diskless-cow");
    let mut m = master.raw(2);
    m.cmd(&["DEBUG", "POPULATE", "3000", "key", "100"]);
    // About 0.3 s of streaming, so the writes below land while it runs.
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "100"]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| log_has(&log, "target: replicas sockets"));
    for i in 0..3000 {
        match i % 3 {
            0 => m.cmd(&["DEL", &format!("key:{i}")]),
            1 => m.cmd(&["APPEND", &format!("key:{i}"), "+"]),
            _ => m.cmd(&["SET", &format!("new:{i}"), "x"]),
        };
    }
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    wait_replica_synced(master.port, replica.port);
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["DBSIZE"]), ":3000\r\n");
    assert_eq!(r.cmd(&["EXISTS", "key:0"]), ":0\r\n");
    assert_eq!(r.cmd(&["STRLEN", "key:1"]), ":101\r\n");
    assert!(log_has(
        &log,
        "Diskless rdb transfer, done reading from pipe, 1 replicas still up."
    ));
    assert!(log_has(&log, "Waiting for REPLCONF ACK from replica"));
    assert!(!log_has(&log, "target: disk"));
}

/// Redis's suite ("Diskless load swapdb ... replica enter loading"): a Cinnabar
/// replica of a slow diskless Cinnabar master shows itself loading while the image
/// streams in, keeps its old data when the transfer is cut, and the master gives up
/// the snapshot once its last replica is gone.
#[test]
fn replica_loads_while_the_image_streams_and_keeps_its_data_when_cut() {
    let (master, log) = logging_master("diskless-loading");
    let replica = TestServer::start_with(&["--repl-diskless-load", "swapdb"]);
    let mut r = replica.raw(2);
    r.cmd(&["DEBUG", "POPULATE", "200", "replica", "10"]);
    r.cmd(&["SET", "mykey", "myvalue"]);
    let mut m = master.raw(2);
    m.cmd(&["DEBUG", "POPULATE", "1000", "master", "1000"]);
    // 10 ms a key: ten seconds of streaming.
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until(|| r.info_field("persistence", "loading") == "1");
    assert_eq!(r.info_field("persistence", "async_loading"), "0");
    assert_eq!(m.info_field("persistence", "rdb_bgsave_in_progress"), "1");
    // The next attempt must not start at once: the replica is caught between syncs.
    m.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "5"]);
    assert_eq!(m.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), ":1\r\n");
    wait_until(|| r.info_field("persistence", "loading") == "0");
    assert_eq!(r.cmd(&["GET", "mykey"]), "$7\r\nmyvalue\r\n");
    assert_eq!(r.cmd(&["DBSIZE"]), ":201\r\n");
    wait_until(|| m.info_field("persistence", "rdb_bgsave_in_progress") == "0");
    assert!(log_has(
        &log,
        "Diskless rdb transfer, last replica dropped, killing fork child"
    ));
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    m.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    wait_replica_synced(master.port, replica.port);
    assert_eq!(r.cmd(&["DBSIZE"]), ":1000\r\n");
    assert_eq!(r.cmd(&["GET", "mykey"]), "$-1\r\n");
}

/// Once a streamed image has begun going out, a replica arriving cannot share it: it
/// waits (`wait_bgsave`, no `+FULLRESYNC` yet) and gets the next snapshot.
#[test]
fn replica_arriving_mid_stream_waits_for_the_next_image() {
    let (master, log) = logging_master("diskless-late");
    let mut m = master.raw(2);
    m.cmd(&["CONFIG", "SET", "rdbcompression", "no"]);
    m.cmd(&["DEBUG", "POPULATE", "200", "big", "10000"]);
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "5000"]);
    let mut first = raw_replica(master.port);
    read_stream_start(&mut first);
    let port = master.port.to_string();
    let second = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| log_has(&log, "Current BGSAVE has socket target"));
    wait_until(|| m.info_field("replication", "connected_slaves") == "2");
    assert!(m
        .info_field("replication", "slave1")
        .contains("state=wait_bgsave"));
    assert_eq!(m.info_field("stats", "sync_full"), "2");
    m.cmd(&["SET", "after", "first"]);
    drop(first);
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    wait_replica_synced(master.port, second.port);
    let mut r = second.raw(2);
    assert_eq!(r.cmd(&["DBSIZE"]), ":201\r\n");
    assert_eq!(r.cmd(&["GET", "after"]), "$5\r\nfirst\r\n");
}

/// A replica that stops reading holds the stream back for everyone; after
/// `repl-timeout` it is disconnected (Redis's "full sync" timeout) and, being the
/// last, the snapshot is abandoned.
#[test]
fn stuck_replica_times_out_during_a_streamed_image() {
    let (master, log) = logging_master("diskless-stuck");
    let mut m = master.raw(2);
    m.cmd(&["CONFIG", "SET", "rdbcompression", "no"]);
    m.cmd(&["DEBUG", "POPULATE", "100", "big", "200000"]);
    m.cmd(&["CONFIG", "SET", "repl-timeout", "1"]);
    let mut stuck = raw_replica(master.port);
    read_stream_start(&mut stuck);
    wait_until(|| log_has(&log, "Disconnecting timedout replica (full sync)"));
    wait_until(|| m.info_field("replication", "connected_slaves") == "0");
    wait_until(|| m.info_field("persistence", "rdb_bgsave_in_progress") == "0");
    assert!(log_has(&log, "last replica dropped"));
    assert_eq!(m.cmd(&["PING"]), "+PONG\r\n");
}

/// A streamed image cannot be patched afterwards, so it states RDB version 12 from
/// its start when a hash has field TTLs, and 10 otherwise (Redis 7.0 replicas read it).
#[test]
fn streamed_image_version_follows_hash_field_ttls() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    m.cmd(&["SET", "plain", "x"]);
    let mut s = raw_replica(master.port);
    let start = read_stream_start(&mut s);
    assert!(start.windows(9).any(|w| w == b"REDIS0010"));
    drop(s);
    m.cmd(&["HSET", "h", "f", "v", "g", "w"]);
    assert_eq!(
        m.cmd(&["HEXPIRE", "h", "1000", "FIELDS", "1", "f"]),
        "*1\r\n:1\r\n"
    );
    let mut s = raw_replica(master.port);
    let start = read_stream_start(&mut s);
    assert!(start.windows(9).any(|w| w == b"REDIS0012"));
    drop(s);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_replica_synced(master.port, replica.port);
    let mut r = replica.raw(2);
    let ttls = r.cmd(&["HTTL", "h", "FIELDS", "2", "f", "g"]);
    let lines: Vec<&str> = ttls.lines().collect();
    assert_eq!((lines[0], lines[2]), ("*2", ":-1"), "{ttls}");
    let ttl: i64 = lines[1][1..].parse().unwrap();
    assert!((990..=1000).contains(&ttl), "{ttls}");
    assert_eq!(r.cmd(&["HLEN", "h"]), ":2\r\n");
}

/// FLUSHALL ends a replication snapshot, as Redis kills its RDB child: the replica
/// is disconnected, reconnects and syncs the emptied dataset.
#[test]
fn flushall_cancels_the_streamed_image_and_the_replica_resyncs() {
    let (master, log) = logging_master("diskless-flushall");
    let mut m = master.raw(2);
    m.cmd(&["DEBUG", "POPULATE", "1000", "k", "100"]);
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000"]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| log_has(&log, "target: replicas sockets"));
    // The image is still streaming (ten seconds of it): the delay is lifted only
    // after FLUSHALL, or the image could finish first and nothing would be cancelled.
    assert_eq!(m.cmd(&["FLUSHALL"]), "+OK\r\n");
    m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    m.cmd(&["SET", "after", "flush"]);
    wait_replica_synced(master.port, replica.port);
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["DBSIZE"]), ":1\r\n");
    assert!(log_has(&log, "Diskless rdb transfer failed"));
    assert_eq!(m.info_field("stats", "sync_full"), "2");
}

/// redis-server reads our streamed images too, and starts its stream on its ACK.
#[test]
fn redis_server_replica_gets_a_streamed_image() {
    if !redis_server_available() {
        return;
    }
    let (master, log) = logging_master("diskless-redis");
    let mut m = master.raw(2);
    m.cmd(&["DEBUG", "POPULATE", "2000", "k", "50"]);
    m.cmd(&["RPUSH", "l", "a", "b"]);
    let r = RedisServer::start();
    let mut c = r.raw(2);
    c.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_replica_synced(master.port, r.port);
    m.cmd(&["SET", "after", "sync"]);
    wait_replica_synced(master.port, r.port);
    assert!(log_has(&log, "target: replicas sockets"));
}
