//! The route registry: RocketMQ's route data types and their wire encodings (`model`) and
//! the tables that hold them, with the per-topic cache of encoded routes (`table`).

pub mod model;
pub mod table;
