//! The client's URL: parsing it with clear errors, and showing it without its password.

use redis::IntoConnectionInfo;

use crate::base::error::{Error, Result};

/// Every URL form a client accepts, for the messages that list them.
pub(crate) const ACCEPTED_FORMS: &str = "redis://[[user]:password@]host[:port][/db], rediss://... (the same over TLS), \
     unix:///path, redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master-name \
     or redis-cluster://[[user]:password@]host[:port][,host[:port]...]";

/// Parses a `redis://`, `rediss://` or `unix://` URL into redis-rs's connection settings,
/// with an error that says what is wrong and never shows the password. `#insecure` is
/// refused: redis-rs would read it for the command connections only, and the builder's
/// switch is the one way to turn certificate checks off.
pub(crate) fn connection_info(url: &str) -> Result<redis::ConnectionInfo> {
    let info = url.into_connection_info().map_err(|e| {
        // redis-rs's text ("Redis URL did not parse", "Invalid database number") never
        // repeats the URL; its kind is always "invalid client config", which says little.
        // Its "did not parse" does not say which part: the scheme and the port are told
        // here, anything else in redis-rs's words.
        let text = e.to_string();
        let reason = wrong_part(url).unwrap_or_else(|| text.split(" - ").next().unwrap_or(&text).to_owned());
        Error::invalid(format!("invalid redis URL {}: {reason} (expected {ACCEPTED_FORMS})", redact(url)))
    })?;
    if let redis::ConnectionAddr::TcpTls { insecure: true, .. } = info.addr() {
        return Err(Error::invalid(format!(
            "invalid redis URL {}: #insecure is not read from a URL; to accept any server certificate, \
             remove it and call ClientBuilder::danger_accept_invalid_certificates(true)",
            redact(url)
        )));
    }
    Ok(info)
}

/// The schemes a client takes, in the words of the messages.
const SCHEMES: &str = "redis://, rediss://, unix://, redis-sentinel://, redis-cluster://";

/// Which part of a URL that redis-rs could not parse is wrong, when it is the scheme or
/// the port (`None`: another part, left to redis-rs's words). Never quotes the login.
fn wrong_part(url: &str) -> Option<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(format!("no scheme: a URL starts with one of {SCHEMES}"));
    };
    // redis-rs's own aliases (valkey, redis+unix) are taken too, undocumented.
    match scheme {
        "redis" | "rediss" | "valkey" | "valkeys" => {}
        "unix" | "redis+unix" | "valkey+unix" => return None,
        _ => return Some(format!("the scheme {scheme}:// is not one of {SCHEMES}")),
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host_port)| host_port);
    // An IPv6 host is bracketed: its port follows the `]`.
    let port = match host_port.rsplit_once(']') {
        Some((_, after)) => after.strip_prefix(':'),
        None => host_port.rsplit_once(':').map(|(_, port)| port),
    }?;
    port_problem(port)
}

/// What is wrong with the port `port` of a URL, if anything.
fn port_problem(port: &str) -> Option<String> {
    if port.is_empty() || port.parse::<u16>().is_ok() {
        None
    } else if port.bytes().all(|b| b.is_ascii_digit()) {
        Some(format!("the port {port} is out of range: at most {}", u16::MAX))
    } else {
        Some(format!("the port {port} is not a number"))
    }
}

/// A URL that names several nodes, as the Sentinel and Cluster URLs do:
/// `scheme://[[user]:password@]host[:port][,host[:port]...][/db][#fragment]`.
pub(crate) struct NodeList {
    pub(crate) nodes: Vec<(String, u16)>,
    /// The data nodes' login and database.
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: i64,
    /// What follows `#` (Sentinel: the master's name).
    pub(crate) fragment: Option<String>,
}

impl NodeList {
    /// Parses `url`, which starts with `scheme`; a host without a port gets `default_port`.
    /// `form` is the expected form, for the error.
    pub(crate) fn parse(url: &str, scheme: &str, default_port: u16, form: &str) -> Result<NodeList> {
        let bad = |why: &str| Error::invalid(format!("invalid URL {}: {why} (expected {form})", redact(url)));
        let rest = url.strip_prefix(scheme).ok_or_else(|| bad(&format!("not a {scheme} URL")))?;
        let (rest, fragment) = match rest.split_once('#') {
            Some((rest, fragment)) => (rest, Some(fragment.to_owned())),
            None => (rest, None),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (login, hosts) = match authority.rsplit_once('@') {
            Some((login, hosts)) => (Some(login), hosts),
            None => (None, authority),
        };
        let (username, password) = match login {
            Some(login) => match login.split_once(':') {
                Some((user, password)) => ((!user.is_empty()).then(|| user.to_owned()), Some(password.to_owned())),
                None => (Some(login.to_owned()), None),
            },
            None => (None, None),
        };
        let nodes = hosts
            .split(',')
            .map(|host| match host.rsplit_once(':') {
                Some((name, port)) => port.parse().map(|port| (name.to_owned(), port)).map_err(|_| {
                    bad(&port_problem(port).unwrap_or_else(|| format!("the port {port} is not a number")))
                }),
                None => Ok((host.to_owned(), default_port)),
            })
            .collect::<Result<Vec<_>>>()?;
        if nodes.iter().any(|(host, _)| host.is_empty()) {
            return Err(bad("a node address is empty"));
        }
        let db = match path.trim_end_matches('/') {
            "" => 0,
            db => db.parse().map_err(|_| bad("the database is not a number"))?,
        };
        Ok(NodeList { nodes, username, password, db, fragment })
    }

    /// The connection settings of a data node at `host:port`: this URL's login and
    /// database, without the `CLIENT SETINFO` handshake (redis-rs waits up to the whole
    /// connect timeout for each handshake reply).
    pub(crate) fn node_info(&self, host: String, port: u16) -> redis::RedisResult<redis::ConnectionInfo> {
        let mut settings = redis::RedisConnectionInfo::default().set_db(self.db);
        if let Some(user) = &self.username {
            settings = settings.set_username(user);
        }
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        let settings = settings.set_skip_set_lib_name();
        let info = redis::ConnectionAddr::Tcp(host, port).into_connection_info()?;
        Ok(info.set_redis_settings(settings))
    }
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
        assert!(port.to_string().contains("the port notaport is not a number"), "{port}");
        assert!(!port.to_string().contains("s3cret"), "{port}");
        let db = connection_info("redis://host/abc").unwrap_err();
        assert!(db.to_string().contains("Invalid database number"), "{db}");
        assert!(connection_info("redis://host:6379/2").is_ok());
        if cfg!(feature = "tls") {
            assert!(connection_info("rediss://:s3cret@host:6380/").is_ok());
        }
    }

    /// A URL that does not parse says which part is wrong: the scheme, the port (not a
    /// number, or out of range), the database; the password never shows.
    #[test]
    fn a_url_that_does_not_parse_says_which_part_is_wrong() {
        let cases = [
            (
                "http://127.0.0.1:6379/",
                "the scheme http:// is not one of redis://, rediss://, unix://, redis-sentinel://, redis-cluster://",
            ),
            (
                "not a url",
                "no scheme: a URL starts with one of redis://, rediss://, unix://, redis-sentinel://, redis-cluster://",
            ),
            ("redis://:s3cret@127.0.0.1:99999/", "the port 99999 is out of range: at most 65535"),
            ("rediss://127.0.0.1:65536/", "the port 65536 is out of range: at most 65535"),
            ("redis://127.0.0.1:notaport/", "the port notaport is not a number"),
            ("redis://[::1]:70000/", "the port 70000 is out of range: at most 65535"),
            ("redis://127.0.0.1/abc", "Invalid database number"),
        ];
        for (url, says) in cases {
            let err = connection_info(url).unwrap_err();
            assert!(err.is_invalid_input(), "{url}: {err}");
            let text = err.to_string();
            assert!(text.contains(&format!("{}: {says}", redact(url))), "{url}: {text}");
            assert!(!text.contains("s3cret") && !text.contains("did not parse"), "{url}: {text}");
        }
        let nodes = |url: &str| NodeList::parse(url, "redis-cluster://", 6379, "F").err().map(|e| e.to_string());
        let out_of_range = nodes("redis-cluster://127.0.0.1:7000,127.0.0.1:99999").unwrap();
        assert!(
            out_of_range.contains(": the port 99999 is out of range: at most 65535 (expected F)"),
            "{out_of_range}"
        );
        let not_a_number = nodes("redis-cluster://127.0.0.1:x7").unwrap();
        assert!(not_a_number.contains(": the port x7 is not a number (expected F)"), "{not_a_number}");
        assert!(nodes("redis-cluster://127.0.0.1:7000,127.0.0.1:7001").is_none());
    }

    /// Every message that lists the accepted forms lists all five schemes.
    #[test]
    fn url_errors_list_every_scheme() {
        for url in ["not a url", "http://host/", "redis://host:x/", "redis://host/abc"] {
            let err = connection_info(url).unwrap_err().to_string();
            for scheme in ["redis://", "rediss://", "unix://", "redis-sentinel://", "redis-cluster://"] {
                assert!(err.contains(scheme), "{url}: {scheme}: {err}");
            }
        }
    }

    /// `#insecure` is refused, naming the builder's switch, and never shows the password.
    #[test]
    #[cfg(feature = "tls")]
    fn an_insecure_fragment_is_refused() {
        let err = connection_info("rediss://:s3cret@host:6380/#insecure").unwrap_err();
        assert!(err.is_invalid_input(), "{err}");
        let text = err.to_string();
        assert!(text.contains("danger_accept_invalid_certificates(true)") && !text.contains("s3cret"), "{text}");
        assert!(connection_info("rediss://host:6380/").is_ok());
    }
}
