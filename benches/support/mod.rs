//! Shared set-up for the micro benchmarks: the simulated cluster of `rmq-bench` (same
//! payload module, so benches and load runs use the same bodies) and a populated RouteTable.
#![allow(dead_code)]

#[path = "../../src/bin/rmq-bench/payload.rs"]
pub mod payload;

use payload::Layout;
use rmq_namesrv::checksum;
use rmq_namesrv::client::api::BrokerIdentity;
use rmq_namesrv::route::model::{decode_register_body, BodyLimits, RegisterBody};
use rmq_namesrv::route::table::{
    BodyFingerprint, RegisterRequest, RegisteringBroker, RouteSettings, RouteTable, TopicsInput,
};

/// One simulated broker with its encoded and decoded bodies (`[0]` steady, then churn
/// variants).
pub struct SimBroker {
    pub id: BrokerIdentity,
    pub bodies: Vec<Vec<u8>>,
    pub decoded: Vec<RegisterBody>,
    pub fingerprints: Vec<BodyFingerprint>,
}

/// The identity of a body as the processor computes it.
pub fn fingerprint(body: &[u8]) -> BodyFingerprint {
    BodyFingerprint {
        len: body.len(),
        header_crc: i64::from(checksum::crc32(body) & 0x7FFF_FFFF),
        hash: checksum::fingerprint(body),
    }
}

pub fn brokers(layout: &Layout, variants: usize) -> Vec<SimBroker> {
    let limits = BodyLimits::default();
    (0..layout.brokers)
        .map(|b| {
            let bodies: Vec<Vec<u8>> = (0..=variants).map(|v| layout.register_body(b, v)).collect();
            let decoded = bodies
                .iter()
                .map(|body| {
                    decode_register_body(body, false, 479, &limits, &mut Default::default())
                        .expect("body decodes")
                })
                .collect();
            let fingerprints = bodies.iter().map(|b| fingerprint(b)).collect();
            SimBroker {
                id: layout.broker(b),
                bodies,
                decoded,
                fingerprints,
            }
        })
        .collect()
}

pub fn request<'a>(
    cluster: &'a str,
    broker: &'a SimBroker,
    conn: usize,
    now_ms: u64,
    variant: usize,
    heartbeat_timeout_ms: Option<u64>,
) -> RegisterRequest<'a> {
    RegisterRequest {
        broker: RegisteringBroker {
            cluster,
            broker_addr: &broker.id.broker_addr,
            broker_name: &broker.id.broker_name,
            broker_id: 0,
            ha_server_addr: &broker.id.ha_server_addr,
            zone_name: None,
            heartbeat_timeout_ms,
            enable_acting_master: Some(false),
        },
        conn: Some(conn),
        now_ms,
        fingerprint: broker.fingerprints[variant],
    }
}

/// A table with every broker registered once with its steady body.
pub fn populated(sims: &[SimBroker], heartbeat_timeout_ms: Option<u64>) -> RouteTable {
    let mut table = RouteTable::new(RouteSettings::default(), 1000);
    for (i, b) in sims.iter().enumerate() {
        let req = request(payload::CLUSTER, b, i, 1_000, 0, heartbeat_timeout_ms);
        register_now(&mut table, &req, &b.decoded[0]);
    }
    table
}

/// A registration with its topic configs all put at once.
pub fn register_now(table: &mut RouteTable, req: &RegisterRequest<'_>, body: &RegisterBody) {
    let (_, steps) = table.register_broker(req, TopicsInput::Body(body));
    if let Some(mut steps) = steps {
        table.apply_topic_steps(&mut steps, body, usize::MAX);
    }
}
