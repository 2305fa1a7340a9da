//! Route data types and every body encoding the NameServer reads or writes (PROTOCOL.md §4, §6).
//!
//! Pure data plus codecs: no tables, no I/O. The shapes mirror the Java beans field for field
//! because peers compare bytes: fastjson writes bean fields alphabetically, omits nulls, writes
//! compact text, and has two map-key dialects for routes ([`Dialect`]). Decoders are lenient the
//! way fastjson is (missing keys take Java's defaults, unknown keys are ignored) but every length,
//! count and number that a peer controls is checked: a bad body is an error value, never a panic
//! or an allocation larger than the input justifies.
//!
//! The compressed REGISTER_BROKER layout (§4.2) is zlib (RFC 1950, as `java.util.zip.Deflater`),
//! inflated with a hard output limit so that a zip bomb fails instead of growing memory.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use crate::remoting::codes::version::{V3_0_11, V5_0_0};
use crate::remoting::json::{self, Members, Seq, ValueRef};

/// The checksums lived here once; callers in other branches still name them through `model`.
/// New code uses [`crate::checksum`].
pub use crate::checksum::{crc32, fingerprint};

/// Largest long that BrowserCompatible fastjson writes as a number (2^53 - 1).
const JS_SAFE_LONG: i64 = 9_007_199_254_740_991;
/// `MixAll.METADATA_SCOPE_GLOBAL`, TopicQueueMappingInfo's default scope.
const GLOBAL_SCOPE: &str = "__global__";
/// TopicConfig defaults (Java `TopicConfig` field initialisers).
const DEFAULT_QUEUE_NUMS: i32 = 16;
const DEFAULT_PERM: i32 = 6;

/// An error decoding a body; the text is suitable for a response remark.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelError(pub String);

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ModelError {}

impl From<json::JsonError> for ModelError {
    fn from(e: json::JsonError) -> Self {
        ModelError(format!("bad JSON body: {e}"))
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, ModelError> {
    Err(ModelError(msg.into()))
}

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/// A broker's topic-config version; registrations with an unchanged one skip topic updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataVersion {
    pub counter: i64,
    pub state_version: i64,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueData {
    pub broker_name: String,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    pub perm: i32,
    pub topic_sys_flag: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerData {
    pub cluster: String,
    pub broker_name: String,
    /// brokerId -> "ip:port"
    pub broker_addrs: BTreeMap<i64, String>,
    pub zone_name: Option<String>,
    pub enable_acting_master: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    pub topic_name: String,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    pub perm: i32,
    pub topic_sys_flag: i32,
}

/// TopicQueueMappingInfo (static topics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingInfo {
    pub topic: String,
    pub scope: String,
    pub total_queues: i32,
    pub bname: String,
    pub epoch: i64,
    pub dirty: bool,
    /// logicId -> physicalId, in the order received (Java hash order for legacy re-encoding).
    pub curr_id_map: Vec<(i32, i32)>,
}

/// RegisterBrokerBody as the NameServer uses it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RegisterBody {
    pub data_version: DataVersion,
    /// (topicConfigTable map key, value); value.topic_name is the topic actually used.
    pub topics: Vec<(String, TopicConfig)>,
    /// None when absent / old-version body.
    pub filter_servers: Option<Vec<String>>,
    /// (topic key, info)
    pub mappings: Vec<(String, MappingInfo)>,
}

#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    pub json: json::Limits,
    pub max_topics: usize,
    pub max_inflated_len: usize,
}

impl Default for BodyLimits {
    fn default() -> Self {
        BodyLimits {
            json: json::Limits::default(),
            max_topics: 100_000,
            max_inflated_len: 64 << 20,
        }
    }
}

/// The two map-key dialects of GET_ROUTEINFO_BY_TOPIC (PROTOCOL §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Every key quoted, maps sorted, BrowserCompatible string escaping.
    Standard,
    /// fastjson defaults: numeric keys bare, strings raw UTF-8.
    Legacy,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopicRouteData {
    pub order_topic_conf: Option<String>,
    pub queue_datas: Vec<QueueData>,
    pub broker_datas: Vec<BrokerData>,
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// brokerName -> info; None => key omitted.
    pub topic_queue_mapping_by_broker: Option<Vec<(String, MappingInfo)>>,
}

/// ClusterInfo (106), always legacy dialect.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterInfo {
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    pub cluster_addr_table: BTreeMap<String, Vec<String>>,
}

// ---------------------------------------------------------------------------------------------
// Writer helpers
// ---------------------------------------------------------------------------------------------

fn write_string(out: &mut Vec<u8>, s: &str, dialect: Dialect) {
    match dialect {
        Dialect::Standard => json::write_str_browser(out, s),
        Dialect::Legacy => json::write_str(out, s),
    }
}

/// Starts a map entry whose key is a string, written as the dialect writes strings.
fn str_entry<'o>(map: &'o mut Seq<'_>, key: &str, dialect: Dialect) -> &'o mut Vec<u8> {
    let out = map.item();
    write_string(out, key, dialect);
    out.push(b':');
    out
}

/// Starts a map entry whose key is a Long/Integer: quoted in the standard dialect, bare in the
/// legacy one.
fn num_entry<'o>(map: &'o mut Seq<'_>, key: i64, dialect: Dialect) -> &'o mut Vec<u8> {
    let out = map.item();
    match dialect {
        Dialect::Standard => {
            out.push(b'"');
            json::write_i64(out, key);
            out.push(b'"');
        }
        Dialect::Legacy => json::write_i64(out, key),
    }
    out.push(b':');
    out
}

/// A long bean field value: BrowserCompatible writes longs beyond 2^53 as strings.
fn write_long(out: &mut Vec<u8>, v: i64, dialect: Dialect) {
    if dialect == Dialect::Standard && !(-JS_SAFE_LONG..=JS_SAFE_LONG).contains(&v) {
        out.push(b'"');
        json::write_i64(out, v);
        out.push(b'"');
    } else {
        json::write_i64(out, v);
    }
}

fn write_str_array<'a>(out: &mut Vec<u8>, items: impl Iterator<Item = &'a str>, dialect: Dialect) {
    let mut array = Seq::array(out);
    for item in items {
        write_string(array.item(), item, dialect);
    }
    array.end();
}

// ---------------------------------------------------------------------------------------------
// Reader helpers (over json::ValueRef)
// ---------------------------------------------------------------------------------------------
//
// Decoders read a borrowed `json::Document` (no per-string allocation) and pick a bean's
// fields with `ValueRef::get_many` (one pass over its members; the last duplicate wins, as
// in a Java map). A member that is present but null counts as absent.

fn as_object<'d>(v: ValueRef<'d>, what: &str) -> Result<Members<'d>, ModelError> {
    match v.members() {
        Some(members) => Ok(members),
        None => err(format!("{what} is not a JSON object")),
    }
}

/// A member value that is present and not null.
fn present(v: Option<ValueRef<'_>>) -> Option<ValueRef<'_>> {
    v.filter(|v| !v.is_null())
}

/// A member that is present and not null.
fn member<'d>(obj: ValueRef<'d>, key: &str) -> Option<ValueRef<'d>> {
    present(obj.get(key))
}

/// A long bean field (`key` of `what`) found as `v`.
fn long_field(
    v: Option<ValueRef<'_>>,
    default: i64,
    what: &str,
    key: &str,
) -> Result<i64, ModelError> {
    match present(v) {
        None => Ok(default),
        Some(v) => match v.as_i64() {
            Some(n) => Ok(n),
            None => err(format!("{what}.{key} is not a long")),
        },
    }
}

fn int_field(
    v: Option<ValueRef<'_>>,
    default: i32,
    what: &str,
    key: &str,
) -> Result<i32, ModelError> {
    match present(v) {
        None => Ok(default),
        Some(v) => match v.as_i32() {
            Some(n) => Ok(n),
            None => err(format!("{what}.{key} is not an int")),
        },
    }
}

fn bool_field(v: Option<ValueRef<'_>>, what: &str, key: &str) -> Result<bool, ModelError> {
    match present(v) {
        None => Ok(false),
        Some(v) => match v.as_bool() {
            Some(b) => Ok(b),
            None => err(format!("{what}.{key} is not a boolean")),
        },
    }
}

/// A String bean field: fastjson turns a non-string scalar into its text.
fn string_field(v: Option<ValueRef<'_>>) -> Option<String> {
    present(v).map(|v| v.to_text())
}

fn string_list(v: ValueRef<'_>, what: &str) -> Result<Vec<String>, ModelError> {
    match v.items() {
        Some(items) => Ok(items.map(|item| item.to_text()).collect()),
        None => err(format!("{what} is not a JSON array")),
    }
}

/// Keeps one entry per key: the last value at the first key's position (a Java map's `put`).
fn dedup_last_wins<T>(entries: Vec<(String, T)>) -> Vec<(String, T)> {
    let has_duplicates = {
        let mut seen: HashSet<&str> = HashSet::with_capacity(entries.len());
        entries.iter().any(|(k, _)| !seen.insert(k.as_str()))
    };
    if !has_duplicates {
        return entries;
    }
    let mut position: HashMap<String, usize> = HashMap::with_capacity(entries.len());
    let mut unique: Vec<(String, T)> = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        match position.get(&key) {
            Some(&i) => {
                if let Some(slot) = unique.get_mut(i) {
                    slot.1 = value;
                }
            }
            None => {
                position.insert(key.clone(), unique.len());
                unique.push((key, value));
            }
        }
    }
    unique
}

// ---------------------------------------------------------------------------------------------
// DataVersion
// ---------------------------------------------------------------------------------------------

impl DataVersion {
    /// `{"counter":..,"stateVersion":..,"timestamp":..}`; missing fields = 0.
    pub fn decode(body: &[u8]) -> Result<DataVersion, ModelError> {
        let doc = json::parse_borrowed(body, &json::Limits::default())?;
        DataVersion::from_ref(doc.root())
    }

    fn from_ref(v: ValueRef<'_>) -> Result<DataVersion, ModelError> {
        const WHAT: &str = "dataVersion";
        as_object(v, WHAT)?;
        let [counter, state_version, timestamp] =
            v.get_many(["counter", "stateVersion", "timestamp"]);
        Ok(DataVersion {
            counter: long_field(counter, 0, WHAT, "counter")?,
            state_version: long_field(state_version, 0, WHAT, "stateVersion")?,
            timestamp: long_field(timestamp, 0, WHAT, "timestamp")?,
        })
    }

    /// `{"counter":3,"stateVersion":0,"timestamp":1700000000000}`
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut o = Seq::object(out);
        json::write_i64(o.field("counter"), self.counter);
        json::write_i64(o.field("stateVersion"), self.state_version);
        json::write_i64(o.field("timestamp"), self.timestamp);
        o.end();
    }
}

// ---------------------------------------------------------------------------------------------
// MappingInfo
// ---------------------------------------------------------------------------------------------

impl MappingInfo {
    /// Fields alphabetical: bname, currIdMap, dirty, epoch, scope, topic, totalQueues.
    /// Standard sorts currIdMap by key; legacy keeps the stored order.
    pub fn encode(&self, out: &mut Vec<u8>, dialect: Dialect) {
        let mut o = Seq::object(out);
        write_string(o.field("bname"), &self.bname, dialect);
        let mut ids: Cow<'_, [(i32, i32)]> = Cow::Borrowed(&self.curr_id_map);
        if dialect == Dialect::Standard && ids.windows(2).any(|w| w[0].0 > w[1].0) {
            ids.to_mut().sort_by_key(|e| e.0);
        }
        let mut map = Seq::object(o.field("currIdMap"));
        for &(logic, physical) in ids.iter() {
            let out = num_entry(&mut map, i64::from(logic), dialect);
            json::write_i64(out, i64::from(physical));
        }
        map.end();
        json::write_bool(o.field("dirty"), self.dirty);
        write_long(o.field("epoch"), self.epoch, dialect);
        write_string(o.field("scope"), &self.scope, dialect);
        write_string(o.field("topic"), &self.topic, dialect);
        json::write_i64(o.field("totalQueues"), i64::from(self.total_queues));
        o.end();
    }

    fn from_ref(v: ValueRef<'_>) -> Result<MappingInfo, ModelError> {
        const WHAT: &str = "TopicQueueMappingInfo";
        as_object(v, WHAT)?;
        let [curr_id_map_value, topic, scope, total_queues, bname, epoch, dirty] = v.get_many([
            "currIdMap",
            "topic",
            "scope",
            "totalQueues",
            "bname",
            "epoch",
            "dirty",
        ]);
        let mut curr_id_map = Vec::new();
        if let Some(map) = present(curr_id_map_value) {
            let entries = as_object(map, "currIdMap")?;
            curr_id_map.reserve(entries.len());
            for (key, value) in entries {
                let logic: i32 = match key.trim().parse() {
                    Ok(n) => n,
                    Err(_) => return err(format!("currIdMap key {key:?} is not an int")),
                };
                let physical = match value.as_i32() {
                    Some(n) => n,
                    None => return err("currIdMap value is not an int"),
                };
                // A repeated key replaces the earlier value (map semantics).
                match curr_id_map.iter_mut().find(|(k, _)| *k == logic) {
                    Some(slot) => slot.1 = physical,
                    None => curr_id_map.push((logic, physical)),
                }
            }
        }
        Ok(MappingInfo {
            topic: string_field(topic).unwrap_or_default(),
            scope: string_field(scope).unwrap_or_else(|| GLOBAL_SCOPE.to_owned()),
            total_queues: int_field(total_queues, 0, WHAT, "totalQueues")?,
            bname: string_field(bname).unwrap_or_default(),
            epoch: long_field(epoch, 0, WHAT, "epoch")?,
            dirty: bool_field(dirty, WHAT, "dirty")?,
            curr_id_map,
        })
    }
}

fn mappings_from_ref(
    map: ValueRef<'_>,
    limit: usize,
) -> Result<Vec<(String, MappingInfo)>, ModelError> {
    let entries = as_object(map, "topicQueueMappingInfoMap")?;
    if entries.len() > limit {
        return err(format!(
            "too many mapping entries ({} > {limit})",
            entries.len()
        ));
    }
    let mut mappings = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        if value.is_null() {
            return err(format!("null TopicQueueMappingInfo for {key}"));
        }
        mappings.push((key.to_owned(), MappingInfo::from_ref(value)?));
    }
    Ok(dedup_last_wins(mappings))
}

// ---------------------------------------------------------------------------------------------
// REGISTER_BROKER body
// ---------------------------------------------------------------------------------------------

/// Decodes a REGISTER_BROKER body exactly as PROTOCOL.md §4.1/§4.2 describe:
/// - empty body => RegisterBody::default() (empty topics, DataVersion 0,0,0, filter_servers None);
/// - `compressed` true, OR the body starts with 0x78 (zlib header; 5.x brokers flag compressed
///   bodies as uncompressed, PROTOCOL §4.2 TRAP) => zlib-inflate (bounded by max_inflated_len)
///   then the binary layout of §4.2 (mapping section only when version >= 413); topicSysFlag = 0;
/// - else JSON: version < 37 => bare TopicConfigSerializeWrapper (filter_servers None), else
///   RegisterBrokerBody. Missing TopicConfig numbers take Java's defaults (16, 16, 6, 0); a missing
///   topicName takes the map key.
///
/// A negative version is an error (Java's `value2Version` throws). More than max_topics topics
/// (or mapping entries) is an error.
pub fn decode_register_body(
    body: &[u8],
    compressed: bool,
    version: i32,
    limits: &BodyLimits,
) -> Result<RegisterBody, ModelError> {
    if version < 0 {
        return err(format!("invalid version {version}"));
    }
    match body.first() {
        None => Ok(RegisterBody::default()),
        Some(&first) if compressed || first == 0x78 => decode_compressed(body, version, limits),
        Some(_) => decode_json_body(body, version, limits),
    }
}

fn decode_json_body(
    body: &[u8],
    version: i32,
    limits: &BodyLimits,
) -> Result<RegisterBody, ModelError> {
    let doc = json::parse_borrowed(body, &limits.json)?;
    let root = doc.root();
    as_object(root, "RegisterBrokerBody")?;
    let (wrapper, filter_servers) = if version < V3_0_11 {
        (Some(root), None)
    } else {
        let [filter_list, wrapper] =
            root.get_many(["filterServerList", "topicConfigSerializeWrapper"]);
        let filter_servers = match present(filter_list) {
            Some(list) => Some(string_list(list, "filterServerList")?),
            None => None,
        };
        (present(wrapper), filter_servers)
    };
    let mut decoded = RegisterBody {
        filter_servers,
        ..RegisterBody::default()
    };
    let Some(wrapper) = wrapper else {
        return Ok(decoded);
    };
    as_object(wrapper, "topicConfigSerializeWrapper")?;
    let [data_version, table, mappings] = wrapper.get_many([
        "dataVersion",
        "topicConfigTable",
        "topicQueueMappingInfoMap",
    ]);
    if let Some(dv) = present(data_version) {
        decoded.data_version = DataVersion::from_ref(dv)?;
    }
    if let Some(table) = present(table) {
        let entries = as_object(table, "topicConfigTable")?;
        if entries.len() > limits.max_topics {
            return err(format!(
                "too many topics ({} > {})",
                entries.len(),
                limits.max_topics
            ));
        }
        let mut topics = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            topics.push((key.to_owned(), topic_config_from_ref(key, value)?));
        }
        decoded.topics = dedup_last_wins(topics);
    }
    if let Some(map) = present(mappings) {
        decoded.mappings = mappings_from_ref(map, limits.max_topics)?;
    }
    Ok(decoded)
}

fn topic_config_from_ref(key: &str, v: ValueRef<'_>) -> Result<TopicConfig, ModelError> {
    const WHAT: &str = "TopicConfig";
    if v.is_null() {
        return err(format!("null TopicConfig for {key}"));
    }
    as_object(v, WHAT)?;
    let [topic_name, read, write, perm, sys_flag] = v.get_many([
        "topicName",
        "readQueueNums",
        "writeQueueNums",
        "perm",
        "topicSysFlag",
    ]);
    Ok(TopicConfig {
        topic_name: string_field(topic_name).unwrap_or_else(|| key.to_owned()),
        read_queue_nums: int_field(read, DEFAULT_QUEUE_NUMS, WHAT, "readQueueNums")?,
        write_queue_nums: int_field(write, DEFAULT_QUEUE_NUMS, WHAT, "writeQueueNums")?,
        perm: int_field(perm, DEFAULT_PERM, WHAT, "perm")?,
        topic_sys_flag: int_field(sys_flag, 0, WHAT, "topicSysFlag")?,
    })
}

/// Reads the int32-BE length-prefixed parts of an inflated body; every prefix is checked
/// against what is left.
struct PartReader<'a> {
    rest: &'a [u8],
}

impl<'a> PartReader<'a> {
    fn read_i32(&mut self, what: &str) -> Result<i32, ModelError> {
        match self.rest {
            [a, b, c, d, rest @ ..] => {
                self.rest = rest;
                Ok(i32::from_be_bytes([*a, *b, *c, *d]))
            }
            _ => err(format!("compressed body truncated at {what}")),
        }
    }

    /// A count that must be non-negative, within `max` and plausible for the bytes left
    /// (each counted item needs at least its 4-byte length prefix).
    fn read_count(&mut self, what: &str, max: usize) -> Result<usize, ModelError> {
        let n = self.read_i32(what)?;
        let n = match usize::try_from(n) {
            Ok(n) => n,
            Err(_) => return err(format!("negative {what} in compressed body")),
        };
        if n > max {
            return err(format!(
                "too many entries in compressed body ({what} {n} > {max})"
            ));
        }
        if n > self.rest.len() / 4 {
            return err(format!("compressed body truncated ({what} {n})"));
        }
        Ok(n)
    }

    fn read_part(&mut self, what: &str) -> Result<&'a [u8], ModelError> {
        let len = self.read_i32(what)?;
        let len = match usize::try_from(len) {
            Ok(len) => len,
            Err(_) => return err(format!("negative {what} length in compressed body")),
        };
        if len > self.rest.len() {
            return err(format!("compressed body truncated in {what}"));
        }
        let (part, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(part)
    }
}

fn decode_compressed(
    body: &[u8],
    version: i32,
    limits: &BodyLimits,
) -> Result<RegisterBody, ModelError> {
    // The limited inflater grows its buffer step by step and stops at the limit, so memory is
    // bounded by min(actual output, max_inflated_len) whatever the stream claims.
    let inflated =
        miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(body, limits.max_inflated_len)
            .map_err(|e| match e.status {
                miniz_oxide::inflate::TINFLStatus::HasMoreOutput => ModelError(format!(
                    "compressed body inflates beyond {} bytes",
                    limits.max_inflated_len
                )),
                status => ModelError(format!("bad zlib body: {status:?}")),
            })?;
    let mut reader = PartReader { rest: &inflated };

    let dv_json = reader.read_part("dataVersion")?;
    let data_version = DataVersion::from_ref(json::parse_borrowed(dv_json, &limits.json)?.root())?;

    let topic_count = reader.read_count("topic count", limits.max_topics)?;
    let mut topics = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        let line = reader.read_part("TopicConfig")?;
        let config = parse_topic_config_line(&String::from_utf8_lossy(line))?;
        topics.push((config.topic_name.clone(), config));
    }

    let filter_json = reader.read_part("filterServerList")?;
    // Java ignores a filter list it cannot parse and keeps an empty one.
    let filter_servers = match json::parse_borrowed(filter_json, &limits.json) {
        Ok(doc) if doc.root().is_null() => None,
        Ok(doc) => Some(string_list(doc.root(), "filterServerList").unwrap_or_default()),
        Err(_) => Some(Vec::new()),
    };

    let mut mappings = Vec::new();
    if version >= V5_0_0 {
        let count = reader.read_count("mapping count", limits.max_topics)?;
        mappings.reserve(count);
        for _ in 0..count {
            let part = reader.read_part("TopicQueueMappingInfo")?;
            let info = MappingInfo::from_ref(json::parse_borrowed(part, &limits.json)?.root())?;
            mappings.push((info.topic.clone(), info));
        }
    }
    Ok(RegisterBody {
        data_version,
        topics: dedup_last_wins(topics),
        filter_servers,
        mappings: dedup_last_wins(mappings),
    })
}

/// `TopicConfig.decode`: `<name> <read> <write> <perm> <filterType>[ <attributes json>]`.
/// Split on single spaces as Java's `String.split(" ")` does (trailing empty tokens dropped).
fn parse_topic_config_line(line: &str) -> Result<TopicConfig, ModelError> {
    let mut tokens: Vec<&str> = line.split(' ').collect();
    while tokens.last() == Some(&"") {
        tokens.pop();
    }
    let [name, read, write, perm, filter_type, ..] = tokens.as_slice() else {
        return err(format!("bad TopicConfig line {line:?}"));
    };
    let int = |s: &str| -> Result<i32, ModelError> {
        s.parse::<i32>()
            .or_else(|_| err(format!("bad number {s:?} in TopicConfig line {line:?}")))
    };
    if *filter_type != "SINGLE_TAG" && *filter_type != "MULTI_TAG" {
        return err(format!("bad topicFilterType {filter_type:?}"));
    }
    Ok(TopicConfig {
        topic_name: (*name).to_owned(),
        read_queue_nums: int(read)?,
        write_queue_nums: int(write)?,
        perm: int(perm)?,
        topic_sys_flag: 0,
    })
}

/// The 5.x JSON body (§4.1): fastjson alphabetical, legacy dialect (currIdMap keys bare).
pub fn encode_register_body_json(body: &RegisterBody, out: &mut Vec<u8>) {
    let mut root = Seq::object(out);
    let filter_servers = body.filter_servers.iter().flatten().map(String::as_str);
    write_str_array(
        root.field("filterServerList"),
        filter_servers,
        Dialect::Legacy,
    );
    let mut wrapper = Seq::object(root.field("topicConfigSerializeWrapper"));
    body.data_version.encode(wrapper.field("dataVersion"));
    let mapping_version = DataVersion {
        timestamp: body.data_version.timestamp,
        ..DataVersion::default()
    };
    mapping_version.encode(wrapper.field("mappingDataVersion"));
    let mut table = Seq::object(wrapper.field("topicConfigTable"));
    for (key, tc) in &body.topics {
        encode_topic_config(tc, table.key(key));
    }
    table.end();
    Seq::object(wrapper.field("topicQueueMappingDetailMap")).end();
    let mut mappings = Seq::object(wrapper.field("topicQueueMappingInfoMap"));
    for (key, info) in &body.mappings {
        info.encode(mappings.key(key), Dialect::Legacy);
    }
    mappings.end();
    wrapper.end();
    root.end();
}

/// A TopicConfig as a broker's fastjson writes it: every field, alphabetical.
fn encode_topic_config(tc: &TopicConfig, out: &mut Vec<u8>) {
    let mut o = Seq::object(out);
    Seq::object(o.field("attributes")).end();
    json::write_bool(o.field("order"), false);
    json::write_i64(o.field("perm"), i64::from(tc.perm));
    json::write_i64(o.field("readQueueNums"), i64::from(tc.read_queue_nums));
    json::write_str(o.field("topicFilterType"), "SINGLE_TAG");
    json::write_str(o.field("topicName"), &tc.topic_name);
    json::write_i64(o.field("topicSysFlag"), i64::from(tc.topic_sys_flag));
    json::write_i64(o.field("writeQueueNums"), i64::from(tc.write_queue_nums));
    o.end();
}

fn push_part(out: &mut Vec<u8>, part: &[u8]) {
    // Parts are built by us from in-memory data; a part over 2 GiB cannot be represented and
    // is clamped rather than wrapped (the receiver then reports truncation).
    let len = i32::try_from(part.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(part);
}

fn push_count(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&i32::try_from(n).unwrap_or(i32::MAX).to_be_bytes());
}

/// The zlib-compressed binary shape (§4.2) a broker of `version` sends: mapping section only
/// from 413 (V5_0_0), which is also when TopicConfig lines gain the attributes token.
pub fn encode_register_body_compressed(body: &RegisterBody, version: i32) -> Vec<u8> {
    let mut plain = Vec::with_capacity(64 + body.topics.len() * 48);
    let mut part = Vec::with_capacity(128);

    body.data_version.encode(&mut part);
    push_part(&mut plain, &part);

    push_count(&mut plain, body.topics.len());
    for (_, tc) in &body.topics {
        part.clear();
        part.extend_from_slice(tc.topic_name.as_bytes());
        for n in [tc.read_queue_nums, tc.write_queue_nums, tc.perm] {
            part.push(b' ');
            json::write_i64(&mut part, i64::from(n));
        }
        part.extend_from_slice(b" SINGLE_TAG");
        if version >= V5_0_0 {
            part.extend_from_slice(b" {}");
        }
        push_part(&mut plain, &part);
    }

    part.clear();
    write_str_array(
        &mut part,
        body.filter_servers.iter().flatten().map(String::as_str),
        Dialect::Legacy,
    );
    push_part(&mut plain, &part);

    if version >= V5_0_0 {
        push_count(&mut plain, body.mappings.len());
        for (_, info) in &body.mappings {
            part.clear();
            info.encode(&mut part, Dialect::Legacy);
            push_part(&mut plain, &part);
        }
    }
    // Level 9 = Deflater.BEST_COMPRESSION; the zlib wrapper gives Java's `78 DA` header.
    miniz_oxide::deflate::compress_to_vec_zlib(&plain, 9)
}

// ---------------------------------------------------------------------------------------------
// TopicRouteData, BrokerData, QueueData
// ---------------------------------------------------------------------------------------------

/// BrokerData encoding shared by route, cluster info and member group:
/// brokerAddrs, brokerName, cluster, enableActingMaster, zoneName?.
fn encode_broker_data(b: &BrokerData, dialect: Dialect, out: &mut Vec<u8>) {
    let mut o = Seq::object(out);
    write_broker_addrs(o.field("brokerAddrs"), &b.broker_addrs, dialect);
    write_string(o.field("brokerName"), &b.broker_name, dialect);
    write_string(o.field("cluster"), &b.cluster, dialect);
    json::write_bool(o.field("enableActingMaster"), b.enable_acting_master);
    if let Some(zone) = &b.zone_name {
        write_string(o.field("zoneName"), zone, dialect);
    }
    o.end();
}

fn write_broker_addrs(out: &mut Vec<u8>, addrs: &BTreeMap<i64, String>, dialect: Dialect) {
    let mut map = Seq::object(out);
    for (id, addr) in addrs {
        write_string(num_entry(&mut map, *id, dialect), addr, dialect);
    }
    map.end();
}

fn encode_queue_data(q: &QueueData, dialect: Dialect, out: &mut Vec<u8>) {
    let mut o = Seq::object(out);
    write_string(o.field("brokerName"), &q.broker_name, dialect);
    json::write_i64(o.field("perm"), i64::from(q.perm));
    json::write_i64(o.field("readQueueNums"), i64::from(q.read_queue_nums));
    json::write_i64(o.field("topicSysFlag"), i64::from(q.topic_sys_flag));
    json::write_i64(o.field("writeQueueNums"), i64::from(q.write_queue_nums));
    o.end();
}

fn broker_data_from_ref(v: ValueRef<'_>) -> Result<BrokerData, ModelError> {
    const WHAT: &str = "BrokerData";
    as_object(v, WHAT)?;
    let [addrs, cluster, broker_name, zone_name, enable_acting_master] = v.get_many([
        "brokerAddrs",
        "cluster",
        "brokerName",
        "zoneName",
        "enableActingMaster",
    ]);
    let mut broker_addrs = BTreeMap::new();
    if let Some(addrs) = present(addrs) {
        for (key, addr) in as_object(addrs, "brokerAddrs")? {
            let id: i64 = match key.trim().parse() {
                Ok(id) => id,
                Err(_) => return err(format!("brokerAddrs key {key:?} is not a long")),
            };
            if addr.is_null() {
                continue;
            }
            let addr = addr.to_text();
            broker_addrs.insert(id, addr);
        }
    }
    Ok(BrokerData {
        cluster: string_field(cluster).unwrap_or_default(),
        broker_name: string_field(broker_name).unwrap_or_default(),
        broker_addrs,
        zone_name: string_field(zone_name),
        enable_acting_master: bool_field(enable_acting_master, WHAT, "enableActingMaster")?,
    })
}

fn queue_data_from_ref(v: ValueRef<'_>) -> Result<QueueData, ModelError> {
    const WHAT: &str = "QueueData";
    as_object(v, WHAT)?;
    let [sys_flag, syn_flag, broker_name, read, write, perm] = v.get_many([
        "topicSysFlag",
        "topicSynFlag",
        "brokerName",
        "readQueueNums",
        "writeQueueNums",
        "perm",
    ]);
    // Before 4.9.0 the flag was spelled topicSynFlag.
    let topic_sys_flag = match present(sys_flag) {
        Some(_) => int_field(sys_flag, 0, WHAT, "topicSysFlag")?,
        None => int_field(syn_flag, 0, WHAT, "topicSynFlag")?,
    };
    Ok(QueueData {
        broker_name: string_field(broker_name).unwrap_or_default(),
        read_queue_nums: int_field(read, 0, WHAT, "readQueueNums")?,
        write_queue_nums: int_field(write, 0, WHAT, "writeQueueNums")?,
        perm: int_field(perm, 0, WHAT, "perm")?,
        topic_sys_flag,
    })
}

fn array_of<T>(
    v: Option<ValueRef<'_>>,
    what: &str,
    item: impl Fn(ValueRef<'_>) -> Result<T, ModelError>,
) -> Result<Vec<T>, ModelError> {
    let Some(v) = present(v) else {
        return Ok(Vec::new());
    };
    let Some(items) = v.items() else {
        return err(format!("{what} is not a JSON array"));
    };
    items.filter(|i| !i.is_null()).map(item).collect()
}

impl TopicRouteData {
    /// §6.2 exactly: compact, bean fields alphabetical (brokerDatas, filterServerTable,
    /// orderTopicConf?, queueDatas, topicQueueMappingByBroker?), null fields omitted.
    /// Standard: every map key quoted, maps sorted by key, strings with write_str_browser.
    /// Legacy: numeric map keys bare (`{0:"a"}`), strings with write_str.
    pub fn encode(&self, dialect: Dialect, out: &mut Vec<u8>) {
        let mut o = Seq::object(out);
        let mut brokers = Seq::array(o.field("brokerDatas"));
        for b in &self.broker_datas {
            encode_broker_data(b, dialect, brokers.item());
        }
        brokers.end();
        let mut filters = Seq::object(o.field("filterServerTable"));
        for (addr, servers) in &self.filter_server_table {
            let out = str_entry(&mut filters, addr, dialect);
            write_str_array(out, servers.iter().map(String::as_str), dialect);
        }
        filters.end();
        if let Some(conf) = &self.order_topic_conf {
            write_string(o.field("orderTopicConf"), conf, dialect);
        }
        let mut queues = Seq::array(o.field("queueDatas"));
        for q in &self.queue_datas {
            encode_queue_data(q, dialect, queues.item());
        }
        queues.end();
        if let Some(mappings) = &self.topic_queue_mapping_by_broker {
            let mut entries: Vec<&(String, MappingInfo)> = mappings.iter().collect();
            if dialect == Dialect::Standard {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            let mut map = Seq::object(o.field("topicQueueMappingByBroker"));
            for (broker_name, info) in entries {
                info.encode(str_entry(&mut map, broker_name, dialect), dialect);
            }
            map.end();
        }
        o.end();
    }

    /// Parses either dialect. Tolerates missing keys, `topicSynFlag`, unknown fields.
    pub fn decode(body: &[u8]) -> Result<TopicRouteData, ModelError> {
        let doc = json::parse_borrowed(body, &json::Limits::default())?;
        let v = doc.root();
        as_object(v, "TopicRouteData")?;
        let [filter_table, mapping_by_broker, order_topic_conf, queue_datas, broker_datas] = v
            .get_many([
                "filterServerTable",
                "topicQueueMappingByBroker",
                "orderTopicConf",
                "queueDatas",
                "brokerDatas",
            ]);
        let mut filter_server_table = BTreeMap::new();
        if let Some(table) = present(filter_table) {
            for (addr, servers) in as_object(table, "filterServerTable")? {
                if servers.is_null() {
                    continue;
                }
                filter_server_table.insert(
                    addr.to_owned(),
                    string_list(servers, "filterServerTable value")?,
                );
            }
        }
        let topic_queue_mapping_by_broker = match present(mapping_by_broker) {
            Some(map) => Some(mappings_from_ref(map, usize::MAX)?),
            None => None,
        };
        Ok(TopicRouteData {
            order_topic_conf: string_field(order_topic_conf),
            queue_datas: array_of(queue_datas, "queueDatas", queue_data_from_ref)?,
            broker_datas: array_of(broker_datas, "brokerDatas", broker_data_from_ref)?,
            filter_server_table,
            topic_queue_mapping_by_broker,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// ClusterInfo, TopicList, KVTable, member group
// ---------------------------------------------------------------------------------------------

impl ClusterInfo {
    /// `{"brokerAddrTable":{name:BrokerData},"clusterAddrTable":{cluster:[names]}}`, legacy.
    pub fn encode(&self, out: &mut Vec<u8>) {
        const D: Dialect = Dialect::Legacy;
        let mut o = Seq::object(out);
        let mut brokers = Seq::object(o.field("brokerAddrTable"));
        for (name, broker) in &self.broker_addr_table {
            encode_broker_data(broker, D, str_entry(&mut brokers, name, D));
        }
        brokers.end();
        let mut clusters = Seq::object(o.field("clusterAddrTable"));
        for (cluster, names) in &self.cluster_addr_table {
            let out = str_entry(&mut clusters, cluster, D);
            write_str_array(out, names.iter().map(String::as_str), D);
        }
        clusters.end();
        o.end();
    }

    pub fn decode(body: &[u8]) -> Result<ClusterInfo, ModelError> {
        let doc = json::parse_borrowed(body, &json::Limits::default())?;
        let v = doc.root();
        as_object(v, "ClusterInfo")?;
        let [broker_table, cluster_table] = v.get_many(["brokerAddrTable", "clusterAddrTable"]);
        let mut info = ClusterInfo::default();
        if let Some(table) = present(broker_table) {
            for (name, broker) in as_object(table, "brokerAddrTable")? {
                if broker.is_null() {
                    continue;
                }
                info.broker_addr_table
                    .insert(name.to_owned(), broker_data_from_ref(broker)?);
            }
        }
        if let Some(table) = present(cluster_table) {
            for (cluster, names) in as_object(table, "clusterAddrTable")? {
                if names.is_null() {
                    continue;
                }
                info.cluster_addr_table.insert(
                    cluster.to_owned(),
                    string_list(names, "clusterAddrTable value")?,
                );
            }
        }
        Ok(info)
    }
}

/// TopicList `{"brokerAddr":"..."?, "topicList":[...]}` (§6.4).
pub fn encode_topic_list<'a>(
    topics: impl Iterator<Item = &'a str>,
    broker_addr: Option<&str>,
    out: &mut Vec<u8>,
) {
    let mut o = Seq::object(out);
    if let Some(addr) = broker_addr {
        json::write_str(o.field("brokerAddr"), addr);
    }
    write_str_array(o.field("topicList"), topics, Dialect::Legacy);
    o.end();
}

pub fn decode_topic_list(body: &[u8]) -> Result<(Vec<String>, Option<String>), ModelError> {
    let doc = json::parse_borrowed(body, &json::Limits::default())?;
    let v = doc.root();
    as_object(v, "TopicList")?;
    let [topic_list, broker_addr] = v.get_many(["topicList", "brokerAddr"]);
    let topics = match present(topic_list) {
        Some(list) => string_list(list, "topicList")?,
        None => Vec::new(),
    };
    Ok((topics, string_field(broker_addr)))
}

/// KVTable `{"table":{k:v}}` (§6.4).
pub fn encode_kv_table<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>, out: &mut Vec<u8>) {
    let mut o = Seq::object(out);
    let mut table = Seq::object(o.field("table"));
    for (k, v) in entries {
        json::write_str(table.key(k), v);
    }
    table.end();
    o.end();
}

pub fn decode_kv_table(body: &[u8]) -> Result<Vec<(String, String)>, ModelError> {
    let doc = json::parse_borrowed(body, &json::Limits::default())?;
    let v = doc.root();
    as_object(v, "KVTable")?;
    let Some(table) = member(v, "table") else {
        return Ok(Vec::new());
    };
    let entries = as_object(table, "table")?
        .filter(|(_, value)| !value.is_null())
        .map(|(k, value)| (k.to_owned(), value.to_text()))
        .collect();
    Ok(dedup_last_wins(entries))
}

/// GetBrokerMemberGroupResponseBody (901), legacy:
/// `{"brokerMemberGroup":{"brokerAddrs":{0:"a"},"brokerName":"..","cluster":".."}}`.
pub fn encode_member_group(
    cluster: &str,
    broker_name: &str,
    addrs: &BTreeMap<i64, String>,
    out: &mut Vec<u8>,
) {
    let mut o = Seq::object(out);
    let mut group = Seq::object(o.field("brokerMemberGroup"));
    write_broker_addrs(group.field("brokerAddrs"), addrs, Dialect::Legacy);
    json::write_str(group.field("brokerName"), broker_name);
    json::write_str(group.field("cluster"), cluster);
    group.end();
    o.end();
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::checksum::crc32;
    use crate::test_support::fixture;

    fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes).expect("encoder output is UTF-8")
    }

    fn topic(name: &str, read: i32, write: i32, perm: i32, flag: i32) -> (String, TopicConfig) {
        (
            name.to_owned(),
            TopicConfig {
                topic_name: name.to_owned(),
                read_queue_nums: read,
                write_queue_nums: write,
                perm,
                topic_sys_flag: flag,
            },
        )
    }

    fn static_mapping() -> (String, MappingInfo) {
        (
            "StaticT".to_owned(),
            MappingInfo {
                topic: "StaticT".to_owned(),
                scope: "__global__".to_owned(),
                total_queues: 8,
                bname: "broker-a".to_owned(),
                epoch: 1_700_000_000_000,
                dirty: false,
                curr_id_map: vec![(0, 0), (1, 1)],
            },
        )
    }

    fn broker(name: &str, addrs: &[(i64, &str)]) -> BrokerData {
        BrokerData {
            cluster: "DefaultCluster".to_owned(),
            broker_name: name.to_owned(),
            broker_addrs: addrs.iter().map(|(id, a)| (*id, (*a).to_owned())).collect(),
            zone_name: None,
            enable_acting_master: false,
        }
    }

    const BODY_5X: &str = concat!(
        r#"{"filterServerList":["10.0.0.9:7000"],"topicConfigSerializeWrapper":{"#,
        r#""dataVersion":{"counter":12,"stateVersion":3,"timestamp":1700000000000},"#,
        r#""mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},"#,
        r#""topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"#,
        r#""topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4},"#,
        r#""StaticT":{"attributes":{},"order":false,"perm":6,"readQueueNums":8,"#,
        r#""topicFilterType":"SINGLE_TAG","topicName":"StaticT","topicSysFlag":1,"writeQueueNums":8}},"#,
        r#""topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{"StaticT":{"bname":"broker-a","#,
        r#""currIdMap":{0:0,1:1},"dirty":false,"epoch":1700000000000,"scope":"__global__","#,
        r#""topic":"StaticT","totalQueues":8}}}}"#
    );

    fn body_5x_expected() -> RegisterBody {
        RegisterBody {
            data_version: DataVersion {
                counter: 12,
                state_version: 3,
                timestamp: 1_700_000_000_000,
            },
            topics: vec![topic("TopicTest", 4, 4, 6, 0), topic("StaticT", 8, 8, 6, 1)],
            filter_servers: Some(vec!["10.0.0.9:7000".to_owned()]),
            mappings: vec![static_mapping()],
        }
    }

    #[test]
    fn real_4x_registration_body_decodes_with_its_crc() {
        let body = fixture("third_party/register_broker_103_body_v4.json");
        assert_eq!(crc32(&body) & 0x7FFF_FFFF, 1_794_280_071);
        let decoded = decode_register_body(&body, false, 373, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.data_version,
            DataVersion {
                counter: 293,
                state_version: 0,
                timestamp: 1_645_882_625_002
            }
        );
        assert_eq!(decoded.topics.len(), 16);
        assert_eq!(
            decoded.topics[0],
            topic("SCHEDULE_TOPIC_XXXX", 18, 18, 6, 0)
        );
        let find = |name: &str| {
            decoded
                .topics
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, t)| t.clone())
        };
        assert_eq!(
            find("BenchmarkTest"),
            Some(topic("BenchmarkTest", 1024, 1024, 6, 0).1)
        );
        assert_eq!(
            find("DefaultCluster"),
            Some(topic("DefaultCluster", 16, 16, 7, 0).1)
        );
        assert_eq!(
            find("%DLQ%CID_JODIE"),
            Some(topic("%DLQ%CID_JODIE", 1, 1, 6, 0).1)
        );
        assert!(decoded.topics.iter().all(|(k, t)| *k == t.topic_name));
        assert_eq!(decoded.filter_servers, Some(vec![]));
        assert!(decoded.mappings.is_empty());
    }

    #[test]
    fn body_5x_with_bare_curr_id_map_keys_decodes_mapping_info() {
        let decoded =
            decode_register_body(BODY_5X.as_bytes(), false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded, body_5x_expected());
    }

    #[test]
    fn json_encoder_reproduces_the_5x_body_byte_for_byte() {
        let mut out = Vec::new();
        encode_register_body_json(&body_5x_expected(), &mut out);
        assert_eq!(text(&out), BODY_5X);
    }

    #[test]
    fn old_versions_send_a_bare_wrapper_without_filter_servers() {
        let body =
            br#"{"dataVersion":{"counter":5,"timestamp":99},"topicConfigTable":{"T":{"perm":2}}}"#;
        let decoded = decode_register_body(body, false, 0, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.data_version,
            DataVersion {
                counter: 5,
                state_version: 0,
                timestamp: 99
            }
        );
        assert_eq!(decoded.topics, vec![topic("T", 16, 16, 2, 0)]);
        assert_eq!(decoded.filter_servers, None);
        // The same bytes from a new broker lack the wrapper key: nothing registered.
        let decoded = decode_register_body(body, false, 37, &BodyLimits::default()).unwrap();
        assert!(decoded.topics.is_empty());
    }

    #[test]
    fn empty_body_is_an_empty_registration() {
        let decoded = decode_register_body(b"", false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded, RegisterBody::default());
        let decoded = decode_register_body(b"", true, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded, RegisterBody::default());
    }

    #[test]
    fn negative_version_is_rejected() {
        assert!(
            decode_register_body(BODY_5X.as_bytes(), false, -1, &BodyLimits::default()).is_err()
        );
    }

    #[test]
    fn missing_topic_name_and_numbers_take_java_defaults() {
        let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"K":{},"L":{"topicName":"Real","topicSysFlag":"2"}}}}"#;
        let decoded = decode_register_body(body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded.topics[0], topic("K", 16, 16, 6, 0));
        assert_eq!(decoded.topics[1].0, "L");
        assert_eq!(decoded.topics[1].1.topic_name, "Real");
        assert_eq!(decoded.topics[1].1.topic_sys_flag, 2);
        assert_eq!(decoded.filter_servers, None);
    }

    #[test]
    fn register_body_in_the_lenient_dialect_decodes() {
        // Single quotes, bare keys, escapes in keys and values, numbers as strings, a
        // non-string topicName, stray commas: all as fastjson reads them.
        let body = br#"{filterServerList:['a\/b',7],'topicConfigSerializeWrapper':{"dataVersion":{counter:"5",'timestamp':6,},"topicConfigTable":{"T\u00e9":{'perm':"4",readQueueNums:2,,"writeQueueNums":3},"N":{"topicName":42},},"topicQueueMappingInfoMap":{'S':{bname:"b\u002d1",currIdMap:{ 3 : 1 ,"4":"2"},"dirty":"TRUE"}}}}"#;
        let decoded = decode_register_body(body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.filter_servers,
            Some(vec!["a/b".to_owned(), "7".to_owned()])
        );
        assert_eq!(
            decoded.data_version,
            DataVersion {
                counter: 5,
                state_version: 0,
                timestamp: 6
            }
        );
        assert_eq!(
            decoded.topics,
            vec![
                topic("Té", 2, 3, 4, 0),
                ("N".to_owned(), topic("42", 16, 16, 6, 0).1)
            ]
        );
        let (key, info) = &decoded.mappings[0];
        assert_eq!(key, "S");
        assert_eq!(info.bname, "b-1");
        assert_eq!(info.curr_id_map, vec![(3, 1), (4, 2)]);
        assert!(info.dirty);
        assert_eq!(info.scope, GLOBAL_SCOPE);
    }

    #[test]
    fn repeated_fields_take_the_last_value_and_null_means_absent() {
        // As a Java map would see the object: only the last "perm" counts, so an earlier bad
        // value is not an error; a null field takes the default.
        let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":"rw","perm":4,"readQueueNums":null}},"topicConfigTable":{"B":{"perm":2}}}}"#;
        let decoded = decode_register_body(body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded.topics, vec![topic("B", 16, 16, 2, 0)]);
        let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":"rw","perm":4,"readQueueNums":null}}}}"#;
        let decoded = decode_register_body(body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded.topics, vec![topic("A", 16, 16, 4, 0)]);
        let body =
            br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":4,"perm":"rw"}}}}"#;
        assert!(decode_register_body(body, false, 479, &BodyLimits::default()).is_err());
    }

    #[test]
    fn thousand_topic_json_body_round_trips() {
        let body = thousand_topic_body();
        let mut json_body = Vec::new();
        encode_register_body_json(&body, &mut json_body);
        let decoded = decode_register_body(&json_body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded, body);
    }

    #[test]
    fn duplicate_topic_keys_keep_the_last_value() {
        let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":2},"B":{},"A":{"perm":4}}}}"#;
        let decoded = decode_register_body(body, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.topics,
            vec![topic("A", 16, 16, 4, 0), topic("B", 16, 16, 6, 0)]
        );
    }

    #[test]
    fn too_many_topics_is_an_error() {
        let limits = BodyLimits {
            max_topics: 1,
            ..BodyLimits::default()
        };
        assert!(decode_register_body(BODY_5X.as_bytes(), false, 479, &limits).is_err());
        let compressed = encode_register_body_compressed(&body_5x_expected(), 479);
        assert!(decode_register_body(&compressed, true, 479, &limits).is_err());
    }

    #[test]
    fn bad_topic_numbers_are_errors() {
        let body = br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":"rw"}}}}"#;
        assert!(decode_register_body(body, false, 479, &BodyLimits::default()).is_err());
        let body =
            br#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":4294967296}}}}"#;
        assert!(decode_register_body(body, false, 479, &BodyLimits::default()).is_err());
        assert!(decode_register_body(b"{not json", false, 479, &BodyLimits::default()).is_err());
    }

    #[test]
    fn compressed_round_trip_for_a_4x_broker_drops_mappings_and_sys_flag() {
        let body = body_5x_expected();
        let compressed = encode_register_body_compressed(&body, 400);
        assert_eq!(&compressed[..2], &[0x78, 0xDA]);
        let decoded = decode_register_body(&compressed, true, 400, &BodyLimits::default()).unwrap();
        assert_eq!(decoded.data_version, body.data_version);
        assert_eq!(
            decoded.topics,
            vec![topic("TopicTest", 4, 4, 6, 0), topic("StaticT", 8, 8, 6, 0)]
        );
        assert_eq!(decoded.filter_servers, body.filter_servers);
        assert!(decoded.mappings.is_empty());
    }

    #[test]
    fn compressed_round_trip_for_a_5x_broker_keeps_mappings() {
        let body = body_5x_expected();
        let compressed = encode_register_body_compressed(&body, 413);
        let decoded = decode_register_body(&compressed, true, 413, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.topics,
            vec![topic("TopicTest", 4, 4, 6, 0), topic("StaticT", 8, 8, 6, 0)]
        );
        assert_eq!(decoded.mappings, body.mappings);
        assert_eq!(decoded.filter_servers, body.filter_servers);
    }

    #[test]
    fn zlib_body_flagged_uncompressed_is_sniffed() {
        let compressed = encode_register_body_compressed(&body_5x_expected(), 479);
        let decoded =
            decode_register_body(&compressed, false, 479, &BodyLimits::default()).unwrap();
        assert_eq!(decoded.mappings, body_5x_expected().mappings);
        assert_eq!(decoded.topics.len(), 2);
    }

    #[test]
    fn truncated_or_garbage_compressed_bodies_are_errors() {
        let compressed = encode_register_body_compressed(&body_5x_expected(), 479);
        for cut in [1, 2, 10, compressed.len() / 2, compressed.len() - 1] {
            assert!(
                decode_register_body(&compressed[..cut], true, 479, &BodyLimits::default())
                    .is_err(),
                "cut at {cut}"
            );
        }
        assert!(decode_register_body(
            b"\x78\xDAgarbage-garbage",
            false,
            479,
            &BodyLimits::default()
        )
        .is_err());
        assert!(
            decode_register_body(BODY_5X.as_bytes(), true, 479, &BodyLimits::default()).is_err()
        );
    }

    fn zlib(plain: &[u8]) -> Vec<u8> {
        miniz_oxide::deflate::compress_to_vec_zlib(plain, 6)
    }

    fn part(out: &mut Vec<u8>, bytes: &[u8]) {
        out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        out.extend_from_slice(bytes);
    }

    #[test]
    fn hostile_length_prefixes_are_errors_not_allocations() {
        let dv = br#"{"counter":1,"timestamp":2}"#;
        // Topic count far beyond the bytes that follow.
        let mut plain = Vec::new();
        part(&mut plain, dv);
        plain.extend_from_slice(&50_000i32.to_be_bytes());
        assert!(decode_register_body(&zlib(&plain), true, 479, &BodyLimits::default()).is_err());
        // Negative part length.
        let mut plain = Vec::new();
        plain.extend_from_slice(&(-5i32).to_be_bytes());
        assert!(decode_register_body(&zlib(&plain), true, 479, &BodyLimits::default()).is_err());
        // Part length beyond the end.
        let mut plain = Vec::new();
        plain.extend_from_slice(&i32::MAX.to_be_bytes());
        plain.extend_from_slice(dv);
        assert!(decode_register_body(&zlib(&plain), true, 479, &BodyLimits::default()).is_err());
        // Negative topic count.
        let mut plain = Vec::new();
        part(&mut plain, dv);
        plain.extend_from_slice(&(-1i32).to_be_bytes());
        assert!(decode_register_body(&zlib(&plain), true, 479, &BodyLimits::default()).is_err());
    }

    #[test]
    fn zip_bomb_stops_at_the_inflate_limit() {
        let bomb = zlib(&vec![0u8; 4 << 20]);
        let limits = BodyLimits {
            max_inflated_len: 1 << 20,
            ..BodyLimits::default()
        };
        let e = decode_register_body(&bomb, true, 479, &limits).unwrap_err();
        assert!(e.0.contains("beyond"), "{e}");
    }

    #[test]
    fn topic_config_lines_follow_java_split_rules() {
        let dv = br#"{"counter":1,"stateVersion":0,"timestamp":2}"#;
        let build = |lines: &[&str], filter: &[u8]| {
            let mut plain = Vec::new();
            part(&mut plain, dv);
            plain.extend_from_slice(&(lines.len() as i32).to_be_bytes());
            for l in lines {
                part(&mut plain, l.as_bytes());
            }
            part(&mut plain, filter);
            zlib(&plain)
        };
        let ok = build(
            &["A 4 4 6 SINGLE_TAG {\"k\":\"v\"}", "B 1 2 7 MULTI_TAG "],
            b"not json",
        );
        let decoded = decode_register_body(&ok, true, 400, &BodyLimits::default()).unwrap();
        assert_eq!(
            decoded.topics,
            vec![topic("A", 4, 4, 6, 0), topic("B", 1, 2, 7, 0)]
        );
        // Java ignores an unparsable filter list and keeps an empty one.
        assert_eq!(decoded.filter_servers, Some(vec![]));
        for bad in [
            "A 4 4 6",
            "A 4  4 6 SINGLE_TAG",
            "A x 4 6 SINGLE_TAG",
            "A 4 4 6 OTHER",
        ] {
            let body = build(&[bad], b"[]");
            assert!(
                decode_register_body(&body, true, 400, &BodyLimits::default()).is_err(),
                "{bad}"
            );
        }
    }

    fn sample_route() -> TopicRouteData {
        TopicRouteData {
            order_topic_conf: None,
            queue_datas: vec![QueueData {
                broker_name: "broker-a".to_owned(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: 6,
                topic_sys_flag: 0,
            }],
            broker_datas: vec![broker(
                "broker-a",
                &[(0, "10.0.0.1:10911"), (1, "10.0.0.2:10911")],
            )],
            filter_server_table: BTreeMap::new(),
            topic_queue_mapping_by_broker: None,
        }
    }

    #[test]
    fn route_encodes_exactly_as_java_in_both_dialects() {
        let route = sample_route();
        let mut out = Vec::new();
        route.encode(Dialect::Standard, &mut out);
        assert_eq!(
            text(&out),
            r#"{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#
        );
        out.clear();
        route.encode(Dialect::Legacy, &mut out);
        assert_eq!(
            text(&out),
            r#"{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#
        );
    }

    #[test]
    fn route_optional_fields_and_standard_escaping() {
        let mut route = sample_route();
        route.order_topic_conf = Some("broker-a:4".to_owned());
        route.broker_datas[0].zone_name = Some("zone/é".to_owned());
        route.broker_datas[0].enable_acting_master = true;
        route
            .filter_server_table
            .insert("10.0.0.1:10911".to_owned(), vec!["f:1".to_owned()]);
        let (_, mut info) = static_mapping();
        info.curr_id_map = vec![(1, 1), (0, 0)];
        info.epoch = 9_007_199_254_740_993;
        route.topic_queue_mapping_by_broker =
            Some(vec![("z".to_owned(), info.clone()), ("a".to_owned(), info)]);
        let mut out = Vec::new();
        route.encode(Dialect::Standard, &mut out);
        let standard = text(&out).to_owned();
        assert!(
            standard.contains(r#""enableActingMaster":true,"zoneName":"zone\/\u00E9"}"#),
            "{standard}"
        );
        assert!(standard.contains(r#""filterServerTable":{"10.0.0.1:10911":["f:1"]},"orderTopicConf":"broker-a:4","queueDatas""#));
        assert!(standard.contains(r#""topicQueueMappingByBroker":{"a":{"bname":"broker-a","currIdMap":{"0":0,"1":1},"dirty":false,"epoch":"9007199254740993","scope":"__global__","topic":"StaticT","totalQueues":8},"z":"#), "{standard}");
        out.clear();
        route.encode(Dialect::Legacy, &mut out);
        let legacy = text(&out);
        assert!(legacy.contains(r#""zoneName":"zone/é"}"#), "{legacy}");
        assert!(legacy.contains(r#""topicQueueMappingByBroker":{"z":{"bname":"broker-a","currIdMap":{1:1,0:0},"dirty":false,"epoch":9007199254740993,"#), "{legacy}");
        // Both dialects read back to the same data (mapping order aside).
        let back = TopicRouteData::decode(legacy.as_bytes()).unwrap();
        assert_eq!(back.broker_datas, route.broker_datas);
        assert_eq!(back.order_topic_conf, route.order_topic_conf);
        assert_eq!(back.filter_server_table, route.filter_server_table);
        let back_std = TopicRouteData::decode(standard.as_bytes()).unwrap();
        assert_eq!(back_std.broker_datas, route.broker_datas);
        assert_eq!(back_std.queue_datas, route.queue_datas);
    }

    #[test]
    fn legacy_route_fixture_decodes() {
        let route =
            TopicRouteData::decode(&fixture("topic_route_data_fastjson_legacy.json")).unwrap();
        assert_eq!(
            route.broker_datas,
            vec![broker("interopBroker", &[(0, "127.0.0.1:10911")])]
        );
        assert_eq!(
            route.queue_datas,
            vec![QueueData {
                broker_name: "interopBroker".to_owned(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: 6,
                topic_sys_flag: 0
            }]
        );
        assert!(route.filter_server_table.is_empty());
        assert_eq!(route.order_topic_conf, None);
        assert_eq!(
            route.topic_queue_mapping_by_broker,
            Some(vec![(
                "interopBroker".to_owned(),
                MappingInfo {
                    topic: "TopicA".to_owned(),
                    scope: "ScopeA".to_owned(),
                    total_queues: 4,
                    bname: "interopBroker".to_owned(),
                    epoch: 1,
                    dirty: false,
                    curr_id_map: vec![(0, 0)],
                }
            )])
        );
    }

    #[test]
    fn old_queue_data_spelling_is_accepted() {
        let route =
            TopicRouteData::decode(br#"{"queueDatas":[{"brokerName":"b","topicSynFlag":3}]}"#)
                .unwrap();
        assert_eq!(route.queue_datas[0].topic_sys_flag, 3);
        assert!(route.broker_datas.is_empty());
        assert_eq!(route.topic_queue_mapping_by_broker, None);
    }

    fn sample_cluster_info() -> ClusterInfo {
        let mut info = ClusterInfo::default();
        info.broker_addr_table.insert(
            "broker-a".to_owned(),
            broker("broker-a", &[(0, "127.0.0.1:10911")]),
        );
        info.cluster_addr_table
            .insert("DefaultCluster".to_owned(), vec!["broker-a".to_owned()]);
        info
    }

    #[test]
    fn cluster_info_encodes_like_the_java_fixture_and_decodes_it() {
        let file = fixture("cluster_info_fastjson_legacy.json");
        // The fixture file ends with a newline that is not part of the body.
        let expected = file.strip_suffix(b"\n").unwrap_or(&file);
        let mut out = Vec::new();
        sample_cluster_info().encode(&mut out);
        assert_eq!(text(&out), text(expected));
        assert_eq!(
            ClusterInfo::decode(expected).unwrap(),
            sample_cluster_info()
        );
    }

    #[test]
    fn data_version_round_trips() {
        let dv = DataVersion {
            counter: 3,
            state_version: 0,
            timestamp: 1_700_000_000_000,
        };
        let mut out = Vec::new();
        dv.encode(&mut out);
        assert_eq!(
            text(&out),
            r#"{"counter":3,"stateVersion":0,"timestamp":1700000000000}"#
        );
        assert_eq!(DataVersion::decode(&out).unwrap(), dv);
        assert_eq!(
            DataVersion::decode(br#"{"timestamp":7,"counter":"2"}"#).unwrap(),
            DataVersion {
                counter: 2,
                state_version: 0,
                timestamp: 7
            }
        );
        assert!(DataVersion::decode(b"[1]").is_err());
    }

    #[test]
    fn kv_table_and_topic_list_shapes() {
        let mut out = Vec::new();
        encode_kv_table(
            [("TopicA", "broker-a:4"), ("B\"", "x")].into_iter(),
            &mut out,
        );
        assert_eq!(text(&out), r#"{"table":{"TopicA":"broker-a:4","B\"":"x"}}"#);
        assert_eq!(
            decode_kv_table(&out).unwrap(),
            vec![
                ("TopicA".to_owned(), "broker-a:4".to_owned()),
                ("B\"".to_owned(), "x".to_owned())
            ]
        );
        out.clear();
        encode_topic_list(["A", "B"].into_iter(), Some("10.0.0.1:10911"), &mut out);
        assert_eq!(
            text(&out),
            r#"{"brokerAddr":"10.0.0.1:10911","topicList":["A","B"]}"#
        );
        assert_eq!(
            decode_topic_list(&out).unwrap(),
            (
                vec!["A".to_owned(), "B".to_owned()],
                Some("10.0.0.1:10911".to_owned())
            )
        );
        out.clear();
        encode_topic_list(std::iter::empty(), None, &mut out);
        assert_eq!(text(&out), r#"{"topicList":[]}"#);
        assert_eq!(decode_topic_list(&out).unwrap(), (vec![], None));
    }

    #[test]
    fn member_group_is_legacy() {
        let addrs: BTreeMap<i64, String> = [(0, "a:10911".to_owned()), (1, "b:10911".to_owned())]
            .into_iter()
            .collect();
        let mut out = Vec::new();
        encode_member_group("DefaultCluster", "broker-a", &addrs, &mut out);
        assert_eq!(
            text(&out),
            r#"{"brokerMemberGroup":{"brokerAddrs":{0:"a:10911",1:"b:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}}"#
        );
    }

    fn thousand_topic_body() -> RegisterBody {
        RegisterBody {
            data_version: DataVersion {
                counter: 1000,
                state_version: 0,
                timestamp: 1_700_000_000_000,
            },
            topics: (0..1000)
                .map(|i| topic(&format!("benchmark-topic-{i:05}"), 8, 8, 6, 0))
                .collect(),
            filter_servers: Some(vec![]),
            mappings: vec![static_mapping()],
        }
    }
}
