//! Commands that look: the client call, the tables its answer makes for `--all`, the output.

use crate::cli::Invocation;
use crate::compare::{self, Answer};
use crate::outcome::{Outcome, Ran};
use crate::output::{columns, json_text, opt_cell, pretty_json, s, Cell, Table};
use crate::peers::Peers;
use rmq_namesrv::client::api::NamesrvStats;
use rmq_namesrv::client::{Client, ClientError};
use rmq_namesrv::remoting::codes::request_name;
use rmq_namesrv::remoting::json::{self, Value};
use rmq_namesrv::route::model::{ClusterInfo, Dialect, TopicRouteData};

/// The KV namespace of order confs (Java's `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
pub const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// The answer of the server the strategy picks, and its address.
fn ask_one<T>(
    inv: &Invocation,
    peers: &mut Peers,
    (what, title): (&str, Option<&str>),
    ask: impl FnMut(&mut Client) -> Result<T, ClientError>,
    answer_of: impl Fn(&T) -> Answer,
) -> Result<(String, T), Outcome> {
    if inv.all {
        return Err(compare::read_all(inv, peers, what, title, ask, answer_of));
    }
    peers.read(ask)
}

/// As [`ask_one`]; an answer of `None` fails with `missing(address)`.
fn ask_found<T>(
    inv: &Invocation,
    peers: &mut Peers,
    (what, title): (&str, Option<&str>),
    ask: impl FnMut(&mut Client) -> Result<Option<T>, ClientError>,
    sections: impl Fn(Option<&T>) -> Vec<(&'static str, Table)>,
    missing: impl FnOnce(&str) -> String,
) -> Result<T, Outcome> {
    let answer = |v: &Option<T>| Answer {
        sections: sections(v.as_ref()),
        found: v.is_some(),
    };
    match ask_one(inv, peers, (what, title), ask, answer)? {
        (_, Some(v)) => Ok(v),
        (addr, None) => Err(Outcome::failed(missing(&addr))),
    }
}

pub fn cluster_read(
    inv: &Invocation,
    peers: &mut Peers,
    table: fn(&ClusterInfo, Option<&str>) -> Table,
) -> Ran {
    let only = inv.get("c");
    let what = format!("cluster {}", only.unwrap_or_default());
    let none = ClusterInfo::default();
    let known = |info: &ClusterInfo| only.map_or(true, |c| info.cluster_addr_table.contains_key(c));
    let info = ask_found(
        inv,
        peers,
        (&what, None),
        |c| Ok(Some(c.get_cluster_info()?).filter(known)),
        |info| vec![("clusters", table(info.unwrap_or(&none), only))],
        |addr| format!("{what} not found on {addr}"),
    )?;
    Ok(Outcome::ok(table(&info, only).emit(inv.json)))
}

pub fn cluster_table(info: &ClusterInfo, only: Option<&str>) -> Table {
    let mut t = Table::new(&columns(
        "CLUSTER:cluster BROKER:brokerName BID:brokerId ADDRESS:brokerAddr ZONE:zoneName",
    ));
    for (cluster, names) in &info.cluster_addr_table {
        if only.is_some_and(|c| c != cluster) {
            continue;
        }
        let mut names = names.clone();
        names.sort();
        for b in names.iter().filter_map(|n| info.broker_addr_table.get(n)) {
            for (id, addr) in &b.broker_addrs {
                t.push(vec![
                    s(cluster.as_str()),
                    s(b.broker_name.as_str()),
                    Cell::Int(*id),
                    s(addr.as_str()),
                    opt_cell(b.zone_name.as_ref()),
                ]);
            }
        }
    }
    t
}

pub fn broker_table(info: &ClusterInfo, only: Option<&str>) -> Table {
    let mut t = Table::new(&columns(
        "BROKER:brokerName CLUSTER:cluster MASTER:masterAddr SLAVES:slaveAddrs ZONE:zoneName \
         ACTING_MASTER:enableActingMaster",
    ));
    for (name, b) in &info.broker_addr_table {
        if only.is_some_and(|c| c != b.cluster) {
            continue;
        }
        let slaves: Vec<String> = b
            .broker_addrs
            .iter()
            .filter(|(id, _)| **id != 0)
            .map(|(id, a)| format!("{id}={a}"))
            .collect();
        t.push(vec![
            s(name.as_str()),
            s(b.cluster.as_str()),
            opt_cell(b.broker_addrs.get(&0)),
            opt_cell((!slaves.is_empty()).then(|| slaves.join(","))),
            opt_cell(b.zone_name.as_ref()),
            Cell::Bool(b.enable_acting_master),
        ]);
    }
    t
}

fn perm_text(perm: i32) -> String {
    let bit = |mask, c| if perm & mask != 0 { c } else { '-' };
    [bit(4, 'R'), bit(2, 'W'), bit(1, 'X')].iter().collect()
}

/// "Not found" names the server that said so.
fn route_read(
    inv: &Invocation,
    peers: &mut Peers,
    title: Option<&str>,
    tables: impl Fn(&TopicRouteData) -> Vec<(&'static str, Table)>,
) -> Result<TopicRouteData, Outcome> {
    let topic = inv.req("t");
    let what = format!("topic {topic}");
    ask_found(
        inv,
        peers,
        (&what, title),
        |c| c.get_route(topic),
        |route| tables(route.unwrap_or(&TopicRouteData::default())),
        |addr| format!("{what} not found (no route on {addr})"),
    )
}

/// `mqadmin topicRoute`'s indented JSON; `-l` tables, `--json` one line, `--all` `-l`'s tables.
pub fn topic_route(inv: &Invocation, peers: &mut Peers) -> Ran {
    let title = format!("Topic: {}", inv.req("t"));
    let route = route_read(inv, peers, Some(&title), route_sections)?;
    if inv.has("l") {
        return Ok(Outcome::ok(route_tables(&title, &route)));
    }
    let mut out = Vec::new();
    route.encode(Dialect::Standard, &mut out);
    let value = json::parse(&out).map_err(|e| Outcome::failed(format!("route JSON: {e}")))?;
    let text: fn(&Value) -> String = if inv.json { json_text } else { pretty_json };
    Ok(Outcome::ok(text(&value)))
}

/// The route's tables (every section, so that `--all` answers have the same ones).
fn route_sections(route: &TopicRouteData) -> Vec<(&'static str, Table)> {
    let mut brokers = Table::new(&columns(
        "BROKER:brokerName CLUSTER:cluster BID:brokerId ADDRESS:brokerAddr ZONE:zoneName",
    ));
    for b in &route.broker_datas {
        for (id, addr) in &b.broker_addrs {
            brokers.push(vec![
                s(b.broker_name.as_str()),
                s(b.cluster.as_str()),
                Cell::Int(*id),
                s(addr.as_str()),
                opt_cell(b.zone_name.as_ref()),
            ]);
        }
    }
    let mut queues = Table::new(&columns(
        "BROKER:brokerName READ_QUEUES:readQueueNums WRITE_QUEUES:writeQueueNums PERM:perm \
         SYS_FLAG:topicSysFlag",
    ));
    for q in &route.queue_datas {
        queues.push(vec![
            s(q.broker_name.as_str()),
            Cell::Int(q.read_queue_nums.into()),
            Cell::Int(q.write_queue_nums.into()),
            s(format!("{} ({})", q.perm, perm_text(q.perm))),
            Cell::Int(q.topic_sys_flag.into()),
        ]);
    }
    let mut filters = Table::new(&columns(
        "BROKER_ADDRESS:brokerAddr FILTER_SERVERS:filterServers",
    ));
    for (addr, servers) in &route.filter_server_table {
        if !servers.is_empty() {
            filters.push(vec![s(addr.as_str()), s(servers.join(","))]);
        }
    }
    let conf = &route.order_topic_conf;
    vec![
        ("brokers", brokers),
        ("queues", queues),
        ("filterServers", filters),
        (
            "orderTopicConf",
            names_table(("ORDER_TOPIC_CONF", "orderTopicConf"), conf),
        ),
    ]
}

fn route_tables(title: &str, route: &TopicRouteData) -> String {
    let mut out = format!("{title}\n");
    if let Some(conf) = &route.order_topic_conf {
        out.push_str(&format!("Order topic conf: {conf}\n"));
    }
    // orderTopicConf is the line above; filterServers only when there are some.
    for (name, table) in route_sections(route) {
        if name != "orderTopicConf" && (name != "filterServers" || !table.rows().is_empty()) {
            out.push('\n');
            out.push_str(&table.render());
        }
    }
    out
}

fn route_clusters(route: &TopicRouteData) -> Vec<String> {
    let mut clusters: Vec<String> = route
        .broker_datas
        .iter()
        .map(|b| b.cluster.clone())
        .collect();
    clusters.sort();
    clusters.dedup();
    clusters
}

fn names_out(inv: &Invocation, names: Vec<String>) -> Outcome {
    if inv.json {
        let list = names.into_iter().map(Value::Str).collect();
        return Outcome::ok(json_text(&Value::Array(list)));
    }
    Outcome::ok(names.iter().map(|n| format!("{n}\n")).collect())
}

fn names_table<'a>(
    column: (&'static str, &'static str),
    names: impl IntoIterator<Item = &'a String>,
) -> Table {
    Table::with_rows(&[column], names.into_iter().map(|n| vec![s(n.as_str())]))
}

/// Every cluster serving the topic (`mqadmin topicClusterList` looks at the first broker).
pub fn topic_cluster_list(inv: &Invocation, peers: &mut Peers) -> Ran {
    let table = |route: &_| names_table(("CLUSTER", "cluster"), &route_clusters(route));
    let route = route_read(inv, peers, None, |route| vec![("clusters", table(route))])?;
    Ok(names_out(inv, route_clusters(&route)))
}

fn topics_by_cluster(c: &mut Client) -> Result<Vec<(String, String)>, ClientError> {
    let info = c.get_cluster_info()?;
    let mut rows = Vec::new();
    for cluster in info.cluster_addr_table.keys() {
        let mut topics = c.get_topics_by_cluster(cluster)?;
        topics.sort();
        rows.extend(topics.into_iter().map(|t| (cluster.clone(), t)));
    }
    Ok(rows)
}

fn cluster_topics_table(rows: &[(String, String)]) -> Table {
    let rows = rows.iter().map(|(c, t)| vec![s(c.as_str()), s(t.as_str())]);
    Table::with_rows(&[("CLUSTER", "cluster"), ("TOPIC", "topic")], rows)
}

pub fn topic_list(inv: &Invocation, peers: &mut Peers) -> Ran {
    if inv.has("c") {
        let answer = |rows: &Vec<_>| Answer::table("topics", cluster_topics_table(rows));
        let (_, rows) = ask_one(inv, peers, ("", None), topics_by_cluster, answer)?;
        return Ok(Outcome::ok(cluster_topics_table(&rows).emit(inv.json)));
    }
    let sorted = |c: &mut Client| {
        let mut topics = c.get_all_topic_list()?;
        topics.sort();
        Ok(topics)
    };
    let answer = |topics: &Vec<_>| Answer::table("topics", names_table(("TOPIC", "topic"), topics));
    let (_, topics) = ask_one(inv, peers, ("", None), sorted, answer)?;
    Ok(names_out(inv, topics))
}

pub fn kv_item(inv: &Invocation, peers: &mut Peers, namespace: &str, key: &str) -> Ran {
    let what = format!("KV config item {namespace}/{key}");
    let v = ask_found(
        inv,
        peers,
        (&what, None),
        |c| c.get_kv_config(namespace, key),
        |v| vec![("value", names_table(("VALUE", "value"), v))],
        |addr| format!("no {what} on {addr}"),
    )?;
    if !inv.json {
        return Ok(Outcome::ok(format!("{v}\n")));
    }
    Ok(Outcome::ok(json_text(&Value::Object(vec![
        ("namespace".into(), Value::Str(namespace.into())),
        ("key".into(), Value::Str(key.into())),
        ("value".into(), Value::Str(v)),
    ]))))
}

fn kv_table(entries: &[(String, String)]) -> Table {
    let mut entries = entries.to_vec();
    entries.sort();
    let rows = entries.into_iter().map(|(k, v)| vec![s(k), s(v)]);
    Table::with_rows(&[("KEY", "key"), ("VALUE", "value")], rows)
}

pub fn get_kv_config(inv: &Invocation, peers: &mut Peers) -> Ran {
    let namespace = inv.req("s");
    if let Some(key) = inv.get("k") {
        return kv_item(inv, peers, namespace, key);
    }
    let what = format!("KV config namespace {namespace}");
    let entries = ask_found(
        inv,
        peers,
        (&what, None),
        |c| c.get_kv_list(namespace),
        |entries| vec![("kv", kv_table(entries.map_or(&[], Vec::as_slice)))],
        |addr| format!("no {what} on {addr}"),
    )?;
    Ok(Outcome::ok(kv_table(&entries).emit(inv.json)))
}

/// A read of every server's own state: a section per server, or one JSON object by address.
fn each_server<T>(
    inv: &Invocation,
    peers: &mut Peers,
    ask: impl FnMut(&mut Client) -> Result<T, ClientError>,
    json: impl Fn(&T) -> Value,
    text: impl Fn(&T) -> String,
) -> Ran {
    let (answers, failures) = peers.ask_all(ask);
    let stdout = if inv.json {
        let members = answers.iter().map(|(addr, v)| (addr.clone(), json(v)));
        json_text(&Value::Object(members.collect()))
    } else {
        let sections: Vec<String> = answers
            .iter()
            .map(|(addr, v)| format!("============ {addr} ============\n{}", text(v)))
            .collect();
        sections.join("\n")
    };
    Ok(Outcome::of_all(stdout, answers.len(), &failures))
}

/// A configuration read from every server (`getNamesrvConfig`, `getControllerConfig`).
pub fn config_sections(
    inv: &Invocation,
    peers: &mut Peers,
    ask: impl FnMut(&mut Client) -> Result<Vec<(String, String)>, ClientError>,
) -> Ran {
    let json = |entries: &Vec<(String, String)>| {
        let members = entries
            .iter()
            .map(|(k, v)| (k.clone(), Value::Str(v.clone())));
        Value::Object(members.collect())
    };
    let text = |entries: &Vec<(String, String)>| {
        let rows = entries
            .iter()
            .map(|(k, v)| vec![s(k.as_str()), s(v.as_str())]);
        Table::with_rows(&[("KEY", ""), ("VALUE", "")], rows).render()
    };
    each_server(inv, peers, ask, json, text)
}

fn stats_json(st: &NamesrvStats) -> Value {
    let mut members: Vec<(String, Value)> = st
        .values
        .iter()
        .map(|(k, v)| (k.clone(), Value::Int(*v)))
        .collect();
    let requests = st
        .requests
        .iter()
        .map(|(code, n)| (code.to_string(), Value::Int(*n)));
    members.push(("requests".into(), Value::Object(requests.collect())));
    Value::Object(members)
}

fn stats_text(st: &NamesrvStats) -> String {
    let values = st
        .values
        .iter()
        .map(|(k, v)| vec![s(k.as_str()), Cell::Int(*v)]);
    let t = Table::with_rows(&[("STAT", ""), ("VALUE", "")], values);
    let requests = st.requests.iter().map(|(code, n)| {
        let name = s(request_name(*code));
        vec![Cell::Int((*code).into()), name, Cell::Int(*n)]
    });
    let r = Table::with_rows(&[("CODE", ""), ("REQUEST", ""), ("SERVED", "")], requests);
    format!("{}\n{}", t.render(), r.render())
}

pub fn stats(inv: &Invocation, peers: &mut Peers) -> Ran {
    each_server(inv, peers, |c| c.stats(), stats_json, stats_text)
}
