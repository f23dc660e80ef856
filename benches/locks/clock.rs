//! Clocks: durations in nanoseconds, and CLOCK_MONOTONIC, which the processes of one host
//! share.

use std::thread;
use std::time::Duration;

pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("duration fits in u64 nanoseconds")
}

/// CLOCK_MONOTONIC in nanoseconds: comparable across processes on one host.
pub(crate) fn mono_ns() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock_gettime(CLOCK_MONOTONIC)");
    let secs = u64::try_from(now.tv_sec()).expect("monotonic seconds are positive");
    let subsec = u64::try_from(now.tv_nsec()).expect("monotonic nanoseconds are positive");
    secs * 1_000_000_000 + subsec
}

pub(crate) fn sleep_until_mono(at_ns: u64) {
    let now = mono_ns();
    if at_ns > now {
        thread::sleep(Duration::from_nanos(at_ns - now));
    }
}
