//! Fuzz target: java.util.Properties parsing and the config it feeds. The checks live in ../oracles.rs.
#![no_main]

#[path = "../oracles.rs"]
mod oracles;

libfuzzer_sys::fuzz_target!(|data: &[u8]| oracles::check_properties(data));
