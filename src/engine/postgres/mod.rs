//! The PostgreSQL engine: a root kept in one schema of a database, so agents on several
//! hosts share it. The only module that speaks to a database (PROTOCOLS.md section 13).
//!
//! Every operation is one or two round trips: a task transaction is `BEGIN` + the row
//! `FOR UPDATE` (pipelined), then `commit_task(...)` + `COMMIT` (pipelined), where
//! `commit_task` (a function in the schema) moves or delivers the ticket, writes the
//! record and appends the events with ids from a one-row counter updated in the same
//! transaction, so the feed is ordered by commit and a follower never skips an id.
//! Leases are decided by the server's clock (`meta.clock = server`), or by each client's
//! (`client`, for tests: `CIRCE_NOW` works).

mod conn;
mod doctor;
mod import;
mod listen;
mod rows;
mod schema;
mod target;
mod tx;

use std::cell::RefCell;
use std::collections::HashSet;

use tokio_postgres::types::Type;

pub use import::import;
pub use schema::{Clock, VERSION as SCHEMA_VERSION};
pub use target::{Target, is_url};

use self::conn::Conn;
use self::rows::TaskRow;
use super::{Engine, TaskTx, Violation};
use crate::boxes::Mailbox;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::event::{self, Cursor, Event, Line};
use crate::names::{AgentName, TaskId};
use crate::task::{Eligibility, Row, TaskState};

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
    /// The LISTEN connection of `wait_events`, made on first use.
    listener: RefCell<Option<listen::Listener>>,
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
        let row = conn
            .call("opening the root", conn.client.query_typed_one(&q, &[]))
            .map_err(|e| no_root(target, e))?;
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
            listener: RefCell::new(None),
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
    fn no_open_tx(&self) -> Result<()> {
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

impl Engine for PgEngine {
    fn location(&self) -> String {
        self.target.location()
    }

    fn agents(&self) -> Result<Vec<(AgentName, String)>> {
        Ok(self.agents.borrow().clone())
    }

    fn agent_role(&self, name: &AgentName) -> Result<Option<String>> {
        Ok(self.agents.borrow().iter().find(|(a, _)| a == name).map(|(_, r)| r.clone()))
    }

    fn add_agent(&self, name: &AgentName, role: &str) -> Result<bool> {
        let n = name.as_str();
        let added = self.exec(
            &format!("adding agent {name}"),
            "INSERT INTO {s}.agents (name, role) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[(&n, Type::TEXT), (&role, Type::TEXT)],
        )? == 1;
        if added {
            let mut a = self.agents.borrow_mut();
            a.push((name.clone(), role.to_string()));
            a.sort();
        }
        Ok(added)
    }

    fn begin<'a>(&'a self, task: &TaskId, create: bool) -> Result<Option<Box<dyn TaskTx + 'a>>> {
        let tx = tx::PgTx::begin(self, task)?;
        if tx.state().is_none() && !create {
            return Ok(None);
        }
        Ok(Some(Box::new(tx)))
    }

    fn begin_next<'a>(
        &'a self,
        who: &Eligibility,
        skip: &HashSet<TaskId>,
    ) -> Result<Option<Box<dyn TaskTx + 'a>>> {
        let skip: Vec<String> = skip.iter().map(ToString::to_string).collect();
        Ok(tx::PgTx::begin_next(self, who, &skip)?.map(|t| Box::new(t) as Box<dyn TaskTx + 'a>))
    }

    fn task_ids(&self) -> Result<Vec<TaskId>> {
        self.rows("listing the tasks", "SELECT task_id FROM {s}.tasks ORDER BY task_id", &[], |r| {
            TaskId::new(r.get::<_, String>(0))
        })
    }

    fn board(&self, each: &mut dyn FnMut(Row<'_>) -> Result<()>) -> Result<()> {
        let rows = self.rows(
            "reading the board",
            "SELECT to_jsonb(t)::text FROM {s}.tasks t ORDER BY task_id",
            &[],
            |r| TaskRow::parse(&r.get::<_, String>(0)),
        )?;
        for r in &rows {
            each(r.board_row())?;
        }
        Ok(())
    }

    fn peek(&self, task: &TaskId) -> Result<Option<TaskState>> {
        let id = task.as_str();
        let mut rows = self.rows(
            &format!("reading task {task}"),
            "SELECT to_jsonb(t)::text FROM {s}.tasks t WHERE task_id = $1",
            &[(&id, Type::TEXT)],
            |r| TaskRow::parse(&r.get::<_, String>(0)),
        )?;
        Ok(rows.pop().map(TaskRow::state))
    }

    fn deliver(&self, content: &[u8], name: &str, to: &[Mailbox]) -> Result<Vec<String>> {
        let boxes: Vec<String> = to.iter().map(Mailbox::label).collect();
        let msg_id = msg_id_of(content);
        // One statement: every copy or none.
        self.rows(
            "delivering a message",
            "SELECT {s}.put_message(b, $2, $3, $4) FROM unnest($1::text[]) WITH ORDINALITY AS x(b, o) ORDER BY o",
            &[(&boxes, Type::TEXT_ARRAY), (&name, Type::TEXT), (&content, Type::BYTEA), (&msg_id, Type::TEXT)],
            |r| Ok(r.get::<_, String>(0)),
        )
    }

    fn move_message(&self, from: &Mailbox, to: &Mailbox, file: &str) -> Result<bool> {
        let (f, t) = (from.label(), to.label());
        match self.exec(
            &format!("moving {file}"),
            "UPDATE {s}.messages SET box = $2 WHERE box = $1 AND file = $3",
            &[(&f, Type::TEXT), (&t, Type::TEXT), (&file, Type::TEXT)],
        ) {
            Ok(n) => Ok(n == 1),
            Err(e) if e.kind == crate::error::Kind::Conflict => {
                Err(Error::conflict(format!("{to}/{file} exists already; not replacing it")))
            }
            Err(e) => Err(e),
        }
    }

    fn list_box(&self, mailbox: &Mailbox) -> Result<Vec<String>> {
        let b = mailbox.label();
        self.rows(
            &format!("listing {mailbox}"),
            "SELECT file FROM {s}.messages WHERE box = $1 ORDER BY file",
            &[(&b, Type::TEXT)],
            |r| Ok(r.get::<_, String>(0)),
        )
    }

    fn read_message(&self, mailbox: &Mailbox, file: &str) -> Result<Vec<u8>> {
        let b = mailbox.label();
        let mut rows = self.rows(
            &format!("reading {file}"),
            "SELECT body FROM {s}.messages WHERE box = $1 AND file = $2",
            &[(&b, Type::TEXT), (&file, Type::TEXT)],
            |r| Ok(r.get::<_, Vec<u8>>(0)),
        )?;
        rows.pop().ok_or_else(|| Error::not_found(format!("no message {file} in {mailbox}")))
    }

    fn append_events(&self, mut events: Vec<Event>) -> Result<Vec<Event>> {
        if events.is_empty() {
            return Ok(events);
        }
        let lines: Vec<String> = events.iter().map(Event::to_line).collect();
        let task: Option<String> =
            events.first().and_then(|e| e.task.as_ref()).map(ToString::to_string);
        let first = self.rows(
            "appending events",
            "SELECT {s}.append_events($1, $2, NULL)",
            &[(&task, Type::TEXT), (&lines, Type::TEXT_ARRAY)],
            |r| Ok(r.get::<_, i64>(0)),
        )?;
        let first = u64::try_from(first.first().copied().unwrap_or(0)).unwrap_or(0);
        for (i, e) in events.iter_mut().enumerate() {
            e.id = first + i as u64;
        }
        Ok(events)
    }

    fn read_events(&self, from: Cursor, max: usize) -> Result<Vec<Event>> {
        let after = i64::try_from(from.after).unwrap_or(i64::MAX);
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = self.rows(
            "reading events",
            "SELECT id, line FROM {s}.events WHERE id > $1 ORDER BY id LIMIT $2",
            &[(&after, Type::INT8), (&max, Type::INT8)],
            |r| Ok((r.get::<_, i64>(0), r.get::<_, String>(1))),
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, line) in rows {
            if let Line::Event(mut e) = event::parse_line(&line)? {
                e.id = u64::try_from(id).unwrap_or(0);
                out.push(*e);
            }
        }
        Ok(out)
    }

    fn last_event_id(&self) -> Result<u64> {
        let v = self.rows("reading the feed", "SELECT last FROM {s}.feed", &[], |r| {
            Ok(r.get::<_, i64>(0))
        })?;
        Ok(u64::try_from(v.first().copied().unwrap_or(0)).unwrap_or(0))
    }

    fn wait_events(&self, after: u64, timeout: std::time::Duration) -> Result<u64> {
        let until = std::time::Instant::now() + timeout;
        let mut listener = self.listener.borrow_mut();
        if listener.is_none() {
            *listener = Some(listen::Listener::start(&self.target)?);
        }
        let l = listener.as_mut().expect("just made");
        loop {
            // Read after listening: an event committed before the LISTEN is seen here.
            let last = self.last_event_id()?;
            let now = std::time::Instant::now();
            if last > after || now >= until {
                return Ok(last);
            }
            // A notification lost with a broken connection costs at most one second.
            l.wait((until - now).min(std::time::Duration::from_secs(1)));
        }
    }

    fn rotate_events(&self) -> Result<Option<String>> {
        // One table: nothing to rotate.
        Ok(None)
    }

    fn config_text(&self) -> Result<String> {
        let v =
            self.rows("reading the configuration", "SELECT text FROM {s}.config", &[], |r| {
                Ok(r.get::<_, String>(0))
            })?;
        v.into_iter().next().ok_or_else(|| Error::internal("the root has no configuration row"))
    }

    fn set_config(&self, text: &str) -> Result<()> {
        self.exec(
            "writing the configuration",
            "UPDATE {s}.config SET text = $1",
            &[(&text, Type::TEXT)],
        )?;
        Ok(())
    }

    fn find_msg_id(&self, msg_id: &str) -> Result<Vec<(Mailbox, String)>> {
        self.rows(
            "looking up a message id",
            "SELECT box, file FROM {s}.messages WHERE msg_id = $1 ORDER BY box, file",
            &[(&msg_id, Type::TEXT)],
            |r| {
                let label: String = r.get(0);
                let b = Mailbox::from_label(&label).ok_or_else(|| {
                    Error::internal(format!("a message lies in an unknown box `{label}`"))
                })?;
                Ok((b, r.get::<_, String>(1)))
            },
        )
    }

    fn granted(&self, agent: &AgentName, request: &str) -> Result<Option<(TaskId, u64)>> {
        let a = agent.as_str();
        let mut v = self.rows(
            "looking up a request id",
            "SELECT task, epoch FROM {s}.grants WHERE request = $1 AND agent = $2",
            &[(&request, Type::TEXT), (&a, Type::TEXT)],
            |r| {
                Ok((
                    TaskId::new(r.get::<_, String>(0))?,
                    u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
                ))
            },
        )?;
        Ok(v.pop())
    }

    fn lease_candidates(&self) -> Result<Vec<TaskId>> {
        // Grants are kept for retries of unknown outcomes: a week is plenty.
        self.exec(
            "forgetting old grants",
            "DELETE FROM {s}.grants WHERE at < now() - interval '7 days'",
            &[],
        )?;
        let q = match self.clock {
            Clock::Server => {
                "SELECT task_id FROM {s}.tasks WHERE lease_until <= now() ORDER BY task_id"
            }
            Clock::Client => {
                "SELECT task_id FROM {s}.tasks WHERE lease_until <= $1::text::timestamptz ORDER BY task_id"
            }
        };
        let now = crate::clock::stamp(crate::clock::now());
        let params: Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> = match self.clock {
            Clock::Server => Vec::new(),
            Clock::Client => vec![(&now, Type::TEXT)],
        };
        self.rows("finding expired leases", q, &params, |r| TaskId::new(r.get::<_, String>(0)))
    }

    fn doctor(&self, _repair: bool) -> Result<Vec<Violation>> {
        doctor::run(self)
    }
}
