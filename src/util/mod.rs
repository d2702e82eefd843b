//! Small pure helpers shared across layers: Redis's number rules and glob matching.

pub mod glob;
pub mod numeric;
