//! The clients over TLS (feature `tls`): the library's `Client`, `rmq-admin --tls` and
//! `rmq-bench --tls` reach a real server through a TLS-terminating proxy made here (rustls,
//! certificates from rcgen per test), which forwards the plaintext to the server's port.
//! Without `--tls-trust` any certificate is taken (Java's default); with it the chain and the
//! name are checked; a proxy that requires client certificates gets the one of `--tls-cert`.
#![cfg(feature = "tls")]

#[path = "common/admin_run.rs"]
mod admin_run;
mod common;

use admin_run::{admin_env, ok, Run};
use common::{body_with, register, route_data, topic, Broker, TempDir, TestServer};
use rcgen::{BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair};
use rmq_namesrv::client::{Client, TlsOptions};
use rmq_namesrv::remoting::json::{self, Value};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);

/// A CA and the PEM files the tests hand out: the CA's, a client certificate and key signed
/// by it, and another CA's (the wrong one).
struct Pki {
    dir: TempDir,
    ca: Certificate,
    ca_key: KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let dir = TempDir::new("tls");
        let (ca, ca_key) = Pki::authority("test CA");
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        let (other, _) = Pki::authority("another CA");
        std::fs::write(dir.join("other-ca.pem"), other.pem()).unwrap();
        let pki = Pki { dir, ca, ca_key };
        let (cert, key) = pki.issue(&[]);
        std::fs::write(pki.dir.join("client.pem"), cert.pem()).unwrap();
        std::fs::write(pki.dir.join("client.key"), key.serialize_pem()).unwrap();
        pki
    }

    fn authority(name: &str) -> (Certificate, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        (params.self_signed(&key).unwrap(), key)
    }

    /// A certificate for `names` (host names or IPs) signed by the CA.
    fn issue(&self, names: &[&str]) -> (Certificate, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = CertificateParams::new(names).unwrap();
        (params.signed_by(&key, &self.ca, &self.ca_key).unwrap(), key)
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }
}

/// Accepts TLS on an ephemeral loopback port and forwards the plaintext of each connection to
/// `upstream` (and back). Counts the connections whose client presented a certificate.
struct TlsProxy {
    addr: String,
    client_certs: Arc<AtomicUsize>,
}

impl TlsProxy {
    /// A proxy whose certificate names `names`; with `require_client_cert`, clients must
    /// present a certificate of the PKI's CA.
    fn start(pki: &Pki, names: &[&str], upstream: &str, require_client_cert: bool) -> TlsProxy {
        let (cert, key) = pki.issue(names);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if require_client_cert {
            let mut roots = RootCertStore::empty();
            roots.add(pki.ca.der().clone()).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider);
            builder.with_client_cert_verifier(verifier.build().unwrap())
        } else {
            builder.with_no_client_auth()
        };
        let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let config = Arc::new(builder.with_single_cert(chain, key).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let client_certs = Arc::new(AtomicUsize::new(0));
        let (upstream, counter) = (upstream.to_string(), Arc::clone(&client_certs));
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (config, upstream) = (Arc::clone(&config), upstream.clone());
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    let _ = forward(config, tcp, &upstream, &counter);
                });
            }
        });
        TlsProxy { addr, client_certs }
    }
}

/// One proxied connection: the handshake, then a thread each way over one shared session.
fn forward(
    config: Arc<ServerConfig>,
    mut tcp: TcpStream,
    upstream: &str,
    client_certs: &AtomicUsize,
) -> io::Result<()> {
    let mut session = ServerConnection::new(config).map_err(io::Error::other)?;
    while session.is_handshaking() {
        session.complete_io(&mut tcp)?;
    }
    if session.peer_certificates().is_some() {
        client_certs.fetch_add(1, Ordering::SeqCst);
    }
    let server = TcpStream::connect(upstream)?;
    let session = Arc::new(Mutex::new(session));
    let (mut tcp_out, mut server_in) = (tcp.try_clone()?, server.try_clone()?);
    let back = Arc::clone(&session);
    std::thread::spawn(move || -> io::Result<()> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = server_in.read(&mut buf)?;
            let mut s = back.lock().unwrap();
            if n == 0 {
                s.send_close_notify();
            } else {
                s.writer().write_all(&buf[..n])?;
            }
            while s.wants_write() {
                s.write_tls(&mut tcp_out)?;
            }
            if n == 0 {
                return Ok(());
            }
        }
    });
    let (mut server_out, mut buf) = (server, [0u8; 16 * 1024]);
    // The handshake may have read the first request with the client's last handshake message.
    let mut n = 0;
    loop {
        let mut plain = Vec::new();
        let mut s = session.lock().unwrap();
        let mut ciphertext = &buf[..n];
        let _ = s.reader().read_to_end(&mut plain);
        while !ciphertext.is_empty() {
            s.read_tls(&mut ciphertext)?;
            s.process_new_packets().map_err(io::Error::other)?;
            let _ = s.reader().read_to_end(&mut plain);
        }
        while s.wants_write() {
            s.write_tls(&mut tcp)?;
        }
        drop(s);
        server_out.write_all(&plain)?;
        n = tcp.read(&mut buf)?;
        if n == 0 {
            return server_out.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn connect(addr: &str, options: &TlsOptions) -> io::Result<Client> {
    let connector = options.connector().expect("TLS options");
    Client::connect_with(addr, TIMEOUT, Some(&connector))
}

fn trusting(pki: &Pki, ca: &str) -> TlsOptions {
    TlsOptions {
        trust: Some(PathBuf::from(pki.path(ca))),
        identity: None,
    }
}

/// A broker with `topic` registered over `client`; its route read back over it.
fn register_and_route(client: &mut Client, topic_name: &str) -> Vec<String> {
    let broker = Broker::new("C1", "broker-tls", "127.0.0.1:10911", 0);
    let reply = register(client, &broker, &body_with(1, &[topic(topic_name, 4, 6)]));
    assert_eq!(reply.code, 0, "{:?}", reply.remark);
    let route = route_data(client, topic_name).expect("route");
    route
        .broker_datas
        .iter()
        .map(|b| b.broker_name.clone())
        .collect()
}

#[test]
fn the_client_library_makes_requests_over_tls_without_verifying_by_default() {
    let (server, pki) = (TestServer::start(), Pki::new());
    let proxy = TlsProxy::start(&pki, &["somewhere.else"], &server.addr, false);
    let mut client = connect(&proxy.addr, &TlsOptions::default()).expect("TLS connect");
    assert_eq!(register_and_route(&mut client, "TopicTls"), ["broker-tls"]);
    // The same route, read over plain TCP from the server itself.
    assert!(route_data(&mut server.client(), "TopicTls").is_some());
    assert_eq!(proxy.client_certs.load(Ordering::SeqCst), 0);
}

#[test]
fn a_trust_file_verifies_the_server_certificate_and_its_name() {
    let (server, pki) = (TestServer::start(), Pki::new());
    let proxy = TlsProxy::start(&pki, &["localhost", "127.0.0.1"], &server.addr, false);
    let mut client = connect(&proxy.addr, &trusting(&pki, "ca.pem")).expect("verified");
    assert_eq!(register_and_route(&mut client, "TopicV"), ["broker-tls"]);

    let wrong_ca = connect(&proxy.addr, &trusting(&pki, "other-ca.pem")).err();
    let e = wrong_ca.expect("another CA's trust file fails").to_string();
    assert!(
        e.contains("TLS handshake with") && e.contains("UnknownIssuer"),
        "{e}"
    );

    let elsewhere = TlsProxy::start(&pki, &["namesrv.example"], &server.addr, false);
    let wrong_name = connect(&elsewhere.addr, &trusting(&pki, "ca.pem")).err();
    let e = wrong_name
        .expect("a certificate for another name fails")
        .to_string();
    assert!(e.contains("not valid for name"), "{e}");
}

#[test]
fn a_client_certificate_is_presented_to_a_server_that_requires_one() {
    let (server, pki) = (TestServer::start(), Pki::new());
    let proxy = TlsProxy::start(&pki, &["127.0.0.1"], &server.addr, true);
    let options = TlsOptions {
        identity: Some((pki.path("client.pem").into(), pki.path("client.key").into())),
        ..trusting(&pki, "ca.pem")
    };
    let mut client = connect(&proxy.addr, &options).expect("mutual TLS");
    assert_eq!(register_and_route(&mut client, "TopicM"), ["broker-tls"]);
    assert_eq!(proxy.client_certs.load(Ordering::SeqCst), 1);
    // Without one the server ends the session (in TLS 1.3 after the client's handshake).
    let refused = connect(&proxy.addr, &trusting(&pki, "ca.pem"))
        .and_then(|mut c| c.stats().map_err(|e| io::Error::other(e.to_string())));
    assert!(
        refused.is_err(),
        "a client without a certificate was served"
    );
}

/// `rmq-admin -n <addr> <args>`.
fn admin(addr: &str, args: &[&str]) -> Run {
    let mut all = vec!["-n", addr];
    all.extend_from_slice(args);
    admin_env(&all, None)
}

#[test]
fn rmq_admin_runs_commands_over_tls() {
    let (server, pki) = (TestServer::start(), Pki::new());
    let mut broker = server.client();
    assert_eq!(
        register_and_route(&mut broker, "TopicAdmin"),
        ["broker-tls"]
    );
    let proxy = TlsProxy::start(&pki, &["127.0.0.1"], &server.addr, false);

    let run = admin(&proxy.addr, &["--tls", "topicRoute", "-t", "TopicAdmin"]);
    assert!(ok(&run).contains("broker-tls"), "{}", run.stdout);
    assert!(run.stderr.contains("not verified"), "{}", run.stderr);

    let ca = pki.path("ca.pem");
    let run = admin(
        &proxy.addr,
        &["--tls", "--tls-trust", &ca, "--json", "clusterList"],
    );
    assert!(ok(&run).contains("broker-tls"), "{}", run.stdout);
    assert!(!run.stderr.contains("not verified"), "{}", run.stderr);

    let other = pki.path("other-ca.pem");
    let run = admin(
        &proxy.addr,
        &["--tls", "--tls-trust", &other, "clusterList"],
    );
    assert_eq!(run.code, 3, "unreachable: {}", run.stderr);
    assert!(run.stderr.contains("UnknownIssuer"), "{}", run.stderr);

    let mutual = TlsProxy::start(&pki, &["127.0.0.1"], &server.addr, true);
    let (cert, key) = (pki.path("client.pem"), pki.path("client.key"));
    let with_cert = [
        "--tls",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "clusterList",
    ];
    assert!(ok(&admin(&mutual.addr, &with_cert)).contains("broker-tls"));
    assert_eq!(mutual.client_certs.load(Ordering::SeqCst), 1);
    let missing = admin(
        &proxy.addr,
        &["--tls", "--tls-trust", "/nonexistent.pem", "stats"],
    );
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("/nonexistent.pem"),
        "{}",
        missing.stderr
    );
}

/// `rmq-bench <args> --tls --json --quiet`: its JSON result.
fn bench_over_tls(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_rmq-bench"))
        .args(args)
        .args(["--tls", "--json", "--quiet"])
        .output()
        .expect("rmq-bench runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{args:?}: {stdout}\n{stderr}");
    json::parse(stdout.trim().as_bytes()).expect("JSON result")
}

fn number(v: &Value, key: &str) -> f64 {
    match v.get(key) {
        Some(Value::Int(n)) => *n as f64,
        Some(Value::Float(n)) => *n,
        other => panic!("{key}: {other:?} in {}", v.to_text()),
    }
}

#[test]
fn rmq_bench_measures_route_heartbeat_and_register_throughput_over_tls() {
    let (server, pki) = (TestServer::start(), Pki::new());
    let proxy = TlsProxy::start(&pki, &["127.0.0.1"], &server.addr, false);
    let ca = pki.path("ca.pem");
    // Registrations of 400 topics (about 75 KB) span many TLS records and partial writes.
    for (workload, topics) in [("route", "10"), ("heartbeat", "10"), ("register", "400")] {
        let mut args = vec![workload, "-n", &proxy.addr, "--tls-trust", &ca];
        args.extend_from_slice(&["--brokers", "4", "--topics", topics, "--clients", "4"]);
        args.extend_from_slice(&["-d", "1"]);
        let v = bench_over_tls(&args);
        assert_eq!(number(&v, "errors"), 0.0, "{workload}: {}", v.to_text());
        assert!(number(&v, "ops_per_s") > 0.0, "{workload}: {}", v.to_text());
    }
}
