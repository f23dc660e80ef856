//! The client's URL: parsing it with clear errors, and showing it without its password.

use redis::IntoConnectionInfo;

use crate::error::{Error, Result};

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
        let text = e.to_string();
        let reason = text.split(" - ").next().unwrap_or(&text);
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
                Some((name, port)) => {
                    port.parse().map(|port| (name.to_owned(), port)).map_err(|_| bad("a port is not a number"))
                }
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
        assert!(port.to_string().contains("did not parse"), "{port}");
        assert!(!port.to_string().contains("s3cret"), "{port}");
        let db = connection_info("redis://host/abc").unwrap_err();
        assert!(db.to_string().contains("Invalid database number"), "{db}");
        assert!(connection_info("redis://host:6379/2").is_ok());
        if cfg!(feature = "tls") {
            assert!(connection_info("rediss://:s3cret@host:6380/").is_ok());
        }
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
