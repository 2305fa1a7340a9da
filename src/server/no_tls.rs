//! TLS in a build without the `tls` feature: nothing can be served over TLS, and any
//! `tls.server.mode` but `disabled` is refused at start with a message saying how to build it.
//! Same names as `tls.rs`, so the server needs no `cfg` of its own.

use crate::config::NamesrvConfig;
use crate::event_loop::{Ctx, ListenerTag, TimerId};

pub(super) const RELOAD_TIMER: TimerId = TimerId(20);

/// No TLS in this build (the type has no values).
pub(super) enum TlsPorts {}

impl TlsPorts {
    pub(super) fn from_config(config: &NamesrvConfig) -> Result<Option<TlsPorts>, String> {
        match config.tls_server_mode.as_str() {
            "disabled" => Ok(None),
            mode => Err(format!("tls.server.mode={mode}: this rmq-namesrv is built without TLS; build it with `cargo build --release --features tls`, or set tls.server.mode=disabled")),
        }
    }

    pub(super) fn start<C>(&mut self, _: &mut Ctx<C>, _: &[ListenerTag]) {
        match *self {}
    }

    pub(super) fn on_timer<C>(&mut self, _: &mut Ctx<C>) {
        match *self {}
    }
}
