//! Persistence failures: an AOF that cannot be written (a full disk, simulated with
//! DEBUG AOF-SPACE, or a real small tmpfs where mounting is permitted) or fsynced
//! refuses writes with MISCONF, keeps the file valid and loses no acknowledged write;
//! a failed BGSAVE refuses writes while stop-writes-on-bgsave-error holds; files the
//! AOF manifest names must exist; a checksum-less RDB loads with Redis's notice.

mod common;

use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const AOF_ENOSPC: &str = "-MISCONF Errors writing to the AOF file: No space left on device\r\n";
const RDB_MISCONF: &str = "-MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.\r\n";

fn info(c: &mut RawConn, field: &str) -> String {
    let text = c.cmd(&["INFO", "persistence"]);
    text.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
}

fn aof_args(dir: &Path) -> Vec<String> {
    [
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--loglevel",
        "notice",
        "--logfile",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([dir.join("server.log").display().to_string()])
    .collect()
}

fn start_aof(dir: &Path, extra: &[&str]) -> TestServer {
    let mut args = aof_args(dir);
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    TestServer::start_in(dir, &refs)
}

fn incr_file(dir: &Path) -> PathBuf {
    dir.join("appendonlydir/appendonly.aof.1.incr.aof")
}

/// Whether a reply is already waiting on the connection (without blocking).
fn reply_ready(c: &mut RawConn) -> bool {
    if !c.reader.buffer().is_empty() {
        return true;
    }
    c.stream.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let r = c.stream.peek(&mut b);
    c.stream.set_nonblocking(false).unwrap();
    match r {
        Ok(n) => n > 0,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn full_disk_refuses_writes_holds_the_reply_and_loses_nothing() {
    let dir = temp_dir("aof-enospc");
    let mut s = start_aof(&dir, &[]);
    let mut admin = s.raw(2);
    assert_eq!(admin.cmd(&["SET", "k1", "v1"]), "+OK\r\n");
    let good_len = std::fs::metadata(incr_file(&dir)).unwrap().len();
    // Room for 5 more bytes: the next write tears, and is cut back off the file.
    assert_eq!(admin.cmd(&["DEBUG", "AOF-SPACE", "5"]), "+OK\r\n");
    let mut writer = s.raw(2);
    writer.send(&["SET", "k2", "v2"]);
    wait_until(|| info(&mut admin, "aof_last_write_status") == "err");
    assert_eq!(
        std::fs::metadata(incr_file(&dir)).unwrap().len(),
        good_len,
        "the torn write was not truncated"
    );
    // The write that did not reach the file is not acknowledged.
    assert!(!reply_ready(&mut writer));
    admin.check(&[
        (&["SET", "k3", "v3"], AOF_ENOSPC),
        (&["PING"], AOF_ENOSPC),
        (&["GET", "k1"], "$2\r\nv1\r\n"),
        (&["GET", "k2"], "$2\r\nv2\r\n"),
        (&["MULTI"], "+OK\r\n"),
        (&["SET", "k3", "v3"], AOF_ENOSPC),
        (
            &["EXEC"],
            "-EXECABORT Transaction discarded because of previous errors.\r\n",
        ),
    ]);
    let r = admin.cmd(&["EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "k4"]);
    assert!(
        r.starts_with("-MISCONF Errors writing to the AOF file: No space left on device"),
        "{r}"
    );
    let r = admin.cmd(&["EVAL", "return redis.call('GET', KEYS[1])", "1", "k1"]);
    assert_eq!(r, "$2\r\nv1\r\n");
    assert_eq!(
        admin.cmd(&["BGREWRITEAOF"]),
        "+Background append only file rewriting scheduled\r\n"
    );
    // Space comes back: the buffered write is retried, its reply goes out, and
    // writes are accepted again without anyone's help.
    assert_eq!(admin.cmd(&["DEBUG", "AOF-SPACE", "-1"]), "+OK\r\n");
    assert_eq!(writer.read_reply(), "+OK\r\n");
    wait_until(|| info(&mut admin, "aof_last_write_status") == "ok");
    assert_eq!(admin.cmd(&["SET", "k3", "v3"]), "+OK\r\n");
    let log = log_of(&dir);
    assert!(
        log.contains("Short write while writing to the AOF file: (nwritten=5, expected="),
        "{log}"
    );
    assert!(
        log.contains("AOF write error looks solved, Cinnabar can write again."),
        "{log}"
    );
    wait_until(|| {
        info(&mut admin, "aof_rewrite_in_progress") == "0"
            && info(&mut admin, "aof_rewrite_scheduled") == "0"
    });
    assert_eq!(admin.cmd(&["SET", "k5", "v5"]), "+OK\r\n");
    s.kill9();
    // Every acknowledged write is back, from files that load without truncation.
    let s = start_aof(&dir, &["--aof-load-truncated", "no"]);
    let mut c = s.raw(2);
    for (k, v) in [("k1", "v1"), ("k2", "v2"), ("k3", "v3"), ("k5", "v5")] {
        assert_eq!(c.cmd(&["GET", k]), format!("${}\r\n{v}\r\n", v.len()));
    }
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exec_with_queued_writes_is_aborted_by_a_write_error() {
    let dir = temp_dir("aof-enospc-exec");
    let s = start_aof(&dir, &[]);
    let mut admin = s.raw(2);
    let mut tx = s.raw(2);
    tx.check(&[(&["MULTI"], "+OK\r\n"), (&["SET", "t", "1"], "+QUEUED\r\n")]);
    assert_eq!(admin.cmd(&["DEBUG", "AOF-SPACE", "0"]), "+OK\r\n");
    let mut writer = s.raw(2);
    writer.send(&["SET", "w", "1"]);
    wait_until(|| info(&mut admin, "aof_last_write_status") == "err");
    assert_eq!(
        tx.cmd(&["EXEC"]),
        "-EXECABORT Transaction discarded because of: MISCONF Errors writing to the AOF file: No space left on device\r\n"
    );
    assert_eq!(admin.cmd(&["GET", "t"]), "$-1\r\n");
    assert_eq!(admin.cmd(&["DEBUG", "AOF-SPACE", "-1"]), "+OK\r\n");
    assert_eq!(writer.read_reply(), "+OK\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failed_fsync_refuses_writes_until_one_succeeds() {
    let dir = temp_dir("aof-fsync-err");
    let s = start_aof(&dir, &[]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["DEBUG", "AOF-FSYNC-ERROR", "5"]), "+OK\r\n");
    assert_eq!(c.cmd(&["SET", "a", "1"]), "+OK\r\n");
    wait_until(|| info(&mut c, "aof_last_write_status") == "err");
    c.check(&[
        (
            &["SET", "b", "1"],
            "-MISCONF Errors writing to the AOF file: Input/output error\r\n",
        ),
        (&["GET", "a"], "$1\r\n1\r\n"),
    ]);
    assert_eq!(c.cmd(&["DEBUG", "AOF-FSYNC-ERROR", "0"]), "+OK\r\n");
    wait_until(|| info(&mut c, "aof_last_write_status") == "ok");
    assert_eq!(c.cmd(&["SET", "b", "1"]), "+OK\r\n");
    assert!(log_of(&dir).contains("Fail to fsync the AOF file: Input/output error"));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under `everysec` a write waits for an fsync still in flight (Redis's
/// flushAppendOnlyFile), for 2 s at most: then it is made anyway, counted and logged,
/// and nothing is lost.
#[test]
fn a_slow_everysec_fsync_holds_the_write_back_for_two_seconds_at_most() {
    let dir = temp_dir("aof-slow-fsync");
    let s = start_aof(&dir, &[]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["DEBUG", "AOF-FSYNC-SLEEP", "5000"]), "+OK\r\n");
    assert_eq!(c.cmd(&["SET", "a", "1"]), "+OK\r\n");
    // The fsync covering `a` starts within a second and takes five.
    wait_until(|| info(&mut c, "aof_pending_bio_fsync") == "1");
    assert_eq!(info(&mut c, "aof_delayed_fsync"), "0");
    assert_eq!(c.cmd(&["SET", "b", "2"]), "+OK\r\n");
    wait_until(|| info(&mut c, "aof_delayed_fsync") == "1");
    assert!(log_of(&dir).contains("Asynchronous AOF fsync is taking too long (disk is busy?). Writing the AOF buffer without waiting for fsync to complete, this may slow down Redis."));
    assert_eq!(info(&mut c, "aof_buffer_length"), "0");
    let written = std::fs::read_to_string(incr_file(&dir)).unwrap();
    assert!(
        written.ends_with("*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n"),
        "{written:?}"
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A write held back by a slow fsync is not acknowledged until it is in the file: a
/// server killed meanwhile has either not answered, or answered and kept the key.
#[test]
fn a_write_postponed_by_a_slow_fsync_is_acknowledged_only_once_written() {
    let dir = temp_dir("aof-slow-fsync-kill");
    let mut s = start_aof(&dir, &[]);
    let mut c = s.raw(2);
    let mut admin = s.raw(2);
    assert_eq!(c.cmd(&["DEBUG", "AOF-FSYNC-SLEEP", "5000"]), "+OK\r\n");
    assert_eq!(c.cmd(&["SET", "a", "1"]), "+OK\r\n");
    wait_until(|| info(&mut admin, "aof_pending_bio_fsync") == "1");
    c.send(&["SET", "b", "2"]);
    // The write waits in the AOF buffer for the fsync in flight.
    wait_until(|| info(&mut admin, "aof_buffer_length") != "0");
    s.kill9();
    let mut got = String::new();
    let _ = c.reader.read_to_string(&mut got);
    let s = start_aof(&dir, &["--aof-load-truncated", "no"]);
    let mut after = s.raw(2);
    assert_eq!(after.cmd(&["GET", "a"]), "$1\r\n1\r\n");
    let b = after.cmd(&["GET", "b"]);
    if got == "+OK\r\n" {
        assert_eq!(b, "$1\r\n2\r\n", "acknowledged, then lost");
    } else {
        assert_eq!(got, "", "no reply before the kill");
    }
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn write_error_with_appendfsync_always_exits_without_acknowledging() {
    let dir = temp_dir("aof-enospc-always");
    let mut s = start_aof(&dir, &["--appendfsync", "always"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["SET", "k1", "v1"]), "+OK\r\n");
    assert_eq!(c.cmd(&["DEBUG", "AOF-SPACE", "3"]), "+OK\r\n");
    c.send(&["SET", "k2", "v2"]);
    let mut rest = Vec::new();
    let _ = c.reader.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    wait_until(|| !s.is_running());
    assert!(log_of(&dir).contains(
        "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting..."
    ));
    let s = start_aof(&dir, &["--aof-load-truncated", "no"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["GET", "k1"]), "$2\r\nv1\r\n");
    assert_eq!(c.cmd(&["GET", "k2"]), "$-1\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tmpfs mount, unmounted (and its mount point removed) when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(tag: &str, size: &str) -> Option<Tmpfs> {
        let dir = temp_dir(tag);
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|st| st.success());
        if !ok {
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
        Some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn real_full_filesystem_loses_no_acknowledged_write() {
    let Some(fs) = Tmpfs::mount("aof-tmpfs", "2m") else {
        eprintln!("skipped: mounting a tmpfs is not permitted here");
        return;
    };
    let dir = fs.0.clone();
    let log = temp_dir("aof-tmpfs-log");
    let logfile = log.join("server.log").display().to_string();
    let mut s = TestServer::start_in(
        &dir,
        &[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--logfile",
            &logfile,
        ],
    );
    // Fill the filesystem but for a little room.
    let filler = dir.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![b'x'; 4096];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
    }
    let len = std::fs::metadata(&filler).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(len.saturating_sub(64 * 1024))
        .unwrap();
    let mut admin = s.raw(2);
    let value = "v".repeat(1000);
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let space_back = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let port = s.port;
    // Writes until the disk is full (its last write waits for room) and room is back.
    let writer = {
        let acked = acked.clone();
        let space_back = space_back.clone();
        let value = value.clone();
        std::thread::spawn(move || {
            let mut c = RawConn::connect(port, 2);
            c.stream.set_read_timeout(None).unwrap();
            for i in 0.. {
                let key = format!("key:{i}");
                match c.cmd(&["SET", &key, &value]).as_str() {
                    "+OK\r\n" => acked.lock().unwrap().push(key),
                    r => assert!(r.starts_with("-MISCONF"), "{r}"),
                }
                if space_back.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
            }
        })
    };
    wait_until(|| info(&mut admin, "aof_last_write_status") == "err");
    // Reads work, writes are refused.
    assert_eq!(
        admin.cmd(&["GET", "key:0"]),
        format!("$1000\r\n{value}\r\n")
    );
    assert!(admin
        .cmd(&["SET", "x", "1"])
        .starts_with("-MISCONF Errors writing to the AOF file: No space left on device"));
    // Space comes back: writes resume by themselves.
    std::fs::remove_file(&filler).unwrap();
    space_back.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.join().unwrap();
    wait_until(|| info(&mut admin, "aof_last_write_status") == "ok");
    assert_eq!(admin.cmd(&["SET", "after", "1"]), "+OK\r\n");
    s.kill9();
    let s = TestServer::start_in(
        &dir,
        &[
            "--appendonly",
            "yes",
            "--aof-load-truncated",
            "no",
            "--save",
            "",
        ],
    );
    let mut c = s.raw(2);
    let acked = acked.lock().unwrap();
    assert!(!acked.is_empty());
    for k in acked.iter() {
        assert_eq!(
            c.cmd(&["EXISTS", k]),
            ":1\r\n",
            "{k} was acknowledged but lost"
        );
    }
    assert_eq!(c.cmd(&["GET", "after"]), "$1\r\n1\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&log);
}

#[test]
fn failed_bgsave_refuses_writes_while_save_points_are_set() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", "900 1"]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "stop-writes-on-bgsave-error"]),
        "*2\r\n$27\r\nstop-writes-on-bgsave-error\r\n$3\r\nyes\r\n"
    );
    assert_eq!(c.cmd(&["SET", "x", "1"]), "+OK\r\n");
    // A directory where the RDB file goes: the rename at the end of the save fails.
    let blocker = s.dir.join("dump.rdb");
    std::fs::create_dir(&blocker).unwrap();
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    wait_until(|| info(&mut c, "rdb_bgsave_in_progress") == "0");
    assert_eq!(info(&mut c, "rdb_last_bgsave_status"), "err");
    c.check(&[
        (&["SET", "x", "2"], RDB_MISCONF),
        (&["PING"], RDB_MISCONF),
        (&["GET", "x"], "$1\r\n1\r\n"),
        (&["MULTI"], "+OK\r\n"),
        (&["INCR", "x"], RDB_MISCONF),
        (
            &["EXEC"],
            "-EXECABORT Transaction discarded because of previous errors.\r\n",
        ),
        (
            &["EVAL", "return redis.call('GET', KEYS[1])", "1", "x"],
            "$1\r\n1\r\n",
        ),
    ]);
    let r = c.cmd(&["EVAL", "return redis.call('SET', KEYS[1], 'y')", "1", "x"]);
    assert!(
        r.starts_with("-MISCONF Redis is configured to save RDB snapshots"),
        "{r}"
    );
    // The rule needs the directive and save points.
    c.check(&[
        (
            &["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"],
            "+OK\r\n",
        ),
        (&["SET", "x", "2"], "+OK\r\n"),
        (
            &["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"],
            "+OK\r\n",
        ),
        (&["SET", "x", "3"], RDB_MISCONF),
        (&["CONFIG", "SET", "save", ""], "+OK\r\n"),
        (&["SET", "x", "3"], "+OK\r\n"),
        (&["CONFIG", "SET", "save", "900 1"], "+OK\r\n"),
        (&["SET", "x", "4"], RDB_MISCONF),
        // A failed SAVE does not change the status; a successful one clears it.
        (&["SAVE"], "-ERR\r\n"),
        (&["SET", "x", "4"], RDB_MISCONF),
    ]);
    std::fs::remove_dir(&blocker).unwrap();
    c.check(&[(&["SAVE"], "+OK\r\n"), (&["SET", "x", "4"], "+OK\r\n")]);
    // And so does a successful BGSAVE.
    std::fs::remove_file(&blocker).unwrap();
    std::fs::create_dir(&blocker).unwrap();
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    wait_until(|| info(&mut c, "rdb_bgsave_in_progress") == "0");
    assert_eq!(c.cmd(&["SET", "x", "5"]), RDB_MISCONF);
    std::fs::remove_dir(&blocker).unwrap();
    assert_eq!(c.cmd(&["BGSAVE"]), "+Background saving started\r\n");
    wait_until(|| info(&mut c, "rdb_bgsave_in_progress") == "0");
    assert_eq!(info(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(c.cmd(&["SET", "x", "5"]), "+OK\r\n");
}

/// Starts the server on `dir` and expects it to refuse: its exit status and log.
fn refused_start(dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let log = dir.join("refused.log");
    let _ = std::fs::remove_file(&log);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
        .args(["--port", &port, "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--logfile"])
        .arg(&log)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut code = None;
    for _ in 0..500 {
        if let Some(st) = child.try_wait().unwrap() {
            code = st.code();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if code.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the server started instead of refusing");
    }
    (code, std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn missing_aof_files_refuse_to_load() {
    let dir = temp_dir("aof-missing");
    let mut s = start_aof(&dir, &[]);
    assert_eq!(s.raw(2).cmd(&["SET", "k", "v"]), "+OK\r\n");
    wait_until(|| std::fs::metadata(incr_file(&dir)).is_ok_and(|m| m.len() > 0));
    s.kill9();
    let manifest = dir.join("appendonlydir/appendonly.aof.manifest");
    let original = std::fs::read_to_string(&manifest).unwrap();
    // The incremental file deleted.
    let incr = std::fs::read(incr_file(&dir)).unwrap();
    std::fs::remove_file(incr_file(&dir)).unwrap();
    let (code, log) = refused_start(&dir, &["--appendonly", "yes", "--always-show-logo", "yes"]);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("Unable to obtain the AOF file appendonly.aof.1.incr.aof length. stat: No such file or directory"),
        "{log}"
    );
    // As Redis, the banner (with `PID:`, which Redis's test harness waits for) and
    // "Server initialized" come before loading, so a refusal follows them.
    let banner = log.find(" PID: ").expect("banner");
    let initialized = log.find("Server initialized").expect("initialized");
    let refusal = log.find("Unable to obtain").unwrap();
    assert!(banner < initialized && initialized < refusal, "{log}");
    std::fs::write(incr_file(&dir), &incr).unwrap();
    // A manifest naming a file that was never there.
    std::fs::write(
        &manifest,
        format!("{original}file appendonly.aof.2.incr.aof seq 2 type i\n"),
    )
    .unwrap();
    let (code, log) = refused_start(&dir, &["--appendonly", "yes"]);
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("Unable to obtain the AOF file appendonly.aof.2.incr.aof length. stat: No such file or directory"), "{log}");
    // Manifests that do not describe one consistent history.
    for (text, reason) in [
        ("", "Found an empty AOF manifest"),
        ("file appendonly.aof.1.base.rdb seq 1 type b\n\nfile appendonly.aof.1.incr.aof seq 1 type i\n", "Invalid AOF manifest file format"),
        ("file appendonly.aof.1.incr.aof seq 2 type i\nfile appendonly.aof.1.base.rdb seq 1 type i\n", "Found a non-monotonic sequence number"),
    ] {
        std::fs::write(&manifest, text).unwrap();
        let (code, log) = refused_start(&dir, &["--appendonly", "yes"]);
        assert_eq!(code, Some(1), "{log}");
        assert!(log.contains("*** FATAL AOF MANIFEST FILE ERROR ***") && log.contains(reason), "{log}");
    }
    // The base deleted.
    std::fs::write(&manifest, &original).unwrap();
    std::fs::remove_file(dir.join("appendonlydir/appendonly.aof.1.base.rdb")).unwrap();
    let (code, log) = refused_start(&dir, &["--appendonly", "yes"]);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("Unable to obtain the AOF file appendonly.aof.1.base.rdb length."),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rdb_without_checksum_loads_with_a_notice() {
    let dir = temp_dir("rdb-nocksum");
    let mut s = TestServer::start_in(
        &dir,
        &["--appendonly", "no", "--save", "", "--rdbchecksum", "no"],
    );
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    s.kill9();
    let bytes = std::fs::read(dir.join("dump.rdb")).unwrap();
    assert_eq!(&bytes[bytes.len() - 8..], &[0u8; 8]);
    let logfile = dir.join("server.log").display().to_string();
    let s = TestServer::start_in(
        &dir,
        &[
            "--appendonly",
            "no",
            "--save",
            "",
            "--loglevel",
            "notice",
            "--logfile",
            &logfile,
        ],
    );
    assert_eq!(s.raw(2).cmd(&["GET", "k"]), "$1\r\nv\r\n");
    assert!(log_of(&dir).contains("RDB file was saved with checksum disabled: no check performed."));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn old_style_aof_with_rdb_preamble_is_upgraded_whole() {
    let dir = temp_dir("aof-upgrade");
    // An RDB image followed by commands: Redis 6's single AOF with a preamble.
    let mut s = TestServer::start_in(&dir, &["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["SET", "from_rdb", "1"]), "+OK\r\n");
    assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
    s.kill9();
    let mut old = std::fs::read(dir.join("dump.rdb")).unwrap();
    old.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$9\r\nfrom_cmds\r\n$1\r\n2\r\n");
    std::fs::remove_file(dir.join("dump.rdb")).unwrap();
    std::fs::write(dir.join("appendonly.aof"), &old).unwrap();
    let logfile = dir.join("server.log").display().to_string();
    let s = TestServer::start_in(
        &dir,
        &[
            "--appendonly",
            "yes",
            "--save",
            "",
            "--loglevel",
            "notice",
            "--logfile",
            &logfile,
        ],
    );
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["GET", "from_rdb"]), "$1\r\n1\r\n");
    assert_eq!(c.cmd(&["GET", "from_cmds"]), "$1\r\n2\r\n");
    assert!(!dir.join("appendonly.aof").exists());
    assert!(dir.join("appendonlydir/appendonly.aof").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap(),
        "file appendonly.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    assert!(log_of(&dir).contains(
        "Successfully migrated an old-style AOF file (appendonly.aof) into the AOF directory (appendonlydir)."
    ));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
