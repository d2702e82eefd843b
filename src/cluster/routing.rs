//! May this command run here? Redis's getNodeByQuery and clusterRedirectClient: every
//! key of the command (for EXEC, of every queued command) must hash to one slot,
//! served here, or the client gets -MOVED/-ASK/-CROSSSLOT/-TRYAGAIN/-CLUSTERDOWN with
//! Redis's exact text.

use super::node::NodeId;
use super::{slot, Cluster};
use crate::commands::{flags, Command, KeySpec};
use crate::exec::Executor;
use crate::protocol::Reply;

enum Redirect {
    CrossSlot,
    Unstable,
    DownState,
    DownReadOnly,
    DownUnbound,
    Moved(usize, NodeId),
    Ask(usize, NodeId),
}

/// Whether a command names keys at all (Redis skips the check otherwise).
fn has_keys(cmd: &Command) -> bool {
    match cmd.key_spec {
        KeySpec::None => cmd.first_key > 0 || cmd.flags & flags::MOVABLE_KEYS != 0,
        KeySpec::Range => cmd.first_key > 0,
        _ => true,
    }
}

/// The keys of one command, as its key specs find them.
pub fn command_keys<'a>(cmd: &Command, args: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let mut pos = cmd.key_positions(args);
    if matches!(cmd.name, "zunionstore" | "zinterstore" | "zdiffstore") && !pos.is_empty() {
        pos.insert(0, 1);
    }
    if matches!(cmd.name, "sort" | "sort_ro") {
        // SORT's STORE destination is a key too.
        let mut i = 2;
        while i + 1 < args.len() {
            if crate::commands::is(args[i], "store") {
                pos.push(i + 1);
            }
            i += 1;
        }
    }
    pos.into_iter()
        .filter_map(|i| args.get(i).copied())
        .collect()
}

fn is_shard_channel_cmd(cmd: &Command) -> bool {
    matches!(cmd.name, "spublish" | "ssubscribe" | "sunsubscribe")
}

/// The redirection for a command, or None when it may run here. Called by the
/// executor only when cluster mode is on.
pub fn route(
    ex: &mut Executor,
    client: usize,
    cmd: &'static Command,
    args: &[&[u8]],
) -> Option<Reply> {
    let is_exec = cmd.name == "exec";
    if !is_exec && !has_keys(cmd) {
        return None;
    }
    // The master's stream and AOF loading obey unconditionally.
    let c = ex.client(client);
    if c.repl_role == Some('M') || (c.embedded && ex.persist.loading) {
        return None;
    }
    let cl = ex.cluster.as_deref()?;
    let (asking, readonly) = (c.cluster_asking, c.cluster_readonly);
    let mut cmds: Vec<(&'static Command, Vec<&[u8]>)> = Vec::new();
    let mut is_write = writes(ex, cmd, args);
    if is_exec {
        let m = c.tx.multi.as_ref()?;
        for q in &m.queue {
            let a: Vec<&[u8]> = q.args.iter().map(|x| x.as_slice()).collect();
            is_write |= writes(ex, q.cmd, &a);
            let keys = command_keys(q.cmd, &a);
            cmds.push((q.cmd, keys));
        }
    } else {
        cmds.push((cmd, command_keys(cmd, args)));
    }
    let r = query(
        ex,
        cl,
        &cmds,
        asking,
        readonly,
        is_write,
        cmd.flags & flags::ASKING != 0,
        cmd.name == "migrate",
    )?;
    Some(redirect_reply(cl, r, ex.client(client).tls))
}

/// Whether the command writes, for a script as its shebang or function flags declare
/// (Redis's getCommandFlags): a script that may write goes to the master even from a
/// READONLY client of its replica.
fn writes(ex: &Executor, cmd: &Command, args: &[&[u8]]) -> bool {
    let scripted = cmd.name.starts_with("eval") || cmd.name.starts_with("fcall");
    if scripted {
        crate::scripting::command_flags(ex, cmd, args) & flags::WRITE != 0
    } else {
        cmd.is_write()
    }
}

#[allow(clippy::too_many_arguments)]
fn query(
    ex: &Executor,
    cl: &Cluster,
    cmds: &[(&'static Command, Vec<&[u8]>)],
    asking: bool,
    readonly: bool,
    is_write: bool,
    cmd_asking: bool,
    cmd_migrate: bool,
) -> Option<Redirect> {
    let me = cl.myself;
    let mut first: Option<&[u8]> = None;
    let mut slot_of = 0usize;
    let mut owner: Option<NodeId> = None;
    let mut migrating = false;
    let mut importing = false;
    let mut multiple_keys = false;
    let mut missing = 0;
    let mut existing = 0;
    let mut shard_pubsub = false;
    let now = crate::keyspace::unix_ms();
    for (c, keys) in cmds {
        shard_pubsub |= is_shard_channel_cmd(c);
        for &k in keys {
            let s = slot::key_slot(k) as usize;
            match first {
                None => {
                    first = Some(k);
                    slot_of = s;
                    owner = cl.slots[s];
                    let Some(o) = owner else {
                        return Some(Redirect::DownUnbound);
                    };
                    if o == me && cl.migrating.contains_key(&s) {
                        migrating = true;
                    } else if cl.importing.contains_key(&s) {
                        importing = true;
                    }
                }
                Some(f) => {
                    if s != slot_of {
                        return Some(Redirect::CrossSlot);
                    }
                    if importing && !multiple_keys && f != k {
                        multiple_keys = true;
                    }
                }
            }
            if (migrating || importing) && !shard_pubsub {
                let present = ex.ks.dbs[0]
                    .table
                    .get(k)
                    .is_some_and(|e| e.expire().is_none_or(|t| t > now));
                if present {
                    existing += 1;
                } else {
                    missing += 1;
                }
            }
        }
    }
    let owner = owner?;
    if !cl.state_ok {
        if shard_pubsub {
            if !cl.settings.allow_pubsubshard_when_down {
                return Some(Redirect::DownState);
            }
        } else if !cl.settings.allow_reads_when_down {
            return Some(Redirect::DownState);
        } else if is_write {
            return Some(Redirect::DownReadOnly);
        }
    }
    // MIGRATE runs here whenever the slot is open, so keys can move either way.
    if (migrating || importing) && cmd_migrate {
        return None;
    }
    if migrating && missing > 0 {
        if existing > 0 {
            return Some(Redirect::Unstable);
        }
        return Some(Redirect::Ask(slot_of, cl.migrating[&slot_of]));
    }
    if importing && (asking || cmd_asking) {
        if multiple_keys && missing > 0 {
            return Some(Redirect::Unstable);
        }
        return None;
    }
    if (readonly || shard_pubsub)
        && !is_write
        && cl.me().is_replica()
        && cl.me().replica_of == Some(owner)
    {
        return None;
    }
    if owner != me {
        return Some(Redirect::Moved(slot_of, owner));
    }
    None
}

/// `tls`: the client is on TLS, so it is sent to the TLS port.
fn redirect_reply(cl: &Cluster, r: Redirect, tls: bool) -> Reply {
    match r {
        Redirect::CrossSlot => Reply::err("CROSSSLOT Keys in request don't hash to the same slot"),
        Redirect::Unstable => Reply::err("TRYAGAIN Multiple keys request during rehashing of slot"),
        Redirect::DownState => Reply::err("CLUSTERDOWN The cluster is down"),
        Redirect::DownReadOnly => {
            Reply::err("CLUSTERDOWN The cluster is down and only accepts read commands")
        }
        Redirect::DownUnbound => Reply::err("CLUSTERDOWN Hash slot not served"),
        Redirect::Moved(s, n) | Redirect::Ask(s, n) => {
            let kind = if matches!(r, Redirect::Ask(..)) {
                "ASK"
            } else {
                "MOVED"
            };
            Reply::error(format!(
                "{kind} {s} {}:{}",
                cl.endpoint(n),
                cl.node(n).client_port(tls)
            ))
        }
    }
}

/// A command run by a script in cluster mode (Redis's scriptVerifyClusterState): the
/// error text when it may not run here, else the slot of its keys (None: no keys).
/// The caller's READONLY and ASKING apply; its master's stream is never checked.
pub fn script_command_check(
    ex: &Executor,
    caller: usize,
    cmd: &'static Command,
    args: &[&[u8]],
) -> Result<Option<usize>, String> {
    let Some(cl) = ex.cluster.as_deref() else {
        return Ok(None);
    };
    let c = ex.client(caller);
    if c.repl_role == Some('M') || (c.embedded && ex.persist.loading) {
        return Ok(None);
    }
    let keys = command_keys(cmd, args);
    let cmds = [(cmd, keys)];
    let name = cmd.name;
    match query(
        ex,
        cl,
        &cmds,
        c.cluster_asking,
        c.cluster_readonly,
        cmd.is_write(),
        false,
        false,
    ) {
        None => Ok(cmds[0].1.first().map(|k| slot::key_slot(k) as usize)),
        Some(Redirect::DownReadOnly) => Err(
            "ERR Script attempted to execute a write command while the cluster is down and readonly"
                .into(),
        ),
        Some(Redirect::DownState) => {
            Err("ERR Script attempted to execute a command while the cluster is down".into())
        }
        Some(Redirect::CrossSlot) => Err(format!(
            "ERR Command '{name}' in script attempted to access keys that don't hash to the same slot"
        )),
        Some(Redirect::Unstable) => Err(format!(
            "ERR Unable to execute command '{name}' in script because undeclared keys were accessed during rehashing of the slot"
        )),
        Some(Redirect::DownUnbound) => {
            Err("ERR Script attempted to access a slot not served".into())
        }
        Some(Redirect::Moved(..) | Redirect::Ask(..)) => {
            Err("ERR Script attempted to access a non local key in a cluster node".into())
        }
    }
}

/// Clients blocked on a key (BLPOP, BLMOVE, BZPOPMIN, XREAD BLOCK, …) whose slot is no
/// longer served here are answered with the redirection and unblocked, as Redis's
/// clusterRedirectBlockedClientIfNeeded run from its clients cron: -CLUSTERDOWN while
/// the cluster is down (even when reads are allowed then: only a write could wake
/// them), -CLUSTERDOWN Hash slot not served for an unassigned slot, -MOVED when
/// another node owns it and it is not being imported here. A READONLY client's read
/// stays blocked on a replica of the slot's master. WAIT and WAITAOF are untouched.
pub fn redirect_blocked_clients(cl: &Cluster, ex: &mut Executor) {
    if ex.blocking.blocked_clients() == 0 {
        return;
    }
    let me = cl.myself;
    for b in crate::exec::blocking::key_blocked(ex) {
        let redirect = if !cl.state_ok {
            Some(Redirect::DownState)
        } else {
            let s = slot::key_slot(&b.first_key) as usize;
            let mut owner = cl.slots[s];
            if ex.client(b.slot).cluster_readonly
                && !b.is_write
                && cl.me().is_replica()
                && cl.me().replica_of.is_some()
                && cl.me().replica_of == owner
            {
                owner = Some(me);
            }
            match owner {
                Some(o) if o == me => None,
                _ if cl.importing.contains_key(&s) => None,
                None => Some(Redirect::DownUnbound),
                Some(o) => Some(Redirect::Moved(s, o)),
            }
        };
        if let Some(r) = redirect {
            let reply = redirect_reply(cl, r, ex.client(b.slot).tls);
            crate::exec::blocking::unblock_with(ex, b.slot, &reply);
        }
    }
}
