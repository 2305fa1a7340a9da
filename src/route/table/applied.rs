//! What a live broker's last complete "put all" apply wrote into its broker group's queue
//! entries, kept so that the next changed registration skips every topic config it already
//! put (no topic-table lookup), provided no one has written the group's entries since.
//!
//! A registration whose dataVersion changed re-puts every topic config of its body (§5.2
//! step 10 b, as Java's registerBroker does), yet most of them are byte-identical to the
//! previous body's: a broker that created one topic re-sends its hundred others. Each put
//! looks the topic up in a table of tens of thousands (a cache miss on the bucket, a compare
//! of the name) only to find its entry unchanged.
//!
//! The record is one 64-bit digest per topic config put (8 bytes a topic) and the group's
//! write stamp after that apply. It is kept only between changed registrations, where it
//! pays: a live entry's first registration makes none, and an unchanged registration drops
//! it, so a fleet in its steady state (unchanged bodies every 30 s) holds no digests. The table gives every change of
//! a group's queue entries, by any path, a fresh value of one table-wide clock
//! (`RouteTable::slot_stamps`); while the group's stamp still equals the recorded one, every
//! entry still holds what the record says, and a config whose digest is recorded would put
//! exactly what is there already: it is skipped. A group removed and recreated under the same
//! id gets a fresh stamp on creation, so an old record never matches it.
//!
//! The digest is a keyed hash (foldhash's [`RandomState`], keys drawn per table) of the topic
//! name and the queue entry the config puts (read and write queue counts, the permission after
//! the prime slave's write bit is cleared, the sysFlag). Its keys are secret, so a peer cannot
//! prepare two configs with one digest; and a chance collision (2^-64 per compare) could only
//! leave this group's own entry of one topic at its previous value until its next change.

use foldhash::quality::RandomState;
use std::hash::{BuildHasher, Hasher};

/// How far past the expected position a digest is looked for. Bodies keep their topics in
/// one order from registration to registration (a Java broker's map order), with topics
/// inserted or removed here and there: a config not found this close is simply put.
const RESYNC_WINDOW: usize = 8;

/// A live broker's record of its last complete apply with rule "all".
#[derive(Debug, Default)]
pub(super) struct AppliedTopics {
    /// The group's write stamp when the apply ended (0: none; the clock starts at 1).
    pub stamp: u64,
    /// Digests of the topic configs put, in body order.
    pub digests: Box<[u64]>,
}

/// Digest of one topic config as the queue entry it puts (see the module comment).
pub(super) fn digest(keys: &RandomState, topic: &str, entry: [i32; 4]) -> u64 {
    let mut h = keys.build_hasher();
    h.write(topic.as_bytes());
    let pair = |a: i32, b: i32| (u64::from(a as u32) << 32) | u64::from(b as u32);
    h.write_u64(pair(entry[0], entry[1]));
    h.write_u64(pair(entry[2], entry[3]));
    h.finish()
}

/// Whether `d` is in `list` at or a little past `*cursor`; on a hit the cursor moves past it.
/// A miss says nothing about the rest of the list (the config is then put, which is always
/// right).
pub(super) fn take_match(list: &[u64], cursor: &mut usize, d: u64) -> bool {
    let start = (*cursor).min(list.len());
    let end = start.saturating_add(RESYNC_WINDOW).min(list.len());
    match list[start..end].iter().position(|x| *x == d) {
        Some(i) => {
            *cursor = start + i + 1;
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_differ_in_every_field_and_in_the_name() {
        let k = RandomState::default();
        let base = digest(&k, "T", [4, 4, 6, 0]);
        assert_eq!(base, digest(&k, "T", [4, 4, 6, 0]));
        for other in [
            digest(&k, "U", [4, 4, 6, 0]),
            digest(&k, "T", [5, 4, 6, 0]),
            digest(&k, "T", [4, 5, 6, 0]),
            digest(&k, "T", [4, 4, 4, 0]),
            digest(&k, "T", [4, 4, 6, 1]),
            digest(&k, "T\0", [4, 4, 6, 0]),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn matching_follows_inserts_and_removals_and_misses_far_or_absent_digests() {
        let list = [1, 2, 3, 4, 5];
        let mut c = 0;
        assert!(take_match(&list, &mut c, 1));
        assert!(!take_match(&list, &mut c, 9), "inserted: not recorded");
        assert_eq!(c, 1);
        assert!(take_match(&list, &mut c, 3), "2 was removed");
        assert_eq!(c, 3);
        assert!(!take_match(&list, &mut c, 1), "behind the cursor: put");
        assert!(take_match(&list, &mut c, 5));
        assert!(!take_match(&list, &mut c, 5), "each recorded config once");
        let long: Vec<u64> = (0..100).collect();
        let mut c = 0;
        assert!(!take_match(&long, &mut c, 50), "past the window: put");
        assert!(take_match(&long, &mut c, 7));
    }
}
