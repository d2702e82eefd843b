//! The replica's `FACK`: how much of the master's stream is fsynced in our own AOF.
//!
//! Redis 7.2+ replicas acknowledge with `REPLCONF ACK <reploff> FACK <fsynced>`, where
//! `fsynced` is `server.fsynced_reploff`: the replication offset whose effects are on
//! disk in the local AOF. It is sent only when the AOF is on (`fsynced_reploff` is -1
//! otherwise, and the ACK then has no FACK); while the AOF's first base is not
//! written yet (turned on at runtime, or rewritten after a full resync) it is 0.
//! The master counts for WAITAOF the replicas whose FACK reached a client's offset.
//!
//! Our AOF knows the fsynced *write-stream* position (`aof::fsynced_offset`), not
//! replication offsets, so the replica keeps checkpoints: after each batch of the
//! master's commands it applies, (write-stream position, replication offset). Once
//! the fsynced position reaches a checkpoint's position, its offset is durable. When
//! everything the stream produced is fsynced, the whole applied offset is (PINGs and
//! GETACKs move the offset without writing anything). Checkpoints are pruned as the
//! fsync passes them, so there are at most about a second's worth of batches.

use std::collections::VecDeque;

use crate::exec::Executor;

/// The local AOF's state as FACK needs it (taken from the executor, so the link can
/// be borrowed separately).
#[derive(Clone, Copy)]
pub struct Durability {
    /// `appendonly` is on.
    aof_on: bool,
    /// The fsynced write-stream position, None while there is no valid AOF history.
    fsynced: Option<u64>,
    /// Whether an AOF rewrite runs or is scheduled (the base after a full resync).
    rewriting: bool,
    /// The write stream's end.
    stream_pos: u64,
}

impl Durability {
    pub fn of(ex: &Executor) -> Durability {
        Durability {
            aof_on: ex.aof.is_some(),
            fsynced: crate::persistence::aof::fsynced_offset(ex),
            rewriting: crate::persistence::aof::rewrite_in_progress(ex)
                || ex.aof.as_ref().is_some_and(|a| a.rewrite_scheduled),
            stream_pos: ex.stream.position(),
        }
    }
}

const MAX_CHECKPOINTS: usize = 4096;

#[derive(Default)]
pub struct Tracker {
    /// (write-stream position after a batch, replication offset after it).
    checkpoints: VecDeque<(u64, u64)>,
    /// The highest offset known fsynced.
    durable: u64,
    /// A full resync loaded a new dataset: it is durable only once the AOF rewrite
    /// that follows has written its base.
    base_pending: bool,
    /// The FACK sent last, and whether the master asked (GETACK) for an offset the
    /// fsync had not reached yet: a new ACK goes out as soon as it does.
    pub last_sent: Option<u64>,
    pub wanted: bool,
}

impl Tracker {
    /// After applying a batch of the master's stream.
    pub fn checkpoint(&mut self, stream_pos: u64, reploff: u64) {
        match self.checkpoints.back_mut() {
            // Nothing written since the last checkpoint: same position, later offset.
            Some(last) if last.0 == stream_pos => last.1 = reploff,
            _ => {
                // Bounded (with `appendfsync no` the fsync never passes them): the
                // oldest go first, which only makes the FACK more conservative.
                if self.checkpoints.len() >= MAX_CHECKPOINTS {
                    self.checkpoints.pop_front();
                }
                self.checkpoints.push_back((stream_pos, reploff));
            }
        }
    }

    /// A full resync: the history restarts at `reploff`.
    pub fn reset(&mut self, reploff: u64) {
        self.checkpoints.clear();
        self.durable = reploff;
        self.base_pending = true;
        self.wanted = false;
        self.last_sent = None;
    }

    /// The FACK to send with an ACK, None when the AOF is off.
    pub fn fack(&mut self, d: Durability, reploff: u64) -> Option<u64> {
        if !d.aof_on {
            self.checkpoints.clear();
            return None;
        }
        if self.base_pending {
            if d.rewriting {
                return Some(0);
            }
            self.base_pending = false;
        }
        let Some(fsynced) = d.fsynced else {
            return Some(0);
        };
        if fsynced >= d.stream_pos {
            self.checkpoints.clear();
            self.durable = self.durable.max(reploff);
        } else {
            while let Some(&(pos, off)) = self.checkpoints.front() {
                if pos > fsynced {
                    break;
                }
                self.durable = self.durable.max(off);
                self.checkpoints.pop_front();
            }
        }
        Some(self.durable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(fsynced: u64, stream_pos: u64) -> Durability {
        Durability {
            aof_on: true,
            fsynced: Some(fsynced),
            rewriting: false,
            stream_pos,
        }
    }

    #[test]
    fn fack_follows_the_fsync_through_checkpoints() {
        let mut t = Tracker::default();
        t.checkpoint(100, 1000);
        t.checkpoint(150, 1100);
        // A PING-only batch: no stream growth, the offset moves.
        t.checkpoint(150, 1114);
        assert_eq!(t.fack(d(0, 150), 1114), Some(0));
        assert_eq!(t.fack(d(120, 150), 1114), Some(1000));
        assert_eq!(t.fack(d(150, 150), 1114), Some(1114));
        // Everything fsynced: later pings count at once.
        assert_eq!(t.fack(d(150, 150), 1128), Some(1128));
        assert!(t.checkpoints.is_empty());
    }

    #[test]
    fn checkpoints_are_bounded() {
        let mut t = Tracker::default();
        for i in 1..=(MAX_CHECKPOINTS as u64 + 10) {
            t.checkpoint(i * 10, i * 100);
        }
        assert_eq!(t.checkpoints.len(), MAX_CHECKPOINTS);
        // Dropped checkpoints only delay the FACK to the next one kept.
        assert_eq!(t.fack(d(50, 1_000_000), 0), Some(0));
        assert_eq!(t.fack(d(200, 1_000_000), 0), Some(2000));
    }

    #[test]
    fn no_aof_no_fack_and_resync_waits_for_the_base() {
        let mut t = Tracker::default();
        let off = Durability {
            aof_on: false,
            fsynced: None,
            rewriting: false,
            stream_pos: 0,
        };
        assert_eq!(t.fack(off, 10), None);
        t.reset(500);
        let rewriting = Durability {
            rewriting: true,
            ..d(10, 10)
        };
        assert_eq!(t.fack(rewriting, 500), Some(0));
        assert_eq!(t.fack(d(10, 10), 520), Some(520));
        let waiting = Durability {
            fsynced: None,
            ..d(0, 0)
        };
        assert_eq!(t.fack(waiting, 530), Some(0));
    }
}
