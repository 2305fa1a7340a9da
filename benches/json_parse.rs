//! JSON read paths on the hot requests: the 1,000-topic 5.x REGISTER_BROKER body (docs/protocol.md
//! §4.1) through the owned `Value` tree and the borrowed document, the full
//! `decode_register_body`, and two typical JSON request headers.
//!
//! Run: `cargo bench --bench json_parse`. "json::parse" is the owned-tree API (`Value`),
//! "json::parse_borrowed" the zero-copy one the decoders use; every timing includes dropping
//! the result, as a request handler pays for both.

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use rmq_namesrv::remoting::command::{DecodeLimits, RemotingCommand};
use rmq_namesrv::remoting::json;
use rmq_namesrv::route::model::{decode_register_body, BodyLimits};

/// A 5.x RegisterBrokerBody as a Java broker writes it (fastjson, alphabetical, compact) with
/// `topics` topics and one static-topic mapping with bare integer `currIdMap` keys.
fn register_body(topics: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{");
    out.extend_from_slice(
        b"\"dataVersion\":{\"counter\":12,\"stateVersion\":0,\"timestamp\":1700000000000},",
    );
    out.extend_from_slice(
        b"\"mappingDataVersion\":{\"counter\":0,\"stateVersion\":0,\"timestamp\":1700000000000},",
    );
    out.extend_from_slice(b"\"topicConfigTable\":{");
    for i in 0..topics {
        if i > 0 {
            out.push(b',');
        }
        let name = format!("BenchmarkTopic_{i:05}_with_a_longer_name");
        json::write_key(&mut out, &name);
        out.extend_from_slice(
            b"{\"attributes\":{},\"order\":false,\"perm\":6,\"readQueueNums\":8,",
        );
        out.extend_from_slice(b"\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":");
        json::write_str(&mut out, &name);
        out.extend_from_slice(b",\"topicSysFlag\":0,\"writeQueueNums\":8}");
    }
    out.extend_from_slice(b"},\"topicQueueMappingDetailMap\":{},\"topicQueueMappingInfoMap\":{");
    out.extend_from_slice(
        b"\"StaticT\":{\"bname\":\"broker-a\",\"currIdMap\":{0:0,1:1},\"dirty\":false,\"epoch\":1700000000000,\"scope\":\"__global__\",\"topic\":\"StaticT\",\"totalQueues\":8}",
    );
    out.extend_from_slice(b"}}}");
    out
}

/// A frame as `frame::next_frame` cuts it (type word + JSON header + body, no length prefix).
fn json_frame(header: &[u8], body: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(4 + header.len() + body.len());
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header);
    frame.extend_from_slice(body);
    Bytes::from(frame)
}

/// REGISTER_BROKER header of a Java 5.x broker (ext set of docs/protocol.md §4.4).
const REGISTER_HEADER: &[u8] = b"{\"code\":103,\"extFields\":{\"enableActingMaster\":\"false\",\"brokerId\":\"0\",\"bodyCrc32\":\"1794280071\",\"clusterName\":\"DefaultCluster\",\"brokerAddr\":\"172.21.156.94:10911\",\"haServerAddr\":\"172.21.156.94:10912\",\"compressed\":\"false\",\"brokerName\":\"broker-a\",\"heartbeatTimeoutMillis\":\"10000\"},\"flag\":0,\"language\":\"JAVA\",\"opaque\":4711,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":475}";

/// GET_ROUTEINFO_BY_TOPIC header of a Java 5.x client.
const ROUTE_HEADER: &[u8] = b"{\"code\":105,\"extFields\":{\"topic\":\"TopicTest\",\"acceptStandardJsonOnly\":\"true\"},\"flag\":0,\"language\":\"JAVA\",\"opaque\":3,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":475}";

fn bench(c: &mut Criterion) {
    let body = register_body(1000);
    let limits = json::Limits::default();
    let mut group = c.benchmark_group("register_body_1000_topics");
    group.throughput(criterion::Throughput::Bytes(body.len() as u64));
    group.bench_function("json::parse (Value tree)", |b| {
        b.iter(|| json::parse_with(black_box(&body), &limits).map(drop))
    });
    group.bench_function("json::parse_borrowed (Document)", |b| {
        b.iter(|| json::parse_borrowed(black_box(&body), &limits).map(drop))
    });
    group.bench_function("decode_register_body", |b| {
        let limits = BodyLimits::default();
        b.iter(|| {
            decode_register_body(
                black_box(&body),
                false,
                475,
                &limits,
                &mut Default::default(),
            )
            .map(drop)
        })
    });
    group.finish();

    let decode_limits = DecodeLimits::default();
    let mut group = c.benchmark_group("request_header");
    for (name, header) in [
        ("REGISTER_BROKER 5.x", REGISTER_HEADER),
        ("GET_ROUTEINFO_BY_TOPIC", ROUTE_HEADER),
    ] {
        let frame = json_frame(header, b"");
        group.bench_function(name, |b| {
            b.iter(|| RemotingCommand::decode(black_box(frame.clone()), &decode_limits).map(drop))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
