//! A foreign client's wait, as Redisson's clients wait: subscribe where the layout says the
//! waiter hears its wake-up, try, and until it is taken sleep for a message on that channel
//! or for as long as the try answered, then try again.

use std::time::{Duration, Instant};

use redis::{Connection, RedisResult, Value};

use super::{Acquire, Publish};

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// Taken, at this instant.
    Granted(Instant),
    /// Still busy when the wait's time ran out.
    TimedOut,
    /// The caller holds it already (a non-reentrant kind).
    Refused,
}

/// One subscription, on a connection of its own.
struct Subscription {
    conn: Connection,
}

impl Subscription {
    /// Subscribes `conn` to `channel` and reads the confirmation.
    fn open(mut conn: Connection, channel: &str, publish: Publish) -> RedisResult<Subscription> {
        conn.set_read_timeout(Some(Duration::from_secs(5)))?;
        conn.send_packed_command(&redis::cmd(publish.subscribe_command()).arg(channel).get_packed_command())?;
        let confirmed = conn.recv_response()?;
        match payload_of(&confirmed) {
            None => Ok(Subscription { conn }),
            Some(_) => Err((redis::ErrorKind::Client, "a message before the confirmation").into()),
        }
    }

    /// The payload of the next message within `within`, or `None` when none came (the
    /// connection is then spent: the `redis` crate would skip the reply after a timeout).
    fn next(mut self, within: Duration) -> RedisResult<Option<(Vec<u8>, Subscription)>> {
        self.conn.set_read_timeout(Some(within.max(Duration::from_millis(1))))?;
        loop {
            match self.conn.recv_response() {
                Ok(value) => {
                    if let Some(payload) = payload_of(&value) {
                        return Ok(Some((payload, self)));
                    }
                }
                Err(e) if e.is_timeout() => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }
}

/// A pub/sub message's payload (`message` or `smessage`, as an array or a RESP3 push).
fn payload_of(value: &Value) -> Option<Vec<u8>> {
    let items: Vec<&Value> = match value {
        Value::Array(items) => match items.first() {
            Some(Value::BulkString(kind)) if kind == b"message" || kind == b"smessage" => items[1..].iter().collect(),
            _ => return None,
        },
        Value::Push { kind: redis::PushKind::Message | redis::PushKind::SMessage, data } => data.iter().collect(),
        _ => return None,
    };
    match items.get(1) {
        Some(Value::BulkString(payload)) => Some(payload.clone()),
        _ => None,
    }
}

/// Waits up to `timeout` for `attempt` to be granted, woken by the messages on `channel`
/// that `wakes` accepts. `open` gives a new connection to the channel's server (the master
/// of its slot on a cluster).
pub fn wait_for(
    mut open: impl FnMut() -> Connection,
    channel: &str,
    publish: Publish,
    wakes: impl Fn(&[u8]) -> bool,
    timeout: Duration,
    mut attempt: impl FnMut() -> RedisResult<Acquire>,
) -> RedisResult<Waited> {
    let deadline = Instant::now() + timeout;
    let mut subscription = Some(Subscription::open(open(), channel, publish)?);
    loop {
        // Tried only once subscribed: a release between the try and the subscription would
        // otherwise go unheard.
        let busy_for = match attempt()? {
            Acquire::Granted => return Ok(Waited::Granted(Instant::now())),
            Acquire::Refused => return Ok(Waited::Refused),
            // A lock without expiry (-1) answers no time: only a message ends the sleep.
            Acquire::Busy(ms) if ms < 0 => Duration::MAX,
            Acquire::Busy(ms) => Duration::from_millis(ms.max(1) as u64),
        };
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(Waited::TimedOut);
            }
            let current = match subscription.take() {
                Some(current) => current,
                None => Subscription::open(open(), channel, publish)?,
            };
            match current.next(busy_for.min(deadline - now))? {
                Some((payload, kept)) => {
                    subscription = Some(kept);
                    if wakes(&payload) {
                        break;
                    }
                }
                // Slept out the time the try answered: try again, subscribed anew.
                None => {
                    subscription = Some(Subscription::open(open(), channel, publish)?);
                    break;
                }
            }
        }
    }
}

/// What wakes a lock's waiter: the unlock message `0` (and `1`, a read-write lock's write
/// release).
pub fn lock_wake(payload: &[u8]) -> bool {
    payload == b"0" || payload == b"1"
}

/// What wakes a semaphore's waiter: a count after a give-back.
pub fn semaphore_wake(payload: &[u8]) -> bool {
    std::str::from_utf8(payload).is_ok_and(|count| count.parse::<i64>().is_ok())
}
