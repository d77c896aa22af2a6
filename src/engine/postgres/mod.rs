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
mod journal;
mod listen;
mod locks;
mod many;
mod prefetch;
mod prepared;
mod rows;
mod schema;
mod seam;
mod seq;
mod target;
mod tombstones;
mod tx;
mod tx_state;

use std::cell::RefCell;
use tokio_postgres::types::Type;

pub use import::{Destination, connect_for_import, import};
pub use schema::{Clock, VERSION as SCHEMA_VERSION};
pub use target::{Target, is_url};

use self::conn::Conn;
use self::prefetch::Prefetched;
use super::Engine;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::names::AgentName;

/// A retired agent and when it retired.
type Retired = (AgentName, String);

/// A root in a database schema.
pub struct PgEngine {
    conn: Conn,
    target: Target,
    clock: Clock,
    /// Every agent, read with the configuration when the root is opened (one round trip
    /// for both); `add_agent` keeps it current, and a snapshot reads it again.
    agents: RefCell<Vec<(AgentName, String)>>,
    /// A task transaction is open on the connection (one at a time: they would share it).
    open_tx: std::cell::Cell<bool>,
    /// A transaction block is open on the connection (a task's, between its `BEGIN` and
    /// the `COMMIT` or `ROLLBACK` that ends it): a statement that may fail there runs
    /// under a savepoint.
    in_block: std::cell::Cell<bool>,
    /// A snapshot's transaction is open: the events it reads are made durable once it
    /// ends (`feed.rs`).
    in_snapshot: std::cell::Cell<bool>,
    /// The retired agents read with the opening, for the first question right after.
    retired_at_open: std::cell::Cell<Option<Prefetched<Vec<Retired>>>>,
    /// The ticket a claim moved, returned by its commit, for the read right after.
    ticket_read: std::cell::Cell<Option<Prefetched<prefetch::MovedMessage>>>,
    /// How much of a message a read brings (`limits.message_bytes`, read at the opening):
    /// what a claim's commit brings of the message it moved.
    message_cap: usize,
    /// A task change was committed on this connection: the server has `commit_task`
    /// compiled and planned for it, so later changes call it (`tx.rs`).
    warm: std::cell::Cell<bool>,
    /// The LISTEN connection of `wait_events`, made on first use.
    listener: RefCell<Option<listen::Listener>>,
    /// The numbered send held on this connection (`seq.rs`), until its delivery.
    seq_active: RefCell<Option<seq::Active>>,
    /// The connection session locks are taken on when a pooler is in front (`locks.rs`).
    locks: std::cell::OnceCell<Conn>,
    /// The journal of a send's (or a move's) events on this connection (`journal.rs`).
    journal: RefCell<Option<journal::Pending>>,
    /// The statements prepared on this connection (`prepared.rs`).
    prepared: prepared::Prepared,
    /// The root holds tombstones (read at the opening): opening a task asks them.
    tombstones: bool,
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
/// the clock leases are decided by. Returns the engine, the root's configuration, and the
/// schema version found (0: the root was created).
pub fn init(
    target: &Target,
    config: &str,
    clock: Clock,
    given: bool,
) -> Result<(PgEngine, Config, u32)> {
    let conn = Conn::connect(target)?;
    let found = schema::init(&conn, &target.schema, config, clock, given)?;
    drop(conn);
    let (eng, config) = PgEngine::open(target)?;
    Ok((eng, config, found))
}

/// What tells the root at `target` from every other however it is reached (through a
/// pooler, another port or host name): the server's system identifier and the moment it
/// started (a copy of the server, a standby or a restored backup, has the identifier but
/// not the start), the database and the schema.
pub fn root_identity(target: &Target) -> Result<String> {
    let conn = Conn::connect(target)?;
    let q = "SELECT system_identifier::text, \
                    extract(epoch FROM pg_postmaster_start_time())::text, \
                    current_database()::text \
             FROM pg_control_system()";
    let rows = conn.call("identifying the root", conn.client.query_typed(q, &[]))?;
    let row = rows.first().ok_or_else(|| Error::internal("pg_control_system() gave no row"))?;
    let (system, started, db): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    Ok(format!("{system}/{started}/{db}?schema={}", target.schema))
}

/// The `msg_id` header of a message, if it has one (stored beside the message).
pub(super) fn msg_id_of(content: &[u8]) -> Option<String> {
    crate::message::parse_bytes(content, crate::message::Mode::Draft).ok()?.msg_id
}

impl PgEngine {
    fn open(target: &Target) -> Result<(PgEngine, Config)> {
        let conn = Conn::connect(target)?;
        let opening = Opening::checked(&conn, target)?;
        let clock = opening.clock.as_deref().and_then(Clock::parse).unwrap_or(Clock::Server);
        let text = opening.config.ok_or_else(|| no_config(target))?;
        let config = Config::parse(&text).map_err(|e| stored_config_error(target, e))?;
        if config.engine.is_some() {
            return Err(Error::refused("the configuration stored in the database names an engine")
                .hint("`circe config --set FILE` with a circe.yaml without `engine:`"));
        }
        let (agents, retired) = (opening.agents, opening.retired);
        let retired = Some(Prefetched::new(retired));
        let eng = PgEngine {
            conn,
            target: target.clone(),
            clock,
            agents: RefCell::new(agents),
            open_tx: std::cell::Cell::new(false),
            in_block: std::cell::Cell::new(false),
            in_snapshot: std::cell::Cell::new(false),
            retired_at_open: std::cell::Cell::new(retired),
            ticket_read: std::cell::Cell::new(None),
            message_cap: config.limits.message_bytes,
            warm: std::cell::Cell::new(false),
            listener: RefCell::new(None),
            seq_active: RefCell::new(None),
            locks: std::cell::OnceCell::new(),
            journal: RefCell::new(None),
            prepared: prepared::Prepared::new(!target.server_apart),
            tombstones: opening.tombstones,
        };
        Ok((eng, config))
    }

    /// `text` with this root's schema in place of `{s}`.
    fn sql(&self, text: &str) -> String {
        schema::sql(&self.target.schema, text)
    }

    /// End an open transaction (errors ignored: a broken connection has none left).
    fn rollback(&self) {
        self.in_block.set(false);
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

    /// Read every agent again (for a snapshot: `mirror --watch` shows agents added while it
    /// runs; for a follower that read an `agent_add`) (a name that is no agent name is
    /// passed over, as the opening passes it over).
    pub(super) fn read_agents(&self) -> Result<()> {
        let rows = self.rows(
            "reading the agents",
            "SELECT name, role FROM {s}.agents ORDER BY name",
            &[],
            |r| Ok(AgentName::new(r.get::<_, String>(0)).ok().map(|n| (n, r.get(1)))),
        )?;
        *self.agents.borrow_mut() = rows.into_iter().flatten().collect();
        Ok(())
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

/// A missing schema is "no root here": the team's root is named first (the schemas of this
/// database that hold one), a new one last, its URL quoted for a shell.
fn no_root(target: &Target, roots: &[String], e: Error) -> Error {
    if e.kind != crate::error::Kind::Usage {
        return e;
    }
    let near = crate::suggest::closest(&target.schema, roots.iter().map(String::as_str))
        .map(|s| format!("did you mean schema `{s}`? "))
        .unwrap_or_default();
    let held = match roots.len() {
        0 => "no schema of this database holds one".to_string(),
        n @ 1..=8 => format!("{n} schema(s) here hold one: {}", roots.join(", ")),
        n => format!("{n} schemas here hold one: {}, ...", roots[..8].join(", ")),
    };
    Error::usage(format!("no circe root in schema {} of {}", target.schema, target.url)).hint(
        format!(
            "{near}pass the team's root with --root or CIRCE_ROOT ({held}); `circe init --engine '{}'` makes a new, empty one",
            target.url_to_pass()
        ),
    )
}

/// What the opening reads, in one statement: the schema's version, the clock, where the
/// root moved (if it did), the configuration, every agent and which of them retired. One
/// plain scan of each table: on a fresh server process (every CLI run) this cost 0.3 to
/// 0.5 ms less than a subquery per value plus a second query for the retirements.
struct Opening {
    /// `meta.schema_version` as stored (`None`: no such row).
    version: Option<String>,
    clock: Option<String>,
    moved_to: Option<String>,
    /// `meta.tombstones`: the root holds tombstones (a folder that archived moved here).
    tombstones: bool,
    /// `config.text` (`None`: the table has no row, deleted by hand).
    config: Option<String>,
    agents: Vec<(AgentName, String)>,
    retired: Vec<Retired>,
}

/// The error of a stored configuration that does not parse: it names the database's copy
/// (no circe.yaml file holds it), and the way out, which needs no opening.
pub(crate) fn stored_config_error(target: &Target, e: Error) -> Error {
    let schema = &target.schema;
    let url = target.url_to_pass();
    e.map_message(|m| {
        let rest = m.strip_prefix("circe.yaml: ").unwrap_or(m);
        format!("the configuration stored in schema {schema} (its `config` table): {rest}")
    })
    .hint_more(format!(
        "`circe --root '{url}' config` prints it as stored; mend that and replace it whole: `circe --root '{url}' config --set FILE`"
    ))
}

/// The refusal of a root whose `config` table has no row (deleted by hand): no
/// configuration, which is as broken as one that does not parse, and put back the same way.
fn no_config(target: &Target) -> Error {
    let schema = &target.schema;
    let url = target.url_to_pass();
    Error::refused(format!(
        "the root in schema {schema} has no configuration: its `config` table has no row"
    ))
    .hint(format!(
        "store one: `circe --root '{url}' config --set FILE` (a circe.yaml such as the one `circe init` writes in an empty folder)"
    ))
}

/// The configuration as stored in the root at `target`, read without parsing it (`circe
/// config` prints a broken one, for mending). A root made by a newer circe, or moved to a
/// folder, is refused as the opening refuses it, and so is one with no configuration.
pub fn stored_config(target: &Target) -> Result<String> {
    let conn = Conn::connect(target)?;
    Opening::checked(&conn, target)?.config.ok_or_else(|| no_config(target))
}

/// Replace the root's stored configuration with `text` when the stored one keeps the root
/// from opening (`broken` says so of it): `config --set`'s way out, for a root that has no
/// file to mend. Returns whether it was replaced (`false`: the stored one is not broken, so
/// the root's own error stands). A root with no configuration (its row deleted by hand)
/// gets `text` as its row. The write is conditioned on what was read (the text, or no row):
/// a configuration set meanwhile by another host is not overwritten.
pub fn replace_broken_config(
    target: &Target,
    text: &str,
    broken: impl Fn(&str) -> bool,
) -> Result<bool> {
    let conn = Conn::connect(target)?;
    let n = match Opening::checked(&conn, target)?.config {
        Some(stored) if !broken(&stored) => return Ok(false),
        Some(stored) => {
            let q = "UPDATE {s}.config SET text = $1 WHERE text = $2";
            conn.call(
                "writing the configuration",
                conn.client.execute_typed(
                    &schema::sql(&target.schema, q),
                    &[(&text, Type::TEXT), (&stored, Type::TEXT)],
                ),
            )?
        }
        None => {
            let q = "INSERT INTO {s}.config VALUES (1, $1) ON CONFLICT DO NOTHING";
            conn.call(
                "writing the configuration",
                conn.client.execute_typed(&schema::sql(&target.schema, q), &[(&text, Type::TEXT)]),
            )?
        }
    };
    if n == 0 {
        return Err(Error::conflict(
            "the configuration stored in the database changed while it was being replaced",
        )
        .hint("run `circe config --set FILE` again"));
    }
    Ok(true)
}

/// The refusal of a root that `migrate --to-local` moved to `to` (exit 3).
fn moved_away(target: &Target, to: &str) -> Error {
    Error::refused(format!("the root {} was moved to {to}", target.location()))
        .detail("moved", true)
        .hint(format!("use the root at {to}"))
}

impl Opening {
    const QUERY: &str = "SELECT 0, key, value, NULL FROM {s}.meta
        UNION ALL SELECT 1, NULL, text, NULL FROM {s}.config
        UNION ALL SELECT 2, name, role, retired_at FROM {s}.agents";

    /// `read`, refusing a root of another schema version and one that moved away.
    fn checked(conn: &Conn, target: &Target) -> Result<Opening> {
        let opening = Opening::read(conn, target)?;
        let version = schema::version_of(opening.version.as_deref(), &target.schema)?;
        schema::check(version, &target.schema, Some(&target.url_to_pass()))?;
        if let Some(to) = &opening.moved_to {
            return Err(moved_away(target, to));
        }
        Ok(opening)
    }

    fn read(conn: &Conn, target: &Target) -> Result<Opening> {
        let mut q = schema::sql(&target.schema, Opening::QUERY);
        if schema::target() < 3 {
            // A circe before retirement (test builds only, emulating one): no such column.
            q = q.replace("retired_at FROM", "NULL FROM");
        }
        let rows = match conn.run(conn.client.query_typed(&q, &[])) {
            Ok(rows) => rows,
            // The server refused it: a root too old to have every column (say so), or none.
            Err(f @ conn::Failure::Db(_)) => {
                return Err(Opening::why_not(conn, target, conn.error("opening the root", f)));
            }
            // A read that changes nothing: whatever broke, nothing was changed.
            Err(f) => return Err(conn::before_commit(conn.error("opening the root", f))),
        };
        let mut o = Opening {
            version: None,
            clock: None,
            moved_to: None,
            tombstones: false,
            config: None,
            agents: Vec::new(),
            retired: Vec::new(),
        };
        for r in &rows {
            let (kind, key, value): (i32, Option<String>, Option<String>) =
                (r.get(0), r.get(1), r.get(2));
            let value = value.unwrap_or_default();
            match (kind, key.as_deref()) {
                (0, Some("schema_version")) => o.version = Some(value),
                (0, Some("clock")) => o.clock = Some(value),
                (0, Some("moved_to")) => o.moved_to = Some(value),
                (0, Some("tombstones")) => o.tombstones = value != "0",
                (1, _) => o.config = Some(value),
                (2, Some(name)) => {
                    let Ok(name) = AgentName::new(name) else { continue };
                    if let Some(at) = r.get::<_, Option<String>>(3) {
                        o.retired.push((name.clone(), at));
                    }
                    o.agents.push((name, value));
                }
                _ => {}
            }
        }
        o.agents.sort();
        o.retired.sort();
        Ok(o)
    }

    /// The error for an opening that failed: the schema's version when it can be read (a
    /// root made by an older circe lacks columns the opening reads), else no root.
    fn why_not(conn: &Conn, target: &Target, e: Error) -> Error {
        let q =
            schema::sql(&target.schema, "SELECT value FROM {s}.meta WHERE key = 'schema_version'");
        let read = conn.call("opening the root", conn.client.query_typed(&q, &[]));
        let version = read.ok().and_then(|rows| rows.first().map(|r| r.get::<_, String>(0)));
        if let Some(v) = version.and_then(|v| v.parse::<u32>().ok()) {
            return schema::check(v, &target.schema, Some(&target.url_to_pass()))
                .err()
                .unwrap_or(e);
        }
        // The schemas of this database that hold a root: a typo is then plain.
        let q = "SELECT table_schema FROM information_schema.tables \
                 WHERE table_name = 'meta' ORDER BY 1";
        let roots: Vec<String> = conn
            .call("listing the roots", conn.client.query_typed(q, &[]))
            .map(|rows| rows.iter().map(|r| r.get::<_, String>(0)).collect())
            .unwrap_or_default();
        // Not the roots that moved to a folder: each would be refused too.
        let here = |s: &String| {
            let q = schema::sql(s, "SELECT 1 FROM {s}.meta WHERE key = 'moved_to'");
            conn.call("listing the roots", conn.client.query_typed(&q, &[]))
                .is_ok_and(|rows| rows.is_empty())
        };
        let roots: Vec<String> = roots.into_iter().filter(here).collect();
        no_root(target, &roots, e)
    }
}
