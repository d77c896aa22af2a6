//! Which database a root is in: the URL (`postgres://host[:port]/db?schema=team_a`), the
//! schema, and the password (never from the URL: from `PGPASSWORD` or the password file).

use std::time::Duration;

use tokio_postgres::config::Host;

use crate::config::EngineConfig;
use crate::error::{Error, Result};

/// The schema a URL without `schema=` names.
pub const DEFAULT_SCHEMA: &str = "circe";
/// How long a connection attempt may take unless the URL says (`connect_timeout=N`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Does `s` name a database rather than a folder?
pub fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// A database root: where to connect and which schema holds the tables.
#[derive(Clone)]
pub struct Target {
    /// The URL as given, less `schema=` (it has no password).
    pub url: String,
    pub schema: String,
    pub(super) config: tokio_postgres::Config,
    /// Where LISTEN connects when that differs (PgBouncer in transaction mode does not pass
    /// LISTEN): `listen_host=` and `listen_port=` in the URL.
    pub(super) listen: tokio_postgres::Config,
    /// The URL names the server apart (`listen_host`/`listen_port`): a pooler is in front, so
    /// what needs a server session of its own (LISTEN, session advisory locks) goes there.
    pub(super) server_apart: bool,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.location())
    }
}

fn check_schema(s: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !s.starts_with("pg_")
        && s != "information_schema";
    if ok {
        return Ok(());
    }
    Err(Error::usage(format!("`{s}` is not a schema name circe uses"))
        .hint("a schema is 1-63 of a-z, 0-9 and _, starting with a letter or _ (not pg_, not information_schema: the server's own)"))
}

impl Target {
    /// Parse `postgres://...[?schema=NAME&...]`.
    pub fn from_url(url: &str) -> Result<Target> {
        Target::parse(url, None)
    }

    /// `engine:` of a circe.yaml.
    pub fn from_config(e: &EngineConfig) -> Result<Target> {
        Target::parse(&e.url, e.schema.as_deref())
    }

    fn parse(url: &str, schema: Option<&str>) -> Result<Target> {
        if !is_url(url) {
            return Err(Error::usage(format!("`{url}` is not a postgres:// URL"))
                .hint("write postgres://host[:port]/database?schema=NAME"));
        }
        // Before any error that would print the URL.
        if holds_password(url) {
            return Err(password_in_url());
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        let (mut from_url, mut listen_host, mut listen_port) = (None, None, None);
        let mut seen = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let key = pair.split_once('=').map_or(pair, |(k, _)| k);
            // circe's own parameters, once each (libpq's are the parser's to judge).
            let ours = matches!(key, "schema" | "listen_host" | "listen_port");
            if ours && seen.contains(&key) {
                return Err(Error::usage(format!("`{url}` names `{key}` twice"))
                    .hint(format!("give `{key}=` once")));
            }
            seen.push(key);
            match pair.split_once('=') {
                Some(("schema", v)) => from_url = Some(v.to_string()),
                Some(("listen_host", v)) => listen_host = Some(v.to_string()),
                Some(("listen_port", v)) => listen_port = Some(v.to_string()),
                Some(("password", _)) => return Err(password_in_url()),
                _ => kept.push(pair),
            }
        }
        let schema = match (schema, from_url.as_deref()) {
            (Some(a), Some(b)) if a != b => {
                return Err(Error::usage(format!(
                    "the schema is `{a}` in circe.yaml but `{b}` in its url"
                ))
                .hint("name the schema once"));
            }
            (Some(s), _) | (None, Some(s)) => s.to_string(),
            (None, None) => DEFAULT_SCHEMA.to_string(),
        };
        check_schema(&schema)?;
        let plain =
            if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        let mut config: tokio_postgres::Config = plain.parse().map_err(|e: tokio_postgres::Error| {
            // The parser's reason (an unknown option, a bad value) is the error's source.
            let why = std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
            Error::usage(format!("`{url}` is not a database URL: {why}"))
                .hint("write postgres://user@host[:port]/database?schema=NAME (libpq's parameters, and circe's schema=, listen_host=, listen_port=)")
        })?;
        if config.get_password().is_some() {
            return Err(password_in_url());
        }
        // libpq reads PGSSLMODE when the URL says nothing: a host set up to require TLS is
        // not served without it in silence.
        let env_requires = !plain.contains("sslmode=")
            && std::env::var("PGSSLMODE")
                .is_ok_and(|m| matches!(m.as_str(), "require" | "verify-ca" | "verify-full"));
        if env_requires || config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            let who = if env_requires { "PGSSLMODE".to_string() } else { format!("`{url}`") };
            return Err(Error::usage(format!(
                "{who} asks for TLS (sslmode=require or stricter): circe connects without TLS"
            ))
            .hint("reach the server over its unix socket, an SSH tunnel or a private network, and drop sslmode= (or write sslmode=disable in the URL)"));
        }
        fill_defaults(&mut config);
        // One port for every host, or one per host (`host:port` and `port=` both: two).
        let (hosts, ports) = (config.get_hosts().len(), config.get_ports().len());
        if ports > 1 && ports != hosts {
            return Err(Error::usage(format!(
                "`{url}` names {ports} ports for {hosts} host{}",
                if hosts == 1 { "" } else { "s" }
            ))
            .hint("give the port once: in host:port or as port=, not both"));
        }
        let server_apart = listen_host.is_some() || listen_port.is_some();
        let listen_port = match listen_port {
            None => None,
            Some(p) => Some(p.parse::<u16>().map_err(|_| {
                Error::usage(format!("listen_port `{p}` is not a port number"))
                    .hint("listen_port= names the server's own port when a pooler is in front")
            })?),
        };
        let listen = if server_apart {
            let env = std::env::var("PGPASSWORD").ok();
            apart(&config, listen_host.as_deref(), listen_port, env, from_passfile)
        } else {
            config.clone()
        };
        Ok(Target { url: plain, schema, config, listen, server_apart })
    }

    /// The root's name for people: the URL with its schema.
    pub fn location(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}schema={}", self.url, self.schema)
    }

    /// The root's URL as a command line takes it again (a hint's `--root` or `init --engine`):
    /// `location`, with the server named apart kept (`listen_host=`, `listen_port=`).
    pub fn url_to_pass(&self) -> String {
        let url = self.engine_config().url;
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}schema={}", self.schema)
    }

    /// The server, database and schema, however the URL spells them (its order of
    /// parameters, its timeouts, the user it connects as): `postgres://HOST:PORT/DB?schema=S`.
    pub fn identity(&self) -> String {
        let host = match self.config.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            Some(Host::Unix(p)) => p.display().to_string(),
            None => String::new(),
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        let user = self.config.get_user().unwrap_or_default();
        let db = self.config.get_dbname().unwrap_or(user);
        format!("postgres://{host}:{port}/{db}?schema={}", self.schema)
    }

    /// Where LISTEN and the session locks connect, for people.
    pub fn listen_location(&self) -> String {
        if self.server_apart {
            let host = match self.listen.get_hosts().first() {
                Some(Host::Tcp(h)) => h.clone(),
                Some(Host::Unix(p)) => p.display().to_string(),
                None => "?".into(),
            };
            let port = self.listen.get_ports().first().copied().unwrap_or(5432);
            format!(
                "{} (its server {host} port {port}, by listen_host/listen_port)",
                self.location()
            )
        } else {
            self.location()
        }
    }

    /// `engine:` for a circe.yaml pointing at this root (the server named apart kept).
    pub fn engine_config(&self) -> EngineConfig {
        let url = if self.server_apart {
            // The server named apart, as `listen_host=` and `listen_port=` (its one host, port).
            let host = self.listen.get_hosts().first().map(|h| match h {
                tokio_postgres::config::Host::Tcp(h) => h.clone(),
                tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
            });
            let mut params: Vec<String> =
                host.map(|h| format!("listen_host={h}")).into_iter().collect();
            params.extend(self.listen.get_ports().first().map(|p| format!("listen_port={p}")));
            let sep = if self.url.contains('?') { '&' } else { '?' };
            format!("{}{sep}{}", self.url, params.join("&"))
        } else {
            self.url.clone()
        };
        EngineConfig { kind: "postgres".into(), url, schema: Some(self.schema.clone()) }
    }

    /// The ports the URL names, as text (libpq's default, 5432, when it names none).
    pub(super) fn ports(&self) -> Vec<String> {
        let ports = self.config.get_ports();
        if ports.is_empty() {
            return vec!["5432".to_string()];
        }
        ports.iter().map(u16::to_string).collect()
    }

    /// The connect timeout in force.
    pub fn connect_timeout(&self) -> Duration {
        self.config.get_connect_timeout().copied().unwrap_or(CONNECT_TIMEOUT)
    }
}

/// Does `url` carry a password: `user:password@` before its host, or `password=`?
fn holds_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = before_query.split('/').next().unwrap_or("");
    let userinfo = authority.rsplit_once('@').map(|(u, _)| u);
    userinfo.is_some_and(|u| u.contains(':'))
        || query.split('&').any(|p| p.split_once('=').is_some_and(|(k, _)| k == "password"))
}

fn password_in_url() -> Error {
    Error::usage(
        "the database URL holds a password: circe does not keep passwords in URLs or circe.yaml",
    )
    .hint("put it in the password file (~/.pgpass, or the file PGPASSFILE names) or in PGPASSWORD")
}

/// `c` with one host and one port: `host` and `port` where given, else `c`'s first ones.
/// (tokio_postgres keeps lists of hosts and ports, so the settings are copied into a new
/// one rather than appended to.) The password is found as libpq would for the new place:
/// `PGPASSWORD`, else the password file's line for its host and port, else `c`'s (the
/// pooler's line), so a pooler and its server may have passwords of their own.
fn apart(
    c: &tokio_postgres::Config,
    host: Option<&str>,
    port: Option<u16>,
    env_password: Option<String>,
    passfile: fn(&tokio_postgres::Config) -> Option<String>,
) -> tokio_postgres::Config {
    let mut n = tokio_postgres::Config::new();
    if let Some(u) = c.get_user() {
        n.user(u);
    }
    if let Some(d) = c.get_dbname() {
        n.dbname(d);
    }
    if let Some(t) = c.get_connect_timeout() {
        n.connect_timeout(*t);
    }
    n.application_name(c.get_application_name().unwrap_or("circe"));
    n.keepalives(c.get_keepalives());
    n.keepalives_idle(c.get_keepalives_idle());
    if let Some(i) = c.get_keepalives_interval() {
        n.keepalives_interval(i);
    }
    if let Some(r) = c.get_keepalives_retries() {
        n.keepalives_retries(r);
    }
    match (host, c.get_hosts().first()) {
        (Some(h), _) => {
            n.host(h);
        }
        (None, Some(Host::Tcp(h))) => {
            n.host(h);
        }
        (None, Some(Host::Unix(p))) => {
            n.host_path(p);
        }
        (None, None) => {}
    }
    n.port(port.or_else(|| c.get_ports().first().copied()).unwrap_or(5432));
    if let Some(p) = env_password {
        n.password(p);
    } else if let Some(p) = passfile(&n) {
        n.password(p);
    } else if let Some(p) = c.get_password() {
        n.password(p);
    }
    n
}

/// User, host, timeouts and the password, as libpq would find them.
fn fill_defaults(c: &mut tokio_postgres::Config) {
    if c.get_user().is_none() {
        let user = std::env::var("PGUSER")
            .or_else(|_| std::env::var("USER"))
            .unwrap_or_else(|_| "postgres".into());
        c.user(user);
    }
    if c.get_hosts().is_empty() {
        let host = std::env::var("PGHOST").unwrap_or_else(|_| "/var/run/postgresql".into());
        c.host(&host);
    }
    if c.get_connect_timeout().is_none() {
        c.connect_timeout(CONNECT_TIMEOUT);
    }
    if c.get_application_name().is_none() {
        c.application_name("circe");
    }
    // Keepalives find a dead peer of an idle connection (a waiting LISTEN) in about 30 s.
    c.keepalives_idle(Duration::from_secs(10));
    c.keepalives_interval(Duration::from_secs(5));
    c.keepalives_retries(4);
    if let Ok(p) = std::env::var("PGPASSWORD") {
        c.password(p);
    } else if let Some(p) = from_passfile(c) {
        c.password(p);
    }
}

/// The password for this connection from the password file (`PGPASSFILE`, else
/// `~/.pgpass`): lines `host:port:database:user:password`, `*` matching anything.
fn from_passfile(c: &tokio_postgres::Config) -> Option<String> {
    let text = crate::engine::local::read_small_file(&passfile()?)?;
    passfile_match(&text, c)
}

/// Where the password file is looked for: `PGPASSFILE`, else `~/.pgpass`.
pub fn passfile() -> Option<std::path::PathBuf> {
    std::env::var_os("PGPASSFILE")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".pgpass")))
}

/// The password of the first line of a password file's `text` that matches `c`.
fn passfile_match(text: &str, c: &tokio_postgres::Config) -> Option<String> {
    // A socket folder is matched by its path, as libpq matches it, then as `localhost`
    // (libpq's name for its default socket folder; circe's for any).
    let hosts = match c.get_hosts().first()? {
        Host::Tcp(h) => vec![h.clone()],
        Host::Unix(p) => vec![p.display().to_string(), "localhost".to_string()],
    };
    let port = c.get_ports().first().copied().unwrap_or(5432).to_string();
    let db = c.get_dbname().unwrap_or(c.get_user().unwrap_or_default()).to_string();
    let user = c.get_user().unwrap_or_default().to_string();
    hosts.iter().find_map(|host| {
        let want = [host.as_str(), port.as_str(), db.as_str(), user.as_str()];
        text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
            let fields = split_passfile_line(l);
            if fields.len() != 5 {
                return None;
            }
            let matches = fields[..4].iter().zip(want).all(|(f, w)| f == "*" || f == w);
            matches.then(|| fields[4].clone())
        })
    })
}

/// Split on `:`, with `\:` and `\\` as escapes.
fn split_passfile_line(l: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = l.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' => {
                if let Some(n) = chars.next() {
                    out.last_mut().expect("one field").push(n);
                }
            }
            ':' => out.push(String::new()),
            c => out.last_mut().expect("one field").push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one host and port a connection to the server named apart goes to.
    fn place(c: &tokio_postgres::Config) -> (Vec<String>, Vec<u16>) {
        let hosts = c
            .get_hosts()
            .iter()
            .map(|h| match h {
                Host::Tcp(h) => h.clone(),
                Host::Unix(p) => p.display().to_string(),
            })
            .collect();
        (hosts, c.get_ports().to_vec())
    }

    #[test]
    fn the_server_named_apart_is_one_host_and_one_port() {
        let base = "postgres://circe@pool.example:6432/circe?schema=team_a";
        let t = Target::from_url(&format!("{base}&listen_port=5432")).unwrap();
        assert!(t.server_apart);
        assert_eq!(place(&t.config), (vec!["pool.example".into()], vec![6432]));
        assert_eq!(place(&t.listen), (vec!["pool.example".into()], vec![5432]));
        assert_eq!(t.listen.get_user(), Some("circe"));
        assert_eq!(t.listen.get_dbname(), Some("circe"));
        assert_eq!(t.listen.get_keepalives_idle(), t.config.get_keepalives_idle());
        let t = Target::from_url(&format!("{base}&listen_host=db.example")).unwrap();
        assert_eq!(place(&t.listen), (vec!["db.example".into()], vec![6432]));
        let t = Target::from_url(&format!("{base}&listen_host=/run/pg&listen_port=5433")).unwrap();
        assert_eq!(place(&t.listen), (vec!["/run/pg".into()], vec![5433]));
        let t = Target::from_url(base).unwrap();
        assert!(!t.server_apart);
        assert_eq!(place(&t.listen), place(&t.config));
        let e = Target::from_url("postgres://h:5432/db?port=5433&schema=s").unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::Usage, "{e:?}");
        assert!(e.message.contains("2 ports for 1 host"), "{e:?}");
        // Each host its port, or one port for all: what the driver connects with.
        let two = Target::from_url("postgres://a:1,b:2/db?schema=s");
        assert!(two.is_ok(), "{two:?}");
        assert!(Target::from_url("postgres://a,b/db?schema=s").is_ok());
        let e = Target::from_url(&format!("{base}&listen_port=x")).unwrap_err();
        assert!(e.message.contains("listen_port"), "{e:?}");
    }

    /// The circe.yaml `init --engine` writes keeps the server named apart: read back, it is
    /// the same target.
    #[test]
    fn the_written_configuration_keeps_the_server_named_apart() {
        let url = "postgres://circe@pool.example:6432/circe?schema=team_a&listen_host=/run/pg&listen_port=5433";
        let t = Target::from_url(url).unwrap();
        let e = t.engine_config();
        assert!(e.url.ends_with("?listen_host=/run/pg&listen_port=5433"), "{}", e.url);
        let back = Target::from_config(&e).unwrap();
        assert!(back.server_apart);
        assert_eq!(place(&back.listen), (vec!["/run/pg".into()], vec![5433]));
        assert_eq!(back.schema, "team_a");
        let plain = Target::from_url("postgres:///circe?host=/run/pg&schema=b").unwrap();
        assert_eq!(plain.engine_config().url, "postgres:///circe?host=/run/pg");
    }

    #[test]
    fn urls() {
        let t = Target::from_url("postgres://db.example/team?schema=team_a").unwrap();
        assert_eq!((t.schema.as_str(), t.url.as_str()), ("team_a", "postgres://db.example/team"));
        assert_eq!(t.location(), "postgres://db.example/team?schema=team_a");
        let d = Target::from_url("postgresql://u@h:6432/x?connect_timeout=2").unwrap();
        assert_eq!(d.schema, DEFAULT_SCHEMA);
        assert_eq!(d.connect_timeout(), Duration::from_secs(2));
        let e = Target::from_url("postgres://u:secret@h/x").unwrap_err();
        assert!(e.message.contains("password") && e.hint.unwrap().contains("pgpass"));
        assert!(Target::from_url("postgres://h/x?password=secret").is_err());
        assert!(Target::from_url("postgres://h/x?schema=information_schema").is_err());
        // Refused as a password before any other fault would print the URL.
        for url in [
            "postgres://u:secret@h/x?schema=a&schema=b",
            "postgres://u:secret@h/x?nosuchoption=1",
            "postgres://u:secret@h/x?sslmode=bogus",
            "postgres://u@h/x?password=secret&schema=a&schema=b",
        ] {
            let e = Target::from_url(url).err().unwrap();
            assert!(!e.message.contains("secret"), "{url}: {}", e.message);
            assert!(e.message.contains("holds a password"), "{url}: {}", e.message);
        }
        assert!(Target::from_url("postgres://u@h:5432/x?schema=a").is_ok());
        let tls = Target::from_url("postgres://u@h/x?sslmode=require").err().unwrap();
        assert!(tls.message.contains("without TLS"), "{}", tls.message);
        assert!(Target::from_url("postgres://u@h/x?sslmode=prefer").is_ok());
        assert!(Target::from_url("postgres://h/x?schema=Bad-Name").is_err());
        assert!(Target::from_url("postgres://h/x?schema=pg_catalog").is_err());
        assert!(Target::from_url("/some/folder").is_err());
    }

    /// The server named apart takes its own password file line, not the pooler's.
    #[test]
    fn the_server_apart_takes_its_own_password_line() {
        const FILE: &str =
            "pool.example:6432:circe:circe:pooler\nlocalhost:5433:circe:circe:server\n";
        let mut pooler: tokio_postgres::Config =
            "postgres://circe@pool.example:6432/circe".parse().unwrap();
        pooler.password(passfile_match(FILE, &pooler).unwrap());
        let server = apart(&pooler, Some("/run/pg"), Some(5433), None, |n| passfile_match(FILE, n));
        assert_eq!(server.get_password(), Some(&b"server"[..]));
        // Without a line of its own, the pooler's carries over.
        let other = apart(&pooler, Some("/run/pg"), Some(5499), None, |n| passfile_match(FILE, n));
        assert_eq!(other.get_password(), Some(&b"pooler"[..]));
    }

    /// A socket folder takes the line naming its path (as libpq and psql read the file), and
    /// else a `localhost` line.
    #[test]
    fn a_socket_folder_takes_the_line_of_its_path() {
        const FILE: &str = "localhost:5433:circe:circe:local\n/run/pg:5433:circe:circe:by-path\n";
        let c: tokio_postgres::Config =
            "postgres://circe@/circe?host=/run/pg&port=5433".parse().unwrap();
        assert_eq!(passfile_match(FILE, &c).as_deref(), Some("by-path"));
        let other: tokio_postgres::Config =
            "postgres://circe@/circe?host=/tmp/other&port=5433".parse().unwrap();
        assert_eq!(passfile_match(FILE, &other).as_deref(), Some("local"));
    }

    #[test]
    fn one_identity_however_the_url_spells_it() {
        let a = Target::from_url("postgres://u@/db?host=/run/pg&port=5433&schema=s").unwrap();
        let b =
            Target::from_url("postgres://u@/db?port=5433&connect_timeout=9&host=/run/pg&schema=s")
                .unwrap();
        assert_eq!(a.identity(), b.identity());
        assert_ne!(a.location(), b.location());
        let other = Target::from_url("postgres://u@/db?host=/run/pg&port=5433&schema=t").unwrap();
        assert_ne!(a.identity(), other.identity());
        // Whoever connects, it is the same root.
        let bob = Target::from_url("postgres://bob@/db?host=/run/pg&port=5433&schema=s").unwrap();
        assert_eq!(a.identity(), bob.identity());
    }

    #[test]
    fn a_parameter_twice_or_unknown_is_named() {
        let e = Target::from_url("postgres://u@h/db?schema=a&schema=b").unwrap_err();
        assert!(e.message.contains("names `schema` twice"), "{e:?}");
        let e = Target::from_url("postgres://u@h/db?fooo=1").unwrap_err();
        assert!(e.message.contains("unknown option `fooo`"), "{e:?}");
    }

    #[test]
    fn passfile_lines() {
        assert_eq!(split_passfile_line(r"h:5432:*:u:p\:w\\d"), ["h", "5432", "*", "u", r"p:w\d"]);
    }
}
