//! The latency monitor and the per-command latency histograms, as Redis 7.
//!
//! - The monitor (`LATENCY LATEST/HISTORY/RESET/GRAPH/DOCTOR`) keeps, per named event
//!   (`command`, `fast-command`, `expire-cycle`, `aof-fsync-always`, …), a ring of 160
//!   one-per-second samples of the worst latency in milliseconds seen that second, plus
//!   the all-time maximum. Samples are taken only at or above
//!   `latency-monitor-threshold` (0 = off), so when it is off the cost is one compare.
//! - The histograms (`LATENCY HISTOGRAM`, INFO `latencystats`) are HDR histograms with
//!   Redis's parameters: 1 ns .. 1 s, 2 significant digits (3072 counters, allocated
//!   on a command's first call). Values are recorded as Redis records them, the
//!   command's duration in microseconds times 1000, and read back with the same
//!   percentile rule and the same logarithmic walk (first bucket 1024 ns, base 2), so
//!   the keys and percentiles match redis-server's for the same durations.
//!   Written here rather than taken from a crate because the reply depends on the
//!   exact iteration semantics of the C library.

use std::fmt::Write as _;

/// Samples kept per event (Redis's LATENCY_TS_LEN).
pub const TS_LEN: usize = 160;

/// One event's time series.
#[derive(Clone)]
pub struct Series {
    /// (unix seconds, latency ms); time 0 = unused slot.
    samples: [(i64, u64); TS_LEN],
    idx: usize,
    pub max: u64,
}

impl Series {
    fn new() -> Series {
        Series {
            samples: [(0, 0); TS_LEN],
            idx: 0,
            max: 0,
        }
    }

    fn add(&mut self, now: i64, ms: u64) {
        self.max = self.max.max(ms);
        let prev = (self.idx + TS_LEN - 1) % TS_LEN;
        // One sample per second: the worst latency seen that second.
        if self.samples[prev].0 == now {
            self.samples[prev].1 = self.samples[prev].1.max(ms);
            return;
        }
        self.samples[self.idx] = (now, ms);
        self.idx = (self.idx + 1) % TS_LEN;
    }

    /// The samples in time order (oldest first), unused slots skipped.
    pub fn samples(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        (0..TS_LEN)
            .map(move |j| self.samples[(self.idx + j) % TS_LEN])
            .filter(|s| s.0 != 0)
    }

    /// The most recent sample.
    pub fn latest(&self) -> (i64, u64) {
        self.samples[(self.idx + TS_LEN - 1) % TS_LEN]
    }
}

/// The latency monitor: events in the order they first occurred.
#[derive(Default)]
pub struct LatencyMonitor {
    events: Vec<(String, Box<Series>)>,
}

impl LatencyMonitor {
    /// Records `ms` for `event` if the threshold is on and reached
    /// (Redis's latencyAddSampleIfNeeded).
    #[inline]
    pub fn add_if_needed(&mut self, threshold: i64, event: &str, ms: u64) {
        if threshold > 0 && ms >= threshold as u64 {
            self.add(event, ms);
        }
    }

    pub fn add(&mut self, event: &str, ms: u64) {
        let now = crate::keyspace::unix_ms() / 1000;
        match self.events.iter_mut().find(|(n, _)| n == event) {
            Some((_, s)) => s.add(now, ms),
            None => {
                let mut s = Box::new(Series::new());
                s.add(now, ms);
                self.events.push((event.to_string(), s));
            }
        }
    }

    pub fn get(&self, event: &[u8]) -> Option<(&str, &Series)> {
        self.events
            .iter()
            .find(|(n, _)| n.as_bytes() == event)
            .map(|(n, s)| (n.as_str(), &**s))
    }

    pub fn events(&self) -> impl Iterator<Item = (&str, &Series)> {
        self.events.iter().map(|(n, s)| (n.as_str(), &**s))
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Removes one event (case-insensitively, as Redis) or all; returns how many.
    pub fn reset(&mut self, event: Option<&[u8]>) -> usize {
        let before = self.events.len();
        match event {
            None => self.events.clear(),
            Some(e) => self
                .events
                .retain(|(n, _)| !n.as_bytes().eq_ignore_ascii_case(e)),
        }
        before - self.events.len()
    }
}

// ----- LATENCY GRAPH ------------------------------------------------------------------

/// Redis's ASCII sparkline (sparkline.c, filled style): `rows` rows of `_o#`/`|`
/// characters, then a blank margin line and the labels written vertically.
fn sparkline(out: &mut String, samples: &[(f64, String)], columns: usize, rows: usize) {
    let (mut min, mut max) = (0.0f64, 0.0f64);
    for (i, (v, _)) in samples.iter().enumerate() {
        if i == 0 {
            min = *v;
            max = *v;
        } else if *v < min {
            min = *v;
        } else if *v > max {
            max = *v;
        }
    }
    let labels = samples.iter().any(|(_, l)| !l.is_empty());
    let fill = b"_o#";
    let charset_len = 3i64;
    let steps = charset_len * rows as i64;
    let mut relmax = max - min;
    if relmax == 0.0 {
        relmax = 1.0;
    }
    let mut first = true;
    for part in samples.chunks(columns) {
        if !first {
            out.push('\n');
        }
        first = false;
        let mut row = 0usize;
        loop {
            let mut more = false;
            let mut chars = vec![b' '; part.len()];
            for (j, (v, label)) in part.iter().enumerate() {
                let relval = v - min;
                // C: (int)(relval*steps)/relmax, truncated again on assignment.
                let mut step = (((relval * steps as f64) as i64) as f64 / relmax) as i64;
                step = step.clamp(0, steps - 1);
                if row < rows {
                    let charidx = step - (rows as i64 - row as i64 - 1) * charset_len;
                    more = true;
                    if (0..charset_len).contains(&charidx) {
                        chars[j] = fill[charidx as usize];
                    } else if charidx >= charset_len {
                        chars[j] = b'|';
                    }
                } else {
                    // One blank line between the graph and the labels.
                    if labels && row - rows < 1 {
                        more = true;
                        break;
                    }
                    let label_char = row - rows - 1;
                    if label.len() > label_char {
                        more = true;
                        chars[j] = label.as_bytes()[label_char];
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.push_str(&String::from_utf8_lossy(&chars));
            out.push('\n');
        }
    }
}

/// LATENCY GRAPH's text for one event.
pub fn graph(event: &str, series: &Series, now: i64) -> String {
    let mut seq: Vec<(f64, String)> = Vec::new();
    let (mut min, mut max) = (0u64, 0u64);
    for (t, ms) in series.samples() {
        if seq.is_empty() {
            min = ms;
            max = ms;
        } else {
            max = max.max(ms);
            min = min.min(ms);
        }
        let elapsed = now - t;
        let label = if elapsed < 60 {
            format!("{elapsed}s")
        } else if elapsed < 3600 {
            format!("{}m", elapsed / 60)
        } else if elapsed < 86400 {
            format!("{}h", elapsed / 3600)
        } else {
            format!("{}d", elapsed / 86400)
        };
        seq.push((ms as f64, label));
    }
    let mut out = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        series.max
    );
    out.push_str(&"-".repeat(80));
    out.push('\n');
    sparkline(&mut out, &seq, 80, 4);
    out
}

// ----- LATENCY DOCTOR -----------------------------------------------------------------

/// What DOCTOR needs to know about the server besides the events.
pub struct DoctorEnv {
    pub threshold: i64,
    pub slowlog_log_slower_than: i64,
    pub fsync_always: bool,
    pub hz: u32,
    pub anon_huge_pages: bool,
}

struct Stats {
    samples: u64,
    avg: u64,
    mad: u64,
    period: i64,
}

fn analyze(series: &Series, now: i64) -> Stats {
    let mut st = Stats {
        samples: 0,
        avg: 0,
        mad: 0,
        period: 0,
    };
    let mut sum = 0u64;
    for (t, ms) in series.samples() {
        st.samples += 1;
        sum += ms;
        if st.period == 0 || t < st.period {
            st.period = t;
        }
    }
    if let Some(avg) = sum.checked_div(st.samples) {
        st.avg = avg;
        st.period = (now - st.period).max(0);
        if st.period == 0 {
            st.period = 1;
        }
        let dev: u64 = series
            .samples()
            .map(|(_, ms)| (avg as i64 - ms as i64).unsigned_abs())
            .sum();
        st.mad = dev / st.samples;
    }
    st
}

/// Whether this process has transparent huge pages mapped (DOCTOR's THP advice).
pub fn anon_huge_pages() -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/self/smaps_rollup") else {
        return false;
    };
    text.lines()
        .filter_map(|l| l.strip_prefix("AnonHugePages:"))
        .any(|v| v.trim().trim_end_matches("kB").trim() != "0")
}

/// LATENCY DOCTOR's report, with Redis's wording and advice rules.
pub fn doctor(mon: &LatencyMonitor, env: &DoctorEnv, now: i64) -> String {
    if mon.is_empty() && env.threshold == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".into();
    }
    #[derive(Default)]
    struct Advice {
        slowlog_enabled: bool,
        slowlog_tuning: bool,
        slowlog_inspect: bool,
        disk_contention: bool,
        scheduler: bool,
        data_writeback: bool,
        no_appendfsync: bool,
        local_disk: bool,
        ssd: bool,
        write_load_info: bool,
        hz: bool,
        large_objects: bool,
        mass_eviction: bool,
        relax_fsync: bool,
        disable_thp: bool,
    }
    let mut a = Advice::default();
    let mut advices = 0;
    let mut r = String::new();
    let mut eventnum = 0;
    for (event, series) in mon.events() {
        eventnum += 1;
        if eventnum == 1 {
            r.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let st = analyze(series, now);
        let _ = write!(
            r,
            "{eventnum}. {event}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event {}ms.",
            st.samples,
            st.avg,
            st.mad,
            st.period as f64 / st.samples.max(1) as f64,
            series.max
        );
        let e = event.to_ascii_lowercase();
        match e.as_str() {
            "command" => {
                if env.slowlog_log_slower_than < 0 {
                    a.slowlog_enabled = true;
                    advices += 1;
                } else if env.slowlog_log_slower_than / 1000 > env.threshold {
                    a.slowlog_tuning = true;
                    advices += 1;
                }
                a.slowlog_inspect = true;
                a.large_objects = true;
                advices += 2;
            }
            "fast-command" => {
                a.scheduler = true;
                advices += 1;
            }
            "aof-write-pending-fsync" => {
                a.local_disk = true;
                a.disk_contention = true;
                a.ssd = true;
                a.data_writeback = true;
                advices += 4;
            }
            "aof-write-active-child" => {
                a.no_appendfsync = true;
                a.data_writeback = true;
                a.ssd = true;
                advices += 3;
            }
            "aof-write-alone" => {
                a.local_disk = true;
                a.data_writeback = true;
                a.ssd = true;
                advices += 3;
            }
            "aof-fsync-always" => {
                a.relax_fsync = true;
                advices += 1;
            }
            "aof-fstat" | "rdb-unlink-temp-file" => {
                a.disk_contention = true;
                a.local_disk = true;
                advices += 2;
            }
            "aof-rewrite-diff-write" | "aof-rename" => {
                a.write_load_info = true;
                a.data_writeback = true;
                a.ssd = true;
                a.local_disk = true;
                advices += 4;
            }
            "expire-cycle" => {
                a.hz = true;
                a.large_objects = true;
                advices += 2;
            }
            "eviction-del" => {
                a.large_objects = true;
                advices += 1;
            }
            "eviction-cycle" => {
                a.mass_eviction = true;
                advices += 1;
            }
            _ => {}
        }
        r.push('\n');
    }
    if env.anon_huge_pages {
        a.disable_thp = true;
        advices += 1;
    }
    if eventnum == 0 && advices == 0 {
        r.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        return r;
    }
    if eventnum > 0 && advices == 0 {
        r.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        return r;
    }
    r.push_str("\nI have a few advices for you:\n\n");
    let threshold_us = env.threshold as u64 * 1000;
    if a.slowlog_enabled {
        let _ = writeln!(r, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {threshold_us}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.");
    }
    if a.slowlog_tuning {
        let _ = writeln!(r, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {threshold_us}'.");
    }
    if a.slowlog_inspect {
        r.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
    }
    if a.scheduler {
        r.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
    }
    if a.local_disk {
        r.push_str("- It is strongly advised to use local disks for persistence, especially if you are using AOF. Remote disks provided by platform-as-a-service providers are known to be slow.\n");
    }
    if a.ssd {
        r.push_str("- SSD disks are able to reduce fsync latency, and total time needed for snapshotting and AOF log rewriting (resulting in smaller memory usage and smaller final AOF rewrite buffer flushes). With extremely high write load SSD disks can be a good option. However Redis should perform reasonably with high load using normal disks. Use this advice as a last resort.\n");
    }
    if a.data_writeback {
        r.push_str("- Mounting ext3/4 filesystems with data=writeback can provide a performance boost compared to data=ordered, however this mode of operation provides less guarantees, and sometimes it can happen that after a hard crash the AOF file will have a half-written command at the end and will require to be repaired before Redis restarts.\n");
    }
    if a.disk_contention {
        r.push_str("- Try to lower the disk contention. This is often caused by other disk intensive processes running in the same computer (including other Redis instances).\n");
    }
    if a.no_appendfsync {
        r.push_str("- Assuming from the point of view of data safety this is viable in your environment, you could try to enable the 'no-appendfsync-on-rewrite' option, so that fsync will not be performed while there is a child rewriting the AOF file or producing an RDB file (the moment where there is high disk contention).\n");
    }
    if a.relax_fsync && env.fsync_always {
        r.push_str("- Your fsync policy is set to 'always'. It is very hard to get good performances with such a setup, if possible try to relax the fsync policy to 'onesec'.\n");
    }
    if a.write_load_info {
        r.push_str("- Latency during the AOF atomic rename operation or when the final difference is flushed to the AOF file at the end of the rewrite, sometimes is caused by very high write load, causing the AOF buffer to get very large. If possible try to send less commands to accomplish the same work, or use Lua scripts to group multiple operations into a single EVALSHA call.\n");
    }
    if a.hz && env.hz < 100 {
        r.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
    }
    if a.large_objects {
        r.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
    }
    if a.mass_eviction {
        r.push_str("- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys migrations (RESTORE command), may create sudden memory pressure forcing the server to block trying to evict keys. \n");
    }
    if a.disable_thp {
        r.push_str("- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n");
    }
    r
}

// ----- HDR histogram ------------------------------------------------------------------

/// Sub-buckets per bucket for 2 significant digits (2 * 10^2 rounded up to 2^8).
const SUB_BUCKET_COUNT: i64 = 256;
const SUB_BUCKET_HALF_MAG: u32 = 7;
const SUB_BUCKET_HALF: i64 = 128;
/// Buckets needed to reach 1e9 ns from 256 (doubling): 23; counters: (23 + 1) * 128.
const COUNTS_LEN: usize = 3072;
/// Redis's histogram range, in nanoseconds.
pub const HIST_MIN: i64 = 1;
pub const HIST_MAX: i64 = 1_000_000_000;

fn bucket_index(v: i64) -> u32 {
    // Position of the highest bit of v (at least the sub-bucket mask's), minus 8.
    64 - ((v as u64) | 255).leading_zeros() - (SUB_BUCKET_HALF_MAG + 1)
}

fn counts_index(v: i64) -> usize {
    let b = bucket_index(v);
    let sub = v >> b;
    (((b as i64 + 1) << SUB_BUCKET_HALF_MAG) + (sub - SUB_BUCKET_HALF)) as usize
}

fn value_at_index(i: usize) -> i64 {
    let mut b = (i as i64 >> SUB_BUCKET_HALF_MAG) - 1;
    let mut sub = (i as i64 & (SUB_BUCKET_HALF - 1)) + SUB_BUCKET_HALF;
    if b < 0 {
        sub -= SUB_BUCKET_HALF;
        b = 0;
    }
    sub << b
}

fn lowest_equivalent(v: i64) -> i64 {
    let b = bucket_index(v);
    (v >> b) << b
}

fn range_size(v: i64) -> i64 {
    let b = bucket_index(v);
    let adjusted = if (v >> b) >= SUB_BUCKET_COUNT {
        b + 1
    } else {
        b
    };
    1 << adjusted
}

fn highest_equivalent(v: i64) -> i64 {
    lowest_equivalent(v) + range_size(v) - 1
}

/// A latency histogram (nanoseconds).
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; COUNTS_LEN]>,
    pub total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; COUNTS_LEN]),
            total: 0,
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Histogram({} samples)", self.total)
    }
}

impl Histogram {
    /// Records one duration given in microseconds, as Redis does (`usec * 1000` ns,
    /// clamped to the histogram's range).
    #[inline]
    pub fn record_usec(&mut self, usec: u64) {
        let ns = (usec.min(HIST_MAX as u64) as i64 * 1000).clamp(HIST_MIN, HIST_MAX);
        self.counts[counts_index(ns)] += 1;
        self.total += 1;
    }

    /// hdr_value_at_percentile.
    pub fn value_at_percentile(&self, p: f64) -> i64 {
        let requested = p.min(100.0);
        let wanted = (((requested / 100.0) * self.total as f64) + 0.5) as i64;
        let wanted = wanted.max(1) as u64;
        let mut seen = 0u64;
        let mut value = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= wanted {
                value = value_at_index(i);
                break;
            }
        }
        if p == 0.0 {
            lowest_equivalent(value)
        } else {
            highest_equivalent(value)
        }
    }

    /// LATENCY HISTOGRAM's `histogram_usec` pairs: the logarithmic walk (1024 ns,
    /// doubling), each step reported as (bucket's highest value in µs, cumulative
    /// count) when the cumulative count grew.
    pub fn cumulative_usec(&self) -> Vec<(i64, u64)> {
        let mut out = Vec::new();
        let mut index: i64 = -1;
        let mut cumulative = 0u64;
        let mut value = 0i64;
        let mut highest = 0i64;
        let mut level = 1024i64;
        let mut level_lowest = lowest_equivalent(level);
        let mut previous = 0u64;
        loop {
            let has_next = cumulative < self.total;
            if !(has_next || value_at_index((index + 1) as usize) > level_lowest) {
                break;
            }
            let mut reported = false;
            loop {
                if value >= level_lowest {
                    if cumulative > previous {
                        out.push((highest / 1000, cumulative));
                    }
                    previous = cumulative;
                    level *= 2;
                    level_lowest = lowest_equivalent(level);
                    reported = true;
                    break;
                }
                index += 1;
                if index as usize >= COUNTS_LEN {
                    break;
                }
                cumulative += self.counts[index as usize];
                value = value_at_index(index as usize);
                highest = highest_equivalent(value);
            }
            if !reported {
                break;
            }
        }
        out
    }
}

/// `%f` with trailing zeros (and a trailing dot) removed: how Redis names percentiles.
pub fn percentile_label(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdr_layout_matches_c_library() {
        assert_eq!(counts_index(1000), 506);
        assert!(counts_index(HIST_MAX) < COUNTS_LEN);
        assert_eq!(lowest_equivalent(1024), 1024);
        assert_eq!(highest_equivalent(1024), 1031);
        assert_eq!(highest_equivalent(32768), 33023);
        assert_eq!(highest_equivalent(134217728), 135266303);
        for v in [1i64, 5, 255, 256, 1000, 4099, 123456, 99_999_999] {
            let i = counts_index(v);
            assert_eq!(value_at_index(i), lowest_equivalent(v), "{v}");
        }
    }

    #[test]
    fn percentiles_and_walk_as_redis() {
        // Values seen from redis-server 7.0: a 5 µs GET → p50=5.023, bucket key 8.
        let mut h = Histogram::default();
        h.record_usec(5);
        assert_eq!(h.value_at_percentile(50.0), 5023);
        assert_eq!(h.value_at_percentile(0.0), 4992);
        assert_eq!(h.cumulative_usec(), vec![(8, 1)]);
        // DEBUG SLEEP 0.1 measured 103809 µs → key 135266, p50 103809.023.
        let mut h = Histogram::default();
        h.record_usec(103809);
        assert_eq!(h.value_at_percentile(50.0), 103809023);
        assert_eq!(h.cumulative_usec(), vec![(135266, 1)]);
        let mut h = Histogram::default();
        h.record_usec(0);
        h.record_usec(1);
        h.record_usec(3);
        h.record_usec(1015);
        assert_eq!(h.cumulative_usec(), vec![(1, 2), (4, 3), (1056, 4)]);
    }

    #[test]
    fn series_keeps_worst_per_second_and_ring() {
        let mut s = Series::new();
        s.add(100, 5);
        s.add(100, 3);
        s.add(100, 9);
        assert_eq!(s.samples().collect::<Vec<_>>(), vec![(100, 9)]);
        for t in 0..200 {
            s.add(1000 + t, t as u64);
        }
        let v: Vec<_> = s.samples().collect();
        assert_eq!(v.len(), TS_LEN);
        assert_eq!(v[0], (1040, 40));
        assert_eq!(s.latest(), (1199, 199));
        assert_eq!(s.max, 199);
    }

    #[test]
    fn graph_of_one_sample_as_redis() {
        let mut s = Series::new();
        s.add(1000, 103);
        let g = graph("command", &s, 1000);
        let want = format!(
            "command - high 103 ms, low 103 ms (all time high 103 ms)\n{}\n \n \n \n_\n \n0\ns\n",
            "-".repeat(80)
        );
        assert_eq!(g, want);
    }

    #[test]
    fn labels() {
        assert_eq!(percentile_label(50.0), "50");
        assert_eq!(percentile_label(99.9), "99.9");
        assert_eq!(percentile_label(50.5), "50.5");
        assert_eq!(percentile_label(0.0), "0");
    }
}
