//! Checksums over request bodies: CRC-32 and a 64-bit fingerprint.
//!
//! * [`crc32`] is the IEEE CRC-32 of `java.util.zip.CRC32` (the `crc32fast` crate); brokers
//!   send it, masked to 31 bits (`UtilAll.crc32`), as the `bodyCrc32` header of a
//!   registration, and the name server checks it against the body. The callers apply the mask.
//! * [`fingerprint`] is not part of the protocol: a 64-bit hash, keyed once per process, that
//!   recognises a registration body identical to the broker's previous one, which then skips
//!   both the CRC check and the parse. It is never stored or sent. What a collision could do:
//!   a registration whose body differs from the one its broker sent last, with the same
//!   length and `bodyCrc32`, is taken as unchanged and that broker keeps its previous topics:
//!   a broker fooling itself (it could resend its previous body as well); no other peer's
//!   state is compared with it. By chance that is 2^-64 per registration.
//!
//! The fingerprint is foldhash's (quality variant), not std's SipHash-1-3: it runs on every
//! registration, the steady 30 s ones included, and SipHash over a 21 KB body costs about
//! 53,000 instructions, foldhash about 9,000 (re-measure: `benches/scripts/cgdelta.sh` with
//! `register`, or `cargo bench --bench register_body_parse -- fingerprint`).

use foldhash::quality::RandomState;
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// CRC-32 (IEEE, as java.util.zip.CRC32) of `data`; callers mask with 0x7FFFFFFF as Java's
/// UtilAll.crc32 does.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// The process's fingerprint key, drawn once (foldhash seeds it from std's random source).
fn process_key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::default)
}

/// Keyed 64-bit fingerprint of a body (see the module comment), used to recognise an
/// unchanged registration body without re-parsing or re-checking its CRC. Equal inputs give
/// equal fingerprints within one process; nothing else is promised across processes.
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
