//! DEBUG HTSTATS and HTSTATS-KEY: the bucket statistics of the keyspace table and of
//! big sets' and hashes' tables, in Redis's dictGetStats text. Cinnabar keeps a key's
//! expiry in its entry, not in a second table: the `[Expires HT]` section counts the
//! keys with a TTL over the same buckets. Sorted sets index members in a B+tree with
//! no hash table, so HTSTATS-KEY answers for them as Redis does for listpacks.
//!
//! The keyspace table's buckets hold eight entries each (`keyspace/buckets.rs`): its
//! `table size` is its entry slots, the number Redis's dict would show for the same
//! keys (both grow at one key per slot), while the chain figures are per bucket: the
//! entries a bucket and its overflow hold.

use crate::commands::{errors, is, Ctx};
use crate::keyspace::{ObjRef, ValueRef};
use crate::protocol::Reply;

/// Redis's DICT_STATS_VECTLEN: chain lengths from 0 to 49 (longer ones count as 49).
const VECTLEN: usize = 50;

/// One bucket array's statistics, gathered in one pass over its chain lengths (no
/// copy of them: a big keyspace has millions of buckets).
#[derive(Default)]
struct Stats {
    /// Entry slots (Redis's table size).
    size: usize,
    /// Chains (buckets).
    chains: usize,
    used: usize,
    slots: usize,
    max: usize,
    vect: Vec<usize>,
}

impl Stats {
    /// The statistics of `chains`, one slot each (the key table sets its own size).
    fn of(chains: impl Iterator<Item = usize>) -> Stats {
        let mut st = Stats {
            vect: vec![0; VECTLEN],
            ..Stats::default()
        };
        for n in chains {
            st.size += 1;
            st.chains += 1;
            st.used += n;
            st.vect[n.min(VECTLEN - 1)] += 1;
            if n > 0 {
                st.slots += 1;
                st.max = st.max.max(n);
            }
        }
        st
    }
}

/// Formats one array's statistics as Redis's dictGetStatsMsg.
fn describe(out: &mut String, idx: usize, st: &Stats, full: bool) {
    use std::fmt::Write as _;
    let name = if idx == 0 {
        "main hash table"
    } else {
        "rehashing target"
    };
    if st.used == 0 {
        let _ = write!(
            out,
            "Hash table {idx} stats ({name}):\nNo stats available for empty dictionaries\n"
        );
        return;
    }
    let _ = write!(
        out,
        "Hash table {idx} stats ({name}):\n table size: {}\n number of elements: {}\n",
        st.size, st.used
    );
    if !full {
        return;
    }
    // Every element is in exactly one chain: counted and computed averages agree.
    let avg = st.used as f32 / st.slots as f32;
    let _ = write!(
        out,
        " different slots: {}\n max chain length: {}\n avg chain length (counted): {avg:.2}\n avg chain length (computed): {avg:.2}\n Chain length distribution:\n",
        st.slots, st.max
    );
    for (n, &count) in st.vect.iter().enumerate().take(VECTLEN - 1) {
        if count > 0 {
            let _ = writeln!(
                out,
                "   {n}: {count} ({:.2}%)",
                count as f32 / st.chains as f32 * 100.0
            );
        }
    }
}

/// Both arrays of a table (the second only while resizing).
fn describe_table(out: &mut String, stats: impl Fn(bool) -> Option<Stats>, full: bool) {
    for (idx, rehashing) in [(0, false), (1, true)] {
        if let Some(st) = stats(rehashing) {
            describe(out, idx, &st, full);
        }
    }
}

/// DEBUG HTSTATS <dbid> [full]
pub fn htstats(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let db = match crate::commands::arg_i64(args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if db < 0 || db as usize >= ctx.ex.ks.dbs.len() {
        return Reply::err("ERR Out of range database");
    }
    let full = args.len() >= 4 && is(args[3], "full");
    let d = &ctx.ex.ks.dbs[db as usize];
    let mut out = String::from("[Dictionary HT]\n");
    // Sized in entry slots; the chains are buckets of eight.
    describe_table(
        &mut out,
        |r| {
            let st = Stats::of(d.table.chain_lengths(r)?);
            Some(Stats {
                size: d.table.array_slots(r),
                ..st
            })
        },
        full,
    );
    out.push_str("[Expires HT]\n");
    // The keys with a TTL, over the keyspace's own buckets (no chain detail: they
    // share chains with the other keys).
    let expires = Stats {
        size: d.table.buckets() - d.table.rehashing_buckets(),
        used: d.volatile,
        ..Stats::default()
    };
    describe(&mut out, 0, &expires, false);
    Reply::Verbatim("txt", out.into_bytes())
}

/// DEBUG HTSTATS-KEY <key> [full]
pub fn htstats_key(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let full = args.len() >= 4 && is(args[3], "full");
    // As DEBUG OBJECT: the table as stored, no hit/miss counted, no LRU touched.
    let Some(e) = ctx.ex.ks.dbs[ctx.db].table.get(args[2]) else {
        return errors::NO_SUCH_KEY;
    };
    let mut out = String::new();
    match e.value() {
        ValueRef::Obj(ObjRef::Set(s)) if s.table().is_some() => {
            let t = s.table().expect("checked");
            describe_table(&mut out, |r| t.chain_lengths(r).map(Stats::of), full);
        }
        ValueRef::Obj(ObjRef::Hash(h)) if h.table().is_some() => {
            let t = h.table().expect("checked");
            describe_table(&mut out, |r| t.chain_lengths(r).map(Stats::of), full);
        }
        _ => {
            return Reply::err(
                "ERR The value stored at the specified key is not represented using an hash table",
            )
        }
    }
    Reply::Verbatim("txt", out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_redis() {
        let mut s = String::new();
        describe(&mut s, 0, &Stats::of([0, 2, 1, 0].into_iter()), true);
        assert_eq!(
            s,
            "Hash table 0 stats (main hash table):\n table size: 4\n number of elements: 3\n different slots: 2\n max chain length: 2\n avg chain length (counted): 1.50\n avg chain length (computed): 1.50\n Chain length distribution:\n   0: 2 (50.00%)\n   1: 1 (25.00%)\n   2: 1 (25.00%)\n"
        );
        // Buckets of eight slots: the size counts slots, the distribution buckets.
        let mut s = String::new();
        let st = Stats {
            size: 16,
            ..Stats::of([9, 0].into_iter())
        };
        describe(&mut s, 0, &st, true);
        assert_eq!(
            s,
            "Hash table 0 stats (main hash table):\n table size: 16\n number of elements: 9\n different slots: 1\n max chain length: 9\n avg chain length (counted): 9.00\n avg chain length (computed): 9.00\n Chain length distribution:\n   0: 1 (50.00%)\n   9: 1 (50.00%)\n"
        );
        let mut s = String::new();
        describe(&mut s, 1, &Stats::default(), false);
        assert_eq!(
            s,
            "Hash table 1 stats (rehashing target):\nNo stats available for empty dictionaries\n"
        );
    }
}
