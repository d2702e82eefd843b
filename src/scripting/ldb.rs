//! The Lua debugger (Redis's LDB): `SCRIPT DEBUG YES|SYNC|NO` and the protocol that
//! `redis-cli --ldb` speaks.
//!
//! A client that asked for debugging has its next EVAL run as a debugging session. The
//! session talks to the client directly on its socket, from inside a Lua line hook, in
//! blocking I/O: the script stops, the debugger sends its log as an array of status
//! lines, reads one command (a RESP array), and either answers it or lets the script
//! run on. At the end it sends `<endsession>`, then the script's reply, and the client
//! is closed.
//!
//! * `SYNC` runs the session in the server process: everyone else waits, and what the
//!   script wrote stays.
//! * `YES` forks (as Redis): the child runs the session and exits, so the server goes
//!   on serving and nothing the script did reaches the dataset, the AOF or replicas.
//!   The parent hands the connection to the child and closes its own copy; the child
//!   closes every other socket it inherited, and logs without the log's lock (another
//!   thread may have held it at the fork). Children are reaped by the cron and killed
//!   at shutdown.
//!
//! The session state is one per process (a script runs at a time), kept in a
//! thread-local: the hook, `redis.call`'s logging and `redis.debug()` reach it there.
//! Borrows of it are short and never span a Lua call, since the debugger's `eval` and
//! `redis` commands run Lua code (and `redis.call`, which logs) from inside the hook.
//!
//! # Why the unsafe code is sound
//!
//! The hook and the two library functions are C functions on the raw Lua API, as
//! raw.rs. They raise (`lua_error`) only from their thin entries, after the Rust work
//! has returned and dropped everything it owned; the work itself runs with the VM's
//! memory limit lifted (`vm::Unlimited`), so no API call in it raises, except inside
//! `lua_pcall`, which catches. Each function checks stack room for what it pushes.
//! The VM pointer kept by the session is the VM the session's script runs on, which
//! outlives the session (`Session::vm` is cleared when it ends).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr};
use std::os::fd::RawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use mlua::ffi::{self, lua_Debug, lua_State};

use super::vm::{self, Vm};
use crate::protocol::Reply;
use crate::util::numeric::parse_i64;

/// How a client asked to debug its scripts (`SCRIPT DEBUG YES` / `SYNC`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A forked session: the dataset is not changed.
    Forked,
    /// A session in the server process, blocking it.
    Sync,
}

/// Breakpoints a session may hold (Redis's LDB_BREAKPOINTS_MAX).
const BREAKPOINTS_MAX: usize = 64;
/// Default trim length of logged replies and values.
const MAX_LEN_DEFAULT: usize = 256;
/// Table nesting shown before giving up (Redis's LUA_MINSTACK / 2).
const MAX_VALUE_DEPTH: usize = 10;
/// Unparsed debugger input beyond which the script is stopped.
const MAX_INPUT: usize = 1 << 20;
/// The longest a write of the debugger's log may wait (Redis's connSendTimeout).
const SEND_TIMEOUT_MS: c_int = 5000;
/// How long a script may run without stopping before the debugger stops it anyway,
/// when `busy-reply-threshold` is 0.
const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct State {
    active: bool,
    fd: RawFd,
    vm: Option<*const Vm>,
    /// The sandboxed globals' registry reference: `eval` compiles in them.
    env_ref: c_int,
    logs: Vec<Vec<u8>>,
    breakpoints: Vec<i32>,
    /// Stop at the next line whatever the breakpoints.
    step: bool,
    /// Stop at the next line because the script called `redis.breakpoint()`.
    luabp: bool,
    src: Vec<Vec<u8>>,
    current_line: i32,
    input: Vec<u8>,
    maxlen: usize,
    maxlen_hint_sent: bool,
    /// When the script last started running freely (for the time limit).
    running_since: Option<Instant>,
    time_limit: Duration,
}

thread_local! {
    static LDB: RefCell<State> = RefCell::new(State::default());
    /// Forked sessions not yet reaped.
    static CHILDREN: RefCell<Vec<libc::pid_t>> = const { RefCell::new(Vec::new()) };
}

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    LDB.with(|s| f(&mut s.borrow_mut()))
}

/// Whether a session runs and is stepping: `redis.call` then logs its commands and
/// replies (Redis's ldbIsEnabled).
pub fn enabled() -> bool {
    with(|s| s.active && s.step)
}

fn log(entry: Vec<u8>) {
    with(|s| s.logs.push(entry));
}

fn log_str(entry: &str) {
    log(entry.as_bytes().to_vec());
}

/// Logs `entry`, cut at `maxlen` with a one-time hint about `maxlen 0`.
fn log_trimmed(mut entry: Vec<u8>) {
    with(|s| {
        let trimmed = s.maxlen != 0 && entry.len() > s.maxlen;
        if trimmed {
            entry.truncate(s.maxlen);
            entry.extend_from_slice(b" ...");
        }
        s.logs.push(entry);
        if trimmed && !s.maxlen_hint_sent {
            s.maxlen_hint_sent = true;
            s.logs.push(
                b"<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.".to_vec(),
            );
        }
    });
}

/// `<redis> cmd arg ...` before a script's command runs (at most 10 arguments shown).
pub fn log_command(argv: &[&[u8]]) {
    let mut line = b"<redis>".to_vec();
    for (j, a) in argv.iter().enumerate() {
        if j == 10 {
            line.extend_from_slice(format!(" ... ({} more)", argv.len() - j - 1).as_bytes());
            break;
        }
        line.push(b' ');
        line.extend_from_slice(a);
    }
    log(line);
}

/// A script command's outcome. A refusal before it ran (or bad arguments) is logged
/// as Redis's scriptCall error text; an error the command replied is logged as that
/// error and as the reply; any other reply in its human form.
pub fn log_call_result(reply: &Reply, refused: bool, resp: u8) {
    if let Reply::Error(e) = reply {
        if refused {
            let msg = e
                .strip_prefix("ERR ")
                .map_or_else(|| format!("-{e}"), str::to_string);
            log(format!("<error> {msg}").into_bytes());
            return;
        }
        log(format!("<error> -{e}").into_bytes());
    }
    let mut wire = Vec::new();
    reply.encode(resp, &mut wire);
    let mut line = b"<reply> ".to_vec();
    human_reply(&wire, &mut line);
    log_trimmed(line);
}

/// Appends a RESP reply in the debugger's human form (Redis's
/// ldbRedisProtocolToHuman); returns the bytes consumed.
fn human_reply(wire: &[u8], out: &mut Vec<u8>) -> usize {
    let Some(&kind) = wire.first() else { return 0 };
    let line_end = memchr::memmem::find(wire, b"\r\n").unwrap_or(wire.len());
    let head = &wire[1..line_end];
    let after = (line_end + 2).min(wire.len());
    let count = || {
        std::str::from_utf8(head)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
    };
    let items = |out: &mut Vec<u8>, n: i64, pairs: bool| -> usize {
        let mut at = after;
        for j in 0..n.max(0) {
            at += human_reply(&wire[at..], out);
            if pairs {
                out.extend_from_slice(b" => ");
                at += human_reply(&wire[at..], out);
            }
            if j != n - 1 {
                out.push(b',');
            }
        }
        at
    };
    match kind {
        b':' => {
            out.extend_from_slice(head);
            after
        }
        b'$' | b'=' => match count() {
            Some(len) if len >= 0 => {
                let end = (after + len as usize).min(wire.len());
                repr(&wire[after..end], out);
                (end + 2).min(wire.len())
            }
            _ => {
                out.extend_from_slice(b"NULL");
                after
            }
        },
        b'+' | b'-' => {
            repr(&wire[..line_end], out);
            after
        }
        b'*' | b'>' => match count() {
            Some(n) if n >= 0 => {
                out.push(b'[');
                let at = items(out, n, false);
                out.push(b']');
                at
            }
            _ => {
                out.extend_from_slice(b"NULL");
                after
            }
        },
        b'~' => {
            out.extend_from_slice(b"~(");
            let at = items(out, count().unwrap_or(0), false);
            out.push(b')');
            at
        }
        b'%' => {
            out.push(b'{');
            let at = items(out, count().unwrap_or(0), true);
            out.push(b'}');
            at
        }
        b'|' => {
            // Attributes describe the reply that follows: shown as that reply.
            let mut skipped = Vec::new();
            let mut at = after;
            for _ in 0..count().unwrap_or(0).max(0) * 2 {
                at += human_reply(&wire[at..], &mut skipped);
            }
            at + human_reply(&wire[at..], out)
        }
        b'_' => {
            out.extend_from_slice(b"(null)");
            after
        }
        b'#' => {
            out.extend_from_slice(if head == b"t" { b"#true" } else { b"#false" });
            after
        }
        b',' => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(head);
            after
        }
        _ => {
            out.extend_from_slice(head);
            after
        }
    }
}

/// Redis's sdscatrepr: the bytes quoted, with C escapes and `\xHH` for the rest.
fn repr(b: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in b {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

// ---------------------------------------------------------------------------------
// Sessions

/// Starts a session for the client on `fd` running the EVAL script `body` on `vm`;
/// `end` must follow once the script has run.
pub fn begin(vm: &Vm, fd: RawFd, body: &[u8], busy_threshold_ms: i64) {
    let env_ref = {
        // SAFETY: `exec_raw` runs the closure in a protected call; it pushes the
        // sandboxed globals and takes a registry reference to them (popping them).
        let mut r = ffi::LUA_REFNIL;
        let globals = vm.globals.clone();
        let ok = unsafe {
            vm.lua
                .exec_raw::<()>(globals, |l| r = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX))
        };
        if ok.is_ok() {
            r
        } else {
            ffi::LUA_REFNIL
        }
    };
    let mut src = body;
    while let [rest @ .., b'\n' | b'\r'] = src {
        src = rest;
    }
    with(|s| {
        *s = State {
            active: true,
            fd,
            vm: Some(vm as *const Vm),
            env_ref,
            step: true,
            src: src.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect(),
            maxlen: MAX_LEN_DEFAULT,
            running_since: Some(Instant::now()),
            time_limit: if busy_threshold_ms > 0 {
                Duration::from_millis(busy_threshold_ms as u64)
            } else {
                DEFAULT_TIME_LIMIT
            },
            ..State::default()
        }
    });
    // SAFETY: the hook is a C function of the right signature; the mask and count are
    // Lua's constants. The watchdog's hook is put back by `end`.
    unsafe {
        ffi::lua_sethook(
            vm.state,
            Some(line_hook),
            ffi::LUA_MASKLINE | ffi::LUA_MASKCOUNT,
            super::busy::CHECK_EVERY as c_int,
        )
    };
}

/// Ends the session: the rest of the log and `<endsession>` go to the client, and the
/// VM gets its watchdog hook back.
pub fn end(vm: &Vm) {
    log_str("<endsession>");
    send_logs();
    let env_ref = with(|s| {
        let r = s.env_ref;
        *s = State::default();
        r
    });
    // SAFETY: `exec_raw` runs the closure in a protected call; luaL_unref takes the
    // reference made by `begin` and pushes nothing.
    let _ = unsafe {
        vm.lua
            .exec_raw::<()>((), |l| ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, env_ref))
    };
    let _ = super::busy::install(
        &vm.lua,
        &vm.watchdog,
        &vm.redis,
        mlua::HookTriggers::new().every_nth_instruction(super::busy::CHECK_EVERY),
    );
}

/// Sends the log to the client as an array of status lines (CR and LF become spaces),
/// emptying it. A failed write is left for the next read to notice.
fn send_logs() {
    let (fd, logs) = with(|s| (s.fd, std::mem::take(&mut s.logs)));
    let mut wire = format!("*{}\r\n", logs.len()).into_bytes();
    for mut entry in logs {
        for c in entry.iter_mut() {
            if *c == b'\r' || *c == b'\n' {
                *c = b' ';
            }
        }
        wire.push(b'+');
        wire.extend_from_slice(&entry);
        wire.extend_from_slice(b"\r\n");
    }
    write_all(fd, &wire);
}

/// Writes `bytes` to the (non-blocking) socket, waiting up to `SEND_TIMEOUT_MS` each
/// time it is full; gives up on an error or a timeout.
pub fn write_all(fd: RawFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a valid slice for its whole length.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n > 0 {
            bytes = &bytes[n as usize..];
            continue;
        }
        let err = std::io::Error::last_os_error();
        match err.kind() {
            std::io::ErrorKind::Interrupted => {}
            std::io::ErrorKind::WouldBlock if wait_for(fd, libc::POLLOUT, SEND_TIMEOUT_MS) => {}
            _ => return,
        }
    }
}

/// Waits until `fd` is ready for `events` (or has hung up); false on a timeout.
fn wait_for(fd: RawFd, events: libc::c_short, timeout_ms: c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if n >= 0 {
            return n > 0;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// Reads what the client sent into the session's input; false once it is gone.
fn read_input(fd: RawFd) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        // SAFETY: `buf` is a valid, writable buffer of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            with(|s| s.input.extend_from_slice(&buf[..n as usize]));
            return true;
        }
        if n == 0 {
            return false;
        }
        match std::io::Error::last_os_error().kind() {
            std::io::ErrorKind::Interrupted => {}
            std::io::ErrorKind::WouldBlock => {
                wait_for(fd, libc::POLLIN, -1);
            }
            _ => return false,
        }
    }
}

enum Parsed {
    Command(Vec<Vec<u8>>),
    NeedMore,
    ProtocolError,
}

/// One command of the debugger's input: `*<n>\r\n` then `n` bulk strings of 1 to 1024
/// bytes (Redis's ldbReplParseCommand, which is as strict).
fn parse_command(input: &[u8]) -> Parsed {
    if input.is_empty() {
        return Parsed::NeedMore;
    }
    let Some(star) = memchr::memchr(b'*', input) else {
        return Parsed::ProtocolError;
    };
    let mut p = star + 1;
    let line = |p: usize| -> Option<(i64, usize)> {
        let end = p + memchr::memmem::find(&input[p..], b"\r\n")?;
        Some((c_atoi(&input[p..end]), end + 2))
    };
    let Some((argc, next)) = line(p) else {
        return Parsed::NeedMore;
    };
    if argc <= 0 || argc > 1024 {
        return Parsed::ProtocolError;
    }
    p = next;
    let mut argv = Vec::with_capacity(argc as usize);
    while argv.len() < argc as usize {
        match input.get(p) {
            None => return Parsed::NeedMore,
            Some(b'$') => {}
            Some(_) => return Parsed::ProtocolError,
        }
        let Some((len, next)) = line(p + 1) else {
            return Parsed::NeedMore;
        };
        if len <= 0 || len > 1024 {
            return Parsed::ProtocolError;
        }
        let end = next + len as usize;
        if end + 2 > input.len() {
            return Parsed::NeedMore;
        }
        if &input[end..end + 2] != b"\r\n" {
            return Parsed::ProtocolError;
        }
        argv.push(input[next..end].to_vec());
        p = end + 2;
    }
    Parsed::Command(argv)
}

/// C's atoi: optional spaces and sign, then digits up to the first other byte.
fn c_atoi(b: &[u8]) -> i64 {
    let s = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let b = &b[s..];
    let (neg, b) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let mut n: i64 = 0;
    for &c in b.iter().take_while(|c| c.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add((c - b'0') as i64);
    }
    if neg {
        -n
    } else {
        n
    }
}

// ---------------------------------------------------------------------------------
// The hook

/// What the hook's work decided: return to the script, or raise an error.
type Raise = Option<&'static str>;

/// The line (and instruction-count) hook of a session: the thin C entry, raising
/// with no Rust value alive.
unsafe extern "C-unwind" fn line_hook(l: *mut lua_State, ar: *mut lua_Debug) {
    let raise = match catch_unwind(AssertUnwindSafe(|| hook_work(l, ar))) {
        Ok(r) => r,
        Err(_) => Some("ERR internal error in the Lua debugger"),
    };
    if let Some(msg) = raise {
        raise_error(l, msg);
    }
}

/// Pushes `{err = msg}` and raises it (Redis's luaPushError + luaError).
unsafe fn raise_error(l: *mut lua_State, msg: &'static str) -> ! {
    ffi::lua_createtable(l, 0, 1);
    ffi::lua_pushlstring_(l, b"err".as_ptr() as *const c_char, 3);
    ffi::lua_pushlstring_(l, msg.as_ptr() as *const c_char, msg.len());
    ffi::lua_rawset(l, -3);
    ffi::lua_error(l)
}

/// The session's VM, to lift its memory limit while the debugger works.
fn session_vm() -> Option<&'static Vm> {
    // SAFETY: the pointer is set by `begin` to the VM the session's script runs on and
    // cleared by `end`, which its caller calls once that script has run, before the VM
    // can be replaced (only SCRIPT FLUSH does that, and scripts cannot call it).
    with(|s| s.vm).map(|p| unsafe { &*p })
}

unsafe fn hook_work(l: *mut lua_State, ar: *mut lua_Debug) -> Raise {
    let vm = session_vm()?;
    let _unlimited = vm::Unlimited::new(&vm.lua);
    let event = (*ar).event;
    ffi::lua_getstack(l, 0, ar);
    ffi::lua_getinfo(l, c"Sl".as_ptr(), ar);
    let line = (*ar).currentline;
    // Events outside the script (the sandbox's own code, C functions) are not shown.
    if !short_src(&*ar).contains("user_script") {
        return None;
    }
    let (step, bp, luabp, running_since, limit) = with(|s| {
        s.current_line = line;
        (
            s.step,
            s.breakpoints.contains(&line) || s.luabp,
            s.luabp,
            s.running_since,
            s.time_limit,
        )
    });
    let mut timeout = false;
    if event == ffi::LUA_HOOKCOUNT && !step && !bp {
        if running_since.is_some_and(|t| t.elapsed() >= limit) {
            timeout = true;
        } else {
            return None;
        }
    }
    if !(step || bp || timeout) {
        return None;
    }
    let reason = if bp {
        if luabp {
            "redis.breakpoint() called"
        } else {
            "break point"
        }
    } else if timeout {
        "timeout reached, infinite loop?"
    } else {
        "step over"
    };
    with(|s| {
        s.step = false;
        s.luabp = false;
    });
    log(format!("* Stopped at {line}, stop reason = {reason}").into_bytes());
    log_source_line(line);
    send_logs();
    let outcome = repl(l, vm);
    with(|s| s.running_since = Some(Instant::now()));
    match outcome {
        Ok(()) => None,
        Err(Some(msg)) => Some(msg),
        // The client left: the script runs on without stopping, unless it was stopped
        // for running too long, which would block the server for good.
        Err(None) if timeout => {
            Some("ERR timeout during Lua debugging with client closing connection")
        }
        Err(None) => None,
    }
}

fn short_src(ar: &lua_Debug) -> std::borrow::Cow<'_, str> {
    // SAFETY: `short_src` is a NUL-terminated array filled by lua_getinfo.
    unsafe { CStr::from_ptr(ar.short_src.as_ptr()) }.to_string_lossy()
}

/// Reads and runs debugger commands until one lets the script go on: `Ok` to go on,
/// `Err(None)` when the client left, `Err(Some(e))` to stop the script with `e`.
unsafe fn repl(l: *mut lua_State, vm: &Vm) -> Result<(), Option<&'static str>> {
    loop {
        let argv = loop {
            match with(|s| parse_command(&s.input)) {
                Parsed::Command(argv) => break argv,
                Parsed::ProtocolError => return Err(Some("ERR protocol error")),
                Parsed::NeedMore => {}
            }
            let fd = with(|s| s.fd);
            if !read_input(fd) {
                with(|s| {
                    s.step = false;
                    s.breakpoints.clear();
                });
                return Err(None);
            }
            let overflow = with(|s| {
                let over = s.input.len() > MAX_INPUT;
                if over {
                    s.input = Vec::new();
                }
                over
            });
            if overflow {
                return Err(Some("ERR max client buffer reached"));
            }
        };
        // Whatever followed the command in the buffer is dropped, as Redis does.
        with(|s| s.input.clear());
        let name = argv[0].to_ascii_lowercase();
        let arg = |i: usize| argv.get(i).map(|a| a.as_slice());
        match name.as_slice() {
            b"h" | b"help" => {
                for line in HELP {
                    log_str(line);
                }
            }
            b"s" | b"step" | b"n" | b"next" => {
                with(|s| s.step = true);
                return Ok(());
            }
            b"c" | b"continue" => return Ok(()),
            b"t" | b"trace" => trace(l),
            b"m" | b"maxlen" => maxlen(arg(1)),
            b"b" | b"break" => breakpoints(&argv[1..]),
            b"e" | b"eval" => eval(l, vm, &argv[1..]),
            b"a" | b"abort" => return Err(Some("ERR script aborted for user request")),
            b"r" | b"redis" if argv.len() > 1 => redis_command(l, vm, &argv[1..]),
            b"p" | b"print" => match arg(1) {
                Some(var) if argv.len() == 2 => print_var(l, var),
                _ => print_locals(l),
            },
            b"l" | b"list" => {
                let mut around = with(|s| s.current_line) as i64;
                if let Some(n) = arg(1).map(c_atoi).filter(|&n| n > 0) {
                    around = n;
                }
                let ctx = arg(2).map_or(5, c_atoi);
                list(around, ctx);
            }
            b"w" | b"whole" => list(1, 1_000_000),
            _ => {
                log_str("<error> Unknown Redis Lua debugger command or wrong number of arguments.")
            }
        }
        send_logs();
    }
}

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// `   12  code`, marked `->` on the current line and `#` on a breakpoint.
fn log_source_line(line: i32) {
    let entry = with(|s| {
        let text: &[u8] = match usize::try_from(line - 1).ok().and_then(|i| s.src.get(i)) {
            Some(t) => t,
            None => b"<out of range source code line>",
        };
        let prefix = match (s.current_line == line, s.breakpoints.contains(&line)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut e = format!("{prefix}{line:<3} ").into_bytes();
        e.extend_from_slice(text);
        e
    });
    log(entry);
}

/// Lines `around - ctx ..= around + ctx` (all with `around` 0).
fn list(around: i64, ctx: i64) {
    let lines = with(|s| s.src.len()) as i64;
    for j in 1..=lines {
        if around != 0 && (around - j).abs() > ctx {
            continue;
        }
        log_source_line(j as i32);
    }
}

fn maxlen(arg: Option<&[u8]>) {
    if let Some(a) = arg {
        let mut n = c_atoi(a).clamp(i32::MIN as i64, i32::MAX as i64);
        if n != 0 && n <= 60 {
            n = 60;
        }
        with(|s| {
            s.maxlen_hint_sent = true;
            s.maxlen = n.max(0) as usize;
        });
    }
    let n = with(|s| s.maxlen);
    if n != 0 {
        log(format!("<value> replies are truncated at {n} bytes.").into_bytes());
    } else {
        log_str("<value> replies are unlimited.");
    }
}

fn breakpoints(args: &[Vec<u8>]) {
    if args.is_empty() {
        let bps = with(|s| s.breakpoints.clone());
        if bps.is_empty() {
            log_str("No breakpoints set. Use 'b <line>' to add one.");
        } else {
            log(format!("{} breakpoints set:", bps.len()).into_bytes());
            for line in bps {
                log_source_line(line);
            }
        }
        return;
    }
    for a in args {
        let Some(line) = std::str::from_utf8(a)
            .ok()
            .and_then(|s| parse_i64(s.as_bytes()))
            .and_then(|n| i32::try_from(n).ok())
        else {
            let mut e = b"Invalid argument:'".to_vec();
            e.extend_from_slice(a);
            e.push(b'\'');
            log(e);
            continue;
        };
        if line == 0 {
            with(|s| s.breakpoints.clear());
            log_str("All breakpoints removed.");
        } else if line > 0 {
            let (full, added) = with(|s| {
                if s.breakpoints.len() == BREAKPOINTS_MAX {
                    return (true, false);
                }
                let valid = line as usize <= s.src.len();
                let added = valid && !s.breakpoints.contains(&line);
                if added {
                    s.breakpoints.push(line);
                }
                (false, added)
            });
            if full {
                log_str("Too many breakpoints set.");
            } else if added {
                list(line as i64, 1);
            } else {
                log_str("Wrong line number.");
            }
        } else {
            let removed = with(|s| {
                let before = s.breakpoints.len();
                s.breakpoints.retain(|&b| b != -line);
                s.breakpoints.len() != before
            });
            log_str(if removed {
                "Breakpoint removed."
            } else {
                "No breakpoint in the specified line."
            });
        }
    }
}

/// Runs `f` with the VM's memory limit set (user code: `eval`, `redis`), lifting it
/// again afterwards for the debugger's own work.
fn limited<R>(vm: &Vm, f: impl FnOnce() -> R) -> R {
    let _ = vm.lua.set_memory_limit(vm::MEMORY_LIMIT);
    let r = f();
    let _ = vm.lua.set_memory_limit(0);
    r
}

/// `eval <code>`: compiled as an expression (`return <code>`), else as a statement, in
/// the scripts' sandboxed globals, run in a frame of its own.
unsafe fn eval(l: *mut lua_State, vm: &Vm, args: &[Vec<u8>]) {
    if ffi::lua_checkstack(l, 3) == 0 {
        log_str("<error> max lua stack reached");
        return;
    }
    let code = args.join(&b' ');
    let mut expr = b"return ".to_vec();
    expr.extend_from_slice(&code);
    let load = |src: &[u8]| {
        ffi::luaL_loadbuffer(
            l,
            src.as_ptr() as *const c_char,
            src.len(),
            c"@ldb_eval".as_ptr(),
        )
    };
    if load(&expr) != 0 {
        ffi::lua_pop(l, 1);
        if load(&code) != 0 {
            log_lua_error(l);
            return;
        }
    }
    let env_ref = with(|s| s.env_ref);
    if env_ref != ffi::LUA_REFNIL {
        ffi::lua_rawgeti_(l, ffi::LUA_REGISTRYINDEX, env_ref as _);
        ffi::lua_setfenv(l, -2);
    }
    if limited(vm, || ffi::lua_pcall(l, 0, 1, 0)) != 0 {
        log_lua_error(l);
        return;
    }
    let mut e = b"<retval> ".to_vec();
    cat_value(l, -1, 0, &mut e);
    log_trimmed(e);
    ffi::lua_pop(l, 1);
}

/// `<error> <message>` for the error on top of the stack, popped.
unsafe fn log_lua_error(l: *mut lua_State) {
    let mut e = b"<error> ".to_vec();
    let mut len = 0usize;
    let p = ffi::lua_tolstring(l, -1, &mut len);
    if !p.is_null() {
        e.extend_from_slice(std::slice::from_raw_parts(p as *const u8, len));
    }
    log(e);
    ffi::lua_pop(l, 1);
}

/// `redis <cmd> ...`: the command through the script's own `redis.call`, stepping so
/// that the call logs the command and its reply.
unsafe fn redis_command(l: *mut lua_State, vm: &Vm, args: &[Vec<u8>]) {
    if ffi::lua_checkstack(l, args.len() as c_int + 2) == 0 {
        log_trimmed(b"<reply> max lua stack reached".to_vec());
        return;
    }
    ffi::lua_getglobal_(l, c"redis".as_ptr());
    ffi::lua_getfield_(l, -1, c"call".as_ptr());
    for a in args {
        ffi::lua_pushlstring_(l, a.as_ptr() as *const c_char, a.len());
    }
    with(|s| s.step = true);
    limited(vm, || ffi::lua_pcall(l, args.len() as c_int, 1, 0));
    with(|s| s.step = false);
    ffi::lua_pop(l, 2);
}

/// `trace`: the script's frames, innermost first.
unsafe fn trace(l: *mut lua_State) {
    let mut ar: lua_Debug = std::mem::zeroed();
    let mut level = 0;
    while ffi::lua_getstack(l, level, &mut ar) != 0 {
        ffi::lua_getinfo(l, c"Snl".as_ptr(), &mut ar);
        if short_src(&ar).contains("user_script") {
            let name = if ar.name.is_null() {
                "top level".into()
            } else {
                CStr::from_ptr(ar.name).to_string_lossy()
            };
            let place = if level == 0 { "In" } else { "From" };
            log(format!("{place} {name}:").into_bytes());
            log_source_line(ar.currentline);
        }
        level += 1;
    }
    if level == 0 {
        log_str("<error> Can't retrieve Lua stack.");
    }
}

/// `print <var>`: the innermost local of that name, or the globals KEYS and ARGV.
unsafe fn print_var(l: *mut lua_State, var: &[u8]) {
    let mut ar: lua_Debug = std::mem::zeroed();
    let mut level = 0;
    while ffi::lua_getstack(l, level, &mut ar) != 0 {
        level += 1;
        let mut i = 1;
        loop {
            if ffi::lua_checkstack(l, 1) == 0 {
                return;
            }
            let name = ffi::lua_getlocal(l, &ar, i);
            if name.is_null() {
                break;
            }
            i += 1;
            if CStr::from_ptr(name).to_bytes() == var {
                log_value(l, b"<value> ".to_vec());
                ffi::lua_pop(l, 1);
                return;
            }
            ffi::lua_pop(l, 1);
        }
    }
    if var == b"ARGV" || var == b"KEYS" {
        ffi::lua_pushlstring_(l, var.as_ptr() as *const c_char, var.len());
        ffi::lua_rawget_(l, ffi::LUA_GLOBALSINDEX);
        log_value(l, b"<value> ".to_vec());
        ffi::lua_pop(l, 1);
    } else {
        log_str("No such variable.");
    }
}

/// `print`: every local of the current frame.
unsafe fn print_locals(l: *mut lua_State) {
    let mut ar: lua_Debug = std::mem::zeroed();
    let mut vars = 0;
    if ffi::lua_getstack(l, 0, &mut ar) != 0 {
        let mut i = 1;
        loop {
            if ffi::lua_checkstack(l, 1) == 0 {
                break;
            }
            let name = ffi::lua_getlocal(l, &ar, i);
            if name.is_null() {
                break;
            }
            i += 1;
            let name = CStr::from_ptr(name).to_bytes();
            if !name.windows(12).any(|w| w == b"(*temporary)") {
                let mut prefix = b"<value> ".to_vec();
                prefix.extend_from_slice(name);
                prefix.extend_from_slice(b" = ");
                log_value(l, prefix);
                vars += 1;
            }
            ffi::lua_pop(l, 1);
        }
    }
    if vars == 0 {
        log_str("No local variables in the current context.");
    }
}

/// Logs `prefix` and the value on top of the stack (left there), trimmed.
unsafe fn log_value(l: *mut lua_State, mut prefix: Vec<u8>) {
    cat_value(l, -1, 0, &mut prefix);
    log_trimmed(prefix);
}

/// The value at `idx` in the debugger's notation (Redis's ldbCatStackValueRec):
/// strings quoted, numbers as `%g`, tables as `{a; b}` when they are arrays and
/// `{[k]=v; ...}` otherwise, other objects by type and address.
unsafe fn cat_value(l: *mut lua_State, idx: c_int, level: usize, out: &mut Vec<u8>) {
    if level == MAX_VALUE_DEPTH {
        out.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    let idx = if idx < 0 {
        ffi::lua_gettop(l) + idx + 1
    } else {
        idx
    };
    match ffi::lua_type(l, idx) {
        ffi::LUA_TSTRING => {
            let mut len = 0usize;
            let p = ffi::lua_tolstring(l, idx, &mut len);
            repr(std::slice::from_raw_parts(p as *const u8, len), out);
        }
        ffi::LUA_TBOOLEAN => out.extend_from_slice(if ffi::lua_toboolean(l, idx) != 0 {
            b"true"
        } else {
            b"false"
        }),
        ffi::LUA_TNUMBER => {
            out.extend_from_slice(super::format_g(ffi::lua_tonumber(l, idx), 6).as_bytes())
        }
        ffi::LUA_TNIL => out.extend_from_slice(b"nil"),
        ffi::LUA_TTABLE => {
            if ffi::lua_checkstack(l, 3) == 0 {
                out.extend_from_slice(b"<max recursion level reached! Nested table?>");
                return;
            }
            let mut expected = 1.0;
            let mut is_array = true;
            let (mut as_array, mut as_map) = (Vec::new(), Vec::new());
            ffi::lua_pushnil(l);
            while ffi::lua_next(l, idx) != 0 {
                if is_array
                    && (ffi::lua_type(l, -2) != ffi::LUA_TNUMBER
                        || ffi::lua_tonumber(l, -2) != expected)
                {
                    is_array = false;
                }
                cat_value(l, -1, level + 1, &mut as_array);
                as_array.extend_from_slice(b"; ");
                as_map.push(b'[');
                cat_value(l, -2, level + 1, &mut as_map);
                as_map.extend_from_slice(b"]=");
                cat_value(l, -1, level + 1, &mut as_map);
                as_map.extend_from_slice(b"; ");
                ffi::lua_pop(l, 1);
                expected += 1.0;
            }
            let body = if is_array { as_array } else { as_map };
            out.push(b'{');
            out.extend_from_slice(&body[..body.len().saturating_sub(2)]);
            out.push(b'}');
        }
        t @ (ffi::LUA_TFUNCTION
        | ffi::LUA_TUSERDATA
        | ffi::LUA_TTHREAD
        | ffi::LUA_TLIGHTUSERDATA) => {
            let name = match t {
                ffi::LUA_TFUNCTION => "function",
                ffi::LUA_TUSERDATA => "userdata",
                ffi::LUA_TTHREAD => "thread",
                _ => "light-userdata",
            };
            let p = ffi::lua_topointer(l, idx);
            out.extend_from_slice(format!("\"{name}@{p:p}\"").as_bytes());
        }
        _ => out.extend_from_slice(b"\"<unknown-lua-type>\""),
    }
}

// ---------------------------------------------------------------------------------
// The library functions scripts call

/// `redis.breakpoint()`: stops at the next line during a session (true), else false.
unsafe extern "C-unwind" fn redis_breakpoint(l: *mut lua_State) -> c_int {
    let active = catch_unwind(|| {
        with(|s| {
            if s.active {
                s.luabp = true;
            }
            s.active
        })
    })
    .unwrap_or(false);
    ffi::lua_pushboolean(l, active as c_int);
    1
}

/// `redis.debug(...)`: logs its arguments to the debugger console during a session.
unsafe extern "C-unwind" fn redis_debug(l: *mut lua_State) -> c_int {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let Some(vm) = session_vm() else { return };
        let _unlimited = vm::Unlimited::new(&vm.lua);
        let line = with(|s| s.current_line);
        let mut e = format!("<debug> line {line}: ").into_bytes();
        let argc = ffi::lua_gettop(l);
        for i in 1..=argc {
            cat_value(l, i, 0, &mut e);
            if i != argc {
                e.extend_from_slice(b", ");
            }
        }
        log(e);
    }));
    0
}

/// Creates `redis.breakpoint` and `redis.debug` in the VM's `redis` table.
pub fn install(lua: &mlua::Lua, redis: &mlua::Table) -> mlua::Result<()> {
    for (name, f) in [
        ("breakpoint", redis_breakpoint as ffi::lua_CFunction),
        ("debug", redis_debug as ffi::lua_CFunction),
    ] {
        // SAFETY: `exec_raw` runs the closure in a protected call; it pushes one C
        // function, which it returns.
        let func: mlua::Function = unsafe { lua.exec_raw((), |l| ffi::lua_pushcfunction(l, f))? };
        redis.raw_set(name, func)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Forked sessions

/// The two sides of a forked session.
pub enum Forked {
    Parent,
    Child,
}

/// Forks for a session on the client socket `fd`. The child ignores SIGTERM/SIGINT,
/// closes every other socket it inherited (the server's clients and listeners must not
/// be held open by it) and logs without locks from then on.
pub fn fork_session(fd: RawFd) -> std::io::Result<Forked> {
    // SAFETY: the child only runs the session (the single thread fork keeps) and exits
    // with _exit; it takes no lock another thread could have held (log::after_fork).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid > 0 {
        CHILDREN.with(|c| c.borrow_mut().push(pid));
        return Ok(Forked::Parent);
    }
    crate::log::after_fork();
    // SAFETY: setting two signals' dispositions to SIG_IGN.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    close_other_sockets(fd);
    crate::log::notice("Redis forked for debugging eval");
    Ok(Forked::Child)
}

fn close_other_sockets(keep: RawFd) {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<RawFd> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for fd in fds {
        if fd == keep || fd <= 2 {
            continue;
        }
        // SAFETY: fstat on a descriptor number with a zeroed stat buffer; close only
        // of sockets, which nothing in the child uses again (it exits after the
        // session).
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK {
                libc::close(fd);
            }
        }
    }
}

/// The end of a forked session's child: the script's reply to the client, then exit.
pub fn finish_child(fd: RawFd, reply: &[u8]) -> ! {
    write_all(fd, reply);
    crate::log::notice("Lua debugging session child exiting");
    // SAFETY: _exit ends the process without running destructors or atexit handlers:
    // nothing of the server's (AOF, files) is flushed from the child.
    unsafe { libc::_exit(0) }
}

/// Reaps forked sessions that have ended (from the cron).
pub fn reap_children() {
    CHILDREN.with(|c| {
        c.borrow_mut().retain(|&pid| {
            let mut status = 0;
            // SAFETY: waitpid on a child of ours, without blocking.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            r == 0
        })
    });
}

/// Kills every forked session (shutdown).
pub fn kill_forked_sessions() {
    CHILDREN.with(|c| {
        for pid in c.borrow_mut().drain(..) {
            crate::log::notice(&format!("Killing debugging session {pid}"));
            // SAFETY: signalling and reaping a child of ours.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn human(r: Reply, resp: u8) -> String {
        let mut wire = Vec::new();
        r.encode(resp, &mut wire);
        let mut out = Vec::new();
        let used = human_reply(&wire, &mut out);
        assert_eq!(used, wire.len());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn replies_read_as_redis_shows_them() {
        assert_eq!(human(Reply::Int(-3), 2), "-3");
        assert_eq!(
            human(Reply::Bulk(b"a\"b\n\x01".to_vec()), 2),
            r#""a\"b\n\x01""#
        );
        assert_eq!(human(Reply::Null, 2), "NULL");
        assert_eq!(human(Reply::Null, 3), "(null)");
        assert_eq!(human(Reply::ok(), 2), "\"+OK\"");
        assert_eq!(human(Reply::err("ERR x"), 2), "\"-ERR x\"");
        assert_eq!(
            human(
                Reply::Array(vec![
                    Reply::Int(1),
                    Reply::Array(vec![]),
                    Reply::Bulk(b"x".to_vec())
                ]),
                2
            ),
            "[1,[],\"x\"]"
        );
        let map = Reply::Map(vec![(Reply::Bulk(b"k".to_vec()), Reply::Int(1))]);
        assert_eq!(human(map.clone(), 3), "{\"k\" => 1}");
        assert_eq!(human(map, 2), "[\"k\",1]");
        assert_eq!(
            human(Reply::Set(vec![Reply::Int(1), Reply::Int(2)]), 3),
            "~(1,2)"
        );
        assert_eq!(human(Reply::Bool(true), 3), "#true");
        assert_eq!(human(Reply::Double(1.5), 3), "(double) 1.5");
    }

    #[test]
    fn commands_parse_as_redis_parses_them() {
        let ok = |s: &[u8]| match parse_command(s) {
            Parsed::Command(a) => a,
            _ => panic!("not a command: {s:?}"),
        };
        assert_eq!(ok(b"*1\r\n$1\r\ns\r\n"), vec![b"s".to_vec()]);
        assert_eq!(
            ok(b"junk*2\r\n$1\r\np\r\n$3\r\na\0b\r\n"),
            vec![b"p".to_vec(), b"a\0b".to_vec()]
        );
        assert!(matches!(parse_command(b""), Parsed::NeedMore));
        assert!(matches!(
            parse_command(b"*2\r\n$1\r\np\r\n"),
            Parsed::NeedMore
        ));
        assert!(matches!(
            parse_command(b"*2\r\n$1\r\np\r\n$3\r\nab"),
            Parsed::NeedMore
        ));
        assert!(matches!(parse_command(b"step\r\n"), Parsed::ProtocolError));
        assert!(matches!(parse_command(b"*0\r\n"), Parsed::ProtocolError));
        assert!(matches!(parse_command(b"*1025\r\n"), Parsed::ProtocolError));
        assert!(matches!(
            parse_command(b"*1\r\n$0\r\n\r\n"),
            Parsed::ProtocolError
        ));
        assert!(matches!(
            parse_command(b"*1\r\n$1025\r\n"),
            Parsed::ProtocolError
        ));
        assert!(matches!(
            parse_command(b"*1\r\n$1\r\nsXY"),
            Parsed::ProtocolError
        ));
        assert!(matches!(
            parse_command(b"*1\r\n:1\r\n"),
            Parsed::ProtocolError
        ));
    }

    #[test]
    fn atoi_is_cs() {
        assert_eq!(c_atoi(b"12x"), 12);
        assert_eq!(c_atoi(b" -7"), -7);
        assert_eq!(c_atoi(b"x"), 0);
        assert_eq!(c_atoi(b"99999999999999999999999"), i64::MAX);
    }
}
