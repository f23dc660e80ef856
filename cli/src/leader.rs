//! `redlease leader NAME`: who leads an election (`Election::leader`), or, with
//! `--wait-change`, the state after the next change (`LeaderObserver`), as text or JSON.

use std::io::Write as _;
use std::time::Duration;

use redlease::Leader;
use serde_json::{Value, json};

use crate::args::LeaderArgs;
use crate::connect::Settings;
use crate::exit::{self, Failure};
use crate::names;

pub fn leader(args: &LeaderArgs) -> Result<u8, Failure> {
    names::check(&args.name)?;
    let settings = Settings::from_args(&args.connection)?;
    let client = settings.client(None, None)?;
    let election = client.election(args.name.as_str());
    let failed = |e: redlease::Error| Failure::from_lock_error("cannot read the election", &e);
    let now = if args.wait_change {
        let mut observer = election.observe().map_err(failed)?;
        observer.wait_change().map_err(failed)?.cloned()
    } else {
        election.leader().map_err(failed)?
    };
    client.shutdown();
    let text =
        if args.json { format!("{}\n", to_json(&args.name, now.as_ref())) } else { to_text(&args.name, now.as_ref()) };
    let mut stdout = std::io::stdout().lock();
    // A closed stdout (`| head`) is not worth a failure.
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
    Ok(exit::OK)
}

/// `{"name", "leader": {"value", "term", "lease_ms"} | null}` (docs/cli.md).
pub fn to_json(name: &str, leader: Option<&Leader>) -> Value {
    let leader = leader.map_or(Value::Null, |l| {
        json!({
            "value": l.value,
            "term": l.term,
            "lease_ms": l.lease_left.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        })
    });
    json!({ "name": name, "leader": leader })
}

/// `scheduler: led by web-3 (term 12, lease 27s left)`, or `scheduler: no leader`.
pub fn to_text(name: &str, leader: Option<&Leader>) -> String {
    let name = names::printable(name);
    match leader {
        Some(l) => {
            let lease = l.lease_left.map_or(String::new(), |left| {
                format!(", lease {} left", humantime::format_duration(Duration::from_secs(left.as_secs())))
            });
            format!("{name}: led by {} (term {}{lease})\n", l.value, l.term)
        }
        None => format!("{name}: no leader\n"),
    }
}
