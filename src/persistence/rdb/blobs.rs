//! The single-blob encodings Redis writes inside RDB values: listpack, ziplist,
//! intset and zipmap. Each walker checks the blob as Redis's `*ValidateIntegrity`
//! does before handing out an item, so a blob that ends early, points outside
//! itself, or contradicts its own header is an error, never a panic or a read out of
//! bounds.
//!
//! `deep` is Redis's deep sanitization. Shallow walks still check every length an
//! item is read from (the value is rebuilt from the items); what they skip is what
//! only Redis's in-place use of the blob needs: listpack back-lengths and entry
//! counts, intset order. Ziplists and zipmaps are always checked deeply, as Redis
//! does (it converts them on load).

use std::borrow::Cow;

use super::{corrupt, Error, Reader};
use crate::util::numeric::format_i64;

fn int_bytes(n: i64) -> Cow<'static, [u8]> {
    let mut v = Vec::with_capacity(20);
    format_i64(n, &mut v);
    Cow::Owned(v)
}

/// Walks an intset blob: encoding width (u32 LE: 2, 4 or 8), count (u32 LE), then
/// the little-endian integers, strictly ascending (checked when `deep`). An empty
/// intset is corrupt.
pub fn for_each_intset(
    b: &[u8],
    deep: bool,
    mut f: impl FnMut(i64) -> Result<(), Error>,
) -> Result<(), Error> {
    let bad = || corrupt("Intset integrity check failed.");
    let mut r = Reader::new(b);
    let width = r.u32_le()? as usize;
    let n = r.u32_le()? as usize;
    if !matches!(width, 2 | 4 | 8) || n == 0 || Some(r.remaining()) != n.checked_mul(width) {
        return bad();
    }
    let mut prev: Option<i64> = None;
    for _ in 0..n {
        let d = r.take(width)?;
        let v = match width {
            2 => i16::from_le_bytes([d[0], d[1]]) as i64,
            4 => i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as i64,
            _ => i64::from_le_bytes(d.try_into().unwrap_or([0; 8])),
        };
        if deep && prev.is_some_and(|p| p >= v) {
            return bad();
        }
        prev = Some(v);
        f(v)?;
    }
    Ok(())
}

/// Redis's lpEncodeBacklen size for an entry of `l` bytes (header + data).
fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Redis's lpDecodeBacklen: the back-length whose last byte is `b[last]`, read
/// backwards in 7-bit groups. `None` when it runs off the blob or past 5 bytes.
fn decode_backlen(b: &[u8], last: usize) -> Option<u64> {
    let mut val = 0u64;
    let mut shift = 0u32;
    let mut p = last;
    loop {
        let byte = *b.get(p)?;
        val |= ((byte & 127) as u64) << shift;
        if byte & 128 == 0 {
            return Some(val);
        }
        shift += 7;
        if shift > 28 || p == 0 {
            return None;
        }
        p -= 1;
    }
}

/// Walks a listpack blob (Redis's listpack.c format): total bytes (u32 LE), count
/// (u16 LE), entries each followed by its back-length, then 0xFF.
pub fn for_each_listpack<'b>(
    b: &'b [u8],
    deep: bool,
    mut f: impl FnMut(Cow<'b, [u8]>) -> Result<(), Error>,
) -> Result<(), Error> {
    let bad = || corrupt("Listpack integrity check failed.");
    let mut r = Reader::new(b);
    let total = r.u32_le()? as usize;
    let count = u16::from_le_bytes([r.u8()?, r.u8()?]) as usize;
    if total != b.len() || total < 7 || b[total - 1] != 0xFF {
        return bad();
    }
    let eof = total - 1;
    let mut seen = 0usize;
    while r.pos < eof {
        let start = r.pos;
        let e = r.u8()?;
        // Every header byte and every data byte must lie before the terminator.
        let item: Cow<'b, [u8]> = if e & 0x80 == 0 {
            int_bytes((e & 0x7F) as i64)
        } else if e & 0xC0 == 0x80 {
            Cow::Borrowed(r.take((e & 0x3F) as usize)?)
        } else if e & 0xE0 == 0xC0 {
            let v = (((e & 0x1F) as u16) << 8 | r.u8()? as u16) as i64;
            // 13-bit two's complement.
            int_bytes(if v >= 1 << 12 { v - (1 << 13) } else { v })
        } else if e & 0xF0 == 0xE0 {
            let n = ((e & 0x0F) as usize) << 8 | r.u8()? as usize;
            Cow::Borrowed(r.take(n)?)
        } else {
            match e {
                0xF0 => {
                    let n = r.u32_le()? as usize;
                    if n > eof {
                        return bad();
                    }
                    Cow::Borrowed(r.take(n)?)
                }
                0xF1 => int_bytes(i16::from_le_bytes([r.u8()?, r.u8()?]) as i64),
                0xF2 => {
                    let d = r.take(3)?;
                    let v = (d[0] as i32) | (d[1] as i32) << 8 | (d[2] as i32) << 16;
                    int_bytes(((v << 8) >> 8) as i64)
                }
                0xF3 => int_bytes(i32::from_le_bytes([r.u8()?, r.u8()?, r.u8()?, r.u8()?]) as i64),
                0xF4 => {
                    let d = r.take(8)?;
                    int_bytes(i64::from_le_bytes(d.try_into().unwrap_or([0; 8])))
                }
                _ => return bad(),
            }
        };
        let entry_len = r.pos - start;
        let back = backlen_size(entry_len);
        if r.pos + back > eof {
            return bad();
        }
        r.pos += back;
        if deep && decode_backlen(b, r.pos - 1) != Some(entry_len as u64) {
            return bad();
        }
        seen += 1;
        f(item)?;
    }
    if deep && count != 0xFFFF && count != seen {
        return bad();
    }
    Ok(())
}

/// Walks a ziplist blob: zlbytes (u32 LE), zltail (u32 LE), zllen (u16 LE), entries
/// (prevlen, encoding, data), then 0xFF. Each prevlen must be the previous entry's
/// size and zltail must point at the last entry, as ziplistValidateIntegrity checks.
pub fn for_each_ziplist<'b>(
    b: &'b [u8],
    mut f: impl FnMut(Cow<'b, [u8]>) -> Result<(), Error>,
) -> Result<(), Error> {
    let bad = || corrupt("Ziplist integrity check failed.");
    let mut r = Reader::new(b);
    let total = r.u32_le()? as usize;
    let tail = r.u32_le()? as usize;
    let count = u16::from_le_bytes([r.u8()?, r.u8()?]) as usize;
    if total != b.len() || total < 11 || b[total - 1] != 0xFF || tail > total - 1 {
        return bad();
    }
    let end = total - 1;
    let mut seen = 0usize;
    let mut prev_size = 0usize;
    let mut last_start = None;
    while r.pos < end {
        let start = r.pos;
        let p = r.u8()?;
        let prevlen = if p >= 0xFE {
            if p == 0xFF {
                return bad();
            }
            r.u32_le()? as usize
        } else {
            p as usize
        };
        if prevlen != prev_size {
            return bad();
        }
        let e = r.u8()?;
        let item: Cow<'b, [u8]> = match e >> 6 {
            0 => Cow::Borrowed(r.take((e & 0x3F) as usize)?),
            1 => {
                let n = ((e & 0x3F) as usize) << 8 | r.u8()? as usize;
                Cow::Borrowed(r.take(n)?)
            }
            2 => {
                let d = r.take(4)?;
                let n = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as usize;
                if n > end {
                    return bad();
                }
                Cow::Borrowed(r.take(n)?)
            }
            _ => match e {
                0xC0 => int_bytes(i16::from_le_bytes([r.u8()?, r.u8()?]) as i64),
                0xD0 => int_bytes(i32::from_le_bytes([r.u8()?, r.u8()?, r.u8()?, r.u8()?]) as i64),
                0xE0 => {
                    let d = r.take(8)?;
                    int_bytes(i64::from_le_bytes(d.try_into().unwrap_or([0; 8])))
                }
                0xF0 => {
                    let d = r.take(3)?;
                    let v = (d[0] as i32) | (d[1] as i32) << 8 | (d[2] as i32) << 16;
                    int_bytes(((v << 8) >> 8) as i64)
                }
                0xFE => int_bytes(r.u8()? as i8 as i64),
                0xF1..=0xFD => int_bytes((e & 0x0F) as i64 - 1),
                _ => return bad(),
            },
        };
        if r.pos > end {
            return bad();
        }
        prev_size = r.pos - start;
        last_start = Some(start);
        seen += 1;
        f(item)?;
    }
    if last_start.is_some_and(|s| s != tail) {
        return bad();
    }
    if count != 0xFFFF && count != seen {
        return bad();
    }
    Ok(())
}

/// Walks a zipmap blob (Redis 2.4 hashes): count byte, then (len, field, len, free,
/// value, free bytes) entries, then 0xFF. Lengths of 254 and above take 4 more bytes.
/// An empty zipmap, or one whose count byte (below 254) disagrees, is corrupt.
pub fn for_each_zipmap<'b>(b: &'b [u8], mut f: impl FnMut(&[u8], &[u8])) -> Result<(), Error> {
    let bad = || corrupt("Zipmap integrity check failed.");
    if b.len() < 2 || b[b.len() - 1] != 0xFF {
        return bad();
    }
    // Nothing may be read from the final terminator on.
    let mut r = Reader::new(&b[..b.len() - 1]);
    let header = r.u8()?;
    fn zlen(r: &mut Reader<'_>) -> Result<usize, Error> {
        match r.u8()? {
            n if n < 0xFE => Ok(n as usize),
            _ => Ok(r.u32_le()? as usize),
        }
    }
    let mut count = 0usize;
    loop {
        match b.get(r.pos) {
            Some(0xFF) | None => break,
            _ => {}
        }
        let entry = |r: &mut Reader<'b>| -> Result<(&'b [u8], &'b [u8]), Error> {
            let fl = zlen(r)?;
            let field = r.take(fl)?;
            let vl = zlen(r)?;
            let free = r.u8()? as usize;
            let value = r.take(vl)?;
            r.take(free)?;
            Ok((field, value))
        };
        let Ok((field, value)) = entry(&mut r) else {
            return bad();
        };
        count += 1;
        f(field, value);
    }
    if count == 0 || (header < 0xFE && header as usize != count) {
        return bad();
    }
    Ok(())
}
