//! Transactions: the MULTI queue, EXEC, and WATCH's optimistic locking.
//!
//! A client in MULTI has its commands resolved and checked (unknown command, arity,
//! auth) as usual and then queued instead of run; any such error marks the transaction
//! so that EXEC answers EXECABORT. EXEC runs the queue through `Executor::call` with
//! `Client::in_exec` set: blocking commands read that flag and do not block, and
//! `call` leaves the after-command work (notifications, BCAST invalidations, waking
//! blocked clients) to the end of EXEC, so waiters see the transaction as one step.
//!
//! WATCH keeps, per database, key → watching client slots, and per client the list of
//! keys it watches. Every modification reaches `touch_watched_key` through the
//! keyspace signals (exec/signals.rs); a touched client is marked dirty and its EXEC
//! answers a null array. A key already logically expired when WATCHed is remembered
//! as such, so that its deletion by expiry is not a change (Redis 7 semantics).

use crate::util::FastMap;

use crate::commands::{flags, Command};
use crate::protocol::Reply;

use super::Executor;

/// One queued command.
pub struct Queued {
    pub cmd: &'static Command,
    pub args: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Queued({})", self.cmd.name)
    }
}

/// State of a client between MULTI and EXEC/DISCARD.
#[derive(Debug, Default)]
pub struct MultiState {
    pub queue: Vec<Queued>,
    /// Bytes of the queued arguments plus a pointer each (CLIENT LIST `multi-mem`,
    /// Redis's argv_len_sums).
    pub argv_len_sums: usize,
    /// An error happened while queueing: EXEC answers EXECABORT.
    pub dirty_exec: bool,
}

/// One key a client WATCHes.
#[derive(Debug)]
pub struct WatchedKey {
    pub db: usize,
    pub key: Vec<u8>,
    /// The key was logically expired when WATCHed.
    pub expired: bool,
}

/// A client's transaction state.
#[derive(Debug, Default)]
pub struct ClientTx {
    pub multi: Option<MultiState>,
    pub watched: Vec<WatchedKey>,
    /// A watched key was touched: EXEC answers a null array.
    pub dirty_cas: bool,
}

/// Server-wide index: per database, watched key → client slots.
#[derive(Default)]
pub struct WatchRegistry {
    per_db: Vec<FastMap<Vec<u8>, Vec<usize>>>,
    /// Number of (db, key) entries, so that writes pay nothing while nobody watches.
    keys: usize,
}

impl WatchRegistry {
    pub fn total_keys(&self) -> usize {
        self.keys
    }

    fn add(&mut self, db: usize, key: &[u8], slot: usize) {
        if self.per_db.len() <= db {
            self.per_db.resize_with(db + 1, FastMap::default);
        }
        let clients = self.per_db[db].entry(key.to_vec()).or_insert_with(|| {
            self.keys += 1;
            Vec::new()
        });
        clients.push(slot);
    }

    fn remove(&mut self, db: usize, key: &[u8], slot: usize) {
        let Some(map) = self.per_db.get_mut(db) else {
            return;
        };
        if let Some(clients) = map.get_mut(key) {
            clients.retain(|&s| s != slot);
            if clients.is_empty() {
                map.remove(key);
                self.keys -= 1;
            }
        }
    }

    fn clients(&self, db: usize, key: &[u8]) -> Option<&Vec<usize>> {
        self.per_db.get(db)?.get(key)
    }

    /// Every watched key of a database with its clients (FLUSHDB, SWAPDB).
    fn db_entries(&self, db: usize) -> Vec<(Vec<u8>, Vec<usize>)> {
        match self.per_db.get(db) {
            Some(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            None => Vec::new(),
        }
    }
}

/// The commands a client in MULTI runs at once instead of queueing.
fn runs_inside_multi(cmd: &Command) -> bool {
    matches!(
        cmd.name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

/// What a RESP2 client with subscriptions may still run.
fn allowed_while_subscribed(cmd: &Command) -> bool {
    matches!(
        cmd.name,
        "subscribe"
            | "psubscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "punsubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}

impl Executor {
    /// Marks the client's transaction as failed, if it is in one (a command was
    /// rejected while queueing).
    pub fn flag_transaction(&mut self, slot: usize) {
        if let Some(m) = self.client_mut(slot).tx.multi.as_mut() {
            m.dirty_exec = true;
        }
    }

    /// Checks made after a command is resolved and before it runs: the RESP2
    /// subscriber context, and queueing inside MULTI. `Some(reply)` answers the command
    /// without running it.
    #[inline(always)]
    pub fn intercept(
        &mut self,
        slot: usize,
        cmd: &'static Command,
        args: &[&[u8]],
    ) -> Option<Reply> {
        // Nearly every command: no transaction, no subscription, nothing loading, no
        // busy script, so none of the checks below applies.
        let c = self.client(slot);
        if !c.in_multi()
            && !c.is_pubsub()
            && !self.persist.serving_while_loading
            && !self.persist.loading
            && !self.persist.async_loading
            && self.busy.is_none()
        {
            return None;
        }
        self.intercept_checks(slot, cmd, args)
    }

    /// `intercept` once one of its conditions holds.
    #[inline(never)]
    fn intercept_checks(
        &mut self,
        slot: usize,
        cmd: &'static Command,
        args: &[&[u8]],
    ) -> Option<Reply> {
        let c = self.client(slot);
        if c.proto == 2 && c.is_pubsub() && !allowed_while_subscribed(cmd) {
            self.flag_transaction(slot);
            return Some(Reply::error(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                cmd.name
            )));
        }
        // While the dataset loads, only commands flagged `loading` run (the loader
        // serves clients between keys: persistence/snapshot.rs).
        // (Also while a script replayed from the AOF is busy: Redis checks loading
        // before busy.)
        let loading =
            self.persist.serving_while_loading || (self.persist.loading && self.busy.is_some());
        // While a replica loads its master's image asynchronously, only what would
        // disturb the swap waits (NO_ASYNC_LOADING: REPLICAOF, SAVE, ...).
        let refused = if self.persist.async_loading {
            cmd.flags & flags::NO_ASYNC_LOADING != 0
        } else {
            loading && cmd.flags & flags::LOADING == 0
        };
        if refused {
            if cmd.name == "exec" {
                self.discard_transaction(slot);
                let abort = format!(
                    "EXECABORT Transaction discarded because of: {}",
                    super::LOADING_ERR
                );
                return Some(self.reject(Some(cmd), Reply::error(abort)));
            }
            self.flag_transaction(slot);
            return Some(self.reject(Some(cmd), Reply::err(super::LOADING_ERR)));
        }
        // A timed-out script lets only allow-busy commands through (busy.rs).
        if let Some(b) = &self.busy {
            if cmd.flags & flags::ALLOW_BUSY == 0 {
                let text = b.busy_text();
                if cmd.name == "exec" {
                    // A rejected EXEC aborts the transaction, naming the reason.
                    self.discard_transaction(slot);
                    let abort = format!("EXECABORT Transaction discarded because of: {text}");
                    return Some(self.reject(Some(cmd), Reply::error(abort)));
                }
                self.flag_transaction(slot);
                return Some(self.reject(Some(cmd), Reply::err(text)));
            }
        }
        let c = self.client(slot);
        if !c.in_multi() || runs_inside_multi(cmd) {
            return None;
        }
        if cmd.flags & flags::NO_MULTI != 0 {
            self.flag_transaction(slot);
            return Some(Reply::err("ERR Command not allowed inside a transaction"));
        }
        let m = self.client_mut(slot).tx.multi.as_mut().expect("in multi");
        // An aborted transaction keeps no memory for what it will never run.
        if !m.dirty_exec {
            m.argv_len_sums += args.iter().map(|a| a.len() + 8).sum::<usize>();
            m.queue.push(Queued {
                cmd,
                args: args.iter().map(|a| a.to_vec()).collect(),
            });
        }
        Some(Reply::status("QUEUED"))
    }

    /// MULTI.
    pub fn multi(&mut self, slot: usize) -> Reply {
        let c = self.client_mut(slot);
        if c.in_multi() {
            return Reply::err("ERR MULTI calls can not be nested");
        }
        c.tx.multi = Some(MultiState::default());
        Reply::ok()
    }

    /// Leaves MULTI and forgets every WATCH.
    pub fn discard_transaction(&mut self, slot: usize) {
        let c = self.client_mut(slot);
        c.tx.multi = None;
        c.tx.dirty_cas = false;
        self.unwatch_all(slot);
    }

    /// EXEC: runs the queue, or aborts it.
    pub fn exec(&mut self, slot: usize) -> Reply {
        let Some(m) = self.client(slot).tx.multi.as_ref() else {
            return Reply::err("ERR EXEC without MULTI");
        };
        let dirty_exec = m.dirty_exec;
        if self.watched_key_expired(slot) {
            self.client_mut(slot).tx.dirty_cas = true;
        }
        if dirty_exec || self.client(slot).tx.dirty_cas {
            self.discard_transaction(slot);
            return if dirty_exec {
                Reply::err("EXECABORT Transaction discarded because of previous errors.")
            } else {
                Reply::NullArray
            };
        }
        self.unwatch_all(slot);
        let queue = self
            .client_mut(slot)
            .tx
            .multi
            .take()
            .map(|m| m.queue)
            .unwrap_or_default();
        self.client_mut(slot).in_exec = true;
        // Blocking commands inside a transaction answer as if they timed out at once.
        let deny_before = std::mem::replace(&mut self.blocking.deny_blocking, true);
        let mut replies = Vec::with_capacity(queue.len());
        for q in &queue {
            let args: Vec<&[u8]> = q.args.iter().map(|a| a.as_slice()).collect();
            // Rules may have changed since the command was queued (src/acl).
            if !self.client(slot).acl_free {
                if let Err(d) = self.acl_check(slot, q.cmd, &args) {
                    replies.push(self.acl_deny_in_exec(slot, d, q.cmd, &args));
                    continue;
                }
            }
            replies.push(self.call(slot, q.cmd, &args));
        }
        self.blocking.deny_blocking = deny_before;
        let c = self.client_mut(slot);
        c.in_exec = false;
        c.tx.dirty_cas = false;
        Reply::Array(replies)
    }

    /// WATCH key… (already refused inside MULTI by the handler).
    pub fn watch(&mut self, slot: usize, keys: &[&[u8]]) {
        let now = crate::keyspace::unix_ms();
        let c = self.client(slot);
        // A dirty client will fail its EXEC anyway: nothing more to watch.
        if c.tx.dirty_cas {
            return;
        }
        let db = c.db;
        for key in keys {
            if self
                .client(slot)
                .tx
                .watched
                .iter()
                .any(|w| w.db == db && w.key == *key)
            {
                continue;
            }
            let expired = self.key_is_expired(db, key, now);
            self.watch.add(db, key, slot);
            self.client_mut(slot).tx.watched.push(WatchedKey {
                db,
                key: key.to_vec(),
                expired,
            });
        }
    }

    /// Forgets every key the client watches.
    pub fn unwatch_all(&mut self, slot: usize) {
        let watched = std::mem::take(&mut self.client_mut(slot).tx.watched);
        for w in watched {
            self.watch.remove(w.db, &w.key, slot);
        }
    }

    /// Whether `key` is present but past its expiry time (not yet deleted).
    fn key_is_expired(&self, db: usize, key: &[u8], now_ms: i64) -> bool {
        self.ks.dbs[db]
            .table
            .get(key)
            .and_then(|e| e.expire())
            .is_some_and(|t| t <= now_ms)
    }

    fn key_present(&self, db: usize, key: &[u8]) -> bool {
        self.ks.dbs[db].table.get(key).is_some()
    }

    /// A watched key that expired since WATCH makes EXEC fail even if nobody deleted it.
    fn watched_key_expired(&self, slot: usize) -> bool {
        let now = crate::keyspace::unix_ms();
        self.client(slot)
            .tx
            .watched
            .iter()
            .any(|w| !w.expired && self.key_is_expired(w.db, &w.key, now))
    }

    /// Marks every client watching `key` in `db` dirty.
    pub(crate) fn touch_watched_key(&mut self, db: usize, key: &[u8]) {
        if self.watch.keys == 0 {
            return;
        }
        let Some(clients) = self.watch.clients(db, key).cloned() else {
            return;
        };
        let present = self.key_present(db, key);
        for slot in clients {
            let c = self.client_mut(slot);
            if let Some(w) = c.tx.watched.iter_mut().find(|w| w.db == db && w.key == key) {
                // Deleting a key that was already expired at WATCH is no change.
                if w.expired && !present {
                    w.expired = false;
                    continue;
                }
            }
            c.tx.dirty_cas = true;
            self.unwatch_all(slot);
        }
    }

    /// FLUSHDB/FLUSHALL (`replaced_with` None) and SWAPDB (the database swapped in):
    /// clients watching a key that exists on either side are dirty. Call before the
    /// databases change.
    pub(crate) fn touch_all_watched_in_db(&mut self, emptied: usize, replaced_with: Option<usize>) {
        if self.watch.keys == 0 {
            return;
        }
        let now = crate::keyspace::unix_ms();
        for (key, clients) in self.watch.db_entries(emptied) {
            let in_emptied = self.key_present(emptied, &key);
            let in_replacement = replaced_with.is_some_and(|r| self.key_present(r, &key));
            if !in_emptied && !in_replacement {
                continue;
            }
            let replacement_expired =
                replaced_with.is_some_and(|r| self.key_is_expired(r, &key, now));
            for slot in clients {
                let c = self.client_mut(slot);
                let Some(w) =
                    c.tx.watched
                        .iter_mut()
                        .find(|w| w.db == emptied && w.key == key)
                else {
                    continue;
                };
                if w.expired {
                    if !in_replacement {
                        w.expired = false;
                        continue;
                    } else if replacement_expired {
                        continue;
                    }
                } else if !in_emptied && replacement_expired {
                    w.expired = true;
                    continue;
                }
                c.tx.dirty_cas = true;
                self.unwatch_all(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::embedded::Database;
    use crate::protocol::Reply;

    #[test]
    fn watched_key_expiring_aborts_exec() {
        let mut db = Database::open(Config::default());
        db.execute(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        db.execute(&["SET", "k", "1", "PX", "20"]);
        db.execute(&["WATCH", "k"]);
        std::thread::sleep(std::time::Duration::from_millis(40));
        db.execute(&["MULTI"]);
        db.execute(&["PING"]);
        assert_eq!(db.execute(&["EXEC"]), Reply::NullArray);
    }
}
