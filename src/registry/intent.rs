//! `Intent`: one row of the registry, saying who may send it to whom and what it does to tasks.

use serde::Serialize;

use super::roles::Roles;

/// One message intent and its rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Intent {
    /// The `intent:` header value, e.g. `implement_feature` or `task-complete`.
    pub name: String,
    /// One line for `circe registry`.
    pub description: String,
    /// Roles that may send it.
    pub from: Roles,
    /// Roles that may receive it.
    pub to: Roles,
    /// Sending it opens a task (named by its `task_id`).
    pub opens_task: bool,
    /// A message with this intent must carry a `task_id` header. Always true when `opens_task`.
    pub needs_task_id: bool,
    /// The intent a recipient answers with, e.g. `ask` expects `ask-response`.
    pub expects_reply: Option<String>,
    /// Checks that must be true before a task opened by this intent may be marked completed.
    pub required_checks: Vec<String>,
}
