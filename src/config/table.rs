//! The property table: one row per key, from which the macro writes `NamesrvConfig`, its
//! `Default` and the lookup table. docs/configuration.md says what each key means.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use super::cidr::Cidr;
use crate::remoting::command::SerializeType;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    /// Re-read after every UPDATE_NAMESRV_CONFIG.
    Live,
    /// Read once at start: a runtime update of it is refused.
    AtStart,
    /// A Java setting one event loop does not use: accepted and reported, changes nothing.
    ReportedOnly,
}

pub(super) struct Property {
    pub key: &'static str,
    pub applies: Applies,
    pub get: fn(&NamesrvConfig) -> String,
    /// Err = invalid (reason without the key); the field is then left untouched.
    pub set: fn(&mut NamesrvConfig, &str) -> Result<(), String>,
}

impl std::fmt::Display for SerializeType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        })
    }
}

/// The rows: `"javaKey" => field: Type = default, Applies, parser;` (doc comments allowed).
macro_rules! properties {
    ($(
        $(#[$doc:meta])*
        $key:literal => $field:ident: $ty:ty = $default:expr, $applies:ident, $parse:expr;
    )*) => {
        /// Every property, typed. Field names are the Java keys in snake_case.
        #[derive(Debug, Clone, PartialEq)]
        pub struct NamesrvConfig {
            $( $(#[$doc])* pub $field: $ty, )*
            /// Given keys that are not fields (the Controller's, unknown ones), as given.
            pub extra: BTreeMap<String, String>,
        }

        impl Default for NamesrvConfig {
            fn default() -> Self {
                NamesrvConfig { $( $field: $default, )* extra: BTreeMap::new() }
            }
        }

        pub(super) static PROPERTIES: &[Property] = &[$(
            Property {
                key: $key,
                applies: Applies::$applies,
                get: |c| c.$field.to_string(),
                set: |c, v| {
                    c.$field = ($parse)(v)?;
                    Ok(())
                },
            },
        )*];
    };
}

const KIB: i64 = 1024;
const MIB: i64 = 1024 * KIB;
const GIB: i64 = 1024 * MIB;
const TIB: i64 = 1024 * GIB;
/// Java's `configBlackList` default; refusals of these keys keep Java's exact answer.
pub const JAVA_CONFIG_BLACK_LIST: &str = "configBlackList;configStorePath;kvConfigPath";

/// Added to Java's default black list: the allow lists, the limits that bound what peers may
/// make the server hold or spend, and the settings that would turn real peers away
/// (`serializeType`: C++ clients read JSON only; the route-lookup wait after start). Why each:
/// docs/configuration.md#the-black-list.
pub const PROTECTED_KEYS: &str = concat!(
    "adminAllowList;brokerAllowList;",
    "frameMaxLength;maxHeaderLength;maxExtFields;maxJsonDepth;maxJsonStringLength;",
    "maxInflatedBodyLength;decodeOnLoopMaxBytes;maxBufferedBytes;connWriteHighWater;",
    "connWriteHardCap;routeCacheMaxBytes;",
    "maxConnections;maxConnectionsPerAddress;reservedConnectionsPercent;",
    "frameReadTimeoutMillis;serverChannelMaxIdleTimeSeconds;",
    "maxTopicsPerRegistration;maxNameLength;maxTopicNameLength;maxQueueNums;maxBrokers;",
    "maxTopics;maxTopicsPerBroker;registrationBacklogLimit;registrationBudgetPerIteration;",
    "kvMaxKeyLength;kvMaxValueLength;kvMaxEntries;kvMaxTotalBytes;",
    "serializeType;needWaitForService;waitSecondsForService",
);

/// Java's thread counts (unused here, but nonsense is still refused).
const THREADS: RangeInclusive<i64> = 1..=1024;
const COUNT: RangeInclusive<i64> = 1..=10_000_000;

properties! {
    // ---- Java's NamesrvConfig
    "rocketmqHome" => rocketmq_home: String = std::env::var("ROCKETMQ_HOME").unwrap_or_default(), AtStart, parse_text;
    "kvConfigPath" => kv_config_path: String = under_home("namesrv/kvConfig.json"), AtStart, parse_text;
    "configStorePath" => config_store_path: String = under_home("namesrv/namesrv.properties"), AtStart, parse_text;
    "productEnvName" => product_env_name: String = "center".into(), ReportedOnly, parse_text;
    "clusterTest" => cluster_test: bool = false, ReportedOnly, parse_bool;
    "orderMessageEnable" => order_message_enable: bool = false, Live, parse_bool;
    "returnOrderTopicConfigToBroker" => return_order_topic_config_to_broker: bool = true, Live, parse_bool;
    "clientRequestThreadPoolNums" => client_request_thread_pool_nums: i32 = 8, ReportedOnly, in_range(THREADS);
    "clientRequestThreadPoolQueueCapacity" => client_request_thread_pool_queue_capacity: i32 = 50_000, ReportedOnly, in_range(COUNT);
    "defaultThreadPoolNums" => default_thread_pool_nums: i32 = 16, ReportedOnly, in_range(THREADS);
    "defaultThreadPoolQueueCapacity" => default_thread_pool_queue_capacity: i32 = 10_000, ReportedOnly, in_range(COUNT);
    /// 0 would spin the expiry scan; over an hour keeps dead brokers in routes too long.
    "scanNotActiveBrokerInterval" => scan_not_active_broker_interval: i64 = 5_000, Live, in_range(1..=3_600_000);
    "unRegisterBrokerQueueCapacity" => un_register_broker_queue_capacity: i32 = 3_000, AtStart, in_range(COUNT);
    "supportActingMaster" => support_acting_master: bool = false, Live, parse_bool;
    "enableAllTopicList" => enable_all_topic_list: bool = true, Live, parse_bool;
    "enableTopicList" => enable_topic_list: bool = true, Live, parse_bool;
    "notifyMinBrokerIdChanged" => notify_min_broker_id_changed: bool = false, Live, parse_bool;
    "enableControllerInNamesrv" => enable_controller_in_namesrv: bool = false, AtStart, parse_bool;
    "needWaitForService" => need_wait_for_service: bool = false, Live, parse_bool;
    "waitSecondsForService" => wait_seconds_for_service: i32 = 45, Live, in_range(0..=86_400);
    "deleteTopicWithBrokerRegistration" => delete_topic_with_broker_registration: bool = false, Live, parse_bool;
    /// Java's list plus [`PROTECTED_KEYS`]: a remote update cannot lock the operator out.
    "configBlackList" => config_black_list: String = format!("{JAVA_CONFIG_BLACK_LIST};{PROTECTED_KEYS}"), AtStart, parse_text;

    // ---- Java's NettyServerConfig
    "bindAddress" => bind_address: String = "0.0.0.0".into(), AtStart, parse_text;
    "listenPort" => listen_port: u16 = 9876, AtStart, in_range(0..=65_535);
    "serverWorkerThreads" => server_worker_threads: i32 = 8, ReportedOnly, in_range(THREADS);
    /// 0: Java picks 4.
    "serverCallbackExecutorThreads" => server_callback_executor_threads: i32 = 0, ReportedOnly, in_range(0..=1024);
    "serverSelectorThreads" => server_selector_threads: i32 = 3, ReportedOnly, in_range(THREADS);
    "serverOnewaySemaphoreValue" => server_oneway_semaphore_value: i32 = 256, ReportedOnly, in_range(COUNT);
    "serverAsyncSemaphoreValue" => server_async_semaphore_value: i32 = 64, ReportedOnly, in_range(COUNT);
    "serverChannelMaxIdleTimeSeconds" => server_channel_max_idle_time_seconds: i32 = 120, Live, in_range(0..=i32::MAX as i64);
    "serverSocketSndBufSize" => server_socket_snd_buf_size: i32 = 0, ReportedOnly, in_range(0..=GIB);
    "serverSocketRcvBufSize" => server_socket_rcv_buf_size: i32 = 0, ReportedOnly, in_range(0..=GIB);
    "writeBufferHighWaterMark" => write_buffer_high_water_mark: i32 = 0, ReportedOnly, in_range(0..=GIB);
    "writeBufferLowWaterMark" => write_buffer_low_water_mark: i32 = 0, ReportedOnly, in_range(0..=GIB);
    "serverSocketBacklog" => server_socket_backlog: i32 = 1024, AtStart, in_range(1..=1_048_576);
    "serverNettyWorkerGroupEnable" => server_netty_worker_group_enable: bool = true, ReportedOnly, parse_bool;
    "serverPooledByteBufAllocatorEnable" => server_pooled_byte_buf_allocator_enable: bool = true, ReportedOnly, parse_bool;
    "enableShutdownGracefully" => enable_shutdown_gracefully: bool = false, ReportedOnly, parse_bool;
    "shutdownWaitTimeSeconds" => shutdown_wait_time_seconds: i32 = 30, ReportedOnly, in_range(0..=3_600);
    "useEpollNativeSelector" => use_epoll_native_selector: bool = false, ReportedOnly, parse_bool;

    // ---- Java's TlsSystemConfig, the server's side (Java's mode defaults to permissive with a
    // self-signed test certificate; here TLS is off until configured). Built with the `tls`
    // feature; without it any mode but disabled is refused at start.
    "tls.server.mode" => tls_server_mode: String = "disabled".into(), AtStart, one_of(&["disabled", "permissive", "enforcing"]);
    "tls.server.certPath" => tls_server_cert_path: String = String::new(), AtStart, parse_text;
    "tls.server.keyPath" => tls_server_key_path: String = String::new(), AtStart, parse_text;
    /// Only empty: keys are read unencrypted, and no password is ever held or reported.
    "tls.server.keyPassword" => tls_server_key_password: String = String::new(), AtStart, parse_no_password;
    "tls.server.trustCertPath" => tls_server_trust_cert_path: String = String::new(), AtStart, parse_text;
    "tls.server.need.client.auth" => tls_server_need_client_auth: String = "none".into(), AtStart, one_of(&["none", "optional", "require"]);
    /// Read at start when TLS is on, if it exists: its tls.server.* keys fill in the ones the
    /// config file and the command line left at their defaults.
    "tls.config.file" => tls_config_file: String = "/etc/rocketmq/tls.properties".into(), AtStart, parse_text;

    // ---- rmq-namesrv's own
    /// Floor 8 MiB: a JSON registration of ~38,000 topics (220 bytes each), and the
    /// Controller's 4 MiB peer payloads; above 1 GiB one peer could exhaust memory.
    "frameMaxLength" => frame_max_length: u32 = 16_777_216, Live, in_range(8 * MIB..=GIB);
    "serializeType" => serialize_type: SerializeType = SerializeType::Json, Live, parse_serialize_type;
    "logPath" => log_path: String = under_home("logs/rocketmqlogs/namesrv.log"), AtStart, parse_text;
    "logLevel" => log_level: String = "info".into(), Live, parse_log_level;
    "logFileMaxSize" => log_file_max_size: u64 = 104_857_600, AtStart, in_range(KIB..=TIB);
    "logFileCount" => log_file_count: u32 = 5, AtStart, in_range(1..=1_000);
    "maxConnections" => max_connections: u32 = 65_536, Live, in_range(COUNT);
    /// Floor 32 KiB: a PUT_KV_CONFIG header carries a value of kvMaxValueLength (16 KiB).
    /// The header length field is 24 bits.
    "maxHeaderLength" => max_header_length: u32 = 262_144, Live, in_range(32 * KIB..=16 * MIB);
    /// Floor 32: name server requests carry about 15 header fields at most.
    "maxExtFields" => max_ext_fields: u32 = 256, Live, in_range(32..=1_000_000);
    /// Floor 16: a 5.x registration body nests 5 deep (topic attributes).
    /// The reader is iterative: depth costs heap, never call stack.
    "maxJsonDepth" => max_json_depth: u32 = 64, Live, in_range(16..=1_024);
    /// Floor 16 KiB: a KV value of kvMaxValueLength in a JSON header.
    "maxJsonStringLength" => max_json_string_length: u32 = 65_536, Live, in_range(16 * KIB..=GIB);
    "maxTopicsPerRegistration" => max_topics_per_registration: u32 = 100_000, Live, in_range(COUNT);
    /// A 5.x broker's body inflates to ~60 bytes per topic: 16 MiB holds far more than
    /// maxTopicsPerRegistration topics, as much as the largest JSON body could carry.
    "maxInflatedBodyLength" => max_inflated_body_length: u32 = 16_777_216, Live, in_range(KIB..=GIB);
    /// 64 KiB is about 380 topics: decoding ~0.13 ms, putting the configs up to ~0.6 ms, hash
    /// and CRC ~25 us: about 1 ms, half what a request may hold the loop.
    /// Re-measure: `cargo bench --bench register_body_parse` (a 1,000-topic body of ~172 KB)
    /// and `cargo bench --bench register_apply` (churn_100_topics: 100 configs put).
    "decodeOnLoopMaxBytes" => decode_on_loop_max_bytes: u32 = 65_536, Live, in_range(0..=GIB);
    "maxNameLength" => max_name_length: u32 = 255, Live, in_range(1..=65_535);
    "maxTopicNameLength" => max_topic_name_length: u32 = 127, Live, in_range(1..=65_535);
    /// Clients build one object per queue; real topics have up to a few hundred.
    "maxQueueNums" => max_queue_nums: u32 = 65_536, Live, in_range(1..=i32::MAX as i64);
    /// 10x a 1,000-broker cluster.
    "maxBrokers" => max_brokers: u32 = 10_000, Live, in_range(COUNT);
    /// 1,000 brokers with 1,000 topics each, none shared.
    "maxTopics" => max_topics: u32 = 1_000_000, Live, in_range(COUNT);
    "maxTopicsPerBroker" => max_topics_per_broker: u32 = 100_000, Live, in_range(COUNT);
    "connWriteHighWater" => conn_write_high_water: u32 = 4_194_304, Live, in_range(KIB..=GIB);
    "connWriteHardCap" => conn_write_hard_cap: u32 = 67_108_864, Live, in_range(KIB..=u32::MAX as i64);
    /// Sized for a small VM.
    "maxBufferedBytes" => max_buffered_bytes: u64 = 67_108_864, Live, in_range(MIB..=TIB);
    /// Above the brokers' own 24 s registration timeout.
    "frameReadTimeoutMillis" => frame_read_timeout_millis: u64 = 30_000, Live, in_range(0..=3_600_000);
    "maxConnectionsPerAddress" => max_connections_per_address: u32 = 0, Live, in_range(0..=10_000_000);
    /// So that a flood of new connections cannot lock working clients out.
    "reservedConnectionsPercent" => reserved_connections_percent: u32 = 5, Live, in_range(0..=50);
    "registrationBacklogLimit" => registration_backlog_limit: u32 = 10_000, Live, in_range(COUNT);
    "registrationBudgetPerIteration" => registration_budget_per_iteration: u32 = 64, Live, in_range(1..=1_000_000);
    "routeCacheMaxBytes" => route_cache_max_bytes: u32 = 4_194_304, Live, in_range(0..=u32::MAX as i64);
    /// Topic names are at most 127.
    "kvMaxKeyLength" => kv_max_key_length: u32 = 1_024, Live, in_range(1..=65_536);
    /// An ORDER_TOPIC_CONFIG value takes ~25 bytes per broker group: 16 KiB is 600 groups.
    "kvMaxValueLength" => kv_max_value_length: u32 = 16_384, Live, in_range(1..=16 * MIB);
    "kvMaxEntries" => kv_max_entries: u32 = 100_000, Live, in_range(1..=10_000_000);
    /// Also bounds the changes waiting for the disk, and each write (the whole file).
    "kvMaxTotalBytes" => kv_max_total_bytes: u32 = 16_777_216, Live, in_range(KIB..=GIB);
    "adminAllowList" => admin_allow_list: String = String::new(), Live, parse_allow_list;
    "brokerAllowList" => broker_allow_list: String = String::new(), Live, parse_allow_list;

    // ---- Java's metrics keys (its Controller's and brokers')
    /// `PROM`: the Prometheus endpoint, a third listener on the loop (docs/operations.md#metrics).
    "metricsExporterType" => metrics_exporter_type: String = "DISABLE".into(), AtStart, parse_metrics_exporter;
    /// "" = `bindAddress`.
    "metricsPromExporterHost" => metrics_prom_exporter_host: String = String::new(), AtStart, parse_text;
    "metricsPromExporterPort" => metrics_prom_exporter_port: u16 = 5557, AtStart, in_range(0..=65_535);
}

/// `$HOME/<rest>`; "." stands for an unset `$HOME` so the defaults stay relative, not at `/`.
pub fn under_home(rest: &str) -> String {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() => format!("{home}/{rest}"),
        _ => format!("./{rest}"),
    }
}

/// `true` or `false` in any case; anything else is refused, not read as false as Java would.
pub(crate) fn parse_bool(value: &str) -> Result<bool, String> {
    let text = value.trim();
    (text.to_ascii_lowercase().parse()).map_err(|_| format!("{text:?} is not true or false"))
}

fn parse_text(value: &str) -> Result<String, String> {
    Ok(value.trim().to_string())
}

/// An integer in `range` (surrounding blanks ignored), as the field's type.
pub(crate) fn in_range<T: TryFrom<i64>>(
    range: RangeInclusive<i64>,
) -> impl Fn(&str) -> Result<T, String> {
    move |value| {
        let text = value.trim();
        let n: i64 = text
            .parse()
            .map_err(|_| format!("{text:?} is not an integer"))?;
        let (low, high) = (range.start(), range.end());
        if !range.contains(&n) {
            return Err(format!("{n} is outside {low}..={high}"));
        }
        T::try_from(n).map_err(|_| format!("{n} does not fit"))
    }
}

fn parse_no_password(value: &str) -> Result<String, String> {
    match value.trim() {
        "" => Ok(String::new()),
        _ => Err("rmq-namesrv reads unencrypted PEM keys only: decrypt the key once (`openssl pkcs8 -in enc.pem -out key.pem`), keep it readable by the server's user only, and leave this key empty".into()),
    }
}

/// One of `words` (any case), kept in lower case.
fn one_of(words: &'static [&'static str]) -> impl Fn(&str) -> Result<String, String> {
    move |value| {
        let text = value.trim().to_ascii_lowercase();
        match words.contains(&text.as_str()) {
            true => Ok(text),
            false => Err(format!("{text:?} is not one of {}", words.join("|"))),
        }
    }
}

fn parse_serialize_type(value: &str) -> Result<SerializeType, String> {
    match value.trim().to_ascii_uppercase().as_str() {
        "JSON" => Ok(SerializeType::Json),
        "ROCKETMQ" => Ok(SerializeType::RocketMq),
        other => Err(format!("{other:?} is not JSON or ROCKETMQ")),
    }
}

/// Java's `MetricsExporterType` names; only `DISABLE` and `PROM` have an exporter here.
fn parse_metrics_exporter(value: &str) -> Result<String, String> {
    match value.trim().to_ascii_uppercase().as_str() {
        known @ ("DISABLE" | "PROM") => Ok(known.to_string()),
        "OTLP_GRPC" | "LOG" => Err(format!(
            "{:?} is not implemented here; use PROM (a Prometheus endpoint) or DISABLE",
            value.trim()
        )),
        _ => Err(format!("{:?} is not DISABLE or PROM", value.trim())),
    }
}

/// A level name `log` knows (any case), kept in lower case.
fn parse_log_level(value: &str) -> Result<String, String> {
    let text = value.trim();
    text.parse::<log::LevelFilter>()
        .map(|_| text.to_ascii_lowercase())
        .map_err(|_| format!("{text:?} is not one of error|warn|info|debug|trace|off"))
}

/// Every entry must be a valid CIDR; "" turns access control off.
fn parse_allow_list(value: &str) -> Result<String, String> {
    let mut entries = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        Cidr::parse(entry)?;
        entries.push(entry);
    }
    Ok(entries.join(","))
}
