//! SIGKILL under write load, a few cycles per persistence mode: writers on several
//! connections make acknowledged writes, the server is killed at a varying moment,
//! restarted on the same directory, and every acknowledged write must be there
//! (`scripts/kill9_cycles.py` runs the same for many cycles).
//!
//! Each writer owns counter `c:W` (INCR), list `l:W` (RPUSH 1, 2, 3, ...) and keys
//! `k:W:N` (SET to N). After a restart, per writer: the counter is at least the
//! acknowledged INCRs and at most one more (the command in flight); the list is
//! exactly 1..m, m at least the acknowledged RPUSHes and at most one more; the keys
//! present are exactly k:W:1..n with their values, n at least the acknowledged SETs.
//! Under an RDB snapshot the writes go in MULTI/EXEC and the three must agree.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WRITERS: usize = 3;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Op {
    Incr,
    Push,
    Set,
    Multi,
}

#[derive(Clone, Debug)]
struct Writer {
    id: usize,
    incr_acked: i64,
    push_acked: i64,
    keys_acked: i64,
    /// Sent, not answered when the server died.
    in_flight: Option<Op>,
    acked_now: u64,
    errors: Vec<String>,
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

impl Writer {
    fn new(id: usize) -> Writer {
        Writer {
            id,
            incr_acked: 0,
            push_acked: 0,
            keys_acked: 0,
            in_flight: None,
            acked_now: 0,
            errors: Vec::new(),
        }
    }

    /// Writes until `stop` or the connection dies; the reply of each write is checked
    /// byte for byte before it counts as acknowledged.
    fn run(mut self, port: u16, stop: Arc<AtomicBool>, transactions: bool) -> Writer {
        self.in_flight = None;
        self.acked_now = 0;
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
            return self;
        };
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
        let w = self.id;
        let mut step = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let op = if transactions {
                Op::Multi
            } else {
                [Op::Incr, Op::Push, Op::Set][step % 3]
            };
            step += 1;
            let (c, l) = (format!("c:{w}"), format!("l:{w}"));
            let (req, want) = match op {
                Op::Incr => (resp(&["INCR", &c]), format!(":{}\r\n", self.incr_acked + 1)),
                Op::Push => {
                    let n = (self.push_acked + 1).to_string();
                    (resp(&["RPUSH", &l, &n]), format!(":{n}\r\n"))
                }
                Op::Set => {
                    let n = (self.keys_acked + 1).to_string();
                    (resp(&["SET", &format!("k:{w}:{n}"), &n]), "+OK\r\n".into())
                }
                Op::Multi => {
                    let n = (self.keys_acked + 1).to_string();
                    let mut req = resp(&["MULTI"]);
                    req.extend(resp(&["INCR", &c]));
                    req.extend(resp(&["RPUSH", &l, &n]));
                    req.extend(resp(&["SET", &format!("k:{w}:{n}"), &n]));
                    req.extend(resp(&["EXEC"]));
                    let want = format!(
                        "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n:{n}\r\n:{n}\r\n+OK\r\n"
                    );
                    (req, want)
                }
            };
            self.in_flight = Some(op);
            if s.write_all(&req).is_err() {
                return self;
            }
            let mut got = vec![0u8; want.len()];
            if s.read_exact(&mut got).is_err() {
                return self; // The kill.
            }
            if got != want.as_bytes() {
                self.errors.push(format!(
                    "writer {w}: {:?} answered {:?}, expected {want:?}",
                    op,
                    String::from_utf8_lossy(&got)
                ));
                return self;
            }
            match op {
                Op::Incr => self.incr_acked += 1,
                Op::Push => self.push_acked += 1,
                Op::Set => self.keys_acked += 1,
                Op::Multi => {
                    self.incr_acked += 1;
                    self.push_acked += 1;
                    self.keys_acked += 1;
                }
            }
            self.in_flight = None;
            self.acked_now += if op == Op::Multi { 3 } else { 1 };
        }
        self
    }

    /// Checks the restarted server against what was acknowledged; returns the
    /// acknowledged writes missing, and takes the server's state as the new truth.
    fn verify(&mut self, c: &mut redis::Connection, snapshot: bool) -> i64 {
        let w = self.id;
        let flight = |ops: &[Op]| self.in_flight.is_some_and(|f| ops.contains(&f)) as i64;
        let (incr_hi, push_hi, keys_hi) = (
            self.incr_acked + flight(&[Op::Incr, Op::Multi]),
            self.push_acked + flight(&[Op::Push, Op::Multi]),
            self.keys_acked + flight(&[Op::Set, Op::Multi]),
        );
        let counter: Option<i64> = redis::cmd("GET").arg(format!("c:{w}")).query(c).unwrap();
        let counter = counter.unwrap_or(0);
        assert!(
            counter <= incr_hi,
            "writer {w}: counter {counter} above {incr_hi}"
        );
        let list: Vec<i64> = redis::cmd("LRANGE")
            .arg(format!("l:{w}"))
            .arg(0)
            .arg(-1)
            .query(c)
            .unwrap();
        let m = list.len() as i64;
        assert!(
            list.iter().copied().eq(1..=m),
            "writer {w}: list is not 1..{m}"
        );
        assert!(m <= push_hi, "writer {w}: list length {m} above {push_hi}");
        let names: Vec<String> = (1..=keys_hi).map(|i| format!("k:{w}:{i}")).collect();
        let mut present = 0;
        for (chunk_start, chunk) in names.chunks(1000).enumerate() {
            let vals: Vec<Option<i64>> = redis::cmd("MGET").arg(chunk).query(c).unwrap();
            for (j, v) in vals.into_iter().enumerate() {
                let i = (chunk_start * 1000 + j + 1) as i64;
                if let Some(v) = v {
                    assert_eq!(v, i, "writer {w}: k:{w}:{i}");
                    assert_eq!(present + 1, i, "writer {w}: keys have a gap before {i}");
                    present = i;
                }
            }
        }
        if snapshot {
            assert!(
                counter == m && m == present,
                "writer {w}: not one instant: counter {counter}, list {m}, keys {present}"
            );
        }
        let lost = (self.incr_acked - counter).max(0)
            + (self.push_acked - m).max(0)
            + (self.keys_acked - present).max(0);
        self.incr_acked = counter;
        self.push_acked = m;
        self.keys_acked = present;
        self.in_flight = None;
        lost
    }
}

/// A moment in `lo..hi` ms, different each call (the kill must land anywhere).
fn some_ms(lo: u64, hi: u64) -> u64 {
    use std::hash::{BuildHasher, RandomState};
    lo + RandomState::new().hash_one(std::time::Instant::now()) % (hi - lo)
}

fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let text: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_default()
}

/// Every file the AOF manifest names passes redis-check-aof, where it is installed.
fn check_aof(dir: &Path) {
    let manifest = dir.join("appendonlydir").join("appendonly.aof.manifest");
    assert!(manifest.exists(), "no AOF manifest");
    if let Ok(out) = std::process::Command::new("redis-check-aof")
        .arg(&manifest)
        .output()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("All AOF files and manifest are valid"),
            "{text}"
        );
    }
}

/// dump.rdb (once a save made one) passes redis-check-rdb, where it is installed.
fn check_rdb(dir: &Path) {
    let rdb = dir.join("dump.rdb");
    if !rdb.exists() {
        return;
    }
    if let Ok(out) = std::process::Command::new("redis-check-rdb")
        .arg(&rdb)
        .output()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("RDB looks OK"),
            "{text}"
        );
    }
}

/// Snapshot temp files in `dir` of any process but `live` (the running server).
fn foreign_temp_files(dir: &Path, live: u32) -> Vec<String> {
    let own = [
        format!("temp-{live}-"),
        format!("temp-{live}."),
        format!("temp-repl-{live}."),
    ];
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("temp-") && n.ends_with(".rdb"))
        .filter(|n| !own.iter().any(|p| n.starts_with(p.as_str())))
        .collect()
}

struct Cycles {
    dir: std::path::PathBuf,
    args: Vec<String>,
    server: TestServer,
    writers: Vec<Writer>,
    acked: u64,
    lost: i64,
}

impl Cycles {
    fn start(tag: &str, args: &[&str]) -> Cycles {
        let dir = temp_dir(tag);
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let server = Self::boot(&dir, &args);
        Cycles {
            dir,
            args,
            server,
            writers: (0..WRITERS).map(Writer::new).collect(),
            acked: 0,
            lost: 0,
        }
    }

    fn boot(dir: &Path, args: &[String]) -> TestServer {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        TestServer::start_in(dir, &a)
    }

    /// Writers run while `during` does its part, then the server is killed with
    /// SIGKILL, restarted, and checked.
    fn cycle(&mut self, transactions: bool, during: impl FnOnce(&mut TestServer)) {
        self.cycle_or_not(transactions, |s| {
            during(s);
            true
        })
    }

    /// As `cycle`, but the server is killed only when `during` says so; otherwise the
    /// writers stop and the running server is checked.
    fn cycle_or_not(&mut self, transactions: bool, during: impl FnOnce(&mut TestServer) -> bool) {
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = std::mem::take(&mut self.writers)
            .into_iter()
            .map(|w| {
                let (port, stop) = (self.server.port, stop.clone());
                std::thread::spawn(move || w.run(port, stop, transactions))
            })
            .collect();
        let kill = during(&mut self.server);
        if kill {
            self.server.kill9();
        }
        stop.store(true, Ordering::Relaxed);
        self.writers = handles.into_iter().map(|h| h.join().unwrap()).collect();
        for w in &self.writers {
            assert!(w.errors.is_empty(), "{:?}", w.errors);
        }
        if kill {
            self.server = Self::boot(&self.dir, &self.args);
        }
        let mut c = self.server.client();
        for w in &mut self.writers {
            self.acked += w.acked_now;
            self.lost += w.verify(&mut c, transactions);
        }
    }
}

impl Drop for Cycles {
    fn drop(&mut self) {
        self.server.kill9();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const ALWAYS: &[&str] = &[
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--save",
    "",
];

#[test]
fn appendfsync_always_loses_no_acknowledged_write_to_sigkill() {
    let mut run = Cycles::start("kill9-always", ALWAYS);
    for _ in 0..4 {
        run.cycle(false, |_| {
            std::thread::sleep(Duration::from_millis(some_ms(100, 600)))
        });
        check_aof(&run.dir);
    }
    assert!(run.acked > 0);
    assert_eq!(run.lost, 0, "of {} acknowledged writes", run.acked);
}

#[test]
fn appendfsync_everysec_survives_sigkill_whole() {
    let mut run = Cycles::start(
        "kill9-everysec",
        &[
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
        ],
    );
    for _ in 0..3 {
        run.cycle(false, |_| {
            std::thread::sleep(Duration::from_millis(some_ms(100, 600)))
        });
        check_aof(&run.dir);
    }
    // What everysec may lose is bounded by the writes of about a second (Redis
    // postpones the write while an fsync is slow); each restart above found a
    // consistent prefix of every writer's writes.
    assert!(run.acked > 0);
}

#[test]
fn rdb_snapshots_killed_midway_leave_a_valid_file_of_one_instant() {
    let mut run = Cycles::start("kill9-rdb", &["--appendonly", "no", "--save", "1 1"]);
    for _ in 0..4 {
        run.cycle(true, |s| {
            std::thread::sleep(Duration::from_millis(some_ms(50, 300)));
            let mut c = s.raw(2);
            let r = c.cmd(&["BGSAVE"]);
            assert!(
                r == "+Background saving started\r\n"
                    || r == "-ERR Background save already in progress\r\n",
                "{r}"
            );
            std::thread::sleep(Duration::from_millis(some_ms(0, 300)));
        });
        check_rdb(&run.dir);
        // The save the kill interrupted left no partial file behind for good.
        assert_eq!(
            foreign_temp_files(&run.dir, run.server.pid()),
            Vec::<String>::new()
        );
    }
    assert!(run.acked > 0);
}

#[test]
fn sigkill_during_an_aof_rewrite_loses_no_acknowledged_write() {
    let mut run = Cycles::start("kill9-rewrite", ALWAYS);
    populate_persisted(&run.server);
    for _ in 0..3 {
        run.cycle(false, |s| {
            let mut c = s.raw(2);
            // The rewrite's snapshot writer takes 2 s: the kill lands inside it.
            assert_eq!(
                c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000"]),
                "+OK\r\n"
            );
            std::thread::sleep(Duration::from_millis(some_ms(0, 200)));
            assert_eq!(
                c.cmd(&["BGREWRITEAOF"]),
                "+Background append only file rewriting started\r\n"
            );
            std::thread::sleep(Duration::from_millis(some_ms(50, 500)));
            let mut rc = s.client();
            assert_eq!(
                info_field(&mut rc, "persistence", "aof_rewrite_in_progress"),
                "1"
            );
        });
        check_aof(&run.dir);
        let aofdir = run.dir.join("appendonlydir");
        assert_eq!(
            foreign_temp_files(&aofdir, run.server.pid()),
            Vec::<String>::new()
        );
        // The preloaded keys are all there too.
        let expected: i64 = 2000
            + run
                .writers
                .iter()
                .map(|w| (w.incr_acked > 0) as i64 + (w.push_acked > 0) as i64 + w.keys_acked)
                .sum::<i64>();
        assert_eq!(
            run.server.raw(2).cmd(&["DBSIZE"]),
            format!(":{expected}\r\n")
        );
    }
    assert!(run.acked > 0);
    assert_eq!(run.lost, 0, "of {} acknowledged writes", run.acked);
}

/// 2000 keys, in the AOF's base (DEBUG POPULATE is not propagated, as in Redis).
fn populate_persisted(s: &TestServer) {
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["DEBUG", "POPULATE", "2000", "pre", "32"]),
        "+OK\r\n"
    );
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    let mut rc = s.client();
    wait_until(|| info_field(&mut rc, "persistence", "aof_rewrite_in_progress") == "0");
}

fn digest(s: &TestServer) -> String {
    s.raw(2).cmd(&["DEBUG", "DIGEST"])
}

/// Waits until the replica is online at the master's offset, then compares digests.
fn wait_same_data(master: &TestServer, replica: &TestServer) {
    let mut m = master.client();
    let mut r = replica.client();
    wait_until(|| {
        info_field(&mut r, "replication", "master_link_status") == "up"
            && info_field(&mut r, "replication", "slave_repl_offset")
                == info_field(&mut m, "replication", "master_repl_offset")
    });
    assert_eq!(digest(master), digest(replica));
}

#[test]
fn sigkill_during_a_full_sync_loses_nothing_on_either_side() {
    let mut run = Cycles::start("kill9-sync", ALWAYS);
    populate_persisted(&run.server);
    let rdir = temp_dir("kill9-sync-replica");
    let mut replica = TestServer::start_in(&rdir, ALWAYS);
    for cycle in 0..4 {
        // Even cycles kill the replica, odd ones the master, in the middle of a sync.
        let kill_master = cycle % 2 == 1;
        run.cycle_or_not(false, |master| {
            let mut m = master.raw(2);
            // The sync's snapshot takes 2 s: the kill lands inside the full sync.
            assert_eq!(
                m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000"]),
                "+OK\r\n"
            );
            let port = master.port.to_string();
            let mut r = replica.raw(2);
            assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
            assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
            wait_until(|| {
                m.cmd(&["INFO", "replication"])
                    .contains(",state=wait_bgsave,")
            });
            std::thread::sleep(Duration::from_millis(some_ms(50, 500)));
            if !kill_master {
                // Restarted at once, the replica asks again while the snapshot its
                // first sync started is still running, the writes going on.
                replica.kill9();
                replica = TestServer::start_in(&rdir, ALWAYS);
                let mut r = replica.raw(2);
                assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
                std::thread::sleep(Duration::from_millis(some_ms(100, 300)));
            }
            kill_master
        });
        let mut m = run.server.raw(2);
        assert_eq!(
            m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]),
            "+OK\r\n"
        );
        let mut r = replica.raw(2);
        let port = run.server.port.to_string();
        // After the master's restart (on another port) the replica is pointed at it.
        let want = if kill_master {
            "+OK\r\n"
        } else {
            "+OK Already connected to specified master\r\n"
        };
        assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), want);
        wait_same_data(&run.server, &replica);
        check_aof(&run.dir);
        check_aof(&rdir);
    }
    assert!(run.acked > 0);
    assert_eq!(run.lost, 0, "of {} acknowledged writes", run.acked);
    replica.kill9();
    drop(replica);
    let _ = std::fs::remove_dir_all(&rdir);
}

#[test]
fn temp_files_of_dead_processes_are_removed_at_startup_and_others_kept() {
    let dir = temp_dir("kill9-temp");
    let aofdir = dir.join("appendonlydir");
    std::fs::create_dir_all(&aofdir).unwrap();
    // No process has this pid (above any pid_max); this test process is alive.
    let dead = [
        "temp-999999999-1.rdb",
        "temp-999999999.rdb",
        "temp-repl-999999999.rdb",
    ];
    let live = format!("temp-{}-1.rdb", std::process::id());
    for name in dead
        .iter()
        .copied()
        .chain([live.as_str(), "temp-notes.txt"])
    {
        std::fs::write(dir.join(name), b"partial").unwrap();
        std::fs::write(aofdir.join(name), b"partial").unwrap();
    }
    let s = TestServer::start_in(&dir, &["--appendonly", "yes", "--save", ""]);
    for d in [&dir, &aofdir] {
        for name in dead {
            assert!(!d.join(name).exists(), "{name} kept in {}", d.display());
        }
        assert!(d.join(&live).exists());
        assert!(d.join("temp-notes.txt").exists());
    }
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
