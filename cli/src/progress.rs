//! The line on a terminal's stderr while `run` waits: who holds the lock and how long we
//! have waited, rewritten in place. Drawn by a thread of its own with a raw connection of
//! its own, first after a moment (an uncontended lock shows nothing), cleared when the wait
//! ends. Nothing is drawn once [`Progress::stop`] has returned.

use std::io::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use crate::connect::Settings;
use crate::layout::{Role, Snapshot};
use crate::names;
use crate::status::millis;

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
    pub fn start(settings: Settings, name: String) -> Option<Progress> {
        let line = Arc::new(Mutex::new(Line::default()));
        let shared = Arc::clone(&line);
        thread::Builder::new()
            .name("redlease-progress".into())
            .spawn(move || draw_until_stopped(&settings, &name, &shared))
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

fn draw_until_stopped(settings: &Settings, name: &str, line: &Mutex<Line>) {
    let started = Instant::now();
    thread::sleep(FIRST_DRAW);
    let mut conn = None;
    let mut holder = String::new();
    let mut read_at: Option<Instant> = None;
    loop {
        if lock(line).stopped {
            return;
        }
        if read_at.is_none_or(|at| at.elapsed() >= REREAD) {
            holder = read_holder(settings, &mut conn, name);
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

/// `: held by X, lease 27s left`, or an empty string when it cannot be read.
fn read_holder(settings: &Settings, conn: &mut Option<redis::Connection>, name: &str) -> String {
    if conn.is_none() {
        *conn = settings.raw().ok();
    }
    let Some(c) = conn.as_mut() else { return String::new() };
    match Snapshot::read(c, name) {
        Ok(snapshot) => describe(&snapshot),
        Err(_) => {
            *conn = None;
            String::new()
        }
    }
}

/// Who holds the lock, in a few words.
pub fn describe(s: &Snapshot) -> String {
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
    // SAFETY: TIOCGWINSZ fills the zeroed `winsize` it is given, or fails.
    let columns = unsafe {
        let mut size: libc::winsize = std::mem::zeroed();
        if libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) == 0 { size.ws_col } else { 0 }
    };
    if columns == 0 { 80 } else { usize::from(columns) }
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
            server_time_ms: 0,
        };
        assert_eq!(describe(&s), ": held by 2 readers, lease 27s left");
        s.holders.truncate(1);
        s.holders[0].role = Role::Lock;
        assert_eq!(describe(&s), ": held by a:1, lease 27s left");
        s.holders[0].owner = "e779d027-44e7-4f09-84c1-81db42100d50:12".into();
        assert_eq!(describe(&s), ": held by e779d027…:12, lease 27s left");
        assert_eq!(fit("abcdef", 4), "abc");
    }
}
