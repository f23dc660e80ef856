//! Lock names: checked before anything is sent, and shown safely.

use crate::exit::{Failure, shown};

/// Longest name the library accepts, in bytes.
pub use redlease::MAX_NAME_LEN;

/// A name must be non-empty and at most 8 KiB. Checked here rather than by the library so
/// that the message does not repeat a name of many kilobytes.
pub fn check(name: &str) -> Result<(), Failure> {
    if name.is_empty() {
        return Err(Failure::usage("the lock name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Failure::usage(format!(
            "the lock name is {} bytes long, more than the {MAX_NAME_LEN} allowed",
            name.len()
        )));
    }
    Ok(())
}

/// The name as it is when short and plain, else quoted, escaped and cut.
pub fn printable(name: &str) -> String {
    if name.len() <= 60 && !name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        name.to_owned()
    } else {
        shown(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_shown_safely() {
        assert!(check("").is_err());
        assert!(check(&"x".repeat(MAX_NAME_LEN)).is_ok());
        let long = check(&"x".repeat(MAX_NAME_LEN + 1)).unwrap_err();
        assert!(long.message().len() < 100, "{}", long.message());
        assert_eq!(printable("orders:42"), "orders:42");
        assert_eq!(printable("a\nb"), "\"a\\nb\"");
    }
}
