//! The route registry: data types and encodings (`model`, `register_body`), the tables that
//! hold them (`table`) and the cache of encoded route bodies (`cache`).

mod cache;
pub mod model;
mod register_body;
pub mod table;
