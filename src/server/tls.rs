//! TLS on the server's ports (feature `tls`): Java's `tls.server.*` keys made into a rustls
//! `ServerConfig` for the name server's listener and the Controller's, and its reload. As
//! Java's file watcher, a reload happens once the certificate and the key have both changed,
//! or the trust file has; the files' times are polled on a loop timer. New connections get the
//! new material, open ones keep theirs; a file that does not load is logged and the material
//! in use stays.

use crate::config::{parse_properties, NamesrvConfig, SetOutcome};
use crate::event_loop::{Ctx, ListenerTag, TimerId, TlsAcceptor};
use log::{info, warn};
use rustls::crypto::ring;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use std::time::SystemTime;

pub(super) const RELOAD_TIMER: TimerId = TimerId(20);

/// How often the files' modification times are looked at (three `stat` calls).
const RELOAD_POLL_MS: u64 = 2_000;

const FILE_KEYS: [&str; 5] = [
    "tls.server.certPath",
    "tls.server.keyPath",
    "tls.server.keyPassword",
    "tls.server.trustCertPath",
    "tls.server.need.client.auth",
];

#[derive(Debug, Clone)]
struct Files {
    cert: String,
    key: String,
    trust: String,
    client_auth: String,
}

pub(super) struct TlsPorts {
    files: Files,
    enforcing: bool,
    listeners: Vec<ListenerTag>,
    /// Modification times of the certificate, key and trust files as last seen.
    seen: [Option<SystemTime>; 3],
    cert_changed: bool,
    key_changed: bool,
    acceptor: TlsAcceptor,
}

impl TlsPorts {
    /// `None` with `tls.server.mode=disabled`; an error names the key or the file at fault.
    pub(super) fn from_config(config: &NamesrvConfig) -> Result<Option<TlsPorts>, String> {
        let mode = config.tls_server_mode.as_str();
        if mode == "disabled" {
            return Ok(None);
        }
        let config = with_tls_file(config)?;
        if config.tls_server_cert_path.is_empty() || config.tls_server_key_path.is_empty() {
            return Err(format!("tls.server.mode={mode} needs tls.server.certPath and tls.server.keyPath (PEM files)"));
        }
        let auth = config.tls_server_need_client_auth.clone();
        if auth != "none" && config.tls_server_trust_cert_path.is_empty() {
            return Err(format!("tls.server.need.client.auth={auth} needs tls.server.trustCertPath (the PEM certificates client certificates are checked against)"));
        }
        let files = Files {
            cert: config.tls_server_cert_path.clone(),
            key: config.tls_server_key_path.clone(),
            trust: config.tls_server_trust_cert_path.clone(),
            client_auth: auth,
        };
        let enforcing = mode == "enforcing";
        let seen = files.modified();
        let acceptor = TlsAcceptor {
            config: load(&files)?,
            enforcing,
        };
        Ok(Some(TlsPorts {
            files,
            enforcing,
            listeners: Vec::new(),
            seen,
            cert_changed: false,
            key_changed: false,
            acceptor,
        }))
    }

    /// `listeners` speak TLS from now on; the reload poll starts.
    pub(super) fn start<C>(&mut self, ctx: &mut Ctx<C>, listeners: &[ListenerTag]) {
        self.listeners = listeners.to_vec();
        for tag in listeners {
            ctx.set_tls(*tag, Some(self.acceptor.clone()));
        }
        let mode = if self.enforcing {
            "enforcing"
        } else {
            "permissive"
        };
        info!(
            "TLS {mode} on {} listener(s): certificate {}, client authentication {}",
            listeners.len(),
            self.files.cert,
            self.files.client_auth
        );
        ctx.set_timer(RELOAD_TIMER, ctx.now_ms() + RELOAD_POLL_MS);
    }

    /// The reload poll.
    pub(super) fn on_timer<C>(&mut self, ctx: &mut Ctx<C>) {
        ctx.set_timer(RELOAD_TIMER, ctx.now_ms() + RELOAD_POLL_MS);
        let now = self.files.modified();
        if now == self.seen {
            return;
        }
        self.cert_changed |= now[0] != self.seen[0];
        self.key_changed |= now[1] != self.seen[1];
        let trust_changed = now[2] != self.seen[2];
        self.seen = now;
        if !(trust_changed || self.cert_changed && self.key_changed) {
            return;
        }
        match load(&self.files) {
            Ok(config) => {
                self.acceptor.config = config;
                for tag in &self.listeners {
                    ctx.set_tls(*tag, Some(self.acceptor.clone()));
                }
                (self.cert_changed, self.key_changed) = (false, false);
                info!(
                    "TLS material reloaded from {}: new connections use it",
                    self.files.cert
                );
            }
            // The flags stay: the next change of either file tries again.
            Err(e) => warn!("TLS material not reloaded, the current one stays in use: {e}"),
        }
    }
}

impl Files {
    fn modified(&self) -> [Option<SystemTime>; 3] {
        [&self.cert, &self.key, &self.trust]
            .map(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
    }
}

/// `tls.config.file`'s server keys, where the config file and the command line left the
/// default (an absent file is skipped, as Java does).
fn with_tls_file(config: &NamesrvConfig) -> Result<NamesrvConfig, String> {
    let path = &config.tls_config_file;
    let mut merged = config.clone();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(merged),
        Err(e) => return Err(format!("tls.config.file {path}: {e}")),
    };
    let entries = parse_properties(&text).map_err(|e| format!("tls.config.file {path}: {e}"))?;
    for (key, value) in entries {
        let left_default = config.get(&key) == NamesrvConfig::default_text(&key);
        if FILE_KEYS.contains(&key.as_str()) && left_default {
            if let SetOutcome::Invalid(reason) = merged.set(&key, &value) {
                return Err(format!("tls.config.file {path}: {reason}"));
            }
        }
    }
    Ok(merged)
}

fn load(files: &Files) -> Result<Arc<ServerConfig>, String> {
    let read = |key: &str, path: &str| {
        std::fs::read(path).map_err(|e| format!("{key} {path}: cannot read it: {e}"))
    };
    let pem = read("tls.server.certPath", &files.cert)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("tls.server.certPath {}: {e}", files.cert))?;
    if certs.is_empty() {
        return Err(format!(
            "tls.server.certPath {}: no CERTIFICATE in it",
            files.cert
        ));
    }
    let pem = read("tls.server.keyPath", &files.key)?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        if pem.windows(9).any(|w| w == b"ENCRYPTED") {
            format!("tls.server.keyPath {}: the key is encrypted; rmq-namesrv reads unencrypted PEM keys only (decrypt it once with `openssl pkcs8 -in {} -out key.pem`)", files.key, files.key)
        } else {
            format!("tls.server.keyPath {}: no private key in it ({e})", files.key)
        }
    })?;
    let provider = Arc::new(ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match files.client_auth.as_str() {
        "none" => builder.with_no_client_auth(),
        auth => {
            let pem = read("tls.server.trustCertPath", &files.trust)?;
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert =
                    cert.map_err(|e| format!("tls.server.trustCertPath {}: {e}", files.trust))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("tls.server.trustCertPath {}: {e}", files.trust))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match auth {
                "optional" => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("tls.server.trustCertPath {}: {e}", files.trust))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| {
        format!(
            "tls.server.certPath {} with tls.server.keyPath {}: {e}",
            files.cert, files.key
        )
    })?;
    Ok(Arc::new(config))
}
