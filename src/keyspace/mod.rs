//! The keyspace: numbered databases of keys with expiry, the access clock, and the
//! counters and hooks that the rest of the server observes.
//!
//! Expiry is lazy (a key found expired on access is deleted then) plus active: a
//! budgeted cycle walks each database's table with a SCAN cursor and deletes what has
//! expired. Expiry times live inside the key's entry, so keys without a TTL pay nothing;
//! the active cycle's cost per pass is the table size, bounded per tick by its budget.

mod buckets;
pub(crate) mod entry;
pub mod field_expiry;
pub mod lazyfree;
pub mod slot_index;
pub mod table;
pub mod value;

use std::time::{Duration, Instant};

pub use entry::{IntoEntry, StrBytes};
pub use table::{CowSink, EntryMut, EntryRef, KeyTable};
pub use value::{ObjMut, ObjRef, Object, Value, ValueRef};

/// Redis's LRU clock resolution is one second with 24 bits.
pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;

/// One numbered database.
#[derive(Default)]
pub struct Db {
    pub table: KeyTable,
    /// Keys carrying an expiry (INFO keyspace `expires=`).
    pub volatile: usize,
    /// Where the active expiry cycle resumes in this database's table.
    expire_cursor: u64,
    /// Running average TTL of keys sampled by the active cycle (INFO `avg_ttl`).
    pub avg_ttl: i64,
}

/// Counters the keyspace maintains for INFO.
#[derive(Default, Debug, Clone)]
pub struct KeyspaceStats {
    pub expired_keys: u64,
    /// Hash fields deleted by their own TTL (HEXPIRE & co.), lazily or actively.
    pub expired_subkeys: u64,
    pub expired_stale_perc: f64,
    pub expired_time_cap_reached_count: u64,
    pub expire_cycle_cpu_milliseconds: u64,
    pub evicted_keys: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
}

pub struct Keyspace {
    pub dbs: Vec<Db>,
    /// Writes since the last save (INFO `rdb_changes_since_last_save`).
    pub dirty: u64,
    pub stats: KeyspaceStats,
    pub lazyfree: lazyfree::LazyFree,
    /// Keys deleted by expiry since the last drain: (db, key). The executor turns them
    /// into notifications, invalidations and propagated DELs.
    pub expired_events: Vec<(usize, Vec<u8>)>,
    /// Whether the access field holds LFU data (an LFU maxmemory policy) instead of
    /// the LRU clock, and the LFU counter's parameters (lfu-log-factor,
    /// lfu-decay-time). The executor keeps these in step with the configuration.
    pub lfu: bool,
    pub lfu_params: LfuParams,
    /// `lazyfree-lazy-server-del`, kept in step by the executor.
    pub lazy_server_del: bool,
    /// `lazyfree-lazy-expire`, kept in step by the executor.
    pub lazy_expire: bool,
    /// Whether the last active expiry cycle ran out of time with work left.
    pub expire_backlog: bool,
    /// Hashes with field TTLs, for the active expiry of fields.
    pub field_expiry: field_expiry::FieldExpiry,
    /// DEBUG DICT-RESIZING: whether the timer shrinks sparse tables.
    pub dict_resizing: bool,
    /// Tables emptied by FLUSHDB/FLUSHALL while a background snapshot still needed
    /// some of their entries: the snapshot walks them, then frees them
    /// (persistence/cow.rs), so a flush during a snapshot costs no pause.
    pub retired: Vec<KeyTable>,
    /// What lookups do with a key whose expiry has passed (replicas keep them).
    pub expire_mode: ExpireMode,
    /// Lookups leave the access field alone: the running command's client asked for
    /// CLIENT NO-TOUCH. The executor sets this before each command.
    pub no_touch: bool,
    /// CLIENT PAUSE holds expiry back: a master then treats expired keys as `Hide`
    /// does (read as missing, not deleted) until the pause ends.
    pub expire_paused: bool,
    /// Keys given a TTL by a writable replica's own clients (while `expire_mode` is
    /// `Hide`): the master never sends their DEL, so the replica expires them itself
    /// (`expire_replica_keys`), as Redis's slaveKeysWithExpire.
    pub replica_local_expires: std::collections::HashSet<(usize, Vec<u8>)>,
    /// `replica-read-only`, kept in step by the executor: only a writable replica's
    /// write lookups delete expired keys.
    pub replica_read_only: bool,
}

/// Lazy expiry policy. A replica never deletes keys by itself: the master's DELs do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExpireMode {
    /// A master: expired keys are deleted when met.
    #[default]
    Delete,
    /// A replica serving its clients: expired keys read as missing but stay.
    Hide,
    /// A replica applying its master's stream: expired keys are still there.
    Keep,
}

/// Absolute unix time in milliseconds.
pub fn unix_ms() -> i64 {
    unix_us() / 1000
}

/// Absolute unix time in microseconds.
pub fn unix_us() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_REALTIME is always
    // available. This is the per-command clock read, so it skips SystemTime's checks.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000
}

/// The 24-bit LRU clock for a unix time in ms.
pub fn lru_clock(now_ms: i64) -> u32 {
    ((now_ms / 1000) as u32) & LRU_CLOCK_MAX
}

/// Minutes resolution clock for LFU decay, 16 bits as in Redis.
fn lfu_minutes(now_ms: i64) -> u32 {
    ((now_ms / 60_000) as u32) & 0xFFFF
}

/// Initial LFU counter of a new key (Redis's LFU_INIT_VAL): a new key is not the
/// first one evicted before it had a chance to be read.
pub const LFU_INIT_VAL: u32 = 5;

/// The LFU counter's tuning: `log_factor` (lfu-log-factor) slows the counter's
/// logarithmic growth, `decay_minutes` (lfu-decay-time) is how many idle minutes cost
/// one point (0: never decays).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LfuParams {
    pub log_factor: u32,
    pub decay_minutes: u32,
}

impl Default for LfuParams {
    fn default() -> Self {
        LfuParams {
            log_factor: 10,
            decay_minutes: 1,
        }
    }
}

/// The access field of a new key under an LFU policy: minutes (16 bits) | counter (8).
pub fn lfu_initial(now_ms: i64) -> u32 {
    (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL
}

/// The LFU counter after decay: one point per `decay_minutes` elapsed since the
/// field's last access time (the 16-bit minutes clock wraps about every 45 days).
pub fn lfu_counter(field: u32, now_ms: i64, params: LfuParams) -> u32 {
    let last = (field >> 8) & 0xFFFF;
    let now = lfu_minutes(now_ms);
    let elapsed = if now >= last {
        now - last
    } else {
        65535 - last + now
    };
    let periods = elapsed.checked_div(params.decay_minutes).unwrap_or(0);
    (field & 0xFF).saturating_sub(periods)
}

/// One logarithmic increment: the higher the counter already is (above the initial
/// value), the less likely an access raises it; 255 is the ceiling.
fn lfu_log_incr(counter: u32, log_factor: u32) -> u32 {
    if counter >= 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if fastrand::f64() < p {
        counter + 1
    } else {
        counter
    }
}

/// An access under an LFU policy: decay, then a logarithmic increment, stamped with
/// the current minute.
pub fn lfu_touch(field: u32, now_ms: i64, params: LfuParams) -> u32 {
    let counter = lfu_log_incr(lfu_counter(field, now_ms, params), params.log_factor);
    (lfu_minutes(now_ms) << 8) | counter
}

/// Seconds since an LRU clock value, accounting for wrap-around.
pub fn lru_idle_ms(lru: u32, now_ms: i64) -> i64 {
    let now = lru_clock(now_ms);
    let idle = if now >= lru {
        now - lru
    } else {
        LRU_CLOCK_MAX - lru + now
    };
    idle as i64 * 1000
}

/// How the access field is kept: the LRU clock or the LFU counter.
#[derive(Debug, Clone, Copy)]
pub struct AccessPolicy {
    pub lfu: bool,
    pub params: LfuParams,
}

impl AccessPolicy {
    /// The field of a key created now.
    pub fn initial(self, now_ms: i64) -> u32 {
        if self.lfu {
            lfu_initial(now_ms)
        } else {
            lru_clock(now_ms)
        }
    }

    /// The field after an access at `now_ms`.
    pub fn touched(self, field: u32, now_ms: i64) -> u32 {
        if self.lfu {
            lfu_touch(field, now_ms, self.params)
        } else {
            lru_clock(now_ms)
        }
    }
}

impl Keyspace {
    pub fn access_policy(&self) -> AccessPolicy {
        AccessPolicy {
            lfu: self.lfu,
            params: self.lfu_params,
        }
    }

    pub fn new(databases: usize) -> Self {
        Keyspace {
            dbs: (0..databases.max(1)).map(|_| Db::default()).collect(),
            dirty: 0,
            stats: KeyspaceStats::default(),
            lazyfree: lazyfree::LazyFree::new(),
            expired_events: Vec::new(),
            lfu: false,
            lfu_params: LfuParams::default(),
            lazy_server_del: false,
            lazy_expire: false,
            expire_backlog: false,
            field_expiry: field_expiry::FieldExpiry::default(),
            dict_resizing: true,
            retired: Vec::new(),
            expire_mode: ExpireMode::Delete,
            no_touch: false,
            expire_paused: false,
            replica_local_expires: Default::default(),
            replica_read_only: true,
        }
    }

    /// The expiry behaviour in force: `expire_mode`, or `Hide` for a master during
    /// CLIENT PAUSE.
    pub fn effective_expire_mode(&self) -> ExpireMode {
        match self.expire_mode {
            ExpireMode::Delete if self.expire_paused => ExpireMode::Hide,
            mode => mode,
        }
    }

    /// Whether `key` exists and has not expired, without touching it.
    pub fn exists(&mut self, db: usize, key: &[u8], now_ms: i64) -> bool {
        if self.expire_if_needed(db, key, now_ms)
            && self.effective_expire_mode() == ExpireMode::Hide
        {
            return false;
        }
        self.dbs[db].table.contains(key)
    }

    /// The type of `key` if it exists and has not expired, without deleting it when
    /// it has (Redis's LOOKUP_NOEXPIRE): blocked clients look at a key this way
    /// before their command runs again, so an expired key's DEL is propagated by the
    /// command that next touches it, in its place in the stream.
    pub fn live_type(&self, db: usize, key: &[u8], now_ms: i64) -> Option<&'static str> {
        let keep = self.effective_expire_mode() == ExpireMode::Keep;
        self.dbs[db]
            .table
            .get(key)
            .filter(|e| keep || !matches!(e.expire(), Some(t) if t <= now_ms))
            .map(|e| e.value().type_name())
    }

    /// Deletes `key` if its expiry has passed; returns true if it did.
    pub fn expire_if_needed(&mut self, db: usize, key: &[u8], now_ms: i64) -> bool {
        // No key of the database has an expiry (the count active expiry trusts too):
        // no second lookup of the key on every command.
        if self.dbs[db].volatile == 0 {
            return false;
        }
        let expired = match self.dbs[db].table.get(key) {
            Some(e) => matches!(e.expire(), Some(t) if t <= now_ms),
            None => false,
        };
        if expired {
            match self.effective_expire_mode() {
                ExpireMode::Delete => self.delete_expired(db, key),
                ExpireMode::Hide => {}
                ExpireMode::Keep => return false,
            }
        }
        expired
    }

    /// Deletes an expired key, its value freed as `lazyfree-lazy-expire` says (a big
    /// value goes to the background either way, counted only when lazy, as Redis
    /// counts it): expiring a million-member set must not stall the loop.
    fn delete_expired(&mut self, db: usize, key: &[u8]) {
        if let Some(v) = self.remove(db, key) {
            if self.lazy_expire {
                self.lazyfree.free_async(v);
            } else {
                self.lazyfree.free(v);
            }
            self.stats.expired_keys += 1;
            self.dirty += 1;
            self.expired_events.push((db, key.to_vec()));
        }
    }

    /// Looks a key up for reading: expired keys are deleted first; a hit refreshes the
    /// access clock unless `touch` is false. Counts keyspace hits and misses.
    pub fn lookup(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: i64,
        touch: bool,
    ) -> Option<EntryRef<'_>> {
        if self.expire_if_needed(db, key, now_ms)
            && self.effective_expire_mode() == ExpireMode::Hide
        {
            self.stats.keyspace_misses += 1;
            return None;
        }
        let access = self.access_policy();
        let table = &mut self.dbs[db].table;
        let found = if touch && !self.no_touch {
            table.get_mut(key).map(|mut e| {
                e.set_lru(access.touched(e.lru(), now_ms));
                e.into_ref()
            })
        } else {
            table.get(key)
        };
        match found {
            Some(_) => self.stats.keyspace_hits += 1,
            None => self.stats.keyspace_misses += 1,
        }
        found
    }

    /// Looks a key up for writing.
    pub fn lookup_mut(&mut self, db: usize, key: &[u8], now_ms: i64) -> Option<EntryMut<'_>> {
        if self.expire_if_needed(db, key, now_ms)
            && self.effective_expire_mode() == ExpireMode::Hide
        {
            // A writable replica's client writes over an expired key: it goes first,
            // so the write starts afresh (no stale TTL kept), as Redis's lookupKey
            // with EXPIRE_FORCE_DELETE_EXPIRED. Not on a read-only replica (PFCOUNT
            // looks up for writing there), nor during a pause on a master.
            if self.expire_mode == ExpireMode::Hide && !self.replica_read_only {
                self.delete_expired(db, key);
            }
            return None;
        }
        let access = self.access_policy();
        let no_touch = self.no_touch;
        let mut e = self.dbs[db].table.get_mut(key)?;
        if !no_touch {
            e.set_lru(access.touched(e.lru(), now_ms));
        }
        Some(e)
    }

    /// Looks a key up for writing as `lookup_mut`, and when it is missing stores
    /// `make()` under it and returns that (Redis's lookupKeyWrite, then dbAdd): one
    /// lookup of the key where a test, a store and a lookup took three. The flag:
    /// whether the key was made (its access field is then the initial one).
    pub fn lookup_mut_or_add(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: i64,
        make: impl FnOnce() -> Value,
    ) -> (EntryMut<'_>, bool) {
        let access = self.access_policy();
        if self.expire_if_needed(db, key, now_ms)
            && self.effective_expire_mode() == ExpireMode::Hide
        {
            // Expired but kept (a replica, a pause): written over as `lookup_mut`
            // and `set` do, the old entry (and its TTL) replaced.
            if self.expire_mode == ExpireMode::Hide && !self.replica_read_only {
                self.delete_expired(db, key);
            }
            self.set(db, key, make(), None, false, now_ms);
            let e = self.dbs[db].table.get_mut(key).expect("just stored");
            return (e, true);
        }
        let no_touch = self.no_touch;
        let (mut e, made) = self.dbs[db]
            .table
            .get_mut_or_insert_with(key, make, || access.initial(now_ms));
        if !made && !no_touch {
            e.set_lru(access.touched(e.lru(), now_ms));
        }
        (e, made)
    }

    /// Stores `value` under `key`, replacing any previous value. `expire` is the new
    /// expiry; `keep_ttl` keeps the old one instead (SET KEEPTTL).
    pub fn set(
        &mut self,
        db: usize,
        key: &[u8],
        value: impl IntoEntry,
        expire: Option<i64>,
        keep_ttl: bool,
        now_ms: i64,
    ) {
        self.store(db, key, value, expire, keep_ttl, now_ms, true);
    }

    /// Replaces the value of a key the caller has already looked up for writing (which
    /// counted as the access): the expiry and the access field stay as they are, as
    /// Redis's dbReplaceValue. A missing key is created.
    pub fn replace(&mut self, db: usize, key: &[u8], value: Value, now_ms: i64) {
        self.store(db, key, value, None, true, now_ms, false);
    }

    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        db: usize,
        key: &[u8],
        value: impl IntoEntry,
        expire: Option<i64>,
        keep_ttl: bool,
        now_ms: i64,
        touch: bool,
    ) {
        let touch = touch && !self.no_touch;
        if expire.is_some() {
            self.note_local_expire(db, key);
        }
        let d = &mut self.dbs[db];
        // A new key starts with a fresh access field; an overwritten one keeps its
        // history, counted as one access (Redis's setKey looks the key up for writing,
        // then the new value inherits the old one's field).
        let access = AccessPolicy {
            lfu: self.lfu,
            params: self.lfu_params,
        };
        let old = d
            .table
            .insert(key, expire, keep_ttl, value, |old| match old {
                Some(field) if touch => access.touched(field, now_ms),
                Some(field) => field,
                None => access.initial(now_ms),
            });
        let old_volatile = matches!(old, Some((_, Some(_))));
        let new_volatile = expire.is_some() || (keep_ttl && old_volatile);
        match (old_volatile, new_volatile) {
            (false, true) => d.volatile += 1,
            (true, false) => d.volatile -= 1,
            _ => {}
        }
        if let Some((Some(v), _)) = old {
            self.free_server_del(v);
        }
    }

    /// Frees a value the server itself removed or replaced (Redis's dbDelete and
    /// dbSetValue): asynchronously, in Redis's counting, under
    /// `lazyfree-lazy-server-del`.
    fn free_server_del(&mut self, v: Value) {
        if self.lazy_server_del {
            self.lazyfree.free_async(v);
        } else {
            self.lazyfree.free(v);
        }
    }

    /// Removes a key, returning its value (the caller decides how to free it).
    pub fn remove(&mut self, db: usize, key: &[u8]) -> Option<Value> {
        let d = &mut self.dbs[db];
        let (v, exp) = d.table.remove(key)?;
        if exp.is_some() {
            d.volatile -= 1;
        }
        Some(v)
    }

    /// Deletes a key as the server does (freed per `lazyfree-lazy-server-del`; big
    /// values go to the background either way). Returns whether it existed.
    pub fn delete(&mut self, db: usize, key: &[u8]) -> bool {
        match self.remove(db, key) {
            Some(v) => {
                self.free_server_del(v);
                true
            }
            None => false,
        }
    }

    /// Deletes a key for DEL (`lazy`: `lazyfree-lazy-user-del`) or UNLINK (`lazy`
    /// true): a lazy delete is counted in INFO's lazyfree fields as Redis's.
    pub fn delete_user(&mut self, db: usize, key: &[u8], lazy: bool) -> bool {
        match self.remove(db, key) {
            Some(v) if lazy => {
                self.lazyfree.free_async(v);
                true
            }
            Some(v) => {
                self.lazyfree.free(v);
                true
            }
            None => false,
        }
    }

    /// Sets or clears a key's expiry. Returns false if the key does not exist.
    pub fn set_expire(&mut self, db: usize, key: &[u8], expire: Option<i64>) -> bool {
        if expire.is_some() && self.dbs[db].table.contains(key) {
            self.note_local_expire(db, key);
        }
        let d = &mut self.dbs[db];
        let had = match d.table.get(key) {
            Some(e) => e.expire().is_some(),
            None => return false,
        };
        d.table.set_expire(key, expire);
        match (had, expire.is_some()) {
            (false, true) => d.volatile += 1,
            (true, false) => d.volatile -= 1,
            _ => {}
        }
        true
    }

    /// Remembers a key given a TTL on a replica by one of its own clients (only a
    /// writable replica's get that far).
    fn note_local_expire(&mut self, db: usize, key: &[u8]) {
        if self.expire_mode == ExpireMode::Hide {
            self.replica_local_expires.insert((db, key.to_vec()));
        }
    }

    /// A replica's own expiry, of the keys its clients gave a TTL: those whose time
    /// passed are deleted (as a master deletes them), those without a TTL any more or
    /// gone are forgotten. Returns how many were deleted.
    pub fn expire_replica_keys(&mut self, now_ms: i64) -> usize {
        if self.replica_local_expires.is_empty() {
            return 0;
        }
        let tracked: Vec<(usize, Vec<u8>)> = self.replica_local_expires.iter().cloned().collect();
        let mut deleted = 0;
        for (db, key) in tracked {
            let expire = self
                .dbs
                .get(db)
                .and_then(|d| d.table.get(&key))
                .and_then(|e| e.expire());
            match expire {
                Some(t) if t > now_ms => continue,
                Some(_) => {
                    self.delete_expired(db, &key);
                    deleted += 1;
                }
                None => {}
            }
            self.replica_local_expires.remove(&(db, key));
        }
        deleted
    }

    /// Empties one database; `lazy` is an asynchronous flush in Redis's terms (its
    /// keys are counted in INFO's lazyfree fields).
    pub fn flush_db(&mut self, db: usize, lazy: bool) {
        let d = &mut self.dbs[db];
        let fresh = KeyTable::with_slot_index(d.table.has_slot_index());
        let table = std::mem::replace(&mut d.table, fresh);
        d.volatile = 0;
        d.expire_cursor = 0;
        d.avg_ttl = 0;
        if table.cow_active() && !table.cow_discarding() {
            self.retired.push(table);
        } else if lazy || table.len() > lazyfree::LAZYFREE_THRESHOLD {
            self.lazyfree.free_table(table, lazy);
        } else {
            drop(table);
        }
    }

    pub fn flush_all(&mut self, lazy: bool) {
        for db in 0..self.dbs.len() {
            self.flush_db(db, lazy);
        }
    }

    /// Exchanges two databases' contents (SWAPDB).
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        self.dbs.swap(a, b);
        self.field_expiry.swap_dbs(a, b);
    }

    /// Total keys across databases.
    pub fn key_count(&self) -> usize {
        self.dbs.iter().map(|d| d.table.len()).sum()
    }

    /// Background housekeeping for one timer tick: incremental rehashing and shrinking
    /// (about 1 ms per database with work), and the active expiry cycle within `budget`.
    /// Timer housekeeping: starts shrinking sparse tables and rehashes for about 1 ms in
    /// total.
    pub fn housekeeping(&mut self) {
        let start = Instant::now();
        for d in &mut self.dbs {
            if self.dict_resizing {
                d.table.shrink_if_needed();
            }
            if d.table.is_rehashing() {
                let left = Duration::from_millis(1).saturating_sub(start.elapsed());
                if left.is_zero() {
                    break;
                }
                d.table.rehash_for(left);
            }
        }
    }

    /// Walks tables with a cursor, deleting expired keys, until `budget` is spent or
    /// each volatile database has been visited for a bounded number of buckets.
    /// Returns the number of keys expired; `expire_backlog` tells whether it stopped
    /// because the budget ran out.
    pub fn active_expire_cycle(&mut self, now_ms: i64, budget: Duration) -> usize {
        let start = Instant::now();
        self.expire_backlog = false;
        let mut expired_total = 0;
        let mut sampled_total = 0usize;
        let mut expired_found = 0usize;
        for db in 0..self.dbs.len() {
            if self.dbs[db].volatile == 0 {
                continue;
            }
            // Visit buckets in batches, re-checking the clock between batches.
            let mut batches = 0;
            loop {
                let mut to_delete: Vec<Vec<u8>> = Vec::new();
                let d = &mut self.dbs[db];
                let mut cursor = d.expire_cursor;
                let mut visited = 0;
                let mut ttl_sum: i64 = 0;
                let mut ttl_n: i64 = 0;
                // 64 key slots a batch: eight buckets of eight.
                while visited * table::BUCKET_SLOTS < 64 {
                    cursor = d.table.scan(cursor, |e| {
                        if let Some(t) = e.expire() {
                            sampled_total += 1;
                            if t <= now_ms {
                                to_delete.push(e.key().to_vec());
                            } else {
                                ttl_sum += t - now_ms;
                                ttl_n += 1;
                            }
                        }
                    });
                    visited += 1;
                    if cursor == 0 {
                        break;
                    }
                }
                d.expire_cursor = cursor;
                if ttl_n > 0 {
                    let avg = ttl_sum / ttl_n;
                    d.avg_ttl = if d.avg_ttl == 0 {
                        avg
                    } else {
                        (d.avg_ttl / 50) * 49 + avg / 50
                    };
                }
                expired_found += to_delete.len();
                for k in &to_delete {
                    self.delete_expired(db, k);
                }
                expired_total += to_delete.len();
                batches += 1;
                if start.elapsed() >= budget {
                    self.stats.expired_time_cap_reached_count += 1;
                    self.expire_backlog = true;
                    self.finish_cycle(start, sampled_total, expired_found);
                    return expired_total;
                }
                // Keep going on this database only while expired keys are plentiful
                // (more than 10% of what was sampled), as Redis's adaptive cycle does.
                if cursor == 0 || batches >= 16 && to_delete.len() * 10 < 64 {
                    break;
                }
                if self.dbs[db].volatile == 0 {
                    break;
                }
            }
        }
        self.finish_cycle(start, sampled_total, expired_found);
        expired_total
    }

    fn finish_cycle(&mut self, start: Instant, sampled: usize, expired: usize) {
        self.stats.expire_cycle_cpu_milliseconds += start.elapsed().as_millis() as u64;
        let current = if sampled > 0 {
            expired as f64 / sampled as f64
        } else {
            0.0
        };
        self.stats.expired_stale_perc = current * 0.05 + self.stats.expired_stale_perc * 0.95;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazy_and_active_expiry() {
        let mut ks = Keyspace::new(2);
        let now = 1_000_000;
        ks.set(0, b"a", Value::Int(1), Some(now + 10), false, now);
        ks.set(0, b"b", Value::Int(2), None, false, now);
        assert_eq!(ks.dbs[0].volatile, 1);
        assert!(ks.lookup(0, b"a", now, true).is_some());
        assert!(ks.lookup(0, b"a", now + 10, true).is_none());
        assert_eq!(ks.stats.expired_keys, 1);
        assert_eq!(ks.dbs[0].volatile, 0);
        assert_eq!(ks.expired_events, vec![(0, b"a".to_vec())]);

        for i in 0..5000 {
            ks.set(
                1,
                format!("k{i}").as_bytes(),
                Value::Int(i),
                Some(now + 5),
                false,
                now,
            );
        }
        let mut n = 0;
        while ks.dbs[1].volatile > 0 {
            n += ks.active_expire_cycle(now + 6, Duration::from_millis(50));
        }
        assert_eq!(n, 5000);
        assert_eq!(ks.dbs[1].table.len(), 0);
    }

    #[test]
    fn keep_ttl_and_volatile_count() {
        let mut ks = Keyspace::new(1);
        ks.set(0, b"k", Value::Int(1), Some(50), false, 0);
        ks.set(0, b"k", Value::Int(2), None, true, 0);
        assert_eq!(ks.dbs[0].table.get(b"k").unwrap().expire(), Some(50));
        assert_eq!(ks.dbs[0].volatile, 1);
        ks.set(0, b"k", Value::Int(3), None, false, 0);
        assert_eq!(ks.dbs[0].volatile, 0);
        assert!(ks.set_expire(0, b"k", Some(9)));
        assert_eq!(ks.dbs[0].volatile, 1);
        assert!(ks.delete(0, b"k"));
        assert_eq!(ks.dbs[0].volatile, 0);
    }
}
