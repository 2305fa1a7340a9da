//! Fuzz target: a connection's byte stream: frame cutting and both header decoders. The checks live in ../oracles.rs.
#![no_main]

#[path = "../oracles.rs"]
mod oracles;

libfuzzer_sys::fuzz_target!(|data: &[u8]| oracles::check_frame_stream(data));
