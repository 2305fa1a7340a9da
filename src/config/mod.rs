//! `NamesrvConfig`: Java's keys and defaults plus our own; other keys kept verbatim. As
//! GET_NAMESRV_CONFIG does not escape, `set` refuses what could not survive the trip.

mod cidr;
mod cli;
mod properties;
mod table;
mod update;

use std::collections::BTreeMap;
use std::sync::OnceLock;

pub use cidr::{allows, check_allowed, Cidr};
pub use cli::{parse_cli, Cli, CliError, ConfigFile, FileOrigin, Startup};
pub use properties::{parse_properties, sorted_lines};
pub(crate) use table::{in_range, parse_bool};
pub use table::{under_home, Applies, NamesrvConfig, JAVA_CONFIG_BLACK_LIST, PROTECTED_KEYS};
pub use update::{ConfigPlan, Reload, UpdateError};

use table::{Property, PROPERTIES};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetOutcome {
    /// A field was set, or a Controller key was kept.
    Applied,
    /// Kept in `extra`; callers warn.
    Unknown,
    /// Nothing changed.
    Invalid(String),
}

fn property(key: &str) -> Option<&'static Property> {
    PROPERTIES.iter().find(|p| p.key == key)
}

/// The controller group's secret: never shown, never updated remotely.
const SECRET_KEY: &str = crate::controller::config::PEER_SECRET_KEY;

/// A key only the embedded Controller reads (its table is built without the feature too).
fn is_controller_key(key: &str) -> bool {
    property(key).is_none() && crate::controller::config::keys().any(|k| k == key)
}

/// The keys no runtime update may set: `always`, then `configBlackList`'s entries.
pub fn black_list(always: &[&str], configured: &str) -> Vec<String> {
    let mut list: Vec<String> = always.iter().map(|k| k.to_string()).collect();
    for entry in configured.split(';').map(str::trim) {
        if !entry.is_empty() && !list.iter().any(|k| k == entry) {
            list.push(entry.to_string());
        }
    }
    list
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

/// Edit distance between two keys, ignoring ASCII case.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// "unknown key X (did you mean Y?)", Y the closest known key when it is a likely typo.
pub fn unknown_key_message(key: &str) -> String {
    let closest = PROPERTIES
        .iter()
        .map(|p| p.key)
        .chain(crate::controller::config::keys())
        .map(|known| (distance(key, known), known))
        .min();
    match closest {
        Some((d, known)) if d <= 2 + key.chars().count() / 8 => {
            format!("unknown key {key} (did you mean {known}?)")
        }
        _ => format!("unknown key {key}"),
    }
}

impl NamesrvConfig {
    /// `maxJsonDepth` and `maxJsonStringLength`, as every JSON body reader takes them.
    pub fn json_limits(&self) -> crate::remoting::json::Limits {
        crate::remoting::json::Limits {
            max_depth: self.max_json_depth as usize,
            max_string_len: self.max_json_string_length as usize,
        }
    }

    /// Applies one property by its Java key; values are trimmed.
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
                self.extra.insert(key.to_string(), value.trim().to_string());
                if is_controller_key(key) {
                    SetOutcome::Applied
                } else {
                    SetOutcome::Unknown
                }
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<String> {
        match property(key) {
            Some(p) => Some((p.get)(self)),
            None => self.extra.get(key).cloned(),
        }
    }

    /// When a change of `key` takes effect; None for keys that are not in the table.
    pub fn applies(key: &str) -> Option<Applies> {
        property(key).map(|p| p.applies)
    }

    /// The default of `key` as text; None for keys that are not in the table.
    pub fn default_text(key: &str) -> Option<String> {
        property(key).map(|p| (p.get)(&NamesrvConfig::default()))
    }

    /// Every key of the table (Java names), in sorted order.
    pub fn keys() -> &'static [&'static str] {
        static KEYS: OnceLock<Vec<&'static str>> = OnceLock::new();
        KEYS.get_or_init(|| {
            let mut keys: Vec<&'static str> = PROPERTIES.iter().map(|p| p.key).collect();
            keys.sort_unstable();
            keys
        })
    }

    /// The GET_NAMESRV_CONFIG body: `key=value\n` lines sorted by key, not escaped (as Java's).
    pub fn to_properties_text(&self) -> String {
        let mut all: BTreeMap<&str, String> = self
            .extra
            .iter()
            .filter(|(k, _)| *k != SECRET_KEY)
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        for p in PROPERTIES {
            all.insert(p.key, (p.get)(self));
        }
        properties::sorted_lines(all)
    }

    /// The keys no update may set: these five, plus `configBlackList`'s.
    pub fn black_list(&self) -> Vec<String> {
        let always = [&update::JAVA_BLACK_LISTED[..], &[SECRET_KEY]].concat();
        black_list(&always, &self.config_black_list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::command::SerializeType;

    impl NamesrvConfig {
        /// Checks every field against the rules `set` applies; the first problem found.
        fn validate(&self) -> Result<(), String> {
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

    #[test]
    fn defaults_equal_the_java_defaults() {
        let c = NamesrvConfig::default();
        assert_eq!(
            c.rocketmq_home,
            std::env::var("ROCKETMQ_HOME").unwrap_or_default()
        );
        assert_eq!(c.kv_config_path, table::under_home("namesrv/kvConfig.json"));
        assert_eq!(
            c.config_store_path,
            table::under_home("namesrv/namesrv.properties")
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
        assert!(c
            .config_black_list
            .starts_with("configBlackList;configStorePath;kvConfigPath;"));
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
        assert_eq!(c.serialize_type, SerializeType::Json);
        assert_eq!(
            c.log_path,
            table::under_home("logs/rocketmqlogs/namesrv.log")
        );
        assert_eq!(c.log_level, "info");
        assert_eq!(c.log_file_max_size, 104_857_600);
        assert_eq!(c.log_file_count, 5);
        assert_eq!(c.max_connections, 65536);
        assert_eq!(c.max_header_length, 262_144);
        assert_eq!(c.max_ext_fields, 256);
        assert_eq!(c.max_json_depth, 64);
        assert_eq!(c.max_json_string_length, 65536);
        assert_eq!(c.max_topics_per_registration, 100_000);
        assert_eq!(c.max_inflated_body_length, 16_777_216);
        assert_eq!(c.decode_on_loop_max_bytes, 65_536);
        assert_eq!(c.max_name_length, 255);
        assert_eq!(c.max_topic_name_length, 127);
        assert_eq!(c.conn_write_high_water, 4_194_304);
        assert_eq!(c.conn_write_hard_cap, 67_108_864);
        assert_eq!(c.registration_backlog_limit, 10_000);
        assert_eq!(c.registration_budget_per_iteration, 64);
        assert_eq!(c.admin_allow_list, "");
        assert!(c.extra.is_empty());
        assert!(c.validate().is_ok());
        assert!(Cidr::parse_list(&c.admin_allow_list).is_empty());
    }

    /// `tls.server.certPath` -> `tls_server_cert_path`.
    fn snake_case(key: &str) -> String {
        let mut out = String::new();
        for c in key.chars() {
            if c == '.' {
                out.push('_');
            } else if c.is_ascii_uppercase() {
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
            serialize_type: SerializeType::RocketMq,
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
        assert_eq!(c.set("orderMessageEnable", " False "), SetOutcome::Applied);
        assert!(!c.order_message_enable);
        assert_eq!(c.set("serializeType", "rocketmq"), SetOutcome::Applied);
        assert_eq!(c.serialize_type, SerializeType::RocketMq);
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
        assert_eq!(Cidr::parse_list(&c.admin_allow_list).len(), 2);
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
            ("frameMaxLength", "8388607"),
            ("maxHeaderLength", "32767"),
            ("maxExtFields", "31"),
            ("maxJsonDepth", "15"),
            ("maxJsonStringLength", "16383"),
            ("frameMaxLength", "1073741825"),
            ("serverChannelMaxIdleTimeSeconds", "-1"),
            ("serverWorkerThreads", "99999999999999999999"),
            ("logLevel", "verbose"),
            ("orderMessageEnable", "yes"),
            ("orderMessageEnable", "ture"),
            ("orderMessageEnable", "1"),
            ("enableTopicList", ""),
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
        assert_eq!(list.len(), 5 + PROTECTED_KEYS.split(';').count());
        c.config_black_list = " listenPort ;; enableTopicList;".to_string();
        let list = c.black_list();
        assert_eq!(list.len(), 7);
        assert!(list.iter().any(|k| k == "listenPort"));
        assert!(list.iter().any(|k| k == "enableTopicList"));
    }

    #[test]
    fn controller_keys_are_kept_readable_and_reported_only_when_set() {
        let mut c = NamesrvConfig::default();
        let plain = c.to_properties_text();
        assert!(!plain.contains("controllerDLegerPeers"));
        assert_eq!(
            c.set("controllerDLegerPeers", " n0-127.0.0.1:9878 "),
            SetOutcome::Applied
        );
        assert_eq!(c.set("controllerDLegerSelfId", "n0"), SetOutcome::Applied);
        assert_eq!(
            c.get("controllerDLegerPeers").as_deref(),
            Some("n0-127.0.0.1:9878")
        );
        assert!(c
            .to_properties_text()
            .contains("\ncontrollerDLegerSelfId=n0\n"));
        assert_eq!(NamesrvConfig::applies("controllerDLegerPeers"), None);
    }

    #[test]
    fn unknown_keys_are_named_with_the_closest_known_key() {
        assert_eq!(
            unknown_key_message("scanNotActivBrokerInterval"),
            "unknown key scanNotActivBrokerInterval (did you mean scanNotActiveBrokerInterval?)"
        );
        assert_eq!(
            unknown_key_message("listenPrt"),
            "unknown key listenPrt (did you mean listenPort?)"
        );
        assert_eq!(
            unknown_key_message("listenport"),
            "unknown key listenport (did you mean listenPort?)"
        );
        assert_eq!(
            unknown_key_message("controllerDLedgerPeers"),
            "unknown key controllerDLedgerPeers (did you mean controllerDLegerPeers?)"
        );
        assert_eq!(unknown_key_message("custom.key"), "unknown key custom.key");
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
    }

    #[test]
    fn each_row_default_is_the_default_struct_value() {
        let c = NamesrvConfig::default();
        for key in NamesrvConfig::keys() {
            assert_eq!(NamesrvConfig::default_text(key), c.get(key), "{key}");
        }
        assert_eq!(NamesrvConfig::default_text("nope"), None);
    }

    #[test]
    fn start_only_keys_are_the_ones_read_once_at_start() {
        let at_start: Vec<&str> = NamesrvConfig::keys()
            .iter()
            .copied()
            .filter(|k| NamesrvConfig::applies(k) == Some(Applies::AtStart))
            .collect();
        assert_eq!(
            at_start,
            [
                "bindAddress",
                "configBlackList",
                "configStorePath",
                "enableControllerInNamesrv",
                "kvConfigPath",
                "listenPort",
                "logFileCount",
                "logFileMaxSize",
                "logPath",
                "metricsExporterType",
                "metricsPromExporterHost",
                "metricsPromExporterPort",
                "rocketmqHome",
                "serverSocketBacklog",
                "tls.config.file",
                "tls.server.certPath",
                "tls.server.keyPassword",
                "tls.server.keyPath",
                "tls.server.mode",
                "tls.server.need.client.auth",
                "tls.server.trustCertPath",
                "unRegisterBrokerQueueCapacity",
            ]
        );
        assert_eq!(NamesrvConfig::applies("logLevel"), Some(Applies::Live));
        assert_eq!(
            NamesrvConfig::applies("serverWorkerThreads"),
            Some(Applies::ReportedOnly)
        );
    }
}
