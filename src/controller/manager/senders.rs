//! Who may send what on the controller port. An admin's change (1009, 1011, mqadmin's 1002)
//! comes only from an address the name server's `adminAllowList` admits, when it is set: the
//! name server's own check and answer. A broker's request naming a broker (docs/controller.md,
//! "Who may speak for a broker": its heartbeat 904, registration 1003, id application 1013,
//! its master's sync-state change 1001 and its own election 1002) counts only from an address
//! `brokerAllowList` admits (when set) and, unless `checkBrokerSourceAddress=false`, from the
//! IP of the broker's own address: the one the controller holds for its id, else (904, 1013)
//! the one it gives. So a stranger can neither keep a broker alive, nor tie a live one to a
//! connection it then closes, nor move a live broker's address, nor elect, nor take ids.

use super::Controller;
use crate::config::{allows, check_allowed, Cidr};
use crate::controller::request::{self, ControllerRequest, LeaderRequest};
use crate::controller::response::Response;
use crate::remoting::codes::response::NO_PERMISSION;
use crate::remoting::command::RemotingCommand;
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, UdpSocket};

/// The broker a request speaks for.
struct Speaker<'a> {
    name: Option<&'a str>,
    id: Option<i64>,
    /// The address the request gives for the broker, checked when the controller holds none
    /// (904; 1013, which records it).
    given: Option<&'a str>,
    /// The address a 1003 moves the broker to.
    moves_to: Option<&'a str>,
    /// A broker's own election (1002): it must name an id its set holds.
    elects: bool,
}

fn speaker<'a>(name: Option<&'a str>, id: Option<i64>, given: Option<&'a str>) -> Speaker<'a> {
    Speaker {
        name,
        id,
        given,
        moves_to: None,
        elects: false,
    }
}

fn speaks_for(request: &ControllerRequest) -> Option<Speaker<'_>> {
    Some(match request {
        ControllerRequest::Heartbeat(hb) => speaker(
            hb.broker_name.as_deref(),
            hb.broker_id,
            hb.broker_addr.as_deref(),
        ),
        ControllerRequest::Leader(leader) => match leader {
            LeaderRequest::RegisterBroker(r) => Speaker {
                moves_to: r.broker_address.as_deref(),
                ..speaker(r.broker_name.as_deref(), r.broker_id, None)
            },
            // Java records `registerCheckCode` up to its first ';' as the address.
            LeaderRequest::ApplyBrokerId(a) => {
                let given = a.register_check_code.as_deref();
                let given = given.and_then(|code| code.split(';').next());
                speaker(a.broker_name.as_deref(), a.applied_broker_id, given)
            }
            LeaderRequest::AlterSyncStateSet(a) => {
                speaker(a.broker_name.as_deref(), a.master_broker_id, None)
            }
            LeaderRequest::ElectMaster(e) if !e.designate_elect => Speaker {
                elects: true,
                ..speaker(Some(&e.broker_name), Some(e.broker_id), None)
            },
            _ => return None,
        },
        _ => return None,
    })
}

impl<T> Controller<T> {
    /// `adminAllowList` and `brokerAllowList` as the name server has them now (parsed once
    /// per change).
    pub fn set_allow_lists(&mut self, admin: Vec<Cidr>, broker: Vec<Cidr>) {
        self.admin_allow_list = admin;
        self.broker_allow_list = broker;
    }

    /// An admin's change from outside `adminAllowList`: the name server's answer to one, given
    /// before anything else of the request is read (as on the name server's port).
    pub(super) fn refuse_admin(
        &self,
        cmd: &RemotingCommand,
        peer: Option<IpAddr>,
    ) -> Option<Response> {
        let list = &self.admin_allow_list;
        if list.is_empty() || !request::is_admin_write(cmd) {
            return None;
        }
        let refused = check_allowed("adminAllowList", list, cmd.code, peer).err()?;
        Some(Response::error(NO_PERMISSION, refused))
    }

    /// None: `request` may be served from `peer` (None: a caller without a socket).
    pub(super) fn refuse_sender(
        &mut self,
        request: &ControllerRequest,
        peer: Option<IpAddr>,
        now_ms: u64,
    ) -> Option<Response> {
        let peer = peer?;
        let Speaker {
            name,
            id,
            given,
            moves_to,
            elects,
        } = speaks_for(request)?;
        let code = request.code();
        if !allows(&self.broker_allow_list, Some(peer)) {
            return Some(self.refused(code, "this address is not in brokerAllowList".into()));
        }
        if !self.config.settings().check_broker_source_address {
            return None;
        }
        let name = name?;
        let replica = self.state.replica_info(name);
        let recorded = id.and_then(|id| replica?.address(id));
        let id = id.unwrap_or(-1);
        let Some(addr) = recorded.or(given) else {
            // Nothing to check the sender against. An election of such an id (the controller's
            // own form, id -1, among them) could leave a set never elected without a live
            // master: refused.
            if !elects || replica.is_none() {
                return None;
            }
            return Some(
                self.refused(code, format!("broker set {name} holds no id {id} to elect")),
            );
        };
        if sent_from(addr, peer) {
            return None;
        }
        // 1003 may move a broker's address to the sender's own IP (a broker restarted on
        // another host), unless the broker still heartbeats from the old one.
        let cluster = replica.and_then(|r| r.cluster_name.as_deref());
        let holder_alive = self.liveness.is_active(cluster, name, id, now_ms);
        if !holder_alive && moves_to.is_some_and(|a| sent_from(a, peer)) {
            return None;
        }
        let why = format!("broker {name} id {id} is at {addr}, not at this sender's IP");
        Some(self.refused(code, why))
    }

    fn refused(&mut self, code: i32, why: String) -> Response {
        self.refused_senders += 1;
        if self.refused_senders.is_power_of_two() {
            log::warn!(
                "controller: refused {} ({} such refusals so far): {why} (brokerAllowList; checkBrokerSourceAddress=false where brokers sit behind NAT)",
                crate::controller::codes::request_name(code),
                self.refused_senders
            );
        }
        Response::error(
            NO_PERMISSION,
            format!("request {code} refused: {why} (checkBrokerSourceAddress, brokerAllowList)"),
        )
    }
}

/// True when `addr` (`host:port`) is at `peer`'s IP, or names a host (not checked: no lookup on
/// the loop). A broker on the controller's own host may also come over loopback.
fn sent_from(addr: &str, peer: IpAddr) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(ip) = host.parse::<IpAddr>() else {
        return true;
    };
    let (ip, peer) = (ip.to_canonical(), peer.to_canonical());
    ip == peer || (peer.is_loopback() && !ip.is_loopback() && is_local(ip))
}

/// One of this host's addresses (binding to it works only then). Asked once per address, not
/// per heartbeat: the answers are kept (at most 64; a stranger's variety only clears them).
fn is_local(ip: IpAddr) -> bool {
    thread_local! {
        static KNOWN: RefCell<HashMap<IpAddr, bool>> = RefCell::new(HashMap::new());
    }
    KNOWN.with(|known| {
        let mut known = known.borrow_mut();
        if let Some(&local) = known.get(&ip) {
            return local;
        }
        if known.len() >= 64 {
            known.clear();
        }
        let local = UdpSocket::bind((ip, 0)).is_ok();
        known.insert(ip, local);
        local
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_matches_its_own_ip_and_host_names_are_not_checked() {
        let peer: IpAddr = "10.0.0.7".parse().unwrap();
        assert!(sent_from("10.0.0.7:10911", peer));
        assert!(!sent_from("10.0.0.8:10911", peer));
        assert!(sent_from("broker-a.example:10911", peer));
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert!(sent_from("10.0.0.7:10911", mapped));
        assert!(sent_from("[::1]:10911", "::1".parse().unwrap()));
        // Loopback is no one's but its own: 127.0.0.2 is not 127.0.0.3.
        assert!(!sent_from("127.0.0.2:10911", "127.0.0.3".parse().unwrap()));
        // A non-local address never comes over loopback.
        assert!(!sent_from("192.0.2.1:10911", "127.0.0.1".parse().unwrap()));
    }
}
