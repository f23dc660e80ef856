//! `redlease status NAME…`: each lock's or semaphore's state, read directly from Redis
//! (see [`layout`](crate::layout)) on the library client's connection, as text for people
//! or as JSON for scripts.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use crate::args::StatusArgs;
use crate::connect::Settings;
use crate::exit::{self, Failure};
use crate::layout::{Role, Snapshot};
use crate::names;

pub fn status(args: &StatusArgs) -> Result<u8, Failure> {
    for name in &args.names {
        names::check(name)?;
    }
    let settings = Settings::from_args(&args.connection)?;
    let client = settings.client(None, None)?;
    let mut snapshots = Vec::with_capacity(args.names.len());
    for name in &args.names {
        snapshots.push(Snapshot::read(&client, name)?);
    }
    client.shutdown();
    let text = if args.json {
        let all: Vec<Value> = snapshots.iter().map(to_json).collect();
        format!("{}\n", Value::Array(all))
    } else {
        snapshots.iter().map(to_text).collect()
    };
    let mut stdout = std::io::stdout().lock();
    // A closed stdout (`| head`) is not worth a failure.
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
    Ok(exit::OK)
}

/// The JSON object of one lock (its fields are listed in docs/cli.md).
pub fn to_json(s: &Snapshot) -> Value {
    let holders: Vec<Value> = s
        .holders
        .iter()
        .map(|h| json!({"owner": h.owner, "role": h.role.name(), "holds": h.holds, "ttl_ms": h.ttl_ms}))
        .collect();
    let queue: Vec<Value> = s
        .queue
        .iter()
        .enumerate()
        .map(|(i, w)| {
            json!({
                "position": i + 1,
                "owner": w.owner,
                "deadline_ms": w.deadline_ms,
                "deadline_in_ms": w.deadline_ms.map(|d| d.saturating_sub(s.server_time_ms)),
            })
        })
        .collect();
    let permits: Vec<Value> = s
        .permits
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "deadline_ms": p.deadline_ms,
                "deadline_in_ms": p.deadline_ms.map(|d| d.saturating_sub(s.server_time_ms)),
            })
        })
        .collect();
    json!({
        "name": s.name,
        "held": s.is_held(),
        "kind": s.kind(),
        "type": s.key_type,
        "mode": s.mode,
        "ttl_ms": s.ttl_ms,
        "holders": holders,
        "queue": queue,
        "token": s.token,
        "available_permits": s.available_permits,
        "permits_taken": s.permits_taken,
        "permits": permits,
        "server_time_ms": s.server_time_ms,
    })
}

/// The text of one lock: a first line that says held or free, then one line per fact.
pub fn to_text(s: &Snapshot) -> String {
    let mut out = String::new();
    let name = names::printable(&s.name);
    if s.is_foreign() {
        let _ = writeln!(out, "{name}: not a lock (a Redis {} key)", s.key_type);
        return out;
    }
    if s.is_semaphore() {
        return semaphore_text(s, &name);
    }
    let mut about = Vec::new();
    if let Some(kind) = s.kind() {
        about.push(format!("{} lock", if kind == "lock" { "plain" } else { kind }));
    }
    if let Some(mode) = &s.mode {
        about.push(format!("mode {mode}"));
    }
    if let Some(token) = s.token {
        about.push(format!("last token {token}"));
    }
    let state = if s.is_held() { "held" } else { "free" };
    if about.is_empty() {
        let _ = writeln!(out, "{name}: {state}");
    } else {
        let _ = writeln!(out, "{name}: {state} ({})", about.join(", "));
    }
    for h in &s.holders {
        let role = match h.role {
            Role::Lock => "holder",
            Role::Read => "reader",
            Role::Write => "writer",
        };
        let mut line = format!("  {role:<8} {}  {} {}", h.owner, h.holds, if h.holds == 1 { "hold" } else { "holds" });
        if let Some(ttl) = h.ttl_ms {
            let _ = write!(line, ", {}", ttl_text(ttl));
        }
        let _ = writeln!(out, "{line}");
    }
    if let Some(ttl) = s.ttl_ms {
        let _ = writeln!(out, "  {:<8} {}", "lease", ttl_text(ttl));
    }
    if !s.queue.is_empty() {
        let _ = writeln!(out, "  {:<8} {} waiting", "queue", s.queue.len());
        for (i, w) in s.queue.iter().enumerate() {
            let _ = writeln!(out, "    {}. {}  {}", i + 1, w.owner, deadline_text(w.deadline_ms, s.server_time_ms));
        }
    }
    out
}

/// A semaphore: how many permits are available of how many, then each permit taken with
/// its deadline.
fn semaphore_text(s: &Snapshot, name: &str) -> String {
    let mut out = String::new();
    let state = if s.is_held() { "held" } else { "free" };
    let available = s.available_permits.unwrap_or(0);
    let total = s.total_permits().unwrap_or(available);
    let _ = writeln!(out, "{name}: {state} (semaphore, {available} of {total} permits available)");
    for p in &s.permits {
        let _ = writeln!(out, "  {:<8} {}  {}", "permit", p.id, deadline_text(p.deadline_ms, s.server_time_ms));
    }
    if s.permits_taken > s.permits.len() {
        let _ = writeln!(out, "  ... and {} more permits", s.permits_taken - s.permits.len());
    }
    out
}

/// `deadline in 5m`, `deadline passed 1s ago`, or `no deadline`.
fn deadline_text(deadline_ms: Option<i64>, now_ms: i64) -> String {
    match deadline_ms {
        // A permit that never expires has a deadline far beyond any clock.
        Some(d) if d >= NEVER_MS => "no deadline".to_owned(),
        Some(d) if d >= now_ms => format!("deadline in {}", millis(d.saturating_sub(now_ms))),
        Some(d) => format!("deadline passed {} ago", millis(now_ms.saturating_sub(d))),
        None => "no deadline".to_owned(),
    }
}

/// The deadline the library's scripts give a permit that never expires (year 31 000).
pub const NEVER_MS: i64 = 922_337_203_685_477;

fn ttl_text(ttl_ms: i64) -> String {
    if ttl_ms < 0 { "no expiry".to_owned() } else { format!("{} left", millis(ttl_ms)) }
}

/// `27s 345ms`, `4m 59s 800ms`.
pub fn millis(ms: i64) -> String {
    let d = Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Holder, Permit, Waiter};

    fn fair() -> Snapshot {
        Snapshot {
            name: "jobs".into(),
            key_type: "hash".into(),
            mode: None,
            holders: vec![Holder { owner: "a:1".into(), role: Role::Lock, holds: 2, ttl_ms: None }],
            ttl_ms: Some(29_500),
            queue: vec![Waiter { owner: "b:1".into(), deadline_ms: Some(1_300_000) }],
            stale_deadlines: 0,
            token: None,
            available_permits: None,
            permits_taken: 0,
            permits: vec![],
            server_time_ms: 1_000_000,
        }
    }

    #[test]
    fn text_says_who_holds_and_who_waits() {
        let text = to_text(&fair());
        assert_eq!(
            text,
            "jobs: held (fair lock)\n  holder   a:1  2 holds\n  lease    29s 500ms left\n  queue    1 waiting\n    1. b:1  deadline in 5m\n"
        );
    }

    #[test]
    fn json_has_every_field() {
        let v = to_json(&fair());
        assert_eq!(v["held"], true);
        assert_eq!(v["kind"], "fair");
        assert_eq!(v["holders"][0]["holds"], 2);
        assert_eq!(v["queue"][0]["deadline_in_ms"], 300_000);
        assert_eq!(v["token"], Value::Null);
        assert_eq!(v["available_permits"], Value::Null);
    }

    #[test]
    fn a_semaphore_reads_as_permits_available_and_taken() {
        let mut s = fair();
        s.key_type = "string".into();
        s.holders.clear();
        s.queue.clear();
        s.ttl_ms = Some(-1);
        s.available_permits = Some(0);
        s.permits_taken = 2;
        s.permits = vec![
            Permit { id: "ab01".into(), deadline_ms: Some(1_029_500) },
            Permit { id: "cd02".into(), deadline_ms: Some(999_000) },
        ];
        assert_eq!(
            to_text(&s),
            "jobs: held (semaphore, 0 of 2 permits available)\n  permit   ab01  deadline in 29s 500ms\n  permit   cd02  deadline passed 1s ago\n"
        );
        let v = to_json(&s);
        assert_eq!(v["kind"], "semaphore");
        assert_eq!(v["held"], true);
        assert_eq!(v["permits"][0]["deadline_in_ms"], 29_500);
        assert_eq!(v["permits_taken"], 2);
    }
}
