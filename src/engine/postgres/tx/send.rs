//! Sending a task transaction's commit: the first change on a connection to a task that
//! exists, whose ticket stays or moves, as one plain statement (`commit_held.sql`);
//! every other change as a call of the schema's `commit_task`. Each is pipelined with its
//! `COMMIT`, which does not wait for the disk, and the flush that does, sent as one message
//! (`Conn::run_flushed`): the commit holds its locks only until it is made, and is
//! answered only once it is durable.

use tokio_postgres::types::Type;

use super::PgTx;
use crate::engine::postgres::conn::{Failure, NO_WAIT};
use crate::engine::postgres::seq::is_ticket_counter_refused;
use crate::engine::retired_claimer;
use crate::error::Error;
use crate::names::{AgentName, TaskId};

/// What a commit sends, whichever way it goes.
pub(super) struct Args<'x> {
    pub(super) task: &'x str,
    /// The row version loaded (0: the task is being opened; < 0, test builds only: no
    /// check).
    pub(super) seen: i64,
    /// The ticket's name in the new record.
    pub(super) message: &'x str,
    pub(super) rec: &'x str,
    pub(super) checks: Option<&'x str>,
    pub(super) owner: Option<&'x str>,
    /// The box the ticket moves to.
    pub(super) mv: Option<&'x str>,
    /// The claim's request id, kept for a retry.
    pub(super) stored: Option<&'x str>,
    /// A claim's claimer: the commit is refused when it is retired.
    pub(super) claimer: Option<&'x AgentName>,
    pub(super) lines: &'x [String],
    /// Answer with the first bytes of the ticket, this many, and its size, when it moves
    /// (a claim shows its summary).
    pub(super) bring: Option<i32>,
}

/// A statement parameter with its type.
type Param<'p> = &'p (dyn tokio_postgres::types::ToSql + Sync);

impl Args<'_> {
    /// The parameters both ways of committing begin with, `$1` to `$6`.
    fn params(&self) -> Vec<(Param<'_>, Type)> {
        vec![
            (&self.task, Type::TEXT),
            (&self.seen, Type::INT8),
            (&self.rec, Type::TEXT),
            (&self.checks, Type::TEXT),
            (&self.owner, Type::TEXT),
            (&self.mv, Type::TEXT),
        ]
    }
}

/// What the server answered to a commit.
pub(super) enum Sent {
    /// Committed: the ticket's name, the first event id, whether a sequence counter moved,
    /// and the moved ticket's first bytes and size when they were asked for.
    Done { file: String, first: i64, moved: bool, brought: Option<(Vec<u8>, u64)> },
    /// A check failed: nothing was written.
    Refused(Error),
}

/// The hint for a task whose message is not in the box its record names.
pub(super) const TICKET_MOVED: &str =
    "`circe doctor` says where it is; put it back in its box, then change the task";

/// The commit of a change to a task that exists and whose ticket stays or moves.
const COMMIT_HELD: &str = include_str!("commit_held.sql");

/// Sent ahead of a claim's `commit_task`, in the same transaction, under the task's lock:
/// a retired claimer aborts the transaction (the `COMMIT` sent after it ends it), so the
/// commit changes nothing. Plain SQL raises no error of its own making: a retired claimer
/// divides by zero, and nothing else sent with a commit divides.
const CLAIMER_ACTIVE: &str = "SELECT 1 / (NOT EXISTS (SELECT 1 FROM {s}.agents
     WHERE name = $1 AND retired_at IS NOT NULL))::int";

/// The error `CLAIMER_ACTIVE` raises for a retired claimer.
fn is_claimer_retired(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|d| *d.code() == tokio_postgres::error::SqlState::DIVISION_BY_ZERO)
}

impl crate::engine::postgres::PgEngine {
    /// The refusal of a change to `task` whose message `file` is not in the box its record
    /// names (`from`): it lies in another box (conflict, exit 4, where), or in none (not
    /// found, exit 5, as on a folder root).
    pub(super) fn ticket_not_there(&self, task: &TaskId, from: &str, file: &str) -> Error {
        let found = self.rows(
            "looking for a task's message",
            "SELECT box FROM {s}.messages WHERE file = $1 ORDER BY box",
            &[(&file, Type::TEXT)],
            |r| Ok(r.get::<_, String>(0)),
        );
        match found {
            Ok(boxes) if boxes.is_empty() => {
                Error::not_found(format!("the message of task {task} is in no box"))
                    .hint("run `circe doctor`: it says where the message may be")
            }
            Ok(boxes) => Error::conflict(format!(
                "the message of task {task} is not in {from} but in {}",
                boxes.join(", ")
            ))
            .hint(TICKET_MOVED),
            Err(_) => Error::conflict(format!("the message of task {task} is not in {from}"))
                .hint(TICKET_MOVED),
        }
    }
}

impl PgTx<'_> {
    /// The refusal of this change: its message `file` is not in the box the record names.
    pub(super) fn ticket_gone(&self, file: &str) -> Error {
        let from = self.st.as_ref().and_then(|s| s.location.as_ref());
        let from = from.map_or_else(|| "its box".to_string(), ToString::to_string);
        self.eng.ticket_not_there(&self.task, &from, file)
    }

    /// Send `commit_task(...)` and `COMMIT` together, with a numbered ticket's counter
    /// moved by compare-and-set ahead of them: when the counter moved meanwhile, its error
    /// aborts the transaction.
    pub(super) fn send_function(
        &self,
        a: &Args<'_>,
        name: Option<&str>,
        body: Option<&[u8]>,
    ) -> std::result::Result<Sent, Failure> {
        let msg_id = body.and_then(crate::engine::postgres::msg_id_of);
        let q = self.eng.sql(
            "SELECT o_file, o_first FROM {s}.commit_task($1, $2, $3::jsonb, $4::jsonb, $5::jsonb,
                 $6, $7, $8, $9, $10, $11)",
        );
        let c = &self.eng.conn.client;
        let mut params = a.params();
        params.extend([
            (&name as Param<'_>, Type::TEXT),
            (&body, Type::BYTEA),
            (&msg_id, Type::TEXT),
            (&a.lines, Type::TEXT_ARRAY),
            (&a.stored, Type::TEXT),
        ]);
        let number = body.and_then(|b| self.eng.pending_number(b));
        let guard = self.eng.sql(CLAIMER_ACTIVE);
        let claimer = a.claimer.map(AgentName::as_str);
        let active = async {
            match claimer {
                Some(who) => c.execute_typed(&guard, &[(&who, Type::TEXT)]).await.map(|_| ()),
                None => Ok(()),
            }
        };
        let counter = async {
            match &number {
                Some(m) => self.eng.move_counter(m).await.map(|()| true),
                None => Ok(false),
            }
        };
        let sent = self.eng.conn.run_flushed(futures_util::future::try_join4(
            c.batch_execute(NO_WAIT),
            active,
            counter,
            c.query_typed_one(&q, &params),
        ));
        match (sent, &number) {
            (Ok(((), (), moved, row)), _) => {
                Ok(Sent::Done { file: row.get(0), first: row.get(1), moved, brought: None })
            }
            // The claimer was retired: the transaction aborted, nothing was written.
            (Err(Failure::Db(e)), _)
                if is_claimer_retired(&e)
                    && let Some(who) = a.claimer =>
            {
                self.eng.rollback();
                Ok(Sent::Refused(retired_claimer(who)))
            }
            // The counter moved while the hold had it: the transaction aborted (the COMMIT
            // sent with it ended it), nothing was written.
            (Err(Failure::Db(e)), Some(held)) if is_ticket_counter_refused(&e) => {
                self.eng.rollback();
                let agent = &held.agent;
                Ok(Sent::Refused(crate::seq::counter_moved(agent)))
            }
            (Err(f), _) => Err(f),
        }
    }

    /// Send `COMMIT_HELD`, then `COMMIT` (`run_flushed`).
    pub(super) fn send_held(&self, a: &Args<'_>) -> std::result::Result<Sent, Failure> {
        let q = self.eng.sql(COMMIT_HELD);
        let c = &self.eng.conn.client;
        let claimer = a.claimer.map(AgentName::as_str);
        let mut params = a.params();
        params.extend([
            (&a.stored as Param<'_>, Type::TEXT),
            (&a.lines, Type::TEXT_ARRAY),
            (&a.bring, Type::INT4),
            (&claimer, Type::TEXT),
        ]);
        let ((), row) = self.eng.conn.run_flushed(futures_util::future::try_join(
            c.batch_execute(NO_WAIT),
            c.query_typed_one(&q, &params),
        ))?;
        let (found, done, first): (bool, bool, i64) = (row.get(0), row.get(1), row.get(2));
        if let Some(agent) = a.claimer
            && row.get::<_, bool>(6)
        {
            return Ok(Sent::Refused(retired_claimer(agent)));
        }
        if !found {
            return Ok(Sent::Refused(
                Error::conflict(format!("task {} changed meanwhile", self.task))
                    .detail("race", true)
                    .hint(
                        "another command changed it: look again (`circe show`) and run yours again",
                    ),
            ));
        }
        if !done {
            return Ok(Sent::Refused(self.ticket_gone(a.message)));
        }
        let bytes = row.get::<_, Option<Vec<u8>>>(4);
        let size = row.get::<_, Option<i32>>(5).and_then(|n| u64::try_from(n).ok());
        let brought = bytes.zip(size);
        Ok(Sent::Done { file: a.message.to_string(), first, moved: false, brought })
    }
}
