//! The operations circe offers, written against the engine seam: sending, claiming, moving a
//! task through its lifecycle, filing messages. Each task operation runs in one task
//! transaction and commits one `Change` the task model computed.

pub mod archive;
pub mod asks;
pub mod bridge;
mod claim;
pub mod deadline;
pub mod doctor;
mod find;
pub mod hook;
mod notify;
mod open;
pub mod orphans;
pub mod prompt;
pub mod proof;
pub mod questions;
mod read;
pub mod route;
mod send;
pub mod seq;
pub mod seq_state;
pub mod stream;
pub mod thread;
mod tx;
mod update;
pub mod wait;

pub use claim::{ClaimOutcome, claim, claim_dry, claim_next, claim_with, reap, reap_all};
pub use find::{Found, done, find, find_in, messages_of, take};
pub use notify::check_escalation;

/// What circe.yaml's rules name that is no agent or role of the root (`escalation`,
/// `routing`): each an error every command but the setup ones refuses with (section 16).
pub fn rule_name_errors(ws: &crate::workspace::Workspace) -> Vec<crate::error::Error> {
    let routing = if ws.config.routing.is_empty() { Ok(()) } else { route::check_names(ws) };
    [routing, check_escalation(ws)].into_iter().filter_map(Result::err).collect()
}
pub use open::OpenOutcome;
pub use prompt::current_prompt;
pub use questions::{Question, questions};
pub use read::{first_problem, read};
pub use send::{DeliveredCopy, Delivery, check_draft_routing, send};
pub use update::{
    CheckRun, check_assert, check_run, check_set, check_to_run, declared_check, heartbeat, release,
    run_check_hint, set_status, set_status_idempotent, set_status_sending,
};

/// Where an archived task is read: `show` (`shown`, said so) on a root that keeps its
/// archive; else the folder a database root came from, whose archive stayed behind
/// (`circe migrate --to`).
pub(crate) fn where_archived(
    ws: &crate::workspace::Workspace,
    t: &crate::archive::Tombstone,
    shown: String,
) -> String {
    if ws.engine.keeps_archive() {
        return shown;
    }
    format!(
        "it was archived in the folder this root moved from, and its archive stayed there ({}): read it in a copy of that folder, as its MIGRATED.txt says",
        t.bundle()
    )
}

/// Where an archived task lies, as facts in an error's details, in the words `show` uses:
/// `period`, `segment` (the file's name in `ARCHIVE/<period>/`), `bundle` (the folder its
/// members lie under in the segment) and `archived_at`.
pub(crate) fn archived_details(
    e: crate::error::Error,
    t: &crate::archive::Tombstone,
) -> crate::error::Error {
    e.detail("period", t.period.clone())
        .detail("segment", t.segment.clone())
        .detail("bundle", t.members())
        .detail("archived_at", t.archived_at.clone())
}

/// Why `task` is not on the board: archived (its tombstone says how it ended; refused, exit
/// 3, with where to read it), else unknown (exit 5).
pub fn missing_task(
    ws: &crate::workspace::Workspace,
    task: &crate::names::TaskId,
) -> crate::error::Error {
    match ws.engine.archived_task(task) {
        Ok(Some(t)) => {
            let e = crate::error::Error::refused(format!(
                "task {task} was archived ({}, archived on {}): it is no longer on the board",
                t.status, t.archived_at
            ));
            return archived_details(e.about_task(task.as_str()), &t).hint(where_archived(
                ws,
                &t,
                format!("`circe show {task}` shows it from the archive"),
            ));
        }
        // Its tombstone is of a newer circe's format: said as `send` says it (exit 3).
        Err(e) if e.exit_code() == crate::exit_code::REFUSED => return e,
        _ => {}
    }
    // The closest task id, whatever the case it was typed in (`auth-012`).
    let ids = ws.engine.task_ids().unwrap_or_default();
    let lower: Vec<String> = ids.iter().map(|t| t.as_str().to_ascii_lowercase()).collect();
    let near = crate::suggest::closest(task.as_str(), lower.iter().map(String::as_str))
        .and_then(|l| ids.iter().find(|t| t.as_str().eq_ignore_ascii_case(l)));
    match near {
        // Listed under that very id, yet not found: its record is no record (a folder in
        // its place, say).
        Some(t) if t == task => crate::error::Error::not_found(format!(
            "task `{task}` is listed, but its record cannot be read"
        ))
        .hint("`circe doctor` says what stands in its place"),
        Some(t) => crate::error::Error::not_found(format!("no task `{task}`"))
            .hint(format!("did you mean `{t}`? `circe tasks` lists the tasks")),
        None => crate::engine::no_task(task),
    }
}

#[cfg(test)]
mod tests;
