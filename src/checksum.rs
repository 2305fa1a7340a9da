//! Checksums over request bodies.
//!
//! * [`crc32`]: `java.util.zip.CRC32` (the `crc32fast` crate); brokers send it, masked to 31
//!   bits, as a registration's `bodyCrc32` header. The callers apply the mask.
//! * [`fingerprint`]: not part of the protocol, a 64-bit hash keyed once per process that
//!   recognises a body identical to the broker's previous one, which then skips the CRC check
//!   and the parse. A collision (2^-64 per registration) only lets a broker keep its previous
//!   topics; no other peer's state is compared with it.
//!
//! The fingerprint is foldhash's (quality variant), not std's SipHash: over a 21 KB body
//! SipHash costs ~53,000 instructions, foldhash ~9,000 (re-measure:
//! `cargo bench --bench register_body_parse -- fingerprint`).

use foldhash::quality::RandomState;
use std::hash::BuildHasher;
use std::sync::OnceLock;

pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// Drawn once (foldhash seeds it from std's random source).
fn process_key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::default)
}

/// Equal inputs give equal fingerprints within one process; nothing is promised across them.
pub fn fingerprint(data: &[u8]) -> u64 {
    process_key().hash_one(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_known_vectors() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }

    /// Equal inputs agree; inputs differing in one bit anywhere, in the length only, or in
    /// trailing zeros all differ. The key is random per run: a false failure has the odds of
    /// a 64-bit collision.
    #[test]
    fn fingerprints_tell_near_bodies_apart() {
        // No zero byte: no prefix of it equals a run of zeros.
        let data: Vec<u8> = (0..3_000u32).map(|i| (i * 7 + i / 13) as u8 | 1).collect();
        assert_eq!(fingerprint(&data), fingerprint(&data.clone()));
        let mut seen = std::collections::HashSet::new();
        let zeros = [0u8; 200];
        for n in 0..=200 {
            assert!(seen.insert(fingerprint(&zeros[..n])), "{n} zeros");
        }
        for len in [1, 15, 16, 17, 63, 64, 65, 127, 128, 1000, 3_000] {
            assert!(seen.insert(fingerprint(&data[..len])), "len {len}");
            let mut places = vec![0, len / 2, len - 1];
            places.dedup();
            for at in places {
                for bit in [1, 7] {
                    let mut flipped = data[..len].to_vec();
                    flipped[at] ^= 1 << bit;
                    assert!(seen.insert(fingerprint(&flipped)), "len {len} at {at}");
                }
            }
        }
    }
}
