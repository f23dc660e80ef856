//! The read-only inspection flows: one name's state with its holders' and waiters' clients,
//! and a listing by pattern, `SCAN` on every master (never `KEYS`, which blocks Redis for
//! the whole keyspace).

use std::collections::HashMap;

use crate::base::error::{Context, Error, Result};
use crate::base::keys;
use crate::base::owner;
use crate::engine::acquire::ready;
use crate::engine::core::Engine;
use crate::engine::retry::with_retries;
use crate::kind::{self, election};
use crate::observe::identity::ClientIdentity;
use crate::observe::inspection::{LockInfo, LockKind};

/// Keys a `SCAN` call looks at (a hint to Redis: each call stays short).
const SCAN_COUNT: u64 = 1000;

/// Announcements read so far, by client id (`None`: that client has none).
type Clients = HashMap<String, Option<ClientIdentity>>;

/// `name`'s state, with the clients of its holders and waiters. A name with nothing of the
/// library's under its own key is looked up as an election's name too (its hash is
/// `redlease_election:{NAME}`): an operator knows an election by the name it was given.
pub(crate) fn inspect(engine: &Engine, name: &str) -> Result<LockInfo> {
    ready(engine, name)?;
    let mut clients = Clients::new();
    let info = inspect_with(engine, name, &mut clients)?;
    if info.kind.is_some() {
        return Ok(info);
    }
    let election = inspect_election(engine, name, &mut clients)?;
    Ok(if election.kind == Some(LockKind::Election) { election } else { info })
}

/// The election `name`'s state, under that name.
fn inspect_election(engine: &Engine, name: &str, clients: &mut Clients) -> Result<LockInfo> {
    let info = inspect_with(engine, &election::election_key(name), clients)?;
    Ok(LockInfo { name: name.to_owned(), ..info })
}

fn inspect_with(engine: &Engine, name: &str, clients: &mut Clients) -> Result<LockInfo> {
    let mut info =
        with_retries(engine, None, |_| engine.pool_for(name).run("inspecting", |conn| kind::inspect(conn, name)))
            .on_lock(name)?;
    for holder in &mut info.holders {
        holder.client = client_of(engine, &holder.owner, clients)?;
    }
    for waiter in &mut info.queue {
        waiter.client = client_of(engine, &waiter.owner, clients)?;
    }
    Ok(info)
}

/// The announcement of `owner`'s client, read once per listing.
fn client_of(engine: &Engine, owner: &str, clients: &mut Clients) -> Result<Option<ClientIdentity>> {
    let Some(id) = owner::client_of(owner) else {
        return Ok(None);
    };
    if let Some(known) = clients.get(id) {
        return Ok(known.clone());
    }
    let key = keys::identity_key(id);
    let read = match with_retries(engine, None, |_| {
        engine.pool_for(&key).run("reading a client's announcement", |conn| kind::read_identity(conn, &key, id))
    }) {
        Ok(read) => read,
        // A user whose rule leaves announcements out sees every client as unknown.
        Err(err) if err.is_permission_denied() => None,
        Err(err) => return Err(err),
    };
    clients.insert(id.to_owned(), read.clone());
    Ok(read)
}

/// The locks (and semaphores, and group locks) whose names match `pattern` (Redis's glob
/// syntax, as `SCAN MATCH` takes it), by name: every master scanned, the keys kept beside
/// locks left out, each match inspected and kept when it is one of the library's.
pub(crate) fn locks(engine: &Engine, pattern: &str) -> Result<Vec<LockInfo>> {
    engine.check_running()?;
    if pattern.is_empty() {
        return Err(Error::invalid("the pattern is empty (`*` matches every name)"));
    }
    if pattern.len() > keys::MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "the pattern is {} bytes long, more than the {} allowed",
            pattern.len(),
            keys::MAX_NAME_LEN
        )));
    }
    // Elections are listed by the names they were given: their hashes match `pattern` only
    // through their prefix, so the prefixed pattern is scanned too.
    let patterns = [pattern.to_owned(), election::election_key(pattern)];
    let mut keys = Vec::new();
    for pool in engine.topology().masters() {
        for pattern in &patterns {
            let mut cursor = 0_u64;
            loop {
                let (next, page): (u64, Vec<Vec<u8>>) = with_retries(engine, None, |_| {
                    pool.run("listing locks", |conn| {
                        redis::cmd("SCAN")
                            .arg(cursor)
                            .arg("MATCH")
                            .arg(pattern)
                            .arg("COUNT")
                            .arg(SCAN_COUNT)
                            .query(conn)
                    })
                })?;
                // A name that is not UTF-8 is no lock of the library's (its names are `str`).
                keys.extend(page.into_iter().filter_map(|k| String::from_utf8(k).ok()));
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
    }
    keys.sort();
    keys.dedup();
    let mut clients = Clients::new();
    let mut found = Vec::new();
    for key in keys.iter().filter(|k| !kind::is_beside_a_lock(k)) {
        let info = match election::election_name(key) {
            Some(name) => inspect_election(engine, name, &mut clients)?,
            None => inspect_with(engine, key, &mut clients)?,
        };
        if info.kind.is_some() {
            found.push(info);
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}
