//! The embedded API: the executor in-process, without sockets.
//!
//! ```
//! use cinnabar::embedded::Database;
//! use cinnabar::protocol::Reply;
//!
//! let mut db = Database::open(cinnabar::config::Config::default());
//! assert_eq!(db.execute(&["SET", "k", "v"]), Reply::ok());
//! assert_eq!(db.execute(&["GET", "k"]), Reply::Bulk(b"v".to_vec()));
//! ```

use crate::config::Config;
use crate::exec::Executor;
use crate::protocol::Reply;

/// A database opened in-process, with one client session.
pub struct Database {
    ex: Executor,
    client: usize,
}

impl Database {
    pub fn open(config: Config) -> Database {
        let mut ex = Executor::new(config);
        let client = ex.connect_internal("embedded");
        Database { ex, client }
    }

    /// Runs one command and returns its reply (bulk strings as `Reply::Bulk`).
    pub fn execute<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_ref()).collect();
        let reply = self.ex.execute(self.client, &args).with_heap_bulks();
        self.ex.cron();
        self.ex.expire_slice();
        self.ex.eviction_slice();
        self.ex.tracking_flush_bcast();
        reply
    }

    /// The executor, for callers that manage their own sessions.
    pub fn executor(&mut self) -> &mut Executor {
        &mut self.ex
    }
}
