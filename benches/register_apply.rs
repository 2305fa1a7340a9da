//! Applying registrations to a table of 100 brokers x 100 topics: steady state (the body is
//! byte-identical to the broker's previous one: fingerprint, check, refresh) and churn (a
//! decoded body whose dataVersion and topics changed: the full apply).

mod support;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rmq_namesrv::checksum::fingerprint;
use rmq_namesrv::route::table::TopicsInput;
use support::payload::Layout;

fn bench(c: &mut Criterion) {
    let layout = Layout::default();
    let sims = support::brokers(&layout, 4);
    let mut g = c.benchmark_group("register_apply");
    g.throughput(Throughput::Elements(1));

    let mut table = support::populated(&sims, None);
    let mut i = 0usize;
    g.bench_function("steady_100_topics", |b| {
        b.iter(|| {
            let n = i % sims.len();
            i += 1;
            let sim = &sims[n];
            let mut req = support::request(support::payload::CLUSTER, sim, n, 2_000, 0, None);
            // What the processor does per unchanged registration: hash the body, compare, refresh.
            req.fingerprint.hash = fingerprint(&sim.bodies[0]);
            let unchanged = table.is_unchanged_body(&req);
            assert!(unchanged);
            table.register_broker(&req, TopicsInput::Unchanged)
        })
    });

    let mut table = support::populated(&sims, None);
    let mut i = 0usize;
    g.bench_function("churn_100_topics", |b| {
        b.iter(|| {
            let n = i % sims.len();
            let variant = 1 + (i / sims.len()) % 4;
            i += 1;
            let sim = &sims[n];
            let req = support::request(support::payload::CLUSTER, sim, n, 2_000, variant, None);
            support::register_now(&mut table, &req, &sim.decoded[variant])
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
