//! Replication commands: what replicas send to a master (SYNC, PSYNC, REPLCONF), what
//! clients use (WAIT, ROLE, REPLICAOF/SLAVEOF). The machinery is in `src/replication`;
//! handlers parse arguments and reply.

use crate::command;
use crate::commands::flags::*;
use crate::commands::{Command, Ctx};
use crate::protocol::Reply;
use crate::replication::{failover, master, replica};

pub static COMMANDS: &[Command] = &[
    command!("sync", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, (0, 0, 0), &["admin", "slow", "dangerous"], "server", "1.0.0", "An internal command used in replication.", "", sync),
    command!("psync", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, (0, 0, 0), &["admin", "slow", "dangerous"], "server", "2.8.0", "An internal command used in replication.", "", psync),
    command!("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, (0, 0, 0), &["admin", "slow", "dangerous"], "server", "3.0.0", "An internal command for configuring the replication stream.", "O(1)", replconf),
    command!("wait", 3, BLOCKING, (0, 0, 0), &["slow", "connection"], "generic", "3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", "O(1)", wait),
    command!("role", 1, NOSCRIPT | LOADING | STALE | FAST, (0, 0, 0), &["admin", "fast", "dangerous"], "server", "2.8.12", "Returns the replication role.", "O(1)", role),
    command!("replicaof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, (0, 0, 0), &["admin", "slow", "dangerous"], "server", "5.0.0", "Configures a server as replica of another, or promotes it to a master.", "O(1)", replicaof),
    command!("failover", -1, ADMIN | NOSCRIPT | STALE, (0, 0, 0), &["admin", "slow", "dangerous"], "server", "6.2.0", "Starts a coordinated failover from a server to one of its replicas.", "O(1)", failover),
    command!("slaveof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, (0, 0, 0), &["admin", "slow", "dangerous"], "server", "1.0.0", "Sets a Redis server as a replica of another, or promotes it to being a master.", "O(1)", replicaof),
];

fn sync(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    master::sync(ctx, None, false)
}

fn psync(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let failover = args
        .get(3)
        .is_some_and(|a| a.eq_ignore_ascii_case(b"failover"));
    master::sync(ctx, Some((args[1], args[2])), failover)
}

fn failover(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    failover::command(ctx, args)
}

fn replconf(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    master::replconf(ctx, args)
}

fn wait(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    master::wait(ctx, args)
}

fn role(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let r = &ctx.ex.repl;
    match &r.link {
        None => Reply::Array(vec![
            Reply::bulk(b"master"),
            Reply::Int(r.offset as i64),
            Reply::Array(
                r.peers
                    .iter()
                    .map(|p| {
                        Reply::Array(vec![
                            Reply::bulk(p.ip.as_bytes()),
                            Reply::bulk(p.port.to_string().as_bytes()),
                            Reply::bulk(p.ack_off.to_string().as_bytes()),
                        ])
                    })
                    .collect(),
            ),
        ]),
        Some(l) => Reply::Array(vec![
            Reply::bulk(b"slave"),
            Reply::bulk(l.host.as_bytes()),
            Reply::Int(l.port as i64),
            Reply::bulk(l.state_name().as_bytes()),
            Reply::Int(if l.is_up() { l.reploff as i64 } else { -1 }),
        ]),
    }
}

fn replicaof(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    // Cluster replicas follow their master through CLUSTER REPLICATE.
    if ctx.ex.cluster.is_some() {
        return Reply::err("ERR REPLICAOF not allowed in cluster mode.");
    }
    if ctx.ex.repl.failover.state != failover::State::None {
        return Reply::err("ERR REPLICAOF not allowed while failing over.");
    }
    if args[1].eq_ignore_ascii_case(b"no") && args[2].eq_ignore_ascii_case(b"one") {
        replica::stop(ctx.ex);
        return Reply::ok();
    }
    if ctx.ex.repl.peers.iter().any(|p| p.slot == ctx.client) {
        return Reply::err("ERR Command is not valid when client is a replica.");
    }
    let Some(port) = crate::util::numeric::parse_i64(args[2]).filter(|p| (0..=65535).contains(p))
    else {
        return Reply::err("ERR Invalid master port");
    };
    let host = String::from_utf8_lossy(args[1]).into_owned();
    if let Some(l) = &ctx.ex.repl.link {
        if l.host.eq_ignore_ascii_case(&host) && l.port as i64 == port {
            crate::log::notice("REPLICAOF would result into synchronization with the master we are already connected with. No operation performed.");
            return Reply::Status("OK Already connected to specified master".into());
        }
    }
    replica::start(ctx.ex, host, port as u16);
    Reply::ok()
}
