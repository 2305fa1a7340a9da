//! Commands that change name servers: every server of `-n`, one row each, OK or what failed.

use crate::cli::Invocation;
use crate::outcome::{Failure, FailureKind, Outcome, Ran};
use crate::output::{s, Cell, Table};
use crate::peers::Peers;
use crate::reads::{kv_item, ORDER_TOPIC_CONFIG};
use rmq_namesrv::client::{Client, ClientError};

pub enum Done {
    /// Done; with a count for the commands that report one (topics touched).
    Ok(Option<i64>),
    /// The server is fine but the write does not apply there (e.g. no such broker).
    Refused(String),
}

pub fn write_all(
    inv: &Invocation,
    peers: &mut Peers,
    count_column: Option<(&'static str, &'static str)>,
    f: impl FnMut(&mut Client) -> Result<Done, ClientError>,
) -> Ran {
    let mut columns = vec![peers.role.column(), ("RESULT", "result")];
    columns.extend(count_column);
    let mut t = Table::new(&columns);
    let mut failures = Vec::new();
    let mut succeeded = 0;
    for (addr, r) in peers.each(f) {
        let (result, count) = match r {
            Ok(Done::Ok(count)) => {
                succeeded += 1;
                (s("OK"), count.map_or(Cell::None, Cell::Int))
            }
            Ok(Done::Refused(why)) => {
                failures.push(Failure::new(&addr, FailureKind::Refused, why.clone()));
                (s(why), Cell::None)
            }
            Err(failure) => {
                let text = s(failure.message.as_str());
                failures.push(failure);
                (text, Cell::None)
            }
        };
        let count = count_column.map(|_| count);
        t.push([s(addr), result].into_iter().chain(count).collect());
    }
    Ok(Outcome::of_all(t.emit(inv.json), succeeded, &failures))
}

pub fn done<T>(r: Result<T, ClientError>) -> Result<Done, ClientError> {
    r.map(|_| Done::Ok(None))
}

/// Wipes or restores a broker's write permission (0 topics for an unknown broker is an error).
pub fn write_perm(inv: &Invocation, peers: &mut Peers, wipe: bool) -> Ran {
    let broker = inv.req("b");
    let key = if wipe {
        "wipeTopicCount"
    } else {
        "addTopicCount"
    };
    write_all(inv, peers, Some(("TOPICS", key)), |c| {
        let count = c.write_perm(broker, !wipe)?;
        if count == 0 && !c.get_cluster_info()?.broker_addr_table.contains_key(broker) {
            return Ok(Done::Refused(format!(
                "no broker named {broker} is registered here"
            )));
        }
        Ok(Done::Ok(Some(count.into())))
    })
}

const DELETE_TOPIC_NOTE: &str = "note: only the name servers' route of the topic was deleted; the \
     brokers still have it and register it again with their next heartbeat unless it is deleted \
     on them too (mqadmin deleteTopic does both)";

pub fn delete_topic(inv: &Invocation, peers: &mut Peers) -> Ran {
    let (t, cluster) = (inv.req("t"), inv.get("c"));
    let mut written = write_all(inv, peers, None, |c| done(c.delete_topic(t, cluster)))?;
    written.stderr.push(DELETE_TOPIC_NOTE.into());
    Ok(written)
}

/// `brokerName:queues;brokerName:queues`: a malformed conf breaks every producer of the topic.
fn check_order_conf(conf: &str) -> Result<(), String> {
    for item in conf.split(';').filter(|i| !i.trim().is_empty()) {
        let queues = item.split_once(':').and_then(|(name, n)| {
            let n: u32 = n.trim().parse().ok()?;
            (!name.trim().is_empty() && n > 0).then_some(n)
        });
        if queues.is_none() {
            return Err(format!(
                "order conf item {item:?} is not brokerName:queues (queues a number > 0)"
            ));
        }
    }
    if conf.trim().is_empty() {
        return Err("updateOrderConf -m put needs -v brokerName:queues[;brokerName:queues]".into());
    }
    Ok(())
}

/// `mqadmin updateOrderConf`: the topic's entry of the ORDER_TOPIC_CONFIG KV namespace.
pub fn update_order_conf(inv: &Invocation, peers: &mut Peers) -> Ran {
    let topic = inv.req("t");
    match inv.req("m") {
        "get" => kv_item(inv, peers, ORDER_TOPIC_CONFIG, topic),
        "put" => {
            let conf = inv.get("v").unwrap_or_default().trim();
            check_order_conf(conf).map_err(Outcome::usage)?;
            write_all(inv, peers, None, |c| {
                done(c.put_kv_config(ORDER_TOPIC_CONFIG, topic, conf))
            })
        }
        "delete" => write_all(inv, peers, None, |c| {
            done(c.delete_kv_config(ORDER_TOPIC_CONFIG, topic))
        }),
        other => Err(Outcome::usage(format!(
            "updateOrderConf -m takes get, put or delete, not {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_confs_are_checked_before_they_reach_producers() {
        assert!(check_order_conf("broker-a:4").is_ok());
        assert!(check_order_conf("broker-a:4;broker-b:8;").is_ok());
        assert!(check_order_conf("broker-a").is_err());
        assert!(check_order_conf("broker-a:x").is_err());
        assert!(check_order_conf("broker-a:0").is_err());
        assert!(check_order_conf(":4").is_err());
        assert!(check_order_conf("").is_err());
    }
}
