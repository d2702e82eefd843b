//! Process-level settings of redis.conf: the startup banner (`always-show-logo`),
//! `supervised` (systemd readiness over NOTIFY_SOCKET, upstart's SIGSTOP),
//! `disable-thp`, and `oom-score-adj` / `oom-score-adj-values` (written to
//! /proc/self/oom_score_adj), as Redis applies them.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;

use crate::config::Config;

/// The startup banner: shown with `always-show-logo yes`, or when logging to a terminal
/// (as Redis shows its logo); otherwise one `Running mode=…, port=….` line.
pub fn show_banner(config: &Config) {
    use std::io::IsTerminal;
    let show = config.stored_bool("always-show-logo")
        || (!config.stored_bool("syslog-enabled")
            && config.logfile.is_empty()
            && std::io::stdout().is_terminal());
    let mode = if config.stored_bool("cluster-enabled") {
        "cluster"
    } else {
        "standalone"
    };
    // With no plain port, the TLS one, as Redis shows.
    let port = match config.port {
        0 => crate::tls::port(config),
        p => p,
    };
    if !show {
        crate::log::notice(&format!("Running mode={mode}, port={port}."));
        return;
    }
    crate::log::raw(&format!(
        "\n      /\\        Cinnabar {} (Redis {} compatible) {} bit\n     /  \\\n    / /\\ \\      Running in {} mode\n    \\ \\/ /      Port: {}\n     \\  /       PID: {}\n      \\/\n\n",
        crate::VERSION,
        crate::commands::connection::REDIS_VERSION,
        usize::BITS,
        mode,
        port,
        std::process::id()
    ));
}

/// How the server is supervised, after `supervised auto` looked at the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supervisor {
    None,
    Systemd,
    Upstart,
}

pub fn supervisor(config: &Config) -> Supervisor {
    match config.stored_str("supervised").as_str() {
        "systemd" => Supervisor::Systemd,
        "upstart" => Supervisor::Upstart,
        "auto" if std::env::var_os("NOTIFY_SOCKET").is_some() => Supervisor::Systemd,
        "auto" if std::env::var_os("UPSTART_JOB").is_some() => Supervisor::Upstart,
        _ => Supervisor::None,
    }
}

/// Sends one sd_notify datagram to $NOTIFY_SOCKET (a path, or `@name` for Linux's
/// abstract namespace). Returns whether it was sent.
pub fn systemd_notify(message: &str) -> bool {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        crate::log::warning("systemd supervision requested or auto-detected, but NOTIFY_SOCKET environment variable is not set");
        return false;
    };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return false;
    };
    let path = path.to_string_lossy().into_owned();
    let sent = match path.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                .and_then(|addr| sock.send_to_addr(message.as_bytes(), &addr))
        }
        None => sock.send_to(message.as_bytes(), &path),
    };
    if let Err(e) = &sent {
        crate::log::warning(&format!("Can't send notification to systemd: {e}"));
    }
    sent.is_ok()
}

/// Tells the supervisor the server accepts connections.
pub fn notify_ready(config: &Config, replica: bool) {
    match supervisor(config) {
        Supervisor::Systemd => {
            crate::log::notice("Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit.");
            let status = if replica {
                "STATUS=Ready to accept connections in read-only mode. Waiting for MASTER <-> REPLICA sync\n"
            } else {
                "STATUS=Ready to accept connections\n"
            };
            systemd_notify(status);
            systemd_notify("READY=1\n");
        }
        Supervisor::Upstart => {
            crate::log::notice("Supervised by upstart, will stop to signal readiness.");
            // SAFETY: raise() only sends SIGSTOP to this process; upstart resumes it.
            unsafe { libc::raise(libc::SIGSTOP) };
            std::env::remove_var("UPSTART_JOB");
        }
        Supervisor::None => {}
    }
}

/// Tells systemd the server is stopping.
pub fn notify_stopping(config: &Config) {
    if supervisor(config) == Supervisor::Systemd {
        systemd_notify("STOPPING=1\n");
    }
}

/// `disable-thp yes`: transparent huge pages off for this process (their copy-on-write
/// cost hurts forked snapshots), as Redis does.
pub fn apply_disable_thp(config: &Config) {
    if config.stored_bool("disable-thp") {
        // SAFETY: prctl(PR_SET_THP_DISABLE) only changes a flag of this process.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    }
}

/// oom_score_adj before the server changed it (`i32::MIN`: not read yet).
static BASE_OOM_SCORE: AtomicI32 = AtomicI32::new(i32::MIN);
const OOM_SCORE_PATH: &str = "/proc/self/oom_score_adj";

/// Applies `oom-score-adj` for the server's role (`oom-score-adj-values` holds the
/// master, replica and background-child values): `absolute` writes the value,
/// `yes`/`relative` adds it to the score the process started with, `no` restores
/// that score once changed. An error names the failure, as CONFIG SET reports it.
pub fn apply_oom_score_adj(config: &Config, replica: bool) -> Result<(), String> {
    let mode = config.stored_str("oom-score-adj");
    let mut base = BASE_OOM_SCORE.load(Ordering::Relaxed);
    if base == i32::MIN {
        if mode == "no" {
            return Ok(());
        }
        base = std::fs::read_to_string(OOM_SCORE_PATH)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or("Unable to read oom_score_adj")?;
        BASE_OOM_SCORE.store(base, Ordering::Relaxed);
    }
    let values: Vec<i32> = config
        .stored_str("oom-score-adj-values")
        .split(' ')
        .filter_map(|v| v.parse().ok())
        .collect();
    let class_value = values.get(usize::from(replica)).copied().unwrap_or(0);
    if mode == "no" {
        // Back to the score from before, once.
        BASE_OOM_SCORE.store(i32::MIN, Ordering::Relaxed);
    }
    let value = match mode.as_str() {
        "no" => base,
        "absolute" => class_value,
        _ => (base + class_value).clamp(-1000, 1000),
    };
    std::fs::write(OOM_SCORE_PATH, value.to_string()).map_err(|e| {
        crate::log::warning(&format!("Unable to write oom_score_adj: {e}"));
        "Failed to set current oom_score_adj. Check server logs.".to_string()
    })
}

/// A SIGTERM or SIGINT arrived and its shutdown is neither done nor cancelled
/// (Redis's `shutdown_asap`, as the signal handler sees it).
static SHUTDOWN_MARK: AtomicBool = AtomicBool::new(false);
/// `temp-<pid>.rdb`, the final save's temp file in the working directory, which an
/// insisting SIGINT deletes.
static FINAL_SAVE_TEMP: OnceLock<std::ffi::CString> = OnceLock::new();

/// The name of the synchronous save's temp file (SAVE, the final save).
pub fn final_save_temp_name() -> String {
    format!("temp-{}.rdb", std::process::id())
}

/// Marks a shutdown as asked for in the signal handlers of SIGTERM and SIGINT (their
/// request itself goes through the event loop); a SIGINT that finds one already
/// asked for exits at once, as Redis's "You insist": the final save may be running
/// on the main thread, so this cannot wait for the loop.
pub fn install_signal_marks() -> std::io::Result<()> {
    let _ = FINAL_SAVE_TEMP.set(std::ffi::CString::new(final_save_temp_name()).unwrap_or_default());
    // SAFETY: the actions only touch an atomic, read a OnceLock filled before they are
    // installed, and call write(2), unlink(2) and _exit(2), all async-signal-safe;
    // nothing allocates or locks.
    unsafe {
        signal_hook::low_level::register(libc::SIGTERM, || {
            SHUTDOWN_MARK.store(true, Ordering::SeqCst);
        })?;
        signal_hook::low_level::register(libc::SIGINT, || {
            if SHUTDOWN_MARK.swap(true, Ordering::SeqCst) {
                crate::log::warning_from_handler("You insist... exiting now.");
                if let Some(temp) = FINAL_SAVE_TEMP.get() {
                    libc::unlink(temp.as_ptr());
                }
                libc::_exit(1);
            }
        })?;
    }
    Ok(())
}

/// The shutdown was cancelled (SHUTDOWN ABORT, a failed final save): a later SIGINT
/// asks again rather than insisting.
pub fn clear_shutdown_mark() {
    SHUTDOWN_MARK.store(false, Ordering::SeqCst);
}

// ----- Process title (`proc-title-template`) -------------------------------------

/// The memory `ps` reads the command line from (the original argv strings, extended
/// over the environment strings once those are copied elsewhere): start address and
/// length, and the original argv[0] (`{title}`).
struct TitleArea {
    start: usize,
    len: usize,
    argv0: String,
}

static TITLE_AREA: std::sync::Mutex<Option<TitleArea>> = std::sync::Mutex::new(None);

extern "C" {
    static mut environ: *mut *mut libc::c_char;
}

/// Fields 48..=51 of /proc/self/stat: arg_start, arg_end, env_start, env_end.
fn argv_env_bounds() -> Option<[usize; 4]> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (in parentheses, which may hold spaces) start at 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
    Some([field(48)?, field(49)?, field(50)?, field(51)?])
}

/// Takes over the command-line memory so the title can be rewritten (as Redis's
/// setproctitle init): the environment strings that follow the argv strings are
/// copied to the heap and `environ` repointed to the copies, so the title may use
/// both areas. Called first thing in `main`, before any thread exists and before
/// anything keeps a pointer into either area (`std::env::args` must not be called
/// after the title is set: it would read the title).
pub fn init_title_area(argv0: &str) {
    let Some([arg_start, arg_end, env_start, env_end]) = argv_env_bounds() else {
        return;
    };
    if arg_start == 0 || arg_end <= arg_start || !holds_our_arguments(arg_start, arg_end) {
        return;
    }
    let mut end = arg_end;
    if env_start == arg_end && env_end > env_start && move_environment(env_start, env_end) {
        end = env_end;
    }
    *TITLE_AREA.lock().unwrap_or_else(|e| e.into_inner()) = Some(TitleArea {
        start: arg_start,
        len: end - arg_start,
        argv0: argv0.to_string(),
    });
}

/// Whether the kernel's command-line area holds this program's arguments. Under a
/// loader that builds the program's argv elsewhere (valgrind), it holds the loader's
/// own, which must not be overwritten: the title is then left alone.
fn holds_our_arguments(arg_start: usize, arg_end: usize) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let mut ours = Vec::new();
    for a in std::env::args_os() {
        ours.extend_from_slice(a.as_bytes());
        ours.push(0);
    }
    // SAFETY: the kernel reports [arg_start, arg_end) as this process's command-line
    // strings, mapped (on the initial stack) for the life of the process; nothing
    // writes them before the title is set, which happens after this check.
    let area = unsafe { std::slice::from_raw_parts(arg_start as *const u8, arg_end - arg_start) };
    area == ours.as_slice()
}

/// Copies every environment string to the heap and points `environ` at the copies.
/// Returns false (and changes nothing) unless every string lies in the area.
fn move_environment(env_start: usize, env_end: usize) -> bool {
    let mut copies: Vec<*mut libc::c_char> = Vec::new();
    // SAFETY: single-threaded startup; `environ` is libc's NULL-terminated array of
    // NUL-terminated strings, read up to its terminator. The copies and the new array
    // are leaked on purpose: `environ` refers to them for the rest of the process.
    unsafe {
        let mut p = environ;
        if p.is_null() {
            return false;
        }
        let mut entries = Vec::new();
        while !(*p).is_null() {
            let addr = *p as usize;
            if addr < env_start || addr >= env_end {
                return false;
            }
            entries.push(*p);
            p = p.add(1);
        }
        for e in entries {
            copies.push(std::ffi::CStr::from_ptr(e).to_owned().into_raw());
        }
        copies.push(std::ptr::null_mut());
        let array = Box::leak(copies.into_boxed_slice());
        environ = array.as_mut_ptr();
    }
    true
}

/// Checks a `proc-title-template` (Redis's validateProcTitleTemplate): it must
/// expand, with only known variables, to something not blank when `{title}` is empty.
pub fn valid_title_template(template: &str) -> bool {
    let fake = |name: &str| match name {
        "title" | "server-mode" | "unixsocket" => Some(String::new()),
        "listen-addr" | "config-file" | "port" | "tls-port" => Some("x".to_string()),
        _ => None,
    };
    expand_title(template, fake).is_some_and(|t| !t.is_empty())
}

/// Expands `{name}` variables (`{{` is a literal `{`), then trims spaces; None when
/// the template is malformed or names an unknown variable (Redis's sdstemplate).
pub fn expand_title(template: &str, var: impl Fn(&str) -> Option<String>) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return None;
        }
        if let Some(tail) = after.strip_prefix('{') {
            out.push('{');
            rest = tail;
            continue;
        }
        let close = after.find('}')?;
        out.push_str(&var(&after[..close])?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out.trim_matches(' ').to_string())
}

/// Sets the process title from `proc-title-template` (startup with
/// `set-proc-title yes`, and CONFIG SET of the template), as `ps` shows it.
pub fn set_proc_title(config: &Config) {
    let guard = TITLE_AREA.lock().unwrap_or_else(|e| e.into_inner());
    let Some(area) = guard.as_ref() else {
        return;
    };
    let port = config.port;
    let unixsocket = config.stored_str("unixsocket");
    let var = |name: &str| {
        Some(match name {
            "title" => area.argv0.clone(),
            "listen-addr" if port != 0 => format!(
                "{}:{port}",
                config.bind.first().map(String::as_str).unwrap_or("*")
            ),
            "listen-addr" => format!("unixsocket:{unixsocket}"),
            "server-mode" if config.stored_bool("cluster-enabled") => "[cluster]".into(),
            "server-mode" => String::new(),
            "config-file" => config
                .config_file
                .as_ref()
                .map_or("-".into(), |p| p.display().to_string()),
            "port" => port.to_string(),
            "tls-port" => config.stored_str("tls-port"),
            "unixsocket" => unixsocket.clone(),
            _ => return None,
        })
    };
    let Some(title) = expand_title(&config.stored_str("proc-title-template"), var) else {
        return;
    };
    // The last byte stays NUL: the kernel then shows the area up to its first NUL.
    let n = title.len().min(area.len.saturating_sub(1));
    // SAFETY: [start, start + len) is this process's own command-line memory, found in
    // /proc/self/stat at startup; nothing reads it but the kernel (for `ps`) since
    // `init_title_area` moved the environment out, and the lock serializes writers.
    unsafe {
        let dst = area.start as *mut u8;
        std::ptr::copy_nonoverlapping(title.as_ptr(), dst, n);
        std::ptr::write_bytes(dst.add(n), 0, area.len - n);
    }
}
