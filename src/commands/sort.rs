//! SORT and SORT_RO: sort the elements of a list, set or sorted set, numerically or
//! lexicographically, optionally by external keys (`BY weight_*`, `BY h_*->field`),
//! fetch other keys for each element (`GET`), cut a range (`LIMIT`) and store the
//! result as a list (`STORE`).
//!
//! The pipeline is Redis's: parse options → collect the input elements
//! (`input_elements`, one match arm per source type) → compute sort keys (weights or
//! the elements themselves) → sort with Redis's comparator → apply LIMIT → GET
//! lookups → reply or store. Lists and sorted sets plug in by adding their arm to
//! `input_elements`, and `store_result` gains the list constructor when lists land.

use crate::command;
use crate::commands::ctx::notify;
use crate::commands::flags::*;
use crate::commands::{arg_i64, errors, is, Command, Ctx, KeySpec};
use crate::keyspace::{ObjMut, ObjRef, Object, ValueRef};
use crate::protocol::Reply;

pub static COMMANDS: &[Command] = &[
    Command {
        key_spec: KeySpec::Range,
        ..command!("sort", -2, WRITE | DENYOOM | MOVABLE_KEYS, (1, 1, 1), &["write", "set", "sortedset", "list", "slow", "dangerous"], "generic", "1.0.0", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).", sort)
    },
    command!("sort_ro", -2, READONLY | MOVABLE_KEYS, (1, 1, 1), &["read", "set", "sortedset", "list", "slow", "dangerous"], "generic", "7.0.0", "Returns the sorted elements of a list, a set, or a sorted set.", "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).", sort_ro),
];

/// Which kind of value the elements came from; it decides how `BY nosort` orders.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A missing key: sorted as an empty list, as Redis does.
    Empty,
    Set,
    /// Kept in their stored order with `BY nosort`; DESC reverses (lists, zsets).
    Ordered,
}

/// The elements of the value to sort, in its natural order. WRONGTYPE for strings
/// and hashes. Add one arm per collection type here: a list yields its elements head
/// to tail and a sorted set its members by rank, both as `Source::Ordered`.
fn input_elements(v: Option<ValueRef<'_>>) -> Result<(Vec<Vec<u8>>, Source), Reply> {
    match v {
        None => Ok((Vec::new(), Source::Empty)),
        Some(ValueRef::Obj(ObjRef::Set(s))) => Ok((s.members(), Source::Set)),
        Some(ValueRef::Obj(ObjRef::List(l))) => Ok((l.to_vecs(), Source::Ordered)),
        Some(ValueRef::Obj(ObjRef::ZSet(z))) => {
            let mut members = Vec::with_capacity(z.len());
            z.for_each(|m, _| members.push(m.to_vec()));
            Ok((members, Source::Ordered))
        }
        Some(_) => Err(errors::WRONGTYPE),
    }
}

/// Stores the output as a list at `dst` (SORT … STORE); an empty result deletes it.
fn store_result(ctx: &mut Ctx, dst: &[u8], items: Vec<Vec<u8>>) -> Reply {
    if items.is_empty() {
        if ctx.delete(dst) {
            ctx.notify(notify::GENERIC, "del", dst);
        }
        return Reply::Int(0);
    }
    let n = items.len();
    let mut list = crate::types::list::List::new();
    let refs: Vec<&[u8]> = items.iter().map(|i| i.as_slice()).collect();
    list.push(
        crate::types::list::End::Tail,
        &refs,
        crate::commands::lists::packing(ctx),
    );
    ctx.set(
        dst,
        crate::keyspace::Value::Obj(Object::List(Box::new(list))),
        None,
        false,
    );
    ctx.notify(notify::LIST, "sortstore", dst);
    Reply::Int(n as i64)
}

struct Options<'a> {
    desc: bool,
    alpha: bool,
    limit: Option<(i64, i64)>,
    by: Option<&'a [u8]>,
    dontsort: bool,
    gets: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
}

/// What BY and GET patterns may reach: keys the client can read, keys in the sorted
/// key's slot (cluster mode).
struct PatternScope {
    /// The client may read every key (Redis asks its ACL for the key `*`).
    all_readable: bool,
    /// In cluster mode, the slot every pattern's keys must lie in.
    slot: Option<u16>,
}

impl PatternScope {
    fn of(ctx: &Ctx, key: &[u8]) -> Self {
        let c = ctx.ex.client(ctx.client);
        let all_readable = c.acl_free
            || ctx
                .ex
                .acl
                .user(&c.user)
                .is_some_and(|u| crate::acl::may_access_key(u, b"*", crate::acl::user::READ));
        let slot = ctx
            .ex
            .cluster
            .is_some()
            .then(|| crate::util::hashslot::key_slot(key));
        PatternScope { all_readable, slot }
    }

    /// Refuses a BY (`what` = "BY") or GET pattern that may name keys out of scope.
    fn check(&self, what: &str, pattern: &[u8]) -> Result<(), Reply> {
        if let Some(slot) = self.slot {
            // `GET #` is the element itself, no key; the ACL check still applies.
            let own = what == "GET" && pattern == b"#";
            if !own && crate::util::hashslot::pattern_slot(pattern) != Some(slot) {
                return Err(Reply::error(format!("ERR {what} option of SORT denied in Cluster mode when keys formed by the pattern may be in different slots.")));
            }
        }
        if !self.all_readable {
            return Err(Reply::error(format!(
                "ERR {what} option of SORT denied due to insufficient ACL permissions."
            )));
        }
        Ok(())
    }
}

fn parse<'a>(
    args: &[&'a [u8]],
    readonly: bool,
    scope: &PatternScope,
) -> Result<Options<'a>, Reply> {
    let mut o = Options {
        desc: false,
        alpha: false,
        limit: None,
        by: None,
        dontsort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args[j];
        if is(a, "asc") {
            o.desc = false;
        } else if is(a, "desc") {
            o.desc = true;
        } else if is(a, "alpha") {
            o.alpha = true;
        } else if is(a, "limit") && left >= 2 {
            o.limit = Some((arg_i64(args[j + 1])?, arg_i64(args[j + 2])?));
            j += 2;
        } else if is(a, "store") && left >= 1 && !readonly {
            o.store = Some(args[j + 1]);
            j += 1;
        } else if is(a, "by") && left >= 1 {
            let p = args[j + 1];
            o.by = Some(p);
            // A pattern without `*` names one key for every element: no sorting.
            if !p.contains(&b'*') {
                o.dontsort = true;
            } else {
                scope.check("BY", p)?;
            }
            j += 1;
        } else if is(a, "get") && left >= 1 {
            let p = args[j + 1];
            scope.check("GET", p)?;
            o.gets.push(p);
            j += 1;
        } else {
            return Err(errors::SYNTAX);
        }
        j += 1;
    }
    Ok(o)
}

/// Looks up `pattern` with its first `*` replaced by `elem`; `key->field` reads a
/// hash field. `#` is the element itself. `None` when anything is missing.
fn lookup_pattern(ctx: &mut Ctx, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(elem.to_vec());
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&i| i + 2 < after.len());
    let (suffix, field) = match arrow {
        Some(i) => (&after[..i], Some(&after[i + 2..])),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(pattern.len() + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(suffix);
    match field {
        Some(f) => match crate::commands::hashes::read_hash(ctx, &key) {
            Ok(Some(h)) => h.get(f).map(|v| v.to_vec()),
            _ => None,
        },
        None => ctx
            .lookup_read(&key)
            .and_then(|e| e.value().string_bytes().map(|b| b.into_owned())),
    }
}

/// A sort weight as Redis reads one with strtod: leading spaces allowed, an empty
/// string is 0, trailing garbage, NaN and out-of-range values are errors.
fn weight(b: &[u8]) -> Option<f64> {
    let t = b.trim_ascii_start();
    if t.is_empty() {
        return Some(0.0);
    }
    crate::util::numeric::parse_f64(t)
}

fn sort(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    sort_generic(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    sort_generic(ctx, args, true)
}

fn sort_generic(ctx: &mut Ctx, args: &[&[u8]], readonly: bool) -> Reply {
    let scope = PatternScope::of(ctx, args[1]);
    let mut o = match parse(args, readonly, &scope) {
        Ok(o) => o,
        Err(e) => return e,
    };
    // Redis converts a compact sorted set to a skiplist before sorting it, for good
    // (OBJECT ENCODING shows it), SORT_RO too.
    if let Some(mut e) = ctx.ex.ks.dbs[ctx.db].table.get_mut(args[1]) {
        if let Some(ObjMut::ZSet(z)) = e.object_mut() {
            z.convert_to_big();
        }
    }
    let (mut elems, source) = match input_elements(ctx.lookup_read(args[1]).map(|e| e.value())) {
        Ok(x) => x,
        Err(e) => return e,
    };
    // A set's order is arbitrary: when the result is stored or goes to a script, sort
    // it anyway so that it is deterministic (Redis does the same for replication's
    // and scripts' sake).
    if o.dontsort
        && source == Source::Set
        && (o.store.is_some() || ctx.ex.client(ctx.client).script)
    {
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    if o.dontsort {
        if o.desc && source == Source::Ordered {
            elems.reverse();
        }
    } else {
        // Sort keys: the BY lookup or the element itself.
        let mut keyed: Vec<(Vec<u8>, Option<Vec<u8>>, f64)> = Vec::with_capacity(elems.len());
        let mut bad = false;
        for e in elems {
            let by = match o.by {
                Some(p) => lookup_pattern(ctx, p, &e),
                None => None,
            };
            let score = if o.alpha {
                0.0
            } else {
                let src = if o.by.is_some() {
                    by.as_deref()
                } else {
                    Some(&e[..])
                };
                match src {
                    None => 0.0,
                    Some(b) => weight(b).unwrap_or_else(|| {
                        bad = true;
                        0.0
                    }),
                }
            };
            keyed.push((e, by, score));
        }
        if bad {
            return Reply::err("ERR One or more scores can't be converted into double");
        }
        let by_pattern = o.by.is_some();
        keyed.sort_by(|a, b| {
            let ord = if !o.alpha {
                a.2.partial_cmp(&b.2)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| a.0.cmp(&b.0))
            } else if by_pattern {
                // A missing BY value sorts first.
                match (&a.1, &b.1) {
                    (None, None) => std::cmp::Ordering::Equal,
                    (None, Some(_)) => std::cmp::Ordering::Less,
                    (Some(_), None) => std::cmp::Ordering::Greater,
                    (Some(x), Some(y)) => x.cmp(y),
                }
            } else {
                a.0.cmp(&b.0)
            };
            if o.desc {
                ord.reverse()
            } else {
                ord
            }
        });
        elems = keyed.into_iter().map(|(e, _, _)| e).collect();
    }
    // LIMIT, clamped as Redis clamps it.
    let len = elems.len() as i64;
    let (start, end) = match o.limit {
        None => (0, len - 1),
        Some((s, c)) => {
            let mut start = s.max(0);
            let mut end = if c < 0 {
                len - 1
            } else {
                start.saturating_add(c) - 1
            };
            if start >= len {
                start = len - 1;
                end = len - 2;
            }
            if end >= len {
                end = len - 1;
            }
            (start, end)
        }
    };
    let range: Vec<Vec<u8>> = if start <= end && start >= 0 {
        elems
            .into_iter()
            .skip(start as usize)
            .take((end - start + 1) as usize)
            .collect()
    } else {
        Vec::new()
    };
    let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(range.len() * o.gets.len().max(1));
    for e in range {
        if o.gets.is_empty() {
            out.push(Some(e));
        } else {
            for g in &o.gets {
                out.push(lookup_pattern(ctx, g, &e));
            }
        }
    }
    match o.store {
        Some(dst) => store_result(
            ctx,
            dst,
            out.into_iter().map(Option::unwrap_or_default).collect(),
        ),
        None => Reply::Array(
            out.into_iter()
                .map(|v| v.map_or(Reply::Null, Reply::Bulk))
                .collect(),
        ),
    }
}
