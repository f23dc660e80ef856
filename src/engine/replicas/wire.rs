//! The commands a confirmation sends and the replies it reads: the reading (`INFO
//! replication`, `INFO stats`), `WAIT`, `WAITAOF`, and asking a replica that went whether
//! it is gone.

use std::time::Duration;

use crate::durability::disk_view::Answer;
use crate::durability::replica_view::{Check, Found, Node, Reading};
use crate::transport::{Conn, Pool};

/// Asks the replica that went at `node` whether it is gone: its server refuses the
/// connection. One that accepts it, or cannot be reached, may be promoted.
pub(super) fn ask(pool: &Pool, (host, port): &Node, timeout: Duration) -> Found {
    match pool.connect_to_node(host, *port, timeout) {
        Err(err) if err.is_connection_refusal() => Found::Gone,
        _ => Found::Unknown,
    }
}

/// The two `INFO` sections a reading is made of. Two commands rather than one with two
/// sections, which Redis 6 does not take.
pub(super) fn info_commands(pipe: &mut redis::Pipeline) {
    pipe.cmd("INFO").arg("replication").cmd("INFO").arg("stats");
}

/// A grant's cheap check: `ROLE`.
pub(super) fn check_command(pipe: &mut redis::Pipeline) {
    pipe.cmd("ROLE");
}

/// What `ROLE` answered: a master's `["master", offset, [[ip, port, offset], …]]`, or
/// another role's reply (no master, no replicas).
pub(super) fn parse_check(reply: redis::Value) -> redis::RedisResult<Check> {
    let items = match reply {
        redis::Value::Array(items) => items,
        redis::Value::ServerError(err) => return Err(err.into()),
        other => return Err(malformed(&format!("ROLE answered {other:?}"))),
    };
    let word = |value: &redis::Value| match value {
        redis::Value::BulkString(bytes) => std::str::from_utf8(bytes).ok().map(str::to_owned),
        redis::Value::SimpleString(text) => Some(text.clone()),
        redis::Value::Int(n) => Some(n.to_string()),
        _ => None,
    };
    if items.first().and_then(word).as_deref() != Some("master") {
        return Ok(Check { master: false, replicas: Vec::new() });
    }
    let Some(redis::Value::Array(listed)) = items.get(2) else {
        return Err(malformed("ROLE of a master listed no replicas"));
    };
    let mut replicas = listed
        .iter()
        .map(|replica| match replica {
            redis::Value::Array(fields) => {
                let ip = fields.first().and_then(word)?;
                let port = fields.get(1).and_then(word)?.parse().ok()?;
                Some((ip, port))
            }
            _ => None,
        })
        .collect::<Option<Vec<Node>>>()
        .ok_or_else(|| malformed("ROLE listed a replica without its address"))?;
    replicas.sort_unstable();
    Ok(Check { master: true, replicas })
}

/// Reads the master's replication state on `conn`.
pub(super) fn read(conn: &mut Conn) -> redis::RedisResult<Reading> {
    let mut pipe = redis::pipe();
    info_commands(&mut pipe);
    let (replication, stats): (String, String) = pipe.query(conn)?;
    parse(&replication, &stats)
}

/// The text of an `INFO` reply.
pub(super) fn text(value: redis::Value) -> redis::RedisResult<String> {
    match value {
        redis::Value::ServerError(err) => Err(err.into()),
        value => redis::FromRedisValue::from_redis_value(value).map_err(Into::into),
    }
}

/// `WAIT n` after a grant: how many replicas have it (`None`: `UNBLOCKED`, its master
/// turned replica while it blocked).
pub(super) fn wait(
    conn: &mut Conn,
    n: u64,
    timeout: Duration,
    command_timeout: Duration,
) -> redis::RedisResult<Option<u64>> {
    let acked = with_wait_timeout(conn, timeout, command_timeout, |conn| {
        redis::cmd("WAIT").arg(n).arg(wait_millis(timeout)).query::<redis::Value>(conn)
    })?;
    Ok(wait_count(acked)?.map(|count| u64::try_from(count).unwrap_or(0)))
}

/// Runs `op`, whose `WAIT` blocks up to `timeout`: its reply may take that long on top of
/// the command timeout.
pub(super) fn with_wait_timeout<T>(
    conn: &mut Conn,
    timeout: Duration,
    command_timeout: Duration,
    op: impl FnOnce(&mut Conn) -> redis::RedisResult<T>,
) -> redis::RedisResult<T> {
    conn.set_read_timeout(Some(timeout.saturating_add(command_timeout)))?;
    let result = op(conn);
    conn.set_read_timeout(Some(command_timeout))?;
    result
}

pub(super) fn wait_millis(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The count of a `WAIT` reply; `None` for `UNBLOCKED` (its master turned replica).
pub(super) fn wait_count(reply: redis::Value) -> redis::RedisResult<Option<i64>> {
    match reply {
        redis::Value::Int(acked) => Ok(Some(acked)),
        redis::Value::ServerError(err) if err.code() == "UNBLOCKED" => Ok(None),
        redis::Value::ServerError(err) => Err(err.into()),
        other => Err(malformed(&format!("WAIT answered {other:?}"))),
    }
}

/// `WAITAOF 1 0 <timeout>`: the master's own AOF, no replica's.
pub(super) fn waitaof_command(pipe: &mut redis::Pipeline, timeout: Duration) {
    pipe.cmd("WAITAOF").arg(1).arg(0).arg(wait_millis(timeout));
}

/// What `WAITAOF 1 0` answered: `[local, replicas]`, or one of the refusals
/// [`Answer::of_refusal`] knows; another error is the error.
pub(super) fn waitaof_answer(reply: redis::Value) -> redis::RedisResult<Answer> {
    match reply {
        redis::Value::Array(counts) => match counts.first() {
            Some(redis::Value::Int(local)) => Ok(Answer::Synced(*local)),
            _ => Err(malformed(&format!("WAITAOF answered {counts:?}"))),
        },
        redis::Value::ServerError(err) => {
            let text = format!("{} {}", err.code(), err.details().unwrap_or_default());
            Answer::of_refusal(&text).ok_or_else(|| err.into())
        }
        other => Err(malformed(&format!("WAITAOF answered {other:?}"))),
    }
}

pub(super) fn parse(replication: &str, stats: &str) -> redis::RedisResult<Reading> {
    Reading::parse(&format!("{replication}\n{stats}"))
        .ok_or_else(|| malformed("INFO replication and INFO stats lack a field a reading needs"))
}

pub(super) fn malformed(what: &str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Parse, "unexpected reply", what.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    /// `ROLE` as Redis 6.2, 7 and Valkey answer it: a master's replicas with their ports as
    /// text, sorted by address; another role is no master; a reply of another shape is an
    /// error, not a master without replicas.
    #[test]
    fn role_replies_parse_into_a_check() {
        let replica = |port: &str| Value::Array(vec![bulk("127.0.0.1"), bulk(port), bulk("4242")]);
        let master =
            Value::Array(vec![bulk("master"), Value::Int(4242), Value::Array(vec![replica("7001"), replica("7000")])]);
        let check = parse_check(master).unwrap();
        assert!(check.master);
        assert_eq!(check.replicas, [("127.0.0.1".to_owned(), 7000), ("127.0.0.1".to_owned(), 7001)]);
        let alone = parse_check(Value::Array(vec![bulk("master"), Value::Int(0), Value::Array(Vec::new())])).unwrap();
        assert!(alone.master && alone.replicas.is_empty());
        let slave =
            Value::Array(vec![bulk("slave"), bulk("127.0.0.1"), Value::Int(7000), bulk("connected"), Value::Int(1)]);
        assert!(!parse_check(slave).unwrap().master);
        assert!(parse_check(Value::Array(vec![bulk("master"), Value::Int(0)])).is_err(), "no list");
        let no_port =
            Value::Array(vec![bulk("master"), Value::Int(0), Value::Array(vec![Value::Array(vec![bulk("h")])])]);
        assert!(parse_check(no_port).is_err(), "a replica without its port");
        assert!(parse_check(Value::Okay).is_err());
    }
}
