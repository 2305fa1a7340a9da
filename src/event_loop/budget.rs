//! The budget of buffered bytes (`Limits::max_buffered`): what all connections' buffers may
//! hold together (by capacity), so that many peers announcing large frames, or not reading
//! large replies, cannot take the machine's memory. Past the budget:
//! * a partial frame of [`SMALL_READ`] bytes or more is no longer read: its connection is
//!   *parked* (TCP holds the sender back) until the budget has room. One large frame at a
//!   time, the *lane*, keeps being read, so that large frames still complete one after
//!   another; a peer that never finishes its frame loses the lane at the frame timeout;
//! * a connection with more than [`SMALL_UNSENT`] unsent reply bytes gets no further frames
//!   handled until it has read most of them;
//! * peers that have taken no reply bytes for [`WRITE_STALL_MS`] (owing more than
//!   [`SMALL_UNSENT`], or parked for their replies) are closed, largest first, until the sum is
//!   back under the budget.
//!
//! A partial frame smaller than [`SMALL_READ`] is always read up to that size, so a good
//! client's request is never held back (the budget may be exceeded by that much per
//! connection, and by the lane's frame).

use super::connection::Parked;
use super::ctx::Ctx;
use super::ConnId;
use log::warn;

pub(super) const SMALL_READ: usize = 16 * 1024;
pub(super) const SMALL_UNSENT: usize = 64 * 1024;
pub(super) const WRITE_STALL_MS: u64 = 1000;
/// How often, at most, write-stalled peers are looked for (a scan of all connections).
const STALL_SCAN_EVERY_MS: u64 = 100;

impl<C> Ctx<C> {
    pub(super) fn account(&mut self, key: usize) {
        if let Some(c) = self.conns.get_mut(key) {
            let now = c.footprint();
            self.buffered = self.buffered - c.accounted + now;
            c.accounted = now;
        }
    }

    pub(super) fn over_budget(&self) -> bool {
        self.limits.max_buffered > 0 && self.buffered > self.limits.max_buffered
    }

    /// A clear margin (an eighth), so that parked readers are not woken for a few bytes.
    fn budget_has_room(&self) -> bool {
        let max = self.limits.max_buffered;
        max == 0 || self.buffered <= max - max / 8
    }

    /// How many bytes connection `id` may read now; 0 means it was parked.
    pub(super) fn read_allowance(&mut self, id: ConnId) -> usize {
        let read_budget = self.limits.read_budget;
        let max = self.limits.max_buffered;
        let free = max.saturating_sub(self.buffered);
        if max == 0 || free >= read_budget {
            return read_budget;
        }
        let Some(conn) = self.get(id) else {
            return 0;
        };
        let partial = conn.read_buf.len();
        if partial < SMALL_READ {
            return read_budget.min(free.max(SMALL_READ - partial));
        }
        if free > 0 {
            return free;
        }
        let lane = self.lane;
        if lane.map_or(true, |holder| holder == id || self.get(holder).is_none()) {
            self.lane = Some(id);
            return read_budget;
        }
        let Some(conn) = self.get_mut(id) else {
            return 0;
        };
        conn.parked = Parked::Read;
        let peer = conn.peer;
        self.parked.push_back(id);
        let now = self.now_ms();
        if let Some(more) = self.budget_log.ready(now) {
            warn!(
                "buffer budget spent ({} bytes buffered, limit {}): not reading the {partial}-byte partial frame from {peer} until there is room ({more} more such pauses since the last line)",
                self.buffered, self.limits.max_buffered
            );
        }
        0
    }

    /// Returns whether the connection was parked for its unsent replies.
    pub(super) fn park_if_unread(&mut self, id: ConnId) -> bool {
        let many_unsent = self.get(id).is_some_and(|c| c.unsent() > SMALL_UNSENT);
        if !many_unsent || !self.over_budget() {
            return false;
        }
        // Perhaps the socket takes them now.
        self.flush(id.key);
        let Some(conn) = self.get_mut(id) else {
            return true;
        };
        if conn.unsent() <= SMALL_UNSENT {
            return false;
        }
        conn.parked = Parked::Write;
        true
    }

    pub(super) fn unpark_drained(&mut self, id: ConnId) {
        if let Some(conn) = self.get_mut(id) {
            if conn.parked == Parked::Write && conn.unsent() <= SMALL_UNSENT / 2 {
                conn.parked = Parked::No;
                self.pending.push_back(id);
            }
        }
    }

    pub(super) fn has_resumable(&self) -> bool {
        !self.parked.is_empty() && (self.budget_has_room() || self.lane.is_none())
    }

    /// All parked readers when the budget has room, else the first in line if the lane is free.
    pub(super) fn resume_parked(&mut self) {
        if self.parked.is_empty() {
            return;
        }
        let lane = self.lane;
        if lane.is_some_and(|holder| !self.get(holder).is_some_and(|c| !c.blocked())) {
            self.lane = None;
        }
        let mut resume = if self.budget_has_room() {
            self.parked.len()
        } else if self.lane.is_none() {
            1
        } else {
            return;
        };
        while resume > 0 {
            let Some(id) = self.parked.pop_front() else {
                break;
            };
            let Some(conn) = self.get_mut(id) else {
                continue;
            };
            if conn.parked != Parked::Read {
                continue;
            }
            conn.parked = Parked::No;
            self.pending.push_back(id);
            resume -= 1;
        }
    }

    pub(super) fn leave_lane_if_done(&mut self, id: ConnId) {
        if self.lane == Some(id) && self.get(id).is_some_and(|c| c.read_buf.len() < SMALL_READ) {
            self.lane = None;
        }
    }

    pub(super) fn close_stalled_writers(&mut self) {
        let now = self.now_ms();
        if !self.over_budget() || now < self.next_stall_scan_ms {
            return;
        }
        self.next_stall_scan_ms = now + STALL_SCAN_EVERY_MS;
        let mut stalled: Vec<(usize, usize)> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                // Parked with less than that unsent, it would wait for the peer just the same.
                (c.unsent() > SMALL_UNSENT || c.parked == Parked::Write)
                    && now.saturating_sub(c.last_write_ms) >= WRITE_STALL_MS
            })
            .map(|(key, c)| (c.unsent(), key))
            .collect();
        stalled.sort_unstable_by(|a, b| b.cmp(a));
        for (unsent, key) in stalled {
            if !self.over_budget() {
                break;
            }
            let Some(conn) = self.conns.get(key) else {
                continue;
            };
            let (peer, quiet_ms) = (conn.peer, now.saturating_sub(conn.last_write_ms));
            if let Some(more) = self.budget_log.ready(now) {
                warn!(
                    "closing connection from {peer}: {unsent} reply bytes unread for {quiet_ms} ms while connections buffer {} bytes, over the buffer budget of {} ({more} more budget events since the last line)",
                    self.buffered, self.limits.max_buffered
                );
            }
            self.stats.closed_over_budget += 1;
            self.remove(key, "buffer budget: replies not read");
        }
    }
}
