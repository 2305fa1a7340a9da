//! NameServerSet over real servers: the order each selection strategy tries them in (with a
//! fixed seed), failover when a server is down or hung, and least-loaded ranking by the stats
//! extension, including name servers that do not have it; the strategy names the tools take,
//! calls that decide themselves when to move on (`call_until`), calls to every server
//! (`call_each`) and choosing a server without a call (`choose`, for rmq-bench).

mod common;
mod fake_namesrv;

use common::*;
use fake_namesrv::{dead_addr, Behaviour, FakeNamesrv};
use rmq_namesrv::client::nameserver_set::{parse_addr_list, Load};
use rmq_namesrv::client::{Client, ClientError, NameServerSet, Strategy};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

fn set(addrs: &[&str], strategy: Strategy, seed: u64) -> NameServerSet {
    let mut s = NameServerSet::with_seed(
        addrs.iter().map(|a| a.to_string()).collect(),
        strategy,
        seed,
    )
    .expect("valid set");
    s.set_timeout(Duration::from_secs(5));
    s
}

/// Makes one call and returns the index of the server that answered it.
fn served_by(s: &mut NameServerSet) -> usize {
    s.call(|c| c.get_cluster_info()).expect("call succeeds");
    let addr = s.last_addr().expect("a server answered").to_string();
    s.addrs()
        .iter()
        .position(|a| *a == addr)
        .expect("answering server is in the set")
}

fn is_rotation(order: &[usize], n: usize) -> bool {
    order.len() == n
        && order
            .iter()
            .enumerate()
            .all(|(k, i)| *i == (order[0] + k) % n)
}

/// Connections the server reports (including the probe's own).
fn connections(probe: &mut Client) -> i64 {
    probe.stats().expect("stats").connections
}

/// Opens `n` idle connections to `server` and waits until the server counts them.
fn load(server: &TestServer, probe: &mut Client, n: usize) -> Vec<Client> {
    let before = connections(probe);
    let extra: Vec<Client> = (0..n).map(|_| server.client()).collect();
    assert!(
        wait_until(Duration::from_secs(10), || connections(probe)
            >= before + n as i64),
        "server never counted the extra connections"
    );
    extra
}

#[test]
fn address_lists_split_like_rocketmq() {
    assert_eq!(
        parse_addr_list("10.0.0.1:9876;10.0.0.2:9876; 10.0.0.3:9876;"),
        vec!["10.0.0.1:9876", "10.0.0.2:9876", "10.0.0.3:9876"]
    );
    assert!(NameServerSet::from_list(" ; ", Strategy::RoundRobin).is_err());
    assert!(NameServerSet::from_list("a:1;b:2", Strategy::Pinned(2)).is_err());
}

#[test]
fn random_start_is_fixed_by_the_seed_then_sticks_and_fails_over_in_order() {
    let servers: Vec<TestServer> = (0..3).map(|_| TestServer::start()).collect();
    let addrs: Vec<&str> = servers.iter().map(|s| s.addr.as_str()).collect();

    // The seed decides the start; the rest of the order is the list from there on.
    let mut starts = [0usize; 3];
    for seed in 0..60 {
        let order = set(&addrs, Strategy::RandomStartRoundRobin, seed).next_order();
        assert!(is_rotation(&order, 3), "seed {seed}: {order:?}");
        assert_eq!(
            order,
            set(&addrs, Strategy::RandomStartRoundRobin, seed).next_order(),
            "same seed, same order"
        );
        starts[order[0]] += 1;
    }
    assert!(
        starts.iter().all(|n| *n > 0),
        "every start occurs: {starts:?}"
    );

    // Sticky while healthy.
    let mut s = set(&addrs, Strategy::RandomStartRoundRobin, 7);
    let order = s.next_order();
    for _ in 0..5 {
        assert_eq!(served_by(&mut s), order[0]);
    }

    // The chosen server goes away: the next one in order takes over and stays chosen.
    let mut servers: Vec<Option<TestServer>> = servers.into_iter().map(Some).collect();
    if let Some(gone) = servers[order[0]].take() {
        gone.handle.stop().expect("server stops");
    }
    for _ in 0..3 {
        assert_eq!(served_by(&mut s), order[1]);
    }
    assert_eq!(s.next_order()[0], order[1]);
}

#[test]
fn pinned_uses_only_its_server_and_never_fails_over() {
    let a = TestServer::start();
    let b = TestServer::start();
    let mut s = set(&[&a.addr, &b.addr], Strategy::Pinned(1), 1);
    assert_eq!(s.next_order(), vec![1]);
    for _ in 0..4 {
        assert_eq!(served_by(&mut s), 1);
    }

    let dead = dead_addr();
    let mut s = set(&[&a.addr, &dead], Strategy::Pinned(1), 1);
    match s.call(|c| c.get_cluster_info()) {
        Err(ClientError::Io(e)) => assert!(e.to_string().contains(&dead), "{e}"),
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn round_robin_moves_on_with_every_call() {
    let servers: Vec<TestServer> = (0..3).map(|_| TestServer::start()).collect();
    let addrs: Vec<&str> = servers.iter().map(|s| s.addr.as_str()).collect();
    let mut s = set(&addrs, Strategy::RoundRobin, 3);
    assert_eq!(s.next_order(), vec![0, 1, 2]);
    let order: Vec<usize> = (0..6).map(|_| served_by(&mut s)).collect();
    assert_eq!(order, vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(s.next_order(), vec![0, 1, 2]);

    // With the middle one down, its turns fall to the next server.
    let dead = dead_addr();
    let mut s = set(&[addrs[0], &dead, addrs[2]], Strategy::RoundRobin, 3);
    let order: Vec<usize> = (0..4).map(|_| served_by(&mut s)).collect();
    assert_eq!(order, vec![0, 2, 2, 0]);
}

#[test]
fn every_strategy_but_pinned_fails_over_when_one_of_two_servers_is_down() {
    let live = TestServer::start();
    let dead = dead_addr();
    let addrs = [dead.as_str(), live.addr.as_str()];

    // A seed whose random start is the dead server, so failover is exercised.
    let seed = (0..100)
        .find(|seed| set(&addrs, Strategy::RandomStartRoundRobin, *seed).next_order()[0] == 0)
        .expect("some seed starts at index 0");
    let strategies = [
        (Strategy::RandomStartRoundRobin, seed),
        (Strategy::RoundRobin, 0),
        (Strategy::LeastLoaded { refresh: HOUR }, 0),
        (
            Strategy::LeastLoaded {
                refresh: Duration::ZERO,
            },
            0,
        ),
    ];
    for (strategy, seed) in strategies {
        let mut s = set(&addrs, strategy, seed);
        for call in 0..4 {
            assert_eq!(served_by(&mut s), 1, "{strategy:?}, call {call}");
        }
    }

    // Both down: one I/O error naming both addresses.
    let dead2 = dead_addr();
    let mut s = set(&[&dead, &dead2], Strategy::RoundRobin, 0);
    match s.call(|c| c.get_cluster_info()) {
        Err(ClientError::Io(e)) => {
            let text = e.to_string();
            assert!(text.contains(&dead) && text.contains(&dead2), "{text}");
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn a_hung_server_times_out_and_the_call_fails_over() {
    let hung = FakeNamesrv::start(Behaviour::Silent);
    let live = TestServer::start();
    let mut s = set(&[&hung.addr, &live.addr], Strategy::RoundRobin, 0);
    s.set_timeout(Duration::from_millis(300));
    assert_eq!(served_by(&mut s), 1);

    // An answer that is an error is not a reason to fail over.
    let mut s = set(&[&live.addr, &hung.addr], Strategy::RoundRobin, 0);
    s.set_timeout(Duration::from_millis(300));
    match s.call(|c| c.get_kv_config("NS", "missing").map(|v| v.ok_or(()))) {
        Ok(Err(())) => assert_eq!(s.last_addr(), Some(live.addr.as_str())),
        other => panic!("expected a clean miss from the live server, got {other:?}"),
    }
    match s.call(|c| c.update_namesrv_config(&[("kvConfigPath", "/tmp/x")])) {
        Err(ClientError::Response { code: 16, .. }) => {}
        other => panic!("expected NO_PERMISSION from the next server in turn, got {other:?}"),
    }
}

#[test]
fn least_loaded_picks_the_server_with_fewer_connections_and_reranks() {
    let a = TestServer::start();
    let b = TestServer::start();
    let mut probe_a = a.client();
    let mut probe_b = b.client();
    let _extra_a = load(&a, &mut probe_a, 5);

    let mut s = set(
        &[&a.addr, &b.addr],
        Strategy::LeastLoaded {
            refresh: Duration::ZERO,
        },
        11,
    );
    assert_eq!(s.next_order(), vec![1, 0]);
    match s.ranking().as_slice() {
        [(first, Load::Connections(nb)), (second, Load::Connections(na))] => {
            assert_eq!((*first, *second), (b.addr.as_str(), a.addr.as_str()));
            assert!(na >= &(nb + 5), "a {na} vs b {nb}");
        }
        other => panic!("unexpected ranking {other:?}"),
    }
    for _ in 0..3 {
        assert_eq!(served_by(&mut s), 1);
    }

    // B becomes the busier one; with refresh = 0 every call re-ranks.
    let _extra_b = load(&b, &mut probe_b, 10);
    assert_eq!(served_by(&mut s), 0);

    // With a long refresh the choice sticks until a call has to fail over.
    let mut s = set(
        &[&a.addr, &b.addr],
        Strategy::LeastLoaded { refresh: HOUR },
        11,
    );
    assert_eq!(served_by(&mut s), 0);
    let _more_a = load(&a, &mut probe_a, 20);
    assert_eq!(
        served_by(&mut s),
        0,
        "no re-ranking before the refresh interval"
    );
    drop(probe_a);
    a.handle.stop().expect("a stops");
    assert_eq!(served_by(&mut s), 1, "failover to b");
    s.next_order();
    assert!(
        matches!(s.ranking().last(), Some((addr, Load::Unreachable)) if *addr == a.addr),
        "a failover re-ranks: {:?}",
        s.ranking()
    );
}

#[test]
fn least_loaded_ranks_a_server_without_the_extension_after_ours_and_the_dead_last() {
    let ours = TestServer::start();
    let mut probe = ours.client();
    // Ours is busier than the fake in raw numbers, yet the fake cannot say so: it ranks after.
    let _extra = load(&ours, &mut probe, 5);
    let fake = FakeNamesrv::start(Behaviour::NoStats);
    let dead = dead_addr();

    let mut s = set(
        &[&dead, &fake.addr, &ours.addr],
        Strategy::LeastLoaded { refresh: HOUR },
        5,
    );
    assert_eq!(s.next_order(), vec![2, 1, 0]);
    let ranking = s.ranking();
    assert!(matches!(ranking[0].1, Load::Connections(n) if n >= 6));
    assert_eq!(ranking[1].1, Load::NoStats(3));
    assert_eq!(ranking[2].1, Load::Unreachable);
    for _ in 0..3 {
        assert_eq!(served_by(&mut s), 2);
    }
    assert_eq!(fake.served(), 0);

    // Only name servers without the extension: the strategy still works.
    let fake2 = FakeNamesrv::start(Behaviour::NoStats);
    let mut s = set(
        &[&fake.addr, &fake2.addr],
        Strategy::LeastLoaded { refresh: HOUR },
        5,
    );
    let first = s.next_order()[0];
    assert!(s
        .ranking()
        .iter()
        .all(|(_, load)| *load == Load::NoStats(3)));
    for _ in 0..3 {
        assert_eq!(served_by(&mut s), first);
    }
    assert_eq!(fake.served() + fake2.served(), 3);
}

#[test]
fn equal_loads_are_ordered_by_the_seed() {
    let f1 = FakeNamesrv::start(Behaviour::NoStats);
    let f2 = FakeNamesrv::start(Behaviour::NoStats);
    let f3 = FakeNamesrv::start(Behaviour::NoStats);
    let addrs = [f1.addr.as_str(), f2.addr.as_str(), f3.addr.as_str()];
    let strategy = Strategy::LeastLoaded { refresh: HOUR };
    let mut firsts = [0usize; 3];
    for seed in 0..30 {
        let order = set(&addrs, strategy, seed).next_order();
        assert_eq!(order, set(&addrs, strategy, seed).next_order());
        firsts[order[0]] += 1;
    }
    assert!(firsts.iter().all(|n| *n > 0), "ties spread: {firsts:?}");
}

#[test]
fn strategies_parse_from_the_names_the_tools_take() {
    let addrs: Vec<String> = vec!["h1:1".into(), "h2:2".into()];
    let parse = |t: &str| Strategy::parse(t, &addrs);
    assert_eq!(parse("random"), Ok(Strategy::RandomStartRoundRobin));
    assert_eq!(parse("round-robin"), Ok(Strategy::RoundRobin));
    assert_eq!(
        parse("fewest"),
        Ok(Strategy::LeastLoaded {
            refresh: Duration::ZERO
        })
    );
    assert_eq!(parse("pinned:1"), Ok(Strategy::Pinned(1)));
    assert_eq!(parse(" pinned:h1:1 "), Ok(Strategy::Pinned(0)));
    assert!(parse("pinned:2").is_err());
    assert!(parse("pinned:h3:3").is_err());
    assert!(parse("nearest").unwrap_err().contains("random|pinned:N"));
    for s in [
        Strategy::RandomStartRoundRobin,
        Strategy::RoundRobin,
        Strategy::Pinned(1),
    ] {
        assert_eq!(parse(&s.name()), Ok(s));
    }
}

#[test]
fn call_until_moves_on_as_the_caller_says_and_keeps_every_failure() {
    let live = TestServer::start();
    let fake = FakeNamesrv::start(Behaviour::NoStats);
    let dead = dead_addr();
    let addrs = [dead.as_str(), fake.addr.as_str(), live.addr.as_str()];

    // `call` stops at the fake's error answer (code 3); moving on for it reaches the live one.
    let mut s = set(&addrs, Strategy::RoundRobin, 0);
    match s.call(|c| c.stats()) {
        Err(ClientError::Response { code: 3, .. }) => {}
        other => panic!("expected the fake's answer, got {other:?}"),
    }
    let mut s = set(&addrs, Strategy::RoundRobin, 0);
    let stats = s
        .call_until(|c| c.stats(), |_| true)
        .expect("the live server");
    assert!(stats.connections >= 1);
    assert_eq!(s.last_addr(), Some(live.addr.as_str()));

    // Nobody answers: each failure with its server, in the order tried.
    let mut s = set(&addrs[..2], Strategy::RoundRobin, 0);
    let failures = s
        .call_until(|c| c.stats(), |_| true)
        .expect_err("no stats anywhere");
    assert_eq!(failures.len(), 2);
    assert!(matches!(failures[0], (0, ClientError::Io(_))));
    assert!(matches!(
        failures[1],
        (1, ClientError::Response { code: 3, .. })
    ));
    // Stopped by the caller: the refusal is last.
    let mut s = set(&[&fake.addr, &live.addr], Strategy::RoundRobin, 0);
    let failures = s
        .call_until(|c| c.stats(), ClientError::is_failover)
        .expect_err("stops at the fake");
    assert!(matches!(
        failures[..],
        [(0, ClientError::Response { code: 3, .. })]
    ));
}

#[test]
fn call_each_asks_every_server_in_list_order_whatever_the_strategy() {
    let a = TestServer::start();
    let b = TestServer::start();
    let dead = dead_addr();
    a.client().put_kv_config("NS", "who", "a").expect("put");
    b.client().put_kv_config("NS", "who", "b").expect("put");
    let mut s = set(&[&b.addr, &dead, &a.addr], Strategy::Pinned(0), 0);
    let results = s.call_each(|c| c.get_kv_config("NS", "who"));
    assert_eq!(results.len(), 3);
    assert!(matches!(&results[0], (0, Ok(Some(v))) if v == "b"));
    assert!(matches!(&results[1], (1, Err(ClientError::Io(_)))));
    assert!(matches!(&results[2], (2, Ok(Some(v))) if v == "a"));
}

#[test]
fn choose_picks_as_the_strategy_says_without_a_call() {
    let servers: Vec<TestServer> = (0..3).map(|_| TestServer::start()).collect();
    let addrs: Vec<&str> = servers.iter().map(|s| s.addr.as_str()).collect();
    let mut s = set(&addrs, Strategy::RoundRobin, 0);
    let picks: Vec<usize> = (0..5).map(|_| s.choose()).collect();
    assert_eq!(picks, [0, 1, 2, 0, 1]);
    let mut s = set(&addrs, Strategy::Pinned(2), 0);
    assert_eq!((s.choose(), s.choose()), (2, 2));
    // Random: the seed's start, then the same server (Java's clients stay on theirs).
    let mut s = set(&addrs, Strategy::RandomStartRoundRobin, 9);
    let start = set(&addrs, Strategy::RandomStartRoundRobin, 9).next_order()[0];
    assert_eq!((s.choose(), s.choose()), (start, start));
    // Fewest: the least loaded, ranked afresh each time.
    let mut probe = servers[0].client();
    let _busy = load(&servers[0], &mut probe, 5);
    let mut probe1 = servers[1].client();
    let _busy1 = load(&servers[1], &mut probe1, 5);
    let mut s = set(
        &addrs,
        Strategy::LeastLoaded {
            refresh: Duration::ZERO,
        },
        0,
    );
    assert_eq!(s.choose(), 2);
    let mut probe2 = servers[2].client();
    let _busy2 = load(&servers[2], &mut probe2, 20);
    assert_ne!(s.choose(), 2);
}
