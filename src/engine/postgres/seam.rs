//! `Engine` for the database engine: each method one statement (or the task transaction
//! of `tx.rs`), on the engine's one connection.

use std::collections::HashSet;

use tokio_postgres::types::Type;

use super::rows::TaskRow;
use super::schema::Clock;
use super::{PgEngine, doctor, listen, msg_id_of, tx};
use crate::boxes::Mailbox;
use crate::engine::{Engine, TaskTx, Violation};
use crate::error::{Error, Result};
use crate::event::{self, Cursor, Event, Line};
use crate::names::{AgentName, TaskId};
use crate::task::{Eligibility, Row, TaskState};

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

    fn snapshot(&self) -> Result<crate::engine::Snapshot> {
        self.no_open_tx()?;
        let c = &self.conn.client;
        self.conn.call(
            "starting a snapshot",
            c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
        )?;
        let snap = crate::engine::Snapshot::read(self);
        let end = self.conn.call("ending the snapshot", c.batch_execute("COMMIT"));
        let snap = snap?;
        end?;
        Ok(snap)
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
