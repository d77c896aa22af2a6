//! One connection to the database, driven by a single-threaded runtime: every call blocks
//! until its round trip is done or the time limit passes. Requests issued together are
//! pipelined (sent before the first answer is awaited), so a `BEGIN` and the load that
//! follows it cost one round trip.
//!
//! A pipeline never goes on past the end of a transaction: no request follows one whose
//! answer ends "idle" (a `COMMIT`, a statement outside a transaction) in the same round
//! trip. A pooler in transaction mode (PgBouncer) counts such a connection clean at that
//! answer; were the client killed then, the answers still on their way would go to the
//! next client given that server connection, which would read them as its own. So a
//! commit and the flush after it are one message (`COMMIT_FLUSH`), a read of the feed asks
//! whether the log is on disk in the same statement (`feed.rs`), and the session's settings
//! are given when connecting (`SESSION`).

use std::future::Future;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

use super::target::Target;
use crate::error::{Error, Result};

/// How long one round trip may take (a lock wait is at most `LOCK_WAIT`, plus the network).
pub const ROUND_TRIP: Duration = Duration::from_secs(15);
/// How long a command waits for a task another command has open (like the local engine's
/// lock wait).
pub const LOCK_WAIT: &str = "10s";

pub struct Conn {
    rt: tokio::runtime::Runtime,
    pub(super) client: Client,
    location: String,
    /// Whether the session's settings are not (or no longer) to be sent before a call:
    /// given when connecting, sent already, or not for this connection.
    set: std::cell::Cell<bool>,
    /// Whether a call found the connection lost: later calls (a rollback, an unlock) fail
    /// at once rather than wait out `ROUND_TRIP` each on a dead connection.
    lost: std::cell::Cell<bool>,
}

/// The server's side of a session: it finds a client host that went silent (cut off by
/// the network, powered off) dead within about 15 s, and ends its session, so the session
/// locks it held (a sender's counter, a durable cursor) pass to others, rather than after
/// the operating system's two hours. And circe's statements run at read committed, whatever
/// an administrator set as the role's or database's default (circe's row locks and its
/// feed counter order what it does; a serializable default would fail its commits at
/// random). Given when connecting (the startup packet's `options`: no statement, no round
/// trip); to a pooler that refuses `options` (PgBouncer without it in
/// `ignore_startup_parameters`), sent before the first call in a round trip of their own
/// (`session_sql`). Not through a pooler the URL names (`listen_port=`), where they would
/// reach whichever server session serves a statement: the transactions say their
/// isolation themselves too.
const SESSION: [(&str, &str); 5] = [
    ("tcp_keepalives_idle", "5"),
    ("tcp_keepalives_interval", "2"),
    ("tcp_keepalives_count", "3"),
    ("tcp_user_timeout", "10000"),
    ("default_transaction_isolation", "read committed"),
];

/// `SESSION` as statements.
pub(super) fn session_sql() -> String {
    SESSION.iter().map(|(k, v)| format!("SET {k} = '{v}'")).collect::<Vec<_>>().join("; ")
}

/// `SESSION` as the startup packet's `options` (a space in a value escaped).
fn session_options() -> String {
    let o = SESSION.iter().map(|(k, v)| format!("-c {k}={}", v.replace(' ', "\\ ")));
    o.collect::<Vec<_>>().join(" ")
}

/// Sent first in a task's commit: the transaction does not wait for the disk at its
/// `COMMIT`, so the row locks it holds (the `feed` counter's, every change's) pass to the
/// next commit before the flush rather than after it. `FLUSH` after it does the waiting.
pub(super) const NO_WAIT: &str = "SET LOCAL synchronous_commit = off";

/// A transaction of its own that writes one record to the server's log (a logical
/// message nothing reads) and so waits at its commit until the log is on disk up to it,
/// with every commit before it. Many commits' flushes are one write then (the server
/// groups them), and none holds a lock.
macro_rules! flush {
    () => {
        "SELECT pg_logical_emit_message(true, 'circe', '')"
    };
}
pub(super) const FLUSH: &str = flush!();

/// The function `FLUSH` runs, as `GRANT` and `has_function_privilege` name it: a role that
/// may not run it is told to be granted it (the refused flush's hint, doctor's check).
macro_rules! flush_function {
    () => {
        "pg_logical_emit_message(boolean, text, text)"
    };
}
pub(super) use flush_function;

/// The end of a commit that did not wait (`NO_WAIT`): its `COMMIT` and then `FLUSH`, in
/// one message, so one answer ends it (a pooler hands the server connection on only
/// after the flush). Statements after a `COMMIT` in one message run in a transaction of
/// their own, which waits for the disk (`synchronous_commit` is back to the session's).
/// A failed `COMMIT` skips the flush.
pub(super) const COMMIT_FLUSH: &str = concat!("COMMIT; ", flush!());

/// Whether the server's log is on disk as far as it is written: every commit made so far
/// is durable (a standby's log is its primary's). An expression (`ON_DISK`), or a
/// statement (`FLUSHED`).
macro_rules! on_disk {
    () => {
        "CASE WHEN pg_is_in_recovery() THEN true
              ELSE pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn() END"
    };
}
pub(super) const ON_DISK: &str = on_disk!();
pub(super) const FLUSHED: &str = concat!("SELECT ", on_disk!());

/// What went wrong with a database call, before it becomes a circe error.
pub enum Failure {
    /// The server answered with an error (nothing of the call was committed).
    Db(tokio_postgres::Error),
    /// The connection broke or the time ran out: whether the call took effect is unknown.
    Lost(String),
    /// The commit was made, but the server refused the flush after it (`run_flushed`), so
    /// whether a crash takes it back is unknown: the server's reason.
    Unflushed(String),
}

impl Conn {
    /// Connect to `target` (within its connect timeout).
    pub fn connect(target: &Target) -> Result<Conn> {
        if target.server_apart {
            let conn = Conn::connect_to(target, &target.config, target.location())?;
            conn.set.set(true);
            return Ok(conn);
        }
        let mut config = target.config.clone();
        let options = match config.get_options() {
            Some(o) => format!("{o} {}", session_options()),
            None => session_options(),
        };
        config.options(options);
        match Conn::connect_to(target, &config, target.location()) {
            Ok(conn) => {
                conn.set.set(true);
                Ok(conn)
            }
            // A pooler that takes no `options`: the settings go as statements.
            Err(e) if e.message.contains("unsupported startup parameter") => {
                Conn::connect_to(target, &target.config, target.location())
            }
            Err(e) => Err(e),
        }
    }

    /// Connect to the server `target` names apart (`listen_host`/`listen_port`), for what
    /// needs a server session of its own.
    /// It keeps the server's own keepalive (`SESSION` is not sent): the session locks it
    /// holds are checked by nothing else, so a session the server ended after a cut would
    /// let another host take a lock this process still believes it holds.
    pub fn connect_server(target: &Target) -> Result<Conn> {
        let conn = Conn::connect_to(target, &target.listen, target.listen_location())?;
        conn.set.set(true);
        Ok(conn)
    }

    fn connect_to(
        target: &Target,
        config: &tokio_postgres::Config,
        location: String,
    ) -> Result<Conn> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| Error::internal(format!("cannot start the database client: {e}")))?;
        let limit = target.connect_timeout() + Duration::from_millis(500);
        let connected =
            rt.block_on(async { tokio::time::timeout(limit, config.connect(NoTls)).await });
        let (client, connection) = match connected {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return Err(connect_error(&location, config, &e)),
            Err(_) => {
                // As a refused connection: the server may come back (a follower waits).
                return Err(Error::internal(format!(
                    "cannot reach the database {location}: no answer within {} s",
                    target.connect_timeout().as_secs()
                ))
                .hint("check the network and that the server runs; nothing was changed")
                .transient());
            }
        };
        rt.spawn(connection);
        Ok(Conn {
            rt,
            client,
            location,
            set: std::cell::Cell::new(false),
            lost: std::cell::Cell::new(false),
        })
    }

    /// Run one round trip (or pipelined requests) to completion. The first is preceded by
    /// the session's settings (`SESSION`).
    pub fn run<T, F>(&self, fut: F) -> std::result::Result<T, Failure>
    where
        F: Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    {
        if self.lost.get() {
            return Err(Failure::Lost("the connection was lost before".into()));
        }
        let first = !self.set.replace(true);
        let done = self.rt.block_on(async {
            tokio::time::timeout(ROUND_TRIP, async {
                if first {
                    // A server (or pooler) that refuses a setting still serves: only the
                    // call's own answer counts.
                    let _ = self.client.batch_execute(&session_sql()).await;
                }
                fut.await
            })
            .await
        });
        let r = match done {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if e.as_db_error().is_some() => Err(Failure::Db(e)),
            Ok(Err(e)) => Err(Failure::Lost(e.to_string())),
            Err(_) => Err(Failure::Lost(format!("no answer within {} s", ROUND_TRIP.as_secs()))),
        };
        if matches!(r, Err(Failure::Lost(_))) {
            self.lost.set(true);
        }
        r
    }

    /// `run` of a commit's statements, in a transaction that does not wait for the disk
    /// (`NO_WAIT`), followed in the same round trip by its `COMMIT` and flush
    /// (`COMMIT_FLUSH`): done only once the commit is on disk. A commit made whose flush did
    /// not answer is `Lost`: a crash may have taken it.
    pub fn run_flushed<T, F>(&self, fut: F) -> std::result::Result<T, Failure>
    where
        F: Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    {
        let c = &self.client;
        // TEST BUILDS ONLY (CIRCE_TEST_BREAK=pg-no-flush): answered before the disk has it.
        if crate::fault::test_break("pg-no-flush") {
            return self.run(async {
                let (v, ()) =
                    futures_util::future::try_join(fut, c.batch_execute("COMMIT")).await?;
                Ok(v)
            });
        }
        let (v, end) = self.run(async {
            if past_idle() {
                let (done, flushed) = futures_util::future::join(
                    futures_util::future::try_join(fut, c.batch_execute("COMMIT")),
                    c.batch_execute(FLUSH),
                )
                .await;
                let (v, ()) = done?;
                let end = flushed.map_or_else(|e| Ended::after_commit(&e), |()| Ended::Flushed);
                return Ok((v, end));
            }
            futures_util::future::try_join(fut, commit_and_flush(c)).await
        })?;
        match end {
            Ended::Flushed => Ok(v),
            Ended::Refused(why) => Err(Failure::Unflushed(why)),
            Ended::Unconfirmed(why) => {
                self.lost.set(true);
                Err(Failure::Lost(format!("the commit was made, its flush unconfirmed: {why}")))
            }
        }
    }

    /// `run`, for calls that change nothing or commit nothing: any failure is an error.
    pub fn call<T, F>(&self, what: &str, fut: F) -> Result<T>
    where
        F: Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    {
        self.run(fut).map_err(|f| self.error(what, f))
    }

    /// A failure as a circe error.
    pub fn error(&self, what: &str, f: Failure) -> Error {
        match f {
            Failure::Db(e) => db_error(what, &e),
            Failure::Lost(why) => Error::internal(format!(
                "{what}: lost the connection to the database {}: {why}",
                self.location
            ))
            .hint("check the network and the server; run the command again")
            .detail("outcome", "unknown")
            .transient(),
            Failure::Unflushed(why) => Error::internal(format!(
                "{what}: the commit was made, but the database {} refused the flush that makes it durable ({why}): a crash of the server now could take it back",
                self.location
            ))
            .hint(concat!(
                "let circe's role run it: `GRANT EXECUTE ON FUNCTION ",
                flush_function!(),
                " TO <role>` (PROTOCOLS.md section 18, \"Durable before seen\"); `circe show` tells the change"
            ))
            .detail("outcome", "unknown"),
        }
    }

    /// The error for a commit whose outcome is unknown (the connection broke after it was
    /// sent).
    pub fn unknown_outcome(&self, what: &str, why: &str) -> Error {
        Error::internal(format!(
            "{what}: the outcome is unknown: the connection to {} broke after the commit was sent ({why})",
            self.location
        ))
        .detail("outcome", "unknown")
    }
}

/// A failure before anything was committed (a transaction before its COMMIT was sent, which
/// the server rolls back, or a read): nothing changed. A lost connection, or a server that
/// ends the session (stopping or restarting: a transient error), is said so (`committed:
/// false`), not as an unknown outcome; any other error is as it was.
pub fn before_commit(mut e: Error) -> Error {
    let lost = e.details.iter().any(|(k, v)| *k == "outcome" && v == "unknown");
    if lost || e.is_transient() {
        e.details.retain(|(k, _)| *k != "outcome");
        e = e
            .detail("committed", false)
            .hint("nothing was changed (the connection broke, or the server ended the session, before anything was committed): check the network and the server, then run the command again");
    }
    e
}

/// The socket file a connection to `config` goes to, when it names one host and that host
/// is a folder (a unix socket): `DIR/.s.PGSQL.PORT` (with several hosts, the error may be
/// another's).
fn socket_file(config: &tokio_postgres::Config) -> Option<String> {
    let [tokio_postgres::config::Host::Unix(dir)] = config.get_hosts() else {
        return None;
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    Some(dir.join(format!(".s.PGSQL.{port}")).display().to_string())
}

/// A failed connection to `place` (made by `config`) as a circe error: the reason, and
/// where to look.
pub fn connect_error(
    place: &str,
    config: &tokio_postgres::Config,
    e: &tokio_postgres::Error,
) -> Error {
    if let Some(db) = e.as_db_error() {
        let err =
            Error::internal(format!("cannot connect to the database {place}: {}", db.message()));
        // A pooler says it in its own words and code ("SASL authentication failed").
        if *db.code() == SqlState::INVALID_PASSWORD
            || *db.code() == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            || db.message().contains("authentication failed")
        {
            return err.hint("check the user and the password (PGPASSWORD or the password file)");
        }
        if *db.code() == SqlState::CANNOT_CONNECT_NOW {
            return err.hint("the server is starting or stopping: try again").transient();
        }
        if *db.code() == SqlState::TOO_MANY_CONNECTIONS {
            // Slots free up as other clients leave: it passes, as a restart does.
            return err
                .hint("every connection slot of the server is taken: try again, or put PgBouncer in front (README, \"Running agents on several hosts\"); nothing was changed")
                .transient();
        }
        return err.hint("check the URL and the server's settings; nothing was changed");
    }
    // The client library names only the kind ("error connecting to server"); the reason is
    // in its source ("Connection refused", "password missing").
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    let mut password_missing = false;
    while let Some(s) = source {
        let text = s.to_string();
        password_missing |= text == "password missing";
        why = format!("{why}: {text}");
        source = s.source();
    }
    if password_missing {
        let user = config.get_user().unwrap_or_default();
        let db = config.get_dbname().unwrap_or(user);
        let file = super::target::passfile();
        let file_said = match &file {
            Some(f) if !f.exists() => format!("{} does not exist", f.display()),
            Some(f) if !f.is_file() => format!("{} is no file", f.display()),
            Some(f) => format!("no line of {} matches (or it cannot be read)", f.display()),
            None => "no password file (HOME is not set)".to_string(),
        };
        return Error::internal(format!(
            "cannot connect to the database {place}: the server asks a password of user {user} \
             (database {db}), and PGPASSWORD is not set and {file_said}"
        ))
        .hint(
            "add `host:port:database:user:password` to ~/.pgpass (mode 600; PGPASSFILE names \
             another file; `localhost` stands for a socket folder) or set PGPASSWORD; a URL \
             without `user@` connects as PGUSER, else the login user",
        );
    }
    // Something answered, but not in PostgreSQL's protocol: another service on that port.
    // Trying again does not help.
    if ["bytes remaining on stream", "unexpected message from server", "invalid message length"]
        .iter()
        .any(|m| why.contains(m))
    {
        return Error::internal(format!(
            "cannot connect to the database {place}: what answered there does not speak PostgreSQL's protocol ({why})"
        ))
        .hint("check the URL's host and port: another service listens there; nothing was changed");
    }
    // A socket file that is not there says only "No such file or directory": name it.
    if let Some(file) = socket_file(config) {
        why = format!("{why} (socket {file})");
    }
    Error::internal(format!("cannot connect to the database {place}: {why}"))
        .hint("check the URL, the network and that the server runs; nothing was changed")
        .transient()
}

/// A server error as a circe error. Errors circe's own functions raise start with
/// `circe:<kind>:`.
pub fn db_error(what: &str, e: &tokio_postgres::Error) -> Error {
    // No word from the server: the connection broke (it may pass, as a restart does).
    let Some(db) = e.as_db_error() else {
        let broke = e.is_closed()
            || std::error::Error::source(e)
                .is_some_and(<dyn std::error::Error>::is::<std::io::Error>);
        if broke {
            return Error::internal(format!("{what}: lost the connection to the database: {e}"))
                .hint("check the network and the server; run the command again")
                .transient();
        }
        return Error::internal(format!("{what}: {e}")).transient();
    };
    let msg = db.message();
    if let Some(rest) = msg.strip_prefix("circe:") {
        let (kind, text) = rest.split_once(':').unwrap_or(("internal", rest));
        return match kind {
            "race" => Error::conflict(text.to_string())
                .detail("race", true)
                .hint("another command changed it: look again (`circe show`) and run yours again"),
            "conflict" => Error::conflict(text.to_string()),
            "not_found" => Error::not_found(text.to_string()),
            "refused" => Error::refused(text.to_string()),
            // A root moved away while the command ran (`import::FENCE`).
            "moved" => Error::refused(text.to_string())
                .detail("moved", true)
                .hint("the work is in the root it was moved to: run the command again there"),
            _ => Error::internal(text.to_string()),
        };
    }
    let code = db.code();
    if *code == SqlState::QUERY_CANCELED && msg.contains("statement timeout") {
        return Error::internal(format!(
            "{what}: the server's statement_timeout ended it ({msg})"
        ))
        .hint(format!("circe's statements may wait up to {LOCK_WAIT} for a lock: for circe's role, `ALTER ROLE name SET statement_timeout = 0` (or above {LOCK_WAIT})"));
    }
    // A read-only server or role, or a grant the role lacks: as a read-only mount or a
    // file's permission is (`Error::is_not_writable`: a reader goes on where it can), with
    // the server's words as the cause (`chain` prints them once).
    let denied = if *code == SqlState::READ_ONLY_SQL_TRANSACTION {
        Some(
            "the database or circe's role is read-only (default_transaction_read_only, a standby): a change needs a server and role that may write",
        )
    } else if *code == SqlState::INSUFFICIENT_PRIVILEGE && msg.contains("pg_logical_emit_message") {
        // The flush a reader runs before it answers, as a change runs after its commit.
        Some(concat!(
            "let circe's role run the flush: `GRANT EXECUTE ON FUNCTION ",
            flush_function!(),
            " TO <role>` (PROTOCOLS.md section 18, \"Durable before seen\")"
        ))
    } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
        Some(
            "circe's role needs USAGE on the schema and SELECT, INSERT, UPDATE, DELETE on its tables; `circe init` needs a schema the role owns, or CREATE on the database (PROTOCOLS.md section 18, \"Roles\")",
        )
    } else {
        None
    };
    if let Some(hint) = denied {
        let mut e = Error::internal(what.to_string()).hint(hint);
        e.source = Some(Box::new(std::io::Error::new(std::io::ErrorKind::PermissionDenied, msg)));
        return e;
    }
    if *code == SqlState::LOCK_NOT_AVAILABLE || *code == SqlState::QUERY_CANCELED {
        return Error::conflict(format!("{what}: another command held it for {LOCK_WAIT}"))
            .hint("a holder may be stopped; try again later");
    }
    if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED {
        return Error::conflict(format!("{what}: another command changed it at the same time"))
            .hint("run the command again");
    }
    if *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
    {
        return Error::internal(format!("{what}: {msg}"))
            .hint("the server was stopped or is restarting: run the command again once it is up (a change whose outcome is unknown says so)")
            .transient();
    }
    if *code == SqlState::UNIQUE_VIOLATION {
        return Error::conflict(format!("{what}: {msg}"));
    }
    if *code == SqlState::UNDEFINED_TABLE
        || *code == SqlState::INVALID_SCHEMA_NAME
        || *code == SqlState::UNDEFINED_FUNCTION
    {
        return Error::usage(format!("{what}: the database holds no circe root there ({msg})"))
            .hint("`circe init --engine URL` makes one");
    }
    Error::internal(format!("{what}: {msg}"))
}

/// TEST BUILDS ONLY (CIRCE_TEST_BREAK=pg-pipeline-past-idle): requests go on after an
/// answer that ends "idle" in the same round trip: the flush after the `COMMIT`, the
/// read's flush check after the read.
pub(super) fn past_idle() -> bool {
    crate::fault::test_break("pg-pipeline-past-idle")
}

/// How a commit sent with its flush (`COMMIT_FLUSH`) ended, once the `COMMIT` succeeded.
enum Ended {
    Flushed,
    /// The server refused the flush: its reason.
    Refused(String),
    /// The flush did not answer (the connection broke).
    Unconfirmed(String),
}

impl Ended {
    fn after_commit(e: &tokio_postgres::Error) -> Ended {
        match e.as_db_error() {
            Some(db) => Ended::Refused(db.message().to_string()),
            None => Ended::Unconfirmed(e.to_string()),
        }
    }
}

/// Send `COMMIT_FLUSH` and read its answers: an error before the `COMMIT`'s answer is the
/// commit's (nothing was committed, or the connection broke: unknown), one after it the
/// flush's.
async fn commit_and_flush(c: &Client) -> std::result::Result<Ended, tokio_postgres::Error> {
    use futures_util::StreamExt;
    let answers = c.simple_query_raw(COMMIT_FLUSH).await?;
    futures_util::pin_mut!(answers);
    let mut done = 0;
    while let Some(answer) = answers.next().await {
        match answer {
            Ok(tokio_postgres::SimpleQueryMessage::CommandComplete(_)) => done += 1,
            Ok(_) => {}
            Err(e) if done > 0 => return Ok(Ended::after_commit(&e)),
            Err(e) => return Err(e),
        }
    }
    Ok(if done >= 2 {
        Ended::Flushed
    } else {
        Ended::Unconfirmed("the server's answer ended early".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_settings_are_the_same_as_options_and_as_statements() {
        assert_eq!(
            session_options(),
            "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 \
             -c tcp_user_timeout=10000 -c default_transaction_isolation=read\\ committed"
        );
        assert_eq!(
            session_sql(),
            "SET tcp_keepalives_idle = '5'; SET tcp_keepalives_interval = '2'; \
             SET tcp_keepalives_count = '3'; SET tcp_user_timeout = '10000'; \
             SET default_transaction_isolation = 'read committed'"
        );
    }
}
