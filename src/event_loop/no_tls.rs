//! TLS in a build without the `tls` feature: the types have no values, so a connection's
//! `Option<Tls>` is always `None` (and takes no room) and the compiler drops the TLS branches.

use super::ListenerTag;
use bytes::BytesMut;
use mio::net::TcpStream;
use std::io;

/// How a listener's connections speak TLS (none can in this build).
#[derive(Clone)]
pub enum TlsAcceptor {}

pub(super) enum Tls {}

impl Tls {
    pub(super) fn for_listener(_: &[(ListenerTag, TlsAcceptor)], _: ListenerTag) -> Option<Tls> {
        None
    }

    pub(super) fn established(&self) -> bool {
        match *self {}
    }

    pub(super) fn mid_handshake(&self) -> bool {
        match *self {}
    }

    pub(super) fn unsent(&self) -> usize {
        match *self {}
    }

    pub(super) fn footprint(&self) -> usize {
        match *self {}
    }

    pub(super) fn read(
        &mut self,
        _: &mut TcpStream,
        _: &mut BytesMut,
        _: usize,
    ) -> io::Result<Option<usize>> {
        match *self {}
    }

    pub(super) fn write(&mut self, _: &mut TcpStream, _: &[u8]) -> io::Result<usize> {
        match *self {}
    }

    pub(super) fn send(&mut self, _: &mut TcpStream) -> io::Result<()> {
        match *self {}
    }
}
