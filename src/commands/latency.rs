//! LATENCY: the latency monitor's reports (LATEST, HISTORY, RESET, GRAPH, DOCTOR) and
//! the per-command latency histograms (HISTOGRAM). The data lives in `exec/latency.rs`;
//! this file only shapes Redis's replies.

use crate::commands::flags::*;
use crate::commands::keys::help_reply;
use crate::commands::{Command, Ctx};
use crate::exec::latency::{self, DoctorEnv};
use crate::keyspace::unix_ms;
use crate::protocol::Reply;
use crate::{command, container};

const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];
const ADMIN_FLAGS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

pub static COMMANDS: &[Command] = &[container!(
    "latency",
    &["slow"],
    "server",
    "2.8.13",
    "A container for latency diagnostics commands.",
    SUBCOMMANDS
)];

static SUBCOMMANDS: &[Command] = &[
    command!(
        "latency|histogram",
        -2,
        ADMIN_FLAGS,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "7.0.0",
        "Returns the cumulative distribution of latencies of a subset or all commands.",
        "O(N) where N is the number of commands with latency information being retrieved.",
        histogram
    ),
    command!(
        "latency|graph",
        3,
        ADMIN_FLAGS,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.8.13",
        "Returns a latency graph for an event.",
        "O(1)",
        graph
    ),
    command!(
        "latency|latest",
        2,
        ADMIN_FLAGS,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.8.13",
        "Returns the latest latency samples for all events.",
        "O(1)",
        latest
    ),
    command!(
        "latency|history",
        3,
        ADMIN_FLAGS,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.8.13",
        "Returns timestamp-latency samples for an event.",
        "O(1)",
        history
    ),
    command!(
        "latency|reset",
        -2,
        ADMIN_FLAGS,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.8.13",
        "Resets the latency data for one or more events.",
        "O(1)",
        reset
    ),
    command!(
        "latency|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        &["slow"],
        "server",
        "2.8.13",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        help
    ),
    command!(
        "latency|doctor",
        2,
        ADMIN_FLAGS,
        (0, 0, 0),
        ADMIN_ACL,
        "server",
        "2.8.13",
        "Returns a human-readable latency analysis report.",
        "O(1)",
        doctor
    ),
];

fn now_secs() -> i64 {
    unix_ms() / 1000
}

fn latest(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Array(
        ctx.ex
            .latency
            .events()
            .map(|(name, s)| {
                let (t, ms) = s.latest();
                Reply::Array(vec![
                    Reply::bulk(name.as_bytes()),
                    Reply::Int(t),
                    Reply::Int(ms as i64),
                    Reply::Int(s.max as i64),
                ])
            })
            .collect(),
    )
}

fn history(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let Some((_, s)) = ctx.ex.latency.get(args[2]) else {
        return Reply::Array(Vec::new());
    };
    Reply::Array(
        s.samples()
            .map(|(t, ms)| Reply::Array(vec![Reply::Int(t), Reply::Int(ms as i64)]))
            .collect(),
    )
}

fn reset(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let n = if args.len() == 2 {
        ctx.ex.latency.reset(None)
    } else {
        args[2..]
            .iter()
            .map(|e| ctx.ex.latency.reset(Some(e)))
            .sum()
    };
    Reply::Int(n as i64)
}

fn graph(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    match ctx.ex.latency.get(args[2]) {
        Some((name, s)) => Reply::Verbatim("txt", latency::graph(name, s, now_secs()).into_bytes()),
        None => Reply::error(format!(
            "ERR No samples available for event '{}'",
            String::from_utf8_lossy(args[2])
        )),
    }
}

fn doctor(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let c = &ctx.ex.config;
    let env = DoctorEnv {
        threshold: c.latency_monitor_threshold,
        slowlog_log_slower_than: c.slowlog_log_slower_than,
        fsync_always: c.appendonly && c.appendfsync == "always",
        hz: c.effective_hz(),
        anon_huge_pages: latency::anon_huge_pages(),
    };
    let report = latency::doctor(&ctx.ex.latency, &env, now_secs());
    Reply::Verbatim("txt", report.into_bytes())
}

fn help(_ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    help_reply(
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    )
}

/// One command's `calls` / `histogram_usec` map, if it has a histogram.
fn command_cdf(ctx: &Ctx, cmd: &'static Command, out: &mut Vec<(Reply, Reply)>) {
    let Some(h) = ctx
        .ex
        .cmd_stats
        .get(cmd.name)
        .and_then(|st| st.latency.as_deref())
    else {
        return;
    };
    let buckets = h
        .cumulative_usec()
        .into_iter()
        .map(|(us, n)| (Reply::Int(us), Reply::Int(n as i64)))
        .collect();
    out.push((
        Reply::bulk(cmd.name.as_bytes()),
        Reply::Map(vec![
            (Reply::bulk(b"calls"), Reply::Int(h.total as i64)),
            (Reply::bulk(b"histogram_usec"), Reply::Map(buckets)),
        ]),
    ));
}

/// A command and, for a container, each of its subcommands.
fn command_and_subs(ctx: &Ctx, cmd: &'static Command, out: &mut Vec<(Reply, Reply)>) {
    command_cdf(ctx, cmd, out);
    for sub in cmd.subcommands {
        command_cdf(ctx, sub, out);
    }
}

/// `container|sub` or a plain name, as Redis's lookupCommandBySds.
fn lookup_full_name(name: &[u8]) -> Option<&'static Command> {
    let mut parts = name.splitn(3, |&b| b == b'|');
    let first = parts.next()?;
    let cmd = crate::commands::lookup(first)?;
    match (parts.next(), parts.next()) {
        (None, _) => Some(cmd),
        (Some(sub), None) => crate::commands::lookup_subcommand(cmd, sub),
        _ => None,
    }
}

fn histogram(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut out = Vec::new();
    if args.len() == 2 {
        for cmd in crate::commands::families() {
            command_and_subs(ctx, cmd, &mut out);
        }
    } else {
        for name in &args[2..] {
            if let Some(cmd) = lookup_full_name(name) {
                command_and_subs(ctx, cmd, &mut out);
            }
        }
    }
    Reply::Map(out)
}

/// INFO `latencystats`: one line per command with a histogram, the configured
/// percentiles in microseconds.
pub fn info_latencystats(ex: &crate::exec::Executor, s: &mut String) {
    use std::fmt::Write as _;
    if !ex.config.latency_tracking {
        return;
    }
    let mut names: Vec<(&str, &latency::Histogram)> = ex
        .cmd_stats
        .iter()
        .filter_map(|(n, st)| st.latency.as_deref().map(|h| (n, h)))
        .collect();
    names.sort_by_key(|(n, _)| *n);
    for (name, h) in names {
        let _ = write!(s, "latency_percentiles_usec_{name}:");
        for (i, p) in ex
            .config
            .latency_tracking_info_percentiles
            .iter()
            .enumerate()
        {
            if i > 0 {
                s.push(',');
            }
            let v = h.value_at_percentile(*p) as f64 / 1000.0;
            let _ = write!(s, "p{}={v:.3}", latency::percentile_label(*p));
        }
        s.push_str("\r\n");
    }
}
