//! Checksums over request bodies: CRC-32 and a 64-bit fingerprint.
//!
//! * [`crc32`] is the IEEE CRC-32 of `java.util.zip.CRC32`; brokers send it, masked to 31 bits
//!   (`UtilAll.crc32`), as the `bodyCrc32` header of a registration, and the name server checks
//!   it against the body. The callers apply the mask.
//! * [`fingerprint`] is not part of the protocol: a 64-bit hash, keyed per process, that
//!   recognises a registration body identical to the broker's previous one, which then skips
//!   both the CRC check and the parse. Where the CPU has AES-NI it is two AES rounds per
//!   16 bytes in four lanes (about a quarter of XXH64's instructions on a 21 KB body), else
//!   XXH64 seeded with the process key. It is never stored or sent, so the two never meet.
//!   What a collision could do: a registration whose body differs from the one its broker sent
//!   last, with the same length and `bodyCrc32`, is taken as unchanged and that broker keeps
//!   its previous topics: a broker fooling itself (it could resend its previous body as well);
//!   no other peer's state is compared with it. By chance that is 2^-64 per registration.
//!
//! Both are implemented here rather than taken from a crate: the design card allows no runtime
//! dependency for them, and each is a page of well-known arithmetic.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// Slice-by-16 tables for the reflected IEEE polynomial, built at compile time.
const CRC_TABLES: [[u32; 256]; 16] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 16] {
    let mut tables = [[0u32; 256]; 16];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            bit += 1;
        }
        tables[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut t = 1;
        while t < 16 {
            let prev = tables[t - 1][i];
            tables[t][i] = (prev >> 8) ^ tables[0][(prev & 0xFF) as usize];
            t += 1;
        }
        i += 1;
    }
    tables
}

/// CRC-32 (IEEE, as java.util.zip.CRC32) of `data`; callers mask with 0x7FFFFFFF as Java's
/// UtilAll.crc32 does.
pub fn crc32(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if data.len() >= clmul::MIN_LEN && clmul::available() {
        return !clmul::crc32_update(!0, data);
    }
    !crc32_update_tables(!0, data)
}

/// Advances the CRC register (pre- and post-inversion left to the caller) over `data`,
/// sixteen bytes per step.
fn crc32_update_tables(register: u32, data: &[u8]) -> u32 {
    let t = &CRC_TABLES;
    let mut crc = register;
    let mut blocks = data.chunks_exact(16);
    for b in &mut blocks {
        let Ok(block) = <&[u8; 16]>::try_from(b) else {
            continue; // chunks_exact always yields 16 bytes
        };
        let w = u32::from_le_bytes([block[0], block[1], block[2], block[3]]) ^ crc;
        crc = t[15][(w & 0xFF) as usize]
            ^ t[14][((w >> 8) & 0xFF) as usize]
            ^ t[13][((w >> 16) & 0xFF) as usize]
            ^ t[12][(w >> 24) as usize]
            ^ t[11][block[4] as usize]
            ^ t[10][block[5] as usize]
            ^ t[9][block[6] as usize]
            ^ t[8][block[7] as usize]
            ^ t[7][block[8] as usize]
            ^ t[6][block[9] as usize]
            ^ t[5][block[10] as usize]
            ^ t[4][block[11] as usize]
            ^ t[3][block[12] as usize]
            ^ t[2][block[13] as usize]
            ^ t[1][block[14] as usize]
            ^ t[0][block[15] as usize];
    }
    for &byte in blocks.remainder() {
        crc = (crc >> 8) ^ t[0][((crc ^ u32::from(byte)) & 0xFF) as usize];
    }
    crc
}

/// CRC-32 by carry-less multiplication (PCLMULQDQ), for bodies of a few hundred bytes and
/// more: the register is folded forward 64 bytes per step in four independent 128-bit lanes
/// (the method of Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"),
/// then the lanes into one, and the last 16 bytes of folded state plus the tail go through
/// the tables (cheaper than a Barrett reduction to write and check, and only ~30 bytes).
/// Where the CPU has AVX the same code is compiled to its three-operand forms, which need no
/// register copies and take the input straight from memory: 19 instructions per 64 bytes
/// instead of 35 (0.3 a byte; the tables take about 2.4).
#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::{
        __m128i, _mm_clmulepi64_si128, _mm_cvtsi32_si128, _mm_loadu_si128, _mm_set_epi64x,
        _mm_storeu_si128, _mm_xor_si128,
    };

    /// Below this, setting up the lanes costs more than it saves.
    pub const MIN_LEN: usize = 256;

    /// The multiplier that moves a 64-bit half of a lane `distance` bits on: x^(distance ± 32)
    /// mod P, bit-reflected (as the register is) and shifted one bit left (a reflected
    /// carry-less product comes out one bit short).
    const fn fold_key(exponent: u32) -> i64 {
        let mut r: u64 = 1;
        let mut i = 0;
        while i < exponent {
            r <<= 1;
            if r & (1 << 32) != 0 {
                r ^= 0x1_04C1_1DB7; // P, the IEEE polynomial, most significant bit first
            }
            i += 1;
        }
        ((r as u32).reverse_bits() as i64) << 1
    }

    /// Fold one lane 64 bytes (512 bits) on.
    const K1: i64 = fold_key(512 + 32);
    const K2: i64 = fold_key(512 - 32);
    /// Fold 16 bytes (128 bits) on.
    const K3: i64 = fold_key(128 + 32);
    const K4: i64 = fold_key(128 - 32);

    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("pclmulqdq")
            && std::arch::is_x86_feature_detected!("sse2")
    }

    /// Advances the register over `data` (at least [`MIN_LEN`] bytes).
    pub fn crc32_update(register: u32, data: &[u8]) -> u32 {
        // SAFETY: callers check `available()` first, and AVX is checked here; every load
        // reads 16 bytes inside `data` (the chunks are exact).
        unsafe {
            if std::arch::is_x86_feature_detected!("avx") {
                update_avx(register, data)
            } else {
                update_sse(register, data)
            }
        }
    }

    #[target_feature(enable = "pclmulqdq", enable = "sse2", enable = "avx")]
    pub(super) unsafe fn update_avx(register: u32, data: &[u8]) -> u32 {
        update(register, data)
    }

    #[target_feature(enable = "pclmulqdq", enable = "sse2")]
    pub(super) unsafe fn update_sse(register: u32, data: &[u8]) -> u32 {
        update(register, data)
    }

    /// The folding itself, compiled into each of the two callers above with their features
    /// (hence always inlined; called elsewhere, its intrinsics would not be).
    #[inline(always)]
    unsafe fn update(register: u32, data: &[u8]) -> u32 {
        // Every load reads 16 bytes of a 64-byte group or of a 16-byte block.
        let load = |block: &[u8]| _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        let mut groups = data.chunks_exact(64);
        let Some(first) = groups.next() else {
            return super::crc32_update_tables(register, data);
        };
        let mut lanes = [
            _mm_xor_si128(load(&first[..16]), _mm_cvtsi32_si128(register as i32)),
            load(&first[16..32]),
            load(&first[32..48]),
            load(&first[48..]),
        ];
        let k1k2 = _mm_set_epi64x(K2, K1);
        for group in &mut groups {
            lanes[0] = fold(lanes[0], load(&group[..16]), k1k2);
            lanes[1] = fold(lanes[1], load(&group[16..32]), k1k2);
            lanes[2] = fold(lanes[2], load(&group[32..48]), k1k2);
            lanes[3] = fold(lanes[3], load(&group[48..]), k1k2);
        }
        let k3k4 = _mm_set_epi64x(K4, K3);
        let mut x = fold(lanes[0], lanes[1], k3k4);
        x = fold(x, lanes[2], k3k4);
        x = fold(x, lanes[3], k3k4);
        // The last incomplete group folds one block at a time.
        let mut blocks = groups.remainder().chunks_exact(16);
        for block in &mut blocks {
            x = fold(x, load(block), k3k4);
        }
        let mut state = [0u8; 16];
        _mm_storeu_si128(state.as_mut_ptr().cast::<__m128i>(), x);
        let crc = super::crc32_update_tables(0, &state);
        super::crc32_update_tables(crc, blocks.remainder())
    }

    /// `x` moved on past `keys`' distance, added to `block`.
    #[inline(always)]
    unsafe fn fold(x: __m128i, block: __m128i, keys: __m128i) -> __m128i {
        let low = _mm_clmulepi64_si128(x, keys, 0x00);
        let high = _mm_clmulepi64_si128(x, keys, 0x11);
        _mm_xor_si128(_mm_xor_si128(block, low), high)
    }

    #[cfg(test)]
    #[test]
    fn the_fold_keys_are_the_published_ones() {
        // As printed in Intel's paper (and every implementation of it) for the IEEE CRC-32.
        assert_eq!(K1, 0x1_5444_2BD4);
        assert_eq!(K2, 0x1_C6E4_1596);
        assert_eq!(K3, 0x1_7519_97D0);
        assert_eq!(K4, 0x0_CCAA_009E);
    }
}

/// The fingerprint by AES rounds (AES-NI): four 128-bit lanes, started from the process keys
/// and the length; each 16 bytes of input enter one lane as the round key of an AES round,
/// followed by a round under a process key (two rounds per block, so one block's difference
/// reaches a whole lane before the next block can meet it); the lanes are then merged by
/// rounds of their own and three more under the keys (every lane's last block goes through
/// at least three rounds), and the two halves folded to 64 bits. A tail of less than 64 bytes
/// is zero-padded (the length, in the start, tells the padding from input zeros).
#[cfg(target_arch = "x86_64")]
mod aes_hash {
    use std::arch::x86_64::{
        __m128i, _mm_aesenc_si128, _mm_cvtsi128_si64, _mm_loadu_si128, _mm_set_epi64x,
        _mm_unpackhi_epi64, _mm_xor_si128,
    };

    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("sse2")
    }

    pub fn hash(keys: &[u64; 4], data: &[u8]) -> u64 {
        // SAFETY: callers check `available()` first, and AVX is checked here; every load
        // reads 16 bytes of a 64-byte group of `data` or of the local padded tail.
        unsafe {
            if std::arch::is_x86_feature_detected!("avx") {
                hash_avx(keys, data)
            } else {
                hash_sse(keys, data)
            }
        }
    }

    /// With AVX the rounds take their input block straight from memory (no separate load):
    /// 8 instructions per 64 bytes instead of 12. The same rounds, so the same value.
    #[target_feature(enable = "aes", enable = "sse2", enable = "avx")]
    pub(super) unsafe fn hash_avx(keys: &[u64; 4], data: &[u8]) -> u64 {
        hash_aes(keys, data)
    }

    #[target_feature(enable = "aes", enable = "sse2")]
    pub(super) unsafe fn hash_sse(keys: &[u64; 4], data: &[u8]) -> u64 {
        hash_aes(keys, data)
    }

    /// The rounds, compiled into each of the two callers above with their features (hence
    /// always inlined; called elsewhere, its intrinsics would not be).
    #[inline(always)]
    unsafe fn hash_aes(keys: &[u64; 4], data: &[u8]) -> u64 {
        let load = |block: &[u8]| _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        let k0 = _mm_set_epi64x(keys[1] as i64, keys[0] as i64);
        let k1 = _mm_set_epi64x(keys[3] as i64, keys[2] as i64);
        let len = _mm_set_epi64x(0, data.len() as i64);
        let mut lanes = [
            _mm_xor_si128(k0, len),
            _mm_xor_si128(k1, len),
            _mm_aesenc_si128(k0, k1),
            _mm_aesenc_si128(k1, k0),
        ];
        let mut absorb = |group: &[u8]| {
            for (i, lane) in lanes.iter_mut().enumerate() {
                let block = load(&group[16 * i..16 * i + 16]);
                *lane = _mm_aesenc_si128(_mm_aesenc_si128(*lane, block), k0);
            }
        };
        let mut groups = data.chunks_exact(64);
        for group in &mut groups {
            absorb(group);
        }
        let tail = groups.remainder();
        if !tail.is_empty() {
            let mut padded = [0u8; 64];
            padded[..tail.len()].copy_from_slice(tail);
            absorb(&padded);
        }
        let x = _mm_aesenc_si128(lanes[0], lanes[1]);
        let y = _mm_aesenc_si128(lanes[2], lanes[3]);
        let mut z = _mm_aesenc_si128(x, y);
        z = _mm_aesenc_si128(z, k1);
        z = _mm_aesenc_si128(z, k0);
        z = _mm_aesenc_si128(z, k1);
        let low = _mm_cvtsi128_si64(z) as u64;
        let high = _mm_cvtsi128_si64(_mm_unpackhi_epi64(z, z)) as u64;
        low ^ high
    }
}

const XXH_P1: u64 = 0x9E37_79B1_85EB_CA87;
const XXH_P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const XXH_P3: u64 = 0x1656_67B1_9E37_79F9;
const XXH_P4: u64 = 0x85EB_CA77_C2B2_AE63;
const XXH_P5: u64 = 0x27D4_EB2F_1656_67C5;

fn xxh_round(acc: u64, lane: u64) -> u64 {
    acc.wrapping_add(lane.wrapping_mul(XXH_P2))
        .rotate_left(31)
        .wrapping_mul(XXH_P1)
}

fn xxh_merge(acc: u64, lane_acc: u64) -> u64 {
    (acc ^ xxh_round(0, lane_acc))
        .wrapping_mul(XXH_P1)
        .wrapping_add(XXH_P4)
}

fn le_u64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    w[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(w)
}

/// The process's fingerprint keys: drawn once from std's random source (hashing constants
/// with a fresh `RandomState` reads out its OS-seeded keys' effect without a crate).
fn process_keys() -> &'static [u64; 4] {
    static KEYS: OnceLock<[u64; 4]> = OnceLock::new();
    KEYS.get_or_init(|| {
        let random = RandomState::new();
        [1u64, 2, 3, 4].map(|i| random.hash_one(i))
    })
}

/// Keyed 64-bit fingerprint of a body (see the module comment), used to recognise an
/// unchanged registration body without re-parsing or re-checking its CRC. Equal inputs give
/// equal fingerprints within one process; nothing else is promised across processes.
pub fn fingerprint(data: &[u8]) -> u64 {
    let keys = process_keys();
    #[cfg(target_arch = "x86_64")]
    if aes_hash::available() {
        return aes_hash::hash(keys, data);
    }
    xxh64(data, keys[0])
}

/// XXH64 of `data` with `seed`.
fn xxh64(data: &[u8], seed: u64) -> u64 {
    let mut h;
    let mut rest = data;
    if data.len() >= 32 {
        let mut v = [
            seed.wrapping_add(XXH_P1).wrapping_add(XXH_P2),
            seed.wrapping_add(XXH_P2),
            seed,
            seed.wrapping_sub(XXH_P1),
        ];
        let mut stripes = data.chunks_exact(32);
        for stripe in &mut stripes {
            for (lane, acc) in stripe.chunks_exact(8).zip(v.iter_mut()) {
                *acc = xxh_round(*acc, le_u64(lane));
            }
        }
        rest = stripes.remainder();
        h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for acc in v {
            h = xxh_merge(h, acc);
        }
    } else {
        h = seed.wrapping_add(XXH_P5);
    }
    h = h.wrapping_add(data.len() as u64);
    let mut words = rest.chunks_exact(8);
    for word in &mut words {
        h ^= xxh_round(0, le_u64(word));
        h = h.rotate_left(27).wrapping_mul(XXH_P1).wrapping_add(XXH_P4);
    }
    let mut tail = words.remainder();
    if tail.len() >= 4 {
        let (word, after) = tail.split_at(4);
        h ^= le_u64(word).wrapping_mul(XXH_P1);
        h = h.rotate_left(23).wrapping_mul(XXH_P2).wrapping_add(XXH_P3);
        tail = after;
    }
    for &byte in tail {
        h ^= u64::from(byte).wrapping_mul(XXH_P5);
        h = h.rotate_left(11).wrapping_mul(XXH_P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(XXH_P2);
    h ^= h >> 29;
    h = h.wrapping_mul(XXH_P3);
    h ^ (h >> 32)
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
        // Every length around the 16-byte block boundary agrees with the bytewise definition.
        let data: Vec<u8> = (0..100u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..data.len() {
            let mut slow = !0u32;
            for &b in &data[..len] {
                slow ^= u32::from(b);
                for _ in 0..8 {
                    slow = if slow & 1 != 0 {
                        0xEDB8_8320 ^ (slow >> 1)
                    } else {
                        slow >> 1
                    };
                }
            }
            assert_eq!(crc32(&data[..len]), !slow, "len {len}");
        }
    }

    #[test]
    fn crc32_of_large_inputs_agrees_with_the_tables() {
        // Every length over the carry-less path's threshold and its 64-byte groups, and a
        // body-sized input, against the table formulation (itself checked above).
        let data: Vec<u8> = (0..25_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let lengths = (0..700).chain([4095, 4096, 4097, 21_000, 21_013, 25_000]);
        for len in lengths {
            let tables = !crc32_update_tables(!0, &data[..len]);
            assert_eq!(crc32(&data[..len]), tables, "len {len}");
            // Unaligned starts too.
            let s = &data[3..3 + len.min(data.len() - 3)];
            assert_eq!(crc32(s), !crc32_update_tables(!0, s), "len {len} at 3");
        }
    }

    /// Both compilations of the carry-less path (with and without AVX, as the CPU allows)
    /// against the tables, at every length up to 300 and every alignment within 8 bytes.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn both_carry_less_paths_agree_with_the_tables_at_every_length_and_alignment() {
        if !clmul::available() {
            return;
        }
        let data: Vec<u8> = (0..400u32)
            .map(|i| (i.wrapping_mul(2_246_822_519) >> 11) as u8)
            .collect();
        for start in 0..8 {
            for len in 0..=300 {
                let s = &data[start..start + len];
                let tables = crc32_update_tables(!0, s);
                // SAFETY: the features each path needs were checked.
                assert_eq!(
                    unsafe { clmul::update_sse(!0, s) },
                    tables,
                    "sse {start}+{len}"
                );
                if std::arch::is_x86_feature_detected!("avx") {
                    let avx = unsafe { clmul::update_avx(!0, s) };
                    assert_eq!(avx, tables, "avx {start}+{len}");
                }
            }
        }
    }

    #[test]
    fn the_fallback_is_xxh64() {
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
        // The seed and every byte count, past the 32-byte stripes too.
        let long = vec![7u8; 1000];
        assert_ne!(xxh64(&long, 1), xxh64(&long[..999], 1));
        assert_ne!(xxh64(&long, 1), xxh64(&long, 2));
    }

    /// Equal inputs agree; inputs differing in one bit anywhere, in the length only, or in
    /// trailing zeros (the padding) all differ. The keys are random per run: a false failure
    /// has the odds of a 64-bit collision.
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
        let keys = process_keys();
        assert_ne!(xxh64(&data, keys[0]), xxh64(&data, keys[0] ^ 1));
    }

    /// The AES fingerprint compiled with and without AVX is one function.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn both_aes_paths_give_the_same_fingerprint() {
        if !aes_hash::available() || !std::arch::is_x86_feature_detected!("avx") {
            return;
        }
        let keys = process_keys();
        let data: Vec<u8> = (0..1_000u32).map(|i| (i * 13 + i / 7) as u8).collect();
        for start in 0..4 {
            for len in (0..=300).chain([999 - start]) {
                let s = &data[start..start + len];
                // SAFETY: AES and AVX were checked above.
                let (sse, avx) =
                    unsafe { (aes_hash::hash_sse(keys, s), aes_hash::hash_avx(keys, s)) };
                assert_eq!(sse, avx, "{start}+{len}");
                assert_eq!(fingerprint(s), avx);
            }
        }
    }
}
