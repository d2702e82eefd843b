//! LATENCY: the latency monitor (LATEST, HISTORY, RESET, GRAPH, DOCTOR), the per-command
//! histograms (HISTOGRAM, INFO latencystats) and their configuration.

mod common;
use common::*;

/// Splits a RESP2 reply into its lines (without CRLF).
fn lines(reply: &str) -> Vec<&str> {
    reply.split("\r\n").filter(|l| !l.is_empty()).collect()
}

#[test]
fn replies_without_data_match_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    assert_same_as_redis(
        &s,
        &r,
        &[
            &["LATENCY", "HELP"],
            &["LATENCY", "help", "extra"],
            &["LATENCY", "FOO"],
            &["LATENCY"],
            &["LATENCY", "HISTORY"],
            &["LATENCY", "HISTORY", "command"],
            &["LATENCY", "GRAPH", "command"],
            &["LATENCY", "LATEST"],
            &["LATENCY", "RESET"],
            &["LATENCY", "RESET", "command", "x"],
            &["LATENCY", "DOCTOR"],
            &["LATENCY", "HISTOGRAM", "nosuchcommand"],
            &["CONFIG", "GET", "latency-tracking"],
            &["CONFIG", "GET", "latency-monitor-threshold"],
            &["CONFIG", "GET", "latency-tracking-info-percentiles"],
            &["CONFIG", "SET", "latency-tracking-info-percentiles", "101"],
            &["CONFIG", "SET", "latency-tracking-info-percentiles", "abc"],
            &["CONFIG", "SET", "latency-monitor-threshold", "-1"],
            &[
                "CONFIG",
                "SET",
                "latency-tracking-info-percentiles",
                "0 50.50 100 99.999",
            ],
            &["CONFIG", "GET", "latency-tracking-info-percentiles"],
            &[
                "CONFIG",
                "SET",
                "latency-tracking-info-percentiles",
                "50 99 99.9",
            ],
        ],
    );
}

#[test]
fn monitor_records_slow_commands() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    // Off by default: nothing recorded.
    c.cmd(&["DEBUG", "SLEEP", "0.06"]);
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), "*0\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "50"]),
        "+OK\r\n"
    );
    c.cmd(&["DEBUG", "SLEEP", "0.06"]);
    c.cmd(&["SET", "k", "v"]);
    let latest = c.cmd(&["LATENCY", "LATEST"]);
    let l = lines(&latest);
    assert_eq!(&l[..3], &["*1", "*4", "$7"], "{latest}");
    assert_eq!(l[3], "command");
    let ms: i64 = l[5][1..].parse().unwrap();
    assert!(ms >= 60, "{latest}");
    assert_eq!(l[5], l[6], "latest == max");
    let history = c.cmd(&["LATENCY", "HISTORY", "command"]);
    let h = lines(&history);
    assert_eq!(&h[..2], &["*1", "*2"], "{history}");
    assert_eq!(h[3], l[5]);
    // GRAPH: header, a ruler, four graph rows, the margin and the "0s" label.
    let graph = c.cmd(&["LATENCY", "GRAPH", "command"]);
    let text = graph.split_once("\r\n").unwrap().1;
    let text = text.strip_suffix("\r\n").unwrap();
    let ms = ms.to_string();
    let want = format!(
        "command - high {ms} ms, low {ms} ms (all time high {ms} ms)\n{}\n \n \n \n_\n \n0\ns\n",
        "-".repeat(80)
    );
    assert_eq!(text, want);
    // RESP3: a verbatim string.
    let mut c3 = s.raw(3);
    assert!(c3.cmd(&["LATENCY", "GRAPH", "command"]).starts_with('='));
    let doctor = c.cmd(&["LATENCY", "DOCTOR"]);
    assert!(doctor.contains(&format!(
        "1. command: 1 latency spikes (average {ms}ms, mean deviation 0ms, period 1.00 sec). Worst all time event {ms}ms.\n"
    )), "{doctor}");
    // slowlog-log-slower-than (10 ms) is below the threshold: no tuning advice.
    assert!(!doctor.contains("- Your current Slow Log configuration"));
    assert!(doctor.contains("- Check your Slow Log"));
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    let doctor = c.cmd(&["LATENCY", "DOCTOR"]);
    assert!(doctor.contains("- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than 1000'.\n"), "{doctor}");
    assert_eq!(c.cmd(&["LATENCY", "RESET", "COMMAND", "nope"]), ":1\r\n");
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), "*0\r\n");
    assert_eq!(c.cmd(&["LATENCY", "RESET"]), ":0\r\n");
    // With the monitor on and nothing observed, DOCTOR says so.
    let doctor = c.cmd(&["LATENCY", "DOCTOR"]);
    assert!(
        doctor.contains("Dave, no latency spike was observed") || doctor.contains("huge pages"),
        "{doctor}"
    );
}

/// (command, calls, (µs, cumulative count) buckets).
type Cdf = (String, i64, Vec<(i64, i64)>);

/// Parses `LATENCY HISTOGRAM`'s RESP2 reply.
fn histograms(reply: &str) -> Vec<Cdf> {
    let l = lines(reply);
    let mut out = Vec::new();
    let n: usize = l[0][1..].parse().unwrap();
    let mut i = 1;
    for _ in 0..n / 2 {
        let name = l[i + 1].to_string();
        assert_eq!(l[i + 2], "*4");
        assert_eq!(l[i + 4], "calls");
        let calls: i64 = l[i + 5][1..].parse().unwrap();
        assert_eq!(l[i + 7], "histogram_usec");
        let m: usize = l[i + 8][1..].parse().unwrap();
        let mut buckets = Vec::new();
        for k in 0..m / 2 {
            let us: i64 = l[i + 9 + 2 * k][1..].parse().unwrap();
            let cum: i64 = l[i + 10 + 2 * k][1..].parse().unwrap();
            buckets.push((us, cum));
        }
        out.push((name, calls, buckets));
        i += 9 + m;
    }
    out
}

#[test]
fn histograms_per_command() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    assert_eq!(c.cmd(&["LATENCY", "HISTOGRAM", "set"]), "*0\r\n");
    for i in 0..5 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    c.cmd(&["CONFIG", "SET", "hz", "10"]);
    let h = histograms(&c.cmd(&["LATENCY", "HISTOGRAM", "set", "config", "nosuch", "get"]));
    // `config` lists each CONFIG subcommand with data (RESETSTAT ran after the reset).
    assert_eq!(h.len(), 3, "{h:?}");
    assert_eq!(h[0].0, "set");
    assert_eq!(h[0].1, 5);
    // Cumulative counts grow and end at the number of calls; keys are the bucket
    // bounds of Redis's walk (1, 2, 4, 8, 16, 33, 66, 132, …).
    let b = &h[0].2;
    assert_eq!(b.last().unwrap().1, 5);
    assert!(b.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
    let keys = [
        1i64, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227, 8454,
    ];
    assert!(
        b.iter().all(|(us, _)| keys.contains(us) || *us > 8454),
        "{b:?}"
    );
    assert_eq!(h[1].0, "config|set");
    assert_eq!(h[2].0, "config|resetstat");
    // All histograms: includes the subcommand of the last call.
    let all = histograms(&c.cmd(&["LATENCY", "HISTOGRAM"]));
    assert!(all.iter().any(|(n, _, _)| n == "latency|histogram"));
    // RESP3 maps.
    let mut c3 = s.raw(3);
    assert!(c3
        .cmd(&["LATENCY", "HISTOGRAM", "set"])
        .starts_with("%1\r\n$3\r\nset\r\n%2\r\n$5\r\ncalls\r\n:5\r\n$14\r\nhistogram_usec\r\n%"));
    // INFO latencystats: the configured percentiles.
    let info = c.cmd(&["INFO", "latencystats"]);
    let line = info
        .lines()
        .find(|l| l.starts_with("latency_percentiles_usec_set:"))
        .unwrap();
    let fields: Vec<&str> = line.split_once(':').unwrap().1.split(',').collect();
    assert_eq!(fields.len(), 3);
    for (f, p) in fields.iter().zip(["p50=", "p99=", "p99.9="]) {
        assert!(f.starts_with(p), "{line}");
        let (_, v) = f.split_once('=').unwrap();
        assert_eq!(v.split_once('.').unwrap().1.len(), 3, "{line}");
    }
    c.cmd(&[
        "CONFIG",
        "SET",
        "latency-tracking-info-percentiles",
        "0 100",
    ]);
    let info = c.cmd(&["INFO", "latencystats"]);
    assert!(info.contains("latency_percentiles_usec_set:p0="));
    assert!(info.contains(",p100="));
    c.cmd(&["CONFIG", "SET", "latency-tracking-info-percentiles", ""]);
    assert!(c
        .cmd(&["INFO", "latencystats"])
        .contains("latency_percentiles_usec_set:\r\n"));
    // Tracking off: no new samples and no INFO lines; histograms kept.
    c.cmd(&["CONFIG", "SET", "latency-tracking", "no"]);
    c.cmd(&["SET", "x", "y"]);
    let h = histograms(&c.cmd(&["LATENCY", "HISTOGRAM", "set"]));
    assert_eq!(h[0].1, 5);
    assert!(!c
        .cmd(&["INFO", "latencystats"])
        .contains("latency_percentiles"));
    c.cmd(&["CONFIG", "SET", "latency-tracking", "yes"]);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    assert_eq!(c.cmd(&["LATENCY", "HISTOGRAM", "set"]), "*0\r\n");
}

#[test]
fn percentiles_from_the_command_line() {
    let s = TestServer::start_with(&["--latency-tracking-info-percentiles", "50 99.99"]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "latency-tracking-info-percentiles"]),
        "*2\r\n$33\r\nlatency-tracking-info-percentiles\r\n$8\r\n50 99.99\r\n"
    );
}
