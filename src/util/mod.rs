//! Small pure helpers shared across layers: Redis's number rules and glob matching.

pub mod glob;
pub mod numeric;

/// A hash map with foldhash instead of SipHash: the server's internal maps (command
/// table, statistics, wait queues, registries) sit on the per-command path, and their
/// keys are not attacker-chosen in bulk the way key-table keys are (those use the key
/// table's own seeded hash).
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// The set counterpart of [`FastMap`].
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
