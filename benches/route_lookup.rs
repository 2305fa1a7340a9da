//! GET_ROUTEINFO_BY_TOPIC served from the per-topic cache of encoded bodies (100 brokers x
//! 100 topics, 5,000 distinct topics, cache warm), in both dialects.

mod support;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use rmq_namesrv::route::model::Dialect;
use support::payload::Layout;

fn bench(c: &mut Criterion) {
    let layout = Layout::default();
    let sims = support::brokers(&layout, 0);
    let mut table = support::populated(&sims, None);
    let topics = layout.all_user_topics();
    let mut g = c.benchmark_group("route_lookup");
    g.throughput(Throughput::Elements(1));
    for (name, dialect) in [
        ("cached_standard", Dialect::Standard),
        ("cached_legacy", Dialect::Legacy),
    ] {
        for t in &topics {
            table.route_body(t, dialect, || None).expect("route");
        }
        let mut i = 0usize;
        g.bench_function(name, |b| {
            b.iter(|| {
                let t = &topics[i % topics.len()];
                i += 1;
                table
                    .route_body(black_box(t), dialect, || None)
                    .expect("route")
                    .len()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
