//! The Controller's request and response codes and their names, apart from the name server's
//! table in `remoting::codes`: the name-server port answers them REQUEST_CODE_NOT_SUPPORTED.

/// Declares a `mod` of code constants and the function naming them ("UNKNOWN" otherwise).
macro_rules! named_codes {
    ($(#[$mdoc:meta])* mod $module:ident, fn $name_fn:ident, extra [$($extra:literal => $extra_name:literal),*];
     $($(#[$doc:meta])* $name:ident = $code:literal;)*) => {
        $(#[$mdoc])*
        pub mod $module {
            $($(#[$doc])* pub const $name: i32 = $code;)*
        }

        pub fn $name_fn(code: i32) -> &'static str {
            match code {
                $($extra => $extra_name,)*
                $($code => stringify!($name),)*
                _ => "UNKNOWN",
            }
        }
    };
}

named_codes! {
    /// Request codes served on the controller port, plus the two that travel elsewhere.
    mod request, fn request_name, extra [];
    /// Served by both servers; on the controller port it feeds the liveness table.
    BROKER_HEARTBEAT = 904;
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001;
    CONTROLLER_ELECT_MASTER = 1002;
    CONTROLLER_REGISTER_BROKER = 1003;
    CONTROLLER_GET_REPLICA_INFO = 1004;
    CONTROLLER_GET_METADATA_INFO = 1005;
    CONTROLLER_GET_SYNC_STATE_DATA = 1006;
    /// Answered by brokers, not by a controller (mqadmin getBrokerEpoch).
    GET_BROKER_EPOCH_CACHE = 1007;
    /// Sent by the controller to brokers (oneway), never served.
    NOTIFY_BROKER_ROLE_CHANGED = 1008;
    UPDATE_CONTROLLER_CONFIG = 1009;
    GET_CONTROLLER_CONFIG = 1010;
    CLEAN_BROKER_DATA = 1011;
    CONTROLLER_GET_NEXT_BROKER_ID = 1012;
    CONTROLLER_APPLY_BROKER_ID = 1013;
}

named_codes! {
    /// Response codes 2000-2016 (the generic ones are `remoting::codes::response`'s).
    mod response, fn response_name, extra [0 => "SUCCESS", 1 => "SYSTEM_ERROR", 2 => "SYSTEM_BUSY",
        3 => "REQUEST_CODE_NOT_SUPPORTED", 16 => "NO_PERMISSION"];
    CONTROLLER_FENCED_MASTER_EPOCH = 2000;
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001;
    CONTROLLER_INVALID_MASTER = 2002;
    CONTROLLER_INVALID_REPLICAS = 2003;
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004;
    CONTROLLER_INVALID_REQUEST = 2005;
    CONTROLLER_BROKER_NOT_ALIVE = 2006;
    CONTROLLER_NOT_LEADER = 2007;
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008;
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009;
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010;
    CONTROLLER_MASTER_STILL_EXIST = 2011;
    CONTROLLER_ELECT_MASTER_FAILED = 2012;
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013;
    CONTROLLER_BROKER_ID_INVALID = 2014;
    /// 2015 and 2016 are Java's JRaft flavour only; never produced here.
    CONTROLLER_JRAFT_INTERNAL_ERROR = 2015;
    CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_code_has_a_name_and_the_response_codes_are_contiguous() {
        for code in [
            904, 1001, 1002, 1003, 1004, 1005, 1006, 1009, 1010, 1011, 1012, 1013,
        ] {
            assert_ne!(request_name(code), "UNKNOWN", "{code}");
        }
        assert_eq!(request_name(105), "UNKNOWN");
        for code in 2000..=2016 {
            assert!(response_name(code).starts_with("CONTROLLER_"), "{code}");
        }
        assert_eq!(response_name(2017), "UNKNOWN");
    }
}
