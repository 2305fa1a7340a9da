//! Fuzz target: route, cluster info, data version, topic list and KV table bodies. The checks live in ../oracles.rs.
#![no_main]

#[path = "../oracles.rs"]
mod oracles;

libfuzzer_sys::fuzz_target!(|data: &[u8]| oracles::check_models(data));
