//! The little of RESP2 the pub/sub connection needs: encoding a command, and reading the
//! replies and pushes a subscribed connection receives.
//!
//! The subscriber owns its socket directly (rather than a `redis::Connection`) so that one
//! thread can block reading it with no timeout while waiter threads write `SUBSCRIBE` to a
//! clone of the same socket: a new subscription goes out at once instead of at the next
//! poll of a read timeout, and an idle connection wakes nobody.

use std::io::{self, BufRead, Write};

/// One RESP2 value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Value>>),
}

/// Nesting deeper than this is not a pub/sub reply and is refused.
const MAX_DEPTH: usize = 8;
/// Longest bulk string accepted (a lock name is at most 8 KiB).
const MAX_BULK: usize = 1 << 20;
/// Most elements accepted in one array.
const MAX_ARRAY: usize = 1 << 16;

pub(crate) fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

pub(crate) fn write_command(w: &mut impl Write, args: &[&[u8]]) -> io::Result<()> {
    w.write_all(&encode(args))?;
    w.flush()
}

pub(crate) fn read_value(r: &mut impl BufRead) -> io::Result<Value> {
    read_nested(r, 0)
}

fn read_nested(r: &mut impl BufRead, depth: usize) -> io::Result<Value> {
    if depth > MAX_DEPTH {
        return Err(invalid("reply nested too deeply"));
    }
    let line = read_line(r)?;
    let (kind, rest) = line.split_first().ok_or_else(|| invalid("empty reply line"))?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    match kind {
        b'+' => Ok(Value::Simple(text())),
        b'-' => Ok(Value::Error(text())),
        b':' => Ok(Value::Int(parse_int(rest)?)),
        b'$' => {
            let len = parse_int(rest)?;
            if len < 0 {
                return Ok(Value::Bulk(None));
            }
            let len = usize::try_from(len).map_err(|_| invalid("bad bulk length"))?;
            if len > MAX_BULK {
                return Err(invalid("bulk string too long"));
            }
            let mut buf = vec![0; len + 2];
            r.read_exact(&mut buf)?;
            if !buf.ends_with(b"\r\n") {
                return Err(invalid("bulk string not terminated by CRLF"));
            }
            buf.truncate(len);
            Ok(Value::Bulk(Some(buf)))
        }
        b'*' => {
            let len = parse_int(rest)?;
            if len < 0 {
                return Ok(Value::Array(None));
            }
            let len = usize::try_from(len).map_err(|_| invalid("bad array length"))?;
            if len > MAX_ARRAY {
                return Err(invalid("array too long"));
            }
            let mut items = Vec::with_capacity(len);
            for _ in 0..len {
                items.push(read_nested(r, depth + 1)?);
            }
            Ok(Value::Array(Some(items)))
        }
        _ => Err(invalid("unknown reply type")),
    }
}

fn read_line(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    let n = io::Read::take(&mut *r, MAX_BULK as u64).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    if !line.ends_with(b"\r\n") {
        return Err(invalid("reply line not terminated by CRLF"));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

fn parse_int(digits: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(digits).ok().and_then(|s| s.parse().ok()).ok_or_else(|| invalid("bad integer"))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> io::Result<Value> {
        read_value(&mut io::BufReader::new(bytes))
    }

    #[test]
    fn encodes_commands() {
        assert_eq!(encode(&[b"SUBSCRIBE", b"a{b}"]), b"*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\na{b}\r\n");
    }

    #[test]
    fn reads_pubsub_frames() {
        let msg = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n";
        assert_eq!(
            read(msg).unwrap(),
            Value::Array(Some(vec![
                Value::Bulk(Some(b"message".to_vec())),
                Value::Bulk(Some(b"ch".to_vec())),
                Value::Bulk(Some(b"0".to_vec())),
            ]))
        );
        assert_eq!(read(b":-3\r\n").unwrap(), Value::Int(-3));
        assert_eq!(read(b"+OK\r\n").unwrap(), Value::Simple("OK".into()));
        assert_eq!(read(b"-ERR no\r\n").unwrap(), Value::Error("ERR no".into()));
        assert_eq!(read(b"$-1\r\n").unwrap(), Value::Bulk(None));
    }

    #[test]
    fn rejects_malformed_input_without_panicking() {
        for bad in [&b""[..], b"?\r\n", b"$5\r\nab\r\n", b":x\r\n", b"*1\r\n", b"$3\r\nabcd\r\n", b"+OK\n"] {
            assert!(read(bad).is_err(), "{bad:?}");
        }
        let deep = b"*1\r\n".repeat(MAX_DEPTH + 2);
        assert!(read(&deep).is_err());
    }
}
