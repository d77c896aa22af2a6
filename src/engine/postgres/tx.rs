//! The task transaction of the database engine: two round trips. `begin` sends `BEGIN` and
//! the task's row `FOR UPDATE` together (the row stays locked while the domain decides);
//! `commit` sends the commit and `COMMIT` together: the ticket's move or delivery, the
//! record and the events, checked against the row version loaded. A task that exists
//! whose ticket stays or moves is committed by one plain statement (`tx/commit_held.sql`);
//! opening a task or delivering a ticket calls the schema's `commit_task` function.
//! Dropping the transaction without a commit ends it with `COMMIT` all the same: the task
//! is unchanged (only the commit writes it), the row lock is released, and what the
//! command did meanwhile outside the task (a plain message filed while the task was open,
//! as the local engine does it beside its lock) stays done.

use chrono::{DateTime, Utc};
use tokio_postgres::types::Type;

use super::PgEngine;
use super::conn::{Failure, LOCK_WAIT};
use super::prefetch::{MovedMessage, Prefetched};
use super::prepared::{self, Lit};
use super::rows::{ServerTime, TaskRow};
use super::schema::Clock;
use crate::clock;
use crate::engine::TaskTx;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::fault::test_break;
use crate::names::TaskId;
use crate::task::record::OwnerRecord;
use crate::task::{Change, TaskState, Ticket};

/// Stands for the name a delivered ticket gets, in event lines sent to `commit_task`.
const TICKET: &str = "@circe:ticket@";

mod outbox;
mod send;

use send::{Args, Sent};

pub(super) struct PgTx<'a> {
    eng: &'a PgEngine,
    task: TaskId,
    st: Option<TaskState>,
    rev: u64,
    now: DateTime<Utc>,
    open: bool,
}

/// Which task `PgTx::pick` looks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pick {
    /// A waiting task no other claimer has locked.
    Free,
    /// A waiting task, waiting for its lock.
    Waiting,
    /// A held task whose lease ran out, no other command's.
    Lapsed,
}

/// What `begin` asks before the load: the transaction and its lock waits.
fn begin_sql() -> String {
    format!(
        "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '{LOCK_WAIT}'; SET LOCAL idle_in_transaction_session_timeout = '{LOCK_WAIT}'"
    )
}

/// `BEGIN` and the statement that loads a task (`sent`, its `PREPARE` first when it has
/// one, inside the transaction: a prepared statement outlives a rollback), in one round
/// trip. `None`: the prepared statement was not in the server session, or its `PREPARE`
/// was refused (a pooler the URL does not name); the transaction is rolled back and the
/// caller sends it again, as text now.
fn begin_with(
    eng: &PgEngine,
    what: &str,
    sent: &prepared::Statement,
    params: &[prepared::Param<'_>],
) -> Result<Option<tokio_postgres::Row>> {
    let c = &eng.conn.client;
    let begin = begin_sql();
    let row = eng.conn.run(async {
        let (opened, prepared, row) = futures_util::future::join3(
            c.batch_execute(&begin),
            prepared::send_prepare(c, sent.prepare.as_deref()),
            sent.query_one(c, params),
        )
        .await;
        opened?;
        match prepared {
            Ok(()) => row.map(Some),
            // The `PREPARE` was refused (the name there already, in a pooled server
            // session): it aborted the transaction, so the load's error says only that.
            Err(e) if e.as_db_error().is_some() => Ok(None),
            Err(e) => Err(e),
        }
    });
    match row {
        Ok(Some(row)) => Ok(Some(row)),
        Ok(None) => {
            eng.rollback();
            eng.prepared.give_up();
            Ok(None)
        }
        Err(Failure::Db(e)) if eng.prepared.missing(&e) => {
            eng.rollback();
            Ok(None)
        }
        Err(f) => {
            eng.rollback();
            Err(super::conn::before_commit(eng.conn.error(what, f)))
        }
    }
}

impl<'a> PgTx<'a> {
    /// Open the transaction on `task`, loading and locking its row.
    pub(super) fn begin(eng: &'a PgEngine, task: &TaskId) -> Result<PgTx<'a>> {
        eng.no_open_tx()?;
        eng.forget_read_ahead();
        let mut load = eng.sql(
            "SELECT now(),
                    (SELECT to_jsonb(t)::text FROM {s}.tasks t WHERE task_id = $1 FOR UPDATE)",
        );
        if test_break("pg-unlocked") {
            load = load.replace(" FOR UPDATE", "");
        }
        let id = task.as_str();
        let sent = eng.prepared.text(eng.warm.get(), &load, &[Type::TEXT], &[Lit::Text(Some(id))]);
        let params: &[prepared::Param<'_>] = &[(&id, Type::TEXT)];
        let Some(row) = begin_with(eng, &format!("loading task {task}"), &sent, params)? else {
            return PgTx::begin(eng, task);
        };
        PgTx::from_row(eng, task.clone(), row.get::<_, ServerTime>(0).0, row.get(1))
    }

    /// Open the transaction on the best waiting task `who` may take (skipping `skip` and,
    /// first, rows another claimer has locked); when none waits, on the best held task
    /// whose lease ran out that `who` may take over (one another command has locked is
    /// being changed, and passed over). `None` when there is neither.
    pub(super) fn begin_next(
        eng: &'a PgEngine,
        who: &crate::task::Eligibility,
        skip: &[String],
    ) -> Result<Option<PgTx<'a>>> {
        eng.no_open_tx()?;
        eng.forget_read_ahead();
        if let Some(tx) = PgTx::pick(eng, who, skip, Pick::Free)? {
            return Ok(Some(tx));
        }
        // Every waiting task may be locked by another claimer right now: wait for one (its
        // row is checked again once the lock is granted; a task taken meanwhile is no match).
        if let Some(tx) = PgTx::pick(eng, who, skip, Pick::Waiting)? {
            return Ok(Some(tx));
        }
        PgTx::pick(eng, who, skip, Pick::Lapsed)
    }

    fn pick(
        eng: &'a PgEngine,
        who: &crate::task::Eligibility,
        skip: &[String],
        how: Pick,
    ) -> Result<Option<PgTx<'a>>> {
        // Waiting tasks: priority, then deadline (none last), then time waiting. Held ones
        // whose lease ran out (by the clock that decides, section 18), another's: priority,
        // then the lease that ran out first. Each key names its operator (`USING <`, the
        // same order as ascending): a plain `ORDER BY` makes a fresh server session search
        // every default operator class for each key's type: 43 catalog reads here.
        let (which, order) = match how {
            Pick::Free | Pick::Waiting => (
                "status = 'new'",
                "rank USING <, (deadline IS NULL) USING <, deadline USING <, updated_at USING <,
                 task_id USING <",
            ),
            Pick::Lapsed => (
                "status IN ('claimed', 'in_progress', 'blocked') AND owner <> $6
                 AND lease_until <= coalesce($5::timestamptz, now())",
                "rank USING <, lease_until USING <, task_id USING <",
            ),
        };
        let mut pick = eng.sql(&format!(
            "SELECT now(),
                    (SELECT to_jsonb(t)::text FROM {{s}}.tasks t WHERE t.task_id = x.task_id),
                    x.task_id
             FROM (SELECT 1) one
             LEFT JOIN LATERAL (
               SELECT task_id FROM {{s}}.tasks
               WHERE {which} AND (\"to\" = ANY($1) OR (\"to\" = ANY($2) AND intent = ANY($3)))
                 AND task_id <> ALL($4)
                 AND (deadline_at IS NULL OR deadline_at > coalesce($5::timestamptz, now()))
               ORDER BY {order}
               LIMIT 1 FOR UPDATE SKIP LOCKED) x ON true"
        ));
        if test_break("pg-unlocked") {
            pick = pick.replace(" FOR UPDATE SKIP LOCKED", "");
        } else if how == Pick::Waiting {
            pick = pick.replace(" SKIP LOCKED", "");
        }
        // The agent's own addresses (`agent:NAME`, and NAME unless a role has that name).
        let direct = &who.direct;
        // Past its deadline a task is passed over, by the clock that decides (section 18).
        let now = match eng.clock {
            Clock::Server if !test_break("pg-client-clock") => None,
            Clock::Server | Clock::Client => Some(who.now.as_str()),
        };
        let me = who.agent.as_str();
        let mut params: Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> = vec![
            (direct, Type::TEXT_ARRAY),
            (&who.addresses, Type::TEXT_ARRAY),
            (&who.intents, Type::TEXT_ARRAY),
            (&skip, Type::TEXT_ARRAY),
            (&now, Type::TEXT),
        ];
        if how == Pick::Lapsed {
            params.push((&me, Type::TEXT));
        }
        let types: Vec<Type> = params.iter().map(|(_, t)| t.clone()).collect();
        let mut lits = vec![
            Lit::Texts(direct),
            Lit::Texts(&who.addresses),
            Lit::Texts(&who.intents),
            Lit::Texts(skip),
            Lit::Text(now),
        ];
        if how == Pick::Lapsed {
            lits.push(Lit::Text(Some(me)));
        }
        let sent = eng.prepared.text(eng.warm.get(), &pick, &types, &lits);
        let Some(row) = begin_with(eng, "picking a waiting task", &sent, &params)? else {
            return PgTx::pick(eng, who, skip, how);
        };
        let Some(task) = row.get::<_, Option<String>>(2) else {
            eng.rollback();
            return Ok(None);
        };
        let task = TaskId::new(task)?;
        PgTx::from_row(eng, task, row.get::<_, ServerTime>(0).0, row.get(1)).map(Some)
    }

    fn from_row(
        eng: &'a PgEngine,
        task: TaskId,
        now_us: i64,
        json: Option<String>,
    ) -> Result<PgTx<'a>> {
        let now = match eng.clock {
            Clock::Server if !test_break("pg-client-clock") => {
                DateTime::<Utc>::from_timestamp_micros(now_us).unwrap_or_else(Utc::now)
            }
            Clock::Server | Clock::Client => clock::now(),
        };
        let (st, rev) = match json {
            Some(j) => match TaskRow::parse(&j) {
                Ok(r) => {
                    let rev = r.rev;
                    (Some(r.state()), rev)
                }
                Err(e) => {
                    eng.rollback();
                    return Err(e);
                }
            },
            None => (None, 0),
        };
        eng.open_tx.set(true);
        eng.in_block.set(true);
        Ok(PgTx { eng, task, st, rev, now, open: true })
    }

    /// The `.owner` record for the new record: kept when the same owner holds it at the
    /// same epoch, else made now.
    fn owner_for(&self, rec: &crate::task::StatusRecord) -> Option<OwnerRecord> {
        if !rec.status.is_owned() {
            return None;
        }
        let before = self.st.as_ref().and_then(|s| s.owner.as_ref());
        match before {
            Some(o) if Some(&o.owner) == rec.owner.as_ref() && o.epoch == rec.epoch => {
                let mut o = o.clone();
                o.lease_expires_at = rec.lease_expires_at.clone().unwrap_or_default();
                Some(o)
            }
            _ => rec.owner_record(
                &clock::stamp(self.now),
                &crate::engine::local::host_name(),
                std::os::unix::process::parent_id(),
            ),
        }
    }
}

impl PgTx<'_> {
    /// The error for a commit whose reply never came: a claim names its request id, so the
    /// retry can find the grant.
    fn lost(&self, op: &str, why: &str, request: Option<&str>) -> Error {
        let err = self.eng.conn.unknown_outcome(&format!("{op} {}", self.task), why);
        match (request, op) {
            (Some(r), "claim") => err.detail("request_id", r.to_string()).hint(format!(
                "run the claim again with --request-id {r} (or CIRCE_REQUEST_ID={r}): it returns the task if this claim got it"
            )),
            _ => err.hint("`circe show` tells whether the change was made"),
        }
    }

    /// The error for a commit whose outcome is unknown: its reply lost (`lost`), or the
    /// commit made and its flush refused (a claim names its request id there too).
    fn unknown(&self, op: &str, f: Failure, request: Option<String>) -> Error {
        if let Failure::Lost(why) = f {
            return self.lost(op, &why, request.as_deref());
        }
        let err = self.eng.conn.error(&format!("{op} {}", self.task), f);
        match request {
            // The claim was made: its request id brings this task back, where a plain retry
            // would take another.
            Some(r) if op == "claim" => err.hint_more(format!(
                "this claim got task {}: run it again with --request-id {r} (or CIRCE_REQUEST_ID={r}) and it returns that task rather than taking another",
                self.task
            )).detail("request_id", r),
            _ => err,
        }
    }
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        self.eng.open_tx.set(false);
        self.eng.in_block.set(false);
        if self.open {
            let _ = self.eng.conn.run(self.eng.conn.client.batch_execute("COMMIT"));
        }
    }
}

impl TaskTx for PgTx<'_> {
    fn task_id(&self) -> &TaskId {
        &self.task
    }

    fn state(&self) -> Option<&TaskState> {
        self.st.as_ref()
    }

    fn now(&self) -> DateTime<Utc> {
        self.now
    }

    fn commit(&mut self, change: Change) -> Result<Vec<Event>> {
        if !self.open {
            return Err(Error::internal(format!(
                "task {}: a second commit in one transaction",
                self.task
            )));
        }
        let Change { op, mut record, checks, ticket, mut events, notices: _, request, outbox } =
            change;
        // The outbox is delivered inside this transaction: it commits with the change, so
        // the record never holds one.
        record.outbox.clear();
        // The format it needs, as a record file says it (`StatusRecord::render`).
        record.v = record.format_needed();
        // TEST BUILDS ONLY (CIRCE_TEST_BREAK=pg-outbox-apart): the outbox after the commit.
        let apart = !outbox.is_empty() && test_break("pg-outbox-apart");
        let numbered_out = !apart && self.put_outbox(&outbox, &ticket, &mut events)?;
        // A claim always carries a request id, so that a claim whose outcome is unknown can
        // be retried without taking a second task.
        let request =
            request.or_else(|| (op == "claim").then(|| format!("r-{}", clock::random_suffix())));
        let stored = if test_break("pg-forget-request") { None } else { request.clone() };
        let all_checks = checks
            .clone()
            .unwrap_or_else(|| self.st.as_ref().map(|s| s.checks.clone()).unwrap_or_default());
        let owner = self.owner_for(&record);
        let (mv, name, body) = match &ticket {
            Ticket::Stay => (None, None, None),
            Ticket::MoveTo(b) => (Some(b.label()), None, None),
            Ticket::Deliver { name, content } => {
                for f in events.iter_mut().flat_map(|e| e.files.iter_mut()) {
                    if f.mailbox == "new" {
                        f.file = TICKET.to_string();
                    }
                }
                (None, Some(name.clone()), Some(content.clone()))
            }
        };
        let rec_json = json(&record);
        let checks_json = checks.as_ref().map(json);
        let owner_json = owner.as_ref().map(json);
        let lines: Vec<String> = events.iter().map(Event::to_line).collect();
        let rev = i64::try_from(self.rev).unwrap_or(i64::MAX);
        let seen = if test_break("pg-unlocked") && rev > 0 { -1 } else { rev };
        let args = Args {
            task: self.task.as_str(),
            seen,
            message: &record.message,
            rec: &rec_json,
            checks: checks_json.as_deref(),
            owner: owner_json.as_deref(),
            mv: mv.as_deref(),
            stored: stored.as_deref(),
            claimer: claimer(op, &record),
            lines: &lines,
            bring: (op == "claim")
                .then(|| i32::try_from(self.eng.message_cap.saturating_add(1)).unwrap_or(i32::MAX)),
        };
        // The first change on a connection to a task that exists, whose ticket stays or
        // moves: one plain statement, so a fresh connection (a CLI run) neither loads
        // plpgsql nor compiles a function. Later changes on the connection call
        // `commit_task`, whose plans the server keeps for it; so do opening a task and
        // delivering a ticket (the function finds the ticket a free name).
        let sent = if name.is_none() && seen != 0 && !self.eng.warm.get() {
            self.send_held(&args)
        } else {
            self.send_function(&args, name.as_deref(), body.as_deref())
        };
        self.open = false;
        // The commit statement went with its `COMMIT` (or failed, and is rolled back).
        self.eng.in_block.set(false);
        let (file, first) = match sent {
            Ok(Sent::Done { file, first, moved, brought }) => {
                self.eng.warm.set(true);
                self.eng.counter_moved(moved || numbered_out);
                if let (Some((bytes, size)), Some(mailbox)) = (brought, mv) {
                    let ticket = MovedMessage { mailbox, file: file.clone(), bytes, size };
                    self.eng.ticket_read.set(Some(Prefetched::new(ticket)));
                }
                (file, first)
            }
            // The statement changed nothing, and the COMMIT sent with it ended the transaction.
            Ok(Sent::Refused(e)) => return Err(e),
            Err(Failure::Db(e)) => {
                self.eng.rollback();
                let err = super::conn::db_error(&format!("task {}", self.task), &e);
                // `commit_task` says it as the statement does: where it is is looked up here.
                let moved = err.message.starts_with("the message of task ");
                return Err(if moved { self.ticket_gone(&record.message) } else { err });
            }
            Err(f) => return Err(self.unknown(op, f, request)),
        };
        if test_break("pg-lost-reply") && op == "claim" {
            return Err(self.lost(op, "CIRCE_TEST_BREAK=pg-lost-reply", request.as_deref()));
        }
        record.message.clone_from(&file);
        for (i, e) in events.iter_mut().enumerate() {
            e.id = u64::try_from(first).unwrap_or(0) + i as u64;
            for f in &mut e.files {
                if f.file == TICKET {
                    f.file.clone_from(&file);
                }
            }
        }
        if apart {
            self.outbox_apart(&outbox, &mut events)?;
        }
        let location = match ticket {
            Ticket::Stay => self.st.as_ref().and_then(|s| s.location.clone()),
            Ticket::MoveTo(b) => Some(b),
            Ticket::Deliver { .. } => Some(crate::boxes::Mailbox::NewMessages),
        };
        self.st = Some(TaskState { rec: record, owner, checks: all_checks, location });
        self.rev += 1;
        Ok(events)
    }
}

/// A claim's claimer, whose retirement its commit reads, in the statement or just before
/// it, under the task's lock (`agent retire` racing the claim; PROTOCOLS.md section 16).
/// TEST BUILDS ONLY (CIRCE_TEST_BREAK=claim-unchecked): not read, the broken variant.
fn claimer<'r>(
    op: &str,
    record: &'r crate::task::StatusRecord,
) -> Option<&'r crate::names::AgentName> {
    (op == "claim" && !test_break("claim-unchecked")).then_some(record.owner.as_ref()).flatten()
}

/// JSON text of a record (records serialise infallibly).
fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
