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
//!                signals thread --stop, SIGHUP's config changes + Waker--> server
//!                main, signals thread, server's watchdog timer --systemd--> NOTIFY_SOCKET
//! ```
//!
//! [`event_loop`] knows nothing of RocketMQ and calls the application through its `Handler`;
//! [`server`] is that handler. [`processor`] is the one place where errors become response
//! codes. [`client`] is a blocking client used by the tools and the tests.

pub mod audit;
pub mod checksum;
pub mod client;
pub mod config;
/// The embedded Controller: codes, config, requests and responses in every build (the admin
/// tool and rmq-bench speak them), the controller itself with the `controller` feature.
pub mod controller;
pub mod durable_file;
pub mod event_loop;
pub mod kv;
pub mod logging;
pub mod metrics;
pub mod processor;
pub mod remoting;
pub mod request;
pub mod route;
pub mod server;
pub mod systemd;
#[cfg(test)]
#[path = "../tests/support/mod.rs"]
mod test_support;
pub mod timer;

/// The version the binaries print: the crate's, with the commit it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("RMQ_GIT_REV"),
    ")"
);
