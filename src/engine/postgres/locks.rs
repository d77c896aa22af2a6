//! Session advisory locks: a sender's sequence counter, an answer under way, a consumer's
//! cursor. Each is held by a server session from one statement to a later one, so it must
//! be taken and let go on a connection that is one server session throughout. A
//! connection through a pooler in transaction mode is not (each statement may run on
//! another server connection, where the lock would be held by nobody or by everybody), so
//! when the URL names the server apart (`listen_host`/`listen_port`), the locks are taken
//! on a connection of their own to it, made on first use; otherwise on the engine's own.
//! Either way a process that dies lets go with its connection.

use tokio_postgres::types::Type;

use super::PgEngine;
use super::conn::Conn;
use crate::error::{Error, Result};
use crate::fault::test_break;

impl PgEngine {
    /// The connection session locks live on.
    fn lock_conn(&self) -> Result<&Conn> {
        // TEST BUILDS ONLY: locks through the pooler, as a client unaware of it would.
        if !self.target.server_apart || test_break("pg-locks-pooled") {
            return Ok(&self.conn);
        }
        if self.locks.get().is_none() {
            let conn = Conn::connect_server(&self.target)?;
            let _ = self.locks.set(conn);
        }
        Ok(self.locks.get().expect("just made"))
    }

    /// Try the session lock `key` of this root once: true when this process now holds it.
    ///
    /// On the engine's own connection (the URL names no server apart) the lock is taken only
    /// when the server's port is the URL's: a URL that reaches the server through a pooler
    /// in transaction mode would leave the lock on a pooled server session, held by nobody
    /// and stopping every later taker until the pooler restarts. The same statement asks,
    /// so it costs no round trip.
    pub(super) fn try_session_lock(&self, what: &str, key: &str) -> Result<bool> {
        let conn = self.lock_conn()?;
        if self.target.server_apart || test_break("pg-locks-pooled") {
            let q = self.sql("SELECT pg_try_advisory_lock(hashtext('{s}'), hashtext($1))");
            let rows = conn.call(what, conn.client.query_typed(&q, &[(&key, Type::TEXT)]))?;
            return Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)));
        }
        let ports = self.target.ports();
        let q = self.sql(
            "SELECT CASE WHEN current_setting('port') = ANY($2)
                    THEN pg_try_advisory_lock(hashtext('{s}'), hashtext($1)) END,
                    current_setting('port')",
        );
        let row = conn.call(
            what,
            conn.client.query_typed_one(&q, &[(&key, Type::TEXT), (&ports, Type::TEXT_ARRAY)]),
        )?;
        match row.get::<_, Option<bool>>(0) {
            Some(held) => Ok(held),
            None => Err(pooled(&self.target.location(), &ports, &row.get::<_, String>(1))),
        }
    }

    /// `late`, the error of a session lock `key` held too long, with who holds it: the
    /// server session (its pid, client, state and statement), which may have outlived its
    /// circe process (a commit waiting on the server, a lock left through a pooler).
    pub(super) fn held_too_long(&self, key: &str, late: Error) -> Error {
        let Ok(conn) = self.lock_conn() else { return late };
        // A two-key advisory lock is (classid, objid) = the keys as unsigned, objsubid 2.
        let q = self.sql(
            "SELECT a.pid, coalesce(a.application_name, ''), coalesce(a.state, ''),
                    left(coalesce(a.query, ''), 60)
               FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND l.classid = (hashtext('{s}')::int8 & 4294967295)::oid
                AND l.objid = (hashtext($1)::int8 & 4294967295)::oid",
        );
        let Ok(rows) = conn.run(conn.client.query_typed(&q, &[(&key, Type::TEXT)])) else {
            return late;
        };
        let Some(r) = rows.first() else { return late };
        let (pid, app, state, query): (i32, String, String, String) =
            (r.get(0), r.get(1), r.get(2), r.get(3));
        let query = crate::error::one_line(&query).into_owned();
        late.detail("holder_pid", pid).hint_more(format!(
            "the lock is held by server session {pid} (application `{app}`, {state}: `{query}`); when no circe process of that agent runs, that session outlived its client: `SELECT pg_terminate_backend({pid})` ends it"
        ))
    }

    /// Let go of the session lock `key`.
    pub(super) fn session_unlock(&self, what: &str, key: &str) -> Result<()> {
        let conn = self.lock_conn()?;
        let q = self.sql("SELECT pg_advisory_unlock(hashtext('{s}'), hashtext($1))");
        conn.call(what, conn.client.query_typed(&q, &[(&key, Type::TEXT)]))?;
        Ok(())
    }
}

/// The refusal of a session lock through a URL whose port is not the server's own.
fn pooled(location: &str, ports: &[String], server: &str) -> crate::error::Error {
    let port = ports.join(",");
    crate::error::Error::usage(format!(
        "{location}: its port {port} is not the server's own ({server}): a pooler in front? what circe holds from one statement to the next (a sender's sequence counter, an answer, a cursor) needs a server session of its own, which a pooler in transaction mode does not give; nothing was done"
    ))
    .hint(format!(
        "name the server in the URL: listen_port={server} (and listen_host= when it is another host; README, \"Running agents on several hosts\"); when port {port} reaches the server itself (a port mapping), add listen_port={port}"
    ))
}
