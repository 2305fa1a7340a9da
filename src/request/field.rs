//! The header field names (`extFields` keys), Java's, each written once.

// Naming a broker (103, 104, 322, 904, 901, 205/327, 216).
pub const BROKER_NAME: &str = "brokerName";
pub const BROKER_ADDR: &str = "brokerAddr";
pub const CLUSTER_NAME: &str = "clusterName";
pub const BROKER_ID: &str = "brokerId";
pub const HA_SERVER_ADDR: &str = "haServerAddr";

// REGISTER_BROKER (103).
pub const BODY_CRC32: &str = "bodyCrc32";
pub const HEARTBEAT_TIMEOUT_MILLIS: &str = "heartbeatTimeoutMillis";
pub const ENABLE_ACTING_MASTER: &str = "enableActingMaster";
pub const COMPRESSED: &str = "compressed";
/// Set by Java's ZoneRouteRPCHook on every request of a zone-aware client or broker.
pub const ZONE_NAME: &str = "__ZONE_NAME";
pub const ZONE_MODE: &str = "__ZONE_MODE";

// Topics (105, 216, 217) and GET_TOPICS_BY_CLUSTER (224).
pub const TOPIC: &str = "topic";
pub const ACCEPT_STANDARD_JSON_ONLY: &str = "acceptStandardJsonOnly";
/// 224's cluster, named `cluster` (not `clusterName`) by `GetTopicsByClusterRequestHeader`.
pub const CLUSTER: &str = "cluster";

// The KV config (100, 101, 102, 219; `value` is also 101's answer).
pub const NAMESPACE: &str = "namespace";
pub const KEY: &str = "key";
pub const VALUE: &str = "value";

// Answers only.
pub const MASTER_ADDR: &str = "masterAddr";
pub const CHANGED: &str = "changed";
pub const WIPE_TOPIC_COUNT: &str = "wipeTopicCount";
pub const ADD_TOPIC_COUNT: &str = "addTopicCount";
