//! What each fuzz target runs: one function per input format, each feeding the bytes
//! to the library's own entry point for that format and checking what holds for any
//! input (no panic, and the invariants noted per function).
//!
//! The main crate's `tests/fuzz_corpus.rs` includes this file as a module and replays
//! the committed corpora through these same functions, so it uses only `cinnabar` and
//! `std`.

use std::cell::RefCell;

use cinnabar::cluster::wire;
use cinnabar::keyspace::{Value, ValueRef};
use cinnabar::persistence::{aof, rdb};
use cinnabar::protocol::{Limits, Request, RequestParser};

/// The first input byte, if any, as option bits; the rest is the data.
fn split_flags(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(f, rest)| (*f, rest))
}

// ----- RESP requests -----------------------------------------------------------------

/// What a client connection makes of its bytes.
#[derive(Debug, PartialEq)]
enum Outcome {
    Command(Vec<Vec<u8>>),
    Empty,
    Error(String),
}

/// Runs the connection's parse loop over `buf` as it arrives in pieces of the given
/// sizes (cycled; one piece of everything when empty): each new piece is appended to
/// the read buffer and every complete request in it is taken, as the net loop does.
fn parse_stream(buf: &[u8], pieces: &[usize], limits: &Limits) -> Vec<Outcome> {
    let mut parser = RequestParser::new();
    let mut out = Vec::new();
    let mut rbuf: Vec<u8> = Vec::new();
    let mut start = 0;
    let mut fed = 0;
    let mut piece = 0;
    while fed < buf.len() {
        let n = if pieces.is_empty() {
            buf.len()
        } else {
            let n = pieces[piece % pieces.len()].max(1);
            piece += 1;
            n
        };
        let end = (fed + n).min(buf.len());
        rbuf.extend_from_slice(&buf[fed..end]);
        fed = end;
        loop {
            let pending = &rbuf[start..];
            match parser.parse(pending, limits) {
                Ok(None) => break,
                Ok(Some(Request::Empty { consumed })) => {
                    assert!(consumed > 0 && consumed <= pending.len());
                    out.push(Outcome::Empty);
                    start += consumed;
                }
                Ok(Some(Request::Multibulk { consumed })) => {
                    assert!(consumed > 0 && consumed <= pending.len());
                    let args = parser
                        .ranges()
                        .iter()
                        .map(|&(s, e)| {
                            assert!(s <= e && e <= consumed, "argument outside the request");
                            pending[s..e].to_vec()
                        })
                        .collect();
                    out.push(Outcome::Command(args));
                    parser.release_args();
                    start += consumed;
                }
                Ok(Some(Request::Inline { consumed, args })) => {
                    assert!(consumed > 0 && consumed <= pending.len());
                    out.push(Outcome::Command(args));
                    start += consumed;
                }
                Err(e) => {
                    out.push(Outcome::Error(e.0));
                    return out;
                }
            }
            if start == rbuf.len() {
                break;
            }
        }
    }
    out
}

/// The RESP request parser (multibulk and inline). Flag bits: 0 unauthenticated,
/// 1 a small `proto-max-bulk-len`, 2-7 the size of the pieces the bytes arrive in.
/// Whatever the pieces, the requests found must be those found in one read.
pub fn resp_request(data: &[u8]) {
    let Some((flags, buf)) = split_flags(data) else {
        return;
    };
    let limits = Limits {
        max_bulk_len: if flags & 2 != 0 {
            64
        } else {
            512 * 1024 * 1024
        },
        authenticated: flags & 1 == 0,
    };
    let whole = parse_stream(buf, &[], &limits);
    // At most a few hundred pieces: the parser rescans a line still without its end
    // on each read, so byte-sized reads of a long line cost its square.
    let size = ((flags >> 2) as usize).max(buf.len() / 256);
    let pieces: Vec<usize> = if size == 0 {
        vec![1]
    } else {
        vec![size, 1, size * 3]
    };
    let split = parse_stream(buf, &pieces, &limits);
    assert_eq!(whole, split, "requests depend on how the bytes arrived");
}

// ----- RDB files and DUMP payloads -------------------------------------------------

fn value_ref(v: &Value) -> ValueRef<'_> {
    match v {
        Value::Int(n) => ValueRef::Int(*n),
        Value::Str(s) => ValueRef::Emb(s),
        Value::RawStr(s) => ValueRef::Raw(s),
        Value::Obj(o) => ValueRef::Obj(o.as_ref()),
    }
}

/// Encoding thresholds: the defaults, or tiny ones so that values loaded compact are
/// converted to their large encodings.
fn limits(small: bool) -> rdb::Limits {
    let mut lim = rdb::Limits::default();
    if small {
        lim.hash.listpack_entries = 2;
        lim.hash.listpack_value = 4;
        lim.set.intset_entries = 2;
        lim.set.listpack_entries = 2;
        lim.set.listpack_value = 4;
        lim.zset.max_entries = 2;
        lim.zset.max_value = 4;
        lim.list.fill = 2;
        lim.list.depth = 1;
    }
    lim
}

/// A value accepted under deep sanitization is one we can save: its DUMP payload
/// restores, as the same type.
fn check_round_trip(v: &Value, lim: &rdb::Limits) {
    let r = value_ref(v);
    let payload = rdb::dump_payload(r);
    let back = rdb::restore_payload(&payload, lim)
        .unwrap_or_else(|e| panic!("a loaded {} does not restore: {e}", r.type_name()));
    let back = back.expect("a loaded value restores empty");
    assert_eq!(value_ref(&back).type_name(), r.type_name());
}

/// A whole RDB file. Flag bits: 0 verify the checksum, 1 deep sanitization, 2 tiny
/// encoding thresholds.
pub fn rdb_file(data: &[u8]) {
    let Some((flags, buf)) = split_flags(data) else {
        return;
    };
    let check = rdb::Check {
        checksum: flags & 1 != 0,
        deep: flags & 2 != 0,
    };
    let lim = limits(flags & 4 != 0);
    let mut keys = Vec::new();
    if let Ok((_, used)) = rdb::read_file_checked(buf, &lim, check, |k| keys.push(k)) {
        assert!(used <= buf.len());
        if check.deep {
            for k in &keys {
                check_round_trip(&k.value, &lim);
            }
        }
    }
}

/// A RESTORE payload as a client sends it, checksum verified. Flag bits: 0 the
/// footer's CRC is rewritten to match (so the value decoder runs), 1 deep
/// sanitization, 2 tiny encoding thresholds.
pub fn restore_dump(data: &[u8]) {
    let Some((flags, buf)) = split_flags(data) else {
        return;
    };
    let mut payload = buf.to_vec();
    if flags & 1 != 0 && payload.len() >= 10 {
        let n = payload.len() - 8;
        let crc = rdb::crc64(&payload[..n]);
        payload[n..].copy_from_slice(&crc.to_le_bytes());
    }
    let check = rdb::Check {
        checksum: true,
        deep: flags & 2 != 0,
    };
    let lim = limits(flags & 4 != 0);
    if let Ok(Some(v)) = rdb::restore_payload_checked(&payload, &lim, check) {
        if check.deep {
            check_round_trip(&v, &lim);
        }
    }
}

/// The value decoder behind RESTORE with the checksum skipped (DEBUG
/// SET-SKIP-CHECKSUM-VALIDATION). Flag bits: 1 deep sanitization, 2 tiny encoding
/// thresholds.
pub fn restore_value(data: &[u8]) {
    let Some((flags, buf)) = split_flags(data) else {
        return;
    };
    let check = rdb::Check {
        checksum: false,
        deep: flags & 2 != 0,
    };
    let lim = limits(flags & 4 != 0);
    if let Ok(Some(v)) = rdb::restore_payload_checked(buf, &lim, check) {
        if check.deep {
            check_round_trip(&v, &lim);
        }
    }
}

// ----- AOF files ---------------------------------------------------------------------

/// Commands an AOF replay here refuses, as the loader refuses an unknown one: those
/// that reach the process, the disk, the network or the configuration, or run scripts
/// (which may loop), so that one input cannot change what the next one sees.
const AOF_REFUSED: &[&str] = &[
    "acl",
    "bgrewriteaof",
    "bgsave",
    "client",
    "cluster",
    "config",
    "debug",
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "failover",
    "fcall",
    "fcall_ro",
    "function",
    "migrate",
    "module",
    "monitor",
    "psync",
    "replicaof",
    "save",
    "script",
    "shutdown",
    "slaveof",
    "sync",
];

thread_local! {
    static AOF_DB: RefCell<Option<cinnabar::embedded::Database>> = const { RefCell::new(None) };
}

fn quiet_config() -> cinnabar::config::Config {
    let _ = cinnabar::log::configure("nothing", "");
    // One input's writes stay small: a command past this gets an OOM error.
    cinnabar::config::Config {
        maxmemory: 64 << 20,
        maxmemory_policy: "noeviction".into(),
        ..Default::default()
    }
}

/// One AOF file: an RDB preamble (when it starts with `REDIS`) then RESP commands,
/// replayed through the executor as at startup, into an emptied keyspace.
pub fn aof_file(data: &[u8]) {
    AOF_DB.with(|cell| {
        let mut cell = cell.borrow_mut();
        let db = cell.get_or_insert_with(|| cinnabar::embedded::Database::open(quiet_config()));
        let ex = db.executor();
        ex.ks.flush_all(false);
        let slot = ex.connect_internal("aof-loader");
        ex.persist.loading = true;
        let enabled = std::mem::replace(&mut ex.stream.enabled, false);
        let expire_mode =
            std::mem::replace(&mut ex.ks.expire_mode, cinnabar::keyspace::ExpireMode::Keep);
        let r = aof::load_file_bytes(ex, data, "fuzz.aof", |ex, args| {
            let name = String::from_utf8_lossy(args[0]).to_ascii_lowercase();
            if AOF_REFUSED.contains(&name.as_str()) {
                return Err(format!("refused command '{name}'"));
            }
            aof::apply_command(ex, slot, args, "fuzz.aof")
        });
        if let Ok(Some(at)) = r {
            assert!(at <= data.len());
        }
        ex.ks.expire_mode = expire_mode;
        ex.stream.enabled = enabled;
        ex.persist.loading = false;
        ex.disconnect(slot);
        ex.ks.flush_all(false);
    });
}

/// An AOF manifest: parsed; one that parses (and names a file) renders to text that
/// parses the same, but for the names Redis cannot write back either.
pub fn aof_manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(m) = aof::Manifest::parse(text) {
        let rendered = m.render();
        // Nothing to write back (only comments and history entries), a name whose
        // quoting makes a line longer than a manifest line may be, or one with a
        // single quote (written bare, it reads as an open quote): Redis renders and
        // rejects those the same way.
        let unreadable = |p: &aof::Part| p.name.contains('\'');
        if rendered.is_empty()
            || rendered.lines().any(|l| l.len() >= 1023)
            || m.base.iter().chain(&m.incrs).any(unreadable)
        {
            return;
        }
        let again = aof::Manifest::parse(&rendered)
            .unwrap_or_else(|e| panic!("a rendered manifest does not parse: {e}"));
        assert_eq!(again.render(), rendered);
    }
}

// ----- Lua libraries -----------------------------------------------------------------

/// Called with the library selector, the data and a format string; errors raised by
/// the libraries are caught (they are the scripts' errors, not ours).
const LUA_DRIVER: &str = r#"
local which, data, fmt = ...
if which == 0 then
  local ok, v = pcall(cjson.decode, data)
  if ok then
    local ok2, text = pcall(cjson.encode, v)
    if ok2 then pcall(cjson.decode, text) end
  end
elseif which == 1 then
  local r = {pcall(cmsgpack.unpack, data)}
  if r[1] then
    local ok2, packed = pcall(cmsgpack.pack, unpack(r, 2, math.min(#r, 50)))
    if ok2 then pcall(cmsgpack.unpack, packed) end
  end
  pcall(cmsgpack.unpack_one, data)
  pcall(cmsgpack.unpack_limit, data, #fmt)
elseif which == 2 then
  pcall(struct.size, fmt)
  local r = {pcall(struct.unpack, fmt, data)}
  if r[1] then pcall(struct.pack, fmt, unpack(r, 2, math.min(#r, 50))) end
  local vals = {}
  for w in string.gmatch(data, "[^,]+") do
    vals[#vals + 1] = tonumber(w) or w
    if #vals >= 20 then break end
  end
  pcall(struct.pack, fmt, unpack(vals))
else
  local nums = {}
  for i = 1, math.min(#data, 64), 8 do
    local n = 0
    for j = i, math.min(i + 7, #data) do n = n * 256 + string.byte(data, j) end
    nums[#nums + 1] = n - 2^63
  end
  local a, b = nums[1] or 0, nums[2] or 0
  for _, f in ipairs({bit.tobit, bit.bnot, bit.bswap}) do pcall(f, a) end
  for _, f in ipairs({bit.band, bit.bor, bit.bxor, bit.lshift, bit.rshift, bit.arshift, bit.rol, bit.ror}) do
    pcall(f, a, b)
  end
  pcall(bit.tohex, a, b)
  pcall(bit.band, unpack(nums))
  pcall(bit.tohex, data)
end
"#;

struct LuaDriver {
    vm: cinnabar::scripting::vm::Vm,
    driver: mlua::Function,
}

thread_local! {
    static LUA: RefCell<Option<LuaDriver>> = const { RefCell::new(None) };
}

/// The Lua libraries as scripts reach them, in the scripting engine's VM. The first
/// byte picks cjson, cmsgpack, struct or bit (low two bits); for struct, the data up
/// to the first NUL is the format and the rest the data.
pub fn lua_libs(data: &[u8]) {
    let Some((flags, rest)) = split_flags(data) else {
        return;
    };
    let which = flags & 3;
    let (fmt, payload): (&[u8], &[u8]) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, rest),
    };
    LUA.with(|cell| {
        let mut cell = cell.borrow_mut();
        let d = cell.get_or_insert_with(|| {
            let vm = cinnabar::scripting::vm::Vm::new().expect("scripting VM");
            let driver = vm
                .compile(LUA_DRIVER.as_bytes(), "@driver")
                .expect("driver compiles");
            LuaDriver { vm, driver }
        });
        let lua = &d.vm.lua;
        let (Ok(fmt), Ok(payload)) = (lua.create_string(fmt), lua.create_string(payload)) else {
            return;
        };
        // Errors the libraries raise are caught in the driver; what reaches here is
        // the VM's own limits (memory), which are not ours to judge.
        let _ = d.driver.call::<()>((which as i64, payload, fmt));
    });
}

// ----- cluster bus -------------------------------------------------------------------

/// Bytes from a cluster bus link: split into messages as the bus does, each decoded
/// with a receiver's checks. The flag byte's low bit caps the message size small.
pub fn cluster_message(data: &[u8]) {
    let Some((flags, buf)) = split_flags(data) else {
        return;
    };
    let max = if flags & 1 != 0 {
        wire::HEADER_LEN + 4096
    } else {
        1 << 30
    };
    let Some((ranges, used)) = wire::split_messages(buf, max) else {
        return;
    };
    assert!(used <= buf.len());
    for r in ranges {
        let msg = &buf[r];
        if let Ok(d) = wire::decode(msg) {
            assert_eq!(d.header.totlen as usize, msg.len());
        }
    }
    // The bytes as one message after a valid signature and length (a fuzzer seldom
    // finds the signature and the length that frame a message by itself).
    let mut alone = Vec::with_capacity(buf.len() + 8);
    alone.extend_from_slice(b"RCmb");
    alone.extend_from_slice(&((buf.len() + 8) as u32).to_be_bytes());
    alone.extend_from_slice(buf);
    if let Ok(d) = wire::decode(&alone) {
        assert_eq!(d.header.totlen as usize, alone.len());
    }
}
