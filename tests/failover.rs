//! FAILOVER (coordinated failover to a replica) and pause purposes: the command's
//! errors, a failover to a Cinnabar replica ending with the roles swapped and a
//! partial resync, a failover waiting on a replica that never acknowledges (its pause
//! is not CLIENT PAUSE's: CLIENT UNPAUSE leaves it; REPLICAOF and SYNC are refused),
//! ABORT, the timeout, and PSYNC FAILOVER's refusals.

mod common;

use common::*;
use std::io::{BufRead, Write};
use std::time::Duration;

fn info(c: &mut RawConn, section: &str, field: &str) -> String {
    let text = c.cmd(&["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.to_string()))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

fn failover_state(port: u16) -> String {
    info(
        &mut RawConn::connect(port, 2),
        "replication",
        "master_failover_state",
    )
}

/// A replica on a plain socket that announces `listening_port` and never acknowledges
/// anything, so a failover to it waits.
struct SilentReplica {
    _sock: std::net::TcpStream,
    r: std::io::BufReader<std::net::TcpStream>,
}

impl SilentReplica {
    fn connect(master: u16, listening_port: u16) -> SilentReplica {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", master)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let port = listening_port.to_string();
        write!(
            s,
            "*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n${}\r\n{port}\r\n",
            port.len()
        )
        .unwrap();
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        assert_eq!(l, "+OK\r\n");
        s.write_all(b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n")
            .unwrap();
        l.clear();
        r.read_line(&mut l).unwrap();
        assert!(l.starts_with("+FULLRESYNC "), "{l}");
        SilentReplica { _sock: s, r }
    }

    /// Reads the image (keepalive newlines, `$<len>`, the payload): the master then
    /// lists it online.
    fn take_image(&mut self) {
        use std::io::Read;
        let mut l = String::new();
        while l.trim_end().is_empty() {
            l.clear();
            self.r.read_line(&mut l).unwrap();
        }
        let len: usize = l.trim_end().strip_prefix('$').unwrap().parse().unwrap();
        let mut buf = vec![0; len];
        self.r.read_exact(&mut buf).unwrap();
    }
}

fn online(master: u16, replica_port: u16) -> bool {
    let text = RawConn::connect(master, 2).cmd(&["INFO", "replication"]);
    text.contains(&format!("port={replica_port},state=online"))
}

#[test]
fn failover_argument_errors() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    m.check(&[
        (
            &["FAILOVER"],
            "-ERR FAILOVER requires connected replicas.\r\n",
        ),
        (&["FAILOVER", "ABORT"], "-ERR No failover in progress.\r\n"),
        (
            &["FAILOVER", "TIMEOUT", "0"],
            "-ERR FAILOVER timeout must be greater than 0\r\n",
        ),
        (
            &["FAILOVER", "TIMEOUT", "x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["FAILOVER", "TO", "h", "p"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (&["FAILOVER", "FORCE", "FORCE"], "-ERR syntax error\r\n"),
        (
            &["FAILOVER", "ABORT", "TIMEOUT", "1"],
            "-ERR syntax error\r\n",
        ),
    ]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| online(master.port, replica.port));
    let rport = replica.port.to_string();
    m.check(&[
        (
            &["FAILOVER", "FORCE", "TIMEOUT", "100"],
            "-ERR FAILOVER with force option requires both a timeout and target HOST and IP.\r\n",
        ),
        (
            &["FAILOVER", "TO", "127.0.0.1", &rport, "FORCE"],
            "-ERR FAILOVER with force option requires both a timeout and target HOST and IP.\r\n",
        ),
        (
            &["FAILOVER", "TO", "invalidhost", &rport],
            "-ERR FAILOVER target HOST and PORT is not a replica.\r\n",
        ),
        (&["FAILOVER", "ABORT"], "-ERR No failover in progress.\r\n"),
    ]);
    replica.raw(2).check(&[(
        &["FAILOVER"],
        "-ERR FAILOVER is not valid when server is a replica.\r\n",
    )]);
    assert_eq!(failover_state(master.port), "no-failover");
}

#[test]
fn failover_to_a_replica_swaps_roles_with_a_partial_resync() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| online(master.port, replica.port));
    let mut m = master.raw(2);
    for i in 0..100 {
        assert_eq!(m.cmd(&["SET", &format!("k{i}"), "v"]), "+OK\r\n");
    }
    let rport = replica.port.to_string();
    assert_eq!(m.cmd(&["FAILOVER", "TO", "127.0.0.1", &rport]), "+OK\r\n");
    wait_until(|| failover_state(master.port) == "no-failover");
    let mut r = replica.raw(2);
    wait_until(|| {
        info(
            &mut RawConn::connect(master.port, 2),
            "replication",
            "master_link_status",
        ) == "up"
    });
    assert_eq!(info(&mut m, "replication", "role"), "slave");
    assert_eq!(info(&mut m, "replication", "master_port"), rport);
    assert_eq!(info(&mut r, "replication", "role"), "master");
    // The old master continued the new one's history: no full sync.
    assert_eq!(info(&mut r, "stats", "sync_partial_ok"), "1");
    assert_eq!(info(&mut r, "stats", "sync_full"), "0");
    assert_eq!(
        m.cmd(&["SET", "x", "1"]),
        "-READONLY You can't write against a read only replica.\r\n"
    );
    assert_eq!(r.cmd(&["SET", "after", "failover"]), "+OK\r\n");
    wait_until(|| m.cmd(&["GET", "after"]) == "$8\r\nfailover\r\n");
    assert_eq!(m.cmd(&["DBSIZE"]), ":101\r\n");
}

#[test]
fn waiting_failover_holds_writes_until_aborted() {
    let master = TestServer::start();
    let mut silent = SilentReplica::connect(master.port, 7);
    let mut m = master.raw(2);
    if !online(master.port, 7) {
        assert_eq!(
            m.cmd(&["FAILOVER", "TO", "127.0.0.1", "7"]),
            "-ERR FAILOVER target replica is not online.\r\n"
        );
    }
    silent.take_image();
    wait_until(|| online(master.port, 7));
    assert_eq!(m.cmd(&["SET", "k", "before"]), "+OK\r\n");
    assert_eq!(
        m.cmd(&["FAILOVER", "TO", "127.0.0.1", "7", "TIMEOUT", "60000"]),
        "+OK\r\n"
    );
    assert_eq!(failover_state(master.port), "waiting-for-sync");
    m.check(&[
        (&["GET", "k"], "$6\r\nbefore\r\n"),
        (&["FAILOVER"], "-ERR FAILOVER already in progress.\r\n"),
        (
            &["REPLICAOF", "127.0.0.1", "1"],
            "-ERR REPLICAOF not allowed while failing over.\r\n",
        ),
        (
            &["PSYNC", "?", "-1"],
            "-NOMASTERLINK Can't SYNC while failing over\r\n",
        ),
    ]);
    let mut w = master.raw(2);
    w.send(&["SET", "k", "during"]);
    wait_blocked(&master, 1);
    // CLIENT UNPAUSE lifts only CLIENT PAUSE's pause, not the failover's.
    assert_eq!(m.cmd(&["CLIENT", "UNPAUSE"]), "+OK\r\n");
    assert_eq!(m.cmd(&["CLIENT", "PAUSE", "10", "WRITE"]), "+OK\r\n");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(clients_info_field(&master, "blocked_clients"), "1");
    assert_eq!(m.cmd(&["GET", "k"]), "$6\r\nbefore\r\n");
    assert_eq!(m.cmd(&["FAILOVER", "ABORT"]), "+OK\r\n");
    assert_eq!(w.read_reply(), "+OK\r\n");
    assert_eq!(failover_state(master.port), "no-failover");
    assert_eq!(info(&mut m, "replication", "role"), "master");
    assert_eq!(m.cmd(&["GET", "k"]), "$6\r\nduring\r\n");
}

#[test]
fn failover_times_out_when_the_replica_never_catches_up() {
    let master = TestServer::start();
    let mut silent = SilentReplica::connect(master.port, 7);
    silent.take_image();
    let mut m = master.raw(2);
    assert_eq!(m.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(m.cmd(&["FAILOVER", "TIMEOUT", "100"]), "+OK\r\n");
    wait_until(|| failover_state(master.port) == "no-failover");
    assert_eq!(info(&mut m, "replication", "role"), "master");
    assert_eq!(m.cmd(&["SET", "k", "w"]), "+OK\r\n");
}

#[test]
fn psync_failover_refusals() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    assert_eq!(
        m.cmd(&["PSYNC", "?", "-1", "FAILOVER"]),
        "-ERR PSYNC FAILOVER can't be sent to a master.\r\n"
    );
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| online(master.port, replica.port));
    let mut r = replica.raw(2);
    assert_eq!(
        r.cmd(&["PSYNC", &"0".repeat(40), "1", "FAILOVER"]),
        "-ERR PSYNC FAILOVER replid must match my replid.\r\n"
    );
    assert_eq!(info(&mut r, "replication", "role"), "slave");
}
