//! Ports for the servers the tests start, never handed out twice on this machine within
//! an hour.
//!
//! A port that was free a moment ago is not enough: a test that killed its server still
//! has things pointing at that port until it ends (its sentinels probe the old master's
//! address and reconfigure whatever answers there as a replica, a proxy forwards to it,
//! a client reconnects to it), and the suites run on three servers side by side in two
//! processes. A server of another test that got the port would be taken over by them.
//! So every port handed out is written down in a ledger shared by every process of the
//! machine (one marker file per port, claimed with `create_new`, which the kernel makes
//! atomic), and a port is handed out again only once its marker is an hour old.

use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::net::{Ipv4Addr, TcpListener};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

/// Lowest port `free_port` picks from.
const MIN_PORT: u16 = 10_000;
/// How long a port handed out stays out of the draw: longer than any test runs.
const HELD_FOR: Duration = Duration::from_secs(3_600);
/// Random draws before falling back to a port the OS picks.
const DRAWS: usize = 200;

/// A port that is free now and was not handed out on this machine within the last hour,
/// below the kernel's ephemeral range when that is known, so that neither `bind(0)`
/// listeners (proxies) nor the local ends of outgoing connections (including a client's
/// TCP self-connect while it retries a killed server) can take the port between `kill`
/// and `start_again`. Falls back to letting the OS pick (`127.0.0.1:0`).
pub fn free_port() -> u16 {
    let ledger = PortLedger::machine();
    first_ephemeral_port()
        .filter(|&first| first > MIN_PORT + 1_000)
        .and_then(|first| ledger.draw(MIN_PORT..first, DRAWS))
        .unwrap_or_else(|| {
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("cannot bind 127.0.0.1:0 to find a free port")
        })
}

/// The ports handed out, as marker files in a directory.
struct PortLedger {
    dir: PathBuf,
    held_for: Duration,
}

impl PortLedger {
    /// The ledger every test process of the machine shares.
    fn machine() -> PortLedger {
        PortLedger { dir: std::env::temp_dir().join("redlease-ports"), held_for: HELD_FOR }
    }

    /// Up to `draws` random ports of `range`: the first one that is free now and that this
    /// call could claim, claimed.
    fn draw(&self, range: Range<u16>, draws: usize) -> Option<u16> {
        let span = u64::from(range.end.checked_sub(range.start).filter(|&n| n > 0)?);
        // A ledger that cannot be written is no reason to fail a test: the port is then
        // only known to be free, as before there was a ledger.
        let writable = fs::create_dir_all(&self.dir).is_ok();
        (0..draws).find_map(|_| {
            let port = range.start + u16::try_from(random_u64() % span).expect("a port fits in u16");
            let free = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok();
            (free && (!writable || self.claim(port))).then_some(port)
        })
    }

    /// Writes `port` down as handed out now, unless it was within `held_for`; whether it
    /// was claimed.
    fn claim(&self, port: u16) -> bool {
        let marker = self.dir.join(port.to_string());
        match OpenOptions::new().write(true).create_new(true).open(&marker) {
            Ok(_) => true,
            Err(err) if err.kind() == ErrorKind::AlreadyExists => self.reclaim_stale(&marker),
            Err(_) => false,
        }
    }

    /// A marker older than `held_for` is taken over: its time set to now. Two processes
    /// that both find it stale may both take the port; the server that loses the bind
    /// exits and its starter draws again.
    fn reclaim_stale(&self, marker: &std::path::Path) -> bool {
        let age = fs::metadata(marker).and_then(|m| m.modified()).ok().and_then(|at| at.elapsed().ok());
        if age.is_none_or(|age| age < self.held_for) {
            return false;
        }
        File::options().write(true).open(marker).and_then(|file| file.set_modified(SystemTime::now())).is_ok()
    }
}

/// The first port of the kernel's ephemeral range (Linux), if known.
fn first_ephemeral_port() -> Option<u16> {
    fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?.split_whitespace().next()?.parse().ok()
}

/// A random number from std alone (`RandomState` is seeded randomly per process).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_usize(CALLS.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    if let Ok(now) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger of its own, in a directory of its own.
    fn ledger(name: &str, held_for: Duration) -> PortLedger {
        let dir = std::env::temp_dir().join(format!("redlease-ports-test-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        PortLedger { dir, held_for }
    }

    /// Breaks if a port is handed out twice while its marker is fresh: drawing 40 times
    /// from 40 ports, random draws without the ledger repeat one nearly always.
    #[test]
    fn a_port_is_not_handed_out_twice_while_it_is_held() {
        let ledger = ledger("twice", HELD_FOR);
        let range = 23_000..23_040;
        let drawn: Vec<u16> = (0..40).filter_map(|_| ledger.draw(range.clone(), 2_000)).collect();
        let mut distinct = drawn.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), drawn.len(), "a port handed out twice: {drawn:?}");
        // Some of the 40 may be taken by other processes; most are free on a test machine.
        assert!(drawn.len() >= 20, "only {} of 40 ports drawn: {drawn:?}", drawn.len());
        assert!(drawn.iter().all(|port| range.contains(port)));
        let _ = fs::remove_dir_all(&ledger.dir);
    }

    /// Breaks if a stale marker keeps its port out for good, or a fresh one lets it in.
    #[test]
    fn a_port_comes_back_once_its_marker_is_stale() {
        let ledger = ledger("stale", Duration::from_secs(60));
        fs::create_dir_all(&ledger.dir).unwrap();
        assert!(ledger.claim(23_100), "a port never handed out is claimed");
        assert!(!ledger.claim(23_100), "a fresh marker holds it");
        let marker = File::options().write(true).open(ledger.dir.join("23100")).unwrap();
        marker.set_modified(SystemTime::now() - Duration::from_secs(120)).unwrap();
        assert!(ledger.claim(23_100), "a marker older than the hold gives it back");
        assert!(!ledger.claim(23_100), "and the claim made it fresh again");
        let _ = fs::remove_dir_all(&ledger.dir);
    }
}
