//! Deadlines from durations a user may pass, without overflow: a deadline too far away to
//! be represented by `Instant` is "never" (`None`), and waits treat it as no deadline.

use std::time::{Duration, Instant};

/// `now + d`, or `None` ("never") when that is beyond what `Instant` holds.
pub(crate) fn deadline_in(d: Duration) -> Option<Instant> {
    Instant::now().checked_add(d)
}

/// The earlier of two deadlines, where `None` means "never".
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_durations_mean_never_and_never_loses_to_any_deadline() {
        assert_eq!(deadline_in(Duration::MAX), None);
        let soon = deadline_in(Duration::from_millis(5));
        assert!(soon.is_some());
        assert_eq!(earliest(None, soon), soon);
        assert_eq!(earliest(soon, None), soon);
        assert_eq!(earliest(None, None), None);
        let later = deadline_in(Duration::from_secs(5));
        assert_eq!(earliest(later, soon), soon);
    }
}
