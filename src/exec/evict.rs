//! `maxmemory` enforcement: before each command, while used memory is over the limit,
//! evict keys chosen by `maxmemory-policy` from random samples (`maxmemory-samples` per
//! database), as Redis approximates LRU, LFU and TTL order. When nothing can be evicted,
//! commands that may grow memory (flag `denyoom`) get Redis's OOM error.

use std::time::{Duration, Instant};

use super::Executor;
use crate::commands::ctx::notify;
use crate::keyspace::{lfu_counter, lru_idle_ms, unix_ms};

/// Longest a single eviction pass may run before letting the command proceed.
const EVICTION_TIME_LIMIT: Duration = Duration::from_millis(2);

impl Executor {
    /// Evicts keys until `used_memory` is at most `maxmemory`. Returns false when memory
    /// is over the limit and nothing could be evicted (or the policy is `noeviction`);
    /// a pass that hit its time limit after evicting something lets the command run, as
    /// Redis does, and the next command continues.
    pub(crate) fn perform_evictions(&mut self) -> bool {
        let max = self.config.maxmemory as usize;
        if max == 0 || crate::alloc::used_memory() <= max {
            return true;
        }
        // `replica-ignore-maxmemory yes`: a replica's keys follow its master, never
        // its own memory limit (no evictions, no OOM errors).
        if self.repl.is_replica() && self.config.stored_bool("replica-ignore-maxmemory") {
            return true;
        }
        let policy = self.config.maxmemory_policy.clone();
        if policy == "noeviction" {
            return false;
        }
        let volatile_only = policy.starts_with("volatile");
        let samples = self.config.maxmemory_samples.max(1) as usize;
        let start = Instant::now();
        let mut evicted_any = false;
        while crate::alloc::used_memory() > max {
            let now = unix_ms();
            // (score, db, key): the highest score is the best candidate.
            let mut best: Option<(u64, usize, Vec<u8>)> = None;
            for (db, d) in self.ks.dbs.iter().enumerate() {
                if d.table.is_empty() || (volatile_only && d.volatile == 0) {
                    continue;
                }
                for _ in 0..samples {
                    let Some(e) = d.table.random_entry() else {
                        break;
                    };
                    if volatile_only && e.expire().is_none() {
                        continue;
                    }
                    let score = if policy.ends_with("lru") {
                        lru_idle_ms(e.lru(), now) as u64
                    } else if policy.ends_with("lfu") {
                        255 - lfu_counter(e.lru(), now) as u64
                    } else if policy.ends_with("ttl") {
                        u64::MAX - e.expire().unwrap_or(i64::MAX).max(0) as u64
                    } else {
                        fastrand::u64(..)
                    };
                    if best.as_ref().is_none_or(|b| score > b.0) {
                        best = Some((score, db, e.key().to_vec()));
                    }
                }
            }
            let Some((_, db, key)) = best else {
                return evicted_any;
            };
            evicted_any = true;
            let del_start = Instant::now();
            self.ks.delete(db, &key);
            let threshold = self.config.latency_monitor_threshold;
            let del_ms = del_start.elapsed().as_millis() as u64;
            self.latency
                .add_if_needed(threshold, "eviction-del", del_ms);
            self.ks.stats.evicted_keys += 1;
            self.ks.dirty += 1;
            self.notify(notify::EVICTED, "evicted", db, key);
            if start.elapsed() > EVICTION_TIME_LIMIT {
                break;
            }
        }
        let threshold = self.config.latency_monitor_threshold;
        let cycle_ms = start.elapsed().as_millis() as u64;
        self.latency
            .add_if_needed(threshold, "eviction-cycle", cycle_ms);
        true
    }
}
