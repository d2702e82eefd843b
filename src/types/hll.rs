//! HyperLogLog in Redis's exact representation, so that a value written by Redis (GET,
//! DUMP, RDB) works here and back byte for byte, and counts match Redis's.
//!
//! Layout: a 16-byte header — `HYLL`, one encoding byte (0 dense, 1 sparse), three
//! unused bytes, and the cached cardinality as a little-endian u64 whose top bit marks
//! the cache invalid — followed by the registers:
//!
//! * dense: 16384 six-bit registers packed LSB first (12288 bytes);
//! * sparse: run-length opcodes — `00xxxxxx` ZERO (1..64 zero registers), `01xxxxxx
//!   yyyyyyyy` XZERO (1..16384 zero registers), `1vvvvvxx` VAL (1..4 registers of value
//!   1..32). A sparse value becomes dense when a register exceeds 32 or the value would
//!   grow past `hll-sparse-max-bytes`.
//!
//! Elements are hashed with MurmurHash64A (seed 0xadc83b19): the low 14 bits pick the
//! register, the run of zeroes above them (plus one) is the candidate value. Counting
//! uses the register histogram with Ertl's improved estimator (tau/sigma), as Redis 5+.
//!
//! Values come from clients (SET of arbitrary bytes), so every decoder here bounds-checks
//! and reports corruption instead of trusting the opcodes. Where Redis reads the byte
//! past the end of a truncated XZERO (its string terminator) we read a zero, so counts of
//! slightly malformed values still agree with Redis.

pub const HDR: usize = 16;
pub const REGISTERS: usize = 16384;
const P: u32 = 14;
const Q: u32 = 64 - P;
const REGISTER_BYTES: usize = REGISTERS * 6 / 8;
pub const DENSE_SIZE: usize = HDR + REGISTER_BYTES;
pub const DENSE: u8 = 0;
pub const SPARSE: u8 = 1;
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
const SEED: u32 = 0xadc8_3b19;
// 0.5 / ln 2 (Redis writes it as 0.721347520444481703680).
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// The value is not a well-formed HLL (Redis's INVALIDOBJ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// MurmurHash2, 64-bit version, reading words little-endian as Redis does on every
/// architecture.
pub fn murmur64a(key: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = (seed as u64) ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element maps to and the length of its `000..1` pattern.
pub fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ----- header -------------------------------------------------------------------------

/// A fresh, empty HLL: sparse, a single XZERO covering every register.
pub fn new_sparse() -> Vec<u8> {
    let mut s = Vec::with_capacity(64);
    s.extend_from_slice(b"HYLL");
    s.push(SPARSE);
    s.extend_from_slice(&[0; 11]);
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(SPARSE_XZERO_MAX_LEN);
        push_xzero(&mut s, n);
        left -= n;
    }
    s
}

/// Whether `s` passes Redis's HLL checks: magic, known encoding, exact dense size.
/// Sparse opcodes are validated lazily by the operations that walk them.
pub fn is_valid(s: &[u8]) -> bool {
    s.len() >= HDR
        && &s[..4] == b"HYLL"
        && s[4] <= SPARSE
        && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

/// The encoding byte of a value that passed `is_valid`.
pub fn is_sparse(s: &[u8]) -> bool {
    s[4] == SPARSE
}

/// The cached cardinality, when the cache is valid.
pub fn cached_count(s: &[u8]) -> Option<u64> {
    (s[15] & 0x80 == 0).then(|| u64::from_le_bytes(s[8..16].try_into().expect("8 bytes")))
}

pub fn set_cached_count(s: &mut [u8], card: u64) {
    s[8..16].copy_from_slice(&card.to_le_bytes());
}

pub fn invalidate_cache(s: &mut [u8]) {
    s[15] |= 0x80;
}

// ----- dense registers ----------------------------------------------------------------

/// Register `i` of a packed 6-bit register array (missing bytes read as zero).
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = regs.get(byte).copied().unwrap_or(0) as u32;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8
}

pub fn dense_set_register(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = val as u32;
    regs[byte] = ((regs[byte] as u32 & !(63 << fb)) | (v << fb)) as u8;
    if let Some(b1) = regs.get_mut(byte + 1) {
        let m = 63u32 >> (8 - fb);
        *b1 = ((*b1 as u32 & !m) | (v >> (8 - fb))) as u8;
    }
}

/// Raises register `i` to `count`; true if it changed.
fn dense_raise(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_set_register(regs, i, count);
        true
    } else {
        false
    }
}

// ----- sparse opcodes -----------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Zero(usize),
    XZero(usize),
    Val(u8, usize),
}

impl Op {
    fn width(self) -> usize {
        if let Op::XZero(_) = self {
            2
        } else {
            1
        }
    }
    fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }
}

/// Decodes the opcode at `p` (reading a zero for a byte past the end, as Redis's
/// string terminator would be).
fn op_at(s: &[u8], p: usize) -> Op {
    let b = s[p];
    if b & 0xc0 == 0 {
        Op::Zero((b & 0x3f) as usize + 1)
    } else if b & 0x80 == 0 {
        let lo = s.get(p + 1).copied().unwrap_or(0) as usize;
        Op::XZero((((b & 0x3f) as usize) << 8 | lo) + 1)
    } else {
        Op::Val(((b >> 2) & 0x1f) + 1, (b & 3) as usize + 1)
    }
}

fn val_byte(value: u8, len: usize) -> u8 {
    0x80 | ((value - 1) << 2) | (len as u8 - 1)
}

fn push_xzero(out: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    out.push(0x40 | (l >> 8) as u8);
    out.push((l & 0xff) as u8);
}

/// Appends the shortest zero-run opcode for `len` registers.
fn push_zeros(out: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        push_xzero(out, len);
    } else {
        out.push(len as u8 - 1);
    }
}

/// Walks a sparse value's opcodes, calling `f(first_register, op)`; fails when the
/// opcodes don't cover exactly 16384 registers.
fn walk_sparse(s: &[u8], mut f: impl FnMut(usize, Op)) -> Result<(), Corrupt> {
    let mut idx = 0usize;
    let mut p = HDR;
    while p < s.len() {
        let op = op_at(s, p);
        // A VAL run past the last register ends the walk (the total then decides),
        // as in Redis, where trailing opcodes after a complete set are ignored.
        if let Op::Val(..) = op {
            if idx + op.span() > REGISTERS {
                break;
            }
        }
        f(idx, op);
        idx += op.span();
        p += op.width();
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// The dense form of a sparse value (header and cached cardinality kept).
pub fn sparse_to_dense(s: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&s[..HDR]);
    dense[4] = DENSE;
    let regs = &mut dense[HDR..];
    walk_sparse(s, |first, op| {
        if let Op::Val(v, n) = op {
            for i in first..first + n {
                dense_set_register(regs, i, v);
            }
        }
    })?;
    Ok(dense)
}

/// Converts `s` to dense in place; true if it was sparse.
pub fn to_dense(s: &mut Vec<u8>) -> Result<bool, Corrupt> {
    if !is_sparse(s) {
        return Ok(false);
    }
    *s = sparse_to_dense(s)?;
    Ok(true)
}

/// Raises register `index` of a sparse value to `count`, splitting the opcode that
/// covers it and merging equal neighbours the way Redis does (so the bytes match).
/// Promotes to dense when `count` exceeds 32 or the value would outgrow `max_bytes`.
fn sparse_set(s: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(s, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let end = s.len();
    let (mut p, mut first, mut prev) = (HDR, 0usize, None);
    let mut found = None;
    while p < end {
        let op = op_at(s, p);
        if index < first + op.span() {
            found = Some(op);
            break;
        }
        prev = Some(p);
        p += op.width();
        first += op.span();
    }
    let Some(op) = found else {
        return Err(Corrupt);
    };
    if p + op.width() > end {
        return Err(Corrupt); // A truncated XZERO.
    }
    // Step 2: the trivial in-place updates.
    match op {
        Op::Val(old, _) if old >= count => return Ok(false),
        Op::Val(_, 1) | Op::Zero(1) => {
            s[p] = val_byte(count, 1);
            merge_vals(s, prev.unwrap_or(HDR));
            invalidate_cache(s);
            return Ok(true);
        }
        _ => {}
    }
    // Step 3: split the opcode into up to three.
    let last = first + op.span() - 1;
    let mut seq: Vec<u8> = Vec::with_capacity(5);
    match op {
        Op::Val(cur, _) => {
            if index != first {
                seq.push(val_byte(cur, index - first));
            }
            seq.push(val_byte(count, 1));
            if index != last {
                seq.push(val_byte(cur, last - index));
            }
        }
        _ => {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val_byte(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        }
    }
    if seq.len() > op.width() && s.len() + seq.len() - op.width() > max_bytes {
        return promote(s, index, count);
    }
    s.splice(p..p + op.width(), seq);
    merge_vals(s, prev.unwrap_or(HDR));
    invalidate_cache(s);
    Ok(true)
}

/// Step 4 of a sparse update: scanning at most five opcodes from `p`, merges adjacent
/// VAL opcodes of equal value while their run fits one opcode.
fn merge_vals(s: &mut Vec<u8>, mut p: usize) {
    let mut scan = 5;
    while p < s.len() && scan > 0 {
        scan -= 1;
        match op_at(s, p) {
            Op::XZero(_) => p += 2,
            Op::Zero(_) => p += 1,
            Op::Val(v1, l1) => {
                if p + 1 < s.len() {
                    if let Op::Val(v2, l2) = op_at(s, p + 1) {
                        if v1 == v2 && l1 + l2 <= SPARSE_VAL_MAX_LEN {
                            s[p + 1] = val_byte(v1, l1 + l2);
                            s.remove(p);
                            continue;
                        }
                    }
                }
                p += 1;
            }
        }
    }
}

fn promote(s: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    to_dense(s)?;
    dense_raise(&mut s[HDR..], index, count);
    Ok(true)
}

/// Raises register `index` to `count` in either encoding; true if it changed.
pub fn raise(s: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    if is_sparse(s) {
        sparse_set(s, index, count, max_bytes)
    } else {
        Ok(dense_raise(&mut s[HDR..], index, count))
    }
}

/// PFADD of one element; true if a register changed.
pub fn add(s: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(ele);
    raise(s, index, count, max_bytes)
}

// ----- counting -----------------------------------------------------------------------

/// Histogram of register values (64 buckets; sparse runs may be corrupt, so wide).
type Histogram = [u64; 64];

/// The register histogram of a valid-header value; `Err` for corrupt sparse opcodes.
fn histogram(s: &[u8]) -> Result<Histogram, Corrupt> {
    let mut h = [0u64; 64];
    if is_sparse(s) {
        // Unlike `walk_sparse`, Redis's histogram doesn't stop on a long VAL run: it
        // only checks the total, so count the same way.
        let (mut idx, mut p) = (0usize, HDR);
        while p < s.len() {
            let op = op_at(s, p);
            match op {
                Op::Zero(n) | Op::XZero(n) => h[0] += n as u64,
                Op::Val(v, n) => h[v as usize] += n as u64,
            }
            idx += op.span();
            p += op.width();
        }
        if idx != REGISTERS {
            return Err(Corrupt);
        }
    } else {
        let regs = &s[HDR..];
        for i in 0..REGISTERS {
            h[dense_get(regs, i) as usize] += 1;
        }
    }
    Ok(h)
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

/// Ertl's improved estimator over a register histogram, as Redis computes it.
fn estimate(h: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The cardinality estimate of a valid-header value, ignoring the cache.
pub fn count(s: &[u8]) -> Result<u64, Corrupt> {
    Ok(estimate(&histogram(s)?))
}

/// Registers as one byte each, for unions (PFCOUNT of several keys, PFMERGE).
pub struct Union(Box<[u8; REGISTERS]>);

impl Default for Union {
    fn default() -> Self {
        Union(Box::new([0; REGISTERS]))
    }
}

impl Union {
    /// Folds a valid-header value in: each register becomes the maximum.
    pub fn merge(&mut self, s: &[u8]) -> Result<(), Corrupt> {
        let max = &mut self.0;
        if is_sparse(s) {
            walk_sparse(s, |first, op| {
                if let Op::Val(v, n) = op {
                    for r in &mut max[first..first + n] {
                        *r = (*r).max(v);
                    }
                }
            })
        } else {
            let regs = &s[HDR..];
            for (i, r) in max.iter_mut().enumerate() {
                *r = (*r).max(dense_get(regs, i));
            }
            Ok(())
        }
    }

    pub fn count(&self) -> u64 {
        let mut h = [0u64; 64];
        for &r in self.0.iter() {
            h[r as usize & 63] += 1;
        }
        estimate(&h)
    }

    /// Writes the union into `s` (PFMERGE's destination), register by register in
    /// index order through the encoding's own update path, as Redis does.
    pub fn store_into(&self, s: &mut Vec<u8>, max_bytes: usize) {
        for (i, &v) in self.0.iter().enumerate() {
            if v != 0 {
                // The destination was validated; a failure leaves it as far as it got.
                let _ = raise(s, i, v, max_bytes);
            }
        }
        invalidate_cache(s);
    }
}

/// PFDEBUG DECODE's text for a sparse value: `z:N`, `Z:N` and `v:VALUE,LEN` opcodes.
pub fn decode_sparse(s: &[u8]) -> String {
    let mut out = String::new();
    let mut p = HDR;
    while p < s.len() {
        let op = op_at(s, p);
        let text = match op {
            Op::Zero(n) => format!("z:{n}"),
            Op::XZero(n) => format!("Z:{n}"),
            Op::Val(v, n) => format!("v:{v},{n}"),
        };
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&text);
        p += op.width();
    }
    out
}

/// The dense registers of a valid value (PFDEBUG GETREG after conversion).
pub fn registers(s: &[u8]) -> Vec<u8> {
    let regs = &s[HDR..];
    (0..REGISTERS).map(|i| dense_get(regs, i)).collect()
}

/// PFSELFTEST: register packing round trips, sparse and dense agree register for
/// register, and the estimate stays within the expected error as elements are added.
pub fn self_test() -> Result<(), String> {
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    // Dense register round trip against a plain array.
    let mut regs = vec![0u8; REGISTER_BYTES];
    let mut plain = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, p) in plain.iter_mut().enumerate() {
            let v = rng.u8(0..64);
            *p = v;
            dense_set_register(&mut regs, i, v);
        }
        for (i, &p) in plain.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != p {
                return Err(format!(
                    "TESTFAILED Register error at {i}: expected {p}, got {got}"
                ));
            }
        }
    }
    // Sparse vs dense, and the error bound.
    let mut sparse = new_sparse();
    let mut dense = sparse_to_dense(&sparse).map_err(|_| "TESTFAILED bad empty HLL")?;
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint = 1u64;
    let seed = rng.u64(..);
    for n in 1..=200_000u64 {
        let ele = (seed ^ n).to_le_bytes();
        add(&mut sparse, &ele, 3000).map_err(|_| "TESTFAILED sparse add failed")?;
        add(&mut dense, &ele, 3000).map_err(|_| "TESTFAILED dense add failed")?;
        if n == checkpoint {
            let a = count(&sparse).map_err(|_| "TESTFAILED corrupt sparse")?;
            let b = count(&dense).map_err(|_| "TESTFAILED corrupt dense")?;
            if a != b {
                return Err(format!(
                    "TESTFAILED Sparse and dense disagree at {n}: {a} vs {b}"
                ));
            }
            let maxerr = ((relerr * 6.0 * n as f64).ceil() as u64).max(1);
            if a.abs_diff(n) > maxerr {
                return Err(format!(
                    "TESTFAILED Too big error. card:{n} abserr:{} maxerr:{maxerr}",
                    a.abs_diff(n)
                ));
            }
            checkpoint *= 10;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn murmur_and_pattern_match_redis() {
        // PFADD of one element into an empty HLL, then PFDEBUG DECODE, on redis-server:
        // "a" → Z:12711 v:2,1 Z:3672; "hello" → Z:9216 v:1,1 Z:7167.
        let mut s = new_sparse();
        assert!(add(&mut s, b"a", 3000).unwrap());
        assert_eq!(decode_sparse(&s), "Z:12711 v:2,1 Z:3672");
        let mut s = new_sparse();
        add(&mut s, b"hello", 3000).unwrap();
        assert_eq!(decode_sparse(&s), "Z:9216 v:1,1 Z:7167");
        assert_eq!(count(&s).unwrap(), 1);
    }

    #[test]
    fn empty_and_header() {
        let s = new_sparse();
        assert_eq!(s.len(), 18);
        assert_eq!(&s[16..], &[0x7f, 0xff]);
        assert!(is_valid(&s));
        assert_eq!(count(&s).unwrap(), 0);
        assert_eq!(cached_count(&s), Some(0));
        let mut d = sparse_to_dense(&s).unwrap();
        assert_eq!(d.len(), DENSE_SIZE);
        assert!(is_valid(&d));
        invalidate_cache(&mut d);
        assert_eq!(cached_count(&d), None);
        assert!(!is_valid(b"HYLL\x00"));
        assert!(!is_valid(&d[..100]));
    }

    #[test]
    fn promotes_on_size_and_value() {
        let mut s = new_sparse();
        for i in 0..5000u32 {
            add(&mut s, &i.to_le_bytes(), 3000).unwrap();
        }
        assert!(!is_sparse(&s));
        let mut s = new_sparse();
        raise(&mut s, 5, 33, 3000).unwrap();
        assert!(!is_sparse(&s));
        assert_eq!(registers(&s)[5], 33);
    }

    #[test]
    fn self_test_passes() {
        self_test().unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Sparse and dense stay register-identical under the same updates.
        #[test]
        fn sparse_matches_dense(ops in proptest::collection::vec((0usize..REGISTERS, 1u8..=32), 0..400)) {
            let mut s = new_sparse();
            let mut d = sparse_to_dense(&s).unwrap();
            for &(i, v) in &ops {
                let a = raise(&mut s, i, v, usize::MAX).unwrap();
                let b = raise(&mut d, i, v, usize::MAX).unwrap();
                prop_assert_eq!(a, b);
            }
            prop_assert!(is_sparse(&s));
            prop_assert_eq!(sparse_to_dense(&s).unwrap()[HDR..].to_vec(), d[HDR..].to_vec());
            prop_assert_eq!(count(&s).unwrap(), count(&d).unwrap());
        }

        /// Arbitrary bytes behind a valid header never panic any operation.
        #[test]
        fn corrupt_sparse_never_panics(body in proptest::collection::vec(any::<u8>(), 0..64),
                                       idx in 0usize..REGISTERS, v in 1u8..64) {
            let mut s = new_sparse();
            s.truncate(HDR);
            s.extend_from_slice(&body);
            let _ = count(&s);
            let _ = decode_sparse(&s);
            let _ = sparse_to_dense(&s);
            let mut u = Union::default();
            let _ = u.merge(&s);
            let mut t = s.clone();
            let _ = raise(&mut t, idx, v, 3000);
            let _ = add(&mut s, &body, 3000);
        }
    }
}
