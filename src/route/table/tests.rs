use super::*;
use crate::route::model::{DataVersion, Dialect, TopicConfig};
use bytes::Bytes;

impl RouteTable {
    /// A registration with its topic configs all put at once.
    fn register_now(
        &mut self,
        req: &RegisterRequest<'_>,
        topics: TopicsInput<'_>,
    ) -> RegisterResult {
        let (mut result, steps) = self.register_broker(req, topics);
        if let (Some(mut steps), TopicsInput::Body(body)) = (steps, topics) {
            self.apply_topic_steps(&mut steps, body, usize::MAX);
            result.topics_changed = steps.changed;
        }
        result
    }

    fn expire_due(&mut self, now_ms: u64) -> Vec<ExpiredBroker> {
        self.expire_silent_brokers(now_ms, usize::MAX).0
    }

    fn data_version(&self, cluster: &str, addr: &str) -> Option<DataVersion> {
        self.live_id(cluster, addr)
            .map(|id| self.live[id].data_version)
    }
}

fn fp(hash: u64) -> BodyFingerprint {
    BodyFingerprint {
        len: 1,
        header_crc: 0,
        hash,
    }
}

fn req<'a>(
    cluster: &'a str,
    name: &'a str,
    addr: &'a str,
    id: i64,
    now_ms: u64,
) -> RegisterRequest<'a> {
    RegisterRequest {
        broker: RegisteringBroker {
            cluster,
            broker_addr: addr,
            broker_name: name,
            broker_id: id,
            ha_server_addr: "ha:1",
            zone_name: None,
            heartbeat_timeout_ms: None,
            enable_acting_master: Some(false),
        },
        conn: Some(1),
        now_ms,
        fingerprint: fp(now_ms),
    }
}

fn body(counter: i64, topics: &[(&str, i32)]) -> RegisterBody {
    RegisterBody {
        data_version: DataVersion {
            counter,
            state_version: 0,
            timestamp: 0,
        },
        topics: topics
            .iter()
            .map(|(t, perm)| {
                (
                    t.to_string(),
                    TopicConfig {
                        topic_name: t.to_string(),
                        read_queue_nums: 4,
                        write_queue_nums: 4,
                        perm: *perm,
                        topic_sys_flag: 0,
                    },
                )
            })
            .collect(),
        filter_servers: Some(Vec::new()),
        mappings: Vec::new(),
    }
}

fn table() -> RouteTable {
    RouteTable::new(RouteSettings::default(), 1000)
}

fn unreg(cluster: &str, name: &str, addr: &str, id: i64) -> UnregisterRequest {
    UnregisterRequest {
        cluster: cluster.into(),
        broker_addr: addr.into(),
        broker_name: name.into(),
        broker_id: id,
    }
}

#[test]
fn first_registration_creates_cluster_broker_live_and_queue_entries() {
    let mut t = table();
    let r = t.register_now(
        &req("c", "b", "a:1", 0, 10),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    assert!(r.first);
    assert_eq!(r.topics_changed, 1);
    let route = t.pickup_route("T").unwrap();
    assert_eq!(
        route.broker_datas[0]
            .broker_addrs
            .get(&0)
            .map(String::as_str),
        Some("a:1")
    );
    assert_eq!(route.queue_datas[0].perm, 6);
    assert_eq!(
        t.cluster_info().cluster_addr_table["c"],
        vec!["b".to_string()]
    );
    assert_eq!(t.live_broker_count(), 1);
    assert_eq!(t.data_version("c", "a:1").unwrap().counter, 1);
}

#[test]
fn slave_gets_master_addresses_and_its_topics_are_ignored() {
    let mut t = table();
    t.register_now(
        &req("c", "b", "m:1", 0, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    let mut slave = req("c", "b", "s:1", 1, 0);
    slave.broker.enable_acting_master = None; // a 4.x slave
    let r = t.register_now(&slave, TopicsInput::Body(&body(1, &[("SlaveOnly", 6)])));
    assert_eq!(r.master_addr.as_deref(), Some("m:1"));
    assert_eq!(r.ha_server_addr.as_deref(), Some("ha:1"));
    assert!(t.pickup_route("SlaveOnly").is_none());
}

#[test]
fn same_address_under_a_new_id_replaces_the_old_id() {
    let mut t = table();
    t.register_now(
        &req("c", "b", "x:1", 1, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    t.register_now(
        &req("c", "b", "x:1", 0, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    let addrs = t.broker_member_group("b");
    assert_eq!(addrs.len(), 1);
    assert_eq!(addrs.get(&0).map(String::as_str), Some("x:1"));
}

#[test]
fn newer_state_version_fences_an_older_incarnation() {
    let mut t = table();
    let mut newer = body(1, &[("T", 6)]);
    newer.data_version.state_version = 5;
    t.register_now(&req("c", "b", "new:1", 0, 0), TopicsInput::Body(&newer));
    let r = t.register_now(
        &req("c", "b", "old:1", 0, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    assert!(r.fenced);
    assert_eq!(
        t.broker_member_group("b").get(&0).map(String::as_str),
        Some("new:1")
    );
}

#[test]
fn topic_configs_apply_only_when_the_data_version_changes() {
    let mut t = table();
    t.register_now(
        &req("c", "b", "a:1", 0, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    let r = t.register_now(
        &req("c", "b", "a:1", 0, 1),
        TopicsInput::Body(&body(1, &[("T", 4)])),
    );
    assert_eq!(r.topics_changed, 0);
    assert_eq!(t.pickup_route("T").unwrap().queue_datas[0].perm, 6);
    let r = t.register_now(
        &req("c", "b", "a:1", 0, 2),
        TopicsInput::Body(&body(2, &[("T", 4)])),
    );
    assert_eq!(r.topics_changed, 1);
    assert_eq!(t.pickup_route("T").unwrap().queue_datas[0].perm, 4);
}

#[test]
fn route_cache_survives_steady_registrations_and_drops_on_change() {
    let mut t = table();
    let b = body(1, &[("T", 6)]);
    t.register_now(&req("c", "b", "a:1", 0, 0), TopicsInput::Body(&b));
    let first = t.route_body("T", Dialect::Standard, || None).unwrap();
    assert!(t.is_unchanged_body(&req("c", "b", "a:1", 0, 0)));
    t.register_now(&req("c", "b", "a:1", 0, 0), TopicsInput::Unchanged);
    let again = t.route_body("T", Dialect::Standard, || None).unwrap();
    assert_eq!(first.as_ptr(), again.as_ptr(), "served from the cache");
    // A new slave changes the broker data: the cached body is rebuilt.
    t.register_now(&req("c", "b", "s:1", 1, 0), TopicsInput::Body(&b));
    let rebuilt = t.route_body("T", Dialect::Standard, || None).unwrap();
    assert_ne!(first, rebuilt);
    assert!(std::str::from_utf8(&rebuilt).unwrap().contains("s:1"));
    let legacy = t.route_body("T", Dialect::Legacy, || None).unwrap();
    assert!(std::str::from_utf8(&legacy)
        .unwrap()
        .contains("{0:\"a:1\",1:\"s:1\"}"));
}

/// Broker `b`'s body in churn round `round`: shared topics with queue counts and perm
/// that move every round, plus a private topic of the round.
fn churned_body(b: usize, round: i64) -> RegisterBody {
    let mut topics: Vec<(String, TopicConfig)> = (0..6)
        .map(|i| {
            let shift = (round + i + b as i64) % 3;
            (
                format!("shared_{i}"),
                1 + shift as i32,
                [6, 2, 4][shift as usize],
            )
        })
        .chain([(format!("private_{b}_{round}"), 2, 6)])
        .map(|(name, queues, perm)| {
            let tc = TopicConfig {
                topic_name: name.clone(),
                read_queue_nums: queues,
                write_queue_nums: queues + 1,
                perm,
                topic_sys_flag: 0,
            };
            (name, tc)
        })
        .collect();
    topics.rotate_left(round as usize % 7);
    let mut out = body(round, &[]);
    out.topics = topics;
    out
}

#[test]
fn churned_registrations_serve_the_same_route_bytes_as_a_fresh_table() {
    let addrs = ["a:1", "a:2", "a:3"];
    let names = ["b0", "b1", "b2"];
    let mut churned = table();
    for round in 1..=5 {
        for b in 0..3 {
            let r = req("c", names[b], addrs[b], 0, round as u64);
            churned.register_now(&r, TopicsInput::Body(&churned_body(b, round)));
        }
        // Fill the cache between rounds, so that stale bodies would be served if the
        // next round failed to drop them.
        for i in 0..6 {
            for dialect in [Dialect::Standard, Dialect::Legacy] {
                churned.route_body(&format!("shared_{i}"), dialect, || None);
            }
        }
    }
    let mut fresh = table();
    for b in 0..3 {
        let r = req("c", names[b], addrs[b], 0, 5);
        fresh.register_now(&r, TopicsInput::Body(&churned_body(b, 5)));
    }
    for b in 0..3 {
        for (topic, _) in churned_body(b, 5).topics {
            for dialect in [Dialect::Standard, Dialect::Legacy] {
                let want = fresh.route_body(&topic, dialect, || None).unwrap();
                let got = churned.route_body(&topic, dialect, || None).unwrap();
                assert_eq!(got, want, "{topic} {dialect:?}");
            }
        }
        // As in Java, topics a broker stopped reporting stay until it goes.
        assert!(churned
            .route_body(&format!("private_{b}_1"), Dialect::Standard, || None)
            .is_some());
    }
}

#[test]
fn cache_stays_within_its_byte_budget() {
    let mut t = RouteTable::new(
        RouteSettings {
            cache_max_bytes: 2000,
            ..RouteSettings::default()
        },
        1000,
    );
    let names: Vec<String> = (0..100).map(|i| format!("T{i}")).collect();
    let topics: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), 6)).collect();
    t.register_now(
        &req("c", "b", "a:1", 0, 0),
        TopicsInput::Body(&body(1, &topics)),
    );
    for n in &names {
        assert!(t.route_body(n, Dialect::Standard, || None).is_some());
    }
    assert!(t.cache.bytes() <= 2000);
}

#[test]
fn heartbeats_keep_brokers_and_silence_expires_them_once() {
    let mut t = table();
    let mut r = req("c", "b", "a:1", 0, 0);
    r.broker.heartbeat_timeout_ms = Some(10_000);
    t.register_now(&r, TopicsInput::Body(&body(1, &[("T", 6)])));
    assert!(t.heartbeat("c", "a:1", 9_000));
    assert!(!t.heartbeat("c", "nope:1", 9_000));
    assert!(
        t.expire_due(12_000).is_empty(),
        "heartbeat moved the deadline"
    );
    let expired = t.expire_due(20_000);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].request, unreg("c", "b", "a:1", 0));
    assert_eq!(expired[0].conn, Some(1));
    assert!(t.expire_due(40_000).is_empty(), "reported once");
    t.rearm("c", "a:1", 40_000);
    assert_eq!(
        t.expire_due(41_000).len(),
        1,
        "re-armed after a failed submit"
    );
}

/// What `query_data_version` hands out: the live broker's stored version and its text,
/// encoded anew after a registration changed the version and for another broker taking
/// over a freed slab id; nothing (and no refresh) for a broker not live; a refused answer
/// refreshes nothing.
#[test]
fn query_data_version_gives_the_stored_version_and_its_current_text() {
    let mut t = table();
    let mut r = req("c", "b", "a:1", 0, 0);
    r.broker.heartbeat_timeout_ms = Some(10_000);
    let seen = |t: &mut RouteTable, addr: &str, now_ms| {
        let answered = t.query_data_version("c", addr, now_ms, |stored| {
            Ok::<_, ()>(stored.map(|(v, text)| (*v, text.clone())))
        });
        answered.expect("answered")
    };
    let text = |v: DataVersion| {
        let mut out = Vec::new();
        v.encode(&mut out);
        Bytes::from(out)
    };
    for counter in [1, 1, 2, 2] {
        t.register_now(&r, TopicsInput::Body(&body(counter, &[("T", 6)])));
        let v = body(counter, &[]).data_version;
        assert_eq!(seen(&mut t, "a:1", 0), Some((v, text(v))));
    }
    assert_eq!(seen(&mut t, "nope:1", 0), None);
    // Refused: no refresh, so the broker expires on its old deadline.
    assert_eq!(
        t.query_data_version("c", "a:1", 9_000, |_| Err::<(), _>(())),
        Err(())
    );
    assert_eq!(t.expire_due(12_000).len(), 1);
    // The freed id now holds another broker, with its own version.
    t.unregister_batch(&[unreg("c", "b", "a:1", 0)]);
    let other = req("c", "d", "a:2", 0, 0);
    t.register_now(&other, TopicsInput::Body(&body(7, &[("T", 6)])));
    let v = body(7, &[]).data_version;
    assert_eq!(seen(&mut t, "a:2", 0), Some((v, text(v))));
    // Answered: refreshed, as a heartbeat does.
    let mut t = table();
    t.register_now(&r, TopicsInput::Body(&body(1, &[("T", 6)])));
    assert!(seen(&mut t, "a:1", 9_000).is_some());
    assert!(t.expire_due(12_000).is_empty());
}

#[test]
fn expiry_costs_only_the_brokers_due() {
    let mut t = table();
    for i in 0..100 {
        let addr = format!("a:{i}");
        let name = format!("b{i}");
        let mut r = req("c", &name, &addr, 0, 0);
        r.broker.heartbeat_timeout_ms = Some(if i < 10 { 1_000 } else { 100_000 });
        t.register_now(&r, TopicsInput::Body(&body(1, &[("T", 6)])));
    }
    assert_eq!(t.expire_due(2_000).len(), 10);
    // Only the ten due entries left the buckets.
    assert_eq!(t.expiry.len(), 90);
}

#[test]
fn closing_a_connection_lists_every_broker_registered_on_it() {
    let mut t = table();
    t.register_now(
        &req("c", "b1", "a:1", 0, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    t.register_now(
        &req("c", "b2", "a:2", 0, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    let mut other = req("c", "b3", "a:3", 0, 0);
    other.conn = Some(2);
    t.register_now(&other, TopicsInput::Body(&body(1, &[("T", 6)])));
    let mut requests = t.connection_closed(1);
    requests.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    assert_eq!(
        requests,
        vec![unreg("c", "b1", "a:1", 0), unreg("c", "b2", "a:2", 0)]
    );
    assert!(t.connection_closed(1).is_empty());
}

#[test]
fn a_batch_removes_groups_topics_and_clusters_and_keeps_reduced_groups() {
    let mut t = table();
    t.register_now(
        &req("c", "g1", "m1:1", 0, 0),
        TopicsInput::Body(&body(1, &[("A", 6), ("Both", 6)])),
    );
    t.register_now(
        &req("c", "g1", "s1:1", 1, 0),
        TopicsInput::Body(&body(1, &[("A", 6)])),
    );
    t.register_now(
        &req("d", "g2", "m2:1", 0, 0),
        TopicsInput::Body(&body(1, &[("Both", 6)])),
    );
    let out = t.unregister_batch(&[unreg("c", "g1", "s1:1", 1), unreg("d", "g2", "m2:1", 0)]);
    assert_eq!(out.brokers_removed, 2);
    assert_eq!(out.broker_groups_removed, 1);
    assert_eq!(t.broker_member_group("g1").len(), 1);
    assert!(t.broker_member_group("g2").is_empty());
    assert_eq!(t.pickup_route("Both").unwrap().queue_datas.len(), 1);
    assert!(!t.cluster_info().cluster_addr_table.contains_key("d"));
    let out = t.unregister_batch(&[unreg("c", "g1", "m1:1", 0)]);
    assert_eq!(out.topics_removed, 2);
    assert!(t.pickup_route("A").is_none());
    assert_eq!(t.topic_count(), 0);
    assert_eq!(t.cluster_count(), 0);
}

#[test]
fn master_loss_with_acting_master_wipes_write_and_rewrites_the_route() {
    let mut t = RouteTable::new(
        RouteSettings {
            support_acting_master: true,
            ..RouteSettings::default()
        },
        1000,
    );
    let mut m = req("c", "g", "m:1", 0, 0);
    m.broker.enable_acting_master = Some(true);
    let mut s = req("c", "g", "s:1", 1, 0);
    s.broker.enable_acting_master = Some(true);
    t.register_now(&m, TopicsInput::Body(&body(1, &[("T", 6)])));
    t.register_now(&s, TopicsInput::Body(&body(1, &[("T", 6)])));
    t.unregister_batch(&[unreg("c", "g", "m:1", 0)]);
    let route = t.pickup_route("T").unwrap();
    assert_eq!(route.queue_datas[0].perm, 4);
    assert_eq!(
        route.broker_datas[0]
            .broker_addrs
            .get(&0)
            .map(String::as_str),
        Some("s:1")
    );
    // Only the route copy is rewritten; the table keeps the slave under id 1.
    assert_eq!(
        t.broker_member_group("g").get(&1).map(String::as_str),
        Some("s:1")
    );
}

#[test]
fn write_permission_wipe_and_add_count_topics() {
    let mut t = table();
    t.register_now(
        &req("c", "g", "a:1", 0, 0),
        TopicsInput::Body(&body(1, &[("A", 7), ("B", 6)])),
    );
    assert_eq!(t.set_write_perm("g", false), 2);
    assert_eq!(t.pickup_route("A").unwrap().queue_datas[0].perm, 5);
    assert_eq!(t.set_write_perm("g", true), 2);
    assert_eq!(t.pickup_route("A").unwrap().queue_datas[0].perm, 6);
    assert_eq!(t.set_write_perm("nobody", true), 0);
}

#[test]
fn delete_topic_whole_or_per_cluster_and_registration_brings_it_back() {
    let mut t = table();
    let b = body(1, &[("T", 6), ("U", 6)]);
    t.register_now(&req("c", "g", "a:1", 0, 0), TopicsInput::Body(&b));
    t.register_now(&req("d", "h", "b:1", 0, 0), TopicsInput::Body(&b));
    assert!(t.delete_topic("T", Some("c")));
    assert_eq!(t.pickup_route("T").unwrap().queue_datas.len(), 1);
    assert!(!t.delete_topic("T", Some("zz")));
    assert!(t.delete_topic("U", None));
    assert!(t.pickup_route("U").is_none());
    // The deleting admin call makes the unchanged body need a full apply again.
    assert!(!t.is_unchanged_body(&req("c", "g", "a:1", 0, 0)));
    t.register_now(&req("c", "g", "a:1", 0, 0), TopicsInput::Body(&b));
    assert!(t.pickup_route("U").is_some());
}

#[test]
fn register_topic_checks_every_broker_of_a_new_topic() {
    let mut t = table();
    t.register_now(
        &req("c", "g", "a:1", 0, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    let q = |name: &str| QueueData {
        broker_name: name.into(),
        read_queue_nums: 2,
        write_queue_nums: 2,
        perm: 6,
        topic_sys_flag: 0,
    };
    assert!(!t.register_topic("New", &[q("g"), q("ghost")]));
    assert!(t.pickup_route("New").is_none());
    assert!(t.register_topic("New", &[q("g")]));
    assert_eq!(
        t.pickup_route("New").unwrap().queue_datas[0].read_queue_nums,
        2
    );
}

#[test]
fn topic_lists_by_cluster_flag_and_system() {
    let mut t = table();
    let mut b = body(1, &[("Plain", 6), ("Unit", 6)]);
    b.topics[1].1.topic_sys_flag = FLAG_UNIT;
    t.register_now(&req("c", "g", "a:1", 0, 0), TopicsInput::Body(&b));
    assert_eq!(
        list_names(&list(&mut t, ListKind::Cluster("c".into()))),
        names(&["Plain", "Unit"])
    );
    assert_eq!(
        list(&mut t, ListKind::Cluster("zz".into())),
        &b"{\"topicList\":[]}"[..]
    );
    assert_eq!(
        list(&mut t, ListKind::Unit),
        &b"{\"topicList\":[\"Unit\"]}"[..]
    );
    let (names, addr) = t.system_topics();
    assert_eq!(names, vec!["c".to_string(), "g".to_string()]);
    assert_eq!(addr.as_deref(), Some("a:1"));
    let mut all: Vec<&str> = t.topic_names().collect();
    all.sort();
    assert_eq!(all, vec!["Plain", "Unit"]);
}

#[test]
fn broad_topics_stay_consistent_through_inserts_and_removals() {
    let mut t = table();
    let names: Vec<String> = (0..100).map(|i| format!("g{i}")).collect();
    let addrs: Vec<String> = (0..100).map(|i| format!("a:{i}")).collect();
    for i in 0..100 {
        let b = body(1, &[("TBW102", 6), (names[i].as_str(), 6)]);
        t.register_now(&req("c", &names[i], &addrs[i], 0, 0), TopicsInput::Body(&b));
    }
    assert_eq!(t.pickup_route("TBW102").unwrap().queue_datas.len(), 100);
    // Remove every third group, one batch each, then check what is left, entry by entry.
    for i in (0..100).step_by(3) {
        t.unregister_batch(&[unreg("c", &names[i], &addrs[i], 0)]);
    }
    let route = t.pickup_route("TBW102").unwrap();
    let mut left: Vec<String> = route
        .queue_datas
        .iter()
        .map(|q| q.broker_name.clone())
        .collect();
    left.sort();
    let mut want: Vec<String> = (0..100)
        .filter(|i| i % 3 != 0)
        .map(|i| names[i].clone())
        .collect();
    want.sort();
    assert_eq!(left, want);
    // Every remaining entry can still be found and changed through the index.
    assert_eq!(t.set_write_perm("g1", false), 2);
    let route = t.pickup_route("TBW102").unwrap();
    let g1 = route
        .queue_datas
        .iter()
        .find(|q| q.broker_name == "g1")
        .unwrap();
    assert_eq!(g1.perm, 4);
    let rest: Vec<UnregisterRequest> = (0..100)
        .filter(|i| i % 3 != 0)
        .map(|i| unreg("c", &names[i], &addrs[i], 0))
        .collect();
    t.unregister_batch(&rest);
    assert!(t.pickup_route("TBW102").is_none());
    assert_eq!(t.topic_count(), 0);
}

#[test]
fn a_reused_broker_id_never_inherits_old_queue_entries() {
    let mut t = table();
    t.register_now(
        &req("c", "old", "a:1", 0, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    t.unregister_batch(&[unreg("c", "old", "a:1", 0)]);
    assert!(t.pickup_route("T").is_none());
    t.register_now(
        &req("c", "new", "b:1", 0, 0),
        TopicsInput::Body(&body(1, &[("U", 6)])),
    );
    assert!(t.pickup_route("T").is_none());
    let route = t.pickup_route("U").unwrap();
    assert_eq!(route.queue_datas[0].broker_name, "new");
    assert_eq!(route.broker_datas[0].broker_name, "new");
}

#[test]
fn min_broker_id_change_produces_a_notification_when_enabled() {
    let mut t = RouteTable::new(
        RouteSettings {
            notify_min_broker_id_changed: true,
            ..RouteSettings::default()
        },
        1000,
    );
    t.register_now(
        &req("c", "g", "s:1", 1, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    let r = t.register_now(
        &req("c", "g", "m:1", 0, 0),
        TopicsInput::Body(&body(1, &[("T", 6)])),
    );
    let n = r.notification.unwrap();
    assert_eq!(n.targets, vec!["s:1".to_string()]);
    assert_eq!((n.min_broker_id, n.min_broker_addr.as_str()), (0, "m:1"));
    assert_eq!(n.ha_broker_addr.as_deref(), Some("ha:1"));
}

// ------------------------------------------------------------ one owner per address

#[test]
fn a_registration_at_another_names_address_takes_it_over_and_leaves_no_orphan() {
    let mut t = table();
    t.register_now(
        &req("c", "old", "a:1", 0, 0),
        TopicsInput::Body(&body(1, &[("OldOnly", 6), ("Shared", 6)])),
    );
    t.register_now(
        &req("c", "peer", "p:1", 0, 0),
        TopicsInput::Body(&body(1, &[("Shared", 6)])),
    );
    let r = t.register_now(
        &req("c", "new", "a:1", 0, 5),
        TopicsInput::Body(&body(1, &[("NewOnly", 6)])),
    );
    let takeover = r.taken_over.expect("the address was old's");
    assert_eq!(takeover.previous, unreg("c", "old", "a:1", 0));
    assert_eq!(takeover.outcome.broker_groups_removed, 1);
    assert_eq!(takeover.outcome.topics_removed, 1, "OldOnly");
    assert!(r.first, "a new broker at that address");
    // No group, queue entry, cluster member or route of the old owner survives.
    assert!(t.broker_member_group("old").is_empty());
    assert!(t.pickup_route("OldOnly").is_none());
    let shared = t.pickup_route("Shared").unwrap();
    assert_eq!(shared.queue_datas.len(), 1);
    assert_eq!(shared.queue_datas[0].broker_name, "peer");
    let info = t.cluster_info();
    assert_eq!(info.cluster_addr_table["c"], vec!["new", "peer"]);
    assert!(!info.broker_addr_table.contains_key("old"));
    assert_eq!(t.live_broker_count(), 2);
    // When the new owner leaves, nothing is left at the address.
    let expired = t.expire_due(1_000_000);
    let requests: Vec<UnregisterRequest> = expired.into_iter().map(|e| e.request).collect();
    t.unregister_batch(&requests);
    assert_eq!(t.broker_group_count(), 0);
    assert_eq!(t.topic_count(), 0);
    assert_eq!(t.cluster_count(), 0);
}

#[test]
fn a_taken_over_group_with_other_addresses_keeps_them_and_its_topics() {
    let mut t = table();
    let b = body(1, &[("T", 6)]);
    t.register_now(&req("c", "old", "m:1", 0, 0), TopicsInput::Body(&b));
    t.register_now(&req("c", "old", "s:1", 1, 0), TopicsInput::Body(&b));
    let r = t.register_now(&req("c", "new", "s:1", 0, 0), TopicsInput::Body(&b));
    let takeover = r.taken_over.unwrap();
    assert_eq!(takeover.previous, unreg("c", "old", "s:1", 1));
    assert_eq!(takeover.outcome.broker_groups_removed, 0);
    assert_eq!(
        t.broker_member_group("old"),
        BTreeMap::from([(0, "m:1".to_string())])
    );
    let route = t.pickup_route("T").unwrap();
    let mut groups: Vec<&str> = route
        .broker_datas
        .iter()
        .map(|b| b.broker_name.as_str())
        .collect();
    groups.sort_unstable();
    assert_eq!(groups, ["new", "old"]);
}

#[test]
fn an_unregistration_queued_before_a_takeover_leaves_the_new_owner_live() {
    let mut t = table();
    let mut old = req("c", "old", "a:1", 0, 0);
    old.broker.heartbeat_timeout_ms = Some(1_000);
    t.register_now(&old, TopicsInput::Body(&body(1, &[("T", 6)])));
    let expired = t.expire_due(5_000);
    assert_eq!(expired.len(), 1, "queued for the batching thread");
    t.register_now(
        &req("c", "new", "a:1", 0, 5_000),
        TopicsInput::Body(&body(1, &[("U", 6)])),
    );
    // The old owner's unregistration comes back from the worker after the takeover.
    let out = t.unregister_batch(&[expired[0].request.clone()]);
    assert_eq!(out.brokers_removed, 0);
    assert_eq!(t.live_broker_count(), 1);
    assert!(t.registered_over("c", "a:1", "new", Some(1)));
    assert!(t.pickup_route("U").is_some());
    assert!(t.pickup_route("T").is_none());
}

#[test]
fn the_same_address_in_another_cluster_or_under_the_same_name_is_not_taken_over() {
    let mut t = table();
    let b = body(1, &[("T", 6)]);
    t.register_now(&req("c", "one", "a:1", 0, 0), TopicsInput::Body(&b));
    let other_cluster = t.register_now(&req("d", "two", "a:1", 0, 0), TopicsInput::Body(&b));
    assert_eq!(other_cluster.taken_over, None);
    let again = t.register_now(&req("c", "one", "a:1", 0, 1), TopicsInput::Body(&b));
    assert_eq!(again.taken_over, None);
    assert_eq!(t.broker_group_count(), 2);
    assert_eq!(t.live_broker_count(), 2);
}

#[test]
fn registered_over_names_the_connection_and_broker_of_a_live_entry() {
    let mut t = table();
    t.register_now(
        &req("c", "b", "a:1", 0, 0),
        TopicsInput::Body(&body(1, &[])),
    );
    assert!(t.registered_over("c", "a:1", "b", Some(1)));
    assert!(!t.registered_over("c", "a:1", "b", Some(2)));
    assert!(!t.registered_over("c", "a:1", "b", None));
    assert!(!t.registered_over("c", "a:1", "other", Some(1)));
    assert!(!t.registered_over("d", "a:1", "b", Some(1)));
    // A reconnected broker registers over its new connection, which then is its own.
    let mut moved = req("c", "b", "a:1", 0, 1);
    moved.conn = Some(2);
    t.register_now(&moved, TopicsInput::Unchanged);
    assert!(t.registered_over("c", "a:1", "b", Some(2)));
    assert!(!t.registered_over("c", "a:1", "b", Some(1)));
}

// ------------------------------------------------------------ bounds

fn bounds(max_brokers: usize, max_topics: usize, per_broker: usize) -> RouteBounds {
    RouteBounds {
        max_brokers,
        max_topics,
        max_topics_per_broker: per_broker,
    }
}

#[test]
fn a_new_broker_address_past_max_brokers_is_refused_but_known_ones_are_not() {
    let mut t = table();
    let limit = bounds(2, 100, 100);
    let empty = body(1, &[]);
    for (name, addr) in [("b1", "a:1"), ("b2", "a:2")] {
        let r = req("c", name, addr, 0, 0);
        assert_eq!(
            t.check_register_bounds(&r, TopicsInput::Body(&empty), &limit),
            Ok(())
        );
        t.register_now(&r, TopicsInput::Body(&empty));
    }
    let third = req("c", "b3", "a:3", 0, 0);
    let refused = t.check_register_bounds(&third, TopicsInput::Body(&empty), &limit);
    assert_eq!(refused, Err(BoundExceeded::Brokers { max: 2 }));
    assert_eq!(
        refused.unwrap_err().to_string(),
        "maxBrokers reached: 2 brokers are registered; no new broker address until one leaves"
    );
    let known = req("c", "b1", "a:1", 0, 1);
    assert_eq!(
        t.check_register_bounds(&known, TopicsInput::Unchanged, &limit),
        Ok(())
    );
}

#[test]
fn only_topics_a_registration_adds_count_against_max_topics_and_per_broker() {
    let mut t = table();
    let limit = bounds(10, 3, 2);
    let master = req("c", "g", "m:1", 0, 0);
    let two = body(1, &[("A", 6), ("B", 6)]);
    assert_eq!(
        t.check_register_bounds(&master, TopicsInput::Body(&two), &limit),
        Ok(())
    );
    t.register_now(&master, TopicsInput::Body(&two));
    // Re-registering the same topics adds nothing, even at the bound.
    assert_eq!(
        t.check_register_bounds(
            &master,
            TopicsInput::Body(&body(2, &[("A", 4), ("B", 4)])),
            &limit
        ),
        Ok(())
    );
    let three = body(2, &[("A", 6), ("B", 6), ("C", 6)]);
    assert_eq!(
        t.check_register_bounds(&master, TopicsInput::Body(&three), &limit),
        Err(BoundExceeded::TopicsPerBroker {
            broker_name: "g".into(),
            max: 2,
            held: 2,
            adding: 1
        })
    );
    // Another group's new topics count against maxTopics (3 held at most).
    let other = req("c", "h", "n:1", 0, 0);
    let new_two = body(1, &[("C", 6), ("D", 6)]);
    let refused = t.check_register_bounds(&other, TopicsInput::Body(&new_two), &limit);
    assert_eq!(
        refused.unwrap_err().to_string(),
        "maxTopics reached: the registry holds 2 topics, this would add 2 (limit 3)"
    );
    // Taking on topics others hold already adds no topic.
    let known = body(1, &[("A", 6), ("B", 6)]);
    assert_eq!(
        t.check_register_bounds(&other, TopicsInput::Body(&known), &limit),
        Ok(())
    );
    // A slave's topics are not applied while the master is there: nothing to count.
    let slave = req("c", "g", "s:1", 1, 0);
    assert_eq!(
        t.check_register_bounds(&slave, TopicsInput::Body(&three), &limit),
        Ok(())
    );
}

#[test]
fn register_topic_counts_a_new_topic_and_each_group_taking_it_on() {
    let mut t = table();
    let limit = bounds(10, 2, 2);
    t.register_now(
        &req("c", "g", "m:1", 0, 0),
        TopicsInput::Body(&body(1, &[("A", 6)])),
    );
    t.register_now(
        &req("c", "h", "n:1", 0, 0),
        TopicsInput::Body(&body(1, &[("B", 6), ("C", 6)])),
    );
    let q = |name: &str| QueueData {
        broker_name: name.into(),
        read_queue_nums: 1,
        write_queue_nums: 1,
        perm: 6,
        topic_sys_flag: 0,
    };
    assert!(matches!(
        t.check_topic_bounds("New", &[q("g")], &limit),
        Err(BoundExceeded::Topics { held: 3, .. })
    ));
    assert_eq!(t.check_topic_bounds("B", &[q("g")], &limit), Ok(()));
    assert!(matches!(
        t.check_topic_bounds("A", &[q("h")], &limit),
        Err(BoundExceeded::TopicsPerBroker { held: 2, .. })
    ));
    assert_eq!(t.check_topic_bounds("A", &[q("g")], &limit), Ok(()));
}

#[test]
fn a_mass_removal_hands_the_topic_table_memory_back() {
    let mut t = table();
    let names: Vec<String> = (0..20_000).map(|i| format!("T{i}")).collect();
    let topics: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), 6)).collect();
    t.register_now(
        &req("c", "big", "a:1", 0, 0),
        TopicsInput::Body(&body(1, &topics)),
    );
    t.register_now(
        &req("c", "small", "b:1", 0, 0),
        TopicsInput::Body(&body(1, &[("Kept", 6)])),
    );
    let full = t.topics.capacity();
    assert!(full >= 20_001);
    t.unregister_batch(&[unreg("c", "big", "a:1", 0)]);
    assert_eq!(t.topic_count(), 1);
    assert!(
        t.topics.capacity() < 64,
        "{} slots kept for one topic",
        t.topics.capacity()
    );
    assert!(t.pickup_route("Kept").is_some());
}

/// Every topic's route body in both dialects (`None`: TOPIC_NOT_EXIST).
fn route_bytes(t: &mut RouteTable, topics: &[String]) -> Vec<(Option<Bytes>, Option<Bytes>)> {
    topics
        .iter()
        .map(|n| {
            (
                t.route_body(n, Dialect::Standard, || None),
                t.route_body(n, Dialect::Legacy, || None),
            )
        })
        .collect()
}

/// The table a stepped and a one-go registration start from: broker `o` shares some
/// topics with broker `b`, and `b` serves topics its next body no longer reports.
fn shared_table() -> RouteTable {
    let mut t = RouteTable::new(
        RouteSettings {
            delete_topic_with_broker_registration: true,
            ..RouteSettings::default()
        },
        1000,
    );
    let shared: Vec<(&str, i32)> = vec![("Sh0", 6), ("Sh1", 6), ("Gone1", 6)];
    t.register_now(
        &req("c", "o", "o:1", 0, 5),
        TopicsInput::Body(&body(1, &shared)),
    );
    let mut old: Vec<(&str, i32)> = vec![("Gone0", 6), ("Gone1", 6), ("Sh0", 6)];
    old.extend(STEP_NAMES.iter().map(|n| (*n, 6)));
    t.register_now(
        &req("c", "b", "a:1", 0, 10),
        TopicsInput::Body(&body(1, &old)),
    );
    t
}

const STEP_NAMES: [&str; 10] = ["S0", "S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9"];

#[test]
fn a_registration_applied_in_steps_ends_byte_identical_to_one_at_once_and_no_topic_is_half_done() {
    // b's new body: its topics with perm 4, new ones, a topic shared with o; not Gone*.
    let mut listed: Vec<(&str, i32)> = STEP_NAMES.iter().map(|n| (*n, 4)).collect();
    listed.extend([("New0", 6), ("Sh1", 4), ("Sh0", 4), ("New1", 6)]);
    let second = body(2, &listed);
    let mut names: Vec<String> = listed.iter().map(|(n, _)| n.to_string()).collect();
    names.extend(["Gone0".to_string(), "Gone1".to_string()]);
    let mut at_once = shared_table();
    let once = at_once.register_now(&req("c", "b", "a:1", 0, 20), TopicsInput::Body(&second));
    let after = route_bytes(&mut at_once, &names);
    let mut stepped = shared_table();
    let before = route_bytes(&mut stepped, &names);
    let (result, steps) =
        stepped.register_broker(&req("c", "b", "a:1", 0, 20), TopicsInput::Body(&second));
    assert!(!result.first);
    let mut steps = steps.expect("the master's topics are put");
    let mut seen_mixed = false;
    loop {
        // Between steps every topic's route is wholly as before or as after.
        let now = route_bytes(&mut stepped, &names);
        for (i, n) in names.iter().enumerate() {
            assert!(now[i] == before[i] || now[i] == after[i], "{n} half done");
        }
        seen_mixed |= now != before && now != after;
        if stepped.apply_topic_steps(&mut steps, &second, 3) {
            break;
        }
    }
    assert!(seen_mixed, "the steps were observable");
    assert_eq!(route_bytes(&mut stepped, &names), after);
    assert_eq!(steps.changed, once.topics_changed);
    let topics = |t: &RouteTable| t.topic_names().map(String::from).collect::<BTreeSet<_>>();
    assert_eq!(topics(&stepped), topics(&at_once));
    assert_eq!(stepped.cluster_info(), at_once.cluster_info());
    assert_eq!(
        stepped.data_version("c", "a:1"),
        at_once.data_version("c", "a:1")
    );
}

/// Registers `b` in steps of two topic configs, with `between` run after the first step.
fn register_in_steps(
    t: &mut RouteTable,
    r: &RegisterRequest<'_>,
    b: &RegisterBody,
    between: impl FnOnce(&mut RouteTable),
) {
    let (_, steps) = t.register_broker(r, TopicsInput::Body(b));
    let mut steps = steps.expect("the topics are put");
    assert!(!t.apply_topic_steps(&mut steps, b, 2));
    between(t);
    while !t.apply_topic_steps(&mut steps, b, 2) {}
}

#[test]
fn the_same_bytes_are_unchanged_once_their_last_step_is_applied() {
    let mut t = table();
    let b = body(1, &[("A", 6), ("B", 6), ("C", 6), ("D", 6), ("E", 6)]);
    let r = req("c", "b", "m:1", 0, 1);
    register_in_steps(&mut t, &r, &b, |t| {
        // Not wholly applied yet: the same bytes now would be parsed.
        assert!(!t.is_unchanged_body(&req("c", "b", "m:1", 0, 1)));
    });
    assert!(t.is_unchanged_body(&r));
    assert_eq!(
        t.unchanged_fingerprint(&req("c", "b", "m:1", 0, 1).broker),
        Some(fp(1))
    );
    // Another id at that address, another name, another address: not this broker's body.
    assert_eq!(
        t.unchanged_fingerprint(&req("c", "b", "m:1", 1, 1).broker),
        None
    );
    assert_eq!(
        t.unchanged_fingerprint(&req("c", "x", "m:1", 0, 1).broker),
        None
    );
    assert_eq!(
        t.unchanged_fingerprint(&req("c", "b", "m:2", 0, 1).broker),
        None
    );
}

#[test]
fn a_write_between_two_steps_leaves_the_same_bytes_to_be_parsed_again() {
    let mut t = table();
    let b = body(1, &[("A", 6), ("B", 6), ("C", 6), ("D", 6), ("E", 6)]);
    register_in_steps(&mut t, &req("c", "b", "m:1", 0, 1), &b, |t| {
        assert_eq!(t.set_write_perm("b", false), 2);
    });
    // Not the body's whole effect: the same bytes again are parsed and applied.
    assert!(!t.is_unchanged_body(&req("c", "b", "m:1", 0, 1)));
    // As Java would leave it: the first two wiped after their put, the rest put after it.
    let perm = |t: &RouteTable, topic| t.pickup_route(topic).unwrap().queue_datas[0].perm;
    assert_eq!((perm(&t, "B"), perm(&t, "C")), (4, 6));
}

#[test]
fn any_other_writer_of_the_groups_entries_makes_the_next_same_body_changed() {
    let b = body(1, &[("A", 6), ("B", 6)]);
    let writes: [fn(&mut RouteTable); 4] = [
        |t| assert!(t.delete_topic("A", None)),
        |t| assert_eq!(t.set_write_perm("b", false), 2),
        |t| {
            let q = QueueData {
                broker_name: "b".into(),
                read_queue_nums: 8,
                write_queue_nums: 8,
                perm: 6,
                topic_sys_flag: 0,
            };
            assert!(t.register_topic("X", &[q]));
        },
        // Another address of the group (a restarted master) puts other configs.
        |t| {
            let other = body(7, &[("A", 4)]);
            t.register_now(&req("c", "b", "m:2", 0, 5), TopicsInput::Body(&other));
        },
    ];
    for write in writes {
        let mut t = table();
        let r = req("c", "b", "m:1", 0, 1);
        t.register_now(&r, TopicsInput::Body(&b));
        assert!(t.is_unchanged_body(&r));
        write(&mut t);
        assert!(!t.is_unchanged_body(&r));
        // Applied again (the same dataVersion: only absent topics are put), it is
        // unchanged again.
        t.register_now(&r, TopicsInput::Body(&b));
        assert!(t.is_unchanged_body(&r));
    }
}

#[test]
fn steps_stop_when_the_broker_group_goes_meanwhile() {
    let mut t = table();
    let many = body(1, &[("G1", 6), ("G2", 6), ("G3", 6)]);
    let (_, steps) = t.register_broker(&req("c", "g", "a:2", 0, 10), TopicsInput::Body(&many));
    let mut steps = steps.expect("topics to put");
    assert!(!t.apply_topic_steps(&mut steps, &many, 1));
    t.unregister_batch(&[unreg("c", "g", "a:2", 0)]);
    assert!(
        t.apply_topic_steps(&mut steps, &many, 1),
        "done: nothing more to put"
    );
    assert_eq!(t.topic_count(), 0);
    assert!(t.pickup_route("G3").is_none());
}

/// A new master registers right after the old one's connection closed, before the
/// queued removal applies: the closed entry does not fence it, and the removal that
/// follows takes only the old address.
#[test]
fn a_closed_connection_does_not_fence_the_next_master() {
    let mut t = table();
    let mut old = body(1, &[("T", 6)]);
    old.data_version.state_version = 2;
    t.register_now(&req("c", "b", "old:1", 0, 0), TopicsInput::Body(&old));
    let removals = t.connection_closed(1);
    assert_eq!(removals.len(), 1);
    let mut new_master = req("c", "b", "new:1", 0, 0);
    new_master.conn = Some(2);
    let r = t.register_now(&new_master, TopicsInput::Body(&body(1, &[("T", 6)])));
    assert!(!r.fenced, "stateVersion 0 after a closed stateVersion 2");
    t.unregister_batch(&removals);
    assert_eq!(
        t.broker_member_group("b").get(&0).map(String::as_str),
        Some("new:1")
    );
    // An open connection still fences (the rule is Java's).
    let mut stale = req("c", "b", "stale:1", 0, 0);
    stale.conn = Some(3);
    let mut newer = body(2, &[("T", 6)]);
    newer.data_version.state_version = 3;
    let mut again = new_master.clone();
    again.now_ms = 1;
    t.register_now(&again, TopicsInput::Body(&newer));
    assert!(
        t.register_now(&stale, TopicsInput::Body(&body(1, &[("T", 6)])))
            .fenced
    );
}

/// A topic list, its steps all run now.
fn list(t: &mut RouteTable, kind: ListKind) -> Bytes {
    let far = std::time::Instant::now() + std::time::Duration::from_secs(3600);
    t.topic_list(&kind, far).unwrap()
}

fn list_names(body: &[u8]) -> BTreeSet<String> {
    let (names, _) = crate::route::model::decode_topic_list(body).unwrap();
    names.into_iter().collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_cached_topic_list_changes_exactly_when_the_topics_do() {
    let mut t = table();
    let mut r = req("c", "g", "a:1", 0, 0);
    r.broker.heartbeat_timeout_ms = Some(10_000);
    t.register_now(&r, TopicsInput::Body(&body(1, &[("A", 6), ("B", 6)])));
    let first = list(&mut t, ListKind::All);
    let mut fresh = Vec::new();
    crate::route::model::encode_topic_list(t.topic_names(), None, &mut fresh);
    assert_eq!(first, fresh, "the bytes an encoding at once writes");
    let encoded = t.topic_list_stats().0;
    // No topic in or out: the same body (shared, not encoded again).
    t.register_now(&r, TopicsInput::Body(&body(2, &[("A", 6), ("B", 2)])));
    t.set_write_perm("g", false);
    t.register_now(&r, TopicsInput::Unchanged);
    assert_eq!(list(&mut t, ListKind::All).as_ptr(), first.as_ptr());
    assert_eq!(t.topic_list_stats().0, encoded);
    // A new topic: its shard only is encoded again.
    t.register_now(
        &r,
        TopicsInput::Body(&body(3, &[("A", 6), ("B", 6), ("C", 6)])),
    );
    assert_eq!(
        list_names(&list(&mut t, ListKind::All)),
        names(&["A", "B", "C"])
    );
    assert_eq!(t.topic_list_stats().0, encoded + 1);
    // DELETE_TOPIC_IN_NAMESRV, unregistration by a second group, expiry.
    assert!(t.delete_topic("C", None));
    assert_eq!(list_names(&list(&mut t, ListKind::All)), names(&["A", "B"]));
    let other = req("c", "h", "a:2", 0, 0);
    t.register_now(&other, TopicsInput::Body(&body(1, &[("B", 6), ("D", 6)])));
    assert_eq!(
        list_names(&list(&mut t, ListKind::All)),
        names(&["A", "B", "D"])
    );
    t.unregister_batch(&[unreg("c", "h", "a:2", 0)]);
    assert_eq!(list_names(&list(&mut t, ListKind::All)), names(&["A", "B"]));
    let expired: Vec<_> = t
        .expire_due(20_000)
        .into_iter()
        .map(|e| e.request)
        .collect();
    t.unregister_batch(&expired);
    assert_eq!(list(&mut t, ListKind::All), &b"{\"topicList\":[]}"[..]);
}

/// The cluster's list (224), checked against its groups' topics, which Java's answer holds.
fn cluster_list(t: &mut RouteTable, cluster: &str) -> BTreeSet<String> {
    let listed = list_names(&list(t, ListKind::Cluster(cluster.into())));
    let info = t.cluster_info();
    let groups = info.cluster_addr_table.get(cluster).into_iter().flatten();
    let owned = groups.flat_map(|g| t.brokers[g.as_str()].topics.iter().map(|n| n.to_string()));
    assert_eq!(listed, owned.collect(), "cluster {cluster}");
    listed
}

#[test]
fn a_cluster_list_follows_its_groups_and_their_topics() {
    let mut t = table();
    let g = req("c1", "g", "a:1", 0, 0);
    t.register_now(&g, TopicsInput::Body(&body(1, &[("A", 6), ("B", 6)])));
    let h = req("c2", "h", "a:2", 0, 0);
    t.register_now(&h, TopicsInput::Body(&body(1, &[("B", 6), ("C", 6)])));
    assert_eq!(cluster_list(&mut t, "c1"), names(&["A", "B"]));
    assert_eq!(cluster_list(&mut t, "c2"), names(&["B", "C"]));
    // Cached: the same body, nothing encoded again.
    let encoded = t.topic_list_stats().0;
    let c1 = list(&mut t, ListKind::Cluster("c1".into()));
    assert_eq!(
        list(&mut t, ListKind::Cluster("c1".into())).as_ptr(),
        c1.as_ptr()
    );
    assert_eq!(t.topic_list_stats().0, encoded);
    // A group joins an existing topic; a group of c1 gets a topic of c2's; a topic goes.
    t.register_now(
        &h,
        TopicsInput::Body(&body(2, &[("A", 6), ("B", 6), ("C", 6)])),
    );
    assert_eq!(cluster_list(&mut t, "c2"), names(&["A", "B", "C"]));
    let k = req("c1", "k", "a:3", 0, 0);
    t.register_now(&k, TopicsInput::Body(&body(1, &[("C", 6)])));
    assert_eq!(cluster_list(&mut t, "c1"), names(&["A", "B", "C"]));
    assert!(t.delete_topic("A", None));
    assert_eq!(cluster_list(&mut t, "c2"), names(&["B", "C"]));
    // A group leaves its queue entries and its cluster.
    t.unregister_batch(&[unreg("c1", "k", "a:3", 0)]);
    assert_eq!(cluster_list(&mut t, "c1"), names(&["B"]));
    t.unregister_batch(&[unreg("c2", "h", "a:2", 0)]);
    assert_eq!(
        list(&mut t, ListKind::Cluster("c2".into())),
        &b"{\"topicList\":[]}"[..]
    );
    // One cluster owns every topic: its list is the 206 list, byte for byte.
    assert_eq!(
        list(&mut t, ListKind::Cluster("c1".into())),
        list(&mut t, ListKind::All)
    );
}

#[test]
fn unit_lists_follow_the_first_queue_entrys_flag() {
    let mut t = table();
    let flagged = |counter, flags: &[(&str, i32)]| {
        let mut b = body(
            counter,
            &flags.iter().map(|(n, _)| (*n, 6)).collect::<Vec<_>>(),
        );
        for (i, (_, f)) in flags.iter().enumerate() {
            b.topics[i].1.topic_sys_flag = *f;
        }
        b
    };
    let g = req("c", "g", "a:1", 0, 0);
    let b = flagged(1, &[("Plain", 0), ("Unit", 1), ("Sub", 2), ("Both", 3)]);
    t.register_now(&g, TopicsInput::Body(&b));
    let unit = list(&mut t, ListKind::Unit);
    assert_eq!(list_names(&unit), names(&["Unit", "Both"]));
    assert_eq!(
        list_names(&list(&mut t, ListKind::UnitSub)),
        names(&["Sub", "Both"])
    );
    assert_eq!(
        list_names(&list(&mut t, ListKind::UnitSubNotUnit)),
        names(&["Sub"])
    );
    // A second group's flag on Plain: not its first queue entry, the list stays.
    let h = req("c", "h", "a:2", 0, 0);
    t.register_now(&h, TopicsInput::Body(&flagged(1, &[("Plain", 1)])));
    assert_eq!(list(&mut t, ListKind::Unit), unit);
    // Its first entry gone, Plain goes by the second group's flag.
    t.unregister_batch(&[unreg("c", "g", "a:1", 0)]);
    assert_eq!(list_names(&list(&mut t, ListKind::Unit)), names(&["Plain"]));
    // The first entry's flag replaced.
    t.register_now(&h, TopicsInput::Body(&flagged(2, &[("Plain", 2)])));
    assert_eq!(list(&mut t, ListKind::Unit), &b"{\"topicList\":[]}"[..]);
    assert_eq!(
        list_names(&list(&mut t, ListKind::UnitSub)),
        names(&["Plain"])
    );
}

#[test]
fn a_topic_list_is_built_a_shard_a_step_and_sees_changes_made_between() {
    let mut t = table();
    let topics: Vec<String> = (0..3_000).map(|i| format!("T{i}")).collect();
    let all: Vec<(&str, i32)> = topics.iter().map(|n| (n.as_str(), 6)).collect();
    let g = req("c", "g", "a:1", 0, 0);
    t.register_now(&g, TopicsInput::Body(&body(1, &all)));
    let past = std::time::Instant::now();
    let mut steps = 0;
    let built = loop {
        steps += 1;
        if steps == 10 {
            // Between steps: a topic in a shard already encoded, and one out.
            assert!(t.delete_topic("T0", None));
            let q = QueueData {
                broker_name: "g".into(),
                read_queue_nums: 1,
                write_queue_nums: 1,
                perm: 6,
                topic_sys_flag: 0,
            };
            assert!(t.register_topic("Late", &[q]));
        }
        if let Some(body) = t.topic_list(&ListKind::All, past) {
            break body;
        }
    };
    // One shard a step (all 256 hold topics), the join, and those changed at step 10.
    assert!(steps > 200, "{steps} steps");
    let mut expected = names(&["Late"]);
    expected.extend(topics[1..].iter().cloned());
    assert_eq!(list_names(&built), expected);
    let mut fresh = Vec::new();
    crate::route::model::encode_topic_list(t.topic_names(), None, &mut fresh);
    assert_eq!(built, fresh);
}

/// `n` topics named `T{i}` (perm 6), dataVersion `counter`.
fn many_v(counter: i64, n: usize) -> RegisterBody {
    let names: Vec<String> = (0..n).map(|i| format!("T{i}")).collect();
    let topics: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), 6)).collect();
    body(counter, &topics)
}

fn many(n: usize) -> RegisterBody {
    many_v(1, n)
}

#[test]
fn a_group_loses_its_topics_in_steps_then_its_address() {
    let mut t = table();
    t.register_now(&req("c", "g", "a:1", 0, 0), TopicsInput::Body(&many(100)));
    let u = unreg("c", "g", "a:1", 0);
    let mut out = BatchOutcome::default();
    assert!(
        !t.unregister_step(&u, BROKER_STEPS - 1, &mut out),
        "no room"
    );
    assert_eq!(out.steps, 0);
    assert!(!t.unregister_step(&u, 40, &mut out));
    // 40 topics are gone, the others still route to the group at its address.
    assert_eq!((out.steps, t.topic_count()), (40, 60));
    let kept = t.topic_names().next().unwrap().to_string();
    assert_eq!(
        t.pickup_route(&kept).unwrap().broker_datas[0].broker_addrs[&0],
        "a:1"
    );
    assert_eq!((t.live_broker_count(), t.cluster_count()), (1, 1));
    assert!(t.unregister_step(&u, BROKER_STEPS + 60, &mut out));
    t.finish_unregistrations(&mut out);
    assert_eq!(
        (out.steps, out.brokers_removed, out.topics_removed),
        (116, 1, 100)
    );
    assert_eq!(
        (t.topic_count(), t.cluster_count(), t.live_broker_count()),
        (0, 0, 0)
    );
}

#[test]
fn a_registration_between_steps_ends_as_if_the_removal_came_after_it() {
    let (mut sliced, mut one_go) = (table(), table());
    let (g, u) = (req("c", "g", "a:1", 0, 0), unreg("c", "g", "a:1", 0));
    for t in [&mut sliced, &mut one_go] {
        t.register_now(&g, TopicsInput::Body(&many(50)));
        t.register_now(&req("c", "h", "b:1", 0, 0), TopicsInput::Body(&many(3)));
    }
    let mut out = BatchOutcome::default();
    assert!(!sliced.unregister_step(&u, 30, &mut out));
    for t in [&mut sliced, &mut one_go] {
        t.register_now(
            &req("c", "g", "a:1", 0, 5),
            TopicsInput::Body(&many_v(2, 60)),
        );
        assert_eq!(t.topic_count(), 60);
    }
    while !sliced.unregister_step(&u, 30, &mut out) {}
    sliced.finish_unregistrations(&mut out);
    one_go.unregister_batch(&[u]);
    for t in [&sliced, &one_go] {
        assert_eq!((t.topic_count(), t.broker_group_count()), (3, 1));
        assert_eq!(
            t.pickup_route("T2").unwrap().broker_datas[0].broker_name,
            "h"
        );
    }
}

#[test]
fn a_queued_removal_still_removes_a_broker_that_registered_again_as_javas_batch_does() {
    let mut t = table();
    let r = req("c", "g", "a:1", 0, 0);
    t.register_now(&r, TopicsInput::Body(&many(2)));
    let expired = t.expire_due(200_000);
    assert_eq!(expired.len(), 1);
    t.register_now(
        &req("c", "g", "a:1", 0, 200_001),
        TopicsInput::Body(&many(2)),
    );
    let out = t.unregister_batch(&[expired[0].request.clone()]);
    assert_eq!((out.brokers_removed, out.topics_removed), (1, 2));
    assert_eq!(t.live_broker_count(), 0);
}

#[test]
fn an_address_that_leaves_its_group_drops_no_topic() {
    let mut t = table();
    t.register_now(&req("c", "g", "m:1", 0, 0), TopicsInput::Body(&many(100)));
    t.register_now(&req("c", "g", "s:1", 1, 0), TopicsInput::Body(&many(100)));
    let mut out = BatchOutcome::default();
    assert!(t.unregister_step(&unreg("c", "g", "s:1", 1), BROKER_STEPS, &mut out));
    assert_eq!(
        (out.steps, t.topic_count(), t.live_broker_count()),
        (16, 100, 1)
    );
}
