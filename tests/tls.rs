//! TLS on the name server's port (feature `tls`): permissive and enforcing modes, client
//! certificates, a reload, handshakes that never finish, and Debian's `openssl s_client`.
#![cfg(feature = "tls")]

#[path = "common/child.rs"]
mod child;
mod common;

use child::ServerProcess;
use common::{request_frame, start, test_config, wait_until, ServerHandle, TempDir};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rmq_namesrv::config::{NamesrvConfig, SetOutcome};
use rmq_namesrv::remoting::codes::request;
use rmq_namesrv::remoting::command::{DecodeLimits, RemotingCommand};
use rmq_namesrv::server::StartError;
use rustls::crypto::ring;
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// A CA and what it signed, written as PEM files in a temporary folder.
struct Pki {
    dir: TempDir,
    ca: Certificate,
    ca_key: KeyPair,
}

/// A certificate signed by the test CA and its key.
struct Signed {
    cert: Certificate,
    key: KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "test CA");
        let ca = params.self_signed(&ca_key).unwrap();
        let dir = TempDir::new("tls");
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        Pki { dir, ca, ca_key }
    }

    fn sign(&self, usage: ExtendedKeyUsagePurpose) -> Signed {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        Signed { cert, key }
    }

    /// A new server certificate and key, written over the served ones.
    fn write_server(&self) -> Signed {
        let server = self.sign(ExtendedKeyUsagePurpose::ServerAuth);
        std::fs::write(self.path("server.pem"), server.cert.pem()).unwrap();
        std::fs::write(self.path("server.key"), server.key.serialize_pem()).unwrap();
        server
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// A test server's config with TLS in `mode` and client authentication `auth`.
    fn config(&self, dir: &TempDir, mode: &str, auth: &str) -> NamesrvConfig {
        NamesrvConfig {
            tls_server_mode: mode.into(),
            tls_server_cert_path: self.path("server.pem"),
            tls_server_key_path: self.path("server.key"),
            tls_server_trust_cert_path: self.path("ca.pem"),
            tls_server_need_client_auth: auth.into(),
            tls_config_file: self.path("absent-tls.properties"),
            ..test_config(dir.path())
        }
    }

    /// A rustls client trusting the test CA, with `identity` as its certificate.
    fn client(&self, identity: Option<&Signed>) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let builder = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        Arc::new(match identity {
            Some(id) => {
                let key = PrivateKeyDer::Pkcs8(id.key.serialize_der().into());
                builder
                    .with_client_auth_cert(vec![id.cert.der().clone()], key)
                    .unwrap()
            }
            None => builder.with_no_client_auth(),
        })
    }
}

type TlsStream = StreamOwned<ClientConnection, TcpStream>;

fn connect_tls(addr: &str, config: &Arc<ClientConfig>) -> TlsStream {
    let name = ServerName::try_from("localhost").unwrap();
    let conn = ClientConnection::new(config.clone(), name).unwrap();
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    StreamOwned::new(conn, sock)
}

/// One answer frame off `r`.
fn read_answer(r: &mut impl Read) -> std::io::Result<RemotingCommand> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
    r.read_exact(&mut frame)?;
    Ok(RemotingCommand::decode(frame.into(), &DecodeLimits::default()).expect("decodes"))
}

/// A route lookup (for a topic nobody has: TOPIC_NOT_EXIST) and its answer.
fn ask_route(s: &mut (impl Read + Write), opaque: i32) -> std::io::Result<RemotingCommand> {
    let frame = request_frame(
        request::GET_ROUTEINFO_BY_TOPIC,
        opaque,
        &[("topic", "T")],
        b"",
    );
    s.write_all(&frame)?;
    s.flush()?;
    let answer = read_answer(s)?;
    assert_eq!(answer.opaque, opaque);
    assert_eq!(answer.code, 17, "TOPIC_NOT_EXIST");
    Ok(answer)
}

fn served_certificate(s: &TlsStream) -> CertificateDer<'static> {
    s.conn.peer_certificates().unwrap()[0].clone().into_owned()
}

fn tls_server(pki: &Pki, mode: &str, auth: &str) -> (ServerHandle, String, TempDir) {
    common::init_test_log();
    let dir = TempDir::new("tls-srv");
    let handle = start(pki.config(&dir, mode, auth)).expect("server starts");
    let addr = handle.local_addr().to_string();
    (handle, addr, dir)
}

#[test]
fn a_permissive_port_serves_a_tls_client_and_a_plain_client_at_once() {
    let pki = Pki::new();
    let served = pki.write_server();
    let (_server, addr, _dir) = tls_server(&pki, "permissive", "none");
    let mut tls = connect_tls(&addr, &pki.client(None));
    let mut plain = TcpStream::connect(&addr).unwrap();
    for opaque in 1..=3 {
        ask_route(&mut tls, opaque).unwrap();
        ask_route(&mut plain, opaque).unwrap();
    }
    assert_eq!(&served_certificate(&tls), served.cert.der());
}

/// The start error `config` gives.
fn start_error(config: NamesrvConfig) -> String {
    match start(config) {
        Err(e @ StartError::Tls(_)) => e.to_string(),
        Err(e) => panic!("expected a TLS start error, got {e}"),
        Ok(_) => panic!("started with bad TLS material"),
    }
}

#[test]
fn bad_material_is_a_start_error_naming_the_key_and_the_file() {
    let pki = Pki::new();
    pki.write_server();
    let dir = TempDir::new("tls-bad");
    let missing = NamesrvConfig {
        tls_server_cert_path: pki.path("nowhere.pem"),
        ..pki.config(&dir, "enforcing", "none")
    };
    let e = start_error(missing);
    assert!(
        e.contains("tls.server.certPath") && e.contains("nowhere.pem"),
        "{e}"
    );
    std::fs::write(
        pki.path("enc.key"),
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG\n-----END ENCRYPTED PRIVATE KEY-----\n",
    )
    .unwrap();
    let encrypted = NamesrvConfig {
        tls_server_key_path: pki.path("enc.key"),
        ..pki.config(&dir, "permissive", "none")
    };
    let e = start_error(encrypted);
    assert!(e.contains("enc.key") && e.contains("encrypted"), "{e}");
    std::fs::write(
        pki.path("other.key"),
        KeyPair::generate().unwrap().serialize_pem(),
    )
    .unwrap();
    let mismatched = NamesrvConfig {
        tls_server_key_path: pki.path("other.key"),
        ..pki.config(&dir, "enforcing", "none")
    };
    let e = start_error(mismatched);
    assert!(e.contains("server.pem") && e.contains("other.key"), "{e}");
    let no_trust = NamesrvConfig {
        tls_server_trust_cert_path: String::new(),
        ..pki.config(&dir, "enforcing", "require")
    };
    assert!(start_error(no_trust).contains("tls.server.trustCertPath"));
    let mut config = NamesrvConfig::default();
    match config.set("tls.server.keyPassword", "secret") {
        SetOutcome::Invalid(why) => assert!(why.contains("unencrypted"), "{why}"),
        other => panic!("a key password was taken: {other:?}"),
    }
}

#[test]
fn the_tls_config_file_fills_in_what_the_config_left_at_its_defaults() {
    let pki = Pki::new();
    let served = pki.write_server();
    let dir = TempDir::new("tls-file");
    let file = pki.path("tls.properties");
    std::fs::write(
        &file,
        format!(
            "tls.server.certPath={}\ntls.server.keyPath={}\ntls.server.need.client.auth=require\ntls.client.keyPath=/ignored\n",
            pki.path("server.pem"),
            pki.path("server.key")
        ),
    )
    .unwrap();
    let config = NamesrvConfig {
        tls_server_cert_path: String::new(),
        tls_server_key_path: String::new(),
        tls_server_need_client_auth: "optional".into(),
        tls_config_file: file,
        ..pki.config(&dir, "enforcing", "none")
    };
    let server = start(config).expect("server starts");
    let addr = server.local_addr().to_string();
    // `optional` from the config stays: a client without a certificate is served.
    let mut tls = connect_tls(&addr, &pki.client(None));
    ask_route(&mut tls, 1).unwrap();
    assert_eq!(&served_certificate(&tls), served.cert.der());
}

#[test]
fn an_enforcing_port_closes_a_plain_client_and_logs_why() {
    let pki = Pki::new();
    pki.write_server();
    let dir = TempDir::new("tls-enforcing");
    let conf = dir.join("namesrv.conf").to_string_lossy().into_owned();
    std::fs::write(&conf, "").unwrap();
    let args: Vec<String> = [
        "-c".to_string(),
        conf,
        "--bindAddress=127.0.0.1".into(),
        "--listenPort=0".into(),
        format!("--kvConfigPath={}", dir.join("kv.json").display()),
        "--logPath=".into(),
        "--tls.server.mode=enforcing".into(),
        format!("--tls.server.certPath={}", pki.path("server.pem")),
        format!("--tls.server.keyPath={}", pki.path("server.key")),
        format!("--tls.config.file={}", pki.path("absent")),
    ]
    .to_vec();
    let mut server = ServerProcess::spawn_with_stderr(&args, Stdio::piped());
    let (lines, log) = mpsc::channel();
    let stderr = server.child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut plain = TcpStream::connect(&server.addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let local = plain.local_addr().unwrap().to_string();
    assert!(
        ask_route(&mut plain, 1).is_err(),
        "a plain client is served"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let logged = std::iter::from_fn(|| log.recv_timeout(deadline - Instant::now()).ok())
        .find(|l| l.contains(&local) && l.contains("tls.server.mode=enforcing"));
    assert!(logged.is_some(), "no line about {local}");
    // TLS clients are served.
    let mut tls = connect_tls(&server.addr, &pki.client(None));
    ask_route(&mut tls, 2).unwrap();
}

#[test]
fn require_refuses_a_client_without_a_certificate_and_serves_one_signed_by_the_trust_file() {
    let pki = Pki::new();
    pki.write_server();
    let (_server, addr, _dir) = tls_server(&pki, "enforcing", "require");
    let mut anonymous = connect_tls(&addr, &pki.client(None));
    assert!(
        ask_route(&mut anonymous, 1).is_err(),
        "served without a certificate"
    );
    let stranger = Pki::new().sign(ExtendedKeyUsagePurpose::ClientAuth);
    let mut untrusted = connect_tls(&addr, &pki.client(Some(&stranger)));
    assert!(
        ask_route(&mut untrusted, 2).is_err(),
        "served an unknown CA's client"
    );
    let signed = pki.sign(ExtendedKeyUsagePurpose::ClientAuth);
    let mut trusted = connect_tls(&addr, &pki.client(Some(&signed)));
    ask_route(&mut trusted, 3).unwrap();
}

#[test]
fn optional_client_authentication_serves_clients_with_and_without_a_certificate() {
    let pki = Pki::new();
    pki.write_server();
    let (_server, addr, _dir) = tls_server(&pki, "enforcing", "optional");
    ask_route(&mut connect_tls(&addr, &pki.client(None)), 1).unwrap();
    let signed = pki.sign(ExtendedKeyUsagePurpose::ClientAuth);
    ask_route(&mut connect_tls(&addr, &pki.client(Some(&signed))), 2).unwrap();
}

#[test]
fn a_reload_serves_the_new_certificate_to_new_connections_while_old_ones_keep_working() {
    let pki = Pki::new();
    let first = pki.write_server();
    let (_server, addr, _dir) = tls_server(&pki, "enforcing", "none");
    let client = pki.client(None);
    let mut old = connect_tls(&addr, &client);
    ask_route(&mut old, 1).unwrap();
    assert_eq!(&served_certificate(&old), first.cert.der());
    // A certificate alone is not enough (as Java: both files, or the trust file).
    let second = pki.sign(ExtendedKeyUsagePurpose::ServerAuth);
    std::fs::write(pki.path("server.pem"), second.cert.pem()).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let mut between = connect_tls(&addr, &client);
    ask_route(&mut between, 2).unwrap();
    assert_eq!(&served_certificate(&between), first.cert.der());
    // A bad key leaves the old material in use.
    std::fs::write(pki.path("server.key"), "not a key").unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let mut still = connect_tls(&addr, &client);
    ask_route(&mut still, 3).unwrap();
    assert_eq!(&served_certificate(&still), first.cert.der());
    std::fs::write(pki.path("server.key"), second.key.serialize_pem()).unwrap();
    let swapped = wait_until(Duration::from_secs(15), || {
        let mut fresh = connect_tls(&addr, &client);
        ask_route(&mut fresh, 4).unwrap();
        &served_certificate(&fresh) == second.cert.der()
    });
    assert!(swapped, "the new certificate was never served");
    ask_route(&mut old, 5).unwrap();
    assert_eq!(&served_certificate(&old), first.cert.der());
}

/// The first flight of a real TLS client (its ClientHello).
fn client_hello(pki: &Pki) -> Vec<u8> {
    let name = ServerName::try_from("localhost").unwrap();
    let mut conn = ClientConnection::new(pki.client(None), name).unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    hello
}

/// True once the server closes `s` (EOF or reset) within `wait`.
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut scratch = [0u8; 4096];
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        match s.read(&mut scratch) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
    false
}

#[test]
fn truncated_stalled_and_garbled_handshakes_are_closed_by_the_existing_limits() {
    let pki = Pki::new();
    pki.write_server();
    common::init_test_log();
    let dir = TempDir::new("tls-srv");
    let config = NamesrvConfig {
        frame_read_timeout_millis: 1_000,
        ..pki.config(&dir, "permissive", "none")
    };
    let server = start(config).expect("server starts");
    let addr = server.local_addr().to_string();
    let hello = client_hello(&pki);
    let began = Instant::now();
    let mut truncated = TcpStream::connect(&addr).unwrap();
    truncated.write_all(&hello[..hello.len() / 2]).unwrap();
    let mut stalled = TcpStream::connect(&addr).unwrap();
    stalled.write_all(&hello).unwrap();
    let mut garbled = TcpStream::connect(&addr).unwrap();
    let mut garbage = vec![0x16, 0x03, 0x01, 0x00, 0x40];
    garbage.extend((0..64u8).map(|i| i.wrapping_mul(37)));
    garbled.write_all(&garbage).unwrap();
    for (what, s) in [
        ("garbage after 0x16", &mut garbled),
        ("a truncated ClientHello", &mut truncated),
        ("a stalled handshake", &mut stalled),
    ] {
        assert!(
            closed_within(s, Duration::from_secs(10)),
            "{what} stayed open"
        );
    }
    assert!(
        began.elapsed() >= Duration::from_millis(900),
        "the frame timeout closed them, not something sooner"
    );
    // Meanwhile the port serves.
    ask_route(&mut connect_tls(&addr, &pki.client(None)), 1).unwrap();
}

#[test]
fn openssl_s_client_sends_a_remoting_frame_over_tls_and_reads_the_answer() {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("SKIPPED: no openssl binary here (apt-get install -y openssl)");
        return;
    }
    let pki = Pki::new();
    pki.write_server();
    let (_server, addr, _dir) = tls_server(&pki, "enforcing", "none");
    let mut s_client = Command::new("openssl")
        .args([
            "s_client",
            "-quiet",
            "-verify_return_error",
            "-connect",
            &addr,
        ])
        .args(["-servername", "localhost", "-CAfile", &pki.path("ca.pem")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run openssl s_client");
    let frame = request_frame(request::GET_ROUTEINFO_BY_TOPIC, 7, &[("topic", "T")], b"");
    let mut stdin = s_client.stdin.take().unwrap();
    stdin.write_all(&frame).unwrap();
    stdin.flush().unwrap();
    let mut stdout = s_client.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(read_answer(&mut stdout).map(|a| (a.opaque, a.code)));
    });
    let answer = rx.recv_timeout(Duration::from_secs(20));
    let _ = s_client.kill();
    let _ = s_client.wait();
    drop(stdin);
    assert_eq!(answer.expect("an answer in time").unwrap(), (7, 17));
}

/// With `--features controller,tls`: the Controller's port takes the same mode and material.
#[cfg(feature = "controller")]
#[test]
fn the_controller_port_speaks_tls_too() {
    use rmq_namesrv::server::ControllerSetup;
    let pki = Pki::new();
    let served = pki.write_server();
    let dir = TempDir::new("tls-ctrl");
    let store = dir.join("controller").to_string_lossy().into_owned();
    let pairs = [
        ("controllerDLegerGroup", "group1".to_string()),
        ("controllerDLegerPeers", "n0-127.0.0.1:0".to_string()),
        ("controllerDLegerSelfId", "n0".to_string()),
        ("controllerStorePath", store),
    ];
    let lookup = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
    };
    let mut config = pki.config(&dir, "enforcing", "none");
    config.enable_controller_in_namesrv = true;
    let setup = ControllerSetup::from_config(&config, &lookup).expect("controller settings");
    let server = common::start_with_controller(config, setup).expect("server starts");
    let addr = server
        .controller_addr()
        .expect("controller port")
        .to_string();
    let mut tls = connect_tls(&addr, &pki.client(None));
    // GET_CONTROLLER_METADATA_INFO (1005).
    tls.write_all(&request_frame(1005, 3, &[], b"")).unwrap();
    let answer = read_answer(&mut tls).unwrap();
    assert_eq!((answer.opaque, answer.code), (3, 0));
    assert_eq!(&served_certificate(&tls), served.cert.der());
    let mut plain = TcpStream::connect(&addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain.write_all(&request_frame(1005, 4, &[], b"")).unwrap();
    assert!(read_answer(&mut plain).is_err(), "a plain client is served");
}
