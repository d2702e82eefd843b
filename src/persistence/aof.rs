//! The append-only file in Redis 7's multi-part layout: a directory (`appenddirname`)
//! holding a base file (an RDB image, Redis's "RDB preamble", or RESP commands), the
//! incremental files of RESP commands written since, and a manifest naming them:
//!
//! ```text
//! file appendonly.aof.1.base.rdb seq 1 type b
//! file appendonly.aof.1.incr.aof seq 1 type i
//! ```
//!
//! The executor's write stream (exec/propagate.rs) collects each command's effect;
//! `flush` appends it to the current incremental file once per event-loop turn,
//! before any reply of that turn is written. With `appendfsync always` it also
//! fdatasyncs there, so one fsync covers every write of the turn (group commit) and no
//! client hears about a write that is not on disk. `everysec` syncs from a
//! background thread at most once a second; `no` leaves it to the kernel.
//!
//! BGREWRITEAOF starts the same incremental copy-on-write snapshot as BGSAVE
//! (persistence/cow.rs: no pause, written by a background thread) and switches new
//! writes to a fresh incremental file at that instant; when the image is on disk as
//! the new base, it publishes a manifest of new base + new incremental file. Until then the manifest lists the old files plus
//! the new incremental one, so a crash at any moment loads a complete history.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::cow::Purpose;
use crate::exec::Executor;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    Always,
    EverySec,
    No,
}

/// One file named by the manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub name: String,
    /// As written (Redis's `long long`): a base's may be negative.
    pub seq: i64,
    /// b(ase), i(ncremental) or h(istory).
    pub kind: char,
}

/// A parsed manifest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    pub base: Option<Part>,
    pub incrs: Vec<Part>,
}

/// Redis's MANIFEST_MAX_LINE: a manifest line is read in pieces of this many bytes.
const MANIFEST_MAX_LINE: usize = 1024;

/// A manifest error as Redis reports it (the banner, the line, the reason).
fn manifest_error(at: Option<(usize, &[u8])>, reason: &str) -> String {
    let mut s = String::from("\n*** FATAL AOF MANIFEST FILE ERROR ***\n");
    if let Some((n, line)) = at {
        s.push_str(&format!(
            "Reading the manifest file, at line {n}\n>>> '{}'\n",
            String::from_utf8_lossy(line)
        ));
    }
    s.push_str(reason);
    s
}

/// C's atoll: optional sign and leading digits, 0 when there are none.
fn atoll(s: &[u8]) -> i64 {
    let s = s.trim_ascii_start();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut n: i64 = 0;
    for &d in digits.iter().take_while(|d| d.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add((d - b'0') as i64);
    }
    if neg {
        -n
    } else {
        n
    }
}

impl Manifest {
    /// Parses a manifest with Redis's strictness (aofLoadManifestFromFile): an empty
    /// file, an over-long or blank line, fewer than three key/value pairs or an odd
    /// count, a missing `file`/`seq`/`type`, a path, a second base, a non-increasing
    /// incremental sequence or an unknown type is an error naming the line.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        let mut max_seq: i64 = 0;
        let mut line_no = 0;
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            // As fgets with a MANIFEST_MAX_LINE buffer reads it.
            let take = memchr::memchr(b'\n', rest)
                .map_or(rest.len(), |i| i + 1)
                .min(MANIFEST_MAX_LINE);
            let (buf, tail) = rest.split_at(take);
            rest = tail;
            line_no += 1;
            if buf[0] == b'#' {
                continue;
            }
            if !buf.contains(&b'\n') {
                return Err(manifest_error(
                    None,
                    "The AOF manifest file contains too long line",
                ));
            }
            let line = buf.trim_ascii();
            let at = Some((line_no, line));
            let invalid = || manifest_error(at, "Invalid AOF manifest file format");
            if line.is_empty() {
                return Err(invalid());
            }
            let words = crate::protocol::parser::split_args(line).ok_or_else(invalid)?;
            if words.len() < 6 || !words.len().is_multiple_of(2) {
                return Err(invalid());
            }
            let (mut name, mut seq, mut kind) = (None, 0i64, None);
            for kv in words.chunks(2) {
                if kv[0].eq_ignore_ascii_case(b"file") {
                    let n = String::from_utf8_lossy(&kv[1]).into_owned();
                    if n.contains('/') || n.contains('\\') {
                        return Err(manifest_error(at, "File can't be a path, just a filename"));
                    }
                    name = Some(n);
                } else if kv[0].eq_ignore_ascii_case(b"seq") {
                    seq = atoll(&kv[1]);
                } else if kv[0].eq_ignore_ascii_case(b"type") {
                    kind = kv[1].first().map(|&c| c as char);
                }
                // Other keys are ignored (forward compatibility), as Redis does.
            }
            let (Some(name), true, Some(kind)) = (name.filter(|n| !n.is_empty()), seq != 0, kind)
            else {
                return Err(invalid());
            };
            let part = Part { name, seq, kind };
            match kind {
                'b' => {
                    if m.base.is_some() {
                        return Err(manifest_error(at, "Found duplicate base file information"));
                    }
                    m.base = Some(part)
                }
                'h' => {}
                'i' => {
                    if seq <= max_seq {
                        return Err(manifest_error(at, "Found a non-monotonic sequence number"));
                    }
                    max_seq = seq;
                    m.incrs.push(part)
                }
                _ => return Err(manifest_error(at, "Unknown AOF file type")),
            }
        }
        if line_no == 0 {
            return Err(manifest_error(None, "Found an empty AOF manifest"));
        }
        Ok(m)
    }

    /// Every file of the history, base first.
    fn parts(&self) -> Vec<Part> {
        self.base.iter().chain(self.incrs.iter()).cloned().collect()
    }

    /// The base and incremental files a rewrite of this history creates. An RDB base
    /// is named `.base.rdb`, a RESP one `.base.aof`, as Redis names them.
    fn next_parts(&self, prefix: &str, rdb_base: bool) -> (Part, Part) {
        // As Redis's counters, which start at 0 when the manifest names no such file.
        let seq = self.incrs.last().map_or(0, |p| p.seq).saturating_add(1);
        let base_seq = self.base.as_ref().map_or(0, |p| p.seq).saturating_add(1);
        let suffix = if rdb_base { "rdb" } else { "aof" };
        let base = Part {
            name: format!("{prefix}.{base_seq}.base.{suffix}"),
            seq: base_seq,
            kind: 'b',
        };
        let incr = Part {
            name: format!("{prefix}.{seq}.incr.aof"),
            seq,
            kind: 'i',
        };
        (base, incr)
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        for p in self.base.iter().chain(self.incrs.iter()) {
            s.push_str("file ");
            // Quoted as Redis's sdscatrepr when it holds spaces or special bytes.
            if p.name
                .bytes()
                .any(|b| !(0x21..=0x7e).contains(&b) || b == b'"' || b == b'\\')
            {
                crate::util::repr(&mut s, p.name.as_bytes());
            } else {
                s.push_str(&p.name);
            }
            s.push_str(&format!(" seq {} type {}\n", p.seq, p.kind));
        }
        s
    }
}

/// A rewrite in progress: its base is the snapshot in `Persist::snap`.
struct Rewrite {
    base: Part,
    /// Files of the old history, deleted once the new manifest is published.
    old: Vec<Part>,
    new_incr: Part,
    /// The first rewrite after AOF was turned on at runtime writes new commands to a
    /// temp file (not in any manifest); it gets `new_incr`'s name on publication.
    temp_incr: Option<PathBuf>,
}

/// The open AOF.
pub struct Aof {
    dir: PathBuf,
    prefix: String,
    manifest: Manifest,
    file: File,
    pub fsync: Fsync,
    last_fsync: Instant,
    unsynced: bool,
    fsync_thread: Option<JoinHandle<()>>,
    pub incr_size: u64,
    pub base_size: u64,
    rewrite: Option<Rewrite>,
    pub rewrite_scheduled: bool,
    pub last_rewrite_ok: bool,
    pub rewrites: u64,
    /// The last write to the incremental file failed with this errno (0: it worked).
    /// While it is set, writes are refused with MISCONF and the buffered commands are
    /// retried every turn (`flush`).
    pub last_write_errno: i32,
    /// The errno of the last failed background fsync (`everysec`), 0 once one
    /// succeeds; it refuses writes like a write error.
    fsync_errno: Arc<AtomicI32>,
    /// When a write error was last logged (one line per `WRITE_ERROR_LOG_EVERY`).
    last_error_log: Option<Instant>,
    /// DEBUG AOF-SPACE: the bytes the incremental file may still grow by before
    /// writes fail with ENOSPC, as on a full disk (tests); `None`: no limit.
    pub space_left: Option<u64>,
    /// DEBUG AOF-FSYNC-ERROR: the everysec fsync fails with this errno (0: it runs).
    pub fsync_fail_with: i32,
    /// DEBUG AOF-FSYNC-SLEEP: the everysec fsync takes this much longer, as on a busy
    /// disk (tests of `flush_turn`).
    pub fsync_sleep: Duration,
    /// DEBUG AOF-FLUSH-SLEEP: microseconds to sleep before each write (tests that
    /// need replies and the write to land in one turn).
    pub flush_sleep_us: u64,
    /// Turned on at runtime and its first base is not written yet: the manifest on
    /// disk (if any) is stale history, and `file` is the temp incremental file.
    wait_rewrite: bool,
    /// Write-stream positions (WAITAOF): written to the file, covered by the fsync in
    /// flight, and known to be on disk.
    written_pos: u64,
    sync_target: u64,
    fsynced_pos: u64,
    /// The unix second of the last `#TS` annotation written, and whether
    /// `aof-timestamp-enabled` asks for them (kept here, off the per-flush path's
    /// config lookups; CONFIG SET updates it).
    annotated_secs: i64,
    pub timestamps: bool,
    /// Since when the turn's write has waited for the `everysec` fsync in flight
    /// (`flush_turn`), and how many times that wait ran out (INFO `aof_delayed_fsync`).
    postponed_since: Option<Instant>,
    delayed_fsyncs: u64,
}

impl Aof {
    /// Turned on at runtime, its first base not written yet (Redis's AOF_WAIT_REWRITE).
    pub fn waits_for_rewrite(&self) -> bool {
        self.wait_rewrite
    }
}

/// The write-stream position known to be fsynced, or `None` when the AOF is off or
/// has no valid history yet (turned on at runtime, first base not written).
pub fn fsynced_offset(ex: &Executor) -> Option<u64> {
    ex.aof
        .as_ref()
        .filter(|a| !a.wait_rewrite)
        .map(|a| a.fsynced_pos)
}

fn write_file_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Writes the manifest atomically (temp file, fsync, rename, fsync dir).
fn publish_manifest(dir: &Path, prefix: &str, m: &Manifest) -> std::io::Result<()> {
    let tmp = dir.join(format!("temp-{prefix}.manifest"));
    write_file_synced(&tmp, m.render().as_bytes())?;
    std::fs::rename(&tmp, dir.join(format!("{prefix}.manifest")))?;
    sync_dir(dir);
    Ok(())
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

pub fn fsync_mode(name: &str) -> Fsync {
    match name {
        "always" => Fsync::Always,
        "no" => Fsync::No,
        _ => Fsync::EverySec,
    }
}

// ----- reading RESP command files --------------------------------------------------

enum Parsed {
    Cmd(Vec<Vec<u8>>, usize),
    Incomplete,
    Bad(String),
}

fn parse_line(buf: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let end = memchr::memchr(b'\n', &buf[pos..])? + pos;
    if end == pos || buf[end - 1] != b'\r' {
        return Some((&buf[pos..end], end + 1)); // malformed; caller rejects
    }
    Some((&buf[pos..end - 1], end + 1))
}

/// Parses one `*N $len data ...` command at `pos`.
fn parse_command(buf: &[u8], pos: usize) -> Parsed {
    let Some((line, mut p)) = parse_line(buf, pos) else {
        return Parsed::Incomplete;
    };
    if line.first() != Some(&b'*') {
        return Parsed::Bad("expected '*'".into());
    }
    let Some(n) = crate::util::numeric::parse_i64(&line[1..]).filter(|n| *n >= 1) else {
        return Parsed::Bad("invalid argument count".into());
    };
    let mut args = Vec::with_capacity((n as usize).min(1024));
    for _ in 0..n {
        let Some((l, q)) = parse_line(buf, p) else {
            return Parsed::Incomplete;
        };
        if l.first() != Some(&b'$') {
            return Parsed::Bad("expected '$'".into());
        }
        let Some(len) = crate::util::numeric::parse_i64(&l[1..]).filter(|n| *n >= 0) else {
            return Parsed::Bad("invalid bulk length".into());
        };
        let len = len as usize;
        if buf.len() < q + len + 2 {
            return Parsed::Incomplete;
        }
        if &buf[q + len..q + len + 2] != b"\r\n" {
            return Parsed::Bad("bulk not terminated by CRLF".into());
        }
        args.push(buf[q..q + len].to_vec());
        p = q + len + 2;
    }
    Parsed::Cmd(args, p)
}

/// Applies one command read from an AOF file named `name` through the executor, as
/// the loader does: an unknown command ends the load.
pub fn apply_command(
    ex: &mut Executor,
    slot: usize,
    args: &[&[u8]],
    name: &str,
) -> Result<(), String> {
    if crate::commands::lookup(args[0]).is_none() {
        return Err(format!(
            "Unknown command '{}' reading the append only file {name}",
            String::from_utf8_lossy(args[0])
        ));
    }
    ex.execute(slot, args);
    Ok(())
}

/// Walks a file of RESP commands, handing each one (never empty) to `apply`, which
/// may refuse it with an error that ends the walk. Returns `Ok(None)` when the whole
/// file was read, `Ok(Some(offset))` when it ends with an incomplete command (or an
/// unterminated MULTI) starting at `offset`.
pub fn read_commands(
    buf: &[u8],
    name: &str,
    mut apply: impl FnMut(&[&[u8]]) -> Result<(), String>,
) -> Result<Option<usize>, String> {
    let mut pos = 0;
    let mut multi_at: Option<usize> = None;
    while pos < buf.len() {
        if buf[pos] == b'#' {
            // An annotation line (`#TS:<unix time>` from aof-timestamp-enabled):
            // skipped, as Redis does.
            pos = memchr::memchr(b'\n', &buf[pos..]).map_or(buf.len(), |n| pos + n + 1);
            continue;
        }
        match parse_command(buf, pos) {
            Parsed::Incomplete => return Ok(Some(multi_at.unwrap_or(pos))),
            Parsed::Bad(m) => {
                return Err(format!(
                    "Bad file format reading the append only file {name} at offset {pos}: {m}"
                ))
            }
            Parsed::Cmd(args, next) => {
                if args[0].eq_ignore_ascii_case(b"multi") {
                    multi_at = Some(pos);
                } else if args[0].eq_ignore_ascii_case(b"exec") {
                    multi_at = None;
                }
                let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                apply(&refs)?;
                pos = next;
            }
        }
    }
    Ok(multi_at)
}

/// Loads one AOF file's bytes: an RDB image first when the file starts with one (a
/// base, or an old-style AOF with an RDB preamble), then the commands after it, each
/// handed to `run` (the loader's is `apply_command`). Returns `Ok(Some(offset))` when
/// the file ends with an incomplete command (or an unterminated MULTI) starting at
/// `offset`, as `read_commands`.
pub fn load_file_bytes(
    ex: &mut Executor,
    buf: &[u8],
    name: &str,
    mut run: impl FnMut(&mut Executor, &[&[u8]]) -> Result<(), String>,
) -> Result<Option<usize>, String> {
    let mut commands_at = 0;
    if buf.starts_with(b"REDIS") {
        crate::log::notice(&format!("Reading RDB base file on AOF loading... ({name})"));
        let (_, used) = super::snapshot::load_image(ex, buf, false)
            .map_err(|e| format!("Bad file format reading the append only file {name}: {e}"))?;
        commands_at = used;
    }
    let at = read_commands(&buf[commands_at..], name, |args| run(ex, args))?;
    Ok(at.map(|at| commands_at + at))
}

/// Loads the AOF directory named by the configuration, if its manifest exists.
/// Returns whether an AOF was loaded.
pub fn load(ex: &mut Executor) -> Result<bool, String> {
    let dir = PathBuf::from(&ex.config.appenddirname);
    let prefix = ex.config.appendfilename.clone();
    let mpath = dir.join(format!("{prefix}.manifest"));
    let text = match std::fs::read_to_string(&mpath) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // No manifest: an old-style single AOF in the working directory, if
            // any, becomes the base of a new one (Redis 7's upgrade).
            if !Path::new(&prefix).is_file() {
                return Ok(false);
            }
            render_empty_manifest()
        }
        Err(e) => {
            return Err(format!(
                "Can't read the AOF manifest {}: {e}",
                mpath.display()
            ))
        }
    };
    let m = Manifest::parse(&text)?;
    let m = upgrade_old_style(&dir, &prefix, m)?;
    let start = Instant::now();
    ex.persist.loading = true;
    let slot = ex.connect_internal("aof-loader");
    let enabled = std::mem::replace(&mut ex.stream.enabled, false);
    // Keys never expire while the log replays (Redis's keyIsExpired while loading): a
    // command after a past PEXPIREAT must find the key as it was when it ran.
    let expire_mode = std::mem::replace(&mut ex.ks.expire_mode, crate::keyspace::ExpireMode::Keep);
    let r = load_parts(ex, slot, &dir, &m);
    ex.ks.expire_mode = expire_mode;
    ex.stream.enabled = enabled;
    ex.disconnect(slot);
    ex.persist.loading = false;
    r?;
    ex.ks.dirty = 0;
    crate::log::notice(&format!(
        "DB loaded from append only file: {:.3} seconds",
        start.elapsed().as_secs_f64()
    ));
    Ok(true)
}

fn render_empty_manifest() -> String {
    "# no files\n".into()
}

/// Redis 7's upgrade from a single `appendfilename` file in the working directory:
/// when there is no manifest (or an empty one), or the manifest names only that file
/// as its base and the AOF directory lacks it (an interrupted upgrade), the file is
/// moved into the AOF directory as the base of a new manifest.
fn upgrade_old_style(dir: &Path, prefix: &str, m: Manifest) -> Result<Manifest, String> {
    if !Path::new(prefix).is_file() {
        return Ok(m);
    }
    let interrupted = m.incrs.is_empty()
        && m.base.as_ref().is_some_and(|b| b.name == prefix)
        && !dir.join(prefix).exists();
    let empty = m.base.is_none() && m.incrs.is_empty();
    if !(dir.is_dir() && !empty && !interrupted) {
        std::fs::create_dir_all(dir).map_err(|e| {
            format!(
                "Can't open or create append-only dir {}: {}",
                dir.display(),
                io_text(&e)
            )
        })?;
        let upgraded = Manifest {
            base: Some(Part {
                name: prefix.to_string(),
                seq: 1,
                kind: 'b',
            }),
            incrs: Vec::new(),
        };
        publish_manifest(dir, prefix, &upgraded).map_err(|e| e.to_string())?;
        std::fs::rename(prefix, dir.join(prefix)).map_err(|e| {
            format!(
                "Error trying to move the old AOF file {prefix} into dir {}: {}",
                dir.display(),
                io_text(&e)
            )
        })?;
        crate::log::notice(&format!(
            "Successfully migrated an old-style AOF file ({prefix}) into the AOF directory ({}).",
            dir.display()
        ));
        return Ok(upgraded);
    }
    Ok(m)
}

fn load_parts(ex: &mut Executor, slot: usize, dir: &Path, m: &Manifest) -> Result<(), String> {
    let parts: Vec<&Part> = m.base.iter().chain(m.incrs.iter()).collect();
    let last = parts.len().saturating_sub(1);
    // Every file the manifest names must be there before anything loads: a missing
    // one (deleted, or never written) would silently drop the writes it held.
    for part in &parts {
        if let Err(e) = std::fs::metadata(dir.join(&part.name)) {
            return Err(format!(
                "Unable to obtain the AOF file {} length. stat: {}",
                part.name,
                io_text(&e)
            ));
        }
    }
    for (i, part) in parts.iter().enumerate() {
        let path = dir.join(&part.name);
        let buf = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                return Err(format!(
                    "Fatal error: can't open the append log file {} for reading: {}",
                    part.name,
                    io_text(&e)
                ))
            }
        };
        let applied = load_file_bytes(ex, &buf, &part.name, |ex, args| {
            apply_command(ex, slot, args, &part.name)
        })?;
        if let Some(at) = applied {
            if i != last {
                return Err(format!(
                    "Unexpected end of file reading the append only file {}: it is not the last file, refusing to load",
                    part.name
                ));
            }
            if !ex.config.aof_load_truncated {
                return Err(format!(
                    "Unexpected end of file reading the append only file {}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                    part.name
                ));
            }
            crate::log::warning(&format!(
                "!!! Warning: short read while loading the AOF file {}!!! AOF loaded anyway because aof-load-truncated is enabled; truncating it to {at} bytes ({} bytes dropped).",
                part.name,
                buf.len() - at
            ));
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| e.to_string())?;
            f.set_len(at as u64).map_err(|e| e.to_string())?;
            f.sync_all().map_err(|e| e.to_string())?;
            // A discarded MULTI's commands were applied above; reload from scratch so
            // the dataset matches the truncated file exactly.
            if buf[at..].starts_with(b"*1\r\n$5\r\nMULTI")
                || buf[at..].starts_with(b"*1\r\n$5\r\nmulti")
            {
                return Err(RELOAD.into());
            }
        }
    }
    Ok(())
}

const RELOAD: &str = "\u{0}reload";

/// Loads at startup, retrying once after a truncated tail that cut a transaction.
pub fn load_with_retry(ex: &mut Executor) -> Result<bool, String> {
    match load(ex) {
        Err(e) if e == RELOAD => {
            ex.ks.flush_all(false);
            crate::scripting::functions::flush_libraries(ex);
            load(ex)
        }
        r => r,
    }
}

/// Opens (creating if needed) the AOF directory for writing and enables the stream.
/// Without a manifest the current dataset becomes the base, as Redis does when AOF is
/// first turned on.
pub fn open(ex: &mut Executor) -> Result<(), String> {
    let dir = PathBuf::from(&ex.config.appenddirname);
    let prefix = ex.config.appendfilename.clone();
    std::fs::create_dir_all(&dir).map_err(|e| format!("Can't create the AOF directory: {e}"))?;
    let mpath = dir.join(format!("{prefix}.manifest"));
    let mut m = match std::fs::read_to_string(&mpath) {
        Ok(t) => Manifest::parse(&t)?,
        Err(_) => Manifest::default(),
    };
    let on_disk = (!m.incrs.is_empty()).then(|| m.clone());
    let mut base_size = 0;
    if m.base.is_none() && m.incrs.is_empty() {
        let preamble = rdb_preamble(ex);
        let base = Part {
            name: format!("{prefix}.1.base.{}", if preamble { "rdb" } else { "aof" }),
            seq: 1,
            kind: 'b',
        };
        base_size = super::snapshot::write_base_file(ex, &dir.join(&base.name), preamble)
            .map_err(|e| e.to_string())?;
        m.base = Some(base);
    } else if let Some(b) = &m.base {
        base_size = std::fs::metadata(dir.join(&b.name))
            .map(|md| md.len())
            .unwrap_or(0);
    }
    if m.incrs.is_empty() {
        let seq = m.base.as_ref().map_or(1, |b| b.seq);
        m.incrs.push(Part {
            name: format!("{prefix}.{seq}.incr.aof"),
            seq,
            kind: 'i',
        });
    }
    let incr = m.incrs.last().cloned().expect("one incremental file");
    let file = open_append(&dir.join(&incr.name)).map_err(|e| e.to_string())?;
    let incr_size = file.metadata().map(|md| md.len()).unwrap_or(0);
    // A complete manifest is left as it is: a restart on a full disk needs no room.
    if on_disk.as_ref() != Some(&m) {
        publish_manifest(&dir, &prefix, &m).map_err(|e| e.to_string())?;
    }
    ex.aof = Some(Box::new(Aof {
        dir,
        prefix,
        manifest: m,
        file,
        fsync: fsync_mode(&ex.config.appendfsync),
        last_fsync: Instant::now(),
        unsynced: false,
        fsync_thread: None,
        incr_size,
        base_size,
        rewrite: None,
        rewrite_scheduled: false,
        last_rewrite_ok: true,
        rewrites: 0,
        last_write_errno: 0,
        fsync_errno: Arc::new(AtomicI32::new(0)),
        last_error_log: None,
        space_left: None,
        fsync_fail_with: 0,
        fsync_sleep: Duration::ZERO,
        flush_sleep_us: 0,
        wait_rewrite: false,
        written_pos: ex.stream.position(),
        sync_target: ex.stream.position(),
        fsynced_pos: ex.stream.position(),
        annotated_secs: 0,
        timestamps: ex.config.stored_bool("aof-timestamp-enabled"),
        postponed_since: None,
        delayed_fsyncs: 0,
    }));
    ex.stream.enabled = true;
    ex.stream.reset_db();
    Ok(())
}

fn temp_incr_path(dir: &Path, prefix: &str) -> PathBuf {
    dir.join(format!("temp-{prefix}.incr"))
}

/// CONFIG SET appendonly yes: as Redis's startAppendOnly, a fresh AOF whose base is
/// the current dataset, written by a rewrite (scheduled when a BGSAVE is running).
/// Whatever AOF the directory holds is stale history until that rewrite publishes
/// the new manifest, and is deleted then.
pub fn start_at_runtime(ex: &mut Executor, in_exec: bool) -> Result<(), String> {
    if ex.aof.is_some() {
        return Ok(());
    }
    let dir = PathBuf::from(&ex.config.appenddirname);
    let prefix = ex.config.appendfilename.clone();
    std::fs::create_dir_all(&dir).map_err(|e| format!("Can't create the AOF directory: {e}"))?;
    let manifest = match std::fs::read_to_string(dir.join(format!("{prefix}.manifest"))) {
        Ok(t) => Manifest::parse(&t).unwrap_or_default(),
        Err(_) => Manifest::default(),
    };
    let file = File::create(temp_incr_path(&dir, &prefix)).map_err(|e| e.to_string())?;
    ex.aof = Some(Box::new(Aof {
        dir,
        prefix,
        manifest,
        file,
        fsync: fsync_mode(&ex.config.appendfsync),
        last_fsync: Instant::now(),
        unsynced: false,
        fsync_thread: None,
        incr_size: 0,
        base_size: 0,
        rewrite: None,
        rewrite_scheduled: false,
        last_rewrite_ok: true,
        rewrites: 0,
        last_write_errno: 0,
        fsync_errno: Arc::new(AtomicI32::new(0)),
        last_error_log: None,
        space_left: None,
        fsync_fail_with: 0,
        fsync_sleep: Duration::ZERO,
        flush_sleep_us: 0,
        wait_rewrite: true,
        written_pos: ex.stream.position(),
        sync_target: ex.stream.position(),
        fsynced_pos: ex.stream.position(),
        annotated_secs: 0,
        timestamps: ex.config.stored_bool("aof-timestamp-enabled"),
        postponed_since: None,
        delayed_fsyncs: 0,
    }));
    // Until the image is taken there is nothing to log: the image will hold it.
    // (Replicas still need the stream.)
    crate::replication::feed(ex);
    ex.stream.enabled = ex.repl.backlog.is_some();
    ex.stream.clear();
    // The rewrite that turning AOF on starts stands for one asked while it was off.
    ex.persist.off_rewrite_scheduled = false;
    // The rewrite waits for a snapshot in progress, or for the transaction's end (as
    // Redis's startAppendOnly: a rewrite started inside EXEC would see it half done).
    let wait = if ex.persist.busy() {
        Some("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.")
    } else if in_exec {
        Some("AOF was enabled during a transaction. An AOF background was scheduled to start when possible.")
    } else {
        None
    };
    if let Some(why) = wait {
        crate::log::notice(why);
        if let Some(a) = ex.aof.as_mut() {
            a.rewrite_scheduled = true;
        }
        return Ok(());
    }
    if let Err(e) = start_rewrite(ex) {
        stop_at_runtime(ex);
        return Err(e);
    }
    Ok(())
}

/// CONFIG SET appendonly no: as Redis's stopAppendOnly, everything written so far is
/// flushed and synced, a rewrite in flight is cancelled (the manifest still lists the
/// complete old history plus the current incremental file), then the stream stops.
pub fn stop_at_runtime(ex: &mut Executor) {
    if ex.aof.is_none() {
        return;
    }
    flush(ex);
    super::snapshot::kill_aof_rewrite_at_stop(ex);
    if let Some(aof) = ex.aof.take() {
        if let Err(e) = aof.file.sync_all() {
            crate::log::warning(&format!("Error syncing the AOF: {e}"));
        }
        if aof.wait_rewrite {
            let _ = std::fs::remove_file(temp_incr_path(&aof.dir, &aof.prefix));
        }
        if let Some(t) = aof.fsync_thread {
            let _ = t.join();
        }
    }
    ex.stream.enabled = ex.repl.backlog.is_some();
    ex.stream.clear();
    // Clients waiting for a local fsync get WAITAOF's error now.
    crate::commands::waitaof::fsync_progress(ex);
}

/// Startup: the AOF when enabled (falling back to the RDB file when there is no AOF
/// yet), else the RDB file.
pub fn load_at_startup(ex: &mut Executor) -> Result<(), String> {
    if !ex.config.appendonly {
        return super::snapshot::load_at_startup(ex);
    }
    if !load_with_retry(ex)? {
        super::snapshot::load_at_startup(ex)?;
    }
    open(ex)
}

/// `flush` of the stream's bytes before absolute position `pos` only: while a script
/// is busy, what preceded it reaches the AOF before other clients get replies, and the
/// script's own partial effects stay buffered (exec/busy.rs).
pub fn flush_before(ex: &mut Executor, pos: u64) {
    let keep_from = pos.saturating_sub(ex.stream.position() - ex.stream.buf.len() as u64);
    if keep_from as usize >= ex.stream.buf.len() {
        return flush(ex);
    }
    let tail = ex.stream.buf.split_off(keep_from as usize);
    flush(ex);
    if ex.stream.buf.is_empty() {
        ex.stream.buf = tail;
    } else {
        // The write failed: everything stays buffered, in order.
        ex.stream.buf.extend_from_slice(&tail);
    }
}

/// Redis's AOF_WRITE_LOG_ERROR_RATE: a failing write is logged once per this period.
const WRITE_ERROR_LOG_EVERY: Duration = Duration::from_secs(30);

/// An errno as strerror(3) words it ("No space left on device").
pub fn errno_text(code: i32) -> String {
    let s = std::io::Error::from_raw_os_error(code).to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Writes `buf` to the incremental file: the bytes written, and the error that
/// stopped it short. The DEBUG AOF-SPACE limit fails it as a full disk would.
fn write_file(aof: &mut Aof, buf: &[u8]) -> (usize, Option<std::io::Error>) {
    let mut done = 0;
    while done < buf.len() {
        let room = aof
            .space_left
            .map_or(usize::MAX, |r| r.min(usize::MAX as u64) as usize);
        if room == 0 {
            return (done, Some(std::io::Error::from_raw_os_error(libc::ENOSPC)));
        }
        let end = buf.len().min(done.saturating_add(room));
        match aof.file.write(&buf[done..end]) {
            Ok(0) => return (done, Some(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => {
                done += n;
                if let Some(r) = aof.space_left.as_mut() {
                    *r -= n as u64;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

/// The errno refusing writes (MISCONF): a failed write, else a failed background
/// fsync; `None` when the AOF is off or healthy (Redis's writeCommandsDeniedByDiskError).
pub fn write_error(ex: &Executor) -> Option<i32> {
    let aof = ex.aof.as_ref()?;
    if aof.last_write_errno != 0 {
        return Some(aof.last_write_errno);
    }
    match aof.fsync_errno.load(Ordering::Relaxed) {
        0 => None,
        e => Some(e),
    }
}

/// Whether `slot`'s replies must wait: it wrote something the AOF could not take
/// yet (a failed write), or whose write waits for a slow fsync (`flush_turn`). Its
/// output goes out once the write is made, so no client hears of a write that is
/// not in the file (Redis sends it anyway, and a crash meanwhile loses it).
pub fn reply_waits_for_write(ex: &Executor, slot: usize) -> bool {
    ex.aof.as_ref().is_some_and(|a| {
        (a.last_write_errno != 0 || a.postponed_since.is_some())
            && !ex.stream.buf.is_empty()
            && ex.client(slot).aof_woff > a.written_pos
    })
}

/// The turn's write waits for a slow fsync (`flush_turn`): the loop looks again
/// every millisecond, since the replies it holds go out once it is made.
pub fn write_postponed(ex: &Executor) -> bool {
    ex.aof.as_ref().is_some_and(|a| a.postponed_since.is_some())
}

/// How long the turn's write may wait for a slow `everysec` fsync (Redis's 2 s).
const FSYNC_POSTPONE_MAX: Duration = Duration::from_secs(2);

/// The end of a loop turn's `flush`, and the timer's. Under `everysec`, while the
/// background fsync is still running, the write waits, for 2 s at most, as Redis's
/// flushAppendOnlyFile does: a write to a file being synced can block the loop in the
/// kernel for as long as the disk takes. The replies of the writes it holds wait
/// with it (`reply_waits_for_write`): Redis sends them, and a crash in those 2 s
/// loses writes it acknowledged. Other clients are served meanwhile; replicas get
/// the stream at once. Past 2 s the write is made anyway and counted
/// (INFO `aof_delayed_fsync`).
pub fn flush_turn(ex: &mut Executor) {
    if let Some(aof) = ex.aof.as_mut() {
        let fsync_running = aof.fsync_thread.as_ref().is_some_and(|t| !t.is_finished());
        if aof.fsync == Fsync::EverySec && fsync_running && !ex.stream.buf.is_empty() {
            let since = *aof.postponed_since.get_or_insert_with(Instant::now);
            if since.elapsed() < FSYNC_POSTPONE_MAX {
                crate::replication::feed(ex);
                return;
            }
            aof.delayed_fsyncs += 1;
            crate::log::notice("Asynchronous AOF fsync is taking too long (disk is busy?). Writing the AOF buffer without waiting for fsync to complete, this may slow down Redis.");
        }
        aof.postponed_since = None;
    }
    flush(ex);
}

/// Writes the stream's pending commands to the incremental file; with `always`,
/// fdatasyncs before returning. Called once per loop turn before replies go out.
///
/// A failed write (a full disk) keeps the commands buffered and is retried on the
/// next call; a partial one is cut back off the file first, so the file never ends
/// in a torn command (if even the truncation fails, the written part is kept and
/// dropped from the buffer, as Redis does). Meanwhile writes are refused with
/// MISCONF (`write_error`), and the replies of the writes already made wait
/// (`reply_waits_for_write`). With `appendfsync always` a failed write is fatal.
pub fn flush(ex: &mut Executor) {
    // Replicas get the same bytes (src/replication).
    crate::replication::feed(ex);
    let Some(aof) = ex.aof.as_mut() else {
        ex.stream.clear();
        return;
    };
    if ex.stream.buf.is_empty() {
        // Switched from everysec (or no) to always with written data not yet synced:
        // synced now, as Redis's flushAppendOnlyFile does with an empty buffer.
        if aof.fsync == Fsync::Always && aof.unsynced && aof.last_write_errno == 0 {
            sync_always(ex);
        }
        return;
    }
    let data = ex.stream.aof_bytes();
    if data.is_empty() {
        // Only replica-only commands (PUBLISH): nothing for the file.
        drop(data);
        ex.stream.clear();
        aof.written_pos = ex.stream.position();
        return;
    }
    if aof.flush_sleep_us > 0 {
        std::thread::sleep(Duration::from_micros(aof.flush_sleep_us));
    }
    // aof-timestamp-enabled: a `#TS:<unix time>` line before the first commands of
    // each new second, as Redis's feedAppendOnlyFile writes it.
    let secs = if aof.timestamps {
        crate::keyspace::unix_ms() / 1000
    } else {
        0
    };
    let annotated = aof.timestamps && secs > aof.annotated_secs;
    let write_start = Instant::now();
    let (mut written, failure, annotation) = if annotated {
        let mut buf = Vec::with_capacity(data.len() + 24);
        super::resp_image::timestamp(&mut buf, secs);
        let annotation = buf.len();
        buf.extend_from_slice(&data);
        let (w, f) = write_file(aof, &buf);
        (w, f, annotation)
    } else {
        let (w, f) = write_file(aof, &data);
        (w, f, 0)
    };
    let expected = data.len() + annotation;
    drop(data);
    // Latency monitor events as Redis names them: the write's class, then `aof-write`.
    let threshold = ex.config.latency_monitor_threshold;
    if threshold > 0 {
        let ms = write_start.elapsed().as_millis() as u64;
        let class = if aof.rewrite.is_some() || ex.persist.busy() {
            "aof-write-active-child"
        } else if aof.fsync_thread.as_ref().is_some_and(|t| !t.is_finished()) {
            "aof-write-pending-fsync"
        } else {
            "aof-write-alone"
        };
        ex.latency.add_if_needed(threshold, class, ms);
        ex.latency.add_if_needed(threshold, "aof-write", ms);
    }
    if let Some(e) = failure {
        let log = aof
            .last_error_log
            .is_none_or(|t| t.elapsed() >= WRITE_ERROR_LOG_EVERY);
        if log {
            aof.last_error_log = Some(Instant::now());
        }
        let errno = if written == 0 {
            if log {
                crate::log::warning(&format!("Error writing to the AOF file: {}", io_text(&e)));
            }
            e.raw_os_error().unwrap_or(libc::EIO)
        } else {
            if log {
                crate::log::warning(&format!(
                    "Short write while writing to the AOF file: (nwritten={written}, expected={expected})"
                ));
            }
            let cut = aof
                .file
                .set_len(aof.incr_size)
                .and_then(|()| aof.file.seek(SeekFrom::Start(aof.incr_size)).map(|_| ()));
            match cut {
                Ok(()) => {
                    if let Some(r) = aof.space_left.as_mut() {
                        *r += written as u64;
                    }
                    written = 0;
                }
                Err(te) => {
                    if log {
                        crate::log::warning(&format!("Could not remove short write from the append-only file.  Cinnabar may refuse to load the AOF the next time it starts.  ftruncate: {}", io_text(&te)));
                    }
                }
            }
            // A short write means the disk is full, whatever stopped the last call.
            libc::ENOSPC
        };
        if aof.fsync == Fsync::Always {
            // The turn's replies (writes and reads) are built and its changes cannot
            // be rolled back: with the promise that every acknowledged or observed
            // write is on disk, the only way out is to exit.
            crate::log::warning(
                "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...",
            );
            std::process::exit(1);
        }
        aof.last_write_errno = errno;
        if written > 0 {
            // The truncation failed: what reached the file stays, the rest is retried.
            aof.incr_size += written as u64;
            // A torn annotation is harmless: the retry starts with a whole one, and
            // loaders skip an annotation line up to its newline.
            if annotated && written >= annotation {
                aof.annotated_secs = secs;
            }
            let raw = ex.stream.raw_len_of_aof(written.saturating_sub(annotation));
            ex.stream.consume_front(raw);
            aof.written_pos = ex.stream.position() - ex.stream.buf.len() as u64;
            aof.unsynced = true;
        }
        return;
    }
    if aof.last_write_errno != 0 {
        crate::log::notice("AOF write error looks solved, Cinnabar can write again.");
        aof.last_write_errno = 0;
    }
    aof.incr_size += written as u64;
    if annotated {
        aof.annotated_secs = secs;
    }
    ex.stream.clear();
    aof.written_pos = ex.stream.position();
    aof.unsynced = true;
    if aof.fsync == Fsync::Always {
        sync_always(ex);
    }
}

/// `appendfsync always`: everything written is synced before replies go out; a
/// failed sync is fatal (the turn's writes may already be observed).
fn sync_always(ex: &mut Executor) {
    let Some(aof) = ex.aof.as_mut() else { return };
    let sync_start = Instant::now();
    let synced = aof.file.sync_data();
    let ms = sync_start.elapsed().as_millis() as u64;
    let threshold = ex.config.latency_monitor_threshold;
    ex.latency.add_if_needed(threshold, "aof-fsync-always", ms);
    if let Err(e) = synced {
        crate::log::warning(&format!(
            "Can't persist AOF for fsync error when the AOF fsync policy is 'always': {}. Exiting...",
            io_text(&e)
        ));
        std::process::exit(1);
    }
    aof.unsynced = false;
    aof.last_fsync = Instant::now();
    aof.fsynced_pos = aof.written_pos;
    crate::commands::waitaof::fsync_progress(ex);
}

/// An I/O error in strerror's words.
fn io_text(e: &std::io::Error) -> String {
    e.raw_os_error().map_or_else(|| e.to_string(), errno_text)
}

/// Syncs `f` on a background thread covering everything written so far
/// (`sync_target`), after the fsync already in flight, if any: files are synced in
/// the order they were written, as Redis's single bio fsync queue does. A failure
/// is recorded in `fsync_errno` (the disk-error state), not returned.
fn spawn_fsync(aof: &mut Aof, f: File) {
    aof.sync_target = aof.written_pos;
    let status = aof.fsync_errno.clone();
    let fail_with = aof.fsync_fail_with;
    let sleep = aof.fsync_sleep;
    let before = aof.fsync_thread.take();
    aof.fsync_thread = std::thread::Builder::new()
        .name("cinnabar-aof-fsync".into())
        .spawn(move || {
            crate::affinity::pin_current(crate::affinity::ThreadRole::Bio);
            if let Some(t) = before {
                let _ = t.join();
            }
            std::thread::sleep(sleep);
            let synced = match fail_with {
                0 => f.sync_data(),
                e => Err(std::io::Error::from_raw_os_error(e)),
            };
            match synced {
                // As Redis's bio: EBADF/EINVAL mean the file cannot be synced at all
                // (not a disk error).
                Err(e) if !matches!(e.raw_os_error(), Some(libc::EBADF) | Some(libc::EINVAL)) => {
                    let code = e.raw_os_error().unwrap_or(libc::EIO);
                    if status.swap(code, Ordering::Relaxed) == 0 {
                        crate::log::warning(&format!(
                            "Fail to fsync the AOF file: {}",
                            io_text(&e)
                        ));
                    }
                }
                Err(_) => {}
                Ok(()) => status.store(0, Ordering::Relaxed),
            }
        })
        .ok();
}

/// Timer work: the `everysec` fsync, finishing a rewrite, automatic rewrites.
pub fn cron(ex: &mut Executor) {
    flush_turn(ex);
    if ex.aof.is_none() && ex.persist.off_rewrite_scheduled && !ex.persist.busy() {
        ex.persist.off_rewrite_scheduled = false;
        if let Err(e) = start_rewrite_off(ex) {
            crate::log::warning(&format!(
                "Can't rewrite append only file in background: {e}"
            ));
        }
    }
    let Some(aof) = ex.aof.as_mut() else { return };
    // The everysec fsync in flight finished: what it covered is on disk, unless it
    // failed (then the next second tries again).
    if aof.fsynced_pos < aof.sync_target
        && aof.fsync_thread.as_ref().is_none_or(|t| t.is_finished())
    {
        if aof.fsync_errno.load(Ordering::Relaxed) == 0 {
            aof.fsynced_pos = aof.sync_target;
            crate::commands::waitaof::fsync_progress(ex);
        } else {
            aof.unsynced = true;
        }
    }
    let Some(aof) = ex.aof.as_mut() else { return };
    if aof.fsync == Fsync::EverySec
        && aof.unsynced
        && aof.last_fsync.elapsed().as_millis() >= 1000
        && aof.fsync_thread.as_ref().is_none_or(|t| t.is_finished())
    {
        if let Ok(f) = aof.file.try_clone() {
            aof.unsynced = false;
            aof.last_fsync = Instant::now();
            spawn_fsync(aof, f);
        }
    }
    let Some(aof) = ex.aof.as_mut() else { return };
    if aof.rewrite.is_none() && !ex.persist.busy() && aof.last_write_errno == 0 {
        let pct = ex.config.auto_aof_rewrite_percentage;
        let min = ex.config.auto_aof_rewrite_min_size;
        let base = aof.base_size.max(1);
        let auto = pct > 0 && aof.incr_size >= min && aof.incr_size * 100 / base >= pct;
        if aof.rewrite_scheduled || auto {
            aof.rewrite_scheduled = false;
            if auto {
                crate::log::notice("Starting automatic rewriting of AOF");
            }
            let _ = start_rewrite(ex);
        }
    }
}

pub fn rewrite_in_progress(ex: &Executor) -> bool {
    ex.aof.as_ref().is_some_and(|a| a.rewrite.is_some())
}

/// BGREWRITEAOF: new incremental file now, new base written by the incremental
/// snapshot. Right after `CONFIG SET appendonly yes` (`wait_rewrite`) there is no
/// valid history to extend: new commands go to the temp incremental file, truncated
/// at the image's instant, and nothing is published until the base is on disk.
pub fn start_rewrite(ex: &mut Executor) -> Result<(), String> {
    flush(ex);
    if ex.persist.busy() {
        return Err("a snapshot is already in progress".into());
    }
    let errno = ex.aof.as_ref().map_or(0, |a| a.last_write_errno);
    if errno != 0 {
        // Commands the image will hold are still buffered: written to the new
        // incremental file later, they would be applied twice on load.
        return Err(format!(
            "Error writing to the AOF file: {}",
            errno_text(errno)
        ));
    }
    let preamble = rdb_preamble(ex);
    let Some(aof) = ex.aof.as_mut() else {
        return Err("AOF is off".into());
    };
    let (base, new_incr) = aof.manifest.next_parts(&aof.prefix, preamble);
    let old = aof.manifest.parts();
    let temp_incr = if aof.wait_rewrite {
        let temp = temp_incr_path(&aof.dir, &aof.prefix);
        aof.file = File::create(&temp).map_err(|e| e.to_string())?;
        ex.stream.enabled = true;
        Some(temp)
    } else {
        let new_file = open_append(&aof.dir.join(&new_incr.name)).map_err(|e| e.to_string())?;
        let mut m = aof.manifest.clone();
        m.incrs.push(new_incr.clone());
        publish_manifest(&aof.dir, &aof.prefix, &m).map_err(|e| e.to_string())?;
        aof.manifest = m;
        let old_file = std::mem::replace(&mut aof.file, new_file);
        // The old incremental file's tail is synced in the background, before any
        // sync of the new one (Redis's bio close job): an fsync under write load
        // takes tens of milliseconds. Under `always` every write is synced already.
        if aof.fsynced_pos < aof.written_pos {
            aof.unsynced = false;
            spawn_fsync(aof, old_file);
        }
        None
    };
    aof.incr_size = 0;
    ex.stream.reset_db();
    let path = aof.dir.join(&base.name);
    aof.rewrite = Some(Rewrite {
        base,
        old,
        new_incr,
        temp_incr,
    });
    if let Err(e) = super::snapshot::begin_snapshot(ex, Purpose::AofRewrite, &path) {
        // The new incremental file stays in the manifest, after the old history:
        // nothing is lost, the next rewrite folds it in. (Turned on at runtime: the
        // rewrite is retried, as Redis does.)
        if let Some(aof) = ex.aof.as_mut() {
            aof.rewrite = None;
            aof.last_rewrite_ok = false;
            aof.rewrite_scheduled |= aof.wait_rewrite;
        }
        return Err(e.to_string());
    }
    crate::log::notice("Background append only file rewriting started");
    Ok(())
}

/// A rewrite started while the AOF is off: the new base and the files it replaces.
pub struct OffRewrite {
    dir: PathBuf,
    prefix: String,
    base: Part,
    old: Vec<Part>,
}

/// BGREWRITEAOF with `appendonly no`, as Redis 7 allows: a new base file of the
/// dataset and a manifest naming only it (no incremental file, nothing is logged),
/// so DEBUG LOADAOF and a later `appendonly yes` start from it.
pub fn start_rewrite_off(ex: &mut Executor) -> Result<(), String> {
    if ex.persist.busy() {
        return Err("a snapshot is already in progress".into());
    }
    let dir = PathBuf::from(&ex.config.appenddirname);
    let prefix = ex.config.appendfilename.clone();
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let m = match std::fs::read_to_string(dir.join(format!("{prefix}.manifest"))) {
        Ok(text) => Manifest::parse(&text)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Manifest::default(),
        Err(e) => return Err(e.to_string()),
    };
    let (base, _) = m.next_parts(&prefix, rdb_preamble(ex));
    let path = dir.join(&base.name);
    ex.persist.off_rewrite = Some(OffRewrite {
        dir,
        prefix,
        base,
        old: m.parts(),
    });
    if let Err(e) = super::snapshot::begin_snapshot(ex, Purpose::AofRewrite, &path) {
        ex.persist.off_rewrite = None;
        return Err(e.to_string());
    }
    crate::log::notice("Background append only file rewriting started");
    Ok(())
}

/// Publishes a rewrite made while the AOF is off.
fn off_rewrite_finished(ex: &mut Executor, result: Result<u64, String>) {
    let Some(rw) = ex.persist.off_rewrite.take() else {
        return;
    };
    let published = result.and_then(|_| {
        let m = Manifest {
            base: Some(rw.base.clone()),
            incrs: Vec::new(),
        };
        publish_manifest(&rw.dir, &rw.prefix, &m).map_err(|e| e.to_string())
    });
    match published {
        Ok(()) => {
            for p in rw.old.iter().filter(|p| p.name != rw.base.name) {
                unlink_in_background(ex, &rw.dir.join(&p.name));
            }
            ex.persist.off_rewrites += 1;
            crate::log::notice("Background AOF rewrite finished successfully");
        }
        Err(e) => {
            let _ = std::fs::remove_file(rw.dir.join(&rw.base.name));
            crate::log::warning(&format!("Background AOF rewrite failed: {e}"));
        }
    }
}

/// Removes a file's name now and frees its blocks on the lazy-free thread (Redis's
/// bg_unlink): unlinking a file of hundreds of megabytes, whose blocks the
/// filesystem frees on the spot, held the event loop for 70 ms.
fn unlink_in_background(ex: &mut Executor, path: &Path) {
    let open = File::open(path);
    if std::fs::remove_file(path).is_ok() {
        if let Ok(f) = open {
            // The last descriptor's close frees the blocks.
            ex.ks.lazyfree.free_other(Box::new(f), 0);
        }
    }
}

/// Publishes a rewrite whose base snapshot ended (`Ok(size)` when it is on disk).
pub fn rewrite_finished(ex: &mut Executor, result: Result<u64, String>) {
    if ex.persist.off_rewrite.is_some() {
        off_rewrite_finished(ex, result);
        return;
    }
    let Some(aof) = ex.aof.as_mut() else { return };
    let Some(rw) = aof.rewrite.take() else { return };
    match result {
        Ok(size) => {
            aof.base_size = size;
            if let Some(temp) = &rw.temp_incr {
                if let Err(e) = std::fs::rename(temp, aof.dir.join(&rw.new_incr.name)) {
                    aof.last_rewrite_ok = false;
                    aof.rewrite_scheduled = true;
                    let _ = std::fs::remove_file(aof.dir.join(&rw.base.name));
                    crate::log::warning(&format!("Can't name the new AOF incremental file: {e}"));
                    return;
                }
            }
            let m = Manifest {
                base: Some(rw.base),
                incrs: vec![rw.new_incr],
            };
            match publish_manifest(&aof.dir, &aof.prefix, &m) {
                Ok(()) => {
                    let old: Vec<PathBuf> = rw.old.iter().map(|p| aof.dir.join(&p.name)).collect();
                    aof.manifest = m;
                    aof.wait_rewrite = false;
                    aof.last_rewrite_ok = true;
                    aof.rewrites += 1;
                    crate::log::notice("Background AOF rewrite finished successfully");
                    for path in old {
                        unlink_in_background(ex, &path);
                    }
                    crate::commands::waitaof::fsync_progress(ex);
                }
                Err(e) => {
                    aof.last_rewrite_ok = false;
                    crate::log::warning(&format!("Can't publish the rewritten AOF manifest: {e}"));
                }
            }
        }
        Err(e) => {
            aof.last_rewrite_ok = false;
            // AOF turned on at runtime has no valid history until a rewrite succeeds:
            // Redis retries it, so do we.
            aof.rewrite_scheduled |= aof.wait_rewrite;
            crate::log::warning(&format!("Background AOF rewrite failed: {e}"));
        }
    }
}

/// Whether a rewrite writes its base as an RDB image (`aof-use-rdb-preamble yes`,
/// the default) rather than as RESP commands.
pub fn rdb_preamble(ex: &Executor) -> bool {
    ex.config.stored_bool("aof-use-rdb-preamble")
}

/// Shutdown: everything written and synced.
/// The caller has ended any rewrite in progress (snapshot::prepare_shutdown).
pub fn shutdown(ex: &mut Executor) {
    flush(ex);
    // Turned on at runtime and its first base never got written: write it now,
    // synchronously, rather than exit with no valid AOF (Redis refuses to exit).
    if ex.aof.as_ref().is_some_and(|a| a.wait_rewrite) {
        if let Err(e) = write_initial_sync(ex) {
            crate::log::warning(&format!("Writing initial AOF failed: {e}"));
        }
    }
    if let Some(aof) = ex.aof.as_mut() {
        if let Err(e) = aof.file.sync_all() {
            crate::log::warning(&format!("Error syncing the AOF at shutdown: {e}"));
        }
    }
}

/// The whole dataset as the base of a fresh AOF, on the spot, with an empty
/// incremental file; the stale files are deleted once the manifest is published.
fn write_initial_sync(ex: &mut Executor) -> Result<(), String> {
    let preamble = rdb_preamble(ex);
    let Some(aof) = ex.aof.as_ref() else {
        return Ok(());
    };
    let (base, incr) = aof.manifest.next_parts(&aof.prefix, preamble);
    let path = aof.dir.join(&base.name);
    let base_size =
        super::snapshot::write_base_file(ex, &path, preamble).map_err(|e| e.to_string())?;
    let Some(aof) = ex.aof.as_mut() else {
        return Ok(());
    };
    aof.file = File::create(aof.dir.join(&incr.name)).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(temp_incr_path(&aof.dir, &aof.prefix));
    let old = aof.manifest.parts();
    let m = Manifest {
        base: Some(base),
        incrs: vec![incr],
    };
    publish_manifest(&aof.dir, &aof.prefix, &m).map_err(|e| e.to_string())?;
    for p in &old {
        let _ = std::fs::remove_file(aof.dir.join(&p.name));
    }
    aof.manifest = m;
    aof.wait_rewrite = false;
    aof.base_size = base_size;
    aof.incr_size = 0;
    Ok(())
}

/// INFO persistence's AOF fields.
pub fn info_fields(ex: &Executor, s: &mut String) {
    match ex.aof.as_ref() {
        None => s.push_str(&format!(
            "aof_enabled:0\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_bgrewrite_status:ok\r\naof_rewrites:{}\r\naof_last_write_status:ok\r\n",
            ex.persist.off_rewrite.is_some() as u8,
            ex.persist.off_rewrite_scheduled as u8,
            ex.persist.off_rewrites,
        )),
        Some(a) => s.push_str(&format!(
            "aof_enabled:1\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_last_write_status:{}\r\naof_current_size:{}\r\naof_base_size:{}\r\naof_pending_rewrite:{}\r\naof_buffer_length:{}\r\naof_pending_bio_fsync:{}\r\naof_delayed_fsync:{}\r\n",
            a.rewrite.is_some() as u8,
            a.rewrite_scheduled as u8,
            if a.last_rewrite_ok { "ok" } else { "err" },
            a.rewrites,
            if write_error(ex).is_none() { "ok" } else { "err" },
            a.base_size + a.incr_size,
            a.base_size,
            a.rewrite_scheduled as u8,
            ex.stream.buf.len(),
            a.fsync_thread.as_ref().is_some_and(|t| !t.is_finished()) as u8,
            a.delayed_fsyncs,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip_and_redis_format() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.base.as_ref().unwrap().name, "appendonly.aof.1.base.rdb");
        assert_eq!(m.incrs.len(), 2);
        assert_eq!(m.render(), text);
        assert!(Manifest::parse("file x seq").is_err());
        assert!(Manifest::parse("file ../x seq 1 type i").is_err());
    }

    /// A base's negative sequence number is kept as written (it was clamped to 0,
    /// which a later start refused: `seq 0` reads as missing). Found by fuzzing.
    #[test]
    fn manifest_keeps_a_negative_base_seq() {
        let text = "file b.rdb seq -3 type b\nfile i.aof seq 1 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.base.as_ref().unwrap().seq, -3);
        assert_eq!(m.render(), text);
        assert_eq!(Manifest::parse(&m.render()).unwrap(), m);
    }

    #[test]
    fn manifest_errors_are_redis_s() {
        let reason = |text: &str| {
            Manifest::parse(text)
                .unwrap_err()
                .lines()
                .last()
                .unwrap()
                .to_string()
        };
        assert_eq!(reason(""), "Found an empty AOF manifest");
        assert_eq!(
            Manifest::parse("# a comment\n").unwrap(),
            Manifest::default()
        );
        assert_eq!(
            reason("file a seq 1 type b"),
            "The AOF manifest file contains too long line"
        );
        assert_eq!(
            reason(&format!("file {} seq 1 type b\n", "a".repeat(1100))),
            "The AOF manifest file contains too long line"
        );
        assert_eq!(
            reason("file a seq 1 type b\n\nfile c seq 3 type i\n"),
            "Invalid AOF manifest file format"
        );
        assert_eq!(
            reason("filx a seq 1 type b\n"),
            "Invalid AOF manifest file format"
        );
        assert_eq!(
            reason("file a type i\n"),
            "Invalid AOF manifest file format"
        );
        assert_eq!(
            reason("file a seq 1 type i newkey\n"),
            "Invalid AOF manifest file format"
        );
        assert_eq!(
            reason("file a seq x type i\n"),
            "Invalid AOF manifest file format"
        );
        assert_eq!(
            reason("file a seq 2 type i\nfile b seq 1 type i\n"),
            "Found a non-monotonic sequence number"
        );
        assert_eq!(
            reason("file a seq 1 type b\nfile b seq 2 type b\n"),
            "Found duplicate base file information"
        );
        assert_eq!(reason("file a seq 1 type x\n"), "Unknown AOF file type");
        assert_eq!(
            reason("file ../a seq 1 type i\n"),
            "File can't be a path, just a filename"
        );
        let e = Manifest::parse("file a seq 1 type b\nfilx b seq 1 type i\n").unwrap_err();
        assert!(
            e.contains("Reading the manifest file, at line 2\n>>> 'filx b seq 1 type i'\n"),
            "{e}"
        );
        // Quoted names (spaces) round-trip; unknown keys and history lines are skipped.
        let m = Manifest::parse("file \"a b.1.base.rdb\" seq 1 type b\nfile old seq 1 type h extra 1\nfile \"a b.1.incr.aof\" seq 1 type i\n").unwrap();
        assert_eq!(m.base.as_ref().unwrap().name, "a b.1.base.rdb");
        assert_eq!(Manifest::parse(&m.render()).unwrap(), m);
        assert!(m
            .render()
            .starts_with("file \"a b.1.base.rdb\" seq 1 type b\n"));
    }

    #[test]
    fn command_parser_distinguishes_torn_tails() {
        let full = b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n";
        match parse_command(full, 0) {
            Parsed::Cmd(a, n) => {
                assert_eq!(a, vec![b"DEL".to_vec(), b"k".to_vec()]);
                assert_eq!(n, full.len());
            }
            _ => panic!(),
        }
        for cut in 0..full.len() {
            assert!(
                matches!(parse_command(&full[..cut], 0), Parsed::Incomplete),
                "{cut}"
            );
        }
        assert!(matches!(parse_command(b"+OK\r\n", 0), Parsed::Bad(_)));
    }
}
