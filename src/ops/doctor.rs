//! `circe doctor`: the engine's invariants, and the domain's own: consumers' cursors, the
//! checks a task's intent requires, the names circe.yaml's rules use.
//!
//! Invariant 7: every event-log cursor parses, can still read its next event (none was
//! archived out from under it), and is not stale (behind the log and unmoved for
//! `STALE_AFTER`: a consumer that died or hangs).

use crate::engine::{Fix, Violation};
use crate::error::Result;
use crate::event::Cursor;
use crate::names::CheckName;
use crate::workspace::Workspace;

use super::stream::{KIND, SavedCursor};

/// A cursor behind the log that has not moved for this long is reported.
const STALE_AFTER: chrono::Duration = chrono::Duration::days(7);

pub fn run(ws: &Workspace, repair: bool) -> Result<Vec<Violation>> {
    let mut found = ws.engine.doctor(repair)?;
    asks_left_answering(ws, repair, &mut found)?;
    checks_missing(ws, &mut found);
    // Invariant 9: the rules name agents or roles of the root (every other command refuses
    // to run while one does not).
    // And every agent's role is a role of the registry.
    for e in super::rule_name_errors(ws).into_iter().chain(ws.agents_with_unknown_role()) {
        let hint = e.hint.map(|h| format!(": {h}")).unwrap_or_default();
        found.push(Violation::by_hand(9, format!("{}{hint}", e.message)));
    }
    let last = match ws.engine.last_event_id() {
        Ok(last) => last,
        // Said as what it is, with what the engine found (it may name the cause).
        Err(e) => {
            let what = format!(
                "the cursors were not checked: the log's newest id does not read ({})",
                e.message
            );
            found.push(Violation::by_hand(7, what));
            return Ok(found);
        }
    };
    for (kind, name) in ws.engine.cursors()? {
        if kind != KIND {
            continue;
        }
        let mut v = |what: String| found.push(Violation::by_hand(7, what));
        // One that cannot be read (a FIFO or a folder in its place: invariant 2, which
        // `--repair` moves away) is said, and the others are still checked.
        let raw = match ws.engine.read_cursor(&kind, &name) {
            Ok(raw) => raw.unwrap_or_default(),
            // A link, a pipe or a folder in its place: the engine's invariant 2 named it
            // already, as `--repair`'s to move away.
            Err(e) if e.details.iter().any(|(k, v)| *k == "planted" && *v == true) => continue,
            Err(e) => {
                v(format!("cursor {name}: {}", e.message));
                continue;
            }
        };
        // What mends a cursor doctor leaves: removing it (its consumer then starts afresh).
        let remove = super::stream::afresh(name.as_str());
        let c = match SavedCursor::parse(&name, &raw) {
            Ok(c) => c,
            Err(e) => {
                v(format!("cursor {name}: {}: {}", e.message, e.hint.unwrap_or(remove)));
                continue;
            }
        };
        if c.after > last {
            v(format!(
                "cursor {name} has passed event {}, but the log's newest is {last}: the events up to {} will not reach its consumer (a cursor edited by hand, or a log put back from an older copy): {remove}",
                c.after, c.after
            ));
            continue;
        }
        if c.after == last {
            continue;
        }
        // A line this circe cannot read stops its consumer there: said (the log's own check
        // names the line), not a failure of doctor.
        let next = match ws.engine.read_events(Cursor::after(c.after), 1) {
            Err(e) if e.kind == crate::error::Kind::Refused => {
                v(format!("cursor {name} cannot go on: {}", e.message));
                continue;
            }
            r => r?,
        };
        if next.first().is_none_or(|e| e.id != c.after + 1) {
            v(format!(
                "cursor {name} needs event {}, which is no longer in the log: {remove}",
                c.after + 1
            ));
            continue;
        }
        let moved = crate::clock::parse(&c.saved_at);
        if moved.is_some_and(|t| ws.now() - t > STALE_AFTER) {
            v(format!(
                "cursor {name} is {} events behind and last moved at {} (its consumer may be gone): `circe cursors --remove {name}` if it is",
                last - c.after,
                c.saved_at
            ));
        }
    }
    Ok(found)
}

/// Invariant 5 for checks: a task not finished lists in its checks every check its intent
/// requires (a `.checks` lost or cut by hand). Reported only: the completion gate counts a
/// missing one as not passed, and `circe check` records it.
fn checks_missing(ws: &Workspace, found: &mut Vec<Violation>) {
    let mut open = Vec::new();
    // A board or a record that does not read is the engine's invariants' to report.
    let _ = ws.engine.board(&mut |r| {
        let required = ws.registry.intent(&r.intent).map_or(0, |i| i.required_checks.len());
        if required > 0 && !r.status.is_terminal() {
            open.extend(crate::names::TaskId::new(r.task.as_ref()).ok());
        }
        Ok(())
    });
    for task in open {
        let Ok(Some(st)) = ws.engine.peek(&task) else { continue };
        let unlisted = ws.unlisted_checks(&st.rec.intent, &|c| st.checks.keys().any(|k| k == c));
        let missing: Vec<&str> = unlisted.iter().map(CheckName::as_str).collect();
        if !missing.is_empty() {
            // Recorded by its holder (a waiting task is claimed first).
            // A check declared in circe.yaml runs its own command.
            let run = if ws.config.checks.contains_key(missing[0]) {
                format!("--run {}", missing[0])
            } else {
                format!("--run {} -- COMMAND", missing[0])
            };
            let how = match st.rec.owner.as_ref().filter(|_| st.rec.status.is_owned()) {
                Some(o) => {
                    format!("`circe --agent {o} check {task} {run}` records one")
                }
                None => format!(
                    "once it is claimed, its holder records one: `circe --agent AGENT check {task} {run}`"
                ),
            };
            found.push(Violation::by_hand(
                5,
                format!(
                    "task {task} does not list check(s) {} that its intent {} requires: they count as not passed; {how}",
                    missing.join(", "),
                    st.rec.intent
                ),
            ));
        }
    }
}

/// Invariant 1 for asks: none is left `answering` by a command that is gone (an answer cut
/// off between its mark and its end). `--repair` settles it as any reader of the ask would:
/// answered when its answer was delivered, else open again. One under way is left alone.
fn asks_left_answering(ws: &Workspace, repair: bool, found: &mut Vec<Violation>) -> Result<()> {
    use crate::tx::AskState;
    for r in ws.engine.asks()? {
        if r.state != AskState::Answering {
            continue;
        }
        let id = r.msg_id.clone();
        let (what, repaired) = if repair {
            let after = super::asks::settle(ws, r)?;
            if after.state == AskState::Answering {
                continue; // its answer is under way
            }
            (
                format!(
                    "ask {id} was left answering by a command cut off (now {})",
                    after.state.as_str()
                ),
                true,
            )
        } else {
            // Held by its answerer: under way, not left.
            if ws.engine.hold_ask(&id, false)?.is_none() {
                continue;
            }
            (format!("ask {id} was left answering by a command cut off"), false)
        };
        found.push(Violation::new(1, what, Fix::done_if(repaired), repair));
    }
    Ok(())
}
