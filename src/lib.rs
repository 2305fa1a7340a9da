//! rmq-namesrv: a RocketMQ NameServer on one event loop.
//!
//! Data flows one way:
//!
//! ```text
//! socket --(event_loop: read buffer; frame cut by remoting::frame)--> frame bytes
//!        --(server: Handler::on_frame, remoting::command decode)--> RemotingCommand
//!        --(server: admission; REGISTER_BROKER queued, the rest at once)
//!        --(request: parsed once)--> typed Request
//!        --(processor: one handler per request)--> route::RouteTable / kv::KvStore /
//!                                                   config::NamesrvConfig
//!        --(remoting::command encode)--> reply bytes in the connection's write buffer
//!        --(event_loop: flush)--> socket
//!
//! off the loop:  processor --Outbox--> unregistration batcher --batches + Waker--> server
//!                processor --Outbox--> durable writer (KV file, config file)
//!                                       --results + Waker--> server --deferred replies-->
//!                processor --Outbox--> oneway sender (905 frames to brokers)
//!                server --large bodies--> decode worker (hash, inflate, decode, check)
//!                                          --decoded + Waker--> server --> processor
//! ```
//!
//! * [`event_loop`] owns sockets, buffers, read scheduling, backpressure, timers and the clean
//!   stop; it knows nothing of RocketMQ and calls the application through its `Handler`.
//! * [`server`] is that handler for the name server: it decodes frames, admits registrations
//!   and paces the slow work (registrations, unregistrations, expiry) within each turn.
//! * [`remoting`] owns the wire: length framing, both header codecs, the table of request
//!   codes (code, name, kind) and response codes, and the fastjson-dialect JSON reader/writer.
//! * [`request`] parses each request once into a typed value (header fields, checks, body).
//! * [`processor`] runs one handler per typed request, and is the one place where errors
//!   become response codes.
//! * [`route`] owns the registry tables and the per-topic cache of encoded routes.
//! * [`checksum`] owns CRC-32 (the `bodyCrc32` check) and the keyed (foldhash) body
//!   fingerprint.
//! * [`kv`] owns the persisted KV config and the writer thread that makes changes durable;
//!   [`config`] the server's own properties; [`durable_file`] crash-safe file replacement.
//! * [`timer`] holds the deadline buckets used for idle connections and broker expiry.
//! * [`client`] is a blocking client used by the tools and the tests.

pub mod checksum;
pub mod client;
pub mod config;
/// The embedded Controller: its code table in every build (the admin tool names its
/// answers), everything else with the `controller` feature.
pub mod controller;
pub mod durable_file;
pub mod event_loop;
pub mod kv;
pub mod logging;
pub mod processor;
pub mod remoting;
pub mod request;
pub mod route;
pub mod server;
#[cfg(test)]
#[path = "../tests/support/mod.rs"]
mod test_support;
pub mod timer;
