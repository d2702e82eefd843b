//! Forkless point-in-time snapshots (BGSAVE, the RDB base of an AOF rewrite) by
//! key-level copy-on-write.
//!
//! `Snapshot::begin` attaches a `TableSink` to every database's key table
//! (`KeyTable::cow_begin`), which makes every existing key "unwritten". From then on
//! the table itself hands each unwritten key to its sink exactly once: from the walker
//! (`Snapshot::step`, a bounded slice per event-loop turn) or just before the key is
//! modified, overwritten, expired, evicted, renamed, moved or deleted. Tables follow
//! their sink through SWAPDB (the sink remembers the database number it had at the
//! start), and tables emptied by FLUSHDB/FLUSHALL are parked in `Keyspace::retired`
//! and walked like the others. Keys created during the snapshot carry the current
//! mark and are skipped. So the file holds exactly the dataset of the instant the
//! snapshot began, with no fork and no second copy of the data: only keys changed
//! before the walker reached them are copied, once each.
//!
//! The executor does the cheap half: it copies keys and values into a compact
//! intermediate form (`Deferred`: verbatim RDB bytes, plus strings longer than 20
//! bytes left for the writer to LZF-compress). A writer thread does the rest: LZF,
//! CRC64, writes to a temp file, fsync, rename, fsync of the directory. Records of
//! different databases interleave; each run is preceded by SELECTDB, which Redis's
//! loader accepts any number of times. The walker pauses while more than
//! `INFLIGHT_LIMIT` bytes wait for the writer, so memory stays bounded whatever the
//! disk speed; copy-on-write records are never held back (a write cannot wait).
//!
//! A snapshot's bytes go to a file (`Target::File`) or, for a diskless full
//! resynchronization, into an `ImagePipe` (`Target::Stream`) that the event loop
//! empties into the replicas' output buffers as they drain (Redis's rdb pipe from a
//! fork child to its parent). The walker also pauses while the pipe holds more than
//! `PIPE_LIMIT` bytes, so the slowest replica paces the walk; the writer itself never
//! waits for the loop, so a caller that drives a snapshot to its end cannot deadlock.
//!
//! Cancelling (FLUSHALL kills a BGSAVE as Redis kills its child, SHUTDOWN, an I/O
//! error) tells the writer to delete its temp file; the walk then
//! goes on without serializing anything, only bringing marks back in line, before
//! another snapshot may start.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::rdb::{self, Out};
use crate::keyspace::{CowSink, KeyTable, Keyspace, ValueRef};

/// Bytes handed to the writer and not yet written beyond which the walker waits.
pub const INFLIGHT_LIMIT: usize = 4 << 20;
/// Bytes a streamed image's pipe may hold, not yet taken by the loop, beyond which
/// the walker waits.
pub const PIPE_LIMIT: usize = 4 << 20;
/// A sink hands its buffer to the writer once it holds this much; the writer pushes
/// streamed bytes into the pipe in chunks of this size too.
const CHUNK: usize = 256 << 10;
/// Buckets walked between clock checks: about 120 keys (buckets hold eight entries).
const BATCH: usize = 16;

const SEG_RAW: u8 = 0;
const SEG_STR: u8 = 1;

/// Serialized records in the executor's cheap form: segments `tag, u32 len, bytes`,
/// either verbatim RDB bytes or a string the writer encodes with `rdb::write_string`.
#[derive(Default)]
struct Deferred {
    bytes: Vec<u8>,
    /// Where the open verbatim segment's length field is.
    open: Option<usize>,
}

impl Deferred {
    fn close(&mut self) {
        if let Some(at) = self.open.take() {
            let n = (self.bytes.len() - at - 4) as u32;
            self.bytes[at..at + 4].copy_from_slice(&n.to_le_bytes());
        }
    }

    fn open_raw(&mut self) {
        if self.open.is_none() {
            self.bytes.push(SEG_RAW);
            self.open = Some(self.bytes.len());
            self.bytes.extend_from_slice(&[0; 4]);
        }
    }

    fn take(&mut self) -> Vec<u8> {
        self.close();
        std::mem::take(&mut self.bytes)
    }
}

impl Out for Deferred {
    fn raw(&mut self, b: &[u8]) {
        self.open_raw();
        self.bytes.extend_from_slice(b);
    }

    fn string(&mut self, s: &[u8]) {
        // Strings of 20 bytes or less are never compressed: encode them here.
        if s.len() <= 20 {
            self.open_raw();
            rdb::write_string(&mut self.bytes, s, false);
        } else {
            self.close();
            self.bytes.push(SEG_STR);
            self.bytes
                .extend_from_slice(&(s.len() as u32).to_le_bytes());
            self.bytes.extend_from_slice(s);
        }
    }

    fn length(&mut self, n: u64) {
        self.open_raw();
        rdb::write_len(&mut self.bytes, n);
    }
}

/// Expands deferred segments into RDB bytes.
fn expand(data: &[u8], compress: bool, out: &mut Vec<u8>) {
    let mut i = 0;
    while i + 5 <= data.len() {
        let tag = data[i];
        let n = u32::from_le_bytes([data[i + 1], data[i + 2], data[i + 3], data[i + 4]]) as usize;
        let seg = &data[i + 5..i + 5 + n];
        if tag == SEG_RAW {
            out.extend_from_slice(seg);
        } else {
            rdb::write_string(out, seg, compress);
        }
        i += 5 + n;
    }
}

/// State shared by the sinks, the driver and the writer thread.
#[derive(Default)]
struct Shared {
    /// Bytes sent to the writer and not yet written.
    inflight: AtomicUsize,
    /// Bytes serialized because a key was about to change (INFO `*_cow_size`).
    cow_bytes: AtomicU64,
    /// Keys serialized so far.
    keys: AtomicU64,
    discard: AtomicBool,
    needs_v12: AtomicBool,
    /// `rdb-key-save-delay` as the snapshot began: microseconds the writer sleeps
    /// per key (negative: one microsecond every -n keys on average), a test hook.
    key_delay: AtomicI64,
}

enum Msg {
    Chunk { db: usize, data: Vec<u8>, keys: u64 },
    Finish,
    Abort,
}

/// A table's sink: serializes into a local buffer, sent to the writer per turn.
struct TableSink {
    /// The database number the table had when the snapshot began.
    db: usize,
    /// Records are RESP commands (`resp_image`) rather than RDB records.
    resp: bool,
    /// What each key's record says of its access history.
    access: rdb::AccessSave,
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    buf: Deferred,
    /// Keys in `buf`.
    keys: u64,
}

impl CowSink for TableSink {
    fn save(
        &mut self,
        key: &[u8],
        value: ValueRef<'_>,
        expire: Option<i64>,
        access: u32,
        before_write: bool,
    ) {
        if self.shared.discard.load(Ordering::Relaxed) {
            return;
        }
        let start = self.buf.bytes.len();
        if self.resp {
            self.buf.open_raw();
            super::resp_image::key(&mut self.buf.bytes, key, value, expire);
        } else {
            self.rdb_record(key, value, expire, access);
        }
        if before_write {
            let n = (self.buf.bytes.len() - start) as u64;
            self.shared.cow_bytes.fetch_add(n, Ordering::Relaxed);
        }
        self.shared.keys.fetch_add(1, Ordering::Relaxed);
        self.keys += 1;
        if self.buf.bytes.len() >= CHUNK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.buf.bytes.is_empty() {
            return;
        }
        let data = self.buf.take();
        let keys = std::mem::take(&mut self.keys);
        if self.shared.discard.load(Ordering::Relaxed) {
            return;
        }
        self.shared
            .inflight
            .fetch_add(data.len(), Ordering::Relaxed);
        let n = data.len();
        if self
            .tx
            .send(Msg::Chunk {
                db: self.db,
                data,
                keys,
            })
            .is_err()
        {
            // The writer stopped (an I/O error): the driver cancels the snapshot.
            self.shared.inflight.fetch_sub(n, Ordering::Relaxed);
        }
    }

    fn discarding(&self) -> bool {
        self.shared.discard.load(Ordering::Relaxed)
    }
}

impl TableSink {
    /// Appends `key`'s RDB record: expiry and access opcodes, type, key, value.
    fn rdb_record(&mut self, key: &[u8], value: ValueRef<'_>, expire: Option<i64>, access: u32) {
        if let Some(t) = expire {
            self.buf.raw(&[rdb::OP_EXPIRETIME_MS]);
            self.buf.raw(&t.to_le_bytes());
        }
        if self.access != rdb::AccessSave::Nothing {
            let mut rec = Vec::with_capacity(11);
            self.access
                .write(&mut rec, access, crate::keyspace::unix_ms());
            self.buf.raw(&rec);
        }
        self.buf.raw(&[0]);
        let type_at = self.buf.bytes.len() - 1;
        self.buf.string(key);
        let (t, version) = rdb::write_value_to(&mut self.buf, value);
        self.buf.bytes[type_at] = t;
        if version > rdb::RDB_VERSION {
            self.shared.needs_v12.store(true, Ordering::Relaxed);
        }
    }
}

impl Drop for TableSink {
    fn drop(&mut self) {
        self.flush();
    }
}

/// A streamed image's bytes between the writer thread and the event loop.
#[derive(Default)]
pub struct ImagePipe {
    chunks: Mutex<VecDeque<Vec<u8>>>,
    queued: AtomicUsize,
}

impl ImagePipe {
    fn push(&self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        self.queued.fetch_add(bytes.len(), Ordering::Relaxed);
        self.chunks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(bytes);
    }

    /// Whole chunks from the front, at least `want` bytes when there are that many.
    pub fn take(&self, want: usize) -> Vec<Vec<u8>> {
        let mut chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        let mut got = 0;
        while got < want {
            let Some(c) = chunks.pop_front() else { break };
            got += c.len();
            out.push(c);
        }
        self.queued.fetch_sub(got, Ordering::Relaxed);
        out
    }

    /// Bytes pushed and not taken yet.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }
}

/// Where a snapshot's bytes go.
pub enum Target {
    /// A file, written beside it under a temp name, then renamed over it.
    File(PathBuf),
    /// A pipe the event loop reads (a diskless full resynchronization).
    Stream(Arc<ImagePipe>),
}

/// Where the writer puts the bytes.
enum Dest {
    File { tmp: PathBuf, dest: PathBuf },
    Stream(Arc<ImagePipe>),
}

/// What the writer needs to know besides the records.
struct FileSpec {
    dest: Dest,
    /// The RDB version the header states: a streamed image cannot be patched
    /// afterwards, so it must already allow every record it will hold.
    version: u16,
    /// What precedes the databases: an RDB file's magic, version and aux fields and
    /// the libraries, or a RESP image's timestamp and FUNCTION LOADs.
    header: Vec<u8>,
    /// A RESP image: SELECT between databases, no RDB framing or checksum.
    resp: bool,
    /// Per database at the start: (keys, keys with an expiry), for RESIZEDB.
    sizes: Vec<(usize, usize)>,
    compress: bool,
    checksum: bool,
}

fn writer(rx: Receiver<Msg>, shared: Arc<Shared>, spec: FileSpec) -> std::io::Result<u64> {
    match &spec.dest {
        Dest::File { tmp, dest } => {
            let r = write_file(&rx, &shared, &spec, tmp, dest);
            if r.is_err() {
                let _ = std::fs::remove_file(tmp);
            }
            r
        }
        Dest::Stream(pipe) => {
            let mut out = PipeWriter {
                pipe: pipe.clone(),
                buf: Vec::with_capacity(CHUNK),
            };
            let total = write_image(&rx, &shared, &spec, &mut out)?;
            if shared.needs_v12.load(Ordering::Relaxed) && spec.version < 12 {
                // Its header is already out: the replica would reject the records.
                return Err(std::io::Error::other(
                    "a hash with field TTLs needs RDB version 12",
                ));
            }
            out.flush()?;
            Ok(total)
        }
    }
}

/// Buffers the writer's bytes into the pipe's chunks.
struct PipeWriter {
    pipe: Arc<ImagePipe>,
    buf: Vec<u8>,
}

impl Write for PipeWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.pipe.push(full);
        Ok(())
    }
}

/// Writes the image (header, records, and for RDB the EOF opcode and checksum) to
/// `out`: its size.
fn write_image(
    rx: &Receiver<Msg>,
    shared: &Shared,
    spec: &FileSpec,
    out: &mut impl Write,
) -> std::io::Result<u64> {
    let mut crc = rdb::crc64_digest();
    let mut total = 0u64;
    let mut emit = |file: &mut dyn Write, bytes: &[u8]| -> std::io::Result<()> {
        if spec.checksum {
            crc.update(bytes);
        }
        total += bytes.len() as u64;
        file.write_all(bytes)
    };
    let file = out;
    emit(file, &spec.header)?;
    let mut current: Option<usize> = None;
    let mut sized = vec![false; spec.sizes.len()];
    let mut out = Vec::with_capacity(CHUNK * 2);
    loop {
        let msg = rx
            .recv()
            .map_err(|_| std::io::Error::other("snapshot abandoned"))?;
        match msg {
            Msg::Chunk { db, data, keys } => {
                if shared.discard.load(Ordering::Relaxed) {
                    shared.inflight.fetch_sub(data.len(), Ordering::Relaxed);
                    continue;
                }
                out.clear();
                if current != Some(db) && spec.resp {
                    super::resp_image::select(&mut out, db);
                    current = Some(db);
                } else if current != Some(db) {
                    out.push(rdb::OP_SELECTDB);
                    rdb::write_len(&mut out, db as u64);
                    if let Some(s) = sized.get_mut(db).filter(|s| !**s) {
                        *s = true;
                        out.push(rdb::OP_RESIZEDB);
                        rdb::write_len(&mut out, spec.sizes[db].0 as u64);
                        rdb::write_len(&mut out, spec.sizes[db].1 as u64);
                    }
                    current = Some(db);
                }
                expand(&data, spec.compress, &mut out);
                let r = emit(file, &out);
                shared.inflight.fetch_sub(data.len(), Ordering::Relaxed);
                r?;
                key_delay(shared, keys);
            }
            Msg::Abort => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "snapshot cancelled",
                ))
            }
            Msg::Finish => break,
        }
    }
    if !spec.resp {
        emit(file, &[rdb::OP_EOF])?;
        let sum = if spec.checksum { crc.finalize() } else { 0 };
        file.write_all(&sum.to_le_bytes())?;
        total += 8;
    }
    Ok(total)
}

fn write_file(
    rx: &Receiver<Msg>,
    shared: &Shared,
    spec: &FileSpec,
    tmp: &Path,
    dest: &Path,
) -> std::io::Result<u64> {
    // Read access too: a file that met a hash with field TTLs is read back to patch its
    // version and checksum at the end.
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)?;
    let mut file = std::io::BufWriter::with_capacity(1 << 20, handle);
    let total = write_image(rx, shared, spec, &mut file)?;
    let mut f = file.into_inner().map_err(|e| e.into_error())?;
    if !spec.resp && shared.needs_v12.load(Ordering::Relaxed) {
        // A hash with field TTLs was met: the file needs version 12. The header was
        // written first, so patch it and recompute the checksum (rare: only 7.4
        // field expiry needs it).
        f.seek(SeekFrom::Start(5))?;
        f.write_all(b"0012")?;
        if spec.checksum {
            f.seek(SeekFrom::Start(0))?;
            let mut digest = rdb::crc64_digest();
            let mut left = total - 8;
            let mut buf = vec![0u8; 1 << 20];
            while left > 0 {
                let n = (left as usize).min(buf.len());
                f.read_exact(&mut buf[..n])?;
                digest.update(&buf[..n]);
                left -= n as u64;
            }
            f.write_all(&digest.finalize().to_le_bytes())?;
        }
    }
    f.sync_all()?;
    drop(f);
    // Cancelled after the walk ended (its Finish already queued ahead of the Abort):
    // the file must not replace the destination.
    if shared.discard.load(Ordering::Relaxed) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "snapshot cancelled",
        ));
    }
    std::fs::rename(tmp, dest)?;
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    File::open(dir)?.sync_all()?;
    Ok(total)
}

/// Sleeps `rdb-key-save-delay` for `keys` keys, in short naps that end as soon as
/// the snapshot is cancelled (SHUTDOWN, FLUSHALL, a killed save must not wait) or
/// the delay is changed (CONFIG SET: the sleep is measured again with the new one,
/// so setting 0 ends it, as killing Redis's delayed child would).
fn key_delay(shared: &Shared, keys: u64) {
    let total = |per_key: i64| {
        Duration::from_micros(match per_key {
            0 => 0,
            d if d > 0 => (d as u64).saturating_mul(keys),
            d => keys / d.unsigned_abs(),
        })
    };
    let start = Instant::now();
    loop {
        if shared.discard.load(Ordering::Relaxed) {
            return;
        }
        let length = total(shared.key_delay.load(Ordering::Relaxed));
        let slept = start.elapsed();
        if slept >= length {
            return;
        }
        std::thread::sleep((length - slept).min(Duration::from_millis(5)));
    }
}

/// How a snapshot's records are written.
#[derive(Debug, Clone, Copy)]
pub enum ImageFormat {
    /// An RDB file: LZF-compressed strings if `compress`, a CRC64 footer if
    /// `checksum`, each key's access history as `access` says.
    Rdb {
        compress: bool,
        checksum: bool,
        access: rdb::AccessSave,
    },
    /// RESP commands (`resp_image`): an AOF base under `aof-use-rdb-preamble no`.
    Resp,
}

/// What a snapshot is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Bgsave,
    AofRewrite,
    /// The image a full resynchronization sends to replicas (src/replication).
    Replication,
}

/// How much walking a step may do.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// Flush and reap only.
    None,
    /// About this much time (the event loop's slices).
    Time(Duration),
    /// Exactly this many buckets, whatever the writer's backlog (DEBUG SNAPSHOT-STEP).
    Buckets(usize),
    /// To the end (SAVE-like callers that must wait).
    All,
}

/// How a snapshot ended.
#[derive(Debug)]
pub enum Outcome {
    /// Written: file size in bytes.
    Done(u64),
    Failed(String),
    Cancelled,
}

/// A snapshot in progress.
pub struct Snapshot {
    pub purpose: Purpose,
    /// The pipe of a streamed image.
    pipe: Option<Arc<ImagePipe>>,
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
    pub started: Instant,
    /// `dirty` at the start: what a successful save accounts for.
    pub dirty_at_start: u64,
    /// Unix seconds of the instant the image shows.
    pub taken_at: i64,
    /// Keys in the image (INFO current_save_keys_total).
    pub keys_total: u64,
    walk_done: bool,
    finish_sent: bool,
    cancelled: bool,
    /// Why the snapshot was cancelled, when it failed.
    error: Option<String>,
}

impl Snapshot {
    /// Whether this is an RDB image, for BGSAVE or a full resynchronization: what
    /// Redis runs as an RDB child (`CHILD_TYPE_RDB`), which BGSAVE, SAVE and INFO's
    /// `rdb_bgsave_in_progress` see alike.
    pub fn is_rdb(&self) -> bool {
        matches!(self.purpose, Purpose::Bgsave | Purpose::Replication)
    }

    /// Starts a snapshot of `ks` written to `target` (a file through a temp file next
    /// to it, or a pipe). `header` is the image's start (magic, `version`, aux fields).
    pub fn begin(
        ks: &mut Keyspace,
        purpose: Purpose,
        target: Target,
        (header, version): (Vec<u8>, u16),
        format: ImageFormat,
    ) -> std::io::Result<Snapshot> {
        let (resp, compress, checksum, access) = match format {
            ImageFormat::Rdb {
                compress,
                checksum,
                access,
            } => (false, compress, checksum, access),
            ImageFormat::Resp => (true, false, false, rdb::AccessSave::Nothing),
        };
        assert!(
            ks.dbs.iter().all(|d| !d.table.cow_active()) && ks.retired.is_empty(),
            "one snapshot at a time"
        );
        let pipe = match &target {
            Target::Stream(p) => Some(p.clone()),
            Target::File(_) => None,
        };
        let dest = match target {
            Target::File(dest) => Dest::File {
                tmp: super::snapshot::temp_path_beside(&dest).1,
                dest,
            },
            Target::Stream(p) => Dest::Stream(p),
        };
        let spec = FileSpec {
            dest,
            version,
            header,
            resp,
            sizes: ks.dbs.iter().map(|d| (d.table.len(), d.volatile)).collect(),
            compress,
            checksum,
        };
        let (tx, rx) = channel();
        let shared = Arc::new(Shared::default());
        let sh = shared.clone();
        // Where Redis forks a child that `bgsave-cpulist` or `aof-rewrite-cpulist`
        // pins, this writer is the thread those lists are for.
        let role = match purpose {
            Purpose::AofRewrite => crate::affinity::ThreadRole::AofRewrite,
            Purpose::Bgsave | Purpose::Replication => crate::affinity::ThreadRole::Bgsave,
        };
        let thread = std::thread::Builder::new()
            .name("cinnabar-snapshot".into())
            .spawn(move || {
                crate::affinity::pin_current(role);
                writer(rx, sh, spec)
            })?;
        for (i, d) in ks.dbs.iter_mut().enumerate() {
            d.table.cow_begin(Box::new(TableSink {
                db: i,
                resp,
                access,
                shared: shared.clone(),
                tx: tx.clone(),
                buf: Deferred::default(),
                keys: 0,
            }));
        }
        Ok(Snapshot {
            purpose,
            pipe,
            shared,
            tx,
            thread: Some(thread),
            started: Instant::now(),
            dirty_at_start: ks.dirty,
            taken_at: crate::keyspace::unix_ms() / 1000,
            keys_total: ks.key_count() as u64,
            walk_done: false,
            finish_sent: false,
            cancelled: false,
            error: None,
        })
    }

    /// Sets `rdb-key-save-delay` for this snapshot's writer (before any key is walked).
    pub fn set_key_delay(&self, us: i64) {
        self.shared.key_delay.store(us, Ordering::Relaxed);
    }

    /// Whether the snapshot was cancelled (its walk may still be realigning marks).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// Whether a `Budget::Time` step would walk now (the writer is keeping up).
    pub fn wants_walk(&self) -> bool {
        !self.walk_done
            && (self.cancelled
                || (self.shared.inflight.load(Ordering::Relaxed) < INFLIGHT_LIMIT
                    && self.pipe.as_ref().is_none_or(|p| p.queued() < PIPE_LIMIT)))
    }

    /// Whether the image goes to a pipe rather than a file.
    pub fn is_stream(&self) -> bool {
        self.pipe.is_some()
    }

    /// Bytes copied because keys were about to change.
    pub fn cow_bytes(&self) -> u64 {
        self.shared.cow_bytes.load(Ordering::Relaxed)
    }

    /// Keys serialized so far.
    pub fn keys_processed(&self) -> u64 {
        self.shared.keys.load(Ordering::Relaxed)
    }

    /// Stops the snapshot: the temp file is deleted, nothing more is serialized.
    pub fn cancel(&mut self, error: Option<String>) {
        if self.cancelled {
            return;
        }
        self.cancelled = true;
        self.error = error;
        self.shared.discard.store(true, Ordering::Relaxed);
        let _ = self.tx.send(Msg::Abort);
    }

    /// One step: flush the sinks, walk within `budget`, and once the walk is over and
    /// the writer done, the outcome.
    pub fn step(&mut self, ks: &mut Keyspace, budget: Budget) -> Option<Outcome> {
        if !self.cancelled
            && !self.finish_sent
            && self.thread.as_ref().is_none_or(|t| t.is_finished())
        {
            // The writer stopped on its own: an I/O error.
            let msg = match self.thread.take().map(|t| t.join()) {
                Some(Ok(Err(e))) => e.to_string(),
                _ => "the snapshot writer stopped".into(),
            };
            self.cancel(Some(msg));
        }
        for t in tables(ks) {
            t.cow_flush();
        }
        if !self.walk_done {
            self.walk(ks, budget);
        }
        if self.walk_done && !self.finish_sent && !self.cancelled {
            self.finish_sent = true;
            let _ = self.tx.send(Msg::Finish);
        }
        if !self.walk_done {
            return None;
        }
        if let Some(t) = &self.thread {
            // A cancelled writer stops at its next message: waiting for it is short.
            if !t.is_finished() && !matches!(budget, Budget::All) && !self.cancelled {
                return None;
            }
        }
        let joined = self.thread.take().map(|t| t.join());
        Some(match (self.cancelled, joined) {
            (true, _) => match self.error.take() {
                Some(e) => Outcome::Failed(e),
                None => Outcome::Cancelled,
            },
            (false, Some(Ok(Ok(n)))) => Outcome::Done(n),
            (false, Some(Ok(Err(e)))) => Outcome::Failed(e.to_string()),
            (false, _) => Outcome::Failed("the snapshot writer panicked".into()),
        })
    }

    fn walk(&mut self, ks: &mut Keyspace, budget: Budget) {
        let start = Instant::now();
        let mut buckets_left = match budget {
            Budget::None => {
                self.walk_done = tables(ks).all(|t| !t.cow_active());
                return;
            }
            Budget::Buckets(n) => n,
            _ => usize::MAX,
        };
        loop {
            if matches!(budget, Budget::Time(_)) && !self.wants_walk() {
                break;
            }
            if matches!(budget, Budget::All) && !self.cancelled {
                // Waiting callers still keep memory bounded.
                while self.shared.inflight.load(Ordering::Relaxed) >= INFLIGHT_LIMIT
                    && self.thread.as_ref().is_some_and(|t| !t.is_finished())
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            let Some(t) = tables(ks).find(|t| t.cow_active()) else {
                self.walk_done = true;
                break;
            };
            let n = buckets_left.min(BATCH);
            t.cow_walk(n);
            t.cow_flush();
            buckets_left -= n;
            if buckets_left == 0 {
                break;
            }
            if let Budget::Time(d) = budget {
                if start.elapsed() >= d {
                    break;
                }
            }
        }
        // Retired tables the walk is done with are freed in the background.
        let mut i = 0;
        while i < ks.retired.len() {
            if ks.retired[i].cow_active() {
                i += 1;
            } else {
                let t = ks.retired.swap_remove(i);
                ks.lazyfree.free_table(t, false);
            }
        }
        if !self.walk_done && tables(ks).all(|t| !t.cow_active()) {
            self.walk_done = true;
        }
    }
}

/// Every table a snapshot may still need: the databases', then the retired ones.
fn tables(ks: &mut Keyspace) -> impl Iterator<Item = &mut KeyTable> {
    ks.dbs
        .iter_mut()
        .map(|d| &mut d.table)
        .chain(ks.retired.iter_mut())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deferred_expands_to_plain_encoding() {
        let long = vec![b'a'; 100];
        let mut d = Deferred::default();
        let mut plain = Vec::new();
        for compress in [false, true] {
            d.bytes.clear();
            d.open = None;
            plain.clear();
            let mut p = rdb::Plain {
                out: &mut plain,
                compress,
            };
            for o in [&mut d as &mut dyn Out, &mut p as &mut dyn Out] {
                o.raw(&[1, 2, 3]);
                o.string(b"12345");
                o.string(&long);
                o.length(1000);
                o.string(b"short");
                o.raw(&[9]);
            }
            let mut out = Vec::new();
            expand(&d.take(), compress, &mut out);
            assert_eq!(out, plain);
        }
    }
}
