//! Fuzz target: REGISTER_BROKER body decoding: JSON, old-version and zlib layouts. The checks live in ../oracles.rs.
#![no_main]

#[path = "../oracles.rs"]
mod oracles;

libfuzzer_sys::fuzz_target!(|data: &[u8]| oracles::check_register_body(data));
