//! The sorted-set rank index: a counted B+tree over element ids.
//!
//! Elements live in a slab owned by the sorted set (`zset.rs`); this tree holds only
//! their `u32` ids, ordered by (score, member) through a comparison the caller supplies
//! by passing the slab. Every child link carries the number of elements below it and the
//! id of its first element, so search by key, rank of a key, element at a rank, and
//! partition points of monotone predicates are all O(log n), and a rank range is walked
//! in O(log n + k). Compared with a skiplist with spans this needs no per-element level
//! array and no pointers per element: 4 bytes per element in the leaves plus about
//! 1/32 of that in inner nodes, and leaf scans are cache friendly.
//!
//! Leaves keep each id's score beside it (8 more bytes an element) and every child link
//! caches the score of its first element, so a descent compares
//! scores inside the inner node it already has in cache and reads an element's slot
//! (and its member bytes) only on a score tie; a score-only search (ZRANGEBYSCORE,
//! ZCOUNT) touches slots in the one leaf it ends in.
//!
//! Invariants: all leaves are at the same depth; every non-root node holds at least
//! `MIN` entries; `Child::count` is the number of ids below the child,
//! `Child::first` the id of its smallest element and `Child::score` that element's
//! score.

use std::cmp::Ordering;

const LEAF_MAX: usize = 64;
const INNER_MAX: usize = 32;

/// A key to compare against: (score, member).
pub type Key<'a> = (f64, &'a [u8]);

/// How an id compares with a key; supplied by the owner of the elements.
pub trait Slots {
    fn key(&self, id: u32) -> Key<'_>;
}

pub fn cmp_keys(a: Key<'_>, b: Key<'_>) -> Ordering {
    // Scores are never NaN; -0 and 0 compare equal and fall through to the member.
    match a.0.partial_cmp(&b.0) {
        Some(Ordering::Equal) | None => a.1.cmp(b.1),
        Some(o) => o,
    }
}

#[derive(Debug, Clone)]
enum Node {
    Leaf(Leaf),
    Inner(Vec<Child>),
}

/// Ids in order, with their scores in a parallel vector so that a search compares
/// scores in place and reads an element's slot only on a tie.
#[derive(Debug, Clone, Default)]
struct Leaf {
    ids: Vec<u32>,
    scores: Vec<f64>,
}

/// The first index in `0..n` for which `pred` is false (`pred` true on a prefix).
fn partition_idx(n: usize, mut pred: impl FnMut(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl Leaf {
    fn len(&self) -> usize {
        self.ids.len()
    }

    /// Position of the first element whose key is not below `key`.
    fn lower_bound<S: Slots>(&self, key: Key<'_>, s: &S) -> usize {
        partition_idx(self.ids.len(), |i| {
            let o = match self.scores[i].partial_cmp(&key.0) {
                Some(Ordering::Equal) | None => s.key(self.ids[i]).1.cmp(key.1),
                Some(o) => o,
            };
            o == Ordering::Less
        })
    }

    fn insert(&mut self, pos: usize, id: u32, score: f64) {
        // Grow in steps capped at one past a full leaf (the most a leaf holds before it
        // splits), not by doubling to 128: a leaf's slack stays under half of it.
        let len = self.ids.len();
        if len == self.ids.capacity() {
            let want = (len * 2).clamp(4, LEAF_MAX + 1).max(len + 1) - len;
            self.ids.reserve_exact(want);
            self.scores.reserve_exact(want);
        }
        self.ids.insert(pos, id);
        self.scores.insert(pos, score);
    }

    fn remove(&mut self, pos: usize) {
        self.ids.remove(pos);
        self.scores.remove(pos);
    }

    fn split_off(&mut self, at: usize) -> Leaf {
        Leaf {
            ids: self.ids.split_off(at),
            scores: self.scores.split_off(at),
        }
    }

    fn append(&mut self, other: Leaf) {
        self.ids.extend(other.ids);
        self.scores.extend(other.scores);
    }
}

#[derive(Debug, Clone)]
struct Child {
    count: usize,
    first: u32,
    score: f64,
    node: Box<Node>,
}

impl Child {
    fn new(node: Node) -> Child {
        Child {
            count: node.count(),
            first: node.first(),
            score: node.first_score(),
            node: Box::new(node),
        }
    }

    /// Re-reads the first element after the subtree changed (it must not be empty).
    fn refresh_first(&mut self) {
        self.first = self.node.first();
        self.score = self.node.first_score();
    }

    /// `cmp_keys(key of the first element, key)`, reading the slot only on a score tie.
    fn cmp_first<S: Slots>(&self, key: Key<'_>, s: &S) -> Ordering {
        match self.score.partial_cmp(&key.0) {
            Some(Ordering::Equal) | None => s.key(self.first).1.cmp(key.1),
            Some(o) => o,
        }
    }
}

impl Node {
    fn width(&self) -> usize {
        match self {
            Node::Leaf(v) => v.len(),
            Node::Inner(c) => c.len(),
        }
    }

    fn max(&self) -> usize {
        match self {
            Node::Leaf(_) => LEAF_MAX,
            Node::Inner(_) => INNER_MAX,
        }
    }

    fn first(&self) -> u32 {
        match self {
            Node::Leaf(v) => v.ids[0],
            Node::Inner(c) => c[0].first,
        }
    }

    fn first_score(&self) -> f64 {
        match self {
            Node::Leaf(v) => v.scores[0],
            Node::Inner(c) => c[0].score,
        }
    }

    fn count(&self) -> usize {
        match self {
            Node::Leaf(v) => v.len(),
            Node::Inner(c) => c.iter().map(|c| c.count).sum(),
        }
    }

    /// Splits off the upper half into a new child.
    fn split(&mut self) -> Child {
        let node = match self {
            Node::Leaf(v) => Node::Leaf(v.split_off(v.len() / 2)),
            Node::Inner(c) => Node::Inner(c.split_off(c.len() / 2)),
        };
        Child::new(node)
    }

    fn heap_size(&self) -> usize {
        match self {
            Node::Leaf(v) => v.ids.capacity() * 4 + v.scores.capacity() * 8,
            Node::Inner(c) => {
                c.capacity() * std::mem::size_of::<Child>()
                    + c.iter()
                        .map(|c| std::mem::size_of::<Node>() + c.node.heap_size())
                        .sum::<usize>()
            }
        }
    }
}

/// Index of the child whose subtree may hold `key`: the last child whose first
/// element is <= key (or the first child).
fn child_for<S: Slots>(cs: &[Child], key: Key<'_>, s: &S) -> usize {
    cs.partition_point(|c| c.cmp_first(key, s) != Ordering::Greater)
        .saturating_sub(1)
}

#[derive(Debug, Clone)]
pub struct Tree {
    root: Node,
    len: usize,
}

impl Default for Tree {
    fn default() -> Self {
        Tree {
            root: Node::Leaf(Leaf::default()),
            len: 0,
        }
    }
}

impl Tree {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn heap_size(&self) -> usize {
        self.root.heap_size()
    }

    /// Inserts `id`, whose key must not already be present.
    pub fn insert<S: Slots>(&mut self, id: u32, s: &S) {
        let key = s.key(id);
        if let Some(right) = insert_rec(&mut self.root, key, id, s) {
            let left = std::mem::replace(&mut self.root, Node::Leaf(Leaf::default()));
            let left = Child::new(left);
            self.root = Node::Inner(vec![left, right]);
        }
        self.len += 1;
    }

    /// Removes `id`, located by its current key. Returns whether it was found.
    pub fn remove<S: Slots>(&mut self, id: u32, s: &S) -> bool {
        let key = s.key(id);
        let found = remove_rec(&mut self.root, key, id, s);
        if found {
            self.len -= 1;
            self.collapse_root();
        }
        found
    }

    /// Removes and returns the id at 0-based `rank`, found by counts alone (pops and
    /// rank-range removals need no key comparison).
    pub fn remove_rank(&mut self, rank: usize) -> Option<u32> {
        if rank >= self.len {
            return None;
        }
        let id = remove_rank_rec(&mut self.root, rank);
        self.len -= 1;
        self.collapse_root();
        Some(id)
    }

    fn collapse_root(&mut self) {
        // Collapse a root left with a single child.
        while let Node::Inner(cs) = &mut self.root {
            if cs.len() != 1 {
                break;
            }
            let only = cs.pop().expect("one child");
            self.root = *only.node;
        }
    }

    /// 0-based rank of `id` (by its key), if present.
    pub fn rank<S: Slots>(&self, id: u32, s: &S) -> Option<usize> {
        let key = s.key(id);
        let mut node = &self.root;
        let mut base = 0;
        loop {
            match node {
                Node::Leaf(v) => {
                    let pos = v.lower_bound(key, s);
                    return (v.ids.get(pos) == Some(&id)).then_some(base + pos);
                }
                Node::Inner(cs) => {
                    let i = child_for(cs, key, s);
                    base += cs[..i].iter().map(|c| c.count).sum::<usize>();
                    node = &cs[i].node;
                }
            }
        }
    }

    /// The id at 0-based `rank`.
    pub fn select(&self, mut rank: usize) -> Option<u32> {
        if rank >= self.len {
            return None;
        }
        let mut node = &self.root;
        loop {
            match node {
                Node::Leaf(v) => return v.ids.get(rank).copied(),
                Node::Inner(cs) => {
                    let mut i = 0;
                    while rank >= cs[i].count {
                        rank -= cs[i].count;
                        i += 1;
                    }
                    node = &cs[i].node;
                }
            }
        }
    }

    /// Number of leading elements for which `pred` holds; `pred` must be true for a
    /// prefix of the order and false after it (e.g. "key < bound").
    pub fn partition_point<S: Slots>(&self, s: &S, pred: impl Fn(Key<'_>) -> bool) -> usize {
        let mut node = &self.root;
        let mut base = 0;
        loop {
            match node {
                Node::Leaf(v) => return base + v.ids.partition_point(|&x| pred(s.key(x))),
                Node::Inner(cs) => {
                    let k = cs.partition_point(|c| pred(s.key(c.first)));
                    if k == 0 {
                        return base;
                    }
                    base += cs[..k - 1].iter().map(|c| c.count).sum::<usize>();
                    node = &cs[k - 1].node;
                }
            }
        }
    }

    /// `partition_point` for a predicate on the score alone: answered from the cached
    /// scores of inner nodes and leaves, without reading any slot.
    pub fn partition_point_score(&self, pred: impl Fn(f64) -> bool) -> usize {
        let mut node = &self.root;
        let mut base = 0;
        loop {
            match node {
                Node::Leaf(v) => return base + v.scores.partition_point(|&x| pred(x)),
                Node::Inner(cs) => {
                    let k = cs.partition_point(|c| pred(c.score));
                    if k == 0 {
                        return base;
                    }
                    base += cs[..k - 1].iter().map(|c| c.count).sum::<usize>();
                    node = &cs[k - 1].node;
                }
            }
        }
    }

    /// Calls `f` with the ids at ranks `start..end`, ascending, or descending if `rev`.
    pub fn for_each(&self, start: usize, end: usize, rev: bool, f: &mut impl FnMut(u32)) {
        self.for_each_while(start, end, rev, &mut |id| {
            f(id);
            true
        });
    }

    /// As `for_each`, stopping as soon as `f` returns false (a LIMIT or a range bound
    /// reached), so a walk costs its descent plus the elements it visits.
    pub fn for_each_while(
        &self,
        start: usize,
        end: usize,
        rev: bool,
        f: &mut impl FnMut(u32) -> bool,
    ) {
        let end = end.min(self.len);
        if start < end {
            visit(&self.root, start, end, rev, f);
        }
    }
}

/// Visits ranks `start..end` of the subtree (relative to it); false when `f` stopped.
fn visit(
    node: &Node,
    start: usize,
    end: usize,
    rev: bool,
    f: &mut impl FnMut(u32) -> bool,
) -> bool {
    match node {
        Node::Leaf(v) => {
            let part = &v.ids[start..end];
            if rev {
                part.iter().rev().all(|&id| f(id))
            } else {
                part.iter().all(|&id| f(id))
            }
        }
        Node::Inner(cs) => {
            // Children are skipped by their counts; offsets are kept as a running sum
            // (from the total when walking backwards).
            if rev {
                let mut hi: usize = cs.iter().map(|c| c.count).sum();
                for c in cs.iter().rev() {
                    let lo = hi - c.count;
                    if hi <= start {
                        break;
                    }
                    if lo < end && !visit(&c.node, start.max(lo) - lo, end.min(hi) - lo, rev, f) {
                        return false;
                    }
                    hi = lo;
                }
            } else {
                let mut lo = 0;
                for c in cs {
                    let hi = lo + c.count;
                    if lo >= end {
                        break;
                    }
                    if hi > start && !visit(&c.node, start.max(lo) - lo, end.min(hi) - lo, rev, f) {
                        return false;
                    }
                    lo = hi;
                }
            }
            true
        }
    }
}

fn insert_rec<S: Slots>(node: &mut Node, key: Key<'_>, id: u32, s: &S) -> Option<Child> {
    match node {
        Node::Leaf(v) => {
            let pos = v.lower_bound(key, s);
            v.insert(pos, id, key.0);
        }
        Node::Inner(cs) => {
            let i = child_for(cs, key, s);
            let split = insert_rec(&mut cs[i].node, key, id, s);
            cs[i].count += 1;
            // Only an insert at the front of the subtree changes its first element.
            if cs[i].node.first() != cs[i].first {
                cs[i].refresh_first();
            }
            if let Some(right) = split {
                cs[i].count -= right.count;
                cs.insert(i + 1, right);
            }
        }
    }
    (node.width() > node.max()).then(|| node.split())
}

fn remove_rec<S: Slots>(node: &mut Node, key: Key<'_>, id: u32, s: &S) -> bool {
    match node {
        Node::Leaf(v) => {
            let pos = v.lower_bound(key, s);
            if v.ids.get(pos) == Some(&id) {
                v.remove(pos);
                true
            } else {
                false
            }
        }
        Node::Inner(cs) => {
            let i = child_for(cs, key, s);
            if !remove_rec(&mut cs[i].node, key, id, s) {
                return false;
            }
            after_removal(cs, i);
            true
        }
    }
}

fn remove_rank_rec(node: &mut Node, mut rank: usize) -> u32 {
    match node {
        Node::Leaf(v) => {
            let id = v.ids[rank];
            v.remove(rank);
            id
        }
        Node::Inner(cs) => {
            let mut i = 0;
            while rank >= cs[i].count {
                rank -= cs[i].count;
                i += 1;
            }
            let id = remove_rank_rec(&mut cs[i].node, rank);
            after_removal(cs, i);
            id
        }
    }
}

/// Fixes child `i`'s count, cached first element and fill after one removal below it.
fn after_removal(cs: &mut Vec<Child>, i: usize) {
    cs[i].count -= 1;
    if cs[i].node.width() > 0 && cs[i].node.first() != cs[i].first {
        cs[i].refresh_first();
    }
    if cs[i].node.width() < cs[i].node.max() / 4 && cs.len() > 1 {
        rebalance(cs, i);
    }
}

/// Merges the underfull child `i` with a neighbour, splitting the result evenly again
/// when it is too wide.
fn rebalance(cs: &mut Vec<Child>, i: usize) {
    let j = if i + 1 < cs.len() { i } else { i - 1 };
    let right = cs.remove(j + 1);
    let left = &mut cs[j];
    match (&mut *left.node, *right.node) {
        (Node::Leaf(a), Node::Leaf(b)) => a.append(b),
        (Node::Inner(a), Node::Inner(b)) => a.extend(b),
        _ => unreachable!("siblings are at the same depth"),
    }
    left.count += right.count;
    if left.node.width() == 0 {
        cs.remove(j);
        return;
    }
    left.refresh_first();
    if left.node.width() > left.node.max() {
        let r = left.node.split();
        left.count -= r.count;
        cs.insert(j + 1, r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Test slab: id → (score, member).
    struct Slab(Vec<(f64, Vec<u8>)>);
    impl Slots for Slab {
        fn key(&self, id: u32) -> Key<'_> {
            let (s, m) = &self.0[id as usize];
            (*s, m)
        }
    }

    #[derive(PartialEq, Clone, Copy, Debug)]
    struct F(f64);
    impl Eq for F {}
    impl PartialOrd for F {
        fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for F {
        fn cmp(&self, o: &Self) -> Ordering {
            self.0.partial_cmp(&o.0).unwrap()
        }
    }

    /// Every child's cached first id and score, and its count, match its subtree.
    fn check_links(node: &Node, slab: &Slab) {
        if let Node::Leaf(l) = node {
            assert_eq!(l.ids.len(), l.scores.len());
            for (id, sc) in l.ids.iter().zip(&l.scores) {
                assert_eq!(sc.to_bits(), slab.key(*id).0.to_bits());
            }
        }
        if let Node::Inner(cs) = node {
            for c in cs {
                assert_eq!(c.first, c.node.first());
                assert_eq!(c.score.to_bits(), slab.key(c.first).0.to_bits());
                assert_eq!(c.count, c.node.count());
                check_links(&c.node, slab);
            }
        }
    }

    fn check(tree: &Tree, slab: &Slab, model: &BTreeMap<(F, Vec<u8>), u32>) {
        assert_eq!(tree.len(), model.len());
        if !tree.is_empty() {
            check_links(&tree.root, slab);
        }
        let mut ids = Vec::new();
        tree.for_each(0, tree.len(), false, &mut |id| ids.push(id));
        let want: Vec<u32> = model.values().copied().collect();
        assert_eq!(ids, want);
        let mut rev = Vec::new();
        tree.for_each(0, tree.len(), true, &mut |id| rev.push(id));
        rev.reverse();
        assert_eq!(rev, want);
        for (r, &id) in want.iter().enumerate() {
            assert_eq!(tree.rank(id, slab), Some(r));
            assert_eq!(tree.select(r), Some(id));
        }
        assert_eq!(tree.select(want.len()), None);
    }

    /// Enough elements for three levels (64 * 32 < n), then removals that force merges
    /// at every level, checking ranks throughout.
    #[test]
    fn deep_tree_inserts_and_removals() {
        let n = 20_000u32;
        let mut slab = Slab(Vec::new());
        let mut tree = Tree::default();
        // A scrambled insertion order.
        for i in 0..n {
            let k = (i as u64 * 7919 % n as u64) as u32;
            slab.0
                .push(((k / 3) as f64, format!("{k:06}").into_bytes()));
            tree.insert(i, &slab);
        }
        let mut model: BTreeMap<(F, Vec<u8>), u32> = slab
            .0
            .iter()
            .enumerate()
            .map(|(i, (s, m))| ((F(*s), m.clone()), i as u32))
            .collect();
        check(&tree, &slab, &model);
        // Remove three quarters, in an order unrelated to the key order.
        for i in (0..n).filter(|i| i % 4 != 0) {
            let id = (i as u64 * 104729 % n as u64) as u32;
            let (s, m) = slab.0[id as usize].clone();
            if model.remove(&(F(s), m)).is_some() {
                assert!(tree.remove(id, &slab));
            }
        }
        check(&tree, &slab, &model);
        assert_eq!(
            tree.partition_point(&slab, |k| k.0 < 1000.0),
            model.keys().filter(|k| k.0 .0 < 1000.0).count()
        );
    }

    fn a0(m: u16, n: usize) -> usize {
        (m as usize) % (n + 1)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn matches_btreemap_model(ops in proptest::collection::vec((0u8..4, 0u16..600, -20i32..20), 1..1500)) {
            let mut slab = Slab(Vec::new());
            let mut tree = Tree::default();
            let mut model: BTreeMap<(F, Vec<u8>), u32> = BTreeMap::new();
            let mut by_member: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
            for (op, m, sc) in ops {
                let member = format!("m{m}").into_bytes();
                let score = sc as f64 / 2.0;
                match (op, by_member.get(&member).copied()) {
                    (0..=1, None) => {
                        let id = slab.0.len() as u32;
                        slab.0.push((score, member.clone()));
                        tree.insert(id, &slab);
                        model.insert((F(score), member.clone()), id);
                        by_member.insert(member, id);
                    }
                    (0..=1, Some(id)) => {
                        // Re-score: remove, change, reinsert.
                        prop_assert!(tree.remove(id, &slab));
                        model.remove(&(F(slab.0[id as usize].0), member.clone()));
                        slab.0[id as usize].0 = score;
                        tree.insert(id, &slab);
                        model.insert((F(score), member), id);
                    }
                    (2, Some(id)) => {
                        prop_assert!(tree.remove(id, &slab));
                        model.remove(&(F(slab.0[id as usize].0), member.clone()));
                        by_member.remove(&member);
                    }
                    _ => {
                        // Partition points against the model.
                        let bound = score;
                        let got = tree.partition_point(&slab, |k| k.0 < bound);
                        let want = model.keys().filter(|k| k.0 .0 < bound).count();
                        prop_assert_eq!(got, want);
                        prop_assert_eq!(tree.partition_point_score(|x| x < bound), want);
                        let want_le = model.keys().filter(|k| k.0 .0 <= bound).count();
                        prop_assert_eq!(tree.partition_point_score(|x| x <= bound), want_le);
                        // A walk stopped early by its callback.
                        let mut seen = Vec::new();
                        tree.for_each_while(a0(m, tree.len()), tree.len(), sc < 0, &mut |id| { seen.push(id); seen.len() < 5 });
                        let from = a0(m, tree.len());
                        let mut all: Vec<u32> = model.values().copied().skip(from).collect();
                        if sc < 0 { all = model.values().copied().skip(from).collect(); all.reverse(); }
                        all.truncate(5);
                        prop_assert_eq!(seen, all);
                        let got = tree.partition_point(&slab, |k| cmp_keys(k, (bound, &member)) != Ordering::Greater);
                        let want = model.keys().filter(|k| cmp_keys((k.0 .0, &k.1), (bound, &member)) != Ordering::Greater).count();
                        prop_assert_eq!(got, want);
                        // A sub-range walk.
                        let n = tree.len();
                        let (a, b) = ((m as usize) % (n + 1), (m as usize * 7) % (n + 1));
                        let (a, b) = (a.min(b), a.max(b));
                        let mut ids = Vec::new();
                        tree.for_each(a, b, sc < 0, &mut |id| ids.push(id));
                        let mut want: Vec<u32> = model.values().copied().skip(a).take(b - a).collect();
                        if sc < 0 { want.reverse(); }
                        prop_assert_eq!(ids, want);
                    }
                }
            }
            check(&tree, &slab, &model);
            if !tree.is_empty() {
                check_links(&tree.root, &slab);
            }
            // Drain everything, checking ranks as the tree shrinks.
            let all: Vec<u32> = model.values().copied().collect();
            for (k, id) in all.iter().enumerate() {
                if k % 2 == 0 {
                    prop_assert_eq!(tree.remove_rank(0), Some(*id));
                } else {
                    prop_assert!(tree.remove(*id, &slab));
                }
                if k % 97 == 0 {
                    prop_assert_eq!(tree.select(0), all.get(k + 1).copied());
                }
            }
            prop_assert!(tree.is_empty());
        }
    }
}
