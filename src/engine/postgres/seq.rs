//! Sequence numbers in the database (PROTOCOLS.md section 14): `seq_counters` (one row per
//! sender) and `seq_seen` (each receiver's lastSeen as JSON).
//!
//! A sender's hold is a session advisory lock on it, taken by polling `pg_try_advisory_lock`
//! for at most `LOCK_WAIT` (10 s) and released when the hold is dropped, or when the
//! connection ends: a killed sender leaves none. The delivery that uses the number upserts
//! the counter in the transaction that stores the message (`deliver`, or the ticket's
//! `commit_task`), so the number and the message commit together; a crash before that
//! commit changed neither.
//!
//! Every write of a counter is a compare-and-set against the counter the hold read
//! (`ON CONFLICT ... DO UPDATE ... WHERE` the row still holds it): when the counter moved
//! meanwhile, nothing is written and the send is refused (`crate::seq::counter_moved`; it is
//! numbered again, `crate::seq::numbered_again`). The lock makes senders wait their turn;
//! the compare-and-set is what keeps a number from being given twice when the lock is lost
//! before the delivery commits (a sender killed mid-send through a pooler, whose lock lives
//! on a connection of its own). The ticket's statement (`TICKET_UPSERT`) sets `last` NULL
//! instead of not writing, so its transaction aborts before the `COMMIT` sent with it.

use std::time::{Duration, Instant};

use tokio_postgres::types::Type;

use super::PgEngine;
use crate::engine::SeqHold;
use crate::error::{Error, Result};
use crate::names::AgentName;
use crate::seq::{Counter, Receiver};

/// Moves a sender's counter to `$2, $3` when it still is `$4, $5` (or is no row yet);
/// one row answers when it moved. `$4` NULL (test builds only): no comparison.
pub(super) const UPSERT: &str =
    "INSERT INTO {s}.seq_counters (agent, epoch, last) VALUES ($1, $2, $3)
     ON CONFLICT (agent) DO UPDATE SET epoch = EXCLUDED.epoch, last = EXCLUDED.last
      WHERE $4::int8 IS NULL OR (seq_counters.epoch = $4 AND seq_counters.last = $5::int8)
     RETURNING 1";

/// The compare-and-set of a numbered ticket's counter, sent in the task transaction's
/// pipeline ahead of `commit_task` and `COMMIT`: a counter that moved meanwhile gets `last`
/// NULL, which the column refuses (`not_null_violation` on `seq_counters`), so the
/// transaction aborts before its `COMMIT` without a round trip to look first.
const TICKET_UPSERT: &str = "INSERT INTO {s}.seq_counters (agent, epoch, last) VALUES ($1, $2, $3)
     ON CONFLICT (agent) DO UPDATE SET epoch = EXCLUDED.epoch,
       last = CASE WHEN $4::int8 IS NULL
                     OR (seq_counters.epoch = $4 AND seq_counters.last = $5::int8)
              THEN EXCLUDED.last END";

/// The data-modifying `WITH` item `c` that moves a numbered send's counter by compare-and-set
/// in the statement that delivers it, its parameters from `$n`: the agent (NULL: no number),
/// epoch, last, and the counter the hold read (its epoch NULL, test builds only: no
/// comparison). `c` has a row exactly when the counter moved; what the statement stores is
/// gated on that row.
pub(super) fn counter_cte(n: usize) -> String {
    let (a, e, l, fe, fl) = (n, n + 1, n + 2, n + 3, n + 4);
    format!(
        "c AS (INSERT INTO {{s}}.seq_counters (agent, epoch, last)
             SELECT ${a}, ${e}, ${l} WHERE ${a}::text IS NOT NULL
             ON CONFLICT (agent) DO UPDATE SET epoch = EXCLUDED.epoch, last = EXCLUDED.last
              WHERE ${fe}::int8 IS NULL
                 OR (seq_counters.epoch = ${fe} AND seq_counters.last = ${fl}::int8)
             RETURNING 1)"
    )
}

/// Whether `e` is `TICKET_UPSERT`'s refusal of a counter that moved.
pub(super) fn is_ticket_counter_refused(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|d| {
        *d.code() == tokio_postgres::error::SqlState::NOT_NULL_VIOLATION
            && d.table() == Some("seq_counters")
    })
}

/// The numbered send held on the engine's connection, until its delivery.
#[derive(Debug, Clone)]
pub(super) struct Active {
    pub agent: AgentName,
    /// The counter's row as the hold read it, compared raw.
    pub prev: Row,
    pub next: Counter,
    pub used: bool,
}

/// A numbered send's counter move: who, to what, and from what (`from` is `None` in test
/// builds that turn the comparison off).
pub(super) struct Move {
    pub agent: String,
    pub epoch: i64,
    pub last: i64,
    pub from: Option<(i64, i64)>,
}

/// A counter's row as stored (`None`: no row yet, which reads as epoch 0, #0).
type Row = Option<(i64, i64)>;

/// The comparison's parameters for a counter read as `row` (`None`, test builds only: no
/// comparison). An absent row is compared as (0, 0): nobody writes a counter back to it.
fn compared(row: Row) -> Option<(i64, i64)> {
    // TEST BUILDS ONLY: senders race for numbers, and nothing compares the counter.
    if crate::fault::test_break("seq-race") {
        return None;
    }
    Some(row.unwrap_or((0, 0)))
}

/// The counter a row holds (values out of range read as 0).
fn counter(row: Row) -> Counter {
    row.map(|(e, l)| Counter { epoch: u64_of(e), last: u64_of(l) }).unwrap_or_default()
}

struct PgHold<'a> {
    eng: &'a PgEngine,
    agent: AgentName,
    next: Counter,
}

impl SeqHold for PgHold<'_> {
    fn sender(&self) -> &AgentName {
        &self.agent
    }

    fn next(&self) -> Counter {
        self.next
    }

    fn used(&self) -> bool {
        self.eng.seq_active.borrow().as_ref().is_some_and(|a| a.used)
    }
}

impl Drop for PgHold<'_> {
    fn drop(&mut self) {
        self.eng.seq_active.borrow_mut().take();
        let _ = self.eng.unlock_sender(&self.agent);
    }
}

/// The lock key of a sender's counter.
fn key(agent: &AgentName) -> String {
    format!("seq/{agent}")
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn u64_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl PgEngine {
    /// Wait (at most 10 s) for `agent`'s advisory lock.
    fn lock_sender(&self, agent: &AgentName) -> Result<()> {
        // TEST BUILDS ONLY: senders race for numbers (`pg-seq-nolock`: the comparison alone
        // keeps them apart).
        if crate::fault::test_break("seq-race") || crate::fault::test_break("pg-seq-nolock") {
            return Ok(());
        }
        let k = key(agent);
        let start = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            if self.try_session_lock(&format!("holding the sequence counter of {agent}"), &k)? {
                return Ok(());
            }
            if start.elapsed() > Duration::from_secs(10) {
                let late = Error::conflict(format!(
                    "the sequence counter of {agent} is held by another command for over 10s"
                ))
                .hint(
                    "a circe process may be stopped while holding it; resume or kill it and retry",
                );
                return Err(self.held_too_long(&k, late));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    fn unlock_sender(&self, agent: &AgentName) -> Result<()> {
        if crate::fault::test_break("seq-race") || crate::fault::test_break("pg-seq-nolock") {
            return Ok(());
        }
        self.session_unlock("releasing a sequence counter", &key(agent))
    }

    /// `agent`'s counter, and (`journals`) whether the journals of its numbered deliveries
    /// hold a row (`journal::Which::Sender`), asked in the same statement: a send whose
    /// sender left none pays no round trip for the look.
    fn counter_of(&self, agent: &AgentName, journals: bool) -> Result<(Row, bool)> {
        let a = agent.as_str();
        let look = if journals {
            format!(
                "EXISTS (SELECT 1 FROM {{s}}.event_journals WHERE {})",
                super::journal::sender(1)
            )
        } else {
            "false".to_string()
        };
        let v = self.rows(
            &format!("reading the sequence counter of {agent}"),
            &format!(
                "SELECT c.epoch, c.last, {look}
                   FROM (VALUES ($1::text)) AS a(agent)
                   LEFT JOIN {{s}}.seq_counters c USING (agent)"
            ),
            &[(&a, Type::TEXT)],
            |r| {
                let row = r.get::<_, Option<i64>>(0).zip(r.get::<_, Option<i64>>(1));
                Ok((row, r.get::<_, bool>(2)))
            },
        )?;
        Ok(v.into_iter().next().unwrap_or_default())
    }

    pub(super) fn hold(&self, agent: &AgentName) -> Result<Box<dyn SeqHold + '_>> {
        self.lock_sender(agent)?;
        // The events of the sender's earlier numbered sends cut off before they logged them
        // are logged now, before this one's: a sender's events follow its numbers. The read
        // of the counter asks whether there are any. (TEST BUILDS ONLY: `no-sender-settle`
        // leaves them to followers and doctor.)
        let settles = !crate::fault::test_break("no-sender-settle") && super::journal::kept();
        let (row, left) = match self.counter_of(agent, settles) {
            Ok(r) => r,
            Err(e) => {
                let _ = self.unlock_sender(agent);
                return Err(e);
            }
        };
        if left && let Err(e) = self.settle_found(super::journal::Which::Sender(agent.as_str())) {
            let _ = self.unlock_sender(agent);
            return Err(e
                .map_message(|m| {
                    format!("{agent}'s earlier message is delivered but not logged, and nothing of this command was sent: {m}")
                })
                .not_delivered());
        }
        let c = counter(row);
        // The database keeps a bigint: its largest number is the end.
        let Some(last) = c.last.checked_add(1).filter(|l| i64::try_from(*l).is_ok()) else {
            let _ = self.unlock_sender(agent);
            return Err(Error::refused(format!("{agent}'s sequence counter is at its end"))
                .hint(format!("`circe seq reset --agent {agent}` starts a new epoch at #1")));
        };
        let next = Counter { epoch: c.epoch, last };
        let active = Active { agent: agent.clone(), prev: row, next, used: false };
        *self.seq_active.borrow_mut() = Some(active);
        Ok(Box::new(PgHold { eng: self, agent: agent.clone(), next }))
    }

    /// The numbered send waiting for its delivery on this connection, when `content` is its
    /// message: the counter move its delivery makes.
    pub(super) fn pending_number(&self, content: &[u8]) -> Option<Move> {
        self.held_move(|a| crate::engine::carries_number(content, &a.agent, a.next))
    }

    /// The counter move of the numbered send held on this connection and not yet used, when
    /// `it` is the one.
    pub(super) fn held_move(&self, it: impl Fn(&Active) -> bool) -> Option<Move> {
        let a = self.seq_active.borrow();
        let a = a.as_ref().filter(|a| !a.used && it(a))?;
        Some(Move {
            agent: a.agent.to_string(),
            epoch: i64_of(a.next.epoch),
            last: i64_of(a.next.last),
            from: compared(a.prev),
        })
    }

    /// The pending numbered send was delivered (its counter committed with it).
    pub(super) fn number_used(&self) {
        if let Some(a) = self.seq_active.borrow_mut().as_mut() {
            a.used = true;
        }
    }

    /// The counter's compare-and-set for a numbered ticket (`m`), sent in the task
    /// transaction's pipeline (`TICKET_UPSERT`): an error when the counter moved.
    pub(super) async fn move_counter(
        &self,
        m: &Move,
    ) -> std::result::Result<(), tokio_postgres::Error> {
        let (fe, fl) = m.from.unzip();
        let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 5] = [
            (&m.agent, Type::TEXT),
            (&m.epoch, Type::INT8),
            (&m.last, Type::INT8),
            (&fe, Type::INT8),
            (&fl, Type::INT8),
        ];
        self.conn.client.execute_typed(&self.sql(TICKET_UPSERT), &params).await.map(|_| ())
    }

    /// After the commit: the counter moved with the ticket, so the number is used.
    pub(super) fn counter_moved(&self, moved: bool) {
        if moved {
            self.number_used();
        }
    }

    pub(super) fn update(
        &self,
        agent: &AgentName,
        change: &mut dyn FnMut(&mut Counter) -> Result<()>,
    ) -> Result<Counter> {
        self.lock_sender(agent)?;
        let done = (|| {
            let (row, _) = self.counter_of(agent, false)?;
            let before = counter(row);
            let mut after = before;
            change(&mut after)?;
            if after != before {
                let (a, e, n) = (agent.as_str(), i64_of(after.epoch), i64_of(after.last));
                let from = compared(row);
                let (fe, fl) = from.unzip();
                let moved = self.rows(
                    &format!("setting the sequence counter of {agent}"),
                    UPSERT,
                    &[
                        (&a, Type::TEXT),
                        (&e, Type::INT8),
                        (&n, Type::INT8),
                        (&fe, Type::INT8),
                        (&fl, Type::INT8),
                    ],
                    |_| Ok(()),
                )?;
                if moved.is_empty() {
                    return Err(Error::conflict(format!(
                        "the sequence counter of {agent} moved while this command held it; it was not changed"
                    ))
                    .hint("run the command again"));
                }
            }
            Ok(after)
        })();
        let _ = self.unlock_sender(agent);
        done
    }

    pub(super) fn counters(&self) -> Result<Vec<(AgentName, Counter)>> {
        self.rows(
            "reading the sequence counters",
            "SELECT agent, epoch, last FROM {s}.seq_counters
              WHERE epoch > 0 OR last > 0 ORDER BY agent",
            &[],
            |r| {
                let c = Counter { epoch: u64_of(r.get(1)), last: u64_of(r.get(2)) };
                Ok((AgentName::new(r.get::<_, String>(0))?, c))
            },
        )
    }

    pub(super) fn seen(&self, agent: &AgentName) -> Result<Receiver> {
        let a = agent.as_str();
        let v = self.rows(
            &format!("reading what {agent} has seen"),
            "SELECT state FROM {s}.seq_seen WHERE agent = $1",
            &[(&a, Type::TEXT)],
            |r| parse(&r.get::<_, String>(0)),
        )?;
        Ok(v.into_iter().next().unwrap_or_default())
    }

    /// Read-modify-write of `agent`'s lastSeen in one transaction, its row locked.
    pub(super) fn see(
        &self,
        agent: &AgentName,
        change: &mut dyn FnMut(&mut Receiver) -> Result<()>,
    ) -> Result<(Receiver, Receiver)> {
        self.no_open_tx()?;
        let a = agent.as_str();
        let c = &self.conn.client;
        let make = self.sql(
            "INSERT INTO {s}.seq_seen (agent, state) VALUES ($1, '{}') ON CONFLICT DO NOTHING",
        );
        let load = self.sql("SELECT state FROM {s}.seq_seen WHERE agent = $1 FOR UPDATE");
        let loaded = self.conn.call(
            &format!("reading what {agent} has seen"),
            futures_util::future::try_join3(
                c.batch_execute(
                    "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '10s'",
                ),
                c.execute_typed(&make, &[(&a, Type::TEXT)]),
                c.query_typed_one(&load, &[(&a, Type::TEXT)]),
            ),
        );
        let done = loaded.and_then(|((), _, row)| {
            let before = parse(&row.get::<_, String>(0))?;
            let mut after = before.clone();
            change(&mut after)?;
            if after != before {
                let text = serde_json::to_string(&after).unwrap_or_default();
                self.exec(
                    &format!("saving what {agent} has seen"),
                    "UPDATE {s}.seq_seen SET state = $2 WHERE agent = $1",
                    &[(&a, Type::TEXT), (&text, Type::TEXT)],
                )?;
            }
            Ok((before, after))
        });
        match done {
            Ok(v) => {
                self.conn.call("committing lastSeen", c.batch_execute("COMMIT"))?;
                Ok(v)
            }
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    pub(super) fn receivers(&self) -> Result<Vec<(AgentName, Receiver)>> {
        let v = self.rows(
            "reading every lastSeen",
            "SELECT agent, state FROM {s}.seq_seen ORDER BY agent",
            &[],
            |r| Ok((AgentName::new(r.get::<_, String>(0))?, parse(&r.get::<_, String>(1))?)),
        )?;
        Ok(v.into_iter().filter(|(_, r)| !r.senders.is_empty()).collect())
    }
}

fn parse(text: &str) -> Result<Receiver> {
    serde_json::from_str(text)
        .map_err(|e| Error::internal(format!("a lastSeen row does not read: {e}")))
}
