//! Redis's RDB format: value serialization (shared by RDB files and DUMP/RESTORE) and
//! whole-file encoding and decoding. Pure: no I/O, no executor, no configuration
//! beyond the encoding thresholds passed in `Limits`.
//!
//! Writing targets RDB version 10 (what Redis 7.0 loads) with the simplest encodings
//! every Redis since 2.x reads: strings (integer-encoded or LZF-compressed as Redis
//! does), plain lists, sets, binary-score zsets and hashes. A hash whose fields carry
//! TTLs needs Redis 7.4's `RDB_TYPE_HASH_METADATA`, so such a value raises the version
//! of the file (or DUMP payload) that holds it to 12; `Encoded::min_version` says so.
//!
//! Reading accepts versions 1–12 and every value encoding Redis has written: ziplist,
//! listpack, intset, zipmap, quicklist (1 and 2), listpack-ex hashes with field TTLs.
//! Every length and offset read is bounds-checked and every embedded blob is fully
//! validated before use, so corrupt or truncated input is an `Error`, never a panic or
//! a half-built value. Streams (types 15, 19 and 21 read, 19 written) live in
//! `rdb/stream.rs`; module values are refused with `Error::Unsupported`.

use std::borrow::Cow;
use std::fmt;

use crate::keyspace::{ObjRef, Object, Value, ValueRef};
use crate::types::hash::{Hash, HashLimits};
use crate::types::list::{End, List, NodeImage, Packing};
use crate::types::set::{Set, SetLimits};
use crate::types::zset::{self, ZSet};
use crate::util::numeric::{format_i64, parse_f64, parse_i64};

/// The version written in files and DUMP payloads (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The newest version understood when loading (Redis 7.4's).
pub const MAX_LOAD_VERSION: u16 = 12;

// Value types.
pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_MODULE_PRE_GA: u8 = 6;
pub const TYPE_MODULE_2: u8 = 7;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;
pub const TYPE_SET_LISTPACK: u8 = 20;
pub const TYPE_STREAM_LISTPACKS_3: u8 = 21;
pub const TYPE_HASH_METADATA_PRE_GA: u8 = 22;
pub const TYPE_HASH_LISTPACK_EX_PRE_GA: u8 = 23;
pub const TYPE_HASH_METADATA: u8 = 24;
pub const TYPE_HASH_LISTPACK_EX: u8 = 25;

// Opcodes.
pub const OP_SLOT_INFO: u8 = 244;
pub const OP_FUNCTION2: u8 = 245;
pub const OP_FUNCTION_PRE_GA: u8 = 246;
pub const OP_MODULE_AUX: u8 = 247;
pub const OP_IDLE: u8 = 248;
pub const OP_FREQ: u8 = 249;
pub const OP_AUX: u8 = 250;
pub const OP_RESIZEDB: u8 = 251;
pub const OP_EXPIRETIME_MS: u8 = 252;
pub const OP_EXPIRETIME: u8 = 253;
pub const OP_SELECTDB: u8 = 254;
pub const OP_EOF: u8 = 255;

const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;

/// Largest collection length accepted before allocation (guards against absurd lengths
/// in corrupt input driving huge reservations).
const MAX_PREALLOC: usize = 1 << 16;

static CRC64: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// Redis's CRC-64 (Jones polynomial, reflected), as RDB files and DUMP payloads use.
pub fn crc64(data: &[u8]) -> u64 {
    CRC64.checksum(data)
}

/// An incremental CRC-64 for data produced piecewise.
pub type Crc64Digest = crc::Digest<'static, u64, crc::Table<16>>;

pub fn crc64_digest() -> Crc64Digest {
    CRC64.digest()
}

/// Why a payload could not be decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The input ended before the structure did.
    Truncated,
    /// The input is malformed; the message says where.
    Corrupt(String),
    /// A well-formed value of a type this server cannot hold.
    Unsupported(String),
    /// The RDB version is newer than this server reads.
    Version(u16),
    /// The CRC64 footer does not match the content.
    Checksum { expected: u64, actual: u64 },
    /// A FUNCTION library in the file could not be created (it exists already, its
    /// code fails...): Redis's "Failed loading library" with its reason.
    Library(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => write!(
                f,
                "Short read loading DB: the data ends before its structure does"
            ),
            Error::Corrupt(m) => write!(f, "Corrupt RDB content: {m}"),
            Error::Unsupported(m) => write!(f, "Unsupported RDB content: {m}"),
            Error::Version(v) => write!(f, "Can't handle RDB format version {v}"),
            Error::Library(m) => write!(f, "Failed loading library, {m}"),
            Error::Checksum { expected, actual } => write!(
                f,
                // Redis's words: "expected" is the computed sum, "got" the stored one.
                "Wrong RDB checksum expected: ({actual:x}) but got ({expected:x}). Aborting now."
            ),
        }
    }
}

impl Error {
    /// The reason alone, in Redis's words where Redis has them (what RESTORE logs
    /// after "Internal error in RDB reading ...").
    pub fn reason(&self) -> String {
        match self {
            Error::Truncated => "Unexpected EOF reading RDB file".into(),
            Error::Corrupt(m) | Error::Unsupported(m) => m.clone(),
            other => other.to_string(),
        }
    }
}

fn corrupt<T>(m: impl Into<String>) -> Result<T, Error> {
    Err(Error::Corrupt(m.into()))
}

/// Replaces any error of a blob's validation by the type's own report (Redis names
/// the encoding that failed, whatever the detail was).
fn as_corrupt(m: &'static str) -> impl Fn(Error) -> Error {
    move |_| Error::Corrupt(m.into())
}

/// The encoding thresholds in force when values are rebuilt.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub hash: HashLimits,
    pub set: SetLimits,
    pub zset: zset::Limits,
    pub list: Packing,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            hash: HashLimits::default(),
            set: SetLimits::default(),
            zset: zset::Limits {
                max_entries: 128,
                max_value: 64,
            },
            list: Packing::fill(-2),
        }
    }
}

impl Limits {
    pub fn from_config(c: &crate::config::Config) -> Limits {
        Limits {
            hash: HashLimits {
                listpack_entries: c.hash_max_listpack_entries.max(0) as usize,
                listpack_value: c.hash_max_listpack_value.max(0) as usize,
            },
            set: SetLimits {
                intset_entries: c.set_max_intset_entries.max(0) as usize,
                listpack_entries: c.set_max_listpack_entries.max(0) as usize,
                listpack_value: c.set_max_listpack_value.max(0) as usize,
            },
            zset: zset::Limits {
                max_entries: c.zset_max_listpack_entries.max(0) as usize,
                max_value: c.zset_max_listpack_value.max(0) as usize,
            },
            list: Packing {
                fill: c.list_max_listpack_size,
                depth: c.list_compress_depth.max(0) as usize,
            },
        }
    }
}

// ===================================================================================
// Writing
// ===================================================================================

/// Appends a length in RDB's variable encoding.
pub fn write_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends an integer in the string encoding (int8/16/32) if it fits, returning false
/// otherwise.
fn write_int_string(out: &mut Vec<u8>, n: i64) -> bool {
    if (-(1 << 7)..1 << 7).contains(&n) {
        out.push(0xC0 | ENC_INT8);
        out.push(n as i8 as u8);
    } else if (-(1 << 15)..1 << 15).contains(&n) {
        out.push(0xC0 | ENC_INT16);
        out.extend_from_slice(&(n as i16).to_le_bytes());
    } else if (-(1 << 31)..1 << 31).contains(&n) {
        out.push(0xC0 | ENC_INT32);
        out.extend_from_slice(&(n as i32).to_le_bytes());
    } else {
        return false;
    }
    true
}

/// Appends a string as Redis's rdbSaveRawString does: integer-encoded when it is the
/// canonical form of a 32-bit integer, LZF-compressed when `compress` and longer than
/// 20 bytes and compression saves at least 4 bytes, raw otherwise.
pub fn write_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(n) = parse_i64(s) {
            if write_int_string(out, n) {
                return;
            }
        }
    }
    if compress && s.len() > 20 {
        let written = crate::util::lzf::compress_with(s, s.len() - 4, |c| {
            out.push(0xC0 | ENC_LZF);
            write_len(out, c.len() as u64);
            write_len(out, s.len() as u64);
            out.extend_from_slice(c);
        });
        if written.is_some() {
            return;
        }
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

fn write_i64_string(out: &mut Vec<u8>, n: i64) {
    if !write_int_string(out, n) {
        let mut v = Vec::with_capacity(20);
        format_i64(n, &mut v);
        write_len(out, v.len() as u64);
        out.extend_from_slice(&v);
    }
}

/// A serialized value: its RDB type byte, its payload, and the oldest RDB version
/// that can carry it.
pub struct Encoded {
    pub rdb_type: u8,
    pub payload: Vec<u8>,
    pub min_version: u16,
}

/// Where serialized values go. `Vec<u8>` output (SAVE, DUMP) encodes strings at once;
/// background snapshots defer the encoding of long strings (LZF) to their writer
/// thread (`persistence::cow`), so the executor only copies bytes.
pub trait Out {
    /// Bytes written verbatim (lengths, opcodes, binary doubles).
    fn raw(&mut self, bytes: &[u8]);
    /// A string, written as `write_string` would.
    fn string(&mut self, s: &[u8]);
    fn length(&mut self, n: u64) {
        let mut b = Vec::with_capacity(9);
        write_len(&mut b, n);
        self.raw(&b);
    }
}

/// `Out` into a byte vector, strings encoded immediately.
pub struct Plain<'a> {
    pub out: &'a mut Vec<u8>,
    pub compress: bool,
}

impl Out for Plain<'_> {
    fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
    fn string(&mut self, s: &[u8]) {
        write_string(self.out, s, self.compress);
    }
    fn length(&mut self, n: u64) {
        write_len(self.out, n);
    }
}

/// Serializes a value (type byte excluded) into `out`, returning its RDB type and the
/// RDB version it needs.
pub fn write_value(out: &mut Vec<u8>, v: ValueRef<'_>, compress: bool) -> (u8, u16) {
    write_value_to(&mut Plain { out, compress }, v)
}

/// `write_value` into any `Out`.
pub fn write_value_to<O: Out>(out: &mut O, v: ValueRef<'_>) -> (u8, u16) {
    match v {
        ValueRef::Int(n) => {
            let mut b = Vec::with_capacity(20);
            write_i64_string(&mut b, n);
            out.raw(&b);
            (TYPE_STRING, RDB_VERSION)
        }
        ValueRef::Emb(s) | ValueRef::Raw(s) => {
            out.string(s);
            (TYPE_STRING, RDB_VERSION)
        }
        ValueRef::Obj(o) => write_object(out, o),
    }
}

/// A quicklist node's container kind in RDB: 1 plain, 2 packed (a listpack).
fn quicklist_container(plain: bool) -> u64 {
    if plain {
        1
    } else {
        2
    }
}

fn write_object<O: Out>(out: &mut O, o: ObjRef<'_>) -> (u8, u16) {
    match o {
        ObjRef::Stream(s) => {
            stream::write_stream(out, s);
            (TYPE_STREAM_LISTPACKS_2, RDB_VERSION)
        }
        ObjRef::List(l) => {
            out.length(l.node_count() as u64);
            l.for_each_node(|n| write_list_node(out, n));
            (TYPE_LIST_QUICKLIST_2, RDB_VERSION)
        }
        ObjRef::Set(s) => {
            out.length(s.len() as u64);
            s.for_each(|m| out.string(m));
            (TYPE_SET, RDB_VERSION)
        }
        ObjRef::ZSet(z) => {
            out.length(z.len() as u64);
            z.for_each(|m, score| write_zset_member(out, m, score));
            (TYPE_ZSET_2, RDB_VERSION)
        }
        ObjRef::Hash(h) => {
            let (t, v, layout) = write_hash_head(out, h);
            h.for_each(|f, v| write_hash_field(out, h, layout, f, v));
            (t, v)
        }
    }
}

/// How a hash's fields are written: plain pairs, or with Redis 7.4's field TTLs
/// relative to the earliest one (`Some(earliest)`).
#[derive(Clone, Copy)]
pub(crate) struct HashLayout(Option<i64>);

/// A hash's RDB type, the version it needs, and what precedes its fields: the field
/// count, after the earliest field expiry when any field has a TTL.
pub(crate) fn write_hash_head<O: Out>(out: &mut O, h: &Hash) -> (u8, u16, HashLayout) {
    if h.has_field_ttls() {
        let min = h.next_expire().unwrap_or(0);
        out.raw(&(min as u64).to_le_bytes());
        out.length(h.len() as u64);
        (TYPE_HASH_METADATA, 12, HashLayout(Some(min)))
    } else {
        out.length(h.len() as u64);
        (TYPE_HASH, RDB_VERSION, HashLayout(None))
    }
}

/// One hash field: (ttl, field, value) with each ttl relative to the earliest plus one
/// (0 = no TTL), or (field, value).
pub(crate) fn write_hash_field<O: Out>(
    out: &mut O,
    h: &Hash,
    layout: HashLayout,
    f: &[u8],
    v: &[u8],
) {
    if let HashLayout(Some(min)) = layout {
        let ttl = match h.expire_of(f) {
            Some(at) => (at - min) as u64 + 1,
            None => 0,
        };
        out.length(ttl);
    }
    out.string(f);
    out.string(v);
}

pub(crate) fn write_zset_member<O: Out>(out: &mut O, m: &[u8], score: f64) {
    out.string(m);
    out.raw(&score.to_le_bytes());
}

/// One quicklist node in Redis's layout: its container kind then its bytes (a
/// listpack, or a plain node's element); a compressed node goes out as the LZF string
/// it already is.
pub(crate) fn write_list_node<O: Out>(out: &mut O, n: NodeImage<'_>) {
    match n {
        NodeImage::Raw { plain, bytes } => {
            out.length(quicklist_container(plain));
            out.string(bytes);
        }
        NodeImage::Lzf { plain, data, len } => {
            out.length(quicklist_container(plain));
            let mut head = Vec::with_capacity(19);
            head.push(0xC0 | ENC_LZF);
            write_len(&mut head, data.len() as u64);
            write_len(&mut head, len as u64);
            out.raw(&head);
            out.raw(data);
        }
    }
}

/// Serializes a value with its type byte.
pub fn encode_value(v: ValueRef<'_>, compress: bool) -> Encoded {
    let mut payload = Vec::new();
    let (rdb_type, min_version) = write_value(&mut payload, v, compress);
    Encoded {
        rdb_type,
        payload,
        min_version,
    }
}

/// A DUMP payload: type, value, RDB version (2 bytes LE), CRC64 (8 bytes LE).
pub fn dump_payload(v: ValueRef<'_>) -> Vec<u8> {
    let e = encode_value(v, true);
    let mut out = Vec::with_capacity(e.payload.len() + 11);
    out.push(e.rdb_type);
    out.extend_from_slice(&e.payload);
    out.extend_from_slice(&e.min_version.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// How a DUMP payload is checked.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    /// Verify the CRC64 footer (off only under DEBUG SET-SKIP-CHECKSUM-VALIDATION).
    pub checksum: bool,
    /// Redis's deep sanitization (`sanitize-dump-payload`), see `Reader::deep`.
    pub deep: bool,
}

impl Default for Check {
    fn default() -> Self {
        Check {
            checksum: true,
            deep: true,
        }
    }
}

/// Checks a DUMP payload's footer and decodes its value. `Ok(None)` for an empty
/// collection (which Redis never produces).
pub fn restore_payload(p: &[u8], lim: &Limits) -> Result<Option<Value>, Error> {
    restore_payload_checked(p, lim, Check::default())
}

/// `restore_payload` with the checks chosen by the caller.
pub fn restore_payload_checked(
    p: &[u8],
    lim: &Limits,
    check: Check,
) -> Result<Option<Value>, Error> {
    if p.len() < 10 {
        // No room for the footer: Redis reports this as a bad version/checksum.
        return Err(Error::Checksum {
            expected: 0,
            actual: 0,
        });
    }
    let (body, footer) = p.split_at(p.len() - 10);
    let ver = u16::from_le_bytes([footer[0], footer[1]]);
    if ver > MAX_LOAD_VERSION {
        return Err(Error::Version(ver));
    }
    if check.checksum {
        let expected = u64::from_le_bytes(footer[2..10].try_into().unwrap_or([0; 8]));
        let actual = crc64(&p[..p.len() - 8]);
        if expected != actual {
            return Err(Error::Checksum { expected, actual });
        }
    }
    let mut r = Reader::new(body);
    r.deep = check.deep;
    let t = r.u8()?;
    let v = r.read_object(t, lim)?;
    if r.pos != body.len() {
        return corrupt("trailing bytes after the value");
    }
    Ok(v)
}

/// One key as written in a file.
pub struct KeyRecord<'a> {
    pub key: &'a [u8],
    pub value: ValueRef<'a>,
    pub expire_ms: Option<i64>,
    /// The entry's access field (LRU clock or LFU counter), for `AccessSave`.
    pub access: u32,
}

/// What a file records of each key's access history, as Redis's rdbSaveKeyValuePair:
/// the idle time under an LRU `maxmemory-policy`, the LFU counter under an LFU one,
/// nothing otherwise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AccessSave {
    Nothing,
    Idle,
    Freq(crate::keyspace::LfuParams),
}

impl AccessSave {
    pub fn for_policy(policy: &str, params: crate::keyspace::LfuParams) -> AccessSave {
        if policy.ends_with("-lru") {
            AccessSave::Idle
        } else if policy.ends_with("-lfu") {
            AccessSave::Freq(params)
        } else {
            AccessSave::Nothing
        }
    }

    /// Appends the OP_IDLE (seconds) or OP_FREQ (the decayed counter) record of an
    /// entry whose access field is `field`, at `now_ms`.
    pub fn write(self, out: &mut Vec<u8>, field: u32, now_ms: i64) {
        match self {
            AccessSave::Nothing => {}
            AccessSave::Idle => {
                out.push(OP_IDLE);
                let idle = crate::keyspace::lru_idle_ms(field, now_ms).max(0) / 1000;
                write_len(out, idle as u64);
            }
            AccessSave::Freq(params) => {
                out.push(OP_FREQ);
                out.push(crate::keyspace::lfu_counter(field, now_ms, params).min(255) as u8);
            }
        }
    }
}

/// Streams an RDB file: header and aux fields, then databases and keys, then the EOF
/// opcode and checksum. Bytes are appended to `out`, which the caller may drain to disk
/// whenever it likes (the checksum is kept incrementally).
pub struct FileWriter {
    pub compress: bool,
    pub checksum: bool,
    crc: Crc64Digest,
    pub version: u16,
    /// Each key's access history recorded (set by the caller; nothing by default).
    pub access: AccessSave,
}

impl FileWriter {
    /// Starts a file: magic, version and the aux fields Redis writes.
    pub fn start(
        out: &mut Vec<u8>,
        version: u16,
        compress: bool,
        checksum: bool,
        aux: &[(&str, Vec<u8>)],
    ) -> FileWriter {
        let mut w = FileWriter {
            compress,
            checksum,
            crc: crc64_digest(),
            version,
            access: AccessSave::Nothing,
        };
        let start = out.len();
        out.extend_from_slice(format!("REDIS{version:04}").as_bytes());
        for (k, v) in aux {
            out.push(OP_AUX);
            write_string(out, k.as_bytes(), false);
            write_string(out, v, false);
        }
        w.feed(&out[start..]);
        w
    }

    fn feed(&mut self, bytes: &[u8]) {
        if self.checksum {
            self.crc.update(bytes);
        }
    }

    /// One FUNCTION library (`RDB_OPCODE_FUNCTION2` and its code as an RDB string):
    /// Redis writes them after the aux fields, before any database.
    pub fn library(&mut self, out: &mut Vec<u8>, code: &[u8]) {
        let start = out.len();
        out.push(OP_FUNCTION2);
        write_string(out, code, self.compress);
        self.feed(&out[start..]);
    }

    pub fn select_db(&mut self, out: &mut Vec<u8>, db: usize, keys: usize, expires: usize) {
        let start = out.len();
        out.push(OP_SELECTDB);
        write_len(out, db as u64);
        out.push(OP_RESIZEDB);
        write_len(out, keys as u64);
        write_len(out, expires as u64);
        self.feed(&out[start..]);
    }

    pub fn key(&mut self, out: &mut Vec<u8>, rec: &KeyRecord<'_>) {
        let start = out.len();
        if let Some(t) = rec.expire_ms {
            out.push(OP_EXPIRETIME_MS);
            out.extend_from_slice(&t.to_le_bytes());
        }
        // The clock is read only when an access record is written.
        if !matches!(self.access, AccessSave::Nothing) {
            self.access
                .write(out, rec.access, crate::keyspace::unix_ms());
        }
        let type_at = out.len();
        out.push(0);
        write_string(out, rec.key, self.compress);
        let (t, _) = write_value(out, rec.value, self.compress);
        out[type_at] = t;
        self.feed(&out[start..]);
    }

    /// Writes a key whose value was serialized earlier (copy-on-write snapshots).
    pub fn key_encoded(
        &mut self,
        out: &mut Vec<u8>,
        key: &[u8],
        expire_ms: Option<i64>,
        e: &Encoded,
    ) {
        let start = out.len();
        if let Some(t) = expire_ms {
            out.push(OP_EXPIRETIME_MS);
            out.extend_from_slice(&t.to_le_bytes());
        }
        out.push(e.rdb_type);
        write_string(out, key, self.compress);
        out.extend_from_slice(&e.payload);
        self.feed(&out[start..]);
    }

    pub fn finish(mut self, out: &mut Vec<u8>) {
        out.push(OP_EOF);
        self.feed(&[OP_EOF]);
        let crc = if self.checksum {
            self.crc.finalize()
        } else {
            0
        };
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

// ===================================================================================
// Reading
// ===================================================================================

/// A bounds-checked cursor over a byte slice.
pub struct Reader<'a> {
    buf: &'a [u8],
    pub pos: usize,
    /// Redis's deep sanitization: also check what the rebuilt value never relies on
    /// (listpack back-lengths and entry counts, intset order). Everything a value is
    /// rebuilt from is checked either way.
    pub deep: bool,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            deep: true,
        }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.remaining() < n {
            return Err(Error::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }

    fn arr<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub fn u32_le(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.arr()?))
    }

    pub fn i64_le(&mut self) -> Result<i64, Error> {
        Ok(i64::from_le_bytes(self.arr()?))
    }

    /// A length, or the special-encoding marker: `(value, is_encoded)`.
    fn len_or_enc(&mut self) -> Result<(u64, bool), Error> {
        let b = self.u8()?;
        Ok(match b >> 6 {
            0 => ((b & 0x3F) as u64, false),
            1 => ((((b & 0x3F) as u64) << 8) | self.u8()? as u64, false),
            2 => match b {
                0x80 => (u32::from_be_bytes(self.arr()?) as u64, false),
                0x81 => (u64::from_be_bytes(self.arr()?), false),
                _ => return corrupt(format!("Unknown length encoding {b} in rdbLoadLen()")),
            },
            _ => ((b & 0x3F) as u64, true),
        })
    }

    pub fn read_len(&mut self) -> Result<u64, Error> {
        match self.len_or_enc()? {
            (n, false) => Ok(n),
            _ => corrupt("encoded length where a plain length was expected"),
        }
    }

    /// A length that counts items still to be read from the input: each item takes at
    /// least one byte, so anything beyond the remaining input is corrupt.
    fn count(&mut self, min_item_bytes: usize) -> Result<usize, Error> {
        let n = self.read_len()?;
        if n > (self.remaining() / min_item_bytes.max(1)) as u64 {
            return Err(Error::Truncated);
        }
        Ok(n as usize)
    }

    /// A string in any of its encodings.
    pub fn string(&mut self) -> Result<Cow<'a, [u8]>, Error> {
        let (n, enc) = self.len_or_enc()?;
        if !enc {
            if n > self.remaining() as u64 {
                return Err(Error::Truncated);
            }
            return Ok(Cow::Borrowed(self.take(n as usize)?));
        }
        let v: i64 = match n as u8 {
            ENC_INT8 => self.u8()? as i8 as i64,
            ENC_INT16 => i16::from_le_bytes(self.arr()?) as i64,
            ENC_INT32 => i32::from_le_bytes(self.arr()?) as i64,
            ENC_LZF => {
                let clen = self.read_len()?;
                let len = self.read_len()?;
                if clen > self.remaining() as u64 {
                    return Err(Error::Truncated);
                }
                let data = self.take(clen as usize)?;
                // An LZF back-reference of 3 bytes yields at most 264 bytes (88x) and
                // literals never expand: a longer claim is corrupt, refused before
                // allocating.
                if len == 0 || len > clen.saturating_mul(88) || len > 1 << 32 {
                    return corrupt("Invalid LZF compressed string");
                }
                return match crate::util::lzf::decompress(data, len as usize) {
                    Some(v) => Ok(Cow::Owned(v)),
                    None => corrupt("Invalid LZF compressed string"),
                };
            }
            e => return corrupt(format!("Unknown RDB string encoding type {e}")),
        };
        let mut out = Vec::with_capacity(20);
        format_i64(v, &mut out);
        Ok(Cow::Owned(out))
    }

    /// A score of the old ZSET type: length-prefixed decimal, with 253/254/255 for
    /// NaN/+inf/-inf.
    fn string_double(&mut self) -> Result<f64, Error> {
        let n = self.u8()?;
        match n {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            _ => {
                let s = self.take(n as usize)?;
                parse_score(s)
            }
        }
    }

    fn binary_double(&mut self) -> Result<f64, Error> {
        Ok(f64::from_le_bytes(self.arr()?))
    }

    /// Reads one value of type `t`. `Ok(None)` for an empty collection (Redis skips
    /// such keys when loading).
    pub fn read_object(&mut self, t: u8, lim: &Limits) -> Result<Option<Value>, Error> {
        Ok(Some(match t {
            TYPE_STRING => Value::from_string(self.string()?.into_owned()),
            TYPE_LIST => {
                let n = self.count(1)?;
                let mut items = Vec::with_capacity(n.min(MAX_PREALLOC));
                for _ in 0..n {
                    items.push(self.string()?);
                }
                return Ok(build_list(items.iter().map(|c| c.as_ref()), lim));
            }
            TYPE_SET => {
                let n = self.count(1)?;
                let mut b = SetBuilder::new(n, lim.set);
                for _ in 0..n {
                    b.add(&self.string()?)?;
                }
                return Ok(b.finish());
            }
            TYPE_ZSET | TYPE_ZSET_2 => {
                let n = self.count(2)?;
                let mut b = ZSetBuilder::new(n, lim.zset);
                for _ in 0..n {
                    let m = self.string()?;
                    let s = if t == TYPE_ZSET {
                        self.string_double()?
                    } else {
                        self.binary_double()?
                    };
                    if s.is_nan() {
                        return corrupt("Zset with NAN score detected");
                    }
                    b.add(&m, s)?;
                }
                return Ok(b.finish());
            }
            TYPE_HASH => {
                let n = self.count(2)?;
                let mut b = HashBuilder::new(lim.hash);
                for _ in 0..n {
                    let f = self.string()?;
                    let v = self.string()?;
                    b.add(&f, &v, None)?;
                }
                return Ok(b.finish());
            }
            TYPE_HASH_METADATA | TYPE_HASH_METADATA_PRE_GA => {
                let min = if t == TYPE_HASH_METADATA {
                    self.i64_le()?
                } else {
                    0
                };
                let n = self.count(3)?;
                let mut b = HashBuilder::new(lim.hash);
                for _ in 0..n {
                    let ttl = self.read_len()?;
                    let at = match (ttl, t) {
                        (0, _) => None,
                        (x, TYPE_HASH_METADATA) => Some(expire_at(min, x)?),
                        (x, _) => Some(checked_ms(x)?),
                    };
                    let f = self.string()?;
                    let v = self.string()?;
                    b.add(&f, &v, at)?;
                }
                return Ok(b.finish());
            }
            TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
                let nodes = self.count(1)?;
                // Each node's elements go into the list as one batch, borrowed from
                // the node's bytes where they are strings: no allocation per element.
                let mut list = List::new();
                for _ in 0..nodes {
                    let container = if t == TYPE_LIST_QUICKLIST_2 {
                        self.read_len()?
                    } else {
                        2
                    };
                    if container != 1 && container != 2 {
                        return corrupt("Quicklist integrity check failed.");
                    }
                    let blob = self.string()?;
                    if blob.is_empty() {
                        return corrupt("Quicklist integrity check failed.");
                    }
                    let mut items: Vec<Cow<'_, [u8]>> = Vec::new();
                    let push = |e| {
                        items.push(e);
                        Ok(())
                    };
                    // Empty nodes are skipped (an all-empty list is an empty key).
                    match container {
                        1 => items.push(Cow::Borrowed(&blob[..])),
                        _ if t == TYPE_LIST_QUICKLIST_2 => {
                            for_each_listpack(&blob, self.deep, push)
                                .map_err(as_corrupt("Listpack integrity check failed."))?;
                            if !self.deep && listpack_header_count(&blob) == 0 {
                                // As for other listpacks (`blob_items`): an empty node.
                                items.clear();
                            }
                        }
                        _ => {
                            for_each_ziplist(&blob, push)
                                .map_err(as_corrupt("Ziplist integrity check failed."))?;
                        }
                    }
                    let refs: Vec<&[u8]> = items.iter().map(|c| &c[..]).collect();
                    list.push(End::Tail, &refs, lim.list);
                }
                return Ok((!list.is_empty()).then(|| Value::Obj(Object::List(Box::new(list)))));
            }
            TYPE_HASH_ZIPMAP
            | TYPE_LIST_ZIPLIST
            | TYPE_SET_INTSET
            | TYPE_SET_LISTPACK
            | TYPE_ZSET_ZIPLIST
            | TYPE_ZSET_LISTPACK
            | TYPE_HASH_ZIPLIST
            | TYPE_HASH_LISTPACK
            | TYPE_HASH_LISTPACK_EX
            | TYPE_HASH_LISTPACK_EX_PRE_GA => {
                if t == TYPE_HASH_LISTPACK_EX {
                    self.i64_le()?; // the earliest expiry, informational
                }
                let blob = self.string()?;
                return read_blob(t, &blob, lim, self.deep);
            }
            TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => {
                // An empty stream is a real value (XADD then XDEL keeps the key).
                let s = stream::read_stream(self, t)?;
                Value::Obj(Object::Stream(Box::new(s)))
            }
            TYPE_MODULE_PRE_GA | TYPE_MODULE_2 => {
                return Err(Error::Unsupported(format!(
                    "module values (RDB type {t}) need a module this server does not have"
                )))
            }
            _ => return corrupt(format!("Unknown RDB encoding type {t}")),
        }))
    }
}

fn checked_ms(x: u64) -> Result<i64, Error> {
    // Redis's EB_EXPIRE_TIME_MAX is 2^48 - 1.
    if x >= 1 << 48 {
        return corrupt(format!("invalid expireAt time: {x}"));
    }
    Ok(x as i64)
}

fn expire_at(min: i64, ttl: u64) -> Result<i64, Error> {
    let at = (min as u64)
        .checked_add(ttl - 1)
        .ok_or(Error::Corrupt("hash field TTL overflow".into()))?;
    checked_ms(at)
}

fn parse_score(s: &[u8]) -> Result<f64, Error> {
    match parse_f64(s) {
        Some(v) => Ok(v),
        None => match std::str::from_utf8(s)
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
        {
            Some(v) => Ok(v),
            None => corrupt("invalid zset score"),
        },
    }
}

// ----- builders: rebuild values through the types' public APIs ---------------------

fn build_list<'b>(items: impl Iterator<Item = &'b [u8]>, lim: &Limits) -> Option<Value> {
    let mut l = List::new();
    for it in items {
        l.push(End::Tail, &[it], lim.list);
    }
    if l.is_empty() {
        None
    } else {
        Some(Value::Obj(Object::List(Box::new(l))))
    }
}

struct SetBuilder {
    set: Option<Set>,
    hint: usize,
    lim: SetLimits,
    n: usize,
}

impl SetBuilder {
    fn new(hint: usize, lim: SetLimits) -> SetBuilder {
        SetBuilder {
            set: None,
            hint,
            lim,
            n: 0,
        }
    }
    fn add(&mut self, m: &[u8]) -> Result<(), Error> {
        let lim = self.lim;
        let s = self
            .set
            .get_or_insert_with(|| Set::create(m, self.hint, lim));
        if !s.add(m, lim) {
            return corrupt("Duplicate set members detected");
        }
        self.n += 1;
        Ok(())
    }
    fn finish(self) -> Option<Value> {
        self.set.map(|s| Value::Obj(Object::Set(Box::new(s))))
    }
}

struct ZSetBuilder {
    z: ZSet,
    lim: zset::Limits,
}

impl ZSetBuilder {
    fn new(hint: usize, lim: zset::Limits) -> ZSetBuilder {
        ZSetBuilder {
            z: ZSet::with_hint(hint, 0, lim),
            lim,
        }
    }
    fn add(&mut self, m: &[u8], score: f64) -> Result<(), Error> {
        if self.z.score(m).is_some() {
            return corrupt("Duplicate zset fields detected");
        }
        self.z.set(m, score, self.lim);
        Ok(())
    }
    fn finish(self) -> Option<Value> {
        if self.z.is_empty() {
            None
        } else {
            Some(Value::Obj(Object::ZSet(Box::new(self.z))))
        }
    }
}

struct HashBuilder {
    h: Hash,
    lim: HashLimits,
}

impl HashBuilder {
    fn new(lim: HashLimits) -> HashBuilder {
        HashBuilder {
            h: Hash::new(),
            lim,
        }
    }
    fn add(&mut self, f: &[u8], v: &[u8], at: Option<i64>) -> Result<(), Error> {
        if !self.h.set(f, v, self.lim) {
            return corrupt("Duplicate hash fields detected");
        }
        if let Some(at) = at {
            self.h.set_expire(f, at);
        }
        Ok(())
    }
    fn finish(self) -> Option<Value> {
        if self.h.is_empty() {
            None
        } else {
            Some(Value::Obj(Object::Hash(Box::new(self.h))))
        }
    }
}

/// Collects a listpack's or ziplist's items.
fn blob_items<'b>(blob: &'b [u8], ziplist: bool, deep: bool) -> Result<Vec<Cow<'b, [u8]>>, Error> {
    let mut items = Vec::new();
    let push = |e| {
        items.push(e);
        Ok(())
    };
    if ziplist {
        for_each_ziplist(blob, push)?;
    } else {
        for_each_listpack(blob, deep, push)?;
        if !deep && listpack_header_count(blob) == 0 {
            // Unsanitized, Redis takes a collection's size from this header: a
            // listpack that says it is empty is an empty value whatever follows.
            items.clear();
        }
    }
    Ok(items)
}

/// A listpack's header element count (bytes 4..6), 0xFFFF when unknown.
fn listpack_header_count(blob: &[u8]) -> u16 {
    match blob.get(4..6) {
        Some(c) => u16::from_le_bytes([c[0], c[1]]),
        None => 0xFFFF,
    }
}

/// Decodes the single-blob encodings (ziplist, listpack, intset, zipmap). Any
/// failure is reported as Redis reports it: the encoding's integrity check.
fn read_blob(t: u8, blob: &[u8], lim: &Limits, deep: bool) -> Result<Option<Value>, Error> {
    match t {
        TYPE_SET_INTSET => {
            let mut items = Vec::new();
            for_each_intset(blob, deep, |n| {
                items.push(n);
                Ok(())
            })?;
            let mut b = SetBuilder::new(items.len(), lim.set);
            let mut buf = Vec::with_capacity(20);
            for n in items {
                buf.clear();
                format_i64(n, &mut buf);
                b.add(&buf)
                    .map_err(as_corrupt("Intset integrity check failed."))?;
            }
            Ok(b.finish())
        }
        TYPE_SET_LISTPACK => {
            let bad = as_corrupt("Set listpack integrity check failed.");
            let items = blob_items(blob, false, deep).map_err(&bad)?;
            let mut b = SetBuilder::new(items.len(), lim.set);
            for it in &items {
                b.add(it).map_err(&bad)?;
            }
            Ok(b.finish())
        }
        TYPE_LIST_ZIPLIST => {
            let items = blob_items(blob, true, deep)
                .map_err(as_corrupt("List ziplist integrity check failed."))?;
            Ok(build_list(items.iter().map(|c| c.as_ref()), lim))
        }
        TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => {
            let bad = as_corrupt(if t == TYPE_ZSET_ZIPLIST {
                "Zset ziplist integrity check failed."
            } else {
                "Zset listpack integrity check failed."
            });
            let items = blob_items(blob, t == TYPE_ZSET_ZIPLIST, deep).map_err(&bad)?;
            if items.len() % 2 != 0 {
                return Err(bad(Error::Truncated));
            }
            let mut b = ZSetBuilder::new(items.len() / 2, lim.zset);
            for pair in items.chunks(2) {
                let s = parse_score(&pair[1]).map_err(&bad)?;
                if s.is_nan() {
                    return corrupt("Zset with NAN score detected");
                }
                b.add(&pair[0], s).map_err(&bad)?;
            }
            Ok(b.finish())
        }
        TYPE_HASH_ZIPLIST
        | TYPE_HASH_LISTPACK
        | TYPE_HASH_LISTPACK_EX
        | TYPE_HASH_LISTPACK_EX_PRE_GA => {
            let bad = as_corrupt(if t == TYPE_HASH_ZIPLIST {
                "Hash ziplist integrity check failed."
            } else {
                "Hash listpack integrity check failed."
            });
            let items = blob_items(blob, t == TYPE_HASH_ZIPLIST, deep).map_err(&bad)?;
            let step = if t == TYPE_HASH_LISTPACK_EX || t == TYPE_HASH_LISTPACK_EX_PRE_GA {
                3
            } else {
                2
            };
            if items.len() % step != 0 {
                return Err(bad(Error::Truncated));
            }
            let mut b = HashBuilder::new(lim.hash);
            // Fields with a TTL come first, in ascending TTL order, then the fields
            // without one (Redis's listpackex layout).
            let mut last_ttl: Option<i64> = None;
            for g in items.chunks(step) {
                let at = if step == 3 {
                    let at = match parse_i64(&g[2]) {
                        Some(x) if (0..1 << 48).contains(&x) => x,
                        _ => return Err(bad(Error::Truncated)),
                    };
                    if at != 0 && (last_ttl == Some(0) || last_ttl.is_some_and(|l| at < l)) {
                        return Err(bad(Error::Truncated));
                    }
                    last_ttl = Some(at);
                    (at != 0).then_some(at)
                } else {
                    None
                };
                b.add(&g[0], &g[1], at).map_err(&bad)?;
            }
            Ok(b.finish())
        }
        TYPE_HASH_ZIPMAP => {
            let mut b = HashBuilder::new(lim.hash);
            let mut dup: Option<usize> = None;
            for_each_zipmap(blob, |f, v| {
                if dup.is_none() && b.add(f, v, None).is_err() {
                    dup = Some(f.len());
                }
            })?;
            if let Some(flen) = dup {
                return corrupt(format!(
                    "Hash zipmap with dup elements, or big length ({flen})"
                ));
            }
            Ok(b.finish())
        }
        _ => corrupt(format!("Unknown RDB encoding type {t}")),
    }
}

// ----- whole files -------------------------------------------------------------------

/// What a file holds besides keys.
#[derive(Debug, Default)]
pub struct FileInfo {
    pub version: u16,
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// FUNCTION libraries' source code, in file order.
    pub functions: Vec<Vec<u8>>,
    /// The file's checksum is 0: it was saved with rdbchecksum off, and nothing was
    /// verified (the loader says so, as Redis does).
    pub checksum_disabled: bool,
    /// Keys whose value was an empty collection, skipped as Redis does (an old bug
    /// could save them): how many, and the first ten names for the log.
    pub empty_keys: u64,
    pub empty_key_names: Vec<Vec<u8>>,
}

/// A key read from a file, with the metadata that precedes it.
pub struct LoadedKey {
    pub db: usize,
    pub key: Vec<u8>,
    pub value: Value,
    pub expire_ms: Option<i64>,
    pub idle_secs: Option<u64>,
    pub freq: Option<u8>,
}

/// Decodes a whole RDB file, handing each key to `sink`. The checksum is verified
/// before any key is handed over, so a corrupted file yields no keys at all. Returns
/// the file's aux fields and the number of bytes consumed (an AOF's RDB preamble is
/// followed by more data).
pub fn read_file(
    buf: &[u8],
    lim: &Limits,
    sink: impl FnMut(LoadedKey),
) -> Result<(FileInfo, usize), Error> {
    read_file_checked(buf, lim, Check::default(), sink)
}

/// `read_file` with the checks chosen by the caller (`checksum` off: the footer is
/// not compared, as under Redis's DEBUG SET-SKIP-CHECKSUM-VALIDATION).
pub fn read_file_checked(
    buf: &[u8],
    lim: &Limits,
    check: Check,
    sink: impl FnMut(LoadedKey),
) -> Result<(FileInfo, usize), Error> {
    read_file_progress(buf, lim, check, &mut |_| {}, sink)
}

/// `read_file_checked`, calling `progress` with the bytes read so far after each
/// key is decoded (the loader sleeps `key-load-delay` and serves clients there).
pub fn read_file_progress(
    buf: &[u8],
    lim: &Limits,
    check: Check,
    progress: &mut dyn FnMut(usize),
    mut sink: impl FnMut(LoadedKey),
) -> Result<(FileInfo, usize), Error> {
    // First pass: structure, values and checksum; keys are kept until the end.
    let mut keys = Vec::new();
    let (info, used) = parse_file(buf, lim, check, progress, &mut keys)?;
    for k in keys {
        sink(k);
    }
    Ok((info, used))
}

fn parse_file(
    buf: &[u8],
    lim: &Limits,
    check: Check,
    progress: &mut dyn FnMut(usize),
    keys: &mut Vec<LoadedKey>,
) -> Result<(FileInfo, usize), Error> {
    let mut r = Reader::new(buf);
    r.deep = check.deep;
    let mut st = FileState::new(parse_header(&mut r)?);
    loop {
        match parse_record(&mut r, &mut st, lim, keys)? {
            Record::Meta => {}
            Record::Key => progress(r.pos),
            Record::End { checksum } => {
                let end = r.pos - 8 * (checksum.is_some() as usize);
                verify_checksum(&mut st.info, checksum, check, || crc64(&buf[..end]))?;
                return Ok((st.info, r.pos));
            }
        }
    }
}

/// The 9-byte signature `REDIS<version>`; the version.
fn parse_header(r: &mut Reader) -> Result<u16, Error> {
    let magic = r.take(9)?;
    if &magic[..5] != b"REDIS" {
        return corrupt("Wrong signature trying to load DB from file");
    }
    let version: u16 = std::str::from_utf8(&magic[5..])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::Corrupt("Wrong signature trying to load DB from file".into()))?;
    if !(1..=MAX_LOAD_VERSION).contains(&version) {
        return Err(Error::Version(version));
    }
    Ok(version)
}

/// What a file's records have set so far: the selected database and the metadata
/// waiting for the next key.
struct FileState {
    info: FileInfo,
    db: usize,
    expire: Option<i64>,
    idle: Option<u64>,
    freq: Option<u8>,
}

impl FileState {
    fn new(version: u16) -> FileState {
        FileState {
            info: FileInfo {
                version,
                ..Default::default()
            },
            db: 0,
            expire: None,
            idle: None,
            freq: None,
        }
    }
}

/// What one record was.
enum Record {
    /// Metadata (a database switch, an expiry, an aux field...).
    Meta,
    /// A key (in `keys`, unless its value was empty).
    Key,
    /// The end: the footer's checksum, for files of version 5 and later.
    End { checksum: Option<u64> },
}

/// Decodes the next record. `Error::Truncated` leaves the state untouched, so the
/// record can be decoded again once more bytes are there (incremental.rs).
fn parse_record(
    r: &mut Reader,
    st: &mut FileState,
    lim: &Limits,
    keys: &mut Vec<LoadedKey>,
) -> Result<Record, Error> {
    let t = r.u8()?;
    match t {
        OP_EXPIRETIME => st.expire = Some(r.u32_le()? as i32 as i64 * 1000),
        OP_EXPIRETIME_MS => st.expire = Some(r.i64_le()?),
        OP_FREQ => st.freq = Some(r.u8()?),
        OP_IDLE => st.idle = Some(r.read_len()?),
        OP_SELECTDB => {
            let d = r.read_len()?;
            if d >= 1 << 20 {
                return corrupt(format!("FATAL: Data file was created with a Redis server configured to handle more than {d} databases."));
            }
            st.db = d as usize;
        }
        OP_RESIZEDB => {
            r.read_len()?;
            r.read_len()?;
        }
        OP_SLOT_INFO => {
            r.read_len()?;
            r.read_len()?;
            r.read_len()?;
        }
        OP_AUX => {
            let k = r.string()?.into_owned();
            let v = r.string()?.into_owned();
            st.info.aux.push((k, v));
        }
        OP_FUNCTION2 => {
            let code = r.string()?.into_owned();
            st.info.functions.push(code);
        }
        OP_FUNCTION_PRE_GA => {
            return Err(Error::Unsupported(
                "pre-release FUNCTION data (Redis 7.0 release candidates)".into(),
            ))
        }
        OP_MODULE_AUX => {
            return Err(Error::Unsupported(
                "module auxiliary data needs a module this server does not have".into(),
            ))
        }
        OP_EOF => {
            let checksum = if st.info.version >= 5 {
                Some(r.i64_le()? as u64)
            } else {
                None
            };
            return Ok(Record::End { checksum });
        }
        _ => {
            let key = r.string()?.into_owned();
            match r.read_object(t, lim)? {
                Some(value) => keys.push(LoadedKey {
                    db: st.db,
                    key,
                    value,
                    expire_ms: st.expire,
                    idle_secs: st.idle,
                    freq: st.freq,
                }),
                None => {
                    st.info.empty_keys += 1;
                    if st.info.empty_key_names.len() < 10 {
                        st.info.empty_key_names.push(key);
                    }
                }
            }
            st.expire = None;
            st.idle = None;
            st.freq = None;
            return Ok(Record::Key);
        }
    }
    Ok(Record::Meta)
}

/// Checks the footer's checksum against `actual` (computed only when needed); a
/// zero checksum means the file was saved without one.
fn verify_checksum(
    info: &mut FileInfo,
    expected: Option<u64>,
    check: Check,
    actual: impl FnOnce() -> u64,
) -> Result<(), Error> {
    match expected {
        Some(0) => info.checksum_disabled = true,
        Some(expected) if check.checksum => {
            let actual = actual();
            if expected != actual {
                return Err(Error::Checksum { expected, actual });
            }
        }
        _ => {}
    }
    Ok(())
}

mod blobs;
pub mod incremental;
pub mod sliced;
mod stream;

use blobs::for_each_zipmap;
pub use blobs::{for_each_intset, for_each_listpack, for_each_ziplist};

#[cfg(test)]
mod tests;
