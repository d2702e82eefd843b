//! Keyspace change signals and the per-command hooks of the features that observe
//! them: WATCH (exec/multi.rs), client tracking (exec/tracking.rs), keyspace
//! notifications (exec/pubsub.rs) and MONITOR (exec/monitor.rs).
//!
//! Every write reaches `signal_modified_key` (through `Ctx::modified`), keys deleted by
//! expiry arrive through `Keyspace::expired_events`, and FLUSHDB/FLUSHALL/SWAPDB call
//! their own signals before they change the databases.

use crate::commands::ctx::notify;
use crate::commands::{flags, Command};
use crate::protocol::Reply;

use super::Executor;

impl Executor {
    /// `key` in `db` was modified by the client in `by` (None: the server itself, e.g.
    /// expiry). Touches WATCHes and invalidates tracked copies.
    pub fn signal_modified_key(&mut self, by: Option<usize>, db: usize, key: &[u8]) {
        self.touch_watched_key(db, key);
        self.tracking_invalidate_key(by, key);
    }

    /// `db` (or every database, for None) is about to be emptied.
    pub fn signal_flushed_db(&mut self, db: Option<usize>) {
        let dbs: Vec<usize> = match db {
            Some(d) => vec![d],
            None => (0..self.ks.dbs.len()).collect(),
        };
        for &d in &dbs {
            self.touch_all_watched_in_db(d, None);
        }
        // Blocked XREADGROUPs wake up and fail (NOGROUP), as Redis 7.2+ does for
        // deleted keys; other waiters only re-check a key that still holds their type.
        self.blocking.signal_dbs(&dbs);
        self.tracking_invalidate_all();
    }

    /// Databases `a` and `b` are about to be swapped.
    pub fn signal_swapped_dbs(&mut self, a: usize, b: usize) {
        self.touch_all_watched_in_db(a, Some(b));
        self.touch_all_watched_in_db(b, Some(a));
    }

    /// Turns keys deleted by expiry into signals and `expired` notifications. The
    /// notifications go first: Redis raises them when the key is found expired, before
    /// the command's own events.
    #[inline]
    pub(crate) fn drain_expired_events(&mut self) {
        if !self.ks.expired_events.is_empty() {
            self.signal_expired_keys();
        }
    }

    #[inline(never)]
    fn signal_expired_keys(&mut self) {
        self.stream_expired_drained();
        let events = std::mem::take(&mut self.ks.expired_events);
        let mut notes = Vec::new();
        for (db, key) in events {
            self.signal_modified_key(None, db, &key);
            if self.notify_classes & notify::EXPIRED != 0 {
                notes.push((notify::EXPIRED, "expired", db, key));
            }
        }
        notes.append(&mut self.pending_notifications);
        self.pending_notifications = notes;
    }

    /// Per-call work after a handler ran (also for each command inside EXEC): remember
    /// keys read by tracking clients, expire CLIENT CACHING, feed MONITOR.
    pub(crate) fn after_call(
        &mut self,
        slot: usize,
        cmd: &'static Command,
        args: &[&[u8]],
        _reply: &Reply,
    ) {
        // Keys are remembered for the client whose top-level command this is (a
        // script's or EXEC's caller), taken from the command that read them; read-only
        // scripts count only through the commands they run, as in Redis.
        let tracker = self.current_client.unwrap_or(slot);
        if cmd.flags & flags::READONLY != 0
            && self.client(tracker).tracking.on
            && !matches!(cmd.name, "eval_ro" | "evalsha_ro" | "fcall_ro")
        {
            self.tracking_remember_keys(tracker, cmd, args);
        }
        // CLIENT CACHING covers the next command, or the whole transaction.
        if self.call_nesting == 0 {
            let c = self.client_mut(slot);
            if c.tracking.caching && !c.in_multi() && !cmd.name.starts_with("client|") {
                c.tracking.caching = false;
            }
        }
        // A blocked command re-run when its keys are ready was shown when it blocked.
        if !self.monitors.is_empty() && self.blocking.reprocessing != Some(slot) {
            self.feed_monitors(slot, cmd, args);
        }
    }

    /// Drops a client's transaction, subscriptions, tracking and monitor state
    /// (disconnection and RESET).
    pub fn clear_client_state(&mut self, slot: usize) {
        self.discard_transaction(slot);
        self.unsubscribe_all_silently(slot);
        if self.client(slot).tracking.on {
            self.tracking_disable(slot);
        }
        if self.client(slot).monitor {
            self.monitor_stop(slot);
        }
    }
}
