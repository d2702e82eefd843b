//! Test harness: starts a real `cinnabar` process on an ephemeral loopback port in a
//! fresh temporary directory, and talks to it over TCP either with the `redis` crate or
//! with a raw connection that returns each reply's exact bytes.
//!
//! Table-driven tests use `RawConn::check`: rows of (command, RESP2 reply, RESP3 reply).

#![allow(dead_code)]

pub mod cluster;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

pub struct TestServer {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
    /// Whether the directory outlives the server (restart tests own it).
    keep_dir: bool,
    /// Where the server's log and stderr go: shown if the server dies on its own
    /// or the test fails.
    output_path: PathBuf,
    /// The `--logfile` a test gave it, shown with the output when the test fails.
    logfile: Option<PathBuf>,
}

/// A fresh temporary directory for tests that restart servers on the same data.
pub fn temp_dir(tag: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("cinnabar-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether the server answering on `port` is the process `pid` (two tests may race
/// for the same free port; the loser must not use the winner's server).
fn serves_pid(port: u16, pid: u32, password: Option<&str>) -> bool {
    let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Ok(read_half) = stream.try_clone() else {
        return false;
    };
    let mut reader = BufReader::new(read_half);
    let mut stream = stream;
    // Nothing here may panic: the process on this port may be exiting (a lost port
    // race), and the caller then simply tries another port.
    let mut line = Vec::new();
    if let Some(p) = password {
        let auth = format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{p}\r\n", p.len());
        if stream.write_all(auth.as_bytes()).is_err()
            || reader.read_until(b'\n', &mut line).is_err()
            || line != b"+OK\r\n"
        {
            return false;
        }
        line.clear();
    }
    if stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .is_err()
    {
        return false;
    }
    if reader.read_until(b'\n', &mut line).is_err() || !line.starts_with(b"$") || line.len() < 3 {
        return false;
    }
    let n: usize = String::from_utf8_lossy(&line[1..line.len() - 2])
        .parse()
        .unwrap_or(0);
    let mut body = vec![0; n + 2];
    if reader.read_exact(&mut body).is_err() {
        return false;
    }
    String::from_utf8_lossy(&body).contains(&format!("process_id:{pid}\r\n"))
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl TestServer {
    /// Starts a server with test-friendly defaults plus `extra` directives.
    pub fn start() -> TestServer {
        Self::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> TestServer {
        let dir = temp_dir("test");
        let mut s = Self::start_in(&dir, extra);
        s.keep_dir = false;
        s
    }

    /// Starts a server on an existing directory (kept when the server is dropped), so
    /// a test can stop it and start another on the same files.
    pub fn start_in(dir: &std::path::Path, extra: &[&str]) -> TestServer {
        Self::try_start_in(dir, extra).expect("cinnabar did not start")
    }

    /// `start_in`, returning None if the server exits instead of serving (e.g. it
    /// refused its data files).
    pub fn try_start_in(dir: &std::path::Path, extra: &[&str]) -> Option<TestServer> {
        Self::try_start_on(dir, None, extra)
    }

    /// `start_in` on a given port (a node restarted where its peers expect it).
    pub fn start_on(dir: &std::path::Path, port: u16, extra: &[&str]) -> TestServer {
        Self::try_start_on(dir, Some(port), extra).expect("cinnabar did not start")
    }

    /// `start_on`, returning None if the server exits instead of serving.
    pub fn try_start_on_port(
        dir: &std::path::Path,
        port: u16,
        extra: &[&str],
    ) -> Option<TestServer> {
        Self::try_start_on(dir, Some(port), extra)
    }

    fn try_start_on(
        dir: &std::path::Path,
        fixed_port: Option<u16>,
        extra: &[&str],
    ) -> Option<TestServer> {
        let dir = dir.to_path_buf();
        for _attempt in 0..5 {
            let port = fixed_port.unwrap_or_else(free_port);
            let mut args: Vec<String> = vec![
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
                "--dir".into(),
                dir.display().to_string(),
                // As Redis's own test suite (its default.conf): tests may use DEBUG,
                // MODULE and CONFIG SET dir/dbfilename; the server's defaults are `no`.
                "--enable-debug-command".into(),
                "yes".into(),
                "--enable-protected-configs".into(),
                "yes".into(),
                "--enable-module-command".into(),
                "yes".into(),
                // Full resyncs start at once, as in Redis's default.conf (the
                // server's default waits 5 seconds for more replicas).
                "--repl-diskless-sync-delay".into(),
                "0".into(),
                // Replication and persistence events: a failing test shows them.
                "--loglevel".into(),
                "notice".into(),
            ];
            // CINNABAR_TEST_IO_THREADS=N runs every test server with N I/O threads
            // that take every read and write, however few clients a test has.
            if let Ok(n) = std::env::var("CINNABAR_TEST_IO_THREADS") {
                args.extend(["--io-threads".into(), n]);
                args.extend(["--io-threads-always-active".into(), "yes".into()]);
            }
            args.extend(extra.iter().map(|s| s.to_string()));
            let output_path = std::env::temp_dir().join(format!(
                "cinnabar-test-{}-{}.out",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::SeqCst)
            ));
            // The log (stdout at `--loglevel warning`: panics, fatal errors) and stderr.
            let output = std::fs::File::create(&output_path).expect("create output file");
            let mut child = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
                .args(&args)
                .stdout(output.try_clone().expect("clone output file"))
                .stderr(output)
                .spawn()
                .expect("spawn cinnabar");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // Exited: probably lost the port race; try another port.
                }
                let password = extra
                    .windows(2)
                    .find(|w| w[0] == "--requirepass")
                    .map(|w| w[1]);
                if serves_pid(port, child.id(), password) {
                    return Some(TestServer {
                        child,
                        port,
                        dir,
                        keep_dir: true,
                        output_path,
                        logfile: extra
                            .windows(2)
                            .rfind(|w| w[0] == "--logfile")
                            .map(|w| PathBuf::from(w[1])),
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&output_path);
        }
        None
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process with SIGKILL (a crash) and waits for it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A `redis` crate connection speaking RESP2.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// A `redis` crate connection speaking RESP3.
    pub fn client3(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// A raw connection in RESP2 (`proto` 2) or RESP3 (`proto` 3, after HELLO 3).
    pub fn raw(&self, proto: u8) -> RawConn {
        RawConn::connect(self.port, proto)
    }

    /// Whether the server process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The exit status code of a process that has exited (None while it runs, or
    /// when a signal ended it).
    pub fn exit_code(&mut self) -> Option<i32> {
        self.child
            .try_wait()
            .ok()
            .flatten()
            .and_then(|st| st.code())
    }

    /// The exit status of a process that has exited (None while it runs).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends SIGTERM and waits for a clean exit; returns the exit status code.
    pub fn terminate(&mut self) -> Option<i32> {
        // SAFETY: sending a signal to our own child process id.
        unsafe { libc_kill(self.child.id() as i32, 15) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // A server that exited before the test stopped it crashed or was shut down;
        // its stderr (a panic message, a fatal log line) explains a failing test, as
        // its log does when the test itself failed (a wait that timed out).
        let exited = match self.child.try_wait() {
            Ok(Some(status)) if !status.success() => Some(status.to_string()),
            _ => None,
        };
        if exited.is_some() || std::thread::panicking() {
            let why = exited.unwrap_or_else(|| "the test failed".to_string());
            let mut text = tail(&self.output_path, 200);
            if let Some(log) = &self.logfile {
                text.push_str(&format!("--- {}:\n{}", log.display(), tail(log, 200)));
            }
            eprintln!("cinnabar on port {} ({why}):\n{text}", self.port);
        }
        let _ = std::fs::remove_file(&self.output_path);
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The last `lines` lines of a text file (empty if it cannot be read).
fn tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    let mut out = all[all.len().saturating_sub(lines)..].join("\n");
    out.push('\n');
    out
}

/// A raw RESP connection returning replies as exact text.
pub struct RawConn {
    pub reader: BufReader<TcpStream>,
    pub stream: TcpStream,
}

impl RawConn {
    /// One field of INFO `section` (`everything` for all), as text.
    pub fn info_field(&mut self, section: &str, field: &str) -> String {
        let text = self.cmd(&["INFO", section]);
        let prefix = format!("{field}:");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
            .to_string()
    }

    pub fn connect(port: u16, proto: u8) -> RawConn {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut c = RawConn {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        };
        if proto == 3 {
            let r = c.cmd(&["HELLO", "3"]);
            assert!(r.starts_with('%'), "HELLO 3 failed: {r}");
        }
        c
    }

    /// Encodes and sends a command without reading the reply.
    pub fn send(&mut self, args: &[&str]) {
        self.send_bytes(&args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>());
    }

    pub fn send_bytes(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&out).unwrap();
    }

    /// Sends a command and returns its reply's exact bytes as text.
    pub fn cmd(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.read_reply()
    }

    /// Reads one complete reply frame (nested aggregates included).
    pub fn read_reply(&mut self) -> String {
        let mut out = Vec::new();
        self.read_frame(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn read_frame(&mut self, out: &mut Vec<u8>) {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).unwrap();
        assert!(!line.is_empty(), "connection closed");
        out.extend_from_slice(&line);
        let kind = line[0];
        let body = std::str::from_utf8(&line[1..line.len() - 2]).unwrap_or("0");
        match kind {
            b'$' | b'=' | b'!' => {
                let n: i64 = body.parse().unwrap();
                if n >= 0 {
                    let mut buf = vec![0; n as usize + 2];
                    self.reader.read_exact(&mut buf).unwrap();
                    out.extend_from_slice(&buf);
                }
            }
            b'*' | b'~' | b'>' => {
                let n: i64 = body.parse().unwrap();
                for _ in 0..n.max(0) {
                    self.read_frame(out);
                }
            }
            b'%' | b'|' => {
                let n: i64 = body.parse().unwrap();
                for _ in 0..n * 2 {
                    self.read_frame(out);
                }
            }
            _ => {}
        }
    }

    /// Runs each (command, expected reply) row, asserting the exact reply text.
    pub fn check(&mut self, rows: &[(&[&str], &str)]) {
        for (args, want) in rows {
            let got = self.cmd(args);
            assert_eq!(got, *want, "command {args:?}");
        }
    }
}

/// Runs table rows of (command, RESP2 reply, RESP3 reply) on fresh connections of
/// both protocol versions, flushing the database before each column.
pub fn check_both(server: &TestServer, rows: &[(&[&str], &str, &str)]) {
    for proto in [2u8, 3] {
        let mut c = server.raw(proto);
        c.cmd(&["FLUSHALL"]);
        for (args, two, three) in rows {
            let got = c.cmd(args);
            let want = if proto == 2 { two } else { three };
            assert_eq!(&got, want, "RESP{proto} command {args:?}");
        }
    }
}

/// Whether Debian's redis-server is installed (differential tests run only then).
pub fn redis_server_available() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A reference redis-server on an ephemeral port, for differential tests.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        Self::start_with(Vec::new)
    }

    /// `start` plus the directives `extra` gives for each start attempt (drawn anew
    /// each time, so a cluster node's bus port lost to another process is not tried
    /// again).
    pub fn start_with(extra: impl Fn() -> Vec<String>) -> RedisServer {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("cinnabar-redis-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    &dir.display().to_string(),
                    "--enable-debug-command",
                    "yes",
                ])
                .args(extra())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if serves_pid(port, child.id(), None) {
                    return RedisServer { child, port, dir };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start");
    }

    pub fn raw(&self, proto: u8) -> RawConn {
        RawConn::connect(self.port, proto)
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// Kills the process with SIGKILL (a crash) and waits for it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A reply of Debian's redis-server 7.0 as Redis 7.4 would write it: 7.0 prints
/// doubles with `%.17g` (`0.10000000000000001`), 7.4 the shortest round-trip form
/// (`0.1`, `1e+300`, see `util::numeric::format_f64`). Every bulk string or RESP3
/// double whose text is exactly `%.17g` of some double is rewritten in 7.4's form;
/// other texts (members, 4-decimal GEO distances, GEOPOS's long-double coordinates)
/// never equal their own `%.17g` form unless both forms agree.
pub fn redis74_doubles(reply: &str) -> String {
    use cinnabar::util::numeric::{format_f64, format_f64_17g, parse_f64};
    let as_74 = |text: &str| -> Option<String> {
        let v = parse_f64(text.as_bytes())?;
        (format_f64_17g(v) == text).then(|| format_f64(v))
    };
    let mut out = String::with_capacity(reply.len());
    let mut rest = reply;
    while !rest.is_empty() {
        let line_end = rest.find("\r\n").map_or(rest.len(), |i| i + 2);
        let line = &rest[..line_end];
        let bulk = line
            .strip_prefix('$')
            .and_then(|l| l.trim_end().parse::<usize>().ok())
            .and_then(|len| Some((len, rest.get(line_end..line_end + len)?)))
            .filter(|(len, _)| rest.get(..line_end + len + 2).is_some());
        if let Some((len, data)) = bulk {
            match as_74(data) {
                Some(d) => out.push_str(&format!("${}\r\n{d}\r\n", d.len())),
                None => out.push_str(&rest[..line_end + len + 2]),
            }
            rest = &rest[line_end + len + 2..];
            continue;
        }
        match line.strip_prefix(',').and_then(|l| as_74(l.trim_end())) {
            Some(d) => out.push_str(&format!(",{d}\r\n")),
            None => out.push_str(line),
        }
        rest = &rest[line_end..];
    }
    out
}

/// Sends the same commands to Cinnabar and to redis-server and asserts identical raw
/// replies, in RESP2 and RESP3 (redis-server's doubles taken in Redis 7.4's form, see
/// `redis74_doubles`).
pub fn assert_same_as_redis(server: &TestServer, redis: &RedisServer, commands: &[&[&str]]) {
    for proto in [2u8, 3] {
        let mut ours = server.raw(proto);
        let mut theirs = redis.raw(proto);
        ours.cmd(&["FLUSHALL"]);
        theirs.cmd(&["FLUSHALL"]);
        for args in commands {
            let a = ours.cmd(args);
            let b = theirs.cmd(args);
            // GEO replies print coordinates as long doubles (unchanged in 7.4), whose
            // text can look like `%.17g`; their distances are fixed-point.
            let geo = args
                .first()
                .is_some_and(|c| c.to_ascii_lowercase().starts_with("geo"));
            let b = if geo { b } else { redis74_doubles(&b) };
            assert_eq!(
                a, b,
                "RESP{proto} reply differs from redis-server for {args:?}"
            );
        }
    }
}

// ----- helpers shared by the persistence tests -------------------------------------

pub fn run(c: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Every key of every database with type, expiry and contents, canonically.
pub fn image(c: &mut redis::Connection) -> Vec<String> {
    let mut out = Vec::new();
    for db in 0..16 {
        run(c, &["SELECT", &db.to_string()]);
        let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
        keys.sort();
        for k in keys {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).unwrap();
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(c).unwrap();
            let mut items: Vec<Vec<u8>> = match t.as_str() {
                "string" => vec![redis::cmd("GET").arg(&k).query(c).unwrap()],
                "list" => redis::cmd("LRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .query(c)
                    .unwrap(),
                "set" => redis::cmd("SMEMBERS").arg(&k).query(c).unwrap(),
                "zset" => redis::cmd("ZRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(c)
                    .unwrap(),
                "hash" => {
                    let v: Vec<Vec<u8>> = redis::cmd("HGETALL").arg(&k).query(c).unwrap();
                    v.chunks(2)
                        .map(|p| [p[0].clone(), b"=".to_vec(), p[1].clone()].concat())
                        .collect()
                }
                _ => vec![],
            };
            if t == "set" || t == "hash" {
                items.sort();
            }
            out.push(format!("{db} {k} {t} at={at} {:?}", items));
        }
    }
    run(c, &["SELECT", "0"]);
    out
}

pub fn info_field(c: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.to_string()))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
}

/// Whether two servers hold the same data (`image`: every db, type, expiry and content).
pub fn same_data(a: u16, b: u16) -> bool {
    let open = |p: u16| {
        redis::Client::open(format!("redis://127.0.0.1:{p}/"))
            .unwrap()
            .get_connection()
            .unwrap()
    };
    image(&mut open(a)) == image(&mut open(b))
}

/// Waits until `replica`'s link is up at its master's offset and their data agree.
pub fn wait_replica_synced(master: u16, replica: u16) {
    let field = |p: u16, f: &str| RawConn::connect(p, 2).info_field("replication", f);
    wait_until(|| {
        field(replica, "master_link_status") == "up"
            && field(master, "master_repl_offset") == field(replica, "master_repl_offset")
    });
    wait_until(|| same_data(master, replica));
}

pub fn wait_until(mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) until INFO reports `n` blocked clients.
pub fn wait_blocked(s: &TestServer, n: usize) {
    let mut c = s.raw(2);
    let want = format!("blocked_clients:{n}\r\n");
    for _ in 0..1000 {
        if c.cmd(&["INFO", "clients"]).contains(&want) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("never reached {n} blocked clients");
}

/// A field of INFO clients, read on a fresh connection.
pub fn clients_info_field(s: &TestServer, field: &str) -> String {
    let info = s.raw(2).cmd(&["INFO", "clients"]);
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap()
}
