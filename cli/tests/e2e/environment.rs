//! What the command finds in its environment: the lock's name, the owner field Redis
//! holds for it, the client id, and for a fenced lock an increasing token.

use std::collections::HashMap;
use std::fs;
use std::time::Duration;

use crate::support::*;

/// Runs a command that writes its `REDLEASE_*` variables to a file and waits until told;
/// returns them, with the lock hash's fields as they were meanwhile.
fn variables(server: &RedisServer, kind: &str, name: &str) -> (HashMap<String, String>, Vec<String>) {
    let dir = TempDir::new();
    let script = format!(
        "env | grep '^REDLEASE_' > {env}.tmp; mv {env}.tmp {env}; while [ ! -e {go} ]; do sleep 0.02; done",
        env = dir.file("env"),
        go = dir.file("go")
    );
    let mut cmd = command(["run", "--url", &server.url(), "--kind", kind, name, "--", "sh", "-c", &script]);
    // An outer run's token must not leak into an inner run of another kind.
    cmd.env("REDLEASE_TOKEN", "stale").env("REDLEASE_OWNER", "stale");
    let running = start(cmd);
    wait_for("the command wrote its environment", Duration::from_secs(10), || dir.path("env").exists());
    let fields = fields(&mut server.conn(), name);
    fs::write(dir.path("go"), "").expect("go");
    running.finish(LIMIT).expect_code(0);
    let text = fs::read_to_string(dir.path("env")).expect("env");
    let vars = text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    (vars, fields)
}

#[test]
fn the_command_gets_the_name_the_owner_field_and_the_client_id() {
    let server = RedisServer::start();
    for kind in ["lock", "fair", "read", "write"] {
        let name = format!("env-{kind}");
        let (vars, fields) = variables(&server, kind, &name);
        assert_eq!(vars.get("REDLEASE_LOCK"), Some(&name), "{kind}: {vars:?}");
        let owner = vars.get("REDLEASE_OWNER").unwrap_or_else(|| panic!("{kind}: no owner: {vars:?}"));
        let client = vars.get("REDLEASE_CLIENT_ID").expect("client id");
        assert!(owner.starts_with(&format!("{client}:")), "{kind}: {owner} is not of client {client}");
        assert!(owner[client.len() + 1..].bytes().all(|b| b.is_ascii_digit()), "{owner}");
        let field = if kind == "write" { format!("{owner}:write") } else { owner.clone() };
        assert!(fields.contains(&field), "{kind}: {field} is not among the lock's fields {fields:?}");
        assert!(!vars.contains_key("REDLEASE_TOKEN"), "{kind}: a stale token leaked: {vars:?}");
    }
}

#[test]
fn fenced_runs_get_increasing_tokens() {
    let server = RedisServer::start();
    let mut tokens = Vec::new();
    for _ in 0..4 {
        let (vars, _) = variables(&server, "fenced", "ledger");
        let token: u64 = vars.get("REDLEASE_TOKEN").expect("a token").parse().expect("a number");
        tokens.push(token);
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens do not increase: {tokens:?}");
    let last: u64 = redis::cmd("GET").arg("redisson_lock_token:{ledger}").query(&mut server.conn()).expect("GET");
    assert_eq!(Some(&last), tokens.last());
}
