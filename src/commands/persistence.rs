//! Persistence commands: DUMP and RESTORE (Redis's serialization: RDB value, RDB
//! version, CRC64), SAVE, BGSAVE, LASTSAVE. The format lives in `persistence::rdb`,
//! the snapshot machinery in `persistence::snapshot`; handlers only parse arguments
//! and apply results to the keyspace.

use crate::command;
use crate::commands::ctx::notify;
use crate::commands::flags::*;
use crate::commands::{arg_i64, errors, is, Command, Ctx};
use crate::keyspace::{lfu_initial, lru_clock, Value};
use crate::persistence::{aof, rdb, snapshot};
use crate::protocol::Reply;

pub static COMMANDS: &[Command] = &[
    command!("dump", 2, READONLY, (1, 1, 1), &["keyspace", "read", "slow"], "generic", "2.6.0", "Returns a serialized representation of the value stored at a key.", "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).", dump),
    command!("save", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, (0, 0, 0), &["admin", "slow", "dangerous"], "server", "1.0.0", "Synchronously saves the database(s) to disk.", "O(N) where N is the total number of keys in all databases", save),
    command!("bgsave", -1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, (0, 0, 0), &["admin", "slow", "dangerous"], "server", "1.0.0", "Asynchronously saves the database(s) to disk.", "O(1)", bgsave),
    command!("bgrewriteaof", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, (0, 0, 0), &["admin", "slow", "dangerous"], "server", "1.0.0", "Asynchronously rewrites the append-only file to disk.", "O(1)", bgrewriteaof),
    command!("lastsave", 1, LOADING | STALE | FAST, (0, 0, 0), &["admin", "fast", "dangerous"], "server", "1.0.0", "Returns the Unix timestamp of the last successful save to disk.", "O(1)", lastsave),
    command!("restore", -4, WRITE | DENYOOM, (1, 1, 1), &["keyspace", "write", "slow", "dangerous"], "generic", "2.6.0", "Creates a key from the serialized representation of a value.", "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).", restore),
];

fn save(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    if ctx.ex.persist.bgsave_in_progress() {
        return Reply::err("ERR Background save already in progress");
    }
    match snapshot::save(ctx.ex) {
        Ok(()) => Reply::ok(),
        Err(_) => Reply::err("ERR"),
    }
}

fn bgsave(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let schedule = match args.len() {
        1 => false,
        2 if is(args[1], "schedule") => true,
        _ => return errors::SYNTAX,
    };
    // Redis's order: an RDB save in progress is an error even with SCHEDULE; any
    // other background work (an AOF rewrite) or being inside MULTI schedules.
    if ctx.ex.persist.bgsave_in_progress() {
        return Reply::err("ERR Background save already in progress");
    }
    if aof::rewrite_in_progress(ctx.ex) || ctx.client_ref().in_exec {
        if schedule || ctx.client_ref().in_exec {
            ctx.ex.persist.scheduled = true;
            return Reply::Status("Background saving scheduled".into());
        }
        return Reply::err("ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.");
    }
    if snapshot::bgsave_start(ctx.ex) {
        Reply::Status("Background saving started".into())
    } else {
        Reply::err("ERR")
    }
}

fn bgrewriteaof(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    if ctx.ex.aof.is_none() {
        if ctx.ex.persist.off_rewrite.is_some() {
            return Reply::err("ERR Background append only file rewriting already in progress");
        }
        if ctx.ex.persist.busy() || ctx.client_ref().in_exec {
            ctx.ex.persist.off_rewrite_scheduled = true;
            return Reply::Status("Background append only file rewriting scheduled".into());
        }
        return match aof::start_rewrite_off(ctx.ex) {
            Ok(()) => Reply::Status("Background append only file rewriting started".into()),
            Err(e) => {
                crate::log::warning(&format!(
                    "Can't rewrite append only file in background: {e}"
                ));
                Reply::err("ERR Can't execute an AOF background rewriting. Please check the server logs for more information.")
            }
        };
    }
    if aof::rewrite_in_progress(ctx.ex) {
        return Reply::err("ERR Background append only file rewriting already in progress");
    }
    // While the AOF cannot be written the rewrite waits for the write to succeed
    // (its image would hold the commands still buffered for the old file).
    let write_failing = ctx.ex.aof.as_ref().is_some_and(|a| a.last_write_errno != 0);
    if ctx.ex.persist.busy() || ctx.client_ref().in_exec || write_failing {
        if let Some(a) = ctx.ex.aof.as_mut() {
            a.rewrite_scheduled = true;
        }
        return Reply::Status("Background append only file rewriting scheduled".into());
    }
    match aof::start_rewrite(ctx.ex) {
        Ok(()) => Reply::Status("Background append only file rewriting started".into()),
        Err(e) => {
            crate::log::warning(&format!(
                "Can't rewrite append only file in background: {e}"
            ));
            Reply::err("ERR Can't execute an AOF background rewriting. Please check the server logs for more information.")
        }
    }
}

fn lastsave(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Int(ctx.ex.persist.lastsave)
}

fn dump(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match ctx.lookup_read(args[1]) {
        None => Reply::Null,
        Some(e) => Reply::Bulk(rdb::dump_payload(e.value())),
    }
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f], with Redis's
/// order of checks (options, BUSYKEY, TTL, payload).
pub(crate) fn restore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let key = args[1];
    let (mut replace, mut absttl) = (false, false);
    let mut idle: Option<i64> = None;
    let mut freq: Option<i64> = None;
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - j - 1;
        if is(args[j], "replace") {
            replace = true;
        } else if is(args[j], "absttl") {
            absttl = true;
        } else if is(args[j], "idletime") && more >= 1 && freq.is_none() {
            let v = match arg_i64(args[j + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if v < 0 {
                return Reply::err("ERR Invalid IDLETIME value, must be >= 0");
            }
            idle = Some(v);
            j += 1;
        } else if is(args[j], "freq") && more >= 1 && idle.is_none() {
            let v = match arg_i64(args[j + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if !(0..=255).contains(&v) {
                return Reply::err("ERR Invalid FREQ value, must be >= 0 and <= 255");
            }
            freq = Some(v);
            j += 1;
        } else {
            return errors::SYNTAX;
        }
        j += 1;
    }
    if !replace && ctx.exists(key) {
        return Reply::err("BUSYKEY Target key name already exists.");
    }
    let ttl = match arg_i64(args[2]) {
        Ok(t) if t < 0 => return Reply::err("ERR Invalid TTL value, must be >= 0"),
        Ok(t) => t,
        Err(e) => return e,
    };
    let lim = rdb::Limits::from_config(&ctx.ex.config);
    let check = crate::persistence::restore_check(ctx.ex, ctx.client);
    let value = match rdb::restore_payload_checked(args[3], &lim, check) {
        Err(rdb::Error::Checksum { .. }) | Err(rdb::Error::Version(_)) => {
            return Reply::err("ERR DUMP payload version or checksum are wrong")
        }
        Err(e) => {
            // Redis logs the loader's reason at verbose level and replies only this.
            crate::log::verbose(&format!("Internal error in RDB reading -> {}", e.reason()));
            return Reply::err("ERR Bad data format");
        }
        Ok(None) => return Reply::err("ERR Bad data format"),
        Ok(Some(v)) => v,
    };
    let deleted = replace && ctx.delete(key);
    let expire = match ttl {
        0 => None,
        t if absttl => Some(t),
        t => Some(t.saturating_add(ctx.now_ms)),
    };
    if expire.is_some_and(|at| at <= ctx.now_ms) {
        // Already expired: the key is not created (a replaced key stays deleted, and
        // that deletion is what replicas and the AOF get, as Redis's restoreCommand).
        if deleted {
            ctx.notify(notify::GENERIC, "del", key);
            let name: &[u8] = if ctx.ex.config.lazyfree_lazy_server_del {
                b"UNLINK"
            } else {
                b"DEL"
            };
            ctx.propagate_as(vec![vec![name.to_vec(), key.to_vec()]]);
        }
        return Reply::ok();
    }
    install(ctx, key, value, expire);
    let lfu = ctx.ex.ks.lfu;
    let now = ctx.now_ms;
    let field = match (lfu, freq, idle) {
        (true, Some(f), _) => Some((lfu_initial(now) & !0xFF) | f as u32),
        (false, _, Some(s)) => Some(lru_clock(now.saturating_sub(s.saturating_mul(1000)))),
        _ => None,
    };
    if let Some(field) = field {
        if let Some(mut e) = ctx.ex.ks.dbs[ctx.db].table.get_mut(key) {
            e.set_lru(field);
        }
    }
    // Sent as given, except that a relative TTL becomes the absolute time plus ABSTTL
    // (Redis 7), so that replay does not depend on when it happens.
    let mut prop: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    if let (Some(at), false) = (expire, absttl) {
        prop[2] = at.to_string().into_bytes();
        prop.push(b"ABSTTL".to_vec());
    }
    ctx.propagate_as(vec![prop]);
    ctx.notify(notify::GENERIC, "restore", key);
    Reply::ok()
}

/// Stores a decoded value, registering hash field TTLs for active expiry.
fn install(ctx: &mut Ctx, key: &[u8], value: Value, expire: Option<i64>) {
    let db = ctx.db;
    crate::persistence::register_field_ttls(&mut ctx.ex.ks, db, key, &value);
    ctx.set(key, value, expire, false);
}
