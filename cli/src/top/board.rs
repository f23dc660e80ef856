//! What `redlease top` shows, as data: one row per lock, made from what the library's
//! inspection read, sorted by waiters, with the lease left as a share of a bar. No terminal
//! and no Redis here (the screen draws a [`Board`], `live` and `--once` fill one).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use redlease::{Holder, HolderRole, LockInfo, LockKind};

use crate::names;
use crate::status::{self, millis};

/// The bar's full length is at least the library's default watchdog lease: a lease of the
/// default then swings between two thirds and full as it is renewed, and a shorter fixed
/// lease shows as the small share of it that it is.
pub const BAR_FLOOR: Duration = redlease::DEFAULT_WATCHDOG_TIMEOUT;

/// One lock's row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    /// `plain`, `fair`, `read-write`, `fenced`, `group`, `semaphore`, `election`, or `?`.
    pub kind: &'static str,
    /// `held`, `free`, `window` (kept taken after a release), `write`, `read` (with the
    /// readers), `led` (an election), or a semaphore's permits taken of all.
    pub state: String,
    /// Who holds it: `host pid N thread T` for one holder whose client announced itself,
    /// the owner field cut short otherwise, a count for several.
    pub holder: String,
    /// The lease left (the lock's, a reader's longest, a semaphore's first permit to end).
    pub lease_left: Option<Duration>,
    /// The lease left over the bar's length, in 0..=1 (`None` without a lease).
    pub lease_share: Option<f64>,
    /// Waiters queued (a fair lock) or clients waiting on its channel (the others).
    pub waiters: u64,
    /// `queued` or `clients`: what [`Row::waiters`] counts.
    pub waiters_are: &'static str,
    /// A term and leader's value, a fencing token, a window's end: what else matters.
    pub detail: String,
}

/// The rows of one reading, and the longest lease seen per lock since the view began (the
/// length of each lock's bar).
#[derive(Debug, Default)]
pub struct Board {
    pub rows: Vec<Row>,
    longest: HashMap<String, Duration>,
}

impl Board {
    /// Replaces the rows with those of `infos` (read at once; `leaders` are the elections'
    /// advertised values by name), sorted: most waiters first, then held before free,
    /// then by name.
    pub fn update(&mut self, infos: &[LockInfo], leaders: &HashMap<String, String>) {
        // Locks gone from the reading are forgotten, so that a name used again starts anew.
        let names: HashSet<&str> = infos.iter().map(|i| i.name.as_str()).collect();
        self.longest.retain(|name, _| names.contains(name.as_str()));
        let mut rows: Vec<Row> = infos
            .iter()
            .filter(|i| !i.is_foreign())
            .map(|info| {
                let lease = lease_left(info);
                let share = lease.map(|left| {
                    let longest = self.longest.entry(info.name.clone()).or_default();
                    *longest = (*longest).max(left);
                    left.as_secs_f64() / (*longest).max(BAR_FLOOR).as_secs_f64()
                });
                let (waiters, waiters_are) = waiters(info);
                Row {
                    name: names::printable(&info.name),
                    kind: kind(info),
                    state: state(info),
                    holder: holder(info),
                    lease_left: lease,
                    lease_share: share,
                    waiters,
                    waiters_are,
                    detail: detail(info, leaders.get(&info.name).map(String::as_str)),
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.waiters.cmp(&a.waiters).then_with(|| is_free(a).cmp(&is_free(b))).then_with(|| a.name.cmp(&b.name))
        });
        self.rows = rows;
    }

    /// Locks held (or kept by a window), and waiters in all.
    pub fn totals(&self) -> (usize, u64) {
        (self.rows.iter().filter(|r| !is_free(r)).count(), self.rows.iter().map(|r| r.waiters).sum())
    }
}

fn is_free(row: &Row) -> bool {
    row.state == "free"
}

fn kind(info: &LockInfo) -> &'static str {
    match info.kind {
        Some(LockKind::Lock) => "plain",
        Some(kind) => kind.name(),
        None => "?",
    }
}

fn state(info: &LockInfo) -> String {
    if info.kind == Some(LockKind::Semaphore) {
        let (_, taken, total) = status::permits(info);
        return format!("{taken}/{total} taken");
    }
    if !info.is_held() {
        return "free".to_owned();
    }
    if info.holders.iter().all(Holder::is_window_keeper) {
        return "window".to_owned();
    }
    let readers = info.holders.iter().filter(|h| h.role == HolderRole::Read).count();
    match info.kind {
        Some(LockKind::Election) => "led".to_owned(),
        _ if info.holders.iter().any(|h| h.role == HolderRole::Write) => "write".to_owned(),
        _ if readers > 0 => format!("read ×{readers}"),
        _ => "held".to_owned(),
    }
}

/// One holder as `host pid N thread T`, or its owner field cut short when its client did
/// not announce itself (a Redisson client, or one whose announcement ran out).
fn one_holder(h: &Holder) -> String {
    let (client, thread) = h.owner.rsplit_once(':').unwrap_or((h.owner.as_str(), "?"));
    match &h.client {
        Some(c) => format!("{} pid {} thread {thread}", c.host, c.pid),
        None if client.len() > 8 && client.is_char_boundary(8) => format!("{}…:{thread} (unannounced)", &client[..8]),
        None => format!("{} (unannounced)", h.owner),
    }
}

fn holder(info: &LockInfo) -> String {
    let holders: Vec<&Holder> = info.holders.iter().filter(|h| !h.is_window_keeper()).collect();
    match holders.as_slice() {
        [] => String::new(),
        [one] => one_holder(one),
        many if many.iter().all(|h| h.role == HolderRole::Read) => format!("{} readers", many.len()),
        many => format!("{} holders", many.len()),
    }
}

/// The lease that ends the hold shown: the lock's, else the longest of its holders' (the
/// readers'), else the first of a semaphore's permits to end.
fn lease_left(info: &LockInfo) -> Option<Duration> {
    if info.kind == Some(LockKind::Semaphore) {
        let first = info.permits.iter().filter_map(|p| p.deadline).min()?;
        return Some(first.duration_since(info.server_time).unwrap_or_default());
    }
    info.lease_left.or_else(|| info.holders.iter().filter_map(|h| h.lease_left).max())
}

fn waiters(info: &LockInfo) -> (u64, &'static str) {
    if info.queue.is_empty() {
        (info.waiting_clients.unwrap_or(0), "clients")
    } else {
        (u64::try_from(info.queue.len()).unwrap_or(u64::MAX), "queued")
    }
}

fn detail(info: &LockInfo, leader: Option<&str>) -> String {
    match (info.kind, info.token) {
        (Some(LockKind::Election), Some(term)) => match leader {
            Some(value) => format!("term {term}, led by {value}"),
            None => format!("term {term}"),
        },
        (_, Some(token)) => format!("last token {token}"),
        _ if state(info) == "window" => match info.lease_left {
            Some(left) => format!("kept {} after a release", millis(left.as_millis() as i64 / 1000 * 1000)),
            None => "kept until its key is deleted".to_owned(),
        },
        _ => String::new(),
    }
}

/// The reading's time as the server told it, `HH:MM:SS` UTC.
pub fn clock(t: SystemTime) -> String {
    let text = humantime::format_rfc3339_seconds(t).to_string();
    text.get(11..19).unwrap_or(&text).to_owned()
}

#[cfg(test)]
mod tests {
    use redlease::{ClientIdentity, Waiter};

    use super::*;

    fn lock(name: &str, kind: LockKind, owner: Option<&str>, left_ms: Option<u64>) -> LockInfo {
        let mut info = LockInfo::default();
        info.name = name.into();
        info.kind = Some(kind);
        info.key_type = if owner.is_some() { "hash".into() } else { "none".into() };
        if let Some(owner) = owner {
            let mut h = Holder::default();
            h.owner = owner.into();
            h.holds = 1;
            info.holders = vec![h];
        }
        info.lease_left = left_ms.map(Duration::from_millis);
        info
    }

    fn queued(info: &mut LockInfo, n: usize) {
        info.queue = (1..=n)
            .map(|position| {
                let mut w = Waiter::default();
                w.position = position;
                w.owner = format!("w:{position}");
                w
            })
            .collect();
    }

    #[test]
    fn rows_sort_by_waiters_then_held_then_name() {
        let mut fair = lock("b-fair", LockKind::Fair, Some("0123456789ab:7"), Some(20_000));
        queued(&mut fair, 3);
        let mut plain = lock("c-plain", LockKind::Lock, Some("x:1"), Some(30_000));
        plain.waiting_clients = Some(1);
        let free = lock("a-free", LockKind::Lock, None, None);
        let held = lock("d-held", LockKind::Lock, Some("y:2"), Some(29_000));
        let mut board = Board::default();
        board.update(&[free, held, plain, fair], &HashMap::new());
        let order: Vec<&str> = board.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(order, ["b-fair", "c-plain", "d-held", "a-free"]);
        assert_eq!((board.rows[0].waiters, board.rows[0].waiters_are), (3, "queued"));
        assert_eq!((board.rows[1].waiters, board.rows[1].waiters_are), (1, "clients"));
        assert_eq!(board.rows[0].holder, "01234567…:7 (unannounced)");
        assert_eq!(board.totals(), (3, 4));
    }

    #[test]
    fn a_holder_that_announced_itself_shows_host_pid_and_thread() {
        let mut info = lock("jobs", LockKind::Lock, Some("e779d027-aaaa:12"), Some(25_000));
        let mut who = ClientIdentity::default();
        who.host = "web-3".into();
        who.pid = 4711;
        info.holders[0].client = Some(who);
        let mut board = Board::default();
        board.update(&[info], &HashMap::new());
        assert_eq!(board.rows[0].holder, "web-3 pid 4711 thread 12");
        assert_eq!(board.rows[0].state, "held");
    }

    #[test]
    fn the_bar_is_the_lease_left_over_the_longest_seen_and_at_least_the_default_watchdog() {
        let mut board = Board::default();
        let none = HashMap::new();
        // A default watchdog lease, renewed: full, then two thirds.
        board.update(&[lock("w", LockKind::Lock, Some("a:1"), Some(30_000))], &none);
        assert_eq!(board.rows[0].lease_share, Some(1.0));
        board.update(&[lock("w", LockKind::Lock, Some("a:1"), Some(20_000))], &none);
        assert!((board.rows[0].lease_share.unwrap() - 2.0 / 3.0).abs() < 1e-9);
        // A longer lease draining: its own first reading is the bar's length.
        board.update(&[lock("w", LockKind::Lock, Some("a:1"), Some(120_000))], &none);
        board.update(&[lock("w", LockKind::Lock, Some("a:1"), Some(60_000))], &none);
        assert_eq!(board.rows[0].lease_share, Some(0.5));
        // A short fixed lease is a short bar.
        board.update(&[lock("s", LockKind::Lock, Some("a:1"), Some(3_000))], &none);
        assert!((board.rows[0].lease_share.unwrap() - 0.1).abs() < 1e-9);
        // A lock gone and back starts anew.
        board.update(&[lock("w", LockKind::Lock, Some("a:1"), Some(15_000))], &none);
        assert_eq!(board.rows[0].lease_share, Some(0.5));
        // Free: no lease, no bar.
        board.update(&[lock("w", LockKind::Lock, None, None)], &none);
        assert_eq!(board.rows[0].lease_share, None);
        assert_eq!(board.rows[0].state, "free");
    }

    #[test]
    fn readers_windows_elections_and_semaphores_say_what_they_are() {
        let mut rw = lock("rw", LockKind::ReadWrite, Some("a:1"), Some(30_000));
        let mut second = rw.holders[0].clone();
        second.owner = "b:2".into();
        for h in [&mut rw.holders[0], &mut second] {
            h.role = HolderRole::Read;
        }
        rw.holders.push(second);
        let window = lock("kept", LockKind::Lock, Some("c:0"), Some(29_400));
        let mut election = lock("leader", LockKind::Election, Some("d:1"), Some(10_000));
        election.token = Some(12);
        let mut semaphore = lock("sem", LockKind::Semaphore, None, None);
        semaphore.key_type = "string".into();
        semaphore.permits_available = Some(1);
        semaphore.permits_taken = 0;
        let leaders = HashMap::from([("leader".to_owned(), "web-3".to_owned())]);
        let mut board = Board::default();
        board.update(&[rw, window, election, semaphore], &leaders);
        let row = |name: &str| board.rows.iter().find(|r| r.name == name).unwrap().clone();
        assert_eq!((row("rw").state.as_str(), row("rw").holder.as_str()), ("read ×2", "2 readers"));
        assert_eq!((row("kept").state.as_str(), row("kept").holder.as_str()), ("window", ""));
        assert_eq!(row("kept").detail, "kept 29s after a release");
        assert_eq!((row("leader").state.as_str(), row("leader").detail.as_str()), ("led", "term 12, led by web-3"));
        assert_eq!((row("sem").kind, row("sem").state.as_str()), ("semaphore", "0/1 taken"));
    }
}
