//! MIGRATE's connections to target instances: one cached connection per `host:port`,
//! reused across calls, owned by one worker thread that does all the network I/O, so
//! the event loop never waits for a target.
//!
//! As Redis's migrate socket cache: at most 64 connections (a new one past that
//! closes another), a connection idle for more than 10 seconds is closed, and each
//! remembers the database last selected so SELECT is sent only when it changes. The
//! exchange of one MIGRATE (AUTH, SELECT, the RESTOREs, their replies, one retry on
//! a fresh connection when a cached one turns out dead) follows Redis's migrateCommand;
//! the worker reports, per key, whether the target acknowledged it, and the executor
//! applies the outcome (`commands::migrate`).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::util::FastSet;

/// The most connections kept (Redis's MIGRATE_SOCKET_CACHE_ITEMS).
const CACHE_ITEMS: usize = 64;
/// Idle connections older than this are closed (MIGRATE_SOCKET_CACHE_TTL, seconds).
const CACHE_TTL: Duration = Duration::from_secs(10);
/// The query goes out in writes of at most this size, each within the timeout.
const WRITE_CHUNK: usize = 64 * 1024;
/// Reply lines are read into a buffer this long, as Redis's (longer ones are cut).
const LINE_MAX: usize = 1024;

/// One MIGRATE's exchange with its target.
pub struct Job {
    pub id: u64,
    pub host: String,
    pub port: String,
    pub timeout: Duration,
    /// AUTH arguments: (username, password) or (None, password).
    pub auth: Option<(Option<Vec<u8>>, Vec<u8>)>,
    pub dbid: i64,
    /// The RESTORE (or RESTORE-ASKING) commands, encoded.
    pub restores: Query,
    /// How many RESTOREs `restores` holds.
    pub nkeys: usize,
    reply_to: Option<Sender<(u64, Outcome)>>,
}

/// What the target answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every RESTORE was acknowledged.
    Ok,
    /// `acked[j]`: the j-th RESTORE succeeded (the key may be deleted here); `error`
    /// is the first error line the target sent (without its `-`), or an IOERR text.
    Failed { acked: Vec<bool>, error: String },
}

impl Outcome {
    /// Which keys the target holds now.
    pub fn acked(&self, nkeys: usize) -> Vec<bool> {
        match self {
            Outcome::Ok => vec![true; nkeys],
            Outcome::Failed { acked, .. } => acked.clone(),
        }
    }
}

/// The executor's side: the worker's queue and the jobs in flight.
#[derive(Default)]
pub struct Migrations {
    worker: Option<Sender<Job>>,
    results_tx: Option<Sender<(u64, Outcome)>>,
    results: Option<Receiver<(u64, Outcome)>>,
    waker: Option<Arc<mio::Waker>>,
    cached: Arc<AtomicUsize>,
    next_id: u64,
    /// Jobs in flight: id → what to do with the outcome (see `commands::migrate`).
    pub in_flight: HashMap<u64, super::migrate::Pending>,
    /// MIGRATEs whose big keys are still being serialized, a slice per loop turn.
    pub serializing: Vec<super::migrate::Serializing>,
    /// (db, key) of keys being serialized, or moved without COPY: writes to them wait
    /// (`holds`).
    pub locked: FastSet<(usize, Vec<u8>)>,
}

/// The token the worker wakes the event loop with; its event needs no handling
/// (the loop collects finished jobs every turn while any is in flight).
pub const WAKE_TOKEN: usize = usize::MAX - 66;

impl Migrations {
    /// INFO `migrate_cached_sockets`.
    pub fn cached_sockets(&self) -> usize {
        self.cached.load(Ordering::Relaxed)
    }

    /// Whether a transfer is in flight (the loop collects outcomes).
    pub fn busy(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Whether a MIGRATE is serializing (the loop turns at once for its next slice).
    pub fn serializing(&self) -> bool {
        !self.serializing.is_empty()
    }

    fn start(&mut self, registry: Option<&mio::Registry>) -> &Sender<Job> {
        if self.waker.is_none() {
            if let Some(r) = registry {
                self.waker = mio::Waker::new(r, mio::Token(WAKE_TOKEN))
                    .ok()
                    .map(Arc::new);
            }
        }
        if self.worker.is_none() {
            let (tx, rx) = mpsc::channel::<Job>();
            let (rtx, rrx) = mpsc::channel();
            let cached = self.cached.clone();
            let waker = self.waker.clone();
            std::thread::Builder::new()
                .name("migrate".into())
                .spawn(move || worker(rx, cached, waker))
                .expect("spawn the migrate thread");
            self.worker = Some(tx);
            self.results_tx = Some(rtx);
            self.results = Some(rrx);
        }
        self.worker.as_ref().expect("started")
    }

    /// Queues a job whose outcome `finished` returns later; returns its id.
    pub fn submit(&mut self, registry: Option<&mio::Registry>, mut job: Job) -> u64 {
        self.next_id += 1;
        job.id = self.next_id;
        self.start(registry);
        job.reply_to = self.results_tx.clone();
        let id = job.id;
        if let Some(w) = &self.worker {
            if w.send(job).is_err() {
                self.worker = None;
            }
        }
        id
    }

    /// Runs a job and waits for its outcome (MIGRATE inside MULTI/EXEC or a script,
    /// which cannot block: Redis waits there too).
    pub fn run_now(&mut self, mut job: Job) -> Outcome {
        let (tx, rx) = mpsc::channel();
        job.reply_to = Some(tx);
        let sent = self.start(None).send(job).is_ok();
        match rx.recv() {
            Ok((_, o)) if sent => o,
            _ => {
                self.worker = None;
                Outcome::Failed {
                    acked: Vec::new(),
                    error: "IOERR error or timeout writing to target instance".into(),
                }
            }
        }
    }

    /// Outcomes of jobs that finished since the last call.
    pub fn finished(&mut self) -> Vec<(u64, Outcome)> {
        match &self.results {
            Some(rx) => rx.try_iter().collect(),
            None => Vec::new(),
        }
    }
}

impl Job {
    pub fn new(host: &[u8], port: &[u8], timeout_ms: i64, dbid: i64) -> Job {
        Job {
            id: 0,
            host: String::from_utf8_lossy(host).into_owned(),
            port: String::from_utf8_lossy(port).into_owned(),
            timeout: Duration::from_millis(timeout_ms.max(1) as u64),
            auth: None,
            dbid,
            restores: Query::default(),
            nkeys: 0,
            reply_to: None,
        }
    }
}

/// A cached connection.
struct Cached {
    stream: TcpStream,
    /// The database last selected on it (-1: unknown, SELECT next time).
    last_dbid: i64,
    last_use: Instant,
}

fn worker(rx: Receiver<Job>, cached: Arc<AtomicUsize>, waker: Option<Arc<mio::Waker>>) {
    let mut cache: HashMap<String, Cached> = HashMap::new();
    loop {
        let job = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(j) => Some(j),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        cache.retain(|_, c| c.last_use.elapsed() <= CACHE_TTL);
        if let Some(mut job) = job {
            let outcome = exchange(&mut cache, &job);
            cached.store(cache.len(), Ordering::Relaxed);
            if let Some(tx) = job.reply_to.take() {
                let _ = tx.send((job.id, outcome));
            }
            if let Some(w) = &waker {
                let _ = w.wake();
            }
        }
        cached.store(cache.len(), Ordering::Relaxed);
    }
}

/// Redis's failure modes: connecting, writing, reading (a timeout is never retried).
enum Failure {
    Connect,
    Write(io::Error),
    Read(io::Error),
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// One MIGRATE's exchange, retried once on a fresh connection when the first failed
/// before any reply arrived (a cached connection the target closed), as Redis.
fn exchange(cache: &mut HashMap<String, Cached>, job: &Job) -> Outcome {
    let name = format!("{}:{}", job.host, job.port);
    let mut may_retry = true;
    loop {
        let failure = match attempt(cache, &name, job) {
            Ok(o) => return o,
            Err(f) => f,
        };
        cache.remove(&name);
        let (error, retry) = match &failure {
            Failure::Connect => {
                return Outcome::Failed {
                    acked: vec![false; job.nkeys],
                    error: "IOERR error or timeout connecting to the client".into(),
                }
            }
            Failure::Write(e) => ("writing", !is_timeout(e)),
            Failure::Read(e) => ("reading", !is_timeout(e)),
        };
        if retry && may_retry {
            may_retry = false;
            continue;
        }
        return Outcome::Failed {
            acked: vec![false; job.nkeys],
            error: format!("IOERR error or timeout {error} to target instance"),
        };
    }
}

fn connect(host: &str, port: &str, timeout: Duration) -> Option<TcpStream> {
    let port: u16 = port.parse().ok()?;
    let addrs = (host, port).to_socket_addrs().ok()?;
    for a in addrs {
        if let Ok(s) = TcpStream::connect_timeout(&a, timeout) {
            let _ = s.set_nodelay(true);
            return Some(s);
        }
    }
    None
}

/// Appends one command in RESP.
pub fn push_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    crate::protocol::reply::encode_command(args, out);
}

/// Commands in RESP, written out in order: small ones share a buffer, a big
/// argument (a DUMP payload of megabytes) is kept as the vector it was built in.
#[derive(Default)]
pub struct Query {
    parts: Vec<Vec<u8>>,
}

/// Arguments at least this long are moved into the query rather than copied.
const OWNED_ARG: usize = 64 * 1024;

impl Query {
    fn tail(&mut self) -> &mut Vec<u8> {
        if self.parts.last().is_none_or(|p| p.len() >= OWNED_ARG) {
            self.parts.push(Vec::new());
        }
        self.parts.last_mut().expect("pushed")
    }

    /// Appends a command.
    pub fn push(&mut self, args: &[&[u8]]) {
        push_command(self.tail(), args);
    }

    /// Appends a command whose argument at `at` is the concatenation of `pieces`,
    /// taken over rather than copied when big.
    pub fn push_with(&mut self, args: &[&[u8]], at: usize, pieces: Vec<Vec<u8>>) {
        let len: usize = pieces.iter().map(Vec::len).sum();
        if len < OWNED_ARG {
            let arg = pieces.concat();
            let mut all = args.to_vec();
            all.insert(at, &arg);
            return self.push(&all);
        }
        let out = self.tail();
        out.extend_from_slice(format!("*{}\r\n", args.len() + 1).as_bytes());
        for a in &args[..at] {
            crate::protocol::reply::encode_bulk(a, out);
        }
        out.extend_from_slice(format!("${len}\r\n").as_bytes());
        self.parts
            .extend(pieces.into_iter().filter(|p| !p.is_empty()));
        let mut rest = b"\r\n".to_vec();
        for a in &args[at..] {
            crate::protocol::reply::encode_bulk(a, &mut rest);
        }
        self.parts.push(rest);
    }

    /// The bytes, in one vector (tests).
    #[cfg(test)]
    pub fn concat(&self) -> Vec<u8> {
        self.parts.concat()
    }
}

/// Reads one reply line (without CR LF), as Redis's syncReadLine; EOF is an error.
fn read_line(s: &mut TcpStream, pending: &mut Vec<u8>) -> io::Result<Vec<u8>> {
    loop {
        if let Some(i) = pending.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = pending.drain(..=i).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            line.truncate(LINE_MAX - 1);
            return Ok(line);
        }
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
        }
        pending.extend_from_slice(&buf[..n]);
    }
}

fn attempt(cache: &mut HashMap<String, Cached>, name: &str, job: &Job) -> Result<Outcome, Failure> {
    if !cache.contains_key(name) {
        if cache.len() >= CACHE_ITEMS {
            // Full: another connection goes (Redis drops a random one).
            if let Some(k) = cache.keys().next().cloned() {
                cache.remove(&k);
            }
        }
        let stream = connect(&job.host, &job.port, job.timeout).ok_or(Failure::Connect)?;
        cache.insert(
            name.to_string(),
            Cached {
                stream,
                last_dbid: -1,
                last_use: Instant::now(),
            },
        );
    }
    let c = cache.get_mut(name).expect("cached");
    c.last_use = Instant::now();
    let _ = c.stream.set_write_timeout(Some(job.timeout));
    let _ = c.stream.set_read_timeout(Some(job.timeout));

    let mut head = Vec::new();
    if let Some((user, pass)) = &job.auth {
        match user {
            Some(u) => push_command(&mut head, &[b"AUTH", u, pass]),
            None => push_command(&mut head, &[b"AUTH", pass]),
        }
    }
    let select = c.last_dbid != job.dbid;
    if select {
        push_command(&mut head, &[b"SELECT", job.dbid.to_string().as_bytes()]);
    }
    for part in std::iter::once(&head).chain(&job.restores.parts) {
        for chunk in part.chunks(WRITE_CHUNK) {
            c.stream.write_all(chunk).map_err(Failure::Write)?;
        }
    }
    let mut pending = Vec::new();
    let auth_line = match job.auth {
        Some(_) => Some(read_line(&mut c.stream, &mut pending).map_err(Failure::Read)?),
        None => None,
    };
    let select_line = match select {
        true => Some(read_line(&mut c.stream, &mut pending).map_err(Failure::Read)?),
        false => None,
    };
    let mut acked = vec![false; job.nkeys];
    let mut error: Option<String> = None;
    let mut socket_error: Option<io::Error> = None;
    let mut read = 0;
    for ack in acked.iter_mut() {
        let line = match read_line(&mut c.stream, &mut pending) {
            Ok(l) => l,
            Err(e) => {
                socket_error = Some(e);
                break;
            }
        };
        read += 1;
        let failed = [
            auth_line.as_deref(),
            select_line.as_deref(),
            Some(&line[..]),
        ]
        .into_iter()
        .flatten()
        .find(|l| l.first() == Some(&b'-'));
        match failed {
            Some(l) => {
                if error.is_none() {
                    c.last_dbid = -1;
                    error = Some(format!(
                        "ERR Target instance replied with error: {}",
                        String::from_utf8_lossy(&l[1..])
                    ));
                }
            }
            None => *ack = true,
        }
    }
    if let Some(e) = socket_error {
        if error.is_none() && read == 0 {
            // Nothing was processed: retried on a fresh connection (unless a timeout).
            return Err(Failure::Read(e));
        }
        cache.remove(name);
        let error =
            error.unwrap_or_else(|| "IOERR error or timeout reading to target instance".into());
        return Ok(Outcome::Failed { acked, error });
    }
    match error {
        Some(error) => Ok(Outcome::Failed { acked, error }),
        None => {
            c.last_dbid = job.dbid;
            Ok(Outcome::Ok)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_argument_is_moved_into_the_query_between_its_neighbours() {
        let big = vec![b'x'; OWNED_ARG];
        let pieces = |p: &[u8]| p.chunks(1000).map(|c| c.to_vec()).collect::<Vec<_>>();
        for (payload, replace) in [(b"small".to_vec(), true), (big.clone(), true), (big, false)] {
            let mut q = Query::default();
            q.push(&[b"SELECT", b"1"]);
            let mut args: Vec<&[u8]> = vec![b"RESTORE", b"k", b"0"];
            if replace {
                args.push(b"REPLACE");
            }
            q.push_with(&args, 3, pieces(&payload));
            q.push(&[b"PING"]);
            let mut want = Vec::new();
            push_command(&mut want, &[b"SELECT", b"1"]);
            let mut all = args.clone();
            all.insert(3, &payload);
            push_command(&mut want, &all);
            push_command(&mut want, &[b"PING"]);
            assert_eq!(q.concat(), want);
        }
    }
}
