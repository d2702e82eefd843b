//! Redis-style log lines: `pid:M 22 Nov 2026 11:43:00.123 * message`, to stdout or the
//! configured `logfile`, filtered by `loglevel`; with `syslog-enabled yes` each message
//! also goes to syslog (`syslog-ident`, `syslog-facility`), as Redis sends it.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};
use std::sync::Mutex;

static LEVEL: AtomicU8 = AtomicU8::new(2);
/// The role letter of log lines: `M` master, `S` replica (as Redis's `pid:S`).
static ROLE: AtomicU8 = AtomicU8::new(b'M');
static FILE: Mutex<Option<std::fs::File>> = Mutex::new(None);
static SYSLOG: AtomicBool = AtomicBool::new(false);
/// Set in a forked child: lines go out with write(2) alone, since another thread of the
/// parent may have held the file's or stdout's lock at the fork.
static FORKED: AtomicBool = AtomicBool::new(false);
/// The log's file descriptor (1, stdout, when no `logfile`), for writers that cannot
/// take the lock or allocate: signal handlers.
static RAW_FD: AtomicI32 = AtomicI32::new(1);

const DEBUG: u8 = 0;
const VERBOSE: u8 = 1;
const NOTICE: u8 = 2;
const WARNING: u8 = 3;

/// Applies `loglevel` and `logfile`.
pub fn configure(level: &str, file: &str) -> std::io::Result<()> {
    LEVEL.store(
        match level {
            "debug" => DEBUG,
            "verbose" => VERBOSE,
            "notice" => NOTICE,
            "warning" => WARNING,
            _ => u8::MAX,
        },
        Ordering::Relaxed,
    );
    let f = if file.is_empty() {
        None
    } else {
        Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)?,
        )
    };
    let mut slot = FILE.lock().unwrap_or_else(|e| e.into_inner());
    RAW_FD.store(f.as_ref().map_or(1, |f| f.as_raw_fd()), Ordering::SeqCst);
    *slot = f;
    Ok(())
}

/// Opens syslog with `ident` and `facility` (`user`, `local0`..`local7`); later lines
/// are also sent there.
pub fn open_syslog(ident: &str, facility: &str) {
    let facility = match facility {
        "user" => libc::LOG_USER,
        "local1" => libc::LOG_LOCAL1,
        "local2" => libc::LOG_LOCAL2,
        "local3" => libc::LOG_LOCAL3,
        "local4" => libc::LOG_LOCAL4,
        "local5" => libc::LOG_LOCAL5,
        "local6" => libc::LOG_LOCAL6,
        "local7" => libc::LOG_LOCAL7,
        _ => libc::LOG_LOCAL0,
    };
    // openlog() keeps the ident pointer: the string lives for the rest of the process.
    let ident: &'static std::ffi::CStr = Box::leak(
        std::ffi::CString::new(ident.replace('\0', ""))
            .unwrap_or_default()
            .into_boxed_c_str(),
    );
    // SAFETY: `ident` is a NUL-terminated string that is never freed; the flags and
    // facility are libc's constants.
    unsafe {
        libc::openlog(
            ident.as_ptr(),
            libc::LOG_PID | libc::LOG_NDELAY | libc::LOG_NOWAIT,
            facility,
        )
    };
    SYSLOG.store(true, Ordering::Relaxed);
}

/// Sets the role letter of later lines (replication: REPLICAOF host port / NO ONE).
/// Panics go to the log with where they happened and a backtrace, so one that a command
/// survives (the executor turns it into an error reply) still leaves a trace.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let bt = std::backtrace::Backtrace::force_capture();
        warning(&format!("Internal error (panic): {info}\n{bt}"));
    }));
}

/// A forked child (a debugging session) logs from now on as Redis's children do
/// (`pid:C`), without taking locks.
pub fn after_fork() {
    FORKED.store(true, Ordering::SeqCst);
    ROLE.store(b'C', Ordering::Relaxed);
}

pub fn set_role(replica: bool) {
    ROLE.store(if replica { b'S' } else { b'M' }, Ordering::Relaxed);
}

pub fn debug(msg: &str) {
    write(DEBUG, msg)
}

pub fn verbose(msg: &str) {
    write(VERBOSE, msg)
}

pub fn notice(msg: &str) {
    write(NOTICE, msg)
}

pub fn warning(msg: &str) {
    write(WARNING, msg)
}

/// Writes `text` as is (no pid, time or level mark), at notice level: the startup banner.
pub fn raw(text: &str) {
    if NOTICE < LEVEL.load(Ordering::Relaxed) {
        return;
    }
    let mut file = FILE.lock().unwrap_or_else(|e| e.into_inner());
    match file.as_mut() {
        Some(f) => {
            let _ = f.write_all(text.as_bytes());
        }
        None => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
        }
    }
}

fn write(level: u8, msg: &str) {
    if level < LEVEL.load(Ordering::Relaxed) {
        return;
    }
    let mut line = String::with_capacity(msg.len() + 48);
    write_prefix(&mut line, ['.', '-', '*', '#'][level as usize]);
    line.push_str(msg);
    line.push('\n');
    if SYSLOG.load(Ordering::Relaxed) {
        let priority = [
            libc::LOG_DEBUG,
            libc::LOG_INFO,
            libc::LOG_NOTICE,
            libc::LOG_WARNING,
        ][level as usize];
        if let Ok(text) = std::ffi::CString::new(msg.replace('\0', "")) {
            // SAFETY: a constant "%s" format with one NUL-terminated string argument.
            unsafe { libc::syslog(priority, c"%s".as_ptr(), text.as_ptr()) };
        }
    }
    if FORKED.load(Ordering::Relaxed) {
        write_raw_fd(line.as_bytes());
        return;
    }
    let mut file = FILE.lock().unwrap_or_else(|e| e.into_inner());
    match file.as_mut() {
        Some(f) => {
            let _ = f.write_all(line.as_bytes());
        }
        None => {
            let _ = std::io::stdout().lock().write_all(line.as_bytes());
        }
    }
}

/// A line of at most 512 bytes built on the stack: formatting into it never allocates.
pub struct StackLine {
    buf: [u8; 512],
    len: usize,
}

impl StackLine {
    pub const fn new() -> StackLine {
        StackLine {
            buf: [0; 512],
            len: 0,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Default for StackLine {
    fn default() -> Self {
        StackLine::new()
    }
}

impl std::fmt::Write for StackLine {
    /// Appends what fits; the rest is cut.
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Writes `bytes` to the log's descriptor with write(2) only: no lock, no
/// allocation, so a signal handler may call it.
pub fn write_raw_fd(bytes: &[u8]) {
    let fd = RAW_FD.load(Ordering::SeqCst);
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: `rest` is a valid, initialized slice for its whole length; the
        // descriptor is the log file kept open in `FILE` (or stdout). write(2) is
        // async-signal-safe.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// A warning line from a signal handler (Redis's serverLogRawFromHandler):
/// `pid:signal-handler (unix time) message`, built without allocating.
pub fn warning_from_handler(msg: &str) {
    use std::fmt::Write as _;
    let mut line = StackLine::new();
    // SAFETY: getpid() and time() have no preconditions and are async-signal-safe.
    let (pid, now) = unsafe { (libc::getpid(), libc::time(std::ptr::null_mut())) };
    let _ = writeln!(line, "{pid}:signal-handler ({now}) {msg}");
    write_raw_fd(line.as_bytes());
}

/// `pid:role date time mark ` — the start of every line — written without
/// allocating (signal handlers use it too).
pub fn write_prefix(out: &mut impl std::fmt::Write, mark: char) {
    // SAFETY: getpid() has no preconditions and is async-signal-safe.
    let pid = unsafe { libc::getpid() };
    let _ = write!(out, "{pid}:{} ", ROLE.load(Ordering::Relaxed) as char);
    write_timestamp(out, crate::keyspace::unix_ms());
    let _ = write!(out, " {mark} ");
}

/// The log's file descriptor (1 when logging to stdout).
pub fn raw_fd() -> i32 {
    RAW_FD.load(Ordering::SeqCst)
}

/// `22 Nov 2026 11:43:00.123` (UTC) for a unix time in ms.
pub fn timestamp(ms: i64) -> String {
    let mut s = String::with_capacity(24);
    write_timestamp(&mut s, ms);
    s
}

/// `timestamp`, written into `out`.
pub fn write_timestamp(out: &mut impl std::fmt::Write, ms: i64) {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86400);
    let sod = secs.rem_euclid(86400);
    // Days to civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
    let _ = write!(
        out,
        "{day:02} {} {year} {:02}:{:02}:{:02}.{:03}",
        MONTHS[(month - 1) as usize],
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        ms.rem_euclid(1000)
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_dates() {
        assert_eq!(super::timestamp(0), "01 Jan 1970 00:00:00.000");
        assert_eq!(
            super::timestamp(1_795_349_000_123),
            "22 Nov 2026 12:03:20.123"
        );
    }
}
