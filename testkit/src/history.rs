//! Histories of critical sections, recorded by worker processes, and the checkers that read
//! them. Timestamps are CLOCK_MONOTONIC nanoseconds, comparable across processes on one host.

use std::collections::HashMap;

/// One critical section as a worker saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub process: u32,
    pub thread: u32,
    pub lock: String,
    /// Exclusive (a write, or any section of an exclusive lock); false for a shared read.
    pub exclusive: bool,
    pub enter: u64,
    pub exit: u64,
    pub token: Option<u64>,
}

impl Section {
    fn encode(&self) -> String {
        let token = self.token.map_or("-".to_string(), |t| t.to_string());
        let mode = if self.exclusive { "X" } else { "S" };
        format!("{} {} {} {} {} {} {}", self.process, self.thread, self.lock, mode, self.enter, self.exit, token)
    }

    fn decode(line: &str) -> Section {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 7, "bad history line {line:?}");
        Section {
            process: f[0].parse().unwrap(),
            thread: f[1].parse().unwrap(),
            lock: f[2].to_string(),
            exclusive: f[3] == "X",
            enter: f[4].parse().unwrap(),
            exit: f[5].parse().unwrap(),
            token: (f[6] != "-").then(|| f[6].parse().unwrap()),
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn now() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock_gettime");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// Appends a section to the history list `key`.
pub fn record(conn: &mut redis::Connection, key: &str, section: &Section) {
    redis::cmd("RPUSH").arg(key).arg(section.encode()).query::<()>(conn).expect("record a section");
}

pub fn load(conn: &mut redis::Connection, key: &str) -> Vec<Section> {
    let lines: Vec<String> = redis::cmd("LRANGE").arg(key).arg(0).arg(-1).query(conn).expect("read the history");
    lines.iter().map(|l| Section::decode(l)).collect()
}

/// No two sections of the same lock overlap in time when either is exclusive.
pub fn check_exclusion(history: &[Section]) -> Result<(), String> {
    let mut by_lock: HashMap<&str, Vec<&Section>> = HashMap::new();
    for s in history {
        by_lock.entry(&s.lock).or_default().push(s);
    }
    for sections in by_lock.values_mut() {
        sections.sort_by_key(|s| s.enter);
        // Sweep in order of entry, remembering the latest exit so far of exclusive and of
        // shared sections: a section overlaps an earlier one iff it enters before that exit.
        let mut exclusive_until: Option<&Section> = None;
        let mut shared_until: Option<&Section> = None;
        for s in sections.iter() {
            if let Some(x) = exclusive_until.filter(|x| s.enter < x.exit) {
                return Err(format!("{s:?} overlaps exclusive {x:?}"));
            }
            if s.exclusive {
                if let Some(r) = shared_until.filter(|r| s.enter < r.exit) {
                    return Err(format!("exclusive {s:?} overlaps shared {r:?}"));
                }
                if exclusive_until.is_none_or(|x| s.exit > x.exit) {
                    exclusive_until = Some(s);
                }
            } else if shared_until.is_none_or(|r| s.exit > r.exit) {
                shared_until = Some(s);
            }
        }
    }
    Ok(())
}

/// Fencing tokens strictly increase in grant order (order of entry) per lock.
pub fn check_tokens(history: &[Section]) -> Result<(), String> {
    let mut by_lock: HashMap<&str, Vec<&Section>> = HashMap::new();
    for s in history.iter().filter(|s| s.token.is_some()) {
        by_lock.entry(&s.lock).or_default().push(s);
    }
    for sections in by_lock.values_mut() {
        sections.sort_by_key(|s| s.enter);
        for pair in sections.windows(2) {
            if pair[1].token <= pair[0].token {
                return Err(format!("token went down or repeated: {:?} then {:?}", pair[0], pair[1]));
            }
        }
    }
    Ok(())
}

/// The most sections of one lock (or semaphore) that were ever inside at the same moment.
pub fn max_overlap(history: &[Section], lock: &str) -> usize {
    // Exits sort before enters at the same instant: touching sections do not overlap.
    let mut events: Vec<(u64, i32)> =
        history.iter().filter(|s| s.lock == lock).flat_map(|s| [(s.enter, 1), (s.exit, -1)]).collect();
    events.sort_by_key(|&(at, delta)| (at, delta));
    let (mut inside, mut most) = (0i64, 0i64);
    for (_, delta) in events {
        inside += i64::from(delta);
        most = most.max(inside);
    }
    usize::try_from(most).unwrap_or(0)
}
