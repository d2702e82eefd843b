//! FAILOVER: a coordinated switch of roles between this master and one of its replicas,
//! as Redis 6.2+'s `failoverCommand` / `updateFailoverStatus`.
//!
//! 1. `FAILOVER [TO host port [FORCE]] [TIMEOUT ms]` pauses writes (pause purpose
//!    `Failover`, so CLIENT PAUSE/UNPAUSE neither lift nor shorten it) and enters
//!    `waiting-for-sync`.
//! 2. Each loop turn (`tick`) looks for the target — the one named, or the first
//!    replica whose acknowledged offset equals ours — having acknowledged our whole
//!    stream. Once one has, `failover-in-progress`: we become a replica of it, keeping
//!    our history, and the master link's PSYNC carries `FAILOVER`.
//! 3. The target, still a replica of ours with our replication ID, turns master on
//!    `PSYNC <our replid> <offset> FAILOVER` and answers it like any PSYNC, so we
//!    continue from it with `+CONTINUE`. Its `+CONTINUE`/`+FULLRESYNC` ends the
//!    failover (writes resume, and are refused now that we are a replica); an error
//!    aborts it and we are a master again.
//!
//! The timeout aborts a failover still waiting (`Replica never caught up before
//! timeout`), or with FORCE starts it anyway. `FAILOVER ABORT` ends one in either
//! state. Meanwhile REPLICAOF is refused and replicas cannot SYNC with us.

use std::time::{Duration, Instant};

use crate::commands::Ctx;
use crate::exec::{Executor, Pause, PausePurpose};
use crate::protocol::Reply;

/// INFO `master_failover_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum State {
    #[default]
    None,
    WaitForSync,
    InProgress,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::None => "no-failover",
            State::WaitForSync => "waiting-for-sync",
            State::InProgress => "failover-in-progress",
        }
    }
}

/// The failover under way, if any.
#[derive(Debug, Default)]
pub struct Failover {
    pub state: State,
    /// The replica failed over to: named by TO, or chosen once caught up.
    pub target: Option<(String, u16)>,
    /// When the wait for the target ends (TIMEOUT).
    pub end: Option<Instant>,
    pub force: bool,
}

/// A pause that lasts until the failover lifts it (Redis pauses until LLONG_MAX).
fn until_lifted() -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600))
        .or_else(|| now.checked_add(Duration::from_secs(365 * 24 * 3600)))
        .unwrap_or(now)
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]
pub fn command(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if ctx.ex.cluster.is_some() {
        return Reply::err(
            "ERR FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.",
        );
    }
    let ex = &mut *ctx.ex;
    if args.len() == 2 && args[1].eq_ignore_ascii_case(b"abort") {
        if ex.repl.failover.state == State::None {
            return Reply::err("ERR No failover in progress.");
        }
        abort(ex, "Failover manually aborted");
        return Reply::ok();
    }
    let mut timeout_ms: i64 = 0;
    let mut force = false;
    let mut target: Option<(String, i64)> = None;
    let mut j = 1;
    while j < args.len() {
        let a = args[j];
        if a.eq_ignore_ascii_case(b"timeout") && j + 1 < args.len() && timeout_ms == 0 {
            let Some(t) = crate::util::numeric::parse_i64(args[j + 1]) else {
                return Reply::err("ERR value is not an integer or out of range");
            };
            if t <= 0 {
                return Reply::err("ERR FAILOVER timeout must be greater than 0");
            }
            timeout_ms = t;
            j += 2;
        } else if a.eq_ignore_ascii_case(b"to") && j + 2 < args.len() && target.is_none() {
            let Some(port) = crate::util::numeric::parse_i64(args[j + 2]) else {
                return Reply::err("ERR value is not an integer or out of range");
            };
            target = Some((String::from_utf8_lossy(args[j + 1]).into_owned(), port));
            j += 3;
        } else if a.eq_ignore_ascii_case(b"force") && !force {
            force = true;
            j += 1;
        } else {
            return Reply::err("ERR syntax error");
        }
    }
    if ex.repl.failover.state != State::None {
        return Reply::err("ERR FAILOVER already in progress.");
    }
    if ex.repl.link.is_some() {
        return Reply::err("ERR FAILOVER is not valid when server is a replica.");
    }
    if ex.repl.peers.is_empty() {
        return Reply::err("ERR FAILOVER requires connected replicas.");
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        return Reply::err(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        );
    }
    let target = match target {
        Some((host, port)) => {
            let Some(p) = find_replica(ex, &host, port) else {
                return Reply::err("ERR FAILOVER target HOST and PORT is not a replica.");
            };
            if p.state != super::PeerState::Online {
                return Reply::err("ERR FAILOVER target replica is not online.");
            }
            crate::log::notice(&format!("FAILOVER requested to {host}:{port}."));
            Some((host, port as u16))
        }
        None => {
            crate::log::notice("FAILOVER requested to any replica.");
            None
        }
    };
    let end = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
    ex.repl.failover = Failover {
        state: State::WaitForSync,
        target,
        end,
        force,
    };
    ex.set_pause(
        PausePurpose::Failover,
        Pause {
            until: until_lifted(),
            write_only: true,
        },
    );
    Reply::ok()
}

/// The replica listening on `host`:`port` (its announced or peer address).
fn find_replica<'a>(ex: &'a Executor, host: &str, port: i64) -> Option<&'a super::Peer> {
    ex.repl
        .peers
        .iter()
        .find(|p| p.ip.eq_ignore_ascii_case(host) && p.port as i64 == port)
}

/// Ends the failover, succeeded or not: its pause is lifted.
pub fn clear(ex: &mut Executor) {
    ex.repl.failover = Failover::default();
    ex.unpause(PausePurpose::Failover);
}

/// Abandons a failover under way; one already in progress makes us a master again.
pub fn abort(ex: &mut Executor, why: &str) {
    let f = &ex.repl.failover;
    if f.state == State::None {
        return;
    }
    match &f.target {
        Some((h, p)) => crate::log::notice(&format!("FAILOVER to {h}:{p} aborted: {why}")),
        None => crate::log::notice(&format!("FAILOVER to any replica aborted: {why}")),
    }
    if f.state == State::InProgress {
        super::replica::unset_master(ex);
    }
    clear(ex);
}

/// Whether the master link's PSYNC must carry FAILOVER.
pub fn in_progress(ex: &Executor) -> bool {
    ex.repl.failover.state == State::InProgress
}

/// Each loop turn while waiting for the target: the timeout, then whether the target
/// (or, with none named, any replica) acknowledged our whole stream.
pub fn tick(ex: &mut Executor) {
    if ex.repl.failover.state != State::WaitForSync {
        return;
    }
    if ex.repl.failover.end.is_some_and(|e| e <= Instant::now()) {
        if ex.repl.failover.force {
            if let Some((host, port)) = ex.repl.failover.target.clone() {
                crate::log::notice(&format!(
                    "FAILOVER to {host}:{port} time out exceeded, failing over."
                ));
                ex.repl.failover.state = State::InProgress;
                super::replica::start(ex, host, port);
                return;
            }
        }
        abort(ex, "Replica never caught up before timeout");
        return;
    }
    let offset = ex.repl.offset;
    let caught_up = match &ex.repl.failover.target {
        Some((host, port)) => find_replica(ex, host, *port as i64)
            .filter(|p| p.ack_off == offset)
            .map(|_| (host.clone(), *port)),
        None => ex
            .repl
            .peers
            .iter()
            .find(|p| p.ack_off == offset)
            .map(|p| (p.ip.clone(), p.port)),
    };
    let Some((host, port)) = caught_up else {
        return;
    };
    crate::log::notice(&format!(
        "Failover target {host}:{port} is synced, failing over."
    ));
    ex.repl.failover.target = Some((host.clone(), port));
    ex.repl.failover.state = State::InProgress;
    super::replica::start(ex, host, port);
}

/// `PSYNC <replid> <offset> FAILOVER` from our master: we become the master when it
/// names our replication ID. None: go on with the PSYNC; Some: its error reply.
pub fn psync_request(ex: &mut Executor, slot: usize, replid: &[u8]) -> Option<Reply> {
    crate::log::notice(&format!(
        "Failover request received for replid {}.",
        String::from_utf8_lossy(replid)
    ));
    if ex.repl.link.is_none() {
        return Some(Reply::err("ERR PSYNC FAILOVER can't be sent to a master."));
    }
    if replid != ex.repl.replid.as_bytes() {
        return Some(Reply::err(
            "ERR PSYNC FAILOVER replid must match my replid.",
        ));
    }
    super::replica::unset_master(ex);
    let c = ex.client(slot);
    crate::log::notice(&format!(
        "MASTER MODE enabled (failover request from 'id={} addr={} laddr={}')",
        c.id, c.addr, c.laddr
    ));
    None
}
