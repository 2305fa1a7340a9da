//! UPDATE_NAMESRV_CONFIG, all or nothing: checked on the loop, written, then adopted; and
//! SIGHUP's reload of the config file, checked the same way and adopted without a write.

use std::path::Path;

use super::properties::{edit, parse_properties, Encoding, PropertiesFile};
use super::table::Applies;
use super::{is_controller_key, unknown_key_message, NamesrvConfig, SetOutcome};
use crate::remoting::codes::response;

/// Longest value an update may set: a path or an allow-list of a few hundred ranges fits.
const MAX_UPDATE_VALUE_LENGTH: usize = 4096;

/// The keys Java black-lists: refusing them keeps Java's exact answer.
pub(super) const JAVA_BLACK_LISTED: [&str; 4] = [
    "configBlackList",
    "configStorePath",
    "kvConfigPath",
    "rocketmqHome",
];

/// Why an update was refused; nothing of it was applied.
#[derive(Debug)]
pub enum UpdateError {
    BlackListed(String),
    Parse(String),
    /// Unknown keys, invalid values and changes of start-only keys: one line each.
    Refused(Vec<String>),
    Persist {
        path: String,
        reason: String,
    },
}

impl UpdateError {
    pub fn response_code(&self) -> i32 {
        match self {
            UpdateError::BlackListed(_) => response::NO_PERMISSION,
            _ => response::SYSTEM_ERROR,
        }
    }

    /// Java's words where Java has them.
    pub fn remark(&self) -> String {
        match self {
            UpdateError::BlackListed(key) if JAVA_BLACK_LISTED.contains(&key.as_str()) => {
                "Can not update config in black list.".to_string()
            }
            UpdateError::BlackListed(key) => format!(
                "Can not update config in black list: {key} is in configBlackList (it protects \
                 the server); set it in the config file and restart"
            ),
            UpdateError::Parse(_) => "string2Properties error".to_string(),
            UpdateError::Refused(problems) => problems.join("; "),
            UpdateError::Persist { path, reason } => {
                format!("cannot write the config file {path}: {reason}; nothing was changed")
            }
        }
    }
}

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateError::BlackListed(key) => write!(f, "{key} is in the config black list"),
            UpdateError::Parse(reason) => write!(f, "string2Properties error: {reason}"),
            other => f.write_str(&other.remark()),
        }
    }
}

impl std::error::Error for UpdateError {}

/// Applies `key=value` to `next`, or says why it cannot (a start-only key keeps its value).
fn check_one(
    current: &NamesrvConfig,
    next: &mut NamesrvConfig,
    key: &str,
    value: &str,
) -> Result<(), String> {
    if value.len() > MAX_UPDATE_VALUE_LENGTH {
        return Err(format!(
            "{key}: a value of {} bytes is longer than {MAX_UPDATE_VALUE_LENGTH}",
            value.len()
        ));
    }
    let at_start = match next.set(key, value) {
        SetOutcome::Invalid(reason) => return Err(reason),
        SetOutcome::Unknown => return Err(unknown_key_message(key)),
        SetOutcome::Applied if is_controller_key(key) => "is a Controller key and takes effect",
        SetOutcome::Applied if NamesrvConfig::applies(key) == Some(Applies::AtStart) => {
            "takes effect"
        }
        SetOutcome::Applied => return Ok(()),
    };
    if next.get(key) == current.get(key) {
        return Ok(());
    }
    Err(format!(
        "{key} {at_start} at start only: edit the config file"
    ))
}

/// A checked UPDATE_NAMESRV_CONFIG: persist it, then apply it.
#[derive(Debug, Clone)]
pub struct ConfigPlan {
    /// The keys whose value changes, with their new (checked) value.
    changes: Vec<(String, String)>,
    path: String,
}

impl ConfigPlan {
    /// The keys whose value changes, with their new value.
    pub fn changes(&self) -> &[(String, String)] {
        &self.changes
    }

    pub fn changed(&self) -> Vec<String> {
        self.changes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    /// Sets the changed keys on `config`: an update planned before another change was adopted
    /// (a reload while this one was written) keeps that change.
    pub fn apply_to(&self, config: &mut NamesrvConfig) {
        for (key, value) in &self.changes {
            config.set(key, value);
        }
    }

    /// Rewrites the changed keys' lines (crash-safe, durable on return; creates the file).
    pub fn persist(&self) -> Result<(), UpdateError> {
        let failed = |reason: String| UpdateError::Persist {
            path: self.path.clone(),
            reason,
        };
        let path = Path::new(&self.path);
        let file = match PropertiesFile::read(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => PropertiesFile {
                text: String::new(),
                encoding: Encoding::Utf8,
            },
            Err(e) => return Err(failed(e.to_string())),
        };
        let changes: Vec<(&str, &str)> = self
            .changes
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let edited = edit(&file, &changes).map_err(failed)?;
        crate::durable_file::replace_file(path, &edited.to_bytes())
            .map_err(|e| failed(e.to_string()))
    }
}

impl NamesrvConfig {
    /// Checks an UPDATE_NAMESRV_CONFIG body: `None` when it changes nothing.
    pub fn plan_update(&self, body: &str) -> Result<Option<ConfigPlan>, UpdateError> {
        let pairs = parse_properties(body).map_err(UpdateError::Parse)?;
        let black_list = self.black_list();
        if let Some((key, _)) = pairs.iter().find(|(k, _)| black_list.contains(k)) {
            return Err(UpdateError::BlackListed(key.clone()));
        }
        self.plan(&pairs)
    }

    /// SIGHUP's values of the live keys ([`NamesrvConfig::reload_from`]): checked as an update
    /// is, but the black list (it guards against remote peers) does not apply to the file.
    pub fn plan_reload(
        &self,
        pairs: &[(String, String)],
    ) -> Result<Option<ConfigPlan>, UpdateError> {
        self.plan(pairs)
    }

    fn plan(&self, pairs: &[(String, String)]) -> Result<Option<ConfigPlan>, UpdateError> {
        let mut next = self.clone();
        let problems: Vec<String> = pairs
            .iter()
            .filter_map(|(key, value)| check_one(self, &mut next, key, value).err())
            .collect();
        if !problems.is_empty() {
            return Err(UpdateError::Refused(problems));
        }
        let mut changes: Vec<(String, String)> = Vec::new();
        for (key, _) in pairs {
            let value = next.get(key).unwrap_or_default();
            if self.get(key).as_deref() != Some(value.as_str())
                && !changes.iter().any(|(k, _)| k == key)
            {
                changes.push((key.clone(), value));
            }
        }
        if changes.is_empty() {
            return Ok(None);
        }
        Ok(Some(ConfigPlan {
            changes,
            path: self.config_store_path.clone(),
        }))
    }
}

/// What SIGHUP found in the config file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reload {
    /// Every key that may change while running, with the file's (and command line's) value.
    pub live: Vec<(String, String)>,
    /// Keys whose value in the file differs from the one read at start, applied at restart.
    pub at_start: Vec<String>,
}

impl NamesrvConfig {
    /// Splits a freshly read config: `self` is the config read at start.
    pub fn reload_from(&self, fresh: &NamesrvConfig) -> Reload {
        let mut reload = Reload::default();
        let controller_keys = crate::controller::config::keys();
        for key in NamesrvConfig::keys().iter().copied().chain(controller_keys) {
            let value = fresh.get(key);
            let live =
                !is_controller_key(key) && NamesrvConfig::applies(key) != Some(Applies::AtStart);
            match value {
                Some(value) if live => reload.live.push((key.to_string(), value)),
                _ if !live && value != self.get(key) => reload.at_start.push(key.to_string()),
                _ => {}
            }
        }
        reload
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TempDir;
    use std::fs;
    use std::path::PathBuf;

    impl NamesrvConfig {
        /// UPDATE_NAMESRV_CONFIG in one go, as the processor runs it in steps: plan, write,
        /// adopt. Returns the changed keys as `key=value`.
        fn update(&mut self, body: &str) -> Result<Vec<String>, UpdateError> {
            let Some(plan) = self.plan_update(body)? else {
                return Ok(Vec::new());
            };
            plan.persist()?;
            let changed = plan.changed();
            plan.apply_to(self);
            Ok(changed)
        }
    }

    fn stored_at(path: &Path) -> NamesrvConfig {
        NamesrvConfig {
            config_store_path: path.to_string_lossy().into_owned(),
            ..NamesrvConfig::default()
        }
    }

    fn bak(path: &Path) -> PathBuf {
        crate::durable_file::sibling(path, ".bak")
    }

    fn refused(c: &mut NamesrvConfig, body: &str) -> Vec<String> {
        let before = c.clone();
        match c.update(body) {
            Err(UpdateError::Refused(problems)) => {
                assert_eq!(*c, before, "{body}");
                problems
            }
            other => panic!("{body}: {other:?}"),
        }
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
            let err = c.update(body).unwrap_err();
            assert!(matches!(err, UpdateError::BlackListed(_)), "{body}");
            assert_eq!(err.response_code(), response::NO_PERMISSION);
            assert_eq!(err.remark(), "Can not update config in black list.");
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
    fn protective_keys_are_black_listed_by_default_and_named_in_the_refusal() {
        let dir = TempDir::new("protect");
        let mut c = stored_at(&dir.join("namesrv.properties"));
        let before = c.clone();
        for (body, key) in [
            ("frameMaxLength=1024\n", "frameMaxLength"),
            (
                "orderMessageEnable=true\nadminAllowList=192.0.2.1/32\n",
                "adminAllowList",
            ),
            ("maxBufferedBytes=1048576\n", "maxBufferedBytes"),
            ("maxConnections=1\n", "maxConnections"),
        ] {
            let err = c.update(body).unwrap_err();
            assert_eq!(err.response_code(), response::NO_PERMISSION, "{body}");
            assert!(
                err.remark()
                    .contains(&format!("{key} is in configBlackList")),
                "{body}"
            );
            assert_eq!(c, before);
        }
        assert!(
            !Path::new(&c.config_store_path).exists(),
            "nothing was written"
        );
        // Every protected key is a key of the table.
        for key in super::super::PROTECTED_KEYS.split(';') {
            assert!(NamesrvConfig::applies(key).is_some(), "{key}");
        }
    }

    #[test]
    fn a_limit_below_its_floor_is_refused_even_when_not_black_listed() {
        let dir = TempDir::new("floor");
        let mut c = stored_at(&dir.join("namesrv.properties"));
        c.config_black_list = super::super::JAVA_CONFIG_BLACK_LIST.to_string();
        let problems = refused(&mut c, "frameMaxLength=1024\nmaxJsonDepth=2\n");
        assert_eq!(
            problems,
            [
                "frameMaxLength: 1024 is outside 8388608..=1073741824",
                "maxJsonDepth: 2 is outside 16..=1024"
            ]
        );
        assert_eq!(
            c.update("frameMaxLength=8388608").unwrap(),
            ["frameMaxLength=8388608"]
        );
    }

    #[test]
    fn invalid_values_unknown_keys_and_start_only_keys_refuse_the_whole_request() {
        let dir = TempDir::new("refuse");
        let path = dir.join("namesrv.properties");
        let mut c = stored_at(&path);
        let problems = refused(
            &mut c,
            "orderMessageEnable=true\nscanNotActiveBrokerInterval=-5\n",
        );
        assert_eq!(
            problems,
            ["scanNotActiveBrokerInterval: -5 is outside 1..=3600000"]
        );
        let problems = refused(&mut c, "scanNotActiveBrokerInterval=abc");
        assert_eq!(
            problems,
            ["scanNotActiveBrokerInterval: \"abc\" is not an integer"]
        );
        let problems = refused(&mut c, "scanNotActivBrokerInterval=100");
        assert_eq!(
            problems,
            ["unknown key scanNotActivBrokerInterval (did you mean scanNotActiveBrokerInterval?)"]
        );
        let problems = refused(
            &mut c,
            "listenPort=9999\nlogPath=/tmp/x.log\nreturnOrderTopicConfigToBroker=1",
        );
        assert_eq!(
            problems,
            [
                "listenPort takes effect at start only: edit the config file",
                "logPath takes effect at start only: edit the config file",
                "returnOrderTopicConfigToBroker: \"1\" is not true or false",
            ]
        );
        let problems = refused(&mut c, "orderMessageEnable=yes");
        assert_eq!(
            problems,
            ["orderMessageEnable: \"yes\" is not true or false"]
        );
        let problems = refused(&mut c, "controllerDLegerPeers=n0-127.0.0.1:9878");
        assert!(problems[0].starts_with("controllerDLegerPeers is a Controller key"));
        let long = format!("productEnvName={}", "x".repeat(4097));
        let problems = refused(&mut c, &long);
        assert_eq!(
            problems,
            ["productEnvName: a value of 4097 bytes is longer than 4096"]
        );
        let err = c.update("custom.key=1").unwrap_err();
        assert_eq!(err.response_code(), response::SYSTEM_ERROR);
        assert_eq!(err.remark(), "unknown key custom.key");
        assert!(!path.exists(), "nothing was written");
    }

    #[test]
    fn a_start_only_key_with_its_current_value_is_no_change() {
        let dir = TempDir::new("same");
        let path = dir.join("namesrv.properties");
        let mut c = stored_at(&path);
        c.set("controllerDLegerSelfId", "n0");
        let before = c.clone();
        assert_eq!(
            c.update("listenPort=9876\ncontrollerDLegerSelfId=n0\n")
                .unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(c, before);
        assert!(!path.exists(), "nothing to write");
    }

    #[test]
    fn live_and_reported_only_keys_are_applied_and_only_they_are_written() {
        let dir = TempDir::new("persist");
        let path = dir.join("namesrv.conf");
        let original = "# operator's file\n\n# port\nlistenPort=0\n\n# scan\nscanNotActiveBrokerInterval=5000\n";
        fs::write(&path, original).unwrap();
        let mut c = stored_at(&path);
        c.log_path = "/from/the/command/line.log".into();
        let changed = c
            .update("scanNotActiveBrokerInterval=7000\nlogLevel=DEBUG\nserverWorkerThreads=4\norderMessageEnable=false\n")
            .unwrap();
        assert_eq!(
            changed,
            [
                "scanNotActiveBrokerInterval=7000",
                "logLevel=debug",
                "serverWorkerThreads=4"
            ]
        );
        assert_eq!(c.scan_not_active_broker_interval, 7000);
        assert_eq!(c.log_level, "debug");
        assert_eq!(c.server_worker_threads, 4);
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "# operator's file\n\n# port\nlistenPort=0\n\n# scan\nscanNotActiveBrokerInterval=7000\nlogLevel=debug\nserverWorkerThreads=4\n"
        );
        // The previous version is kept as .bak.
        assert_eq!(fs::read_to_string(bak(&path)).unwrap(), original);
    }

    #[test]
    fn an_update_that_cannot_be_written_changes_nothing_in_memory() {
        let dir = TempDir::new("nopersist");
        // A directory where the file should be: reading it fails.
        let path = dir.join("is-a-dir");
        fs::create_dir_all(path.join("child")).unwrap();
        let mut c = stored_at(&path);
        let before = c.clone();
        let err = c.update("orderMessageEnable=true\n").unwrap_err();
        assert!(matches!(err, UpdateError::Persist { .. }), "{err:?}");
        assert!(err.remark().contains("is-a-dir"), "{}", err.remark());
        assert_eq!(err.response_code(), response::SYSTEM_ERROR);
        assert_eq!(c, before);
    }

    #[test]
    fn a_reload_applies_live_keys_even_black_listed_ones_and_names_start_only_changes() {
        let at_start = NamesrvConfig::default();
        let mut fresh = at_start.clone();
        for (key, value) in [
            ("scanNotActiveBrokerInterval", "7000"),
            ("maxConnections", "100"),
            ("listenPort", "9999"),
            ("controllerDLegerSelfId", "n1"),
        ] {
            assert_eq!(fresh.set(key, value), SetOutcome::Applied, "{key}");
        }
        let reload = at_start.reload_from(&fresh);
        assert_eq!(reload.at_start, ["listenPort", "controllerDLegerSelfId"]);
        let live = |key: &str| reload.live.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        assert_eq!(
            live("scanNotActiveBrokerInterval").map(String::as_str),
            Some("7000")
        );
        assert_eq!(live("listenPort"), None);
        let mut running = at_start.clone();
        running.log_level = "debug".into();
        let plan = running.plan_reload(&reload.live).unwrap().unwrap();
        // Only what differs from the running config; maxConnections despite the black list.
        assert_eq!(
            plan.changed(),
            [
                "logLevel=info",
                "maxConnections=100",
                "scanNotActiveBrokerInterval=7000"
            ]
        );
        plan.apply_to(&mut running);
        assert_eq!(running.scan_not_active_broker_interval, 7000);
        assert_eq!(running.listen_port, at_start.listen_port);
        assert_eq!(
            running
                .plan_reload(&reload.live)
                .unwrap()
                .map(|p| p.changed()),
            None
        );
    }

    #[test]
    fn update_reports_a_malformed_body_as_a_parse_error() {
        let mut c = NamesrvConfig::default();
        let before = c.clone();
        let err = c.update("a=\\uXYZW\n").unwrap_err();
        assert!(matches!(err, UpdateError::Parse(_)));
        assert_eq!(err.remark(), "string2Properties error");
        assert_eq!(c, before);
    }
}
