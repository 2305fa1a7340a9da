//! The registry's guards over real TCP: who may touch a
//! broker (`brokerAllowList`, and unregistration only by the broker's own connection when an
//! allow-list is set), the registry's bounds, the values refused at the wire, and one broker
//! name per address.

mod common;

use common::*;
use rmq_namesrv::client::Client;
use rmq_namesrv::config::JAVA_CONFIG_BLACK_LIST;
use rmq_namesrv::remoting::codes::{request, response};
use rmq_namesrv::remoting::command::RemotingCommand;
use rmq_namesrv::route::model;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn broker_fields(b: &Broker) -> Vec<(&str, String)> {
    vec![
        ("brokerName", b.name.clone()),
        ("brokerAddr", b.addr.clone()),
        ("clusterName", b.cluster.clone()),
        ("brokerId", b.id.to_string()),
    ]
}

fn broker_request(c: &mut Client, code: i32, b: &Broker) -> RemotingCommand {
    let fields = broker_fields(b);
    let ext: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    c.request(code, &ext, b"").expect("answer")
}

fn unregister(c: &mut Client, b: &Broker) -> RemotingCommand {
    broker_request(c, request::UNREGISTER_BROKER, b)
}

fn update_config(c: &mut Client, text: &str) {
    let resp = c
        .request(request::UPDATE_NAMESRV_CONFIG, &[], text.as_bytes())
        .unwrap();
    assert_eq!(resp.code, 0, "{text}: {:?}", resp.remark);
}

fn route_bytes(c: &mut Client, topic: &str) -> Vec<u8> {
    let resp = route(c, topic);
    assert_eq!(resp.code, 0, "route of {topic}: {:?}", resp.remark);
    resp.body.to_vec()
}

fn register_topic(c: &mut Client, topic: &str, broker: &str, queues: i32, perm: i32) -> i32 {
    let body = format!(
        r#"{{"queueDatas":[{{"brokerName":"{broker}","perm":{perm},"readQueueNums":{queues},"topicSysFlag":0,"writeQueueNums":{queues}}}]}}"#
    );
    c.request(
        request::REGISTER_TOPIC_IN_NAMESRV,
        &[("topic", topic)],
        body.as_bytes(),
    )
    .unwrap()
    .code
}

// ------------------------------------------------------------------------ point 4

#[test]
fn broker_allow_list_refuses_what_brokers_report_from_other_addresses() {
    // The allow list is changed at run time: the operator lifted its protection.
    let server = TestServer::start_with(|c| c.config_black_list = JAVA_CONFIG_BLACK_LIST.into());
    let mut admin = server.client();
    let mut good = server.client();
    let b = Broker::new("c", "broker-a", "10.0.0.1:10911", 0);
    assert_eq!(
        register(&mut good, &b, &body_with(1, &[topic("T", 4, 6)])).code,
        0
    );
    let before = route_bytes(&mut admin, "T");
    // The server sees every test peer as 127.0.0.1: outside this list.
    update_config(&mut admin, "brokerAllowList=10.0.0.0/8");
    let mut attacker = server.client();
    let mut spoof = b.clone();
    spoof.id = 1;
    spoof.addr = "6.6.6.6:10911".into();
    let refused = register(&mut attacker, &spoof, &body_with(2, &[topic("T", 4, 4)]));
    assert_eq!(refused.code, response::NO_PERMISSION);
    assert_eq!(
        refused.remark.as_deref(),
        Some("request 103 is not allowed from this address (brokerAllowList)")
    );
    for code in [
        request::UNREGISTER_BROKER,
        request::QUERY_DATA_VERSION,
        request::BROKER_HEARTBEAT,
    ] {
        let resp = broker_request(&mut attacker, code, &b);
        assert_eq!(resp.code, response::NO_PERMISSION, "code {code}");
        assert!(resp.remark.unwrap().contains("brokerAllowList"));
    }
    // Reads and admin calls are not the broker list's business.
    assert_eq!(route_bytes(&mut attacker, "T"), before);
    assert_eq!(
        cluster_info(&mut attacker).broker_addr_table["broker-a"]
            .broker_addrs
            .len(),
        1
    );
    // An address in the list registers again.
    update_config(&mut admin, "brokerAllowList=127.0.0.1/32");
    assert_eq!(
        register(&mut good, &b, &body_with(3, &[topic("T", 4, 6)])).code,
        0
    );
}

#[test]
fn with_an_allow_list_a_broker_is_unregistered_only_over_its_own_connection() {
    // 127.0.0.1 (every test peer) is not an admin address.
    let server = TestServer::start_with(|c| {
        c.set("adminAllowList", "127.0.0.2/32");
    });
    let mut first = server.client();
    let b = Broker::new("c", "broker-a", "10.0.0.1:10911", 0);
    assert_eq!(
        register(&mut first, &b, &body_with(1, &[topic("T", 4, 6)])).code,
        0
    );
    let mut attacker = server.client();
    let refused = unregister(&mut attacker, &b);
    assert_eq!(refused.code, response::NO_PERMISSION);
    assert_eq!(
        refused.remark.as_deref(),
        Some("UNREGISTER_BROKER of broker-a@10.0.0.1:10911 (c) refused: not sent over that broker's registration connection, nor from an address in adminAllowList")
    );
    // Another broker name over the broker's own connection is refused too.
    let mut other_name = b.clone();
    other_name.name = "broker-b".into();
    assert_eq!(
        unregister(&mut first, &other_name).code,
        response::NO_PERMISSION
    );
    // A broker that reconnected registers over its new connection; that one is its own now.
    let mut second = server.client();
    assert_eq!(
        register(&mut second, &b, &body_with(1, &[topic("T", 4, 6)])).code,
        0
    );
    assert_eq!(unregister(&mut first, &b).code, response::NO_PERMISSION);
    assert!(route_data(&mut attacker, "T").is_some());
    assert_eq!(unregister(&mut second, &b).code, response::SUCCESS);
    assert!(wait_until(WAIT, || route_data(&mut attacker, "T").is_none()));
}

#[test]
fn an_admin_address_may_unregister_any_broker() {
    let server = TestServer::start_with(|c| {
        c.set("adminAllowList", "127.0.0.1/32");
        c.set("brokerAllowList", "127.0.0.0/8");
    });
    let mut broker = server.client();
    let b = Broker::new("c", "broker-a", "10.0.0.1:10911", 0);
    assert_eq!(
        register(&mut broker, &b, &body_with(1, &[topic("T", 4, 6)])).code,
        0
    );
    let mut admin = server.client();
    assert_eq!(unregister(&mut admin, &b).code, response::SUCCESS);
    assert!(wait_until(WAIT, || route_data(&mut admin, "T").is_none()));
}

#[test]
fn without_allow_lists_unregistration_stays_open_as_in_java() {
    let server = TestServer::start();
    let mut broker = server.client();
    let b = Broker::new("c", "broker-a", "10.0.0.1:10911", 0);
    assert_eq!(
        register(&mut broker, &b, &body_with(1, &[topic("T", 4, 6)])).code,
        0
    );
    let mut other = server.client();
    assert_eq!(unregister(&mut other, &b).code, response::SUCCESS);
    assert!(wait_until(WAIT, || route_data(&mut other, "T").is_none()));
}

// ------------------------------------------------------------------------ point 8

#[test]
fn values_that_hurt_clients_are_refused_naming_the_field_and_good_routes_stay() {
    let server = TestServer::start();
    let mut c = server.client();
    let good = Broker::new("c", "broker-a", "10.0.0.1:10911", 0);
    assert_eq!(
        register(&mut c, &good, &body_with(1, &[topic("T", 4, 6)])).code,
        0
    );
    let before = route_bytes(&mut c, "T");
    let info_before = cluster_info(&mut c);

    let with_topic = |t: model::TopicConfig| body_with(2, &[topic("T", 4, 6), t]);
    let mut bad_perm = topic("U", 4, 6);
    bad_perm.perm = 255;
    let mut negative_perm = topic("U", 4, 6);
    negative_perm.perm = -1;
    let mut negative_queues = topic("U", 4, 6);
    negative_queues.read_queue_nums = -1;
    let mut huge_queues = topic("U", 4, 6);
    huge_queues.write_queue_nums = i32::MAX;
    let bodies = [
        (bad_perm, "topic U: perm 255 is not made of the permission bits inherit 1, write 2, read 4, priority 8 (0..=15)"),
        (negative_perm, "topic U: perm -1 is not made of the permission bits inherit 1, write 2, read 4, priority 8 (0..=15)"),
        (negative_queues, "topic U: readQueueNums -1 is outside 0..=65536 (maxQueueNums)"),
        (huge_queues, "topic U: writeQueueNums 2147483647 is outside 0..=65536 (maxQueueNums)"),
    ];
    // Under the good broker's own identity: the whole registration is refused.
    for (t, remark) in bodies {
        let resp = register(&mut c, &good, &with_topic(t));
        assert_eq!(
            (resp.code, resp.remark.as_deref()),
            (response::SYSTEM_ERROR, Some(remark))
        );
    }
    let named = |cluster: &str, name: &str, addr: &str| Broker {
        cluster: cluster.into(),
        name: name.into(),
        addr: addr.into(),
        id: 0,
        ha: "10.0.0.9:10912".into(),
    };
    let headers = [
        (named("", "b", "10.0.0.9:10911"), "clusterName is empty"),
        (named("c", "", "10.0.0.9:10911"), "brokerName is empty"),
        (
            named("c", "b\"x", "10.0.0.9:10911"),
            "brokerName contains '\"'; allowed: A-Z a-z 0-9 and . _ - % |",
        ),
        (
            named("c", "b", "6.6.6.6:10911,\"\0"),
            "brokerAddr \"6.6.6.6:10911,\\\"\\0\" is not host:port: the port must be 1..=65535",
        ),
        (
            named("c", "b", "6.6.6.6,7.7.7.7:10911"),
            "brokerAddr \"6.6.6.6,7.7.7.7:10911\" is not host:port: the host must be a DNS name, an IPv4 address or an IPv6 literal",
        ),
    ];
    for (b, remark) in headers {
        let resp = register(&mut c, &b, &body_with(1, &[topic("T", 4, 6)]));
        assert_eq!(
            (resp.code, resp.remark.as_deref()),
            (response::SYSTEM_ERROR, Some(remark)),
            "{b:?}"
        );
    }
    // REGISTER_TOPIC_IN_NAMESRV is held to the same values.
    assert_eq!(register_topic(&mut c, "T", "broker-a", -1, 6), 1);
    assert_eq!(register_topic(&mut c, "T", "broker-a", 8, 255), 1);
    assert_eq!(
        route_bytes(&mut c, "T"),
        before,
        "the good route is untouched"
    );
    assert_eq!(cluster_info(&mut c), info_before);
    assert!(route_data(&mut c, "U").is_none());
    // Real peers' shapes pass: host names, bracketed IPv6 with a zone, all permission bits.
    let ipv6 = named(
        "DefaultCluster",
        "ip-10-0-0-1.ec2.internal",
        "[fe80::1%eth0]:10911",
    );
    let mut all_bits = topic("V", 1024, 6);
    all_bits.perm = 15;
    assert_eq!(register(&mut c, &ipv6, &body_with(1, &[all_bits])).code, 0);
    assert_eq!(route_data(&mut c, "V").unwrap().queue_datas[0].perm, 15);
}

// ------------------------------------------------------------------------ point 5

#[test]
fn bounds_refuse_growth_with_a_clear_error_and_leave_nothing_behind() {
    let server = TestServer::start_with(|c| {
        c.max_brokers = 2;
        c.max_topics = 5;
        c.max_topics_per_broker = 3;
        c.config_black_list = JAVA_CONFIG_BLACK_LIST.into();
    });
    let mut admin = server.client();
    let mut conn1 = server.client();
    let b1 = Broker::new("c", "b1", "10.0.0.1:10911", 0);
    let three: Vec<_> = ["A", "B", "C"].iter().map(|t| topic(t, 4, 6)).collect();
    assert_eq!(register(&mut conn1, &b1, &body_with(1, &three)).code, 0);
    let mut four = three.clone();
    four.push(topic("D", 4, 6));
    let resp = register(&mut conn1, &b1, &body_with(2, &four));
    assert_eq!(
        (resp.code, resp.remark.as_deref()),
        (
            response::SYSTEM_ERROR,
            Some(
                "maxTopicsPerBroker reached: broker b1 serves 3 topics, this would add 1 (limit 3)"
            )
        )
    );
    assert!(route_data(&mut admin, "D").is_none());
    // A second broker with three new topics would make six: refused, and not even its
    // cluster entry is left.
    let b2 = Broker::new("other", "b2", "10.0.0.2:10911", 0);
    let new_three: Vec<_> = ["E", "F", "G"].iter().map(|t| topic(t, 4, 6)).collect();
    let resp = register(&mut admin, &b2, &body_with(1, &new_three));
    assert_eq!(
        resp.remark.as_deref(),
        Some("maxTopics reached: the registry holds 3 topics, this would add 3 (limit 5)")
    );
    let info = cluster_info(&mut admin);
    assert!(!info.cluster_addr_table.contains_key("other"));
    assert!(!info.broker_addr_table.contains_key("b2"));
    assert_eq!(
        register(&mut admin, &b2, &body_with(1, &new_three[..2])).code,
        0
    );
    // No third broker address, and no sixth topic by REGISTER_TOPIC_IN_NAMESRV.
    let b3 = Broker::new("c", "b3", "10.0.0.3:10911", 0);
    let resp = register(&mut admin, &b3, &body_with(1, &[]));
    assert!(resp
        .remark
        .unwrap()
        .starts_with("maxBrokers reached: 2 brokers"));
    assert_eq!(register_topic(&mut admin, "Z", "b2", 4, 6), 1);
    assert_eq!(register_topic(&mut admin, "A", "b2", 4, 6), 0, "A exists");
    assert_eq!(stat(&mut admin, "brokers"), 2);
    assert_eq!(stat(&mut admin, "topics"), 5);
    // Room again once a broker leaves; a raised bound takes effect at once.
    assert_eq!(unregister(&mut conn1, &b1).code, 0);
    assert!(wait_until(WAIT, || {
        register(&mut admin, &b3, &body_with(1, &[])).code == 0
    }));
    update_config(
        &mut admin,
        "maxBrokers=3\nmaxTopics=10\nmaxTopicsPerBroker=4",
    );
    assert_eq!(register(&mut conn1, &b1, &body_with(3, &four)).code, 0);
}

// ------------------------------------------------------------------------ point 9

#[test]
fn a_broker_registering_at_another_brokers_address_takes_it_over() {
    let server = TestServer::start();
    let mut reader = server.client();
    let mut old_conn = server.client();
    let old = Broker::new("c", "old-name", "10.0.0.1:10911", 0);
    let body = body_with(1, &[topic("OldOnly", 4, 6), topic("Shared", 4, 6)]);
    assert_eq!(register(&mut old_conn, &old, &body).code, 0);
    let mut new_conn = server.client();
    let mut renamed = old.clone();
    renamed.name = "new-name".into();
    let body = body_with(1, &[topic("Shared", 4, 6)]);
    assert_eq!(register(&mut new_conn, &renamed, &body).code, 0);
    // The old name's entry for the address went as an unregistration would take it.
    let info = cluster_info(&mut reader);
    assert_eq!(info.cluster_addr_table["c"], vec!["new-name".to_string()]);
    assert!(!info.broker_addr_table.contains_key("old-name"));
    assert!(route_data(&mut reader, "OldOnly").is_none());
    let shared = route_data(&mut reader, "Shared").unwrap();
    assert_eq!(shared.queue_datas.len(), 1);
    assert_eq!(shared.queue_datas[0].broker_name, "new-name");
    // The old connection is nobody's registration connection now: closing it removes nothing.
    // (Once the close is seen, a marker unregistered after it comes back from the batching
    // thread after anything the close would have queued.)
    drop(old_conn);
    assert!(wait_until(WAIT, || stat(&mut reader, "connections") == 2));
    let marker = Broker::new("c", "marker", "10.0.0.99:10911", 0);
    assert_eq!(register(&mut reader, &marker, &body_with(1, &[])).code, 0);
    assert_eq!(unregister(&mut reader, &marker).code, 0);
    assert!(wait_until(WAIT, || stat(&mut reader, "brokers") == 1));
    assert_eq!(
        route_data(&mut reader, "Shared").unwrap().queue_datas.len(),
        1
    );
    drop(new_conn);
    assert!(wait_until(WAIT, || stat(&mut reader, "brokerGroups") == 0));
    assert_eq!(stat(&mut reader, "topics"), 0);
}

#[test]
fn two_fleets_sharing_addresses_leave_no_orphan_group_once_gone() {
    // The soak of the issue in small: two fleets of broker names take turns at the same
    // addresses, then every broker leaves; before the fix, each name that lost its address
    // stayed as a group routing to it.
    let server = TestServer::start();
    let mut reader = server.client();
    let mut conns: Vec<Client> = (0..4).map(|_| server.client()).collect();
    for round in 0..6 {
        for (i, conn) in conns.iter_mut().enumerate() {
            let fleet = if (round + i) % 2 == 0 {
                "blue"
            } else {
                "green"
            };
            let b = Broker::new(
                "soak",
                &format!("{fleet}-{i}"),
                &format!("10.0.0.{i}:10911"),
                0,
            );
            let topics = [
                topic(&format!("{fleet}-{i}-own"), 4, 6),
                topic("Shared", 4, 6),
            ];
            assert_eq!(
                register(conn, &b, &body_with(round as i64, &topics)).code,
                0
            );
        }
        assert_eq!(
            stat(&mut reader, "brokerGroups"),
            4,
            "one group per address"
        );
        assert_eq!(stat(&mut reader, "topics"), 5);
    }
    conns.clear();
    assert!(wait_until(WAIT, || stat(&mut reader, "brokerGroups") == 0));
    assert_eq!(stat(&mut reader, "topics"), 0);
    assert_eq!(stat(&mut reader, "clusters"), 0);
}
