//! `circe registry`.

use std::collections::BTreeMap;

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::{Ctx, Report};
use crate::error::Result;
use crate::registry::{Registry, Roles};
use crate::workspace::Workspace;

/// The intents and who may send them to whom (built in, plus circe.yaml's changes).
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe registry\n  circe registry --json")]
pub struct RegistryArgs {}

/// `circe registry --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryJson {
    /// Every role in force.
    pub roles: Vec<String>,
    /// Every intent, by name.
    pub intents: BTreeMap<String, IntentJson>,
}

/// One intent's rules. `from` and `to` always list roles; `from_any`/`to_any` say the rule
/// is "any role" (roles added later included).
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(clippy::struct_excessive_bools, reason = "the registry's columns")]
pub struct IntentJson {
    pub name: String,
    pub description: String,
    pub from: Vec<String>,
    pub from_any: bool,
    pub to: Vec<String>,
    pub to_any: bool,
    pub opens_task: bool,
    pub needs_task_id: bool,
    pub expects_reply: Option<String>,
    pub required_checks: Vec<String>,
}

/// A rule's roles as a list, and whether it is "any role" (the list then names them all).
pub(super) fn listed(r: &Roles, all: &[String]) -> (Vec<String>, bool) {
    match r {
        Roles::Any => (all.to_vec(), true),
        Roles::Only(set) => (set.iter().cloned().collect(), false),
    }
}

pub fn run(ctx: &Ctx, _a: &RegistryArgs) -> Result<Report> {
    let reg = match Workspace::open(&ctx.root_spec()) {
        Ok(ws) => ws.registry,
        Err(e) if e.kind == crate::error::Kind::Usage => Registry::builtin(),
        Err(e) => return Err(e),
    };
    let roles: Vec<String> = reg.roles.iter().cloned().collect();
    let intents = reg
        .intents
        .values()
        .map(|i| {
            let (from, from_any) = listed(&i.from, &roles);
            let (to, to_any) = listed(&i.to, &roles);
            let j = IntentJson {
                name: i.name.clone(),
                description: i.description.clone(),
                from,
                from_any,
                to,
                to_any,
                opens_task: i.opens_task,
                needs_task_id: i.needs_task_id,
                expects_reply: i.expects_reply.clone(),
                required_checks: i.required_checks.clone(),
            };
            (i.name.clone(), j)
        })
        .collect();
    Ok(Report::new(reg.table(), RegistryJson { roles, intents }))
}
