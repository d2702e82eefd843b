//! Freeing big values off the executor thread.
//!
//! Dropping a collection of millions of elements takes long enough to stall every
//! client, so values whose free effort (Redis's lazyfreeGetFreeEffort, see
//! `ObjRef::free_effort`) passes Redis's threshold, and whole tables emptied by
//! FLUSHDB/FLUSHALL, are handed to a background thread. Small values are dropped in
//! place: a channel send costs more than freeing them.
//!
//! INFO's `lazyfree_pending_objects` / `lazyfreed_objects` count what Redis counts:
//! only frees Redis makes asynchronous (UNLINK, DEL under `lazyfree-lazy-user-del`,
//! overwrites and server deletions under `lazyfree-lazy-server-del`, FLUSH… ASYNC and
//! the blocking-async FLUSH…), one per value and one per key of a flushed table.
//! Where Redis frees synchronously, a big value still goes to the thread here (so the
//! executor never stalls on it) but is not counted, so both counters read as Redis's.
//!
//! Jobs are processed in order; each has a ticket, and `done()` is the last ticket
//! processed. A client blocked by FLUSHALL/FLUSHDB SYNC waits for the ticket of the
//! flush's job: everything queued before it has been freed by then.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use super::table::KeyTable;
use super::value::Value;

/// Values whose free effort exceeds this are freed in the background (Redis's
/// LAZYFREE_THRESHOLD).
pub const LAZYFREE_THRESHOLD: usize = 64;

/// Anything that is only waiting to be dropped.
type Garbage = Box<dyn Send>;

/// One background job: the garbage and how many objects it counts for in INFO.
struct Job {
    garbage: Garbage,
    counted: u64,
    ticket: u64,
}

pub struct LazyFree {
    tx: Option<Sender<Job>>,
    pending: Arc<AtomicU64>,
    freed: Arc<AtomicU64>,
    /// Ticket of the last job sent.
    sent: u64,
    /// Ticket of the last job the thread finished.
    done: Arc<AtomicU64>,
}

impl Default for LazyFree {
    fn default() -> Self {
        Self::new()
    }
}

impl LazyFree {
    pub fn new() -> Self {
        let (tx, rx) = channel::<Job>();
        let pending = Arc::new(AtomicU64::new(0));
        let freed = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let (p, f, d) = (pending.clone(), freed.clone(), done.clone());
        let spawned = std::thread::Builder::new()
            .name("lazyfree".into())
            .spawn(move || {
                crate::affinity::pin_current(crate::affinity::ThreadRole::Bio);
                while let Ok(job) = rx.recv() {
                    drop(job.garbage);
                    if job.counted > 0 {
                        p.fetch_sub(job.counted, Ordering::Relaxed);
                        f.fetch_add(job.counted, Ordering::Relaxed);
                    }
                    d.store(job.ticket, Ordering::Release);
                }
            });
        LazyFree {
            tx: spawned.ok().map(|_| tx),
            pending,
            freed,
            sent: 0,
            done,
        }
    }

    /// Whether freeing `v` is worth a trip to the background thread.
    fn is_big(v: &Value) -> bool {
        match v {
            Value::Obj(o) => o.free_effort() > LAZYFREE_THRESHOLD,
            Value::RawStr(_) | Value::Str(_) | Value::Int(_) => false,
        }
    }

    /// Frees `v` where Redis frees synchronously: a big value is still dropped in the
    /// background, uncounted.
    pub fn free(&mut self, v: Value) {
        if Self::is_big(&v) {
            self.send(Box::new(v), 0);
        }
    }

    /// Frees `v` as Redis's freeObjAsync: in the background if big, counted.
    pub fn free_async(&mut self, v: Value) {
        if Self::is_big(&v) {
            self.send(Box::new(v), 1);
        }
    }

    /// Frees a whole table in the background; `counted` (an asynchronous flush in
    /// Redis's terms) counts each of its keys.
    pub fn free_table(&mut self, t: KeyTable, counted: bool) {
        if t.is_empty() {
            return;
        }
        let n = if counted { t.len() as u64 } else { 0 };
        self.send(Box::new(t), n);
    }

    /// Frees something other than keyspace values in the background (a flushed script
    /// VM), counting `counted` objects as Redis does for it.
    pub fn free_other(&mut self, garbage: Garbage, counted: u64) {
        self.send(garbage, counted);
    }

    fn send(&mut self, garbage: Garbage, counted: u64) {
        let Some(tx) = &self.tx else {
            return;
        };
        self.sent += 1;
        self.pending.fetch_add(counted, Ordering::Relaxed);
        let job = Job {
            garbage,
            counted,
            ticket: self.sent,
        };
        if let Err(e) = tx.send(job) {
            // The thread is gone: free here.
            self.pending.fetch_sub(counted, Ordering::Relaxed);
            self.freed.fetch_add(counted, Ordering::Relaxed);
            self.done.store(e.0.ticket, Ordering::Release);
            drop(e.0.garbage);
        }
    }

    /// The ticket of the last job queued (0: none yet).
    pub fn last_ticket(&self) -> u64 {
        self.sent
    }

    /// Whether every job up to `ticket` has been processed.
    pub fn is_done(&self, ticket: u64) -> bool {
        self.done.load(Ordering::Acquire) >= ticket
    }

    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    pub fn freed(&self) -> u64 {
        self.freed.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT: Redis resets `lazyfreed_objects` (the pending count stays).
    pub fn reset_freed(&self) {
        self.freed.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_values_are_freed_in_background_and_counted_when_async() {
        let mut lf = LazyFree::new();
        lf.free(Value::RawStr(vec![0; 1 << 20]));
        lf.free(Value::Int(1));
        let mut t = KeyTable::new();
        t.insert(b"k", None, false, Value::Int(1), |_| 0);
        t.insert(b"j", None, false, Value::Int(2), |_| 0);
        lf.free_table(t, true);
        let mut t = KeyTable::new();
        t.insert(b"k", None, false, Value::Int(1), |_| 0);
        lf.free_table(t, false);
        let ticket = lf.last_ticket();
        assert_eq!(ticket, 2);
        for _ in 0..1000 {
            if lf.is_done(ticket) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(lf.is_done(ticket));
        assert_eq!(lf.freed(), 2);
        assert_eq!(lf.pending(), 0);
        lf.reset_freed();
        assert_eq!(lf.freed(), 0);
    }
}
