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

use crate::layout::{Role, Snapshot};
use crate::names;
use crate::status::{NEVER_MS, millis};

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
    /// Starts the thread; `None` if the OS refuses one (then there is no line).
    pub fn start(client: Client, name: String) -> Option<Progress> {
        let line = Arc::new(Mutex::new(Line::default()));
        let shared = Arc::clone(&line);
        thread::Builder::new()
            .name("redlease-progress".into())
            .spawn(move || draw_until_stopped(&client, &name, &shared))
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

fn draw_until_stopped(client: &Client, name: &str, line: &Mutex<Line>) {
    let started = Instant::now();
    thread::sleep(FIRST_DRAW);
    let mut holder = String::new();
    let mut read_at: Option<Instant> = None;
    loop {
        if lock(line).stopped {
            return;
        }
        if read_at.is_none_or(|at| at.elapsed() >= REREAD) {
            holder = Snapshot::read(client, name).map(|s| describe(&s)).unwrap_or_default();
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

/// Who holds the lock, or how many permits are taken, in a few words.
pub fn describe(s: &Snapshot) -> String {
    if s.is_semaphore() {
        let available = s.available_permits.unwrap_or(0);
        let total = s.total_permits().unwrap_or(available);
        let mut text = format!(": {} of {total} permits taken", total.saturating_sub(available));
        let next = s.permits.iter().filter_map(|p| p.deadline_ms).min();
        if let Some(d) = next.filter(|d| *d >= s.server_time_ms && *d < NEVER_MS) {
            let left = d - s.server_time_ms;
            text.push_str(&format!(", the first lease ends in {}", millis(left - left % 1000)));
        }
        return text;
    }
    if !s.is_held() {
        return ": free, trying again".to_owned();
    }
    let readers = s.holders.iter().filter(|h| h.role == Role::Read).count();
    let writer = s.holders.iter().find(|h| h.role == Role::Write);
    let who = match (writer, readers) {
        (Some(w), _) => format!("writer {}", short(&w.owner)),
        (None, 1) | (None, 0) => match s.holders.first() {
            Some(h) if h.role == Role::Read => format!("reader {}", short(&h.owner)),
            Some(h) => short(&h.owner),
            None => "?".to_owned(),
        },
        (None, n) => format!("{n} readers"),
    };
    let mut text = format!(": held by {who}");
    match s.ttl_ms {
        Some(ttl) if ttl >= 0 => text.push_str(&format!(", lease {} left", millis(ttl - ttl % 1000))),
        Some(_) => text.push_str(", no expiry"),
        None => {}
    }
    if !s.queue.is_empty() {
        text.push_str(&format!(", {} queued", s.queue.len()));
    }
    text
}

/// An owner field with its client id cut to 8 characters: `e779d027…:1`.
fn short(owner: &str) -> String {
    match owner.rsplit_once(':') {
        Some((client, thread)) if client.len() > 8 && client.is_char_boundary(8) => {
            format!("{}…:{thread}", &client[..8])
        }
        _ => owner.to_owned(),
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
    use super::*;
    use crate::layout::Holder;

    #[test]
    fn the_holder_is_described_in_a_few_words() {
        let mut s = Snapshot {
            name: "n".into(),
            key_type: "hash".into(),
            mode: Some("read".into()),
            holders: vec![
                Holder { owner: "a:1".into(), role: Role::Read, holds: 1, ttl_ms: None },
                Holder { owner: "b:1".into(), role: Role::Read, holds: 1, ttl_ms: None },
            ],
            ttl_ms: Some(27_345),
            queue: vec![],
            stale_deadlines: 0,
            token: None,
            available_permits: None,
            permits_taken: 0,
            permits: vec![],
            server_time_ms: 0,
        };
        assert_eq!(describe(&s), ": held by 2 readers, lease 27s left");
        s.holders.truncate(1);
        s.holders[0].role = Role::Lock;
        assert_eq!(describe(&s), ": held by a:1, lease 27s left");
        s.holders[0].owner = "e779d027-44e7-4f09-84c1-81db42100d50:12".into();
        assert_eq!(describe(&s), ": held by e779d027…:12, lease 27s left");
        assert_eq!(fit("abcdef", 4), "abc");
        s.key_type = "string".into();
        s.holders.clear();
        s.available_permits = Some(0);
        s.permits_taken = 2;
        s.permits = vec![crate::layout::Permit { id: "a".into(), deadline_ms: Some(27_345) }];
        assert_eq!(describe(&s), ": 2 of 2 permits taken, the first lease ends in 27s");
    }
}
