//! Request and response codes, language codes and version ordinals (docs/protocol.md). Each
//! request code is one row of [`REQUEST_CODES`], which everything else reads.

/// Who sends a request and what it may change: its allow-list and how the loop schedules it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Open to every address, scheduled as client traffic.
    Read,
    /// A broker reporting itself, changing only its own entries; gated by `brokerAllowList`.
    BrokerReport,
    /// An admin tool changing shared state: refused outside `adminAllowList`.
    AdminWrite,
    /// REGISTER_TOPIC_IN_NAMESRV: brokers send it (`enableSingleTopicRegister`), but it writes
    /// any topic's route, so it is gated like an [`Kind::AdminWrite`].
    BrokerTopicWrite,
    /// Sent by the name server (905); a peer sending it is answered REQUEST_CODE_NOT_SUPPORTED.
    Outgoing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeRow {
    pub code: i32,
    pub name: &'static str,
    pub kind: Kind,
    /// Its handling changes the route table: the server orders it behind a registration being
    /// applied in steps, so the tables end as if that had been applied at once.
    pub writes_routes: bool,
}

/// Declares the `request` constants and the [`REQUEST_CODES`] rows from the same lines.
macro_rules! request_codes {
    ($($(#[$doc:meta])* $name:ident = $code:literal, $kind:ident $(, $routes:ident)?;)*) => {
        /// Request codes the name server answers or sends (905).
        pub mod request {
            $($(#[$doc])* pub const $name: i32 = $code;)*
        }

        /// Every request code the name server knows, ascending by code.
        pub const REQUEST_CODES: &[CodeRow] = &[
            $(CodeRow {
                code: $code,
                name: stringify!($name),
                kind: Kind::$kind,
                writes_routes: request_codes!(@routes $($routes)?),
            },)*
        ];
    };
    (@routes routes) => { true };
    (@routes) => { false };
}

request_codes! {
    PUT_KV_CONFIG = 100, AdminWrite;
    GET_KV_CONFIG = 101, Read;
    DELETE_KV_CONFIG = 102, AdminWrite;
    REGISTER_BROKER = 103, BrokerReport, routes;
    UNREGISTER_BROKER = 104, BrokerReport, routes;
    GET_ROUTEINFO_BY_TOPIC = 105, Read;
    GET_BROKER_CLUSTER_INFO = 106, Read;
    WIPE_WRITE_PERM_OF_BROKER = 205, AdminWrite, routes;
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206, Read;
    DELETE_TOPIC_IN_NAMESRV = 216, AdminWrite, routes;
    REGISTER_TOPIC_IN_NAMESRV = 217, BrokerTopicWrite, routes;
    GET_KVLIST_BY_NAMESPACE = 219, Read;
    GET_TOPICS_BY_CLUSTER = 224, Read;
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304, Read;
    GET_UNIT_TOPIC_LIST = 311, Read;
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312, Read;
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313, Read;
    UPDATE_NAMESRV_CONFIG = 318, AdminWrite;
    GET_NAMESRV_CONFIG = 319, Read;
    QUERY_DATA_VERSION = 322, BrokerReport;
    ADD_WRITE_PERM_OF_BROKER = 327, AdminWrite, routes;
    GET_BROKER_MEMBER_GROUP = 901, Read;
    BROKER_HEARTBEAT = 904, BrokerReport;
    NOTIFY_MIN_BROKER_ID_CHANGE = 905, Outgoing;
    /// rmq-namesrv's stats extension, far outside RocketMQ's ranges (below 1000, proxies' 2000s).
    RMQ_NAMESRV_STATS = 29_001, Read;
}

/// The row of a request code, if the name server knows it (the rows ascend by code).
pub fn request_row(code: i32) -> Option<&'static CodeRow> {
    request_index(code).map(|i| &REQUEST_CODES[i])
}

/// The position of a request code's row in [`REQUEST_CODES`] (counters are arrays by row).
pub fn request_index(code: i32) -> Option<usize> {
    REQUEST_CODES.binary_search_by_key(&code, |r| r.code).ok()
}

/// Human-readable name of a request code, for logs and the stats extension.
pub fn request_name(code: i32) -> &'static str {
    request_row(code).map_or("UNKNOWN", |r| r.name)
}

/// Codes brokers send: the loop schedules a connection that opens with one as a broker's.
pub fn is_broker_request(code: i32) -> bool {
    request_row(code).is_some_and(|r| matches!(r.kind, Kind::BrokerReport | Kind::BrokerTopicWrite))
}

/// True for codes whose handling changes the route table ([`CodeRow::writes_routes`]).
pub fn writes_routes(code: i32) -> bool {
    request_row(code).is_some_and(|r| r.writes_routes)
}

/// True for codes refused from addresses outside `adminAllowList`.
pub fn needs_admin_allow_list(code: i32) -> bool {
    request_row(code).is_some_and(|r| matches!(r.kind, Kind::AdminWrite | Kind::BrokerTopicWrite))
}

/// True for codes refused from addresses outside `brokerAllowList`.
pub fn needs_broker_allow_list(code: i32) -> bool {
    request_row(code).is_some_and(|r| r.kind == Kind::BrokerReport)
}

/// Declares the `response` constants and [`response_name`] from the same lines.
macro_rules! response_codes {
    ($($name:ident = $code:literal;)*) => {
        /// Response codes the name server uses (docs/protocol.md §3.2).
        pub mod response {
            $(pub const $name: i32 = $code;)*
        }

        /// Name of a response code the name server uses; "ERROR" for any other.
        pub fn response_name(code: i32) -> &'static str {
            match code {
                $($code => stringify!($name),)*
                _ => "ERROR",
            }
        }

        /// The response codes the name server uses, SUCCESS first.
        pub const RESPONSE_CODES: &[i32] = &[$($code,)*];
    };
}

response_codes! {
    SUCCESS = 0;
    SYSTEM_ERROR = 1;
    SYSTEM_BUSY = 2;
    REQUEST_CODE_NOT_SUPPORTED = 3;
    NO_PERMISSION = 16;
    TOPIC_NOT_EXIST = 17;
    QUERY_NOT_FOUND = 22;
    GO_AWAY = 1500;
}

/// `MQVersion.Version` ordinals that change behaviour (docs/protocol.md §6.5).
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

/// `LanguageCode` names by their binary code (docs/protocol.md §2.3).
pub const LANGUAGES: [&str; 14] = [
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
    "OMS", "RUST", "NODE_JS",
];

/// Binary code of a language name, `None` for a name not in [`LANGUAGES`].
pub fn language_by_name(name: &str) -> Option<u8> {
    LANGUAGES.iter().position(|l| *l == name).map(|p| p as u8)
}

/// Flag bits of `RemotingCommand.flag`.
pub const FLAG_RESPONSE: i32 = 1;
pub const FLAG_ONEWAY: i32 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_found_by_its_code_and_nothing_else_is() {
        // `request_row` binary-searches the rows.
        assert!(REQUEST_CODES.windows(2).all(|w| w[0].code < w[1].code));
        for row in REQUEST_CODES {
            assert_eq!(request_row(row.code), Some(row));
            assert_eq!(request_name(row.code), row.name);
        }
        for code in [-1, 0, 99, 107, 217 + 1, 305, 906, 29_000, 29_002] {
            assert_eq!(request_row(code), None, "{code}");
            assert_eq!(request_name(code), "UNKNOWN");
        }
        assert_eq!(request_name(request::REGISTER_BROKER), "REGISTER_BROKER");
        assert_eq!(
            request_name(request::RMQ_NAMESRV_STATS),
            "RMQ_NAMESRV_STATS"
        );
    }

    #[test]
    fn the_admin_allow_list_gates_exactly_the_mutating_admin_codes() {
        let gated: Vec<i32> = REQUEST_CODES
            .iter()
            .map(|r| r.code)
            .filter(|c| needs_admin_allow_list(*c))
            .collect();
        // The list docs/operations.md#security names.
        assert_eq!(gated, [100, 102, 205, 216, 217, 318, 327]);
    }

    #[test]
    fn the_broker_allow_list_gates_exactly_what_brokers_report_about_themselves() {
        let gated: Vec<i32> = REQUEST_CODES
            .iter()
            .map(|r| r.code)
            .filter(|c| needs_broker_allow_list(*c))
            .collect();
        // The list docs/operations.md#security names.
        assert_eq!(gated, [103, 104, 322, 904]);
        assert!(!needs_broker_allow_list(request::REGISTER_TOPIC_IN_NAMESRV));
    }

    #[test]
    fn broker_requests_are_registration_heartbeats_and_topic_registration() {
        let broker: Vec<i32> = REQUEST_CODES
            .iter()
            .map(|r| r.code)
            .filter(|c| is_broker_request(*c))
            .collect();
        assert_eq!(broker, [103, 104, 217, 322, 904]);
        assert!(!is_broker_request(12_345));
    }

    #[test]
    fn route_writers_are_registration_unregistration_and_the_admin_route_changes() {
        let writers: Vec<i32> = REQUEST_CODES
            .iter()
            .map(|r| r.code)
            .filter(|c| writes_routes(*c))
            .collect();
        // processor::tests derives the same list from what each handler does.
        assert_eq!(writers, [103, 104, 205, 216, 217, 327]);
        assert!(!writes_routes(request::GET_ROUTEINFO_BY_TOPIC));
        assert!(!writes_routes(12_345));
    }

    #[test]
    fn response_names_come_from_the_same_declaration_as_the_codes() {
        assert_eq!(response_name(response::SUCCESS), "SUCCESS");
        assert_eq!(response_name(response::NO_PERMISSION), "NO_PERMISSION");
        assert_eq!(response_name(response::GO_AWAY), "GO_AWAY");
        assert_eq!(response_name(999), "ERROR");
    }
}
