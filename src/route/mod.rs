//! The route registry: RocketMQ's route data types and their wire encodings (`model`), the
//! tables that hold them (`table`), and the cache of encoded route bodies (`cache`).

mod cache;
pub mod model;
pub mod table;
