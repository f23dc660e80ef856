//! The line on a terminal's stderr while `run` waits: who holds the lock (or how many
//! permits are taken) and how long we have waited, rewritten in place. Drawn by a thread of
//! its own, which reads on the waiting client's own connection pool, first after a moment
//! (an uncontended lock shows nothing), cleared when the wait ends. Nothing is drawn once
//! [`Progress::stop`] has returned.

use std::io::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use redlease::Client;

use redlease::{Holder, HolderRole, Leader, LockInfo, LockKind};

use crate::names;

/// Time before the line first shows.
const FIRST_DRAW: Duration = Duration::from_millis(250);
/// Time between two draws.
const REDRAW: Duration = Duration::from_millis(250);
/// Time between two reads of the holder.
const REREAD: Duration = Duration::from_secs(1);

pub struct Progress {
    line: Arc<Mutex<Line>>,
}

#[derive(Default)]
struct Line {
    stopped: bool,
    drawn: bool,
}

impl Progress {
    /// Starts the thread; `None` if the OS refuses one (then there is no line). `election`:
    /// the name is an election's, whose leader is shown.
    pub fn start(client: Client, name: String, election: bool) -> Option<Progress> {
        let line = Arc::new(Mutex::new(Line::default()));
        let shared = Arc::clone(&line);
        thread::Builder::new()
            .name("redlease-progress".into())
            .spawn(move || draw_until_stopped(&client, &name, election, &shared))
            .ok()?;
        Some(Progress { line })
    }

    /// Clears the line; nothing is drawn after this returns.
    pub fn stop(self) {
        let mut line = lock(&self.line);
        if line.drawn {
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(b"\r\x1b[K").and_then(|()| stderr.flush());
        }
        line.stopped = true;
    }
}

fn lock(line: &Mutex<Line>) -> MutexGuard<'_, Line> {
    line.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn draw_until_stopped(client: &Client, name: &str, election: bool, line: &Mutex<Line>) {
    let started = Instant::now();
    thread::sleep(FIRST_DRAW);
    let mut holder = String::new();
    let mut read_at: Option<Instant> = None;
    loop {
        if lock(line).stopped {
            return;
        }
        if read_at.is_none_or(|at| at.elapsed() >= REREAD) {
            holder = if election {
                client.election(name).leader().map(|l| describe_leader(l.as_ref())).unwrap_or_default()
            } else {
                client.inspect(name).map(|info| describe(&info)).unwrap_or_default()
            };
            read_at = Some(Instant::now());
        }
        let waited = Duration::from_secs(started.elapsed().as_secs());
        let text = format!(
            "redlease: waiting for {} for {}{holder}",
            names::printable(name),
            humantime::format_duration(waited)
        );
        {
            let mut line = lock(line);
            if line.stopped {
                return;
            }
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[K{}", fit(&text, width()));
            let _ = stderr.flush();
            line.drawn = true;
        }
        thread::sleep(REDRAW);
    }
}

/// Who leads, in a few words.
fn describe_leader(leader: Option<&Leader>) -> String {
    match leader {
        Some(l) => format!(": led by {} (term {})", l.value, l.term),
        None => ": nobody leads, trying again".to_owned(),
    }
}

/// Who holds the lock, or how many permits are taken, in a few words.
pub fn describe(info: &LockInfo) -> String {
    if info.kind == Some(LockKind::Semaphore) {
        let (_, taken, total) = crate::status::permits(info);
        let mut text = format!(": {taken} of {total} permits taken");
        let next = info.permits.iter().filter_map(|p| p.deadline).min();
        if let Some(left) = next.and_then(|d| d.duration_since(info.server_time).ok()) {
            text.push_str(&format!(", the first lease ends in {}", whole_seconds(left)));
        }
        return text;
    }
    if !info.is_held() {
        return ": free, trying again".to_owned();
    }
    if let [keeper] = info.holders.as_slice()
        && keeper.is_window_keeper()
    {
        // Nobody holds it: an `--at-least` window keeps it until its lease ends.
        return match info.lease_left {
            Some(left) => format!(": kept taken by a window, {} left", whole_seconds(left)),
            None => ": kept taken by a window, no expiry".to_owned(),
        };
    }
    let readers = info.holders.iter().filter(|h| h.role == HolderRole::Read).count();
    let writer = info.holders.iter().find(|h| h.role == HolderRole::Write);
    let who = match (writer, readers) {
        (Some(w), _) => format!("writer {}", holder(w)),
        (None, 1) | (None, 0) => match info.holders.first() {
            Some(h) if h.role == HolderRole::Read => format!("reader {}", holder(h)),
            Some(h) => holder(h),
            None => "?".to_owned(),
        },
        (None, n) => format!("{n} readers"),
    };
    let mut text = format!(": held by {who}");
    match (info.lease_left, info.key_type.as_str()) {
        (Some(left), _) => text.push_str(&format!(", lease {} left", whole_seconds(left))),
        (None, "none") => {}
        (None, _) => text.push_str(", no expiry"),
    }
    if !info.queue.is_empty() {
        text.push_str(&format!(", {} queued", info.queue.len()));
    }
    text
}

fn whole_seconds(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// A holder: its client's pid and host when it announced itself, else its owner field
/// with the client id cut to 8 characters (`e779d027…:1`).
fn holder(h: &Holder) -> String {
    if let Some(c) = &h.client {
        return format!("pid {} on {}", c.pid, c.host);
    }
    match h.owner.rsplit_once(':') {
        Some((client, thread)) if client.len() > 8 && client.is_char_boundary(8) => {
            format!("{}…:{thread}", &client[..8])
        }
        _ => h.owner.clone(),
    }
}

/// The terminal's width (of stderr), 80 when unknown.
fn width() -> usize {
    match rustix::termios::tcgetwinsize(std::io::stderr()) {
        Ok(size) if size.ws_col > 0 => usize::from(size.ws_col),
        _ => 80,
    }
}

/// `text` cut to fit one line of `width` columns (less one, so that the cursor does not
/// wrap).
fn fit(text: &str, width: usize) -> String {
    text.chars().take(width.saturating_sub(1).max(1)).collect()
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use redlease::{ClientIdentity, Permit};

    use super::*;

    #[test]
    fn the_holder_is_described_in_a_few_words() {
        let mut info = LockInfo::default();
        info.name = "n".into();
        info.kind = Some(LockKind::ReadWrite);
        info.key_type = "hash".into();
        let reader = |owner: &str| {
            let mut h = Holder::default();
            h.owner = owner.into();
            h.role = HolderRole::Read;
            h.holds = 1;
            h
        };
        info.holders = vec![reader("a:1"), reader("b:1")];
        info.lease_left = Some(Duration::from_millis(27_345));
        assert_eq!(describe(&info), ": held by 2 readers, lease 27s left");
        info.holders.truncate(1);
        info.holders[0].role = HolderRole::Lock;
        assert_eq!(describe(&info), ": held by a:1, lease 27s left");
        info.holders[0].owner = "e779d027-44e7-4f09-84c1-81db42100d50:12".into();
        assert_eq!(describe(&info), ": held by e779d027…:12, lease 27s left");
        let mut who = ClientIdentity::default();
        who.pid = 4711;
        who.host = "web-3".into();
        info.holders[0].client = Some(who);
        assert_eq!(describe(&info), ": held by pid 4711 on web-3, lease 27s left");
        // A window's keeper: nobody holds it, the window ends with the lease.
        info.holders[0].owner = "e779d027-44e7-4f09-84c1-81db42100d50:0".into();
        assert_eq!(describe(&info), ": kept taken by a window, 27s left");
        assert_eq!(fit("abcdef", 4), "abc");
        info.kind = Some(LockKind::Semaphore);
        info.key_type = "string".into();
        info.holders.clear();
        info.permits_available = Some(0);
        info.permits_taken = 2;
        let mut permit = Permit::default();
        permit.id = "a".into();
        permit.deadline = Some(UNIX_EPOCH + Duration::from_millis(27_345));
        info.permits = vec![permit];
        info.server_time = SystemTime::UNIX_EPOCH;
        assert_eq!(describe(&info), ": 2 of 2 permits taken, the first lease ends in 27s");
    }
}
