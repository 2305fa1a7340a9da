use super::*;
use crate::event_loop::oneway;
use std::time::Duration;

impl Processor {
    pub fn handle(
        &mut self,
        ctx: &RequestContext,
        counters: &LoopStats,
        cmd: &RemotingCommand,
        out: &mut Vec<u8>,
    ) -> Effects {
        self.handle_with(ctx, counters, cmd, BodyWork::OnLoop, out)
    }
}

#[test]
fn refusals_are_answered_with_javas_codes_and_shapes() {
    let unknown = Refusal::Parse(ParseError::NotSupported(31)).reply();
    assert_eq!(unknown.code, response::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        unknown.remark.as_deref(),
        Some(" request type 31 not supported")
    );
    let missing = Refusal::Parse(ParseError::MissingField("topic")).reply();
    assert_eq!(missing.code, response::SYSTEM_ERROR);
    // Java's full unregistration queue: SYSTEM_ERROR, no remark, no ext fields.
    let full = Refusal::UnregisterQueueFull.reply();
    assert_eq!((full.code, full.remark), (response::SYSTEM_ERROR, None));
    assert!(matches!(full.ext, ReplyExt::None));
    // Handlers with a response header answer `"extFields":{}` even when refusing.
    for refusal in [
        Refusal::CrcMismatch,
        Refusal::NoKvItem {
            namespace: "NS".into(),
            key: "k".into(),
        },
    ] {
        assert!(matches!(refusal.reply().ext, ReplyExt::Pairs(p) if p.is_empty()));
    }
    let busy = Refusal::Kv(KvRefusal::Busy {
        waiting: 2,
        limit: 1,
    });
    assert_eq!(busy.reply().code, response::SYSTEM_BUSY);
    let full = Refusal::Kv(KvRefusal::TooManyEntries { limit: 1 });
    assert_eq!(full.reply().code, response::SYSTEM_ERROR);
    let overloaded = Refusal::Overloaded.reply();
    assert_eq!(overloaded.code, response::SYSTEM_BUSY);
    assert_eq!(overloaded.remark.as_deref(), Some(OVERLOAD_REMARK));
}

/// A processor with its threads' channels, as the server builds it.
struct Harness {
    processor: Processor,
    unregistrations: crossbeam_channel::Receiver<UnregisterBatch>,
    _dir: crate::test_support::TempDir,
}

fn harness() -> Harness {
    harness_with(NamesrvConfig::default())
}

fn harness_with(config: NamesrvConfig) -> Harness {
    let dir = crate::test_support::TempDir::new("processor");
    let kv = KvStore::open(&dir.join("kv.json")).expect("kv store");
    let (durable, _writer) = kv
        .spawn_writer("kv-writer", Box::new(|| {}))
        .expect("writer");
    let (unregistrations_tx, unregistrations) = crossbeam_channel::bounded(16);
    let (notifications, _) =
        oneway::spawn_sender("test-notify", 16, Duration::from_millis(300)).expect("sender");
    let outbox = Outbox {
        unregistrations: unregistrations_tx,
        notifications,
        durable,
    };
    Harness {
        processor: Processor::new(config, kv, outbox),
        unregistrations,
        _dir: dir,
    }
}

/// A registration body: dataVersion `counter`, topics (name, perm).
fn register_body(counter: i64, topics: &[(&str, i32)]) -> String {
    let table: Vec<String> = topics
        .iter()
        .map(|(name, perm)| {
            format!(
                r#""{name}":{{"topicName":"{name}","readQueueNums":4,"writeQueueNums":4,"perm":{perm},"topicSysFlag":0}}"#
            )
        })
        .collect();
    format!(
        r#"{{"topicConfigSerializeWrapper":{{"topicConfigTable":{{{}}},"dataVersion":{{"counter":{counter},"stateVersion":0,"timestamp":{counter}}}}},"filterServerList":[]}}"#,
        table.join(",")
    )
}

/// Every header field any request reads, naming the broker and topic the harness holds.
const FIELDS: &[(&str, &str)] = &[
    ("brokerName", "b"),
    ("brokerAddr", "10.0.0.1:10911"),
    ("clusterName", "c"),
    ("haServerAddr", "10.0.0.1:10912"),
    ("brokerId", "0"),
    ("topic", "T1"),
    ("cluster", "c"),
    ("namespace", "NS"),
    ("key", "k"),
    ("value", "v"),
];

/// Everything a client can read of the route table: cluster info, every topic's route, and
/// how many brokers are live.
fn routes_seen(table: &RouteTable) -> Vec<u8> {
    let mut out = Vec::new();
    table.cluster_info().encode(&mut out);
    let mut topics: Vec<&str> = table.topic_names().collect();
    topics.sort_unstable();
    for topic in topics {
        out.extend_from_slice(topic.as_bytes());
        if let Some(route) = table.pickup_route(topic) {
            route.encode(crate::route::model::Dialect::Standard, &mut out);
        }
    }
    out.extend_from_slice(&table.live_broker_count().to_le_bytes());
    out
}

/// Each request code is sent, with fields and a body that would change something, to a
/// processor holding one broker; the codes whose handling changed what clients read of the
/// routes (directly, or through the unregistration batches it queued) are exactly the rows
/// that say `writes_routes`, which the server's ordering rule reads.
#[test]
fn the_codes_whose_handlers_change_routes_are_the_rows_that_say_so() {
    let ctx = RequestContext {
        peer: None,
        now_ms: 1_000,
        reply_to: crate::event_loop::ConnId::for_test(1),
    };
    let counters = crate::event_loop::LoopStats::default();
    let mut changed_routes = Vec::new();
    for row in codes::REQUEST_CODES {
        let mut h = harness();
        let first = register_body(1, &[("T1", 6), ("T2", 4)]);
        let register = RemotingCommand::for_test(codes::request::REGISTER_BROKER, FIELDS, &first);
        h.processor
            .handle(&ctx, &counters, &register, &mut Vec::new());
        assert_eq!(h.processor.table.topic_count(), 2);
        let body = match row.code {
            codes::request::REGISTER_BROKER => register_body(2, &[("T3", 6)]),
            codes::request::REGISTER_TOPIC_IN_NAMESRV => {
                r#"{"queueDatas":[{"brokerName":"b","readQueueNums":1,"writeQueueNums":1,"perm":6,"topicSysFlag":0}]}"#.to_string()
            }
            _ => String::new(),
        };
        let before = routes_seen(&h.processor.table);
        let cmd = RemotingCommand::for_test(row.code, FIELDS, &body);
        h.processor.handle(&ctx, &counters, &cmd, &mut Vec::new());
        while let Ok(batch) = h.unregistrations.try_recv() {
            h.processor
                .apply_unregistrations(&mut batch.into(), usize::MAX, 0);
        }
        if routes_seen(&h.processor.table) != before {
            changed_routes.push(row.code);
        }
    }
    let marked: Vec<i32> = codes::REQUEST_CODES
        .iter()
        .filter(|r| r.writes_routes)
        .map(|r| r.code)
        .collect();
    assert_eq!(changed_routes, marked);
    assert_eq!(marked, [103, 104, 205, 216, 217, 327]);
}

const CTX: RequestContext = RequestContext {
    peer: None,
    now_ms: 1_000,
    reply_to: crate::event_loop::ConnId::for_test(1),
};

/// A processor whose bodies over 1 KiB are decoded off the loop.
fn small_loop() -> Harness {
    harness_with(NamesrvConfig {
        decode_on_loop_max_bytes: 1024,
        ..NamesrvConfig::default()
    })
}

/// `n` topics named `{prefix}{i}`, perm 6.
fn numbered(prefix: &str, n: usize) -> Vec<(String, i32)> {
    (0..n).map(|i| (format!("{prefix}{i}"), 6)).collect()
}

fn body_of(counter: i64, topics: &[(String, i32)]) -> String {
    let topics: Vec<(&str, i32)> = topics.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    register_body(counter, &topics)
}

/// Handles `cmd` as the server does: a body sent off the loop is decoded (here, as the
/// worker would) and handled again; returns the reply bytes and how often it went off.
fn handle_through_the_worker(h: &mut Harness, cmd: &RemotingCommand) -> (Vec<u8>, usize) {
    let counters = crate::event_loop::LoopStats::default();
    let (mut out, mut trips) = (Vec::new(), 0);
    let mut work = BodyWork::OnLoop;
    loop {
        let effects = h
            .processor
            .handle_with(&CTX, &counters, cmd, work, &mut out);
        let Some(job) = effects.off_loop else {
            return (out, trips);
        };
        assert!(out.is_empty(), "nothing answered before the worker's part");
        trips += 1;
        let decoded = decode_off_loop(cmd, &job, &mut Default::default());
        work = BodyWork::OffLoop(Box::new(decoded));
    }
}

/// The decode worker's job for `cmd`, which is handled no further.
fn off_loop_job(h: &mut Harness, cmd: &RemotingCommand) -> DecodeJob {
    let counters = crate::event_loop::LoopStats::default();
    let effects = h
        .processor
        .handle_with(&CTX, &counters, cmd, BodyWork::OnLoop, &mut Vec::new());
    *effects.off_loop.expect("a large body")
}

#[test]
fn a_small_changed_body_is_decoded_and_applied_on_the_loop_in_one_go() {
    let mut h = small_loop();
    let body = body_of(1, &numbered("S", 5));
    assert!(body.len() <= 1024);
    let cmd = RemotingCommand::for_test(codes::request::REGISTER_BROKER, FIELDS, &body);
    let (out, trips) = handle_through_the_worker(&mut h, &cmd);
    assert_eq!(trips, 0);
    assert!(!out.is_empty(), "answered at once");
    assert_eq!(h.processor.table.topic_count(), 5);
}

#[test]
fn a_large_body_goes_to_the_worker_before_it_is_hashed_or_counted() {
    let mut h = small_loop();
    let body = body_of(1, &numbered("L", 50));
    assert!(body.len() > 1024);
    let cmd = RemotingCommand::for_test(codes::request::REGISTER_BROKER, FIELDS, &body);
    let counters = crate::event_loop::LoopStats::default();
    let mut out = Vec::new();
    let effects = h
        .processor
        .handle_with(&CTX, &counters, &cmd, BodyWork::OnLoop, &mut out);
    let job = effects.off_loop.expect("sent off the loop");
    assert_eq!(job.unchanged, None, "a broker not registered yet");
    assert!(out.is_empty());
    assert_eq!(h.processor.table.topic_count(), 0);
    assert_eq!(h.processor.stats.registrations, 0);
    let decoded = decode_off_loop(&cmd, &job, &mut Default::default());
    assert!(matches!(
        decoded,
        Decoded::Registration {
            body: Some(Ok(_)),
            ..
        }
    ));
    let work = BodyWork::OffLoop(Box::new(decoded));
    let effects = h
        .processor
        .handle_with(&CTX, &counters, &cmd, work, &mut out);
    assert!(effects.off_loop.is_none() && !out.is_empty());
    assert_eq!(h.processor.table.topic_count(), 50);
    assert_eq!(h.processor.stats.registrations, 1);
}

#[test]
fn the_worker_does_not_decode_the_body_a_broker_registered_last() {
    let mut h = small_loop();
    let body = body_of(1, &numbered("L", 50));
    let cmd = RemotingCommand::for_test(codes::request::REGISTER_BROKER, FIELDS, &body);
    assert_eq!(handle_through_the_worker(&mut h, &cmd).1, 1);
    let job = off_loop_job(&mut h, &cmd);
    assert!(job.unchanged.is_some());
    let decoded = decode_off_loop(&cmd, &job, &mut Default::default());
    assert!(matches!(decoded, Decoded::Registration { body: None, .. }));
    assert_eq!(handle_through_the_worker(&mut h, &cmd).1, 1);
    assert_eq!(h.processor.stats.registrations_unchanged, 1);
}

#[test]
fn a_body_the_worker_skipped_goes_back_when_a_write_came_in_between() {
    let mut h = small_loop();
    let body = body_of(1, &numbered("L", 50));
    let cmd = RemotingCommand::for_test(codes::request::REGISTER_BROKER, FIELDS, &body);
    handle_through_the_worker(&mut h, &cmd);
    // The worker skips the body as unchanged; meanwhile an admin deletes one of its topics.
    let job = off_loop_job(&mut h, &cmd);
    let skipped = decode_off_loop(&cmd, &job, &mut Default::default());
    let delete = RemotingCommand::for_test(
        codes::request::DELETE_TOPIC_IN_NAMESRV,
        &[("topic", "L7")],
        "",
    );
    let counters = crate::event_loop::LoopStats::default();
    h.processor
        .handle(&CTX, &counters, &delete, &mut Vec::new());
    assert_eq!(h.processor.table.topic_count(), 49);
    let mut out = Vec::new();
    let work = BodyWork::OffLoop(Box::new(skipped));
    let effects = h
        .processor
        .handle_with(&CTX, &counters, &cmd, work, &mut out);
    let again = effects.off_loop.expect("decoded after all");
    assert_eq!(again.unchanged, None);
    let work = BodyWork::OffLoop(Box::new(decode_off_loop(
        &cmd,
        &again,
        &mut Default::default(),
    )));
    h.processor
        .handle_with(&CTX, &counters, &cmd, work, &mut out);
    // As Java: the registration puts back what the admin deleted.
    assert_eq!(h.processor.table.topic_count(), 50);
    assert_eq!(h.processor.stats.registrations, 2);
    assert_eq!(h.processor.stats.registrations_unchanged, 0);
}

#[test]
fn a_large_topic_route_body_goes_to_the_worker_too() {
    let mut h = small_loop();
    let register = RemotingCommand::for_test(
        codes::request::REGISTER_BROKER,
        FIELDS,
        register_body(1, &[]),
    );
    handle_through_the_worker(&mut h, &register);
    let pad = "x".repeat(2048);
    let body = format!(
        r#"{{"pad":"{pad}","queueDatas":[{{"brokerName":"b","readQueueNums":1,"writeQueueNums":1,"perm":6,"topicSysFlag":0}}]}}"#
    );
    let cmd = RemotingCommand::for_test(
        codes::request::REGISTER_TOPIC_IN_NAMESRV,
        &[("topic", "R")],
        &body,
    );
    let (out, trips) = handle_through_the_worker(&mut h, &cmd);
    assert_eq!(trips, 1);
    assert!(!out.is_empty());
    assert!(h.processor.table.pickup_route("R").is_some());
}

/// A group of more topics than a turn's steps loses them over several calls before its last
/// address goes; meanwhile route writers wait, as for a registration applied in steps.
#[test]
fn a_large_group_is_removed_in_steps_while_route_writers_wait() {
    let mut h = harness();
    let ctx = RequestContext {
        peer: None,
        now_ms: 1_000,
        reply_to: crate::event_loop::ConnId::for_test(1),
    };
    let counters = crate::event_loop::LoopStats::default();
    let register = body_of(1, &numbered("T", 1_000));
    let cmd = RemotingCommand::for_test(codes::request::REGISTER_BROKER, FIELDS, &register);
    handle_through_the_worker(&mut h, &cmd);
    assert_eq!(h.processor.table.topic_count(), 1_000);
    let unregister = RemotingCommand::for_test(codes::request::UNREGISTER_BROKER, FIELDS, "");
    h.processor
        .handle(&ctx, &counters, &unregister, &mut Vec::new());
    let mut queue: VecDeque<Unregistration> = h.unregistrations.try_recv().unwrap().into();
    let mut calls = 0;
    while !queue.is_empty() {
        assert_eq!(
            h.processor.apply_unregistrations(&mut queue, 300, 0),
            300.min(1_016 - calls * 300)
        );
        calls += 1;
        // Each topic's route is as before (the group with its address) or gone.
        let left = h.processor.table.topic_count();
        assert_eq!(left, 1_000usize.saturating_sub(calls * 300));
        assert_eq!(h.processor.topic_steps_pending(), !queue.is_empty());
        assert_eq!(
            h.processor.table.broker_group_count(),
            usize::from(!queue.is_empty())
        );
    }
    assert_eq!(calls, 4);
    assert_eq!(h.processor.table.live_broker_count(), 0);
    assert_eq!(h.processor.apply_unregistrations(&mut queue, 300, 0), 0);
}
