//! RDB snapshots on disk: SAVE, BGSAVE, `save` points, loading at startup, saving at
//! shutdown, DEBUG RELOAD.
//!
//! BGSAVE (and automatic saves) run the incremental copy-on-write snapshot of
//! `cow.rs`: a point-in-time image without fork, walked a slice per event-loop turn
//! (`tick`), written by a background thread through a temp file, fsync, rename and
//! fsync of the directory, so `dbfilename` is always the old or the new complete
//! file. SAVE, SHUTDOWN and DEBUG RELOAD are synchronous, as in Redis.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::cow::{Budget, ImageFormat, Outcome, Purpose, Snapshot, Target};
use super::rdb::{self, FileWriter, KeyRecord, Limits};
use super::resp_image;
use crate::exec::Executor;
use crate::keyspace::unix_ms;

/// Redis's CONFIG_BGSAVE_RETRY_DELAY: after a failed background save, automatic
/// saves wait this long before trying again.
const BGSAVE_RETRY_DELAY_SECS: i64 = 5;

/// Time the walker may take per event-loop turn.
const SLICE: std::time::Duration = std::time::Duration::from_micros(200);

/// Snapshot state kept by the executor (INFO persistence reads it).
pub struct Persist {
    /// Unix seconds of the last successful save (LASTSAVE).
    pub lastsave: i64,
    pub last_bgsave_ok: bool,
    pub last_bgsave_secs: i64,
    /// Unix seconds of the last save attempt.
    pub last_try: i64,
    pub rdb_saves: u64,
    pub scheduled: bool,
    /// The snapshot in progress (a BGSAVE or an AOF rewrite's base), possibly a
    /// cancelled one still realigning marks.
    pub snap: Option<Snapshot>,
    /// A BGSAVE accepted while a cancelled snapshot finishes: it starts right after.
    pending_bgsave: bool,
    /// DEBUG SNAPSHOT-MANUAL: the walker only moves on DEBUG SNAPSHOT-STEP (tests).
    pub manual: bool,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE payloads and loaded files are
    /// not checked against their CRC64 (tests that forge payloads).
    pub skip_checksum: bool,
    /// Payloads deeply sanitized (`sanitize-dump-payload`), INFO's
    /// dump_payload_sanitizations.
    pub dump_payload_sanitizations: u64,
    /// Bytes copied on write by the last BGSAVE / AOF rewrite (INFO).
    pub last_cow_size: u64,
    pub aof_last_cow_size: u64,
    /// Seconds the last AOF rewrite took (-1: none yet).
    pub aof_last_rewrite_secs: i64,
    /// SHUTDOWN already did the final save: the loop must not redo it.
    pub shutdown_prepared: bool,
    pub loading: bool,
    /// The loader is serving clients between keys: commands without the `loading`
    /// flag get -LOADING.
    pub serving_while_loading: bool,
    /// A replica serves its old data while the master's image streams in, refusing
    /// what would disturb the swap (`repl-diskless-load swapdb`, INFO async_loading).
    pub async_loading: bool,
    pub last_load_keys: u64,
    pub last_load_expired: u64,
    /// The keys the last load skipped as expired, kept only when asked for (a
    /// master restarting from its RDB tells its replicas with DELs).
    pub expired_on_load: Option<Vec<(usize, Vec<u8>)>>,
    /// A BGREWRITEAOF while the AOF is off (aof.rs `start_rewrite_off`).
    pub off_rewrite: Option<super::aof::OffRewrite>,
    /// Such a BGREWRITEAOF waits for the snapshot in progress (or the EXEC).
    pub off_rewrite_scheduled: bool,
    pub off_rewrites: u64,
    /// Background snapshots started, and how long the last start held the loop (INFO
    /// `total_forks`, `latest_fork_usec`: our snapshots stand where Redis forks).
    pub snapshot_starts: u64,
    pub latest_start_us: u64,
}

impl Default for Persist {
    fn default() -> Self {
        let now = unix_ms() / 1000;
        Persist {
            lastsave: now,
            last_bgsave_ok: true,
            last_bgsave_secs: -1,
            last_try: 0,
            rdb_saves: 0,
            scheduled: false,
            snap: None,
            pending_bgsave: false,
            manual: false,
            skip_checksum: false,
            dump_payload_sanitizations: 0,
            last_cow_size: 0,
            aof_last_cow_size: 0,
            aof_last_rewrite_secs: -1,
            shutdown_prepared: false,
            loading: false,
            serving_while_loading: false,
            async_loading: false,
            last_load_keys: 0,
            last_load_expired: 0,
            expired_on_load: None,
            off_rewrite: None,
            off_rewrite_scheduled: false,
            off_rewrites: 0,
            snapshot_starts: 0,
            latest_start_us: 0,
        }
    }
}

impl Persist {
    /// Whether an RDB snapshot (BGSAVE or for replicas) is running (Redis's
    /// `child_type == CHILD_TYPE_RDB`).
    pub fn bgsave_in_progress(&self) -> bool {
        self.pending_bgsave
            || self
                .snap
                .as_ref()
                .is_some_and(|s| s.is_rdb() && !s.is_cancelled())
    }

    /// Whether any snapshot (BGSAVE, AOF rewrite, or a cancelled one finishing) holds
    /// the keyspace: Redis's `hasActiveChildProcess`.
    pub fn busy(&self) -> bool {
        self.pending_bgsave || self.snap.is_some()
    }

    /// Whether the event loop should turn again at once to walk.
    pub fn wants_turn(&self) -> bool {
        !self.manual && self.snap.as_ref().is_some_and(|s| s.wants_walk())
    }

    /// Whether a snapshot is walking (the loop should wake up soon).
    pub fn walking(&self) -> bool {
        !self.manual && self.snap.is_some()
    }
}

/// The path of the RDB file (`dir` is the working directory after startup).
pub fn rdb_path(ex: &Executor) -> PathBuf {
    PathBuf::from(&ex.config.dbfilename)
}

/// The directory of `dest` and a fresh temp-file name in it: the file is written
/// there, then renamed over `dest`, so readers see the old or the new file whole.
pub fn temp_path_beside(dest: &Path) -> (PathBuf, PathBuf) {
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!(
        "temp-{}-{}.rdb",
        std::process::id(),
        fastrand::u32(..)
    ));
    (dir, tmp)
}

/// Removes the temp files of snapshots whose process is gone from `dir`:
/// `temp-<pid>-<n>.rdb` (BGSAVE, AOF base), `temp-<pid>.rdb` (the final save) and
/// `temp-repl-<pid>.rdb` (a full sync). A snapshot's writer is a thread, so a server
/// killed mid-save (SIGKILL, OOM killer, power loss) leaves its partial file behind,
/// where Redis's forked child would have finished and renamed it; without this each
/// such crash would leave one more for good. Called at startup, before any snapshot
/// of this process exists, so a file named with this process's own pid (a reused
/// pid) is stale too; one of another live process sharing the directory stays.
/// Returns how many were removed.
pub fn remove_stale_temp_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let own = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(stale_temp_pid) else {
            continue;
        };
        if (pid == own || !process_alive(pid)) && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The pid in a snapshot temp file's name (see `remove_stale_temp_files`).
fn stale_temp_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("temp-")?.strip_suffix(".rdb")?;
    let rest = rest.strip_prefix("repl-").unwrap_or(rest);
    let (pid, tail) = rest.split_once('-').unwrap_or((rest, "0"));
    if pid.is_empty() || tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The aux fields Redis writes at the start of a file (with the replication ID and
/// offset when this server has a replication history, `replication::rdb_aux`).
fn aux_fields(ex: &Executor, aof_base: bool) -> Vec<(&'static str, Vec<u8>)> {
    let now = unix_ms();
    let mut aux = vec![
        (
            "redis-ver",
            crate::commands::connection::REDIS_VERSION
                .as_bytes()
                .to_vec(),
        ),
        ("redis-bits", b"64".to_vec()),
        ("ctime", (now / 1000).to_string().into_bytes()),
        (
            "used-mem",
            crate::alloc::used_memory().to_string().into_bytes(),
        ),
    ];
    // An AOF base has none (Redis writes its preamble without them).
    if let Some(r) = crate::replication::rdb_aux(ex).filter(|_| !aof_base) {
        aux.push(("repl-stream-db", r.db.to_string().into_bytes()));
        aux.push(("repl-id", r.replid.into_bytes()));
        aux.push(("repl-offset", r.offset.to_string().into_bytes()));
    }
    aux.push((
        "aof-base",
        if aof_base {
            b"1".to_vec()
        } else {
            b"0".to_vec()
        },
    ));
    aux
}

/// What an image holds: everything, or a part (`REPLCONF rdb-filter-only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageParts {
    pub keys: bool,
    pub functions: bool,
}

impl ImageParts {
    pub const ALL: ImageParts = ImageParts {
        keys: true,
        functions: true,
    };
}

/// Starts an incremental snapshot of the dataset into `dest`. The header holds the
/// aux fields and the FUNCTION libraries of this instant, as Redis writes them before
/// the databases.
pub fn begin_snapshot(ex: &mut Executor, purpose: Purpose, dest: &Path) -> std::io::Result<()> {
    begin_snapshot_to(ex, purpose, Target::File(dest.to_path_buf()))
}

/// `begin_snapshot` to any target: a streamed image (a diskless full
/// resynchronization) states RDB version 12 from the start when any hash has field
/// TTLs, since it cannot be patched afterwards as a file is.
pub fn begin_snapshot_to(
    ex: &mut Executor,
    purpose: Purpose,
    target: Target,
) -> std::io::Result<()> {
    let mut header = Vec::new();
    let version = match target {
        Target::Stream(_) if !ex.ks.field_expiry.is_empty() => 12,
        _ => rdb::RDB_VERSION,
    };
    let format = if purpose == Purpose::AofRewrite && !super::aof::rdb_preamble(ex) {
        resp_header(ex, &mut header);
        ImageFormat::Resp
    } else {
        let aux = aux_fields(ex, purpose == Purpose::AofRewrite);
        let cfg = &ex.config;
        let (compress, checksum) = (cfg.rdbcompression, cfg.rdbchecksum);
        let mut w = FileWriter::start(&mut header, version, compress, checksum, &aux);
        for code in crate::scripting::functions::library_codes(ex) {
            w.library(&mut header, &code);
        }
        ImageFormat::Rdb {
            compress,
            checksum,
            access: rdb::AccessSave::for_policy(&ex.config.maxmemory_policy, ex.ks.lfu_params),
        }
    };
    let started = std::time::Instant::now();
    let snap = Snapshot::begin(&mut ex.ks, purpose, target, (header, version), format)?;
    // Where Redis forks, the loop stops for as long as this start takes (INFO's
    // total_forks and latest_fork_usec count these starts).
    ex.persist.snapshot_starts += 1;
    ex.persist.latest_start_us = started.elapsed().as_micros() as u64;
    snap.set_key_delay(ex.config.stored_i64("rdb-key-save-delay"));
    ex.persist.snap = Some(snap);
    Ok(())
}

/// What a RESP image starts with: the rewrite's timestamp under
/// `aof-timestamp-enabled`, then the libraries.
fn resp_header(ex: &Executor, out: &mut Vec<u8>) {
    if ex.config.stored_bool("aof-timestamp-enabled") {
        resp_image::timestamp(out, unix_ms() / 1000);
    }
    for code in crate::scripting::functions::library_codes(ex) {
        resp_image::function_load(out, &code);
    }
}

/// The whole dataset as RESP commands to `sink`, a chunk at a time (the first base of
/// an AOF created under `aof-use-rdb-preamble no`).
fn write_resp_image(
    ex: &Executor,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut out = Vec::new();
    resp_header(ex, &mut out);
    let mut failed = None;
    for (n, db) in ex.ks.dbs.iter().enumerate() {
        if db.table.is_empty() {
            continue;
        }
        resp_image::select(&mut out, n);
        db.table.for_each_entry(|e| {
            if failed.is_some() {
                return;
            }
            resp_image::key(&mut out, e.key(), e.value(), e.expire());
            if out.len() >= IMAGE_CHUNK {
                failed = sink(&out).err();
                out.clear();
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
    }
    sink(&out)
}

/// Writes the whole dataset to `path` (created, written a chunk at a time, synced)
/// as an RDB image, or as RESP commands unless `rdb`: an AOF's first base made on the
/// spot, which never holds the whole image in memory. Returns its size.
/// A file that could not be written whole (disk full) is removed: no manifest names it.
pub fn write_base_file(ex: &Executor, path: &Path, rdb: bool) -> std::io::Result<u64> {
    let mut f = std::fs::File::create(path)?;
    let mut size = 0u64;
    let mut sink = |bytes: &[u8]| {
        size += bytes.len() as u64;
        f.write_all(bytes)
    };
    let written = if rdb {
        write_image(ex, ImageParts::ALL, 0, &mut sink)
    } else {
        write_resp_image(ex, &mut sink)
    }
    .and_then(|()| f.sync_all());
    if let Err(e) = written {
        drop(f);
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(size)
}

/// Serializes the libraries and every database into an RDB image, or says why it
/// cannot.
pub fn serialize(ex: &Executor) -> Result<Vec<u8>, String> {
    serialize_parts(ex, ImageParts::ALL)
}

/// Serializes the `parts` of the dataset into an RDB image.
pub fn serialize_parts(ex: &Executor, parts: ImageParts) -> Result<Vec<u8>, String> {
    serialize_delayed(ex, parts, 0)
}

/// `serialize_parts`, sleeping `key_delay_us` per key (`rdb-key-save-delay`, which
/// Redis's synchronous save honours too).
fn serialize_delayed(
    ex: &Executor,
    parts: ImageParts,
    key_delay_us: u64,
) -> Result<Vec<u8>, String> {
    let mut image = Vec::new();
    write_image(ex, parts, key_delay_us, &mut |bytes| {
        image.extend_from_slice(bytes);
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    Ok(image)
}

/// How much of an image `write_image` gathers before handing it to its sink.
const IMAGE_CHUNK: usize = 1 << 20;

/// Writes the `parts` of the dataset as an RDB image to `sink`, a chunk of about
/// `IMAGE_CHUNK` bytes at a time: a SAVE of any size holds one chunk, never the whole
/// image. Keys are visited in table order with their memory requested ahead
/// (`KeyTable::for_each_entry`); nothing changes the dataset meanwhile.
fn write_image(
    ex: &Executor,
    parts: ImageParts,
    key_delay_us: u64,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let cfg = &ex.config;
    let aux = aux_fields(ex, false);
    // A hash with field TTLs needs version 12; everything else is written as 10 so
    // that Redis 7.0 loads the file. Every such hash has a hint in `field_expiry`, so
    // without hints no table is looked through.
    let needs_12 = parts.keys
        && !ex.ks.field_expiry.is_empty()
        && ex.ks.dbs.iter().any(|d| {
            let mut any = false;
            d.table.for_each_entry(|e| {
                if let crate::keyspace::ValueRef::Obj(crate::keyspace::ObjRef::Hash(h)) = e.value()
                {
                    any |= h.has_field_ttls();
                }
            });
            any
        });
    let version = if needs_12 { 12 } else { rdb::RDB_VERSION };
    let mut out = Vec::new();
    let mut w = FileWriter::start(&mut out, version, cfg.rdbcompression, cfg.rdbchecksum, &aux);
    w.access = rdb::AccessSave::for_policy(&cfg.maxmemory_policy, ex.ks.lfu_params);
    if parts.functions {
        for code in crate::scripting::functions::library_codes(ex) {
            w.library(&mut out, &code);
        }
    }
    let mut failed = None;
    for (i, d) in ex.ks.dbs.iter().enumerate() {
        if !parts.keys || d.table.is_empty() {
            continue;
        }
        w.select_db(&mut out, i, d.table.len(), d.volatile);
        d.table.for_each_entry(|e| {
            if failed.is_some() {
                return;
            }
            if key_delay_us > 0 {
                std::thread::sleep(std::time::Duration::from_micros(key_delay_us));
            }
            w.key(
                &mut out,
                &KeyRecord {
                    key: e.key(),
                    value: e.value(),
                    expire_ms: e.expire(),
                    access: e.lru(),
                },
            );
            if out.len() >= IMAGE_CHUNK {
                failed = sink(&out).err();
                out.clear();
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
    }
    w.finish(&mut out);
    sink(&out)
}

/// Writes `bytes` to `path` atomically: temp file in the same directory, fsync,
/// rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (dir, tmp) = temp_path_beside(path);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// SAVE: a synchronous snapshot. Errors are logged and reported as `Err`; success
/// clears a failed BGSAVE's status (and so the MISCONF it caused).
pub fn save(ex: &mut Executor) -> std::io::Result<()> {
    // Written to `temp-<pid>.rdb` beside the file, created before the walk as Redis's
    // rdbSave, so an insisting SIGINT during a slow final save finds and deletes it.
    let path = rdb_path(ex);
    let (dir, _) = temp_path_beside(&path);
    let tmp = dir.join(crate::process::final_save_temp_name());
    ex.persist.last_try = unix_ms() / 1000;
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        let delay = ex.config.stored_i64("rdb-key-save-delay").max(0) as u64;
        write_image(ex, ImageParts::ALL, delay, &mut |bytes| f.write_all(bytes))?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(&dir)?.sync_all()
    })();
    match written {
        Ok(()) => {
            crate::log::notice("DB saved on disk");
            ex.ks.dirty = 0;
            ex.persist.lastsave = unix_ms() / 1000;
            ex.persist.last_bgsave_ok = true;
            ex.persist.rdb_saves += 1;
            Ok(())
        }
        // A failed SAVE leaves the last background save's status as it was (Redis's
        // rdbSave); only BGSAVE outcomes arm stop-writes-on-bgsave-error.
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            crate::log::warning(&format!("Failed saving the DB: {e}"));
            Err(e)
        }
    }
}

/// BGSAVE: starts the incremental snapshot. Returns false if it could not start.
/// While a cancelled snapshot is still realigning marks, the new one starts as soon
/// as that is done (a few turns; it counts as in progress meanwhile).
pub fn bgsave_start(ex: &mut Executor) -> bool {
    ex.persist.last_try = unix_ms() / 1000;
    if ex.persist.snap.as_ref().is_some_and(|s| s.is_cancelled()) {
        // A cancelled snapshot whose tables were all flushed ends at once.
        advance(ex, Budget::None);
    }
    if ex.persist.snap.is_some() {
        ex.persist.pending_bgsave = true;
        return true;
    }
    let path = rdb_path(ex);
    match begin_snapshot(ex, Purpose::Bgsave, &path) {
        Ok(()) => {
            crate::log::notice("Background saving started");
            true
        }
        Err(e) => {
            crate::log::warning(&format!("Can't save in background: {e}"));
            ex.persist.last_bgsave_ok = false;
            false
        }
    }
}

/// Applies a finished snapshot's outcome.
fn finished(ex: &mut Executor, snap: Snapshot, outcome: Outcome) {
    let cow = snap.cow_bytes();
    match snap.purpose {
        Purpose::Bgsave => {
            ex.persist.last_bgsave_secs = snap.started.elapsed().as_secs() as i64;
            ex.persist.last_cow_size = cow;
            match outcome {
                Outcome::Done(_) => {
                    crate::log::notice(&format!(
                        "Background saving terminated with success ({} MB copied on write)",
                        cow >> 20
                    ));
                    ex.ks.dirty = ex.ks.dirty.saturating_sub(snap.dirty_at_start);
                    ex.persist.lastsave = snap.taken_at;
                    ex.persist.last_bgsave_ok = true;
                    ex.persist.rdb_saves += 1;
                }
                Outcome::Failed(e) => {
                    crate::log::warning(&format!("Background saving error: {e}"));
                    ex.persist.last_bgsave_ok = false;
                }
                // Killed on purpose (FLUSHALL, SHUTDOWN): not an error, as in Redis.
                Outcome::Cancelled => {
                    crate::log::warning("Background saving terminated by signal 10")
                }
            }
        }
        Purpose::Replication => {
            let result = match outcome {
                Outcome::Done(_) => Ok(()),
                Outcome::Failed(e) => Err(e),
                Outcome::Cancelled => Err("cancelled".into()),
            };
            crate::replication::master::snapshot_finished(ex, result);
        }
        Purpose::AofRewrite => {
            ex.persist.aof_last_cow_size = cow;
            ex.persist.aof_last_rewrite_secs = snap.started.elapsed().as_secs() as i64;
            let result = match outcome {
                Outcome::Done(n) => Ok(n),
                Outcome::Failed(e) => Err(e),
                Outcome::Cancelled => Err("cancelled".into()),
            };
            super::aof::rewrite_finished(ex, result);
        }
    }
}

/// Advances the snapshot in progress by `budget`; applies its outcome when done, and
/// starts a BGSAVE that was waiting for a cancelled snapshot to finish.
fn advance(ex: &mut Executor, budget: Budget) {
    let Some(snap) = ex.persist.snap.as_mut() else {
        return;
    };
    let Some(outcome) = snap.step(&mut ex.ks, budget) else {
        return;
    };
    if let Some(snap) = ex.persist.snap.take() {
        finished(ex, snap, outcome);
    }
    if std::mem::take(&mut ex.persist.pending_bgsave) {
        bgsave_start(ex);
    }
}

/// Event-loop turn work: one slice of the walker.
pub fn tick(ex: &mut Executor) {
    let budget = if ex.persist.manual {
        Budget::None
    } else {
        Budget::Time(SLICE)
    };
    advance(ex, budget);
}

/// Drives the snapshot in progress (and a BGSAVE waiting behind a cancelled one) to
/// its end, for callers that must wait.
pub fn finish(ex: &mut Executor) {
    while ex.persist.snap.is_some() {
        advance(ex, Budget::All);
    }
}

/// Cancels an RDB snapshot in progress (BGSAVE, or a full resynchronization's,
/// whose replicas are disconnected and retry), as Redis kills its RDB child
/// (FLUSHALL, SHUTDOWN, a replica loading its master's image).
pub fn kill_bgsave(ex: &mut Executor) {
    ex.persist.pending_bgsave = false;
    if let Some(s) = ex.persist.snap.as_mut() {
        if s.is_rdb() && !s.is_cancelled() {
            crate::log::warning("There is a child saving an .rdb. Killing it!");
            s.cancel(None);
        }
    }
}

/// Cancels an AOF rewrite's snapshot in progress (SHUTDOWN).
pub fn kill_aof_rewrite(ex: &mut Executor) {
    cancel_aof_rewrite(ex, || {
        crate::log::warning("There is a child rewriting the AOF. Killing it!")
    });
}

/// Cancels an AOF rewrite's snapshot in progress because AOF was turned off, logged
/// in the words of Redis's killAppendOnlyChild (our "child" is a thread).
pub fn kill_aof_rewrite_at_stop(ex: &mut Executor) {
    cancel_aof_rewrite(ex, || {
        crate::log::notice(
            "Killing running AOF rewrite child (a background thread of this process)",
        )
    });
}

fn cancel_aof_rewrite(ex: &mut Executor, log: impl FnOnce()) {
    if let Some(s) = ex.persist.snap.as_mut() {
        if s.purpose == Purpose::AofRewrite && !s.is_cancelled() {
            log();
            s.cancel(None);
        }
    }
}

/// DEBUG SNAPSHOT-MANUAL 0|1 and DEBUG SNAPSHOT-STEP <buckets>: tests drive the
/// walker one small slice at a time, interleaving their writes deterministically.
/// SNAPSHOT-STEP answers 1 while the snapshot is still in progress, 0 once done.
pub fn debug(ex: &mut Executor, sub: &[u8], arg: Option<&[u8]>) -> Option<Result<i64, String>> {
    let n = arg.and_then(crate::util::numeric::parse_i64);
    if sub.eq_ignore_ascii_case(b"snapshot-manual") {
        let Some(v) = n else {
            return Some(Err("ERR syntax error".into()));
        };
        ex.persist.manual = v != 0;
        return Some(Ok(0));
    }
    if sub.eq_ignore_ascii_case(b"snapshot-step") {
        let Some(v) = n.filter(|v| *v > 0) else {
            return Some(Err("ERR syntax error".into()));
        };
        advance(ex, Budget::Buckets(v as usize));
        // Let a finishing writer be reaped without more walking.
        if ex.persist.snap.is_some() {
            advance(ex, Budget::None);
        }
        return Some(Ok(ex.persist.busy() as i64));
    }
    None
}

/// Timer work: collect a finished BGSAVE, run a scheduled one, honour `save` points.
pub fn cron(ex: &mut Executor) {
    tick(ex);
    if ex.persist.busy() {
        return;
    }
    if ex.persist.scheduled {
        ex.persist.scheduled = false;
        bgsave_start(ex);
        return;
    }
    let now = unix_ms() / 1000;
    let since = now - ex.persist.lastsave;
    let retry_ok = ex.persist.last_bgsave_ok || now - ex.persist.last_try > BGSAVE_RETRY_DELAY_SECS;
    let dirty = ex.ks.dirty;
    let hit = ex
        .config
        .save_params
        .iter()
        .find(|(secs, changes)| dirty >= *changes && since >= *secs as i64);
    if let Some((secs, _)) = hit {
        if retry_ok {
            crate::log::notice(&format!("{dirty} changes in {secs} seconds. Saving..."));
            bgsave_start(ex);
        }
    }
}

/// The final save before exiting (SHUTDOWN, SIGTERM): done when asked (`Some(true)`)
/// or, by default, when save points are configured. Returns false if it cannot exit:
/// the AOF just turned on is still being written, or a required save failed (the
/// server then keeps running, as Redis does); with `force` both are logged and
/// ignored.
pub fn prepare_shutdown(ex: &mut Executor, save_req: Option<bool>, force: bool) -> bool {
    if ex.persist.shutdown_prepared {
        return true;
    }
    let initial_aof = ex.aof.as_ref().is_some_and(|a| a.waits_for_rewrite())
        && ex
            .persist
            .snap
            .as_ref()
            .is_some_and(|s| s.purpose == Purpose::AofRewrite && !s.is_cancelled());
    if initial_aof {
        if !force {
            crate::log::warning("Writing initial AOF, can't exit.");
            return false;
        }
        crate::log::warning("Writing initial AOF. Exit anyway.");
    }
    kill_bgsave(ex);
    kill_aof_rewrite(ex);
    finish(ex);
    super::aof::shutdown(ex);
    let save_wanted = match save_req {
        Some(s) => s,
        None => !ex.config.save_params.is_empty(),
    };
    if save_wanted {
        crate::log::notice("Saving the final RDB snapshot before exiting.");
        if save(ex).is_err() {
            if !force {
                crate::log::warning("Error trying to save the DB, can't exit.");
                return false;
            }
            crate::log::warning("Error trying to save the DB. Exit anyway.");
        }
    }
    ex.persist.shutdown_prepared = true;
    true
}

/// Loads an RDB image that may be followed by more data (an AOF file with an RDB
/// preamble): its FUNCTION libraries, then its keys (expired ones are skipped); also
/// returns the image's length. The image is decoded and verified first, so a bad one
/// changes nothing. Without `merge` a library or key that exists already is an error,
/// as in Redis (callers empty the dataset first); with it (DEBUG RELOAD MERGE) the
/// image's replace them.
pub fn load_image(
    ex: &mut Executor,
    bytes: &[u8],
    merge: bool,
) -> Result<(rdb::FileInfo, usize), rdb::Error> {
    let lim = Limits::from_config(&ex.config);
    let mut loaded = Vec::new();
    let check = super::load_check(ex);
    let mut pacer = LoadPacer::new(ex);
    let mut progress = |pos: usize| pacer.key_loaded(ex, pos as u64);
    let (info, used) =
        rdb::read_file_progress(bytes, &lim, check, &mut progress, |k| loaded.push(k))?;
    let info = install_image(ex, info, loaded, merge)?;
    Ok((info, used))
}

/// Loads an RDB file read a slice at a time and decoded as it is read, so the file
/// is never in memory whole; its keys are installed once it is complete and
/// verified. `Err` is a read error; `Ok(Err)` the file's own.
fn load_file(
    ex: &mut Executor,
    mut file: std::fs::File,
    merge: bool,
) -> std::io::Result<Result<rdb::FileInfo, rdb::Error>> {
    use std::io::Read;
    let lim = Limits::from_config(&ex.config);
    let mut parser = rdb::incremental::Incremental::new(super::load_check(ex));
    let mut pacer = LoadPacer::new(ex);
    let mut buf = vec![0u8; 1 << 20];
    while !parser.is_done() {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if let Err(e) = parser.push(&buf[..n], &lim, &mut |pos| pacer.key_loaded(ex, pos)) {
            return Ok(Err(e));
        }
    }
    drop(buf);
    let decoded = parser.finish_file(&lim, &mut |pos| pacer.key_loaded(ex, pos));
    Ok(decoded.and_then(|(info, keys)| install_image(ex, info, keys, merge)))
}

/// The pace of a load: Redis's test hook `key-load-delay` (microseconds per key,
/// negative: one every -n keys on average), and at startup clients served every
/// `loading-process-events-interval-bytes` (they get -LOADING).
pub struct LoadPacer {
    delay: i64,
    interval: u64,
    next_serve: u64,
    keys_seen: u64,
}

impl LoadPacer {
    pub fn new(ex: &Executor) -> LoadPacer {
        let interval = ex
            .config
            .stored_i64("loading-process-events-interval-bytes")
            .max(1024) as u64;
        LoadPacer {
            delay: ex.config.stored_i64("key-load-delay"),
            interval,
            next_serve: interval,
            keys_seen: 0,
        }
    }

    /// A key was decoded; `pos` bytes of the image are read.
    pub fn key_loaded(&mut self, ex: &mut Executor, pos: u64) {
        self.keys_seen += 1;
        match self.delay {
            0 => {}
            d if d > 0 => std::thread::sleep(std::time::Duration::from_micros(d as u64)),
            d => {
                if self.keys_seen.is_multiple_of(d.unsigned_abs()) {
                    std::thread::sleep(std::time::Duration::from_micros(1));
                }
            }
        }
        if pos >= self.next_serve {
            self.next_serve = pos + self.interval;
            ex.serve_while_loading();
        }
    }
}

/// Installs a decoded image: its FUNCTION libraries, then its keys (expired ones
/// skipped unless this server keeps them). Nothing is changed when the image cannot
/// be installed (a key or library that exists already without `merge`, a database
/// this server does not have).
pub fn install_image(
    ex: &mut Executor,
    info: rdb::FileInfo,
    loaded: Vec<rdb::LoadedKey>,
    merge: bool,
) -> Result<rdb::FileInfo, rdb::Error> {
    install_image_with(ex, info, loaded, merge, &mut |_| {})
}

/// Keys installed between two calls of `install_image_with`'s hook.
const INSTALL_HOOK_KEYS: u64 = 16 * 1024;

/// `install_image`, calling `hook` every `INSTALL_HOOK_KEYS` keys (a replica's
/// dual-channel sync reads its master's stream meanwhile).
pub fn install_image_with(
    ex: &mut Executor,
    info: rdb::FileInfo,
    loaded: Vec<rdb::LoadedKey>,
    merge: bool,
    hook: &mut dyn FnMut(&mut Executor),
) -> Result<rdb::FileInfo, rdb::Error> {
    let now = unix_ms();
    let ndbs = ex.ks.dbs.len();
    if info.checksum_disabled {
        crate::log::notice("RDB file was saved with checksum disabled: no check performed.");
    }
    for name in &info.empty_key_names {
        crate::log::notice(&format!(
            "rdbLoadObject skipping empty key: {}",
            String::from_utf8_lossy(name)
        ));
    }
    if let Some(k) = loaded.iter().find(|k| k.db >= ndbs) {
        return Err(rdb::Error::Corrupt(format!(
            "FATAL: Data file was created with a Redis server configured to handle more than {} databases. Exiting",
            k.db
        )));
    }
    if !merge && ex.ks.key_count() > 0 {
        if let Some(k) = loaded
            .iter()
            .find(|k| ex.ks.dbs[k.db].table.get(&k.key).is_some())
        {
            return Err(rdb::Error::Corrupt(format!(
                "RDB has duplicated key '{}' in DB {}",
                String::from_utf8_lossy(&k.key),
                k.db
            )));
        }
    }
    // Libraries come first in the file, as in Redis: one that fails stops the load
    // before any key.
    crate::scripting::functions::load_libraries(ex, &info.functions, merge)
        .map_err(rdb::Error::Library)?;
    // Each table sized for what it will hold, as Redis does on RESIZEDB, instead of
    // doubling its way there and leaving the smaller arrays behind.
    let mut per_db = vec![0usize; ndbs];
    for k in &loaded {
        per_db[k.db] += 1;
    }
    for (db, n) in per_db.into_iter().enumerate() {
        if n > 0 {
            let table = &mut ex.ks.dbs[db].table;
            // A failed allocation only means the table grows as keys arrive.
            let _ = table.expand(table.len() + n);
        }
    }
    let (mut keys, mut expired) = (0u64, 0u64);
    let skip_expired = !keeps_expired_keys_on_load(ex);
    for k in loaded {
        if skip_expired && k.expire_ms.is_some_and(|t| t <= now) {
            expired += 1;
            if let Some(keys) = ex.persist.expired_on_load.as_mut() {
                keys.push((k.db, k.key));
            }
            continue;
        }
        super::register_field_ttls(&mut ex.ks, k.db, &k.key, &k.value);
        ex.ks.set(k.db, &k.key, k.value, k.expire_ms, false, now);
        // The access history the file recorded (Redis writes an LRU idle time or an
        // LFU counter before each key under such a policy) is kept when it matches
        // the policy in force, as Redis's objectSetLRUOrLFU does.
        let field = match (ex.ks.lfu, k.freq, k.idle_secs) {
            (true, Some(f), _) => Some((crate::keyspace::lfu_initial(now) & !0xFF) | f as u32),
            (false, _, Some(s)) => Some(crate::keyspace::lru_clock(
                now.saturating_sub((s.min(i64::MAX as u64 / 1000) as i64) * 1000),
            )),
            _ => None,
        };
        if let Some(field) = field {
            if let Some(mut e) = ex.ks.dbs[k.db].table.get_mut(&k.key) {
                e.set_lru(field);
            }
        }
        keys += 1;
        if keys.is_multiple_of(INSTALL_HOOK_KEYS) {
            hook(ex);
        }
    }
    ex.persist.last_load_keys = keys;
    ex.persist.last_load_expired = expired;
    Ok(info)
}

/// Whether a load keeps keys whose TTL has passed, as Redis's rdbLoad does unless it
/// runs on a master: a replica (by `replicaof`, as a cluster replica in nodes.conf,
/// loading its master's image, or replaying an AOF, whose expiry mode is not
/// `Delete` then) holds them until its master's DELs arrive, so that commands of the
/// master's stream find the keys the master still had.
fn keeps_expired_keys_on_load(ex: &Executor) -> bool {
    ex.ks.expire_mode != crate::keyspace::ExpireMode::Delete
        || ex.config.replicaof.is_some()
        || ex.cluster.as_ref().is_some_and(|cl| cl.me().is_replica())
}

/// Loads `dbfilename` at startup if it exists. A corrupt or unreadable file is an
/// error (the server refuses to start rather than run on half the data).
pub fn load_at_startup(ex: &mut Executor) -> Result<(), String> {
    let path = rdb_path(ex);
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("Fatal error loading the DB: {e}. Exiting.")),
    };
    let start = Instant::now();
    ex.persist.loading = true;
    ex.persist.expired_on_load = Some(Vec::new());
    let r = match load_file(ex, file, false) {
        Ok(r) => r,
        Err(e) => {
            ex.persist.loading = false;
            return Err(format!("Fatal error loading the DB: {e}. Exiting."));
        }
    };
    let expired_keys = ex.persist.expired_on_load.take().unwrap_or_default();
    ex.persist.loading = false;
    match r {
        Ok(info) => {
            crate::log::notice(&format!(
                "Loading RDB produced by version {}",
                info.aux
                    .iter()
                    .find(|(k, _)| k == b"redis-ver")
                    .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default()
            ));
            if info.empty_keys > 0 {
                crate::log::notice(&format!(
                    "Done loading RDB, keys loaded: {}, keys expired: {}, empty keys skipped: {}.",
                    ex.persist.last_load_keys, ex.persist.last_load_expired, info.empty_keys
                ));
            } else {
                crate::log::notice(&format!(
                    "Done loading RDB, keys loaded: {}, keys expired: {}.",
                    ex.persist.last_load_keys, ex.persist.last_load_expired
                ));
            }
            crate::log::notice(&format!(
                "DB loaded from disk: {:.3} seconds",
                start.elapsed().as_secs_f64()
            ));
            ex.ks.dirty = 0;
            // Redis 7.0 restores the replication history from an RDB it starts
            // from (not from an AOF).
            if !ex.config.appendonly {
                crate::replication::restore_from_rdb(ex, &info.aux, &expired_keys);
            }
            Ok(())
        }
        Err(e) => {
            // Nothing was inserted: the file is decoded and verified before any key
            // is handed over. The reason is logged as Redis logs it, then once more
            // as its file check reports it.
            let reason = match &e {
                rdb::Error::Checksum { .. } => {
                    crate::log::warning(&e.to_string());
                    Some("RDB CRC error".to_string())
                }
                rdb::Error::Corrupt(_) | rdb::Error::Truncated => Some(e.reason()),
                _ => None,
            };
            if let Some(reason) = reason {
                crate::log::warning(&format!("Internal error in RDB reading -> {reason}"));
                crate::log::warning("--- RDB ERROR DETECTED ---");
                crate::log::warning(&format!("[additional info] {}: {reason}", path.display()));
                crate::log::warning("Terminating server after rdb file reading failure.");
            }
            Err(format!(
                "Fatal error loading the DB ({}): {e}. Exiting.",
                path.display()
            ))
        }
    }
}

/// DEBUG RELOAD's options (Redis's): NOSAVE loads the file on disk as it is,
/// NOFLUSH keeps the dataset (keys and libraries), MERGE lets the file's replace
/// what exists.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReloadOptions {
    pub save: bool,
    pub flush: bool,
    pub merge: bool,
}

/// DEBUG RELOAD: save, empty the dataset (keys and libraries), load the file back.
pub fn debug_reload(ex: &mut Executor, opts: ReloadOptions) -> Result<(), String> {
    finish(ex);
    if opts.save {
        save(ex).map_err(|_| "Error trying to save the DB".to_string())?;
    }
    let file = std::fs::File::open(rdb_path(ex))
        .map_err(|e| format!("Error trying to load the RDB dump: {e}"))?;
    if opts.flush {
        ex.signal_flushed_db(None);
        ex.ks.flush_all(false);
        crate::scripting::functions::flush_libraries(ex);
    }
    load_file(ex, file, opts.merge)
        .map_err(|e| format!("Error trying to load the RDB dump: {e}"))?
        .map_err(|e| format!("Error trying to load the RDB dump: {e}"))?;
    crate::log::notice("DB reloaded by DEBUG RELOAD");
    ex.ks.dirty = 0;
    Ok(())
}

/// The INFO persistence section's snapshot fields.
pub fn info_fields(ex: &Executor, s: &mut String) {
    let p = &ex.persist;
    let live = p.snap.as_ref().filter(|s| !s.is_cancelled());
    let cur = live
        .filter(|s| s.is_rdb())
        .map_or(-1, |b| b.started.elapsed().as_secs() as i64);
    s.push_str(&format!(
        "loading:{}\r\nasync_loading:{}\r\ncurrent_cow_peak:{}\r\ncurrent_cow_size:{}\r\ncurrent_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:{}\r\ncurrent_save_keys_total:{}\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\nrdb_last_cow_size:{}\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_loaded:{}\r\n",
        p.loading as u8,
        p.async_loading as u8,
        live.map_or(0, |s| s.cow_bytes()),
        live.map_or(0, |s| s.cow_bytes()),
        live.map_or(0, |s| s.keys_processed()),
        live.map_or(0, |s| s.keys_total),
        ex.ks.dirty,
        p.bgsave_in_progress() as u8,
        p.lastsave,
        if p.last_bgsave_ok { "ok" } else { "err" },
        p.last_bgsave_secs,
        cur,
        p.rdb_saves,
        p.last_cow_size,
        p.last_load_expired,
        p.last_load_keys,
    ));
}

#[cfg(test)]
mod temp_file_tests {
    use super::stale_temp_pid;

    #[test]
    fn snapshot_temp_names_give_their_pid() {
        assert_eq!(stale_temp_pid("temp-123-456.rdb"), Some(123));
        assert_eq!(stale_temp_pid("temp-123.rdb"), Some(123));
        assert_eq!(stale_temp_pid("temp-repl-77.rdb"), Some(77));
        assert_eq!(stale_temp_pid("temp-x-1.rdb"), None);
        assert_eq!(stale_temp_pid("temp-1-.rdb"), None);
        assert_eq!(stale_temp_pid("temp-appendonly.aof.manifest"), None);
        assert_eq!(stale_temp_pid("dump.rdb"), None);
    }
}
