//! Dual-channel full sync (`dual-channel-replication-enabled`, Valkey 8's protocol):
//! the image on an RDB channel, the stream from the image's instant on the main
//! channel, buffered by the replica while it loads. Cinnabar on both sides, the
//! fallback to one channel against masters without it, the REPLCONF options' errors,
//! and a channel killed mid-sync.

mod common;

use common::*;

const DUAL: &[&str] = &["--dual-channel-replication-enabled", "yes"];

fn info(c: &mut RawConn, section: &str, field: &str) -> String {
    let text = c.cmd(&["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.to_string()))
        .unwrap_or_default()
}

fn replica_args(master: &TestServer, dual: bool) -> Vec<String> {
    let mut a = vec![
        "--replicaof".to_string(),
        "127.0.0.1".to_string(),
        master.port.to_string(),
    ];
    if dual {
        a.extend(DUAL.iter().map(|s| s.to_string()));
    }
    a
}

fn start_replica(master: &TestServer, dual: bool) -> TestServer {
    let args = replica_args(master, dual);
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    TestServer::start_with(&args)
}

/// Writes made while the image is taken (the walker stepped by hand) reach the
/// replica through the main channel, which attached at the image's offset.
#[test]
fn writes_during_the_image_come_through_the_main_channel() {
    let master = TestServer::start_with(DUAL);
    let mut m = master.raw(2);
    for i in 0..300 {
        m.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    m.cmd(&["RPUSH", "list", "a", "b"]);
    m.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "1"]);
    let replica = start_replica(&master, true);
    // Two connections: the RDB channel waiting for its image, the main channel
    // attached to the stream (Valkey's `bg_transfer`).
    wait_until(|| info(&mut m, "replication", "connected_slaves") == "2");
    wait_until(|| {
        let text = m.cmd(&["INFO", "replication"]);
        text.contains("state=wait_bgsave") && text.contains("state=bg_transfer")
    });
    m.cmd(&["DEBUG", "SNAPSHOT-STEP", "4"]);
    for i in 0..300 {
        if i % 3 == 0 {
            m.cmd(&["DEL", &format!("k{i}")]);
        } else if i % 3 == 1 {
            m.cmd(&["APPEND", &format!("k{i}"), "+"]);
        }
    }
    m.cmd(&["RPUSH", "list", "c"]);
    m.cmd(&["SELECT", "5"]);
    m.cmd(&["SET", "in5", "yes"]);
    m.cmd(&["SELECT", "0"]);
    m.cmd(&["SET", "new", "key"]);
    wait_until(|| m.cmd(&["DEBUG", "SNAPSHOT-STEP", "64"]) == ":0\r\n");
    m.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "0"]);
    wait_replica_synced(master.port, replica.port);
    // The RDB channel is gone; the main channel is an ordinary online replica.
    wait_until(|| info(&mut m, "replication", "connected_slaves") == "1");
    // Online once its ACK, sent as the sync completed, is read.
    wait_until(|| info(&mut m, "replication", "slave0").contains("state=online"));
    assert_eq!(info(&mut m, "stats", "sync_full"), "1");
    assert_eq!(info(&mut m, "stats", "sync_partial_ok"), "1");
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["GET", "k1"]), "$3\r\nv1+\r\n");
    assert_eq!(r.cmd(&["GET", "k2"]), "$2\r\nv2\r\n");
    assert_eq!(r.cmd(&["EXISTS", "k0"]), ":0\r\n");
    assert_eq!(
        r.cmd(&["LRANGE", "list", "0", "-1"]),
        "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(r.cmd(&["GET", "new"]), "$3\r\nkey\r\n");
    r.cmd(&["SELECT", "5"]);
    assert_eq!(r.cmd(&["GET", "in5"]), "$3\r\nyes\r\n");
    // Later writes follow as usual.
    m.cmd(&["INCR", "after"]);
    wait_replica_synced(master.port, replica.port);
}

/// A master with dual-channel replication disabled ignores the capability: the
/// replica syncs over one channel.
#[test]
fn a_master_without_it_syncs_a_dual_channel_replica_over_one_channel() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    m.cmd(&["SET", "a", "1"]);
    let replica = start_replica(&master, true);
    wait_replica_synced(master.port, replica.port);
    assert_eq!(info(&mut m, "replication", "connected_slaves"), "1");
    assert_eq!(info(&mut m, "stats", "sync_full"), "1");
    assert_eq!(info(&mut m, "stats", "sync_partial_ok"), "0");
    m.cmd(&["SET", "b", "2"]);
    wait_replica_synced(master.port, replica.port);
}

/// Redis 7 masters do not know the capability: one channel too.
#[test]
fn a_dual_channel_replica_of_redis_server_syncs_over_one_channel() {
    if !redis_server_available() {
        eprintln!("redis-server not installed: skipped");
        return;
    }
    let master = RedisServer::start();
    let mut m = master.raw(2);
    m.cmd(&["SET", "a", "1"]);
    m.cmd(&["RPUSH", "l", "x", "y"]);
    let port = master.port.to_string();
    let mut args = vec!["--replicaof", "127.0.0.1", &port];
    args.extend_from_slice(DUAL);
    let replica = TestServer::start_with(&args);
    wait_replica_synced(master.port, replica.port);
    m.cmd(&["SET", "b", "2"]);
    wait_replica_synced(master.port, replica.port);
}

/// The options' errors, and the PSYNC answer with the capability on and off.
#[test]
fn replconf_options_and_the_dualchannelsync_answer() {
    let master = TestServer::start_with(DUAL);
    let mut c = master.raw(2);
    let not_integer = "-ERR value is not an integer or out of range\r\n";
    for (option, value, reply) in [
        (
            "rdb-channel",
            "2",
            "-ERR value is out of range, value must between 0 and 1\r\n",
        ),
        ("rdb-channel", "x", not_integer),
        (
            "set-rdb-client-id",
            "99999",
            "-ERR Unrecognized RDB client id 99999\r\n",
        ),
        ("set-rdb-client-id", "x", not_integer),
    ] {
        assert_eq!(
            c.cmd(&["REPLCONF", option, value]),
            reply,
            "{option} {value}"
        );
    }
    assert_eq!(
        c.cmd(&[
            "REPLCONF",
            "capa",
            "eof",
            "capa",
            "psync2",
            "capa",
            "dual-channel"
        ]),
        "+OK\r\n"
    );
    assert_eq!(c.cmd(&["PSYNC", "?", "-1"]), "+DUALCHANNELSYNC\r\n");
    // Disabled: the capability is one this master does not understand.
    let mut admin = master.raw(2);
    admin.cmd(&["CONFIG", "SET", "dual-channel-replication-enabled", "no"]);
    let mut c = master.raw(2);
    c.cmd(&[
        "REPLCONF",
        "capa",
        "eof",
        "capa",
        "psync2",
        "capa",
        "dual-channel",
    ]);
    assert!(c.cmd(&["PSYNC", "?", "-1"]).starts_with("+FULLRESYNC "));
}

/// The RDB channel killed mid-sync: the replica gives up both channels and syncs
/// again.
#[test]
fn a_killed_rdb_channel_is_retried() {
    let master = TestServer::start_with(DUAL);
    let mut m = master.raw(2);
    for i in 0..100 {
        m.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    m.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "1"]);
    let replica = start_replica(&master, true);
    wait_until(|| {
        m.cmd(&["INFO", "replication"])
            .contains("state=bg_transfer")
    });
    // The RDB channel is the connection that sent SYNC (the main channel PSYNC).
    let list = m.cmd(&["CLIENT", "LIST", "TYPE", "replica"]);
    let id = list
        .lines()
        .find(|l| l.contains("cmd=sync "))
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .unwrap_or_else(|| panic!("no RDB channel in {list}"))
        .to_string();
    assert_eq!(m.cmd(&["CLIENT", "KILL", "ID", &id]), ":1\r\n");
    m.cmd(&["SET", "during", "retry"]);
    m.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "0"]);
    wait_replica_synced(master.port, replica.port);
    assert_eq!(replica.raw(2).cmd(&["GET", "during"]), "$5\r\nretry\r\n");
}

/// The master closes the RDB channel once its image is out, possibly before the
/// replica has decoded all of it (here slowed by `key-load-delay`): that close is no
/// failure. One full sync, no retry.
#[test]
fn the_rdb_channel_closed_behind_its_image_is_no_failure() {
    let master = TestServer::start_with(DUAL);
    let mut m = master.raw(2);
    // Enough that the image, and the close behind it, wait in the socket while the
    // replica decodes slowly.
    m.cmd(&["DEBUG", "POPULATE", "20000", "k", "100"]);
    let mut args = replica_args(&master, true);
    args.extend(["--key-load-delay".to_string(), "20".to_string()]);
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let replica = TestServer::start_with(&args);
    wait_replica_synced(master.port, replica.port);
    assert_eq!(info(&mut m, "stats", "sync_full"), "1");
    assert_eq!(replica.raw(2).cmd(&["DBSIZE"]), ":20000\r\n");
}

/// An RDB channel whose image is out but whose main channel never comes holds the
/// stream for it (bounded by the replica output limit) and costs nothing meanwhile:
/// the event loop sleeps as usual (it woke every millisecond when such a channel
/// counted as starved for image bytes).
#[test]
fn an_rdb_channel_waiting_for_its_main_channel_leaves_the_loop_idle() {
    use std::io::{Read, Write};
    let master = TestServer::start_with(&["--hz", "10"]);
    let mut m = master.raw(2);
    m.cmd(&["SET", "a", "1"]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", master.port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(b"REPLCONF capa eof rdb-only 1 rdb-channel 1 listening-port 1\r\n")
        .unwrap();
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    s.write_all(b"SYNC\r\n").unwrap();
    // $ENDOFF, then $EOF:<mark>, the image and the mark again.
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&got)));
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(at) = text.find("$EOF:") {
            let mark = &got[at + 5..at + 45];
            if got.len() >= at + 47 + 40 && got.ends_with(mark) {
                break;
            }
        }
    }
    assert!(String::from_utf8_lossy(&got).starts_with("$ENDOFF:"));
    let cycles = |m: &mut RawConn| -> u64 { info(m, "stats", "eventloop_cycles").parse().unwrap() };
    let before = cycles(&mut m);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = cycles(&mut m);
    // hz 10: a few turns in half a second; polling for image bytes made one a
    // millisecond (about 500).
    assert!(after - before < 100, "{before} -> {after}");
    // It still holds the stream for its main channel.
    assert!(m.cmd(&["INFO", "replication"]).contains("state=send_bulk"));
}
