//! `adminAllowList` on the controller port, through the real binary: an admin's change (1009,
//! 1011, mqadmin's 1002 with `designateElect`) from outside the list is refused with the name
//! server's answer, audited, and changes nothing; from inside it is served; a live change of
//! the list reaches both ports. Brokers' own requests and reads stay open.
#![cfg(feature = "controller")]

#[path = "common/child.rs"]
mod child;
mod common;

use common::{request_frame, wait_until, TempDir};
use rmq_namesrv::client::Client;
use rmq_namesrv::config::JAVA_CONFIG_BLACK_LIST;
use rmq_namesrv::remoting::command::RemotingCommand;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

const NO_PERMISSION: i32 = 16;
const BROKER: &str = "127.0.0.1:30911";

/// The binary with its controller on and `extra` config lines, its log in `dir/ns.log`.
struct Server {
    child: Child,
    log: PathBuf,
    namesrv: String,
    controller: String,
}

impl Server {
    fn start(dir: &TempDir, extra: &str) -> Server {
        let (conf, log) = (dir.join("namesrv.conf"), dir.join("ns.log"));
        let text = format!(
            "bindAddress=127.0.0.1\nlistenPort=0\nlogPath={}\nkvConfigPath={}\n\
             enableControllerInNamesrv=true\ncontrollerDLegerPeers=n0-127.0.0.1:0\n\
             controllerDLegerSelfId=n0\ncontrollerStorePath={}\n{extra}",
            log.display(),
            dir.join("kv.json").display(),
            dir.join("store").display()
        );
        std::fs::write(&conf, text).unwrap();
        let (child, mut lines) =
            child::spawn_announcing(&["-c", conf.to_str().unwrap()], Stdio::null());
        let mut announced = |prefix: &str| {
            let line = lines.next().and_then(Result::ok).unwrap_or_default();
            match line.strip_prefix(prefix) {
                Some(addr) => addr.to_string(),
                None => panic!("{line:?}"),
            }
        };
        let namesrv = announced("rmq-namesrv listening on ");
        let controller = announced("rmq-namesrv controller listening on ");
        Server {
            child,
            log,
            namesrv,
            controller,
        }
    }

    fn connect(addr: &str) -> Client {
        Client::connect(addr, Duration::from_secs(10)).expect("connect")
    }

    /// Sends an admin's change until its refusal's audit line shows (refused audit lines are
    /// rate limited: one per 2 s); each answer is the name server's refusal.
    fn refused_and_audited(
        &self,
        mut send: impl FnMut() -> RemotingCommand,
        code: i32,
        line: &str,
    ) {
        let read = || std::fs::read_to_string(&self.log).unwrap_or_default();
        let reason = format!("request {code} is not allowed from this address (adminAllowList)");
        let line = format!("{line}: refused (NO_PERMISSION): {reason}");
        let seen = wait_until(Duration::from_secs(10), || {
            assert_refused(&send(), code);
            read()
                .lines()
                .any(|l| l.contains("WARN") && l.ends_with(&line))
        });
        assert!(seen, "no warn line ending {line:?} in:\n{}", read());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A broker of set `set-a` at [`BROKER`] takes id 1 (1013), registers (1003) and heartbeats
/// (904), all answered 0.
fn broker_joins(c: &mut Client) {
    let set = [("clusterName", "c"), ("brokerName", "set-a")];
    let apply = [
        ("appliedBrokerId", "1"),
        ("registerCheckCode", "127.0.0.1:30911;1"),
    ];
    c.send_raw(&request_frame(
        1013,
        9_001,
        &[&set[..], &apply].concat(),
        b"",
    ))
    .unwrap();
    let resp = c.read_response(9_001).unwrap();
    assert_eq!(resp.code, 0, "1013: {:?}", resp.remark);
    let id = [("brokerId", "1")];
    let register = [&set[..], &id, &[("brokerAddress", BROKER)]].concat();
    let resp = c.request(1003, &register, b"").unwrap();
    assert_eq!(resp.code, 0, "1003: {:?}", resp.remark);
    let heartbeat = [&set[..], &id, &[("brokerAddr", BROKER)]].concat();
    let resp = c.request(904, &heartbeat, b"").unwrap();
    assert_eq!(resp.code, 0, "904: {:?}", resp.remark);
}

/// mqadmin `electMaster`: 1002 designating id 1 of `set-a`.
fn admin_elect(c: &mut Client) -> RemotingCommand {
    let fields = [
        ("clusterName", "c"),
        ("brokerName", "set-a"),
        ("brokerId", "1"),
        ("designateElect", "true"),
    ];
    c.request(1002, &fields, b"").unwrap()
}

fn update_config(c: &mut Client) -> RemotingCommand {
    c.request(1009, &[], b"electMasterMaxRetryCount=5\n")
        .unwrap()
}

/// mqadmin `cleanBrokerMetadata` of the whole set, living brokers too.
fn clean(c: &mut Client) -> RemotingCommand {
    let fields = [
        ("clusterName", "c"),
        ("brokerName", "set-a"),
        ("isCleanLivingBroker", "true"),
    ];
    c.request(1011, &fields, b"").unwrap()
}

/// 1004: the set's master id, `Err(code)` when the set is unknown.
fn master_of_set_a(c: &mut Client) -> Result<Option<String>, i32> {
    let resp = c.request(1004, &[("brokerName", "set-a")], b"").unwrap();
    match resp.code {
        0 => Ok(resp.ext("masterBrokerId").map(str::to_string)),
        code => Err(code),
    }
}

fn controller_config(c: &mut Client) -> String {
    let resp = c.request(1010, &[], b"").unwrap();
    assert_eq!(resp.code, 0);
    String::from_utf8(resp.body.to_vec()).unwrap()
}

fn assert_refused(resp: &RemotingCommand, code: i32) {
    let remark = format!("request {code} is not allowed from this address (adminAllowList)");
    assert_eq!(
        (resp.code, resp.remark.as_deref()),
        (NO_PERMISSION, Some(remark.as_str()))
    );
}

#[test]
fn admin_changes_from_outside_admin_allow_list_are_refused_on_the_controller_port() {
    let dir = TempDir::new("ctrl-admin-allow");
    let server = Server::start(&dir, "adminAllowList=192.0.2.0/24\n");
    let mut c = Server::connect(&server.controller);
    let me = c.local_addr().unwrap();
    broker_joins(&mut c);

    let audit = |what: &str| format!("audit: controller {what} from {me}");
    let ctrl = &mut c;
    server.refused_and_audited(|| admin_elect(ctrl), 1002, &audit("elect"));
    assert_eq!(master_of_set_a(&mut c), Ok(None), "no master elected");
    let ctrl = &mut c;
    server.refused_and_audited(|| update_config(ctrl), 1009, &audit("config update"));
    assert!(controller_config(&mut c).contains("\nelectMasterMaxRetryCount=3\n"));
    let ctrl = &mut c;
    server.refused_and_audited(|| clean(ctrl), 1011, &audit("clean"));
    assert_eq!(master_of_set_a(&mut c), Ok(None), "set-a is still there");

    // The name server's port gives the same answer to its own admin codes.
    let mut ns = Server::connect(&server.namesrv);
    let resp = ns.request(318, &[], b"orderMessageEnable=true\n").unwrap();
    assert_refused(&resp, 318);

    // A broker's own election is not an admin's: its set gets its master.
    let own = [
        ("clusterName", "c"),
        ("brokerName", "set-a"),
        ("brokerId", "1"),
    ];
    let resp = c.request(1002, &own, b"").unwrap();
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(master_of_set_a(&mut c), Ok(Some("1".into())));
}

#[test]
fn admin_changes_from_inside_admin_allow_list_are_served_until_a_live_update_narrows_it() {
    let dir = TempDir::new("ctrl-admin-allow");
    // Operators may let 318 change the allow lists by naming their own black list.
    let extra = format!("adminAllowList=127.0.0.1/32\nconfigBlackList={JAVA_CONFIG_BLACK_LIST}\n");
    let server = Server::start(&dir, &extra);
    let mut c = Server::connect(&server.controller);
    broker_joins(&mut c);

    let resp = admin_elect(&mut c);
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(master_of_set_a(&mut c), Ok(Some("1".into())));
    let resp = update_config(&mut c);
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert!(controller_config(&mut c).contains("\nelectMasterMaxRetryCount=5\n"));
    let resp = clean(&mut c);
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(master_of_set_a(&mut c), Err(2008), "set-a is gone");

    let mut ns = Server::connect(&server.namesrv);
    ns.update_namesrv_config(&[("adminAllowList", "192.0.2.0/24")])
        .expect("318 from an allowed address");
    assert_refused(&update_config(&mut c), 1009);
    assert_refused(&clean(&mut c), 1011);
    // Brokers are not admins: a set starts again.
    broker_joins(&mut c);
    assert_refused(&admin_elect(&mut c), 1002);
    assert_eq!(master_of_set_a(&mut c), Ok(None));
}
