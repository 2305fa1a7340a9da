//! (being written)
pub mod json;
