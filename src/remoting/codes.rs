//! Request and response codes, language codes and version ordinals of the RocketMQ remoting
//! protocol (PROTOCOL.md §2.3, §3, §6.5): the numbers every other module speaks in.

/// Request codes the NameServer answers, plus the one it sends (905) and our stats extension.
pub mod request {
    pub const PUT_KV_CONFIG: i32 = 100;
    pub const GET_KV_CONFIG: i32 = 101;
    pub const DELETE_KV_CONFIG: i32 = 102;
    pub const REGISTER_BROKER: i32 = 103;
    pub const UNREGISTER_BROKER: i32 = 104;
    pub const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
    pub const GET_BROKER_CLUSTER_INFO: i32 = 106;
    pub const WIPE_WRITE_PERM_OF_BROKER: i32 = 205;
    pub const GET_ALL_TOPIC_LIST_FROM_NAMESERVER: i32 = 206;
    pub const DELETE_TOPIC_IN_NAMESRV: i32 = 216;
    pub const REGISTER_TOPIC_IN_NAMESRV: i32 = 217;
    pub const GET_KVLIST_BY_NAMESPACE: i32 = 219;
    pub const GET_TOPICS_BY_CLUSTER: i32 = 224;
    pub const GET_SYSTEM_TOPIC_LIST_FROM_NS: i32 = 304;
    pub const GET_UNIT_TOPIC_LIST: i32 = 311;
    pub const GET_HAS_UNIT_SUB_TOPIC_LIST: i32 = 312;
    pub const GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: i32 = 313;
    pub const UPDATE_NAMESRV_CONFIG: i32 = 318;
    pub const GET_NAMESRV_CONFIG: i32 = 319;
    pub const QUERY_DATA_VERSION: i32 = 322;
    pub const ADD_WRITE_PERM_OF_BROKER: i32 = 327;
    pub const GET_BROKER_MEMBER_GROUP: i32 = 901;
    pub const BROKER_HEARTBEAT: i32 = 904;
    pub const NOTIFY_MIN_BROKER_ID_CHANGE: i32 = 905;
    /// rmq-namesrv extension: server statistics as a KV-style JSON body. Chosen far outside
    /// RocketMQ's ranges (which stay below 1000 plus the 2000-range of proxies); other name
    /// servers answer it with REQUEST_CODE_NOT_SUPPORTED.
    pub const RMQ_NAMESRV_STATS: i32 = 29_001;
}

/// Response codes the NameServer uses (PROTOCOL.md §3.2).
pub mod response {
    pub const SUCCESS: i32 = 0;
    pub const SYSTEM_ERROR: i32 = 1;
    pub const SYSTEM_BUSY: i32 = 2;
    pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
    pub const NO_PERMISSION: i32 = 16;
    pub const TOPIC_NOT_EXIST: i32 = 17;
    pub const QUERY_NOT_FOUND: i32 = 22;
    pub const GO_AWAY: i32 = 1500;
}

/// `MQVersion.Version` ordinals that change behaviour (PROTOCOL.md §6.5).
pub mod version {
    /// Below this a registration body is a bare TopicConfigSerializeWrapper.
    pub const V3_0_11: i32 = 37;
    /// From this version on, routes are answered in the standard JSON dialect.
    pub const V4_9_4: i32 = 401;
    /// From this version on, compressed registrations carry the mapping section.
    pub const V5_0_0: i32 = 413;
    /// What we announce in responses (Java 5.3.3).
    pub const CURRENT: i32 = 479;
}

/// `LanguageCode` names by their binary code (PROTOCOL.md §2.3).
pub const LANGUAGES: [&str; 14] = [
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
    "OMS", "RUST", "NODE_JS",
];

/// Binary code of a language name; unknown names map to OTHER's code like a lenient peer would.
pub fn language_code(name: &str) -> u8 {
    LANGUAGES
        .iter()
        .position(|l| *l == name)
        .map(|p| p as u8)
        .unwrap_or(7)
}

/// Flag bits of `RemotingCommand.flag`.
pub const FLAG_RESPONSE: i32 = 1;
pub const FLAG_ONEWAY: i32 = 2;

/// Human-readable name of a request code, for logs and the stats extension.
pub fn request_name(code: i32) -> &'static str {
    use request::*;
    match code {
        PUT_KV_CONFIG => "PUT_KV_CONFIG",
        GET_KV_CONFIG => "GET_KV_CONFIG",
        DELETE_KV_CONFIG => "DELETE_KV_CONFIG",
        REGISTER_BROKER => "REGISTER_BROKER",
        UNREGISTER_BROKER => "UNREGISTER_BROKER",
        GET_ROUTEINFO_BY_TOPIC => "GET_ROUTEINFO_BY_TOPIC",
        GET_BROKER_CLUSTER_INFO => "GET_BROKER_CLUSTER_INFO",
        WIPE_WRITE_PERM_OF_BROKER => "WIPE_WRITE_PERM_OF_BROKER",
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER => "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
        DELETE_TOPIC_IN_NAMESRV => "DELETE_TOPIC_IN_NAMESRV",
        REGISTER_TOPIC_IN_NAMESRV => "REGISTER_TOPIC_IN_NAMESRV",
        GET_KVLIST_BY_NAMESPACE => "GET_KVLIST_BY_NAMESPACE",
        GET_TOPICS_BY_CLUSTER => "GET_TOPICS_BY_CLUSTER",
        GET_SYSTEM_TOPIC_LIST_FROM_NS => "GET_SYSTEM_TOPIC_LIST_FROM_NS",
        GET_UNIT_TOPIC_LIST => "GET_UNIT_TOPIC_LIST",
        GET_HAS_UNIT_SUB_TOPIC_LIST => "GET_HAS_UNIT_SUB_TOPIC_LIST",
        GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST",
        UPDATE_NAMESRV_CONFIG => "UPDATE_NAMESRV_CONFIG",
        GET_NAMESRV_CONFIG => "GET_NAMESRV_CONFIG",
        QUERY_DATA_VERSION => "QUERY_DATA_VERSION",
        ADD_WRITE_PERM_OF_BROKER => "ADD_WRITE_PERM_OF_BROKER",
        GET_BROKER_MEMBER_GROUP => "GET_BROKER_MEMBER_GROUP",
        BROKER_HEARTBEAT => "BROKER_HEARTBEAT",
        NOTIFY_MIN_BROKER_ID_CHANGE => "NOTIFY_MIN_BROKER_ID_CHANGE",
        RMQ_NAMESRV_STATS => "RMQ_NAMESRV_STATS",
        _ => "UNKNOWN",
    }
}
