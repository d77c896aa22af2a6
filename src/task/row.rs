//! One task on the board (`circe tasks`): the fields a person scans, without the records.

use std::borrow::Cow;

use serde::Serialize;

use super::lifecycle::Status;
use super::record::{Checks, StatusRecord};

/// One task on the board; borrows from the engine's index where it can.
#[derive(Debug, Clone, Serialize)]
pub struct Row<'a> {
    #[serde(rename = "task_id")]
    pub task: Cow<'a, str>,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<Cow<'a, str>>,
    pub created_at: Cow<'a, str>,
    /// The last change of status (for a waiting task: when it started waiting).
    pub updated_at: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<Cow<'a, str>>,
    pub intent: Cow<'a, str>,
    pub to: Cow<'a, str>,
    pub priority: Cow<'a, str>,
    pub checks_passed: usize,
    pub checks_total: usize,
    /// Of the passed checks, how many were asserted rather than run.
    pub checks_asserted: usize,
    /// When it must be completed by (`claim --next` takes a task with one first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Cow<'a, str>>,
    /// The names of the checks its `.checks` lists, comma separated (empty: none), so a
    /// reader can count the checks the registry requires now that it does not list
    /// (`Workspace::demanded_row`).
    #[serde(skip)]
    pub checks_listed: Cow<'a, str>,
}

impl Row<'_> {
    /// A waiting task's place in `claim --next`'s order, lowest first: priority, then
    /// deadline (none last), then time waiting (`wait --for claimable` and `inbox` name the
    /// task `claim --next` takes).
    pub fn next_order(&self) -> (u8, bool, Option<&str>, &str) {
        let rank = crate::message::rank_of(&self.priority);
        (rank, self.deadline.is_none(), self.deadline.as_deref(), &self.updated_at)
    }

    /// Does its `.checks` list the check `name`?
    pub fn lists_check(&self, name: &str) -> bool {
        !self.checks_listed.is_empty() && self.checks_listed.split(',').any(|c| c == name)
    }

    /// The same row, owning its text.
    pub fn into_owned(self) -> Row<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        Row {
            task: own(self.task),
            status: self.status,
            owner: self.owner.map(own),
            created_at: own(self.created_at),
            updated_at: own(self.updated_at),
            lease_expires_at: self.lease_expires_at.map(own),
            intent: own(self.intent),
            to: own(self.to),
            priority: own(self.priority),
            checks_passed: self.checks_passed,
            checks_total: self.checks_total,
            checks_asserted: self.checks_asserted,
            deadline: self.deadline.map(own),
            checks_listed: own(self.checks_listed),
        }
    }
}

/// The row of a task's records.
pub fn row_of(rec: &StatusRecord, checks: &Checks) -> Row<'static> {
    Row {
        task: Cow::Owned(rec.task_id.to_string()),
        status: rec.status,
        owner: rec.owner.as_ref().map(|o| Cow::Owned(o.to_string())),
        created_at: Cow::Owned(rec.created_at.clone()),
        updated_at: Cow::Owned(rec.updated_at.clone()),
        lease_expires_at: rec.lease_expires_at.clone().map(Cow::Owned),
        intent: Cow::Owned(rec.intent.clone()),
        to: Cow::Owned(rec.to.clone()),
        priority: Cow::Owned(rec.priority.clone()),
        checks_passed: checks.values().filter(|v| **v).count(),
        checks_total: checks.len(),
        checks_asserted: rec.asserted.iter().filter(|c| checks.get(*c) == Some(&true)).count(),
        deadline: rec.deadline.clone().map(Cow::Owned),
        checks_listed: Cow::Owned(
            checks.keys().map(crate::names::CheckName::as_str).collect::<Vec<_>>().join(","),
        ),
    }
}
