//! Configuration: redis.conf syntax, `--name value` command-line overrides, and the
//! directive table that CONFIG GET/SET/RESETSTAT answer from.
//!
//! Every directive is one row: name, aliases, whether CONFIG SET may change it, and a
//! typed accessor. Parsing the file, the command line and CONFIG SET all go through the
//! same row, so a value accepted at startup is accepted at runtime and formatted the
//! same way by CONFIG GET.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::util::glob::glob_match;

pub mod stored;

/// Who may use a protected command (DEBUG, MODULE) or change a protected config
/// (`dir`, `dbfilename`): nobody, everybody, or loopback and unix-socket clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    No,
    Yes,
    Local,
}

impl Protection {
    pub fn name(self) -> &'static str {
        match self {
            Protection::No => "no",
            Protection::Yes => "yes",
            Protection::Local => "local",
        }
    }

    /// Whether a client is allowed; `local`: whether it is on loopback or a unix socket.
    pub fn allows(self, client_is_local: bool) -> bool {
        match self {
            Protection::No => false,
            Protection::Yes => true,
            Protection::Local => client_is_local,
        }
    }
}

/// One class of `client-output-buffer-limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    pub protected_mode: bool,
    pub dir: PathBuf,
    pub databases: usize,
    pub maxclients: usize,
    pub timeout: u64,
    pub tcp_keepalive: u64,
    pub tcp_backlog: i32,
    pub requirepass: Option<Vec<u8>>,
    /// ACL: `aclfile`, `acllog-max-len`, `acl-pubsub-default allchannels`, and the
    /// `user` lines of the config file (src/acl loads them at startup).
    pub aclfile: String,
    pub acllog_max_len: i64,
    pub acl_pubsub_default_all: bool,
    pub acl_users: Vec<Vec<String>>,
    pub loglevel: String,
    pub logfile: String,
    pub pidfile: String,
    pub daemonize: bool,
    pub hz: u32,
    pub proto_max_bulk_len: i64,
    pub client_query_buffer_limit: u64,
    /// normal, replica, pubsub.
    pub client_output_buffer_limit: [OutputLimit; 3],
    pub maxmemory: u64,
    pub maxmemory_policy: String,
    pub maxmemory_samples: i64,
    pub maxmemory_eviction_tenacity: i64,
    pub lfu_log_factor: i64,
    pub lfu_decay_time: i64,
    pub enable_debug_command: Protection,
    pub enable_protected_configs: Protection,
    pub enable_module_command: Protection,
    pub lazyfree_lazy_user_del: bool,
    pub lazyfree_lazy_user_flush: bool,
    pub lazyfree_lazy_expire: bool,
    pub lazyfree_lazy_server_del: bool,
    pub active_expire_effort: i64,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: i64,
    /// Keys the client-tracking table may hold (0: no limit).
    pub tracking_table_max_keys: u64,
    /// Keys (or members) a key table (or set/hash table) needs before a pipeline's
    /// batch prefetches into it (`prefetch-min-keys`; -1: those that fill a core's L2
    /// cache, `util::cache_resident_keys`).
    pub prefetch_min_keys: i64,
    /// Milliseconds a script runs before other clients get BUSY (`lua-time-limit`).
    pub busy_reply_threshold: i64,
    pub latency_monitor_threshold: i64,
    /// Per-command latency histograms (`latency-tracking`) and the percentiles INFO
    /// latencystats shows (`latency-tracking-info-percentiles`).
    pub latency_tracking: bool,
    pub latency_tracking_info_percentiles: Vec<f64>,
    pub list_max_listpack_size: i64,
    /// Nodes kept uncompressed at each end of a quicklist (0: no compression).
    pub list_compress_depth: i64,
    pub hash_max_listpack_entries: i64,
    pub hash_max_listpack_value: i64,
    pub set_max_intset_entries: i64,
    pub stream_node_max_bytes: i64,
    pub stream_node_max_entries: i64,
    pub set_max_listpack_entries: i64,
    pub set_max_listpack_value: i64,
    pub zset_max_listpack_entries: i64,
    pub zset_max_listpack_value: i64,
    pub hll_sparse_max_bytes: u64,
    pub config_file: Option<PathBuf>,
    /// notify-keyspace-events as class bits (`commands::ctx::notify`).
    pub notify_keyspace_events: u32,
    /// Snapshot points: save after `.0` seconds if at least `.1` changes.
    pub save_params: Vec<(u64, u64)>,
    pub dbfilename: String,
    pub rdbcompression: bool,
    pub rdbchecksum: bool,
    /// Writes are refused (MISCONF) after a failed BGSAVE while `save` points are set.
    pub stop_writes_on_bgsave_error: bool,
    /// A replica whose own AOF/RDB cannot be written keeps applying its master's
    /// stream (logging) instead of stopping.
    pub repl_ignore_disk_write_error: bool,
    pub appendonly: bool,
    pub appendfsync: String,
    pub appenddirname: String,
    pub appendfilename: String,
    pub aof_load_truncated: bool,
    pub auto_aof_rewrite_percentage: u64,
    pub auto_aof_rewrite_min_size: u64,
    /// Replication (src/replication): `replicaof` at startup, the master's credentials,
    /// the backlog, the master's ping period, and the replica's write policy.
    pub replicaof: Option<(String, u16)>,
    pub masterauth: Option<String>,
    pub masteruser: Option<String>,
    pub repl_backlog_size: u64,
    pub repl_ping_replica_period: u64,
    pub repl_timeout: u64,
    pub replica_read_only: bool,
    pub replica_priority: i64,
    pub replica_announced: bool,
    /// Writes are refused (`NOREPLICAS`) with fewer than `min-replicas-to-write`
    /// replicas that acknowledged within `min-replicas-max-lag` seconds.
    pub min_replicas_to_write: u64,
    pub min_replicas_max_lag: u64,
    /// `rename-command old new` lines: commands renamed (or, with "", removed).
    pub renamed_commands: Vec<(String, String)>,
    /// Values of the `stored` directives (stored.rs) set away from their defaults.
    pub stored: BTreeMap<&'static str, String>,
    pub file_parse: FileParse,
}

/// State of reading a configuration file, for directives that read differently there.
#[derive(Debug, Clone, Default)]
pub struct FileParse {
    pub reading: bool,
    /// A `save` line was read: later ones add to it.
    pub save_seen: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["*".into(), "-::*".into()],
            port: 6379,
            protected_mode: true,
            dir: PathBuf::from("."),
            databases: 16,
            maxclients: 10000,
            timeout: 0,
            tcp_keepalive: 300,
            tcp_backlog: 511,
            requirepass: None,
            aclfile: String::new(),
            acllog_max_len: 128,
            acl_pubsub_default_all: false,
            acl_users: Vec::new(),
            loglevel: "notice".into(),
            logfile: String::new(),
            pidfile: String::new(),
            daemonize: false,
            hz: 10,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            client_output_buffer_limit: [
                OutputLimit::default(),
                OutputLimit {
                    hard: 256 << 20,
                    soft: 64 << 20,
                    soft_seconds: 60,
                },
                OutputLimit {
                    hard: 32 << 20,
                    soft: 8 << 20,
                    soft_seconds: 60,
                },
            ],
            maxmemory: 0,
            maxmemory_policy: "noeviction".into(),
            maxmemory_samples: 5,
            maxmemory_eviction_tenacity: 10,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            enable_debug_command: Protection::No,
            enable_protected_configs: Protection::No,
            enable_module_command: Protection::No,
            lazyfree_lazy_user_del: false,
            lazyfree_lazy_user_flush: false,
            lazyfree_lazy_expire: false,
            lazyfree_lazy_server_del: false,
            active_expire_effort: 1,
            replicaof: None,
            masterauth: None,
            masteruser: None,
            repl_backlog_size: 1 << 20,
            repl_ping_replica_period: 10,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            repl_timeout: 60,
            replica_read_only: true,
            replica_priority: 100,
            replica_announced: true,
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            tracking_table_max_keys: 1_000_000,
            prefetch_min_keys: -1,
            busy_reply_threshold: 5000,
            latency_monitor_threshold: 0,
            latency_tracking: true,
            latency_tracking_info_percentiles: vec![50.0, 99.0, 99.9],
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            hll_sparse_max_bytes: 3000,
            config_file: None,
            save_params: vec![(3600, 1), (300, 100), (60, 10000)],
            dbfilename: "dump.rdb".into(),
            rdbcompression: true,
            rdbchecksum: true,
            stop_writes_on_bgsave_error: true,
            repl_ignore_disk_write_error: false,
            appendonly: true,
            appendfsync: "everysec".into(),
            appenddirname: "appendonlydir".into(),
            appendfilename: "appendonly.aof".into(),
            aof_load_truncated: true,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 << 20,
            notify_keyspace_events: 0,
            renamed_commands: Vec::new(),
            stored: BTreeMap::new(),
            file_parse: FileParse::default(),
        }
    }
}

/// CONFIG SET refuses the directive: it is read at startup only.
pub const IMMUTABLE: u8 = 1;
/// CONFIG SET accepts the directive only where `enable-protected-configs` allows it
/// (`dir` and `dbfilename` decide where the server writes files).
pub const PROTECTED: u8 = 2;
/// CONFIG GET lists the directive only when asked for by its exact name.
pub const HIDDEN: u8 = 4;

type Getter = fn(&Config) -> String;
type Setter = fn(&mut Config, &[String]) -> Result<(), String>;

/// One configuration directive.
pub struct Directive {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// `IMMUTABLE`, `PROTECTED`, … (see the constants).
    pub flags: u8,
    pub get: Getter,
    pub set: Setter,
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// An integer as Redis's string2ll reads it: no sign but `-`, no leading zeros, no
/// spaces.
pub fn parse_strict_int(v: &str) -> Option<i64> {
    crate::util::numeric::parse_i64(v.as_bytes())
}

fn parse_int(v: &str, min: i64, max: i64) -> Result<i64, String> {
    let n: i64 = parse_strict_int(v)
        .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(n)
}

/// Parses a memory amount with Redis's units (`1k` = 1000, `1kb` = 1024, …) exactly
/// as Redis's memtoull reads one: digits (none is 0) then at most a unit; a number too
/// big for 64 bits saturates and the unit's product wraps, which the range checks of
/// the directives then refuse, as Redis's do.
pub fn parse_memory(v: &str) -> Option<u64> {
    let digits_end = v
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(v.len());
    let (digits, unit) = v.split_at(digits_end);
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    if digits.len() >= 128 {
        return None;
    }
    let n = if digits.is_empty() {
        0
    } else {
        digits.parse::<u64>().unwrap_or(u64::MAX)
    };
    Some(n.wrapping_mul(mul))
}

fn parse_mem_arg(v: &str, min: u64, max: u64) -> Result<u64, String> {
    let n = parse_memory(v).ok_or_else(|| "argument must be a memory value".to_string())?;
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(n)
}

/// An I/O error as strerror() words it (without Rust's " (os error N)").
pub fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn one(args: &[String]) -> Result<&str, String> {
    match args {
        [v] => Ok(v.as_str()),
        _ => Err("wrong number of arguments".into()),
    }
}

macro_rules! bool_directive {
    ($name:literal, $field:ident, $mutable:expr) => {
        Directive {
            name: $name,
            aliases: &[],
            flags: if $mutable { 0 } else { IMMUTABLE },
            get: |c| yes_no(c.$field),
            set: |c, a| {
                c.$field = parse_bool(one(a)?)?;
                Ok(())
            },
        }
    };
}

macro_rules! int_directive {
    ($name:literal, $aliases:expr, $field:ident, $ty:ty, $min:expr, $max:expr, $mutable:expr) => {
        Directive {
            name: $name,
            aliases: $aliases,
            flags: if $mutable { 0 } else { IMMUTABLE },
            get: |c| c.$field.to_string(),
            set: |c, a| {
                c.$field = parse_int(one(a)?, $min, $max)? as $ty;
                Ok(())
            },
        }
    };
}

macro_rules! mem_directive {
    ($name:literal, $field:ident, $ty:ty, $min:expr, $max:expr) => {
        mem_directive!($name, &[], $field, $ty, $min, $max)
    };
    ($name:literal, $aliases:expr, $field:ident, $ty:ty, $min:expr, $max:expr) => {
        Directive {
            name: $name,
            aliases: $aliases,
            flags: 0,
            get: |c| c.$field.to_string(),
            set: |c, a| {
                c.$field = parse_mem_arg(one(a)?, $min, $max)? as $ty;
                Ok(())
            },
        }
    };
}

/// `no`, `yes` or `local`: who may use a protected command or config (startup only).
macro_rules! protection_directive {
    ($name:literal, $field:ident) => {
        Directive {
            name: $name,
            aliases: &[],
            flags: IMMUTABLE,
            get: |c| c.$field.name().into(),
            set: |c, a| {
                c.$field = match enum_value(one(a)?, &["no", "yes", "local"])?.as_str() {
                    "yes" => Protection::Yes,
                    "local" => Protection::Local,
                    _ => Protection::No,
                };
                Ok(())
            },
        }
    };
}

fn enum_value(v: &str, allowed: &[&str]) -> Result<String, String> {
    let lower = v.to_ascii_lowercase();
    if allowed.contains(&lower.as_str()) {
        Ok(lower)
    } else {
        Err(format!(
            "argument(s) must be one of the following: {}",
            allowed.join(", ")
        ))
    }
}

const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// The directive table.
pub static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "replicaof",
        aliases: &["slaveof"],
        flags: IMMUTABLE,
        get: |c| {
            c.replicaof
                .as_ref()
                .map(|(h, p)| format!("{h} {p}"))
                .unwrap_or_default()
        },
        set: |c, a| {
            let words: Vec<&str> = a.iter().flat_map(|s| s.split_whitespace()).collect();
            c.replicaof = match words.as_slice() {
                [] => None,
                [no, one] if no.eq_ignore_ascii_case("no") && one.eq_ignore_ascii_case("one") => {
                    None
                }
                [h, p] => Some((
                    h.to_string(),
                    p.parse().map_err(|_| "Invalid master port".to_string())?,
                )),
                _ => return Err("wrong number of arguments".into()),
            };
            Ok(())
        },
    },
    Directive {
        name: "masterauth",
        aliases: &[],
        flags: 0,
        get: |c| c.masterauth.clone().unwrap_or_default(),
        set: |c, a| {
            let p = one(a)?;
            c.masterauth = (!p.is_empty()).then(|| p.to_string());
            Ok(())
        },
    },
    Directive {
        name: "masteruser",
        aliases: &[],
        flags: 0,
        get: |c| c.masteruser.clone().unwrap_or_default(),
        set: |c, a| {
            let p = one(a)?;
            c.masteruser = (!p.is_empty()).then(|| p.to_string());
            Ok(())
        },
    },
    // CONFIG SET raises it to 16kb (commands/server.rs).
    mem_directive!(
        "repl-backlog-size",
        repl_backlog_size,
        u64,
        1,
        i64::MAX as u64
    ),
    int_directive!(
        "min-replicas-to-write",
        &["min-slaves-to-write"],
        min_replicas_to_write,
        u64,
        0,
        i32::MAX as i64,
        true
    ),
    int_directive!(
        "min-replicas-max-lag",
        &["min-slaves-max-lag"],
        min_replicas_max_lag,
        u64,
        0,
        i32::MAX as i64,
        true
    ),
    int_directive!(
        "repl-ping-replica-period",
        &["repl-ping-slave-period"],
        repl_ping_replica_period,
        u64,
        1,
        i32::MAX as i64,
        true
    ),
    int_directive!(
        "repl-timeout",
        &[],
        repl_timeout,
        u64,
        1,
        i32::MAX as i64,
        true
    ),
    Directive {
        name: "replica-read-only",
        aliases: &["slave-read-only"],
        flags: 0,
        get: |c| yes_no(c.replica_read_only),
        set: |c, a| {
            c.replica_read_only = parse_bool(one(a)?)?;
            Ok(())
        },
    },
    int_directive!(
        "replica-priority",
        &["slave-priority"],
        replica_priority,
        i64,
        0,
        i32::MAX as i64,
        true
    ),
    bool_directive!("replica-announced", replica_announced, true),
    // CONFIG SET bind/port re-listens (commands/server.rs config_set).
    Directive {
        name: "bind",
        aliases: &[],
        flags: 0,
        get: |c| c.bind.join(" "),
        set: |c, a| {
            if a.is_empty() {
                return Err("wrong number of arguments".into());
            }
            let addrs: Vec<String> = a
                .iter()
                .flat_map(|s| s.split_whitespace().map(String::from))
                .collect();
            if addrs.len() > 16 {
                return Err("Too many bind addresses specified.".into());
            }
            c.bind = addrs;
            Ok(())
        },
    },
    int_directive!("port", &[], port, u16, 0, 65535, true),
    bool_directive!("protected-mode", protected_mode, true),
    Directive {
        name: "dir",
        aliases: &[],
        flags: PROTECTED,
        get: |c| {
            std::fs::canonicalize(&c.dir)
                .unwrap_or_else(|_| c.dir.clone())
                .to_string_lossy()
                .into_owned()
        },
        // The directory must exist: it is never created (a client allowed to set it
        // must not be able to make the server build a tree of its choosing). The path
        // is kept absolute; the server changes into it at startup and on CONFIG SET.
        set: |c, a| {
            let d = std::path::absolute(one(a)?).map_err(|e| strerror(&e))?;
            match std::fs::metadata(&d) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err("Not a directory".into()),
                Err(e) => return Err(strerror(&e)),
            }
            c.dir = d;
            Ok(())
        },
    },
    int_directive!(
        "databases",
        &[],
        databases,
        usize,
        1,
        i32::MAX as i64,
        false
    ),
    int_directive!(
        "maxclients",
        &[],
        maxclients,
        usize,
        1,
        u32::MAX as i64,
        true
    ),
    int_directive!("timeout", &[], timeout, u64, 0, i32::MAX as i64, true),
    int_directive!(
        "tcp-keepalive",
        &[],
        tcp_keepalive,
        u64,
        0,
        i32::MAX as i64,
        true
    ),
    int_directive!(
        "tcp-backlog",
        &[],
        tcp_backlog,
        i32,
        0,
        i32::MAX as i64,
        false
    ),
    Directive {
        name: "requirepass",
        aliases: &[],
        flags: 0,
        get: |c| {
            c.requirepass
                .as_ref()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default()
        },
        set: |c, a| {
            let p = one(a)?;
            c.requirepass = if p.is_empty() {
                None
            } else {
                Some(p.as_bytes().to_vec())
            };
            Ok(())
        },
    },
    Directive {
        name: "loglevel",
        aliases: &[],
        flags: 0,
        get: |c| c.loglevel.clone(),
        set: |c, a| {
            c.loglevel = enum_value(
                one(a)?,
                &["debug", "verbose", "notice", "warning", "nothing"],
            )?;
            Ok(())
        },
    },
    Directive {
        name: "logfile",
        aliases: &[],
        flags: IMMUTABLE,
        get: |c| c.logfile.clone(),
        set: |c, a| {
            c.logfile = one(a)?.to_string();
            Ok(())
        },
    },
    Directive {
        name: "pidfile",
        aliases: &[],
        flags: IMMUTABLE,
        get: |c| c.pidfile.clone(),
        set: |c, a| {
            c.pidfile = one(a)?.to_string();
            Ok(())
        },
    },
    bool_directive!("daemonize", daemonize, false),
    // Redis accepts any non-negative hz and runs at it clamped to 1..=500 (`Config::effective_hz`).
    // CONFIG SET caps it (commands/server.rs).
    int_directive!("hz", &[], hz, u32, 0, i32::MAX as i64, true),
    mem_directive!(
        "proto-max-bulk-len",
        proto_max_bulk_len,
        i64,
        1024 * 1024,
        i64::MAX as u64
    ),
    mem_directive!(
        "client-query-buffer-limit",
        client_query_buffer_limit,
        u64,
        1024 * 1024,
        i64::MAX as u64
    ),
    Directive {
        name: "client-output-buffer-limit",
        aliases: &[],
        flags: 0,
        get: |c| {
            // Redis 7.4 still names the replica class `slave` here.
            ["normal", "slave", "pubsub"]
                .iter()
                .zip(c.client_output_buffer_limit.iter())
                .map(|(n, l)| format!("{n} {} {} {}", l.hard, l.soft, l.soft_seconds))
                .collect::<Vec<_>>()
                .join(" ")
        },
        set: |c, a| {
            let words: Vec<&str> = a.iter().flat_map(|s| s.split_whitespace()).collect();
            if words.is_empty() || !words.len().is_multiple_of(4) {
                return Err("Wrong number of arguments in buffer limit configuration.".into());
            }
            let mut limits = c.client_output_buffer_limit;
            for w in words.chunks(4) {
                let class = match w[0].to_ascii_lowercase().as_str() {
                    "normal" => 0,
                    "replica" | "slave" => 1,
                    "pubsub" => 2,
                    _ => {
                        return Err(
                            "Invalid client class specified in buffer limit configuration.".into(),
                        )
                    }
                };
                let hard = parse_memory(w[1]);
                let soft = parse_memory(w[2]);
                let secs = w[3].parse::<u64>().ok();
                match (hard, soft, secs) {
                    (Some(hard), Some(soft), Some(soft_seconds)) => {
                        limits[class] = OutputLimit { hard, soft, soft_seconds }
                    }
                    _ => return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into()),
                }
            }
            c.client_output_buffer_limit = limits;
            Ok(())
        },
    },
    Directive {
        name: "notify-keyspace-events",
        aliases: &[],
        flags: 0,
        get: |c| crate::exec::pubsub::format_notify_classes(c.notify_keyspace_events),
        set: |c, a| {
            c.notify_keyspace_events = crate::exec::pubsub::parse_notify_classes(one(a)?)
                .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")?;
            Ok(())
        },
    },
    mem_directive!("maxmemory", maxmemory, u64, 0, u64::MAX),
    Directive {
        name: "maxmemory-policy",
        aliases: &[],
        flags: 0,
        get: |c| c.maxmemory_policy.clone(),
        set: |c, a| {
            c.maxmemory_policy = enum_value(one(a)?, POLICIES)?;
            Ok(())
        },
    },
    int_directive!(
        "maxmemory-samples",
        &[],
        maxmemory_samples,
        i64,
        1,
        64,
        true
    ),
    int_directive!(
        "maxmemory-eviction-tenacity",
        &[],
        maxmemory_eviction_tenacity,
        i64,
        0,
        100,
        true
    ),
    int_directive!(
        "lfu-log-factor",
        &[],
        lfu_log_factor,
        i64,
        0,
        i32::MAX as i64,
        true
    ),
    int_directive!(
        "lfu-decay-time",
        &[],
        lfu_decay_time,
        i64,
        0,
        i32::MAX as i64,
        true
    ),
    protection_directive!("enable-debug-command", enable_debug_command),
    protection_directive!("enable-protected-configs", enable_protected_configs),
    protection_directive!("enable-module-command", enable_module_command),
    Directive {
        name: "save",
        aliases: &[],
        flags: 0,
        get: |c| {
            c.save_params
                .iter()
                .map(|(s, n)| format!("{s} {n}"))
                .collect::<Vec<_>>()
                .join(" ")
        },
        set: |c, a| {
            let words: Vec<&str> = a.iter().flat_map(|s| s.split_whitespace()).collect();
            if !words.len().is_multiple_of(2) {
                return Err("Invalid save parameters".into());
            }
            let mut params = Vec::new();
            for pair in words.chunks(2) {
                match (pair[0].parse::<u64>(), pair[1].parse::<u64>()) {
                    (Ok(secs), Ok(changes)) => params.push((secs, changes)),
                    _ => return Err("Invalid save parameters".into()),
                }
            }
            // In a config file (command-line directives included) the first `save`
            // line replaces the defaults and later ones add to it, as Redis reads them;
            // CONFIG SET and `save ""` replace everything.
            let empty = matches!(a, [v] if v.is_empty());
            if c.file_parse.reading && !empty && c.file_parse.save_seen {
                c.save_params.extend(params);
            } else {
                c.save_params = params;
            }
            c.file_parse.save_seen |= c.file_parse.reading;
            Ok(())
        },
    },
    Directive {
        name: "dbfilename",
        aliases: &[],
        flags: PROTECTED,
        get: |c| c.dbfilename.clone(),
        set: |c, a| {
            let v = one(a)?;
            if v.contains('/') {
                return Err("dbfilename can't be a path, just a filename".into());
            }
            c.dbfilename = v.to_string();
            Ok(())
        },
    },
    bool_directive!("rdbcompression", rdbcompression, true),
    bool_directive!("rdbchecksum", rdbchecksum, false),
    bool_directive!(
        "stop-writes-on-bgsave-error",
        stop_writes_on_bgsave_error,
        true
    ),
    bool_directive!(
        "replica-ignore-disk-write-errors",
        repl_ignore_disk_write_error,
        true
    ),
    bool_directive!("appendonly", appendonly, true),
    Directive {
        name: "appendfsync",
        aliases: &[],
        flags: 0,
        get: |c| c.appendfsync.clone(),
        set: |c, a| {
            c.appendfsync = enum_value(one(a)?, &["everysec", "always", "no"])?;
            Ok(())
        },
    },
    Directive {
        name: "appenddirname",
        aliases: &[],
        flags: IMMUTABLE,
        get: |c| c.appenddirname.clone(),
        set: |c, a| {
            let v = one(a)?;
            if v.contains('/') || v.is_empty() {
                return Err("appenddirname can't be a path, just a dirname".into());
            }
            c.appenddirname = v.to_string();
            Ok(())
        },
    },
    Directive {
        name: "appendfilename",
        aliases: &[],
        flags: IMMUTABLE,
        get: |c| c.appendfilename.clone(),
        set: |c, a| {
            let v = one(a)?;
            if v.contains('/') || v.is_empty() {
                return Err("appendfilename can't be a path, just a filename".into());
            }
            c.appendfilename = v.to_string();
            Ok(())
        },
    },
    bool_directive!("aof-load-truncated", aof_load_truncated, true),
    int_directive!(
        "auto-aof-rewrite-percentage",
        &[],
        auto_aof_rewrite_percentage,
        u64,
        0,
        i32::MAX as i64,
        true
    ),
    mem_directive!(
        "auto-aof-rewrite-min-size",
        auto_aof_rewrite_min_size,
        u64,
        0,
        i64::MAX as u64
    ),
    bool_directive!("lazyfree-lazy-user-del", lazyfree_lazy_user_del, true),
    bool_directive!("lazyfree-lazy-user-flush", lazyfree_lazy_user_flush, true),
    bool_directive!("lazyfree-lazy-expire", lazyfree_lazy_expire, true),
    bool_directive!("lazyfree-lazy-server-del", lazyfree_lazy_server_del, true),
    int_directive!(
        "active-expire-effort",
        &[],
        active_expire_effort,
        i64,
        1,
        10,
        true
    ),
    int_directive!(
        "slowlog-log-slower-than",
        &[],
        slowlog_log_slower_than,
        i64,
        -1,
        i64::MAX,
        true
    ),
    int_directive!(
        "tracking-table-max-keys",
        &[],
        tracking_table_max_keys,
        u64,
        0,
        i64::MAX,
        true
    ),
    int_directive!(
        "prefetch-min-keys",
        &[],
        prefetch_min_keys,
        i64,
        -1,
        i64::MAX,
        true
    ),
    int_directive!(
        "acllog-max-len",
        &[],
        acllog_max_len,
        i64,
        0,
        i64::MAX,
        true
    ),
    Directive {
        name: "aclfile",
        aliases: &[],
        flags: IMMUTABLE,
        get: |c| c.aclfile.clone(),
        set: |c, a| {
            c.aclfile = one(a)?.to_string();
            Ok(())
        },
    },
    Directive {
        name: "acl-pubsub-default",
        aliases: &[],
        flags: 0,
        get: |c| {
            if c.acl_pubsub_default_all {
                "allchannels".into()
            } else {
                "resetchannels".into()
            }
        },
        set: |c, a| {
            c.acl_pubsub_default_all =
                enum_value(one(a)?, &["allchannels", "resetchannels"])? == "allchannels";
            Ok(())
        },
    },
    int_directive!(
        "slowlog-max-len",
        &[],
        slowlog_max_len,
        i64,
        0,
        i64::MAX,
        true
    ),
    int_directive!(
        "busy-reply-threshold",
        &["lua-time-limit"],
        busy_reply_threshold,
        i64,
        0,
        i64::MAX,
        true
    ),
    int_directive!(
        "latency-monitor-threshold",
        &[],
        latency_monitor_threshold,
        i64,
        0,
        i64::MAX,
        true
    ),
    bool_directive!("latency-tracking", latency_tracking, true),
    Directive {
        name: "latency-tracking-info-percentiles",
        aliases: &[],
        flags: 0,
        get: |c| {
            c.latency_tracking_info_percentiles
                .iter()
                .map(|p| crate::exec::latency::percentile_label(*p))
                .collect::<Vec<_>>()
                .join(" ")
        },
        set: |c, a| {
            let mut v = Vec::new();
            // Words split at each single space, as Redis's sdssplitlen: a doubled
            // or edge space makes an empty word, which is no number. A lone empty
            // value is the empty list.
            let words: &[String] = if matches!(a, [s] if s.is_empty()) {
                &[]
            } else {
                a
            };
            for w in words.iter().flat_map(|s| s.split(' ')) {
                let p: f64 = crate::util::numeric::parse_f64(w.as_bytes())
                    .filter(|p| !p.is_nan())
                    .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
                if !(0.0..=100.0).contains(&p) {
                    return Err(
                        "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                            .into(),
                    );
                }
                v.push(p);
            }
            c.latency_tracking_info_percentiles = v;
            Ok(())
        },
    },
    // A memory value in Redis 7.4 (`1kb` is 1024).
    mem_directive!(
        "stream-node-max-bytes",
        &[],
        stream_node_max_bytes,
        i64,
        0,
        i64::MAX as u64
    ),
    int_directive!(
        "stream-node-max-entries",
        &[],
        stream_node_max_entries,
        i64,
        0,
        i64::MAX,
        true
    ),
    int_directive!(
        "list-compress-depth",
        &[],
        list_compress_depth,
        i64,
        0,
        i32::MAX as i64,
        true
    ),
    int_directive!(
        "list-max-listpack-size",
        &["list-max-ziplist-size"],
        list_max_listpack_size,
        i64,
        i32::MIN as i64,
        i32::MAX as i64,
        true
    ),
    int_directive!(
        "hash-max-listpack-entries",
        &["hash-max-ziplist-entries"],
        hash_max_listpack_entries,
        i64,
        0,
        i64::MAX,
        true
    ),
    // A memory value in Redis 7.4 (`1kb` is 1024).
    mem_directive!(
        "hash-max-listpack-value",
        &["hash-max-ziplist-value"],
        hash_max_listpack_value,
        i64,
        0,
        i64::MAX as u64
    ),
    int_directive!(
        "set-max-intset-entries",
        &[],
        set_max_intset_entries,
        i64,
        0,
        i64::MAX,
        true
    ),
    int_directive!(
        "set-max-listpack-entries",
        &[],
        set_max_listpack_entries,
        i64,
        0,
        i64::MAX,
        true
    ),
    int_directive!(
        "set-max-listpack-value",
        &[],
        set_max_listpack_value,
        i64,
        0,
        i64::MAX,
        true
    ),
    int_directive!(
        "zset-max-listpack-entries",
        &["zset-max-ziplist-entries"],
        zset_max_listpack_entries,
        i64,
        0,
        i64::MAX,
        true
    ),
    // A memory value in Redis 7.4 (`1kb` is 1024).
    mem_directive!(
        "zset-max-listpack-value",
        &["zset-max-ziplist-value"],
        zset_max_listpack_value,
        i64,
        0,
        i64::MAX as u64
    ),
    mem_directive!(
        "hll-sparse-max-bytes",
        hll_sparse_max_bytes,
        u64,
        0,
        i64::MAX as u64
    ),
];

/// Every directive: the typed rows, then the stored ones (stored.rs).
pub fn all_directives() -> impl Iterator<Item = &'static Directive> {
    DIRECTIVES.iter().chain(stored::STORED.iter())
}

/// Finds a directive by name or alias, case-insensitively.
pub fn find_directive(name: &str) -> Option<&'static Directive> {
    let lower = name.to_ascii_lowercase();
    all_directives().find(|d| d.name == lower || d.aliases.contains(&lower.as_str()))
}

/// A startup configuration error, reported the way Redis reports a bad config file.
#[derive(Debug)]
pub struct ConfigError {
    pub line_no: usize,
    pub line: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\n*** FATAL CONFIG FILE ERROR (Cinnabar {}) ***\nReading the configuration file, at line {}\n>>> '{}'\n{}",
            crate::VERSION,
            self.line_no,
            self.line,
            self.message
        )
    }
}

impl Config {
    /// Applies configuration text in redis.conf syntax.
    pub fn apply_text(&mut self, text: &str) -> Result<(), ConfigError> {
        let was_reading = std::mem::replace(&mut self.file_parse.reading, true);
        let result = self.apply_lines(text);
        self.file_parse.reading = was_reading;
        result
    }

    fn apply_lines(&mut self, text: &str) -> Result<(), ConfigError> {
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |message: String| ConfigError {
                line_no: i + 1,
                line: line.to_string(),
                message,
            };
            let words = crate::protocol::parser::split_args(line.as_bytes())
                .ok_or_else(|| fail("Unbalanced quotes in configuration line".into()))?;
            let words: Vec<String> = words
                .into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect();
            if words.is_empty() {
                continue;
            }
            if words[0].eq_ignore_ascii_case("include") {
                let [_, path] = words.as_slice() else {
                    return Err(fail("Bad directive or wrong number of arguments".into()));
                };
                let text = std::fs::read_to_string(path)
                    .map_err(|e| fail(format!("Can't open include file: {e}")))?;
                self.apply_text(&text)?;
                continue;
            }
            // `rename-command old new` (new "" removes the command): applied to the
            // command table when the server starts (exec::renames).
            if words[0].eq_ignore_ascii_case("rename-command") {
                let [_, old, new] = words.as_slice() else {
                    return Err(fail("Bad directive or wrong number of arguments".into()));
                };
                self.renamed_commands.push((old.clone(), new.clone()));
                if let Err(e) = crate::commands::resolve_renames(&self.renamed_commands) {
                    return Err(fail(e.into()));
                }
                continue;
            }
            // `user` lines may repeat: they are kept for the ACL to load (src/acl).
            if words[0].eq_ignore_ascii_case("user") && words.len() >= 2 {
                // A config error, before the server listens, as Redis's
                // ACLAppendUserForLoading.
                if self.acl_users.iter().any(|u| u[0] == words[1]) {
                    return Err(fail(
                        "Duplicate user found. A user can only be defined once in config files"
                            .into(),
                    ));
                }
                self.acl_users.push(words[1..].to_vec());
                continue;
            }
            let Some(d) = find_directive(&words[0]) else {
                return Err(fail("Bad directive or wrong number of arguments".into()));
            };
            (d.set)(self, &words[1..]).map_err(fail)?;
        }
        Ok(())
    }

    /// Builds a configuration from `redis-server`-style arguments: an optional config
    /// file path first, then `--name value...` pairs.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut cfg = Config::default();
        let mut rest = args;
        let mut text = String::new();
        if let Some(first) = rest.first() {
            if !first.starts_with("--") {
                let content = if first == "-" {
                    let mut s = String::new();
                    std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                        .map_err(|e| e.to_string())?;
                    s
                } else {
                    cfg.config_file =
                        Some(std::path::absolute(first).unwrap_or_else(|_| PathBuf::from(first)));
                    std::fs::read_to_string(first).map_err(|e| {
                        format!("Fatal error, can't open config file '{first}': {e}")
                    })?
                };
                text.push_str(&content);
                text.push('\n');
                rest = &rest[1..];
            }
        }
        // Command-line directives become config lines after the file, as redis-server
        // builds them: `--name` starts a line; when it came alone, the next argument is
        // its value even if it starts with `--`; values are written quoted.
        let mut options = String::new();
        let mut value_seen = true;
        for (j, a) in rest.iter().enumerate() {
            let last = j + 1 == rest.len();
            if value_seen && a.starts_with("--") {
                if !options.is_empty() {
                    options.push('\n');
                }
                options.push_str(&a[2..]);
                options.push(' ');
                let words =
                    crate::protocol::parser::split_args(a.as_bytes()).map_or(0, |w| w.len());
                if words == 1 {
                    value_seen = false;
                    let next_is_option = !last && rest[j + 1].starts_with("--");
                    // `--save` with no value (last, or before another option) means "".
                    if a.eq_ignore_ascii_case("--save") && (last || next_is_option) {
                        options.push_str("\"\"");
                        value_seen = next_is_option;
                    }
                } else {
                    value_seen = true;
                }
            } else {
                crate::util::repr(&mut options, a.as_bytes());
                options.push(' ');
                value_seen = true;
            }
        }
        if !options.is_empty() {
            text.push_str(&options);
            text.push('\n');
        }
        cfg.apply_text(&text).map_err(|e| e.to_string())?;
        Ok(cfg)
    }

    /// CONFIG GET: every (name, value) whose name or alias matches one of `patterns`.
    pub fn get_matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        // A name without glob characters is looked up directly (hidden ones included).
        for p in patterns
            .iter()
            .filter(|p| !p.iter().any(|b| b"[*?".contains(b)))
        {
            let name = String::from_utf8_lossy(p).to_ascii_lowercase();
            if let Some(d) = find_directive(&name) {
                if d.flags & HIDDEN != 0 && !out.iter().any(|(n, _)| *n == name) {
                    out.push((name, (d.get)(self)));
                }
            }
        }
        for d in all_directives().filter(|d| d.flags & HIDDEN == 0) {
            for name in std::iter::once(&d.name).chain(d.aliases.iter()) {
                if patterns
                    .iter()
                    .any(|p| glob_match(p, name.as_bytes(), true))
                    && !out.iter().any(|(n, _)| n == name)
                {
                    out.push((name.to_string(), (d.get)(self)));
                }
            }
        }
        out
    }
}

impl Config {
    /// The timer frequency actually used: `hz` within 1..=500, as Redis clamps it.
    pub fn effective_hz(&self) -> u32 {
        self.hz.clamp(1, 500)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn command_line_and_errors() {
        let c = Config::from_args(&args(&[
            "--port",
            "7000",
            "--maxmemory",
            "1gb",
            "--requirepass",
            "",
        ]))
        .unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.maxmemory, 1 << 30);
        assert_eq!(c.requirepass, None);
        let e = Config::from_args(&args(&["--bogus", "1"])).unwrap_err();
        assert!(
            e.contains(">>> 'bogus \"1\"'") && e.contains("Bad directive"),
            "{e}"
        );
        let e = Config::from_args(&args(&["--port", "x"])).unwrap_err();
        assert!(e.contains("couldn't be parsed into an integer"), "{e}");
    }

    #[test]
    fn file_syntax() {
        let mut c = Config::default();
        c.apply_text("# comment\nport 1234\n  hz 20\nclient-output-buffer-limit pubsub 1mb 0 0\n")
            .unwrap();
        assert_eq!((c.port, c.hz), (1234, 20));
        assert_eq!(c.client_output_buffer_limit[2].hard, 1 << 20);
        let e = c.apply_text("port 1\nhz\n").unwrap_err();
        assert_eq!(e.line_no, 2);
    }

    #[test]
    fn lua_time_limit_alias_in_file() {
        let mut c = Config::default();
        assert_eq!(c.busy_reply_threshold, 5000);
        c.apply_text("lua-time-limit 250\n").unwrap();
        assert_eq!(c.busy_reply_threshold, 250);
        c.apply_text("busy-reply-threshold 0\n").unwrap();
        assert_eq!(c.busy_reply_threshold, 0);
        assert!(c.apply_text("busy-reply-threshold -1\n").is_err());
    }

    #[test]
    fn get_matching_globs() {
        let c = Config::default();
        let got = c.get_matching(&[b"max*"]);
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"maxmemory") && names.contains(&"maxclients"));
        assert_eq!(
            c.get_matching(&[b"hash-max-ziplist-entries"]),
            vec![("hash-max-ziplist-entries".into(), "512".into())]
        );
    }

    #[test]
    fn command_line_like_redis_server() {
        // A lone `--name` takes the next argument as its value, even `--something`.
        let c = Config::from_args(&args(&[
            "--proc-title-template",
            "--my--title",
            "--hz",
            "20",
        ]))
        .unwrap();
        assert_eq!(c.stored_str("proc-title-template"), "--my--title");
        assert_eq!(c.hz, 20);
        // `--save` with nothing after it, or before another option, is `save ""`.
        let c = Config::from_args(&args(&["--save", "--hz", "20"])).unwrap();
        assert!(c.save_params.is_empty());
        assert_eq!(c.hz, 20);
        let e = Config::from_args(&args(&["--port", "6379", "6380"])).unwrap_err();
        assert!(e.contains(">>> 'port \"6379\" \"6380\"'"), "{e}");
        // In a file, the first `save` line replaces the defaults and later ones add.
        let c = Config::from_args(&args(&["--save", "900 1", "--save", "100 100"])).unwrap();
        assert_eq!(c.save_params, vec![(900, 1), (100, 100)]);
    }

    #[test]
    fn stored_kinds_parse_and_show_like_redis() {
        use stored::Kind;
        let one = |k: &Kind, v: &str| k.parse(&[v.to_string()]);
        assert_eq!(one(&Kind::Octal(0, 0o777), "0700").unwrap(), "700");
        assert_eq!(
            one(&Kind::Octal(0, 0o777), "1000").unwrap_err(),
            "argument must be between 0 and 777 inclusive"
        );
        assert_eq!(
            one(&Kind::Octal(0, 0o777), "9").unwrap_err(),
            "argument couldn't be parsed as an octal number"
        );
        assert_eq!(
            one(&Kind::MemPercent(-100, i64::MAX as i128), "0%").unwrap(),
            "0"
        );
        assert_eq!(
            one(&Kind::Mem(0, 10), "1kb").unwrap_err(),
            "argument must be between 0 and 10 inclusive"
        );
        let flags = Kind::Flags(&["default", "save", "nosave", "now", "force"]);
        assert_eq!(one(&flags, "force now nosave").unwrap(), "nosave now force");
        assert_eq!(one(&flags, "default").unwrap(), "default");
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1KB"), Some(1024));
        assert_eq!(parse_memory("2mb"), Some(2 << 20));
        assert_eq!(parse_memory("x"), None);
        assert_eq!(parse_memory("-1"), None);
    }
}
