//! What the event log says of a task's checks. `.checks` holds only each check's result; the
//! log holds how it came to be (a run and its exit code, a coordinator's assertion, a
//! handoff that reset it). Completion takes a second look there, so a result written into
//! `.checks` by hand does not complete a task the log says is unproven. Only `check` events
//! count against a result: which checks a past handoff reset is read from today's registry
//! (its event names the intent only), which may have changed since, so a handoff is shown
//! (`show`) but never refuses.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::names::AgentName;
use crate::task::TaskState;
use crate::workspace::Workspace;

/// How many of the task's events each read back brings.
const BATCH: usize = 64;

/// Does `e` speak of check `name`: a `check` event of that name, or a handoff to an intent
/// that requires it (a handoff resets the checks its intent requires)?
pub fn speaks_of(ws: &Workspace, e: &Event, name: &str) -> bool {
    match e.event {
        EventKind::Check => e.check.as_deref() == Some(name),
        EventKind::Handoff => e
            .intent
            .as_deref()
            .and_then(|i| ws.registry.intent(i))
            .is_some_and(|i| i.required_checks.iter().any(|c| c.as_str() == name)),
        _ => false,
    }
}

/// What a `check` event says against a result `.checks` says passed (`None`: nothing).
fn against(e: &Event) -> Option<String> {
    match e.event {
        EventKind::Check if e.passed == Some(true) => None,
        EventKind::Check => {
            let how = match (e.how.as_deref(), e.exit_code) {
                (Some("run"), Some(code)) => format!("a run that exited {code}"),
                (Some(how), _) => format!("{how}, not passed"),
                (None, _) => "not passed".to_string(),
            };
            Some(format!("its last check event (id {}) is {how}, by {} at {}", e.id, e.agent, e.ts))
        }
        // Not a check event: it says nothing of a result.
        _ => None,
    }
}

/// Refuse (exit 3) the completion of `st` when the log says otherwise of a check its
/// `.checks` says passed: the check's last `check` event did not pass, or no `check` event
/// records it although the log holds the task's whole history (its
/// `open` event). A log that does not reach back that far (an older circe's lines, an
/// archived log) leaves `.checks` the word, as before. Read newest first, and only as far
/// back as the checks need. The hint names the holder (`by` for a task nobody holds), who
/// records checks.
pub fn refuse_unproven(ws: &Workspace, st: &TaskState, by: &str) -> Result<()> {
    let task = &st.rec.task_id;
    let mut open: BTreeSet<&str> =
        st.checks.iter().filter(|(_, passed)| **passed).map(|(k, _)| k.as_str()).collect();
    let mut said: Vec<(&str, String)> = Vec::new();
    let mut before = None;
    while !open.is_empty() {
        let batch = ws.engine.task_events_back(task, before, BATCH)?;
        let Some(oldest) = batch.last() else { break };
        before = Some(oldest.id);
        for e in &batch {
            if e.event == EventKind::Open {
                let never = "no check event records it, and the log holds the task's whole history";
                said.extend(open.iter().map(|c| (*c, never.to_string())));
                open.clear();
                break;
            }
            let speaks: Vec<&str> = open
                .iter()
                .copied()
                .filter(|c| e.event == EventKind::Check && e.check.as_deref() == Some(*c))
                .collect();
            for c in speaks {
                open.remove(c);
                said.extend(against(e).map(|why| (c, why)));
            }
        }
        if batch.len() < BATCH {
            break;
        }
    }
    let Some(&(first, _)) = said.first() else { return Ok(()) };
    let holder = st.rec.owner.as_ref().map_or(by, AgentName::as_str);
    let run = if ws.config.checks.contains_key(first) {
        format!("circe --agent {holder} check {task} --run {first}")
    } else {
        format!("circe --agent {holder} check {task} --run {first} -- <command that proves it>")
    };
    let said: Vec<String> = said.iter().map(|(c, why)| format!("{c}: {why}")).collect();
    Err(Error::refused(format!(
        "task {task} cannot be completed: TASKS/{task}.checks says passed what the event log does not: {}",
        said.join("; ")
    ))
    .hint(format!(
        "a check is recorded by circe, not by editing .checks (`circe show {task}` shows each check's last event): record it again, {run}"
    )))
}

#[cfg(test)]
mod tests {
    use super::against;
    use crate::event::{Event, EventKind};

    fn event(kind: EventKind) -> Event {
        let mut e = Event::new(kind, "e1", "2026-01-01T00:00:00Z".into());
        e.id = 7;
        e
    }

    #[test]
    fn what_the_log_says_against_a_passed_check() {
        let mut passed = event(EventKind::Check);
        passed.passed = Some(true);
        assert_eq!(against(&passed), None);
        let mut failed = event(EventKind::Check);
        (failed.passed, failed.how, failed.exit_code) = (Some(false), Some("run".into()), Some(2));
        assert_eq!(
            against(&failed).unwrap(),
            "its last check event (id 7) is a run that exited 2, by e1 at 2026-01-01T00:00:00Z"
        );
        (failed.how, failed.exit_code) = (Some("asserted".into()), None);
        assert!(against(&failed).unwrap().contains("is asserted, not passed"));
        // A handoff's reset is read from today's registry, which may have changed: shown by
        // `show`, never counted against a result.
        assert_eq!(against(&event(EventKind::Handoff)), None);
    }
}
