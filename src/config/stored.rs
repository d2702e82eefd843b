//! Directives kept as validated text in `Config::stored`: those whose value is read where
//! it is used (`Config::stored_bool` / `stored_i64` / `stored_str`), and those Cinnabar
//! accepts so that any Redis 7.4 configuration starts unchanged but that tune a
//! mechanism it does not have. Each row says which; the no-effect ones are listed in
//! docs/CONFIG.md. Every row parses, validates and formats its value as Redis 7.4's
//! `static_configs` entry of the same name does (type, range, default, enum words).

use super::{one, parse_bool, parse_memory, yes_no, Config, Directive, HIDDEN, IMMUTABLE};

const INT_MAX: i128 = i32::MAX as i128;
const UINT_MAX: i128 = u32::MAX as i128;

/// How a stored directive's value is parsed and shown.
pub enum Kind {
    Bool,
    /// An integer within the bounds.
    Int(i128, i128),
    /// A memory amount (`1mb`, `1gb`, …) within the bounds, shown in bytes.
    Mem(i128, i128),
    /// A memory amount or a percentage (`10%`) of `maxmemory`.
    MemPercent(i128, i128),
    /// An octal number (file modes), shown in octal.
    Octal(i128, i128),
    /// One of the words.
    Enum(&'static [&'static str]),
    /// One of the words, some of them synonyms: each is given with the word CONFIG GET
    /// shows for it (Redis's configEnum shows a value by the first of its names).
    EnumSynonyms(&'static [(&'static str, &'static str)]),
    /// Several of the words at once, shown in table order; the first is "none of them".
    Flags(&'static [&'static str]),
    Str,
    /// `oom-score-adj-values`: three integers in -2000..=2000.
    OomValues,
    /// `proc-title-template`: text with known `{variables}` that expands to something.
    ProcTitle,
}

fn bounds_error(min: i128, max: i128) -> String {
    format!("argument must be between {min} and {max} inclusive")
}

fn enum_error(words: &[&str]) -> String {
    format!(
        "argument(s) must be one of the following: {}",
        words.join(", ")
    )
}

impl Kind {
    /// Parses CONFIG SET's value (or a config line's words) into the text CONFIG GET shows.
    pub fn parse(&self, args: &[String]) -> Result<String, String> {
        match self {
            Kind::Flags(words) => {
                let mut bits = 0usize;
                let parts: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
                if parts.is_empty() {
                    return Err(enum_error(words));
                }
                for p in parts {
                    let i = words
                        .iter()
                        .position(|w| w.eq_ignore_ascii_case(p))
                        .ok_or_else(|| enum_error(words))?;
                    if i > 0 {
                        bits |= 1 << i;
                    }
                }
                // `save` and `nosave` together make no sense (shutdown-on-sig*).
                let has = |w: &str| {
                    words
                        .iter()
                        .position(|x| *x == w)
                        .is_some_and(|i| bits & (1 << i) != 0)
                };
                if has("save") && has("nosave") {
                    return Err(
                        "shutdown options SAVE and NOSAVE can't be used simultaneously".into(),
                    );
                }
                if bits == 0 {
                    return Ok(words[0].to_string());
                }
                Ok(words
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| bits & (1 << i) != 0)
                    .map(|(_, w)| *w)
                    .collect::<Vec<_>>()
                    .join(" "))
            }
            Kind::OomValues => {
                let parts: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
                if parts.len() != 3 {
                    return Err("wrong number of arguments".into());
                }
                let mut vals = Vec::new();
                for p in parts {
                    let v: i64 = p
                        .parse()
                        .ok()
                        .filter(|v| (-2000..=2000).contains(v))
                        .ok_or(
                        "Invalid oom-score-adj-values, elements must be between -2000 and 2000.",
                    )?;
                    vals.push(v.to_string());
                }
                Ok(vals.join(" "))
            }
            _ => self.parse_one(one(args)?),
        }
    }

    fn parse_one(&self, v: &str) -> Result<String, String> {
        match self {
            Kind::Bool => Ok(yes_no(parse_bool(v)?)),
            Kind::Str => Ok(v.to_string()),
            Kind::ProcTitle => {
                if crate::process::valid_title_template(v) {
                    Ok(v.to_string())
                } else {
                    Err("template format is invalid or contains unknown variables".into())
                }
            }
            Kind::Enum(words) => words
                .iter()
                .find(|w| w.eq_ignore_ascii_case(v))
                .map(|w| w.to_string())
                .ok_or_else(|| enum_error(words)),
            Kind::EnumSynonyms(words) => words
                .iter()
                .find(|(w, _)| w.eq_ignore_ascii_case(v))
                .map(|(_, shown)| shown.to_string())
                .ok_or_else(|| enum_error(&words.iter().map(|(w, _)| *w).collect::<Vec<_>>())),
            Kind::Int(min, max) => {
                let n: i128 = super::parse_strict_int(v)
                    .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?
                    .into();
                if n < *min || n > *max {
                    return Err(bounds_error(*min, *max));
                }
                Ok(n.to_string())
            }
            Kind::Mem(min, max) => {
                let n: i128 = parse_memory(v)
                    .ok_or_else(|| "argument must be a memory value".to_string())?
                    .into();
                if n < *min || n > *max {
                    return Err(bounds_error(*min, *max));
                }
                Ok(n.to_string())
            }
            Kind::MemPercent(min, max) => {
                if let Some(n) = parse_memory(v) {
                    let n = i128::from(n);
                    if n > *max {
                        return Err(bounds_error(*min, *max));
                    }
                    return Ok(n.to_string());
                }
                let pct = v
                    .strip_suffix('%')
                    .and_then(super::parse_strict_int)
                    .filter(|p| *p >= 0)
                    .ok_or("argument must be a memory or percent value")?;
                if i128::from(pct) > -*min {
                    return Err(format!(
                        "percentage argument must be less or equal to {}",
                        -*min
                    ));
                }
                // Redis shows 0% as 0 (it keeps percentages as negative numbers).
                Ok(if pct == 0 {
                    "0".into()
                } else {
                    format!("{pct}%")
                })
            }
            Kind::Octal(min, max) => {
                let n = i128::from_str_radix(v, 8)
                    .map_err(|_| "argument couldn't be parsed as an octal number".to_string())?;
                if n < *min || n > *max {
                    return Err(format!(
                        "argument must be between {min:o} and {max:o} inclusive"
                    ));
                }
                Ok(format!("{n:o}"))
            }
            Kind::Flags(_) | Kind::OomValues => unreachable!("multi-word kinds parse all args"),
        }
    }
}

macro_rules! stored {
    ($name:literal, $aliases:expr, $flags:expr, $kind:expr, $default:literal) => {
        Directive {
            name: $name,
            aliases: $aliases,
            flags: $flags,
            get: |c| {
                c.stored
                    .get($name)
                    .cloned()
                    .unwrap_or_else(|| $default.to_string())
            },
            set: |c, a| {
                let v = $kind.parse(a)?;
                check_supported($name, &v)?;
                c.stored.insert($name, v);
                Ok(())
            },
        }
    };
}

/// Values that would ask for a mode Cinnabar does not have are refused, never ignored.
fn check_supported(name: &str, value: &str) -> Result<(), String> {
    match (name, value) {
        // Redis's isValidAnnouncedHostname: what the bus and nodes.conf can carry.
        ("cluster-announce-hostname", v) if v.len() >= 256 => {
            Err("Hostnames must be less than 256 characters".into())
        }
        ("cluster-announce-hostname", v)
            if !v
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.') =>
        {
            Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into())
        }
        // Redis's isValidAuxString: no character nodes.conf uses as a separator.
        ("cluster-announce-human-nodename", v)
            if v.bytes()
                .any(|c| !c.is_ascii_alphanumeric() && b"!#$%&()*+:;<>?@[]^{|}~".contains(&c)) =>
        {
            Err("Announced human node name contained invalid character".into())
        }
        _ => Ok(()),
    }
}

impl Config {
    /// A stored directive's current value, as CONFIG GET shows it.
    pub fn stored_str(&self, name: &str) -> String {
        STORED
            .iter()
            .find(|d| d.name == name)
            .map(|d| (d.get)(self))
            .unwrap_or_default()
    }

    pub fn stored_bool(&self, name: &str) -> bool {
        self.stored_str(name) == "yes"
    }

    pub fn stored_i64(&self, name: &str) -> i64 {
        self.stored_str(name).parse().unwrap_or(0)
    }
}

/// The stored directives, in Redis's table order.
pub static STORED: &[Directive] = &[
    // No effect here, as in Redis 8: with `io-threads` above 1, reads are threaded
    // as well as writes (net/io_threads.rs).
    stored!("io-threads-do-reads", &[], IMMUTABLE, Kind::Bool, "no"),
    // `yes`: the startup banner (process.rs) even when not logging to a terminal.
    stored!("always-show-logo", &[], IMMUTABLE, Kind::Bool, "no"),
    // No effect here: replication never writes sync files on disk.
    stored!("rdb-del-sync-files", &[], 0, Kind::Bool, "no"),
    // No effect here: hash tables grow and shrink incrementally by themselves.
    stored!("activerehashing", &[], 0, Kind::Bool, "yes"),
    // Whether the process title is set at startup (process.rs, `set_proc_title`).
    stored!("set-proc-title", &[], IMMUTABLE, Kind::Bool, "yes"),
    // No effect here: hz is used as configured.
    stored!("dynamic-hz", &[], 0, Kind::Bool, "yes"),
    // No effect here: evicted values are freed at once.
    stored!("lazyfree-lazy-eviction", &[], 0, Kind::Bool, "no"),
    // No effect here: replica links always use TCP_NODELAY.
    stored!("repl-disable-tcp-nodelay", &[], 0, Kind::Bool, "no"),
    // Read by replication/master.rs: with the delay and max-replicas, when a full
    // sync's snapshot starts (the image always comes from the copy-on-write snapshot).
    stored!("repl-diskless-sync", &[], 0, Kind::Bool, "yes"),
    // Valkey 8's dual-channel full sync (replication/master.rs and replica/dual.rs): a
    // master honours `capa dual-channel`, a replica announces it.
    stored!("dual-channel-replication-enabled", &[], 0, Kind::Bool, "no"),
    // No effect here: files are fsynced once, when complete.
    stored!("aof-rewrite-incremental-fsync", &[], 0, Kind::Bool, "yes"),
    // No effect here: appendfsync applies during rewrites too.
    stored!("no-appendfsync-on-rewrite", &[], 0, Kind::Bool, "no"),
    // Cluster mode (src/cluster).
    stored!("cluster-require-full-coverage", &[], 0, Kind::Bool, "yes"),
    // No effect here: files are fsynced once, when complete.
    stored!("rdb-save-incremental-fsync", &[], 0, Kind::Bool, "yes"),
    // Read by persistence/aof.rs: an RDB or a RESP rewrite base, and `#TS` annotations.
    stored!("aof-use-rdb-preamble", &[], 0, Kind::Bool, "yes"),
    stored!("aof-timestamp-enabled", &[], 0, Kind::Bool, "no"),
    // Cluster mode (src/cluster).
    stored!(
        "cluster-replica-no-failover",
        &["cluster-slave-no-failover"],
        0,
        Kind::Bool,
        "no"
    ),
    // No effect here: a replica frees its old dataset at once.
    stored!(
        "replica-lazy-flush",
        &["slave-lazy-flush"],
        0,
        Kind::Bool,
        "no"
    ),
    // While the master link is down, `no` refuses non-STALE commands (MASTERDOWN).
    stored!(
        "replica-serve-stale-data",
        &["slave-serve-stale-data"],
        0,
        Kind::Bool,
        "yes"
    ),
    // `yes`: a replica never evicts or refuses writes for its own maxmemory.
    stored!(
        "replica-ignore-maxmemory",
        &["slave-ignore-maxmemory"],
        0,
        Kind::Bool,
        "yes"
    ),
    // No effect here: no jemalloc.
    stored!("jemalloc-bg-thread", &[], 0, Kind::Bool, "yes"),
    // No effect here: no jemalloc to defragment.
    stored!("activedefrag", &[], 0, Kind::Bool, "no"),
    // Log lines also go to syslog (log.rs).
    stored!("syslog-enabled", &[], IMMUTABLE, Kind::Bool, "no"),
    // Cluster mode (src/cluster).
    stored!("cluster-enabled", &[], IMMUTABLE, Kind::Bool, "no"),
    // Cluster mode (src/cluster).
    stored!("cluster-allow-reads-when-down", &[], 0, Kind::Bool, "no"),
    // Cluster mode (src/cluster).
    stored!(
        "cluster-allow-pubsubshard-when-down",
        &[],
        0,
        Kind::Bool,
        "yes"
    ),
    // Whether a fatal signal writes a crash report (crash.rs).
    stored!("crash-log-enabled", &[], 0, Kind::Bool, "yes"),
    // No effect here: the crash report runs no memory test.
    stored!("crash-memcheck-enabled", &[], 0, Kind::Bool, "yes"),
    // yes: transparent huge pages off for the process (prctl), as Redis.
    stored!("disable-thp", &[], IMMUTABLE, Kind::Bool, "yes"),
    // Cluster mode (src/cluster).
    stored!("cluster-allow-replica-migration", &[], 0, Kind::Bool, "yes"),
    // No effect here: logs never contain keys or values.
    stored!("hide-user-data-from-log", &[], 0, Kind::Bool, "no"),
    // Listened on (net::unix); `unixsocketperm` sets its mode.
    stored!("unixsocket", &[], IMMUTABLE, Kind::Str, ""),
    // Sent by a replica in REPLCONF ip-address.
    stored!(
        "replica-announce-ip",
        &["slave-announce-ip"],
        0,
        Kind::Str,
        ""
    ),
    // Cluster mode (src/cluster).
    stored!("cluster-announce-ip", &[], 0, Kind::Str, ""),
    // Cluster mode (src/cluster).
    stored!(
        "cluster-config-file",
        &[],
        IMMUTABLE,
        Kind::Str,
        "nodes.conf"
    ),
    // Cluster mode (src/cluster).
    stored!("cluster-announce-hostname", &[], 0, Kind::Str, ""),
    // Cluster mode (src/cluster).
    stored!("cluster-announce-human-nodename", &[], 0, Kind::Str, ""),
    stored!("syslog-ident", &[], IMMUTABLE, Kind::Str, "redis"),
    // CPU affinity of the event loop and I/O threads (affinity.rs).
    stored!(
        "server-cpulist",
        &["server_cpulist"],
        IMMUTABLE,
        Kind::Str,
        ""
    ),
    // CPU affinity of the lazy-free and AOF fsync threads (affinity.rs).
    stored!("bio-cpulist", &["bio_cpulist"], IMMUTABLE, Kind::Str, ""),
    // CPU affinity of an AOF rewrite's image writer (affinity.rs).
    stored!(
        "aof-rewrite-cpulist",
        &["aof_rewrite_cpulist"],
        IMMUTABLE,
        Kind::Str,
        ""
    ),
    // CPU affinity of a BGSAVE's or full sync's image writer (affinity.rs).
    stored!(
        "bgsave-cpulist",
        &["bgsave_cpulist"],
        IMMUTABLE,
        Kind::Str,
        ""
    ),
    // No effect here: no kernel-bug warnings are checked.
    stored!("ignore-warnings", &[], 0, Kind::Str, ""),
    // The process title (process.rs, `set_proc_title`).
    stored!(
        "proc-title-template",
        &[],
        0,
        Kind::ProcTitle,
        "{title} {listen-addr} {server-mode}"
    ),
    // The source address of replica and cluster bus links (net::socket::connect_from).
    stored!("bind-source-addr", &[], 0, Kind::Str, ""),
    // No effect here: strings compare bytewise.
    stored!("locale-collate", &[], 0, Kind::Str, ""),
    // `systemd` (or `auto` with NOTIFY_SOCKET set) sends READY=1 (supervise.rs).
    stored!(
        "supervised",
        &[],
        IMMUTABLE,
        Kind::Enum(&["upstart", "systemd", "auto", "no"]),
        "no"
    ),
    stored!(
        "syslog-facility",
        &[],
        IMMUTABLE,
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"
        ]),
        "local0"
    ),
    // No effect here: replicas load the image from the socket into memory.
    stored!(
        "repl-diskless-load",
        &[],
        0,
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled"
    ),
    // Writes /proc/self/oom_score_adj (supervise.rs).
    stored!(
        "oom-score-adj",
        &[],
        0,
        Kind::EnumSynonyms(&[
            ("no", "no"),
            ("yes", "yes"),
            ("relative", "yes"),
            ("absolute", "absolute")
        ]),
        "no"
    ),
    // Whether RESTORE (and loading, under `yes`) adds Redis's deep checks
    // (persistence::restore_check); what values are rebuilt from is always checked.
    stored!(
        "sanitize-dump-payload",
        &[],
        0,
        Kind::Enum(&["no", "yes", "clients"]),
        "no"
    ),
    // Cluster mode (src/cluster).
    stored!(
        "cluster-preferred-endpoint-type",
        &[],
        0,
        Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        "ip"
    ),
    // No effect here: propagated commands are not checked for errors.
    stored!(
        "propagation-error-behavior",
        &[],
        0,
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        "ignore"
    ),
    // How SIGINT shuts down (net).
    stored!(
        "shutdown-on-sigint",
        &[],
        0,
        Kind::Flags(&["default", "save", "nosave", "now", "force"]),
        "default"
    ),
    // How SIGTERM shuts down (net).
    stored!(
        "shutdown-on-sigterm",
        &[],
        0,
        Kind::Flags(&["default", "save", "nosave", "now", "force"]),
        "default"
    ),
    // No effect here: one event-loop thread does all I/O.
    stored!("io-threads", &[], IMMUTABLE, Kind::Int(1, 128), "1"),
    // Cluster mode (src/cluster).
    stored!(
        "cluster-replica-validity-factor",
        &["cluster-slave-validity-factor"],
        0,
        Kind::Int(0, INT_MAX),
        "10"
    ),
    // Cluster mode (src/cluster).
    stored!(
        "cluster-migration-barrier",
        &[],
        0,
        Kind::Int(0, INT_MAX),
        "1"
    ),
    // No effect here: no jemalloc to defragment.
    stored!("active-defrag-cycle-min", &[], 0, Kind::Int(1, 99), "1"),
    // No effect here: no jemalloc to defragment.
    stored!("active-defrag-cycle-max", &[], 0, Kind::Int(1, 99), "25"),
    // No effect here: no jemalloc to defragment.
    stored!(
        "active-defrag-threshold-lower",
        &[],
        0,
        Kind::Int(0, 1000),
        "10"
    ),
    // No effect here: no jemalloc to defragment.
    stored!(
        "active-defrag-threshold-upper",
        &[],
        0,
        Kind::Int(0, 1000),
        "100"
    ),
    // Read by replication/master.rs: seconds a full sync waits for more replicas.
    stored!(
        "repl-diskless-sync-delay",
        &[],
        0,
        Kind::Int(0, INT_MAX),
        "5"
    ),
    // Sent by a replica in REPLCONF listening-port.
    stored!(
        "replica-announce-port",
        &["slave-announce-port"],
        0,
        Kind::Int(0, 65535),
        "0"
    ),
    // Cluster mode (src/cluster).
    stored!("cluster-port", &[], IMMUTABLE, Kind::Int(0, 65535), "0"),
    // Cluster mode (src/cluster).
    stored!(
        "cluster-announce-bus-port",
        &[],
        0,
        Kind::Int(0, 65535),
        "0"
    ),
    // Cluster mode (src/cluster).
    stored!("cluster-announce-port", &[], 0, Kind::Int(0, 65535), "0"),
    // The cluster cron frees a bus link whose send queue passes this (src/cluster).
    stored!(
        "cluster-announce-tls-port",
        &[],
        0,
        Kind::Int(0, 65535),
        "0"
    ),
    // Read by exec/shutdown.rs: how long SHUTDOWN waits for lagging replicas.
    stored!("shutdown-timeout", &[], 0, Kind::Int(0, INT_MAX), "10"),
    // Read by replication/master.rs: replicas that start a delayed full sync at once.
    stored!(
        "repl-diskless-sync-max-replicas",
        &[],
        0,
        Kind::Int(0, INT_MAX),
        "0"
    ),
    stored!("unixsocketperm", &[], IMMUTABLE, Kind::Octal(0, 511), "0"),
    // No effect here: sockets are not marked.
    stored!(
        "socket-mark-id",
        &[],
        IMMUTABLE,
        Kind::Int(0, UINT_MAX),
        "0"
    ),
    // No effect here: all pending connections are accepted each turn.
    stored!(
        "max-new-connections-per-cycle",
        &[],
        0,
        Kind::Int(1, 1000),
        "10"
    ),
    // No effect here: all pending TLS connections are accepted each turn.
    stored!(
        "max-new-tls-connections-per-cycle",
        &[],
        0,
        Kind::Int(1, 1000),
        "1"
    ),
    // No effect here: no jemalloc to defragment.
    stored!(
        "active-defrag-max-scan-fields",
        &[],
        0,
        Kind::Int(1, i64::MAX as i128),
        "1000"
    ),
    // Cluster mode (src/cluster).
    stored!(
        "cluster-node-timeout",
        &[],
        0,
        Kind::Int(0, i64::MAX as i128),
        "15000"
    ),
    // The cluster cron frees a bus link whose send queue passes this (src/cluster).
    stored!(
        "cluster-link-sendbuf-limit",
        &[],
        0,
        Kind::Mem(0, u64::MAX as i128),
        "0"
    ),
    // No effect here: no jemalloc to defragment.
    stored!(
        "active-defrag-ignore-bytes",
        &[],
        0,
        Kind::Mem(1, i64::MAX as i128),
        "104857600"
    ),
    // Read by exec::client_mem (client eviction).
    stored!(
        "maxmemory-clients",
        &[],
        0,
        Kind::MemPercent(-100, i64::MAX as i128),
        "0"
    ),
    // Read by replication::expire_backlog.
    stored!(
        "repl-backlog-ttl",
        &[],
        0,
        Kind::Int(0, i64::MAX as i128),
        "3600"
    ),
    // The TLS listener (net, crate::tls); CONFIG SET binds it.
    stored!("tls-port", &[], 0, Kind::Int(0, 65535), "0"),
    // Sizes rustls's server session cache (0: a bound of 2^20 sessions, as OpenSSL's
    // 0 means no limit).
    stored!(
        "tls-session-cache-size",
        &[],
        0,
        Kind::Int(0, INT_MAX),
        "20480"
    ),
    // No effect here: rustls's session cache evicts by size only, without a timeout.
    stored!(
        "tls-session-cache-timeout",
        &[],
        0,
        Kind::Int(0, INT_MAX),
        "300"
    ),
    // The cluster bus over TLS (crate::tls, cluster/bus.rs).
    stored!("tls-cluster", &[], 0, Kind::Bool, "no"),
    // The replica's link to its master over TLS (crate::tls, replication/replica/).
    stored!("tls-replication", &[], 0, Kind::Bool, "no"),
    // Client certificates on accepted TLS connections (crate::tls).
    stored!(
        "tls-auth-clients",
        &[],
        0,
        Kind::Enum(&["no", "yes", "optional"]),
        "yes"
    ),
    // `CN`: a TLS client certificate's Common Name names the ACL user the connection
    // is authenticated as (net::authenticate_by_cert).
    stored!(
        "tls-auth-clients-user",
        &[],
        0,
        Kind::Enum(&["off", "CN"]),
        "off"
    ),
    // The server prefers its own order of cipher suites (rustls's ignore_client_order).
    stored!("tls-prefer-server-ciphers", &[], 0, Kind::Bool, "no"),
    // rustls's server session cache (and TLSv1.3 tickets) on or off.
    stored!("tls-session-caching", &[], 0, Kind::Bool, "yes"),
    // The TLS context (crate::tls); CONFIG SET reloads it for new connections.
    stored!("tls-cert-file", &[], 0, Kind::Str, ""),
    // The TLS context (crate::tls).
    stored!("tls-key-file", &[], 0, Kind::Str, ""),
    // Opens an encrypted PKCS#8 tls-key-file (crate::tls).
    stored!("tls-key-file-pass", &[], 0, Kind::Str, ""),
    // The certificate Cinnabar presents as a TLS client (crate::tls).
    stored!("tls-client-cert-file", &[], 0, Kind::Str, ""),
    // The key Cinnabar uses as a TLS client (crate::tls).
    stored!("tls-client-key-file", &[], 0, Kind::Str, ""),
    // Opens an encrypted PKCS#8 tls-client-key-file (crate::tls).
    stored!("tls-client-key-file-pass", &[], 0, Kind::Str, ""),
    // No effect here beyond a check that the file holds DH parameters: rustls
    // negotiates ECDHE only.
    stored!("tls-dh-params-file", &[], 0, Kind::Str, ""),
    // Trusted CAs for client certificates and for the servers Cinnabar connects to.
    stored!("tls-ca-cert-file", &[], 0, Kind::Str, ""),
    // Every PEM file in the directory is a trusted CA (crate::tls).
    stored!("tls-ca-cert-dir", &[], 0, Kind::Str, ""),
    // TLSv1.2 and/or TLSv1.3 (crate::tls); TLSv1 and TLSv1.1 are not supported.
    stored!("tls-protocols", &[], 0, Kind::Str, ""),
    // TLSv1.2 suites by OpenSSL name (crate::tls::ciphers).
    stored!("tls-ciphers", &[], 0, Kind::Str, ""),
    // TLSv1.3 suites by name (crate::tls::ciphers).
    stored!("tls-ciphersuites", &[], 0, Kind::Str, ""),
    stored!("oom-score-adj-values", &[], 0, Kind::OomValues, "0 200 800"),
    // Hidden (CONFIG GET shows them only by exact name): Redis's test hooks.
    // `use-exit-on-panic` is read by crash.rs; `aof-disable-auto-gc` has no effect here
    // (old AOF files are deleted when a rewrite is published).
    stored!("use-exit-on-panic", &[], HIDDEN, Kind::Bool, "no"),
    stored!("aof-disable-auto-gc", &[], HIDDEN, Kind::Bool, "no"),
    // Test hooks in effect: microseconds slept per key by the snapshot writer
    // (persistence/cow.rs) and by the loader (persistence/snapshot.rs).
    stored!(
        "rdb-key-save-delay",
        &[],
        HIDDEN,
        Kind::Int(-INT_MAX - 1, INT_MAX),
        "0"
    ),
    stored!(
        "key-load-delay",
        &[],
        HIDDEN,
        Kind::Int(-INT_MAX - 1, INT_MAX),
        "0"
    ),
    stored!("watchdog-period", &[], HIDDEN, Kind::Int(0, INT_MAX), "0"),
    // Valkey's test switch: I/O threads take every read and write, however few
    // (net/io_threads.rs), so a test with one client exercises them.
    stored!(
        "io-threads-always-active",
        &[],
        HIDDEN | IMMUTABLE,
        Kind::Bool,
        "no"
    ),
    stored!(
        "cluster-ping-interval",
        &[],
        HIDDEN,
        Kind::Int(0, i64::MAX as i128),
        "0"
    ),
    // How often the startup loader serves clients (persistence/snapshot.rs).
    stored!(
        "loading-process-events-interval-bytes",
        &[],
        HIDDEN,
        Kind::Int(1024, INT_MAX),
        "2097152"
    ),
];
