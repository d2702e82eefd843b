//! One key-table entry: metadata, key, optional expiry and value packed into a single
//! allocation. It has no chain link: the table's buckets hold the entry pointers
//! (`buckets.rs`).
//!
//! Layout (offsets in bytes):
//!
//! ```text
//! 0   meta     u32       access clock (24 bits) | value kind (3 bits) | has-expiry (1 bit)
//!                        | snapshot mark (bit 28, see `table.rs`'s copy-on-write)
//! 4   keylen   u8        key length, or 255 followed by a u32 length for long keys
//! ..  key      [u8]
//! ..  expire   i64       absolute unix time in ms, present only with the has-expiry bit
//! ..  payload            INT: i64 · EMB: u8 length + bytes · RAW: Box<Vec<u8>>
//!                        · ZSET/LIST/HASH/SET/STREAM: Box<ZSet> / Box<List> / ...
//! ```
//!
//! The eight kinds fill the three kind bits: each collection type has its own kind and
//! the payload is a thin pointer to that type's box, so a small collection costs its
//! own header's size class (a 5-member zset: 24 bytes) and not that of one enum sized
//! for the largest type, with no second indirection.
//!
//! A million `key:N` → `value:N` pairs cost one 28-byte allocation each (a 32-byte
//! block) plus an 8-byte bucket slot, against Redis's dictEntry + sds key + robj (about
//! 88 bytes per key). Because the entry is one block, changing a string to one of
//! another length, or adding/removing an expiry, reallocates the entry; the table puts
//! the new pointer in the old one's slot.
//! Everything unsafe about the layout is confined to this file.

use std::alloc::{alloc, dealloc, Layout};
use std::ptr::{self, NonNull};

use super::value::{ObjMut, ObjRef, Object, Value, ValueRef, EMBSTR_MAX};
use crate::types::{hash::Hash, list::List, set::Set, stream::Stream, zset::ZSet};

const META: usize = 0;
const KEYLEN: usize = 4;
const ALIGN: usize = 8;

const KIND_SHIFT: u32 = 24;
const KIND_MASK: u32 = 0b111 << KIND_SHIFT;
const HAS_EXPIRE: u32 = 1 << 27;
const LRU_MASK: u32 = (1 << 24) - 1;
/// The snapshot mark: compared with the table's current mark, it says whether a
/// background snapshot still has to serialize this entry (table.rs).
pub const SNAP_MARK: u32 = 1 << 28;

const KIND_INT: u32 = 0;
const KIND_EMB: u32 = 1;
const KIND_RAW: u32 = 2;
const KIND_STREAM: u32 = 3;
const KIND_ZSET: u32 = 4;
const KIND_LIST: u32 = 5;
const KIND_HASH: u32 = 6;
const KIND_SET: u32 = 7;

/// Splits an object into its kind and its box's raw pointer (owned by the caller).
fn object_into_raw(o: Object) -> (u32, *mut u8) {
    match o {
        Object::ZSet(b) => (KIND_ZSET, Box::into_raw(b) as *mut u8),
        Object::List(b) => (KIND_LIST, Box::into_raw(b) as *mut u8),
        Object::Hash(b) => (KIND_HASH, Box::into_raw(b) as *mut u8),
        Object::Set(b) => (KIND_SET, Box::into_raw(b) as *mut u8),
        Object::Stream(b) => (KIND_STREAM, Box::into_raw(b) as *mut u8),
    }
}

/// Borrows the object a collection payload points to.
///
/// # Safety
/// `kind` must be a collection kind and `q` the pointer `object_into_raw` returned for
/// it, still owned by a live entry; the caller picks a lifetime within the entry's.
unsafe fn object_ref<'a>(kind: u32, q: *mut u8) -> ObjRef<'a> {
    // SAFETY: per the contract, `q` is a live box of the type `kind` names.
    unsafe {
        match kind {
            KIND_ZSET => ObjRef::ZSet(&*(q as *const ZSet)),
            KIND_LIST => ObjRef::List(&*(q as *const List)),
            KIND_HASH => ObjRef::Hash(&*(q as *const Hash)),
            KIND_SET => ObjRef::Set(&*(q as *const Set)),
            _ => ObjRef::Stream(&*(q as *const Stream)),
        }
    }
}

/// Mutably borrows the object a collection payload points to.
///
/// # Safety
/// As `object_ref`, and the caller must hold the entry exclusively for `'a`.
unsafe fn object_mut<'a>(kind: u32, q: *mut u8) -> ObjMut<'a> {
    // SAFETY: per the contract, `q` is a live, exclusively held box of `kind`'s type.
    unsafe {
        match kind {
            KIND_ZSET => ObjMut::ZSet(&mut *(q as *mut ZSet)),
            KIND_LIST => ObjMut::List(&mut *(q as *mut List)),
            KIND_HASH => ObjMut::Hash(&mut *(q as *mut Hash)),
            KIND_SET => ObjMut::Set(&mut *(q as *mut Set)),
            _ => ObjMut::Stream(&mut *(q as *mut Stream)),
        }
    }
}

/// Takes back ownership of a collection payload.
///
/// # Safety
/// As `object_ref`; called once per pointer, after which the payload is dead.
unsafe fn object_from_raw(kind: u32, q: *mut u8) -> Object {
    // SAFETY: `q` came from `Box::into_raw` of the type `kind` names, and is reclaimed once.
    unsafe {
        match kind {
            KIND_ZSET => Object::ZSet(Box::from_raw(q as *mut ZSet)),
            KIND_LIST => Object::List(Box::from_raw(q as *mut List)),
            KIND_HASH => Object::Hash(Box::from_raw(q as *mut Hash)),
            KIND_SET => Object::Set(Box::from_raw(q as *mut Set)),
            _ => Object::Stream(Box::from_raw(q as *mut Stream)),
        }
    }
}

pub use crate::util::prefetch;

/// An owning pointer to an entry. The key table holds these in its chains; it is the
/// only owner, and frees entries with `into_value`.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct EntryPtr(NonNull<u8>);

fn key_header_len(key_len: usize) -> usize {
    if key_len < 255 {
        1
    } else {
        5
    }
}

impl EntryPtr {
    /// Allocates an entry holding `key`, `expire` and `value`.
    pub fn new(key: &[u8], expire: Option<i64>, value: Value, lru: u32) -> EntryPtr {
        match value {
            Value::Int(n) => Self::build(key, expire, Payload::Int(n), lru),
            Value::Str(b) if b.len() <= EMBSTR_MAX => {
                Self::build(key, expire, Payload::Emb(&b), lru)
            }
            Value::Str(b) | Value::RawStr(b) => {
                let q = Box::into_raw(Box::new(b)) as *mut u8;
                Self::build(key, expire, Payload::Ptr(KIND_RAW, q), lru)
            }
            Value::Obj(o) => {
                let (kind, q) = object_into_raw(o);
                Self::build(key, expire, Payload::Ptr(kind, q), lru)
            }
        }
    }

    /// Allocates an entry holding the string `bytes`, encoded as the `Value` that
    /// `Value::from_slice` would make (an integer, embedded or raw) without making it:
    /// a short value is copied once, straight from the request into the entry.
    pub fn new_str(key: &[u8], expire: Option<i64>, bytes: &[u8], lru: u32) -> EntryPtr {
        if let Some(n) = super::value::int_encoding(bytes) {
            return Self::build(key, expire, Payload::Int(n), lru);
        }
        if bytes.len() <= EMBSTR_MAX {
            return Self::build(key, expire, Payload::Emb(bytes), lru);
        }
        let q = Box::into_raw(Box::new(bytes.to_vec())) as *mut u8;
        Self::build(key, expire, Payload::Ptr(KIND_RAW, q), lru)
    }

    fn build(key: &[u8], expire: Option<i64>, payload: Payload<'_>, lru: u32) -> EntryPtr {
        assert!(key.len() <= u32::MAX as usize, "key longer than 4 GiB");
        let key_off = KEYLEN + key_header_len(key.len());
        let exp_off = key_off + key.len();
        let val_off = exp_off + if expire.is_some() { 8 } else { 0 };
        let (kind, payload_len) = match payload {
            Payload::Int(_) => (KIND_INT, 8),
            Payload::Emb(b) => (KIND_EMB, 1 + b.len()),
            Payload::Ptr(kind, _) => (kind, 8),
        };
        let size = val_off + payload_len;
        let layout = Layout::from_size_align(size, ALIGN).expect("entry layout");
        // SAFETY: `size` is at least 5 bytes, so the layout is non-zero-sized.
        let p = unsafe { alloc(layout) };
        let Some(nn) = NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout)
        };
        let meta =
            (lru & LRU_MASK) | (kind << KIND_SHIFT) | if expire.is_some() { HAS_EXPIRE } else { 0 };
        // SAFETY: every write below stays within the `size` bytes computed above from the
        // same key length, expiry presence and payload kind; unaligned writes are used for
        // fields past the fixed header.
        unsafe {
            ptr::write(p.add(META) as *mut u32, meta);
            if key.len() < 255 {
                *p.add(KEYLEN) = key.len() as u8;
            } else {
                *p.add(KEYLEN) = 255;
                ptr::write_unaligned(p.add(KEYLEN + 1) as *mut u32, key.len() as u32);
            }
            ptr::copy_nonoverlapping(key.as_ptr(), p.add(key_off), key.len());
            if let Some(t) = expire {
                ptr::write_unaligned(p.add(exp_off) as *mut i64, t);
            }
            match payload {
                Payload::Int(n) => ptr::write_unaligned(p.add(val_off) as *mut i64, n),
                Payload::Emb(b) => {
                    *p.add(val_off) = b.len() as u8;
                    ptr::copy_nonoverlapping(b.as_ptr(), p.add(val_off + 1), b.len());
                }
                Payload::Ptr(_, q) => ptr::write_unaligned(p.add(val_off) as *mut *mut u8, q),
            }
        }
        EntryPtr(nn)
    }

    pub fn as_ptr(self) -> *mut u8 {
        self.0.as_ptr()
    }

    /// # Safety
    /// `p` must be non-null and come from `EntryPtr::as_ptr` of a live entry.
    pub unsafe fn from_raw(p: *mut u8) -> EntryPtr {
        // SAFETY: the caller guarantees `p` is a live entry pointer, hence non-null.
        EntryPtr(unsafe { NonNull::new_unchecked(p) })
    }

    fn meta(self) -> u32 {
        // SAFETY: every live entry has an initialised u32 at META (aligned: the block is
        // 8-aligned and META is 0).
        unsafe { ptr::read(self.0.as_ptr().add(META) as *const u32) }
    }

    fn set_meta(self, m: u32) {
        // SAFETY: as in `meta`; the table owns the entry exclusively while mutating.
        unsafe { ptr::write(self.0.as_ptr().add(META) as *mut u32, m) }
    }

    fn key_len_and_off(self) -> (usize, usize) {
        let p = self.0.as_ptr();
        // SAFETY: the key-length header is initialised at KEYLEN; the long form's four
        // bytes exist whenever the first byte is 255.
        unsafe {
            let b = *p.add(KEYLEN);
            if b < 255 {
                (b as usize, KEYLEN + 1)
            } else {
                (
                    ptr::read_unaligned(p.add(KEYLEN + 1) as *const u32) as usize,
                    KEYLEN + 5,
                )
            }
        }
    }

    /// The key. The slice lives as long as the entry; callers tie it to a borrow of the
    /// table (see `EntryRef`).
    pub fn key<'a>(self) -> &'a [u8] {
        let (len, off) = self.key_len_and_off();
        // SAFETY: `len` bytes of key were copied at `off` when the entry was built.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(off), len) }
    }

    fn expire_off(self) -> usize {
        let (len, off) = self.key_len_and_off();
        off + len
    }

    fn value_off(self) -> usize {
        self.expire_off() + if self.meta() & HAS_EXPIRE != 0 { 8 } else { 0 }
    }

    pub fn expire(self) -> Option<i64> {
        if self.meta() & HAS_EXPIRE == 0 {
            return None;
        }
        // SAFETY: the has-expiry bit guarantees an i64 at the expiry offset.
        Some(unsafe { ptr::read_unaligned(self.0.as_ptr().add(self.expire_off()) as *const i64) })
    }

    /// Overwrites the expiry of an entry that already has one (no reallocation).
    pub fn set_expire_in_place(self, t: i64) -> bool {
        if self.meta() & HAS_EXPIRE == 0 {
            return false;
        }
        // SAFETY: as in `expire`.
        unsafe { ptr::write_unaligned(self.0.as_ptr().add(self.expire_off()) as *mut i64, t) };
        true
    }

    fn kind(self) -> u32 {
        (self.meta() & KIND_MASK) >> KIND_SHIFT
    }

    /// The snapshot mark bit (0 or `SNAP_MARK`).
    pub fn snap_mark(self) -> u32 {
        self.meta() & SNAP_MARK
    }

    pub fn set_snap_mark(self, mark: u32) {
        self.set_meta((self.meta() & !SNAP_MARK) | (mark & SNAP_MARK));
    }

    pub fn lru(self) -> u32 {
        self.meta() & LRU_MASK
    }

    pub fn set_lru(self, lru: u32) {
        self.set_meta((self.meta() & !LRU_MASK) | (lru & LRU_MASK));
    }

    /// Asks the CPU for the entry's first cache line (header and key).
    #[inline(always)]
    pub fn prefetch(self) {
        prefetch(self.0.as_ptr());
    }

    /// Asks the CPU for what the value points to: a heap string's vector or a
    /// collection's box. The entry itself should be cached already (`prefetch`).
    #[inline(always)]
    pub fn prefetch_value(self) {
        if self.kind() >= KIND_RAW {
            let p = self.0.as_ptr();
            // SAFETY: for these kinds `new` wrote a pointer at the value offset.
            let q = unsafe { ptr::read_unaligned(p.add(self.value_off()) as *const *const u8) };
            prefetch(q);
        }
    }

    /// Asks the CPU for a heap string's bytes (after `prefetch_value`).
    #[inline(always)]
    pub fn prefetch_string_bytes(self) {
        if self.kind() == KIND_RAW {
            let p = self.0.as_ptr();
            // SAFETY: a raw string's payload is a pointer to its live boxed vector.
            let bytes = unsafe {
                let v = ptr::read_unaligned(p.add(self.value_off()) as *const *const Vec<u8>);
                (*v).as_ptr()
            };
            prefetch(bytes);
        }
    }

    /// A view of the value. The lifetime is chosen by the caller, which must tie it to
    /// a borrow of the owning table.
    pub fn value<'a>(self) -> ValueRef<'a> {
        let p = self.0.as_ptr();
        let off = self.value_off();
        // SAFETY: the kind bits say which payload was written at `off` by `new`, and
        // boxed payloads (collections: the box of the type the kind names) stay alive
        // until `into_value`.
        unsafe {
            match self.kind() {
                KIND_INT => ValueRef::Int(ptr::read_unaligned(p.add(off) as *const i64)),
                KIND_EMB => {
                    let len = *p.add(off) as usize;
                    ValueRef::Emb(std::slice::from_raw_parts(p.add(off + 1), len))
                }
                KIND_RAW => {
                    let v = ptr::read_unaligned(p.add(off) as *const *const Vec<u8>);
                    ValueRef::Raw((*v).as_slice())
                }
                kind => {
                    let q = ptr::read_unaligned(p.add(off) as *const *mut u8);
                    ValueRef::Obj(object_ref(kind, q))
                }
            }
        }
    }

    /// Mutable access to a boxed collection; `None` for strings.
    pub fn object_mut<'a>(self) -> Option<ObjMut<'a>> {
        let kind = self.kind();
        if kind <= KIND_RAW {
            return None;
        }
        // SAFETY: collection payloads are a live box pointer of the kind's type;
        // exclusivity comes from the caller holding the table mutably.
        unsafe {
            let q = ptr::read_unaligned(self.0.as_ptr().add(self.value_off()) as *const *mut u8);
            Some(object_mut(kind, q))
        }
    }

    /// Mutable access to a heap string; `None` for other kinds.
    pub fn raw_string_mut<'a>(self) -> Option<&'a mut Vec<u8>> {
        if self.kind() != KIND_RAW {
            return None;
        }
        // SAFETY: RAW payloads are a live `Box<Vec<u8>>` pointer; exclusivity as above.
        unsafe {
            let v =
                ptr::read_unaligned(self.0.as_ptr().add(self.value_off()) as *const *mut Vec<u8>);
            Some(&mut *v)
        }
    }

    /// Overwrites an integer value in place; false if the value is not an integer.
    pub fn set_int_in_place(self, n: i64) -> bool {
        if self.kind() != KIND_INT {
            return false;
        }
        // SAFETY: INT payloads are 8 bytes at the value offset.
        unsafe { ptr::write_unaligned(self.0.as_ptr().add(self.value_off()) as *mut i64, n) };
        true
    }

    /// Size of the allocation, for MEMORY USAGE.
    pub fn alloc_size(self) -> usize {
        let off = self.value_off();
        off + match self.kind() {
            // SAFETY: EMB payloads start with their length byte.
            KIND_EMB => 1 + unsafe { *self.0.as_ptr().add(off) } as usize,
            _ => 8,
        }
    }

    /// Frees the entry and hands back its value (and expiry).
    ///
    /// # Safety
    /// The entry must be out of every bucket and never used again.
    pub unsafe fn into_value(self) -> (Value, Option<i64>) {
        let p = self.0.as_ptr();
        let off = self.value_off();
        let expire = self.expire();
        let size = self.alloc_size();
        // SAFETY: as in `value`; boxed payloads are taken back exactly once here, and the
        // block is freed with the layout it was allocated with (same size and alignment).
        unsafe {
            let value = match self.kind() {
                KIND_INT => Value::Int(ptr::read_unaligned(p.add(off) as *const i64)),
                KIND_EMB => {
                    let len = *p.add(off) as usize;
                    Value::Str(std::slice::from_raw_parts(p.add(off + 1), len).to_vec())
                }
                KIND_RAW => {
                    let v = ptr::read_unaligned(p.add(off) as *const *mut Vec<u8>);
                    Value::RawStr(*Box::from_raw(v))
                }
                kind => {
                    let q = ptr::read_unaligned(p.add(off) as *const *mut u8);
                    Value::Obj(object_from_raw(kind, q))
                }
            };
            dealloc(p, Layout::from_size_align_unchecked(size, ALIGN));
            (value, expire)
        }
    }
}

impl EntryPtr {
    /// Frees the entry as `into_value` does, but hands back its value only if it owns
    /// memory elsewhere (a raw string or a collection, which the caller frees as it
    /// frees values): an integer or an embedded string dies with the entry, so an
    /// overwritten short string is not copied out only to be dropped.
    ///
    /// # Safety
    /// As `into_value`.
    pub unsafe fn into_old(self) -> (Option<Value>, Option<i64>) {
        match self.kind() {
            KIND_INT | KIND_EMB => {
                let expire = self.expire();
                let size = self.alloc_size();
                // SAFETY: the caller's guarantee; the block is freed with the layout it
                // was allocated with, and the inline payload owns nothing.
                unsafe {
                    dealloc(
                        self.0.as_ptr(),
                        Layout::from_size_align_unchecked(size, ALIGN),
                    )
                };
                (None, expire)
            }
            // SAFETY: the caller's guarantee.
            _ => {
                let (value, expire) = unsafe { self.into_value() };
                (Some(value), expire)
            }
        }
    }
}

/// What a new entry's value is made from: a `Value`, or a string's bytes as the
/// request brought them (`StrBytes`).
pub trait IntoEntry {
    fn into_entry(self, key: &[u8], expire: Option<i64>, lru: u32) -> EntryPtr;
}

impl IntoEntry for Value {
    fn into_entry(self, key: &[u8], expire: Option<i64>, lru: u32) -> EntryPtr {
        EntryPtr::new(key, expire, self, lru)
    }
}

/// A string value given as bytes: stored as `Value::from_slice` of them would be
/// (`EntryPtr::new_str`).
pub struct StrBytes<'a>(pub &'a [u8]);

impl IntoEntry for StrBytes<'_> {
    fn into_entry(self, key: &[u8], expire: Option<i64>, lru: u32) -> EntryPtr {
        EntryPtr::new_str(key, expire, self.0, lru)
    }
}

/// A new entry's payload: an integer, embedded bytes (`EMBSTR_MAX` at most), or the
/// boxed string or collection of the kind given.
enum Payload<'a> {
    Int(i64),
    Emb(&'a [u8]),
    Ptr(u32, *mut u8),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(key: &[u8], expire: Option<i64>, v: Value) {
        let e = EntryPtr::new(key, expire, v, 12345);
        assert_eq!(e.key(), key);
        assert_eq!(e.expire(), expire);
        assert_eq!(e.lru(), 12345);
        // SAFETY: the entry was never linked anywhere.
        let (back, exp) = unsafe { e.into_value() };
        assert_eq!(exp, expire);
        drop(back);
    }

    #[test]
    fn layouts_round_trip() {
        let long_key = vec![b'k'; 300];
        for key in [&b""[..], b"a", &long_key] {
            for expire in [None, Some(1_700_000_000_000)] {
                roundtrip(key, expire, Value::Int(-7));
                roundtrip(key, expire, Value::Str(b"short".to_vec()));
                roundtrip(key, expire, Value::Str(vec![b'x'; 45]));
                roundtrip(key, expire, Value::RawStr(b"r".to_vec()));
            }
        }
    }

    /// A string stored from its bytes has the encoding, size and value that the
    /// `Value` of `Value::from_slice` gives; an overwritten entry hands back only a
    /// value that owns memory of its own, with the expiry either way.
    #[test]
    fn strings_from_bytes_match_values_and_old_entries_free_inline_payloads() {
        let long_key = vec![b'k'; 300];
        let cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"12".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"9223372036854775808".to_vec(),
            b"007".to_vec(),
            b"value:1".to_vec(),
            vec![b'x'; EMBSTR_MAX],
            vec![b'y'; EMBSTR_MAX + 1],
            vec![b'z'; 5000],
        ];
        for key in [&b"key"[..], &long_key] {
            for expire in [None, Some(1_700_000_000_000)] {
                for bytes in &cases {
                    let a = EntryPtr::new_str(key, expire, bytes, 77);
                    let b = EntryPtr::new(key, expire, Value::from_slice(bytes), 77);
                    assert_eq!(a.kind(), b.kind(), "{bytes:?}");
                    assert_eq!(a.alloc_size(), b.alloc_size(), "{bytes:?}");
                    assert_eq!((a.key(), a.expire(), a.lru()), (key, expire, 77));
                    let same = match (a.value(), b.value()) {
                        (ValueRef::Int(x), ValueRef::Int(y)) => x == y,
                        (ValueRef::Emb(x), ValueRef::Emb(y))
                        | (ValueRef::Raw(x), ValueRef::Raw(y)) => x == y && x == &bytes[..],
                        _ => false,
                    };
                    assert!(same, "{bytes:?}");
                    let owns = bytes.len() > EMBSTR_MAX;
                    // SAFETY: unlinked test entries, each freed once.
                    let (old, exp) = unsafe { a.into_old() };
                    assert_eq!(exp, expire);
                    assert_eq!(old.is_some(), owns, "{bytes:?}");
                    if let Some(Value::Str(v) | Value::RawStr(v)) = old {
                        assert_eq!(&v, bytes);
                    }
                    // SAFETY: as above.
                    unsafe { b.into_value() };
                }
            }
        }
        for v in collections(3) {
            let e = EntryPtr::new(b"c", Some(5), v, 0);
            // SAFETY: unlinked test entry.
            let (old, exp) = unsafe { e.into_old() };
            assert!(matches!(old, Some(Value::Obj(_))));
            assert_eq!(exp, Some(5));
        }
    }

    #[test]
    fn views_and_in_place_updates() {
        let e = EntryPtr::new(b"key:1", Some(5), Value::Int(41), 0);
        assert!(matches!(e.value(), ValueRef::Int(41)));
        assert!(e.set_int_in_place(42));
        assert!(matches!(e.value(), ValueRef::Int(42)));
        assert!(e.set_expire_in_place(9));
        assert_eq!(e.expire(), Some(9));
        e.set_lru(0xFF_FFFF);
        assert_eq!(e.lru(), 0xFF_FFFF);
        assert!(
            matches!(e.value(), ValueRef::Int(42)),
            "lru must not clobber kind"
        );
        e.set_snap_mark(SNAP_MARK);
        assert_eq!(e.snap_mark(), SNAP_MARK);
        e.set_lru(1);
        assert_eq!(e.snap_mark(), SNAP_MARK, "lru must not clobber the mark");
        assert_eq!(e.expire(), Some(9));
        assert!(matches!(e.value(), ValueRef::Int(42)));
        e.set_snap_mark(0);
        assert_eq!(e.snap_mark(), 0);
        e.set_lru(0xFF_FFFF);
        assert_eq!(e.alloc_size(), 4 + 1 + 5 + 8 + 8);
        // SAFETY: unlinked test entry.
        unsafe { e.into_value() };

        let e = EntryPtr::new(b"k", None, Value::RawStr(b"ab".to_vec()), 0);
        e.raw_string_mut().unwrap().extend_from_slice(b"cd");
        assert!(matches!(e.value(), ValueRef::Raw(b"abcd")));
        assert!(e.object_mut().is_none());
        assert!(!e.set_expire_in_place(1));
        // SAFETY: unlinked test entry.
        let (v, _) = unsafe { e.into_value() };
        assert!(matches!(v, Value::RawStr(ref b) if b == b"abcd"));
    }

    fn zset_limits() -> crate::types::zset::Limits {
        crate::types::zset::Limits {
            max_entries: 128,
            max_value: 64,
        }
    }

    /// One value of every collection kind, each holding `n` elements.
    fn collections(n: usize) -> Vec<Value> {
        use crate::types::{hash::HashLimits, list::End, set::SetLimits, stream::StreamId};
        let items: Vec<Vec<u8>> = (0..n).map(|i| format!("m{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        let mut z = ZSet::default();
        let mut l = List::new();
        let mut h = Hash::new();
        let mut st = Set::create(b"m0", n, SetLimits::default());
        let mut x = Stream::new();
        l.push(End::Tail, &refs, crate::types::list::Packing::fill(-2));
        for (i, m) in refs.iter().enumerate() {
            z.set(m, i as f64, zset_limits());
            h.set(m, b"v", HashLimits::default());
            st.add(m, SetLimits::default());
            x.append(StreamId::new(1, i as u64), &[b"f", m], 4096, 100);
        }
        vec![
            Value::Obj(Object::ZSet(Box::new(z))),
            Value::Obj(Object::List(Box::new(l))),
            Value::Obj(Object::Hash(Box::new(h))),
            Value::Obj(Object::Set(Box::new(st))),
            Value::Obj(Object::Stream(Box::new(x))),
        ]
    }

    fn type_and_len(v: ValueRef<'_>) -> (&'static str, usize) {
        let ValueRef::Obj(o) = v else {
            panic!("not a collection")
        };
        let len = match o {
            ObjRef::ZSet(z) => z.len(),
            ObjRef::List(l) => l.len(),
            ObjRef::Hash(h) => h.len(),
            ObjRef::Set(s) => s.len(),
            ObjRef::Stream(s) => s.len() as usize,
        };
        (o.type_name(), len)
    }

    /// Every collection kind survives the entry's whole life: build (with and without
    /// expiry, short and long keys), borrow, mutate in place, rebuild around the same
    /// payload (what `set_expire` does), hand back, and drop.
    #[test]
    fn collection_kinds_round_trip() {
        use crate::types::{hash::HashLimits, list::End, set::SetLimits, stream::StreamId};
        let long_key = vec![b'k'; 300];
        for n in [0, 5, 300] {
            for key in [&b"zs:1"[..], &long_key] {
                for expire in [None, Some(7)] {
                    for v in collections(n) {
                        let want = type_and_len(match &v {
                            Value::Obj(o) => ValueRef::Obj(o.as_ref()),
                            _ => unreachable!(),
                        });
                        let e = EntryPtr::new(key, expire, v, 3);
                        assert_eq!(type_and_len(e.value()), want);
                        assert_eq!(e.key(), key);
                        assert_eq!(e.expire(), expire);
                        assert!(e.raw_string_mut().is_none());
                        assert!(!e.set_int_in_place(1));
                        assert_eq!(e.alloc_size(), e.value_off() + 8);
                        match e.object_mut().expect("a collection") {
                            ObjMut::ZSet(z) => z.set(b"new", 1.5, zset_limits()),
                            ObjMut::List(l) => {
                                l.push(End::Head, &[b"new"], crate::types::list::Packing::fill(-2))
                            }
                            ObjMut::Hash(h) => {
                                h.set(b"new", b"v", HashLimits::default());
                            }
                            ObjMut::Set(s) => {
                                s.add(b"new", SetLimits::default());
                            }
                            ObjMut::Stream(s) => {
                                s.append(StreamId::new(9, 0), &[b"f", b"v"], 4096, 100)
                            }
                        }
                        let grown = (want.0, want.1 + 1);
                        assert_eq!(type_and_len(e.value()), grown);
                        // SAFETY: unlinked test entry, not used after.
                        let (v, exp) = unsafe { e.into_value() };
                        assert_eq!(exp, expire);
                        let e = EntryPtr::new(key, Some(11), v, 0);
                        assert_eq!(type_and_len(e.value()), grown);
                        assert_eq!(e.expire(), Some(11));
                        // SAFETY: unlinked test entry, not used after.
                        let (v, _) = unsafe { e.into_value() };
                        let Value::Obj(o) = v else {
                            panic!("kind changed")
                        };
                        assert_eq!(
                            (o.as_ref().type_name(), o.element_count() > 0),
                            (want.0, true)
                        );
                        drop(o);
                    }
                }
            }
        }
    }

    /// The kind bits never leak into the access clock, expiry or mark of a collection.
    #[test]
    fn collection_kind_survives_meta_updates() {
        for v in collections(3) {
            let name = type_and_len(match &v {
                Value::Obj(o) => ValueRef::Obj(o.as_ref()),
                _ => unreachable!(),
            });
            let e = EntryPtr::new(b"k", Some(1), v, 0);
            e.set_lru(0xFF_FFFF);
            e.set_snap_mark(SNAP_MARK);
            assert!(e.set_expire_in_place(2));
            assert_eq!(type_and_len(e.value()), name);
            e.set_lru(0);
            e.set_snap_mark(0);
            assert_eq!(type_and_len(e.value()), name);
            // SAFETY: unlinked test entry.
            unsafe { e.into_value() };
        }
    }

    #[test]
    fn populate_sized_entry_fits_thirty_two_bytes() {
        let e = EntryPtr::new(b"key:123456", None, Value::Str(b"value:123456".to_vec()), 0);
        assert_eq!(e.alloc_size(), 28);
        // SAFETY: unlinked test entry.
        unsafe { e.into_value() };
    }
}
