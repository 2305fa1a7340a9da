//! The group's shared secret (`controllerPeerSecret`) on the peer link: nonces and the
//! HMAC-SHA256 proofs each side of a handshake gives over both of them.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::hash::BuildHasher;

pub type Nonce = [u8; 16];

pub const DIALER: &str = "dialer";
pub const ACCEPTOR: &str = "acceptor";

/// From the OS; std's randomly keyed hasher if that fails.
pub fn nonce() -> Nonce {
    let mut n = [0u8; 16];
    if getrandom::getrandom(&mut n).is_err() {
        let state = std::collections::hash_map::RandomState::new();
        n[..8].copy_from_slice(&state.hash_one(1u8).to_le_bytes());
        n[8..].copy_from_slice(&state.hash_one(2u8).to_le_bytes());
    }
    n
}

/// What one side signs: its role, the group, both ids and both nonces (the dialer's first).
pub struct Transcript<'a> {
    pub group: &'a str,
    /// Dialer, acceptor.
    pub ids: (u64, u64),
    pub nonces: &'a (Nonce, Nonce),
}

impl Transcript<'_> {
    fn mac(&self, secret: &str, role: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
            .expect("HMAC takes a key of any length");
        for part in [role.as_bytes(), b"\0", self.group.as_bytes(), b"\0"] {
            mac.update(part);
        }
        mac.update(&self.ids.0.to_be_bytes());
        mac.update(&self.ids.1.to_be_bytes());
        mac.update(&self.nonces.0);
        mac.update(&self.nonces.1);
        mac
    }

    pub fn prove(&self, secret: &str, role: &str) -> String {
        to_hex(&self.mac(secret, role).finalize().into_bytes())
    }

    /// Constant-time compare.
    pub fn verify(&self, secret: &str, role: &str, proof: Option<&str>) -> bool {
        let bytes = proof.and_then(from_hex).unwrap_or_default();
        self.mac(secret, role).verify_slice(&bytes).is_ok()
    }
}

pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

pub fn nonce_from_hex(text: Option<&str>) -> Option<Nonce> {
    text.and_then(from_hex)?.try_into().ok()
}
