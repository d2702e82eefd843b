//! The shutdown sequence, as Redis's prepareForShutdown / finishShutdown.
//!
//! A SHUTDOWN command, or a SIGTERM/SIGINT taken up by the cron, asks for a shutdown
//! ([`request`]). Unless `NOW` was given or `shutdown-timeout` is 0, a master whose
//! replicas have not acknowledged its whole stream first waits for them: writes are
//! paused (`PausePurpose::Shutdown`), replicas are asked for an ACK, the SHUTDOWN
//! client stays blocked, and INFO shows `shutdown_in_milliseconds`. The cron ([`cron`])
//! finishes once every replica caught up or the timeout passed. Finishing
//! ([`finish`]) logs lagging replicas, then the final AOF sync and RDB save
//! (`persistence::snapshot::prepare_shutdown`); when that fails (without FORCE) the
//! shutdown is cancelled: blocked SHUTDOWN clients get an error and the server
//! keeps running. On success `Executor::shutdown` is set and the network layer exits.
//!
//! A signal only marks the request (`ShutdownState::signal`, Redis's
//! `shutdown_asap`); the cron acts on it, so SHUTDOWN ABORT can cancel it before
//! then (DEBUG PAUSE-CRON holds it). A second SIGINT while a shutdown is pending
//! exits at once from the signal handler (`crate::process::install_signal_marks`).

use std::time::{Duration, Instant};

use super::pause::PausePurpose;
use super::{Executor, Pause, ShutdownRequest};
use crate::protocol::Reply;

/// Where a shutdown stands.
#[derive(Default)]
pub struct ShutdownState {
    /// A SIGTERM/SIGINT not yet taken up by the cron: the signal's number.
    pub signal: Option<i32>,
    /// A shutdown waiting for replicas: what was asked and until when.
    pub waiting: Option<(ShutdownRequest, Instant)>,
}

/// What [`request`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done: `Executor::shutdown` is set, the server exits.
    Exit,
    /// Waiting for replicas (or already was): the caller blocks.
    Waiting,
    /// The final save failed: the shutdown was cancelled.
    Failed,
}

/// Starts a shutdown: waits for lagging replicas (unless NOW, or `shutdown-timeout`
/// is 0), otherwise finishes at once.
pub fn request(ex: &mut Executor, mut req: ShutdownRequest) -> Outcome {
    if ex.shutdown_state.waiting.is_some() {
        return Outcome::Waiting;
    }
    // An incomplete dataset is never saved.
    if ex.persist.serving_while_loading || ex.persist.loading {
        req.save = Some(false);
    }
    crate::log::notice("User requested shutdown...");
    let timeout = ex.config.stored_i64("shutdown-timeout").max(0) as u64;
    if !req.now && timeout != 0 && !replicas_caught_up(ex) {
        let deadline = Instant::now()
            .checked_add(Duration::from_secs(timeout))
            .unwrap_or_else(Instant::now);
        ex.shutdown_state.waiting = Some((req, deadline));
        ex.repl.getack_pending = true;
        ex.set_pause(
            PausePurpose::Shutdown,
            Pause {
                until: far_future(),
                write_only: true,
            },
        );
        crate::log::notice("Waiting for replicas before shutting down.");
        return Outcome::Waiting;
    }
    if finish(ex, req) {
        Outcome::Exit
    } else {
        Outcome::Failed
    }
}

/// Every replica acknowledged the whole stream (Redis's isReadyToShutdown).
fn replicas_caught_up(ex: &Executor) -> bool {
    ex.repl.peers.iter().all(|p| p.ack_off == ex.repl.offset)
}

/// The last step: lagging replicas logged, the final AOF sync and save. Returns
/// whether the server may exit (then `Executor::shutdown` is set).
pub fn finish(ex: &mut Executor, req: ShutdownRequest) -> bool {
    let offset = ex.repl.offset;
    let mut lagging = 0;
    for p in &ex.repl.peers {
        if p.ack_off == offset {
            continue;
        }
        lagging += 1;
        let lag = if p.state == crate::replication::PeerState::Online {
            p.ack_time.elapsed().as_secs()
        } else {
            0
        };
        crate::log::notice(&format!(
            "Lagging replica {}:{} reported offset {} behind master, lag={lag}, state={}.",
            p.ip,
            p.port,
            offset.saturating_sub(p.ack_off),
            p.state.name()
        ));
    }
    let total = ex.repl.peers.len();
    if total > 0 {
        crate::log::notice(&format!(
            "{} of {total} replicas are in sync when shutting down.",
            total - lagging
        ));
    }
    crate::scripting::ldb::kill_forked_sessions();
    if !crate::persistence::snapshot::prepare_shutdown(ex, req.save, req.force) {
        crate::log::warning(
            "Errors trying to shut down the server. Check the logs for more information.",
        );
        cancel(ex);
        return false;
    }
    ex.shutdown = Some(req);
    true
}

/// Forgets the shutdown: blocked SHUTDOWN clients get an error, writes resume.
fn cancel(ex: &mut Executor) {
    ex.shutdown_state = ShutdownState::default();
    crate::process::clear_shutdown_mark();
    let mut blocked: Vec<usize> = ex
        .clients()
        .map(|(s, _)| s)
        .filter(|&s| ex.blocking.is_blocked(s) && ex.blocking.blocked_type(s) == Some("shutdown"))
        .collect();
    blocked.sort_unstable();
    for slot in blocked {
        super::blocking::unblock_with(
            ex,
            slot,
            &Reply::err("ERR Errors trying to SHUTDOWN. Check logs."),
        );
    }
    ex.unpause(PausePurpose::Shutdown);
}

/// SHUTDOWN ABORT: cancels a shutdown waiting for replicas, or a signal's not yet
/// taken up. Returns whether there was one.
pub fn abort(ex: &mut Executor) -> bool {
    if ex.shutdown_state.waiting.is_some() {
        cancel(ex);
    } else if ex.shutdown_state.signal.is_some() {
        ex.shutdown_state.signal = None;
        crate::process::clear_shutdown_mark();
    } else {
        return false;
    }
    crate::log::notice("Shutdown manually aborted.");
    true
}

/// Each cron tick: takes up a signal's request (with `shutdown-on-sigterm` /
/// `shutdown-on-sigint`), or finishes a shutdown whose replicas caught up or whose
/// time is up.
pub fn cron(ex: &mut Executor) {
    if let Some((req, deadline)) = ex.shutdown_state.waiting {
        if Instant::now() >= deadline || replicas_caught_up(ex) {
            finish(ex, req);
        }
        return;
    }
    let Some(sig) = ex.shutdown_state.signal else {
        return;
    };
    let option = if sig == libc::SIGINT {
        "shutdown-on-sigint"
    } else {
        "shutdown-on-sigterm"
    };
    let req = signal_request(&ex.config.stored_str(option));
    // A failure cancels the request (its error is logged); waiting keeps it.
    request(ex, req);
}

/// The request a signal makes, from `shutdown-on-sig*`'s flags: `default`, or
/// `save`|`nosave`, `now`, `force`.
pub fn signal_request(flags: &str) -> ShutdownRequest {
    let has = |w: &str| flags.split(' ').any(|f| f.eq_ignore_ascii_case(w));
    ShutdownRequest {
        save: if has("save") {
            Some(true)
        } else if has("nosave") {
            Some(false)
        } else {
            None
        },
        now: has("now"),
        force: has("force"),
    }
}

/// While the dataset loads: a signal shuts down without saving, as Redis's
/// whileBlockedCron; if that fails the server goes on loading.
pub fn while_loading(ex: &mut Executor) {
    if ex.shutdown_state.signal.is_none() {
        return;
    }
    // Nothing to wait for: a loading server has no replicas.
    let req = ShutdownRequest {
        save: Some(false),
        now: true,
        force: false,
    };
    if request(ex, req) == Outcome::Failed {
        crate::log::warning("SIGTERM received but errors trying to shut down the server, check the logs for more information");
    }
}

/// INFO `shutdown_in_milliseconds`, while waiting for replicas.
pub fn remaining_ms(ex: &Executor) -> Option<u64> {
    ex.shutdown_state
        .waiting
        .map(|(_, d)| d.saturating_duration_since(Instant::now()).as_millis() as u64)
}

fn far_future() -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600))
        .unwrap_or(now)
}
