//! Client-side caching support (CLIENT TRACKING): which clients may hold a cached
//! copy of which key, and the invalidation messages sent when a key changes.
//!
//! Default mode remembers, for each key a tracking client read with a read-only
//! command, the client's id (and slot, checked against the id since slots are reused);
//! the first modification sends one invalidation to each and forgets the key, as
//! Redis's tracking table does. Keys are names without a database, as in Redis.
//! BCAST mode keeps prefixes instead: modified keys matching a prefix are collected
//! (sorted, each once, with the id of the client that modified it last) and sent to the
//! prefix's clients as one message per prefix once per event-loop turn, as Redis does in
//! `beforeSleep`; a NOLOOP client gets the keys others modified.
//!
//! `tracking-table-max-keys` bounds the default-mode table: when it holds more keys,
//! random keys are evicted before the next command and in the cron, their holders told
//! as if the keys had changed (Redis's `trackingLimitUsedSlots`, with its effort rule).
//! The table keeps its entries in a vector so a random key is found in O(1).
//!
//! Messages are `>2 invalidate [keys]` pushes in RESP3, or `message` on
//! `__redis__:invalidate` for a RESP2 connection that a tracking client redirects to.

use std::collections::BTreeMap;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use crate::commands::Command;
use crate::protocol::Reply;

use super::Executor;

/// Per-client tracking options.
#[derive(Debug, Default, Clone)]
pub struct ClientTracking {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// REDIRECT target: (client id, slot when enabled).
    pub redirect: Option<(u64, usize)>,
    /// The redirect target went away (CLIENT LIST flag `R`).
    pub broken_redirect: bool,
    /// BCAST prefixes of this client, sorted.
    pub prefixes: Vec<Vec<u8>>,
    /// CLIENT CACHING YES|NO given for the next command or transaction.
    pub caching: bool,
}

impl ClientTracking {
    /// CLIENT LIST flags: `t` tracking, `R` broken redirect, `B` broadcast.
    pub fn flags_string(&self) -> &'static str {
        match (self.on, self.broken_redirect, self.bcast) {
            (false, _, _) => "",
            (true, false, false) => "t",
            (true, true, false) => "tR",
            (true, false, true) => "tB",
            (true, true, true) => "tRB",
        }
    }

    /// CLIENT GETREDIR and CLIENT LIST `redir=`: -1 off, 0 no redirect, else the id.
    pub fn redirect_id(&self) -> i64 {
        if !self.on {
            -1
        } else {
            self.redirect.map_or(0, |(id, _)| id as i64)
        }
    }
}

/// Options of one CLIENT TRACKING ON call.
#[derive(Debug, Default)]
pub struct TrackingOptions {
    pub redirect: Option<(u64, usize)>,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Vec<u8>>,
}

/// Tracking clients as (client id, slot).
type Holders = Vec<(u64, usize)>;
/// Keys modified since the last broadcast, in key order, with the id of the client
/// that modified each last (None: the server, e.g. expiry).
type PendingKeys = BTreeMap<Vec<u8>, Option<u64>>;

/// A BCAST prefix: its clients and the keys modified since the last broadcast.
#[derive(Default)]
struct Prefix {
    clients: Holders,
    pending: PendingKeys,
}

/// Default-mode tracked keys and their holders. Entries live in a vector, indexed by a
/// hash table of positions, so eviction can pick a random key in O(1).
#[derive(Default)]
struct TrackedKeys {
    entries: Vec<(Vec<u8>, Holders)>,
    index: HashTable<usize>,
    hasher: foldhash::fast::RandomState,
}

impl TrackedKeys {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The holders of `key`, created empty if it is not tracked yet.
    fn holders_mut(&mut self, key: &[u8]) -> &mut Holders {
        let h = self.hash(key);
        let entries = &self.entries;
        let i = match self.index.find(h, |&i| entries[i].0 == key) {
            Some(&i) => i,
            None => {
                let i = self.entries.len();
                self.entries.push((key.to_vec(), Vec::new()));
                let (entries, hasher) = (&self.entries, &self.hasher);
                self.index
                    .insert_unique(h, i, |&j| hasher.hash_one(&entries[j].0));
                i
            }
        };
        &mut self.entries[i].1
    }

    /// Removes `key`, returning its holders.
    fn remove(&mut self, key: &[u8]) -> Option<Holders> {
        let h = self.hash(key);
        let entries = &self.entries;
        let i = match self.index.find_entry(h, |&i| entries[i].0 == key) {
            Ok(e) => e.remove().0,
            Err(_) => return None,
        };
        Some(self.swap_out(i).1)
    }

    /// Removes the entry at position `i` (already unindexed), moving the last entry
    /// into its place.
    fn swap_out(&mut self, i: usize) -> (Vec<u8>, Holders) {
        let last = self.entries.len() - 1;
        if i != last {
            let h = self.hash(&self.entries[last].0);
            if let Some(pos) = self.index.find_mut(h, |&j| j == last) {
                *pos = i;
            }
        }
        self.entries.swap_remove(i)
    }

    /// Removes a random entry.
    fn remove_random(&mut self) -> Option<(Vec<u8>, Holders)> {
        if self.entries.is_empty() {
            return None;
        }
        let i = fastrand::usize(..self.entries.len());
        let h = self.hash(&self.entries[i].0);
        if let Ok(e) = self.index.find_entry(h, |&j| j == i) {
            e.remove();
        }
        Some(self.swap_out(i))
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.index.clear();
    }
}

/// The server-wide tracking table.
#[derive(Default)]
pub struct TrackingTable {
    keys: TrackedKeys,
    /// (key, client) pairs in `keys` (INFO `tracking_total_items`).
    items: usize,
    prefixes: BTreeMap<Vec<u8>, Prefix>,
    /// Keys with pending BCAST invalidations, so the broadcast is free when there are none.
    pending: bool,
    /// Consecutive eviction rounds that ended still over the limit (Redis's effort rule).
    evict_rounds: u32,
}

impl TrackingTable {
    /// INFO `tracking_total_keys`.
    pub fn total_keys(&self) -> usize {
        self.keys.len()
    }

    /// INFO `tracking_total_items`: (key, client) pairs.
    pub fn total_items(&self) -> usize {
        self.items
    }

    /// Whether BCAST invalidations wait for the end of the event-loop turn.
    pub fn has_pending_broadcast(&self) -> bool {
        self.pending
    }

    /// INFO `tracking_total_prefixes`.
    pub fn total_prefixes(&self) -> usize {
        self.prefixes.len()
    }

    fn is_idle(&self) -> bool {
        self.keys.len() == 0 && self.prefixes.is_empty()
    }
}

/// Whether one of two prefixes is a prefix of the other (they would overlap).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Checks BCAST prefixes against the client's existing ones and each other, with
/// Redis's messages.
pub fn check_prefix_collisions(existing: &[Vec<u8>], new: &[Vec<u8>]) -> Result<(), Reply> {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
            return Err(Reply::error(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                s(p),
                s(e)
            )));
        }
        if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
            return Err(Reply::error(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                s(p),
                s(q)
            )));
        }
    }
    Ok(())
}

impl Executor {
    /// The live client in `slot` if it still has `id`.
    fn client_by_id_slot(&self, id: u64, slot: usize) -> Option<&super::Client> {
        self.clients
            .get(slot)
            .and_then(|c| c.as_deref())
            .filter(|c| c.id == id)
    }

    /// The slot of a live client id.
    pub fn slot_of_client_id(&self, id: u64) -> Option<usize> {
        self.clients().find(|(_, c)| c.id == id).map(|(s, _)| s)
    }

    /// CLIENT TRACKING ON (options already validated).
    pub fn tracking_enable(&mut self, slot: usize, opts: TrackingOptions) {
        let id = self.client(slot).id;
        let t = &mut self.client_mut(slot).tracking;
        t.on = true;
        t.broken_redirect = false;
        t.redirect = opts.redirect;
        t.optin = opts.optin;
        t.optout = opts.optout;
        t.noloop = opts.noloop;
        if opts.bcast {
            t.bcast = true;
            let mut prefixes = opts.prefixes;
            if prefixes.is_empty() {
                prefixes.push(Vec::new());
            }
            for p in prefixes {
                let t = &mut self.client_mut(slot).tracking;
                if !t.prefixes.contains(&p) {
                    t.prefixes.push(p.clone());
                    t.prefixes.sort();
                }
                let entry = self.tracking.prefixes.entry(p).or_default();
                if !entry.clients.iter().any(|&(i, _)| i == id) {
                    entry.clients.push((id, slot));
                }
            }
        }
    }

    /// CLIENT TRACKING OFF, RESET and disconnection.
    pub fn tracking_disable(&mut self, slot: usize) {
        let id = self.client(slot).id;
        let t = std::mem::take(&mut self.client_mut(slot).tracking);
        for p in t.prefixes {
            if let Some(entry) = self.tracking.prefixes.get_mut(&p) {
                entry.clients.retain(|&(i, _)| i != id);
                if entry.clients.is_empty() {
                    self.tracking.prefixes.remove(&p);
                }
            }
        }
    }

    /// After a read-only command of a tracking client (default mode), remembers the
    /// keys it read, honouring OPTIN/OPTOUT and CLIENT CACHING.
    pub(crate) fn tracking_remember_keys(
        &mut self,
        slot: usize,
        cmd: &'static Command,
        args: &[&[u8]],
    ) {
        let c = self.client(slot);
        let t = &c.tracking;
        if !t.on || t.bcast || (t.optin && !t.caching) || (t.optout && t.caching) {
            return;
        }
        // Shard channels are keys to COMMAND, but nothing to cache.
        if cmd.flags & crate::commands::flags::PUBSUB != 0 {
            return;
        }
        let id = c.id;
        for pos in cmd.key_positions(args) {
            let holders = self.tracking.keys.holders_mut(args[pos]);
            if !holders.iter().any(|&(i, _)| i == id) {
                holders.push((id, slot));
                self.tracking.items += 1;
            }
        }
    }

    /// A key changed: invalidates it for default-mode holders now and queues it for
    /// matching BCAST prefixes. `by` is the modifying client (NOLOOP).
    pub(crate) fn tracking_invalidate_key(&mut self, by: Option<usize>, key: &[u8]) {
        if self.tracking.is_idle() {
            return;
        }
        if !self.tracking.prefixes.is_empty() {
            let by_id = by.map(|s| self.client(s).id);
            for (p, entry) in self.tracking.prefixes.iter_mut() {
                if key.starts_with(p) {
                    entry.pending.insert(key.to_vec(), by_id);
                    self.tracking.pending = true;
                }
            }
        }
        if let Some(holders) = self.tracking.keys.remove(key) {
            self.tracking_send_key(by, key, holders);
        }
    }

    /// Tells the default-mode holders of a key that was dropped from the table that
    /// their copy is invalid (except the client in `by` under NOLOOP).
    fn tracking_send_key(&mut self, by: Option<usize>, key: &[u8], holders: Holders) {
        self.tracking.items -= holders.len();
        // NOLOOP spares the client whose top-level command made the change (a script's
        // caller, not the script's pseudo-client), as Redis compares with current_client.
        let by = self.current_client.or(by);
        let payload = Reply::Array(vec![Reply::Bulk(key.to_vec())]);
        for (id, slot) in holders {
            let Some(c) = self.client_by_id_slot(id, slot) else {
                continue;
            };
            let t = &c.tracking;
            if !t.on || t.bcast || (t.noloop && by == Some(slot)) {
                continue;
            }
            self.send_tracking_message(slot, payload.clone());
        }
    }

    /// Keeps the default-mode table within `tracking-table-max-keys` (0: no limit) by
    /// evicting random keys, whose holders are told as if the keys had changed. As in
    /// Redis, one call evicts at most 100 keys per consecutive call that ended still
    /// over the limit. `current` is the client about to run a command (NOLOOP).
    pub(crate) fn tracking_limit_keys(&mut self, current: Option<usize>) {
        let max = self.config.tracking_table_max_keys;
        if max == 0 || self.tracking.keys.len() as u64 <= max {
            self.tracking.evict_rounds = 0;
            return;
        }
        let mut effort = 100 * (self.tracking.evict_rounds as u64 + 1);
        while effort > 0 {
            effort -= 1;
            let Some((key, holders)) = self.tracking.keys.remove_random() else {
                break;
            };
            self.tracking_send_key(current, &key, holders);
            if self.tracking.keys.len() as u64 <= max {
                self.tracking.evict_rounds = 0;
                return;
            }
        }
        self.tracking.evict_rounds += 1;
    }

    /// FLUSHDB/FLUSHALL: every tracking client is told to drop everything (a null
    /// payload), and the table is emptied.
    pub(crate) fn tracking_invalidate_all(&mut self) {
        let slots: Vec<usize> = self
            .clients()
            .filter(|(_, c)| c.tracking.on)
            .map(|(s, _)| s)
            .collect();
        for slot in slots {
            self.send_tracking_message(slot, Reply::Null);
        }
        self.tracking.keys.clear();
        self.tracking.items = 0;
    }

    /// Sends the BCAST invalidations collected since the last call (once per event-loop
    /// turn): per prefix, one message per client with every key modified under it, in
    /// key order; a NOLOOP client gets only the keys others modified last, and nothing
    /// when that leaves none.
    pub fn tracking_flush_bcast(&mut self) {
        if !self.tracking.pending {
            return;
        }
        self.tracking.pending = false;
        let mut batches: Vec<(Holders, PendingKeys)> = Vec::new();
        for entry in self.tracking.prefixes.values_mut() {
            if !entry.pending.is_empty() {
                batches.push((entry.clients.clone(), std::mem::take(&mut entry.pending)));
            }
        }
        for (clients, keys) in batches {
            let all = Reply::Array(keys.keys().map(|k| Reply::Bulk(k.clone())).collect());
            for (id, slot) in clients {
                let Some(c) = self.client_by_id_slot(id, slot) else {
                    continue;
                };
                if !c.tracking.noloop {
                    self.send_tracking_message(slot, all.clone());
                    continue;
                }
                let list: Vec<Reply> = keys
                    .iter()
                    .filter(|(_, by)| **by != Some(id))
                    .map(|(k, _)| Reply::Bulk(k.clone()))
                    .collect();
                if !list.is_empty() {
                    self.send_tracking_message(slot, Reply::Array(list));
                }
            }
        }
    }

    /// Delivers one invalidation for the tracking client in `slot`, to itself (RESP3)
    /// or to its redirect target.
    fn send_tracking_message(&mut self, slot: usize, payload: Reply) {
        let t = &self.client(slot).tracking;
        let mut target = slot;
        let mut redirected = false;
        if let Some((rid, rslot)) = t.redirect {
            if self.client_by_id_slot(rid, rslot).is_none() {
                let c = self.client_mut(slot);
                c.tracking.broken_redirect = true;
                if c.proto >= 3 {
                    let msg = Reply::Push(vec![
                        Reply::Bulk(b"tracking-redir-broken".to_vec()),
                        Reply::Int(rid as i64),
                    ]);
                    self.push_to(slot, &msg);
                }
                return;
            }
            target = rslot;
            redirected = true;
        }
        let tc = self.client(target);
        let msg = if tc.proto >= 3 {
            Reply::Push(vec![Reply::Bulk(b"invalidate".to_vec()), payload])
        } else if redirected && tc.is_pubsub() {
            Reply::Push(vec![
                Reply::Bulk(b"message".to_vec()),
                Reply::Bulk(b"__redis__:invalidate".to_vec()),
                payload,
            ])
        } else {
            // A RESP2 connection without redirection cannot receive pushes.
            return;
        };
        self.push_to(target, &msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracked_keys_stay_indexed_through_removals() {
        let mut t = TrackedKeys::default();
        let mut model = std::collections::BTreeSet::new();
        for i in 0..300u32 {
            let k = format!("k{}", i % 97).into_bytes();
            t.holders_mut(&k).push((u64::from(i), 0));
            model.insert(k);
            match i % 5 {
                0 => {
                    let (k, _) = t.remove_random().unwrap();
                    assert!(model.remove(&k));
                }
                1 => {
                    let k = format!("k{}", i % 13).into_bytes();
                    assert_eq!(t.remove(&k).is_some(), model.remove(&k));
                }
                _ => {}
            }
            assert_eq!(t.len(), model.len());
            for k in &model {
                assert!(!t.holders_mut(k).is_empty(), "lost {k:?}");
            }
            assert_eq!(t.len(), model.len());
        }
        t.clear();
        assert!(t.remove_random().is_none());
    }

    #[test]
    fn prefix_overlap_rules() {
        assert!(overlap(b"a", b"ab"));
        assert!(overlap(b"", b"x"));
        assert!(!overlap(b"ab", b"ac"));
        assert!(check_prefix_collisions(&[b"a".to_vec()], &[b"b".to_vec()]).is_ok());
        assert_eq!(
            check_prefix_collisions(&[], &[b"a".to_vec(), b"ab".to_vec()]),
            Err(Reply::err("ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap."))
        );
        assert_eq!(
            check_prefix_collisions(&[b"a".to_vec()], &[b"ab".to_vec()]),
            Err(Reply::err("ERR Prefix 'ab' overlaps with an existing prefix 'a'. Prefixes for a single client must not overlap."))
        );
    }
}
