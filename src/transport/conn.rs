//! [`Conn`]: a command connection, with what the scripts sent on it need to know of the
//! deployment (which command carries a message to a channel's subscribers), and which
//! master it was opened to (its pool's generation then, and whether that is still the
//! current one); and the script calls written on it.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::base::scripts::Lua;
pub(crate) use crate::base::scripts::PubSub;

/// A connection of the command pool.
pub(crate) struct Conn {
    inner: Wire,
    pubsub: PubSub,
    origin: Origin,
    /// Which run of its server it reached (`None`: the server did not say).
    run: Option<RunId>,
    /// Where script calls are written (see [`Conn::script`]), kept from one call to the next.
    buf: Vec<u8>,
}

/// The master a connection was opened to: its pool, and the pool's generation then (it
/// moves when the master does), with the pool's counter to tell whether it still is.
#[derive(Clone)]
pub(crate) struct Origin {
    pub(crate) pool: u64,
    pub(crate) generation: u64,
    pub(crate) current: Arc<AtomicU64>,
}

/// Which run of a server a connection reached: the server's `run_id`, a random name it takes
/// at every start, here by its first 64 bits. A restart (or a failover to another server)
/// changes it, so a hold confirmed on one run and found missing on another may have been lost
/// with it: what the server held before a restart without persistence is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunId(u64);

impl RunId {
    /// Reads it from the text of `INFO server` (its `run_id:` line, 40 hex digits).
    pub(crate) fn from_info(info: &str) -> Option<RunId> {
        let hex = info.lines().find_map(|line| line.strip_prefix("run_id:"))?.trim();
        hex.get(..16).and_then(|head| u64::from_str_radix(head, 16).ok()).map(RunId)
    }

    /// As one word, never 0 (kept in an atomic).
    pub(crate) fn bits(self) -> u64 {
        self.0.max(1)
    }

    /// From [`bits`](RunId::bits); 0 is none.
    pub(crate) fn from_bits(bits: u64) -> Option<RunId> {
        (bits != 0).then_some(RunId(bits))
    }

    /// Asks the server on `conn`: `Ok(None)` when it refuses to say (a user without the
    /// right to `INFO`), an error only when the connection failed.
    pub(crate) fn read(conn: &mut redis::Connection) -> redis::RedisResult<Option<RunId>> {
        match redis::cmd("INFO").arg("server").query::<String>(conn) {
            Ok(info) => Ok(RunId::from_info(&info)),
            Err(err) if err.is_io_error() || err.is_timeout() || err.is_connection_dropped() => Err(err),
            Err(_) => Ok(None),
        }
    }
}

/// The `redis` crate's connection, and whether a reply was read on it since the pool
/// handed it out: a connection that answered was not stale, so a request on it that then
/// fails may have been carried out, and is never sent again for the pool's guess that the
/// connection had died while idle. A `ConnectionLike` of its own (so every command the
/// library sends through a `Conn` is seen), and not a `Deref` to the crate's connection,
/// through which a command would go unseen.
pub(crate) struct Wire {
    inner: redis::Connection,
    heard: bool,
    trailer: Trailer,
}

/// Commands that ride behind the next script call on a connection, in the same write
/// ([`Conn::send_behind_next_script`]): what a grant's confirmation reads and waits for,
/// sent with the grant rather than after its reply.
enum Trailer {
    None,
    /// To be sent behind the next script call: the commands, in RESP; how many replies
    /// they get; how long their replies may take (a `WAIT` blocks); the read timeout to
    /// set back after them.
    Armed {
        commands: Vec<u8>,
        replies: usize,
        within: Duration,
        then: Duration,
    },
    /// Sent, and their replies read: for [`Conn::take_trailing_replies`].
    Answered(redis::RedisResult<Vec<redis::Value>>),
}

impl Wire {
    pub(crate) fn set_read_timeout(&self, timeout: Option<std::time::Duration>) -> redis::RedisResult<()> {
        self.inner.set_read_timeout(timeout)
    }

    pub(crate) fn set_write_timeout(&self, timeout: Option<std::time::Duration>) -> redis::RedisResult<()> {
        self.inner.set_write_timeout(timeout)
    }

    /// The crate's connection itself, for a caller's own commands (which the pool never
    /// sends again): taken as answered.
    pub(crate) fn raw(&mut self) -> &mut redis::Connection {
        self.heard = true;
        &mut self.inner
    }

    /// Whether a reply was read since the pool handed the connection out.
    pub(crate) fn heard(&self) -> bool {
        self.heard
    }

    fn heard_if<T>(&mut self, reply: redis::RedisResult<T>) -> redis::RedisResult<T> {
        self.heard |= reply.is_ok();
        reply
    }

    /// Sends `cmd`, a script call, with the armed trailer behind it in one write; reads the
    /// call's reply within the connection's timeout, then the trailer's within theirs. The
    /// trailer stays armed when the script was not loaded (`NOSCRIPT`: the call is sent
    /// again, and the trailer rides with it then).
    fn script_with_trailer(&mut self, cmd: &[u8]) -> redis::RedisResult<redis::Value> {
        let Trailer::Armed { commands, replies, within, then } = std::mem::replace(&mut self.trailer, Trailer::None)
        else {
            return redis::ConnectionLike::req_packed_command(&mut self.inner, cmd);
        };
        let mut packed = Vec::with_capacity(cmd.len() + commands.len());
        packed.extend_from_slice(cmd);
        packed.extend_from_slice(&commands);
        self.inner.send_packed_command(&packed)?;
        let reply = self.inner.recv_response()?;
        self.heard = true;
        let trailing = self.read_trailing(replies, within, then);
        let not_loaded = matches!(&reply, redis::Value::ServerError(err) if err.code() == "NOSCRIPT");
        self.trailer = match trailing {
            // Out of step with the server: the caller's confirmation fails, and the pool
            // drops the connection on that error.
            Err(err) => Trailer::Answered(Err(err)),
            Ok(_) if not_loaded => Trailer::Armed { commands, replies, within, then },
            Ok(values) => Trailer::Answered(Ok(values)),
        };
        Ok(reply)
    }

    /// Reads `replies` replies, each within `within`, then sets the read timeout to `then`.
    fn read_trailing(
        &mut self,
        replies: usize,
        within: Duration,
        then: Duration,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        self.inner.set_read_timeout(Some(within))?;
        let values = (0..replies).map(|_| self.inner.recv_response()).collect();
        self.inner.set_read_timeout(Some(then))?;
        values
    }
}

/// Whether a packed command is a script call (`EVALSHA` or `EVAL`): what a trailer rides
/// behind. Not `SCRIPT LOAD`, which a call that found its script unloaded sends first.
fn is_script_call(cmd: &[u8]) -> bool {
    // `*<count>\r\n$<length>\r\n<name>\r\n…`: the name is the third line.
    let name = cmd.split(|b| *b == b'\n').nth(2).and_then(|line| line.strip_suffix(b"\r")).unwrap_or_default();
    name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL")
}

impl redis::ConnectionLike for Wire {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<redis::Value> {
        if matches!(self.trailer, Trailer::Armed { .. }) && is_script_call(cmd) {
            return self.script_with_trailer(cmd);
        }
        let reply = self.inner.req_packed_command(cmd);
        self.heard_if(reply)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        let replies = self.inner.req_packed_commands(cmd, offset, count);
        self.heard_if(replies)
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }

    fn check_connection(&mut self) -> bool {
        self.inner.check_connection()
    }

    fn is_open(&self) -> bool {
        self.inner.is_open()
    }
}

impl Conn {
    pub(crate) fn new(inner: redis::Connection, pubsub: PubSub, origin: Origin, run: Option<RunId>) -> Conn {
        Conn { inner: Wire { inner, heard: false, trailer: Trailer::None }, pubsub, origin, run, buf: Vec::new() }
    }

    /// Which run of its server it reached, read when it was opened (`None`: the server
    /// did not say).
    pub(crate) fn run(&self) -> Option<RunId> {
        self.run
    }

    /// Handed out by the pool for a call: nothing heard on it yet.
    pub(crate) fn handed_out(&mut self) {
        self.inner.heard = false;
    }

    /// The id of the pool it belongs to.
    pub(crate) fn pool_id(&self) -> u64 {
        self.origin.pool
    }

    /// Its pool's generation when it was opened: a name for the master it goes to.
    pub(crate) fn generation(&self) -> u64 {
        self.origin.generation
    }

    /// Whether its master is still the pool's: false once the master moved (a failover
    /// was heard of, or a new connection found the master elsewhere).
    pub(crate) fn is_current(&self) -> bool {
        self.origin.current.load(Ordering::Acquire) == self.origin.generation
    }

    /// How scripts sent on this connection publish.
    pub(crate) fn pubsub(&self) -> PubSub {
        self.pubsub
    }
}

/// Room left before a script call's keys and arguments for its header (`*<count>`,
/// `EVALSHA`, the digest, the number of keys), which is known only once they are written.
const HEADER_ROOM: usize = 128;

/// A buffer a large call grew past this is let go rather than kept for the next call.
const KEEP_CAPACITY: usize = 64 * 1024;

impl Conn {
    /// Sends `commands` behind the next script call on this connection, in the same write,
    /// and reads their replies (`replies` of them, each within `within`; the read timeout
    /// is `then` again after them) after the call's: taken with
    /// [`take_trailing_replies`](Conn::take_trailing_replies). Until a script call goes
    /// out, other commands go alone.
    pub(crate) fn send_behind_next_script(
        &mut self,
        commands: &redis::Pipeline,
        replies: usize,
        (within, then): (Duration, Duration),
    ) {
        self.inner.trailer = Trailer::Armed { commands: commands.get_packed_pipeline(), replies, within, then };
    }

    /// The replies of the commands sent behind the last script call, once; `None` when none
    /// were sent. Also disarms a trailer not sent yet.
    pub(crate) fn take_trailing_replies(&mut self) -> Option<redis::RedisResult<Vec<redis::Value>>> {
        match std::mem::replace(&mut self.inner.trailer, Trailer::None) {
            Trailer::Answered(replies) => Some(replies),
            Trailer::None | Trailer::Armed { .. } => None,
        }
    }

    /// Writes `packed` (one or more commands in RESP) without reading a reply: the first
    /// half of a call split in two, read with [`receive`](Conn::receive).
    pub(crate) fn send_only(&mut self, packed: &[u8]) -> redis::RedisResult<()> {
        self.inner.inner.send_packed_command(packed)
    }

    /// Reads the next reply, within the connection's read timeout.
    pub(crate) fn receive(&mut self) -> redis::RedisResult<redis::Value> {
        let reply = self.inner.inner.recv_response();
        self.inner.heard_if(reply)
    }

    /// A call of `lua` (its build for this connection's pub/sub), written in RESP straight
    /// into this connection's buffer: `EVALSHA`, and on `NOSCRIPT` the script loaded and
    /// the call sent again, as `redis::Script` does. On the hot path, where building a
    /// `ScriptInvocation` (a `Vec` per argument, copied twice) cost more than the rest of
    /// the client's own work. The reply is still read by the `redis` crate's parser.
    pub(crate) fn script(&mut self, lua: &'static Lua) -> ScriptKeys<'_> {
        let script = lua.on(self.pubsub);
        if self.buf.capacity() > KEEP_CAPACITY {
            self.buf = Vec::new();
        }
        self.buf.clear();
        self.buf.resize(HEADER_ROOM, 0);
        ScriptKeys(ScriptCall { conn: self, script, keys: 0, args: 0 })
    }
}

/// What a script call takes as one key or argument: written as one RESP bulk string.
pub(crate) trait Arg {
    fn write_to(&self, out: &mut Vec<u8>);
}

impl Arg for str {
    fn write_to(&self, out: &mut Vec<u8>) {
        bulk(out, &[self])
    }
}

impl Arg for String {
    fn write_to(&self, out: &mut Vec<u8>) {
        bulk(out, &[self])
    }
}

impl Arg for u64 {
    fn write_to(&self, out: &mut Vec<u8>) {
        let mut digits = [0; 20];
        let digits = decimal(*self, &mut digits);
        out.push(b'$');
        out.extend_from_slice(decimal(digits.len() as u64, &mut [0; 20]));
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(digits);
        out.extend_from_slice(b"\r\n");
    }
}

impl<T: Arg + ?Sized> Arg for &T {
    fn write_to(&self, out: &mut Vec<u8>) {
        (**self).write_to(out)
    }
}

/// Parts written as one argument, joined: a key or channel written without building it.
pub(crate) struct Joined<'a, const N: usize>(pub(crate) [&'a str; N]);

impl<const N: usize> Arg for Joined<'_, N> {
    fn write_to(&self, out: &mut Vec<u8>) {
        bulk(out, &self.0)
    }
}

/// Arguments written once as calls take them (each a RESP bulk string), to be copied into
/// calls as they are: a lock's keys and channels, written once per lock handle rather than
/// from their parts in every call.
pub(crate) struct Prewritten<const N: usize> {
    /// Exactly the bytes written: a handle keeps them as long as it lives (a guard's
    /// handle, for the whole hold), and the `Vec` they were written into had grown to up
    /// to twice their length (measured: 439 B a plain lock's handle, half of it unused).
    bytes: Box<[u8]>,
    /// Where each argument ends in `bytes`.
    ends: [usize; N],
}

impl<const N: usize> Prewritten<N> {
    pub(crate) fn new(args: [&dyn Arg; N]) -> Prewritten<N> {
        let mut bytes = Vec::new();
        let mut ends = [0; N];
        for (arg, end) in args.iter().zip(&mut ends) {
            arg.write_to(&mut bytes);
            *end = bytes.len();
        }
        Prewritten { bytes: bytes.into_boxed_slice(), ends }
    }

    /// The argument at `index` (below `N`), to be written into a call.
    pub(crate) fn arg(&self, index: usize) -> Written<'_> {
        let start = index.checked_sub(1).and_then(|before| self.ends.get(before)).copied().unwrap_or(0);
        let end = self.ends.get(index).copied().unwrap_or(start);
        Written(self.bytes.get(start..end).unwrap_or_default())
    }
}

/// One argument of a [`Prewritten`], copied into a call as it is.
pub(crate) struct Written<'a>(&'a [u8]);

impl Arg for Written<'_> {
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.0)
    }
}

/// `parts`, joined, as one RESP bulk string.
fn bulk(out: &mut Vec<u8>, parts: &[&str]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.push(b'$');
    out.extend_from_slice(decimal(len as u64, &mut [0; 20]));
    out.extend_from_slice(b"\r\n");
    for part in parts {
        out.extend_from_slice(part.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// `n` in decimal, written at the end of `digits`.
fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut start = digits.len();
    for slot in digits.iter_mut().rev() {
        // `n % 10` is a single digit.
        *slot = b'0' + (n % 10) as u8;
        start -= 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits.get(start..).unwrap_or_default()
}

/// A script call being written, and what it counts so far.
struct ScriptCall<'c> {
    conn: &'c mut Conn,
    script: &'static redis::Script,
    keys: u64,
    args: u64,
}

/// A script call taking its keys (they come before the arguments).
pub(crate) struct ScriptKeys<'c>(ScriptCall<'c>);

/// A script call taking its arguments.
pub(crate) struct ScriptArgs<'c>(ScriptCall<'c>);

impl<'c> ScriptKeys<'c> {
    pub(crate) fn key(mut self, key: impl Arg) -> Self {
        key.write_to(&mut self.0.conn.buf);
        self.0.keys += 1;
        self
    }

    pub(crate) fn arg(self, arg: impl Arg) -> ScriptArgs<'c> {
        ScriptArgs(self.0).arg(arg)
    }
}

impl ScriptArgs<'_> {
    pub(crate) fn arg(mut self, arg: impl Arg) -> Self {
        arg.write_to(&mut self.0.conn.buf);
        self.0.args += 1;
        self
    }

    pub(crate) fn invoke<T: redis::FromRedisValue>(self) -> redis::RedisResult<T> {
        self.0.invoke()
    }
}

impl ScriptCall<'_> {
    fn invoke<T: redis::FromRedisValue>(self) -> redis::RedisResult<T> {
        let ScriptCall { conn, script, keys, args } = self;
        let Conn { inner, buf, .. } = conn;
        let whole;
        let packed = match place_header(buf, script.get_hash(), keys, args) {
            Some(start) => buf.get(start..).unwrap_or_default(),
            None => {
                whole = with_header(buf, script.get_hash(), keys, args);
                &whole
            }
        };
        let reply = match redis::ConnectionLike::req_packed_command(inner, packed)?.extract_error() {
            Err(err) if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                // The server's script cache was emptied (a restart, a failover, `SCRIPT
                // FLUSH`): loaded again, and the same call sent once more.
                script.load(inner)?;
                redis::ConnectionLike::req_packed_command(inner, packed)?.extract_error()?
            }
            reply => reply?,
        };
        Ok(redis::from_redis_value(reply)?)
    }
}

/// The header of a call of the script `sha` with `keys` keys and `args` arguments.
fn write_header(out: &mut impl std::io::Write, sha: &str, keys: u64, args: u64) -> std::io::Result<()> {
    let mut digits = [0; 20];
    let count = decimal(keys, &mut digits);
    out.write_all(b"*")?;
    out.write_all(decimal(3 + keys + args, &mut [0; 20]))?;
    out.write_all(b"\r\n$7\r\nEVALSHA\r\n$")?;
    out.write_all(decimal(sha.len() as u64, &mut [0; 20]))?;
    out.write_all(b"\r\n")?;
    out.write_all(sha.as_bytes())?;
    out.write_all(b"\r\n$")?;
    out.write_all(decimal(count.len() as u64, &mut [0; 20]))?;
    out.write_all(b"\r\n")?;
    out.write_all(count)?;
    out.write_all(b"\r\n")
}

/// Writes the header into the room left before the body in `buf`, right before the body,
/// and returns where the call begins; `None` when it does not fit (never with a SHA-1
/// digest).
fn place_header(buf: &mut [u8], sha: &str, keys: u64, args: u64) -> Option<usize> {
    let mut head = [0u8; HEADER_ROOM];
    let mut rest = &mut head[..];
    write_header(&mut rest, sha, keys, args).ok()?;
    let start = rest.len();
    let written = HEADER_ROOM - start;
    buf.get_mut(start..HEADER_ROOM)?.copy_from_slice(head.get(..written)?);
    Some(start)
}

/// The whole call, in a buffer of its own: for a header too long for the room.
fn with_header(buf: &[u8], sha: &str, keys: u64, args: u64) -> Vec<u8> {
    let mut whole = Vec::with_capacity(buf.len() + HEADER_ROOM);
    // Writing to a `Vec` does not fail.
    let _ = write_header(&mut whole, sha, keys, args);
    whole.extend_from_slice(buf.get(HEADER_ROOM..).unwrap_or_default());
    whole
}

impl Deref for Conn {
    type Target = Wire;

    fn deref(&self) -> &Wire {
        &self.inner
    }
}

// Through `Deref`, the redis crate's blanket impl makes a `Conn` a `ConnectionLike`.
impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Wire {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_trailer_rides_behind_script_calls_only() {
        let packed = |args: &[&str]| redis::cmd(args[0]).arg(&args[1..]).get_packed_command();
        assert!(is_script_call(&packed(&["EVALSHA", "0123", "1", "k"])));
        assert!(is_script_call(&packed(&["evalsha", "0123", "0"])));
        assert!(is_script_call(&packed(&["EVAL", "return 1", "0"])));
        assert!(!is_script_call(&packed(&["SCRIPT", "LOAD", "return 1"])), "a script's load goes alone");
        assert!(!is_script_call(&packed(&["EVAL_RO", "return 1", "0"])));
        assert!(!is_script_call(&packed(&["INFO", "replication"])));
        assert!(!is_script_call(b""));
        assert!(!is_script_call(b"*1\r\n"));
    }

    use super::*;

    /// The run is the `run_id` line's first 16 hex digits; a server that names none, or
    /// not in hex, has none.
    #[test]
    fn a_run_is_read_from_the_run_id_line() {
        let info =
            "# Server\r\nredis_version:7.0.15\r\nrun_id:3f0e0c2b9d3e4a1f5b6c7d8e9f0a1b2c3d4e5f60\r\ntcp_port:6379\r\n";
        assert_eq!(RunId::from_info(info), Some(RunId(0x3f0e_0c2b_9d3e_4a1f)));
        assert_ne!(RunId::from_info(info), RunId::from_info(&info.replace("run_id:3f", "run_id:4f")));
        assert_eq!(RunId::from_info("# Server\r\nredis_version:7.0.15\r\n"), None);
        assert_eq!(RunId::from_info("run_id:not-hex-at-all-not-hex-at-all-00000\r\n"), None);
        assert_eq!(RunId::from_info("run_id:abc\r\n"), None, "too short");
    }

    /// A call written here is byte for byte what the `redis` crate packs for the same
    /// `EVALSHA`, whether the header fits the room or not.
    #[test]
    fn a_script_call_is_packed_as_the_redis_crate_packs_it() {
        let sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff831";
        let mut body = vec![0; HEADER_ROOM];
        "lock{a}".write_to(&mut body);
        Joined(["redlease_waiters", ":{", "lock{a}", "}"]).write_to(&mut body);
        30_000u64.write_to(&mut body);
        0u64.write_to(&mut body);
        u64::MAX.write_to(&mut body);
        "".write_to(&mut body);
        String::from("owner:1").write_to(&mut body);
        let expected = redis::cmd("EVALSHA")
            .arg(sha)
            .arg(2)
            .arg("lock{a}")
            .arg("redlease_waiters:{lock{a}}")
            .arg(30_000)
            .arg(0)
            .arg(u64::MAX)
            .arg("")
            .arg("owner:1")
            .get_packed_command();
        let start = place_header(&mut body, sha, 2, 5).unwrap();
        assert_eq!(body[start..], expected[..]);
        assert_eq!(with_header(&body, sha, 2, 5), expected);
        let prewritten = Prewritten::new([&"lock{a}", &Joined(["redlease_waiters", ":{", "lock{a}", "}"]), &30_000u64]);
        let mut again = vec![0; HEADER_ROOM];
        for index in 0..3 {
            prewritten.arg(index).write_to(&mut again);
        }
        again.extend_from_slice(&body[again.len()..]);
        assert_eq!(place_header(&mut again, sha, 2, 5).map(|start| again[start..].to_vec()), Some(expected.clone()));
        let long = "x".repeat(HEADER_ROOM);
        assert_eq!(place_header(&mut body, &long, 2, 5), None, "a header longer than the room");
    }
}
