//! The Controller's request and response codes (RocketMQ 5.x `RequestCode` / `ResponseCode`)
//! and their names, kept apart from the name server's table in `remoting::codes` because the
//! Controller answers them on its own port only: the name-server port keeps answering them
//! with REQUEST_CODE_NOT_SUPPORTED, as Java does.

/// Request codes served on the controller port, plus the two that travel elsewhere.
pub mod request {
    /// Served by both servers; on the controller port it feeds the liveness table.
    pub const BROKER_HEARTBEAT: i32 = 904;
    pub const CONTROLLER_ALTER_SYNC_STATE_SET: i32 = 1001;
    pub const CONTROLLER_ELECT_MASTER: i32 = 1002;
    pub const CONTROLLER_REGISTER_BROKER: i32 = 1003;
    pub const CONTROLLER_GET_REPLICA_INFO: i32 = 1004;
    pub const CONTROLLER_GET_METADATA_INFO: i32 = 1005;
    pub const CONTROLLER_GET_SYNC_STATE_DATA: i32 = 1006;
    /// Answered by brokers, not by a controller (mqadmin getBrokerEpoch).
    pub const GET_BROKER_EPOCH_CACHE: i32 = 1007;
    /// Sent by the controller to brokers (oneway), never served.
    pub const NOTIFY_BROKER_ROLE_CHANGED: i32 = 1008;
    pub const UPDATE_CONTROLLER_CONFIG: i32 = 1009;
    pub const GET_CONTROLLER_CONFIG: i32 = 1010;
    pub const CLEAN_BROKER_DATA: i32 = 1011;
    pub const CONTROLLER_GET_NEXT_BROKER_ID: i32 = 1012;
    pub const CONTROLLER_APPLY_BROKER_ID: i32 = 1013;
}

/// Response codes 2000-2016 (the generic ones, 0/1/2/3/16, are `remoting::codes::response`).
pub mod response {
    pub const CONTROLLER_FENCED_MASTER_EPOCH: i32 = 2000;
    pub const CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: i32 = 2001;
    pub const CONTROLLER_INVALID_MASTER: i32 = 2002;
    pub const CONTROLLER_INVALID_REPLICAS: i32 = 2003;
    pub const CONTROLLER_MASTER_NOT_AVAILABLE: i32 = 2004;
    pub const CONTROLLER_INVALID_REQUEST: i32 = 2005;
    pub const CONTROLLER_BROKER_NOT_ALIVE: i32 = 2006;
    pub const CONTROLLER_NOT_LEADER: i32 = 2007;
    pub const CONTROLLER_BROKER_METADATA_NOT_EXIST: i32 = 2008;
    pub const CONTROLLER_INVALID_CLEAN_BROKER_METADATA: i32 = 2009;
    pub const CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: i32 = 2010;
    pub const CONTROLLER_MASTER_STILL_EXIST: i32 = 2011;
    pub const CONTROLLER_ELECT_MASTER_FAILED: i32 = 2012;
    pub const CONTROLLER_ALTER_SYNC_STATE_SET_FAILED: i32 = 2013;
    pub const CONTROLLER_BROKER_ID_INVALID: i32 = 2014;
    /// Java's JRaft flavour only; never produced here (controllerType=jRaft is refused).
    pub const CONTROLLER_JRAFT_INTERNAL_ERROR: i32 = 2015;
    /// Java's JRaft flavour only; never produced here.
    pub const CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS: i32 = 2016;
}

/// Name of a controller request code, for logs ("UNKNOWN" for anything else).
pub fn request_name(code: i32) -> &'static str {
    use request::*;
    match code {
        BROKER_HEARTBEAT => "BROKER_HEARTBEAT",
        CONTROLLER_ALTER_SYNC_STATE_SET => "CONTROLLER_ALTER_SYNC_STATE_SET",
        CONTROLLER_ELECT_MASTER => "CONTROLLER_ELECT_MASTER",
        CONTROLLER_REGISTER_BROKER => "CONTROLLER_REGISTER_BROKER",
        CONTROLLER_GET_REPLICA_INFO => "CONTROLLER_GET_REPLICA_INFO",
        CONTROLLER_GET_METADATA_INFO => "CONTROLLER_GET_METADATA_INFO",
        CONTROLLER_GET_SYNC_STATE_DATA => "CONTROLLER_GET_SYNC_STATE_DATA",
        GET_BROKER_EPOCH_CACHE => "GET_BROKER_EPOCH_CACHE",
        NOTIFY_BROKER_ROLE_CHANGED => "NOTIFY_BROKER_ROLE_CHANGED",
        UPDATE_CONTROLLER_CONFIG => "UPDATE_CONTROLLER_CONFIG",
        GET_CONTROLLER_CONFIG => "GET_CONTROLLER_CONFIG",
        CLEAN_BROKER_DATA => "CLEAN_BROKER_DATA",
        CONTROLLER_GET_NEXT_BROKER_ID => "CONTROLLER_GET_NEXT_BROKER_ID",
        CONTROLLER_APPLY_BROKER_ID => "CONTROLLER_APPLY_BROKER_ID",
        _ => "UNKNOWN",
    }
}

/// Name of a response code 2000-2016 (and the generic ones the controller uses).
pub fn response_name(code: i32) -> &'static str {
    use response::*;
    match code {
        0 => "SUCCESS",
        1 => "SYSTEM_ERROR",
        2 => "SYSTEM_BUSY",
        3 => "REQUEST_CODE_NOT_SUPPORTED",
        16 => "NO_PERMISSION",
        CONTROLLER_FENCED_MASTER_EPOCH => "CONTROLLER_FENCED_MASTER_EPOCH",
        CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH => "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH",
        CONTROLLER_INVALID_MASTER => "CONTROLLER_INVALID_MASTER",
        CONTROLLER_INVALID_REPLICAS => "CONTROLLER_INVALID_REPLICAS",
        CONTROLLER_MASTER_NOT_AVAILABLE => "CONTROLLER_MASTER_NOT_AVAILABLE",
        CONTROLLER_INVALID_REQUEST => "CONTROLLER_INVALID_REQUEST",
        CONTROLLER_BROKER_NOT_ALIVE => "CONTROLLER_BROKER_NOT_ALIVE",
        CONTROLLER_NOT_LEADER => "CONTROLLER_NOT_LEADER",
        CONTROLLER_BROKER_METADATA_NOT_EXIST => "CONTROLLER_BROKER_METADATA_NOT_EXIST",
        CONTROLLER_INVALID_CLEAN_BROKER_METADATA => "CONTROLLER_INVALID_CLEAN_BROKER_METADATA",
        CONTROLLER_BROKER_NEED_TO_BE_REGISTERED => "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED",
        CONTROLLER_MASTER_STILL_EXIST => "CONTROLLER_MASTER_STILL_EXIST",
        CONTROLLER_ELECT_MASTER_FAILED => "CONTROLLER_ELECT_MASTER_FAILED",
        CONTROLLER_ALTER_SYNC_STATE_SET_FAILED => "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED",
        CONTROLLER_BROKER_ID_INVALID => "CONTROLLER_BROKER_ID_INVALID",
        CONTROLLER_JRAFT_INTERNAL_ERROR => "CONTROLLER_JRAFT_INTERNAL_ERROR",
        CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS => "CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS",
        _ => "UNKNOWN",
    }
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
