//! The controller port in a build without the `controller` feature: nothing can be hosted, and
//! `enableControllerInNamesrv=true` is refused at start with a message saying how to get it.
//! Same names as `controller_port.rs`, so the server's hooks need no `cfg` of their own (an
//! `Option` of an empty type is always `None`; the compiler drops the calls).

use super::StartError;
use crate::config::NamesrvConfig;
use crate::event_loop::{ConnId, Ctx, EventLoop, Handler, ListenerTag, Next, TimerId};
use crate::remoting::command::RemotingCommand;
use crate::request::NameLimits;
use std::io;
use std::net::SocketAddr;

pub(super) const LISTENER: ListenerTag = ListenerTag(1);

/// What the application keeps for a connection the peer link opens (none in this build).
pub(super) trait PeerConnData {
    // Implemented by the server for both builds; only the controller's peer link calls it.
    #[allow(dead_code)]
    fn peer_link() -> Self;
}

const NOT_BUILT: &str = "enableControllerInNamesrv=true: this rmq-namesrv is built without the embedded Controller; build it with `cargo build --release --features controller`, or set enableControllerInNamesrv=false";

/// No controller can be set up in this build (the type has no values).
#[derive(Debug, Clone)]
pub enum ControllerSetup {}

impl ControllerSetup {
    /// Refuses `enableControllerInNamesrv=true` with the reason; nothing to set up otherwise.
    pub fn from_config(
        namesrv: &NamesrvConfig,
        _lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<ControllerSetup>, String> {
        if namesrv.enable_controller_in_namesrv {
            Err(NOT_BUILT.to_owned())
        } else {
            Ok(None)
        }
    }

    pub fn describe(&self) -> Result<String, String> {
        match *self {}
    }
}

pub(super) enum ControllerPort {}

impl ControllerPort {
    pub(super) fn missing_setup() -> StartError {
        StartError::Controller(NOT_BUILT.to_owned())
    }

    pub(super) fn bind<H: Handler>(
        setup: ControllerSetup,
        _: &mut EventLoop<H>,
        _: &NamesrvConfig,
        _: SocketAddr,
    ) -> Result<ControllerPort, StartError> {
        match setup {}
    }

    pub(super) fn local_addr(&self) -> SocketAddr {
        match *self {}
    }

    pub(super) fn set_allow_lists(&mut self, _: &NamesrvConfig) {
        match *self {}
    }

    pub(super) fn write_metrics(&self, _: &mut crate::metrics::Exposition<'_>, _: u64) {
        match *self {}
    }

    pub(super) fn on_frame<C>(
        &mut self,
        _: &mut Ctx<C>,
        _: ConnId,
        _: &RemotingCommand,
        _: NameLimits,
    ) -> Next {
        match *self {}
    }

    pub(super) fn on_connected<C>(&mut self, _: &mut Ctx<C>, _: ConnId, _: io::Result<()>) {
        match *self {}
    }

    pub(super) fn on_close<C>(&mut self, _: &mut Ctx<C>, _: ConnId) {
        match *self {}
    }

    pub(super) fn on_timer<C: PeerConnData>(&mut self, _: &mut Ctx<C>, _: TimerId) -> bool {
        match *self {}
    }

    pub(super) fn before_sleep<C>(&mut self, _: &mut Ctx<C>) -> bool {
        match *self {}
    }

    pub(super) fn shutdown(self) {
        match self {}
    }
}
