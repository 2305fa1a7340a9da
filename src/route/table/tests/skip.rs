//! Skipping the topic configs a broker's last apply put (`applied`): every writer of a
//! group's queue entries must void the record, so that the next changed registration leaves
//! the entries exactly as Java's, which re-puts every config.

use super::*;

/// Registers in steps of two topic configs; returns (configs skipped, entries changed).
fn register_counting(
    t: &mut RouteTable,
    r: &RegisterRequest<'_>,
    b: &RegisterBody,
) -> (usize, usize) {
    let (_, steps) = t.register_broker_in_steps(r, b);
    let mut steps = steps.expect("the topics are put");
    while !t.apply_topic_steps(&mut steps, b, 2) {}
    (steps.skipped, steps.changed)
}

/// Registers `b` as a live broker's second registration (a first one with an older
/// dataVersion and the same configs before it): a live entry's first registration keeps no
/// record, so this is how a test gets one.
fn register_recorded(t: &mut RouteTable, r: &RegisterRequest<'_>, b: &RegisterBody) {
    let mut older = b.clone();
    older.data_version.counter -= 100;
    t.register_broker(r, TopicsInput::Body(&older));
    t.register_broker(r, TopicsInput::Body(b));
    let live = t.live_id(r.cluster, r.broker_addr).expect("registered");
    assert!(!t.live[live].applied.digests.is_empty(), "recorded");
}

/// Group `group`'s queue entry of `topic`: (read, write, perm, sysFlag).
fn entry(t: &RouteTable, topic: &str, group: &str) -> Option<(i32, i32, i32, i32)> {
    let route = t.pickup_route(topic)?;
    let q = route.queue_datas.iter().find(|q| q.broker_name == group)?;
    Some((
        q.read_queue_nums,
        q.write_queue_nums,
        q.perm,
        q.topic_sys_flag,
    ))
}

/// Every topic of `b` has `group`'s entry exactly as its config says (perm without the write
/// bit when `clear_write`).
fn assert_as_sent(t: &RouteTable, group: &str, b: &RegisterBody, clear_write: bool) {
    for (_, tc) in &b.topics {
        let perm = if clear_write {
            tc.perm & !PERM_WRITE
        } else {
            tc.perm
        };
        let want = (
            tc.read_queue_nums,
            tc.write_queue_nums,
            perm,
            tc.topic_sys_flag,
        );
        assert_eq!(
            entry(t, &tc.topic_name, group),
            Some(want),
            "{}",
            tc.topic_name
        );
    }
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("T{i}")).collect()
}

fn body_of(counter: i64, names: &[String], perm: i32) -> RegisterBody {
    let topics: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), perm)).collect();
    body(counter, &topics)
}

fn deleting_table() -> RouteTable {
    RouteTable::new(
        RouteSettings {
            delete_topic_with_broker_registration: true,
            ..RouteSettings::default()
        },
        1000,
    )
}

#[test]
fn identical_configs_of_a_changed_registration_are_skipped_and_the_rest_put() {
    let mut t = table();
    let v1 = body(1, &[("A", 6), ("B", 6), ("C", 6), ("D", 6)]);
    register_recorded(&mut t, &req("c", "b", "m:1", 0, 1), &v1);
    // B changed, X inserted, C no longer reported (it stays: no deleteTopicWithBrokerRegistration).
    let v2 = body(2, &[("A", 6), ("B", 4), ("X", 6), ("D", 6)]);
    assert_eq!(
        register_counting(&mut t, &req("c", "b", "m:1", 0, 2), &v2),
        (2, 2)
    );
    assert_as_sent(&t, "b", &v2, false);
    assert_eq!(entry(&t, "C", "b"), Some((4, 4, 6, 0)));
    // The same configs again: all skipped, nothing changed.
    let v3 = body(3, &[("A", 6), ("B", 4), ("X", 6), ("D", 6)]);
    assert_eq!(
        register_counting(&mut t, &req("c", "b", "m:1", 0, 3), &v3),
        (4, 0)
    );
    // Applied in steps, nothing else written since: the same bytes again are unchanged.
    assert!(t.is_unchanged_body(&req("c", "b", "m:1", 0, 3)));
    // One field of one config changed: that one is put.
    let mut v4 = body(4, &[("A", 6), ("B", 4), ("X", 6), ("D", 6)]);
    v4.topics[2].1.topic_sys_flag = 1;
    assert_eq!(
        register_counting(&mut t, &req("c", "b", "m:1", 0, 4), &v4),
        (3, 1)
    );
    assert_as_sent(&t, "b", &v4, false);
}

#[test]
fn reordered_dropped_and_readded_topics_end_as_sent() {
    let mut t = deleting_table();
    let all = names(20);
    let v1 = body_of(1, &all, 6);
    register_recorded(&mut t, &req("c", "b", "m:1", 0, 1), &v1);
    // Reversed: most configs are out of the record's order and put (unchanged); right anyway.
    let mut reversed = all.clone();
    reversed.reverse();
    let v2 = body_of(2, &reversed, 6);
    let (_, changed) = register_counting(&mut t, &req("c", "b", "m:1", 0, 2), &v2);
    assert_eq!(changed, 0);
    assert_as_sent(&t, "b", &v2, false);
    // T5 dropped (its entry goes), then re-added.
    let without: Vec<String> = all.iter().filter(|n| *n != "T5").cloned().collect();
    let v3 = body_of(3, &without, 6);
    assert_eq!(
        register_counting(&mut t, &req("c", "b", "m:1", 0, 3), &v3).1,
        1
    );
    assert_eq!(entry(&t, "T5", "b"), None);
    let v4 = body_of(4, &all, 6);
    assert_eq!(
        register_counting(&mut t, &req("c", "b", "m:1", 0, 4), &v4),
        (19, 1)
    );
    assert_as_sent(&t, "b", &v4, false);
}

/// Broker b (master at m:1) registers `v1` (T0..T9, perm `perm`); `write` changes b's entries;
/// b registers again with a new dataVersion and the same configs: they are all back as sent.
fn after_foreign_write(
    mut t: RouteTable,
    perm: i32,
    acting: bool,
    write: impl FnOnce(&mut RouteTable, &RegisterBody),
) {
    let all = names(10);
    let v1 = body_of(1, &all, perm);
    let mut r1 = req("c", "b", "m:1", 0, 1);
    r1.enable_acting_master = Some(acting);
    register_recorded(&mut t, &r1, &v1);
    write(&mut t, &v1);
    let v2 = body_of(2, &all, perm);
    let mut r2 = req("c", "b", "m:1", 0, 2);
    r2.enable_acting_master = Some(acting);
    register_counting(&mut t, &r2, &v2);
    assert_as_sent(&t, "b", &v2, false);
}

#[test]
fn a_wipe_of_write_permission_is_undone_by_the_next_changed_registration() {
    after_foreign_write(table(), 6, false, |t, _| {
        assert_eq!(t.set_write_perm("b", false), 10);
    });
}

#[test]
fn an_added_write_permission_is_undone_by_the_next_changed_registration() {
    after_foreign_write(table(), 4, false, |t, _| {
        assert_eq!(t.set_write_perm("b", true), 10);
    });
}

#[test]
fn register_topic_with_other_queue_counts_is_undone_by_the_next_changed_registration() {
    after_foreign_write(table(), 6, false, |t, _| {
        let q = QueueData {
            broker_name: "b".into(),
            read_queue_nums: 8,
            write_queue_nums: 8,
            perm: 6,
            topic_sys_flag: 0,
        };
        assert!(t.register_topic("T3", &[q]));
        assert_eq!(entry(t, "T3", "b"), Some((8, 8, 6, 0)));
    });
}

#[test]
fn a_deleted_topic_is_readded_by_the_next_changed_registration() {
    after_foreign_write(table(), 6, false, |t, _| {
        assert!(t.delete_topic("T3", None));
    });
    after_foreign_write(table(), 6, false, |t, _| {
        assert!(t.delete_topic("T4", Some("c")));
    });
}

#[test]
fn another_address_of_the_group_writing_its_entries_voids_the_record() {
    // A restarted master at a new address puts other configs; the old address comes back.
    after_foreign_write(table(), 6, false, |t, v1| {
        let other = body(7, &[("T1", 4), ("T2", 4)]);
        t.register_broker(&req("c", "b", "m:2", 0, 1), TopicsInput::Body(&other));
        assert_eq!(entry(t, "T1", "b"), Some((4, 4, 4, 0)));
        assert_eq!(v1.topics.len(), 10);
    });
    // ... or, with deleteTopicWithBrokerRegistration, removes the topics it does not report.
    after_foreign_write(deleting_table(), 6, false, |t, _| {
        let other = body(7, &[("T1", 6)]);
        t.register_broker(&req("c", "b", "m:2", 0, 1), TopicsInput::Body(&other));
        assert_eq!(entry(t, "T2", "b"), None);
    });
}

/// Takes the master's address out of its group while its live entry stays (an unregistration
/// naming another cluster: the live entry is looked up by cluster, the group's addresses are
/// not), so that the master's record outlives what happens to the group meanwhile.
fn drop_master_address_keeping_its_live_entry(t: &mut RouteTable) {
    t.unregister_batch(&[unreg("elsewhere", "b", "m:1", 0)]);
    assert!(t.data_version("c", "m:1").is_some());
}

#[test]
fn a_prime_slave_clearing_write_permission_voids_the_masters_record() {
    after_foreign_write(table(), 6, true, |t, v1| {
        let mut slave = req("c", "b", "s:1", 1, 1);
        slave.enable_acting_master = Some(true);
        t.register_broker(&slave, TopicsInput::Body(v1));
        drop_master_address_keeping_its_live_entry(t);
        let mut again = req("c", "b", "s:1", 1, 2);
        again.enable_acting_master = Some(true);
        t.register_broker(&again, TopicsInput::Body(&body_of(5, &names(10), 6)));
        assert_eq!(entry(t, "T0", "b"), Some((4, 4, 4, 0)), "the prime slave's");
    });
}

#[test]
fn a_slaves_unregistration_wiping_write_permission_voids_the_masters_record() {
    let t = RouteTable::new(
        RouteSettings {
            support_acting_master: true,
            ..RouteSettings::default()
        },
        1000,
    );
    after_foreign_write(t, 6, true, |t, _| {
        for (addr, id) in [("s:1", 1), ("s:2", 2)] {
            let mut slave = req("c", "b", addr, id, 1);
            slave.enable_acting_master = Some(true);
            t.register_broker(&slave, TopicsInput::Unchanged);
        }
        drop_master_address_keeping_its_live_entry(t);
        t.unregister_batch(&[unreg("c", "b", "s:2", 2)]);
        assert_eq!(entry(t, "T0", "b"), Some((4, 4, 4, 0)), "wiped");
    });
}

#[test]
fn a_master_writing_voids_a_prime_slaves_record() {
    let mut t = table();
    let all = names(10);
    let slave = |now, acting| {
        let mut r = req("c", "b", "s:1", 1, now);
        r.enable_acting_master = Some(acting);
        r
    };
    // The slave stands in for its absent master: its topics are not writable.
    register_recorded(&mut t, &slave(1, true), &body_of(1, &all, 6));
    assert_eq!(entry(&t, "T0", "b"), Some((4, 4, 4, 0)));
    let mut master = req("c", "b", "m:1", 0, 2);
    master.enable_acting_master = Some(true);
    t.register_broker(&master, TopicsInput::Body(&body_of(1, &all, 6)));
    assert_eq!(entry(&t, "T0", "b"), Some((4, 4, 6, 0)));
    t.unregister_batch(&[unreg("c", "b", "m:1", 0)]);
    let v2 = body_of(2, &all, 6);
    register_counting(&mut t, &slave(3, true), &v2);
    assert_as_sent(&t, "b", &v2, true);
}

#[test]
fn a_group_removed_and_recreated_under_the_same_id_is_put_in_full() {
    for other_group_takes_the_id in [false, true] {
        after_foreign_write(table(), 6, false, |t, _| {
            drop_master_address_keeping_its_live_entry(t);
            assert_eq!(t.broker_group_count(), 0);
            if other_group_takes_the_id {
                let h = body(1, &[("T1", 4)]);
                t.register_broker(&req("c", "h", "h:1", 0, 1), TopicsInput::Body(&h));
            }
        });
    }
}

#[test]
fn a_write_between_two_steps_voids_the_skip_and_the_record() {
    let mut t = table();
    let all = names(10);
    register_recorded(&mut t, &req("c", "b", "m:1", 0, 1), &body_of(1, &all, 6));
    let v2 = body_of(2, &all, 6);
    let (_, steps) = t.register_broker_in_steps(&req("c", "b", "m:1", 0, 2), &v2);
    let mut steps = steps.unwrap();
    assert!(!t.apply_topic_steps(&mut steps, &v2, 4));
    assert_eq!(steps.skipped, 4);
    t.set_write_perm("b", false);
    while !t.apply_topic_steps(&mut steps, &v2, 4) {}
    assert_eq!(steps.skipped, 4, "none after the wipe");
    // Not the body's whole effect: the same bytes again are parsed and applied.
    assert!(!t.is_unchanged_body(&req("c", "b", "m:1", 0, 2)));
    // As Java would leave it: the first four wiped after their put, the rest put after it.
    assert_eq!(entry(&t, "T3", "b"), Some((4, 4, 4, 0)));
    assert_eq!(entry(&t, "T4", "b"), Some((4, 4, 6, 0)));
    // No record was kept of that apply: the next one puts everything.
    let v3 = body_of(3, &all, 6);
    assert_eq!(
        register_counting(&mut t, &req("c", "b", "m:1", 0, 3), &v3).0,
        0
    );
    assert_as_sent(&t, "b", &v3, false);
}

#[test]
fn a_body_naming_a_topic_twice_is_neither_skipped_nor_recorded() {
    let mut t = table();
    let twice = |counter, perms: [i32; 2]| {
        let mut b = body(counter, &[("X", perms[0]), ("X", perms[1])]);
        b.topics[0].0 = "key1".into();
        b.topics[1].0 = "key2".into();
        b
    };
    // Java puts both; the last stays.
    t.register_broker(
        &req("c", "b", "m:1", 0, 1),
        TopicsInput::Body(&twice(1, [6, 4])),
    );
    assert_eq!(entry(&t, "X", "b"), Some((4, 4, 4, 0)));
    let once = body(2, &[("X", 6)]);
    assert_eq!(
        register_counting(&mut t, &req("c", "b", "m:1", 0, 2), &once),
        (0, 1)
    );
    assert_eq!(entry(&t, "X", "b"), Some((4, 4, 6, 0)));
    // Recorded X perm 6; a body putting X twice is put in full: 4 then 6, then 6 then 4.
    let (_, changed) = register_counting(&mut t, &req("c", "b", "m:1", 0, 3), &twice(3, [4, 6]));
    assert_eq!(changed, 2);
    register_counting(&mut t, &req("c", "b", "m:1", 0, 4), &twice(4, [6, 4]));
    assert_eq!(entry(&t, "X", "b"), Some((4, 4, 4, 0)));
}

#[test]
fn a_put_if_absent_apply_drops_the_record() {
    let mut t = table();
    let v1 = body_of(1, &names(5), 6);
    register_recorded(&mut t, &req("c", "b", "m:1", 0, 1), &v1);
    let live = t.live_id("c", "m:1").unwrap();
    assert_eq!(t.live[live].applied.digests.len(), 5);
    // The same dataVersion in another body: only absent topics are put, nothing recorded.
    t.register_broker(&req("c", "b", "m:1", 0, 2), TopicsInput::Body(&v1));
    assert!(t.live[live].applied.digests.is_empty());
    let v2 = body_of(2, &names(5), 6);
    assert_eq!(
        register_counting(&mut t, &req("c", "b", "m:1", 0, 3), &v2).0,
        0
    );
    assert_eq!(t.live[live].applied.digests.len(), 5);
}

#[test]
fn records_are_kept_only_between_changed_registrations() {
    let mut t = table();
    let r = req("c", "b", "m:1", 0, 1);
    let live = |t: &RouteTable| t.live_id("c", "m:1").unwrap();
    // A live entry's first registration: nothing recorded (most are followed by unchanged ones).
    t.register_broker(&r, TopicsInput::Body(&body_of(1, &names(5), 6)));
    assert!(t.live[live(&t)].applied.digests.is_empty());
    // A changed one records what it put ...
    t.register_broker(&r, TopicsInput::Body(&body_of(2, &names(5), 6)));
    assert_eq!(t.live[live(&t)].applied.digests.len(), 5);
    // ... and an unchanged one drops it: a fleet in its steady state holds no digests.
    t.register_broker(&r, TopicsInput::Unchanged);
    assert!(t.live[live(&t)].applied.digests.is_empty());
    let v3 = body_of(3, &names(5), 6);
    assert_eq!(register_counting(&mut t, &r, &v3).0, 0, "nothing to skip");
    assert_as_sent(&t, "b", &v3, false);
}
