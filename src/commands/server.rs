//! Server commands: INFO, CONFIG, DBSIZE, FLUSHDB/FLUSHALL, SWAPDB, TIME, LOLWUT,
//! MEMORY, SLOWLOG and SHUTDOWN (DEBUG is in debug.rs).

use std::fmt::Write as _;

use crate::alloc::{human_bytes, peak_memory, rss, total_system_memory, used_memory};
use crate::commands::connection::REDIS_VERSION;
use crate::commands::flags::*;
use crate::commands::keys::help_reply;
use crate::commands::{arg_i64, errors, is, Command, Ctx};
use crate::config::{self, find_directive};
use crate::exec::shutdown::Outcome;
use crate::exec::ShutdownRequest;
use crate::keyspace::{unix_ms, ObjRef, ValueRef};
use crate::protocol::Reply;
use crate::{command, container};

const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

pub static COMMANDS: &[Command] = &[
    command!("info", -1, LOADING | STALE, (0, 0, 0), &["slow", "dangerous"], "server", "1.0.0", "Returns information and statistics about the server.", "O(1)", info),
    container!("config", &["slow"], "server", "2.0.0", "A container for server configuration commands.", CONFIG_SUBCOMMANDS),
    command!("dbsize", 1, READONLY | FAST, (0, 0, 0), &["keyspace", "read", "fast"], "server", "1.0.0", "Returns the number of keys in the database.", "O(1)", dbsize),
    command!("flushdb", -1, WRITE, (0, 0, 0), &["keyspace", "write", "slow", "dangerous"], "server", "1.0.0", "Remove all keys from the current database.", "O(N) where N is the number of keys in the selected database", flushdb),
    command!("flushall", -1, WRITE, (0, 0, 0), &["keyspace", "write", "slow", "dangerous"], "server", "1.0.0", "Removes all keys from all databases.", "O(N) where N is the total number of keys in all databases", flushall),
    command!("swapdb", 3, WRITE | FAST, (0, 0, 0), &["keyspace", "write", "fast", "dangerous"], "server", "4.0.0", "Swaps two Redis databases.", "O(N) where N is the count of clients watching or blocking on keys from both databases.", swapdb),
    command!("time", 1, LOADING | STALE | FAST, (0, 0, 0), &["fast"], "server", "2.6.0", "Returns the server time.", "O(1)", time),
    command!("lolwut", -1, READONLY | FAST, (0, 0, 0), &["read", "fast"], "server", "5.0.0", "Displays computer art and the Redis version", "", lolwut),
    command!("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED, (0, 0, 0), ADMIN_ACL, "server", "1.0.0", "A container for debugging commands.", "Depends on subcommand.", crate::commands::debug::debug),
    container!("memory", &["slow"], "server", "4.0.0", "A container for memory diagnostics commands.", MEMORY_SUBCOMMANDS),
    container!("slowlog", &["slow"], "server", "2.2.12", "A container for slow log commands.", SLOWLOG_SUBCOMMANDS),
    command!("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, (0, 0, 0), ADMIN_ACL, "server", "1.0.0", "Synchronously saves the database(s) to disk and shuts down the Redis server.", "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)", shutdown),
];

static CONFIG_SUBCOMMANDS: &[Command] = &[
    command!(
        "config|rewrite",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.8.0",
        "Persists the effective configuration to file.",
        "O(1)",
        config_rewrite
    ),
    command!(
        "config|get",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.0.0",
        "Returns the effective values of configuration parameters.",
        "O(N) when N is the number of configuration parameters provided",
        config_get
    ),
    command!(
        "config|set",
        -4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.0.0",
        "Sets configuration parameters in-flight.",
        "O(N) when N is the number of configuration parameters provided",
        config_set
    ),
    command!(
        "config|resetstat",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.0.0",
        "Resets the server's statistics.",
        "O(1)",
        config_resetstat
    ),
    command!(
        "config|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        &["slow"],
        "server",
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        config_help
    ),
];

static MEMORY_SUBCOMMANDS: &[Command] = &[
    command!(
        "memory|usage",
        -3,
        READONLY,
        (2, 2, 1),
        &["read", "slow"],
        "server",
        "4.0.0",
        "Estimates the memory usage of a key.",
        "O(N) where N is the number of samples.",
        memory_usage
    ),
    command!(
        "memory|stats",
        2,
        0,
        (0, 0, 0),
        &["slow"],
        "server",
        "4.0.0",
        "Returns details about memory usage.",
        "O(1)",
        memory_stats
    ),
    command!(
        "memory|doctor",
        2,
        0,
        (0, 0, 0),
        &["slow"],
        "server",
        "4.0.0",
        "Outputs a memory problems report.",
        "O(1)",
        memory_doctor
    ),
    command!(
        "memory|malloc-stats",
        2,
        0,
        (0, 0, 0),
        &["slow"],
        "server",
        "4.0.0",
        "Returns the allocator statistics.",
        "Depends on how much memory is allocated, could be slow",
        memory_malloc_stats
    ),
    command!(
        "memory|purge",
        2,
        0,
        (0, 0, 0),
        &["slow"],
        "server",
        "4.0.0",
        "Asks the allocator to release memory.",
        "Depends on how much memory is allocated, could be slow",
        memory_purge
    ),
    command!(
        "memory|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        &["slow"],
        "server",
        "4.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        memory_help
    ),
];

static SLOWLOG_SUBCOMMANDS: &[Command] = &[
    command!(
        "slowlog|get",
        -2,
        ADMIN | LOADING | STALE,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.2.12",
        "Returns the slow log's entries.",
        "O(N) where N is the number of entries returned",
        slowlog_get
    ),
    command!(
        "slowlog|len",
        2,
        ADMIN | LOADING | STALE,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.2.12",
        "Returns the number of entries in the slow log.",
        "O(1)",
        slowlog_len
    ),
    command!(
        "slowlog|reset",
        2,
        ADMIN | LOADING | STALE,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.2.12",
        "Clears all entries from the slow log.",
        "O(N) where N is the number of entries in the slowlog",
        slowlog_reset
    ),
    command!(
        "slowlog|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        &["slow"],
        "server",
        "6.2.0",
        "Show helpful text about the different subcommands",
        "O(1)",
        slowlog_help
    ),
];

// ----- INFO -----------------------------------------------------------------------

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];
const ALL_EXTRA: &[&str] = &["commandstats", "latencystats"];

fn info(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut wanted: Vec<String> = Vec::new();
    for a in &args[1..] {
        let s = String::from_utf8_lossy(a).to_ascii_lowercase();
        match s.as_str() {
            "default" => wanted.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string())),
            "all" | "everything" => wanted.extend(
                DEFAULT_SECTIONS
                    .iter()
                    .chain(ALL_EXTRA)
                    .map(|s| s.to_string()),
            ),
            _ => wanted.push(s),
        }
    }
    if wanted.is_empty() {
        wanted.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string()));
    }
    // `debug` only when asked for by name, as in Redis.
    let order: Vec<&str> = DEFAULT_SECTIONS
        .iter()
        .chain(ALL_EXTRA)
        .chain(&["debug"])
        .copied()
        .collect();
    let mut text = String::new();
    for section in order {
        if !wanted.iter().any(|w| w == section) {
            continue;
        }
        let body = info_section(ctx, section);
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str(&body);
    }
    Reply::Verbatim("txt", text.into_bytes())
}

/// One INFO section, with Redis's field names.
pub fn info_section(ctx: &mut Ctx, section: &str) -> String {
    let ex = &*ctx.ex;
    let mut s = String::new();
    macro_rules! field {
        ($($arg:tt)*) => {{
            let _ = write!(s, $($arg)*);
            s.push_str("\r\n");
        }};
    }
    match section {
        "server" => {
            s.push_str("# Server\r\n");
            field!("redis_version:{REDIS_VERSION}");
            field!("redis_git_sha1:00000000");
            field!("redis_git_dirty:0");
            field!("redis_build_id:0");
            field!(
                "redis_mode:{}",
                if ex.cluster.is_some() {
                    "cluster"
                } else {
                    "standalone"
                }
            );
            field!("cinnabar_version:{}", crate::VERSION);
            field!("os:{} {}", std::env::consts::OS, std::env::consts::ARCH);
            field!("arch_bits:64");
            field!("monotonic_clock:POSIX clock_gettime");
            field!("multiplexing_api:epoll");
            field!("process_id:{}", std::process::id());
            field!("process_supervised:no");
            field!("run_id:{}", ex.run_id);
            // Without a plain port, the TLS one, as Redis shows.
            field!(
                "tcp_port:{}",
                match ex.tcp_port {
                    0 => crate::tls::port(&ex.config),
                    p => p,
                }
            );
            field!("server_time_usec:{}", unix_ms() * 1000);
            field!("uptime_in_seconds:{}", ex.uptime());
            field!("uptime_in_days:{}", ex.uptime() / 86400);
            field!("hz:{}", ex.config.effective_hz());
            field!("configured_hz:{}", ex.config.hz);
            field!("lru_clock:{}", crate::keyspace::lru_clock(unix_ms()));
            field!(
                "executable:{}",
                std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            field!(
                "config_file:{}",
                ex.config
                    .config_file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            field!("io_threads_active:{}", ex.stats.io_threads_active as u8);
            if let Some(ms) = crate::exec::shutdown::remaining_ms(ex) {
                field!("shutdown_in_milliseconds:{ms}");
            }
            let binds: String = ex
                .config
                .bind
                .iter()
                .map(|b| format!(",bind={b}"))
                .collect();
            if ex.config.port != 0 {
                field!("listener0:name=tcp{binds},port={}", ex.config.port);
            }
            let tls_port = crate::tls::port(&ex.config);
            if tls_port != 0 {
                field!("listener2:name=tls{binds},port={tls_port}");
            }
        }
        "clients" => {
            s.push_str("# Clients\r\n");
            field!(
                "connected_clients:{}",
                // Replicas are not counted (Redis: clients minus slaves).
                ex.clients()
                    .filter(|(_, c)| !c.embedded && c.repl_role != Some('S'))
                    .count()
            );
            field!("cluster_connections:{}", crate::cluster::connections(ex));
            field!("maxclients:{}", ex.config.maxclients);
            let (recent_in, recent_out) = ex.client_mem.recent_max();
            field!("client_recent_max_input_buffer:{recent_in}");
            field!("client_recent_max_output_buffer:{recent_out}");
            field!("blocked_clients:{}", ex.blocked_clients());
            field!(
                "tracking_clients:{}",
                ex.clients().filter(|(_, c)| c.tracking.on).count()
            );
            field!(
                "pubsub_clients:{}",
                ex.clients().filter(|(_, c)| c.is_pubsub()).count()
            );
            field!(
                "watching_clients:{}",
                ex.clients()
                    .filter(|(_, c)| !c.tx.watched.is_empty())
                    .count()
            );
            field!("clients_in_timeout_table:0");
            field!("total_watched_keys:{}", ex.watch.total_keys());
            let (blocking_keys, on_nokey) = ex
                .blocking
                .key_counts(crate::commands::waitaof::is_wait_key);
            field!("total_blocking_keys:{blocking_keys}");
            field!("total_blocking_keys_on_nokey:{on_nokey}");
        }
        "memory" => {
            let used = used_memory();
            let peak = peak_memory();
            let rss = rss();
            let total = total_system_memory();
            s.push_str("# Memory\r\n");
            field!("used_memory:{used}");
            field!("used_memory_human:{}", human_bytes(used));
            field!("used_memory_rss:{rss}");
            field!("used_memory_rss_human:{}", human_bytes(rss));
            field!("used_memory_peak:{peak}");
            field!("used_memory_peak_human:{}", human_bytes(peak));
            field!(
                "used_memory_peak_perc:{:.2}%",
                used as f64 * 100.0 / peak.max(1) as f64
            );
            field!("total_system_memory:{total}");
            field!("total_system_memory_human:{}", human_bytes(total));
            field!("maxmemory:{}", ex.config.maxmemory);
            field!(
                "maxmemory_human:{}",
                human_bytes(ex.config.maxmemory as usize)
            );
            field!("maxmemory_policy:{}", ex.config.maxmemory_policy);
            field!(
                "mem_fragmentation_ratio:{:.2}",
                rss as f64 / used.max(1) as f64
            );
            field!("mem_allocator:mimalloc");
            field!("lazyfree_pending_objects:{}", ex.ks.lazyfree.pending());
            field!("lazyfreed_objects:{}", ex.ks.lazyfree.freed());
        }
        "persistence" => {
            s.push_str("# Persistence\r\n");
            crate::persistence::snapshot::info_fields(ex, &mut s);
            crate::persistence::aof::info_fields(ex, &mut s);
        }
        "stats" => {
            let st = &ex.stats;
            let ks = &ex.ks.stats;
            s.push_str("# Stats\r\n");
            field!(
                "total_connections_received:{}",
                st.total_connections_received
            );
            field!("total_commands_processed:{}", st.total_commands_processed);
            field!("instantaneous_ops_per_sec:{}", st.instantaneous_ops_per_sec);
            field!("total_net_input_bytes:{}", st.total_net_input_bytes);
            field!("total_net_output_bytes:{}", st.total_net_output_bytes);
            field!("rejected_connections:{}", st.rejected_connections);
            field!("sync_full:{}", ex.repl.sync_full);
            field!("sync_partial_ok:{}", ex.repl.sync_partial_ok);
            field!("sync_partial_err:{}", ex.repl.sync_partial_err);
            field!("expired_subkeys:{}", ks.expired_subkeys);
            field!("expired_keys:{}", ks.expired_keys);
            field!("expired_stale_perc:{:.2}", ks.expired_stale_perc * 100.0);
            field!(
                "expired_time_cap_reached_count:{}",
                ks.expired_time_cap_reached_count
            );
            field!(
                "expire_cycle_cpu_milliseconds:{}",
                ks.expire_cycle_cpu_milliseconds
            );
            field!("evicted_keys:{}", ks.evicted_keys);
            field!("keyspace_hits:{}", ks.keyspace_hits);
            field!("keyspace_misses:{}", ks.keyspace_misses);
            field!("pubsub_channels:{}", ex.pubsub.channel_count());
            field!("pubsub_patterns:{}", ex.pubsub.pattern_count());
            field!("pubsubshard_channels:{}", ex.pubsub.shard_channel_count());
            field!("latest_fork_usec:{}", ex.persist.latest_start_us);
            field!("total_forks:{}", ex.persist.snapshot_starts);
            field!("tracking_total_keys:{}", ex.tracking.total_keys());
            field!("tracking_total_items:{}", ex.tracking.total_items());
            field!("tracking_total_prefixes:{}", ex.tracking.total_prefixes());
            field!("total_error_replies:{}", st.total_error_replies);
            field!(
                "client_query_buffer_limit_disconnections:{}",
                st.client_qbuf_limit_disconnections
            );
            field!(
                "client_output_buffer_limit_disconnections:{}",
                st.client_outbuf_limit_disconnections
            );
            field!("acl_access_denied_auth:{}", ex.acl.denied_auth);
            field!("acl_access_denied_cmd:{}", ex.acl.denied_cmd);
            field!("acl_access_denied_key:{}", ex.acl.denied_key);
            field!("acl_access_denied_channel:{}", ex.acl.denied_channel);
        }
        "replication" => {
            s.push_str("# Replication\r\n");
            crate::replication::info(ex, &mut s);
        }
        "cpu" => {
            let (user, sys) = cpu_times();
            s.push_str("# CPU\r\n");
            field!("used_cpu_sys:{sys:.6}");
            field!("used_cpu_user:{user:.6}");
            field!("used_cpu_sys_children:0.000000");
            field!("used_cpu_user_children:0.000000");
        }
        "modules" => s.push_str("# Modules\r\n"),
        "errorstats" => {
            s.push_str("# Errorstats\r\n");
            let mut errs: Vec<_> = ex.error_stats.iter().collect();
            errs.sort();
            for (code, n) in errs {
                field!("errorstat_{code}:count={n}");
            }
        }
        "cluster" => {
            s.push_str("# Cluster\r\n");
            field!("cluster_enabled:{}", u8::from(ex.cluster.is_some()));
        }
        "keyspace" => {
            s.push_str("# Keyspace\r\n");
            for (i, d) in ex.ks.dbs.iter().enumerate() {
                if !d.table.is_empty() {
                    let subexpiry = ex.ks.field_expiry.count_keys(i, |k| {
                        matches!(d.table.get(k).map(|e| e.value()),
                            Some(ValueRef::Obj(ObjRef::Hash(h))) if h.has_field_ttls())
                    });
                    field!(
                        "db{i}:keys={},expires={},avg_ttl={},subexpiry={subexpiry}",
                        d.table.len(),
                        d.volatile,
                        d.avg_ttl
                    );
                }
            }
        }
        "commandstats" => {
            s.push_str("# Commandstats\r\n");
            let mut stats: Vec<_> = ex.cmd_stats.iter().collect();
            stats.sort_by_key(|(name, _)| *name);
            for (name, st) in stats {
                let per_call = if st.calls > 0 {
                    st.usec as f64 / st.calls as f64
                } else {
                    0.0
                };
                field!(
                    "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
                    st.calls,
                    st.usec,
                    st.rejected_calls,
                    st.failed_calls
                );
            }
        }
        "latencystats" => {
            s.push_str("# Latencystats\r\n");
            crate::commands::latency::info_latencystats(ex, &mut s);
        }
        _ => {}
    }
    crate::commands::info_extra::append(ex, section, &mut s);
    s
}

/// User and system CPU seconds of this process.
fn cpu_times() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF is valid.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

// ----- CONFIG ---------------------------------------------------------------------

fn config_get(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let pairs = ctx.ex.config.get_matching(&args[2..]);
    Reply::Map(
        pairs
            .into_iter()
            .map(|(k, v)| (Reply::Bulk(k.into_bytes()), Reply::Bulk(v.into_bytes())))
            .collect(),
    )
}

fn config_set(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if !(args.len() - 2).is_multiple_of(2) {
        return crate::commands::wrong_arity(ctx.cmd.name);
    }
    let mut updated = ctx.ex.config.clone();
    // An alias and its directive are told apart, as Redis registers them apart.
    let mut seen: Vec<String> = Vec::new();
    for pair in args[2..].chunks(2) {
        let name = String::from_utf8_lossy(pair[0]).into_owned();
        let Some(d) = find_directive(&name) else {
            return Reply::error(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            ));
        };
        let fail = |why: &str| {
            Reply::error(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
            ))
        };
        let looked_up = name.to_ascii_lowercase();
        if seen.contains(&looked_up) {
            return fail("duplicate parameter");
        }
        seen.push(looked_up);
        if d.flags & config::IMMUTABLE != 0 {
            return fail("can't set immutable config");
        }
        // Redis's DENY_LOADING_CONFIG directives.
        let loading = ctx.ex.persist.loading || ctx.ex.persist.async_loading;
        if loading && matches!(d.name, "dir" | "appendonly" | "repl-diskless-load") {
            return Reply::err(crate::exec::LOADING_ERR);
        }
        if d.flags & config::PROTECTED != 0
            && !ctx
                .ex
                .config
                .enable_protected_configs
                .allows(ctx.client_ref().is_local())
        {
            return fail("can't set protected config");
        }
        let value = String::from_utf8_lossy(pair[1]).into_owned();
        if let Err(why) = (d.set)(&mut updated, &[value]) {
            // Named as it was looked up: an alias by the alias (Redis registers each
            // alias as a directive of its own).
            return Reply::error(format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
                name.to_ascii_lowercase()
            ));
        }
    }
    // What Redis's apply functions do to these when CONFIG SET changes them (a config
    // file's values stand as written): hz is capped to 1..=500 (updateHZ), the
    // backlog raised to 16kb (resizeReplicationBacklog); CONFIG GET shows the result.
    if updated.hz != ctx.ex.config.hz {
        updated.hz = updated.hz.clamp(1, 500);
    }
    if updated.repl_backlog_size != ctx.ex.config.repl_backlog_size {
        updated.repl_backlog_size = updated.repl_backlog_size.max(16 * 1024);
    }
    if updated.port != ctx.ex.config.port || updated.bind != ctx.ex.config.bind {
        // New sockets are bound now (addresses already listened on are kept), so a
        // port in use fails here and nothing changes; the loop swaps them in.
        let held = ctx.ex.tcp_addrs.clone();
        match crate::net::bind_tcp(&updated.bind, updated.port, updated.tcp_backlog, &held) {
            Ok((new, addrs)) => {
                ctx.ex.tcp_addrs = addrs.clone();
                ctx.ex.rebind = Some((addrs, new));
            }
            Err(e) => {
                crate::log::warning(&e.to_string());
                let (name, why) = if updated.port != ctx.ex.config.port {
                    ("port", "Unable to listen on this port. Check server logs.")
                } else {
                    ("bind", "Failed to bind to specified addresses.")
                };
                return Reply::error(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
                ));
            }
        }
    }
    if let Err(reply) = apply_tls(ctx, &updated) {
        return reply;
    }
    if updated.dir != ctx.ex.config.dir {
        // Files are written relative to the working directory, as Redis's chdir().
        if let Err(e) = std::env::set_current_dir(&updated.dir) {
            return Reply::error(format!(
                "ERR CONFIG SET failed (possibly related to argument 'dir') - {}",
                crate::config::strerror(&e)
            ));
        }
    }
    let oom_changed = ["oom-score-adj", "oom-score-adj-values"]
        .iter()
        .any(|n| updated.stored_str(n) != ctx.ex.config.stored_str(n));
    if oom_changed {
        let replica = ctx.ex.repl.is_replica();
        if let Err(why) = crate::process::apply_oom_score_adj(&updated, replica) {
            let _ = crate::process::apply_oom_score_adj(&ctx.ex.config, replica);
            return Reply::error(format!(
                "ERR CONFIG SET failed (possibly related to argument 'oom-score-adj') - {why}"
            ));
        }
    }
    if updated.stored_str("proc-title-template") != ctx.ex.config.stored_str("proc-title-template")
    {
        crate::process::set_proc_title(&updated);
    }
    crate::crash::set_crash_log(updated.stored_bool("crash-log-enabled"));
    crate::crash::arm_watchdog(updated.stored_i64("watchdog-period"));
    let aof_was = ctx.ex.config.appendonly;
    let previous = std::mem::replace(&mut ctx.ex.config, updated);
    // A snapshot in progress follows a changed rdb-key-save-delay at once.
    if let Some(snap) = ctx.ex.persist.snap.as_ref() {
        snap.set_key_delay(ctx.ex.config.stored_i64("rdb-key-save-delay"));
    }
    if ctx.ex.config.appendonly != aof_was {
        if aof_was {
            crate::persistence::aof::stop_at_runtime(ctx.ex);
        } else if let Err(e) =
            crate::persistence::aof::start_at_runtime(ctx.ex, ctx.client_ref().in_exec)
        {
            crate::log::warning(&format!("Unable to turn on AOF: {e}"));
            ctx.ex.config = previous;
            return Reply::error(
                "ERR CONFIG SET failed (possibly related to argument 'appendonly') - Unable to turn on AOF. Check server logs.".to_string(),
            );
        }
    }
    if ctx.ex.config.maxclients > previous.maxclients {
        let wanted = ctx.ex.config.maxclients;
        match crate::util::fdlimit::adjust(wanted) {
            Ok(n) if n == wanted => {}
            Ok(n) => {
                ctx.ex.config = previous;
                return Reply::error(format!("ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with {n}"));
            }
            Err(_) => {
                ctx.ex.config = previous;
                return Reply::err("ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients");
            }
        }
    }
    ctx.ex.apply_config();
    Reply::ok()
}

/// CONFIG SET of `tls-*` (Redis's applyTlsCfg and applyTLSPort): the context is
/// rebuilt for new connections — a file that fails to load changes nothing — and a
/// new `tls-port` (or `bind` with one) is bound now, for the loop to swap in.
fn apply_tls(ctx: &mut Ctx, updated: &crate::config::Config) -> Result<(), Reply> {
    use crate::tls;
    let old = &ctx.ex.config;
    let fail = |name: &str, why: &str| {
        Reply::error(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    let changed = tls::CONTEXT_DIRECTIVES
        .iter()
        .find(|n| updated.stored_str(n) != old.stored_str(n));
    let port = tls::port(updated);
    let port_changed = port != tls::port(old);
    let mut new_ctx = None;
    if let Some(name) = changed {
        if tls::needed(updated) {
            new_ctx = Some(tls::build(updated).map_err(|_| fail(name, tls::UPDATE_FAILED))?);
        }
    } else if port_changed && port != 0 && ctx.ex.tls.is_none() {
        new_ctx = Some(tls::build(updated).map_err(|_| fail("tls-port", tls::UPDATE_FAILED))?);
    }
    if port_changed || (port != 0 && updated.bind != old.bind) {
        let held = ctx.ex.tls_addrs.clone();
        match crate::net::bind_tcp(&updated.bind, port, updated.tcp_backlog, &held) {
            Ok((new, addrs)) => {
                ctx.ex.tls_addrs = addrs.clone();
                ctx.ex.tls_rebind = Some((addrs, new));
            }
            Err(e) => {
                crate::log::warning(&e.to_string());
                return Err(fail(
                    "tls-port",
                    "Unable to listen on this port. Check server logs.",
                ));
            }
        }
    }
    if let Some(c) = new_ctx {
        ctx.ex.tls = Some(std::sync::Arc::new(c));
    }
    Ok(())
}

fn config_rewrite(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let Some(path) = ctx.ex.config.config_file.clone() else {
        return Reply::err("ERR The server is running without a config file");
    };
    match crate::config_rewrite::rewrite_file(&path, &ctx.ex.config) {
        Ok(()) => {
            crate::log::notice("CONFIG REWRITE executed with success.");
            Reply::ok()
        }
        Err(e) => {
            crate::log::warning(&format!("CONFIG REWRITE failed: {e}"));
            Reply::error(format!("ERR Rewriting config file: {e}"))
        }
    }
}

fn config_resetstat(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    ctx.ex.reset_stats();
    Reply::ok()
}

fn config_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    help_reply(
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    )
}

// ----- keyspace-wide commands -------------------------------------------------------

fn dbsize(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Int(ctx.ex.ks.dbs[ctx.db].table.len() as i64)
}

/// How a FLUSHDB/FLUSHALL frees the data.
#[derive(Clone, Copy, PartialEq)]
enum FlushMode {
    /// ASYNC: freed in the background, answered at once.
    Async,
    /// SYNC from a client that may block: freed in the background like ASYNC, the
    /// client answered once that is done (Redis 7.4's blocking-async flush).
    BlockingAsync,
    /// SYNC inside MULTI/EXEC or a script, from our master or the AOF.
    Sync,
}

/// Parses FLUSHDB/FLUSHALL's optional ASYNC|SYNC (none: `lazyfree-lazy-user-flush`).
fn flush_mode(ctx: &Ctx, args: &[&[u8]]) -> Result<FlushMode, Reply> {
    let lazy = match args.get(1) {
        None => ctx.ex.config.lazyfree_lazy_user_flush,
        Some(a) if args.len() == 2 && is(a, "async") => true,
        Some(a) if args.len() == 2 && is(a, "sync") => false,
        Some(_) => return Err(errors::SYNTAX),
    };
    let may_block =
        !ctx.ex.blocking.deny_blocking && !ctx.must_obey() && !ctx.client_ref().embedded;
    Ok(match (lazy, may_block) {
        (true, _) => FlushMode::Async,
        (false, true) => FlushMode::BlockingAsync,
        (false, false) => FlushMode::Sync,
    })
}

/// The reply of a flush: a blocking-async one waits for the lazy-free thread.
fn flush_reply(ctx: &mut Ctx, args: &[&[u8]], mode: FlushMode) -> Reply {
    let ticket = ctx.ex.ks.lazyfree.last_ticket();
    if mode == FlushMode::BlockingAsync && !ctx.ex.ks.lazyfree.is_done(ticket) {
        return crate::exec::blocking::block_on_lazyfree(ctx, args, ticket);
    }
    Reply::ok()
}

fn flushdb(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match flush_mode(ctx, args) {
        Ok(mode) => {
            let n = ctx.ex.ks.dbs[ctx.db].table.len() as u64;
            ctx.ex.signal_flushed_db(Some(ctx.db));
            ctx.ex.ks.flush_db(ctx.db, mode != FlushMode::Sync);
            // `dirty` counts the keys removed, as Redis; the flush is propagated
            // even when there were none (forceCommandPropagation).
            ctx.ex.ks.dirty += n;
            ctx.ex.stream.force = ctx.ex.stream.enabled;
            flush_reply(ctx, args, mode)
        }
        Err(e) => e,
    }
}

fn flushall(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match flush_mode(ctx, args) {
        Ok(mode) => {
            let lazy = mode != FlushMode::Sync;
            let n = ctx.ex.ks.key_count() as u64;
            ctx.ex.signal_flushed_db(None);
            // Redis kills a BGSAVE child: its image is obsolete (an AOF rewrite goes on).
            crate::persistence::snapshot::kill_bgsave(ctx.ex);
            ctx.ex.ks.flush_all(lazy);
            ctx.ex.ks.dirty += n;
            // With save points configured Redis writes the (now empty) dataset at once,
            // so a restart cannot bring the flushed keys back from an older file.
            // The save resets `dirty` to 0, as Redis's flushAllDataAndResetRDB.
            if !ctx.ex.config.save_params.is_empty() {
                let _ = crate::persistence::snapshot::save(ctx.ex);
            }
            // Propagated even when empty, or when the save reset `dirty`.
            ctx.ex.stream.force = ctx.ex.stream.enabled;
            flush_reply(ctx, args, mode)
        }
        Err(e) => e,
    }
}

fn swapdb(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    if ctx.ex.cluster.is_some() {
        return Reply::err("ERR SWAPDB is not allowed in cluster mode");
    }
    // Each index must be a 32-bit integer, or that index is "invalid" (Redis's
    // getIntFromObjectOrReply with its message); in range, it must name a database.
    let a = match crate::commands::arg_i32(args[1], Some("invalid first DB index")) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let b = match crate::commands::arg_i32(args[2], Some("invalid second DB index")) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let n = ctx.ex.ks.dbs.len() as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        return errors::DB_INDEX;
    }
    if a != b {
        ctx.ex.signal_swapped_dbs(a as usize, b as usize);
        ctx.ex.ks.swap_dbs(a as usize, b as usize);
        ctx.ex.blocking.signal_dbs(&[a as usize, b as usize]);
        ctx.ex.ks.dirty += 1;
    }
    Reply::ok()
}

/// TIME: the command's start time (Redis's cached time), so that inside a script or
/// a transaction it does not move.
fn time(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let us = ctx.ex.command_time_us().max(0);
    Reply::Array(vec![
        Reply::Bulk((us / 1_000_000).to_string().into_bytes()),
        Reply::Bulk((us % 1_000_000).to_string().into_bytes()),
    ])
}

fn lolwut(_ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut j = 1;
    while j < args.len() {
        if is(args[j], "version") && j + 1 < args.len() {
            if let Err(e) = arg_i64(args[j + 1]) {
                return e;
            }
            j += 2;
        } else {
            j += 1;
        }
    }
    // A small cinnabar crystal: rhombohedral facets drawn in Braille-free ASCII.
    let art = "      /\\\n     /  \\\n    / /\\ \\\n   / /  \\ \\\n   \\ \\  / /\n    \\ \\/ /\n     \\  /\n      \\/\n";
    let text = format!(
        "{art}\nCinnabar ver. {} (Redis ver. {REDIS_VERSION})\n",
        crate::VERSION
    );
    Reply::Verbatim("txt", text.into_bytes())
}

// ----- MEMORY ---------------------------------------------------------------------

fn memory_usage(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut j = 3;
    while j < args.len() {
        if is(args[j], "samples") && j + 1 < args.len() {
            match arg_i64(args[j + 1]) {
                Ok(n) if n >= 0 => {}
                Ok(_) => return errors::SYNTAX,
                Err(e) => return e,
            }
            j += 2;
        } else {
            return errors::SYNTAX;
        }
    }
    let (db, now) = (ctx.db, ctx.now_ms);
    match ctx.ex.ks.lookup(db, args[2], now, false) {
        // The entry, its share of a bucket slot, and what the value owns on the heap.
        Some(e) => Reply::Int((e.alloc_size() + 8 + e.value().heap_size()) as i64),
        None => Reply::Null,
    }
}

/// MEMORY STATS: Redis 7.4's keys, in its order, from the memory report.
fn memory_stats(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let m = crate::commands::memory_report::MemReport::new(ctx.ex);
    let int = |v: usize| Reply::Int(v as i64);
    let kv = |k: &str, v: Reply| (Reply::bulk(k.as_bytes()), v);
    let mut out = vec![
        kv("peak.allocated", int(m.peak)),
        kv("total.allocated", int(m.used)),
        kv("startup.allocated", int(m.startup)),
        kv("replication.backlog", int(m.backlog)),
        kv("clients.slaves", int(m.clients_slaves)),
        kv("clients.normal", int(m.clients_normal)),
        kv("cluster.links", int(0)),
        kv("aof.buffer", int(m.aof_buffer)),
        kv("lua.caches", int(m.eval_caches)),
        kv("functions.caches", int(m.functions_caches)),
    ];
    for d in &m.dbs {
        out.push(kv(
            &format!("db.{}", d.id),
            Reply::Map(vec![
                kv("overhead.hashtable.main", int(d.main)),
                kv("overhead.hashtable.expires", int(d.expires)),
            ]),
        ));
    }
    let (afrag, afrag_bytes) = m.allocator_frag();
    let (rss_over, rss_over_bytes) = m.rss_overhead();
    let (frag, frag_bytes) = m.total_frag();
    out.extend([
        kv("overhead.db.hashtable.lut", int(m.lut)),
        kv("overhead.db.hashtable.rehashing", int(m.rehashing)),
        kv("overhead.total", int(m.overhead)),
        kv("db.dict.rehashing.count", int(m.rehashing_count)),
        kv("keys.count", int(m.keys)),
        kv("keys.bytes-per-key", int(m.bytes_per_key())),
        kv("dataset.bytes", int(m.dataset)),
        kv("dataset.percentage", Reply::Double(m.dataset_perc())),
        kv("peak.percentage", Reply::Double(m.peak_perc())),
        kv("allocator.allocated", int(m.used)),
        kv("allocator.active", int(m.allocator)),
        kv("allocator.resident", int(m.allocator)),
        kv("allocator.muzzy", int(0)),
        kv("allocator-fragmentation.ratio", Reply::Double(afrag)),
        kv("allocator-fragmentation.bytes", Reply::Int(afrag_bytes)),
        kv("allocator-rss.ratio", Reply::Double(1.0)),
        kv("allocator-rss.bytes", int(0)),
        kv("rss-overhead.ratio", Reply::Double(rss_over)),
        kv("rss-overhead.bytes", Reply::Int(rss_over_bytes)),
        kv("fragmentation", Reply::Double(frag)),
        kv("fragmentation.bytes", Reply::Int(frag_bytes)),
    ]);
    Reply::Map(out)
}

fn memory_doctor(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let report = crate::commands::memory_report::MemReport::new(ctx.ex).doctor();
    Reply::Verbatim("txt", report.into_bytes())
}

/// Redis built without jemalloc answers this (mimalloc's own report goes to
/// stderr only).
fn memory_malloc_stats(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::bulk(b"Stats not supported for the current allocator")
}

/// Returns mimalloc's free pages to the OS.
fn memory_purge(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    crate::alloc::purge();
    Reply::ok()
}

fn memory_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    help_reply(
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    )
}

// ----- SLOWLOG --------------------------------------------------------------------

fn slowlog_get(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let count = match args.get(2) {
        None => 10,
        Some(a) => match crate::util::numeric::parse_i64(a) {
            Some(n) if n >= -1 => {
                if n == -1 {
                    usize::MAX
                } else {
                    n as usize
                }
            }
            _ => return Reply::err("ERR count should be greater than or equal to -1"),
        },
    };
    Reply::Array(
        ctx.ex
            .slowlog
            .iter()
            .take(count)
            .map(|e| {
                Reply::Array(vec![
                    Reply::Int(e.id as i64),
                    Reply::Int(e.time),
                    Reply::Int(e.duration_us as i64),
                    Reply::Array(e.args.iter().map(|a| Reply::Bulk(a.clone())).collect()),
                    Reply::Bulk(e.addr.clone().into_bytes()),
                    Reply::Bulk(e.name.clone()),
                ])
            })
            .collect(),
    )
}

fn slowlog_len(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Int(ctx.ex.slowlog.len() as i64)
}

fn slowlog_reset(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    ctx.ex.slowlog.clear();
    Reply::ok()
}

fn slowlog_help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    help_reply(
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    )
}

// ----- SHUTDOWN -------------------------------------------------------------------

fn shutdown(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut save = None;
    let mut abort = false;
    let mut force = false;
    let mut now = false;
    let mut flagged = false;
    let mut both_saves = false;
    for a in &args[1..] {
        if is(a, "nosave") {
            both_saves |= save == Some(true);
            save = Some(false);
        } else if is(a, "save") {
            both_saves |= save == Some(false);
            save = Some(true);
        } else if is(a, "now") {
            now = true;
        } else if is(a, "force") {
            force = true;
        } else if is(a, "abort") {
            abort = true;
            continue;
        } else {
            return errors::SYNTAX;
        }
        flagged = true;
    }
    if (abort && flagged) || both_saves {
        return errors::SYNTAX;
    }
    if abort {
        return if crate::exec::shutdown::abort(ctx.ex) {
            Reply::ok()
        } else {
            Reply::err("ERR No shutdown in progress.")
        };
    }
    if let Some(b) = &ctx.ex.busy {
        // Only SHUTDOWN NOSAVE ends a busy script, and what the script wrote so far
        // never reaches the AOF (exec/busy.rs; the network layer exits at once).
        if save != Some(false) {
            return b.busy_error();
        }
        let pos = b.stream_pos;
        ctx.ex.stream.truncate_to(pos);
    }
    let req = ShutdownRequest { save, now, force };
    match crate::exec::shutdown::request(ctx.ex, req) {
        Outcome::Exit => {
            ctx.client().close_after_reply = true;
            Reply::NoReply
        }
        // Answered with an error if the shutdown is cancelled; never if it succeeds.
        Outcome::Waiting => {
            crate::exec::blocking::block(ctx, args, &[], "shutdown", None, Reply::NoReply)
        }
        Outcome::Failed => Reply::err("ERR Errors trying to SHUTDOWN. Check logs."),
    }
}
