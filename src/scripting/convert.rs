//! Redis's conversion rules between command replies and Lua values, both ways.
//!
//! Reply → Lua (what `redis.call` returns), by the script's `redis.setresp` version:
//! integer → number, bulk → string, null → `false` (RESP2) or `nil` (RESP3), array →
//! table, status → `{ok=...}`, error → `{err=...}`; with RESP3 maps → `{map={...}}`,
//! sets → `{set={k=true}}`, doubles → `{double=n}`, booleans → booleans, verbatim →
//! `{verbatim_string={format=, string=}}` (in RESP2 those arrive flattened).
//!
//! Lua → reply (what a script returns): number → integer (truncated, C's cast), string →
//! bulk, `true` → 1 / `false` → null (RESP2 script) or booleans (RESP3 script), tables →
//! error / status / double / big number / map / set / verbatim by their single field,
//! otherwise an array truncated at the first nil.
//!
//! `raw.rs` applies these rules directly on the Lua stack (both directions); this
//! module keeps the rules' description and the C number cast they rely on.

/// C's `(long long)` cast of a double as x86 does it: out of range and NaN give the
/// "integer indefinite" value, `i64::MIN`.
pub fn lua_number_to_i64(n: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if !(-LIMIT..LIMIT).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}
