//! Replication end to end: Cinnabar replicas of Cinnabar, redis-server replicas of
//! Cinnabar and Cinnabar replicas of redis-server (when it is installed). Datasets are
//! compared with `common::image` (every db, type, expiry and content).

mod common;

use common::*;
use std::time::Duration;

fn info(c: &mut RawConn, section: &str, field: &str) -> String {
    let text = c.cmd(&["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.to_string()))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

fn link_up(port: u16) -> bool {
    let mut c = RawConn::connect(port, 2);
    c.cmd(&["INFO", "replication"])
        .contains("master_link_status:up")
}

fn offset(port: u16) -> String {
    let mut c = RawConn::connect(port, 2);
    info(&mut c, "replication", "master_repl_offset")
}

/// Writes of every kind, over several databases, with expiries, MULTI and scripts.
fn write_workload(c: &mut RawConn) {
    let rows: &[&[&str]] = &[
        &["SET", "s", "hello"],
        &["SET", "n", "41"],
        &["INCR", "n"],
        &["INCRBYFLOAT", "f", "1.5"],
        &["SET", "ttl", "v", "EX", "1000"],
        &["SET", "gone", "v"],
        &["PEXPIRE", "gone", "1"],
        &["RPUSH", "l", "a", "b", "c", "d"],
        &["LPOP", "l"],
        &["HSET", "h", "f1", "v1", "f2", "v2"],
        &["SADD", "set", "x", "y", "z"],
        &["SPOP", "set"],
        &["ZADD", "z", "1", "a", "2.5", "b"],
        &["ZINCRBY", "z", "3", "a"],
        &["XADD", "st", "*", "k", "v"],
        &["PFADD", "hll", "a", "b", "c"],
        &["SETBIT", "bits", "100", "1"],
        &["SELECT", "5"],
        &["SET", "db5", "yes"],
        &["HSET", "h5", "a", "1"],
        &["SELECT", "0"],
        &["MULTI"],
        &["SET", "m1", "1"],
        &["INCR", "m1"],
        &["RPUSH", "ml", "x"],
        &["EXEC"],
        &[
            "EVAL",
            "redis.call('set', KEYS[1], ARGV[1]); redis.call('incr', KEYS[2]); return 1",
            "2",
            "sk",
            "sc",
            "val",
        ],
        &["DEL", "s"],
        &["RENAME", "h", "h2"],
    ];
    for r in rows {
        let reply = c.cmd(r);
        assert!(!reply.starts_with('-'), "{r:?}: {reply}");
    }
}

#[test]
fn cinnabar_replica_of_cinnabar() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    m.cmd(&["SET", "before", "sync"]);
    m.cmd(&["SELECT", "3"]);
    m.cmd(&["RPUSH", "l3", "1", "2"]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_replica_synced(master.port, replica.port);
    let mut m = master.raw(2);
    write_workload(&mut m);
    wait_replica_synced(master.port, replica.port);

    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["GET", "sk"]), "$3\r\nval\r\n");
    assert_eq!(
        r.cmd(&["SET", "x", "1"]),
        "-READONLY You can't write against a read only replica.\r\n"
    );
    assert_eq!(
        r.cmd(&["EVAL", "return redis.call('set', 'x', '1')", "0"]),
        "-READONLY You can't write against a read only replica. script: a22335312368ca3ce990a8254cce543809e8ea73, on @user_script:1.\r\n"
    );
    assert_eq!(
        r.cmd(&["EVAL", "return redis.call('get', 'sk')", "0"]),
        "$3\r\nval\r\n"
    );
    assert_eq!(info(&mut r, "replication", "role"), "slave");
    assert_eq!(info(&mut r, "replication", "master_port"), port);
    assert_eq!(info(&mut r, "replication", "slave_read_only"), "1");
    let role = r.cmd(&["ROLE"]);
    assert!(
        role.starts_with(&format!(
            "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:{port}\r\n$9\r\nconnected\r\n:"
        )),
        "{role}"
    );
    // The replica's ID and offset are the master's.
    assert_eq!(
        info(&mut r, "replication", "master_replid"),
        info(&mut m, "replication", "master_replid")
    );

    // Master side: ROLE, INFO, WAIT after a write.
    assert_eq!(info(&mut m, "replication", "connected_slaves"), "1");
    let slave0 = info(&mut m, "replication", "slave0");
    assert!(
        slave0.starts_with(&format!("ip=127.0.0.1,port={},state=online,", replica.port)),
        "{slave0}"
    );
    assert_eq!(m.cmd(&["SET", "w", "1"]), "+OK\r\n");
    assert_eq!(m.cmd(&["WAIT", "1", "5000"]), ":1\r\n");
    assert_eq!(m.cmd(&["WAIT", "2", "100"]), ":1\r\n");
    assert_eq!(r.cmd(&["GET", "w"]), "$1\r\n1\r\n");
    let role = m.cmd(&["ROLE"]);
    assert!(role.starts_with("*3\r\n$6\r\nmaster\r\n:"), "{role}");
    assert!(role.contains(&format!(
        "$9\r\n127.0.0.1\r\n${}\r\n{}\r\n",
        replica.port.to_string().len(),
        replica.port
    )));
    assert_eq!(info(&mut m, "stats", "sync_full"), "1");
    assert_eq!(m.cmd(&["WAIT", "1", "-1"]), "-ERR timeout is negative\r\n");
    assert_eq!(
        r.cmd(&["WAIT", "1", "0"]),
        "-ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.\r\n"
    );
}

#[test]
fn replica_keys_expire_only_by_the_master() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| link_up(replica.port));
    let mut m = master.raw(2);
    let mut r = replica.raw(2);
    // The master does not expire the key by itself while its active expiry is off.
    m.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    m.cmd(&["SET", "k", "v", "PX", "200"]);
    wait_replica_synced(master.port, replica.port);
    std::thread::sleep(Duration::from_millis(400));
    // Logically expired: reads miss, but the key stays until the master's DEL.
    assert_eq!(r.cmd(&["GET", "k"]), "$-1\r\n");
    assert_eq!(r.cmd(&["EXISTS", "k"]), ":0\r\n");
    assert_eq!(r.cmd(&["DBSIZE"]), ":1\r\n");
    // DEBUG OBJECT shows the table as it is, as Redis's.
    assert!(r.cmd(&["DEBUG", "OBJECT", "k"]).starts_with("+Value at:"));
    assert_eq!(r.cmd(&["DEBUG", "OBJECT", "nokey"]), "-ERR no such key\r\n");
    // The master meets the key, deletes it and propagates a DEL.
    assert_eq!(m.cmd(&["GET", "k"]), "$-1\r\n");
    wait_until(|| r.cmd(&["DBSIZE"]) == ":0\r\n");
}

#[test]
fn partial_resync_after_a_dropped_link() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut m = master.raw(2);
    m.cmd(&["SET", "a", "1"]);
    wait_replica_synced(master.port, replica.port);
    // Kill the replica's connection on the master: the replica comes back with PSYNC.
    assert_eq!(m.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), ":1\r\n");
    m.cmd(&["SET", "b", "2"]);
    m.cmd(&["RPUSH", "l", "x"]);
    wait_replica_synced(master.port, replica.port);
    assert_eq!(info(&mut m, "stats", "sync_partial_ok"), "1");
    assert_eq!(info(&mut m, "stats", "sync_full"), "1");
    // Same from the replica's side.
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["CLIENT", "KILL", "TYPE", "master"]), ":1\r\n");
    m.cmd(&["SET", "c", "3"]);
    wait_replica_synced(master.port, replica.port);
    assert_eq!(info(&mut m, "stats", "sync_partial_ok"), "2");
    assert_eq!(r.cmd(&["GET", "c"]), "$1\r\n3\r\n");
}

#[test]
fn replicaof_no_one_and_chained_replicas() {
    let a = TestServer::start();
    let b = TestServer::start();
    let c = TestServer::start();
    let mut ra = a.raw(2);
    let mut rb = b.raw(2);
    let mut rc = c.raw(2);
    ra.cmd(&["SET", "k", "a"]);
    assert_eq!(
        rb.cmd(&["REPLICAOF", "127.0.0.1", &a.port.to_string()]),
        "+OK\r\n"
    );
    assert_eq!(
        rb.cmd(&["REPLICAOF", "127.0.0.1", &a.port.to_string()]),
        "+OK Already connected to specified master\r\n"
    );
    assert_eq!(
        rb.cmd(&["REPLICAOF", "127.0.0.1", "x"]),
        "-ERR Invalid master port\r\n"
    );
    assert_eq!(
        rc.cmd(&["SLAVEOF", "127.0.0.1", &b.port.to_string()]),
        "+OK\r\n"
    );
    wait_replica_synced(a.port, b.port);
    wait_replica_synced(b.port, c.port);
    write_workload(&mut ra);
    wait_replica_synced(a.port, b.port);
    wait_replica_synced(b.port, c.port);
    assert!(same_data(a.port, c.port));
    // Promote B: it keeps the data, its old history becomes replid2, C follows on.
    let old = info(&mut rb, "replication", "master_replid");
    assert_eq!(rb.cmd(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    assert_eq!(info(&mut rb, "replication", "role"), "master");
    assert_eq!(info(&mut rb, "replication", "master_replid2"), old);
    assert_eq!(rb.cmd(&["SET", "onb", "1"]), "+OK\r\n");
    wait_until(|| rc.cmd(&["GET", "onb"]) == "$1\r\n1\r\n");
    assert_eq!(rb.cmd(&["WAIT", "1", "5000"]), ":1\r\n");
}

#[test]
fn wait_without_replicas_and_in_multi() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["WAIT", "0", "0"]), ":0\r\n");
    assert_eq!(c.cmd(&["WAIT", "1", "50"]), ":0\r\n");
    // Timeouts as Redis's getTimeoutFromObjectOrReply: past i64, negative, or a
    // deadline past i64 milliseconds since 1970.
    assert_eq!(
        c.cmd(&["WAIT", "2", "9223372036854775808"]),
        "-ERR timeout is not an integer or out of range\r\n"
    );
    assert_eq!(
        c.cmd(&["WAIT", "2", "9223372036854775807"]),
        "-ERR timeout is out of range\r\n"
    );
    assert_eq!(c.cmd(&["WAIT", "2", "-1"]), "-ERR timeout is negative\r\n");
    assert_eq!(
        c.cmd(&["WAITAOF", "0", "0", "9223372036854775807"]),
        "-ERR timeout is out of range\r\n"
    );
    assert_eq!(
        c.cmd(&["WAIT", "x", "0"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    c.cmd(&["MULTI"]);
    assert_eq!(c.cmd(&["WAIT", "1", "0"]), "+QUEUED\r\n");
    assert_eq!(c.cmd(&["EXEC"]), "*1\r\n:0\r\n");
    assert_eq!(c.cmd(&["ROLE"]), "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
}

fn redis_replica(master_port: u16) -> RedisServer {
    let r = RedisServer::start();
    let mut c = r.raw(2);
    assert_eq!(
        c.cmd(&["REPLICAOF", "127.0.0.1", &master_port.to_string()]),
        "+OK\r\n"
    );
    r
}

#[test]
fn redis_server_replica_of_cinnabar() {
    if !redis_server_available() {
        return;
    }
    let master = TestServer::start();
    let mut m = master.raw(2);
    m.cmd(&["SET", "before", "sync"]);
    let replica = redis_replica(master.port);
    wait_replica_synced(master.port, replica.port);
    write_workload(&mut m);
    wait_replica_synced(master.port, replica.port);
    m.cmd(&["SET", "w", "1"]);
    assert_eq!(m.cmd(&["WAIT", "1", "5000"]), ":1\r\n");
    // A dropped link resumes with +CONTINUE.
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["CLIENT", "KILL", "TYPE", "master"]), ":1\r\n");
    m.cmd(&["SET", "after", "drop"]);
    wait_replica_synced(master.port, replica.port);
    assert_eq!(info(&mut m, "stats", "sync_partial_ok"), "1");
    assert_eq!(info(&mut m, "stats", "sync_full"), "1");
    assert_eq!(
        info(&mut r, "replication", "master_replid"),
        info(&mut m, "replication", "master_replid")
    );
}

#[test]
fn cinnabar_replica_of_redis_server() {
    if !redis_server_available() {
        return;
    }
    let master = RedisServer::start();
    let mut m = master.raw(2);
    // Diskless (EOF-marker) transfer first, without Redis's default 5 s delay.
    m.cmd(&["CONFIG", "SET", "repl-diskless-sync", "yes"]);
    m.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    m.cmd(&["SET", "before", "sync"]);
    m.cmd(&["HSET", "h", "a", "1"]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_replica_synced(master.port, replica.port);
    write_workload(&mut m);
    wait_replica_synced(master.port, replica.port);
    m.cmd(&["SET", "w", "1"]);
    assert_eq!(m.cmd(&["WAIT", "1", "5000"]), ":1\r\n");
    // Then a sized transfer from disk: a new full sync.
    m.cmd(&["CONFIG", "SET", "repl-diskless-sync", "no"]);
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    r.cmd(&["SET", "local", "x"]);
    m.cmd(&["SET", "more", "y"]);
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    wait_replica_synced(master.port, replica.port);
    assert_eq!(r.cmd(&["GET", "local"]), "$-1\r\n");
    assert_eq!(r.cmd(&["GET", "more"]), "$1\r\ny\r\n");
}

#[test]
fn full_sync_image_is_a_copy_on_write_snapshot() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    for i in 0..300 {
        m.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    m.cmd(&["RPUSH", "list", "a", "b"]);
    // The walker moves only on DEBUG SNAPSHOT-STEP: writes land mid-snapshot.
    m.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "1"]);
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_until(|| info(&mut m, "replication", "connected_slaves") == "1");
    assert!(info(&mut m, "replication", "slave0").contains("state=wait_bgsave"));
    m.cmd(&["DEBUG", "SNAPSHOT-STEP", "4"]);
    for i in 0..300 {
        if i % 3 == 0 {
            m.cmd(&["DEL", &format!("k{i}")]);
        } else if i % 3 == 1 {
            m.cmd(&["APPEND", &format!("k{i}"), "+"]);
        }
    }
    m.cmd(&["RPUSH", "list", "c"]);
    m.cmd(&["SET", "new", "key"]);
    // A second replica joins the same snapshot.
    let replica2 = redis_server_available().then(|| redis_replica(master.port));
    wait_until(|| m.cmd(&["DEBUG", "SNAPSHOT-STEP", "64"]) == ":0\r\n");
    m.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "0"]);
    wait_replica_synced(master.port, replica.port);
    if let Some(r2) = &replica2 {
        wait_replica_synced(master.port, r2.port);
    }
    assert_eq!(
        info(&mut m, "stats", "sync_full"),
        if replica2.is_some() { "2" } else { "1" }
    );
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["GET", "k1"]), "$3\r\nv1+\r\n");
    assert_eq!(r.cmd(&["EXISTS", "k0"]), ":0\r\n");
    assert_eq!(r.cmd(&["LLEN", "list"]), ":3\r\n");
}

/// The master's stream is applied whatever the replica's ACL users allow: the link's
/// client is not a user's client (as Redis's master client).
#[test]
fn replica_applies_the_stream_whatever_its_acl_users_allow() {
    let master = TestServer::start();
    let port = master.port.to_string();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_replica_synced(master.port, replica.port);
    let mut r = replica.raw(2);
    assert_eq!(
        r.cmd(&["ACL", "SETUSER", "default", "-set", "-del"]),
        "+OK\r\n"
    );
    let mut m = master.raw(2);
    m.cmd(&["SET", "after", "acl"]);
    m.cmd(&["DEL", "nothing"]);
    m.cmd(&["SET", "gone", "x"]);
    m.cmd(&["DEL", "gone"]);
    wait_replica_synced(master.port, replica.port);
    assert_eq!(r.cmd(&["GET", "after"]), "$3\r\nacl\r\n");
    assert_eq!(r.cmd(&["EXISTS", "gone"]), ":0\r\n");
    assert_eq!(
        r.cmd(&["SET", "x", "1"]),
        "-NOPERM User default has no permissions to run the 'set' command\r\n"
    );
}

/// A raw replica: REPLCONF + PSYNC on a plain socket, read only when the test says.
struct RawReplica {
    r: std::io::BufReader<std::net::TcpStream>,
    /// The `+FULLRESYNC <replid> <offset>` line PSYNC was answered with.
    fullresync: String,
}

impl RawReplica {
    /// A replica that reads images streamed with the EOF marker (diskless).
    fn connect(port: u16) -> RawReplica {
        RawReplica::connect_with(port, true)
    }

    /// `eof`: it says `capa eof`; without it the master must send a sized image.
    fn connect_with(port: u16, eof: bool) -> RawReplica {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        if eof {
            s.write_all(
                b"*5\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n",
            )
            .unwrap();
        } else {
            s.write_all(b"*3\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n")
                .unwrap();
        }
        let mut r = RawReplica {
            r: std::io::BufReader::new(s.try_clone().unwrap()),
            fullresync: String::new(),
        };
        // PSYNC with a reply still pending is refused, as by Redis.
        assert_eq!(r.line(), "+OK");
        s.write_all(b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n")
            .unwrap();
        let l = r.line();
        assert!(l.starts_with("+FULLRESYNC "), "{l}");
        r.fullresync = l;
        r
    }

    fn line(&mut self) -> String {
        use std::io::BufRead;
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        l.trim_end().to_string()
    }

    /// The image: keepalive newlines, then `$<len>` and the payload, or `$EOF:<mark>`,
    /// the payload and the mark (nothing follows it until the replica ACKs).
    fn image(&mut self) -> Vec<u8> {
        use std::io::Read;
        let mut l = self.line();
        while l.is_empty() {
            l = self.line();
        }
        if let Some(mark) = l.strip_prefix("$EOF:") {
            let mark = mark.as_bytes().to_vec();
            assert_eq!(mark.len(), 40, "{l}");
            let mut buf = Vec::new();
            let mut byte = [0u8; 1];
            while !buf.ends_with(&mark) {
                self.r.read_exact(&mut byte).unwrap();
                buf.push(byte[0]);
            }
            buf.truncate(buf.len() - mark.len());
            return buf;
        }
        let len: usize = l.strip_prefix('$').unwrap().parse().unwrap();
        let mut buf = vec![0; len];
        self.r.read_exact(&mut buf).unwrap();
        buf
    }

    /// REPLCONF ACK <offset>: after a streamed image, the master starts the stream.
    fn ack(&mut self, offset: u64) {
        use std::io::Write;
        let off = offset.to_string();
        let cmd = format!(
            "*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n${}\r\n{off}\r\n",
            off.len()
        );
        self.r.get_mut().write_all(cmd.as_bytes()).unwrap();
    }
}

#[test]
fn replica_output_buffer_limit_counts_the_stream_not_the_image() {
    output_limit_with_image(false);
}

/// The same with a diskless image, streamed as the snapshot produces it.
#[test]
fn replica_output_buffer_limit_counts_the_stream_not_the_streamed_image() {
    output_limit_with_image(true);
}

fn output_limit_with_image(diskless: bool) {
    let dir = temp_dir(if diskless {
        "obuf-replica-diskless"
    } else {
        "obuf-replica"
    });
    let log = dir.join("master.log");
    let master = TestServer::start_in(&dir, &["--logfile", log.to_str().unwrap()]);
    let mut m = master.raw(2);
    // A 12 MB image, far over the 1 MB limit.
    m.cmd(&["CONFIG", "SET", "rdbcompression", "no"]);
    m.cmd(&["DEBUG", "POPULATE", "120", "big", "100000"]);
    assert_eq!(
        m.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "replica 1mb 0 0"
        ]),
        "+OK\r\n"
    );
    m.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    let mut rep = RawReplica::connect_with(master.port, diskless);
    // Nothing read yet: the image is stuck in flight, the stream held behind it.
    let state = if diskless {
        "state=wait_bgsave"
    } else {
        "state=send_bulk"
    };
    wait_until(|| info(&mut m, "replication", "slave0").contains(state));
    for i in 0..100 {
        m.cmd(&["SET", &format!("small{i}"), "x"]);
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(info(&mut m, "replication", "connected_slaves"), "1");
    let image = rep.image();
    assert!(image.len() > 12_000_000, "{}", image.len());
    assert!(image.starts_with(b"REDIS"));
    if diskless {
        rep.ack(0);
    }
    // The held stream follows the image.
    let mut seen = String::new();
    while !seen.contains("small99") {
        seen.push_str(&rep.line());
        seen.push('\n');
    }
    wait_until(|| info(&mut m, "replication", "slave0").contains("state=online"));
    assert_eq!(
        info(&mut m, "stats", "client_output_buffer_limit_disconnections"),
        "0"
    );

    // Now the replica stops reading: the stream piles up past the limit.
    let value = "v".repeat(100_000);
    for i in 0..400 {
        m.cmd(&["SET", &format!("flood{i}"), &value]);
        if info(&mut m, "replication", "connected_slaves") == "0" {
            break;
        }
    }
    wait_until(|| info(&mut m, "replication", "connected_slaves") == "0");
    assert_eq!(
        info(&mut m, "stats", "client_output_buffer_limit_disconnections"),
        "1"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("scheduled to be closed ASAP for overcoming of output buffer limits."),
        "{text}"
    );
    drop(rep);
    drop(master);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn restarted_replica_continues_with_psync() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    m.cmd(&["SELECT", "2"]);
    m.cmd(&["SET", "a", "1"]);
    let dir = temp_dir("repl-restart-replica");
    let port = master.port.to_string();
    let args = ["--appendonly", "no", "--replicaof", "127.0.0.1", &port];
    let mut replica = TestServer::start_in(&dir, &args);
    wait_replica_synced(master.port, replica.port);
    let id = info(&mut m, "replication", "master_replid");
    // SIGTERM saves (default save points): the RDB records the master's ID, the
    // processed offset and the stream's database.
    replica.terminate();
    // The master's stream goes on in db 2 without a new SELECT.
    m.cmd(&["SET", "b", "2"]);
    let replica = TestServer::start_in(&dir, &args);
    wait_replica_synced(master.port, replica.port);
    assert_eq!(info(&mut m, "stats", "sync_partial_ok"), "1");
    assert_eq!(info(&mut m, "stats", "sync_full"), "1");
    let mut r = replica.raw(2);
    assert_eq!(info(&mut r, "replication", "master_replid"), id);
    r.cmd(&["SELECT", "2"]);
    assert_eq!(r.cmd(&["GET", "b"]), "$1\r\n2\r\n");
    drop(replica);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn restarted_master_keeps_its_history_as_replid2() {
    let dir = temp_dir("repl-restart-master");
    let mut master = TestServer::start_in(&dir, &["--appendonly", "no"]);
    let mut m = master.raw(2);
    m.cmd(&["SET", "a", "1"]);
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    wait_replica_synced(master.port, replica.port);
    let id = info(&mut m, "replication", "master_replid");
    let off: u64 = offset(master.port).parse().unwrap();
    master.terminate();
    let master = TestServer::start_in(&dir, &["--appendonly", "no"]);
    let mut m = master.raw(2);
    // A new ID, the old one kept as replid2 up to the saved offset.
    assert_ne!(info(&mut m, "replication", "master_replid"), id);
    assert_eq!(info(&mut m, "replication", "master_replid2"), id);
    assert_eq!(
        info(&mut m, "replication", "second_repl_offset"),
        (off + 1).to_string()
    );
    assert_eq!(offset(master.port), off.to_string());
    let mut r = replica.raw(2);
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        "+OK\r\n"
    );
    m.cmd(&["SET", "b", "2"]);
    wait_replica_synced(master.port, replica.port);
    assert_eq!(info(&mut m, "stats", "sync_partial_ok"), "1");
    assert_eq!(info(&mut m, "stats", "sync_full"), "0");
    drop(master);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A master restarted from its RDB drops the keys that expired meanwhile and tells
/// its replicas with DELs in the continued stream; a replica that learns of the new
/// ID makes its own replicas reconnect, and they continue too. CONFIG RESETSTAT
/// zeroes the sync counters.
#[test]
fn restarted_master_sends_dels_of_keys_expired_while_down() {
    let dir = temp_dir("repl-restart-expired");
    let mut master = TestServer::start_in(&dir, &["--appendonly", "no"]);
    let mut m = master.raw(2);
    m.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    m.cmd(&["SET", "kept", "1"]);
    for db in 0..3 {
        m.cmd(&["SELECT", &db.to_string()]);
        for i in 0..10 {
            m.cmd(&["SET", &format!("gone:{i}"), "v", "PX", "300"]);
        }
    }
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let sub = TestServer::start_with(&["--replicaof", "127.0.0.1", &replica.port.to_string()]);
    // Offsets only: reading the keys would expire them on the master.
    let caught_up = |a: u16, b: u16| link_up(b) && offset(a) == offset(b);
    wait_until(|| caught_up(master.port, replica.port) && caught_up(replica.port, sub.port));
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["CONFIG", "RESETSTAT"]), "+OK\r\n");
    assert_eq!(info(&mut r, "stats", "sync_full"), "0");
    assert_eq!(info(&mut r, "stats", "sync_partial_ok"), "0");
    let off: u64 = offset(master.port).parse().unwrap();
    master.terminate();
    // Past the keys' expiry (they were written with PX 300 before the sync).
    std::thread::sleep(Duration::from_millis(400));
    let master = TestServer::start_in(&dir, &["--appendonly", "no"]);
    let mut m = master.raw(2);
    assert_eq!(
        info(&mut m, "persistence", "rdb_last_load_keys_expired"),
        "30"
    );
    // The DELs (with a SELECT before each database's) follow the saved offset.
    let hist: u64 = info(&mut m, "replication", "repl_backlog_histlen")
        .parse()
        .unwrap();
    assert!(hist > 0);
    assert_eq!(offset(master.port), (off + hist).to_string());
    assert_eq!(
        info(&mut m, "replication", "repl_backlog_first_byte_offset"),
        (off + 1).to_string()
    );
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        "+OK\r\n"
    );
    wait_replica_synced(master.port, replica.port);
    wait_replica_synced(replica.port, sub.port);
    assert_eq!(info(&mut m, "stats", "sync_partial_ok"), "1");
    assert_eq!(info(&mut m, "stats", "sync_full"), "0");
    // The sub-replica reconnected under the new ID and continued.
    assert_eq!(info(&mut r, "stats", "sync_partial_ok"), "1");
    assert_eq!(info(&mut r, "stats", "sync_full"), "0");
    let digest = m.cmd(&["DEBUG", "DIGEST"]);
    assert_eq!(r.cmd(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(sub.raw(2).cmd(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(r.cmd(&["DBSIZE"]), ":1\r\n");
    drop(master);
    let _ = std::fs::remove_dir_all(&dir);
}

/// repl-backlog-ttl: a master left without replicas that long frees its backlog and
/// starts a new history, so the replica's return is a full sync.
#[test]
fn backlog_freed_after_ttl_without_replicas() {
    let master = TestServer::start_with(&["--repl-backlog-ttl", "1"]);
    let mut m = master.raw(2);
    m.cmd(&["SET", "a", "1"]);
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    wait_replica_synced(master.port, replica.port);
    let id = info(&mut m, "replication", "master_replid");
    let mut r = replica.raw(2);
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    wait_until(|| info(&mut m, "replication", "repl_backlog_active") == "0");
    assert_ne!(info(&mut m, "replication", "master_replid"), id);
    assert_eq!(
        info(&mut m, "replication", "master_replid2"),
        "0".repeat(40)
    );
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        "+OK\r\n"
    );
    wait_replica_synced(master.port, replica.port);
    assert_eq!(info(&mut m, "stats", "sync_full"), "2");
    assert_eq!(info(&mut m, "stats", "sync_partial_err"), "1");
    assert_eq!(info(&mut m, "replication", "repl_backlog_active"), "1");
}

/// A replica's own min-replicas-to-write and maxmemory never refuse or evict what
/// its master sends (Redis ignores them for the master's stream): the writes apply.
#[test]
fn replica_applies_writes_despite_its_min_replicas_and_maxmemory() {
    let master = TestServer::start();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut m = master.raw(2);
    let mut r = replica.raw(2);
    m.cmd(&["SET", "foo", "1"]);
    wait_replica_synced(master.port, replica.port);
    for c in [
        &["CONFIG", "SET", "min-replicas-to-write", "1"][..],
        &["CONFIG", "SET", "min-replicas-max-lag", "10"],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
        &["CONFIG", "SET", "maxmemory", "1"],
    ] {
        assert_eq!(r.cmd(c), "+OK\r\n");
    }
    m.cmd(&["SET", "foo", "2"]);
    for i in 0..50 {
        m.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    wait_replica_synced(master.port, replica.port);
    assert_eq!(r.cmd(&["GET", "foo"]), "$1\r\n2\r\n");
    assert_eq!(r.cmd(&["DBSIZE"]), ":51\r\n");
    assert_eq!(info(&mut r, "stats", "evicted_keys"), "0");
}

/// Hash fields that expire on the master (actively or lazily) are deleted on its
/// replicas by an HDEL in the stream; replicas never expire fields by themselves.
#[test]
fn expired_hash_fields_reach_replicas_as_hdel() {
    let master = TestServer::start();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut m = master.raw(2);
    let mut r = replica.raw(2);
    m.cmd(&["HSET", "h", "keep", "1", "gone", "2"]);
    m.cmd(&["HSET", "lazy", "keep", "1", "gone", "2"]);
    m.cmd(&["HPEXPIRE", "h", "50", "FIELDS", "1", "gone"]);
    wait_replica_synced(master.port, replica.port);
    // Active expiry on the master.
    wait_until(|| r.cmd(&["HLEN", "h"]) == ":1\r\n");
    assert_eq!(r.cmd(&["HGETALL", "h"]), "*2\r\n$4\r\nkeep\r\n$1\r\n1\r\n");
    // Lazy expiry: a read on the master that meets the due field.
    assert_eq!(m.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    m.cmd(&["HPEXPIRE", "lazy", "50", "FIELDS", "1", "gone"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(m.cmd(&["HGET", "lazy", "gone"]), "$-1\r\n");
    wait_until(|| r.cmd(&["HLEN", "lazy"]) == ":1\r\n");
}

#[test]
fn replica_flags_log_role_min_replicas_and_wait_unblock() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    // min-replicas-to-write without good replicas: writes refused, as Redis.
    assert_eq!(
        m.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]),
        "+OK\r\n"
    );
    let noreplicas = "-NOREPLICAS Not enough good replicas to write.\r\n";
    assert_eq!(m.cmd(&["SET", "a", "1"]), noreplicas);
    assert_eq!(m.cmd(&["GET", "a"]), "$-1\r\n");
    assert_eq!(info(&mut m, "replication", "min_slaves_good_slaves"), "0");
    m.cmd(&["MULTI"]);
    assert_eq!(m.cmd(&["SET", "a", "1"]), noreplicas);
    assert_eq!(
        m.cmd(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // The rule changing between queueing and EXEC: EXEC itself is refused.
    let mut other = master.raw(2);
    other.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
    m.cmd(&["MULTI"]);
    m.cmd(&["SET", "a", "1"]);
    other.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    assert_eq!(
        m.cmd(&["EXEC"]),
        "-EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.\r\n"
    );
    assert_eq!(m.cmd(&["GET", "a"]), "$-1\r\n");
    m.cmd(&["MULTI"]);
    m.cmd(&["GET", "a"]);
    assert_eq!(m.cmd(&["EXEC"]), "*1\r\n$-1\r\n");
    assert_eq!(
        m.cmd(&["EVAL", "return redis.call('set','a','1')", "0"]),
        "-NOREPLICAS Not enough good replicas to write. script: 67ed14c1cb086d8c2fcf91ebe13410ba087fd0f8, on @user_script:1.\r\n"
    );

    let dir = temp_dir("repl-flags");
    let log = dir.join("replica.log");
    let port = master.port.to_string();
    let replica = TestServer::start_in(
        &dir,
        &[
            "--replicaof",
            "127.0.0.1",
            &port,
            "--logfile",
            log.to_str().unwrap(),
            "--loglevel",
            "notice",
        ],
    );
    wait_until(|| link_up(replica.port));
    wait_until(|| info(&mut m, "replication", "min_slaves_good_slaves") == "1");
    assert_eq!(m.cmd(&["SET", "a", "1"]), "+OK\r\n");
    wait_replica_synced(master.port, replica.port);

    // CLIENT LIST: the replica is `S` on the master, the master's link `M` on the
    // replica, each found by TYPE.
    let list = m.cmd(&["CLIENT", "LIST", "TYPE", "replica"]);
    assert!(list.contains(" flags=S "), "{list}");
    assert_eq!(list.matches("id=").count(), 1);
    assert!(!m
        .cmd(&["CLIENT", "LIST", "TYPE", "normal"])
        .contains("flags=S"));
    let mut r = replica.raw(2);
    let list = r.cmd(&["CLIENT", "LIST", "TYPE", "master"]);
    assert!(list.contains(&format!(" addr=127.0.0.1:{port} ")), "{list}");
    assert!(list.contains(" flags=M "), "{list}");
    assert!(list.contains(" user=(superuser) "), "{list}");
    assert!(r.cmd(&["CLIENT", "LIST"]).contains(" flags=M "));

    // Log lines of a replica carry `S`.
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("MASTER <-> REPLICA sync: Finished with success"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(":S "), "{line}");

    // CLIENT UNBLOCK of a WAIT answers the replicas acknowledged by now.
    let mut w = master.raw(2);
    w.cmd(&["SET", "b", "2"]);
    // The replica's ACK of the write arrives within a second.
    wait_until(|| {
        let off = offset(master.port);
        info(&mut m, "replication", "slave0").contains(&format!(",offset={off},"))
    });
    let id = w.cmd(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end();
    w.send(&["WAIT", "2", "0"]);
    wait_blocked(&master, 1);
    assert_eq!(m.cmd(&["CLIENT", "UNBLOCK", id]), ":1\r\n");
    assert_eq!(w.read_reply(), ":1\r\n");
    w.send(&["WAIT", "2", "0"]);
    wait_blocked(&master, 1);
    assert_eq!(m.cmd(&["CLIENT", "UNBLOCK", id, "ERROR"]), ":1\r\n");
    assert_eq!(
        w.read_reply(),
        "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    drop(replica);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A message published on the master reaches subscribers connected to its replicas.
#[test]
fn published_messages_reach_subscribers_of_replicas() {
    let master = TestServer::start();
    let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut m = master.raw(2);
    m.cmd(&["SET", "x", "1"]);
    wait_replica_synced(master.port, replica.port);
    let mut sub = replica.raw(2);
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "news"]),
        "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
    );
    // The replica's count of receivers is not the master's reply.
    assert_eq!(m.cmd(&["PUBLISH", "news", "hello"]), ":0\r\n");
    assert_eq!(
        sub.read_reply(),
        "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
    );
}

#[test]
fn a_replica_arriving_after_the_waiting_ones_left_misses_no_write() {
    let master = TestServer::start();
    let mut m = master.raw(2);
    assert_eq!(m.cmd(&["DEBUG", "POPULATE", "100"]), "+OK\r\n");
    // A snapshot that takes seconds: the first replica's full sync is under way.
    assert_eq!(
        m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "100000"]),
        "+OK\r\n"
    );
    let first = RawReplica::connect(master.port);
    // A write the running snapshot does not hold: only the first replica's held
    // stream has it, and that replica goes away.
    assert_eq!(m.cmd(&["SET", "during", "1"]), "+OK\r\n");
    drop(first);
    wait_until(|| {
        m.cmd(&["INFO", "replication"])
            .contains("connected_slaves:0\r\n")
    });
    let info = m.cmd(&["INFO", "replication"]);
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name).map(str::to_string))
            .unwrap()
    };
    let (replid, offset) = (field("master_replid:"), field("master_repl_offset:"));
    assert_eq!(
        m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]),
        "+OK\r\n"
    );
    // The next replica must not join the old snapshot (its offset is behind the
    // write, which nobody holds any more): its image starts at the current offset
    // and holds the write.
    let mut second = RawReplica::connect(master.port);
    assert_eq!(second.fullresync, format!("+FULLRESYNC {replid} {offset}"));
    let image = second.image();
    assert!(image.windows(6).any(|w| w == b"during"));
}

/// A replica asking for a full sync while a BGSAVE holds the snapshot machinery waits
/// for it to end (`wait_bgsave`, no `+FULLRESYNC` yet), then gets a snapshot of its
/// own, diskless or from disk: the master never serializes the dataset on the spot
/// (which stalled every client for the whole image). Writes made while it waits reach it.
#[test]
fn a_full_sync_asked_during_a_bgsave_waits_for_the_next_snapshot() {
    for diskless in ["yes", "no"] {
        let master = TestServer::start_with(&["--repl-diskless-sync", diskless]);
        let mut m = master.raw(2);
        for i in 0..200 {
            m.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]);
        }
        m.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "1"]);
        assert_eq!(m.cmd(&["BGSAVE"]), "+Background saving started\r\n");
        let port = master.port.to_string();
        let replica = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]);
        wait_until(|| info(&mut m, "replication", "connected_slaves") == "1");
        assert!(info(&mut m, "replication", "slave0").contains("state=wait_bgsave"));
        m.cmd(&["SET", "while", "waiting"]);
        let mut r = replica.raw(2);
        // Nothing was sent: the replica is still handshaking, its data not replaced.
        assert_eq!(
            info(&mut r, "replication", "master_link_status"),
            "down",
            "{diskless}"
        );
        assert_eq!(info(&mut m, "persistence", "rdb_bgsave_in_progress"), "1");
        assert_eq!(r.cmd(&["DBSIZE"]), ":0\r\n");
        // The BGSAVE ends; the replica's own snapshot follows.
        wait_until(|| m.cmd(&["DEBUG", "SNAPSHOT-STEP", "64"]) == ":0\r\n");
        m.cmd(&["DEBUG", "SNAPSHOT-MANUAL", "0"]);
        wait_replica_synced(master.port, replica.port);
        assert_eq!(r.cmd(&["DBSIZE"]), ":201\r\n", "{diskless}");
        assert_eq!(r.cmd(&["GET", "while"]), "$7\r\nwaiting\r\n");
        assert_eq!(info(&mut m, "stats", "sync_full"), "1");
    }
}
