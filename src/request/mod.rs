//! Typed requests: every request the name server answers, parsed once from its
//! [`RemotingCommand`] into a value that borrows the header's strings and the body (nothing
//! is copied), the way mini-redis parses a frame into a `Get` before applying it. The
//! processor's handlers take these values and never read header fields themselves.
//!
//! Parsing applies every check that does not need the tables: required fields (Java's
//! `@CFNotNull`), numbers, name lengths, topic names, and the bodies that decode the same
//! whatever the tables hold (a registration body is decoded only when it changed, so
//! [`RegisterBroker`] keeps it as sent). A failure is a [`ParseError`] whose text is the
//! remark Java sends; the processor picks the response code.
//!
//! Adding a request code: its row in `remoting::codes`, its struct here with a `parse`, a
//! variant of [`Request`] with its arm in [`Request::parse`] and [`Request::code`], and its
//! handler in the processor (whose dispatch matches every variant, so the compiler asks).

mod admin;
mod broker;
mod header;
mod routes;

pub use admin::{
    DeleteTopic, GetKvList, KvKey, PutKvConfig, RegisterTopic, UpdateNamesrvConfig, WritePerm,
};
pub use broker::{
    BrokerHeartbeat, BrokerRef, GetBrokerMemberGroup, QueryDataVersion, RegisterBroker,
    UnregisterBroker,
};
pub use header::{NameLimits, ParseError};
pub use routes::{GetRouteInfo, GetTopicsByCluster};

use crate::remoting::codes::request as code;
use crate::remoting::command::RemotingCommand;
use header::Fields;

/// One request, by code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    PutKvConfig(PutKvConfig<'a>),
    GetKvConfig(KvKey<'a>),
    DeleteKvConfig(KvKey<'a>),
    RegisterBroker(RegisterBroker<'a>),
    UnregisterBroker(UnregisterBroker<'a>),
    GetRouteInfo(GetRouteInfo<'a>),
    GetBrokerClusterInfo,
    WipeWritePerm(WritePerm<'a>),
    GetAllTopicList,
    DeleteTopic(DeleteTopic<'a>),
    RegisterTopic(RegisterTopic<'a>),
    GetKvList(GetKvList<'a>),
    GetTopicsByCluster(GetTopicsByCluster<'a>),
    GetSystemTopicList,
    GetUnitTopicList,
    GetHasUnitSubTopicList,
    GetHasUnitSubUnunitTopicList,
    UpdateNamesrvConfig(UpdateNamesrvConfig<'a>),
    GetNamesrvConfig,
    QueryDataVersion(QueryDataVersion<'a>),
    AddWritePerm(WritePerm<'a>),
    GetBrokerMemberGroup(GetBrokerMemberGroup<'a>),
    BrokerHeartbeat(BrokerHeartbeat<'a>),
    Stats,
}

impl<'a> Request<'a> {
    /// Parses `cmd` by its code. Codes the name server does not answer (unknown ones, and
    /// 905, which it only sends) are [`ParseError::NotSupported`].
    pub fn parse(cmd: &'a RemotingCommand, limits: &'a NameLimits) -> Result<Self, ParseError> {
        let h = Fields { cmd, limits };
        Ok(match cmd.code {
            code::PUT_KV_CONFIG => Request::PutKvConfig(PutKvConfig::parse(h)?),
            code::GET_KV_CONFIG => Request::GetKvConfig(KvKey::parse(h)?),
            code::DELETE_KV_CONFIG => Request::DeleteKvConfig(KvKey::parse(h)?),
            code::REGISTER_BROKER => Request::RegisterBroker(RegisterBroker::parse(h)?),
            code::UNREGISTER_BROKER => Request::UnregisterBroker(UnregisterBroker::parse(h)?),
            code::GET_ROUTEINFO_BY_TOPIC => Request::GetRouteInfo(GetRouteInfo::parse(h)?),
            code::GET_BROKER_CLUSTER_INFO => Request::GetBrokerClusterInfo,
            code::WIPE_WRITE_PERM_OF_BROKER => Request::WipeWritePerm(WritePerm::parse(h)?),
            code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => Request::GetAllTopicList,
            code::DELETE_TOPIC_IN_NAMESRV => Request::DeleteTopic(DeleteTopic::parse(h)?),
            code::REGISTER_TOPIC_IN_NAMESRV => Request::RegisterTopic(RegisterTopic::parse(h)?),
            code::GET_KVLIST_BY_NAMESPACE => Request::GetKvList(GetKvList::parse(h)?),
            code::GET_TOPICS_BY_CLUSTER => {
                Request::GetTopicsByCluster(GetTopicsByCluster::parse(h)?)
            }
            code::GET_SYSTEM_TOPIC_LIST_FROM_NS => Request::GetSystemTopicList,
            code::GET_UNIT_TOPIC_LIST => Request::GetUnitTopicList,
            code::GET_HAS_UNIT_SUB_TOPIC_LIST => Request::GetHasUnitSubTopicList,
            code::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => Request::GetHasUnitSubUnunitTopicList,
            code::UPDATE_NAMESRV_CONFIG => {
                Request::UpdateNamesrvConfig(UpdateNamesrvConfig::parse(h)?)
            }
            code::GET_NAMESRV_CONFIG => Request::GetNamesrvConfig,
            code::QUERY_DATA_VERSION => Request::QueryDataVersion(QueryDataVersion::parse(h)?),
            code::ADD_WRITE_PERM_OF_BROKER => Request::AddWritePerm(WritePerm::parse(h)?),
            code::GET_BROKER_MEMBER_GROUP => {
                Request::GetBrokerMemberGroup(GetBrokerMemberGroup::parse(h)?)
            }
            code::BROKER_HEARTBEAT => Request::BrokerHeartbeat(BrokerHeartbeat::parse(h)?),
            code::RMQ_NAMESRV_STATS => Request::Stats,
            other => return Err(ParseError::NotSupported(other)),
        })
    }

    /// The request code this request was parsed from.
    pub fn code(&self) -> i32 {
        match self {
            Request::PutKvConfig(_) => code::PUT_KV_CONFIG,
            Request::GetKvConfig(_) => code::GET_KV_CONFIG,
            Request::DeleteKvConfig(_) => code::DELETE_KV_CONFIG,
            Request::RegisterBroker(_) => code::REGISTER_BROKER,
            Request::UnregisterBroker(_) => code::UNREGISTER_BROKER,
            Request::GetRouteInfo(_) => code::GET_ROUTEINFO_BY_TOPIC,
            Request::GetBrokerClusterInfo => code::GET_BROKER_CLUSTER_INFO,
            Request::WipeWritePerm(_) => code::WIPE_WRITE_PERM_OF_BROKER,
            Request::GetAllTopicList => code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
            Request::DeleteTopic(_) => code::DELETE_TOPIC_IN_NAMESRV,
            Request::RegisterTopic(_) => code::REGISTER_TOPIC_IN_NAMESRV,
            Request::GetKvList(_) => code::GET_KVLIST_BY_NAMESPACE,
            Request::GetTopicsByCluster(_) => code::GET_TOPICS_BY_CLUSTER,
            Request::GetSystemTopicList => code::GET_SYSTEM_TOPIC_LIST_FROM_NS,
            Request::GetUnitTopicList => code::GET_UNIT_TOPIC_LIST,
            Request::GetHasUnitSubTopicList => code::GET_HAS_UNIT_SUB_TOPIC_LIST,
            Request::GetHasUnitSubUnunitTopicList => code::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
            Request::UpdateNamesrvConfig(_) => code::UPDATE_NAMESRV_CONFIG,
            Request::GetNamesrvConfig => code::GET_NAMESRV_CONFIG,
            Request::QueryDataVersion(_) => code::QUERY_DATA_VERSION,
            Request::AddWritePerm(_) => code::ADD_WRITE_PERM_OF_BROKER,
            Request::GetBrokerMemberGroup(_) => code::GET_BROKER_MEMBER_GROUP,
            Request::BrokerHeartbeat(_) => code::BROKER_HEARTBEAT,
            Request::Stats => code::RMQ_NAMESRV_STATS,
        }
    }
}

#[cfg(test)]
mod tests;
