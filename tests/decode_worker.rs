//! The registration pipeline over TCP: unchanged bodies applied without being parsed, on the
//! loop or off it; large bodies hashed and decoded by the decode worker with the same checks
//! and answers as on the loop, replies in order, and a client on another connection served
//! while a zlib bomb or a huge JSON body is decoded; registrations with thousands of topics
//! applied in steps while clients are served and other route writes wait.

mod common;

use common::*;
use rmq_namesrv::client::api::RegisterOptions;
use rmq_namesrv::client::Client;
use rmq_namesrv::config::JAVA_CONFIG_BLACK_LIST;
use rmq_namesrv::remoting::codes::{request, response};
use rmq_namesrv::remoting::command::RemotingCommand;
use rmq_namesrv::route::model::{self, RegisterBody, TopicConfig};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn json_bytes(body: &RegisterBody) -> Vec<u8> {
    let mut bytes = Vec::new();
    model::encode_register_body_json(body, &mut bytes);
    bytes
}

fn register_ext(b: &Broker) -> Vec<(&str, &str)> {
    vec![
        ("brokerName", b.name.as_str()),
        ("brokerAddr", b.addr.as_str()),
        ("clusterName", b.cluster.as_str()),
        ("haServerAddr", b.ha.as_str()),
        ("brokerId", "0"),
        ("bodyCrc32", "0"),
    ]
}

#[test]
fn bodies_decoded_off_the_loop_are_checked_and_applied_as_on_it() {
    // 0: every changed, non-empty body goes through the worker.
    let server = TestServer::start_with(|c| c.decode_on_loop_max_bytes = 0);
    let mut c = server.client();
    let b = Broker::new("DW", "dw-a", "10.3.0.1:10911", 0);
    let first = body_with(1, &[topic("DwA", 8, 6), topic("DwB", 8, 6)]);
    assert_eq!(register(&mut c, &b, &first).code, response::SUCCESS);
    assert!(route_data(&mut c, "DwA").is_some());
    // Unchanged: recognised by its fingerprint, not decoded again.
    assert_eq!(register(&mut c, &b, &first).code, response::SUCCESS);
    assert_eq!(stat(&mut c, "registrationsUnchanged"), 1);
    assert_eq!(stat(&mut c, "registrations"), 2);
    let counted = stats(&mut c);
    let by_code = counted.get("requests").and_then(|r| r.get("103"));
    assert_eq!(
        by_code.and_then(|v| v.as_i64()),
        Some(2),
        "counted once each"
    );
    // Changed, compressed: decoded by the worker too.
    let second = body_with(2, &[topic("DwA", 8, 6), topic("DwC", 4, 6)]);
    let compressed = RegisterOptions {
        compressed: true,
        ..RegisterOptions::default()
    };
    assert_eq!(register_with(&mut c, &b, &second, &compressed).code, 0);
    let dw_c = route_data(&mut c, "DwC").expect("DwC registered");
    assert_eq!(dw_c.queue_datas[0].read_queue_nums, 4);
    // A wrong bodyCrc32 and a bad topic value are refused as on the loop, changing nothing.
    let bad_crc = RegisterOptions {
        body_crc32: Some(12345),
        ..RegisterOptions::default()
    };
    let third = body_with(3, &[topic("DwD", 8, 6)]);
    let resp = register_with(&mut c, &b, &third, &bad_crc);
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert_eq!(resp.remark.as_deref(), Some("crc32 not match"));
    let resp = register(&mut c, &b, &body_with(4, &[topic("DwE", 8, 255)]));
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.as_deref().unwrap_or("").contains("perm 255"));
    assert!(route_data(&mut c, "DwD").is_none());
    assert!(route_data(&mut c, "DwE").is_none());
    assert!(route_data(&mut c, "DwC").is_some());
}

#[test]
fn an_unchanged_body_is_applied_without_being_parsed_on_the_loop_or_off_it() {
    // decodeOnLoopMaxBytes: 1 MiB keeps this body on the loop, 0 sends it to the worker.
    for on_loop_max in [1 << 20, 0] {
        let server = TestServer::start_with(|c| {
            c.decode_on_loop_max_bytes = on_loop_max;
            c.config_black_list = JAVA_CONFIG_BLACK_LIST.into();
        });
        let mut c = server.client();
        let b = Broker::new("DW", "dw-same", "10.3.0.12:10911", 0);
        let three = [topic("U1", 8, 6), topic("U2", 8, 6), topic("U3", 8, 6)];
        assert_eq!(register(&mut c, &b, &body_with(1, &three)).code, 0);
        // A body of three topics is refused from now on, if it is parsed.
        let fewer = b"maxTopicsPerRegistration=2";
        let resp = c
            .request(request::UPDATE_NAMESRV_CONFIG, &[], fewer)
            .unwrap();
        assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
        let again = register(&mut c, &b, &body_with(1, &three));
        assert_eq!(again.code, response::SUCCESS, "{:?}", again.remark);
        assert_eq!(stat(&mut c, "registrationsUnchanged"), 1);
        // The same topics under a new dataVersion are another body: parsed, and refused.
        let changed = register(&mut c, &b, &body_with(2, &three));
        assert_eq!(changed.code, response::SYSTEM_ERROR, "{on_loop_max}");
        assert_eq!(stat(&mut c, "topics"), 3);
    }
}

#[test]
fn requests_behind_a_registration_decoded_off_the_loop_are_answered_after_it() {
    let server = TestServer::start_with(|c| c.decode_on_loop_max_bytes = 0);
    let b = Broker::new("DW", "dw-order", "10.3.0.2:10911", 0);
    let body = json_bytes(&body_with(1, &[topic("DwOrder", 8, 6)]));
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut frames = request_frame(request::REGISTER_BROKER, 1, &register_ext(&b), &body);
    let route = [("topic", "DwOrder")];
    frames.extend(request_frame(
        request::GET_ROUTEINFO_BY_TOPIC,
        2,
        &route,
        b"",
    ));
    s.write_all(&frames).unwrap();
    let first = read_command(&mut s);
    assert_eq!((first.opaque, first.code), (1, response::SUCCESS));
    // Read after the registration was applied: the route is there.
    let second = read_command(&mut s);
    assert_eq!((second.opaque, second.code), (2, response::SUCCESS));
}

#[test]
fn a_large_body_is_hashed_off_the_loop_and_not_decoded_while_unchanged() {
    let server = TestServer::start();
    let mut c = server.client();
    c.set_timeout(Duration::from_secs(60));
    let b = Broker::new("DW", "dw-big", "10.3.0.3:10911", 0);
    let topics: Vec<_> = (0..2_500)
        .map(|i| topic(&format!("DwBig{i:05}"), 8, 6))
        .collect();
    let body = body_with(1, &topics);
    assert!(json_bytes(&body).len() > 64 * 1024, "hashed by the worker");
    assert_eq!(register(&mut c, &b, &body).code, response::SUCCESS);
    assert_eq!(register(&mut c, &b, &body).code, response::SUCCESS);
    assert_eq!(stat(&mut c, "registrationsUnchanged"), 1);
    assert_eq!(stat(&mut c, "topics"), 2_500);
    assert!(route_data(&mut c, "DwBig02499").is_some());
}

/// Sends `body` as a registration of `b` over a connection of its own and, until its answer
/// arrives, asks for a route over `good`: returns (the registration's answer, how many route
/// answers `good` got while the registration's answer had not arrived).
///
/// A body decoded on the loop would hold every turn until it is done, so at most one route
/// answer (one written in the same turn as the registration's) could come first; decoded off
/// the loop, the loop serves `good` all along.
fn served_while_pending(
    addr: &str,
    b: &Broker,
    body: &[u8],
    compressed: bool,
    good: &mut rmq_namesrv::client::Client,
) -> (RemotingCommand, usize) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut ext = register_ext(b);
    if compressed {
        ext.push(("compressed", "true"));
    }
    s.write_all(&request_frame(request::REGISTER_BROKER, 1, &ext, body))
        .unwrap();
    s.set_nonblocking(true).unwrap();
    let mut served = 0;
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline {
        let mut byte = [0u8; 1];
        match s.peek(&mut byte) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("registration connection: {e}"),
        }
        assert_eq!(route(good, "Probe").code, response::SUCCESS);
        served += 1;
    }
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
    (read_command(&mut s), served)
}

#[test]
fn a_zlib_bomb_and_a_huge_json_body_do_not_stall_a_client_on_another_connection() {
    let server = TestServer::start();
    let mut c = server.client();
    let prober = Broker::new("DW", "dw-probe", "10.3.0.4:10911", 0);
    assert_eq!(
        register(&mut c, &prober, &body_with(1, &[topic("Probe", 8, 6)])).code,
        0
    );
    let mut good = server.client();
    let evil = Broker::new("DW", "dw-evil", "10.3.0.5:10911", 0);
    // 64 MiB of zeros: a 65 KB zlib stream that stops at maxInflatedBodyLength (16 MiB).
    let bomb = miniz_oxide::deflate::compress_to_vec_zlib(&vec![0u8; 64 << 20], 10);
    let (resp, served) = served_while_pending(&server.addr, &evil, &bomb, true, &mut good);
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp
        .remark
        .unwrap_or_default()
        .contains("inflates beyond 16777216"));
    assert!(
        served >= 3,
        "{served} route answers while the bomb inflated"
    );
    // ~8 MB of JSON whose last topic is refused: decoded to the end, then refused.
    let mut topics: Vec<_> = (0..50_000)
        .map(|i| topic(&format!("Evil{i:06}"), 8, 6))
        .collect();
    topics.push(topic("EvilLast", 8, 255));
    let huge = json_bytes(&body_with(1, &topics));
    let (resp, served) = served_while_pending(&server.addr, &evil, &huge, false, &mut good);
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("perm 255"));
    assert!(served >= 3, "{served} route answers while the body decoded");
    assert_eq!(
        stat(&mut c, "topics"),
        1,
        "nothing of the refused bodies was applied"
    );
}

/// REGISTER_TOPIC_IN_NAMESRV (217) of `topic` with `body`; the answer as it came.
fn register_topic(c: &mut Client, topic: &str, body: &[u8]) -> RemotingCommand {
    c.request(
        request::REGISTER_TOPIC_IN_NAMESRV,
        &[("topic", topic)],
        body,
    )
    .expect("217 response")
}

/// A TopicRouteData whose brokerDatas pad it to about `bytes`, with one queue data for
/// broker `dw-route` with `perm`.
fn padded_route(bytes: usize, perm: i32) -> Vec<u8> {
    let mut out = String::from(r#"{"brokerDatas":["#);
    let mut i = 0;
    while out.len() < bytes {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            r#"{{"brokerAddrs":{{"0":"10.4.{}.{}:10911"}},"brokerName":"pad-{i}","cluster":"P"}}"#,
            i / 250,
            i % 250
        ));
        i += 1;
    }
    out.push_str(&format!(
        r#"],"queueDatas":[{{"brokerName":"dw-route","perm":{perm},"readQueueNums":3,"topicSysFlag":0,"writeQueueNums":3}}]}}"#
    ));
    out.into_bytes()
}

#[test]
fn a_large_topic_route_body_is_decoded_off_the_loop_and_checked_as_on_it() {
    let server = TestServer::start();
    let mut c = server.client();
    let b = Broker::new("DW", "dw-route", "10.3.0.6:10911", 0);
    assert_eq!(
        register(&mut c, &b, &body_with(1, &[topic("Own", 8, 6)])).code,
        0
    );
    let body = padded_route(512 * 1024, 6);
    let resp = register_topic(&mut c, "Big217", &body);
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    let r = route_data(&mut c, "Big217").expect("registered");
    assert_eq!(r.queue_datas[0].read_queue_nums, 3);
    let bad = padded_route(512 * 1024, 255);
    let resp = register_topic(&mut c, "Bad217", &bad);
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("perm 255"));
    assert!(route_data(&mut c, "Bad217").is_none());
    let broken = [&body[..body.len() - 1], b"x"].concat();
    let resp = register_topic(&mut c, "Broken", &broken);
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("TopicRouteData"));
}

#[test]
fn data_version_and_config_update_bodies_longer_than_any_real_one_are_refused() {
    let server = TestServer::start_with(|c| c.config_black_list = JAVA_CONFIG_BLACK_LIST.into());
    let mut c = server.client();
    let ext = [
        ("brokerName", "dw-q"),
        ("brokerAddr", "10.3.0.7:10911"),
        ("clusterName", "DW"),
        ("brokerId", "0"),
    ];
    let padded = format!(
        r#"{{"counter":1,"stateVersion":0,"timestamp":1,"pad":"{}"}}"#,
        "x".repeat(5000)
    );
    let resp = c
        .request(request::QUERY_DATA_VERSION, &ext, padded.as_bytes())
        .unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("more than 4096"));
    let fits = br#"{"counter":1,"stateVersion":0,"timestamp":1}"#;
    let resp = c.request(request::QUERY_DATA_VERSION, &ext, fits).unwrap();
    assert_eq!(resp.code, response::SUCCESS);

    let lines = "routeCacheMaxBytes=4194304\n".repeat(1000);
    let resp = c
        .request(request::UPDATE_NAMESRV_CONFIG, &[], lines.as_bytes())
        .unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("more than 16384"));
    let resp = c
        .request(
            request::UPDATE_NAMESRV_CONFIG,
            &[],
            b"routeCacheMaxBytes=4194304\n",
        )
        .unwrap();
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
}

#[test]
fn a_registration_applied_in_steps_is_answered_once_every_topic_is_in() {
    let server = TestServer::start();
    let b = Broker::new("DW", "dw-steps", "10.3.0.8:10911", 0);
    let topics: Vec<_> = (0..3_000)
        .map(|i| topic(&format!("Step{i:05}"), 8, 6))
        .collect();
    let first = json_bytes(&body_with(1, &topics));
    let changed: Vec<_> = topics.iter().map(|t| topic(&t.topic_name, 2, 4)).collect();
    let second = json_bytes(&body_with(2, &changed));
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let route = [("topic", "Step02999")];
    let mut frames = request_frame(request::REGISTER_BROKER, 1, &register_ext(&b), &first);
    frames.extend(request_frame(
        request::GET_ROUTEINFO_BY_TOPIC,
        2,
        &route,
        b"",
    ));
    frames.extend(request_frame(
        request::REGISTER_BROKER,
        3,
        &register_ext(&b),
        &second,
    ));
    frames.extend(request_frame(
        request::GET_ROUTEINFO_BY_TOPIC,
        4,
        &route,
        b"",
    ));
    s.write_all(&frames).unwrap();
    let answers: Vec<RemotingCommand> = (0..4).map(|_| read_command(&mut s)).collect();
    let codes: Vec<(i32, i32)> = answers.iter().map(|a| (a.opaque, a.code)).collect();
    assert_eq!(codes, [(1, 0), (2, 0), (3, 0), (4, 0)]);
    let perm_of = |a: &RemotingCommand| {
        let route = model::TopicRouteData::decode(&a.body).expect("route decodes");
        route.queue_datas[0].perm
    };
    // The last topic of each registration is in when the next request is answered.
    assert_eq!((perm_of(&answers[1]), perm_of(&answers[3])), (6, 4));
    let mut c = server.client();
    assert_eq!(stat(&mut c, "topics"), 3_000);
    let first_topic = route_data(&mut c, "Step00000").expect("registered");
    assert_eq!(first_topic.queue_datas[0].read_queue_nums, 2);
}

/// `count` topics named `{prefix}{i:05}` with the given queues and perm.
fn numbered(prefix: &str, count: usize, queues: i32, perm: i32) -> Vec<TopicConfig> {
    (0..count)
        .map(|i| topic(&format!("{prefix}{i:05}"), queues, perm))
        .collect()
}

#[test]
fn a_registration_applied_in_steps_gives_the_routes_and_answer_of_one_applied_at_once() {
    // 3,000 topics in one body are applied in steps (more than 1,000); the same topics in
    // three bodies of 1,000 are each applied at once (without deleteTopicWithBrokerRegistration
    // a body only adds and changes topics, so both end with the same registry).
    let topics = numbered("Same", 3_000, 8, 6);
    let b = Broker::new("DW", "dw-same", "10.3.0.9:10911", 0);
    let stepped = TestServer::start();
    let mut s = stepped.client();
    s.set_timeout(Duration::from_secs(60));
    let big = register(&mut s, &b, &body_with(1, &topics));
    let at_once = TestServer::start();
    let mut o = at_once.client();
    let mut last = None;
    for (i, part) in topics.chunks(1_000).enumerate() {
        last = Some(register(&mut o, &b, &body_with(1 + i as i64, part)));
    }
    let last = last.expect("three registrations");
    assert_eq!(big.code, response::SUCCESS, "{:?}", big.remark);
    assert_eq!(
        (big.code, &big.remark, &big.ext_fields, &big.body),
        (last.code, &last.remark, &last.ext_fields, &last.body)
    );
    for t in &topics {
        let (got, want) = (route(&mut s, &t.topic_name), route(&mut o, &t.topic_name));
        assert_eq!(
            (got.code, &got.body),
            (want.code, &want.body),
            "{}",
            t.topic_name
        );
    }
    assert_eq!(cluster_info(&mut s), cluster_info(&mut o));
    let sorted = |c: &mut rmq_namesrv::client::Client| {
        let mut all = c.get_all_topic_list().expect("topic list");
        all.sort();
        all
    };
    assert_eq!(sorted(&mut s), sorted(&mut o));
}

/// Polls the `topics` stat over `c` until it shows a registration of `adding` topics on top of
/// `base` partly applied (true), or wholly (false: the steps went by unobserved).
fn seen_partly_applied(c: &mut rmq_namesrv::client::Client, base: i64, adding: i64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let now = stat(c, "topics");
        if now > base && now < base + adding {
            return true;
        }
        if now == base + adding {
            return false;
        }
    }
    false
}

#[test]
fn clients_are_served_and_route_changes_wait_while_a_registration_applies_in_steps() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut admin = server.client();
    admin.set_timeout(Duration::from_secs(120));
    let mut broker = server.client();
    broker.set_timeout(Duration::from_secs(120));
    let b = Broker::new("DW", "dw-wait", "10.3.0.10:10911", 0);
    let n = 40_000;
    let first = json_bytes(&body_with(1, &numbered("Wait", n, 8, 6)));
    let opaque = broker
        .send_register_broker(&b.identity(), &first, &RegisterOptions::default())
        .unwrap();
    // Another client's requests are answered between the steps: it sees some topics in.
    assert!(
        seen_partly_applied(&mut c, 0, n as i64),
        "a client was served while the registration applied"
    );
    // A route change sent meanwhile waits for the last step: the topic it deletes is put by
    // a later step, and deleted after it.
    let last = format!("Wait{:05}", n - 1);
    admin.delete_topic(&last, None).expect("delete answered");
    assert_eq!(stat(&mut c, "topics"), n as i64 - 1);
    assert!(route_data(&mut c, &last).is_none());
    let answer = broker.read_response(opaque).expect("registration answered");
    assert_eq!(answer.code, response::SUCCESS, "{:?}", answer.remark);
    // The broker's connection closes while its next registration applies: its unregistration
    // waits for the last step, then removes every topic (none is put after it).
    let second = json_bytes(&body_with(2, &numbered("More", n, 8, 6)));
    broker
        .send_register_broker(&b.identity(), &second, &RegisterOptions::default())
        .unwrap();
    assert!(seen_partly_applied(&mut c, n as i64 - 1, n as i64));
    drop(broker);
    assert!(
        wait_until(Duration::from_secs(120), || stat(&mut c, "topics") == 0),
        "no topic of the closed broker stays"
    );
    assert_eq!(stat(&mut c, "brokers"), 0);
    assert!(cluster_info(&mut c).broker_addr_table.is_empty());
}

#[test]
fn a_small_body_dropping_thousands_of_topics_removes_them_in_steps() {
    // With deleteTopicWithBrokerRegistration, a body that no longer reports 3,000 topics
    // removes their queue entries: more than 1,000, so in steps, before its one topic is put.
    let server = TestServer::start_with(|c| c.delete_topic_with_broker_registration = true);
    let mut c = server.client();
    c.set_timeout(Duration::from_secs(60));
    let b = Broker::new("DW", "dw-drop", "10.3.0.11:10911", 0);
    let many = numbered("Drop", 3_000, 8, 6);
    assert_eq!(register(&mut c, &b, &body_with(1, &many)).code, 0);
    assert_eq!(stat(&mut c, "topics"), 3_000);
    let one = body_with(2, &[topic("Drop00007", 2, 4)]);
    let answer = register(&mut c, &b, &one);
    assert_eq!(answer.code, response::SUCCESS, "{:?}", answer.remark);
    assert_eq!(stat(&mut c, "topics"), 1);
    assert!(route_data(&mut c, "Drop00000").is_none());
    assert!(route_data(&mut c, "Drop02999").is_none());
    let kept = route_data(&mut c, "Drop00007").expect("still reported");
    assert_eq!(kept.queue_datas[0].perm, 4);
}
