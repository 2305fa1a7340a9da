//! Route data types and their body encodings (docs/protocol.md §6), shaped as the Java beans
//! because peers compare bytes (fields alphabetical, nulls omitted, two [`Dialect`]s). Decoders
//! are as lenient as fastjson but check every length, count and number a peer controls.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::remoting::json::{self, Cursor, Field, Item, Members, Seq, ValueRef};

pub use super::register_body::{
    decode_register_body, encode_register_body_compressed, encode_register_body_json, BodyLimits,
    DecodeScratch, RegisterBody, TopicConfig,
};

/// Largest long that BrowserCompatible fastjson writes as a number (2^53 - 1).
const JS_SAFE_LONG: i64 = 9_007_199_254_740_991;
/// `MixAll.METADATA_SCOPE_GLOBAL`, TopicQueueMappingInfo's default scope.
const GLOBAL_SCOPE: &str = "__global__";

/// An error decoding a body; the text is the response remark.
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

pub(super) fn err<T>(msg: impl Into<String>) -> Result<T, ModelError> {
    Err(ModelError(msg.into()))
}

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
    pub broker_addrs: BTreeMap<i64, String>,
    pub zone_name: Option<String>,
    pub enable_acting_master: bool,
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

fn write_number(out: &mut Vec<u8>, v: i64, quoted: bool) {
    let quote: &[u8] = if quoted { b"\"" } else { b"" };
    out.extend_from_slice(quote);
    json::write_i64(out, v);
    out.extend_from_slice(quote);
}

/// Starts a map entry whose key is a Long/Integer: quoted in the standard dialect only.
fn num_entry<'o>(map: &'o mut Seq<'_>, key: i64, dialect: Dialect) -> &'o mut Vec<u8> {
    let out = map.item();
    write_number(out, key, dialect == Dialect::Standard);
    out.push(b':');
    out
}

/// A long bean field value: BrowserCompatible writes longs beyond 2^53 as strings.
fn write_long(out: &mut Vec<u8>, v: i64, dialect: Dialect) {
    let unsafe_in_js = !(-JS_SAFE_LONG..=JS_SAFE_LONG).contains(&v);
    write_number(out, v, dialect == Dialect::Standard && unsafe_in_js);
}

pub(super) fn write_str_array<'a>(
    out: &mut Vec<u8>,
    items: impl Iterator<Item = &'a str>,
    dialect: Dialect,
) {
    let mut array = Seq::array(out);
    for item in items {
        write_string(array.item(), item, dialect);
    }
    array.end();
}

pub(super) fn as_object<'d>(v: ValueRef<'d>, what: &str) -> Result<Members<'d>, ModelError> {
    v.members()
        .ok_or_else(|| ModelError(format!("{what} is not a JSON object")))
}

/// Fails unless the value at `c` is an object (a malformed value fails as bad JSON first).
pub(super) fn expect_object(c: &mut Cursor<'_>, what: &str) -> Result<(), ModelError> {
    if c.peek() == Some(b'{') {
        return Ok(());
    }
    c.skip()?;
    err(format!("{what} is not a JSON object"))
}

pub(super) fn present<F: Field>(v: Option<F>) -> Option<F> {
    v.filter(|v| !v.is_null())
}

/// A bean field read by `get` (absent or null: `default`); `kind` names the type in the error.
fn typed_field<F: Field, T>(
    v: Option<F>,
    default: T,
    (what, key, kind): (&str, &str, &str),
    get: impl FnOnce(&F) -> Option<T>,
) -> Result<T, ModelError> {
    match present(v) {
        None => Ok(default),
        Some(v) => get(&v).ok_or_else(|| ModelError(format!("{what}.{key} is not {kind}"))),
    }
}

fn long_field(v: Option<impl Field>, d: i64, what: &str, key: &str) -> Result<i64, ModelError> {
    typed_field(v, d, (what, key, "a long"), Field::as_i64)
}

pub(super) fn int_field(
    v: Option<impl Field>,
    default: i32,
    what: &str,
    key: &str,
) -> Result<i32, ModelError> {
    typed_field(v, default, (what, key, "an int"), Field::as_i32)
}

fn bool_field(v: Option<impl Field>, what: &str, key: &str) -> Result<bool, ModelError> {
    typed_field(v, false, (what, key, "a boolean"), Field::as_bool)
}

/// A String bean field: fastjson turns a non-string scalar into its text.
pub(super) fn string_field(v: Option<impl Field>) -> Option<String> {
    present(v).map(|v| v.to_text())
}

pub(super) fn string_list(v: ValueRef<'_>, what: &str) -> Result<Vec<String>, ModelError> {
    let items = v.items();
    let items = items.ok_or_else(|| ModelError(format!("{what} is not a JSON array")))?;
    Ok(items.map(|item| item.to_text()).collect())
}

/// Keeps one entry per key: the last value at the first key's position (a Java map's `put`).
pub(super) fn dedup_last_wins<T>(entries: Vec<(String, T)>) -> Vec<(String, T)> {
    // Keys are peer-chosen: keyed, and foldhash's hash as the route table's (see there).
    let mut first: HashMap<&str, usize, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(entries.len(), Default::default());
    let at: Vec<usize> = (entries.iter().enumerate())
        .map(|(i, (key, _))| *first.entry(key.as_str()).or_insert(i))
        .collect();
    if first.len() == entries.len() {
        return entries;
    }
    // Each entry goes to its key's first position; a later value replaces an earlier one.
    let mut unique: Vec<Option<(String, T)>> = entries.iter().map(|_| None).collect();
    for (entry, i) in entries.into_iter().zip(at) {
        match unique.get_mut(i) {
            Some(Some(kept)) => kept.1 = entry.1,
            Some(slot) => *slot = Some(entry),
            None => {}
        }
    }
    unique.into_iter().flatten().collect()
}

impl DataVersion {
    /// A QUERY_DATA_VERSION body (or the compressed registration's part); missing fields = 0.
    pub fn decode(body: &[u8]) -> Result<DataVersion, ModelError> {
        DataVersion::decode_with(body, &json::Limits::default())
    }

    pub(super) fn decode_with(
        body: &[u8],
        limits: &json::Limits,
    ) -> Result<DataVersion, ModelError> {
        let mut c = Cursor::new(body, limits)?;
        let v = DataVersion::read(&mut c)?;
        c.finish()?;
        Ok(v)
    }

    /// The DataVersion object at `c` (each field's last value counts, as in a Java map).
    pub(super) fn read(c: &mut Cursor<'_>) -> Result<DataVersion, ModelError> {
        const WHAT: &str = "dataVersion";
        let mark = c.mark();
        if let Some(v) = DataVersion::java_layout(c) {
            return Ok(v);
        }
        c.rewind(mark);
        expect_object(c, WHAT)?;
        let [mut counter, mut state_version, mut timestamp] = [None, None, None];
        c.members(|c, key| {
            let field = match &*key {
                "counter" => &mut counter,
                "stateVersion" => &mut state_version,
                "timestamp" => &mut timestamp,
                _ => return c.skip(),
            };
            *field = Some(c.item()?);
            Ok(())
        })?;
        Ok(DataVersion {
            counter: long_field(counter, 0, WHAT, "counter")?,
            state_version: long_field(state_version, 0, WHAT, "stateVersion")?,
            timestamp: long_field(timestamp, 0, WHAT, "timestamp")?,
        })
    }

    /// The object exactly as fastjson writes it, no key scanned (else `None`), for speed.
    fn java_layout(c: &mut Cursor<'_>) -> Option<DataVersion> {
        (c.peek() == Some(b'{') && c.open(false).ok()?).then_some(())?;
        c.literal(b"\"counter\":").then_some(())?;
        let counter = c.plain_int()?;
        c.literal(b",\"stateVersion\":").then_some(())?;
        let state_version = c.plain_int()?;
        c.literal(b",\"timestamp\":").then_some(())?;
        let timestamp = c.plain_int()?;
        (!c.next(false).ok()?).then_some(DataVersion {
            counter,
            state_version,
            timestamp,
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

impl MappingInfo {
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

    pub(super) fn from_ref(v: ValueRef<'_>) -> Result<MappingInfo, ModelError> {
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
                let Ok(logic) = key.trim().parse::<i32>() else {
                    return err(format!("currIdMap key {key:?} is not an int"));
                };
                let Some(physical) = value.as_i32() else {
                    return err("currIdMap value is not an int");
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

pub(super) fn mappings_from_ref(
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

/// BrokerData as route, cluster info and member group write it.
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
            let not_long = || ModelError(format!("brokerAddrs key {key:?} is not a long"));
            let id: i64 = key.trim().parse().map_err(|_| not_long())?;
            if addr.is_null() {
                continue;
            }
            broker_addrs.insert(id, addr.to_text());
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

/// The queueDatas array at `c` (null: empty; null items skipped).
fn queue_datas(c: &mut Cursor<'_>) -> Result<Vec<QueueData>, ModelError> {
    let mut queues = Vec::new();
    if c.null()? {
        return Ok(queues);
    }
    if c.peek() != Some(b'[') {
        c.skip()?;
        return err("queueDatas is not a JSON array");
    }
    let mut more = c.open(true)?;
    while more {
        if !c.null()? {
            queues.push(queue_data(c)?);
        }
        more = c.next(true)?;
    }
    Ok(queues)
}

fn queue_data(c: &mut Cursor<'_>) -> Result<QueueData, ModelError> {
    const WHAT: &str = "QueueData";
    expect_object(c, WHAT)?;
    let mut fields: [Option<Item<'_>>; 6] = Default::default();
    c.members(|c, key| {
        let i = match &*key {
            "topicSysFlag" => 0,
            "topicSynFlag" => 1,
            "brokerName" => 2,
            "readQueueNums" => 3,
            "writeQueueNums" => 4,
            "perm" => 5,
            _ => return c.skip(),
        };
        fields[i] = Some(c.item()?);
        Ok(())
    })?;
    let [sys_flag, syn_flag, broker_name, read, write, perm] = fields;
    // Before 4.9.0 the flag was spelled topicSynFlag.
    let topic_sys_flag = match present(sys_flag) {
        Some(flag) => int_field(Some(flag), 0, WHAT, "topicSysFlag")?,
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

/// The object `v`'s non-null members, each read by `item` (absent or null: empty).
fn map_of<T>(
    v: Option<ValueRef<'_>>,
    what: &str,
    item: impl Fn(ValueRef<'_>) -> Result<T, ModelError>,
) -> Result<BTreeMap<String, T>, ModelError> {
    let Some(v) = present(v) else {
        return Ok(BTreeMap::new());
    };
    let members = as_object(v, what)?.filter(|(_, value)| !value.is_null());
    members
        .map(|(k, value)| Ok((k.to_owned(), item(value)?)))
        .collect()
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
    /// §6.2 exactly: compact, bean fields alphabetical, null fields omitted, in `dialect`.
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

    /// A route answer, every member read.
    pub fn decode(body: &[u8]) -> Result<TopicRouteData, ModelError> {
        TopicRouteData::read(body, &json::Limits::default(), false)
    }

    /// A REGISTER_TOPIC_IN_NAMESRV body: only its queueDatas, every other member skipped.
    pub fn decode_queues(body: &[u8], limits: &json::Limits) -> Result<Vec<QueueData>, ModelError> {
        Ok(TopicRouteData::read(body, limits, true)?.queue_datas)
    }

    /// Each member's last value counts, as in a Java map.
    fn read(body: &[u8], limits: &json::Limits, queues_only: bool) -> Result<Self, ModelError> {
        let mut c = Cursor::checking_strings(body, limits)?;
        let mut out = TopicRouteData::default();
        expect_object(&mut c, "TopicRouteData")?;
        c.members(|c, key| {
            if key == "queueDatas" {
                out.queue_datas = queue_datas(c)?;
                return Ok(());
            } else if queues_only {
                return Ok(c.skip()?);
            }
            let doc = c.document()?;
            let v = Some(doc.root());
            match &*key {
                "brokerDatas" => out.broker_datas = array_of(v, &key, broker_data_from_ref)?,
                "filterServerTable" => {
                    let servers = |s: ValueRef<'_>| string_list(s, "filterServerTable value");
                    out.filter_server_table = map_of(v, &key, servers)?;
                }
                "topicQueueMappingByBroker" => {
                    let mappings = present(v).map(|map| mappings_from_ref(map, usize::MAX));
                    out.topic_queue_mapping_by_broker = mappings.transpose()?;
                }
                "orderTopicConf" => out.order_topic_conf = string_field(v),
                _ => {}
            }
            Ok::<_, ModelError>(())
        })?;
        c.finish()?;
        Ok(out)
    }
}

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
        Ok(ClusterInfo {
            broker_addr_table: map_of(broker_table, "brokerAddrTable", broker_data_from_ref)?,
            cluster_addr_table: map_of(cluster_table, "clusterAddrTable", |names| {
                string_list(names, "clusterAddrTable value")
            })?,
        })
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
    let topics = present(topic_list).map(|list| string_list(list, "topicList"));
    Ok((
        topics.transpose()?.unwrap_or_default(),
        string_field(broker_addr),
    ))
}

/// KVTable `{"table":{k:v}}` (§6.4; the server's are written by the KV store).
pub fn decode_kv_table(body: &[u8]) -> Result<Vec<(String, String)>, ModelError> {
    let doc = json::parse_borrowed(body, &json::Limits::default())?;
    let v = doc.root();
    as_object(v, "KVTable")?;
    let Some(table) = present(v.get("table")) else {
        return Ok(Vec::new());
    };
    let entries = as_object(table, "table")?
        .filter(|(_, value)| !value.is_null())
        .map(|(k, value)| (k.to_owned(), value.to_text()))
        .collect();
    Ok(dedup_last_wins(entries))
}

/// GetBrokerMemberGroupResponseBody (901), legacy dialect.
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
pub mod tests {
    use super::*;

    use crate::test_support::fixture;

    pub fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes).expect("encoder output is UTF-8")
    }

    #[test]
    fn data_version_encodes_as_fastjson_writes_it() {
        for (counter, state_version, timestamp) in [
            (3, 0, 1_700_000_000_000),
            (-1, i64::MIN, i64::MAX),
            (0, 0, 0),
        ] {
            let v = DataVersion {
                counter,
                state_version,
                timestamp,
            };
            let want = format!(
                "{{\"counter\":{counter},\"stateVersion\":{state_version},\"timestamp\":{timestamp}}}"
            );
            let mut got = Vec::new();
            v.encode(&mut got);
            assert_eq!(text(&got), want);
            assert_eq!(DataVersion::decode(&got).ok(), Some(v));
        }
    }

    #[test]
    fn data_version_bodies_decode_with_fastjson_coercions() {
        type Case = (&'static [u8], Option<(i64, i64, i64)>);
        let cases: [Case; 10] = [
            (
                br#"{"counter":12,"stateVersion":-1,"timestamp":1700000000123}"#,
                Some((12, -1, 1_700_000_000_123)),
            ),
            (br#"{}"#, Some((0, 0, 0))),
            (
                br#"{"counter":1,"counter":2,"x":[true,"y",{}]}"#,
                Some((2, 0, 0)),
            ),
            (
                br#"{"timestamp":9223372036854775807,"counter":-9223372036854775807}"#,
                Some((-i64::MAX, 0, i64::MAX)),
            ),
            (
                br#" { "counter" : "7", 'timestamp':null , stateVersion:3.0 } "#,
                Some((7, 3, 0)),
            ),
            (br#"{"counter":"x","counter":5}"#, Some((5, 0, 0))),
            (br#"{"counter":1.5}"#, None),
            (br#"{"counter":1"#, None),
            (br#"[1]"#, None),
            (br#"{"counter":1} x"#, None),
        ];
        for (body, want) in cases {
            let got = DataVersion::decode(body).ok();
            let want = want.map(|(counter, state_version, timestamp)| DataVersion {
                counter,
                state_version,
                timestamp,
            });
            assert_eq!(got, want, "{}", text(body));
        }
    }

    pub fn topic(name: &str, read: i32, write: i32, perm: i32, flag: i32) -> (String, TopicConfig) {
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

    pub fn static_mapping() -> (String, MappingInfo) {
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

    /// A REGISTER_TOPIC_IN_NAMESRV body at the name server's default limits.
    fn queues(body: &[u8]) -> Result<Vec<QueueData>, ModelError> {
        let limits = json::Limits {
            max_depth: 64,
            max_string_len: 65_536,
        };
        TopicRouteData::decode_queues(body, &limits)
    }

    #[test]
    fn a_registered_topics_queues_are_read_as_the_whole_route_reads_them() {
        let fixture = fixture("topic_route_data_fastjson_legacy.json");
        let whole = TopicRouteData::decode(&fixture).unwrap();
        assert_eq!(queues(&fixture).unwrap(), whole.queue_datas);
        let mut standard = Vec::new();
        whole.encode(Dialect::Standard, &mut standard);
        assert_eq!(queues(&standard).unwrap(), whole.queue_datas);
        // fastjson's quirks: single quotes, bare keys, stray commas, numbers as strings.
        let quirks = br#"{,queueDatas:[null,,{'brokerName':'b',perm:"6",topicSynFlag:1},]}"#;
        let q = &queues(quirks).unwrap()[0];
        assert_eq!(
            (q.broker_name.as_str(), q.perm, q.topic_sys_flag),
            ("b", 6, 1)
        );
        assert_eq!(queues(b"{}").unwrap(), vec![]);
        assert_eq!(queues(br#"{"queueDatas":null}"#).unwrap(), vec![]);
        for bad in [
            &b"[]"[..],
            br#"{"queueDatas":{}}"#,
            br#"{"queueDatas":[1]}"#,
        ] {
            assert!(queues(bad).is_err(), "{}", text(bad));
        }
        let bad_perm = queues(br#"{"queueDatas":[{"perm":"x"}]}"#).unwrap_err();
        assert_eq!(bad_perm.0, "QueueData.perm is not an int");
    }

    #[test]
    fn a_registered_topics_other_members_are_skipped_but_must_be_json() {
        let nested = format!("{}{}", "[".repeat(60), "]".repeat(60));
        let body = format!(
            r#"{{"brokerDatas":[{nested},{nested}],"x":{{"y":"z"}},"queueDatas":[{{"brokerName":"b","extra":[{nested}]}}],"orderTopicConf":7}}"#
        );
        assert_eq!(queues(body.as_bytes()).unwrap()[0].broker_name, "b");
        assert!(queues(br#"{"brokerDatas":[1,}"#).is_err());
        assert!(queues(br#"{"queueDatas":[]} x"#).is_err());
        assert!(queues(b"{\"x\":\"\xff\",\"queueDatas\":[]}").is_err());
    }

    #[test]
    fn a_registered_topic_nested_past_max_json_depth_is_refused_naming_it() {
        let deep = format!(r#"{{"x":{}{}}}"#, "[".repeat(64), "]".repeat(64));
        let e = queues(deep.as_bytes()).unwrap_err();
        assert!(e.0.contains("nesting deeper than maxJsonDepth"), "{e}");
        let shallow = json::Limits {
            max_depth: 2,
            max_string_len: 64,
        };
        let body = br#"{"queueDatas":[{"brokerName":"b"}]}"#;
        assert!(TopicRouteData::decode_queues(body, &shallow).is_err());
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
        let mut out = r#"{"table":{"TopicA":"broker-a:4","B\"":"x"}}"#.as_bytes().to_vec();
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
}
