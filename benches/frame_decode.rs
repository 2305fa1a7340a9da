//! Cutting frames out of a read buffer and decoding their headers (JSON and ROCKETMQ codecs),
//! for a route request and a 100-topic registration (whose body stays a zero-copy slice).

mod support;

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rmq_namesrv::client::api::RegisterOptions;
use rmq_namesrv::remoting::command::{
    encode_frame, DecodeLimits, Header, RemotingCommand, SerializeType,
};
use rmq_namesrv::remoting::frame::next_frame;
use rmq_namesrv::request::Request;
use support::payload::Layout;

fn frame(st: SerializeType, code: i32, ext: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let header = Header {
        code,
        language: "JAVA",
        version: 479,
        opaque: 12345,
        flag: 0,
        remark: None,
    };
    encode_frame(&mut out, st, &header, Some(ext.iter().copied()), body);
    out
}

fn bench(c: &mut Criterion) {
    let limits = DecodeLimits::default();
    let layout = Layout::default();
    let body = layout.register_body(0, 0);
    let (id, options) = (layout.broker(0), RegisterOptions::default());
    let register = Request::RegisterBroker(id.registration(&body, &options, 479)).encode(479);
    let ext: Vec<(&str, &str)> = register.pairs().collect();
    let cases = [
        (
            "route_request_json",
            frame(
                SerializeType::Json,
                105,
                &[("topic", "BenchTopic_000042")],
                b"",
            ),
        ),
        (
            "route_request_rocketmq",
            frame(
                SerializeType::RocketMq,
                105,
                &[("topic", "BenchTopic_000042")],
                b"",
            ),
        ),
        (
            "register_100_topics_json",
            frame(SerializeType::Json, 103, &ext, &body),
        ),
    ];
    let mut g = c.benchmark_group("frame_decode");
    for (name, bytes) in &cases {
        let frame = Bytes::copy_from_slice(&bytes[4..]);
        g.throughput(Throughput::Elements(1));
        g.bench_function(*name, |b| {
            b.iter(|| RemotingCommand::decode(black_box(frame.clone()), &limits).expect("decodes"))
        });
    }
    // next_frame + decode over a buffer of 1,000 pipelined route requests.
    let mut many = Vec::new();
    for _ in 0..1000 {
        many.extend_from_slice(&cases[0].1);
    }
    g.throughput(Throughput::Elements(1000));
    g.bench_function("cut_and_decode_1000_pipelined_route_requests", |b| {
        b.iter_batched(
            || BytesMut::from(&many[..]),
            |mut buf| {
                let mut n = 0;
                while let Some(f) = next_frame(&mut buf, 16 << 20).expect("frame") {
                    let cmd = RemotingCommand::decode(f, &limits).expect("decodes");
                    n += cmd.code as usize;
                }
                n
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
