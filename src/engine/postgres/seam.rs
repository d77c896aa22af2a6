//! `Engine` for the database engine: each method one statement (or the task transaction
//! of `tx.rs`), on the engine's one connection.

use std::collections::HashSet;
use std::time::Duration;

use tokio_postgres::types::Type;

use super::rows::TaskRow;
use super::schema::Clock;
use super::{PgEngine, doctor, journal, tx};
use crate::boxes::Mailbox;
use crate::engine::{Capped, CursorHold, Engine, EventFeed, Parcel, SeqHold, TaskTx, Violation};
use crate::error::{Error, Result};
use crate::event::{Cursor, Event};
use crate::names::{AgentName, CursorName, MsgId, TaskId};
use crate::seq::{Counter, Receiver};
use crate::task::{Eligibility, Row, TaskState};
use crate::tx::AskRecord;

impl Engine for PgEngine {
    fn location(&self) -> String {
        self.target.location()
    }

    fn identity(&self) -> String {
        self.target.identity()
    }

    fn root_to_pass(&self) -> String {
        self.target.url_to_pass()
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

    fn root_clock(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>> {
        if self.clock != Clock::Server || crate::fault::test_break("pg-client-clock") {
            return Ok(None);
        }
        let us = self.rows("reading the server's clock", "SELECT now()", &[], |r| {
            Ok(r.get::<_, super::rows::ServerTime>(0).0)
        })?;
        Ok(us.first().and_then(|&us| chrono::DateTime::from_timestamp_micros(us)))
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
        self.forget_read_ahead();
        self.deliver_one(content, name, to)
    }

    fn deliver_batch(&self, parcels: &[Parcel]) -> Result<Vec<Vec<String>>> {
        self.forget_read_ahead();
        self.deliver_all(parcels)
    }

    fn finish_deliveries(&self, held: Option<&str>) -> Result<usize> {
        Ok(self.settle_journals(journal::Which::Left(held))?.len())
    }

    fn journal_events(&self, msg_id: &str, events: &[Event]) -> Result<Option<String>> {
        Ok(self.keep_journal(msg_id, events))
    }

    fn journal_move(
        &self,
        msg_id: &str,
        _from: &Mailbox,
        _file: &str,
        event: &Event,
    ) -> Result<Option<String>> {
        // The move statement names the box it moves to and the name it gets.
        Ok(self.keep_journal(msg_id, std::slice::from_ref(event)))
    }

    fn close_journal(&self, journal: &str, logged: bool) -> Result<bool> {
        self.end_journal(journal, logged)
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

    fn hold_msg_id(&self, id: &str) -> Result<crate::engine::Held<'_>> {
        self.lock_msg_id(id)
    }

    fn hold_import(&self) -> Result<Option<crate::engine::Held<'_>>> {
        // A session lock, let go when the guard drops (or the connection ends).
        self.lock_key("import".into(), "holding the import", false, || {
            Error::conflict("another import into this root is running")
        })
    }

    fn hold_filing(&self) -> Result<crate::engine::Held<'_>> {
        let held =
            self.lock_key("filing".into(), "holding the filing of a question", true, || {
                Error::conflict("the filing of a question's copy has been under way for over 10s")
                    .hint(
                        "a circe process may be stopped while filing; resume or kill it and retry",
                    )
            })?;
        held.ok_or_else(|| Error::internal("a held filing came back empty"))
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

    /// Read in the claim's commit statement instead (`PgTx::commit`): no round trip here.
    fn retired_now(&self, _agent: &AgentName) -> Result<Option<bool>> {
        Ok(None)
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
        self.forget_read_ahead();
        let (f, t) = (from.label(), to.label());
        match self.update_journaled(
            &format!("moving {file}"),
            "UPDATE {s}.messages SET box = $2 WHERE box = $1 AND file = $3",
            &[(&f, Type::TEXT), (&t, Type::TEXT), (&file, Type::TEXT)],
            ["ARRAY[$2::text]", "ARRAY[$3::text]", "ARRAY[$3::text]"],
        ) {
            Ok(n) => Ok(n == 1),
            Err(e) if e.kind == crate::error::Kind::Conflict => {
                Err(Error::conflict(format!("{to}/{file} exists already; not replacing it"))
                    .hint(format!("nothing moved: `circe show {file}` shows both")))
            }
            Err(e) => Err(e),
        }
    }

    fn file_message(&self, from: &Mailbox, to: &Mailbox, file: &str) -> Result<Option<String>> {
        self.forget_read_ahead();
        let (f, t) = (from.label(), to.label());
        // A name taken in the box fails the statement; inside a task's transaction (`done`
        // filing a task's messages) that would end the transaction, so each try there is
        // one savepoint.
        let held = self.in_block.get();
        let step = |sql: &str| self.exec("filing a message", sql, &[]).map(|_| ());
        for n in 1..=1000 {
            let used = crate::message::numbered(file, n);
            if held {
                step("SAVEPOINT circe_file")?;
            }
            let tried = self.update_journaled(
                &format!("filing {file}"),
                "UPDATE {s}.messages SET box = $2, file = $4 WHERE box = $1 AND file = $3",
                &[(&f, Type::TEXT), (&t, Type::TEXT), (&file, Type::TEXT), (&used, Type::TEXT)],
                ["ARRAY[$2::text]", "ARRAY[$3::text]", "ARRAY[$4::text]"],
            );
            if held {
                match &tried {
                    Err(e) if e.kind == crate::error::Kind::Conflict => {
                        step("ROLLBACK TO SAVEPOINT circe_file")?;
                    }
                    Err(_) => {}
                    Ok(_) => step("RELEASE SAVEPOINT circe_file")?,
                }
            }
            match tried {
                Ok(1) => return Ok(Some(used)),
                Ok(_) => return Ok(None),
                Err(e) if e.kind == crate::error::Kind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict(format!("{to} holds 1000 copies named like {file}"))
            .hint(format!("nothing moved: `circe show {file}` lists them")))
    }

    fn list_box(&self, mailbox: &Mailbox) -> Result<Vec<String>> {
        let b = mailbox.label();
        self.rows(
            &format!("listing {b}"),
            "SELECT file FROM {s}.messages WHERE box = $1 ORDER BY file",
            &[(&b, Type::TEXT)],
            |r| Ok(r.get::<_, String>(0)),
        )
    }

    fn read_message(&self, mailbox: &Mailbox, file: &str) -> Result<Vec<u8>> {
        if let Some((body, _)) = self.read_ahead(mailbox, file, None) {
            return Ok(body);
        }
        let b = mailbox.label();
        let mut rows = self.rows(
            &format!("reading {file}"),
            "SELECT body FROM {s}.messages WHERE box = $1 AND file = $2",
            &[(&b, Type::TEXT), (&file, Type::TEXT)],
            |r| Ok(r.get::<_, Vec<u8>>(0)),
        )?;
        rows.pop().ok_or_else(|| no_message(file, mailbox))
    }

    fn append_events(&self, events: Vec<Event>) -> Result<Vec<Event>> {
        self.append_lines(events)
    }

    fn read_events(&self, from: Cursor, max: usize) -> Result<Vec<Event>> {
        let events = self.events_after(from, max)?;
        // Another client added an agent: a follower (a live board, a watch) knows it from
        // here on, as a local root's readers do (they list the agents' folders).
        if events.iter().any(|e| e.event == crate::event::EventKind::AgentAdd) {
            self.read_agents()?;
        }
        Ok(events)
    }

    fn task_events(&self, task: &TaskId, from: Cursor) -> Result<Vec<Event>> {
        self.task_events_after(task, from)
    }

    fn read_events_back_naming(
        &self,
        before: Option<u64>,
        max: usize,
        naming: &[String],
    ) -> Result<Vec<Event>> {
        self.events_before_naming(before, max, naming)
    }

    fn last_event_id(&self) -> Result<u64> {
        self.feed_last()
    }

    fn wait_events(&self, after: u64, timeout: Duration) -> Result<u64> {
        self.wait_feed(after, timeout)
    }

    fn read_events_back(&self, before: Option<u64>, max: usize) -> Result<Vec<Event>> {
        self.events_before(before, max)
    }

    fn subscribe(&self, poll: Option<Duration>) -> Result<Box<dyn EventFeed + '_>> {
        self.feed(poll)
    }

    fn rotate_events(&self) -> Result<Option<String>> {
        // One table: nothing to rotate.
        Ok(None)
    }

    fn read_message_capped(&self, mailbox: &Mailbox, file: &str, cap: usize) -> Result<Capped> {
        if let Some((bytes, size)) = self.read_ahead(mailbox, file, Some(cap)) {
            return Ok(Capped { bytes, size: Some(size) });
        }
        let b = mailbox.label();
        let take = i32::try_from(cap.saturating_add(1)).unwrap_or(i32::MAX);
        let mut rows = self.rows(
            &format!("reading {file}"),
            "SELECT substring(body FROM 1 FOR $3), octet_length(body) FROM {s}.messages WHERE box = $1 AND file = $2",
            &[(&b, Type::TEXT), (&file, Type::TEXT), (&take, Type::INT4)],
            |r| Ok((r.get::<_, Vec<u8>>(0), r.get::<_, i32>(1))),
        )?;
        let (bytes, size) = rows.pop().ok_or_else(|| no_message(file, mailbox))?;
        Ok(Capped { bytes, size: u64::try_from(size).ok() })
    }

    fn read_messages_capped(
        &self,
        mailbox: &Mailbox,
        files: &[String],
        cap: usize,
        each: &mut dyn FnMut(&str, Result<Capped>),
    ) -> Result<()> {
        // One is read as a read of one, which the message a claim just moved may answer.
        if let [f] = files {
            each(f, self.read_message_capped(mailbox, f, cap));
            return Ok(());
        }
        self.read_many(mailbox, files, cap, each)
    }

    fn local_folder(&self) -> Option<std::path::PathBuf> {
        None
    }

    fn chat_log(&self) -> Option<&dyn crate::engine::ChatLog> {
        Some(self)
    }

    fn hold_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<CursorHold>> {
        self.lock_cursor(kind, name)
    }

    fn read_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<Vec<u8>>> {
        self.cursor_value(kind, name)
    }

    fn write_cursor(&self, kind: &str, name: &CursorName, value: &[u8]) -> Result<()> {
        self.save_cursor(kind, name, value)
    }

    fn cursors(&self) -> Result<Vec<(String, CursorName)>> {
        self.list_cursors()
    }

    fn remove_cursor(&self, kind: &str, name: &CursorName) -> Result<bool> {
        self.drop_cursor(kind, name)
    }

    fn archived_task(&self, task: &TaskId) -> Result<Option<crate::archive::Tombstone>> {
        self.tombstone(task)
    }

    fn archived_tasks(&self) -> Result<Vec<crate::archive::Tombstone>> {
        self.all_tombstones()
    }

    fn dead_letter(&self, consumer: &CursorName, event: &Event) -> Result<()> {
        self.set_aside(consumer, event)
    }

    fn dead_letters(&self, consumer: &CursorName) -> Result<Vec<Event>> {
        self.set_aside_events(consumer)
    }

    fn dead_letter_consumers(&self) -> Result<Vec<CursorName>> {
        self.set_aside_consumers()
    }

    fn message_path(&self, _mailbox: &Mailbox, _file: &str) -> Option<std::path::PathBuf> {
        None
    }

    fn snapshot(&self) -> Result<crate::engine::Snapshot> {
        self.no_open_tx()?;
        let c = &self.conn.client;
        self.conn.call(
            "starting a snapshot",
            c.batch_execute(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
                 SET LOCAL idle_in_transaction_session_timeout = 0",
            ),
        )?;
        // The agents as of the snapshot, however recently the opening read them.
        self.in_snapshot.set(true);
        let snap = self.read_agents().and_then(|()| crate::engine::Snapshot::read(self));
        self.in_snapshot.set(false);
        let end = self.conn.call(
            "ending the snapshot",
            futures_util::future::try_join(
                c.query_typed(super::conn::FLUSHED, &[]),
                c.batch_execute("COMMIT"),
            ),
        );
        let snap = snap?;
        let (flushed, ()) = end?;
        // What the snapshot read is on disk before anyone sees it (`feed.rs`).
        self.make_durable(true, super::feed::on_disk(&flushed))?;
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

    fn doctor(&self, repair: bool) -> Result<Vec<Violation>> {
        doctor::run(self, repair)
    }
}

/// The error of a message that is not in `mailbox` (a read of one, or of many).
pub(super) fn no_message(file: &str, mailbox: &Mailbox) -> Error {
    Error::not_found(format!("no message {file} in {}", mailbox.label()))
}
