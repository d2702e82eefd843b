//! Persistence: Redis's RDB format (`rdb.rs`, pure encoding/decoding), snapshots to
//! disk and their loading at startup (`snapshot.rs`), and the append-only file in
//! Redis 7's multi-part layout (`aof.rs`), fed by the executor's write stream
//! (`exec/propagate.rs`).
//!
//! The format code knows nothing of the executor; the snapshot code walks the
//! keyspace and writes files off the executor thread.

pub mod aof;
pub mod cow;
pub mod rdb;
pub mod snapshot;

use crate::keyspace::{Keyspace, Object, Value};

/// Registers a hash whose fields carry TTLs with the active field-expiry index, so a
/// loaded or restored hash expires its fields like one built by HEXPIRE.
pub fn register_field_ttls(ks: &mut Keyspace, db: usize, key: &[u8], value: &Value) {
    if let Value::Obj(Object::Hash(h)) = value {
        if let Some(at) = h.next_expire() {
            ks.field_expiry.register(db, at, key);
        }
    }
}
