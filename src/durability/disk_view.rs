//! What a master's append-only file makes of a grant (Redisson's `syncMode`): the pure
//! rules behind grants a crash cannot take back (`engine::replicas` does the I/O).
//!
//! A server with `appendonly yes` and `appendfsync everysec` writes a grant to its AOF and
//! syncs it to disk within about a second. A crash in between (of the host, or of the
//! server while a slow disk holds the sync back and the write with it) loses the grant:
//! the server starts again from its AOF, the lock is free there, and its holder works on.
//! `WAITAOF 1 0 <timeout>` sent behind the grant, on its connection, answers once the
//! master's AOF has the grant on disk. Under [`SyncMode::Auto`] and
//! [`SyncMode::WaitAof`] every grant is sent with one, and its answer judged here:
//!
//! | mode | `WAITAOF 1 0` answers | verdict |
//! |---|---|---|
//! | either | `[1, _]`: on the master's disk | `Persisted` |
//! | either | `[0, _]`: not within the timeout | refused: `NotOnDisk` (transient) |
//! | either | the server is a replica | refused: `NotMaster` (a failover) |
//! | `Auto` | `appendonly` is off | `Stands` (nothing to wait for), remembered for [`SETTLE`] |
//! | `Auto` | no such command (before Redis 7.2) | `Stands`, remembered for [`SETTLE`] |
//! | `WaitAof` | `appendonly` is off | refused: `CannotPersist` (not transient) |
//! | `WaitAof` | no such command | refused: `CannotPersist` (not transient) |
//! | either | another error | the error (the grant is taken back as after any failed confirmation) |
//!
//! | before the grant | probe |
//! |---|---|
//! | `Wait` | nothing sent |
//! | `Auto`, the master said within [`SETTLE`] it has no AOF or no `WAITAOF` | nothing sent |
//! | otherwise | `WAITAOF 1 0` behind the grant, in the same write |
//!
//! The replicas are the replica policy's business (`WAIT n`): a grant under `Auto` or
//! `WaitAof` is on the master's disk *and* in a replica's memory when the master has
//! replicas. Redisson's `WAIT_AOF` asks the replicas' disks too (`WAITAOF 1 N`), which a
//! replica without `appendonly` never confirms: every grant would be refused.
//!
//! [`SyncMode::Auto`]: crate::SyncMode::Auto
//! [`SyncMode::WaitAof`]: crate::SyncMode::WaitAof

use std::time::{Duration, Instant};

/// What a grant waits for besides the replicas: Redisson's `syncMode`, with its three
/// values ([`ClientBuilder::sync_mode`](crate::ClientBuilder::sync_mode)). The replicas
/// are the [`ReplicaPolicy`](crate::ReplicaPolicy)'s business in every mode; these say whether a grant also waits
/// until its master's append-only file has it on disk (`WAITAOF 1 0`), so that a crash of
/// the master's host (or of the server while a slow disk holds its AOF's sync back) cannot
/// take the grant back. What each costs, measured, is in
/// [`guide::guarantees`](crate::guide::guarantees#persistence-and-crashes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SyncMode {
    /// Grants wait for the replicas only (`WAIT`), as Redisson's locks do: with
    /// `appendfsync everysec`, a crash of the master's host can lose the last second of
    /// grants.
    #[default]
    Wait,
    /// Grants wait for the master's AOF where the master has one (`appendonly yes`) and
    /// the command (`WAITAOF`: Redis 7.2 or later, every Valkey), and for the replicas only
    /// elsewhere, as Redisson's `AUTO` decides. A master that said it has no AOF (or no
    /// `WAITAOF`) is not asked again for a second.
    Auto,
    /// Grants wait for the master's AOF always, as Redisson's `WAIT_AOF`; a master without
    /// AOF or without `WAITAOF` grants nothing: each grant is undone and refused with
    /// [`ErrorKind::NotPersisted`](crate::ErrorKind::NotPersisted), which no retry mends.
    WaitAof,
}

/// How long a master's word that it has no AOF (or no `WAITAOF`) stands under
/// [`SyncMode::Auto`]: a `CONFIG SET appendonly yes` is heeded within it.
pub(crate) const SETTLE: Duration = crate::durability::replica_view::SETTLE;

/// What a master answered to `WAITAOF 1 0`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// How many local AOFs have the write on disk (0 or 1).
    Synced(i64),
    /// `appendonly` is off: the command cannot wait for a local AOF.
    AofOff,
    /// The server does not know the command (before Redis 7.2).
    NoCommand,
    /// The server is a replica.
    Replica,
}

impl Answer {
    /// Reads an error reply's text: `None` when it is none of the refusals above.
    pub(crate) fn of_refusal(text: &str) -> Option<Answer> {
        let lower = text.to_ascii_lowercase();
        if lower.contains("appendonly is disabled") {
            Some(Answer::AofOff)
        } else if lower.contains("unknown command") {
            Some(Answer::NoCommand)
        } else if lower.contains("replica instances") {
            Some(Answer::Replica)
        } else {
            None
        }
    }
}

/// Why a master cannot persist a grant on its disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inability {
    /// `appendonly no`.
    AofOff,
    /// No `WAITAOF` (Redis before 7.2).
    NoCommand,
}

/// What an answer makes of a grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DiskVerdict {
    /// On the master's disk.
    Persisted,
    /// Nothing to wait for (`Auto` on a master without AOF or without `WAITAOF`).
    Stands,
    /// Not on disk within the timeout: taken back, and worth trying again.
    NotOnDisk,
    /// The master cannot persist it (`WaitAof`): taken back, and no retry mends it.
    CannotPersist(Inability),
    /// The server is no master (any more).
    NotMaster,
}

/// The per-master state: what the master last said it cannot do, and when.
#[derive(Clone, Debug, Default)]
pub(crate) struct DiskView {
    unable: Option<(Inability, Instant)>,
}

impl DiskView {
    /// Whether a grant under `mode` is sent with `WAITAOF 1 0` (see the probe table).
    pub(crate) fn asks(&self, mode: SyncMode, now: Instant) -> bool {
        match mode {
            SyncMode::Wait => false,
            SyncMode::Auto => !matches!(self.unable, Some((_, at)) if now.saturating_duration_since(at) < SETTLE),
            SyncMode::WaitAof => true,
        }
    }

    /// Takes in the master's answer and judges the grant by the verdict table.
    pub(crate) fn answered(&mut self, mode: SyncMode, answer: &Answer, now: Instant) -> DiskVerdict {
        let inability = match answer {
            Answer::Synced(local) if *local >= 1 => return DiskVerdict::Persisted,
            Answer::Synced(_) => return DiskVerdict::NotOnDisk,
            Answer::Replica => return DiskVerdict::NotMaster,
            Answer::AofOff => Inability::AofOff,
            Answer::NoCommand => Inability::NoCommand,
        };
        self.unable = Some((inability, now));
        match mode {
            SyncMode::WaitAof => DiskVerdict::CannotPersist(inability),
            SyncMode::Auto | SyncMode::Wait => DiskVerdict::Stands,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict table, row by row.
    #[test]
    fn each_answer_gives_the_verdict_of_its_row() {
        let now = Instant::now();
        let rows = [
            (SyncMode::Auto, Answer::Synced(1), DiskVerdict::Persisted),
            (SyncMode::WaitAof, Answer::Synced(1), DiskVerdict::Persisted),
            (SyncMode::Auto, Answer::Synced(0), DiskVerdict::NotOnDisk),
            (SyncMode::WaitAof, Answer::Synced(0), DiskVerdict::NotOnDisk),
            (SyncMode::Auto, Answer::Replica, DiskVerdict::NotMaster),
            (SyncMode::WaitAof, Answer::Replica, DiskVerdict::NotMaster),
            (SyncMode::Auto, Answer::AofOff, DiskVerdict::Stands),
            (SyncMode::Auto, Answer::NoCommand, DiskVerdict::Stands),
            (SyncMode::WaitAof, Answer::AofOff, DiskVerdict::CannotPersist(Inability::AofOff)),
            (SyncMode::WaitAof, Answer::NoCommand, DiskVerdict::CannotPersist(Inability::NoCommand)),
        ];
        for (mode, answer, verdict) in rows {
            assert_eq!(DiskView::default().answered(mode, &answer, now), verdict, "{mode:?}, {answer:?}");
        }
    }

    /// The probe table: `Wait` never asks, `WaitAof` always, `Auto` unless the master said
    /// within `SETTLE` that it cannot answer.
    #[test]
    fn auto_stops_asking_a_master_without_aof_until_its_word_is_old() {
        let t0 = Instant::now();
        let mut view = DiskView::default();
        assert!(!view.asks(SyncMode::Wait, t0));
        assert!(view.asks(SyncMode::Auto, t0));
        assert!(view.asks(SyncMode::WaitAof, t0));
        for refusal in [Answer::AofOff, Answer::NoCommand] {
            let mut view = DiskView::default();
            view.answered(SyncMode::Auto, &refusal, t0);
            assert!(!view.asks(SyncMode::Auto, t0 + SETTLE / 2), "{refusal:?}");
            assert!(view.asks(SyncMode::Auto, t0 + SETTLE), "{refusal:?}: asked again once the word is old");
            assert!(view.asks(SyncMode::WaitAof, t0), "WaitAof asks whatever was said");
        }
        // A synced answer or a timeout says nothing of what the master cannot do.
        view.answered(SyncMode::Auto, &Answer::Synced(0), t0);
        assert!(view.asks(SyncMode::Auto, t0));
    }

    /// The refusals are told apart by their text, as Redis 7.2 and Valkey word them.
    #[test]
    fn refusals_are_read_from_their_text() {
        let aof_off = "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.";
        let replica = "ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.";
        let unknown = "ERR unknown command 'WAITAOF', with args beginning with: '1' '0' '1000' ";
        assert_eq!(Answer::of_refusal(aof_off), Some(Answer::AofOff));
        assert_eq!(Answer::of_refusal(replica), Some(Answer::Replica));
        assert_eq!(Answer::of_refusal(unknown), Some(Answer::NoCommand));
        assert_eq!(Answer::of_refusal("NOPERM this user has no permissions to run the 'waitaof' command"), None);
    }
}
