//! The server's own properties: `NamesrvConfig` with Java's defaults, the
//! `java.util.Properties` text format, the mqnamesrv-like command line, and the runtime
//! update (UPDATE_NAMESRV_CONFIG) with its black list and write-back.
//!
//! Every property is one row of a single table (`PROPERTIES`): its Java key, how to
//! print it and how to parse and range-check it. `get`, `set`, `keys` and the properties
//! text are all driven by that table, so a new property is added in exactly two places
//! (the struct field and its row). Keys that are not in the table are kept verbatim in
//! `extra`, because Java remembers them and reports them in GET_NAMESRV_CONFIG.
//!
//! The text written back (and returned by GET_NAMESRV_CONFIG) is `key=value` lines with no
//! escaping, as Java does. To make that text always re-read to the same config, `set`
//! refuses keys and values that could not survive the trip (line breaks, backslashes, and
//! separator characters in keys). Without that, an update could smuggle a black-listed key
//! into the stored file through an escaped newline.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::OnceLock;

/// Every property, typed. Field names = the property key in snake_case.
#[derive(Debug, Clone, PartialEq)]
pub struct NamesrvConfig {
    // NamesrvConfig (Java)
    pub rocketmq_home: String,
    pub kv_config_path: String,
    pub config_store_path: String,
    pub product_env_name: String,
    pub cluster_test: bool,
    pub order_message_enable: bool,
    pub return_order_topic_config_to_broker: bool,
    pub client_request_thread_pool_nums: i32,
    pub client_request_thread_pool_queue_capacity: i32,
    pub default_thread_pool_nums: i32,
    pub default_thread_pool_queue_capacity: i32,
    pub scan_not_active_broker_interval: i64,
    pub un_register_broker_queue_capacity: i32,
    pub support_acting_master: bool,
    pub enable_all_topic_list: bool,
    pub enable_topic_list: bool,
    pub notify_min_broker_id_changed: bool,
    pub enable_controller_in_namesrv: bool,
    pub need_wait_for_service: bool,
    pub wait_seconds_for_service: i32,
    pub delete_topic_with_broker_registration: bool,
    pub config_black_list: String,
    // NettyServerConfig (Java)
    pub bind_address: String,
    pub listen_port: u16,
    pub server_worker_threads: i32,
    pub server_callback_executor_threads: i32,
    pub server_selector_threads: i32,
    pub server_oneway_semaphore_value: i32,
    pub server_async_semaphore_value: i32,
    pub server_channel_max_idle_time_seconds: i32,
    pub server_socket_snd_buf_size: i32,
    pub server_socket_rcv_buf_size: i32,
    pub write_buffer_high_water_mark: i32,
    pub write_buffer_low_water_mark: i32,
    pub server_socket_backlog: i32,
    pub server_netty_worker_group_enable: bool,
    pub server_pooled_byte_buf_allocator_enable: bool,
    pub enable_shutdown_gracefully: bool,
    pub shutdown_wait_time_seconds: i32,
    pub use_epoll_native_selector: bool,
    // rmq-namesrv's own
    /// Limit on length+4 of a frame (PROTOCOL §1.1).
    pub frame_max_length: u32,
    pub serialize_type: SerializeTypeSetting,
    /// "" = no file log.
    pub log_path: String,
    pub log_level: String,
    pub log_file_max_size: u64,
    pub log_file_count: u32,
    pub max_connections: u32,
    pub max_header_length: u32,
    pub max_ext_fields: u32,
    pub max_json_depth: u32,
    pub max_json_string_length: u32,
    pub max_topics_per_registration: u32,
    pub max_inflated_body_length: u32,
    /// Cluster and broker names.
    pub max_name_length: u32,
    /// TopicValidator's limit.
    pub max_topic_name_length: u32,
    /// Stop reading a peer whose unsent output is above this.
    pub conn_write_high_water: u32,
    /// Disconnect a peer whose unsent output is above this.
    pub conn_write_hard_cap: u32,
    /// Pending registrations before answering SYSTEM_BUSY.
    pub registration_backlog_limit: u32,
    pub registration_budget_per_iteration: u32,
    /// Bytes of encoded routes kept in the route cache.
    pub route_cache_max_bytes: u32,
    /// "" = off; else comma-separated CIDRs, e.g. "127.0.0.1/32,10.0.0.0/8,::1/128".
    pub admin_allow_list: String,
    /// Keys seen in a config file or update that are not fields above: kept and reported (Java keeps them).
    pub extra: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SerializeTypeSetting {
    Json,
    RocketMq,
}

/// `$HOME` for the default paths; "." when unset so the defaults stay relative, not absolute at `/`.
fn home_dir() -> String {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() => home,
        _ => ".".to_string(),
    }
}

impl Default for NamesrvConfig {
    fn default() -> Self {
        let home = home_dir();
        NamesrvConfig {
            rocketmq_home: std::env::var("ROCKETMQ_HOME").unwrap_or_default(),
            kv_config_path: format!("{home}/namesrv/kvConfig.json"),
            config_store_path: format!("{home}/namesrv/namesrv.properties"),
            product_env_name: "center".to_string(),
            cluster_test: false,
            order_message_enable: false,
            return_order_topic_config_to_broker: true,
            client_request_thread_pool_nums: 8,
            client_request_thread_pool_queue_capacity: 50_000,
            default_thread_pool_nums: 16,
            default_thread_pool_queue_capacity: 10_000,
            scan_not_active_broker_interval: 5_000,
            un_register_broker_queue_capacity: 3_000,
            support_acting_master: false,
            enable_all_topic_list: true,
            enable_topic_list: true,
            notify_min_broker_id_changed: false,
            enable_controller_in_namesrv: false,
            need_wait_for_service: false,
            wait_seconds_for_service: 45,
            delete_topic_with_broker_registration: false,
            config_black_list: "configBlackList;configStorePath;kvConfigPath".to_string(),
            bind_address: "0.0.0.0".to_string(),
            listen_port: 9876,
            server_worker_threads: 8,
            server_callback_executor_threads: 0,
            server_selector_threads: 3,
            server_oneway_semaphore_value: 256,
            server_async_semaphore_value: 64,
            server_channel_max_idle_time_seconds: 120,
            server_socket_snd_buf_size: 0,
            server_socket_rcv_buf_size: 0,
            write_buffer_high_water_mark: 0,
            write_buffer_low_water_mark: 0,
            server_socket_backlog: 1024,
            server_netty_worker_group_enable: true,
            server_pooled_byte_buf_allocator_enable: true,
            enable_shutdown_gracefully: false,
            shutdown_wait_time_seconds: 30,
            use_epoll_native_selector: false,
            frame_max_length: 16_777_216,
            serialize_type: SerializeTypeSetting::Json,
            log_path: format!("{home}/logs/rocketmqlogs/namesrv.log"),
            log_level: "info".to_string(),
            log_file_max_size: 104_857_600,
            log_file_count: 5,
            max_connections: 65_536,
            max_header_length: 262_144,
            max_ext_fields: 256,
            max_json_depth: 64,
            max_json_string_length: 65_536,
            max_topics_per_registration: 100_000,
            max_inflated_body_length: 67_108_864,
            max_name_length: 255,
            max_topic_name_length: 127,
            conn_write_high_water: 4_194_304,
            conn_write_hard_cap: 67_108_864,
            registration_backlog_limit: 10_000,
            registration_budget_per_iteration: 64,
            route_cache_max_bytes: 4_194_304,
            admin_allow_list: String::new(),
            extra: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetOutcome {
    Applied,
    Unknown,
    Invalid(String),
}

#[derive(Debug)]
pub enum UpdateError {
    /// -> response 16 NO_PERMISSION, remark "Can not update config in black list."
    BlackListed(String),
    /// -> response 1, remark "string2Properties error"
    Parse(String),
    /// -> response 1, remark naming the error
    Persist(std::io::Error),
}

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateError::BlackListed(key) => write!(f, "{key} is in the config black list"),
            UpdateError::Parse(reason) => write!(f, "string2Properties error: {reason}"),
            UpdateError::Persist(e) => write!(f, "persisting the config failed: {e}"),
        }
    }
}

impl std::error::Error for UpdateError {}

// ---------------------------------------------------------------------------------------------
// The property table

/// One property: its Java key, how to print it, and how to parse it (Err = invalid, field untouched).
struct Property {
    key: &'static str,
    get: fn(&NamesrvConfig) -> String,
    set: fn(&mut NamesrvConfig, &str) -> Result<(), String>,
}

/// A string property: Java trims strings.
macro_rules! text {
    ($key:literal, $field:ident) => {
        Property {
            key: $key,
            get: |c| c.$field.clone(),
            set: |c, v| {
                c.$field = v.trim().to_string();
                Ok(())
            },
        }
    };
}

/// A Java boolean: Boolean.parseBoolean never fails (anything but "true" is false).
macro_rules! flag {
    ($key:literal, $field:ident) => {
        Property {
            key: $key,
            get: |c| c.$field.to_string(),
            set: |c, v| {
                c.$field = java_bool(v);
                Ok(())
            },
        }
    };
}

/// An integer property checked against a sane range.
macro_rules! number {
    ($key:literal, $field:ident, $range:expr) => {
        Property {
            key: $key,
            get: |c| c.$field.to_string(),
            set: |c, v| {
                c.$field = parse_in_range(v, $range)?;
                Ok(())
            },
        }
    };
}

const KIB: i64 = 1024;
const MIB: i64 = 1024 * KIB;
const GIB: i64 = 1024 * MIB;
const TIB: i64 = 1024 * GIB;
/// Generous ceiling for thread counts of the Java-compatible keys (we run one event loop; the
/// values are kept for GET_NAMESRV_CONFIG, but nonsense is still refused).
const THREADS: RangeInclusive<i64> = 1..=1024;
/// Ceiling for queue capacities, semaphores and element counts.
const COUNT: RangeInclusive<i64> = 1..=10_000_000;

#[rustfmt::skip]
static PROPERTIES: &[Property] = &[
    // NamesrvConfig (Java)
    text!("rocketmqHome", rocketmq_home),
    text!("kvConfigPath", kv_config_path),
    text!("configStorePath", config_store_path),
    text!("productEnvName", product_env_name),
    flag!("clusterTest", cluster_test),
    flag!("orderMessageEnable", order_message_enable),
    flag!("returnOrderTopicConfigToBroker", return_order_topic_config_to_broker),
    number!("clientRequestThreadPoolNums", client_request_thread_pool_nums, THREADS),
    number!("clientRequestThreadPoolQueueCapacity", client_request_thread_pool_queue_capacity, COUNT),
    number!("defaultThreadPoolNums", default_thread_pool_nums, THREADS),
    number!("defaultThreadPoolQueueCapacity", default_thread_pool_queue_capacity, COUNT),
    // ms; 0 would spin the expiry scan, more than an hour keeps dead brokers in routes too long.
    number!("scanNotActiveBrokerInterval", scan_not_active_broker_interval, 1..=3_600_000),
    number!("unRegisterBrokerQueueCapacity", un_register_broker_queue_capacity, COUNT),
    flag!("supportActingMaster", support_acting_master),
    flag!("enableAllTopicList", enable_all_topic_list),
    flag!("enableTopicList", enable_topic_list),
    flag!("notifyMinBrokerIdChanged", notify_min_broker_id_changed),
    flag!("enableControllerInNamesrv", enable_controller_in_namesrv),
    flag!("needWaitForService", need_wait_for_service),
    // seconds; at most a day.
    number!("waitSecondsForService", wait_seconds_for_service, 0..=86_400),
    flag!("deleteTopicWithBrokerRegistration", delete_topic_with_broker_registration),
    text!("configBlackList", config_black_list),
    // NettyServerConfig (Java)
    text!("bindAddress", bind_address),
    // 0 = an ephemeral port chosen by the OS.
    number!("listenPort", listen_port, 0..=65_535),
    number!("serverWorkerThreads", server_worker_threads, THREADS),
    // 0 means "Java picks 4".
    number!("serverCallbackExecutorThreads", server_callback_executor_threads, 0..=1024),
    number!("serverSelectorThreads", server_selector_threads, THREADS),
    number!("serverOnewaySemaphoreValue", server_oneway_semaphore_value, COUNT),
    number!("serverAsyncSemaphoreValue", server_async_semaphore_value, COUNT),
    // seconds; 0 = never close idle connections.
    number!("serverChannelMaxIdleTimeSeconds", server_channel_max_idle_time_seconds, 0..=i32::MAX as i64),
    // bytes; 0 = OS default, at most 1 GiB.
    number!("serverSocketSndBufSize", server_socket_snd_buf_size, 0..=GIB),
    number!("serverSocketRcvBufSize", server_socket_rcv_buf_size, 0..=GIB),
    // bytes; 0 = default, at most 1 GiB.
    number!("writeBufferHighWaterMark", write_buffer_high_water_mark, 0..=GIB),
    number!("writeBufferLowWaterMark", write_buffer_low_water_mark, 0..=GIB),
    number!("serverSocketBacklog", server_socket_backlog, 1..=1_048_576),
    flag!("serverNettyWorkerGroupEnable", server_netty_worker_group_enable),
    flag!("serverPooledByteBufAllocatorEnable", server_pooled_byte_buf_allocator_enable),
    flag!("enableShutdownGracefully", enable_shutdown_gracefully),
    // seconds; at most an hour.
    number!("shutdownWaitTimeSeconds", shutdown_wait_time_seconds, 0..=3_600),
    flag!("useEpollNativeSelector", use_epoll_native_selector),
    // rmq-namesrv's own
    // bytes; below 1 KiB no real request fits, above 1 GiB one peer could exhaust memory.
    number!("frameMaxLength", frame_max_length, KIB..=GIB),
    Property {
        key: "serializeType",
        get: |c| match c.serialize_type {
            SerializeTypeSetting::Json => "JSON".to_string(),
            SerializeTypeSetting::RocketMq => "ROCKETMQ".to_string(),
        },
        set: |c, v| {
            c.serialize_type = match v.trim().to_ascii_uppercase().as_str() {
                "JSON" => SerializeTypeSetting::Json,
                "ROCKETMQ" => SerializeTypeSetting::RocketMq,
                other => return Err(format!("{other:?} is not JSON or ROCKETMQ")),
            };
            Ok(())
        },
    },
    text!("logPath", log_path),
    Property {
        key: "logLevel",
        get: |c| c.log_level.clone(),
        set: |c, v| {
            let level = v.trim().to_ascii_lowercase();
            // The level names log/simplelog understand.
            match level.as_str() {
                "error" | "warn" | "info" | "debug" | "trace" | "off" => {
                    c.log_level = level;
                    Ok(())
                }
                _ => Err(format!("{v:?} is not one of error|warn|info|debug|trace|off")),
            }
        },
    },
    // bytes before rotation: 1 KiB..=1 TiB.
    number!("logFileMaxSize", log_file_max_size, KIB..=TIB),
    // rotated files kept: 1..=1000.
    number!("logFileCount", log_file_count, 1..=1_000),
    number!("maxConnections", max_connections, COUNT),
    // bytes: 1 KiB..=16 MiB (the header length field is 24 bits).
    number!("maxHeaderLength", max_header_length, KIB..=16 * MIB),
    number!("maxExtFields", max_ext_fields, 1..=1_000_000),
    // nesting levels; the JSON reader recurses, so keep well below stack limits.
    number!("maxJsonDepth", max_json_depth, 1..=1_024),
    // bytes: 1..=1 GiB.
    number!("maxJsonStringLength", max_json_string_length, 1..=GIB),
    number!("maxTopicsPerRegistration", max_topics_per_registration, COUNT),
    // bytes: 1 KiB..=1 GiB.
    number!("maxInflatedBodyLength", max_inflated_body_length, KIB..=GIB),
    // characters: 1..=65535.
    number!("maxNameLength", max_name_length, 1..=65_535),
    number!("maxTopicNameLength", max_topic_name_length, 1..=65_535),
    // bytes: 1 KiB..=1 GiB.
    number!("connWriteHighWater", conn_write_high_water, KIB..=GIB),
    // bytes: 1 KiB..=4 GiB-1.
    number!("connWriteHardCap", conn_write_hard_cap, KIB..=u32::MAX as i64),
    number!("registrationBacklogLimit", registration_backlog_limit, COUNT),
    number!("registrationBudgetPerIteration", registration_budget_per_iteration, 1..=1_000_000),
    // bytes: 0 (no caching) ..= 4 GiB-1.
    number!("routeCacheMaxBytes", route_cache_max_bytes, 0..=u32::MAX as i64),
    Property {
        key: "adminAllowList",
        get: |c| c.admin_allow_list.clone(),
        set: |c, v| {
            // Every entry must be a valid CIDR; "" turns access control off.
            let mut entries = Vec::new();
            for entry in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                Cidr::parse(entry)?;
                entries.push(entry);
            }
            c.admin_allow_list = entries.join(",");
            Ok(())
        },
    },
];

fn property(key: &str) -> Option<&'static Property> {
    PROPERTIES.iter().find(|p| p.key == key)
}

/// Java's Boolean.parseBoolean, except that surrounding whitespace is ignored (a trailing
/// space in a properties file would otherwise silently turn "true" into false).
fn java_bool(value: &str) -> bool {
    value.trim().eq_ignore_ascii_case("true")
}

fn parse_in_range<T: TryFrom<i64>>(value: &str, range: RangeInclusive<i64>) -> Result<T, String> {
    let text = value.trim();
    let n: i64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not an integer"))?;
    if !range.contains(&n) {
        return Err(format!(
            "{n} is outside {}..={}",
            range.start(),
            range.end()
        ));
    }
    T::try_from(n).map_err(|_| format!("{n} does not fit"))
}

/// A key that `to_properties_text` can write and `parse_properties` reads back unchanged.
fn check_key(key: &str) -> Result<(), String> {
    let bad_char = |c: char| c.is_whitespace() || c.is_control() || matches!(c, '=' | ':' | '\\');
    if key.is_empty() || key.starts_with(['#', '!']) || key.contains(bad_char) {
        return Err(format!("key {key:?} cannot be stored as a property"));
    }
    Ok(())
}

/// A value that `to_properties_text` (no escaping) can write and read back unchanged.
fn check_value(value: &str) -> Result<(), String> {
    if value.contains(['\r', '\n', '\\']) {
        return Err(format!(
            "value {value:?} contains a line break or backslash"
        ));
    }
    Ok(())
}

impl NamesrvConfig {
    /// Applies one property by its Java key (camelCase, e.g. "scanNotActiveBrokerInterval").
    /// Unknown keys go into `extra` (SetOutcome::Unknown, with a warning). A value that does
    /// not parse or is out of its range leaves the field unchanged and returns Invalid(reason).
    /// Booleans as Java's Boolean.parseBoolean (true iff "true" ignoring case, trimmed).
    /// Numbers and strings are trimmed.
    pub fn set(&mut self, key: &str, value: &str) -> SetOutcome {
        if let Err(reason) = check_key(key).and_then(|()| check_value(value)) {
            return SetOutcome::Invalid(reason);
        }
        match property(key) {
            Some(p) => match (p.set)(self, value) {
                Ok(()) => SetOutcome::Applied,
                Err(reason) => SetOutcome::Invalid(format!("{key}: {reason}")),
            },
            None => {
                log::warn!("unknown config key {key:?} kept as given");
                self.extra.insert(key.to_string(), value.trim().to_string());
                SetOutcome::Unknown
            }
        }
    }

    /// The property's current value as text (None if unknown and not in extra).
    pub fn get(&self, key: &str) -> Option<String> {
        match property(key) {
            Some(p) => Some((p.get)(self)),
            None => self.extra.get(key).cloned(),
        }
    }

    /// Every known key (Java names), in sorted order.
    pub fn keys() -> &'static [&'static str] {
        static KEYS: OnceLock<Vec<&'static str>> = OnceLock::new();
        KEYS.get_or_init(|| {
            let mut keys: Vec<&'static str> = PROPERTIES.iter().map(|p| p.key).collect();
            keys.sort_unstable();
            keys
        })
    }

    /// All properties (known + extra) as `key=value\n` lines sorted by key (GET_NAMESRV_CONFIG
    /// body, file format). No escaping, as Java does.
    pub fn to_properties_text(&self) -> String {
        let mut all: BTreeMap<&str, String> = self
            .extra
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        for p in PROPERTIES {
            all.insert(p.key, (p.get)(self));
        }
        let mut text = String::new();
        for (key, value) in all {
            text.push_str(key);
            text.push('=');
            text.push_str(&value);
            text.push('\n');
        }
        text
    }

    /// configBlackList split on ';' (trimmed, empty dropped) plus the hard-coded
    /// configBlackList, configStorePath, kvConfigPath, rocketmqHome.
    pub fn black_list(&self) -> Vec<String> {
        let mut list: Vec<String> = [
            "configBlackList",
            "configStorePath",
            "kvConfigPath",
            "rocketmqHome",
        ]
        .iter()
        .map(|k| k.to_string())
        .collect();
        for entry in self.config_black_list.split(';').map(str::trim) {
            if !entry.is_empty() && !list.iter().any(|k| k == entry) {
                list.push(entry.to_string());
            }
        }
        list
    }

    /// UPDATE_NAMESRV_CONFIG: parse `body` as Java properties, refuse if ANY key is
    /// black-listed (nothing applied), else apply every key with `set` and write the whole
    /// config (to_properties_text) to config_store_path via crate::durable_file::replace_file
    /// before returning. Returns the keys applied (unknown keys included: they are kept).
    ///
    /// A value `set` refuses is skipped with a warning and left out of the result, as Java
    /// silently skips values its setters cannot take. The change is made on a copy and
    /// committed only once the file is written, so memory and file never disagree.
    pub fn update(&mut self, body: &str) -> Result<Vec<String>, UpdateError> {
        let pairs = parse_properties(body).map_err(UpdateError::Parse)?;
        let black_list = self.black_list();
        if let Some((key, _)) = pairs.iter().find(|(k, _)| black_list.contains(k)) {
            return Err(UpdateError::BlackListed(key.clone()));
        }
        let mut next = self.clone();
        let mut applied: Vec<String> = Vec::new();
        for (key, value) in &pairs {
            match next.set(key, value) {
                SetOutcome::Applied | SetOutcome::Unknown => {
                    if !applied.contains(key) {
                        applied.push(key.clone());
                    }
                }
                SetOutcome::Invalid(reason) => {
                    log::warn!("UPDATE_NAMESRV_CONFIG skipped {key}: {reason}");
                }
            }
        }
        crate::durable_file::replace_file(
            Path::new(&next.config_store_path),
            next.to_properties_text().as_bytes(),
        )
        .map_err(UpdateError::Persist)?;
        *self = next;
        Ok(applied)
    }

    /// Admin allow list parsed (empty vec = access control off). `set` refuses invalid
    /// entries; any that got in by direct assignment are skipped here and reported by `validate`.
    pub fn admin_allow_list_parsed(&self) -> Vec<Cidr> {
        self.admin_allow_list
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .filter_map(|e| Cidr::parse(e).ok())
            .collect()
    }

    /// Checks every field against the rules `set` applies (useful after assigning fields
    /// directly). Returns the first problem found.
    pub fn validate(&self) -> Result<(), String> {
        let mut probe = self.clone();
        for key in Self::keys() {
            let value = self.get(key).unwrap_or_default();
            if let SetOutcome::Invalid(reason) = probe.set(key, &value) {
                return Err(reason);
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// CIDR ranges

/// A CIDR range (IPv4 or IPv6). `contains` tests an address; an IPv4-mapped IPv6 address
/// matches IPv4 ranges (and an IPv4 address matches `::ffff:0:0/96`-style ranges).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cidr {
    /// Network address with the host bits cleared.
    network: IpAddr,
    prefix_len: u8,
}

impl Cidr {
    /// `a.b.c.d/n` (n 0..=32), `v6/n` (n 0..=128), or a bare address (= /32 or /128).
    /// Host bits set below the prefix are cleared (10.1.2.3/8 = 10.0.0.0/8).
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let text = s.trim();
        let (addr_text, prefix_text) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr_text
            .parse()
            .map_err(|_| format!("{text:?} is not an IP address or CIDR"))?;
        let max = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        let prefix_len = match prefix_text {
            None => max,
            Some(p) => {
                // Digits only: u8::from_str would also take "+8".
                if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("{text:?} has a malformed prefix length"));
                }
                match p.parse::<u8>() {
                    Ok(n) if n <= max => n,
                    _ => return Err(format!("{text:?}: prefix length must be 0..={max}")),
                }
            }
        };
        let network = match addr {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask32(prefix_len))),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask128(prefix_len))),
        };
        Ok(Cidr {
            network,
            prefix_len,
        })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(a)) => self.v4_match(net, a),
            (IpAddr::V4(net), IpAddr::V6(a)) => match a.to_ipv4_mapped() {
                Some(a4) => self.v4_match(net, a4),
                None => false,
            },
            (IpAddr::V6(net), IpAddr::V6(a)) => self.v6_match(net, a),
            (IpAddr::V6(net), IpAddr::V4(a)) => self.v6_match(net, a.to_ipv6_mapped()),
        }
    }

    fn v4_match(&self, net: Ipv4Addr, a: Ipv4Addr) -> bool {
        u32::from(a) & mask32(self.prefix_len) == u32::from(net)
    }

    fn v6_match(&self, net: Ipv6Addr, a: Ipv6Addr) -> bool {
        u128::from(a) & mask128(self.prefix_len) == u128::from(net)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

fn mask32(prefix_len: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(prefix_len.min(32)))
        .unwrap_or(0)
}

fn mask128(prefix_len: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix_len.min(128)))
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// java.util.Properties text

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Splits text into logical lines the way Properties.LineReader does: skips blank and
/// comment lines and leading whitespace, joins continued lines. Returns (first line number, chars).
fn logical_lines(text: &str) -> Vec<(usize, Vec<char>)> {
    let mut lines = Vec::new();
    let mut buf: Vec<char> = Vec::new();
    let mut line_no = 1;
    let mut start_line = 1;
    let mut skip_white = true;
    let mut is_new_line = true;
    let mut is_comment = false;
    let mut appended_line_begin = false;
    let mut preceding_backslash = false;
    let mut skip_lf = false;
    for c in text.chars() {
        if skip_lf {
            skip_lf = false;
            if c == '\n' {
                continue;
            }
        }
        let is_terminator = c == '\n' || c == '\r';
        if is_terminator {
            line_no += 1;
            skip_lf = c == '\r';
        }
        if skip_white {
            if is_blank(c) || (is_terminator && !appended_line_begin) {
                continue;
            }
            skip_white = false;
            appended_line_begin = false;
        }
        if is_new_line {
            is_new_line = false;
            start_line = line_no;
            if c == '#' || c == '!' {
                is_comment = true;
                continue;
            }
        }
        if !is_terminator {
            if !is_comment {
                buf.push(c);
            }
            preceding_backslash = c == '\\' && !preceding_backslash;
            continue;
        }
        if is_comment || buf.is_empty() {
            is_comment = false;
            is_new_line = true;
            skip_white = true;
            preceding_backslash = false;
            buf.clear();
        } else if preceding_backslash {
            // Odd number of backslashes: drop the last one and continue on the next line.
            buf.pop();
            skip_white = true;
            appended_line_begin = true;
            preceding_backslash = false;
        } else {
            lines.push((start_line, std::mem::take(&mut buf)));
            is_new_line = true;
            skip_white = true;
        }
    }
    if !is_comment && !buf.is_empty() {
        if preceding_backslash {
            buf.pop();
        }
        lines.push((start_line, buf));
    }
    lines
}

/// Splits a logical line at the first unescaped `=`, `:` or blank (Properties.load).
fn split_key_value(line: &[char]) -> (&[char], &[char]) {
    let mut key_len = line.len();
    let mut value_start = line.len();
    let mut has_separator = false;
    let mut preceding_backslash = false;
    for (i, &c) in line.iter().enumerate() {
        if !preceding_backslash && (c == '=' || c == ':' || is_blank(c)) {
            key_len = i;
            value_start = i + 1;
            has_separator = c == '=' || c == ':';
            break;
        }
        preceding_backslash = c == '\\' && !preceding_backslash;
    }
    let rest = line.get(value_start..).unwrap_or(&[]);
    let mut skip = 0;
    for &c in rest {
        if is_blank(c) {
            skip += 1;
        } else if !has_separator && (c == '=' || c == ':') {
            has_separator = true;
            skip += 1;
        } else {
            break;
        }
    }
    let key = line.get(..key_len).unwrap_or(&[]);
    (key, rest.get(skip..).unwrap_or(&[]))
}

/// Resolves backslash escapes. `\uXXXX` yields a UTF-16 unit, so surrogate pairs written as
/// two escapes combine as in Java; an unpaired surrogate becomes U+FFFD.
fn unescape(chars: &[char]) -> Result<String, String> {
    let mut units: Vec<u16> = Vec::with_capacity(chars.len());
    let mut it = chars.iter().copied();
    let mut utf16 = [0u16; 2];
    while let Some(c) = it.next() {
        let c = if c == '\\' {
            match it.next() {
                // Only reachable at end of input, where Java drops the backslash too.
                None => break,
                Some('u') => {
                    let mut unit: u32 = 0;
                    for _ in 0..4 {
                        let digit = it
                            .next()
                            .and_then(|h| h.to_digit(16))
                            .ok_or_else(|| "Malformed \\uxxxx encoding.".to_string())?;
                        unit = unit * 16 + digit;
                    }
                    units.push(unit as u16);
                    continue;
                }
                Some('t') => '\t',
                Some('r') => '\r',
                Some('n') => '\n',
                Some('f') => '\x0c',
                Some(other) => other,
            }
        } else {
            c
        };
        units.extend_from_slice(c.encode_utf16(&mut utf16));
    }
    Ok(String::from_utf16_lossy(&units))
}

/// java.util.Properties.load semantics over text: `key=value`, `key:value`, `key value`;
/// `#`/`!` comment lines; leading whitespace skipped; backslash escapes (\t \n \r \f \\
/// \uXXXX, other `\x` => x); a line ending in an odd number of backslashes continues on the
/// next line (its leading whitespace skipped); escaped separators in keys; `\n`, `\r\n` and
/// `\r` all end a line. Malformed \uXXXX => Err. Later duplicates win (returned in file
/// order; caller applies in order).
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    for (line_no, line) in logical_lines(text) {
        let (key, value) = split_key_value(&line);
        let key = unescape(key).map_err(|e| format!("line {line_no}: {e}"))?;
        let value = unescape(value).map_err(|e| format!("line {line_no}: {e}"))?;
        pairs.push((key, value));
    }
    Ok(pairs)
}

// ---------------------------------------------------------------------------------------------
// Command line

/// What the command line asks for.
#[derive(Debug)]
pub enum Cli {
    Run(NamesrvConfig),
    PrintConfig(NamesrvConfig),
    Help(String),
    Version,
}

/// Reads a config file. Java reads it as ISO-8859-1; we take UTF-8 when the bytes are valid
/// UTF-8 (so non-ASCII paths work) and fall back to ISO-8859-1 otherwise.
fn read_properties_file(path: &str) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read config file {path}: {e}"))?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => e.into_bytes().iter().map(|&b| char::from(b)).collect(),
    })
}

fn apply(config: &mut NamesrvConfig, key: &str, value: &str, origin: &str) -> Result<(), String> {
    match config.set(key, value) {
        SetOutcome::Applied | SetOutcome::Unknown => Ok(()),
        SetOutcome::Invalid(reason) => Err(format!("{origin}: {reason}")),
    }
}

/// mqnamesrv-like CLI over the arguments *without* the program name: `-c FILE`/`--configFile
/// FILE` (or `--configFile=FILE`; loads a properties file and sets config_store_path to that
/// path; missing/unreadable file => Err), `-p`/`--printConfigItem`, `-h`/`--help`,
/// `--version`/`-v`, and any number of `--key=value` overrides (any property key, applied
/// after the file, in order). Unknown keys from file or overrides are warned about with
/// log::warn! and kept in `extra`; invalid values and unknown options are Err. Help and
/// version win over everything else once the arguments are well-formed.
pub fn parse_cli(args: &[String]) -> Result<Cli, String> {
    let mut config_file: Option<String> = None;
    let mut print_config = false;
    let mut help = false;
    let mut version = false;
    let mut overrides: Vec<(String, String)> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-c" | "--configFile" => match it.next() {
                Some(file) => config_file = Some(file.clone()),
                None => return Err(format!("{arg} needs a file name")),
            },
            "-p" | "--printConfigItem" => print_config = true,
            "-h" | "--help" => help = true,
            "-v" | "--version" => version = true,
            other => match other.strip_prefix("--").and_then(|kv| kv.split_once('=')) {
                Some(("configFile", file)) => config_file = Some(file.to_string()),
                Some((key, value)) if !key.is_empty() => {
                    overrides.push((key.to_string(), value.to_string()))
                }
                _ => return Err(format!("unexpected argument {other:?}; try -h")),
            },
        }
    }
    if help {
        return Ok(Cli::Help(usage()));
    }
    if version {
        return Ok(Cli::Version);
    }
    let mut config = NamesrvConfig::default();
    if let Some(path) = config_file {
        let text = read_properties_file(&path)?;
        let pairs = parse_properties(&text).map_err(|e| format!("{path}: {e}"))?;
        for (key, value) in &pairs {
            apply(&mut config, key, value, &path)?;
        }
        // As mqnamesrv: the file given is where updates are written, whatever it says inside.
        config.config_store_path = path;
    }
    for (key, value) in &overrides {
        apply(&mut config, key, value, "command line")?;
    }
    Ok(if print_config {
        Cli::PrintConfig(config)
    } else {
        Cli::Run(config)
    })
}

/// The help text printed by -h.
pub fn usage() -> String {
    let mut text = String::from(
        "usage: rmq-namesrv [-c FILE] [-p] [-h] [-v] [--key=value ...]\n\
         \n\
         \x20 -c, --configFile FILE    load properties from FILE (UPDATE_NAMESRV_CONFIG writes back to it)\n\
         \x20 -p, --printConfigItem    print every config item and exit\n\
         \x20 -h, --help               print this help and exit\n\
         \x20 -v, --version            print the version and exit\n\
         \x20 --key=value              set any property (applied after the file, in order),\n\
         \x20                          e.g. --listenPort=9876 --logLevel=debug\n\
         \n\
         Properties:\n",
    );
    for key in NamesrvConfig::keys() {
        text.push_str("  ");
        text.push_str(key);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    use crate::test_support::TempDir;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_equal_the_java_defaults() {
        let c = NamesrvConfig::default();
        let home = home_dir();
        assert_eq!(
            c.rocketmq_home,
            std::env::var("ROCKETMQ_HOME").unwrap_or_default()
        );
        assert_eq!(c.kv_config_path, format!("{home}/namesrv/kvConfig.json"));
        assert_eq!(
            c.config_store_path,
            format!("{home}/namesrv/namesrv.properties")
        );
        assert_eq!(c.product_env_name, "center");
        assert!(!c.cluster_test);
        assert!(!c.order_message_enable);
        assert!(c.return_order_topic_config_to_broker);
        assert_eq!(c.client_request_thread_pool_nums, 8);
        assert_eq!(c.client_request_thread_pool_queue_capacity, 50000);
        assert_eq!(c.default_thread_pool_nums, 16);
        assert_eq!(c.default_thread_pool_queue_capacity, 10000);
        assert_eq!(c.scan_not_active_broker_interval, 5000);
        assert_eq!(c.un_register_broker_queue_capacity, 3000);
        assert!(!c.support_acting_master);
        assert!(c.enable_all_topic_list);
        assert!(c.enable_topic_list);
        assert!(!c.notify_min_broker_id_changed);
        assert!(!c.enable_controller_in_namesrv);
        assert!(!c.need_wait_for_service);
        assert_eq!(c.wait_seconds_for_service, 45);
        assert!(!c.delete_topic_with_broker_registration);
        assert_eq!(
            c.config_black_list,
            "configBlackList;configStorePath;kvConfigPath"
        );
        assert_eq!(c.bind_address, "0.0.0.0");
        assert_eq!(c.listen_port, 9876);
        assert_eq!(c.server_worker_threads, 8);
        assert_eq!(c.server_callback_executor_threads, 0);
        assert_eq!(c.server_selector_threads, 3);
        assert_eq!(c.server_oneway_semaphore_value, 256);
        assert_eq!(c.server_async_semaphore_value, 64);
        assert_eq!(c.server_channel_max_idle_time_seconds, 120);
        assert_eq!(c.server_socket_snd_buf_size, 0);
        assert_eq!(c.server_socket_rcv_buf_size, 0);
        assert_eq!(c.write_buffer_high_water_mark, 0);
        assert_eq!(c.write_buffer_low_water_mark, 0);
        assert_eq!(c.server_socket_backlog, 1024);
        assert!(c.server_netty_worker_group_enable);
        assert!(c.server_pooled_byte_buf_allocator_enable);
        assert!(!c.enable_shutdown_gracefully);
        assert_eq!(c.shutdown_wait_time_seconds, 30);
        assert!(!c.use_epoll_native_selector);
        assert_eq!(c.frame_max_length, 16_777_216);
        assert_eq!(c.serialize_type, SerializeTypeSetting::Json);
        assert_eq!(c.log_path, format!("{home}/logs/rocketmqlogs/namesrv.log"));
        assert_eq!(c.log_level, "info");
        assert_eq!(c.log_file_max_size, 104_857_600);
        assert_eq!(c.log_file_count, 5);
        assert_eq!(c.max_connections, 65536);
        assert_eq!(c.max_header_length, 262_144);
        assert_eq!(c.max_ext_fields, 256);
        assert_eq!(c.max_json_depth, 64);
        assert_eq!(c.max_json_string_length, 65536);
        assert_eq!(c.max_topics_per_registration, 100_000);
        assert_eq!(c.max_inflated_body_length, 67_108_864);
        assert_eq!(c.max_name_length, 255);
        assert_eq!(c.max_topic_name_length, 127);
        assert_eq!(c.conn_write_high_water, 4_194_304);
        assert_eq!(c.conn_write_hard_cap, 67_108_864);
        assert_eq!(c.registration_backlog_limit, 10_000);
        assert_eq!(c.registration_budget_per_iteration, 64);
        assert_eq!(c.admin_allow_list, "");
        assert!(c.extra.is_empty());
        assert!(c.validate().is_ok());
        assert!(c.admin_allow_list_parsed().is_empty());
    }

    fn snake_case(key: &str) -> String {
        let mut out = String::new();
        for c in key.chars() {
            if c.is_ascii_uppercase() {
                out.push('_');
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn keys_are_sorted_and_name_every_field() {
        let keys = NamesrvConfig::keys();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        // The struct's own field names (from its Debug form) are exactly the keys in snake_case.
        let debug = format!("{:#?}", NamesrvConfig::default());
        let mut fields: Vec<String> = debug
            .lines()
            .filter_map(|l| l.strip_prefix("    "))
            .filter(|l| !l.starts_with(' '))
            .filter_map(|l| l.split_once(':').map(|(name, _)| name.to_string()))
            .filter(|name| name != "extra")
            .collect();
        fields.sort();
        let mut from_keys: Vec<String> = keys.iter().map(|k| snake_case(k)).collect();
        from_keys.sort();
        assert_eq!(fields, from_keys);
        let text = NamesrvConfig::default().to_properties_text();
        let listed: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, _)| k)
            .collect();
        assert_eq!(listed, keys);
    }

    #[test]
    fn every_key_survives_a_set_get_round_trip() {
        let mut c = NamesrvConfig {
            admin_allow_list: "10.0.0.0/8,::1".to_string(),
            serialize_type: SerializeTypeSetting::RocketMq,
            ..NamesrvConfig::default()
        };
        for key in NamesrvConfig::keys() {
            let before = c.clone();
            let value = c.get(key).unwrap();
            assert_eq!(c.set(key, &value), SetOutcome::Applied, "{key}");
            assert_eq!(c.get(key).unwrap(), value, "{key}");
            assert_eq!(c, before, "{key}");
        }
    }

    #[test]
    fn set_parses_each_kind_of_value() {
        let mut c = NamesrvConfig::default();
        assert_eq!(
            c.set("scanNotActiveBrokerInterval", " 2000 "),
            SetOutcome::Applied
        );
        assert_eq!(c.scan_not_active_broker_interval, 2000);
        assert_eq!(c.set("listenPort", "0"), SetOutcome::Applied);
        assert_eq!(c.listen_port, 0);
        assert_eq!(c.set("orderMessageEnable", "TRUE"), SetOutcome::Applied);
        assert!(c.order_message_enable);
        // Boolean.parseBoolean: anything but "true" is false, never an error.
        assert_eq!(c.set("orderMessageEnable", "yes"), SetOutcome::Applied);
        assert!(!c.order_message_enable);
        assert_eq!(c.set("serializeType", "rocketmq"), SetOutcome::Applied);
        assert_eq!(c.serialize_type, SerializeTypeSetting::RocketMq);
        assert_eq!(c.get("serializeType").unwrap(), "ROCKETMQ");
        assert_eq!(c.set("logLevel", "DEBUG"), SetOutcome::Applied);
        assert_eq!(c.log_level, "debug");
        assert_eq!(c.set("productEnvName", "  blue "), SetOutcome::Applied);
        assert_eq!(c.product_env_name, "blue");
        assert_eq!(
            c.set("adminAllowList", " 127.0.0.1/32 , ::1/128 ,"),
            SetOutcome::Applied
        );
        assert_eq!(c.admin_allow_list, "127.0.0.1/32,::1/128");
        assert_eq!(c.admin_allow_list_parsed().len(), 2);
        assert_eq!(
            c.set("serverChannelMaxIdleTimeSeconds", "0"),
            SetOutcome::Applied
        );
    }

    #[test]
    fn invalid_values_are_rejected_and_leave_the_field_unchanged() {
        let cases = [
            ("scanNotActiveBrokerInterval", "0"),
            ("scanNotActiveBrokerInterval", "-5"),
            ("scanNotActiveBrokerInterval", "3600001"),
            ("scanNotActiveBrokerInterval", "5s"),
            ("listenPort", "65536"),
            ("listenPort", "-1"),
            ("listenPort", ""),
            ("frameMaxLength", "1023"),
            ("frameMaxLength", "1073741825"),
            ("serverChannelMaxIdleTimeSeconds", "-1"),
            ("serverWorkerThreads", "99999999999999999999"),
            ("logLevel", "verbose"),
            ("serializeType", "XML"),
            ("adminAllowList", "10.0.0.0/8,nonsense"),
            ("adminAllowList", "10.0.0.0/33"),
            ("productEnvName", "a\nconfigStorePath=/etc/passwd"),
            ("logPath", "C:\\logs"),
        ];
        for (key, value) in cases {
            let mut c = NamesrvConfig::default();
            let before = c.clone();
            assert!(
                matches!(c.set(key, value), SetOutcome::Invalid(_)),
                "{key}={value:?}"
            );
            assert_eq!(c, before, "{key}={value:?}");
        }
    }

    #[test]
    fn unknown_keys_are_kept_in_extra_and_reported() {
        let mut c = NamesrvConfig::default();
        assert_eq!(c.set("someFutureKey", "v1"), SetOutcome::Unknown);
        assert_eq!(c.get("someFutureKey").unwrap(), "v1");
        assert_eq!(c.get("nothingHere"), None);
        assert!(c.to_properties_text().contains("\nsomeFutureKey=v1\n"));
        // Keys that could not be written back as a property line are refused.
        for key in ["", "a b", "a=b", "a\nb", "#x", "a\\b"] {
            assert!(matches!(c.set(key, "v"), SetOutcome::Invalid(_)), "{key:?}");
        }
        assert_eq!(c.extra.len(), 1);
    }

    #[test]
    fn properties_text_is_sorted_unescaped_key_value_lines() {
        let mut c = NamesrvConfig::default();
        c.set("aaaExtra", "x y");
        c.set("zzzExtra", "z:=");
        let text = c.to_properties_text();
        assert!(text.starts_with("aaaExtra=x y\nadminAllowList=\nbindAddress=0.0.0.0\n"));
        assert!(text.ends_with("zzzExtra=z:=\n"));
        let keys: Vec<&str> = text.lines().map(|l| l.split_once('=').unwrap().0).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn parse_properties_accepts_all_three_separators() {
        let got = parse_properties("a=1\nb:2\nc 3\nd\t = 4\ne : 5\nf\ng=\n").unwrap();
        let want = pairs(&[
            ("a", "1"),
            ("b", "2"),
            ("c", "3"),
            ("d", "4"),
            ("e", "5"),
            ("f", ""),
            ("g", ""),
        ]);
        assert_eq!(got, want);
    }

    #[test]
    fn parse_properties_skips_comments_blank_lines_and_leading_whitespace() {
        let got = parse_properties(
            "# comment\n  ! also comment\n\n   \n   key = value with  spaces  \n#x=y\n",
        )
        .unwrap();
        assert_eq!(got, pairs(&[("key", "value with  spaces  ")]));
    }

    #[test]
    fn parse_properties_joins_continuation_lines() {
        let text = "list=a,\\\n     b,\\\n\tc\nnext=1\neven=x\\\\\nodd=y\\\\\\\n  z\n# comment \\\nafter=2\n";
        let got = parse_properties(text).unwrap();
        assert_eq!(
            got,
            pairs(&[
                ("list", "a,b,c"),
                ("next", "1"),
                ("even", "x\\"),
                ("odd", "y\\z"),
                ("after", "2")
            ])
        );
        // A continuation into a blank line ends the value; a continuation at EOF is dropped.
        assert_eq!(
            parse_properties("a=1\\\n\nb=2\\").unwrap(),
            pairs(&[("a", "1"), ("b", "2")])
        );
        // A continued line starting with '#' is not a comment.
        assert_eq!(
            parse_properties("a=1\\\n  #2").unwrap(),
            pairs(&[("a", "1#2")])
        );
    }

    #[test]
    fn parse_properties_resolves_escapes() {
        let text = "tab=a\\tb\nnl=a\\nb\\r\\f\nslash=a\\\\b\nother=\\q\\=\\:\nkey\\ with\\=sep\\:s=v\nuni=\\u0041\\u00e9\\u4E2D\nemoji=\\uD83D\\uDE00\n";
        let got = parse_properties(text).unwrap();
        assert_eq!(
            got,
            pairs(&[
                ("tab", "a\tb"),
                ("nl", "a\nb\r\x0c"),
                ("slash", "a\\b"),
                ("other", "q=:"),
                ("key with=sep:s", "v"),
                ("uni", "Aé中"),
                ("emoji", "😀"),
            ])
        );
    }

    #[test]
    fn parse_properties_rejects_malformed_unicode_escapes() {
        assert!(parse_properties("a=\\u12G4\n").is_err());
        assert!(parse_properties("a=\\u12").is_err());
        let err = parse_properties("ok=1\nk\\uZZZZ=v\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn parse_properties_handles_crlf_and_cr_line_endings() {
        let got = parse_properties("a=1\r\nb=2\\\r\n   3\r\n\r\n#c\r\nd=4\re=5").unwrap();
        assert_eq!(
            got,
            pairs(&[("a", "1"), ("b", "23"), ("d", "4"), ("e", "5")])
        );
    }

    #[test]
    fn parse_properties_keeps_duplicates_in_file_order() {
        let got = parse_properties("a=1\na=2\n").unwrap();
        assert_eq!(got, pairs(&[("a", "1"), ("a", "2")]));
    }

    #[test]
    fn black_list_has_the_hard_coded_keys_and_the_configured_ones() {
        let mut c = NamesrvConfig::default();
        let list = c.black_list();
        for key in [
            "configBlackList",
            "configStorePath",
            "kvConfigPath",
            "rocketmqHome",
        ] {
            assert!(list.iter().any(|k| k == key), "{key}");
        }
        assert_eq!(list.len(), 4);
        c.config_black_list = " listenPort ;; enableTopicList;".to_string();
        let list = c.black_list();
        assert_eq!(list.len(), 6);
        assert!(list.iter().any(|k| k == "listenPort"));
        assert!(list.iter().any(|k| k == "enableTopicList"));
    }

    #[test]
    fn update_refuses_a_black_listed_key_and_applies_nothing() {
        let dir = TempDir::new("black");
        let mut c = stored_at(&dir.join("namesrv.properties"));
        let before = c.clone();
        for body in [
            "orderMessageEnable=true\nkvConfigPath=/etc/passwd\n",
            "configStorePath=/tmp/x\n",
            "rocketmqHome=/\n",
            "configBlackList=\n",
        ] {
            assert!(
                matches!(c.update(body), Err(UpdateError::BlackListed(_))),
                "{body}"
            );
            assert_eq!(c, before);
        }
        // A key listed only in a custom configBlackList is refused too.
        c.config_black_list = "configBlackList;enableTopicList".to_string();
        let before = c.clone();
        match c.update("orderMessageEnable=true\nenableTopicList=false\n") {
            Err(UpdateError::BlackListed(key)) => assert_eq!(key, "enableTopicList"),
            other => panic!("{other:?}"),
        }
        assert_eq!(c, before);
        assert!(!Path::new(&c.config_store_path).exists());
    }

    #[test]
    fn update_persists_a_file_that_reparses_to_the_same_config_and_keeps_a_bak() {
        let dir = TempDir::new("persist");
        let path = dir.join("namesrv.properties");
        let mut c = stored_at(&path);
        let applied = c
            .update("orderMessageEnable=true\nscanNotActiveBrokerInterval=7000\n")
            .unwrap();
        assert_eq!(
            applied,
            vec!["orderMessageEnable", "scanNotActiveBrokerInterval"]
        );
        assert!(c.order_message_enable);
        assert!(!durable_bak(&path).exists());

        let applied = c
            .update("customThing=hello\nlistenPort=notanumber\nwaitSecondsForService=9\n")
            .unwrap();
        assert_eq!(applied, vec!["customThing", "waitSecondsForService"]);
        assert_eq!(c.listen_port, 9876);
        assert_eq!(c.wait_seconds_for_service, 9);

        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text, c.to_properties_text());
        let mut reloaded = NamesrvConfig::default();
        for (k, v) in parse_properties(&text).unwrap() {
            let outcome = reloaded.set(&k, &v);
            assert!(
                !matches!(outcome, SetOutcome::Invalid(_)),
                "{k}: {outcome:?}"
            );
        }
        assert_eq!(reloaded, c);
        // The previous version is kept as .bak.
        let bak = fs::read_to_string(durable_bak(&path)).unwrap();
        assert!(bak.contains("orderMessageEnable=true\n"));
        assert!(!bak.contains("customThing"));
    }

    fn stored_at(path: &Path) -> NamesrvConfig {
        NamesrvConfig {
            config_store_path: path.to_string_lossy().into_owned(),
            ..NamesrvConfig::default()
        }
    }

    fn durable_bak(path: &Path) -> PathBuf {
        crate::durable_file::sibling(path, ".bak")
    }

    #[test]
    fn update_that_cannot_persist_changes_nothing_in_memory() {
        let dir = TempDir::new("nopersist");
        // A directory where the file should be: the rename over it fails.
        let path = dir.join("is-a-dir");
        fs::create_dir_all(path.join("child")).unwrap();
        let mut c = stored_at(&path);
        let before = c.clone();
        assert!(matches!(
            c.update("orderMessageEnable=true\n"),
            Err(UpdateError::Persist(_))
        ));
        assert_eq!(c, before);
    }

    #[test]
    fn update_reports_a_malformed_body_as_a_parse_error() {
        let mut c = NamesrvConfig::default();
        let before = c.clone();
        assert!(matches!(
            c.update("a=\\uXYZW\n"),
            Err(UpdateError::Parse(_))
        ));
        assert_eq!(c, before);
    }

    #[test]
    fn cli_loads_the_file_then_applies_overrides_in_order() {
        let dir = TempDir::new("cli");
        let file = dir.join("ns.properties");
        fs::write(
            &file,
            "listenPort=9000\r\nconfigStorePath=/elsewhere\norderMessageEnable=true\nfileOnly=1\n",
        )
        .unwrap();
        let path = file.to_string_lossy().into_owned();
        match parse_cli(&args(&[
            "-c",
            &path,
            "--listenPort=0",
            "--logLevel=warn",
            "--logLevel=error",
        ]))
        .unwrap()
        {
            Cli::Run(c) => {
                assert_eq!(c.listen_port, 0);
                assert!(c.order_message_enable);
                assert_eq!(c.config_store_path, path);
                assert_eq!(c.log_level, "error");
                assert_eq!(c.extra.get("fileOnly").map(String::as_str), Some("1"));
            }
            other => panic!("{other:?}"),
        }
        match parse_cli(&args(&["--configFile", &path, "-p"])).unwrap() {
            Cli::PrintConfig(c) => assert_eq!(c.listen_port, 9000),
            other => panic!("{other:?}"),
        }
        match parse_cli(&args(&[&format!("--configFile={path}")])).unwrap() {
            Cli::Run(c) => assert_eq!(c.listen_port, 9000),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cli_without_arguments_runs_with_defaults() {
        match parse_cli(&[]).unwrap() {
            Cli::Run(c) => assert_eq!(c, NamesrvConfig::default()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cli_help_and_version() {
        match parse_cli(&args(&["-h"])).unwrap() {
            Cli::Help(text) => {
                assert_eq!(text, usage());
                assert!(text.contains("--key=value"));
                assert!(text.contains("scanNotActiveBrokerInterval"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_cli(&args(&["--help"])).unwrap(),
            Cli::Help(_)
        ));
        assert!(matches!(
            parse_cli(&args(&["--version"])).unwrap(),
            Cli::Version
        ));
        assert!(matches!(parse_cli(&args(&["-v"])).unwrap(), Cli::Version));
    }

    #[test]
    fn cli_errors_are_values() {
        assert!(parse_cli(&args(&["-c"])).is_err());
        assert!(parse_cli(&args(&["--configFile"])).is_err());
        assert!(parse_cli(&args(&["-c", "/nonexistent/rmq-namesrv/none.properties"])).is_err());
        assert!(parse_cli(&args(&["--listenPort=70000"])).is_err());
        assert!(parse_cli(&args(&["--listenPort"])).is_err());
        assert!(parse_cli(&args(&["stray"])).is_err());
        assert!(parse_cli(&args(&["-x"])).is_err());
        // Unknown keys are kept, not errors.
        match parse_cli(&args(&["--brandNewKey=7"])).unwrap() {
            Cli::Run(c) => assert_eq!(c.get("brandNewKey").as_deref(), Some("7")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cli_rejects_an_invalid_value_in_the_file() {
        let dir = TempDir::new("cli-bad");
        let file = dir.join("bad.properties");
        fs::write(&file, "scanNotActiveBrokerInterval=0\n").unwrap();
        assert!(parse_cli(&args(&["-c", &file.to_string_lossy()])).is_err());
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_matches_ipv4_ranges() {
        let net = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(net.contains(ip("10.1.2.3")));
        assert!(net.contains(ip("10.1.255.255")));
        assert!(!net.contains(ip("10.2.0.1")));
        assert!(!net.contains(ip("::1")));
        let host = Cidr::parse("127.0.0.1").unwrap();
        assert_eq!(host, Cidr::parse("127.0.0.1/32").unwrap());
        assert!(host.contains(ip("127.0.0.1")));
        assert!(!host.contains(ip("127.0.0.2")));
        let all = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        // Host bits are cleared.
        assert_eq!(
            Cidr::parse("10.1.2.3/8").unwrap(),
            Cidr::parse("10.0.0.0/8").unwrap()
        );
        assert_eq!(Cidr::parse("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
    }

    #[test]
    fn cidr_matches_ipv6_ranges() {
        let net = Cidr::parse("2001:db8::/32").unwrap();
        assert!(net.contains(ip("2001:db8:1::5")));
        assert!(!net.contains(ip("2001:db9::1")));
        assert!(!net.contains(ip("10.0.0.1")));
        let host = Cidr::parse("::1").unwrap();
        assert_eq!(host, Cidr::parse("::1/128").unwrap());
        assert!(host.contains(ip("::1")));
        assert!(!host.contains(ip("::2")));
        assert!(Cidr::parse("::/0").unwrap().contains(ip("fe80::1")));
    }

    #[test]
    fn cidr_matches_ipv4_mapped_peers_against_ipv4_ranges() {
        let net = Cidr::parse("192.168.0.0/16").unwrap();
        assert!(net.contains(ip("::ffff:192.168.3.4")));
        assert!(!net.contains(ip("::ffff:192.169.3.4")));
        let mapped = Cidr::parse("::ffff:10.0.0.0/104").unwrap();
        assert!(mapped.contains(ip("10.9.9.9")));
        assert!(!mapped.contains(ip("11.0.0.1")));
    }

    #[test]
    fn cidr_rejects_bad_input() {
        for bad in [
            "",
            "/8",
            "10.0.0.0/",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/+8",
            "10.0.0.0/-1",
            "10.0.0/8",
            "256.0.0.1",
            "host.example",
            "10.0.0.0/8/8",
            "::1/1x",
            "1.2.3.4 /8",
            "fe80::1%eth0",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad:?}");
        }
    }
}
