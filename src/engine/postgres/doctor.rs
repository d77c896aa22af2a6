//! The database engine's invariants, checked in SQL for `circe doctor`. A task's commit is
//! one transaction, so nothing of it is ever half-done; but for a send's or a move's events
//! (invariant 1), these find damage from outside (hand edits, a restore) or a bug. The
//! numbers follow the local engine's where the invariant is the same
//! (PROTOCOLS.md section 8), and add the feed's:
//!
//! 1. no send or move left the journal of its events (a client killed between its
//!    statement and its events: `journal.rs`); repair logs them;
//! 2. every message's file name is one plain name (a folder could hold it: no `/`, not
//!    hidden), so a mirror or a move into a folder writes nothing outside it;
//! 3. every message parses;
//! 4. every task's message lies in the box its row names, in that box alone, and that box
//!    agrees with the status (a held task's: its owner's; one that names no owner is 5's);
//! 5. the `.owner` part (owner, claimed_at, lease) exists while the task is held (the line
//!    names what is missing, and for a missing owner where the message lies), no lease
//!    while it is not, and no owner while it waits;
//! 6. every message in NEW_MESSAGES is the current message of its task;
//! 7. event ids are 1..=feed.last without a gap, and every line is one this circe reads
//!    (not of a newer format: readers stop there) and whole as circe writes it;
//! 8. every agent box belongs to an agent;
//! 10. the role circe connects as may run the flush that makes a task's commit durable
//!     (`conn::FLUSH`): without it every task change fails with an unknown outcome.

use tokio_postgres::types::Type;

use super::PgEngine;
use super::conn::flush_function;
use crate::engine::{Fix, Violation};
use crate::error::Result;
use crate::event;
use crate::message::{self, Mode};

/// Each check: its invariant and a query returning one text per violation.
const CHECKS: [(u8, &str); 9] = [
    (
        2,
        "SELECT m.box || ': `' || m.file || '` is no plain file name (a mirror or a move into a folder refuses it)'
           FROM {s}.messages m
          WHERE m.file = '' OR m.file LIKE '.%' OR strpos(m.file, '/') > 0
          ORDER BY m.box, m.file",
    ),
    (
        4,
        "SELECT 'task ' || t.task_id || ': its message ' || t.message || ' is not in ' || t.ticket
                || coalesce(' but in ' || (SELECT string_agg(m.box, ', ' ORDER BY m.box)
                                             FROM {s}.messages m WHERE m.file = t.message),
                            ', nor in any other box (removed by hand: put it back from a backup or a mirror)')
           FROM {s}.tasks t
          WHERE NOT EXISTS (SELECT 1 FROM {s}.messages m WHERE m.box = t.ticket AND m.file = t.message)
          ORDER BY t.task_id",
    ),
    (
        4,
        "SELECT 'task ' || t.task_id || ': its message ' || t.message || ' lies in '
                || count(*) || ' boxes (' || string_agg(m.box, ', ' ORDER BY m.box)
                || '); it belongs in ' || t.ticket || ' alone: delete the other rows of messages'
           FROM {s}.tasks t JOIN {s}.messages m ON m.file = t.message
          GROUP BY t.task_id, t.message, t.ticket
         HAVING count(*) > 1
          ORDER BY t.task_id",
    ),
    (
        4,
        "SELECT 'task ' || task_id || ' is ' || status || ' but its message is in ' || ticket
           FROM {s}.tasks
          WHERE (status IN ('new', 'parked') AND ticket <> 'new')
             OR (status IN ('claimed', 'in_progress', 'blocked') AND owner IS NOT NULL
                 AND ticket NOT IN ('inbox:' || owner, 'workspace:' || owner))
          ORDER BY task_id",
    ),
    (
        5,
        "SELECT 'task ' || task_id || ' is ' || status || ': ' || CASE
                  WHEN status IN ('claimed', 'in_progress', 'blocked')
                    THEN 'it is held, but ' || concat_ws(', ',
                           CASE WHEN owner IS NULL
                                THEN 'it names no owner (its message lies in ' || ticket || ')' END,
                           CASE WHEN claimed_at IS NULL THEN 'its claim time is missing' END,
                           CASE WHEN lease_expires_at IS NULL OR lease_until IS NULL
                                THEN 'its lease is missing' END)
                  WHEN lease_expires_at IS NOT NULL OR lease_until IS NOT NULL
                    THEN 'it is not held, but it has a lease'
                  ELSE 'it waits, but it names an owner (' || owner || ')' END
                || '; `circe show ' || task_id || '` and `circe log --task ' || task_id
                || '` tell what it should be'
           FROM {s}.tasks
          WHERE (status IN ('claimed', 'in_progress', 'blocked')
                 AND (claimed_at IS NULL OR owner IS NULL OR lease_expires_at IS NULL
                      OR lease_until IS NULL))
             OR (status NOT IN ('claimed', 'in_progress', 'blocked')
                 AND (lease_expires_at IS NOT NULL OR lease_until IS NOT NULL))
             OR (status IN ('new', 'parked') AND owner IS NOT NULL)
          ORDER BY task_id",
    ),
    (
        6,
        "SELECT 'NEW_MESSAGES/' || m.file || ' is no task''s current message'
           FROM {s}.messages m
          WHERE m.box = 'new'
            AND NOT EXISTS (SELECT 1 FROM {s}.tasks t WHERE t.ticket = 'new' AND t.message = m.file)
          ORDER BY m.file",
    ),
    (
        7,
        "WITH b AS (SELECT coalesce((SELECT value::int8 FROM {s}.meta WHERE key = 'imported_last'), 0) AS base)
         SELECT 'the event log holds ' || count(*) || ' events with ids '
                || coalesce(min(id), 0) || '..' || coalesce(max(id), 0)
                || CASE WHEN (SELECT base FROM b) > 0
                        THEN ' after id ' || (SELECT base FROM b) || ' (the newest the migration brought)' ELSE '' END
                || ' but the feed is at ' || (SELECT last FROM {s}.feed)
           FROM {s}.events
          WHERE id > (SELECT base FROM b)
         HAVING count(*) <> (SELECT last FROM {s}.feed) - (SELECT base FROM b)
             OR coalesce(max(id), (SELECT base FROM b)) <> (SELECT last FROM {s}.feed)
             OR coalesce(min(id), (SELECT base FROM b) + 1) <> (SELECT base FROM b) + 1",
    ),
    (
        8,
        "SELECT DISTINCT 'messages in ' || m.box || ', but there is no agent ' || m.owner
                || ': `circe agent add ' || m.owner || ' --role ROLE` makes it again'
           FROM {s}.messages m
          WHERE m.owner IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {s}.agents a WHERE a.name = m.owner)",
    ),
    (
        10,
        concat!(
            "SELECT 'the role circe connects as (' || current_user || ') may not run '
                || 'pg_logical_emit_message, the flush after every task change (PROTOCOLS.md '
                || 'section 18, \"Durable before seen\"): every claim and task change ends '
                || 'with its outcome unknown; as the function''s owner, `GRANT EXECUTE ON '
                || 'FUNCTION ",
            flush_function!(),
            " TO ' || quote_ident(current_user) || '` mends it'
          WHERE NOT has_function_privilege('",
            flush_function!(),
            "', 'EXECUTE')"
        ),
    ),
];

pub(super) fn run(eng: &PgEngine, repair: bool) -> Result<Vec<Violation>> {
    let mut out = Vec::new();
    // 1. A send or a move cut off between its statement and its events (`journal.rs`):
    // repair logs them (every journal, a live command's too: whoever deletes it logs).
    let what = |key: &str, id: &str| {
        format!(
            "journal {key} (message {id}): a send or a move left the journal of its events (cut off, or failed)"
        )
    };
    if repair {
        for (key, id, n) in eng.settle_journals(super::journal::Which::All)? {
            let what = format!("{} ({n} events logged)", what(&key, &id));
            out.push(Violation::new(1, what, Fix::Done, true));
        }
    } else {
        for (key, id) in eng.journals_left()? {
            out.push(Violation::new(1, what(&key, &id), Fix::Repair, false));
        }
    }
    for (invariant, q) in CHECKS {
        for what in eng.rows("checking the root", q, &[], |r| Ok(r.get::<_, String>(0)))? {
            out.push(Violation::by_hand(invariant, what));
        }
    }
    check_event_lines(eng, &mut out)?;
    // Invariant 3 needs the parser: read the messages in pages, oldest key first.
    let mut after = (String::new(), String::new());
    loop {
        let page = eng.rows(
            "reading messages",
            "SELECT box, file, body FROM {s}.messages WHERE (box, file) > ($1, $2)
              ORDER BY box, file LIMIT 500",
            &[(&after.0, Type::TEXT), (&after.1, Type::TEXT)],
            |r| Ok((r.get::<_, String>(0), r.get::<_, String>(1), r.get::<_, Vec<u8>>(2))),
        )?;
        let Some(last) = page.last() else { break };
        after = (last.0.clone(), last.1.clone());
        for (b, f, body) in &page {
            if let Err(problems) = message::parse_bytes(body, Mode::Stored) {
                let first = problems.first().map(ToString::to_string).unwrap_or_default();
                out.push(Violation::by_hand(3, format!("{b}/{f} does not parse: {first}")));
            }
        }
    }
    out.sort_by_key(|v| v.invariant);
    Ok(out)
}

/// Invariant 7 for the lines of the event log: a line of a format newer than this circe
/// reads (every reader stops at it, as at such a line of a local root's log), and one that
/// is no whole line as circe writes it (every reader passes it over). The rows not plainly
/// of this circe's own shape are read in pages, in id order; the first few of each are said.
fn check_event_lines(eng: &PgEngine, out: &mut Vec<Violation>) -> Result<()> {
    const NEWER: usize = 5;
    const DAMAGED: usize = 20;
    let (mut newer, mut damaged, mut after) = (0, 0, 0_i64);
    let max = i64::from(event::FORMAT);
    while newer < NEWER || damaged < DAMAGED {
        let page = eng.rows(
            "checking the event log",
            r#"SELECT id, line FROM {s}.events
                WHERE id > $1 AND (right(line, 1) <> '}'
                   OR coalesce(substring(line from '^\{"id":0,"v":([0-9]{1,9})[,}]')::int8 > $2, true))
                ORDER BY id LIMIT 500"#,
            &[(&after, Type::INT8), (&max, Type::INT8)],
            |r| Ok((r.get::<_, i64>(0), r.get::<_, String>(1))),
        )?;
        let Some(last) = page.last() else { break };
        after = last.0;
        for (id, line) in &page {
            if let Some(v) = event::newer_format_of_row(line) {
                newer += 1;
                if newer <= NEWER {
                    out.push(Violation::by_hand(
                        7,
                        format!(
                            "event {id} in {} is of format {v}, newer than this circe reads ({}): `watch` and `log` stop at it; a newer circe wrote it (upgrade every agent's circe: README, Upgrading) or it was added by hand (delete that row)",
                            eng.events_table(),
                            event::FORMAT
                        ),
                    ));
                }
            } else if !line.starts_with("{\"id\":0,") || !line.ends_with('}') {
                damaged += 1;
                if damaged <= DAMAGED {
                    out.push(Violation::by_hand(
                        7,
                        format!(
                            "event {id} of the event log is no whole line as circe writes it (edited by hand?): where it does not parse, every reader passes it over; put back what it said, or leave it, knowing `log`, `watch` and the task's checks may not see it"
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}
