//! Which durable step the controller runs: the single node's event log (one peer in
//! `controllerDLegerPeers`), or a Raft group (several). The pipeline sees either through the
//! `Durability` trait; the manager asks this module the few things that differ (the leader's
//! term, whether this node serves, where a config file is written).
//!
//! One peer keeps the single node's log rather than a one-voter Raft group: its answers wait
//! for exactly one group-committed fsync on the writer thread and its files are the ones
//! earlier versions wrote, so upgrading a single-node controller changes nothing on disk.

use super::config::Peer;
use super::pipeline::{Durability, NotServing};
use super::raft::RaftGroup;
use super::storage::{SingleNodeLog, StorageError};
use std::path::PathBuf;

/// The single node's leader term (a Raft group passes its own).
const SINGLE_NODE_TERM: u64 = 1;

pub enum Replication {
    Single(SingleNodeLog),
    Group(Box<RaftGroup>),
}

impl Replication {
    pub fn durability(&mut self) -> &mut dyn Durability {
        match self {
            Replication::Single(log) => log,
            Replication::Group(group) => group.as_mut(),
        }
    }

    pub fn serving(&self) -> Result<(), NotServing> {
        match self {
            Replication::Single(log) => log.serving(),
            Replication::Group(group) => group.serving(),
        }
    }

    /// The leader's reign, for the write lease.
    pub fn term(&self) -> u64 {
        match self {
            Replication::Single(_) => SINGLE_NODE_TERM,
            Replication::Group(group) => group.status().term,
        }
    }

    pub fn group(&self) -> Option<&RaftGroup> {
        match self {
            Replication::Group(group) => Some(group),
            Replication::Single(_) => None,
        }
    }

    pub fn group_mut(&mut self) -> Option<&mut RaftGroup> {
        match self {
            Replication::Group(group) => Some(group),
            Replication::Single(_) => None,
        }
    }

    /// Has the writer thread replace `path` (a 1009's properties file).
    pub fn write_file(
        &mut self,
        id: u64,
        path: PathBuf,
        content: Vec<u8>,
    ) -> Result<(), StorageError> {
        match self {
            Replication::Single(log) => log.storage_mut().write_file(id, path, content),
            Replication::Group(group) => group.write_file(id, path, content),
        }
    }
}

/// The Raft ids of `peers`, in order: `nK` is K+1 when every peer is named `n<number>` (the
/// documented form, and the numbers are distinct); otherwise a peer's position + 1. Every node
/// computes the same ids from the same `controllerDLegerPeers`; the peer link
/// (`server::controller_port::peers`) addresses the members by these ids too.
pub fn raft_ids(peers: &[Peer]) -> Vec<u64> {
    let numbered: Option<Vec<u64>> = peers
        .iter()
        .map(|p| {
            p.id.strip_prefix('n')
                .and_then(|k| k.parse::<u64>().ok())
                .and_then(|k| k.checked_add(1))
        })
        .collect();
    match numbered {
        Some(ids) if distinct(&ids) => ids,
        _ => (1..=peers.len() as u64).collect(),
    }
}

fn distinct(ids: &[u64]) -> bool {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(ids: &[&str]) -> Vec<Peer> {
        ids.iter()
            .map(|id| Peer {
                id: (*id).into(),
                address: "127.0.0.1:9878".into(),
                port: 9878,
            })
            .collect()
    }

    #[test]
    fn node_k_is_raft_id_k_plus_one_and_other_names_go_by_position() {
        assert_eq!(raft_ids(&peers(&["n0", "n1", "n2"])), vec![1, 2, 3]);
        assert_eq!(raft_ids(&peers(&["n2", "n0", "n1"])), vec![3, 1, 2]);
        assert_eq!(raft_ids(&peers(&["a", "b", "c"])), vec![1, 2, 3]);
        assert_eq!(raft_ids(&peers(&["n0", "n0x", "n2"])), vec![1, 2, 3]);
        assert_eq!(raft_ids(&peers(&["n2", "n0", "n7"])), vec![3, 1, 8]);
        assert_eq!(raft_ids(&peers(&["a", "n1", "n2"])), vec![1, 2, 3]);
        assert_eq!(raft_ids(&peers(&["x", "y"])), vec![1, 2]);
        assert_eq!(
            raft_ids(&peers(&["n1", "n01"])),
            vec![1, 2],
            "the same number twice"
        );
    }
}
