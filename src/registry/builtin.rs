//! The built-in registry table: the CIRCE intents, the TX message types, and the standard roles.
//!
//! PROTOCOLS.md (from `PROTOCOL_NOTES.md`) mirrors this table; change both together.
//! Wherever the coordinator may send an intent, the rooster (the human) may too: the table
//! spells `rooster` out rather than adding it at run time, so what you read is what applies.

use super::intent::Intent;
use super::roles::Roles;

/// The roles every registry knows. `rooster` is the human.
pub const BUILTIN_ROLES: [&str; 6] =
    ["coordinator", "engineer", "qa", "scribe", "eagle", "rooster"];

/// Sender or recipient side of a row: `ANY`, or role names joined with `|`.
const ANY: &str = "any";

/// One row: name, from, to, opens task, needs task id, reply, checks, description.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    bool,
    bool,
    Option<&'static str>,
    &'static [&'static str],
    &'static str,
);

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // Task management (CIRCE): each opens a task named by its task_id.
    ("implement_feature", "coordinator|rooster", "engineer", true, true, Some("status_update"), &["tests_passed"], "request feature implementation"),
    ("fix_bug", ANY, "engineer", true, true, Some("status_update"), &["tests_passed"], "request a bug fix"),
    ("refactor", "coordinator|engineer|rooster", "engineer", true, true, Some("status_update"), &["tests_passed"], "request a code quality improvement"),
    ("review_code", "engineer", "engineer|scribe", true, true, None, &["peer_reviewed"], "request peer review"),
    ("test", "engineer", "qa", true, true, Some("test_results"), &["tests_passed"], "request testing"),
    ("audit", "scribe", "eagle", true, true, Some("audit_report"), &[], "request an audit"),
    ("document", ANY, "scribe", true, true, None, &[], "request documentation"),
    // Coordination (CIRCE).
    ("status_update", ANY, "coordinator", false, false, None, &[], "share progress"),
    ("request_help", ANY, ANY, false, false, Some("answer"), &[], "ask for assistance"),
    ("claim_task", ANY, "coordinator", false, true, None, &[], "declare ownership of a task"),
    ("release_task", ANY, "coordinator", false, true, None, &[], "free a task for others"),
    ("coordinate", ANY, ANY, false, false, None, &[], "synchronize work between agents"),
    // Communication (CIRCE).
    ("question", ANY, ANY, false, false, Some("answer"), &[], "ask a clarifying question"),
    ("answer", ANY, ANY, false, false, None, &[], "answer a question"),
    ("escalate", ANY, "coordinator|rooster", false, false, Some("answer"), &[], "request a human decision"),
    ("inform", ANY, ANY, false, false, None, &[], "share information"),
    // Quality (CIRCE).
    ("test_results", "qa", "coordinator|engineer", false, true, None, &[], "share test outcomes"),
    ("audit_report", "eagle", "coordinator|scribe", false, true, None, &[], "share audit findings"),
    ("approval_request", ANY, "coordinator|rooster", false, false, Some("answer"), &[], "request approval or sign-off"),
    // TX message types.
    ("ask", ANY, ANY, false, false, Some("ask-response"), &[], "request information and wait for the answer"),
    ("ask-response", ANY, ANY, false, false, None, &[], "answer an ask"),
    ("task", ANY, ANY, true, true, Some("task-complete"), &[], "assign work, non-blocking"),
    ("task-complete", ANY, ANY, false, true, None, &[], "report a task finished"),
    ("update", ANY, ANY, false, false, None, &[], "one-way information, no reply expected"),
    ("prompt", "coordinator|rooster", ANY, false, false, None, &[], "inject an agent's prompt"),
];

fn roles(spec: &str) -> Roles {
    if spec == ANY { Roles::Any } else { Roles::only(spec.split('|')) }
}

/// The built-in intents, in table order.
pub fn builtin_intents() -> Vec<Intent> {
    ROWS.iter()
        .map(|&(name, from, to, opens_task, needs_task_id, reply, checks, description)| Intent {
            name: name.to_owned(),
            description: description.to_owned(),
            from: roles(from),
            to: roles(to),
            opens_task,
            needs_task_id,
            expects_reply: reply.map(str::to_owned),
            required_checks: checks.iter().map(|&c| c.to_owned()).collect(),
        })
        .collect()
}
