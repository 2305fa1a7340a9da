//! Fuzz target: the ROCKETMQ binary header decoder (type byte 1). The checks live in ../oracles.rs.
#![no_main]

#[path = "../oracles.rs"]
mod oracles;

libfuzzer_sys::fuzz_target!(|data: &[u8]| oracles::check_binary_header(data));
