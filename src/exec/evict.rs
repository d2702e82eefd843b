//! `maxmemory` enforcement: before each command, while used memory is over the limit,
//! evict keys chosen by `maxmemory-policy`, as Redis approximates LRU, LFU and TTL order.
//! When nothing can be evicted, commands that may grow memory (flag `denyoom`) get
//! Redis's OOM error.
//!
//! Approximation: each round samples `maxmemory-samples` keys per database into an
//! eviction pool that keeps the 16 best candidates seen so far (across rounds and
//! commands), ranked by a score where higher means "evict sooner": idle time for LRU,
//! 255 minus the decayed counter for LFU, time left to live (inverted) for TTL. The best
//! pooled key that still exists is evicted; keys that vanished since they were pooled
//! are skipped. The pool is what lets a small sample size approach true LRU/LFU order:
//! a hot key is only chosen when no colder key was seen in many rounds.
//!
//! `maxmemory-eviction-tenacity` bounds each pass's time (every 16 evictions the clock
//! is checked); a pass that runs out of time with memory still over the limit lets the
//! command run and leaves the rest to `eviction_slice`, run by the event loop between
//! client turns, as Redis's eviction timer does.
//!
//! Evicted keys are deleted like any other deletion seen from outside: watched keys are
//! touched, tracking clients invalidated, an `evicted` notification raised and a DEL
//! propagated to the AOF and replicas. Replicas never evict (their master's DELs keep
//! them in step, as Redis's default `replica-ignore-maxmemory yes`).

use std::time::{Duration, Instant};

use super::Executor;
use crate::commands::ctx::notify;
use crate::keyspace::{lfu_counter, lru_idle_ms, unix_ms, ExpireMode, LfuParams};

/// How many candidates the eviction pool keeps (Redis's EVPOOL_SIZE).
pub const EVICTION_POOL_SIZE: usize = 16;

/// One pooled candidate.
#[derive(Debug, Clone)]
struct Candidate {
    score: u64,
    db: usize,
    key: Vec<u8>,
}

/// The best eviction candidates seen so far, in ascending score order (the last one is
/// the next to evict).
#[derive(Debug, Default)]
pub struct EvictionPool {
    entries: Vec<Candidate>,
}

impl EvictionPool {
    /// Offers a sampled key: it enters if the pool has room or if it beats the pool's
    /// worst candidate (which then leaves). A key already pooled is re-scored.
    fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        if let Some(i) = self.entries.iter().position(|c| c.db == db && c.key == key) {
            self.entries.remove(i);
        }
        let full = self.entries.len() >= EVICTION_POOL_SIZE;
        if full && self.entries[0].score >= score {
            return;
        }
        if full {
            self.entries.remove(0);
        }
        let at = self.entries.partition_point(|c| c.score < score);
        self.entries.insert(
            at,
            Candidate {
                score,
                db,
                key: key.to_vec(),
            },
        );
    }

    /// Takes out the best candidate.
    fn pop_best(&mut self) -> Option<Candidate> {
        self.entries.pop()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// How a policy picks its victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rank {
    Lru,
    Lfu,
    Ttl,
    Random,
}

/// How long one eviction pass may run, from `maxmemory-eviction-tenacity` (0..=100):
/// linear up to 500 µs at 10 (the default), then 15% more per step, unbounded at 100.
pub fn eviction_time_limit(tenacity: i64) -> Option<Duration> {
    let t = tenacity.clamp(0, 100);
    if t <= 10 {
        Some(Duration::from_micros(50 * t as u64))
    } else if t < 100 {
        Some(Duration::from_micros(
            (500.0 * 1.15f64.powi(t as i32 - 10)) as u64,
        ))
    } else {
        None
    }
}

/// The pool score of one entry: higher is a better victim.
fn score(rank: Rank, lru: u32, expire: Option<i64>, now_ms: i64, lfu: LfuParams) -> u64 {
    match rank {
        Rank::Lru => lru_idle_ms(lru, now_ms) as u64,
        Rank::Lfu => 255 - lfu_counter(lru, now_ms, lfu) as u64,
        // The sooner the expiry, the better (volatile only: keys without one are skipped).
        Rank::Ttl => u64::MAX - expire.unwrap_or(i64::MAX).max(0) as u64,
        Rank::Random => 0,
    }
}

impl Executor {
    /// Evicts keys until `used_memory` is at most `maxmemory`. Returns false when memory
    /// is over the limit and nothing could be evicted (or the policy is `noeviction`);
    /// a pass that hit its time limit after evicting something lets the command run,
    /// and `eviction_slice` carries on between client turns.
    pub(crate) fn perform_evictions(&mut self) -> bool {
        if self.ks.effective_expire_mode() != ExpireMode::Delete {
            // Replicas never evict; during CLIENT PAUSE eviction waits for the next
            // command after it.
            self.eviction_running = false;
            return true;
        }
        let max = self.config.maxmemory as usize;
        if max == 0 {
            crate::keyspace::table::set_grow_limit(0);
        }
        if max == 0 || crate::alloc::used_memory() <= max {
            if max != 0 {
                crate::keyspace::table::set_grow_limit(max + self.mem_not_counted_for_evict());
            }
            self.eviction_running = false;
            self.eviction_exceeded(false);
            return true;
        }
        let max = max + self.mem_not_counted_for_evict();
        crate::keyspace::table::set_grow_limit(max);
        // Read once: other threads (lazy free, AOF, replication) allocate and free
        // too, so a second reading may already be under `max`.
        let used = crate::alloc::used_memory();
        if used <= max {
            self.eviction_running = false;
            self.eviction_exceeded(false);
            return true;
        }
        // `replica-ignore-maxmemory yes`: a replica's keys follow its master, never
        // its own memory limit (no evictions, no OOM errors).
        if self.repl.is_replica() && self.config.stored_bool("replica-ignore-maxmemory") {
            self.eviction_running = false;
            return true;
        }
        let policy = self.config.maxmemory_policy.clone();
        if policy == "noeviction" {
            self.eviction_running = false;
            self.eviction_exceeded(true);
            return false;
        }
        let volatile_only = policy.starts_with("volatile");
        let rank = if policy.ends_with("lru") {
            Rank::Lru
        } else if policy.ends_with("lfu") {
            Rank::Lfu
        } else if policy.ends_with("ttl") {
            Rank::Ttl
        } else {
            Rank::Random
        };
        let limit = eviction_time_limit(self.config.maxmemory_eviction_tenacity);
        let start = Instant::now();
        let mut evicted = 0u64;
        let mut done = true;
        // As Redis: the memory to free is fixed when the pass starts, and each
        // eviction counts what its delete alone freed. The DEL it propagates and the
        // invalidations and events it sends grow buffers that drain by themselves;
        // counting them would evict key after key for their sake (a feedback loop).
        let to_free = used - max;
        let mut freed = 0usize;
        while freed < to_free {
            let picked = match rank {
                Rank::Random => self.random_victim(volatile_only),
                _ => self.pooled_victim(rank, volatile_only),
            };
            let Some((db, key)) = picked else {
                // Nothing left to evict and still over the limit: commands that may
                // grow memory are refused, as Redis's EVICT_FAIL.
                self.eviction_running = false;
                self.eviction_exceeded(true);
                self.record_eviction_cycle(start);
                return false;
            };
            freed += self.evict_key(db, key);
            // Published now, as Redis does: held until after the command, the events'
            // key copies would grow memory by about what each eviction frees.
            self.deliver_notifications();
            evicted += 1;
            if evicted.is_multiple_of(16) {
                // Memory may already be under the limit (a value freed by the lazy-free
                // thread meanwhile), and the pass has a time limit.
                if crate::alloc::used_memory() <= max {
                    break;
                }
                if limit.is_some_and(|l| start.elapsed() > l) {
                    done = false;
                    break;
                }
            }
        }
        self.eviction_running = !done;
        self.eviction_exceeded(!done);
        self.record_eviction_cycle(start);
        true
    }

    /// Memory that eviction leaves out, as Redis's freeMemoryGetNotCountedMemory:
    /// replicas' output buffers and the AOF buffer. Evicting keys to make room for them
    /// would only feed them more DELs.
    pub fn mem_not_counted_for_evict(&self) -> usize {
        // Replicas' own output (their images), and the shared replication buffer
        // beyond the backlog's size, as Redis: the backlog's own share counts, what
        // replicas hold on to beyond it does not (even once they are gone and it
        // waits to be trimmed).
        let mut replicas: usize = self
            .repl
            .peers
            .iter()
            .filter_map(|p| self.clients.get(p.slot).and_then(|c| c.as_deref()))
            .map(|c| {
                // The reply list's own slots: for a replica, mostly its pieces of the
                // shared buffer (Redis counts their list nodes with the buffer).
                let slots =
                    c.sealed.capacity() * std::mem::size_of::<crate::exec::client::OutBlock>();
                c.out_capacity() + c.deferred.capacity() + slots
            })
            .sum();
        let backlog_size = self.config.repl_backlog_size as usize;
        let counted = backlog_size
            + (backlog_size / crate::replication::buffer::BLOCK_SIZE + 1)
                * crate::replication::buffer::BLOCK_OVERHEAD;
        replicas += crate::replication::buffer::memory().saturating_sub(counted);
        let aof = if self.aof.is_some() {
            self.stream.buf.capacity()
        } else {
            0
        };
        replicas + aof
    }

    /// Tracks how long memory stays over the limit: an interval opens when a pass
    /// ends over it (out of time or out of keys) and closes when one gets under.
    pub(crate) fn eviction_exceeded(&mut self, over: bool) {
        let st = &mut self.stats;
        match (over, st.eviction_exceeded_since) {
            (true, None) => st.eviction_exceeded_since = Some(Instant::now()),
            (false, Some(t)) => {
                st.eviction_exceeded_total += t.elapsed();
                st.eviction_exceeded_since = None;
            }
            _ => {}
        }
    }

    /// Continues an eviction pass that ran out of time (called by the event loop).
    pub fn eviction_slice(&mut self) {
        if self.eviction_running && self.busy.is_none() {
            self.perform_evictions();
            self.after_command();
        }
    }

    fn record_eviction_cycle(&mut self, start: Instant) {
        let threshold = self.config.latency_monitor_threshold;
        let cycle_ms = start.elapsed().as_millis() as u64;
        self.latency
            .add_if_needed(threshold, "eviction-cycle", cycle_ms);
    }

    /// Deletes one victim the way Redis's eviction does, with its side effects.
    /// Evicts `key`; returns the memory its delete alone freed.
    fn evict_key(&mut self, db: usize, key: Vec<u8>) -> usize {
        let del_start = Instant::now();
        let before = crate::alloc::used_memory();
        self.ks.delete(db, &key);
        let freed = before.saturating_sub(crate::alloc::used_memory());
        let threshold = self.config.latency_monitor_threshold;
        let del_ms = del_start.elapsed().as_millis() as u64;
        self.latency
            .add_if_needed(threshold, "eviction-del", del_ms);
        self.ks.stats.evicted_keys += 1;
        self.ks.dirty += 1;
        self.signal_modified_key(None, db, &key);
        if self.stream.enabled {
            self.stream.append(db, &[b"DEL", &key]);
        }
        self.notify(notify::EVICTED, "evicted", db, key);
        freed
    }

    /// A random key (allkeys-random / volatile-random), visiting databases in turn.
    fn random_victim(&mut self, volatile_only: bool) -> Option<(usize, Vec<u8>)> {
        let n = self.ks.dbs.len();
        for _ in 0..n {
            self.eviction_next_db = (self.eviction_next_db + 1) % n;
            let db = self.eviction_next_db;
            let d = &self.ks.dbs[db];
            if d.table.is_empty() || (volatile_only && d.volatile == 0) {
                continue;
            }
            // A volatile key is found by sampling; when its keys are mostly persistent
            // and the draws miss, a scan finds one (Redis draws from its expires
            // dict, so it always finds one while any exists).
            let tries = if volatile_only { 64 } else { 1 };
            for _ in 0..tries {
                let Some(e) = d.table.random_entry() else {
                    break;
                };
                if !volatile_only || e.expire().is_some() {
                    return Some((db, e.key().to_vec()));
                }
            }
            if let Some(key) = first_volatile(&d.table, &mut self.eviction_volatile_cursor) {
                return Some((db, key));
            }
        }
        None
    }

    /// The best candidate from the eviction pool after refilling it with a fresh
    /// sample of every database; None when there is no key to evict.
    fn pooled_victim(&mut self, rank: Rank, volatile_only: bool) -> Option<(usize, Vec<u8>)> {
        let samples = self.config.maxmemory_samples.clamp(1, 64) as usize;
        let lfu = self.ks.lfu_params;
        // Rounds in a row that found nothing to pool: a volatile policy whose few
        // volatile keys the bounded sampling keeps missing gives up eventually.
        let mut empty_rounds = 0;
        loop {
            let now = unix_ms();
            let mut total_keys = 0usize;
            for (db, d) in self.ks.dbs.iter().enumerate() {
                let candidates = if volatile_only {
                    d.volatile
                } else {
                    d.table.len()
                };
                if candidates == 0 {
                    continue;
                }
                total_keys += candidates;
                // Volatile policies sample only keys with an expiry; when those are a
                // small part of the table, a bounded number of extra draws finds them.
                let mut taken = 0;
                let mut draws = 0;
                while taken < samples && draws < samples * 8 {
                    draws += 1;
                    let Some(e) = d.table.random_entry() else {
                        break;
                    };
                    if volatile_only && e.expire().is_none() {
                        continue;
                    }
                    taken += 1;
                    let s = score(rank, e.lru(), e.expire(), now, lfu);
                    self.eviction_pool.offer(s, db, e.key());
                }
            }
            if total_keys == 0 {
                return None;
            }
            if self.eviction_pool.is_empty() {
                empty_rounds += 1;
                if empty_rounds >= 64 {
                    // The draws keep missing the few volatile keys: a scan finds one.
                    let cursor = &mut self.eviction_volatile_cursor;
                    return self.ks.dbs.iter().enumerate().find_map(|(db, d)| {
                        (volatile_only && d.volatile > 0)
                            .then(|| first_volatile(&d.table, cursor))
                            .flatten()
                            .map(|key| (db, key))
                    });
                }
                continue;
            }
            // Best first; candidates deleted (or made persistent, for volatile
            // policies) since they were pooled are dropped.
            while let Some(c) = self.eviction_pool.pop_best() {
                let still_there = match self.ks.dbs.get(c.db).and_then(|d| d.table.get(&c.key)) {
                    Some(e) => !volatile_only || e.expire().is_some(),
                    None => false,
                };
                if still_there {
                    return Some((c.db, c.key));
                }
            }
        }
    }
}

/// The next key with an expiry in a scan of `table` from `cursor` (None when it has
/// none): the fallback of volatile policies whose random draws miss a table's few
/// volatile keys. The cursor is kept between calls so that successive evictions go on
/// through the table instead of rescanning its volatile-free start each time; a call
/// ends after at most one full cycle (the cursor back at 0 twice).
fn first_volatile(table: &crate::keyspace::table::KeyTable, cursor: &mut u64) -> Option<Vec<u8>> {
    let mut found = None;
    let mut wraps = 0;
    loop {
        *cursor = table.scan(*cursor, |e| {
            if found.is_none() && e.expire().is_some() {
                found = Some(e.key().to_vec());
            }
        });
        if found.is_some() {
            return found;
        }
        if *cursor == 0 {
            wraps += 1;
            if wraps == 2 || table.is_empty() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keeps_the_best_sixteen_in_order() {
        let mut pool = EvictionPool::default();
        for i in 0..40u64 {
            // Scores 0..40 offered in a scrambled order.
            let s = (i * 17) % 40;
            pool.offer(s, 0, format!("k{s}").as_bytes());
        }
        assert_eq!(pool.len(), EVICTION_POOL_SIZE);
        let mut got = Vec::new();
        while let Some(c) = pool.pop_best() {
            got.push(c.score);
        }
        let want: Vec<u64> = (24..40).rev().collect();
        assert_eq!(got, want);
        assert!(pool.is_empty());
    }

    #[test]
    fn pool_rescores_a_key_offered_twice() {
        let mut pool = EvictionPool::default();
        pool.offer(5, 0, b"a");
        pool.offer(9, 0, b"b");
        pool.offer(1, 0, b"a");
        assert_eq!(pool.len(), 2);
        assert_eq!(pool.pop_best().unwrap().key, b"b");
        let a = pool.pop_best().unwrap();
        assert_eq!((a.key.as_slice(), a.score), (&b"a"[..], 1));
        // The same key name in another database is another candidate.
        pool.offer(3, 0, b"x");
        pool.offer(3, 1, b"x");
        assert_eq!(pool.len(), 2);
        pool.clear();
        assert!(pool.is_empty());
    }

    #[test]
    fn a_full_pool_turns_away_worse_candidates() {
        let mut pool = EvictionPool::default();
        for s in 100..116 {
            pool.offer(s, 0, format!("k{s}").as_bytes());
        }
        pool.offer(50, 0, b"cold");
        assert!(pool.entries.iter().all(|c| c.key != b"cold"));
        pool.offer(200, 0, b"best");
        assert_eq!(pool.len(), EVICTION_POOL_SIZE);
        assert_eq!(pool.entries[0].score, 101, "the worst one left");
        assert_eq!(pool.pop_best().unwrap().key, b"best");
    }

    #[test]
    fn tenacity_time_limits() {
        assert_eq!(eviction_time_limit(0), Some(Duration::ZERO));
        assert_eq!(eviction_time_limit(10), Some(Duration::from_micros(500)));
        assert_eq!(eviction_time_limit(11), Some(Duration::from_micros(575)));
        assert!(eviction_time_limit(99).unwrap() > Duration::from_secs(100));
        assert_eq!(eviction_time_limit(100), None);
    }
}
