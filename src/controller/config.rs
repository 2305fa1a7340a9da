//! `ControllerConfig`: the Java controller keys, read from the name server's `-c` file,
//! checked, updated by UPDATE_CONTROLLER_CONFIG (1009) and shown by GET_CONTROLLER_CONFIG
//! (1010); one table row per key. The rules: docs/controller.md, "Configuration".

use crate::config::{in_range, parse_bool, UpdateError};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// Read at each use; UPDATE_CONTROLLER_CONFIG changes behaviour at once.
    Live,
    /// Read once at start; an update is refused.
    StartOnly,
    /// A Java setting with no meaning here (thread pools, metrics, JRaft tuning): kept and
    /// reported only, as Java does.
    ReportOnly,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Text,
    Bool,
    Int(i64, i64),
    ControllerType,
    MetricsExporter,
}

/// Key, default, check, effect.
type Row = (&'static str, &'static str, Kind, Effect);

use Effect::{Live, ReportOnly, StartOnly};
use Kind::{Bool, ControllerType, Int, MetricsExporter, Text};

const MS_HOUR: i64 = 3_600_000;
const I32_MAX: i64 = i32::MAX as i64;

/// Our own key: a whole-state snapshot after this many logged events (then the log is cut).
pub const SNAPSHOT_EVENTS_KEY: &str = "controllerSnapshotEvents";
/// Our own key: the group's shared secret on the peer link; never shown by 1010.
pub const PEER_SECRET_KEY: &str = "controllerPeerSecret";

#[rustfmt::skip]
static ROWS: &[Row] = &[
    ("controllerType", "DLedger", ControllerType, StartOnly),
    ("controllerDLegerGroup", "", Text, StartOnly),
    ("controllerDLegerPeers", "", Text, StartOnly),
    ("controllerDLegerSelfId", "", Text, StartOnly),
    // "" = ~/DLedgerController (Java's default for the DLedger kind).
    ("controllerStorePath", "", Text, StartOnly),
    (PEER_SECRET_KEY, "", Text, StartOnly),
    // ms; the timers are armed at start.
    ("scanNotActiveBrokerInterval", "5000", Int(1, MS_HOUR), StartOnly),
    ("scanInactiveMasterInterval", "5000", Int(1, MS_HOUR), StartOnly),
    ("electMasterMaxRetryCount", "3", Int(0, 100), Live),
    ("enableElectUncleanMaster", "false", Bool, Live),
    ("processReadEvent", "false", Bool, Live),
    ("notifyBrokerRoleChanged", "true", Bool, Live),
    // Java's default plus the snapshot cadence, which bounds the log's and snapshots' disk.
    ("configBlackList", "configBlackList;configStorePath;controllerSnapshotEvents;controllerPeerSecret", Text, Live),
    (SNAPSHOT_EVENTS_KEY, "10000", Int(1, 100_000_000), Live),
    // Our own key: a broker's 904/1003 count only from its own address's IP (off for NAT);
    // start-only, so that no remote 1009 can turn it off.
    ("checkBrokerSourceAddress", "true", Bool, StartOnly),
    // Java's DLedger data file size: our log is not made of mapped files.
    ("mappedFileSize", "1073741824", Int(1, I32_MAX), ReportOnly),
    ("controllerThreadPoolNums", "16", Int(1, 1024), ReportOnly),
    ("controllerRequestThreadPoolQueueCapacity", "50000", Int(1, 10_000_000), ReportOnly),
    ("metricsExporterType", "DISABLE", MetricsExporter, ReportOnly),
    ("metricsGrpcExporterTarget", "", Text, ReportOnly),
    ("metricsGrpcExporterHeader", "", Text, ReportOnly),
    ("metricGrpcExporterTimeOutInMills", "3000", Int(0, i64::MAX), ReportOnly),
    ("metricGrpcExporterIntervalInMills", "60000", Int(0, i64::MAX), ReportOnly),
    ("metricLoggingExporterIntervalInMills", "10000", Int(0, i64::MAX), ReportOnly),
    ("metricsPromExporterPort", "5557", Int(0, 65_535), ReportOnly),
    ("metricsPromExporterHost", "", Text, ReportOnly),
    ("metricsLabel", "", Text, ReportOnly),
    ("metricsInDelta", "false", Bool, ReportOnly),
    ("jRaftElectionTimeoutMs", "1000", Int(0, I32_MAX), ReportOnly),
    ("jRaftScanWaitTimeoutMs", "1000", Int(0, I32_MAX), ReportOnly),
    ("jRaftSnapshotIntervalSecs", "3600", Int(0, I32_MAX), ReportOnly),
    ("jRaftGroupId", "jRaft-Controller", Text, ReportOnly),
    ("jRaftServerId", "localhost:9880", Text, ReportOnly),
    ("jRaftInitConf", "localhost:9880,localhost:9881,localhost:9882", Text, ReportOnly),
    ("jRaftControllerRPCAddr", "localhost:9770,localhost:9771,localhost:9772", Text, ReportOnly),
];

fn find_row(key: &str) -> Option<&'static Row> {
    ROWS.iter().find(|r| r.0 == key)
}

/// Every controller key (two, `scanNotActiveBrokerInterval` and `configBlackList`, are also
/// the name server's).
pub fn keys() -> impl Iterator<Item = &'static str> {
    ROWS.iter().map(|row| row.0)
}

/// Java's `NettyServerConfig` fields: its 1010 answers them from the controller's copy of the
/// name server's network settings (`listenPort` being the controller's port). Informational.
const NETTY_SERVER_KEYS: [&str; 18] = [
    "bindAddress",
    "listenPort",
    "serverWorkerThreads",
    "serverCallbackExecutorThreads",
    "serverSelectorThreads",
    "serverOnewaySemaphoreValue",
    "serverAsyncSemaphoreValue",
    "serverChannelMaxIdleTimeSeconds",
    "serverSocketSndBufSize",
    "serverSocketRcvBufSize",
    "writeBufferHighWaterMark",
    "writeBufferLowWaterMark",
    "serverSocketBacklog",
    "serverNettyWorkerGroupEnable",
    "serverPooledByteBufAllocatorEnable",
    "enableShutdownGracefully",
    "shutdownWaitTimeSeconds",
    "useEpollNativeSelector",
];

/// Keys that are not fields of Java's `ControllerConfig` (ours, and `JraftConfig`'s): Java's
/// 1010 shows them only when its config file sets them; 1010 here, when not at their default.
const SHOWN_WHEN_SET: [&str; 9] = [
    SNAPSHOT_EVENTS_KEY,
    "checkBrokerSourceAddress",
    "jRaftElectionTimeoutMs",
    "jRaftScanWaitTimeoutMs",
    "jRaftSnapshotIntervalSecs",
    "jRaftGroupId",
    "jRaftServerId",
    "jRaftInitConf",
    "jRaftControllerRPCAddr",
];

/// Keys no update may touch (Java's hard-coded three plus `configBlackList`'s entries).
const ALWAYS_BLACK_LISTED: [&str; 3] = ["configBlackList", "configStorePath", "rocketmqHome"];

/// One member of the controller group (`n0-127.0.0.1:9878`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub id: String,
    /// As written (hostnames kept).
    pub address: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub scan_not_active_broker_interval_ms: u64,
    pub scan_inactive_master_interval_ms: u64,
    pub elect_master_max_retry_count: u32,
    pub enable_elect_unclean_master: bool,
    pub process_read_event: bool,
    pub notify_broker_role_changed: bool,
    pub snapshot_events: u64,
    pub check_broker_source_address: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ControllerConfig {
    values: BTreeMap<&'static str, String>,
    /// Keys changed by UPDATE_CONTROLLER_CONFIG (what controller.properties holds).
    updated: BTreeMap<&'static str, String>,
    settings: Settings,
    peers: Vec<Peer>,
    self_index: usize,
    /// What Java's 1010 also shows from the name server it runs in: `enableControllerInNamesrv`,
    /// `rocketmqHome` and [`NETTY_SERVER_KEYS`] (see [`inherit`](ControllerConfig::inherit)).
    inherited: Vec<(&'static str, String)>,
}

/// Checks one value against its row; Ok = the value as stored (trimmed).
fn check(kind: Kind, value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.contains(['\r', '\n', '\\']) {
        return Err(format!("{value:?} contains a line break or backslash"));
    }
    match kind {
        Text => Ok(value.to_owned()),
        Bool => parse_bool(value).map(|b| b.to_string()),
        Int(min, max) => in_range::<i64>(min..=max)(value).map(|n| n.to_string()),
        ControllerType if value.eq_ignore_ascii_case("jRaft") => Err("jRaft is not supported: this controller is the DLedger kind (a Raft group of the controllerDLegerPeers); use controllerType=DLedger".into()),
        ControllerType if value.eq_ignore_ascii_case("DLedger") => Ok("DLedger".into()),
        ControllerType => Err(format!("{value:?} is not a controller type (DLedger)")),
        // The name server's config serves PROM (its metrics endpoint includes the controller's).
        MetricsExporter if value.eq_ignore_ascii_case("DISABLE") => Ok("DISABLE".into()),
        MetricsExporter if value.eq_ignore_ascii_case("PROM") => Ok("PROM".into()),
        MetricsExporter => Err(format!(
            "{value:?}: metrics export is not implemented here; only DISABLE or PROM"
        )),
    }
}

/// `n0-host:port;n1-host:port` (DLedger's syntax: the id is the text before the first '-').
pub fn parse_peers(text: &str) -> Result<Vec<Peer>, String> {
    let mut peers: Vec<Peer> = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, address) = entry
            .split_once('-')
            .ok_or_else(|| format!("peer {entry:?} is not <id>-<host>:<port>"))?;
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| format!("peer {entry:?} has no :<port>"))?;
        // 0 = any free port, as the name server's listenPort=0: the bound port replaces it
        // (see `set_bound_port`) before anything announces the address.
        let port: u16 = port
            .parse()
            .map_err(|_| format!("peer {entry:?}: {port:?} is not a port (0-65535)"))?;
        if id.is_empty() || host.is_empty() {
            return Err(format!("peer {entry:?} is not <id>-<host>:<port>"));
        }
        if peers.iter().any(|p| p.id == id) {
            return Err(format!("peer id {id} appears twice"));
        }
        peers.push(Peer {
            id: id.to_owned(),
            address: address.to_owned(),
            port,
        });
    }
    Ok(peers)
}

impl ControllerConfig {
    /// Reads and checks every controller key through `lookup`; unknown keys keep their default.
    pub fn from_lookup(
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ControllerConfig, String> {
        let mut values = BTreeMap::new();
        for &(key, default, kind, _) in ROWS {
            let value = match lookup(key) {
                Some(given) => {
                    check(kind, &given).map_err(|reason| format!("{key}={given}: {reason}"))?
                }
                None => default.to_owned(),
            };
            values.insert(key, value);
        }
        ControllerConfig::from_values(values, BTreeMap::new())
    }

    fn from_values(
        values: BTreeMap<&'static str, String>,
        updated: BTreeMap<&'static str, String>,
    ) -> Result<ControllerConfig, String> {
        let get = |key: &str| values.get(key).map(String::as_str).unwrap_or_default();
        let peers_text = get("controllerDLegerPeers");
        if peers_text.trim().is_empty() {
            return Err("controllerDLegerPeers is empty: give this node's peer entry, e.g. controllerDLegerPeers=n0-127.0.0.1:9878".into());
        }
        let peers = parse_peers(peers_text)
            .map_err(|e| format!("controllerDLegerPeers={peers_text}: {e}"))?;
        let self_id = get("controllerDLegerSelfId");
        if self_id.is_empty() {
            return Err("controllerDLegerSelfId is empty: name this node's entry of controllerDLegerPeers, e.g. n0".into());
        }
        let self_index = peers.iter().position(|p| p.id == self_id).ok_or_else(|| {
            format!(
                "controllerDLegerSelfId={self_id} is not one of the ids in controllerDLegerPeers={peers_text}"
            )
        })?;
        let settings = settings_of(&values);
        Ok(ControllerConfig {
            values,
            updated,
            settings,
            peers,
            self_index,
            inherited: Vec::new(),
        })
    }

    /// The name server's settings Java's 1010 shows besides the controller's own (a Java
    /// controller runs with a copy of its name server's network config): informational.
    pub fn inherit(&mut self, namesrv: &crate::config::NamesrvConfig) {
        let network = NETTY_SERVER_KEYS
            .into_iter()
            .filter_map(|k| Some((k, namesrv.get(k)?)));
        self.inherited = [
            ("enableControllerInNamesrv", "true".to_owned()),
            ("rocketmqHome", namesrv.rocketmq_home.clone()),
        ]
        .into_iter()
        .chain(network)
        .collect();
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A key's current value (None for unknown keys and unset text keys).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn peers(&self) -> &[Peer] {
        &self.peers
    }

    pub fn self_peer(&self) -> &Peer {
        &self.peers[self.self_index]
    }

    pub fn self_index(&self) -> usize {
        self.self_index
    }

    pub fn listen_port(&self) -> u16 {
        self.self_peer().port
    }

    /// After binding: this node's entry names the port actually bound (port 0 resolved).
    pub fn set_bound_port(&mut self, port: u16) {
        let me = &mut self.peers[self.self_index];
        if me.port == port {
            return;
        }
        let host = me
            .address
            .rsplit_once(':')
            .map_or(me.address.as_str(), |(host, _)| host)
            .to_owned();
        me.port = port;
        me.address = format!("{host}:{port}");
        let text: Vec<String> = self
            .peers
            .iter()
            .map(|p| format!("{}-{}", p.id, p.address))
            .collect();
        self.values.insert("controllerDLegerPeers", text.join(";"));
    }

    pub fn group(&self) -> Option<&str> {
        self.get("controllerDLegerGroup")
    }

    /// `controllerStorePath`, or Java's default `~/DLedgerController`.
    pub fn store_path(&self) -> PathBuf {
        match self.get("controllerStorePath") {
            Some(path) => PathBuf::from(path),
            None => PathBuf::from(crate::config::under_home("DLedgerController")),
        }
    }

    /// `<controllerStorePath>/rmq-controller-<selfId>` (Java's is `dledger-<selfId>`).
    pub fn store_dir(&self) -> PathBuf {
        self.store_path()
            .join(format!("rmq-controller-{}", self.self_peer().id))
    }

    /// Where runtime updates are kept (reported as `configStorePath`).
    pub fn config_store_path(&self) -> PathBuf {
        self.store_dir().join("controller.properties")
    }

    pub fn black_list(&self) -> Vec<String> {
        let configured = self.get("configBlackList").unwrap_or_default();
        crate::config::black_list(&ALWAYS_BLACK_LISTED, configured)
    }

    /// GET_CONTROLLER_CONFIG's body: sorted `key=value` lines under the names Java's 1010 uses
    /// (its `ControllerConfig` and `NettyServerConfig` fields, and what it was started with).
    pub fn to_properties_text(&self) -> String {
        let mut all: BTreeMap<&str, String> = BTreeMap::new();
        for &(key, default, _, _) in ROWS {
            let value = self.values.get(key).cloned().unwrap_or_default();
            let shown = match key {
                PEER_SECRET_KEY => false,
                // Java's field is null until set.
                "controllerDLegerGroup" => !value.is_empty(),
                _ if SHOWN_WHEN_SET.contains(&key) => value != default,
                _ => true,
            };
            // Java's field name; the key that sets it is `processReadEvent`.
            let name = if key == "processReadEvent" {
                "isProcessReadEvent"
            } else {
                key
            };
            if shown {
                all.insert(name, value);
            }
        }
        let path = |p: PathBuf| p.to_string_lossy().into_owned();
        all.insert("controllerStorePath", path(self.store_path()));
        all.insert("configStorePath", path(self.config_store_path()));
        all.insert("jraftConfig", "unused (controllerType=DLedger)".into());
        all.extend(self.inherited.iter().map(|(k, v)| (*k, v.clone())));
        all.insert("listenPort", self.listen_port().to_string());
        crate::config::sorted_lines(all)
    }

    /// Checks an UPDATE_CONTROLLER_CONFIG body (Java properties text) without applying it.
    pub fn plan_update(&self, body: &[u8]) -> Result<PlannedUpdate, UpdateError> {
        let text = String::from_utf8_lossy(body);
        let pairs = crate::config::parse_properties(&text).map_err(UpdateError::Parse)?;
        let black_list = self.black_list();
        if let Some((key, _)) = pairs.iter().find(|(k, _)| black_list.contains(k)) {
            return Err(UpdateError::BlackListed(key.clone()));
        }
        let mut values = self.values.clone();
        let mut updated = self.updated.clone();
        let mut keys = Vec::new();
        for (key, value) in &pairs {
            let refuse = |reason: String| UpdateError::Refused(vec![format!("{key}: {reason}")]);
            let &(row_key, _, kind, effect) =
                find_row(key).ok_or_else(|| refuse("not a controller config key".into()))?;
            if effect == StartOnly {
                return Err(refuse(
                    "takes effect at start only: edit the config file".into(),
                ));
            }
            let value = check(kind, value).map_err(refuse)?;
            values.insert(row_key, value.clone());
            updated.insert(row_key, value);
            if !keys.contains(key) {
                keys.push(key.clone());
            }
        }
        let mut next = ControllerConfig::from_values(values, updated)
            .map_err(|e| UpdateError::Refused(vec![format!("{}: {e}", keys.join(","))]))?;
        next.inherited = self.inherited.clone();
        Ok(PlannedUpdate { next, keys })
    }

    /// Applies the updates kept in [`config_store_path`](Self::config_store_path) by earlier
    /// runs over the values read at start; returns the keys applied.
    pub fn load_updates(&mut self) -> Result<Vec<String>, String> {
        let path = self.config_store_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let plan = self
            .plan_update(text.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        for key in &plan.keys {
            log::info!(
                "controller: {key}={} from {} (set by UPDATE_CONTROLLER_CONFIG) overrides the config file",
                plan.next.get(key).unwrap_or_default(),
                path.display()
            );
        }
        let keys = plan.keys.clone();
        *self = plan.next;
        Ok(keys)
    }
}

fn settings_of(values: &BTreeMap<&'static str, String>) -> Settings {
    let int = |key: &str| -> i64 {
        values
            .get(key)
            .and_then(|v| v.parse().ok())
            .or_else(|| find_row(key).and_then(|r| r.1.parse().ok()))
            .unwrap_or(0)
    };
    let flag = |key: &str| values.get(key).is_some_and(|v| v == "true");
    Settings {
        scan_not_active_broker_interval_ms: int("scanNotActiveBrokerInterval") as u64,
        scan_inactive_master_interval_ms: int("scanInactiveMasterInterval") as u64,
        elect_master_max_retry_count: int("electMasterMaxRetryCount") as u32,
        enable_elect_unclean_master: flag("enableElectUncleanMaster"),
        process_read_event: flag("processReadEvent"),
        notify_broker_role_changed: flag("notifyBrokerRoleChanged"),
        check_broker_source_address: flag("checkBrokerSourceAddress"),
        snapshot_events: int(SNAPSHOT_EVENTS_KEY) as u64,
    }
}

/// A checked update, not yet applied: the log writer writes [`file_content`](Self::file_content)
/// to `next`'s `config_store_path`, then `next` is adopted.
#[derive(Debug, Clone)]
pub struct PlannedUpdate {
    pub next: ControllerConfig,
    pub keys: Vec<String>,
}

impl PlannedUpdate {
    /// Every key ever updated, with its current value.
    pub fn file_content(&self) -> Vec<u8> {
        let mut text = String::from(
            "# Written by UPDATE_CONTROLLER_CONFIG; applied over the -c config file at start.\n# Delete a line to go back to the config file's value.\n",
        );
        text.push_str(&crate::config::sorted_lines(self.next.updated.clone()));
        text.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TempDir;
    use std::path::Path;

    fn base(dir: &Path) -> Vec<(&'static str, String)> {
        vec![
            ("controllerDLegerPeers", "n0-127.0.0.1:9878".into()),
            ("controllerDLegerSelfId", "n0".into()),
            ("controllerStorePath", dir.to_string_lossy().into_owned()),
        ]
    }

    impl ControllerConfig {
        /// What the controller does with an update, here and now: checks, persists, applies.
        fn update(&mut self, body: &[u8]) -> Result<Vec<String>, UpdateError> {
            let plan = self.plan_update(body)?;
            if !plan.keys.is_empty() {
                crate::durable_file::replace_file(
                    &plan.next.config_store_path(),
                    &plan.file_content(),
                )
                .unwrap();
                *self = plan.next;
            }
            Ok(plan.keys)
        }
    }

    fn config(dir: &Path, extra: &[(&'static str, &str)]) -> Result<ControllerConfig, String> {
        let mut pairs: Vec<(&str, String)> = base(dir);
        pairs.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        ControllerConfig::from_lookup(&|key| {
            let last = borrowed.iter().rev().find(|(k, _)| *k == key);
            last.map(|(_, v)| (*v).to_owned())
        })
    }

    /// The name server's config reads the same file: a key the controller applies must not be
    /// warned about there as unknown.
    #[test]
    fn every_controller_key_is_known_to_the_name_servers_config() {
        let mut namesrv = crate::config::NamesrvConfig::default();
        for &(key, default, ..) in ROWS {
            let outcome = namesrv.set(key, default);
            assert_ne!(
                outcome,
                crate::config::SetOutcome::Unknown,
                "{} is applied by the controller but unknown to the name server",
                key
            );
        }
    }

    #[test]
    fn defaults_and_the_derived_values() {
        let dir = TempDir::new("ctrl-config");
        let c = config(dir.path(), &[]).unwrap();
        assert_eq!(
            c.settings(),
            &Settings {
                scan_not_active_broker_interval_ms: 5000,
                scan_inactive_master_interval_ms: 5000,
                elect_master_max_retry_count: 3,
                enable_elect_unclean_master: false,
                process_read_event: false,
                notify_broker_role_changed: true,
                snapshot_events: 10_000,
                check_broker_source_address: true,
            }
        );
        assert_eq!(c.listen_port(), 9878);
        assert_eq!(c.self_peer().address, "127.0.0.1:9878");
        assert_eq!(c.store_dir(), dir.path().join("rmq-controller-n0"));
        assert_eq!(c.group(), None);
        let text = c.to_properties_text();
        assert!(text.contains("\nenableElectUncleanMaster=false\n"));
        assert!(text.contains("configStorePath="));
        assert!(
            !text.contains("controllerDLegerGroup"),
            "unset keys are left out"
        );
        let keys: Vec<&str> = text.lines().map(|l| l.split('=').next().unwrap()).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn what_cannot_work_is_refused_at_start_with_the_key_named() {
        let dir = TempDir::new("ctrl-config");
        let refused = |extra: &[(&'static str, &str)]| config(dir.path(), extra).unwrap_err();
        assert!(refused(&[("controllerType", "jRaft")]).contains("jRaft is not supported"));
        assert!(refused(&[("controllerType", "raft")]).contains("controllerType=raft"));
        assert!(
            refused(&[("controllerDLegerPeers", "")]).contains("controllerDLegerPeers is empty")
        );
        assert!(
            refused(&[("controllerDLegerPeers", "n0:9878")]).contains("is not <id>-<host>:<port>")
        );
        assert!(refused(&[("controllerDLegerPeers", "n0-h:x")]).contains("not a port"));
        assert!(refused(&[("controllerDLegerPeers", "n0-h:65536")]).contains("not a port"));
        assert!(
            refused(&[("controllerDLegerSelfId", "")]).contains("controllerDLegerSelfId is empty")
        );
        assert!(refused(&[("controllerDLegerSelfId", "n1")]).contains("is not one of the ids"));
        // Several peers are a Raft group now.
        let group = config(dir.path(), &[("controllerDLegerPeers", "n0-a:1;n1-b:2")]).unwrap();
        assert_eq!(group.peers().len(), 2);
        assert!(refused(&[("enableElectUncleanMaster", "yes")])
            .contains("enableElectUncleanMaster=yes"));
        assert!(refused(&[("electMasterMaxRetryCount", "-1")]).contains("outside"));
        assert!(refused(&[("metricsExporterType", "LOG")]).contains("not implemented"));
    }

    #[test]
    fn peers_keep_hostnames_and_split_at_the_first_dash() {
        let peers = parse_peers("n0-my-host.svc:9878; ").unwrap();
        assert_eq!(
            peers,
            vec![Peer {
                id: "n0".into(),
                address: "my-host.svc:9878".into(),
                port: 9878
            }]
        );
        assert!(parse_peers("n0-a:1;n0-b:2").unwrap_err().contains("twice"));
    }

    #[test]
    fn a_port_0_entry_announces_the_bound_port_and_keeps_it_across_updates() {
        let dir = TempDir::new("ctrl-config");
        let mut c = config(dir.path(), &[("controllerDLegerPeers", "n0-my-host:0")]).unwrap();
        assert_eq!(c.listen_port(), 0);
        c.set_bound_port(41234);
        assert_eq!(c.self_peer().address, "my-host:41234");
        assert_eq!(c.listen_port(), 41234);
        assert!(c
            .to_properties_text()
            .contains("\ncontrollerDLegerPeers=n0-my-host:41234\n"));
        c.update(b"electMasterMaxRetryCount=2\n").unwrap();
        assert_eq!(c.self_peer().address, "my-host:41234");
    }

    /// ControllerRequestProcessorTest.testProcessRequest_UpdateConfigPath, and the rules
    /// that make an update all or nothing.
    #[test]
    fn updates_are_checked_whole_then_persisted_and_read_back() {
        let dir = TempDir::new("ctrl-config");
        let mut c = config(dir.path(), &[]).unwrap();
        assert_eq!(
            c.update(b"notifyBrokerRoleChanged=false\n").unwrap(),
            vec!["notifyBrokerRoleChanged"]
        );
        assert!(!c.settings().notify_broker_role_changed);
        for black in [
            "configStorePath=test/path",
            "rocketmqHome=test/path",
            "configBlackList=test;path",
            "controllerSnapshotEvents=20",
        ] {
            let err = c.update(black.as_bytes()).unwrap_err();
            assert_eq!(err.response_code(), 16, "{black}");
            assert!(err
                .remark()
                .starts_with("Can not update config in black list"));
        }
        let before = c.clone();
        for (body, needle) in [
            (
                "enableElectUncleanMaster=true\nnoSuchKey=1\n",
                "noSuchKey: not a controller config key",
            ),
            (
                "enableElectUncleanMaster=true\nscanInactiveMasterInterval=1000\n",
                "takes effect at start only",
            ),
            (
                "enableElectUncleanMaster=maybe\n",
                "enableElectUncleanMaster: \"maybe\" is not true or false",
            ),
        ] {
            let err = c.update(body.as_bytes()).unwrap_err();
            let (code, remark) = (err.response_code(), err.remark());
            assert_eq!(code, 1);
            assert!(remark.contains(needle), "{remark}");
            assert_eq!(c, before, "nothing of a refused update is applied");
        }
        c.update(b"enableElectUncleanMaster=true\ncontrollerThreadPoolNums=4\n")
            .unwrap();
        assert!(c.settings().enable_elect_unclean_master);
        assert!(c
            .to_properties_text()
            .contains("controllerThreadPoolNums=4\n"));
        // A restart reads the -c values, then the kept updates over them.
        let mut restarted = config(dir.path(), &[("enableElectUncleanMaster", "false")]).unwrap();
        let mut applied = restarted.load_updates().unwrap();
        applied.sort();
        assert_eq!(
            applied,
            vec![
                "controllerThreadPoolNums",
                "enableElectUncleanMaster",
                "notifyBrokerRoleChanged"
            ]
        );
        assert_eq!(restarted.settings(), c.settings());
        // A configBlackList entry black-lists more keys.
        let mut strict = config(
            dir.path(),
            &[("configBlackList", "notifyBrokerRoleChanged")],
        )
        .unwrap();
        assert_eq!(
            strict
                .update(b"notifyBrokerRoleChanged=true")
                .unwrap_err()
                .response_code(),
            16
        );
        assert!(strict.update(b"").unwrap().is_empty());
    }
}
