//! rmq-namesrv: a RocketMQ NameServer on one event loop.
//!
//! Data flows one way:
//!
//! ```text
//! socket --(server::connection)--> frame --(remoting::frame)--> RemotingCommand
//!        --(processor)--> route::RouteTable / kv::KvStore / config::NamesrvConfig
//!        --(remoting::command)--> encoded response bytes --> socket
//! ```
//!
//! * [`remoting`] owns the wire: length framing, both header codecs, request and
//!   response codes, and the fastjson-dialect JSON reader/writer.
//! * [`route`] owns the registry tables and the per-topic cache of encoded routes.
//! * [`checksum`] owns CRC-32 (the `bodyCrc32` check) and the XXH64 body fingerprint.
//! * [`kv`] owns the persisted KV config; [`config`] the server's own properties.
//! * [`processor`] is the only place that maps a request code to behaviour.
//! * [`server`] owns sockets, timers and the unregistration worker; it
//!   knows nothing about routes beyond calling the processor.
//! * [`client`] is a blocking client used by the tools and the tests.

pub mod checksum;
pub mod client;
pub mod config;
pub mod durable_file;
pub mod kv;
pub mod logging;
pub mod processor;
pub mod remoting;
pub mod route;
pub mod server;
#[doc(hidden)]
pub mod test_support;
pub mod timer;
