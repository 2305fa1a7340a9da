//! One expiry tick that finds 10,000 silent brokers (10 topics each, two groups per topic)
//! and the unregistration batch that removes them all.

mod support;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use support::payload::Layout;

fn bench(c: &mut Criterion) {
    let layout = Layout {
        brokers: 10_000,
        topics: 10,
        ..Layout::default()
    };
    let sims = support::brokers(&layout, 0);
    let mut g = c.benchmark_group("expire_tick");
    g.sample_size(10);
    g.throughput(Throughput::Elements(layout.brokers as u64));
    g.bench_function("scan_10000_silent_brokers", |b| {
        b.iter_batched(
            || support::populated(&sims, Some(10_000)),
            |mut table| {
                let expired = table.expire_silent_brokers(1_000 + 60_000, usize::MAX).0;
                assert_eq!(expired.len(), 10_000);
                (table, expired)
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("scan_and_unregister_10000_brokers", |b| {
        b.iter_batched(
            || support::populated(&sims, Some(10_000)),
            |mut table| {
                let expired = table.expire_silent_brokers(1_000 + 60_000, usize::MAX).0;
                let batch: Vec<_> = expired.into_iter().map(|e| e.request).collect();
                let outcome = table.unregister_batch(&batch);
                assert_eq!(outcome.brokers_removed, 10_000);
                assert_eq!(table.topic_count(), 0);
                table
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
