//! The route registry: RocketMQ's route data types and their wire encodings (`model`).
//! The tables and the per-topic cache of encoded routes join here later.

pub mod model;
