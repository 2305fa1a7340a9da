//! The CI fuzz run: a seeded, deterministic mutator over tests/fixtures feeding every
//! decoder that reads peer-controlled bytes, plus a few thousand mutated frames sent to a
//! real server over TCP. It runs on the stable toolchain as part of `cargo test`; the long
//! coverage-guided runs are cargo-fuzz's (tests/fuzz/run.sh), with the same checks
//! (tests/fuzz/oracles.rs).
//!
//! Mutations: bit flips, interesting bytes, truncation, deletion, duplication, splices of two
//! seeds, JSON/properties tokens, and length-field lies (int16/int32 overwritten with 0, -1,
//! MAX, the real length +-1). Every decode runs under a counting allocator: the peak of live
//! heap it adds must stay within a bound proportional to its input, so a lying length field
//! can't make a decoder reserve gigabytes.
//!
//! RMQ_FUZZ_ITERS scales the number of inputs per target (default 100000; the properties
//! target takes a fifth of that, the TCP run a sixth);
//! RMQ_FUZZ_SEED changes the sequence (default fixed, so CI is reproducible).

mod common;
#[path = "fuzz/oracles.rs"]
mod oracles;

use common::*;
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::codes::{request, version};
use rmq_namesrv::remoting::command::{encode_frame, Header, SerializeType};
use rmq_namesrv::route::model::{self, Dialect};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Counting allocator: live and peak heap bytes of the current thread.

struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grew(n: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add(n);
        live.set(now);
        let _ = PEAK.try_with(|peak| {
            if now > peak.get() {
                peak.set(now)
            }
        });
    });
}

fn shrank(n: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(n)));
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are plain
// thread-local cells that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        shrank(layout.size());
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size > layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns the most heap it held at once beyond what was live before.
fn peak_extra_heap(f: impl FnOnce()) -> usize {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    f();
    PEAK.with(Cell::get).saturating_sub(base)
}

// ---------------------------------------------------------------------------------------------
// Deterministic generator and mutator.

struct Rng(u64);

impl Rng {
    fn new(stream: u64) -> Rng {
        let seed = std::env::var("RMQ_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0x5EED_F00D);
        Rng((seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1)
    }
    fn next(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

const INTERESTING_BYTES: &[u8] = b"\x00\x01\x7f\x80\xff\"\\{}[]:,0-e.\n\r= u'#!\t";

const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"'",
    b":",
    b",",
    b"{\"a\":",
    b"\\u",
    b"\\uD800",
    b"\\uDC00\\uD800",
    b"\\u00e9",
    b"1e999",
    b"-1e-999",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"2147483648",
    b"-0.0",
    b"0x10",
    b"null",
    b"true",
    b"NaN",
    b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    b"{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{",
    b"\xef\xbb\xbf",
    b"\xc3\x28",
    b"\xf0\x9f\x98\x80",
    b"\\\n",
    b"\\\r\n",
    b"=",
    b"\\=",
    b"\\:",
    b"#",
    b"\x78\x9c",
    b" SINGLE_TAG",
    b" MULTI_TAG",
];

fn be32_lie(rng: &mut Rng, len: usize) -> u32 {
    let choices = [
        0u32,
        1,
        4,
        0x7FFF_FFFF,
        0x8000_0000,
        0xFFFF_FFFF,
        0x00FF_FFFF,
        0x0100_0000,
        len as u32,
        (len as u32).wrapping_add(1),
        (len as u32).wrapping_sub(1),
        (len as u32).wrapping_sub(4),
        rng.next() as u32,
    ];
    choices[rng.below(choices.len())]
}

/// One to four stacked mutations of a seed (sometimes spliced with another).
fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seeds[rng.below(seeds.len())].clone();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = v.len();
        match rng.below(11) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())];
            }
            2 => v.truncate(rng.below(len + 1)),
            3 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(16)).min(len);
                v.drain(a..b);
            }
            4 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                let chunk = v[a..b].to_vec();
                let at = rng.below(len + 1);
                let times = if rng.chance(8) { 1 + rng.below(64) } else { 1 };
                for _ in 0..times {
                    v.splice(at..at, chunk.iter().copied());
                }
            }
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            6 | 7 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                let at = rng.below(len + 1);
                v.splice(at..at, token.iter().copied());
            }
            8 if len >= 4 => {
                let at = if rng.chance(2) {
                    rng.below(len / 4) * 4
                } else {
                    rng.below(len - 3)
                };
                let lie = be32_lie(rng, len);
                v[at..at + 4].copy_from_slice(&lie.to_be_bytes());
            }
            9 if len >= 2 => {
                let at = rng.below(len - 1);
                let lie: [u16; 6] = [0, 1, 0x7FFF, 0x8000, 0xFFFF, len as u16];
                v[at..at + 2].copy_from_slice(&lie[rng.below(lie.len())].to_be_bytes());
            }
            _ => {
                let n = rng.below(8);
                let at = rng.below(len + 1);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
        }
    }
    if v.len() > 64 * 1024 {
        v.truncate(64 * 1024);
    }
    v
}

thread_local! {
    /// Set on a harness thread while it feeds decoders: their panics are caught and reported
    /// with the input, so the hook stays silent for them.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Panics anywhere else in this process: the in-process server's threads included. The
/// server contains a handler panic to one connection, so a count is how a test sees it.
static PANICS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                PANICS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                default(info);
            }
        }));
    });
}

fn iterations() -> usize {
    std::env::var("RMQ_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000)
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Feeds `iterations()` mutated seeds (and every seed itself) to `check`; a panic or an
/// allocation beyond `bound(len)` fails the test with the input in hex.
fn run(name: &str, stream: u64, seeds: &[Vec<u8>], check: fn(&[u8]), bound: fn(usize) -> usize) {
    run_n(name, stream, seeds, check, bound, iterations());
}

fn run_n(
    name: &str,
    stream: u64,
    seeds: &[Vec<u8>],
    check: fn(&[u8]),
    bound: fn(usize) -> usize,
    n: usize,
) {
    assert!(!seeds.is_empty(), "{name}: no seeds");
    let mut rng = Rng::new(stream);
    let mut worst = (0usize, 0usize);
    install_panic_hook();
    QUIET.with(|q| q.set(true));
    let mut failure = None;
    for i in 0..seeds.len() + n {
        let input = if i < seeds.len() {
            seeds[i].clone()
        } else {
            mutate(&mut rng, seeds)
        };
        let mut peak = 0;
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            peak = peak_extra_heap(|| check(&input));
        }));
        if let Err(payload) = outcome {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failure = Some(format!(
                "{name}: input #{i} panicked: {msg}\ninput (hex): {}",
                hex(&input)
            ));
            break;
        }
        if peak > bound(input.len()) {
            failure = Some(format!(
                "{name}: input #{i} of {} bytes held {peak} heap bytes (bound {})\ninput (hex): {}",
                input.len(),
                bound(input.len()),
                hex(&input)
            ));
            break;
        }
        if peak > worst.0 {
            worst = (peak, input.len());
        }
    }
    QUIET.with(|q| q.set(false));
    if let Some(f) = failure {
        panic!("{f}");
    }
    println!(
        "{name}: {} inputs ({} seeds), no panic; most heap held: {} bytes for a {}-byte input",
        seeds.len() + n,
        seeds.len(),
        worst.0,
        worst.1
    );
}

// ---------------------------------------------------------------------------------------------
// Seeds from tests/fixtures.

use common::fixture;

fn fixtures_dir() -> std::path::PathBuf {
    common::fixture_path("")
}

fn unhex(text: &[u8]) -> Vec<u8> {
    let digits: Vec<u8> = text.iter().copied().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| {
            let s = std::str::from_utf8(c).expect("hex digits");
            u8::from_str_radix(s, 16).expect("hex digits")
        })
        .collect()
}

/// Every whole frame among the fixtures (length prefix included).
fn frame_fixtures() -> Vec<Vec<u8>> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".hex"))
        .collect();
    names.sort();
    assert!(names.len() >= 4, "frame fixtures: {names:?}");
    names.iter().map(|n| unhex(&fixture(n))).collect()
}

fn json_fixtures() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for dir in [fixtures_dir(), fixtures_dir().join("third_party")] {
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .expect("fixtures dir")
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        names.sort();
        for p in names {
            out.push(std::fs::read(p).expect("fixture"));
        }
    }
    assert!(out.len() >= 5);
    out
}

/// The header bytes of each fixture frame whose type byte is `serialize_type`.
fn headers(serialize_type: u8) -> Vec<Vec<u8>> {
    frame_fixtures()
        .into_iter()
        .filter(|f| f.len() >= 8 && f[4] == serialize_type)
        .map(|f| {
            let len = u32::from_be_bytes([0, f[5], f[6], f[7]]) as usize;
            f[8..8 + len].to_vec()
        })
        .collect()
}

fn register_body_fixture() -> Vec<u8> {
    fixture("third_party/register_broker_103_body_v4.json")
}

// ---------------------------------------------------------------------------------------------
// The decoder targets.

/// Heap a decoder may hold for an input of `len` bytes: a parsed tree costs a few dozen bytes
/// per input byte at worst (each 2-byte `[0,` element is a 32-byte Value, plus the scratch
/// stack it is built on), so 256x plus a fixed allowance is generous but not absurd.
fn proportional(len: usize) -> usize {
    256 * len + (256 << 10)
}

#[test]
fn frames_cut_and_decode_without_panic() {
    let mut seeds = frame_fixtures();
    seeds.push(seeds.concat());
    run(
        "frame",
        1,
        &seeds,
        oracles::check_frame_stream,
        // The cutter reserves the whole announced frame (up to frameMaxLength) at once.
        |len| proportional(len) + oracles::FUZZ_FRAME_MAX as usize,
    );
}

#[test]
fn json_headers_decode_without_panic() {
    let mut seeds = headers(0);
    seeds.push(fixture("third_party/register_broker_103_extfields_v4.json"));
    run(
        "header_json",
        2,
        &seeds,
        oracles::check_json_header,
        proportional,
    );
}

#[test]
fn binary_headers_decode_without_panic() {
    run(
        "header_binary",
        3,
        &headers(1),
        oracles::check_binary_header,
        proportional,
    );
}

#[test]
fn json_reader_round_trips_what_it_reads() {
    let mut seeds = json_fixtures();
    seeds.extend(headers(0));
    run("json", 4, &seeds, oracles::check_json, proportional);
}

#[test]
fn register_bodies_decode_without_panic() {
    let body = register_body_fixture();
    let mut seeds = Vec::new();
    for mode in [0u8, 2, 3, 5, 7, 16, 23] {
        let mut s = vec![mode];
        s.extend_from_slice(&body);
        seeds.push(s);
    }
    // The compressed layout, both as zlib bytes (mode 8: compressed flag) and inflated
    // (mode 16: the target deflates it), from the fixture body decoded once.
    let decoded = model::decode_register_body(
        &body,
        false,
        401,
        &Default::default(),
        &mut Default::default(),
    )
    .expect("fixture");
    for v in [version::V4_9_4, version::CURRENT] {
        let zlib = model::encode_register_body_compressed(&decoded, v);
        let inflated = miniz_oxide::inflate::decompress_to_vec_zlib(&zlib).expect("inflates");
        let vbits = if v >= version::V5_0_0 { 7 } else { 5 };
        seeds.push([&[8 | vbits][..], &zlib].concat());
        seeds.push([&[16 | vbits][..], &inflated].concat());
    }
    run(
        "register_body",
        5,
        &seeds,
        oracles::check_register_body,
        // A zlib stream may legitimately inflate ~1000x, up to the server's 64 MiB limit.
        |len| (proportional(len) + (1 << 20)).max((2048 * len).min(160 << 20)),
    );
}

#[test]
fn route_bodies_decode_and_round_trip() {
    let mut seeds = json_fixtures();
    let route = model::TopicRouteData::decode(&fixture("topic_route_data_fastjson_legacy.json"))
        .expect("route fixture");
    for dialect in [Dialect::Standard, Dialect::Legacy] {
        let mut out = Vec::new();
        route.encode(dialect, &mut out);
        seeds.push(out);
    }
    let mut kv = Vec::new();
    oracles::encode_kv_table([("a", "1"), ("b", "\u{e9}")].into_iter(), &mut kv);
    seeds.push(kv);
    let mut list = Vec::new();
    model::encode_topic_list(["T1", "T2"].into_iter(), Some("10.0.0.1:10911"), &mut list);
    seeds.push(list);
    run("models", 6, &seeds, oracles::check_models, proportional);
}

#[test]
fn properties_parse_and_survive_write_back() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"));
    let mut seeds = vec![
        std::fs::read(format!("{root}/namesrv.conf")).expect("namesrv.conf"),
        std::fs::read(format!("{root}/deploy/namesrv.conf")).expect("deploy/namesrv.conf"),
        b"a\\\n  b=c\\u0041\\\\\n#x\n!y\nk:v\nk v\nwaitSecondsForService=3\n".to_vec(),
        b"scanNotActiveBrokerInterval=200\nx.test.1=one\nadminAllowList=127.0.0.0/8;::1/128\n"
            .to_vec(),
    ];
    seeds.push(
        rmq_namesrv::config::NamesrvConfig::default()
            .to_properties_text()
            .into_bytes(),
    );
    // Each input is parsed three times and applied to two configs: a fifth of the inputs
    // keeps this target's share of the CI run in line with the others.
    run_n(
        "properties",
        7,
        &seeds,
        oracles::check_properties,
        proportional,
        iterations() / 5,
    );
}

/// What the long cargo-fuzz runs found, reduced by hand, kept as regression inputs.
#[test]
fn inputs_found_by_fuzzing_stay_fixed() {
    // header_json: repeated `extFields` members accumulated pairs past maxExtFields (fixed in
    // remoting::command: the last member wins, as in fastjson).
    let mut header = String::from("{\"code\":0");
    for i in 0..200 {
        header.push_str(&format!(
            ",\"extFields\":{{\"hasMsg\":\"{i}\",\"k{i}\":\"false\"}}"
        ));
    }
    header.push('}');
    oracles::check_json_header(header.as_bytes());
    // header_json: an object-valued ext field with raw NULs in a key renders as JSON text
    // six times longer (each NUL becomes \u0000): bounded growth, not a bug.
    let mut header = b"{\"extFields\":{\"q\":{\"".to_vec();
    header.extend_from_slice(&[0u8; 300]);
    header.extend_from_slice(b"\":\"31\"}}}");
    oracles::check_json_header(&header);
    // models: the standard dialect writes topicQueueMappingByBroker sorted, so a round trip
    // may reorder it.
    oracles::check_models(
        br#"{"topicQueueMappingByBroker":{"z":{"topic":"T","bname":"b","currIdMap":{1:1,0:0}},"a":{"topic":"U"}}}"#,
    );
}

#[test]
fn stored_zlib_wrapper_inflates_to_its_input() {
    for len in [0usize, 1, 100, 65535, 65536, 200_000] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 300) as u8).collect();
        let z = oracles::zlib_stored(&data);
        assert_eq!(
            miniz_oxide::inflate::decompress_to_vec_zlib(&z).expect("inflates"),
            data
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Mutated frames against the real server.

/// A request frame for `code` with plausible ext fields, in either header type.
fn request_frame(code: i32, st: SerializeType, ext: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let header = Header {
        code,
        language: "JAVA",
        version: version::CURRENT,
        // Far from the small opaques the checking client uses.
        opaque: 0x4000_0000 + code,
        flag: 0,
        remark: None,
    };
    encode_frame(&mut out, st, &header, Some(ext.iter().copied()), body);
    out
}

fn server_frame_seeds() -> Vec<Vec<u8>> {
    let body = register_body_fixture();
    let crc = (rmq_namesrv::checksum::crc32(&body) & 0x7FFF_FFFF).to_string();
    let register_ext = [
        ("brokerName", "broker-f"),
        ("brokerAddr", "10.9.9.9:10911"),
        ("clusterName", "fuzz"),
        ("haServerAddr", "10.9.9.9:10912"),
        ("brokerId", "0"),
        ("compressed", "false"),
        ("bodyCrc32", crc.as_str()),
    ];
    let mut seeds = frame_fixtures();
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        seeds.push(request_frame(
            request::REGISTER_BROKER,
            st,
            &register_ext,
            &body,
        ));
        seeds.push(request_frame(
            request::BROKER_HEARTBEAT,
            st,
            &register_ext[..5],
            b"",
        ));
        seeds.push(request_frame(
            request::GET_ROUTEINFO_BY_TOPIC,
            st,
            &[("topic", "TopicTest")],
            b"",
        ));
        seeds.push(request_frame(
            request::GET_BROKER_CLUSTER_INFO,
            st,
            &[],
            b"",
        ));
        seeds.push(request_frame(
            request::PUT_KV_CONFIG,
            st,
            &[("namespace", "ns"), ("key", "k"), ("value", "v")],
            b"",
        ));
        seeds.push(request_frame(
            request::GET_KVLIST_BY_NAMESPACE,
            st,
            &[("namespace", "ns")],
            b"",
        ));
        seeds.push(request_frame(
            request::UNREGISTER_BROKER,
            st,
            &register_ext[..5],
            b"",
        ));
        seeds.push(request_frame(
            request::DELETE_TOPIC_IN_NAMESRV,
            st,
            &[("topic", "TopicTest"), ("clusterName", "fuzz")],
            b"",
        ));
        seeds.push(request_frame(
            request::QUERY_DATA_VERSION,
            st,
            &register_ext[..5],
            b"{\"counter\":1,\"stateVersion\":0,\"timestamp\":1}",
        ));
        seeds.push(request_frame(
            request::GET_TOPICS_BY_CLUSTER,
            st,
            &[("cluster", "fuzz")],
            b"",
        ));
    }
    seeds
}

/// Request codes a structured mutation may switch to: everything the server answers except
/// UPDATE_NAMESRV_CONFIG, which could legitimately reconfigure the server under test.
const CODES: &[i32] = &[
    request::PUT_KV_CONFIG,
    request::GET_KV_CONFIG,
    request::DELETE_KV_CONFIG,
    request::REGISTER_BROKER,
    request::UNREGISTER_BROKER,
    request::GET_ROUTEINFO_BY_TOPIC,
    request::GET_BROKER_CLUSTER_INFO,
    request::WIPE_WRITE_PERM_OF_BROKER,
    request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    request::DELETE_TOPIC_IN_NAMESRV,
    request::REGISTER_TOPIC_IN_NAMESRV,
    request::GET_KVLIST_BY_NAMESPACE,
    request::GET_TOPICS_BY_CLUSTER,
    request::GET_SYSTEM_TOPIC_LIST_FROM_NS,
    request::GET_UNIT_TOPIC_LIST,
    request::GET_HAS_UNIT_SUB_TOPIC_LIST,
    request::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
    request::GET_NAMESRV_CONFIG,
    request::QUERY_DATA_VERSION,
    request::ADD_WRITE_PERM_OF_BROKER,
    request::GET_BROKER_MEMBER_GROUP,
    request::BROKER_HEARTBEAT,
    request::NOTIFY_MIN_BROKER_ID_CHANGE,
    request::RMQ_NAMESRV_STATS,
    0,
    -1,
    32767,
];

const EXT_KEYS: &[&str] = &[
    "topic",
    "brokerName",
    "brokerAddr",
    "clusterName",
    "cluster",
    "brokerId",
    "namespace",
    "key",
    "value",
    "compressed",
    "bodyCrc32",
    "heartbeatTimeoutMillis",
    "enableActingMaster",
    "haServerAddr",
    "perm",
    "readQueueNums",
    "writeQueueNums",
    "zoneName",
    "acceptStandardJsonOnly",
    "minBrokerId",
    "offlineBrokerAddr",
];

fn ext_value(rng: &mut Rng) -> String {
    let values = [
        "",
        "0",
        "-1",
        "1",
        "2147483648",
        "-9223372036854775809",
        "true",
        "TRUE ",
        "abc",
        "10.0.0.1:10911",
        ":",
        "TopicTest",
        "fuzz",
        "a b",
        "\\u0000",
        "\u{0}",
        "\u{e9}\u{1F600}",
        "%RETRY%g",
        "rmq_sys_x",
    ];
    if rng.chance(10) {
        "x".repeat(rng.below(600))
    } else {
        values[rng.below(values.len())].to_string()
    }
}

/// A well-formed frame whose fields are mutated: code, version, ext values and keys, body.
/// These reach the request handlers, where raw byte mutation mostly stops at the decoder.
fn structured_mutation(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    use rmq_namesrv::remoting::command::RemotingCommand;
    let seed = &seeds[rng.below(seeds.len())];
    let cmd = RemotingCommand::decode(
        bytes::Bytes::copy_from_slice(&seed[4..]),
        &Default::default(),
    )
    .expect("seed frames decode");
    let mut code = cmd.code;
    let mut version = cmd.version;
    let mut ext: Vec<(String, String)> = (cmd.ext_fields.iter())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let mut body = cmd.body.to_vec();
    for _ in 0..1 + rng.below(3) {
        match rng.below(7) {
            0 => code = CODES[rng.below(CODES.len())],
            1 => version = [-1, 0, 36, 37, 400, 401, 413, 479, 32767][rng.below(9)],
            2 if !ext.is_empty() => {
                let i = rng.below(ext.len());
                let mutated = mutate(rng, &[ext[i].1.clone().into_bytes()]);
                ext[i].1 = String::from_utf8_lossy(&mutated).into_owned();
            }
            3 if !ext.is_empty() => {
                ext.remove(rng.below(ext.len()));
            }
            4 => {
                let bodies = [body.clone(), register_body_fixture()];
                body = mutate(rng, &bodies);
            }
            5 if !ext.is_empty() => {
                let i = rng.below(ext.len());
                ext[i].1 = ext_value(rng);
            }
            _ => ext.push((
                EXT_KEYS[rng.below(EXT_KEYS.len())].to_string(),
                ext_value(rng),
            )),
        }
    }
    if code == request::REGISTER_BROKER && rng.chance(2) {
        // Keep the CRC right half the time so the body decoder is reached.
        let crc = (rmq_namesrv::checksum::crc32(&body) & 0x7FFF_FFFF).to_string();
        ext.retain(|(k, _)| k != "bodyCrc32");
        ext.push(("bodyCrc32".to_string(), crc));
    }
    let mut out = Vec::new();
    let header = Header {
        code,
        language: "JAVA",
        version,
        opaque: 0x4000_0000,
        flag: 0,
        remark: None,
    };
    encode_frame(
        &mut out,
        cmd.serialize_type,
        &header,
        Some(ext.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        &body,
    );
    out
}

/// Sets the length prefix to what follows it.
fn fix_length(frame: &mut Vec<u8>) {
    if frame.len() < 4 {
        frame.resize(4, 0);
    }
    let len = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&len.to_be_bytes());
}

fn is_closed_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// Sends `bytes` on a fresh connection, half-closes it, and reads until the server closes.
/// Whatever the server sent back must be whole, decodable frames.
fn send_and_drain(addr: &str, bytes: &[u8]) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may close first (a bad prefix); a failed write is that, not a failure.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if is_closed_error(&e) => {}
        Err(e) => panic!("server neither answered nor closed a half-closed connection: {e}"),
    }
    let mut buf = bytes::BytesMut::from(&got[..]);
    while let Ok(Some(f)) = rmq_namesrv::remoting::frame::next_frame(&mut buf, 64 << 20) {
        rmq_namesrv::remoting::command::RemotingCommand::decode(f, &Default::default())
            .expect("server responses decode");
    }
}

#[test]
fn server_survives_mutated_frames_over_tcp() {
    install_panic_hook();
    let panics_before = PANICS.load(std::sync::atomic::Ordering::SeqCst);
    let server = TestServer::start();
    let seeds = server_frame_seeds();
    let mut rng = Rng::new(8);
    let total = (iterations() / 6).max(500);
    let mut client = server.client();
    let (mut answered, mut closed, mut drained, mut structured) = (0usize, 0, 0, 0);
    for i in 0..total {
        if rng.chance(2) {
            let frame = structured_mutation(&mut rng, &seeds);
            let outcome = client
                .send_raw(&frame)
                .and_then(|()| client.request(request::GET_BROKER_CLUSTER_INFO, &[], b""));
            match outcome {
                Ok(resp) => {
                    assert_eq!(resp.code, 0, "after {}: {:?}", hex(&frame), resp.remark);
                    structured += 1;
                }
                Err(e) => panic!(
                    "frame #{i}: a well-formed frame lost the connection ({e}): {}",
                    hex(&frame)
                ),
            }
            continue;
        }
        let mut frame = mutate(&mut rng, &seeds);
        if rng.chance(4) {
            // Length prefix as mutated: may lie either way. Use a throwaway connection that
            // is half-closed, so a frame waiting for more bytes ends at EOF.
            send_and_drain(&server.addr, &frame);
            drained += 1;
            continue;
        }
        fix_length(&mut frame);
        let outcome = client
            .send_raw(&frame)
            .and_then(|()| client.request(request::GET_BROKER_CLUSTER_INFO, &[], b""));
        match outcome {
            Ok(resp) => {
                assert_eq!(
                    resp.code,
                    0,
                    "frame #{i}: a valid request after {} answered {:?}",
                    hex(&frame),
                    resp.remark
                );
                model::ClusterInfo::decode(&resp.body).expect("cluster info decodes");
                answered += 1;
            }
            Err(e) if is_closed_error(&e) => {
                closed += 1;
                client = server.client();
            }
            Err(e) => panic!(
                "frame #{i}: server neither answered nor closed ({e}); frame {}",
                hex(&frame)
            ),
        }
    }
    // A well-behaved client is still served in full.
    let mut c = server.client();
    let b = Broker::new("after-fuzz", "broker-z", "10.7.7.7:10911", 0);
    let resp = register(&mut c, &b, &body_with(1, &[topic("AfterFuzz", 4, 6)]));
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    let r = route_data(&mut c, "AfterFuzz").expect("route after fuzzing");
    assert_eq!(r.broker_datas[0].broker_name, "broker-z");
    let mut binary = Client::connect(&server.addr, Duration::from_secs(5)).expect("connect");
    binary.serialize_type = SerializeType::RocketMq;
    assert!(route_data(&mut binary, "AfterFuzz").is_some());
    assert_eq!(
        PANICS.load(std::sync::atomic::Ordering::SeqCst),
        panics_before,
        "the server panicked on a mutated frame (see the panic message above)"
    );
    println!(
        "tcp: {total} mutated frames: {structured} well-formed with mutated fields, all followed \
         by a good answer; of the byte-mutated ones {answered} followed by a good answer, \
         {closed} closed the connection, {drained} sent with the prefix as mutated and \
         half-closed"
    );
}
