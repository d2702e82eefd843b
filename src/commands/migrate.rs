//! MIGRATE and RESTORE-ASKING (Redis 7.4's migrateCommand and restoreCommand).
//!
//! MIGRATE serializes the keys here (the DUMP payload, with each key's remaining TTL)
//! and hands the exchange with the target to the worker thread of
//! `migrate_conn`, which owns the cached connections. Redis blocks its whole event
//! loop for the transfer; here only the calling client waits (it is blocked through
//! `exec::blocking` with no key, like a blocking FLUSH), and its answer comes when
//! the worker reports (`collect`, called by the network loop every turn while a
//! job is in flight). To keep Redis's guarantee — a key acknowledged as migrated is
//! on the target and no longer here, and no write is lost — the keys being moved
//! (without COPY) are locked meanwhile: any command that may write one of them, and
//! SWAPDB, waits (`holds`, consulted by `Executor::can_run`) until the outcome has
//! been applied, so the value the target received is the value deleted here. Reads
//! go on. Inside MULTI/EXEC or a script, which cannot block, MIGRATE waits for the
//! worker as Redis does.
//!
//! On success the acknowledged keys are deleted with Redis's side effects: `del`
//! notification, modified-key signal, and one `DEL k…` in the write stream (nothing
//! with COPY).

use crate::command;
use crate::commands::ctx::notify;
use crate::commands::flags::*;
use crate::commands::migrate_conn::{Job, Outcome};
use crate::commands::{arg_i64, errors, is, Command, Ctx};
use crate::exec::{blocking, Executor};
use crate::keyspace::Keyspace;
use crate::persistence::rdb::sliced::{self, SlicedDump, Step};
use crate::protocol::Reply;
use std::time::{Duration, Instant};

pub static COMMANDS: &[Command] = &[
    command!("migrate", -6, WRITE | MOVABLE_KEYS, (3, 3, 1), &["keyspace", "write", "slow", "dangerous"], "generic", "2.6.0", "Atomically transfers a key from one Redis instance to another.", "This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.", migrate),
    command!("restore-asking", -4, WRITE | DENYOOM | ASKING, (1, 1, 1), &["keyspace", "write", "slow", "dangerous"], "server", "3.0.0", "An internal command for migrating keys in a cluster.", "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).", restore_asking),
];

/// A MIGRATE whose exchange is in flight.
pub struct Pending {
    /// The calling client (slot and id: the slot may be reused after a disconnect).
    slot: usize,
    client_id: u64,
    db: usize,
    keys: Vec<Vec<u8>>,
    copy: bool,
    /// The command as given and when it started: the slow log records the whole
    /// transfer, as Redis's (whose MIGRATE holds the server that long).
    args: Vec<Vec<u8>>,
    started: std::time::Instant,
}

/// MIGRATE's options, parsed as Redis parses them.
struct Options {
    copy: bool,
    replace: bool,
    auth: Option<(Option<Vec<u8>>, Vec<u8>)>,
    first_key: usize,
    num_keys: usize,
}

fn parse_options(args: &[&[u8]]) -> Result<Options, Reply> {
    let mut o = Options {
        copy: false,
        replace: false,
        auth: None,
        first_key: 3,
        num_keys: 1,
    };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(args[j], "copy") {
            o.copy = true;
        } else if is(args[j], "replace") {
            o.replace = true;
        } else if is(args[j], "auth") {
            if more < 1 {
                return Err(errors::SYNTAX);
            }
            j += 1;
            o.auth = Some((None, args[j].to_vec()));
        } else if is(args[j], "auth2") {
            if more < 2 {
                return Err(errors::SYNTAX);
            }
            o.auth = Some((Some(args[j + 1].to_vec()), args[j + 2].to_vec()));
            j += 2;
        } else if is(args[j], "keys") {
            if !args[3].is_empty() {
                return Err(Reply::err(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            o.first_key = j + 1;
            o.num_keys = args.len() - j - 1;
            break;
        } else {
            return Err(errors::SYNTAX);
        }
        j += 1;
    }
    Ok(o)
}

/// The key positions of a MIGRATE (Redis's migrateGetKeys): the key argument, or
/// every argument after KEYS (none when KEYS follows a non-empty key argument).
pub fn key_positions(args: &[&[u8]]) -> Vec<usize> {
    let (mut first, mut num) = (3, 1);
    let mut i = 6;
    while i < args.len() {
        if is(args[i], "keys") {
            if args[3].is_empty() {
                first = i + 1;
                num = args.len() - first;
            } else {
                num = 0;
            }
            break;
        }
        if is(args[i], "auth") {
            i += 1;
        } else if is(args[i], "auth2") {
            i += 2;
        }
        i += 1;
    }
    (first..first + num).filter(|&p| p < args.len()).collect()
}

/// Whether argument `i` of a MIGRATE is a credential, shown as `(redacted)` in
/// MONITOR and the slow log (Redis redacts AUTH's password and AUTH2's pair).
pub fn redacted(args: &[&[u8]], i: usize) -> bool {
    let mut j = 6;
    while j < args.len() {
        if is(args[j], "auth") && j + 1 < args.len() {
            if i == j + 1 {
                return true;
            }
            j += 1;
        } else if is(args[j], "auth2") && j + 2 < args.len() {
            if i == j + 1 || i == j + 2 {
                return true;
            }
            j += 2;
        } else if is(args[j], "keys") {
            return false;
        }
        j += 1;
    }
    false
}

fn restore_asking(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    super::persistence::restore(ctx, args)
}

/// Serialization of big keys runs this long per event-loop turn.
const SLICE: Duration = Duration::from_millis(1);
/// Elements encoded between two looks at the clock.
const STEP_ELEMENTS: usize = 512;

/// A key's DUMP payload in the making.
enum Payload {
    /// Done: the payload, in pieces.
    Whole(Vec<Vec<u8>>),
    Sliced(SlicedDump),
    /// The key went (it expired, its database was flushed) before its encoding
    /// ended: it is not migrated, as if that had happened before the MIGRATE.
    Gone,
}

struct KeyDump {
    key: Vec<u8>,
    expire_at: Option<i64>,
    payload: Payload,
}

/// A MIGRATE whose big keys are being serialized a slice per loop turn
/// (`serialize_slice`); its transfer starts when the last one is done.
pub struct Serializing {
    pending: Pending,
    job: Job,
    replace: bool,
    restore_name: &'static [u8],
    dumps: Vec<KeyDump>,
}

fn migrate(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let o = match parse_options(args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let timeout = match arg_i64(args[5]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let dbid = match arg_i64(args[4]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let timeout = if timeout <= 0 { 1000 } else { timeout };
    let restore_name: &'static [u8] = if ctx.ex.cluster.is_some() {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    let mut job = Job::new(args[1], args[2], timeout, dbid);
    job.auth = o.auth.clone();
    // Inside MULTI/EXEC and scripts (and the embedded API) MIGRATE cannot block: it
    // is done in place, as Redis. On a replica the master's stream writes to locked
    // keys too, so nothing may be encoded across turns there.
    let in_place =
        ctx.ex.blocking.deny_blocking || ctx.ex.repl.registry.is_none() || ctx.ex.repl.is_replica();
    let now = ctx.now_ms;
    let mut dumps = Vec::new();
    for &key in &args[o.first_key..o.first_key + o.num_keys] {
        let Some(e) = ctx.lookup_read(key) else {
            continue;
        };
        let expire_at = e.expire();
        if expire_at.is_some_and(|at| at - now < 0) {
            continue;
        }
        let sliced = match in_place {
            true => None,
            false => SlicedDump::begin(e.value(), sliced::MIN_ELEMENTS),
        };
        let payload = match sliced {
            Some(d) => Payload::Sliced(d),
            None => Payload::Whole(vec![crate::persistence::rdb::dump_payload(e.value())]),
        };
        dumps.push(KeyDump {
            key: key.to_vec(),
            expire_at,
            payload,
        });
    }
    if dumps.is_empty() {
        // Nothing here to move (often a key that just expired): not an error.
        return Reply::Status("NOKEY".into());
    }
    let client_id = ctx.client_ref().id;
    let mut ser = Serializing {
        pending: Pending {
            slot: ctx.client,
            client_id,
            db: ctx.db,
            keys: Vec::new(),
            copy: o.copy,
            args: args.iter().map(|a| a.to_vec()).collect(),
            started: std::time::Instant::now(),
        },
        job,
        replace: o.replace,
        restore_name,
        dumps,
    };
    let deadline = Instant::now() + SLICE;
    if !encode(&ctx.ex.ks, ctx.db, &mut ser.dumps, Some(deadline)) {
        // Big keys: the rest is encoded a slice per loop turn, the keys locked
        // meanwhile (with COPY too, so the value does not change under the encoder).
        for d in &ser.dumps {
            ctx.ex.migrate.locked.insert((ctx.db, d.key.clone()));
        }
        ctx.ex.migrate.serializing.push(ser);
        return blocking::block(ctx, args, &[], "migrate", None, Reply::NoReply);
    }
    let (job, pending) = match into_job(ser, now) {
        Ok(j) => j,
        Err(nokey) => return nokey,
    };
    if in_place {
        let outcome = ctx.ex.migrate.run_now(job);
        return finish_in_command(ctx, &pending.keys, pending.copy, outcome);
    }
    start_transfer(ctx.ex, job, pending);
    blocking::block(ctx, args, &[], "migrate", None, Reply::NoReply)
}

/// Encodes the keys' payloads until all are done (true) or `deadline` passes.
fn encode(ks: &Keyspace, db: usize, dumps: &mut [KeyDump], deadline: Option<Instant>) -> bool {
    for d in dumps.iter_mut() {
        while let Payload::Sliced(s) = &mut d.payload {
            let Some(e) = ks.dbs[db].table.get(&d.key) else {
                d.payload = Payload::Gone;
                break;
            };
            match s.step(e.value(), STEP_ELEMENTS) {
                Step::More => {}
                Step::Done => {
                    if let Payload::Sliced(s) = std::mem::replace(&mut d.payload, Payload::Gone) {
                        d.payload = Payload::Whole(s.finish());
                    }
                    break;
                }
                Step::Changed => {
                    // Not the value the encoding began with (the dataset was reloaded,
                    // a field expired): encoded whole now.
                    d.payload =
                        Payload::Whole(vec![crate::persistence::rdb::dump_payload(e.value())]);
                    break;
                }
            }
            if deadline.is_some_and(|t| Instant::now() >= t) {
                return false;
            }
        }
    }
    true
}

/// The RESTOREs of the encoded keys, each with its TTL as of `now`; `Err(+NOKEY)`
/// when every key went meanwhile.
fn into_job(ser: Serializing, now: i64) -> Result<(Job, Pending), Reply> {
    let Serializing {
        mut pending,
        mut job,
        replace,
        restore_name,
        dumps,
    } = ser;
    for d in dumps {
        let Payload::Whole(payload) = d.payload else {
            continue;
        };
        // A key that expired while big keys were encoded was alive when MIGRATE ran:
        // it goes with the shortest TTL, as if the transfer had been instant.
        let ttl = d.expire_at.map_or(0, |at| (at - now).max(1)).to_string();
        let mut argv: Vec<&[u8]> = vec![restore_name, &d.key, ttl.as_bytes()];
        if replace {
            argv.push(b"REPLACE");
        }
        job.restores.push_with(&argv, 3, payload);
        pending.keys.push(d.key);
    }
    if pending.keys.is_empty() {
        return Err(Reply::Status("NOKEY".into()));
    }
    job.nkeys = pending.keys.len();
    Ok((job, pending))
}

/// Hands the exchange to the worker; the keys stay locked until its outcome is
/// applied unless COPY.
fn start_transfer(ex: &mut Executor, job: Job, pending: Pending) {
    let id = ex.migrate.submit(ex.repl.registry.as_ref(), job);
    if !pending.copy {
        for k in &pending.keys {
            ex.migrate.locked.insert((pending.db, k.clone()));
        }
    }
    ex.migrate.in_flight.insert(id, pending);
}

/// One slice of the serializations in progress (called by the network loop every
/// turn while any is): those that end start their transfer, or answer `+NOKEY`.
pub fn serialize_slice(ex: &mut Executor) {
    let deadline = Instant::now() + SLICE;
    while let Some(ser) = ex.migrate.serializing.first_mut() {
        let db = ser.pending.db;
        if !encode(&ex.ks, db, &mut ser.dumps, Some(deadline)) {
            return;
        }
        let ser = ex.migrate.serializing.remove(0);
        for d in &ser.dumps {
            ex.migrate.locked.remove(&(db, d.key.clone()));
        }
        let (slot, client_id) = (ser.pending.slot, ser.pending.client_id);
        match into_job(ser, crate::keyspace::unix_ms()) {
            Ok((job, pending)) => start_transfer(ex, job, pending),
            Err(nokey) => {
                let alive = ex.clients().any(|(s, c)| s == slot && c.id == client_id);
                if alive && ex.blocking.is_blocked(slot) {
                    blocking::unblock_with(ex, slot, &nokey);
                }
            }
        }
        if Instant::now() >= deadline {
            return;
        }
    }
}

fn outcome_reply(o: &Outcome) -> Reply {
    match o {
        Outcome::Ok => Reply::ok(),
        Outcome::Failed { error, .. } => Reply::error(error.clone()),
    }
}

/// Applies an outcome inside the MIGRATE command itself (MULTI/EXEC, scripts).
fn finish_in_command(ctx: &mut Ctx, keys: &[Vec<u8>], copy: bool, outcome: Outcome) -> Reply {
    if !copy {
        let mut del: Vec<Vec<u8>> = vec![b"DEL".to_vec()];
        for (key, acked) in keys.iter().zip(outcome.acked(keys.len())) {
            if acked && ctx.delete(key) {
                ctx.notify(notify::GENERIC, "del", key);
                del.push(key.clone());
            }
        }
        if del.len() > 1 {
            ctx.propagate_as(vec![del]);
        }
    }
    outcome_reply(&outcome)
}

/// Applies the outcomes the worker reported: deletes acknowledged keys, unlocks,
/// answers the waiting clients. Called by the network loop while jobs are in flight.
pub fn collect(ex: &mut Executor) {
    for (id, outcome) in ex.migrate.finished() {
        let Some(p) = ex.migrate.in_flight.remove(&id) else {
            continue;
        };
        if !p.copy {
            for k in &p.keys {
                ex.migrate.locked.remove(&(p.db, k.clone()));
            }
        }
        let alive = ex
            .clients()
            .any(|(s, c)| s == p.slot && c.id == p.client_id);
        if !p.copy {
            let mut deleted: Vec<&[u8]> = vec![b"DEL"];
            for (key, acked) in p.keys.iter().zip(outcome.acked(p.keys.len())) {
                if acked && ex.ks.delete(p.db, key) {
                    ex.ks.dirty += 1;
                    ex.blocking.signal(p.db, key);
                    ex.signal_modified_key(alive.then_some(p.slot), p.db, key);
                    ex.notify(notify::GENERIC, "del", p.db, key.clone());
                    deleted.push(key);
                }
            }
            if deleted.len() > 1 && ex.stream.enabled {
                ex.stream.append(p.db, &deleted);
                if alive {
                    // WAIT / WAITAOF after MIGRATE wait for this DEL.
                    let woff = crate::replication::write_offset(ex);
                    let pos = ex.stream.position();
                    let c = ex.client_mut(p.slot);
                    c.woff = woff;
                    c.aof_woff = pos;
                }
            }
            ex.deliver_notifications();
        }
        if alive {
            let argv: Vec<&[u8]> = p.args.iter().map(|a| a.as_slice()).collect();
            let usec = p.started.elapsed().as_micros() as u64;
            if let Some(cmd) = super::lookup(b"migrate") {
                ex.slowlog_maybe(p.slot, cmd, &argv, usec);
            }
        }
        if alive && ex.blocking.is_blocked(p.slot) {
            blocking::unblock_with(ex, p.slot, &outcome_reply(&outcome));
        }
    }
    if ex.blocking.has_ready() {
        blocking::handle_ready(ex);
    }
}

/// Whether `slot` is a client waiting for its MIGRATE (CLIENT UNBLOCK leaves it).
pub fn is_migrating_client(ex: &Executor, slot: usize) -> bool {
    ex.migrate.in_flight.values().any(|p| p.slot == slot)
        || ex
            .migrate
            .serializing
            .iter()
            .any(|s| s.pending.slot == slot)
}

/// Whether the command `args` of the client in `slot` must wait for a migration in
/// flight: it may write a key being moved (or is SWAPDB). Called only while some key
/// is locked.
pub fn holds(ex: &Executor, slot: usize, args: &[&[u8]]) -> bool {
    let c = ex.client(slot);
    if c.repl_role == Some('M') {
        return false;
    }
    let Some(cmd) = resolve(args) else {
        return false;
    };
    // DEBUG RELOAD and LOADAOF replace every value, under an encoder's feet too.
    if cmd.name == "debug"
        && args
            .get(1)
            .is_some_and(|a| is(a, "reload") || is(a, "loadaof"))
    {
        return true;
    }
    let db = c.db;
    let writes_locked = |cmd: &'static Command, args: &[&[u8]]| {
        let f = crate::scripting::command_flags(ex, cmd, args);
        if f & (WRITE | MAY_REPLICATE) == 0 {
            return false;
        }
        cmd.name == "swapdb"
            || crate::cluster::routing::command_keys(cmd, args)
                .into_iter()
                .any(|k| ex.migrate.locked.contains(&(db, k.to_vec())))
    };
    if cmd.name == "exec" {
        return c.tx.multi.as_ref().is_some_and(|m| {
            m.queue.iter().any(|q| {
                let qargs: Vec<&[u8]> = q.args.iter().map(|a| a.as_slice()).collect();
                writes_locked(q.cmd, &qargs)
            })
        });
    }
    writes_locked(cmd, args)
}

/// The command (or subcommand) `args` would run, if it exists and the arity fits.
fn resolve(args: &[&[u8]]) -> Option<&'static Command> {
    let mut cmd = super::lookup(args.first()?)?;
    if !cmd.subcommands.is_empty() && (args.len() >= 2 || cmd.arity != -1) {
        cmd = super::lookup_subcommand(cmd, args.get(1)?)?;
    }
    super::arity_ok(cmd.arity, args.len()).then_some(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<Vec<u8>> {
        s.split(' ')
            .map(|a| {
                if a == "''" {
                    vec![]
                } else {
                    a.as_bytes().to_vec()
                }
            })
            .collect()
    }

    #[test]
    fn key_positions_follow_migrate_get_keys() {
        let cases = [
            ("MIGRATE h 1 k 0 10", vec![3]),
            ("MIGRATE h 1 '' 0 10 KEYS a b", vec![7, 8]),
            ("MIGRATE h 1 '' 0 10 AUTH keys KEYS a", vec![9]),
            ("MIGRATE h 1 '' 0 10 AUTH2 keys keys KEYS a b", vec![10, 11]),
            ("MIGRATE h 1 k 0 10 KEYS a", vec![]),
            ("MIGRATE h 1 k 0 10 COPY REPLACE", vec![3]),
        ];
        for (cmd, want) in cases {
            let a = argv(cmd);
            let r: Vec<&[u8]> = a.iter().map(|x| x.as_slice()).collect();
            assert_eq!(key_positions(&r), want, "{cmd}");
        }
    }

    #[test]
    fn credentials_are_redacted() {
        let a = argv("MIGRATE h 1 k 0 10 AUTH2 u p KEYS auth x");
        let r: Vec<&[u8]> = a.iter().map(|x| x.as_slice()).collect();
        let red: Vec<usize> = (0..r.len()).filter(|&i| redacted(&r, i)).collect();
        assert_eq!(red, vec![7, 8]);
        let a = argv("MIGRATE h 1 k 0 10 AUTH secret");
        let r: Vec<&[u8]> = a.iter().map(|x| x.as_slice()).collect();
        let red: Vec<usize> = (0..r.len()).filter(|&i| redacted(&r, i)).collect();
        assert_eq!(red, vec![7]);
    }
}
