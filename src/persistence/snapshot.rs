//! RDB snapshots on disk: SAVE, BGSAVE, `save` points, loading at startup, saving at
//! shutdown, DEBUG RELOAD.
//!
//! A snapshot is serialized on the executor thread (so it is a point-in-time image
//! without fork) and written by a background thread: temp file, fsync, rename, fsync
//! of the directory, so `dbfilename` is always either the old or the new complete
//! file. The serialization pass is O(dataset) on the executor; the key-level
//! copy-on-write walk that would spread it over many loop turns is not built yet.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Instant;

use super::rdb::{self, FileWriter, KeyRecord, Limits};
use crate::exec::Executor;
use crate::keyspace::unix_ms;

/// Redis's CONFIG_BGSAVE_RETRY_DELAY: after a failed background save, automatic
/// saves wait this long before trying again.
const BGSAVE_RETRY_DELAY_SECS: i64 = 5;

/// A background write in flight.
struct BgSave {
    thread: JoinHandle<std::io::Result<()>>,
    started: Instant,
    /// `dirty` when the image was taken: what a successful save accounts for.
    dirty_at_start: u64,
    /// Unix seconds when the image was taken.
    taken_at: i64,
}

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
    bgsave: Option<BgSave>,
    /// SHUTDOWN already did the final save: the loop must not redo it.
    pub shutdown_prepared: bool,
    pub loading: bool,
    pub last_load_keys: u64,
    pub last_load_expired: u64,
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
            bgsave: None,
            shutdown_prepared: false,
            loading: false,
            last_load_keys: 0,
            last_load_expired: 0,
        }
    }
}

impl Persist {
    pub fn bgsave_in_progress(&self) -> bool {
        self.bgsave.is_some()
    }
}

/// The path of the RDB file (`dir` is the working directory after startup).
pub fn rdb_path(ex: &Executor) -> PathBuf {
    PathBuf::from(&ex.config.dbfilename)
}

/// Serializes every database into an RDB image, or says why it cannot.
pub fn serialize(ex: &Executor) -> Result<Vec<u8>, String> {
    let cfg = &ex.config;
    let now = unix_ms();
    let aux: Vec<(&str, Vec<u8>)> = vec![
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
        ("aof-base", b"0".to_vec()),
    ];
    // A hash with field TTLs needs version 12; everything else is written as 10 so
    // that Redis 7.0 loads the file.
    let needs_12 = ex.ks.dbs.iter().any(|d| {
        let mut any = false;
        let mut cursor = 0;
        loop {
            cursor = d.table.scan(cursor, |e| {
                if let crate::keyspace::ValueRef::Obj(crate::keyspace::Object::Hash(h)) = e.value()
                {
                    any |= h.has_field_ttls();
                }
            });
            if cursor == 0 || any {
                return any;
            }
        }
    });
    let version = if needs_12 { 12 } else { rdb::RDB_VERSION };
    let mut out = Vec::new();
    let mut w = FileWriter::start(&mut out, version, cfg.rdbcompression, cfg.rdbchecksum, &aux);
    for (i, d) in ex.ks.dbs.iter().enumerate() {
        if d.table.is_empty() {
            continue;
        }
        w.select_db(&mut out, i, d.table.len(), d.volatile);
        let mut cursor = 0;
        loop {
            cursor = d.table.scan(cursor, |e| {
                w.key(
                    &mut out,
                    &KeyRecord {
                        key: e.key(),
                        value: e.value(),
                        expire_ms: e.expire(),
                    },
                );
            });
            if cursor == 0 {
                break;
            }
        }
    }
    w.finish(&mut out);
    Ok(out)
}

/// Writes `bytes` to `path` atomically: temp file in the same directory, fsync,
/// rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!(
        "temp-{}-{}.rdb",
        std::process::id(),
        fastrand::u32(..)
    ));
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

/// SAVE: a synchronous snapshot. Errors are logged and reported as `Err`.
pub fn save(ex: &mut Executor) -> std::io::Result<()> {
    let bytes = match serialize(ex) {
        Ok(b) => b,
        Err(why) => {
            crate::log::warning(&format!("Failed saving the DB: {why}"));
            ex.persist.last_bgsave_ok = false;
            return Err(std::io::Error::other(why));
        }
    };
    let path = rdb_path(ex);
    ex.persist.last_try = unix_ms() / 1000;
    match write_atomic(&path, &bytes) {
        Ok(()) => {
            crate::log::notice("DB saved on disk");
            ex.ks.dirty = 0;
            ex.persist.lastsave = unix_ms() / 1000;
            ex.persist.last_bgsave_ok = true;
            ex.persist.rdb_saves += 1;
            Ok(())
        }
        Err(e) => {
            crate::log::warning(&format!("Failed saving the DB: {e}"));
            ex.persist.last_bgsave_ok = false;
            Err(e)
        }
    }
}

/// BGSAVE: takes the image now and writes it on a background thread.
pub fn bgsave_start(ex: &mut Executor) {
    let bytes = match serialize(ex) {
        Ok(b) => b,
        Err(why) => {
            crate::log::warning(&format!("Background saving error: {why}"));
            ex.persist.last_bgsave_ok = false;
            ex.persist.last_try = unix_ms() / 1000;
            return;
        }
    };
    let path = rdb_path(ex);
    let now = unix_ms() / 1000;
    ex.persist.last_try = now;
    let thread = std::thread::Builder::new()
        .name("cinnabar-bgsave".into())
        .spawn(move || write_atomic(&path, &bytes));
    match thread {
        Ok(thread) => {
            crate::log::notice("Background saving started");
            ex.persist.bgsave = Some(BgSave {
                thread,
                started: Instant::now(),
                dirty_at_start: ex.ks.dirty,
                taken_at: now,
            });
        }
        Err(e) => {
            crate::log::warning(&format!("Can't save in background: {e}"));
            ex.persist.last_bgsave_ok = false;
        }
    }
}

/// Collects a finished background save (or waits for it when `wait`).
fn reap(ex: &mut Executor, wait: bool) {
    let done = match &ex.persist.bgsave {
        Some(b) => wait || b.thread.is_finished(),
        None => false,
    };
    if !done {
        return;
    }
    let Some(b) = ex.persist.bgsave.take() else {
        return;
    };
    let result = b.thread.join();
    ex.persist.last_bgsave_secs = b.started.elapsed().as_secs() as i64;
    match result {
        Ok(Ok(())) => {
            crate::log::notice("Background saving terminated with success");
            ex.ks.dirty = ex.ks.dirty.saturating_sub(b.dirty_at_start);
            ex.persist.lastsave = b.taken_at;
            ex.persist.last_bgsave_ok = true;
            ex.persist.rdb_saves += 1;
        }
        Ok(Err(e)) => {
            crate::log::warning(&format!("Background saving error: {e}"));
            ex.persist.last_bgsave_ok = false;
        }
        Err(_) => {
            crate::log::warning("Background saving thread panicked");
            ex.persist.last_bgsave_ok = false;
        }
    }
}

/// Timer work: collect a finished BGSAVE, run a scheduled one, honour `save` points.
pub fn cron(ex: &mut Executor) {
    reap(ex, false);
    if ex.persist.bgsave.is_some() {
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
/// or, by default, when save points are configured. Returns false if a required
/// save failed (the server then keeps running, as Redis does).
pub fn prepare_shutdown(ex: &mut Executor, save_req: Option<bool>) -> bool {
    if ex.persist.shutdown_prepared {
        return true;
    }
    reap(ex, true);
    super::aof::shutdown(ex);
    let save_wanted = match save_req {
        Some(s) => s,
        None => !ex.config.save_params.is_empty(),
    };
    if save_wanted {
        crate::log::notice("Saving the final RDB snapshot before exiting.");
        if save(ex).is_err() {
            crate::log::warning("Error trying to save the DB, can't exit.");
            return false;
        }
    }
    ex.persist.shutdown_prepared = true;
    true
}

/// Loads an RDB image into the (empty or flushed) keyspace. Expired keys are skipped.
pub fn load_bytes(ex: &mut Executor, bytes: &[u8]) -> Result<rdb::FileInfo, rdb::Error> {
    let lim = Limits::from_config(&ex.config);
    let now = unix_ms();
    let ndbs = ex.ks.dbs.len();
    let mut loaded = Vec::new();
    let (info, _) = rdb::read_file(bytes, &lim, |k| loaded.push(k))?;
    if let Some(k) = loaded.iter().find(|k| k.db >= ndbs) {
        return Err(rdb::Error::Corrupt(format!(
            "FATAL: Data file was created with a Redis server configured to handle more than {} databases. Exiting",
            k.db
        )));
    }
    let (mut keys, mut expired) = (0u64, 0u64);
    for k in loaded {
        if k.expire_ms.is_some_and(|t| t <= now) {
            expired += 1;
            continue;
        }
        super::register_field_ttls(&mut ex.ks, k.db, &k.key, &k.value);
        ex.ks.set(k.db, &k.key, k.value, k.expire_ms, false, now);
        keys += 1;
    }
    ex.persist.last_load_keys = keys;
    ex.persist.last_load_expired = expired;
    if !info.functions.is_empty() {
        crate::log::warning(&format!(
            "The RDB file holds {} FUNCTION libraries; this server has no FUNCTION support and did not load them.",
            info.functions.len()
        ));
    }
    Ok(info)
}

/// Loads `dbfilename` at startup if it exists. A corrupt or unreadable file is an
/// error (the server refuses to start rather than run on half the data).
pub fn load_at_startup(ex: &mut Executor) -> Result<(), String> {
    let path = rdb_path(ex);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("Fatal error loading the DB: {e}. Exiting.")),
    };
    let start = Instant::now();
    ex.persist.loading = true;
    let r = load_bytes(ex, &bytes);
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
            crate::log::notice(&format!(
                "Done loading RDB, keys loaded: {}, keys expired: {}.",
                ex.persist.last_load_keys, ex.persist.last_load_expired
            ));
            crate::log::notice(&format!(
                "DB loaded from disk: {:.3} seconds",
                start.elapsed().as_secs_f64()
            ));
            ex.ks.dirty = 0;
            Ok(())
        }
        Err(e) => {
            // Nothing was inserted: the file is decoded and verified before any key
            // is handed over.
            Err(format!(
                "Fatal error loading the DB ({}): {e}. Exiting.",
                path.display()
            ))
        }
    }
}

/// DEBUG RELOAD: save, empty the keyspace, load the file back.
pub fn debug_reload(ex: &mut Executor) -> Result<(), String> {
    reap(ex, true);
    save(ex).map_err(|_| "Error trying to save the DB".to_string())?;
    let bytes = std::fs::read(rdb_path(ex)).map_err(|e| e.to_string())?;
    ex.signal_flushed_db(None);
    ex.ks.flush_all(false);
    load_bytes(ex, &bytes).map_err(|e| format!("Error trying to load the RDB dump: {e}"))?;
    ex.ks.dirty = 0;
    Ok(())
}

/// The INFO persistence section's snapshot fields.
pub fn info_fields(ex: &Executor, s: &mut String) {
    let p = &ex.persist;
    let cur = p
        .bgsave
        .as_ref()
        .map_or(-1, |b| b.started.elapsed().as_secs() as i64);
    s.push_str(&format!(
        "loading:{}\r\nasync_loading:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_loaded:{}\r\n",
        p.loading as u8,
        ex.ks.dirty,
        p.bgsave.is_some() as u8,
        p.lastsave,
        if p.last_bgsave_ok { "ok" } else { "err" },
        p.last_bgsave_secs,
        cur,
        p.rdb_saves,
        p.last_load_expired,
        p.last_load_keys,
    ));
}
