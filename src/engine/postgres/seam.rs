//! `Engine` for the database engine: each method one statement (or the task transaction
//! of `tx.rs`), on the engine's one connection.

use std::collections::HashSet;
use std::time::Duration;

use tokio_postgres::types::Type;

use super::rows::TaskRow;
use super::schema::Clock;
use super::{PgEngine, doctor, listen, tx};
use crate::boxes::Mailbox;
use crate::engine::{Capped, CursorHold, Engine, EventFeed, Parcel, SeqHold, TaskTx, Violation};
use crate::error::{Error, Result};
use crate::event::{self, Cursor, Event, Line};
use crate::names::{AgentName, CursorName, MsgId, TaskId};
use crate::seq::{Counter, Receiver};
use crate::task::{Eligibility, Row, TaskState};
use crate::tx::AskRecord;

/// Woken by LISTEN/NOTIFY (through `wait_events`), or on a timer with `--poll`.
struct PgFeed<'a> {
    eng: &'a PgEngine,
    seen: u64,
    poll: Option<Duration>,
}

impl EventFeed for PgFeed<'_> {
    fn wait(&mut self, timeout: Option<Duration>) -> Result<bool> {
        // `None`: no limit; the listener is asked in slices of an hour.
        let limit = timeout.unwrap_or(Duration::from_secs(3600));
        if let Some(every) = self.poll {
            std::thread::sleep(every.min(limit));
            let last = self.eng.last_event_id()?;
            let woke = last > self.seen;
            self.seen = last;
            return Ok(woke || every <= limit);
        }
        let last = self.eng.wait_events(self.seen, limit)?;
        let woke = last > self.seen;
        self.seen = last;
        Ok(woke)
    }
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
        self.deliver_one(content, name, to)
    }

    fn deliver_batch(&self, parcels: &[Parcel]) -> Result<Vec<Vec<String>>> {
        self.deliver_all(parcels)
    }

    fn ask(&self, id: &MsgId) -> Result<Option<AskRecord>> {
        self.read_ask(id)
    }

    fn asks(&self) -> Result<Vec<AskRecord>> {
        self.list_asks()
    }

    fn put_ask(&self, rec: &AskRecord, seen: Option<u64>) -> Result<AskRecord> {
        self.write_ask(rec, seen)
    }

    fn hold_ask(&self, id: &MsgId, wait: bool) -> Result<Option<crate::engine::Held<'_>>> {
        self.lock_ask(id, wait)
    }

    fn set_prompt(&self, agent: &AgentName, message: &[u8]) -> Result<()> {
        self.write_prompt(agent, message)
    }

    fn prompt(&self, agent: &AgentName) -> Result<Option<Vec<u8>>> {
        self.read_prompt(agent)
    }

    fn retire_agent(&self, agent: &AgentName, at: &str) -> Result<bool> {
        self.mark_retired(agent, at)
    }

    fn retirements(&self) -> Result<Vec<(AgentName, String)>> {
        self.list_retired()
    }

    fn seq_hold(&self, sender: &AgentName) -> Result<Box<dyn SeqHold + '_>> {
        self.hold(sender)
    }

    fn seq_update(
        &self,
        sender: &AgentName,
        change: &mut dyn FnMut(&mut Counter) -> Result<()>,
    ) -> Result<Counter> {
        self.update(sender, change)
    }

    fn seq_counters(&self) -> Result<Vec<(AgentName, Counter)>> {
        self.counters()
    }

    fn seq_seen(&self, agent: &AgentName) -> Result<Receiver> {
        self.seen(agent)
    }

    fn seq_see(
        &self,
        agent: &AgentName,
        change: &mut dyn FnMut(&mut Receiver) -> Result<()>,
    ) -> Result<(Receiver, Receiver)> {
        self.see(agent, change)
    }

    fn seq_receivers(&self) -> Result<Vec<(AgentName, Receiver)>> {
        self.receivers()
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

    fn file_message(&self, from: &Mailbox, to: &Mailbox, file: &str) -> Result<Option<String>> {
        let (f, t) = (from.label(), to.label());
        for n in 1..=1000 {
            let used = crate::message::numbered(file, n);
            match self.exec(
                &format!("filing {file}"),
                "UPDATE {s}.messages SET box = $2, file = $4 WHERE box = $1 AND file = $3",
                &[(&f, Type::TEXT), (&t, Type::TEXT), (&file, Type::TEXT), (&used, Type::TEXT)],
            ) {
                Ok(1) => return Ok(Some(used)),
                Ok(_) => return Ok(None),
                Err(e) if e.kind == crate::error::Kind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict(format!("{to} holds 1000 copies named like {file}")))
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
        self.events_where("WHERE id > $1 ORDER BY id LIMIT $2", after, max)
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

    fn read_events_back(&self, before: Option<u64>, max: usize) -> Result<Vec<Event>> {
        let before = before.map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX));
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        self.events_where("WHERE id < $1 ORDER BY id DESC LIMIT $2", before, max)
    }

    fn subscribe(&self, poll: Option<Duration>) -> Result<Box<dyn EventFeed + '_>> {
        let seen = self.last_event_id()?;
        Ok(Box::new(PgFeed { eng: self, seen, poll }))
    }

    fn rotate_events(&self) -> Result<Option<String>> {
        // One table: nothing to rotate.
        Ok(None)
    }

    fn read_message_capped(&self, mailbox: &Mailbox, file: &str, cap: usize) -> Result<Capped> {
        let b = mailbox.label();
        let take = i32::try_from(cap.saturating_add(1)).unwrap_or(i32::MAX);
        let mut rows = self.rows(
            &format!("reading {file}"),
            "SELECT substring(body FROM 1 FOR $3), octet_length(body) FROM {s}.messages WHERE box = $1 AND file = $2",
            &[(&b, Type::TEXT), (&file, Type::TEXT), (&take, Type::INT4)],
            |r| Ok((r.get::<_, Vec<u8>>(0), r.get::<_, i32>(1))),
        )?;
        let (bytes, size) = rows
            .pop()
            .ok_or_else(|| Error::not_found(format!("no message {file} in {mailbox}")))?;
        Ok(Capped { bytes, size: u64::try_from(size).ok() })
    }

    fn local_folder(&self) -> Option<std::path::PathBuf> {
        None
    }

    fn hold_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<CursorHold>> {
        // A session advisory lock: held for as long as this process's connection lives.
        let key = format!("{kind}/{name}");
        let got = self.rows(
            &format!("holding cursor {name}"),
            "SELECT pg_try_advisory_lock(hashtext('{s}'), hashtext($1))",
            &[(&key, Type::TEXT)],
            |r| Ok(r.get::<_, bool>(0)),
        )?;
        Ok(got.first().copied().unwrap_or(false).then(|| Box::new(()) as CursorHold))
    }

    fn read_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<Vec<u8>>> {
        let n = name.as_str();
        let mut v = self.rows(
            &format!("reading cursor {name}"),
            "SELECT value FROM {s}.cursors WHERE kind = $1 AND name = $2",
            &[(&kind, Type::TEXT), (&n, Type::TEXT)],
            |r| Ok(r.get::<_, Vec<u8>>(0)),
        )?;
        Ok(v.pop())
    }

    fn write_cursor(&self, kind: &str, name: &CursorName, value: &[u8]) -> Result<()> {
        let n = name.as_str();
        self.exec(
            &format!("saving cursor {name}"),
            "INSERT INTO {s}.cursors (kind, name, value) VALUES ($1, $2, $3) ON CONFLICT (kind, name) DO UPDATE SET value = EXCLUDED.value",
            &[(&kind, Type::TEXT), (&n, Type::TEXT), (&value, Type::BYTEA)],
        )?;
        Ok(())
    }

    fn cursors(&self) -> Result<Vec<(String, CursorName)>> {
        self.rows(
            "listing cursors",
            "SELECT kind, name FROM {s}.cursors ORDER BY kind, name",
            &[],
            |r| Ok((r.get::<_, String>(0), CursorName::new(r.get::<_, String>(1))?)),
        )
    }

    fn dead_letter(&self, consumer: &CursorName, event: &Event) -> Result<()> {
        let (c, line) = (consumer.as_str(), event.to_line());
        self.exec(
            "setting an event aside",
            "INSERT INTO {s}.dead_letters (consumer, line) VALUES ($1, $2)",
            &[(&c, Type::TEXT), (&line, Type::TEXT)],
        )?;
        Ok(())
    }

    fn dead_letters(&self, consumer: &CursorName) -> Result<Vec<Event>> {
        let c = consumer.as_str();
        let lines = self.rows(
            "reading dead letters",
            "SELECT line FROM {s}.dead_letters WHERE consumer = $1 ORDER BY n",
            &[(&c, Type::TEXT)],
            |r| Ok(r.get::<_, String>(0)),
        )?;
        Ok(lines
            .iter()
            .filter_map(|l| match event::parse_line(l) {
                Ok(Line::Event(e)) => Some(*e),
                _ => None,
            })
            .collect())
    }

    fn message_path(&self, _mailbox: &Mailbox, _file: &str) -> Option<std::path::PathBuf> {
        None
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
        // Held tasks whose lease ran out, and unfinished tasks past their deadline.
        let q =
            "SELECT task_id FROM {s}.tasks WHERE lease_until <= coalesce($1::timestamptz, now())
                 UNION
                 SELECT task_id FROM {s}.tasks
                  WHERE deadline_at <= coalesce($1::timestamptz, now())
                    AND deadline_at IS NOT NULL AND status NOT IN ('completed', 'failed', 'expired')
                 ORDER BY task_id";
        let now = match self.clock {
            Clock::Server => None,
            Clock::Client => Some(crate::clock::stamp(crate::clock::now())),
        };
        let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 1] = [(&now, Type::TEXT)];
        self.rows("finding expired leases", q, &params, |r| TaskId::new(r.get::<_, String>(0)))
    }

    fn doctor(&self, _repair: bool) -> Result<Vec<Violation>> {
        doctor::run(self)
    }
}

impl PgEngine {
    /// The events of the log selected by `tail` (a `WHERE id … ORDER BY … LIMIT $2` over
    /// `id` bound to `$1`), in the order it names.
    fn events_where(&self, tail: &str, id: i64, max: i64) -> Result<Vec<Event>> {
        let rows = self.rows(
            "reading events",
            &format!("SELECT id, line FROM {{s}}.events {tail}"),
            &[(&id, Type::INT8), (&max, Type::INT8)],
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
}
