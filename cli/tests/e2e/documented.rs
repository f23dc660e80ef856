//! What docs/cli.md quotes, checked against what the binary prints: the document is read
//! by the test, so that its quotes cannot drift from the messages.

use std::path::Path;

use crate::support::*;

/// A row of a Markdown table: its cells, trimmed.
fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_owned()).collect()
}

/// The text of the first code span of `cell` (one backquote or two, as Markdown writes a
/// span that holds a backquote).
fn code_span(cell: &str) -> Option<String> {
    let fence = if cell.contains("``") { "``" } else { "`" };
    let start = cell.find(fence)? + fence.len();
    let end = start + cell[start..].find(fence)?;
    Some(cell[start..end].to_owned())
}

/// The table of "Connecting" that says what happened, the exit code and the message: each
/// row as (what happened, exit code, message).
fn documented_connect_failures() -> Vec<(String, i32, String)> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md"))
        .expect("read docs/cli.md");
    let section = &doc[doc.find("## Connecting").expect("docs/cli.md has Connecting")..];
    let table = &section[section.find("| what happened | exit | message").expect("the table of messages")..];
    table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells = cells(line);
            assert_eq!(cells.len(), 3, "a row of three cells: {line}");
            let code = cells[1].parse().unwrap_or_else(|_| panic!("an exit code: {line}"));
            let message = code_span(&cells[2]).unwrap_or_else(|| panic!("a quoted message: {line}"));
            (cells[0].clone(), code, message)
        })
        .collect()
}

/// Every row of docs/cli.md's table of connection failures is run as the row says, with
/// `status` (every command builds its client the same way), and prints exactly what the
/// row quotes after `redlease: cannot use Redis at URL: `, `HOST:PORT` being the server's,
/// and exits with its code.
///
/// Breaks if the document quotes a message the binary does not print (it said "no
/// connection within the connect timeout (5s)" for a silent `PING`, which is the command
/// timeout's, 3 s, and "no answer within --timeout (1s)", a message that never was).
#[test]
fn the_connecting_messages_are_the_ones_this_table_quotes() {
    let rows = documented_connect_failures();
    assert!(rows.len() >= 8, "the table has a row per case: {rows:?}");

    let refused_port = redlease_testkit::server::free_port();
    let with_password = RedisServer::start_with(&["--requirepass", "right-secret"]);
    let silent_upstream = RedisServer::start();
    let silent = Proxy::start(silent_upstream.addr());
    silent.set_blackhole(true);
    let http = NotRedis::start(NotRedisReply::Http);
    let http_addr = http.url(None).trim_start_matches("redis://").trim_end_matches('/').to_owned();

    // For each row, by the words it starts with: the arguments before the name, the URL,
    // and the address the message names.
    let case = |what: &str| -> (Vec<String>, String, String) {
        let at = |addr: String, url: String| (Vec::new(), url, addr);
        if what.starts_with("nothing listens there") {
            let addr = format!("127.0.0.1:{refused_port}");
            at(addr.clone(), format!("redis://{addr}/"))
        } else if what.starts_with("the server refuses the login") {
            let addr = with_password.addr().to_string();
            at(addr.clone(), format!("redis://:wrong-secret@{addr}/"))
        } else if what.starts_with("the server wants a login") {
            let addr = with_password.addr().to_string();
            at(addr.clone(), format!("redis://{addr}/"))
        } else if what.starts_with("no answer while connecting") {
            let addr = silent.addr().to_string();
            at(addr.clone(), format!("redis://:s3cret@{addr}/"))
        } else if what.starts_with("no answer to the first command") {
            let addr = silent.addr().to_string();
            at(addr.clone(), format!("redis://{addr}/"))
        } else if what.starts_with("the same, with `--timeout 1s`") {
            let addr = silent.addr().to_string();
            (vec!["--timeout".into(), "1s".into()], format!("redis://{addr}/"), addr)
        } else if what.starts_with("what answers is not a Redis server") {
            at(http_addr.clone(), http.url(None))
        } else if what.starts_with("the server refuses the URL's database") {
            let addr = with_password.addr().to_string();
            at(addr.clone(), format!("redis://:right-secret@{addr}/99"))
        } else {
            panic!("a row of docs/cli.md's table that this test does not know how to run: {what}")
        }
    };

    // At once, each on a thread of its own: the silent cases wait their timeouts.
    let runs: Vec<_> = rows
        .into_iter()
        .map(|(what, code, message)| {
            let (options, url, addr) = case(&what);
            let mut args: Vec<String> = vec!["status".into()];
            args.extend(options);
            args.extend(["--url".into(), url.clone(), "x".into()]);
            let shown = redlease::redact_url(&url);
            let expected = format!("redlease: cannot use Redis at {shown}: {}", message.replace("HOST:PORT", &addr));
            let moved = args.clone();
            (std::thread::spawn(move || run(&moved)), what, code, expected)
        })
        .collect();
    for (running, what, code, expected) in runs {
        let out = running.join().expect("a run");
        assert_eq!(out.stderr.trim_end(), expected, "{what}: the message docs/cli.md quotes: {out:#?}");
        assert_eq!(out.status.code(), Some(code), "{what}: the exit code docs/cli.md gives: {out:#?}");
    }
}
