//! The PostgreSQL engine: a root kept in one schema of a database, so agents on several
//! hosts share it. The only module that speaks to a database (PROTOCOLS.md section 18).
//!
//! Every operation is one or two round trips: a task transaction is `BEGIN` + the row
//! `FOR UPDATE` (pipelined), then the commit + `COMMIT` (pipelined): one statement (or
//! the schema's `commit_task` function, when a ticket is delivered) moves or delivers the
//! ticket, writes the record and appends the events with ids from a one-row counter
//! updated in the same transaction, so the feed is ordered by commit and a follower never
//! skips an id.
//! Leases are decided by the server's clock (`meta.clock = server`), or by each client's
//! (`client`, for tests: `CIRCE_NOW` works).

mod chat;
mod conn;
mod cursors;
mod deliver;
mod doctor;
mod feed;
mod import;
mod listen;
mod rows;
mod schema;
mod seam;
mod seq;
mod target;
mod tx;
mod tx_state;

use std::cell::RefCell;
use tokio_postgres::types::Type;

pub use import::import;
pub use schema::{Clock, VERSION as SCHEMA_VERSION};
pub use target::{Target, is_url};

use self::conn::Conn;
use super::Engine;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::names::AgentName;

/// A root in a database schema.
pub struct PgEngine {
    conn: Conn,
    target: Target,
    clock: Clock,
    /// Every agent, read with the configuration when the root is opened (one round trip
    /// for both); `add_agent` keeps it current.
    agents: RefCell<Vec<(AgentName, String)>>,
    /// A task transaction is open on the connection (one at a time: they would share it).
    open_tx: std::cell::Cell<bool>,
    /// The retired agents read with the opening, for the first question right after.
    retired_at_open: std::cell::Cell<Option<tx_state::Prefetched>>,
    /// A task change was committed on this connection: the server has `commit_task`
    /// compiled and planned for it, so later changes call it (`tx.rs`).
    warm: std::cell::Cell<bool>,
    /// The LISTEN connection of `wait_events`, made on first use.
    listener: RefCell<Option<listen::Listener>>,
    /// The numbered send held on this connection (`seq.rs`), until its delivery.
    seq_active: RefCell<Option<seq::Active>>,
}

/// Open the root at `target`, with its configuration.
pub fn open(target: &Target) -> Result<(Box<dyn Engine>, Config)> {
    let (eng, config) = PgEngine::open(target)?;
    Ok((Box::new(eng), config))
}

/// Open the root at `target` as this engine (for what only it does: `export`).
pub fn connect(target: &Target) -> Result<(PgEngine, Config)> {
    PgEngine::open(target)
}

/// Make (or migrate) the root at `target`: its tables, `config` when the root is new, and
/// the clock leases are decided by. Returns the engine, the root's configuration, and
/// whether the root was created.
pub fn init(target: &Target, config: &str, clock: Clock) -> Result<(PgEngine, Config, bool)> {
    let conn = Conn::connect(target, &target.config)?;
    let created = schema::init(&conn, &target.schema, config, clock)?;
    drop(conn);
    let (eng, config) = PgEngine::open(target)?;
    Ok((eng, config, created))
}

/// The `msg_id` header of a message, if it has one (stored beside the message).
pub(super) fn msg_id_of(content: &[u8]) -> Option<String> {
    crate::message::parse_bytes(content, crate::message::Mode::Draft).ok()?.msg_id
}

impl PgEngine {
    fn open(target: &Target) -> Result<(PgEngine, Config)> {
        let conn = Conn::connect(target, &target.config)?;
        let q = schema::sql(
            &target.schema,
            "SELECT (SELECT value FROM {s}.meta WHERE key = 'schema_version'),
                    (SELECT value FROM {s}.meta WHERE key = 'clock'),
                    (SELECT value FROM {s}.meta WHERE key = 'moved_to'),
                    (SELECT text FROM {s}.config),
                    (SELECT coalesce(json_agg(json_build_array(name, role) ORDER BY name), '[]')::text
                       FROM {s}.agents)",
        );
        // The retired agents come in the same round trip (a command acting as an agent asks
        // first thing); a root too old to have them answers the opening query all the same.
        let retired_q = schema::sql(&target.schema, tx_state::RETIRED);
        let (row, retired) = conn
            .call("opening the root", async {
                let (row, retired) = futures_util::future::join(
                    conn.client.query_typed_one(&q, &[]),
                    conn.client.query_typed(&retired_q, &[]),
                )
                .await;
                row.map(|row| (row, retired.ok()))
            })
            .map_err(|e| no_root(target, e))?;
        let retired = retired
            .and_then(|rows| {
                rows.iter().map(tx_state::retired_row).collect::<Result<Vec<_>>>().ok()
            })
            .map(tx_state::Prefetched::new);
        let version: Option<String> = row.get(0);
        let version: u32 = version.and_then(|v| v.parse().ok()).unwrap_or(0);
        schema::check(version, &target.schema)?;
        if let Some(to) = row.get::<_, Option<String>>(2) {
            return Err(Error::refused(format!(
                "the root {} was moved to {to}",
                target.location()
            ))
            .hint(format!("use the root at {to}")));
        }
        let clock = row
            .get::<_, Option<String>>(1)
            .as_deref()
            .and_then(Clock::parse)
            .unwrap_or(Clock::Server);
        let text: String = row.get::<_, Option<String>>(3).unwrap_or_default();
        let config = Config::parse(&text)?;
        if config.engine.is_some() {
            return Err(Error::refused("the configuration stored in the database names an engine")
                .hint("`circe config --set FILE` with a circe.yaml without `engine:`"));
        }
        let agents_json: String = row.get(4);
        let pairs: Vec<(String, String)> = serde_json::from_str(&agents_json)
            .map_err(|e| Error::internal(format!("the agents table does not read: {e}")))?;
        let agents =
            pairs.into_iter().filter_map(|(a, r)| AgentName::new(a).ok().map(|a| (a, r))).collect();
        let eng = PgEngine {
            conn,
            target: target.clone(),
            clock,
            agents: RefCell::new(agents),
            open_tx: std::cell::Cell::new(false),
            retired_at_open: std::cell::Cell::new(retired),
            warm: std::cell::Cell::new(false),
            listener: RefCell::new(None),
            seq_active: RefCell::new(None),
        };
        Ok((eng, config))
    }

    /// `text` with this root's schema in place of `{s}`.
    fn sql(&self, text: &str) -> String {
        schema::sql(&self.target.schema, text)
    }

    /// End an open transaction (errors ignored: a broken connection has none left).
    fn rollback(&self) {
        let _ = self.conn.run(self.conn.client.batch_execute("ROLLBACK"));
    }

    /// Refuse a second task transaction while one is open on the connection.
    pub(super) fn no_open_tx(&self) -> Result<()> {
        if self.open_tx.get() {
            return Err(Error::internal("a second task transaction while one is open")
                .hint("this is a bug in circe: please report the command"));
        }
        Ok(())
    }

    /// The target this engine is connected to.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The clock leases are decided by.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    fn rows<T>(
        &self,
        what: &str,
        q: &str,
        params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
        f: impl Fn(&tokio_postgres::Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let q = self.sql(q);
        let rows = self.conn.call(what, self.conn.client.query_typed(&q, params))?;
        rows.iter().map(f).collect()
    }

    fn exec(
        &self,
        what: &str,
        q: &str,
        params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
    ) -> Result<u64> {
        let q = self.sql(q);
        self.conn.call(what, self.conn.client.execute_typed(&q, params))
    }
}

/// A missing schema is "no root here".
fn no_root(target: &Target, e: Error) -> Error {
    if e.kind == crate::error::Kind::Usage {
        return Error::usage(format!(
            "no circe root in schema {} of {}",
            target.schema, target.url
        ))
        .hint(format!("`circe init --engine {}` makes one", target.location()));
    }
    e
}
