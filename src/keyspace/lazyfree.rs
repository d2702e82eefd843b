//! Freeing big values off the executor thread.
//!
//! Dropping a collection of millions of elements takes long enough to stall every
//! client, so values with many elements (and whole tables emptied by FLUSHALL) are
//! handed to a background thread. Small values are dropped in place: a channel send
//! costs more than freeing them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use super::table::KeyTable;
use super::value::Value;

/// Values with more elements than this are freed in the background (Redis's
/// LAZYFREE_THRESHOLD).
pub const LAZYFREE_THRESHOLD: usize = 64;
/// Heap strings at least this long are freed in the background too.
const BIG_STRING: usize = 1 << 20;

/// Anything that is only waiting to be dropped.
type Garbage = Box<dyn Send>;

pub struct LazyFree {
    tx: Option<Sender<Garbage>>,
    pending: Arc<AtomicU64>,
    freed: Arc<AtomicU64>,
}

impl Default for LazyFree {
    fn default() -> Self {
        Self::new()
    }
}

impl LazyFree {
    pub fn new() -> Self {
        let (tx, rx) = channel::<Garbage>();
        let pending = Arc::new(AtomicU64::new(0));
        let freed = Arc::new(AtomicU64::new(0));
        let (p, f) = (pending.clone(), freed.clone());
        let spawned = std::thread::Builder::new()
            .name("lazyfree".into())
            .spawn(move || {
                while let Ok(g) = rx.recv() {
                    drop(g);
                    p.fetch_sub(1, Ordering::Relaxed);
                    f.fetch_add(1, Ordering::Relaxed);
                }
            });
        LazyFree {
            tx: spawned.ok().map(|_| tx),
            pending,
            freed,
        }
    }

    /// Whether freeing `v` is worth a trip to the background thread.
    fn is_big(v: &Value) -> bool {
        match v {
            Value::Obj(o) => o.element_count() > LAZYFREE_THRESHOLD,
            Value::RawStr(b) | Value::Str(b) => b.len() >= BIG_STRING,
            Value::Int(_) => false,
        }
    }

    /// Frees `v`, in the background if it is big.
    pub fn free(&self, v: Value) {
        if Self::is_big(&v) {
            self.send(Box::new(v));
        }
    }

    /// Frees a whole table in the background.
    pub fn free_table(&self, t: KeyTable) {
        if t.is_empty() {
            return;
        }
        self.send(Box::new(t));
    }

    fn send(&self, g: Garbage) {
        if let Some(tx) = &self.tx {
            self.pending.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = tx.send(g) {
                self.pending.fetch_sub(1, Ordering::Relaxed);
                drop(e.0);
            }
        }
    }

    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    pub fn freed(&self) -> u64 {
        self.freed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_values_are_freed_in_background() {
        let lf = LazyFree::new();
        lf.free(Value::RawStr(vec![0; BIG_STRING]));
        lf.free(Value::Int(1));
        let mut t = KeyTable::new();
        t.insert(b"k", None, Value::Int(1), |_| 0);
        lf.free_table(t);
        for _ in 0..1000 {
            if lf.freed() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert_eq!(lf.freed(), 2);
        assert_eq!(lf.pending(), 0);
    }
}
