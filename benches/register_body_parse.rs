//! JSON parse of a 1,000-topic REGISTER_BROKER body (the work a changed registration costs
//! before it touches the tables), plus the bodyCrc32 check and the fingerprint that lets an
//! unchanged body skip both.

mod support;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use rmq_namesrv::checksum::{crc32, fingerprint};
use rmq_namesrv::route::model::{decode_register_body, BodyLimits, DecodeScratch};
use support::payload::Layout;

fn bench(c: &mut Criterion) {
    let layout = Layout {
        brokers: 1,
        topics: 1000,
        ..Layout::default()
    };
    let body = layout.register_body(0, 0);
    let limits = BodyLimits::default();
    let mut g = c.benchmark_group("register_body_parse");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("json_1000_topics", |b| {
        b.iter(|| {
            decode_register_body(
                black_box(&body),
                false,
                479,
                &limits,
                &mut Default::default(),
            )
            .expect("decodes")
        })
    });
    // As the server decodes changed bodies: into the strings of the body applied before.
    let mut scratch = DecodeScratch::default();
    g.bench_function("json_1000_topics_reusing_strings", |b| {
        b.iter(|| {
            let decoded = decode_register_body(black_box(&body), false, 479, &limits, &mut scratch)
                .expect("decodes");
            scratch.recycle(decoded);
        })
    });
    // One leading space takes the body off the fast path (broker-shaped JSON read in one
    // pass) onto the general reader: the cost of any other shape.
    let spaced = [b" ".as_slice(), &body].concat();
    g.bench_function("json_1000_topics_general_reader", |b| {
        b.iter(|| {
            decode_register_body(
                black_box(&spaced),
                false,
                479,
                &limits,
                &mut Default::default(),
            )
            .expect("decodes")
        })
    });
    g.bench_function("crc32_1000_topics", |b| b.iter(|| crc32(black_box(&body))));
    g.bench_function("fingerprint_1000_topics", |b| {
        b.iter(|| fingerprint(black_box(&body)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
