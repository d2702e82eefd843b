//! Crash reports, as Redis's bug report: a fatal signal (SIGSEGV, SIGBUS, SIGFPE,
//! SIGILL, SIGABRT) writes `crashed by signal`, the faulting address and instruction
//! and a stack trace to the log, then the process dies by that signal. SIGALRM
//! (Redis's watchdog signal) logs a stack trace and goes on. DEBUG ASSERT writes an
//! `ASSERTION FAILED` report, then aborts (or exits 1 with `use-exit-on-panic`).
//!
//! The handlers run on whatever the crashed thread was doing, so they only format into
//! stack buffers (`log::StackLine`), write(2) to the log's descriptor opened at
//! startup, and walk the stack with glibc's backtrace(3), warmed up at install time
//! so that it does not load its unwinder (an allocation) inside the handler. Frames
//! are printed as addresses within the executable (Rust symbols are not exported).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::log::StackLine;

/// `crash-log-enabled`: whether a fatal signal writes its report.
static CRASH_LOG: AtomicBool = AtomicBool::new(true);

const FATAL: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];

#[cfg(target_env = "gnu")]
extern "C" {
    fn backtrace(buffer: *mut *mut libc::c_void, size: libc::c_int) -> libc::c_int;
    fn backtrace_symbols_fd(buffer: *const *mut libc::c_void, size: libc::c_int, fd: libc::c_int);
}

/// Installs the crash and SIGALRM handlers (after the log is configured).
pub fn install() {
    warm_up_backtrace();
    for sig in FATAL {
        // SAFETY: `on_fatal_signal` has the SA_SIGINFO handler signature; the
        // sigaction struct is zeroed then filled, its mask emptied by sigemptyset.
        // SA_ONSTACK uses the alternate stack Rust's runtime set up (stack overflows),
        // SA_RESETHAND makes a second fault in the handler end the process.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_fatal_signal as *const () as usize;
            act.sa_flags =
                libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER | libc::SA_RESETHAND;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
    // SAFETY: as above, for the SIGALRM handler, which stays installed.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigalrm as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGALRM, &act, std::ptr::null_mut());
    }
}

/// Redis's software watchdog (`watchdog-period` ms, 0 off), re-armed by every cron
/// tick: when the event loop stalls longer than the period, SIGALRM's handler logs
/// `--- WATCHDOG TIMER EXPIRED ---` and a stack trace.
pub fn arm_watchdog(period_ms: i64) {
    static ARMED: AtomicBool = AtomicBool::new(false);
    if period_ms <= 0 && !ARMED.swap(false, Ordering::Relaxed) {
        return;
    }
    let ms = period_ms.max(0);
    let it = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            tv_sec: (ms / 1000) as libc::time_t,
            tv_usec: ((ms % 1000) * 1000) as libc::suseconds_t,
        },
    };
    // SAFETY: setitimer reads the itimerval we own; the old value is not asked for.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut()) };
    ARMED.store(ms > 0, Ordering::Relaxed);
}

/// Applies `crash-log-enabled` (startup and CONFIG SET).
pub fn set_crash_log(enabled: bool) {
    CRASH_LOG.store(enabled, Ordering::Relaxed);
}

fn warm_up_backtrace() {
    #[cfg(target_env = "gnu")]
    {
        let mut frames = [std::ptr::null_mut(); 4];
        // SAFETY: the buffer holds 4 pointers, the size passed.
        unsafe { backtrace(frames.as_mut_ptr(), frames.len() as libc::c_int) };
    }
}

/// A log line `pid:role date time # msg`, formatted without allocating.
fn log_line(args: std::fmt::Arguments<'_>) {
    let mut line = StackLine::new();
    crate::log::write_prefix(&mut line, '#');
    let _ = line.write_fmt(args);
    let _ = line.write_char('\n');
    crate::log::write_raw_fd(line.as_bytes());
}

fn raw(text: &str) {
    crate::log::write_raw_fd(text.as_bytes());
}

/// The calling thread's stack, one frame a line, between Redis's markers.
fn stack_trace() {
    raw("\n------ STACK TRACE ------\n\nBacktrace:\n");
    #[cfg(target_env = "gnu")]
    {
        let mut frames = [std::ptr::null_mut(); 100];
        // SAFETY: the buffer holds 100 pointers, the size passed; backtrace_symbols_fd
        // reads the `n` frames backtrace filled and writes to the log's descriptor
        // without allocating.
        unsafe {
            let n = backtrace(frames.as_mut_ptr(), frames.len() as libc::c_int);
            backtrace_symbols_fd(frames.as_ptr(), n, crate::log::raw_fd());
        }
    }
    #[cfg(not(target_env = "gnu"))]
    raw("(no backtrace support on this platform)\n");
    raw("\n------ STACK TRACE DONE ------\n");
}

fn report_start() {
    raw("\n\n=== CINNABAR BUG REPORT START: Cut & paste starting from here ===\n");
}

fn report_end() {
    raw("\n=== CINNABAR BUG REPORT END. Make sure to include from START to END. ===\n\n");
}

/// The instruction pointer the signal interrupted, from its ucontext.
fn faulting_instruction(ucontext: *mut libc::c_void) -> usize {
    if ucontext.is_null() {
        return 0;
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        // SAFETY: the kernel passes a valid ucontext_t to an SA_SIGINFO handler;
        // REG_RIP indexes the saved general registers.
        unsafe {
            let uc = &*(ucontext as *const libc::ucontext_t);
            uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize
        }
    }
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    {
        // SAFETY: the kernel passes a valid ucontext_t to an SA_SIGINFO handler.
        unsafe { (*(ucontext as *const libc::ucontext_t)).uc_mcontext.pc as usize }
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    {
        0
    }
}

extern "C" fn on_fatal_signal(sig: libc::c_int, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    if CRASH_LOG.load(Ordering::Relaxed) {
        report_start();
        // SAFETY: `info` is the siginfo_t the kernel passed (checked for null).
        let (code, addr) = if info.is_null() {
            (0, 0)
        } else {
            unsafe { ((*info).si_code, (*info).si_addr() as usize) }
        };
        log_line(format_args!(
            "Cinnabar {} crashed by signal: {sig}, si_code: {code}",
            crate::VERSION
        ));
        // Only a fault the kernel raised (si_code > 0) has an address.
        if (sig == libc::SIGSEGV || sig == libc::SIGBUS) && code > 0 {
            log_line(format_args!("Accessing address: {addr:#x}"));
        }
        log_line(format_args!(
            "Crashed running the instruction at: {:#x}",
            faulting_instruction(uc)
        ));
        stack_trace();
        report_end();
    }
    die_by(sig);
}

/// Ends the process by `sig` with its default action (a core dump where enabled), as
/// the crash would have without the report.
fn die_by(sig: libc::c_int) -> ! {
    // SAFETY: signal(2) with SIG_DFL and raise(3) are async-signal-safe; SA_NODEFER
    // let the signal through, so raising it ends the process now. _exit is the
    // fallback should the default action not terminate.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
        libc::_exit(128 + sig)
    }
}

extern "C" fn on_sigalrm(_sig: libc::c_int, info: *mut libc::siginfo_t, _uc: *mut libc::c_void) {
    // SAFETY: `info` is the siginfo_t the kernel passed (checked for null).
    let from_timer = info.is_null() || unsafe { (*info).si_pid() } == 0;
    if from_timer {
        log_line(format_args!("--- WATCHDOG TIMER EXPIRED ---"));
    } else {
        log_line(format_args!("Received SIGALRM"));
    }
    stack_trace();
    raw("--------\n");
}

/// DEBUG ASSERT: an assertion that failed on purpose. Writes the report, then exits
/// with status 1 (`use-exit-on-panic`) or aborts without a second report.
pub fn assertion_failed(file: &str, line: u32, expr: &str, use_exit: bool) -> ! {
    report_start();
    log_line(format_args!("=== ASSERTION FAILED ==="));
    log_line(format_args!("==> {file}:{line} '{expr}' is not true"));
    stack_trace();
    report_end();
    if use_exit {
        std::process::exit(1);
    }
    // SAFETY: restoring SIGABRT's default action before abort(3), so the abort does
    // not write a second report.
    unsafe { libc::signal(libc::SIGABRT, libc::SIG_DFL) };
    std::process::abort()
}

/// DEBUG SEGFAULT: the crash path taken on purpose.
pub fn segfault() -> ! {
    // SAFETY: raising SIGSEGV in this thread runs `on_fatal_signal`, which ends the
    // process; nothing of Rust's state is touched.
    unsafe { libc::raise(libc::SIGSEGV) };
    die_by(libc::SIGSEGV)
}
