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
pub mod resp_image;
pub mod snapshot;

use crate::exec::Executor;
use crate::keyspace::{Keyspace, Object, Value};

/// Why writes are refused because data cannot be persisted (Redis's
/// writeCommandsDeniedByDiskError).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskError {
    /// The last BGSAVE failed, `save` points are set and stop-writes-on-bgsave-error
    /// is on; a successful SAVE or BGSAVE clears it.
    Rdb,
    /// The AOF cannot be written (or fsynced): the errno; clears itself when a retry
    /// succeeds.
    Aof(i32),
}

pub fn disk_error(ex: &Executor) -> Option<DiskError> {
    if ex.config.stop_writes_on_bgsave_error
        && !ex.config.save_params.is_empty()
        && !ex.persist.last_bgsave_ok
    {
        return Some(DiskError::Rdb);
    }
    aof::write_error(ex).map(DiskError::Aof)
}

/// The MISCONF error text (without its leading `-`) for a refused command.
pub fn disk_error_message(e: DiskError) -> String {
    match e {
        DiskError::Rdb => "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.".into(),
        DiskError::Aof(errno) => format!("MISCONF Errors writing to the AOF file: {}", aof::errno_text(errno)),
    }
}

/// Registers a hash whose fields carry TTLs with the active field-expiry index, so a
/// loaded or restored hash expires its fields like one built by HEXPIRE.
pub fn register_field_ttls(ks: &mut Keyspace, db: usize, key: &[u8], value: &Value) {
    if let Value::Obj(Object::Hash(h)) = value {
        if let Some(at) = h.next_expire() {
            ks.field_expiry.register(db, at, key);
        }
    }
}

/// How a RESTORE payload from client `slot` is checked: `sanitize-dump-payload` as
/// Redis reads it (`clients`: deep except for the master link and users flagged
/// `skip-sanitize-payload`), and DEBUG SET-SKIP-CHECKSUM-VALIDATION. A deep check is
/// counted for INFO.
pub fn restore_check(ex: &mut Executor, slot: usize) -> rdb::Check {
    let deep = match ex.config.stored_str("sanitize-dump-payload").as_str() {
        "yes" => true,
        "clients" => {
            let c = ex.client(slot);
            let skip = ex.persist.loading
                || c.repl_role == Some('M')
                || ex
                    .acl
                    .user(&c.user)
                    .is_some_and(|u| u.sanitize == Some(false));
            !skip
        }
        _ => false,
    };
    if deep {
        ex.persist.dump_payload_sanitizations += 1;
    }
    rdb::Check {
        checksum: !ex.persist.skip_checksum,
        deep,
    }
}

/// How an RDB image being loaded (a file, an AOF preamble, a master's full sync)
/// is checked: deep only under `sanitize-dump-payload yes`, as Redis (loading is
/// never a client's doing).
pub fn load_check(ex: &Executor) -> rdb::Check {
    rdb::Check {
        checksum: !ex.persist.skip_checksum,
        deep: ex.config.stored_str("sanitize-dump-payload") == "yes",
    }
}
