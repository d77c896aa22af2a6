//! The events of a delivery, or of a move of a message that is no task's ticket, kept until
//! they are logged (PROTOCOLS.md sections 6 and 18; table `event_journals`, schema 6).
//!
//! The delivering (or moving) statement inserts the journal's row in a data-modifying
//! `WITH`, so the row exists exactly when that statement committed. The sender's append of
//! the events deletes the row in the same statement and appends only when it deleted it; a
//! settler (`doctor --repair`, a send naming its own id, the sender itself after a failed
//! append, the sender's next send for its numbered deliveries) deletes it and logs the
//! events, the copies named as they lie, in one transaction. Whoever deletes the row logs:
//! the events are logged once, and no lock is held across a round trip.

use tokio_postgres::types::Type;

use super::PgEngine;
use crate::error::Result;
use crate::event::{self, Event, Line};

/// A journal kept on this connection, from `journal_events` (or `journal_move`) until the
/// append of its events or `close_journal`.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    pub key: String,
    pub msg_id: String,
    pub lines: Vec<String>,
    /// The key its row is stored under, set by the statement that carries it: `key`, marked
    /// `UNNUMBERED` unless that statement delivers its sender's number.
    pub row: String,
    /// Its row was inserted: the statement that carried it committed.
    pub inserted: bool,
}

/// Which journals a settling takes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Which<'a> {
    /// This one (its command's append failed).
    Key(&'a str),
    /// Those whose command is gone: its backend ended, or the row is over 10 seconds old
    /// (through a pooler, a killed client's backend lives on); and those of a message whose
    /// id the caller holds (an earlier try's, however recent).
    Left(Option<&'a str>),
    /// Those of this sender's numbered deliveries (the first event's `agent`, the row not
    /// marked `UNNUMBERED`), whoever made them: taken under the sender's hold before its next
    /// send logs anything, so that a sender's events follow its numbers. Such a row's command
    /// logs it before it lets the hold go, so one found under the hold is a cut-off command's.
    /// It waits for a row another settler holds (that settler logs it first).
    Sender(&'a str),
    /// Every one (`doctor --repair`).
    All,
}

/// The values of `journal_cte`, in its order.
pub(super) fn params(p: &Pending) -> [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 3] {
    [(&p.row, Type::TEXT), (&p.msg_id, Type::TEXT), (&p.lines, Type::TEXT_ARRAY)]
}

/// The mark of a row whose statement delivered no number of its sender (a move, an import,
/// a delivery made without the sender's hold): its command may still be at work while the
/// sender holds its hold, and it carries no number to keep in order, so the sender's own
/// settling passes it over. A row without the mark (or from an older circe, which marks
/// none) is the sender's.
const UNNUMBERED: &str = "unnumbered-";

/// The journals of the sender `$n`'s numbered deliveries (`Which::Sender`).
pub(super) fn sender(n: usize) -> String {
    format!("((lines[1]::jsonb ->> 'agent') = ${n} AND key NOT LIKE '{UNNUMBERED}%')")
}

/// A journal whose command is gone: its backend ended (a direct connection), or it is over
/// 10 seconds old (through a pooler a killed client's backend lives on).
const LEFT: &str = "(made_at < now() - interval '10 seconds'
    OR backend NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL))";

/// What a settler writes into an event it logs.
const LATE: &str = "logged late: the command that made it stopped before logging it";

impl PgEngine {
    /// Keep the events of a delivery (or a move) of `msg_id` about to be made: the
    /// next delivering or moving statement inserts them. Returns the journal's name.
    pub(super) fn keep_journal(&self, msg_id: &str, events: &[Event]) -> Option<String> {
        // A task transaction logs its events in its commit; no events, nothing to keep.
        if self.open_tx.get() || !kept() || events.is_empty() {
            return None;
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let key = format!("{}-{nanos}-{msg_id}", std::process::id());
        *self.journal.borrow_mut() = Some(Pending {
            key: key.clone(),
            msg_id: msg_id.to_string(),
            lines: events.iter().map(Event::to_line).collect(),
            row: key.clone(),
            inserted: false,
        });
        Some(key)
    }

    /// The journal the next delivering or moving statement carries, if one waits, its row's
    /// key marked `UNNUMBERED` unless that statement delivers its sender's number
    /// (`numbered`).
    pub(super) fn journal_to_insert(&self, numbered: bool) -> Option<Pending> {
        if self.open_tx.get() {
            return None;
        }
        let mut journal = self.journal.borrow_mut();
        let p = journal.as_mut().filter(|p| !p.inserted)?;
        p.row = if numbered { p.key.clone() } else { format!("{UNNUMBERED}{}", p.key) };
        Some(p.clone())
    }

    /// The `WITH` part that inserts a journal's row, its values from `$first` on
    /// (`params`) and its copies (`names`: the SQL of its boxes, the names they wanted and
    /// the names they got, each a `text[]`), when `when` holds.
    pub(super) fn journal_cte(first: usize, names: [&str; 3], when: &str) -> String {
        let values: Vec<String> = (first..first + 3).map(|i| format!("${i}")).collect();
        let [boxes, wanted, got] = names;
        format!(
            "j AS (INSERT INTO {{s}}.event_journals
                     (key, msg_id, lines, boxes, wanted, got)
                   SELECT {}, {boxes}, {wanted}, {got} WHERE {when})",
            values.join(", ")
        )
    }

    /// Run `update` (an `UPDATE` of one message, without `RETURNING`) and, when a journal
    /// waits, insert its row in the same statement when a row was updated; `names` as in
    /// `journal_cte` (the SQL of the box it moves to, the name it had and the name it gets).
    /// Returns the rows updated.
    pub(super) fn update_journaled(
        &self,
        what: &str,
        update: &str,
        values: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
        names: [&str; 3],
    ) -> Result<u64> {
        let journal = self.journal_to_insert(false);
        let Some(j) = &journal else { return self.exec(what, update, values) };
        let q = format!(
            "WITH u AS ({update} RETURNING 1), {} SELECT count(*)::int8 FROM u",
            Self::journal_cte(values.len() + 1, names, "EXISTS (SELECT 1 FROM u)")
        );
        let mut all: Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> =
            values.iter().map(|(v, t)| (*v, t.clone())).collect();
        all.extend(params(j));
        let n = self.rows(what, &q, &all, |r| Ok(r.get::<_, i64>(0)))?;
        let n = u64::try_from(n.first().copied().unwrap_or(0)).unwrap_or(0);
        if n > 0 {
            self.journal_inserted();
        }
        Ok(n)
    }

    /// The statement that carried the journal committed.
    pub(super) fn journal_inserted(&self) {
        if let Some(p) = self.journal.borrow_mut().as_mut() {
            p.inserted = true;
        }
    }

    /// The journal whose row the next append deletes: its key.
    pub(super) fn journal_to_log(&self) -> Option<String> {
        if self.open_tx.get() {
            return None;
        }
        self.journal.borrow().as_ref().filter(|p| p.inserted).map(|p| p.row.clone())
    }

    /// `Engine::close_journal`: the events were logged (the append deleted the row), or
    /// settle it now. Returns whether the delivery stands.
    pub(super) fn end_journal(&self, key: &str, logged: bool) -> Result<bool> {
        let pending = self.journal.borrow_mut().take_if(|p| p.key == key);
        let Some(p) = pending.filter(|p| p.inserted) else { return Ok(logged) };
        if !logged {
            self.settle_journals(Which::Key(&p.row))?;
        }
        Ok(true)
    }

    /// Log the events of the journals `which` selects, each with its row deleted, in one
    /// transaction; rows another settler holds are passed over. Returns (key, msg id,
    /// events logged) each.
    pub(super) fn settle_journals(&self, which: Which<'_>) -> Result<Vec<(String, String, usize)>> {
        self.settle(which, true)
    }

    /// `settle_journals` of journals a statement of the caller's has just found (the
    /// sender's counter read, `seq.rs`): without a look of its own.
    pub(super) fn settle_found(&self, which: Which<'_>) -> Result<Vec<(String, String, usize)>> {
        self.settle(which, false)
    }

    fn settle(&self, which: Which<'_>, look: bool) -> Result<Vec<(String, String, usize)>> {
        if self.open_tx.get() || !kept() {
            return Ok(Vec::new());
        }
        let (cond, key) = match which {
            Which::Key(k) => ("key = $1".to_string(), k),
            Which::Left(held) => (format!("(msg_id = $1 OR {LEFT})"), held.unwrap_or_default()),
            Which::Sender(a) => (sender(1), a),
            Which::All => ("$1 = ''".to_string(), ""),
        };
        // A sender's own settling waits for a row another settler holds, so that the row is
        // logged before the sender's next events; the others pass it over.
        let wait = matches!(which, Which::Sender(_));
        // Most often there is none: one look, outside any transaction.
        if look {
            let any = self.rows(
                "looking for journals",
                &format!("SELECT 1 FROM {{s}}.event_journals WHERE {cond} LIMIT 1"),
                &[(&key, Type::TEXT)],
                |_| Ok(()),
            )?;
            if any.is_empty() {
                return Ok(Vec::new());
            }
        }
        let c = &self.conn;
        c.call(
            "settling journals",
            c.client.batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED"),
        )?;
        let done = self.settle_in_tx(&cond, key, wait);
        let end = if done.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = c.call("settling journals", c.client.batch_execute(end));
        let done = done?;
        ended?;
        Ok(done)
    }

    /// The journals whose command is gone (`LEFT`), not settled: (key, msg id) each.
    pub(super) fn journals_left(&self) -> Result<Vec<(String, String)>> {
        if !kept() {
            return Ok(Vec::new());
        }
        self.rows(
            "reading journals",
            &format!(
                "SELECT key, msg_id FROM {{s}}.event_journals WHERE {LEFT} ORDER BY made_at, key"
            ),
            &[],
            |r| Ok((r.get::<_, String>(0), r.get::<_, String>(1))),
        )
    }

    fn settle_in_tx(
        &self,
        cond: &str,
        key: &str,
        wait: bool,
    ) -> Result<Vec<(String, String, usize)>> {
        type Row = (String, String, Vec<String>, [Vec<String>; 3]);
        let skip = if wait { "" } else { " SKIP LOCKED" };
        let rows = self.rows(
            "reading journals",
            &format!(
                "SELECT key, msg_id, lines, boxes, wanted, got FROM {{s}}.event_journals
                  WHERE {cond} ORDER BY made_at, key FOR UPDATE{skip}"
            ),
            &[(&key, Type::TEXT)],
            |r| -> Result<Row> {
                Ok((r.get(0), r.get(1), r.get(2), [r.get(3), r.get(4), r.get(5)]))
            },
        )?;
        let mut out = Vec::new();
        for (key, msg_id, lines, copies) in rows {
            let lines = as_made(&lines, &copies)?;
            let task: Option<String> = lines.first().and_then(|(t, _)| t.clone());
            let lines: Vec<String> = lines.into_iter().map(|(_, l)| l).collect();
            self.rows(
                "logging a journal's events",
                "WITH d AS (DELETE FROM {s}.event_journals WHERE key = $3 RETURNING 1)
                 SELECT {s}.append_events($1, $2, NULL) FROM d",
                &[(&task, Type::TEXT), (&lines, Type::TEXT_ARRAY), (&key, Type::TEXT)],
                |r| Ok(r.get::<_, i64>(0)),
            )?;
            out.push((key, msg_id, lines.len()));
        }
        Ok(out)
    }
}

/// A journal's events, marked as logged late, with every copy named as the statement made
/// it (`[boxes, wanted, got]`: a copy whose wanted name was taken got a numbered one,
/// `x.2.md`), as the sender would have logged them: (task, line) each.
fn as_made(lines: &[String], copies: &[Vec<String>; 3]) -> Result<Vec<(Option<String>, String)>> {
    let [boxes, wanted, got] = copies;
    let mut out = Vec::new();
    for line in lines {
        let Line::Event(mut e) = event::parse_line(line)? else { continue };
        for f in &mut e.files {
            let made = (0..boxes.len().min(wanted.len()).min(got.len()))
                .find(|&i| boxes[i] == f.mailbox && wanted[i] == f.file);
            if let Some(i) = made {
                f.file.clone_from(&got[i]);
            }
        }
        e.what = Some(LATE.to_string());
        out.push((e.task.as_ref().map(ToString::to_string), e.to_line()));
    }
    Ok(out)
}

/// Does this circe keep journals? (TEST BUILDS ONLY: not as the older circe that
/// `pg-schema-v2` stands for, whose schema has no `event_journals`.)
pub(super) fn kept() -> bool {
    super::schema::target() >= 6
}
