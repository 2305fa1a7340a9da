//! The audit trail: which requests change shared state on behalf of someone (KV entries, the
//! config, topics, write permission, an admin's broker unregistration; on the controller port
//! elections, cleans and config updates), and the one shape of the line each gets once its
//! result is known: `audit: <request> from <peer>: <change>: OK` at info, `...: refused:
//! <why>` at warn (a refusal, or a change that could not be made: the reason says which). Registrations and heartbeats are not audited one
//! by one: the route-change summary and the broker lines cover them.

use crate::remoting::codes::{request, response, response_name};
use std::net::SocketAddr;

/// The audit name of a name-server request code; `None` for codes not audited.
/// UNREGISTER_BROKER is audited only when it does not come from the broker itself.
pub fn namesrv_label(code: i32) -> Option<&'static str> {
    Some(match code {
        request::PUT_KV_CONFIG => "KV put",
        request::DELETE_KV_CONFIG => "KV delete",
        request::UNREGISTER_BROKER => "broker unregister",
        request::WIPE_WRITE_PERM_OF_BROKER => "write perm wipe",
        request::DELETE_TOPIC_IN_NAMESRV => "topic delete",
        request::REGISTER_TOPIC_IN_NAMESRV => "topic register",
        request::UPDATE_NAMESRV_CONFIG => "config update",
        request::ADD_WRITE_PERM_OF_BROKER => "write perm add",
        _ => return None,
    })
}

/// The audit name of a controller-port request code; `None` for codes not audited.
pub fn controller_label(code: i32) -> Option<&'static str> {
    use crate::controller::codes::request as c;
    Some(match code {
        c::CONTROLLER_ELECT_MASTER => "controller elect",
        c::UPDATE_CONTROLLER_CONFIG => "controller config update",
        c::CLEAN_BROKER_DATA => "controller clean",
        _ => return None,
    })
}

/// Writes the audit line of `request` (a label above) sent by `peer`, changing `what` (may be
/// empty), answered `code` with `remark`. A refusal or failure is logged only if `admit()`
/// says so (its caller's rate limit: anyone allowed to connect may repeat them cheaply).
pub fn log(
    request: &str,
    peer: Option<SocketAddr>,
    what: &str,
    code: i32,
    remark: Option<&str>,
    admit: impl FnOnce() -> bool,
) {
    let (peer, what) = (Peer(peer), one_line(what));
    let sep = if what.is_empty() { "" } else { ": " };
    if code == response::SUCCESS {
        log::info!("audit: {request} from {peer}{sep}{what}: OK");
        return;
    }
    if !admit() {
        return;
    }
    let why = one_line(
        remark
            .filter(|r| !r.is_empty())
            .unwrap_or("no reason given"),
    );
    let name = match response_name(code) {
        "ERROR" => crate::controller::codes::response_name(code),
        name => name,
    };
    log::warn!("audit: {request} from {peer}{sep}{what}: refused ({name}): {why}");
}

/// `text` as one line: names and remarks come from peers, and a line break in them must not
/// write a line of the trail that nobody sent.
fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    match text.contains(char::is_control) {
        true => text.escape_debug().to_string().into(),
        false => text.into(),
    }
}

/// `ip:port`, or `in-process` for a request without a socket (tests, simulations).
struct Peer(Option<SocketAddr>);

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(addr) => write!(f, "{addr}"),
            None => f.write_str("in-process"),
        }
    }
}

/// `key old -> new` for each changed key, comma-separated (config updates).
pub fn changes<'a>(
    keys: impl IntoIterator<Item = (&'a str, Option<String>, Option<String>)>,
) -> String {
    let shown = |v: Option<String>| match v {
        Some(v) if v.is_empty() => "\"\"".to_string(),
        Some(v) => v,
        None => "(unset)".to_string(),
    };
    keys.into_iter()
        .map(|(k, old, new)| format!("{k} {} -> {}", shown(old), shown(new)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::codes::{needs_admin_allow_list, REQUEST_CODES};

    #[test]
    fn every_admin_write_is_audited_and_no_read() {
        for row in REQUEST_CODES {
            let audited = namesrv_label(row.code).is_some();
            let expected =
                needs_admin_allow_list(row.code) || row.code == request::UNREGISTER_BROKER;
            assert_eq!(audited, expected, "{}", row.name);
        }
    }

    #[test]
    fn a_line_break_sent_by_a_peer_stays_on_its_line() {
        assert_eq!(one_line("NS/k"), "NS/k");
        assert_eq!(
            one_line("k\n2026 INFO main - audit: x"),
            "k\\n2026 INFO main - audit: x"
        );
    }

    #[test]
    fn config_changes_read_old_to_new() {
        let text = changes([
            ("logLevel", Some("debug".into()), Some("info".into())),
            (
                "adminAllowList",
                Some(String::new()),
                Some("10.0.0.0/8".into()),
            ),
        ]);
        assert_eq!(
            text,
            "logLevel debug -> info, adminAllowList \"\" -> 10.0.0.0/8"
        );
    }
}
