//! Encoding one topic's route (two broker groups, as in the default layout) in both
//! key-quoting dialects: the cost of a route-cache miss.

mod support;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use rmq_namesrv::route::model::Dialect;
use support::payload::Layout;

fn bench(c: &mut Criterion) {
    let layout = Layout {
        brokers: 2,
        topics: 10,
        ..Layout::default()
    };
    let sims = support::brokers(&layout, 0);
    let table = support::populated(&sims, None);
    let topic = layout.topic_name(3);
    let route = table.pickup_route(&topic).expect("route exists");
    let mut g = c.benchmark_group("route_encode");
    g.throughput(Throughput::Elements(1));
    for (name, dialect) in [("standard", Dialect::Standard), ("legacy", Dialect::Legacy)] {
        let mut out = Vec::with_capacity(1024);
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                black_box(&route).encode(dialect, &mut out);
                out.len()
            })
        });
    }
    g.bench_function("pickup_and_encode_standard", |b| {
        let mut out = Vec::with_capacity(1024);
        b.iter(|| {
            out.clear();
            table
                .pickup_route(black_box(&topic))
                .expect("route")
                .encode(Dialect::Standard, &mut out);
            out.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
