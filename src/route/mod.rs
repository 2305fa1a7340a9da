//! The route registry: RocketMQ's route data types and their wire encodings (`model`, with
//! the REGISTER_BROKER body in `register_body`), the tables that hold them (`table`), and the
//! cache of encoded route bodies (`cache`).

mod cache;
pub mod model;
mod register_body;
pub mod table;
