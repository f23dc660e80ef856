//! The client's URL: parsing it with clear errors, and showing it without its password.

use redis::IntoConnectionInfo;

use crate::error::{Error, Result};

/// Parses `url` into redis-rs's connection settings, with an error that says what is wrong
/// and never shows the password.
pub(crate) fn connection_info(url: &str) -> Result<redis::ConnectionInfo> {
    url.into_connection_info().map_err(|e| {
        // redis-rs's text ("Redis URL did not parse", "Invalid database number") never
        // repeats the URL; its kind is always "invalid client config", which says little.
        let text = e.to_string();
        let reason = text.split(" - ").next().unwrap_or(&text);
        Error::invalid(format!(
            "invalid redis URL {}: {reason} (expected redis://[[user]:password@]host[:port][/db], rediss://... or unix:///path)",
            redact(url)
        ))
    })
}

/// The URL with its password replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else { return url.to_owned() };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else { return url.to_owned() };
    let Some((user, _password)) = rest[..at].split_once(':') else { return url.to_owned() };
    format!("{}://{user}:***@{}", &url[..scheme_end], &rest[at + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact("redis://:s3cret@host:6379/0"), "redis://:***@host:6379/0");
        assert_eq!(redact("redis://me:s3cret@host/"), "redis://me:***@host/");
        assert_eq!(redact("redis://host:6379/"), "redis://host:6379/");
        assert_eq!(redact("unix:///tmp/redis.sock"), "unix:///tmp/redis.sock");
    }

    #[test]
    fn url_errors_say_what_is_wrong_and_hide_the_password() {
        let port = connection_info("redis://:s3cret@host:notaport/").unwrap_err();
        assert!(port.is_invalid_input());
        assert!(port.to_string().contains("did not parse"), "{port}");
        assert!(!port.to_string().contains("s3cret"), "{port}");
        let db = connection_info("redis://host/abc").unwrap_err();
        assert!(db.to_string().contains("Invalid database number"), "{db}");
        assert!(connection_info("redis://host:6379/2").is_ok());
        assert!(connection_info("rediss://:s3cret@host:6380/").is_ok());
    }
}
