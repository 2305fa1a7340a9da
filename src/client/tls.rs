//! TLS for the clients (`--tls` of `rmq-admin` and `rmq-bench`, Java's `tls.client.*` keys):
//! the options, the connector that runs a handshake over a connected socket, and the stream
//! the blocking [`Client`](super::Client) reads and writes.
//!
//! Like a Java client with `tls.enable=true`, the server's certificate is not verified unless
//! a trust file is given (`tls.client.trustCertPath` with `tls.client.authServer=true`); with
//! one, the chain must lead to it and the certificate must name the host (or IP) connected to.
//! A build without the `tls` feature refuses TLS with how to build it in.

use std::io;
use std::net::TcpStream;
use std::path::PathBuf;

/// What the tools print once when the server will not be verified.
pub const NO_VERIFY_WARNING: &str = "TLS without --tls-trust: the server's certificate is not \
     verified (as Java clients without tls.client.authServer=true)";

/// The client's TLS settings, as the tools' flags give them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// `--tls-trust` (`tls.client.trustCertPath`): CA certificates (PEM) the server's chain
    /// must lead to; None: the server is not verified.
    pub trust: Option<PathBuf>,
    /// `--tls-cert` and `--tls-key` (`tls.client.certPath`, `tls.client.keyPath`): this
    /// client's certificate chain and its unencrypted private key (PEM), for servers that
    /// require one.
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl TlsOptions {
    /// The options of `--tls` and its file flags; the files need `--tls`, and a certificate
    /// needs its key.
    pub fn from_flags(
        tls: bool,
        trust: Option<String>,
        cert: Option<String>,
        key: Option<String>,
    ) -> Result<Option<TlsOptions>, String> {
        if !tls {
            return match trust.is_some() || cert.is_some() || key.is_some() {
                true => Err("--tls-trust, --tls-cert and --tls-key need --tls".into()),
                false => Ok(None),
            };
        }
        let identity = match (cert, key) {
            (Some(cert), Some(key)) => Some((cert.into(), key.into())),
            (None, None) => None,
            _ => return Err("--tls-cert and --tls-key go together".into()),
        };
        let trust = trust.map(PathBuf::from);
        Ok(Some(TlsOptions { trust, identity }))
    }
}

/// The host part of `host:port` (brackets of an IPv6 address removed): the name the server's
/// certificate must carry.
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// A client TLS configuration, shared by every connection of a process.
#[cfg(feature = "tls")]
#[derive(Clone)]
pub struct TlsConnector(std::sync::Arc<rustls::ClientConfig>);

/// Without the `tls` feature no connector can exist ([`TlsOptions::connector`] says why).
#[cfg(not(feature = "tls"))]
#[derive(Clone)]
pub enum TlsConnector {}

/// The blocking client's connection: plain, or a TLS session over it.
pub(crate) enum Stream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            #[cfg(feature = "tls")]
            Stream::Tls(tls) => tls.get_ref(),
        }
    }
}

impl io::Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.read(buf),
            // A close without TLS's close_notify is a close: frames carry their own length.
            #[cfg(feature = "tls")]
            Stream::Tls(tls) => match tls.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                read => read,
            },
        }
    }
}

impl io::Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.write(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(tcp) => tcp.flush(),
            #[cfg(feature = "tls")]
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

#[cfg(not(feature = "tls"))]
impl TlsOptions {
    pub fn connector(&self) -> Result<TlsConnector, String> {
        Err("this build has no TLS: build it with `cargo build --release --features tls`".into())
    }
}

#[cfg(not(feature = "tls"))]
impl TlsConnector {
    pub(crate) fn stream(
        &self,
        _: &str,
        _: TcpStream,
        _: std::time::Duration,
    ) -> io::Result<Stream> {
        match *self {}
    }
}

#[cfg(feature = "tls")]
mod enabled {
    use super::{host_of, Stream, TlsConnector, TlsOptions};
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
    use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use std::io;
    use std::net::TcpStream;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    fn certificates(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
        let read = |e: rustls_pki_types::pem::Error| format!("{flag} {}: {e}", path.display());
        let certs = CertificateDer::pem_file_iter(path).map_err(read)?;
        let certs = certs.collect::<Result<Vec<_>, _>>().map_err(read)?;
        match certs.is_empty() {
            true => Err(format!(
                "{flag} {}: no PEM certificate in it",
                path.display()
            )),
            false => Ok(certs),
        }
    }

    impl TlsOptions {
        /// The configuration these options describe (files read and checked now).
        pub fn connector(&self) -> Result<TlsConnector, String> {
            let provider = Arc::new(ring::default_provider());
            let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS: {e}"))?;
            let builder = match &self.trust {
                Some(path) => {
                    let mut roots = RootCertStore::empty();
                    for ca in certificates("--tls-trust", path)? {
                        let bad = |e| format!("--tls-trust {}: {e}", path.display());
                        roots.add(ca).map_err(bad)?;
                    }
                    builder.with_root_certificates(roots)
                }
                None => builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyServer(provider))),
            };
            let config = match &self.identity {
                None => builder.with_no_client_auth(),
                Some((cert, key)) => {
                    let chain = certificates("--tls-cert", cert)?;
                    let key = PrivateKeyDer::from_pem_file(key)
                        .map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
                    builder
                        .with_client_auth_cert(chain, key)
                        .map_err(|e| format!("--tls-cert/--tls-key: {e}"))?
                }
            };
            Ok(TlsConnector(Arc::new(config)))
        }
    }

    impl TlsConnector {
        /// A TLS session with the server of `addr` (`host:port`) over `tcp`, its handshake
        /// done, each read and write of it within `timeout`.
        pub fn handshake(
            &self,
            addr: &str,
            tcp: &mut TcpStream,
            timeout: Duration,
        ) -> io::Result<ClientConnection> {
            let failed = |e: &dyn std::fmt::Display| {
                io::Error::other(format!("TLS handshake with {addr}: {e}"))
            };
            let name = ServerName::try_from(host_of(addr).to_string()).map_err(|e| failed(&e))?;
            let mut tls =
                ClientConnection::new(Arc::clone(&self.0), name).map_err(|e| failed(&e))?;
            tcp.set_read_timeout(Some(timeout))?;
            tcp.set_write_timeout(Some(timeout))?;
            while tls.is_handshaking() || tls.wants_write() {
                tls.complete_io(tcp).map_err(|e| failed(&e))?;
            }
            Ok(tls)
        }

        pub(crate) fn stream(
            &self,
            addr: &str,
            mut tcp: TcpStream,
            timeout: Duration,
        ) -> io::Result<Stream> {
            let tls = self.handshake(addr, &mut tcp, timeout)?;
            Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(tls, tcp))))
        }
    }

    /// Java's client without `tls.client.authServer`: any certificate is taken, while the
    /// handshake's signatures are still checked against it.
    #[derive(Debug)]
    struct AnyServer(Arc<CryptoProvider>);

    impl ServerCertVerifier for AnyServer {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            let algorithms = &self.0.signature_verification_algorithms;
            verify_tls12_signature(message, cert, dss, algorithms)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            let algorithms = &self.0.signature_verification_algorithms;
            verify_tls13_signature(message, cert, dss, algorithms)
        }

        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_files_need_tls_and_a_certificate_its_key() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(TlsOptions::from_flags(false, None, None, None), Ok(None));
        assert!(TlsOptions::from_flags(false, s("ca.pem"), None, None).is_err());
        assert!(TlsOptions::from_flags(true, None, s("c.pem"), None).is_err());
        let o = TlsOptions::from_flags(true, s("ca.pem"), s("c.pem"), s("k.pem")).unwrap();
        let o = o.unwrap();
        assert_eq!(o.trust, Some("ca.pem".into()));
        assert_eq!(o.identity, Some(("c.pem".into(), "k.pem".into())));
    }

    #[test]
    fn the_host_is_the_address_without_its_port() {
        assert_eq!(host_of("namesrv.example:9876"), "namesrv.example");
        assert_eq!(host_of("10.0.0.5:9876"), "10.0.0.5");
        assert_eq!(host_of("[::1]:9876"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn without_the_feature_tls_is_refused_with_how_to_build_it() {
        let e = TlsOptions::default().connector().err().unwrap();
        assert!(e.contains("--features tls"), "{e}");
    }
}
