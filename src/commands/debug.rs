//! DEBUG: the subcommands Redis's test suite and tools use (OBJECT, POPULATE, SLEEP,
//! PROTOCOL, DIGEST, RELOAD, LOADAOF, PAUSE-CRON, the list encodings, ...).

use crate::commands::keys::help_reply;
use crate::commands::{arg_i64, errors, is, Ctx};
use crate::keyspace::{ObjRef, Value, ValueRef};
use crate::protocol::Reply;

/// DEBUG PROTOCOL <type>: one reply of each RESP type, for testing clients.
fn debug_protocol(ctx: &mut Ctx, name: &[u8]) -> Reply {
    let ints = || (0..3).map(Reply::Int).collect::<Vec<_>>();
    let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    match name.to_ascii_lowercase().as_slice() {
        b"string" => text("Hello World"),
        b"integer" => Reply::Int(12345),
        #[allow(clippy::approx_constant)] // Redis's test value, not pi
        b"double" => Reply::Double(3.141),
        b"bignum" => Reply::BigNumber(b"1234567999999999999999999999999999999".to_vec()),
        b"null" => Reply::Null,
        b"array" => Reply::Array(ints()),
        b"set" => Reply::Set(ints()),
        b"map" => Reply::Map((0..3).map(|j| (Reply::Int(j), Reply::Bool(j == 1))).collect()),
        b"attrib" => Reply::Multi(vec![
            Reply::Attribute(vec![(
                text("key-popularity"),
                Reply::Array(vec![text("key:123"), Reply::Int(90)]),
            )]),
            text("Some real reply following the attribute"),
        ]),
        b"push" if ctx.proto() < 3 => Reply::error("ERR RESP2 is not supported by this command".into()),
        b"push" => Reply::Multi(vec![
            Reply::Push(vec![text("server-cpu-usage"), Reply::Int(42)]),
            text("Some real reply following the push reply"),
        ]),
        b"true" => Reply::Bool(true),
        b"false" => Reply::Bool(false),
        b"verbatim" => Reply::Verbatim("txt", b"This is a verbatim\nstring".to_vec()),
        _ => Reply::error("ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false".into()),
    }
}

pub fn debug(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let sub = args[1];
    if is(sub, "help") {
        return help_reply(
            "DEBUG",
            &[
                "ASSERT",
                "    Crash by assertion failed.",
                "JMAP",
                "    Does nothing; kept for tools that call it.",
                "OBJECT <key>",
                "    Show low level info about the value of <key>.",
                "POPULATE <count> [<prefix>] [<size>]",
                "    Create <count> string keys named key:<num>. If <prefix> is specified then",
                "    it is used instead of the 'key' prefix. These are not propagated to",
                "    replicas. Cluster slots are not respected so keys not belonging to the",
                "    current node can be created in cluster mode.",
                "HTSTATS <dbid> [full]",
                "    Return hash table statistics of the specified Redis database.",
                "HTSTATS-KEY <key> [full]",
                "    Like HTSTATS but for the hash table stored at <key>'s value.",
                "DICT-RESIZING <0|1>",
                "    Enable or disable the main dict and expire dict resizing.",
                "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
                "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
                "    In case NEVER is provided the last observed peak will never be reset",
                "    In case RESET is provided the peak reset time will be restored to the default value",
                "REPLYBUFFER RESIZING <0|1>",
                "    Enable or disable the reply buffer resize cron job",
                "QUICKLIST-PACKED-THRESHOLD <size>",
                "    Sets the threshold for elements to be inserted as plain vs packed nodes",
                "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
                "LISTPACK <key>",
                "    Show low level info about the listpack encoding of <key>.",
                "QUICKLIST <key> [<0|1>]",
                "    Show low level info about the quicklist encoding of <key>.",
                "    The optional argument (0 by default) sets the level of detail",
                "PAUSE-CRON <0|1>",
                "    Stop periodic cron job processing.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiring keys in background when they are not",
                "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
                "    default.",
                "SEGFAULT",
                "    Crash the server with sigsegv.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
                "SET-DISABLE-DENY-SCRIPTS <0|1>",
                "    Enable or disable the deny-script flag of commands: with 1, scripts may call",
                "    commands flagged noscript (for tests).",
                "PROTOCOL <type>",
                "    Reply with a test value of the specified type. <type> can be: string,",
                "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
                "    true, false.",
                "LOADAOF",
                "    Flush the AOF buffers on disk and reload the AOF in memory.",
                "DIGEST",
                "    Output a hex signature representing the current DB content.",
                "DIGEST-VALUE <key> [<key> ...]",
                "    Output a hex signature of the values of all the specified keys.",
                "COMMAND-PANIC",
                "    Panic inside this command, to test that only the command fails.",
                "DROP-CLUSTER-PACKET-FILTER <packet-type>",
                "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
                "CLOSE-CLUSTER-LINK-ON-PACKET-DROP <0|1>",
                "    With 1, a packet dropped by the filter also closes its cluster link.",
                "CLUSTERLINK KILL <to|from|all> <node-id>",
                "    Kills the link based on the direction to/from (both) with the provided node.",
                "LOG <message>",
                "    Write <message> to the server log.",
                "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
                "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
            ],
        );
    }
    if is(sub, "replicate") && args.len() >= 3 {
        // Sent to replicas only (not the AOF), with no SELECT, as Redis's.
        let mut bytes = format!("*{}\r\n", args.len() - 2).into_bytes();
        for a in &args[2..] {
            crate::protocol::reply::encode_bulk(a, &mut bytes);
        }
        crate::replication::feed_raw(ctx.ex, &bytes);
        return Reply::ok();
    }
    // The crash paths on purpose: the log gets the crash report (src/crash.rs).
    if is(sub, "segfault") && args.len() == 2 {
        crate::crash::segfault();
    }
    if is(sub, "assert") && args.len() == 2 {
        let use_exit = ctx.ex.config.stored_bool("use-exit-on-panic");
        crate::crash::assertion_failed(file!(), line!(), "1 == 2", use_exit);
    }
    if is(sub, "sleep") && args.len() == 3 {
        let Some(secs) = crate::util::numeric::parse_f64(args[2]) else {
            return errors::NOT_FLOAT;
        };
        if secs > 0.0 {
            std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(1e6)));
        }
        return Reply::ok();
    }
    if is(sub, "protocol") && args.len() == 3 {
        return debug_protocol(ctx, args[2]);
    }
    if is(sub, "set-disable-deny-scripts") && args.len() == 3 {
        // atoi: anything not a number is 0.
        let on = crate::util::numeric::parse_i64(args[2]).unwrap_or(0) != 0;
        ctx.ex.script_disable_deny = on;
        return Reply::ok();
    }
    if is(sub, "digest") && args.len() == 2 {
        let d = crate::commands::digest::dataset_digest(&ctx.ex.ks);
        return Reply::Status(crate::commands::digest::hex(&d).into());
    }
    if is(sub, "digest-value") {
        // Like Redis, logically expired keys not yet deleted still count.
        let db = &ctx.ex.ks.dbs[ctx.db].table;
        let digests = args[2..]
            .iter()
            .map(|k| {
                let mut d = [0u8; 20];
                if let Some(e) = db.get(k) {
                    crate::commands::digest::value_digest(&mut d, e.value(), e.expire().is_some());
                }
                Reply::Status(crate::commands::digest::hex(&d).into())
            })
            .collect();
        return Reply::Array(digests);
    }
    if is(sub, "command-panic") && args.len() == 2 {
        // Tests the executor's guard: a command's panic costs that command only.
        panic!("DEBUG COMMAND-PANIC");
    }
    if is(sub, "populate") && (3..=5).contains(&args.len()) {
        return debug_populate(ctx, args);
    }
    if is(sub, "object") && args.len() == 3 {
        // The key as stored, even if logically expired (on a replica, until its
        // master's DEL): DEBUG OBJECT neither expires keys nor counts hits and misses
        // (Redis looks in the dictionary directly).
        let now = ctx.now_ms;
        let pk = crate::commands::lists::packing(ctx);
        return match ctx.ex.ks.dbs[ctx.db].table.get(args[2]) {
            None => errors::NO_SUCH_KEY,
            Some(e) => {
                let extra = match e.value() {
                    ValueRef::Obj(ObjRef::List(l)) if l.encoding() == "quicklist" => {
                        crate::commands::lists::debug_object_fields(pk, l)
                    }
                    _ => String::new(),
                };
                Reply::Status(
                    format!(
                        "Value at:{:p} refcount:1 encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}{extra}",
                        e.key().as_ptr(),
                        e.value().encoding(),
                        e.value().string_len(),
                        e.lru(),
                        crate::keyspace::lru_idle_ms(e.lru(), now) / 1000
                    )
                    .into(),
                )
            }
        };
    }
    if is(sub, "htstats") && args.len() >= 3 {
        return super::debug_htstats::htstats(ctx, args);
    }
    if is(sub, "htstats-key") && args.len() >= 3 {
        return super::debug_htstats::htstats_key(ctx, args);
    }
    if is(sub, "dict-resizing") && args.len() == 3 {
        // Redis's server.dict_resizing: 0 stops the timer from shrinking sparse
        // tables (growth on insert goes on).
        ctx.ex.ks.dict_resizing = crate::util::numeric::parse_i64(args[2]).unwrap_or(0) != 0;
        return Reply::ok();
    }
    if is(sub, "quicklist-packed-threshold") && args.len() == 3 {
        let size = std::str::from_utf8(args[2])
            .ok()
            .and_then(crate::config::parse_memory);
        return match size {
            Some(sz) if crate::types::list::set_packed_threshold(sz) => Reply::ok(),
            _ => {
                Reply::err("ERR argument must be a memory value bigger than 1 and smaller than 4gb")
            }
        };
    }
    if (is(sub, "listpack") && args.len() == 3)
        || (is(sub, "quicklist") && (args.len() == 3 || args.len() == 4))
    {
        return debug_structure(ctx, args);
    }
    if is(sub, "replybuffer") && args.len() == 4 {
        return debug_replybuffer(ctx, args);
    }
    if is(sub, "pause-cron") && args.len() == 3 {
        // As Redis's atoi: a leading integer, anything else reads as 0.
        ctx.ex.cron_paused = leading_int(args[2]) != 0;
        return Reply::ok();
    }
    if is(sub, "set-active-expire") && args.len() == 3 {
        ctx.ex.active_expire = args[2] != b"0";
        return Reply::ok();
    }
    if is(sub, "loadaof") && args.len() == 2 {
        // The AOF's buffered tail reaches the file, then the dataset is rebuilt from it.
        if ctx.ex.config.appendonly {
            crate::persistence::aof::flush(ctx.ex);
        }
        ctx.ex.signal_flushed_db(None);
        ctx.ex.ks.flush_all(false);
        crate::scripting::functions::flush_libraries(ctx.ex);
        if let Err(e) = crate::persistence::aof::load_with_retry(ctx.ex) {
            crate::log::warning(&format!("DEBUG LOADAOF: {e}"));
            return Reply::err("ERR Error trying to load the AOF files, check server logs.");
        }
        ctx.ex.ks.dirty = 0;
        crate::log::notice("Append Only File loaded by DEBUG LOADAOF");
        return Reply::ok();
    }
    if is(sub, "reload") {
        let mut opts = crate::persistence::snapshot::ReloadOptions {
            save: true,
            flush: true,
            merge: false,
        };
        for opt in &args[2..] {
            if is(opt, "merge") {
                opts.merge = true;
            } else if is(opt, "noflush") {
                opts.flush = false;
            } else if is(opt, "nosave") {
                opts.save = false;
            } else {
                return Reply::err(
                    "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
                );
            }
        }
        return match crate::persistence::snapshot::debug_reload(ctx.ex, opts) {
            Ok(()) => Reply::ok(),
            Err(e) => Reply::error(format!("ERR {e}")),
        };
    }
    if is(sub, "config-rewrite-force-all") && args.len() == 2 {
        let Some(path) = ctx.ex.config.config_file.clone() else {
            return Reply::err("ERR The server is running without a config file");
        };
        return match crate::config_rewrite::rewrite_file_with(&path, &ctx.ex.config, true) {
            Ok(()) => Reply::ok(),
            Err(e) => Reply::error(format!(
                "ERR CONFIG-REWRITE-FORCE-ALL failed: {}",
                crate::config::strerror(&e)
            )),
        };
    }
    if is(sub, "log") && args.len() == 3 {
        crate::log::warning(&format!("DEBUG LOG: {}", String::from_utf8_lossy(args[2])));
        return Reply::ok();
    }
    if is(sub, "set-skip-checksum-validation") && args.len() == 3 {
        // atoi: anything not a number is 0.
        ctx.ex.persist.skip_checksum = leading_int(args[2]) != 0;
        return Reply::ok();
    }
    if is(sub, "jmap") {
        return Reply::ok();
    }
    // DEBUG AOF-SPACE <bytes>|-1 and DEBUG AOF-FSYNC-ERROR <errno>|0: the AOF's
    // incremental file fails as on a full disk once it has grown by <bytes>, and the
    // everysec fsync fails with <errno> (tests of the disk-error paths). DEBUG
    // AOF-FLUSH-SLEEP <usec>: Redis's sleep before each AOF write. DEBUG
    // AOF-FSYNC-SLEEP <ms>: the everysec fsync takes that much longer (a busy disk).
    if (is(sub, "aof-flush-sleep") || is(sub, "aof-fsync-sleep")) && args.len() == 3 {
        let n = match arg_i64(args[2]) {
            Ok(n) => n.max(0) as u64,
            Err(e) => return e,
        };
        if let Some(aof) = ctx.ex.aof.as_mut() {
            if is(sub, "aof-flush-sleep") {
                aof.flush_sleep_us = n;
            } else {
                aof.fsync_sleep = std::time::Duration::from_millis(n);
            }
        }
        return Reply::ok();
    }
    if (is(sub, "aof-space") || is(sub, "aof-fsync-error")) && args.len() == 3 {
        let n = match arg_i64(args[2]) {
            Ok(n) => n,
            Err(e) => return e,
        };
        let Some(aof) = ctx.ex.aof.as_mut() else {
            return Reply::err("ERR The AOF is off");
        };
        if is(sub, "aof-space") {
            aof.space_left = u64::try_from(n).ok();
        } else {
            aof.fsync_fail_with = i32::try_from(n).unwrap_or(libc::EIO);
        }
        return Reply::ok();
    }
    if let Some(r) = crate::cluster::debug::debug(ctx.ex, args) {
        return r;
    }
    if let Some(r) = crate::persistence::snapshot::debug(ctx.ex, sub, args.get(2).copied()) {
        return match r {
            Ok(n) => Reply::Int(n),
            Err(e) => Reply::error(e),
        };
    }
    Reply::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
        String::from_utf8_lossy(sub)
    ))
}

/// DEBUG LISTPACK <key> and DEBUG QUICKLIST <key> [0|1]: print the value's layout on
/// stdout, as Redis does (lists list their nodes; other listpack values their kind).
fn debug_structure(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let quicklist = is(args[1], "quicklist");
    let full = args.get(3).is_some_and(|a| a != b"0");
    let (db, now) = (ctx.db, ctx.now_ms);
    let Some(e) = ctx.ex.ks.lookup(db, args[2], now, false) else {
        return errors::NO_SUCH_KEY;
    };
    let value = e.value();
    let encoding = value.encoding();
    if quicklist && encoding != "quicklist" {
        return Reply::err("ERR Not a quicklist encoded object.");
    }
    if !quicklist && encoding != "listpack" && encoding != "listpackex" {
        return Reply::err("ERR Not a listpack encoded object.");
    }
    let text = match value {
        ValueRef::Obj(ObjRef::List(l)) => l.repr(full || !quicklist),
        _ => format!("{{listpack {encoding}}}\n"),
    };
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
    Reply::Status(if quicklist {
        "Quicklist structure printed on stdout".into()
    } else {
        "Listpack structure printed on stdout".into()
    })
}

/// DEBUG POPULATE count [prefix] [size]: creates `prefix:N` → `value:N` (padded with
/// zero bytes or truncated to `size`), skipping keys that exist.
fn debug_populate(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let count = match crate::commands::arg_positive(args[2], None) {
        Ok(n) => n as u64,
        Err(e) => return e,
    };
    let prefix: &[u8] = args.get(3).copied().unwrap_or(b"key");
    let size = match args.get(4) {
        None => None,
        Some(a) => match crate::commands::arg_positive(a, None) {
            Ok(n) => Some(n as usize),
            Err(e) => return e,
        },
    };
    let db = ctx.db;
    // Sized for `count` keys first, as Redis's dbExpand here.
    let keys = usize::try_from(count).unwrap_or(usize::MAX);
    if !ctx.ex.ks.dbs[db].table.expand(keys) {
        return Reply::err("ERR OOM in dictTryExpand");
    }
    let mut key = Vec::with_capacity(prefix.len() + 21);
    for j in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        crate::util::numeric::format_i64(j as i64, &mut key);
        if ctx.ex.ks.dbs[db].table.contains(&key) {
            continue;
        }
        let mut val = b"value:".to_vec();
        crate::util::numeric::format_i64(j as i64, &mut val);
        if let Some(size) = size {
            val.resize(size, 0);
        }
        ctx.add(db, &key, Value::Str(val), None);
    }
    Reply::ok()
}

/// C's `atoi`: the optional sign and digits at the start, 0 when there are none.
/// DEBUG REPLYBUFFER PEAK-RESET-TIME <ms|NEVER|RESET> and RESIZING <0|1>: the
/// adaptive reply buffer's knobs (exec/client_mem.rs).
fn debug_replybuffer(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let m = &mut ctx.ex.client_mem;
    if is(args[2], "peak-reset-time") {
        if is(args[3], "never") {
            m.peak_reset_ms = -1;
        } else if is(args[3], "reset") {
            m.peak_reset_ms = crate::exec::client_mem::DEFAULT_PEAK_RESET_MS;
        } else {
            match crate::util::numeric::parse_i64(args[3]) {
                Some(ms) => m.peak_reset_ms = ms,
                None => return Reply::err("ERR value is not an integer or out of range"),
            }
        }
    } else if is(args[2], "resizing") {
        m.resizing = leading_int(args[3]) != 0;
    } else {
        return Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(args[1])
        ));
    }
    Reply::ok()
}

fn leading_int(arg: &[u8]) -> i64 {
    let (neg, digits) = match arg.first() {
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        _ => (false, arg),
    };
    let n = digits
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i64, |n, &b| {
            n.wrapping_mul(10).wrapping_add(i64::from(b - b'0'))
        });
    if neg {
        -n
    } else {
        n
    }
}
