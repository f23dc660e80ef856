//! `redlease status NAME…` and `redlease ls [PATTERN]`: each lock's or semaphore's state as
//! the library's inspection API reads it (`Client::inspect`, `Client::locks`), as text for
//! people or as JSON for scripts (the schema is in docs/cli.md, and later versions keep it).

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redlease::{ClientIdentity, Holder, HolderRole, LockInfo, LockKind};
use serde_json::{Value, json};

use crate::args::{ListArgs, StatusArgs};
use crate::connect::Settings;
use crate::exit::{self, Failure};
use crate::names;

pub fn status(args: &StatusArgs) -> Result<u8, Failure> {
    for name in &args.names {
        names::check(name)?;
    }
    let settings = Settings::from_args(&args.connection)?;
    let client = settings.client(None, None)?;
    let mut infos = Vec::with_capacity(args.names.len());
    for name in &args.names {
        let info = client
            .inspect(name)
            .map_err(|e| Failure::from_lock_error(&format!("cannot read {}", exit::shown(name)), &e))?;
        infos.push(info);
    }
    client.shutdown();
    show(&infos, args.json, |infos, now| infos.iter().map(|i| to_text(i, now)).collect());
    Ok(exit::OK)
}

pub fn list(args: &ListArgs) -> Result<u8, Failure> {
    let settings = Settings::from_args(&args.connection)?;
    let client = settings.client(None, None)?;
    let pattern = args.pattern.as_deref().unwrap_or("*");
    let infos = client
        .locks(pattern)
        .map_err(|e| Failure::from_lock_error(&format!("cannot list {}", exit::shown(pattern)), &e))?;
    client.shutdown();
    show(&infos, args.json, list_text);
    Ok(exit::OK)
}

/// Prints `infos` on stdout: one JSON array of [`to_json`]'s objects, or `text`'s lines
/// (given this machine's clock, for the clients' uptimes).
fn show(infos: &[LockInfo], json: bool, text: impl Fn(&[LockInfo], SystemTime) -> String) {
    let out = if json {
        format!("{}\n", Value::Array(infos.iter().map(to_json).collect()))
    } else {
        text(infos, SystemTime::now())
    };
    print(&out);
}

fn print(text: &str) {
    let mut stdout = std::io::stdout().lock();
    // A closed stdout (`| head`) is not worth a failure.
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}

/// Milliseconds since the epoch.
fn epoch_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The kind's name in JSON and text (`None`: nothing there, or not a lock).
fn kind_name(info: &LockInfo) -> Option<&'static str> {
    info.kind.map(LockKind::name)
}

/// A client's announcement as JSON; `null` for an unknown client.
fn client_json(client: Option<&ClientIdentity>) -> Value {
    client.map_or(Value::Null, |c| {
        json!({
            "id": c.id,
            "host": c.host,
            "pid": c.pid,
            "program": c.program,
            "started_ms": epoch_ms(c.started),
            "version": c.version,
        })
    })
}

/// The JSON object of one lock (its fields are listed in docs/cli.md): times as they are,
/// the server's and the clients' own.
pub fn to_json(info: &LockInfo) -> Value {
    let server_ms = epoch_ms(info.server_time);
    let holders: Vec<Value> = info
        .holders
        .iter()
        .map(|h| {
            json!({
                "owner": h.owner,
                "role": h.role.name(),
                "window": h.is_window_keeper(),
                "holds": h.holds,
                "ttl_ms": h.lease_left.map(ms),
                "client": client_json(h.client.as_ref()),
            })
        })
        .collect();
    let queue: Vec<Value> = info
        .queue
        .iter()
        .map(|w| {
            let deadline_ms = w.deadline.map(epoch_ms);
            json!({
                "position": w.position,
                "owner": w.owner,
                "deadline_ms": deadline_ms,
                "deadline_in_ms": deadline_ms.map(|d| d.saturating_sub(server_ms).max(0)),
                "client": client_json(w.client.as_ref()),
            })
        })
        .collect();
    let permits: Vec<Value> = info
        .permits
        .iter()
        .map(|p| {
            let deadline_ms = p.deadline.map(epoch_ms);
            json!({
                "id": p.id,
                "deadline_ms": deadline_ms,
                "deadline_in_ms": deadline_ms.map(|d| d.saturating_sub(server_ms).max(0)),
            })
        })
        .collect();
    // A key with no expiry: -1, as Redis's PTTL says it.
    let ttl_ms = match (info.lease_left, info.key_type.as_str()) {
        (Some(left), _) => Some(ms(left)),
        (None, "none") => None,
        (None, _) => Some(-1),
    };
    json!({
        "name": info.name,
        "held": info.is_held(),
        "kind": kind_name(info),
        "type": info.key_type,
        "mode": mode(info),
        "ttl_ms": ttl_ms,
        "holders": holders,
        "queue": queue,
        "token": info.token,
        "available_permits": info.permits_available,
        "permits_taken": info.permits_taken,
        "permits": permits,
        "waiting_clients": info.waiting_clients,
        "server_time_ms": server_ms,
    })
}

/// A semaphore's permits: (available, taken, in all), as the data in Redis says them.
pub fn permits(info: &LockInfo) -> (i64, i64, i64) {
    let available = info.permits_available.unwrap_or(0);
    let total = info.permits_total().unwrap_or(available);
    (available, total.saturating_sub(available), total)
}

/// A read-write lock's mode: `write` while a writer holds it, else `read`.
fn mode(info: &LockInfo) -> Option<&'static str> {
    if info.holders.iter().any(|h| h.role == HolderRole::Write) {
        Some("write")
    } else if info.kind == Some(LockKind::ReadWrite) {
        Some("read")
    } else {
        None
    }
}

/// Who a client is, in a few words: `pid 4711 on web-3 (report-job, up 5m 2s)`.
fn client_text(client: Option<&ClientIdentity>, now: SystemTime) -> String {
    match client {
        Some(c) => {
            let up = now.duration_since(c.started).unwrap_or_default();
            let up = Duration::from_secs(up.as_secs());
            format!("pid {} on {} ({}, up {})", c.pid, c.host, c.program, humantime::format_duration(up))
        }
        None => "client unknown".to_owned(),
    }
}

/// The text of one lock: a first line that says held or free, then one line per fact.
pub fn to_text(info: &LockInfo, now: SystemTime) -> String {
    let mut out = String::new();
    let name = names::printable(&info.name);
    if info.is_foreign() {
        let _ = writeln!(out, "{name}: not a lock (a Redis {} key)", info.key_type);
        return out;
    }
    if info.kind == Some(LockKind::Semaphore) {
        return semaphore_text(info, &name);
    }
    let _ = writeln!(out, "{}", heading(info, &name));
    for h in &info.holders {
        let _ = writeln!(out, "{}", holder_text(info, h, now));
    }
    match (info.lease_left, info.key_type.as_str()) {
        (Some(left), _) => {
            let _ = writeln!(out, "  {:<8} {} left", "lease", millis(ms(left)));
        }
        (None, "none") => {}
        (None, _) => {
            let _ = writeln!(out, "  {:<8} no expiry", "lease");
        }
    }
    if !info.queue.is_empty() {
        let _ = writeln!(out, "  {:<8} {} waiting", "queue", info.queue.len());
        for w in &info.queue {
            let _ = writeln!(
                out,
                "    {}. {}  {}  {}",
                w.position,
                w.owner,
                deadline_text(w.deadline, info.server_time),
                client_text(w.client.as_ref(), now)
            );
        }
    } else if let Some(n) = info.waiting_clients.filter(|n| *n > 0) {
        let _ = writeln!(out, "  {:<8} {n} {} waiting", "clients", if n == 1 { "client" } else { "clients" });
    }
    out
}

/// The first line of a lock's text: held or free, and what it is (kind, mode, token or
/// term) when known.
fn heading(info: &LockInfo, name: &str) -> String {
    let mut about = Vec::new();
    match info.kind {
        Some(LockKind::Election) => about.push("election".to_owned()),
        Some(kind) => about.push(format!("{} lock", if kind == LockKind::Lock { "plain" } else { kind.name() })),
        None => {}
    }
    if let Some(mode) = mode(info) {
        about.push(format!("mode {mode}"));
    }
    match (info.kind, info.token) {
        (Some(LockKind::Election), Some(term)) => about.push(format!("term {term}")),
        (_, Some(token)) => about.push(format!("last token {token}")),
        (_, None) => {}
    }
    let state = if info.is_held() { "held" } else { "free" };
    if about.is_empty() { format!("{name}: {state}") } else { format!("{name}: {state} ({})", about.join(", ")) }
}

/// One holder's line of a lock's text (without its newline): its role, owner, holds, lease
/// and client; a window keeper's says until when it keeps the lock taken.
fn holder_text(info: &LockInfo, h: &Holder, now: SystemTime) -> String {
    if h.is_window_keeper() {
        // Nobody holds it: a window keeps it after a release; its client may be gone.
        let mut line = format!("  {:<8} {}  kept taken until {}", "window", h.owner, window_end(info));
        if let Some(c) = &h.client {
            let _ = write!(line, ", after a release by pid {} on {} ({})", c.pid, c.host, c.program);
        }
        return line;
    }
    let role = match h.role {
        HolderRole::Read => "reader",
        HolderRole::Write => "writer",
        _ => "holder",
    };
    let unit = match (h.role, h.holds) {
        (HolderRole::Values, 1) => "value",
        (HolderRole::Values, _) => "values",
        (_, 1) => "hold",
        _ => "holds",
    };
    let mut line = format!("  {role:<8} {}  {} {unit}", h.owner, h.holds);
    if let Some(left) = h.lease_left {
        let _ = write!(line, ", {} left", millis(ms(left)));
    }
    format!("{line}  {}", client_text(h.client.as_ref(), now))
}

/// A semaphore: how many permits are available of how many, then each permit taken with
/// its deadline.
fn semaphore_text(info: &LockInfo, name: &str) -> String {
    let mut out = String::new();
    let state = if info.is_held() { "held" } else { "free" };
    let (available, _, total) = permits(info);
    let _ = writeln!(out, "{name}: {state} (semaphore, {available} of {total} permits available)");
    for p in &info.permits {
        let _ = writeln!(out, "  {:<8} {}  {}", "permit", p.id, deadline_text(p.deadline, info.server_time));
    }
    if info.permits_taken > info.permits.len() {
        let _ = writeln!(out, "  ... and {} more permits", info.permits_taken - info.permits.len());
    }
    if let Some(n) = info.waiting_clients.filter(|n| *n > 0) {
        let _ = writeln!(out, "  {:<8} {n} {} waiting", "clients", if n == 1 { "client" } else { "clients" });
    }
    out
}

/// One line per lock: its name, kind and who holds it.
fn list_text(infos: &[LockInfo], now: SystemTime) -> String {
    let names: Vec<String> = infos.iter().map(|i| names::printable(&i.name)).collect();
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for (info, name) in infos.iter().zip(&names) {
        let _ = writeln!(out, "{name:<width$}  {:<10} {}", kind_name(info).unwrap_or("?"), summary(info, now));
    }
    out
}

/// Who holds it, in a few words.
fn summary(info: &LockInfo, now: SystemTime) -> String {
    if info.kind == Some(LockKind::Semaphore) {
        let (_, taken, total) = permits(info);
        return format!("{taken} of {total} permits taken");
    }
    if !info.is_held() {
        return "free".to_owned();
    }
    let readers = info.holders.iter().filter(|h| h.role == HolderRole::Read).count();
    if let [keeper] = info.holders.as_slice()
        && keeper.is_window_keeper()
    {
        return format!("kept by a window until {}", window_end(info));
    }
    let mut text = match info.holders.as_slice() {
        [one] => format!("held by {}", client_text(one.client.as_ref(), now)),
        _ if readers > 1 => format!("{readers} readers"),
        many => format!("{} holders", many.len()),
    };
    if let Some(left) = info.lease_left {
        let _ = write!(text, ", lease {} left", millis(ms(left) - ms(left) % 1000));
    }
    if !info.queue.is_empty() {
        let _ = write!(text, ", {} queued", info.queue.len());
    }
    text
}

/// Until when a window keeps a lock taken, by the server's clock, and what is left:
/// `2025-05-01T10:00:29Z (29s left)`; for a key without expiry (someone ran `PERSIST`),
/// until it is deleted.
pub fn window_end(info: &LockInfo) -> String {
    match info.lease_left {
        Some(left) => {
            let until = humantime::format_rfc3339_seconds(info.server_time + left);
            format!("{until} ({} left)", millis(ms(left) - ms(left) % 1000))
        }
        None => "its key is deleted (it has no expiry)".to_owned(),
    }
}

/// `deadline in 5m`, `deadline passed 1s ago`, or `no deadline`.
fn deadline_text(deadline: Option<SystemTime>, now: SystemTime) -> String {
    match deadline {
        Some(d) if d >= now => format!("deadline in {}", millis(ms(d.duration_since(now).unwrap_or_default()))),
        Some(d) => format!("deadline passed {} ago", millis(ms(now.duration_since(d).unwrap_or_default()))),
        None => "no deadline".to_owned(),
    }
}

/// `27s 345ms`, `4m 59s 800ms`.
pub fn millis(ms: i64) -> String {
    let d = Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use redlease::{Permit, Waiter};

    use super::*;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn fair() -> LockInfo {
        let mut info = LockInfo::default();
        info.name = "jobs".into();
        info.kind = Some(LockKind::Fair);
        info.key_type = "hash".into();
        let mut holder = Holder::default();
        holder.owner = "a:1".into();
        holder.holds = 2;
        let mut who = ClientIdentity::default();
        who.pid = 4711;
        who.host = "web-3".into();
        who.program = "report".into();
        who.started = at(1_000_000 - 65_000);
        holder.client = Some(who);
        info.holders = vec![holder];
        info.lease_left = Some(Duration::from_millis(29_500));
        let mut waiter = Waiter::default();
        waiter.position = 1;
        waiter.owner = "b:1".into();
        waiter.deadline = Some(at(1_300_000));
        info.queue = vec![waiter];
        info.server_time = at(1_000_000);
        info
    }

    #[test]
    fn text_says_who_holds_and_who_waits() {
        let text = to_text(&fair(), at(1_000_000));
        assert_eq!(
            text,
            "jobs: held (fair lock)\n  holder   a:1  2 holds  pid 4711 on web-3 (report, up 1m 5s)\n  lease    29s 500ms left\n  queue    1 waiting\n    1. b:1  deadline in 5m  client unknown\n"
        );
        assert_eq!(
            list_text(&[fair()], at(1_000_000)),
            "jobs  fair       held by pid 4711 on web-3 (report, up 1m 5s), lease 29s left, 1 queued\n"
        );
    }

    #[test]
    fn json_has_every_field() {
        let v = to_json(&fair());
        assert_eq!(v["held"], true);
        assert_eq!(v["kind"], "fair");
        assert_eq!(v["holders"][0]["holds"], 2);
        assert_eq!(v["holders"][0]["client"]["pid"], 4711);
        assert_eq!(v["holders"][0]["client"]["started_ms"], 935_000);
        assert_eq!(v["queue"][0]["deadline_in_ms"], 300_000);
        assert_eq!(v["queue"][0]["client"], Value::Null);
        assert_eq!(v["ttl_ms"], 29_500);
        assert_eq!(v["token"], Value::Null);
        assert_eq!(v["available_permits"], Value::Null);
        assert_eq!(v["waiting_clients"], Value::Null);
        assert_eq!(v["server_time_ms"], 1_000_000);
    }

    #[test]
    fn a_semaphore_reads_as_permits_available_and_taken() {
        let mut info = LockInfo::default();
        info.name = "jobs".into();
        info.kind = Some(LockKind::Semaphore);
        info.key_type = "string".into();
        info.permits_available = Some(0);
        info.permits_taken = 2;
        let permit = |id: &str, deadline: u64| {
            let mut p = Permit::default();
            p.id = id.into();
            p.deadline = Some(at(deadline));
            p
        };
        info.permits = vec![permit("ab01", 1_029_500), permit("cd02", 999_000)];
        info.server_time = at(1_000_000);
        assert_eq!(
            to_text(&info, at(1_000_000)),
            "jobs: held (semaphore, 0 of 2 permits available)\n  permit   ab01  deadline in 29s 500ms\n  permit   cd02  deadline passed 1s ago\n"
        );
        let v = to_json(&info);
        assert_eq!(v["kind"], "semaphore");
        assert_eq!(v["held"], true);
        assert_eq!(v["ttl_ms"], -1, "a semaphore's count does not expire");
        assert_eq!(v["permits"][0]["deadline_in_ms"], 29_500);
        assert_eq!(v["permits_taken"], 2);
        assert_eq!(summary(&info, at(1_000_000)), "2 of 2 permits taken");
    }
}
