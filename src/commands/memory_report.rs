//! The memory accounting behind INFO memory, MEMORY STATS and MEMORY DOCTOR, as
//! Redis's `getMemoryOverheadData` splits it: `used_memory` (bytes handed out by the
//! allocator, `alloc.rs`) = overhead + dataset.
//!
//! The overhead is the sum of:
//! - `startup`: `used_memory` once the server was initialised, before loading data
//!   or accepting clients (`alloc::mark_startup`);
//! - the replication backlog's ring;
//! - clients (replicas apart): each client's state (`size_of::<Client>()`, it lives
//!   in the executor's slab), the capacity of its output and deferred-reply buffers
//!   and its pending query bytes;
//! - the AOF buffer (the write stream's capacity);
//! - the script caches: EVAL scripts (body, SHA, cache slot) and function libraries
//!   (code, names, descriptions), plus both Lua VMs' heaps (`lua.used_memory()`:
//!   they are allocated through our global allocator, so `used_memory` holds them;
//!   Redis 8 counts them as overhead too, `script.VMs`);
//! - the key tables, per database: `overhead.hashtable.main` is the bucket slots (8
//!   bytes each, both arrays while a resize is in progress) plus each entry's header
//!   (metadata, key length: 5 bytes); `overhead.hashtable.expires` is
//!   the 8-byte expiry field of each key that has one. Keys and values are dataset.
//!
//! The dataset is what remains. RSS is the process's real resident size
//! (`/proc/self/statm`); the allocator figures come from mimalloc (committed bytes,
//! capped at the RSS since untouched committed pages are not resident).

use crate::alloc;
use crate::exec::Executor;

/// Bytes of an entry's header in the key table (meta, key length).
const ENTRY_HEADER: usize = 5;
/// Bytes of a bucket slot and of an expiry field.
const SLOT: usize = 8;

pub struct DbOverhead {
    pub id: usize,
    pub main: usize,
    pub expires: usize,
}

#[derive(Default)]
pub struct MemReport {
    pub used: usize,
    pub peak: usize,
    pub startup: usize,
    pub rss: usize,
    /// Bytes mimalloc holds from the OS (committed, at most the RSS).
    pub allocator: usize,
    pub backlog: usize,
    pub clients_slaves: usize,
    pub clients_normal: usize,
    pub aof_buffer: usize,
    pub eval_caches: usize,
    pub functions_caches: usize,
    pub vm_eval: usize,
    pub vm_functions: usize,
    pub scripts: usize,
    pub functions: usize,
    pub libraries: usize,
    pub dbs: Vec<DbOverhead>,
    pub lut: usize,
    pub rehashing: usize,
    pub rehashing_count: usize,
    pub overhead: usize,
    pub keys: usize,
    pub dataset: usize,
    pub normal_clients: usize,
    pub replicas: usize,
}

impl MemReport {
    pub fn new(ex: &Executor) -> MemReport {
        let mut r = MemReport {
            used: alloc::used_memory(),
            peak: alloc::peak_memory(),
            startup: alloc::startup_memory(),
            rss: alloc::rss(),
            ..Default::default()
        };
        // Committed pages that were never touched are not resident: what mimalloc
        // holds in memory is at most the process's RSS.
        r.allocator = alloc::allocator_committed().min(r.rss);
        // The backlog and the replicas share one replication buffer (as Redis counts
        // it): beyond the backlog's size, with replicas attached, it is theirs.
        let shared = crate::replication::buffer::memory();
        let backlog_size = ex.config.repl_backlog_size as usize;
        if !ex.repl.peers.is_empty() && shared > backlog_size {
            r.backlog = backlog_size;
            r.clients_slaves = shared - backlog_size;
        } else {
            r.backlog = shared;
        }
        for (slot, c) in ex.clients() {
            if c.embedded {
                continue;
            }
            let bytes = c.memory_usage();
            if ex.repl.peers.iter().any(|p| p.slot == slot) {
                r.clients_slaves += bytes;
                r.replicas += 1;
            } else {
                r.clients_normal += bytes;
                r.normal_clients += 1;
            }
        }
        r.aof_buffer = if ex.aof.is_some() {
            ex.stream.buf.capacity()
        } else {
            0
        };
        if let Some(e) = ex.scripting.as_ref() {
            r.vm_eval = e.eval.lua.used_memory();
            r.scripts = e.scripts.len();
            r.eval_caches = e.scripts.values().map(|s| s.body.len() + 40).sum::<usize>()
                + e.scripts.capacity()
                    * (1 + std::mem::size_of::<(String, crate::scripting::Script)>());
            if let Some(f) = e.functions.as_ref() {
                r.vm_functions = f.vm.lua.used_memory();
                r.libraries = f.libraries.len();
                r.functions = f.function_count();
                r.functions_caches = f
                    .libraries
                    .values()
                    .map(|l| {
                        std::mem::size_of_val(l)
                            + l.name.len()
                            + l.code.len()
                            + l.functions
                                .values()
                                .map(|d| {
                                    std::mem::size_of_val(d)
                                        + 2 * d.name.len()
                                        + d.description.as_ref().map_or(0, |x| x.len())
                                })
                                .sum::<usize>()
                    })
                    .sum::<usize>()
                    + f.index
                        .iter()
                        .map(|(a, (lib, name))| a.len() + lib.len() + name.len())
                        .sum::<usize>();
            }
        }
        for (id, db) in ex.ks.dbs.iter().enumerate() {
            let t = &db.table;
            let buckets = t.buckets() * SLOT;
            r.lut += buckets;
            r.rehashing += t.rehashing_buckets() * SLOT;
            r.rehashing_count += t.is_rehashing() as usize;
            r.keys += t.len();
            // A database is listed while its table is allocated, keys or not, as
            // Redis lists a db with allocated dicts (an emptied table shows its
            // buckets until the timer shrinks it).
            if t.buckets() == 0 {
                continue;
            }
            r.dbs.push(DbOverhead {
                id,
                main: buckets + t.len() * ENTRY_HEADER,
                expires: db.volatile * SLOT,
            });
        }
        r.overhead = r.startup
            + r.backlog
            + r.clients_slaves
            + r.clients_normal
            + r.aof_buffer
            + r.eval_caches
            + r.functions_caches
            + r.vm_eval
            + r.vm_functions
            + r.dbs.iter().map(|d| d.main + d.expires).sum::<usize>();
        r.dataset = r.used.saturating_sub(r.overhead);
        r
    }

    /// Memory grown since startup (at least 1, Redis's `net_usage`).
    fn net_usage(&self) -> usize {
        if self.used > self.startup {
            self.used - self.startup
        } else {
            1
        }
    }

    pub fn dataset_perc(&self) -> f64 {
        self.dataset as f64 * 100.0 / self.net_usage() as f64
    }

    pub fn bytes_per_key(&self) -> usize {
        self.net_usage().checked_div(self.keys).unwrap_or(0)
    }

    pub fn peak_perc(&self) -> f64 {
        self.used as f64 * 100.0 / self.peak.max(1) as f64
    }

    /// Allocator fragmentation: held by the allocator vs. handed out.
    pub fn allocator_frag(&self) -> (f64, i64) {
        ratio(self.allocator, self.used)
    }

    /// Process RSS beyond what the allocator holds (Lua's and the binary's pages,
    /// thread stacks...).
    pub fn rss_overhead(&self) -> (f64, i64) {
        ratio(self.rss, self.allocator)
    }

    /// Total: RSS vs. `used_memory` (`mem_fragmentation_ratio`).
    pub fn total_frag(&self) -> (f64, i64) {
        ratio(self.rss, self.used)
    }

    /// MEMORY DOCTOR's report, with Redis's rules and wording.
    pub fn doctor(&self) -> String {
        const MB10: i64 = 10 << 20;
        if self.used < 5 << 20 {
            return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".into();
        }
        let mut issues: Vec<&str> = Vec::new();
        if self.peak as f64 / self.used as f64 > 1.5 {
            issues.push(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
        }
        let (total, total_bytes) = self.total_frag();
        if total > 1.4 && total_bytes > MB10 {
            issues.push(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"mimalloc\".\n\n");
        }
        let (frag, frag_bytes) = self.allocator_frag();
        if frag > 1.1 && frag_bytes > MB10 {
            issues.push(" * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n");
        }
        let (proc_rss, proc_rss_bytes) = self.rss_overhead();
        if proc_rss > 1.1 && proc_rss_bytes > MB10 {
            issues.push(" * High process RSS overhead: This instance has non-allocator RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the Redis process is much larger than the RSS the allocator holds). This problem may be due to Lua scripts or Modules.\n\n");
        }
        if self.replicas > 0 && self.clients_slaves / self.replicas > 10 << 20 {
            issues.push(" * Big replica buffers: The replica output buffers in this instance are greater than 10MB for each replica (on average). This likely means that there is some replica instance that is struggling receiving data, either because it is too slow or because of networking issues. As a result, data piles on the master output buffers. Please try to identify what replica is not receiving data correctly and why. You can use the INFO output in order to check the replicas delays and the CLIENT LIST command to check the output buffers of each replica.\n\n");
        }
        if self.clients_normal / self.normal_clients.max(1) > 200 << 10 {
            issues.push(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
        }
        if self.scripts > 1000 {
            issues.push(" * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n");
        }
        if issues.is_empty() {
            return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".into();
        }
        let mut s = String::from(
            "Sam, I detected a few issues in this Redis instance memory implants:\n\n",
        );
        for i in issues {
            s.push_str(i);
        }
        s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
        s
    }
}

fn ratio(a: usize, b: usize) -> (f64, i64) {
    (a as f64 / b.max(1) as f64, a as i64 - b as i64)
}
